//! One Thrift1 connection to the HBase gateway, and the r2d2 manager that pools them.
//!
//! The generated client is synchronous and strictly request/response on one
//! socket. After a transport or protocol error the socket may hold half a reply,
//! so the connection marks itself broken and the pool drops it instead of handing
//! it out again.

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use hbase_thrift::hbase::{
    BatchMutation, ColumnDescriptor, HbaseSyncClient, Mutation, THbaseSyncClient, TRowResult, TScan,
};
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{ReadHalf, TIoChannel, TTcpChannel, WriteHalf};

use crate::error::{Error, Result};

/// Buffer size for each direction of a connection. The crate's default (4 KiB)
/// splits a 1,000-row scan page into hundreds of reads.
const BUFFER_BYTES: usize = 256 * 1024;

/// A connection idle longer than this is pinged before use: the gateway closes
/// connections idle for 60 s (`hbase.thrift.server.socket.read.timeout`).
const VALIDATE_AFTER_IDLE: Duration = Duration::from_secs(20);

type Input = TBinaryInputProtocol<BufReader<ReadHalf<TTcpChannel>>>;
type Output = TBinaryOutputProtocol<BufWriter<WriteHalf<TTcpChannel>>>;

/// One cell column: family and qualifier joined by `:`, as Thrift1 names them.
pub type Column = Vec<u8>;

/// A row as read: its key and the cells asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row key.
    pub key: Vec<u8>,
    /// Cell values by column (`cf:q`).
    pub cells: BTreeMap<Column, Vec<u8>>,
}

impl Row {
    /// The value of `column`, if the row has it.
    pub fn value(&self, column: &[u8]) -> Option<&[u8]> {
        self.cells.get(column).map(Vec::as_slice)
    }

    fn from_thrift(result: TRowResult) -> Row {
        let cells = result
            .columns
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(column, cell)| cell.value.map(|value| (column, value)))
            .collect();
        Row { key: result.row.unwrap_or_default(), cells }
    }
}

/// What to scan: `[start, stop)`, at most `limit` rows, fetched `page_size` at a time.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    /// First row key, inclusive.
    pub start: Vec<u8>,
    /// Last row key, exclusive; `None` scans to the end of the table.
    pub stop: Option<Vec<u8>>,
    /// The most rows to return.
    pub limit: usize,
    /// Rows fetched per round trip (also the scanner's server-side caching).
    pub page_size: usize,
    /// Columns to return; empty returns every column.
    pub columns: Vec<Column>,
    /// Whether the region server keeps the blocks this scan reads in its block
    /// cache. Online reads do (what they read is likely read again); a batch
    /// pass over every product does not, so it cannot evict the readers' blocks
    /// (HBase's advice for MapReduce-style scans: `Scan.setCacheBlocks(false)`).
    pub cache_blocks: bool,
}

/// A change to one row: cells to put, or the whole row to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowMutation {
    /// Writes these cells (column, value) into the row.
    Put {
        /// The row key.
        key: Vec<u8>,
        /// The cells to write.
        cells: Vec<(Column, Vec<u8>)>,
    },
    /// Deletes every cell of the row's family.
    Delete {
        /// The row key.
        key: Vec<u8>,
        /// The family to clear (`cf`).
        family: Column,
    },
}

/// A pooled Thrift1 connection.
pub struct Connection {
    client: HbaseSyncClient<Input, Output>,
    /// A handle on the client's socket, to shorten its timeouts to a caller's deadline.
    socket: TcpStream,
    /// The longest a socket read or write may block.
    io_timeout: Duration,
    /// The socket timeout set now.
    applied_timeout: Duration,
    /// When the caller of the current operation stops waiting, if it said.
    deadline: Option<Instant>,
    broken: bool,
    last_used: Instant,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("broken", &self.broken).finish_non_exhaustive()
    }
}

