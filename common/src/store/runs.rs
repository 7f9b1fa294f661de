//! The history of ranking runs in `ranker-run`: one JSON record per run
//! attempt, keyed so that a scan from the start of the table lists the newest
//! run first (see [`keys::ranker_run_key`]).

use serde::{Deserialize, Serialize};

use super::{skip_row, SkipReason, Store};
use crate::error::{Error, Result};
use crate::hbase::{Retry, RowMutation, ScanSpec, COLUMN_VALUE};
use crate::keys::{self, KeyRange};

/// The longest run id accepted: ids are generated, so this only bounds the key.
pub const MAX_RUN_ID_LEN: usize = 128;

/// Rows fetched per round trip when listing runs.
const RUN_PAGE_ROWS: usize = 100;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not yet ended (or its holder died without saying how it ended).
    Running,
    /// Ranked every product in scope without a failure.
    Succeeded,
    /// Ended with an error, or with products that could not be ranked.
    Failed,
    /// Stopped early by a shutdown, or closed by the daemon that took over
    /// the lease of a holder that stopped renewing it (crashed or killed).
    Interrupted,
    /// Stopped early because its lease was taken over or could not be renewed
    /// in time: another run may have the night, so this one gave it up.
    Lost,
}

impl RunStatus {
    /// How a run can end (every status but `Running`).
    pub const ENDED: [RunStatus; 4] =
        [RunStatus::Succeeded, RunStatus::Failed, RunStatus::Interrupted, RunStatus::Lost];

    /// The lower-case name used in the stored JSON, listings and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Lost => "lost",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which products a run ranked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// Every product in its key range. Records written before runs had a kind were full runs.
    #[default]
    Full,
    /// Only the products whose ranking may have changed since its watermark
    /// (`changed_since_ms`), and its night's slice of the rolling refresh.
    Incremental,
}

impl RunKind {
    /// The lower-case name used in the stored JSON, listings and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Full => "full",
            RunKind::Incremental => "incremental",
        }
    }
}

/// One run attempt of the ranker, as the scheduler recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Unique id of this attempt (printable ASCII, at most [`MAX_RUN_ID_LEN`] bytes).
    pub run_id: String,
    /// Who ran it (`host:pid:random`), the same name the lease carries.
    pub holder: String,
    /// The scheduled time (ms since the epoch) this run serves; for a manual run, when it was asked for.
    pub slot_ms: i64,
    /// 1 for the first attempt at a slot, counting up with each retry.
    pub attempt: u32,
    /// The ranker's as-of time (ms since the epoch); retries of one slot share it.
    pub as_of_ms: i64,
    /// When the attempt started (ms since the epoch); part of the row key, never changes.
    pub started_ms: i64,
    /// When it ended, once it has.
    #[serde(default)]
    pub ended_ms: Option<i64>,
    /// Where it stands.
    pub status: RunStatus,
    /// Products ranked.
    #[serde(default)]
    pub products: u64,
    /// Comments scored.
    #[serde(default)]
    pub comments_scored: u64,
    /// Rank slots written.
    #[serde(default)]
    pub slots_written: u64,
    /// Rank slots deleted (left over from an earlier run).
    #[serde(default)]
    pub slots_deleted: u64,
    /// Products that could not be ranked.
    #[serde(default)]
    pub failures: u64,
    /// The first few product failures, `product: reason`, for the listing and the operator.
    #[serde(default)]
    pub failure_samples: Vec<String>,
    /// Why the run as a whole failed or was interrupted, when it did.
    #[serde(default)]
    pub error: Option<String>,
    /// Full or incremental.
    #[serde(default)]
    pub kind: RunKind,
    /// The first product key of the run's range, hex-encoded ("" from the
    /// table's start): a shard run covers only its range.
    #[serde(default)]
    pub range_start: String,
    /// The first product key after the run's range, hex-encoded; `None` to the table's end.
    #[serde(default)]
    pub range_stop: Option<String>,
    /// For an incremental run, the cell time (ms) it looked for changes from.
    #[serde(default)]
    pub changed_since_ms: Option<i64>,
    /// For an incremental run, how many products it found changed.
    #[serde(default)]
    pub products_changed: Option<u64>,
    /// For an incremental run, how long finding what changed took (ms).
    #[serde(default)]
    pub detection_ms: Option<u64>,
    /// For an incremental run, how many rank slots it checked for deleted comments.
    #[serde(default)]
    pub slots_checked: Option<u64>,
    /// For a run that listed every product of its range, product keys
    /// (hex-encoded, ascending) cutting the range into near-equal parts: the
    /// rolling refresh deals the parts out to its nights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_cuts: Option<Vec<String>>,
}

