//! What a connection to either Thrift gateway shares, whatever its IDL: the
//! socket, its timeouts cut to the caller's deadline, the broken flag, the
//! metrics of every call, and the gateway it was opened to with what the
//! pool knows of that gateway's health (`gateways.rs` keeps the set and
//! pools the connections).
//!
//! The Thrift1 client (`connection.rs`) and the Thrift2 client (`thrift2/`)
//! are this one connection around a different generated client; each says
//! through [`GatewayClient`] how it is built, how it is pinged and how its
//! declared exceptions map onto the data layer's errors.
//!
//! A generated client is synchronous and strictly request/response on one
//! socket. After a transport or protocol error the socket may hold half a
//! reply, so the connection marks itself broken and the pool drops it instead
//! of handing it out again.

use std::io::{BufReader, BufWriter};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{ReadHalf, TIoChannel, TTcpChannel, WriteHalf};

use crate::error::{Error, Result};

/// Buffer size for each direction of a connection. The crate's default (4 KiB)
/// splits a 1,000-row scan page into hundreds of reads.
const BUFFER_BYTES: usize = 256 * 1024;

/// The server-side filter of a keys-only scan, in HBase's filter language, for
/// both gateways: the first cell of each row, without its value.
pub const KEYS_ONLY_FILTER: &str = "FirstKeyOnlyFilter() AND KeyOnlyFilter()";

/// What a gateway reads to warm up ([`GatewayConnection::warm_up`]): this
/// row of the catalogue of every region, then of each table its pool has
/// called ([`TablesCalled`]).
const CATALOGUE_TABLE: &str = "hbase:meta";
const WARM_UP_ROW: &[u8] = b"reviews gateway warm-up";

/// The tables a pool has called, the first [`TablesCalled::MOST`] of them:
/// what a gateway that comes back reads before callers are sent to it.
#[derive(Debug, Default)]
pub(super) struct TablesCalled {
    names: RwLock<Vec<String>>,
}

impl TablesCalled {
    /// A service reads a handful of tables; a bound keeps a tool that walks
    /// many (or a test suite's prefixes) from making every warm-up long.
    const MOST: usize = 16;

    /// Notes a call on `table` (none for a call on no table). After the
    /// first calls this only reads: no lock is held for writing.
    fn note(&self, table: &str) {
        let known = |names: &Vec<String>| names.iter().any(|name| name == table);
        if table.is_empty() || known(&self.names.read().unwrap_or_else(PoisonError::into_inner)) {
            return;
        }
        let mut names = self.names.write().unwrap_or_else(PoisonError::into_inner);
        if names.len() < Self::MOST && !known(&names) {
            names.push(table.to_owned());
        }
    }