/// Maps a Thrift error onto the data layer's error, and says whether the
/// connection is still in step with the server.
fn classify(error: thrift::Error) -> (Error, bool) {
    match error {
        thrift::Error::Transport(error) => (Error::Unavailable(format!("thrift transport: {error}")), true),
        thrift::Error::Protocol(error) => (Error::Unavailable(format!("thrift protocol: {error}")), true),
        thrift::Error::Application(error) => (Error::Hbase(format!("gateway application error: {error}")), false),
        thrift::Error::User(error) => {
            if let Some(io) = error.downcast_ref::<hbase_thrift::hbase::IOError>() {
                let message = io.message.clone().unwrap_or_default();
                let first_line = message.lines().next().unwrap_or_default().to_owned();
                if io.can_retry == Some(true) || looks_transient(&message) {
                    (Error::Unavailable(first_line), false)
                } else if message.contains("TableNotFoundException") {
                    (Error::NotFound(format!("table ({first_line})")), false)
                } else {
                    (Error::Hbase(first_line), false)
                }
            } else if let Some(argument) = error.downcast_ref::<hbase_thrift::hbase::IllegalArgument>() {
                (Error::Hbase(format!("illegal argument: {}", argument.message.clone().unwrap_or_default())), false)
            } else if let Some(exists) = error.downcast_ref::<hbase_thrift::hbase::AlreadyExists>() {
                (Error::Conflict(format!("already exists: {}", exists.message.clone().unwrap_or_default())), false)
            } else {
                (Error::Hbase(error.to_string()), false)
            }
        }
    }
}

/// HBase reports a region server or master that is starting, moving or gone as a
/// plain IOError; these pass once the cluster settles, so they count as unavailable.
fn looks_transient(message: &str) -> bool {
    [
        "RetriesExhausted",
        "ConnectException",
        "NotServingRegion",
        "RegionMoved",
        "RegionOpening",
        "ServerNotRunning",
        "PleaseHoldException",
        "CallTimeoutException",
        "SocketTimeoutException",
        "MasterNotRunning",
        "ConnectionClosing",
    ]
    .iter()
    .any(|marker| message.contains(marker))
}

impl Connection {
    /// Opens a connection to the first address of `address` that answers.
    pub fn open(address: &str, connect_timeout: Duration, io_timeout: Duration) -> Result<Connection> {
        let addresses: Vec<SocketAddr> = address
            .to_socket_addrs()
            .map_err(|error| Error::Unavailable(format!("cannot resolve {address}: {error}")))?
            .collect();
        let mut last_error = Error::Unavailable(format!("{address} resolves to no address"));
        for socket_address in addresses {
            match TcpStream::connect_timeout(&socket_address, connect_timeout) {
                Ok(stream) => return Connection::from_stream(stream, io_timeout),
                Err(error) => last_error = Error::Unavailable(format!("cannot connect to {socket_address}: {error}")),
            }
        }
        Err(last_error)
    }

    fn from_stream(stream: TcpStream, io_timeout: Duration) -> Result<Connection> {
        let setup = |error: std::io::Error| Error::Unavailable(format!("cannot set up socket: {error}"));
        // Requests are small and strictly alternate with replies, so Nagle's
        // algorithm would only add a delayed-ACK wait to every call.
        stream.set_nodelay(true).map_err(setup)?;
        stream.set_read_timeout(Some(io_timeout)).map_err(setup)?;
        stream.set_write_timeout(Some(io_timeout)).map_err(setup)?;
        let socket = stream.try_clone().map_err(setup)?;
        let (read_half, write_half) = TTcpChannel::with_stream(stream)
            .split()
            .map_err(|error| Error::Unavailable(format!("cannot split socket: {error}")))?;
        let input = TBinaryInputProtocol::new(BufReader::with_capacity(BUFFER_BYTES, read_half), true);
        let output = TBinaryOutputProtocol::new(BufWriter::with_capacity(BUFFER_BYTES, write_half), true);
        Ok(Connection {
            client: HbaseSyncClient::new(input, output),
            socket,
            io_timeout,
            applied_timeout: io_timeout,
            deadline: None,
            broken: false,
            last_used: Instant::now(),
        })
    }

