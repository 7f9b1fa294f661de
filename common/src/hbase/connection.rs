//! The Thrift1 gateway's operations on a pooled connection.
//!
//! The connection itself (socket, deadlines, broken flag, metrics, pooling) is
//! `gateway.rs`'s, shared with the Thrift2 client; this file says how the
//! Thrift1 client is built and pinged, how its exceptions map onto the data
//! layer's errors, and what the Thrift1 operations send.

use std::collections::BTreeMap;

use hbase_thrift::hbase::{BatchMutation, HbaseSyncClient, Mutation, THbaseSyncClient, TRegionInfo, TRowResult, TScan};

use super::gateway::{io_error, AnswerRow, GatewayClient, GatewayConnection, Input, Output, KEYS_ONLY_FILTER};
use super::COLUMN_VALUE;
use crate::error::{Error, Result};

/// The generated Thrift1 client over a pooled socket.
pub type Thrift1Client = HbaseSyncClient<Input, Output>;

/// A pooled Thrift1 connection.
pub type Connection = GatewayConnection<Thrift1Client>;

impl GatewayClient for Thrift1Client {
    const GATEWAY: &'static str = "Thrift1";

    fn from_protocols(input: Input, output: Output) -> Self {
        HbaseSyncClient::new(input, output)
    }

    fn ping(&mut self) -> thrift::Result<()> {
        self.get_thrift_server_type().map(drop)
    }

    fn warm_up_read(&mut self, table: &str, row: &[u8]) -> thrift::Result<()> {
        self.get_row(table.as_bytes().to_vec(), row.to_vec(), BTreeMap::new()).map(drop)
    }

    fn declared_error(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Error {
        if let Some(io) = error.downcast_ref::<hbase_thrift::hbase::IOError>() {
            io_error(io.message.as_deref().unwrap_or_default(), io.can_retry == Some(true))
        } else if let Some(argument) = error.downcast_ref::<hbase_thrift::hbase::IllegalArgument>() {
            Error::Hbase(format!("illegal argument: {}", argument.message.clone().unwrap_or_default()))
        } else if let Some(exists) = error.downcast_ref::<hbase_thrift::hbase::AlreadyExists>() {
            Error::Conflict(format!("already exists: {}", exists.message.clone().unwrap_or_default()))
        } else {
            Error::Hbase(error.to_string())
        }
    }
}

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

impl AnswerRow for TRowResult {}
impl AnswerRow for TRegionInfo {}

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

impl ScanSpec {
    /// One page of a batch pass (a listing, a walk, a count) over `[start,
    /// stop)`: at most `rows` rows (at least one) in one round trip, the value
    /// column, and blocks kept out of the cache, so a pass over every product
    /// cannot evict the readers' blocks.
    pub fn batch_page(start: Vec<u8>, stop: Option<Vec<u8>>, rows: usize) -> ScanSpec {
        let rows = rows.max(1);
        ScanSpec {
            start,
            stop,
            limit: rows,
            page_size: rows,
            columns: vec![COLUMN_VALUE.to_vec()],
            cache_blocks: false,
        }
    }
}

/// One region of a table, as the master assigned it: the rows of `[start_key, end_key)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// First row key of the region, inclusive; empty for the table's first region.
    pub start_key: Vec<u8>,
    /// Row key where the next region starts; empty for the table's last region.
    pub end_key: Vec<u8>,
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

impl Connection {
    /// The names of every table (this reaches the HBase master, so it also proves HBase is up).
    pub fn table_names(&mut self) -> Result<Vec<String>> {
        let names = self.call("table_names", "", |client| client.get_table_names())?;
        Ok(names.into_iter().map(|name| String::from_utf8_lossy(&name).into_owned()).collect())
    }

    /// Disables (unless already disabled) and deletes `table`. A drop cut short
    /// between the two steps leaves a disabled table, which a retry must finish.
    pub fn drop_table(&mut self, table: &str) -> Result<()> {
        if self.call("is_table_enabled", table, |client| client.is_table_enabled(table.as_bytes().to_vec()))? {
            self.call("disable_table", table, |client| client.disable_table(table.as_bytes().to_vec()))?;
        }
        self.call("delete_table", table, |client| client.delete_table(table.as_bytes().to_vec()))
    }