    /// The tables noted so far.
    fn names(&self) -> Vec<String> {
        self.names.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The protocol both gateways speak (as `hbasectl` starts them): binary, over
/// a buffered, unframed socket.
pub type Input = TBinaryInputProtocol<BufReader<ReadHalf<TTcpChannel>>>;
/// The writing half of [`Input`].
pub type Output = TBinaryOutputProtocol<BufWriter<WriteHalf<TTcpChannel>>>;

/// What differs between the generated clients of the two gateways.
pub trait GatewayClient: Send + 'static {
    /// The gateway's name in logs and errors (`Thrift1`, `Thrift2`).
    const GATEWAY: &'static str;

    /// Wraps the two protocol halves of a fresh socket.
    fn from_protocols(input: Input, output: Output) -> Self;

    /// A call the gateway answers without touching HBase.
    fn ping(&mut self) -> thrift::Result<()>;

    /// Reads `row` of `table` the ways the pool's callers read (a row
    /// missing is no error): the gateway's HBase client locates the row's
    /// region, connects to its server and loads the code of those reads.
    fn warm_up_read(&mut self, table: &str, row: &[u8]) -> thrift::Result<()>;

    /// Maps one of the IDL's declared exceptions (a `thrift::Error::User`)
    /// onto the data layer's error.
    fn declared_error(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Error;
}

/// What a trace says of a call's answer: how many rows (keys, regions,
/// existence flags) it carried, and whether a secondary region replica gave
/// any of them. Answers that are neither say nothing.
pub trait Answer {
    /// The rows the answer carried.
    fn rows(&self) -> Option<usize> {
        None
    }

    /// Whether a secondary region replica answered (timeline reads only).
    fn stale(&self) -> Option<bool> {
        None
    }
}

/// One row (key, region, flag) of a list answer.
pub trait AnswerRow {
    /// Whether a secondary region replica gave this row (timeline reads only).
    fn stale(&self) -> Option<bool> {
        None
    }
}

impl<R: AnswerRow> Answer for Vec<R> {
    fn rows(&self) -> Option<usize> {
        Some(self.len())
    }

    fn stale(&self) -> Option<bool> {
        self.iter().filter_map(AnswerRow::stale).reduce(|one, other| one || other)
    }
}

impl Answer for () {}
impl Answer for bool {}
impl Answer for i32 {}
impl Answer for i64 {}
impl AnswerRow for bool {}
impl AnswerRow for Vec<u8> {}

/// One pooled connection to a Thrift gateway, around its generated client `C`.
pub struct GatewayConnection<C> {
    client: C,
    /// A handle on the client's socket, to shorten its timeouts to a caller's deadline.
    socket: TcpStream,
    /// The longest a socket read or write may block.
    io_timeout: Duration,
    /// The socket timeout set now.
    applied_timeout: Duration,
    /// When the caller of the current operation stops waiting, if it said.
    deadline: Option<Instant>,
    broken: bool,
    /// A transport error said the gateway itself has gone (refused, reset
    /// or closed the socket), not merely that it was slow.
    gateway_gone: bool,
    last_used: Instant,
    /// The gateway this connection was opened to, when a pool opened it.
    origin: Option<Origin>,
}

impl<C: GatewayClient> std::fmt::Debug for GatewayConnection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConnection")
            .field("gateway", &C::GATEWAY)
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

/// What a pool knows of one gateway (`gateways.rs` keeps one per address),
/// shared with every connection opened to it.
#[derive(Debug)]
pub(super) struct GatewayHealth {
    pub(super) address: String,
    /// Bumped each time the gateway is taken out: a connection opened
    /// under an older epoch is retired at its next checkout.
    pub(super) epoch: AtomicU64,
    /// Taken out, and not yet answering a probe.
    pub(super) down: AtomicBool,
    /// Whether a probe thread watches it now.
    pub(super) probing: AtomicBool,
    /// Pooled connections open to it now.
    pub(super) open_connections: AtomicUsize,
    /// The tables its pool has called, shared by every gateway of the pool.
    pub(super) tables_called: Arc<TablesCalled>,
}

/// Where a pooled connection was opened: its gateway and that gateway's
/// epoch then. Dropping it (with its connection) counts the connection out.
#[derive(Debug)]
pub(super) struct Origin {
    pub(super) gateway: Arc<GatewayHealth>,
    pub(super) epoch: u64,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.gateway.open_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a failed call says of its connection and of the gateway behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    /// The connection is still in step with the server.
    None,
    /// The socket may hold half a reply: the connection must go.
    Connection,
    /// The gateway refused, reset or closed the socket: it has gone (or
    /// restarted), and every connection to it with it.
    Gateway,
}

/// Maps a Thrift error onto the data layer's error, and says what it did to
/// the connection. A timeout breaks the connection but says nothing of the
/// gateway: a slow answer is usually HBase's.
fn classify<C: GatewayClient>(error: thrift::Error) -> (Error, Damage) {
    match error {
        thrift::Error::Transport(error) => {
            let gone = match error.kind {
                thrift::TransportErrorKind::NotOpen | thrift::TransportErrorKind::EndOfFile => true,
                // Thrift folds the other socket errors into Unknown, keeping
                // only the message: a write to a closed socket is one.
                thrift::TransportErrorKind::Unknown => {
                    let message = error.message.to_ascii_lowercase();
                    ["broken pipe", "connection reset", "connection aborted"].iter().any(|sign| message.contains(sign))
                }
                _ => false,
            };
            let damage = if gone { Damage::Gateway } else { Damage::Connection };
            (Error::Unavailable(format!("{} transport: {error}", C::GATEWAY)), damage)
        }
        thrift::Error::Protocol(error) => {
            (Error::Unavailable(format!("{} protocol: {error}", C::GATEWAY)), Damage::Connection)
        }
        thrift::Error::Application(error) => {
            (Error::Hbase(format!("{} gateway application error: {error}", C::GATEWAY)), Damage::None)
        }
        thrift::Error::User(error) => (C::declared_error(error.as_ref()), Damage::None),
    }
}

/// Maps the message of a gateway's IOError (both IDLs have one, with a
/// `canRetry` flag) onto the data layer's error: transient failures are
/// [`Error::Unavailable`], a missing table [`Error::NotFound`], an existing
/// one [`Error::Conflict`], the rest [`Error::Hbase`].
pub fn io_error(message: &str, can_retry: bool) -> Error {
    let first_line = message.lines().next().unwrap_or_default().to_owned();
    if can_retry || looks_transient(message) {
        Error::Unavailable(first_line)
    } else if message.contains("TableNotFoundException") {
        Error::NotFound(format!("table ({first_line})"))
    } else if message.contains("TableExistsException") {
        Error::Conflict(format!("already exists: {first_line}"))
    } else {
        Error::Hbase(first_line)
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

impl<C: GatewayClient> GatewayConnection<C> {
    /// Opens a connection to the first address of `address` that answers.
    pub fn open(address: &str, connect_timeout: Duration, io_timeout: Duration) -> Result<Self> {
        let addresses: Vec<SocketAddr> = address
            .to_socket_addrs()
            .map_err(|error| Error::Unavailable(format!("cannot resolve {address}: {error}")))?
            .collect();
        let mut last_error = Error::Unavailable(format!("{address} resolves to no address"));
        for socket_address in addresses {
            match TcpStream::connect_timeout(&socket_address, connect_timeout) {
                Ok(stream) => return Self::from_stream(stream, io_timeout),
                Err(error) => {
                    last_error = Error::Unavailable(format!(
                        "cannot connect to the {} gateway at {socket_address}: {error}",
                        C::GATEWAY
                    ))
                }
            }
        }
        Err(last_error)
    }

    fn from_stream(stream: TcpStream, io_timeout: Duration) -> Result<Self> {
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
        Ok(GatewayConnection {
            client: C::from_protocols(input, output),
            socket,
            io_timeout,
            applied_timeout: io_timeout,
            deadline: None,
            broken: false,
            gateway_gone: false,
            last_used: Instant::now(),
            origin: None,
        })
    }

    /// Records which gateway (and epoch of it) the pool opened this connection to.
    pub(super) fn set_origin(&mut self, origin: Origin) {
        self.origin = Some(origin);
    }

    /// The gateway this connection was opened to, when a pool opened it.
    pub(super) fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// How long since the connection's last call.
    pub(super) fn idle(&self) -> Duration {
        self.last_used.elapsed()
    }

    /// Whether a failed call showed that the gateway itself has gone.
    pub(super) fn gateway_gone(&self) -> bool {
        self.gateway_gone
    }

    /// Whether a transport error left this connection out of step with the
    /// server (the pool then drops it; a scan does not send its close on it).
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

    /// Runs one Thrift call on `table` (empty for a call on no table),
    /// recording its latency and outcome under the `op` label `operation`,
    /// and marking the connection broken when the error leaves the socket in
    /// an unknown state. When spans are exported, the call is a client span
    /// under the caller's (operation, table, gateway, rows, stale replica).
    pub fn call<T: Answer>(
        &mut self,
        operation: &'static str,
        table: &str,
        request: impl FnOnce(&mut C) -> thrift::Result<T>,
    ) -> Result<T> {
        let span = self.call_span(operation, table);
        let _entered = span.enter();
        if let Some(origin) = &self.origin {
            origin.gateway.tables_called.note(table);
        }
        self.apply_deadline()?;
        let started = Instant::now();
        let outcome = request(&mut self.client);
        self.last_used = Instant::now();
        metrics::histogram!(crate::telemetry::HBASE_CALL_SECONDS, "op" => operation)
            .record(started.elapsed().as_secs_f64());
        // Only for a span that exists: a Thrift2 answer's staleness is a walk of its rows.
        if let (Ok(answer), false) = (&outcome, span.is_disabled()) {
            if let Some(rows) = answer.rows() {
                // As a signed integer: an unsigned one reaches a trace store as text.
                span.record("hbase.rows", i64::try_from(rows).unwrap_or(i64::MAX));
            }
            if let Some(stale) = answer.stale() {
                span.record("hbase.stale", stale);
            }
        }
        outcome.map_err(|error| {
            let (error, damage) = classify::<C>(error);
            self.broken |= damage != Damage::None;
            self.gateway_gone |= damage == Damage::Gateway;
            let kind = match &error {
                Error::Unavailable(_) => "unavailable",
                Error::NotFound(_) => "not_found",
                _ => "failed",
            };
            metrics::counter!(crate::telemetry::HBASE_CALL_ERRORS, "op" => operation, "kind" => kind).increment(1);
            span.record("otel.status_code", "ERROR");
            span.record("error.type", kind);
            error
        })
    }

    /// The span of one call, or a disabled one when the caller's trace is
    /// not exported: then a call costs no span at all.
    fn call_span(&self, operation: &'static str, table: &str) -> tracing::Span {
        if !crate::traces::in_kept_trace() {
            return tracing::Span::none();
        }
        let gateway = self.origin.as_ref().map_or("", |origin| origin.gateway.address.as_str());
        tracing::info_span!(
            "hbase call",
            otel.name = %format_args!("{} {operation}", C::GATEWAY),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            db.system.name = "hbase",
            db.operation.name = operation,
            db.collection.name = table,
            hbase.gateway = gateway,
            hbase.rows = tracing::field::Empty,
            hbase.stale = tracing::field::Empty,
            error.type = tracing::field::Empty,
        )
    }

    /// A call the gateway answers without touching HBase: proves the socket is alive.
    pub fn ping(&mut self) -> Result<()> {
        self.call("ping", "", C::ping)
    }

    /// Makes the gateway's HBase client reach the cluster before callers
    /// are sent to it: it reads a row of `hbase:meta` (where every region is
    /// looked up), then one of each table in `tables_called`, the ways the
    /// pool's callers read. A gateway just (re)started has located no region,
    /// connected to no region server and loaded none of the code of those
    /// reads, and a ping does none of it: without this its first callers
    /// would wait for all of it, seconds on a loaded host. A declared HBase
    /// error is an answer (the gateway works; the cluster's trouble is
    /// every gateway's); a transport error or a timeout is not.
    pub(super) fn warm_up(&mut self, tables_called: &TablesCalled) -> Result<()> {
        let mut tables = vec![CATALOGUE_TABLE.to_owned()];
        tables.extend(tables_called.names().into_iter().filter(|name| name != CATALOGUE_TABLE));
        for table in &tables {
            match self.call("warm_up", table, |client| client.warm_up_read(table, WARM_UP_ROW)) {
                Err(error) if self.broken => return Err(error),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use thrift::{TransportError, TransportErrorKind};

    use super::*;
    use crate::hbase::connection::Thrift1Client;

    #[test]
    fn the_tables_called_are_noted_once_each_and_bounded() {
        let tables = TablesCalled::default();
        for table in ["comments", "", "rankings", "comments"] {
            tables.note(table);
        }
        assert_eq!(tables.names(), ["comments", "rankings"], "once each, in order, none for a call on no table");
        for number in 0..2 * TablesCalled::MOST {
            tables.note(&format!("table-{number}"));
        }
        let names = tables.names();
        assert_eq!(names.len(), TablesCalled::MOST);
        assert_eq!(names[..2], ["comments", "rankings"], "the first noted are kept");
    }

    fn damage_of(error: std::io::Error) -> Damage {
        classify::<Thrift1Client>(thrift::Error::from(error)).1
    }

    #[test]
    fn a_refused_reset_or_closed_socket_is_the_gateways_death_and_a_timeout_is_not() {
        use std::io::{Error as IoError, ErrorKind};
        for kind in
            [ErrorKind::ConnectionRefused, ErrorKind::ConnectionReset, ErrorKind::UnexpectedEof, ErrorKind::BrokenPipe]
        {
            assert_eq!(damage_of(IoError::new(kind, kind.to_string())), Damage::Gateway, "{kind:?}");
        }
        // A socket read timeout is WouldBlock on Linux: HBase was slow, the gateway may be fine.
        for kind in [ErrorKind::TimedOut, ErrorKind::WouldBlock] {
            assert_eq!(damage_of(IoError::new(kind, kind.to_string())), Damage::Connection, "{kind:?}");
        }
        let unknown =
            thrift::Error::Transport(TransportError::new(TransportErrorKind::Unknown, "Broken pipe (os error 32)"));
        assert_eq!(classify::<Thrift1Client>(unknown).1, Damage::Gateway);
    }
}
