//! The daemon: turns schedule ticks into ranking runs, at most one at a time.
//!
//! A tick stands for a slot (its scheduled time). For each slot the daemon
//!
//! 1. skips the tick if its own previous run is still going;
//! 2. takes the HBase lease for the slot, or skips it when another daemon holds
//!    the lease or the slot was already completed;
//! 3. keeps the lease renewed (every TTL/3) while it runs the ranker in-process,
//!    retrying a failed run per the [`RetryPolicy`], and records every attempt
//!    in the run history;
//! 4. releases the lease, marking the slot completed unless the run was
//!    interrupted, so the other daemon does not run the night again.
//!
//! A shutdown (SIGTERM) cancels the ranker's stop token: it takes no new
//! products, finishes those in flight, and the attempt is recorded as interrupted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::exit::ExitStatus;
use common::store::lease::{Clock, LeaseRequest, LeaseState, ReleaseOutcome, TakeOutcome};
use common::store::runs::{RunRecord, RunStatus};
use common::store::Store;
use tokio_cron_scheduler::{Job, JobScheduler, JobSchedulerError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics;
use crate::retry::RetryPolicy;
use crate::schedule::Schedule;
pub use ranker::keeper::default_holder;
use ranker::keeper::{keep_lease, KeeperEnd, StoreRenewer};

/// How many recent history records are searched for the runs of a holder whose lease lapsed.
const ABANDONED_RUN_SEARCH: usize = 50;
/// How many recent history records are searched for the latest success.
const LAST_SUCCESS_SEARCH: usize = 50;
/// How many product failures a run record keeps verbatim.
const FAILURE_SAMPLES: usize = 20;
/// How often the daemon checks the zone's UTC offset and refreshes the last-success gauge.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(60);
/// How far back a re-created job looks for a slot it may have missed: two
/// housekeeping rounds, so a late round still finds it.
const MISSED_SLOT_WINDOW: chrono::TimeDelta = chrono::TimeDelta::seconds(120);
/// Refresh the last-success gauge every this many housekeeping rounds.
const REFRESH_SUCCESS_EVERY_ROUNDS: u64 = 5;

/// Everything the daemon needs to know besides the store and the clock.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// When to run.
    pub schedule: Schedule,
    /// The lease's name (its row in `ranker-lease`); daemons that must not run
    /// at the same time share it.
    pub lease_name: String,
    /// How long the lease lasts without renewal; renewed every third of it.
    pub lease_ttl: Duration,
    /// This daemon's name in the lease and the history (`host:pid:random`).
    pub holder: String,
    /// How failed runs are retried.
    pub retry: RetryPolicy,
    /// The ranker's options; each run sets its own as-of time.
    pub run_options: ranker::RunOptions,
}

/// How the daemon starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// Wait for the schedule.
    Schedule,
    /// Run once now, and keep the schedule.
    RunNowThenSchedule,
    /// Run once now and return.
    Once,
}

/// What came of one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotOutcome {
    /// The ranker ran; the record of the last attempt says how it ended.
    Ran(RunRecord),
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
    /// succeeded (or already done), 1 failed, 75 skipped because another run
    /// holds the lease (try later), 130 interrupted.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            SlotOutcome::Ran(record) => match record.status {
                RunStatus::Succeeded => ExitStatus::Success,
                RunStatus::Failed | RunStatus::Running => ExitStatus::Failure,
                RunStatus::Interrupted => ExitStatus::Interrupted,
            },
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

