//! The Thrift2 gateway: what it offers that Thrift1 does not, on a pool of
//! its own.
//!
//! Thrift1 mirrors an API HBase no longer has: its scans take no time range
//! and its table creation takes no split keys. Thrift2
//! (`org.apache.hadoop.hbase.thrift2.ThriftServer`, a separate gateway
//! process on its own port) mirrors today's `Table` and `Admin`, so three
//! operations go through it:
//!
//! - [`Hbase::range_scanner`]: a scan of `[start, stop)` with an optional
//!   cell time range `[min_ts, max_ts)`, without filling the block cache,
//!   returning rows with their cells' timestamps, a page at a time;
//! - [`Hbase::create_table_with_splits`]: a table created with its regions
//!   split at given keys and a row index in each data block, and the
//!   column-family settings of existing tables (`family_encodings`,
//!   `index_rows_in_blocks`), which Thrift1 can neither set nor read;
//! - `Hbase::rows_exist`: which of many rows exist (`existsAll`), with no
//!   value read and no block cached;
//! - `Hbase::scan_row_ranges`: the rows of many key ranges in one scan, the
//!   region server seeking from one range to the next (HBase's
//!   `MultiRowRangeFilter`, which Thrift1's filter language cannot name:
//!   Thrift2 takes it serialized, see [`multi_row_range_filter`]).
//!
//! Everything else stays on Thrift1. The Thrift2 pool opens connections
//! lazily, so a binary that never calls these does not need the gateway.
//!
//! The generated structs' `Default` fills every optional field with an empty
//! value (an empty filter string, an empty time range...), which the gateway
//! rejects ("Incorrect Filter String") or obeys to the letter: every struct
//! sent here is built field by field, with `None` for what is not meant.
//!
//! Here the scans and existence checks; in `admin` the table operations, in
//! `timeline` the reads a secondary region replica may answer.

#[allow(
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    dead_code,
    unused_imports,
    unused_extern_crates,
    non_camel_case_types,
    rustdoc::all
)]
#[rustfmt::skip]
mod generated;

mod admin;
mod timeline;

use std::ops::Range;

pub(crate) use admin::ROW_INDEX_NAME;
use generated::{
    TColumn, TConsistency, TGet, THBaseServiceSyncClient, TResult, TScan, TTHBaseServiceSyncClient, TTimeRange,
};

use super::gateway::{io_error, Answer, AnswerRow, GatewayClient, GatewayConnection, Input, Output, KEYS_ONLY_FILTER};
use super::{Hbase, Retry};
use crate::error::{Error, Result};

/// Each column family of a table with the name of its data-block encoding.
pub type FamilyEncodings = Vec<(String, String)>;

/// A get of `row`'s latest cells (of `columns`, or every one), read with
/// `consistency` (strong when `None`), every other field left out.
fn latest_get(
    row: Vec<u8>,
    columns: Option<Vec<TColumn>>,
    consistency: Option<TConsistency>,
    cache_blocks: bool,
) -> TGet {
    TGet {
        row,
        columns,
        timestamp: None,
        time_range: None,
        max_versions: Some(1),
        filter_string: None,
        attributes: None,
        authorizations: None,
        consistency,
        target_replica_id: None,
        cache_blocks: Some(cache_blocks),
        store_limit: None,
        store_offset: None,
        existence_only: None,
        filter_bytes: None,
    }
}

/// The generated Thrift2 client over a pooled socket.
pub type Thrift2Client = THBaseServiceSyncClient<Input, Output>;

/// A pooled Thrift2 connection.
pub type Thrift2Connection = GatewayConnection<Thrift2Client>;

impl GatewayClient for Thrift2Client {
    const GATEWAY: &'static str = "Thrift2";

    fn from_protocols(input: Input, output: Output) -> Self {
        THBaseServiceSyncClient::new(input, output)
    }

    fn ping(&mut self) -> thrift::Result<()> {
        self.get_thrift_server_type().map(drop)
    }