    /// Whether a transport error left this connection out of step with the server.
    /// (The pool reads the flag itself; this is for the tests that break one.)
    #[cfg(feature = "test-support")]
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Bounds every call from now on by `deadline` as well as by the socket
    /// timeout: a call is not started after it, and a socket read or write
    /// blocks no longer than until it. `None` leaves only the socket timeout.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Shortens the socket timeouts to what is left before the deadline; an
    /// error when nothing is left.
    fn apply_deadline(&mut self) -> Result<()> {
        let wanted = match self.deadline {
            None => self.io_timeout,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Unavailable("the caller's deadline passed".to_owned()));
                }
                left.min(self.io_timeout)
            }
        };
        if wanted != self.applied_timeout {
            let applied =
                self.socket.set_read_timeout(Some(wanted)).and_then(|()| self.socket.set_write_timeout(Some(wanted)));
            if let Err(error) = applied {
                self.broken = true;
                return Err(Error::Unavailable(format!("cannot set the socket timeout: {error}")));
            }
            self.applied_timeout = wanted;
        }
        Ok(())
    }

    /// Runs one Thrift call, recording its latency and outcome, and marking the
    /// connection broken when the error leaves the socket in an unknown state.
    fn call<T>(
        &mut self,
        operation: &'static str,
        request: impl FnOnce(&mut HbaseSyncClient<Input, Output>) -> thrift::Result<T>,
    ) -> Result<T> {
        self.apply_deadline()?;
        let started = Instant::now();
        let outcome = request(&mut self.client);
        self.last_used = Instant::now();
        metrics::histogram!(crate::telemetry::HBASE_CALL_SECONDS, "op" => operation)
            .record(started.elapsed().as_secs_f64());
        outcome.map_err(|error| {
            let (error, broken) = classify(error);
            self.broken |= broken;
            let kind = match &error {
                Error::Unavailable(_) => "unavailable",
                Error::NotFound(_) => "not_found",
                _ => "failed",
            };
            metrics::counter!(crate::telemetry::HBASE_CALL_ERRORS, "op" => operation, "kind" => kind).increment(1);
            error
        })
    }

    /// A call the gateway answers without touching HBase: proves the socket is alive.
    pub fn ping(&mut self) -> Result<()> {
        self.call("ping", |client| client.get_thrift_server_type()).map(drop)
    }

    /// The names of every table (this reaches the HBase master, so it also proves HBase is up).
    pub fn table_names(&mut self) -> Result<Vec<String>> {
        let names = self.call("table_names", |client| client.get_table_names())?;
        Ok(names.into_iter().map(|name| String::from_utf8_lossy(&name).into_owned()).collect())
    }

    /// Creates `table` with one column family, every descriptor field set explicitly.
    pub fn create_table(&mut self, table: &str, family: &str) -> Result<()> {
        // Never ColumnDescriptor::default(): the gateway rejects its zeroed fields.
        let descriptor = ColumnDescriptor {
            name: Some(format!("{family}:").into_bytes()),
            max_versions: Some(1),
            compression: Some("NONE".to_owned()),
            in_memory: Some(false),
            bloom_filter_type: Some("ROW".to_owned()),
            bloom_filter_vector_size: Some(0),
            bloom_filter_nb_hashes: Some(0),
            block_cache_enabled: Some(true),
            time_to_live: Some(i32::MAX),
        };
        self.call("create_table", |client| client.create_table(table.as_bytes().to_vec(), vec![descriptor]))
    }

    /// Disables (unless already disabled) and deletes `table`. A drop cut short
    /// between the two steps leaves a disabled table, which a retry must finish.
    pub fn drop_table(&mut self, table: &str) -> Result<()> {
        if self.call("is_table_enabled", |client| client.is_table_enabled(table.as_bytes().to_vec()))? {
            self.call("disable_table", |client| client.disable_table(table.as_bytes().to_vec()))?;
        }
        self.call("delete_table", |client| client.delete_table(table.as_bytes().to_vec()))
    }

    /// Reads `keys`, returning only the rows that exist, in no particular order:
    /// Thrift1 drops missing rows, so callers match results by key, never by position.
    pub fn get_rows(&mut self, table: &str, keys: &[Vec<u8>], columns: &[Column]) -> Result<Vec<Row>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let results = self.call("get_rows", |client| {
            client.get_rows_with_columns(table.as_bytes().to_vec(), keys.to_vec(), columns.to_vec(), BTreeMap::new())
        })?;
        Ok(results.into_iter().map(Row::from_thrift).filter(|row| !row.cells.is_empty()).collect())
    }

    /// Scans `spec`, always closing the scanner, even when a page fails.
    pub fn scan(&mut self, table: &str, spec: &ScanSpec) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        self.scan_pages(table, spec, |page| {
            rows.extend(page);
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(rows)
    }

    /// Scans `spec` page by page, handing each page to `on_page` until it breaks,
    /// the limit is reached or the range ends. Memory holds one page at a time.
    pub fn scan_pages(
        &mut self,
        table: &str,
        spec: &ScanSpec,
        on_page: impl FnMut(Vec<Row>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        self.scan_pages_filtered(table, spec, None, on_page)
    }

    /// Scans `spec` like [`Connection::scan`] but returns only the row keys
    /// (each row's first cell, its value emptied by the region server): what
    /// counting rows costs without moving their values over the wire.
    pub fn scan_keys(&mut self, table: &str, spec: &ScanSpec) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        self.scan_pages_filtered(table, spec, Some("FirstKeyOnlyFilter() AND KeyOnlyFilter()"), |page| {
            keys.extend(page.into_iter().map(|row| row.key));
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(keys)
    }

    /// The regions of `table` as `(start key, end key)`, an empty key meaning
    /// the start or the end of the table, in no guaranteed order.
    pub fn table_regions(&mut self, table: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let regions = self.call("table_regions", |client| client.get_table_regions(table.as_bytes().to_vec()))?;
        Ok(regions
            .into_iter()
            .map(|region| (region.start_key.unwrap_or_default(), region.end_key.unwrap_or_default()))
            .collect())
    }

    fn scan_pages_filtered(
        &mut self,
        table: &str,
        spec: &ScanSpec,
        filter: Option<&str>,
        mut on_page: impl FnMut(Vec<Row>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        if spec.limit == 0 {
            return Ok(());
        }
        let page_size = spec.page_size.clamp(1, spec.limit);
        let caching = i32::try_from(page_size).unwrap_or(i32::MAX);
        // Every field explicit: TScan::default() sends timestamp 0 (which matches
        // no cell) and an empty filter string (which the server rejects).
        let scan = TScan {
            start_row: Some(spec.start.clone()),
            stop_row: spec.stop.clone(),
            timestamp: None,
            columns: (!spec.columns.is_empty()).then(|| spec.columns.clone()),
            caching: Some(caching),
            filter_string: filter.map(|filter| filter.as_bytes().to_vec()),
            batch_size: None,
            sort_columns: Some(false),
            reversed: Some(false),
            cache_blocks: Some(spec.cache_blocks),
        };
        let scanner = self.call("scanner_open", |client| {
            client.scanner_open_with_scan(table.as_bytes().to_vec(), scan, BTreeMap::new())
        })?;
        let outcome = self.drain_scanner(scanner, spec.limit, page_size, &mut on_page);
        // Close even after an error: an open scanner holds server memory until it
        // expires. A broken connection cannot carry the close, and the server
        // reaps the scanner by its lease.
        if !self.broken {
            let closed = self.call("scanner_close", |client| client.scanner_close(scanner));
            if outcome.is_ok() {
                closed?;
            }
        }
        outcome
    }

    fn drain_scanner(
        &mut self,
        scanner: i32,
        limit: usize,
        page_size: usize,
        on_page: &mut impl FnMut(Vec<Row>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        let mut remaining = limit;
        while remaining > 0 {
            let wanted = i32::try_from(page_size.min(remaining)).unwrap_or(i32::MAX);
            let page = self.call("scanner_get_list", |client| client.scanner_get_list(scanner, wanted))?;
            if page.is_empty() {
                break;
            }
            let exhausted = page.len() < page_size.min(remaining);
            remaining = remaining.saturating_sub(page.len());
            let rows = page.into_iter().map(Row::from_thrift).collect();
            if on_page(rows).is_break() || exhausted {
                break;
            }
        }
        Ok(())
    }

    /// Applies `mutations` to `table` in one round trip. Not atomic across rows,
    /// and HBase applies a batch's puts before its deletes: never mix both on one row.
    pub fn mutate_rows(&mut self, table: &str, mutations: Vec<RowMutation>) -> Result<()> {
        if mutations.is_empty() {
            return Ok(());
        }
        let batches = mutations.into_iter().map(to_batch).collect();
        self.call("mutate_rows", |client| client.mutate_rows(table.as_bytes().to_vec(), batches, BTreeMap::new()))
    }

    /// Writes `value` into `column` of `key` only if the column currently holds
    /// `expected` (`None`: only if it is absent). Returns whether it wrote.
    pub fn check_and_put(
        &mut self,
        table: &str,
        key: &[u8],
        column: &[u8],
        expected: Option<&[u8]>,
        value: Vec<u8>,
    ) -> Result<bool> {
        let mutation = put_mutation(column.to_vec(), value);
        self.call("check_and_put", |client| {
            client.check_and_put(
                table.as_bytes().to_vec(),
                key.to_vec(),
                column.to_vec(),
                expected.map(<[u8]>::to_vec).unwrap_or_default(),
                mutation,
                BTreeMap::new(),
            )
        })
    }

    /// Adds `delta` to the 8-byte counter in `column` of `key`, returning the new value.
    /// No table of ours holds a counter; the tests check the gateway's increment.
    #[cfg(feature = "test-support")]
    pub fn atomic_increment(&mut self, table: &str, key: &[u8], column: &[u8], delta: i64) -> Result<i64> {
        self.call("atomic_increment", |client| {
            client.atomic_increment(table.as_bytes().to_vec(), key.to_vec(), column.to_vec(), delta)
        })
    }
}

fn put_mutation(column: Column, value: Vec<u8>) -> Mutation {
    // Never Mutation::default(): it sets writeToWAL to false, which would lose
    // the write if the region server died before a flush.
    Mutation { is_delete: Some(false), column: Some(column), value: Some(value), write_to_w_a_l: Some(true) }
}

fn to_batch(mutation: RowMutation) -> BatchMutation {
    match mutation {
        RowMutation::Put { key, cells } => BatchMutation {
            row: Some(key),
            mutations: Some(cells.into_iter().map(|(column, value)| put_mutation(column, value)).collect()),
        },
        RowMutation::Delete { key, family } => BatchMutation {
            row: Some(key),
            mutations: Some(vec![Mutation {
                is_delete: Some(true),
                column: Some(family),
                value: None,
                write_to_w_a_l: Some(true),
            }]),
        },
    }
}

/// Opens, validates and retires pooled connections for r2d2.
#[derive(Debug, Clone)]
pub struct ConnectionManager {
    /// `host:port` of the Thrift1 gateway.
    pub address: String,
    /// How long to wait for the TCP handshake.
    pub connect_timeout: Duration,
    /// How long one read or write on the socket may block.
    pub io_timeout: Duration,
}

impl r2d2::ManageConnection for ConnectionManager {
    type Connection = Connection;
    type Error = Error;

    fn connect(&self) -> Result<Connection> {
        Connection::open(&self.address, self.connect_timeout, self.io_timeout)
    }

    /// Pings only connections idle long enough for the gateway to have closed
    /// them; a busy connection is used without an extra round trip.
    fn is_valid(&self, connection: &mut Connection) -> Result<()> {
        // The previous user's deadline does not bind the validation ping.
        connection.set_deadline(None);
        if connection.last_used.elapsed() >= VALIDATE_AFTER_IDLE {
            connection.ping()?;
        }
        Ok(())
    }

    fn has_broken(&self, connection: &mut Connection) -> bool {
        connection.broken
    }
}