impl RunRecord {
    /// The record of an attempt that has just started: running, nothing counted yet.
    pub fn started(run_id: String, holder: String, slot_ms: i64, attempt: u32, started_ms: i64) -> RunRecord {
        RunRecord {
            run_id,
            holder,
            slot_ms,
            attempt,
            // Every attempt at a slot ranks as of the slot's time, so retries and
            // the other daemon would write exactly the same slots.
            as_of_ms: slot_ms,
            started_ms,
            ended_ms: None,
            status: RunStatus::Running,
            products: 0,
            comments_scored: 0,
            slots_written: 0,
            slots_deleted: 0,
            failures: 0,
            failure_samples: Vec::new(),
            error: None,
            kind: RunKind::Full,
            range_start: String::new(),
            range_stop: None,
            changed_since_ms: None,
            products_changed: None,
            detection_ms: None,
            slots_checked: None,
            refresh_cuts: None,
        }
    }

    /// Sets the product key range the run covers (`stop` `None`: to the table's end).
    pub fn with_range(mut self, start: &[u8], stop: Option<&[u8]>) -> RunRecord {
        self.range_start = hex::encode(start);
        self.range_stop = stop.map(hex::encode);
        self
    }

    /// The run's product key range `[start, stop)` (`stop` `None`: to the
    /// table's end); `None` when the record's range does not decode.
    pub fn key_range(&self) -> Option<KeyRange> {
        let start = hex::decode(&self.range_start).ok()?;
        let stop = match &self.range_stop {
            None => None,
            Some(text) => Some(hex::decode(text).ok()?),
        };
        Some(KeyRange { start, stop })
    }

    /// The record's row key in `ranker-run`.
    pub fn row_key(&self) -> Vec<u8> {
        keys::ranker_run_key(self.started_ms, &self.run_id)
    }

    /// How long the run took, once it ended.
    pub fn duration_ms(&self) -> Option<i64> {
        self.ended_ms.map(|ended| ended.saturating_sub(self.started_ms))
    }
}

/// The newest runs in `runs` (newest first, as [`Store::recent_runs`] lists
/// them) that completed and whose ranges together cover every product of
/// `[start, stop)`: the runs an incremental run takes its watermark from (the
/// earliest start among them, which is the last one's). `None` when no such
/// runs are in `runs`.
///
/// Only [`RunStatus::Succeeded`] counts: such a run ranked every product of
/// its range that changed before it started (a full run every product, an
/// incremental run every product changed since its own watermark, by
/// induction). A run that failed, was interrupted, or was killed (left
/// `running`) proves nothing, so the next run starts from the same earlier
/// point and misses nothing. Full and incremental runs count alike.
///
/// Ranges join up: each product of the range was ranked by one of the runs,
/// for every change before that run's start, so from the earliest start of
/// them nothing is missed. A night of shards thus covers the next night's
/// shards though the next plan cuts the range elsewhere (a plan is made per
/// night, and its cuts move as products are added); when only a run whose
/// range held the whole new range counted, such a shard found none and
/// ranked its whole range. A run of everything still covers alone.
pub fn completed_cover<'a>(runs: &'a [RunRecord], range: &KeyRange) -> Option<Vec<&'a RunRecord>> {
    let (start, stop) = (range.start.as_slice(), range.stop.as_deref());
    let mut chosen: Vec<(&RunRecord, KeyRange)> = Vec::new();
    for run in runs.iter().filter(|run| run.status == RunStatus::Succeeded) {
        let Some(run_range) = run.key_range() else { continue };
        let overlaps = stop.is_none_or(|stop| run_range.start.as_slice() < stop)
            && run_range.stop.as_deref().is_none_or(|run_stop| run_stop > start);
        if !overlaps {
            continue;
        }
        chosen.push((run, run_range));
        let ranges = chosen.iter().map(|(_, range)| (range.start.as_slice(), range.stop.as_deref()));
        if ranges_cover(ranges.collect(), start, stop) {
            return Some(chosen.into_iter().map(|(run, _)| run).collect());
        }
    }
    None
}

