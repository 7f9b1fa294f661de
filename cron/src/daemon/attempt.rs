//! One attempt at a slot: what it ranks (everything, or with incremental
//! nights what changed since the last completed run), run in-process as of
//! the slot's time as one recorded run (`ranker::recorded`, which `ranker run`
//! shares), and the attempt's metrics. Also the last-success gauge, read back
//! from the shared history.

use common::store::runs::{RunRecord, RunStatus};
use ranker::history::{ChangedSince, ChangesWanted};
use ranker::lease::RunStop;
use ranker::recorded::RunIdentity;
use ranker::RankerError;
use tracing::Instrument as _;

use super::{utc, Daemon, Inner};
use crate::metrics;

/// How many recent history records are searched for the latest success.
const LAST_SUCCESS_SEARCH: usize = 50;

impl Daemon {
    /// One attempt: a recorded run ([`ranker::recorded::run_recorded`]) as
    /// of the slot's time, prepared by [`Daemon::prepare`], with its metrics.
    pub(super) async fn attempt(&self, slot_ms: i64, attempt: u32, stop: &RunStop) -> RunRecord {
        let Inner { store, settings, clock, .. } = self.inner.as_ref();
        // Every attempt at a slot ranks as of the slot's time, so retries and
        // the other daemon would write exactly the same slots.
        let mut options = settings.run_options.clone();
        options.as_of_ms = slot_ms;
        options.dry_run = false;
        let identity = RunIdentity::scheduled(settings.lease.holder.clone(), slot_ms, attempt);
        let timer = std::time::Instant::now();
        metrics::run_in_progress(true);
        // When its trace is kept, an attempt is one trace, as a `ranker` command is.
        let span = common::traces::root_span(None, || {
            tracing::info_span!("attempt", otel.name = "ranker-cron attempt", slot_ms, attempt)
        });
        let outcome = ranker::recorded::run_recorded(
            store,
            options,
            identity,
            clock.as_ref(),
            async |options: &mut ranker::RunOptions| self.prepare(slot_ms, options).await,
            stop,
        )
        .instrument(span)
        .await;
        metrics::run_in_progress(false);
        let record = outcome.record;
        if let Ok(report) = &outcome.result {
            if let Some(changes) = &report.changes {
                metrics::changes_found(changes);
            }
        }
        metrics::attempt_finished(record.status, record.kind, timer.elapsed());
        if record.status == RunStatus::Succeeded {
            if let Some(ended_ms) = record.ended_ms {
                metrics::last_success(ended_ms);
            }
        }
        record
    }

    /// Decides what this slot's run ranks: with incremental nights on, a slot
    /// off the full schedule ranks what changed since the last completed run
    /// (every product when there is none), and a slot on it ranks everything.
    async fn prepare(&self, slot_ms: i64, options: &mut ranker::RunOptions) -> Result<(), RankerError> {
        let Some(nights) = &self.inner.settings.incremental else { return Ok(()) };
        if nights.is_full_slot(slot_ms) {
            tracing::info!(slot = %utc(slot_ms), "the full schedule's slot: ranking every product");
            return Ok(());
        }
        let wanted = ChangesWanted {
            since: ChangedSince::Last,
            refresh_days: nights.refresh_days,
            skew_margin: nights.skew_margin,
            // The nights rely on the refresh for comments deleted directly;
            // the walk of every slot is an operator's `ranker run --check-all-slots`.
            check_all_slots: false,
        };
        ranker::history::make_incremental(&self.inner.store, options, &wanted).await
    }

    /// Writes a run record ([`ranker::history::save`]: a failure is logged, never fatal).
    pub(super) async fn save(&self, record: &RunRecord) {
        ranker::history::save(&self.inner.store, record).await;
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
