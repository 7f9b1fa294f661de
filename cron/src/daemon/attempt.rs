//! One attempt at a slot: its record in the run history (written as running,
//! then rewritten with how it ended), the ranker run in-process as of the
//! slot's time, and the attempt's metrics. Also the last-success gauge, read
//! back from the shared history.

use common::store::runs::{RunRecord, RunStatus};
use ranker::{RankerError, RunReport};
use tokio_util::sync::CancellationToken;

use super::{utc, Daemon, Inner};
use crate::metrics;

/// How many recent history records are searched for the latest success.
const LAST_SUCCESS_SEARCH: usize = 50;
/// How many product failures a run record keeps verbatim.
const FAILURE_SAMPLES: usize = 20;

impl Daemon {
    /// One attempt: record it as running, run the ranker in-process, record how it ended.
    pub(super) async fn attempt(&self, slot_ms: i64, attempt: u32, stop: &CancellationToken) -> RunRecord {
        let Inner { store, settings, clock, .. } = self.inner.as_ref();
        let mut record =
            RunRecord::started(run_id(slot_ms, attempt), settings.holder.clone(), slot_ms, attempt, clock.now_ms());
        self.save(&record).await;
        tracing::info!(run_id = %record.run_id, slot = %utc(slot_ms), attempt, "ranking run started");

        // Every attempt at a slot ranks as of the slot's time, so retries and
        // the other daemon would write exactly the same slots.
        let mut options = settings.run_options.clone();
        options.as_of_ms = record.as_of_ms;
        options.dry_run = false;
        let timer = std::time::Instant::now();
        metrics::run_in_progress(true);
        let result = ranker::run(store, &options, stop.clone()).await;
        metrics::run_in_progress(false);
        record.ended_ms = Some(clock.now_ms());
        conclude(&mut record, result, self.inner.shutdown.is_cancelled());
        self.save(&record).await;
        metrics::attempt_finished(record.status, timer.elapsed(), record.products);
        if record.status == RunStatus::Succeeded {
            if let Some(ended_ms) = record.ended_ms {
                metrics::last_success(ended_ms);
            }
        }
        tracing::info!(
            run_id = %record.run_id,
            status = %record.status,
            products = record.products,
            comments_scored = record.comments_scored,
            slots_written = record.slots_written,
            slots_deleted = record.slots_deleted,
            failures = record.failures,
            duration_ms = record.duration_ms().unwrap_or_default(),
            error = record.error.as_deref().unwrap_or_default(),
            "ranking run ended"
        );
        record
    }

    /// Writes a run record; a failure is logged, never fatal, because the
    /// ranking itself matters more than its history line.
    pub(super) async fn save(&self, record: &RunRecord) {
        if let Err(error) = self.inner.store.record_run(record).await {
            tracing::error!(run_id = %record.run_id, status = %record.status, %error, "could not record the run");
        }
    }

    /// Sets the last-success gauge from the shared history, so every daemon
    /// reports the latest success of any of them.
    pub(super) async fn refresh_last_success(&self) {
        match self.inner.store.recent_runs(LAST_SUCCESS_SEARCH).await {
            Ok(runs) => {
                let latest =
                    runs.iter().filter(|run| run.status == RunStatus::Succeeded).filter_map(|run| run.ended_ms).max();
                if let Some(ended_ms) = latest {
                    metrics::last_success(ended_ms);
                }
            }
            Err(error) => tracing::warn!(%error, "could not read the run history for the last-success gauge"),
        }
    }
}

/// An attempt's id: the slot's time, the attempt number and a random part
/// (two daemons may attempt one slot).
fn run_id(slot_ms: i64, attempt: u32) -> String {
    format!("{}-a{attempt}-{:06x}", utc(slot_ms).format("%Y%m%dT%H%M%SZ"), rand::random::<u32>() >> 8)
}