/// Whether `ranges` (each `[start, stop)`, `stop` `None`: to the table's end)
/// together hold every key of `[start, stop)`.
fn ranges_cover(mut ranges: Vec<(&[u8], Option<&[u8]>)>, start: &[u8], stop: Option<&[u8]>) -> bool {
    ranges.sort_by_key(|&(range_start, _)| range_start);
    // Every key of [start, covered_until) lies in a range seen so far.
    let mut covered_until = start;
    for (range_start, range_stop) in ranges {
        if stop.is_some_and(|stop| covered_until >= stop) {
            return true;
        }
        if range_start > covered_until {
            // Later ranges start later still: the key `covered_until` is in none.
            return false;
        }
        match range_stop {
            None => return true,
            Some(range_stop) => covered_until = covered_until.max(range_stop),
        }
    }
    stop.is_some_and(|stop| covered_until >= stop)
}

/// Refuses a run id that would make an unreadable or unbounded row key.
pub fn validate_run_id(run_id: &str) -> Result<()> {
    if run_id.is_empty() || run_id.len() > MAX_RUN_ID_LEN || !run_id.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(Error::InvalidInput(format!(
            "run id {run_id:?} must be 1 to {MAX_RUN_ID_LEN} printable ASCII characters without spaces"
        )));
    }
    Ok(())
}