    /// A get strong and timeline, and a timeline scan of one row: the
    /// project's Thrift2 gateway serves timeline reads through an HBase
    /// client of its own.
    fn warm_up_read(&mut self, table: &str, row: &[u8]) -> thrift::Result<()> {
        for timeline in [false, true] {
            let get = latest_get(row.to_vec(), None, timeline::consistency(timeline), true);
            self.get(table.as_bytes().to_vec(), get)?;
        }
        let scan = RangeScan { cells: ScanCells::KeysOnly, ..RangeScan::new(row.to_vec(), None) };
        let request = scan.to_thrift(row, 1, true).map_err(|error| thrift::Error::from(error.to_string()))?;
        self.get_scanner_results(table.as_bytes().to_vec(), request, 1).map(drop)
    }

    fn declared_error(error: &(dyn std::error::Error + Send + Sync + 'static)) -> Error {
        if let Some(io) = error.downcast_ref::<generated::TIOError>() {
            io_error(io.message.as_deref().unwrap_or_default(), io.can_retry == Some(true))
        } else if let Some(argument) = error.downcast_ref::<generated::TIllegalArgument>() {
            Error::Hbase(format!("illegal argument: {}", argument.message.clone().unwrap_or_default()))
        } else {
            Error::Hbase(error.to_string())
        }
    }
}

/// Which cells a [`RangeScan`] returns of each row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanCells {
    /// Every cell (inside the time range, if one is given).
    All,
    /// Only these columns (`cf:q`), inside the time range if one is given.
    Columns(Vec<Vec<u8>>),
    /// One cell per row (the first inside the time range, if one is given),
    /// with its column and timestamp but an empty value: for callers that
    /// want to know which rows there are (or which changed), not what they
    /// hold. The region server drops the values (`FirstKeyOnlyFilter` and
    /// `KeyOnlyFilter`), so they never cross the network.
    KeysOnly,
}

/// A scan through the Thrift2 gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeScan {
    /// First row key, inclusive.
    pub start: Vec<u8>,
    /// Last row key, exclusive; `None` scans to the end of the table.
    pub stop: Option<Vec<u8>>,
    /// Only cells whose timestamp (milliseconds since the epoch, as HBase
    /// stamps them) lies in `[start, end)`; a row with no cell in it is not
    /// returned at all. `None`: every cell.
    pub time_range: Option<Range<i64>>,
    /// Rows fetched per round trip.
    pub page_size: usize,
    /// Which cells of each row to return.
    pub cells: ScanCells,
}

impl RangeScan {
    /// A scan of every cell of `[start, stop)`, 1,000 rows a page, no time range.
    pub fn new(start: Vec<u8>, stop: Option<Vec<u8>>) -> RangeScan {
        RangeScan { start, stop, time_range: None, page_size: 1_000, cells: ScanCells::All }
    }

    /// Refuses what the gateway would refuse, or answer wrongly, before any I/O.
    fn validate(&self) -> Result<()> {
        if let Some(range) = &self.time_range {
            if range.start < 0 || range.start > range.end {
                return Err(Error::InvalidInput(format!(
                    "time range [{}, {}) must start at or after 0 and not end before it starts",
                    range.start, range.end
                )));
            }
        }
        if let ScanCells::Columns(columns) = &self.cells {
            if columns.is_empty() {
                return Err(Error::InvalidInput("a scan of chosen columns needs at least one column".to_owned()));
            }
            for column in columns {
                split_column(column)?;
            }
        }
        Ok(())
    }

    /// The Thrift2 scan of the rows from `start` on, at most `rows` of them,
    /// timeline-consistent when `timeline` (see `hbase::timeline`).
    fn to_thrift(&self, start: &[u8], rows: i32, timeline: bool) -> Result<TScan> {
        let (columns, filter) = match &self.cells {
            ScanCells::All => (None, None),
            ScanCells::Columns(columns) => (Some(thrift_columns(columns)?), None),
            ScanCells::KeysOnly => (None, Some(KEYS_ONLY_FILTER.as_bytes().to_vec())),
        };
        Ok(TScan {
            start_row: Some(start.to_vec()),
            stop_row: self.stop.clone(),
            columns,
            // The gateway fetches the page in one region server round trip
            // (caching) and stops there (limit) instead of reading ahead.
            caching: Some(rows),
            max_versions: Some(1),
            time_range: self
                .time_range
                .as_ref()
                .map(|range| TTimeRange { min_stamp: range.start, max_stamp: range.end }),
            filter_string: filter,
            batch_size: None,
            attributes: None,
            authorizations: None,
            reversed: Some(false),
            // A range scan is batch work (a shard, the rows changed since the
            // last run): it must not evict the online readers' blocks.
            cache_blocks: Some(false),
            col_fam_time_range_map: None,
            read_type: None,
            limit: Some(rows),
            consistency: timeline::consistency(timeline),
            target_replica_id: None,
            filter_bytes: None,
        })
    }
}