/// Writes how the ranker's run ended into its attempt's record. `shut_down`
/// says whether this daemon is shutting down, which tells an interruption by
/// a signal from one by a lost lease.
fn conclude(record: &mut RunRecord, result: Result<RunReport, RankerError>, shut_down: bool) {
    match result {
        Ok(report) => {
            record.products = report.products_ranked;
            record.comments_scored = report.comments_scored;
            record.slots_written = report.slots_written;
            record.slots_deleted = report.slots_deleted;
            record.failures = u64::try_from(report.failures.len()).unwrap_or(u64::MAX);
            record.failure_samples = report
                .failures
                .iter()
                .take(FAILURE_SAMPLES)
                .map(|failure| format!("{}: {}", failure.product, failure.error))
                .collect();
            record.status = if report.interrupted {
                record.error = Some(if shut_down {
                    "stopped by a shutdown signal after finishing the products in flight".to_owned()
                } else {
                    "stopped after finishing the products in flight".to_owned()
                });
                RunStatus::Interrupted
            } else if report.failures.is_empty() {
                RunStatus::Succeeded
            } else {
                record.error = Some(format!("{} products could not be ranked", report.failures.len()));
                RunStatus::Failed
            };
        }
        Err(error) => {
            record.status = RunStatus::Failed;
            record.error = Some(error.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use common::store::runs::validate_run_id;
    use ranker::pace::Pacer;
    use ranker::{PacingSettings, ProductFailure};

    use super::*;

    const SLOT_MS: i64 = 1_795_000_000_000;

    fn started() -> RunRecord {
        RunRecord::started(run_id(SLOT_MS, 2), "daemon-a".to_owned(), SLOT_MS, 2, SLOT_MS + 5)
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
            skipped_rows: 1,
            failures: (0..failures)
                .map(|n| ProductFailure { product: format!("p{n}"), error: "HBase is unavailable".to_owned() })
                .collect(),
            duration_ms: 1_000,
            pacing: Pacer::new(&PacingSettings::default()).report(70, Duration::from_secs(1)),
        }
    }

    #[test]
    fn an_attempt_starts_as_running_as_of_its_slot_under_a_valid_id() {
        let record = started();
        assert_eq!((record.status, record.as_of_ms, record.attempt), (RunStatus::Running, SLOT_MS, 2));
        assert!(record.run_id.starts_with("20261118T110640Z-a2-"), "{}", record.run_id);
        assert!(validate_run_id(&record.run_id).is_ok(), "{}", record.run_id);
        assert_ne!(run_id(SLOT_MS, 2), run_id(SLOT_MS, 2), "two daemons' attempts at one slot differ");
    }

    #[test]
    fn a_clean_run_succeeds_with_its_counts() {
        let mut record = started();
        conclude(&mut record, Ok(report(0, false)), false);
        assert_eq!(record.status, RunStatus::Succeeded);
        assert_eq!(
            (record.products, record.comments_scored, record.slots_written, record.slots_deleted, record.failures),
            (7, 70, 40, 3, 0)
        );
        assert_eq!(record.error, None);
    }

    #[test]
    fn failed_products_fail_the_attempt_and_the_first_twenty_are_kept() {
        let mut record = started();
        conclude(&mut record, Ok(report(25, false)), false);
        assert_eq!((record.status, record.failures), (RunStatus::Failed, 25));
        assert_eq!(record.failure_samples.len(), FAILURE_SAMPLES);
        assert_eq!(record.failure_samples[0], "p0: HBase is unavailable");
        assert_eq!(record.error.as_deref(), Some("25 products could not be ranked"));
    }

    #[test]
    fn an_interruption_says_whether_a_shutdown_caused_it() {
        let mut by_signal = started();
        conclude(&mut by_signal, Ok(report(1, true)), true);
        assert_eq!(by_signal.status, RunStatus::Interrupted, "an interruption is not a failure");
        assert!(by_signal.error.as_deref().is_some_and(|error| error.contains("shutdown signal")), "{by_signal:?}");
        let mut otherwise = started();
        conclude(&mut otherwise, Ok(report(0, true)), false);
        assert_eq!(otherwise.status, RunStatus::Interrupted);
        assert_eq!(otherwise.error.as_deref(), Some("stopped after finishing the products in flight"));
    }

    #[test]
    fn a_run_the_ranker_refused_fails_with_its_reason() {
        let mut record = started();
        conclude(&mut record, Err(RankerError::InvalidOptions("page_rows must be at least 1".to_owned())), false);
        assert_eq!(record.status, RunStatus::Failed);
        assert_eq!(record.error.as_deref(), Some("invalid run options: page_rows must be at least 1"));
    }
}