impl Store {
    /// Writes (or rewrites) a run's record. A record's key depends only on its
    /// start time and id, so updating a run is writing it again.
    pub async fn record_run(&self, record: &RunRecord) -> Result<()> {
        validate_run_id(&record.run_id)?;
        let table = self.tables().ranker_run.clone();
        let value = serde_json::to_vec(record)
            .map_err(|error| Error::InvalidInput(format!("run record does not serialise: {error}")))?;
        let mutations = vec![RowMutation::Put { key: record.row_key(), cells: vec![(COLUMN_VALUE.to_vec(), value)] }];
        self.hbase().run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone())).await
    }

    /// Reads one run's record; a record that does not decode is [`Error::BadData`].
    pub async fn get_run(&self, started_ms: i64, run_id: &str) -> Result<Option<RunRecord>> {
        validate_run_id(run_id)?;
        let table = self.tables().ranker_run.clone();
        let keys = vec![keys::ranker_run_key(started_ms, run_id)];
        let rows = {
            let table = table.clone();
            self.hbase()
                .run(Retry::Idempotent, move |connection| connection.get_rows(&table, &keys, &[COLUMN_VALUE.to_vec()]))
                .await?
        };
        let Some(value) = rows.first().and_then(|row| row.value(COLUMN_VALUE)) else {
            return Ok(None);
        };
        serde_json::from_slice(value)
            .map(Some)
            .map_err(|error| Error::BadData { table, reason: format!("run record does not decode: {error}") })
    }

    /// The `limit` most recent runs, newest first. Rows that do not decode are
    /// skipped and counted, so one bad row never hides the history.
    pub async fn recent_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let table = self.tables().ranker_run.clone();
        let spec = ScanSpec {
            start: Vec::new(),
            stop: None,
            limit,
            page_size: limit.min(RUN_PAGE_ROWS),
            columns: vec![COLUMN_VALUE.to_vec()],
            cache_blocks: true,
        };
        let rows = {
            let table = table.clone();
            self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
        };
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            if let Err(error) = keys::parse_ranker_run_key(&row.key) {
                skip_row(self.tables(), &table, SkipReason::BadKey, &row.key, &error);
                continue;
            }
            let Some(value) = row.value(COLUMN_VALUE) else {
                skip_row(self.tables(), &table, SkipReason::NoValue, &row.key, &"the row has no cf:q");
                continue;
            };
            match serde_json::from_slice::<RunRecord>(value) {
                Ok(record) => records.push(record),
                Err(error) => skip_row(self.tables(), &table, SkipReason::BadJson, &row.key, &error),
            }
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        RunRecord {
            run_id: "20260101T030000Z-a1b2c3".to_owned(),
            holder: "host:42:ab12".to_owned(),
            slot_ms: 1_767_204_000_000,
            attempt: 1,
            as_of_ms: 1_767_204_000_000,
            started_ms: 1_767_204_000_123,
            ended_ms: Some(1_767_204_060_123),
            status: RunStatus::Succeeded,
            products: 3,
            comments_scored: 30,
            slots_written: 25,
            slots_deleted: 2,
            failures: 0,
            failure_samples: Vec::new(),
            error: None,
            kind: RunKind::Incremental,
            range_start: String::new(),
            range_stop: None,
            changed_since_ms: Some(1_767_117_600_000),
            products_changed: Some(3),
            detection_ms: Some(41),
            slots_checked: Some(0),
            refresh_cuts: Some(vec!["50303030".to_owned()]),
        }
    }

    /// Whether `run`, had it succeeded, would cover `[start, stop)` alone: the
    /// question `completed_cover` asks of each run.
    fn covers(run: &RunRecord, start: &[u8], stop: Option<&[u8]>) -> bool {
        let mut run = run.clone();
        run.status = RunStatus::Succeeded;
        let range = KeyRange { start: start.to_vec(), stop: stop.map(<[u8]>::to_vec) };
        completed_cover(std::slice::from_ref(&run), &range).is_some()
    }

    #[test]
    fn records_written_before_runs_had_a_kind_read_as_full_runs_of_everything() {
        let mut json = serde_json::to_value(record()).expect("serialise");
        for field in ["kind", "rangeStart", "rangeStop", "changedSinceMs", "productsChanged"] {
            json.as_object_mut().expect("object").remove(field);
        }
        let old: RunRecord = serde_json::from_value(json).expect("deserialise");
        assert_eq!((old.kind, old.changed_since_ms), (RunKind::Full, None));
        assert!(covers(&old, b"".as_slice(), None));
    }

    #[test]
    fn a_run_covers_the_ranges_inside_its_own() {
        let all = record();
        let shard = record().with_range(b"8".as_slice(), Some(b"G".as_slice()));
        assert!(covers(&all, b"8".as_slice(), Some(b"G".as_slice())) && covers(&all, b"".as_slice(), None));
        assert!(
            covers(&shard, b"8".as_slice(), Some(b"G".as_slice()))
                && covers(&shard, b"A".as_slice(), Some(b"B".as_slice()))
        );
        assert!(!covers(&shard, b"".as_slice(), None), "a shard does not cover everything");
        assert!(
            !covers(&shard, b"7".as_slice(), Some(b"G".as_slice()))
                && !covers(&shard, b"8".as_slice(), Some(b"H".as_slice()))
                && !covers(&shard, b"8".as_slice(), None)
        );
        let mut garbled = record();
        garbled.range_start = "zz".to_owned();
        assert!(
            !covers(&garbled, b"8".as_slice(), Some(b"G".as_slice())),
            "a range that does not decode covers nothing"
        );
    }

    #[test]
    fn the_watermark_runs_are_the_newest_successes_covering_the_range() {
        let run = |id: &str, status, range: Option<(&[u8], &[u8])>| {
            let mut run = record();
            run.run_id = id.to_owned();
            run.status = status;
            match range {
                Some((start, stop)) => run.with_range(start, Some(stop)),
                None => run,
            }
        };
        // Newest first, as the table lists them.
        let runs = vec![
            run("killed", RunStatus::Running, None),
            run("interrupted", RunStatus::Interrupted, None),
            run("failed", RunStatus::Failed, None),
            run("other-shard", RunStatus::Succeeded, Some((b"G".as_slice(), b"Q".as_slice()))),
            run("this-shard", RunStatus::Succeeded, Some((b"8".as_slice(), b"G".as_slice()))),
            run("full", RunStatus::Succeeded, None),
        ];
        assert_eq!(cover(&runs, "8", Some("G")), Some(vec!["this-shard"]));
        assert_eq!(cover(&runs, "G", Some("Q")), Some(vec!["other-shard"]));
        assert_eq!(cover(&runs, "A", Some("B")), Some(vec!["this-shard"]), "a range inside a shard's");
        // The shards leave [Q, end) and ["", 8) out: only the full run, the
        // oldest, closes the gaps, so its start is the watermark.
        assert_eq!(cover(&runs, "", None), Some(vec!["other-shard", "this-shard", "full"]));
        assert_eq!(cover(&runs[..3], "", None), None, "no completed run: no watermark");
    }

    /// The ids of [`completed_cover`]'s runs for `[start, stop)`.
    fn cover<'a>(runs: &'a [RunRecord], start: &str, stop: Option<&str>) -> Option<Vec<&'a str>> {
        let range = KeyRange { start: start.as_bytes().to_vec(), stop: stop.map(|stop| stop.as_bytes().to_vec()) };
        completed_cover(runs, &range).map(|chosen| chosen.iter().map(|run| run.run_id.as_str()).collect())
    }

    /// A succeeded run `id` over `[start, stop)`.
    fn shard_run(id: &str, start: &str, stop: Option<&str>) -> RunRecord {
        let mut run = record();
        run.run_id = id.to_owned();
        run.with_range(start.as_bytes(), stop.map(str::as_bytes))
    }

    #[test]
    fn shard_runs_whose_ranges_join_up_cover_a_range_cut_elsewhere() {
        // Last night's three shards (newest first), and a full run before them.
        let mut runs = vec![
            shard_run("night-3", "G", None),
            shard_run("night-2", "8", Some("G")),
            shard_run("night-1", "", Some("8")),
            shard_run("full", "", None),
        ];
        // Tonight's plan cuts at 6 and H: each of its shards is covered by the
        // nights' shards it overlaps, not by the older full run.
        assert_eq!(cover(&runs, "", Some("6")), Some(vec!["night-1"]));
        assert_eq!(cover(&runs, "6", Some("H")), Some(vec!["night-3", "night-2", "night-1"]));
        assert_eq!(cover(&runs, "H", None), Some(vec!["night-3"]));
        assert_eq!(cover(&runs, "", None), Some(vec!["night-3", "night-2", "night-1"]), "the night covers everything");
        // A failed shard leaves a gap its neighbours cannot close: the full run does.
        runs[1].status = RunStatus::Failed;
        assert_eq!(cover(&runs, "6", Some("H")), Some(vec!["night-3", "night-1", "full"]));
        runs.pop();
        assert_eq!(cover(&runs, "6", Some("H")), None, "a gap nothing covers: no watermark");
        assert_eq!(cover(&runs, "H", None), Some(vec!["night-3"]), "the gap is outside this range");
    }

    #[test]
    fn ranges_cover_only_without_a_gap() {
        let covers = |ranges: &[(&str, Option<&str>)], start: &str, stop: Option<&str>| {
            let ranges = ranges.iter().map(|(start, stop)| (start.as_bytes(), stop.map(str::as_bytes))).collect();
            ranges_cover(ranges, start.as_bytes(), stop.map(str::as_bytes))
        };
        assert!(covers(&[("c", Some("e")), ("a", Some("c"))], "b", Some("e")), "touching ranges, any order");
        assert!(covers(&[("a", Some("d")), ("b", Some("c"))], "b", Some("d")), "a range inside another");
        assert!(!covers(&[("a", Some("c")), ("d", None)], "b", Some("e")), "[c, d) is in none");
        assert!(!covers(&[("c", None)], "b", None), "[b, c) is in none");
        assert!(!covers(&[("a", Some("z"))], "b", None), "a bounded range never reaches the table's end");
        assert!(covers(&[("a", Some("z")), ("y", None)], "b", None));
        assert!(!covers(&[], "b", Some("c")), "nothing covers nothing");
    }

    #[test]
    fn records_round_trip_as_camel_case_json_with_lower_case_status() {
        let json = serde_json::to_value(record()).expect("serialise");
        assert_eq!(json["status"], "succeeded");
        assert_eq!(json["commentsScored"], 30);
        assert_eq!(json["asOfMs"], 1_767_204_000_000_i64);
        let back: RunRecord = serde_json::from_value(json).expect("deserialise");
        assert_eq!(back, record());
        assert_eq!(back.duration_ms(), Some(60_000));
    }

    #[test]
    fn the_row_key_is_the_reversed_start_time_then_the_id() {
        let parsed = keys::parse_ranker_run_key(&record().row_key()).expect("key");
        assert_eq!((parsed.started_ms, parsed.run_id.as_str()), (1_767_204_000_123, "20260101T030000Z-a1b2c3"));
    }

    #[test]
    fn run_ids_must_be_short_printable_ascii() {
        assert!(validate_run_id("run-1").is_ok());
        for bad in ["", "a b", "ünï", &"x".repeat(MAX_RUN_ID_LEN + 1)] {
            assert!(validate_run_id(bad).is_err(), "{bad}");
        }
    }
}