/// `cf:q` columns as Thrift2 names them.
fn thrift_columns(columns: &[Vec<u8>]) -> Result<Vec<TColumn>> {
    columns
        .iter()
        .map(|column| {
            let (family, qualifier) = split_column(column)?;
            Ok(TColumn { family: family.to_vec(), qualifier: Some(qualifier.to_vec()), timestamp: None })
        })
        .collect()
}

/// `cf:q` as family and qualifier.
fn split_column(column: &[u8]) -> Result<(&[u8], &[u8])> {
    let colon = column.iter().position(|&byte| byte == b':').ok_or_else(|| {
        Error::InvalidInput(format!("column {:?} is not family:qualifier", String::from_utf8_lossy(column)))
    })?;
    Ok((&column[..colon], &column[colon + 1..]))
}

/// One cell as a Thrift2 scan returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedCell {
    /// `cf:q`, as Thrift1 names columns.
    pub column: Vec<u8>,
    /// When the cell was written (milliseconds since the epoch, HBase's stamp).
    pub timestamp: i64,
    /// The value (empty for a [`ScanCells::KeysOnly`] scan).
    pub value: Vec<u8>,
}

/// A row as a Thrift2 scan returns it: its key and its cells with their timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedRow {
    /// The row key.
    pub key: Vec<u8>,
    /// The cells returned, in column order.
    pub cells: Vec<TimedCell>,
}

impl TimedRow {
    fn from_thrift(result: TResult) -> TimedRow {
        let cells = result
            .column_values
            .into_iter()
            .map(|cell| {
                let mut column = cell.family;
                column.push(b':');
                column.extend_from_slice(&cell.qualifier);
                TimedCell { column, timestamp: cell.timestamp.unwrap_or_default(), value: cell.value }
            })
            .collect();
        TimedRow { key: result.row.unwrap_or_default(), cells }
    }
}

/// The smallest row key after `key`: where the page after the one ending at `key` starts.
fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

impl Thrift2Connection {
    /// At most `rows` rows of `scan` from `start` on, in one round trip.
    ///
    /// `getScannerResults` opens, reads and closes a region scanner within
    /// the call, so nothing is left open on the gateway between pages: a
    /// page is a plain read, retried like any other, and a scan survives a
    /// gateway restart between its pages (the next page simply starts after
    /// the last key read).
    ///
    /// With `timeline`, a secondary replica may answer; the flag returned says
    /// whether one did.
    pub fn scan_page(
        &mut self,
        table: &str,
        scan: &RangeScan,
        start: &[u8],
        rows: usize,
        timeline: bool,
    ) -> Result<(Vec<TimedRow>, bool)> {
        let rows = i32::try_from(rows.max(1)).unwrap_or(i32::MAX);
        let request = scan.to_thrift(start, rows, timeline)?;
        let results = self.call("thrift2_scan_page", table, |client| {
            client.get_scanner_results(table.as_bytes().to_vec(), request, rows)
        });
        let results = results.map_err(|error| self.naming_a_missing_table(table, error))?;
        let stale = timeline::any_stale(&results);
        Ok((results.into_iter().map(TimedRow::from_thrift).collect(), stale))
    }

    /// `error` of a call on `table`, or [`Error::NotFound`] when the table
    /// does not exist: Thrift2 reports a missing table by its bare name, no
    /// exception class to tell it from any other failure, so this asks.
    fn naming_a_missing_table(&mut self, table: &str, error: Error) -> Error {
        match error {
            Error::Hbase(message) if !self.is_broken() => match self.table_exists(table) {
                Ok(false) => Error::NotFound(format!("table {table} ({message})")),
                Ok(true) => Error::Hbase(message),
                Err(asking) => asking,
            },
            error => error,
        }
    }

