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
//! products, finishes those in flight, and the attempt is recorded as
//! interrupted. A lease lost midway stops the run the same way; the attempt
//! is recorded as lost, and the lease is left to its new holder.
//!
//! Three parts, each in its own module with its own tests:
//! - `ticker`: the schedule's job, housekeeping (a change of the zone's UTC
//!   offset, the last-success gauge) and the shutdown; each tick becomes a slot;
//! - `slot`: the night's slot: the one-run-at-a-time gate, the lease
//!   (standing by for another daemon's run, taking over a lapsed lease), the
//!   attempts and the release (steps 1 to 4);
//! - `attempt`: one attempt: its record in the run history, the ranker
//!   in-process, its metrics.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::store::lease::Clock;
use common::store::Store;
use ranker::lease::LeaseSettings;
use tokio_cron_scheduler::JobSchedulerError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::retry::RetryPolicy;
use crate::schedule::Schedule;

mod attempt;
mod slot;
mod ticker;

pub use slot::SlotOutcome;

/// Everything the daemon needs to know besides the store and the clock.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// When to run.
    pub schedule: Schedule,
    /// The lease each slot is run under, and this daemon's name in it and in
    /// the history (`host:pid:random` unless configured).
    pub lease: LeaseSettings,
    /// How failed runs are retried.
    pub retry: RetryPolicy,
    /// The ranker's options; each run sets its own as-of time.
    pub run_options: ranker::RunOptions,
    /// Incremental nights, when on; `None` ranks every product every night.
    pub incremental: Option<IncrementalNights>,
}

/// Which slots rank only what changed, and how.
#[derive(Debug, Clone)]
pub struct IncrementalNights {
    /// The slots that fall on this schedule rank every product; `None`: only
    /// a slot with no completed run before it does.
    pub full_schedule: Option<Schedule>,
    /// Every product is re-ranked once in this many nights.
    pub refresh_days: u32,
    /// Subtracted from the last completed run's start, for clock skew.
    pub skew_margin: Duration,
}

impl IncrementalNights {
    /// Whether the slot at `slot_ms` is one of the full schedule's times.
    pub fn is_full_slot(&self, slot_ms: i64) -> bool {
        let (Some(full), Some(slot)) = (&self.full_schedule, DateTime::<Utc>::from_timestamp_millis(slot_ms)) else {
            return false;
        };
        full.next_after(slot - chrono::TimeDelta::seconds(1)) == Some(slot)
    }
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
}
