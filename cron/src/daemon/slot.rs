//! The night's slot: one run at a time in this daemon, one daemon at a time
//! through the HBase lease. A slot whose lease another daemon holds for the
//! same night is stood by for (and taken over if that run ends unfinished); a
//! lease that lapsed is taken over and its holder's run closed in the history;
//! the attempts run while the lease is kept renewed; the lease is released,
//! the slot marked completed unless the run was interrupted (a lease lost
//! midway is not released: it is the new holder's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::exit::ExitStatus;
use common::store::lease::{LeaseRequest, LeaseState, TakeOutcome};
use common::store::runs::{RunRecord, RunStatus};
use ranker::lease::{while_held, KeeperEnd, RunStop};

use super::{utc, Daemon, DaemonError, Inner};
use crate::metrics;

/// How many recent history records are searched for the runs of a holder whose lease lapsed.
const ABANDONED_RUN_SEARCH: usize = 50;

/// What came of one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotOutcome {
    /// The ranker ran; the record of the last attempt says how it ended
    /// (boxed: a record is large beside the other outcomes).
    Ran(Box<RunRecord>),
    /// This daemon's previous run was still going, so the tick was skipped.
    Overlap,
    /// Another daemon holds the lease.
    LeaseHeld(LeaseState),
    /// The slot was already completed (by this or another daemon).
    AlreadyCompleted(LeaseState),
    /// A shutdown came before the first attempt started.
    Stopped,
}

impl SlotOutcome {
    /// The process exit status for `--once` (the table in `common::exit`): 0
    /// succeeded (or already done), 1 failed or lost its lease, 75 skipped
    /// because another run holds the lease (try later), 130 interrupted.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            SlotOutcome::Ran(record) => ExitStatus::from(record.status),
            SlotOutcome::AlreadyCompleted(_) => ExitStatus::Success,
            SlotOutcome::Stopped => ExitStatus::Interrupted,
            SlotOutcome::Overlap | SlotOutcome::LeaseHeld(_) => ExitStatus::TryLater,
        }
    }

    fn tick_result(&self) -> &'static str {
        match self {
            SlotOutcome::Ran(_) => "ran",
            SlotOutcome::Overlap => "overlap",
            SlotOutcome::LeaseHeld(_) => "lease_held",
            SlotOutcome::AlreadyCompleted(_) => "completed",
            SlotOutcome::Stopped => "stopped",
        }
    }
}

/// Holds the daemon's "a run is going" flag; clears it when dropped.
struct RunningGuard<'a>(&'a AtomicBool);