    /// Which of `keys` are rows of `table`, in order (`existsAll`): no value
    /// crosses the network, and the region servers keep nothing in their
    /// block cache for it.
    pub fn rows_exist(&mut self, table: &str, keys: &[Vec<u8>]) -> Result<Vec<bool>> {
        let gets = keys.iter().map(|key| latest_get(key.clone(), None, None, false)).collect();
        let exist =
            self.call("thrift2_exists_all", table, |client| client.exists_all(table.as_bytes().to_vec(), gets))?;
        // Callers pair the answers with their keys; a short or long answer
        // would silently pair them wrongly, so it is refused here.
        if exist.len() != keys.len() {
            return Err(Error::Hbase(format!("existsAll answered {} of {} rows", exist.len(), keys.len())));
        }
        Ok(exist)
    }
}

impl AnswerRow for TResult {
    fn stale(&self) -> Option<bool> {
        self.stale
    }
}

impl Answer for generated::TTableDescriptor {}

/// Pages through a [`RangeScan`], one retried round trip per page; see
/// [`Hbase::range_scanner`].
#[derive(Debug)]
pub struct RangeScanner {
    hbase: Hbase,
    table: String,
    scan: RangeScan,
    /// Where the next page starts; `None` once the range is exhausted.
    next_start: Option<Vec<u8>>,
}

impl RangeScanner {
    /// The next page of rows (at most the scan's page size), or `None` once
    /// the range is exhausted. Each page is one operation of its own, with
    /// its own deadline and retries, so a long scan is bounded per page, not
    /// as a whole, and memory holds one page.
    pub async fn next_page(&mut self) -> Result<Option<Vec<TimedRow>>> {
        let Some(start) = self.next_start.clone() else {
            return Ok(None);
        };
        let page_size = self.scan.page_size.max(1);
        let (table, scan) = (self.table.clone(), self.scan.clone());
        let timeline = self.hbase.read_consistency() == super::ReadConsistency::Timeline;
        // On an error `next_start` stays: a caller that tries again gets the same page.
        let page = self
            .hbase
            .run_thrift2(Retry::Idempotent, move |connection| {
                connection.scan_page(&table, &scan, &start, page_size, timeline)
            })
            .await
            .map(super::timeline::noted)?;
        // A short page is the range's last.
        self.next_start = if page.len() >= page_size { page.last().map(|row| key_after(&row.key)) } else { None };
        Ok((!page.is_empty()).then_some(page))
    }

    /// Where the next page starts; `None` once the range is exhausted. A
    /// caller that walks a range in steps of its own resumes there.
    pub fn resumes_at(&self) -> Option<&[u8]> {
        self.next_start.as_deref()
    }
}

/// HBase's `FilterProtos.Filter`: a filter's class and its own serialized form.
#[derive(Clone, PartialEq, prost::Message)]
struct FilterProto {
    #[prost(string, required, tag = "1")]
    name: String,
    #[prost(bytes = "vec", optional, tag = "2")]
    serialized_filter: Option<Vec<u8>>,
}

/// HBase's `FilterProtos.RowRange`.
#[derive(Clone, PartialEq, prost::Message)]
struct RowRangeProto {
    #[prost(bytes = "vec", optional, tag = "1")]
    start_row: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "2")]
    start_row_inclusive: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "3")]
    stop_row: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    stop_row_inclusive: Option<bool>,
}

/// HBase's `FilterProtos.MultiRowRangeFilter`.
#[derive(Clone, PartialEq, prost::Message)]
struct MultiRowRangeProto {
    #[prost(message, repeated, tag = "1")]
    row_range_list: Vec<RowRangeProto>,
}

/// A `MultiRowRangeFilter` of `ranges` (`[start, stop)` each; an empty stop
/// runs to the end of the table) as Thrift2's `filterBytes` carries it: the
/// protobuf `Filter` naming the class, around the filter's own protobuf,
/// which HBase's `ProtobufUtil.toFilter` turns back into the filter.
fn multi_row_range_filter(ranges: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    use prost::Message;
    let filter = MultiRowRangeProto {
        row_range_list: ranges
            .iter()
            .map(|(start, stop)| RowRangeProto {
                start_row: Some(start.clone()),
                start_row_inclusive: Some(true),
                stop_row: Some(stop.clone()),
                stop_row_inclusive: Some(false),
            })
            .collect(),
    };
    FilterProto {
        name: "org.apache.hadoop.hbase.filter.MultiRowRangeFilter".to_owned(),
        serialized_filter: Some(filter.encode_to_vec()),
    }
    .encode_to_vec()
}