    /// The regions of `table`, in key order (one for a table never split),
    /// each once: Thrift1 lists every replica of a region as a region of
    /// its own, with the same keys.
    pub fn table_regions(&mut self, table: &str) -> Result<Vec<Region>> {
        let regions =
            self.call("table_regions", table, |client| client.get_table_regions(table.as_bytes().to_vec()))?;
        let mut regions: Vec<Region> = regions
            .into_iter()
            .map(|region| Region {
                start_key: region.start_key.unwrap_or_default(),
                end_key: region.end_key.unwrap_or_default(),
            })
            .collect();
        regions.sort_by(|left, right| left.start_key.cmp(&right.start_key));
        regions.dedup();
        Ok(regions)
    }

    /// Reads `keys`, returning only the rows that exist, in no particular order:
    /// Thrift1 drops missing rows, so callers match results by key, never by position.
    pub fn get_rows(&mut self, table: &str, keys: &[Vec<u8>], columns: &[Column]) -> Result<Vec<Row>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let results = self.call("get_rows", table, |client| {
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

    /// Scans `spec` like [`Connection::scan`], returning only the rows that
    /// pass `filter` (a filter in HBase's filter language, evaluated by the
    /// region server, so rows it drops never cross the wire).
    pub fn scan_with_filter(&mut self, table: &str, spec: &ScanSpec, filter: &str) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        self.scan_pages_filtered(table, spec, Some(filter), |page| {
            rows.extend(page);
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(rows)
    }

    /// Scans `spec` like [`Connection::scan`] but returns only the row keys
    /// (each row's first cell, its value emptied by the region server): what
    /// counting rows costs without moving their values over the wire.
    pub fn scan_keys(&mut self, table: &str, spec: &ScanSpec) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        self.scan_pages_filtered(table, spec, Some(KEYS_ONLY_FILTER), |page| {
            keys.extend(page.into_iter().map(|row| row.key));
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(keys)
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
        let scanner = self.call("scanner_open", table, |client| {
            client.scanner_open_with_scan(table.as_bytes().to_vec(), scan, BTreeMap::new())
        })?;
        let outcome = self.drain_scanner(table, scanner, spec.limit, page_size, &mut on_page);
        // Close even after an error: an open scanner holds server memory until it
        // expires. A broken connection cannot carry the close, and the server
        // reaps the scanner by its lease.
        if !self.is_broken() {
            let closed = self.call("scanner_close", table, |client| client.scanner_close(scanner));
            if outcome.is_ok() {
                closed?;
            }
        }
        outcome
    }

    fn drain_scanner(
        &mut self,
        table: &str,
        scanner: i32,
        limit: usize,
        page_size: usize,
        on_page: &mut impl FnMut(Vec<Row>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        let mut remaining = limit;
        while remaining > 0 {
            let wanted = i32::try_from(page_size.min(remaining)).unwrap_or(i32::MAX);
            let page = self.call("scanner_get_list", table, |client| client.scanner_get_list(scanner, wanted))?;
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
        self.call("mutate_rows", table, |client| {
            client.mutate_rows(table.as_bytes().to_vec(), batches, BTreeMap::new())
        })
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
        self.call("check_and_put", table, |client| {
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

    /// Writes `cells` into row `key` stamped `timestamp` (milliseconds) instead
    /// of the server's clock. Our services never choose a cell's time; the
    /// tests of time-range scans write cells at times they know.
    #[cfg(feature = "test-support")]
    pub fn put_at(&mut self, table: &str, key: &[u8], cells: Vec<(Column, Vec<u8>)>, timestamp: i64) -> Result<()> {
        let mutations = cells.into_iter().map(|(column, value)| put_mutation(column, value)).collect();
        self.call("put_at", table, |client| {
            client.mutate_row_ts(table.as_bytes().to_vec(), key.to_vec(), mutations, timestamp, BTreeMap::new())
        })
    }

    /// Adds `delta` to the 8-byte counter in `column` of `key`, returning the new value.
    /// No table of ours holds a counter; the tests check the gateway's increment.
    #[cfg(feature = "test-support")]
    pub fn atomic_increment(&mut self, table: &str, key: &[u8], column: &[u8], delta: i64) -> Result<i64> {
        self.call("atomic_increment", table, |client| {
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