impl<'a> RunningGuard<'a> {
    fn enter(flag: &'a AtomicBool) -> Option<RunningGuard<'a>> {
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| RunningGuard(flag))
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// How often a daemon standing by for another daemon's run of the same slot
/// looks at the lease: often enough to take over soon after it comes free.
fn standby_poll(lease_ttl: Duration) -> Duration {
    (lease_ttl / 10).clamp(Duration::from_millis(500), Duration::from_secs(30))
}

impl Daemon {
    /// Runs the slot scheduled at `slot_ms` (ms since the epoch) unless this
    /// daemon is already running, another daemon holds the lease, or the slot
    /// was completed.
    pub async fn run_slot(&self, slot_ms: i64) -> Result<SlotOutcome, DaemonError> {
        let Some(_running) = RunningGuard::enter(&self.inner.running) else {
            tracing::warn!(slot = %utc(slot_ms), "a tick fired while the previous run is still going; skipping it");
            metrics::tick("overlap");
            return Ok(SlotOutcome::Overlap);
        };
        let outcome = self.run_slot_exclusively(slot_ms).await?;
        metrics::tick(outcome.tick_result());
        Ok(outcome)
    }

    async fn run_slot_exclusively(&self, slot_ms: i64) -> Result<SlotOutcome, DaemonError> {
        let Inner { store, settings, clock, shutdown, .. } = self.inner.as_ref();
        let request = settings.lease.request(slot_ms);
        let mut standing_by = false;
        let lease = loop {
            let Some(outcome) = self.take_lease_patiently(&request).await? else {
                return Ok(SlotOutcome::Stopped);
            };
            match outcome {
                TakeOutcome::Held(state) if state.slot_ms == Some(slot_ms) => {
                    // Another daemon runs this very slot. Stand by: if its run
                    // is interrupted or it dies, the lease comes free with the
                    // slot not completed, and this daemon runs the night instead.
                    if !standing_by {
                        tracing::info!(
                            slot = %utc(slot_ms),
                            holder = state.holder.as_deref().unwrap_or_default(),
                            "another daemon is running this slot; standing by until it completes"
                        );
                        standing_by = true;
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(SlotOutcome::LeaseHeld(state)),
                        () = tokio::time::sleep(standby_poll(settings.lease.ttl)) => {}
                    }
                }
                TakeOutcome::Held(state) => {
                    tracing::info!(
                        slot = %utc(slot_ms),
                        holder = state.holder.as_deref().unwrap_or_default(),
                        holder_slot = ?state.slot_ms.map(utc),
                        expires = %utc(state.expires_ms),
                        "another daemon holds the lease for another slot; skipping this tick"
                    );
                    return Ok(SlotOutcome::LeaseHeld(state));
                }
                TakeOutcome::Completed(state) => {
                    tracing::info!(
                        slot = %utc(slot_ms),
                        completed_by = state.completed_by.as_deref().unwrap_or_default(),
                        "this slot was already completed; skipping this tick"
                    );
                    return Ok(SlotOutcome::AlreadyCompleted(state));
                }
                TakeOutcome::Taken { lease, expired } => {
                    if let Some(expired) = expired {
                        self.close_abandoned_runs(&expired).await;
                    }
                    break lease;
                }
            }
        };
        tracing::info!(slot = %utc(slot_ms), lease = %settings.lease.name, "took the lease");
        // A shutdown stops the attempt in progress through its parent token.
        let stop = RunStop::child_of(shutdown);
        let attempts = self.attempts(slot_ms, &stop);
        let ((last, _), end) =
            while_held(store, clock, lease, settings.lease.ttl, &stop, attempts, |(_, completed)| *completed).await;
        if let KeeperEnd::Lost(_) = end {
            metrics::lease_lost();
        }
        Ok(last.map_or(SlotOutcome::Stopped, |record| SlotOutcome::Ran(Box::new(record))))
    }

    /// Asks for the lease, retrying transient HBase failures per the retry
    /// policy, so a short outage at the scheduled time does not cost the night.
    /// `None` when a shutdown came first.
    async fn take_lease_patiently(&self, request: &LeaseRequest) -> Result<Option<TakeOutcome>, DaemonError> {
        let Inner { store, settings, clock, shutdown, .. } = self.inner.as_ref();
        let mut attempt = 1;
        loop {
            match store.take_lease(request, clock.as_ref()).await {
                Ok(outcome) => return Ok(Some(outcome)),
                Err(error) if error.is_transient() => {
                    attempt += 1;
                    let Some(delay) = settings.retry.delay_before(attempt) else {
                        return Err(error.into());
                    };
                    tracing::warn!(%error, ?delay, "cannot reach HBase to take the lease; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(None),
                        () = tokio::time::sleep(delay) => {}
                    }
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Runs attempts until one does not fail (it succeeded, or was stopped),
    /// the policy allows no more, or `stop` is cancelled. Returns the last attempt's record and
    /// whether the slot counts as completed (succeeded, or failed with every
    /// attempt spent).
    async fn attempts(&self, slot_ms: i64, stop: &RunStop) -> (Option<RunRecord>, bool) {
        let policy = self.inner.settings.retry;
        let attempts = policy.attempts.max(1);
        let mut last: Option<RunRecord> = None;
        for attempt in 1..=attempts {
            if let Some(delay) = policy.delay_before(attempt) {
                tracing::info!(attempt, ?delay, "retrying the failed run after a pause");
                tokio::select! {
                    () = stop.token().cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            if stop.token().is_cancelled() {
                break;
            }
            let record = self.attempt(slot_ms, attempt, stop).await;
            let failed = record.status == RunStatus::Failed;
            last = Some(record);
            if !failed {
                break;
            }
        }
        let completed = slot_completed(last.as_ref(), attempts);
        (last, completed)
    }

    /// A lease lapsed while its holder had a run going (the holder crashed or
    /// was killed): that run's history still says "running". Say what happened.
    async fn close_abandoned_runs(&self, expired: &LeaseState) {
        let holder = expired.holder.clone().unwrap_or_default();
        tracing::warn!(
            %holder,
            slot = ?expired.slot_ms.map(utc),
            expired = %utc(expired.expires_ms),
            "took over a lease that lapsed without a release; its holder stopped renewing"
        );
        let runs = match self.inner.store.recent_runs(ABANDONED_RUN_SEARCH).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(%error, "could not read the history to close the abandoned run");
                return;
            }
        };
        let abandoned = runs.into_iter().filter(|run| {
            run.status == RunStatus::Running && run.holder == holder && Some(run.slot_ms) == expired.slot_ms
        });
        for mut run in abandoned {
            run.status = RunStatus::Interrupted;
            run.ended_ms = Some(expired.expires_ms);
            run.error = Some(format!("the holder {holder} stopped renewing its lease (crashed or killed); it lapsed"));
            self.save(&run).await;
        }
    }
}

/// Whether a slot counts as completed after its last attempt: it succeeded,
/// or it failed with every attempt spent. A run interrupted (or stopped by
/// a lost lease) leaves the slot to the next tick or the other daemon.
fn slot_completed(last: Option<&RunRecord>, attempts: u32) -> bool {
    last.is_some_and(|record| match record.status {
        RunStatus::Succeeded => true,
        RunStatus::Failed => record.attempt >= attempts,
        RunStatus::Running | RunStatus::Interrupted | RunStatus::Lost => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_run_enters_at_a_time_and_leaving_reopens_the_gate() {
        let flag = AtomicBool::new(false);
        let first = RunningGuard::enter(&flag).expect("first run enters");
        assert!(RunningGuard::enter(&flag).is_none(), "a second run must be refused while the first goes on");
        drop(first);
        assert!(RunningGuard::enter(&flag).is_some(), "after the first run the next one enters");
    }

    #[test]
    fn exit_codes_tell_success_failure_interruption_and_skips_apart() {
        let record = |status| RunRecord { status, ..RunRecord::started("r".to_owned(), "h".to_owned(), 0, 1, 0) };
        let free = LeaseState {
            holder: None,
            slot_ms: None,
            acquired_ms: None,
            expires_ms: 0,
            completed_slot_ms: Some(0),
            completed_by: None,
        };
        assert_eq!(SlotOutcome::Ran(Box::new(record(RunStatus::Succeeded))).exit_status(), ExitStatus::Success);
        assert_eq!(SlotOutcome::Ran(Box::new(record(RunStatus::Failed))).exit_status(), ExitStatus::Failure);
        assert_eq!(SlotOutcome::Ran(Box::new(record(RunStatus::Interrupted))).exit_status(), ExitStatus::Interrupted);
        assert_eq!(SlotOutcome::Ran(Box::new(record(RunStatus::Lost))).exit_status(), ExitStatus::Failure);
        assert_eq!(SlotOutcome::AlreadyCompleted(free.clone()).exit_status(), ExitStatus::Success);
        assert_eq!(SlotOutcome::LeaseHeld(free).exit_status(), ExitStatus::TryLater);
        assert_eq!(SlotOutcome::Overlap.exit_status(), ExitStatus::TryLater);
        assert_eq!(SlotOutcome::Stopped.exit_status(), ExitStatus::Interrupted);
    }

    #[test]
    fn standing_by_polls_a_tenth_of_the_ttl_within_half_a_second_and_thirty() {
        assert_eq!(standby_poll(Duration::from_secs(60)), Duration::from_secs(6));
        assert_eq!(standby_poll(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(standby_poll(Duration::from_secs(3_600)), Duration::from_secs(30));
    }

    #[test]
    fn a_slot_is_completed_by_a_success_or_by_its_last_failed_attempt_never_by_an_interruption() {
        let record =
            |status, attempt| RunRecord { status, ..RunRecord::started("r".to_owned(), "h".to_owned(), 0, attempt, 0) };
        assert!(!slot_completed(None, 3), "no attempt ran");
        assert!(slot_completed(Some(&record(RunStatus::Succeeded, 1)), 3));
        assert!(!slot_completed(Some(&record(RunStatus::Failed, 2)), 3), "an attempt is left");
        assert!(slot_completed(Some(&record(RunStatus::Failed, 3)), 3), "every attempt spent");
        assert!(!slot_completed(Some(&record(RunStatus::Interrupted, 3)), 3));
        assert!(!slot_completed(Some(&record(RunStatus::Lost, 3)), 3));
        assert!(!slot_completed(Some(&record(RunStatus::Running, 1)), 3));
    }
}
