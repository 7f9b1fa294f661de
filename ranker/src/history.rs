//! A run's record in the run history (`ranker-run`), shared by `ranker run`
//! and `ranker-cron`: what the record says when a run starts and when it
//! ends, and the watermark `--changed-since last` reads back from it.

use std::time::Duration;

use common::store::runs::{completed_cover, RunKind, RunRecord, RunStatus};
use common::store::Store;

use crate::lease::StopCause;
use crate::refresh::RefreshCuts;
use crate::shard::KeyRange;
use crate::{Incremental, RankerError, RunOptions, RunReport, Scope};

/// How many recent records are searched for the last completed run.
const WATERMARK_SEARCH: usize = 1_000;
/// How many product failures a run record keeps verbatim.
const FAILURE_SAMPLES: usize = 20;

/// When an incremental run looks for changes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangedSince {
    /// From this cell time (ms since the epoch).
    Time(i64),
    /// From the earliest start of the newest completed runs that together
    /// cover the same products, less the clock-skew margin.
    Last,
}

impl std::str::FromStr for ChangedSince {
    type Err = String;

    /// `last`, or a time as [`parse_time`] reads it.
    fn from_str(text: &str) -> Result<ChangedSince, String> {
        if text.trim() == "last" {
            return Ok(ChangedSince::Last);
        }
        parse_time(text).map(ChangedSince::Time).map_err(|error| format!("neither `last` nor a time: {error}"))
    }
}

/// Parses a time given as RFC 3339 (any offset), epoch milliseconds, or
/// `today@HH:MM[:SS]OFFSET` (`today@03:00+09:00`): that time of today's date
/// in that offset, so a scheduler without a shell (a Kubernetes CronJob in an
/// image with nothing but the binary) can name "03:00 tonight in Seoul".
pub fn parse_time(text: &str) -> Result<i64, String> {
    parse_time_at(text, chrono::Utc::now())
}

/// [`parse_time`] with `now` given, for `today@`.
pub(crate) fn parse_time_at(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(millis) = text.parse::<i64>() {
        return Ok(millis);
    }
    if let Some(time_of_day) = text.strip_prefix("today@") {
        return today_at(time_of_day, now);
    }
    chrono::DateTime::parse_from_rfc3339(text).map(|time| time.timestamp_millis()).map_err(|error| {
        format!(
            "expected RFC 3339 (2024-05-01T03:00:00Z), epoch milliseconds or today@HH:MM+HH:MM \
             (today@03:00+09:00): {error}"
        )
    })
}

/// `HH:MM[:SS]OFFSET` on the date `now` has in that offset.
fn today_at(time_of_day: &str, now: chrono::DateTime<chrono::Utc>) -> Result<i64, String> {
    let offset_at = time_of_day
        .find(['+', '-', 'Z', 'z'])
        .ok_or_else(|| format!("today@{time_of_day}: give the offset, as in today@03:00+09:00 or today@03:00Z"))?;
    let (clock, offset) = time_of_day.split_at(offset_at);
    let clock = if clock.len() == 5 { format!("{clock}:00") } else { clock.to_owned() };
    let date_in_offset = chrono::DateTime::parse_from_rfc3339(&format!("{}T{clock}{offset}", now.format("%Y-%m-%d")))
        .map_err(|error| format!("today@{time_of_day}: expected HH:MM[:SS] and an offset (03:00+09:00): {error}"))?
        .offset()
        .to_owned();
    let today = now.with_timezone(&date_in_offset).format("%Y-%m-%d");
    chrono::DateTime::parse_from_rfc3339(&format!("{today}T{clock}{offset}"))
        .map(|time| time.timestamp_millis())
        .map_err(|error| format!("today@{time_of_day}: {error}"))
}

/// Where an incremental run starts from, read from the last completed runs
/// covering its products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watermark {
    /// Look for cells written from here: the runs' earliest start less the skew margin.
    pub since_ms: i64,
    /// The runs' earliest as-of time: the refresh slices of later nights are still due.
    pub as_of_ms: i64,
}

/// Where an incremental run over `range` starts, when asked for `last`: the
/// newest completed runs that together cover `range` ([`completed_cover`]
/// says which runs count), the earliest of their starts less `skew_margin`,
/// and the earliest of their as-of times. `None` when no such runs are in the
/// last [`WATERMARK_SEARCH`] records: then nothing says what is already
/// ranked, and the caller must rank everything.
async fn last_watermark(
    store: &Store,
    range: &KeyRange,
    skew_margin: Duration,
) -> Result<Option<Watermark>, RankerError> {
    let runs = store.recent_runs(WATERMARK_SEARCH).await?;
    let Some(cover) = completed_cover(&runs, range) else { return Ok(None) };
    // A cover is never empty; were it, the earliest times would rank everything.
    let watermark = Watermark {
        since_ms: cover.iter().map(|run| watermark_of(run, skew_margin)).min().unwrap_or(i64::MIN),
        as_of_ms: cover.iter().map(|run| run.as_of_ms).min().unwrap_or(i64::MIN),
    };
    let runs: Vec<&str> = cover.iter().map(|run| run.run_id.as_str()).collect();
    tracing::info!(?runs, since_ms = watermark.since_ms, "watermark from the newest completed runs covering the range");
    Ok(Some(watermark))
}

