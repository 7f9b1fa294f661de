//! One attempt at a slot: what it ranks (everything, or with incremental
//! nights what changed since the last completed run), its record in the run
//! history (written as running, then rewritten with how it ended), the ranker
//! run in-process as of the slot's time, and the attempt's metrics. Also the last-success gauge, read
//! back from the shared history.

use common::store::runs::{RunRecord, RunStatus};
use ranker::RankerError;
use tokio_util::sync::CancellationToken;

use super::{utc, Daemon, Inner};
use crate::metrics;

/// How many recent history records are searched for the latest success.
const LAST_SUCCESS_SEARCH: usize = 50;

impl Daemon {
    /// One attempt: record it as running, run the ranker in-process, record how it ended.
    pub(super) async fn attempt(&self, slot_ms: i64, attempt: u32, stop: &CancellationToken) -> RunRecord {
        let Inner { store, settings, clock, .. } = self.inner.as_ref();
        // Every attempt at a slot ranks as of the slot's time, so retries and
        // the other daemon would write exactly the same slots.
        let mut options = settings.run_options.clone();
        options.as_of_ms = slot_ms;
        options.dry_run = false;
        let started_ms = clock.now_ms();
        let planned = self.plan(slot_ms, &mut options).await;
        let mut record = ranker::history::started_record(
            run_id(slot_ms, attempt),
            settings.holder.clone(),
            slot_ms,
            attempt,
            started_ms,
            &options,
        );
        self.save(&record).await;
        tracing::info!(run_id = %record.run_id, slot = %utc(slot_ms), attempt, kind = record.kind.as_str(),
            changed_since_ms = record.changed_since_ms, "ranking run started");

        let timer = std::time::Instant::now();
        metrics::run_in_progress(true);
        let result = match planned {
            Ok(()) => ranker::run(store, &options, stop.clone()).await,
            Err(error) => Err(error),
        };
        metrics::run_in_progress(false);
        record.ended_ms = Some(clock.now_ms());
        ranker::history::conclude(&mut record, &result, self.inner.shutdown.is_cancelled());
        self.save(&record).await;
        if let Ok(report) = &result {
            if let Some(changes) = &report.changes {
                metrics::changes_found(changes);
            }
        }
        metrics::attempt_finished(record.status, record.kind, timer.elapsed(), record.products);
        if record.status == RunStatus::Succeeded {
            if let Some(ended_ms) = record.ended_ms {
                metrics::last_success(ended_ms);
            }
        }
        tracing::info!(
            run_id = %record.run_id,
            status = %record.status,
            kind = record.kind.as_str(),
            products_changed = record.products_changed,
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

    /// Decides what this slot's run ranks: with incremental nights on, a slot
    /// off the full schedule ranks what changed since the last completed run
    /// (every product when there is none), and a slot on it ranks everything.
    async fn plan(&self, slot_ms: i64, options: &mut ranker::RunOptions) -> Result<(), RankerError> {
        let Some(nights) = &self.inner.settings.incremental else { return Ok(()) };
        if nights.is_full_slot(slot_ms) {
            tracing::info!(slot = %utc(slot_ms), "the full schedule's slot: ranking every product");
            return Ok(());
        }
        options.incremental = ranker::history::incremental_since_last(
            &self.inner.store,
            &options.scope,
            nights.refresh_days,
            nights.skew_margin,
        )
        .await?;
        if options.incremental.is_none() {
            tracing::warn!(
                slot = %utc(slot_ms),
                "no completed run in the history to start an incremental run from: ranking every product"
            );
        }
        Ok(())
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

/// An attempt's id: the slot's time, the attempt number and a random part
/// (two daemons may attempt one slot).
fn run_id(slot_ms: i64, attempt: u32) -> String {
    format!("{}-a{attempt}-{:06x}", utc(slot_ms).format("%Y%m%dT%H%M%SZ"), rand::random::<u32>() >> 8)
}

#[cfg(test)]
mod tests {
    use common::store::runs::validate_run_id;

    use super::*;

    const SLOT_MS: i64 = 1_795_000_000_000;

    #[test]
    fn attempt_ids_name_the_slot_and_attempt_and_differ_between_daemons() {
        let id = run_id(SLOT_MS, 2);
        assert!(id.starts_with("20261118T110640Z-a2-"), "{id}");
        assert!(validate_run_id(&id).is_ok(), "{id}");
        assert_ne!(run_id(SLOT_MS, 2), run_id(SLOT_MS, 2), "two daemons' attempts at one slot differ");
    }
}