impl Thrift2Connection {
    /// At most `rows` rows of `table` lying in any of `ranges` (`[start,
    /// stop)` each, sorted, not overlapping, each stop non-empty), in key
    /// order, in one call: `columns` of each, through the block cache (an
    /// online read).
    pub fn scan_row_ranges(
        &mut self,
        table: &str,
        ranges: &[(Vec<u8>, Vec<u8>)],
        columns: &[Vec<u8>],
        rows: usize,
        timeline: bool,
    ) -> Result<(Vec<TimedRow>, bool)> {
        let (Some((first, _)), Some((_, last))) = (ranges.first(), ranges.last()) else {
            return Ok((Vec::new(), false));
        };
        let rows = i32::try_from(rows.max(1)).unwrap_or(i32::MAX);
        let columns = thrift_columns(columns)?;
        let request = TScan {
            start_row: Some(first.clone()),
            stop_row: Some(last.clone()),
            columns: (!columns.is_empty()).then_some(columns),
            caching: Some(rows),
            max_versions: Some(1),
            time_range: None,
            filter_string: None,
            batch_size: None,
            attributes: None,
            authorizations: None,
            reversed: Some(false),
            cache_blocks: Some(true),
            col_fam_time_range_map: None,
            read_type: None,
            limit: Some(rows),
            consistency: timeline::consistency(timeline),
            target_replica_id: None,
            // One range is the scan's own start and stop: no filter for the
            // region server to build and consult on every row.
            filter_bytes: (ranges.len() > 1).then(|| multi_row_range_filter(ranges)),
        };
        let results = self.call("thrift2_scan_row_ranges", table, |client| {
            client.get_scanner_results(table.as_bytes().to_vec(), request, rows)
        })?;
        let stale = timeline::any_stale(&results);
        Ok((results.into_iter().map(TimedRow::from_thrift).collect(), stale))
    }
}

impl Hbase {
    /// The rows of many key ranges of `table` in one call through the Thrift2
    /// gateway ([`Thrift2Connection::scan_row_ranges`]).
    pub(crate) async fn scan_row_ranges(
        &self,
        table: &str,
        ranges: Vec<(Vec<u8>, Vec<u8>)>,
        columns: Vec<Vec<u8>>,
        rows: usize,
    ) -> Result<Vec<TimedRow>> {
        let table = table.to_owned();
        let timeline = self.read_consistency() == super::ReadConsistency::Timeline;
        self.run_thrift2(Retry::Idempotent, move |connection| {
            connection.scan_row_ranges(&table, &ranges, &columns, rows, timeline)
        })
        .await
        .map(super::timeline::noted)
    }

    /// Which of `keys` are rows of `table`, in order, through the Thrift2
    /// gateway ([`Thrift2Connection::rows_exist`]).
    pub(crate) async fn rows_exist(&self, table: &str, keys: Vec<Vec<u8>>) -> Result<Vec<bool>> {
        let table = table.to_owned();
        self.run_thrift2(Retry::Idempotent, move |connection| connection.rows_exist(&table, &keys)).await
    }

    /// A scan of `scan` in `table` through the Thrift2 gateway, read a page
    /// at a time with [`RangeScanner::next_page`]. Rows come in key order with their
    /// cells' timestamps; with a time range only rows with a cell written in
    /// it, and only those cells. The region servers do not keep what it
    /// reads in their block cache.
    ///
    /// HBase keeps an overwritten version until the next major compaction,
    /// and a time-range scan can see it: a row whose newest cell lies after
    /// the range but whose overwritten one lay in it is returned too (never
    /// the other way round). For "what changed since", that errs on the safe side.
    ///
    /// Refuses a time range ending before it starts (or starting before 0)
    /// and malformed columns with [`Error::InvalidInput`], before any I/O.
    pub fn range_scanner(&self, table: &str, scan: RangeScan) -> Result<RangeScanner> {
        scan.validate()?;
        let empty_range = scan.time_range.as_ref().is_some_and(|range| range.is_empty());
        let next_start = (!empty_range).then(|| scan.start.clone());
        Ok(RangeScanner { hbase: self.clone(), table: table.to_owned(), scan, next_start })
    }