/// What makes a run over `scope` incremental from the last completed runs
/// covering it ([`last_watermark`]), refreshing a `1/refresh_days` slice a
/// night and the nights since those runs'. `None` when there are none:
/// the caller ranks every product.
async fn incremental_since_last(
    store: &Store,
    scope: &Scope,
    wanted: &ChangesWanted,
) -> Result<Option<Incremental>, RankerError> {
    let range = scope.key_range().unwrap_or_else(KeyRange::everything);
    Ok(last_watermark(store, &range, wanted.skew_margin).await?.map(|watermark| Incremental {
        since_ms: watermark.since_ms,
        refresh_days: Some(wanted.refresh_days),
        refreshed_until_ms: Some(watermark.as_of_ms),
        check_all_slots: wanted.check_all_slots,
    }))
}

/// The refresh cuts of the newest completed runs that recorded cuts and
/// together cover `range`, newest first ([`completed_cover`] over those
/// runs); `None` when no such runs are in the last [`WATERMARK_SEARCH`]
/// records (then the refresh lists the whole range, which records cuts).
pub(crate) async fn recorded_cuts(store: &Store, range: &KeyRange) -> Result<Option<Vec<RefreshCuts>>, RankerError> {
    let runs: Vec<RunRecord> =
        store.recent_runs(WATERMARK_SEARCH).await?.into_iter().filter(|run| run.refresh_cuts.is_some()).collect();
    let Some(cover) = completed_cover(&runs, range) else { return Ok(None) };
    // A record whose cuts do not decode would leave its range out of every
    // night's slice: then no cuts count, and the refresh lists everything.
    let cuts = cover.into_iter().map(|run| {
        let cuts: Option<Vec<Vec<u8>>> = run.refresh_cuts.iter().flatten().map(|cut| hex::decode(cut).ok()).collect();
        Some(RefreshCuts { range: run.key_range()?, cuts: cuts? })
    });
    Ok(cuts.collect())
}

/// How an incremental run finds what changed: since when, and its rolling refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangesWanted {
    /// From a time, or from the last completed runs covering the run's products.
    pub since: ChangedSince,
    /// Every product is re-ranked once in this many nights.
    pub refresh_days: u32,
    /// With `since` `last`, subtracted from the last completed runs' start.
    pub skew_margin: Duration,
    /// Also check every rank slot for a deleted comment ([`Incremental::check_all_slots`]).
    pub check_all_slots: bool,
}

/// Makes `options` incremental as `wanted` says, reading the run history for
/// `last`. With no completed run covering the scope there is nothing to
/// start from: the run ranks every product, and the log says so.
pub async fn make_incremental(
    store: &Store,
    options: &mut RunOptions,
    wanted: &ChangesWanted,
) -> Result<(), RankerError> {
    options.incremental = match wanted.since {
        ChangedSince::Time(since_ms) => {
            // Changes from the time given, but the refresh still makes up the
            // nights since the last completed runs covering these products:
            // this run, recorded, becomes the next one's starting point.
            let range = options.scope.key_range().unwrap_or_else(KeyRange::everything);
            let last = last_watermark(store, &range, wanted.skew_margin).await?;
            Some(Incremental {
                since_ms,
                refresh_days: Some(wanted.refresh_days),
                refreshed_until_ms: last.map(|watermark| watermark.as_of_ms),
                check_all_slots: wanted.check_all_slots,
            })
        }
        ChangedSince::Last => incremental_since_last(store, &options.scope, wanted).await?,
    };
    if options.incremental.is_none() {
        tracing::warn!("no completed runs covering these products in the run history: ranking every product");
    }
    Ok(())
}

/// Writes a run record; a failure is logged, never fatal: the ranking matters
/// more than its history line, and a missing "succeeded" only makes the next
/// `--changed-since last` start earlier.
pub async fn save(store: &Store, record: &RunRecord) {
    if let Err(error) = store.record_run(record).await {
        tracing::error!(run_id = %record.run_id, status = %record.status, %error, "could not record the run");
    }
}

/// A completed run's watermark: its start (taken before it listed or searched
/// anything, so a change it could have missed is newer) less the margin.
pub fn watermark_of(run: &RunRecord, skew_margin: Duration) -> i64 {
    run.started_ms.saturating_sub(i64::try_from(skew_margin.as_millis()).unwrap_or(i64::MAX))
}