/// What can stop the daemon itself (as opposed to failing one run).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// HBase failed while taking the lease or reading the history.
    #[error(transparent)]
    Store(#[from] common::Error),
    /// The scheduler could not be set up.
    #[error("the scheduler failed: {0}")]
    Scheduler(#[from] JobSchedulerError),
}

/// The ranking daemon; cheap to clone (clones share one state).
#[derive(Debug, Clone)]
pub struct Daemon {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    settings: DaemonSettings,
    clock: Arc<dyn Clock>,
    running: AtomicBool,
    shutdown: CancellationToken,
    tracker: TaskTracker,
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

/// Renders ms since the epoch for logs and ids.
fn utc(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}

impl Daemon {
    /// A daemon over `store`, judging lease expiry by `clock`.
    pub fn new(store: Store, settings: DaemonSettings, clock: Arc<dyn Clock>) -> Daemon {
        Daemon {
            inner: Arc::new(Inner {
                store,
                settings,
                clock,
                running: AtomicBool::new(false),
                shutdown: CancellationToken::new(),
                tracker: TaskTracker::new(),
            }),
        }
    }

    /// Cancel this token to shut down: the run in progress stops taking new
    /// products, finishes those in flight and is recorded as interrupted; then
    /// [`Daemon::serve`] returns.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    /// The daemon's settings.
    pub fn settings(&self) -> &DaemonSettings {
        &self.inner.settings
    }

    /// Runs until shut down (or, with [`StartMode::Once`], until one run has
    /// ended, returning how it went).
    pub async fn serve(&self, mode: StartMode) -> Result<Option<SlotOutcome>, DaemonError> {
        if mode == StartMode::Once {
            return self.run_slot(self.inner.clock.now_ms()).await.map(Some);
        }
        self.refresh_last_success().await;
        let mut scheduler = JobScheduler::new().await?;
        let mut job = Some(self.add_job(&scheduler).await?);
        scheduler.start().await?;
        let schedule = &self.inner.settings.schedule;
        tracing::info!(
            expression = schedule.expression(),
            zone = %schedule.zone(),
            next = ?schedule.next_after(Utc::now()),
            holder = %self.inner.settings.holder,
            "ranking scheduled"
        );
        if mode == StartMode::RunNowThenSchedule {
            self.spawn_slot(self.inner.clock.now_ms());
        }
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_EVERY);
        let mut rounds: u64 = 0;
        loop {
            tokio::select! {
                () = self.inner.shutdown.cancelled() => break,
                _ = housekeeping.tick() => {
                    rounds += 1;
                    let offset = schedule.utc_offset_seconds(Utc::now());
                    if job.as_ref().is_none_or(|job| job.offset_seconds != offset) {
                        tracing::info!(new_offset = offset, "the zone's UTC offset changed; re-creating the job");
                        self.replace_job(&scheduler, &mut job).await;
                        // A slot between the change and this round had no job
                        // on the right offset to fire it (03:00 on the night
                        // the clocks spring forward is the very moment of the
                        // change). Run it now: a slot that already ran is
                        // completed in the lease and runs nothing.
                        if let Some(slot) = schedule.slot_within(Utc::now(), MISSED_SLOT_WINDOW) {
                            tracing::info!(slot = %slot, "running the slot the re-created job may have missed");
                            self.spawn_slot(slot.timestamp_millis());
                        }
                    }
                    if rounds % REFRESH_SUCCESS_EVERY_ROUNDS == 0 {
                        self.refresh_last_success().await;
                    }
                }
            }
        }
        tracing::info!("shutting down: no new ticks; waiting for the run in progress to finish its products");
        if let Err(error) = scheduler.shutdown().await {
            tracing::warn!(%error, "the scheduler did not shut down cleanly");
        }
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        tracing::info!("shut down");
        Ok(None)
    }

    /// Registers the schedule's job. tokio-cron-scheduler fixes the zone's UTC
    /// offset when a job is created, so the offset is remembered to notice a
    /// daylight-saving change.
    async fn add_job(&self, scheduler: &JobScheduler) -> Result<ScheduledJob, DaemonError> {
        let schedule = &self.inner.settings.schedule;
        let offset_seconds = schedule.utc_offset_seconds(Utc::now());
        let daemon = self.clone();
        let job = Job::new_async_tz(schedule.expression(), schedule.zone(), move |_id, _scheduler| {
            let daemon = daemon.clone();
            Box::pin(async move { daemon.on_tick() })
        })?;
        let id = scheduler.add(job).await?;
        Ok(ScheduledJob { id, offset_seconds })
    }

    /// Swaps `job` for one created with the zone's current offset. Failures
    /// are logged and leave `job` empty or stale, so the next housekeeping
    /// round tries again: exiting would abandon a run in progress.
    async fn replace_job(&self, scheduler: &JobScheduler, job: &mut Option<ScheduledJob>) {
        if let Some(old) = job.take() {
            // If the old job cannot be removed it keeps firing an hour off; its
            // ticks name slots already completed, so they run nothing.
            if let Err(error) = scheduler.remove(&old.id).await {
                tracing::warn!(%error, "removing the job with the old offset failed");
            }
        }
        match self.add_job(scheduler).await {
            Ok(new) => *job = Some(new),
            Err(error) => tracing::error!(%error, "re-creating the job failed; retrying in a minute"),
        }
    }

    /// A tick fired: run its slot in a tracked task, so a shutdown waits for it.
    fn on_tick(&self) {
        if self.inner.shutdown.is_cancelled() {
            return;
        }
        let now_ms = self.inner.clock.now_ms();
        let slot_ms = self.inner.settings.schedule.slot_at(utc(now_ms)).map_or(now_ms, |slot| slot.timestamp_millis());
        self.spawn_slot(slot_ms);
    }

    /// Runs a slot in a tracked task, so a shutdown waits for it.
    fn spawn_slot(&self, slot_ms: i64) {
        let daemon = self.clone();
        self.inner.tracker.spawn(async move { daemon.run_slot_logged(slot_ms).await });
    }

    async fn run_slot_logged(&self, slot_ms: i64) {
        if let Err(error) = self.run_slot(slot_ms).await {
            metrics::tick("error");
            tracing::error!(slot = %utc(slot_ms), %error, "the slot could not be run");
        }
        self.refresh_last_success().await;
    }

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
        let Inner { store, settings, clock, .. } = self.inner.as_ref();
        let request = LeaseRequest {
            name: settings.lease_name.clone(),
            holder: settings.holder.clone(),
            slot_ms,
            ttl: settings.lease_ttl,
        };
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
                        () = self.inner.shutdown.cancelled() => return Ok(SlotOutcome::LeaseHeld(state)),
                        () = tokio::time::sleep(standby_poll(settings.lease_ttl)) => {}
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
        tracing::info!(slot = %utc(slot_ms), lease = %settings.lease_name, "took the lease");

        let stop = self.inner.shutdown.child_token();
        let keeper_done = CancellationToken::new();
        let keeper = tokio::spawn(keep_lease(
            StoreRenewer::new(store.clone(), lease, clock.clone()),
            settings.lease_ttl / 3,
            clock.clone(),
            keeper_done.clone(),
            stop.clone(),
        ));
        let (last, completed) = self.attempts(slot_ms, &stop).await;
        keeper_done.cancel();
        let mut last = last;
        match keeper.await {
            Ok((renewer, KeeperEnd::Kept)) => {
                match store.release_lease(renewer.into_lease(), completed, clock.as_ref()).await {
                    Ok(ReleaseOutcome::Released) => tracing::info!(completed, "released the lease"),
                    Ok(ReleaseOutcome::NotOurs(state)) => tracing::warn!(
                        holder = state.and_then(|state| state.holder).unwrap_or_default(),
                        "the lease was no longer ours at release; left it alone"
                    ),
                    Err(error) => tracing::error!(%error, "releasing the lease failed; it lapses at its expiry"),
                }
            }
            Ok((_, KeeperEnd::Lost(reason))) => {
                metrics::lease_lost();
                if let Some(record) = last.as_mut().filter(|record| record.status == RunStatus::Interrupted) {
                    record.error = Some(format!("lease lost: {reason}"));
                    self.save(record).await;
                }
            }
            Err(error) => tracing::error!(%error, "the lease keeper failed; the lease lapses at its expiry"),
        }
        Ok(last.map_or(SlotOutcome::Stopped, SlotOutcome::Ran))
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

    /// Runs attempts until one succeeds or is interrupted, the policy allows no
    /// more, or `stop` is cancelled. Returns the last attempt's record and
    /// whether the slot counts as completed (succeeded, or failed with every
    /// attempt spent).
    async fn attempts(&self, slot_ms: i64, stop: &CancellationToken) -> (Option<RunRecord>, bool) {
        let policy = self.inner.settings.retry;
        let attempts = policy.attempts.max(1);
        let mut last: Option<RunRecord> = None;
        for attempt in 1..=attempts {
            if let Some(delay) = policy.delay_before(attempt) {
                tracing::info!(attempt, ?delay, "retrying the failed run after a pause");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            if stop.is_cancelled() {
                break;
            }
            let record = self.attempt(slot_ms, attempt, stop).await;
            let failed = record.status == RunStatus::Failed;
            last = Some(record);
            if !failed {
                break;
            }
        }
        let completed = last.as_ref().is_some_and(|record| match record.status {
            RunStatus::Succeeded => true,
            RunStatus::Failed => record.attempt >= attempts,
            RunStatus::Running | RunStatus::Interrupted => false,
        });
        (last, completed)
    }

    /// One attempt: record it as running, run the ranker in-process, record how it ended.
    async fn attempt(&self, slot_ms: i64, attempt: u32, stop: &CancellationToken) -> RunRecord {
        let Inner { store, settings, clock, .. } = self.inner.as_ref();
        let started_ms = clock.now_ms();
        let run_id = format!("{}-a{attempt}-{:06x}", utc(slot_ms).format("%Y%m%dT%H%M%SZ"), rand::random::<u32>() >> 8);
        let mut record = RunRecord {
            run_id,
            holder: settings.holder.clone(),
            slot_ms,
            attempt,
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
        };
        self.save(&record).await;
        tracing::info!(run_id = %record.run_id, slot = %utc(slot_ms), attempt, "ranking run started");

        // Every attempt at a slot ranks as of the slot's time, so retries and
        // the other daemon would write exactly the same slots.
        let mut options = settings.run_options.clone();
        options.as_of_ms = slot_ms;
        options.dry_run = false;
        let timer = std::time::Instant::now();
        metrics::run_in_progress(true);
        let result = ranker::run(store, &options, stop.clone()).await;
        metrics::run_in_progress(false);
        record.ended_ms = Some(clock.now_ms());
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
                    record.error = Some(if self.inner.shutdown.is_cancelled() {
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
    async fn save(&self, record: &RunRecord) {
        if let Err(error) = self.inner.store.record_run(record).await {
            tracing::error!(run_id = %record.run_id, status = %record.status, %error, "could not record the run");
        }
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

    /// Sets the last-success gauge from the shared history, so every daemon
    /// reports the latest success of any of them.
    async fn refresh_last_success(&self) {
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

/// The scheduler's job and the UTC offset it was created with.
#[derive(Debug, Clone, Copy)]
struct ScheduledJob {
    id: uuid::Uuid,
    offset_seconds: i32,
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
    fn the_holder_name_is_host_pid_and_a_random_part() {
        let holder = default_holder();
        let parts: Vec<&str> = holder.rsplitn(3, ':').collect();
        assert_eq!(parts.len(), 3, "{holder}");
        assert_eq!(parts[1], std::process::id().to_string());
        assert_eq!(parts[0].len(), 8);
        assert!(!parts[2].is_empty());
        assert_ne!(default_holder(), holder, "two daemons in one process get different names");
        assert!(holder.bytes().all(|byte| byte.is_ascii_graphic()));
    }

    #[test]
    fn exit_codes_tell_success_failure_interruption_and_skips_apart() {
        let record = |status| RunRecord {
            run_id: "r".to_owned(),
            holder: "h".to_owned(),
            slot_ms: 0,
            attempt: 1,
            as_of_ms: 0,
            started_ms: 0,
            ended_ms: Some(1),
            status,
            products: 0,
            comments_scored: 0,
            slots_written: 0,
            slots_deleted: 0,
            failures: 0,
            failure_samples: Vec::new(),
            error: None,
        };
        let free = LeaseState {
            holder: None,
            slot_ms: None,
            acquired_ms: None,
            expires_ms: 0,
            completed_slot_ms: Some(0),
            completed_by: None,
        };
        assert_eq!(SlotOutcome::Ran(record(RunStatus::Succeeded)).exit_status(), ExitStatus::Success);
        assert_eq!(SlotOutcome::Ran(record(RunStatus::Failed)).exit_status(), ExitStatus::Failure);
        assert_eq!(SlotOutcome::Ran(record(RunStatus::Interrupted)).exit_status(), ExitStatus::Interrupted);
        assert_eq!(SlotOutcome::AlreadyCompleted(free.clone()).exit_status(), ExitStatus::Success);
        assert_eq!(SlotOutcome::LeaseHeld(free).exit_status(), ExitStatus::TryLater);
        assert_eq!(SlotOutcome::Overlap.exit_status(), ExitStatus::TryLater);
        assert_eq!(SlotOutcome::Stopped.exit_status(), ExitStatus::Interrupted);
    }
}
