//! The Thrift2 side of timeline-consistent page reads (`hbase::timeline`):
//! a multi-get and a one-call scan that may be answered by a secondary
//! region replica, returning their rows as Thrift1 reads do, and whether a
//! replica answered.

use std::collections::BTreeMap;

use super::generated::{TConsistency, TResult, TScan, TTHBaseServiceSyncClient};
use super::{latest_get, thrift_columns, Thrift2Connection, TimedRow};
use crate::error::Result;
use crate::hbase::connection::{Column, Row, ScanSpec};

/// The consistency of a Thrift2 read: timeline when the pool's page reads
/// ask for it, otherwise left out (HBase's default, strong).
pub(super) fn consistency(timeline: bool) -> Option<TConsistency> {
    timeline.then_some(TConsistency::TIMELINE)
}

/// Whether any of `results` was read from a secondary replica.
pub(super) fn any_stale(results: &[TResult]) -> bool {
    results.iter().any(|result| result.stale == Some(true))
}

/// A Thrift2 result as the Thrift1 reads return rows: cells by `cf:q`.
fn row_of(result: TResult) -> Row {
    let timed = TimedRow::from_thrift(result);
    let cells = timed.cells.into_iter().map(|cell| (cell.column, cell.value)).collect::<BTreeMap<Column, Vec<u8>>>();
    Row { key: timed.key, cells }
}

/// Rows as Thrift1 returns them (empty results, missing rows, left out), and
/// whether a secondary replica answered any of them.
fn rows_of(results: Vec<TResult>) -> (Vec<Row>, bool) {
    let stale = any_stale(&results);
    let rows = results.into_iter().map(row_of).filter(|row| !row.cells.is_empty()).collect();
    (rows, stale)
}

impl Thrift2Connection {
    /// The rows of `keys` in `table` that exist, with `columns`, in one
    /// timeline-consistent multi-get; and whether a secondary answered.
    pub fn get_rows_timeline(&mut self, table: &str, keys: &[Vec<u8>], columns: &[Column]) -> Result<(Vec<Row>, bool)> {
        if keys.is_empty() {
            return Ok((Vec::new(), false));
        }
        let columns = thrift_columns(columns)?;
        let gets = keys
            .iter()
            .map(|key| latest_get(key.clone(), (!columns.is_empty()).then(|| columns.clone()), consistency(true), true))
            .collect();
        let results = self
            .call("thrift2_get_multiple", table, |client| client.get_multiple(table.as_bytes().to_vec(), gets))
            .map_err(|error| self.naming_a_missing_table(table, error))?;
        Ok(rows_of(results))
    }

    /// The rows of `spec` in `table` (those passing `filter` when given), in
    /// one timeline-consistent call (`getScannerResults` opens, reads and
    /// closes the scanner on the gateway); and whether a secondary answered.
    pub fn scan_timeline(&mut self, table: &str, spec: &ScanSpec, filter: Option<&str>) -> Result<(Vec<Row>, bool)> {
        if spec.limit == 0 {
            return Ok((Vec::new(), false));
        }
        let rows = i32::try_from(spec.limit).unwrap_or(i32::MAX);
        let columns = thrift_columns(&spec.columns)?;
        let request = TScan {
            start_row: Some(spec.start.clone()),
            stop_row: spec.stop.clone(),
            columns: (!columns.is_empty()).then_some(columns),
            caching: Some(i32::try_from(spec.page_size.clamp(1, spec.limit)).unwrap_or(i32::MAX)),
            max_versions: Some(1),
            time_range: None,
            filter_string: filter.map(|filter| filter.as_bytes().to_vec()),
            batch_size: None,
            attributes: None,
            authorizations: None,
            reversed: Some(false),
            cache_blocks: Some(spec.cache_blocks),
            col_fam_time_range_map: None,
            read_type: None,
            limit: Some(rows),
            consistency: consistency(true),
            target_replica_id: None,
            filter_bytes: None,
        };
        let results = self
            .call("thrift2_scan_timeline", table, |client| {
                client.get_scanner_results(table.as_bytes().to_vec(), request, rows)
            })
            .map_err(|error| self.naming_a_missing_table(table, error))?;
        Ok(rows_of(results))
    }
}

#[cfg(test)]
mod tests {
    use super::super::generated::TColumnValue;
    use super::*;

    fn result(row: &[u8], value: Option<&[u8]>, stale: Option<bool>) -> TResult {
        let column_values = value
            .map(|value| {
                vec![TColumnValue {
                    family: b"cf".to_vec(),
                    qualifier: b"q".to_vec(),
                    value: value.to_vec(),
                    timestamp: Some(1),
                    tags: None,
                    type_: None,
                }]
            })
            .unwrap_or_default();
        TResult { row: Some(row.to_vec()), column_values, stale, partial: None }
    }

    #[test]
    fn results_become_rows_by_column_and_a_single_stale_one_marks_the_read() {
        let (rows, stale) = rows_of(vec![result(b"a", Some(b"1"), Some(false)), result(b"b", None, None)]);
        assert_eq!(rows.len(), 1, "a missing row (no cells) is left out, as Thrift1 does");
        assert_eq!(rows[0].value(b"cf:q"), Some(&b"1"[..]));
        assert!(!stale, "primaries' answers are not stale");
        let (_, stale) = rows_of(vec![result(b"a", Some(b"1"), None), result(b"b", Some(b"2"), Some(true))]);
        assert!(stale, "one row from a secondary marks the whole read");
    }
}