/// The record of a run that is starting under `options`: running, its kind,
/// its key range and, when incremental, where it looks for changes from.
pub fn started_record(
    run_id: String,
    holder: String,
    slot_ms: i64,
    attempt: u32,
    started_ms: i64,
    options: &RunOptions,
) -> RunRecord {
    let range = options.scope.key_range().unwrap_or_else(KeyRange::everything);
    let mut record = RunRecord::started(run_id, holder, slot_ms, attempt, started_ms)
        .with_range(&range.start, range.stop.as_deref());
    record.as_of_ms = options.as_of_ms;
    if let Some(incremental) = options.incremental {
        record.kind = RunKind::Incremental;
        record.changed_since_ms = Some(incremental.since_ms);
    }
    record
}

/// How a run ended: its status and, unless it succeeded, why. The one
/// reading of a run's result, for its record and for the exit status of a
/// run nobody records. `stopped` says why the run was told to stop, if it was.
pub fn end_of(result: &Result<RunReport, RankerError>, stopped: Option<&StopCause>) -> (RunStatus, Option<String>) {
    let report = match result {
        Ok(report) => report,
        Err(error) => return (RunStatus::Failed, Some(error.to_string())),
    };
    if report.interrupted {
        return match stopped {
            Some(StopCause::LeaseLost(reason)) => {
                (RunStatus::Lost, Some(format!("lease lost: {reason}; stopped after finishing the products in flight")))
            }
            Some(StopCause::Shutdown) | None => (
                RunStatus::Interrupted,
                Some("stopped by a shutdown signal after finishing the products in flight".to_owned()),
            ),
        };
    }
    if report.failures.is_empty() {
        (RunStatus::Succeeded, None)
    } else {
        (RunStatus::Failed, Some(format!("{} products could not be ranked", report.failures.len())))
    }
}