    /// Creates `table` (family `family`) through the Thrift2 gateway, split
    /// into `split_keys.len() + 1` regions at `split_keys` (sorted, distinct,
    /// none empty; HBase refuses others). Fails with [`Error::Conflict`] when
    /// the table exists.
    #[cfg_attr(feature = "test-support", visibility::make(pub))]
    pub(crate) async fn create_table_with_splits(
        &self,
        table: &str,
        family: &str,
        split_keys: Vec<Vec<u8>>,
        region_replication: u32,
    ) -> Result<()> {
        let (table, family) = (table.to_owned(), family.to_owned());
        // Once: a creation whose reply was lost may have created the table,
        // and a retry would then report a conflict for our own success.
        self.run_thrift2(Retry::Once, move |connection| {
            connection.create_table(&table, &family, &split_keys, region_replication)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_row_range_filter_names_its_class_and_carries_each_range_half_open() {
        use prost::Message;
        let ranges = vec![(b"P1c".to_vec(), b"P1c\x01".to_vec()), (b"P2c".to_vec(), Vec::new())];
        let wrapped = FilterProto::decode(multi_row_range_filter(&ranges).as_slice()).expect("a Filter");
        assert_eq!(wrapped.name, "org.apache.hadoop.hbase.filter.MultiRowRangeFilter");
        let filter =
            MultiRowRangeProto::decode(wrapped.serialized_filter.expect("the filter").as_slice()).expect("ranges");
        let decoded: Vec<(Vec<u8>, Vec<u8>, bool, bool)> = filter
            .row_range_list
            .into_iter()
            .map(|range| {
                (
                    range.start_row.unwrap_or_default(),
                    range.stop_row.unwrap_or_default(),
                    range.start_row_inclusive.unwrap_or_default(),
                    range.stop_row_inclusive.unwrap_or(true),
                )
            })
            .collect();
        assert_eq!(
            decoded,
            vec![(b"P1c".to_vec(), b"P1c\x01".to_vec(), true, false), (b"P2c".to_vec(), Vec::new(), true, false)]
        );
    }

    #[test]
    fn pages_resume_right_after_the_last_key_read() {
        assert_eq!(key_after(b"abc"), b"abc\0".to_vec());
        assert!(key_after(b"abc").as_slice() > b"abc".as_slice());
        assert!(key_after(b"abc").as_slice() < b"abc\0\0".as_slice());
    }

    #[test]
    fn scans_are_built_without_empty_optional_fields() {
        let scan =
            RangeScan { time_range: Some(5..9), cells: ScanCells::KeysOnly, ..RangeScan::new(b"a".to_vec(), None) };
        let thrift = scan.to_thrift(b"b", 10, false).expect("valid scan");
        assert_eq!(thrift.start_row.as_deref(), Some(b"b".as_slice()));
        assert_eq!(thrift.stop_row, None);
        assert_eq!(thrift.time_range, Some(TTimeRange { min_stamp: 5, max_stamp: 9 }));
        assert_eq!(thrift.cache_blocks, Some(false));
        assert_eq!((thrift.caching, thrift.limit), (Some(10), Some(10)));
        assert_eq!(thrift.filter_string.as_deref(), Some(b"FirstKeyOnlyFilter() AND KeyOnlyFilter()".as_slice()));
        assert_eq!((thrift.columns, thrift.attributes, thrift.filter_bytes), (None, None, None));
        let columns = RangeScan { cells: ScanCells::Columns(vec![b"cf:q".to_vec()]), ..scan };
        let thrift = columns.to_thrift(b"b", 10, false).expect("valid scan");
        assert_eq!(thrift.filter_string, None);
        assert_eq!(
            thrift.columns,
            Some(vec![TColumn { family: b"cf".to_vec(), qualifier: Some(b"q".to_vec()), timestamp: None }])
        );
    }

    #[test]
    fn refuses_bad_time_ranges_and_columns_before_any_io() {
        let scan = |time_range, cells| RangeScan { time_range, cells, ..RangeScan::new(Vec::new(), None) };
        for bad in [
            scan(Some(Range { start: 9, end: 5 }), ScanCells::All),
            scan(Some(-1..5), ScanCells::All),
            scan(None, ScanCells::Columns(Vec::new())),
            scan(None, ScanCells::Columns(vec![b"no-colon".to_vec()])),
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidInput(_))), "{bad:?}");
        }
        assert!(scan(Some(5..5), ScanCells::All).validate().is_ok());
        assert!(scan(Some(5..9), ScanCells::Columns(vec![b"cf:q".to_vec()])).validate().is_ok());
    }
}