/// Writes how a run ended into its record: its counts, status and error
/// ([`end_of`]).
pub fn conclude(record: &mut RunRecord, result: &Result<RunReport, RankerError>, stopped: Option<&StopCause>) {
    if let Ok(report) = result {
        record.products = report.products_ranked;
        record.comments_scored = report.comments_scored;
        record.slots_written = report.slots_written;
        record.slots_deleted = report.slots_deleted;
        record.products_changed = report.changes.as_ref().map(|changes| changes.products_to_rank);
        record.detection_ms = report.changes.as_ref().map(|changes| changes.detection_ms);
        record.slots_checked = report.changes.as_ref().map(|changes| changes.slots_checked);
        record.refresh_cuts =
            report.refresh_cuts.as_ref().map(|cuts| cuts.iter().map(|cut| hex::encode(cut.as_bytes())).collect());
        record.failures = u64::try_from(report.failures.len()).unwrap_or(u64::MAX);
        record.failure_samples = report
            .failures
            .iter()
            .take(FAILURE_SAMPLES)
            .map(|failure| format!("{}: {}", failure.product, failure.error))
            .collect();
    }
    (record.status, record.error) = end_of(result, stopped);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pace::Pacer;
    use crate::{ChangeReport, Incremental, PacingSettings, ProductFailure, Scope, Shard};

    const SLOT_MS: i64 = 1_795_000_000_000;

    fn started() -> RunRecord {
        RunRecord::started("run-a2".to_owned(), "daemon-a".to_owned(), SLOT_MS, 2, SLOT_MS + 5)
    }

    fn report(failures: usize, interrupted: bool) -> RunReport {
        RunReport {
            as_of_ms: SLOT_MS,
            dry_run: false,
            interrupted,
            products_ranked: 7,
            comments_scored: 70,
            slots_written: 40,
            slots_deleted: 3,
            summaries_written: 7,
            skipped_rows: 1,
            comment_fetches: 7,
            failures: (0..failures)
                .map(|n| ProductFailure { product: format!("p{n}"), error: "HBase is unavailable".to_owned() })
                .collect(),
            duration_ms: 1_000,
            pacing: Pacer::new(&PacingSettings::default()).report(70, Duration::from_secs(1)),
            changes: None,
            refresh_cuts: None,
        }
    }

    #[test]
    fn changed_since_takes_last_rfc_3339_or_epoch_milliseconds() {
        assert_eq!("last".parse::<ChangedSince>(), Ok(ChangedSince::Last));
        assert_eq!(" 1714532400000 ".parse::<ChangedSince>(), Ok(ChangedSince::Time(1_714_532_400_000)));
        assert_eq!("2024-05-01T12:00:00+09:00".parse::<ChangedSince>(), Ok(ChangedSince::Time(1_714_532_400_000)));
        for bad in ["", "Last", "yesterday", "2024-05-01"] {
            assert!(bad.parse::<ChangedSince>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_watermark_is_the_start_less_the_margin() {
        assert_eq!(watermark_of(&started(), Duration::from_secs(300)), SLOT_MS + 5 - 300_000);
        assert_eq!(watermark_of(&started(), Duration::ZERO), SLOT_MS + 5);
    }

    #[test]
    fn an_incremental_shard_run_records_its_kind_range_and_watermark() {
        let shard = Shard::new(1, 4).expect("shard");
        let range = KeyRange { start: b"FV".to_vec(), stop: Some(b"V".to_vec()) };
        let mut options = RunOptions::new(Scope::Shard { shard, range: range.clone() }, SLOT_MS);
        options.incremental = Some(Incremental {
            since_ms: SLOT_MS - 86_400_000,
            refresh_days: Some(7),
            refreshed_until_ms: None,
            check_all_slots: false,
        });
        let record = started_record("run".to_owned(), "me".to_owned(), SLOT_MS, 1, SLOT_MS + 5, &options);
        assert_eq!((record.kind, record.changed_since_ms), (RunKind::Incremental, Some(SLOT_MS - 86_400_000)));
        // The range in hex: `FV` to `V`.
        assert_eq!((record.range_start.as_str(), record.range_stop.as_deref()), ("4656", Some("56")));
        let full = started_record(
            "run".to_owned(),
            "me".to_owned(),
            SLOT_MS,
            1,
            SLOT_MS,
            &RunOptions::new(Scope::All, SLOT_MS),
        );
        assert_eq!((full.kind, full.changed_since_ms), (RunKind::Full, None));
        assert_eq!((full.range_start.as_str(), full.range_stop.as_deref()), ("", None), "everything");
    }

    #[test]
    fn a_clean_run_succeeds_with_its_counts() {
        let mut record = started();
        let mut clean = report(0, false);
        clean.changes =
            Some(ChangeReport { products_to_rank: 7, detection_ms: 41, slots_checked: 0, ..ChangeReport::default() });
        clean.refresh_cuts = Some(vec![common::Id::parse("productId", "P000000042").expect("id")]);
        conclude(&mut record, &Ok(clean), None);
        assert_eq!(record.status, RunStatus::Succeeded);
        assert_eq!(
            (record.products, record.comments_scored, record.slots_written, record.slots_deleted, record.failures),
            (7, 70, 40, 3, 0)
        );
        assert_eq!((record.error, record.products_changed), (None, Some(7)));
        assert_eq!((record.detection_ms, record.slots_checked), (Some(41), Some(0)));
        assert_eq!(record.refresh_cuts, Some(vec!["50303030303030303432".to_owned()]), "the cut's key in hex");
    }

    #[test]
    fn failed_products_fail_the_attempt_and_the_first_twenty_are_kept() {
        let mut record = started();
        conclude(&mut record, &Ok(report(25, false)), None);
        assert_eq!((record.status, record.failures), (RunStatus::Failed, 25));
        assert_eq!(record.failure_samples.len(), FAILURE_SAMPLES);
        assert_eq!(record.failure_samples[0], "p0: HBase is unavailable");
        assert_eq!(record.error.as_deref(), Some("25 products could not be ranked"));
    }

    #[test]
    fn a_stopped_run_says_whether_a_shutdown_or_a_lost_lease_stopped_it() {
        let mut by_signal = started();
        conclude(&mut by_signal, &Ok(report(1, true)), Some(&StopCause::Shutdown));
        assert_eq!(by_signal.status, RunStatus::Interrupted, "an interruption is not a failure");
        assert!(by_signal.error.as_deref().is_some_and(|error| error.contains("shutdown signal")), "{by_signal:?}");
        let mut taken_over = started();
        let reason = "the lease was taken over (now held by usurper)".to_owned();
        conclude(&mut taken_over, &Ok(report(0, true)), Some(&StopCause::LeaseLost(reason)));
        assert_eq!(taken_over.status, RunStatus::Lost);
        assert_eq!(
            taken_over.error.as_deref(),
            Some(
                "lease lost: the lease was taken over (now held by usurper); stopped after finishing the products in \
                 flight"
            )
        );
        assert_eq!(taken_over.products, 7, "the counts of what it did before it stopped");
    }

    #[test]
    fn a_run_the_ranker_refused_fails_with_its_reason() {
        let mut record = started();
        conclude(&mut record, &Err(RankerError::InvalidOptions("page_rows must be at least 1".to_owned())), None);
        assert_eq!(record.status, RunStatus::Failed);
        assert_eq!(record.error.as_deref(), Some("invalid run options: page_rows must be at least 1"));
    }
}
