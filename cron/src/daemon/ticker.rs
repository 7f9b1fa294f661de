//! The ticker: registers the schedule's job, turns each tick into its slot,
//! keeps the job on the zone's current UTC offset, refreshes the last-success
//! gauge, and on shutdown stops ticking and waits for the slot in progress.

use std::time::Duration;

use chrono::Utc;
use tokio_cron_scheduler::{Job, JobScheduler};

use super::{utc, Daemon, DaemonError, SlotOutcome, StartMode};
use crate::metrics;
use crate::schedule::Schedule;

/// How often the daemon checks the zone's UTC offset and refreshes the last-success gauge.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(60);
/// How far back a re-created job looks for a slot it may have missed: two
/// housekeeping rounds, so a late round still finds it.
const MISSED_SLOT_WINDOW: chrono::TimeDelta = chrono::TimeDelta::seconds(120);
/// Refresh the last-success gauge every this many housekeeping rounds.
const REFRESH_SUCCESS_EVERY_ROUNDS: u64 = 5;

impl Daemon {
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
            holder = %self.inner.settings.lease.holder,
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
        self.spawn_slot(slot_of_tick(&self.inner.settings.schedule, self.inner.clock.now_ms()));
    }

    /// Runs a slot in a tracked task, so a shutdown waits for it.
    fn spawn_slot(&self, slot_ms: i64) {
        let daemon = self.clone();
        self.inner.tracker.spawn(async move { daemon.run_slot_logged(slot_ms).await });
    }

    /// Runs a slot, logging what stopped it, and refreshes the last-success gauge.
    async fn run_slot_logged(&self, slot_ms: i64) {
        if let Err(error) = self.run_slot(slot_ms).await {
            metrics::tick("error");
            tracing::error!(slot = %utc(slot_ms), %error, "the slot could not be run");
        }
        self.refresh_last_success().await;
    }
}

/// The slot (ms since the epoch) a tick firing at `now_ms` stands for: the
/// schedule's latest time at or before it, or the tick's own time if the
/// schedule has none.
fn slot_of_tick(schedule: &Schedule, now_ms: i64) -> i64 {
    schedule.slot_at(utc(now_ms)).map_or(now_ms, |slot| slot.timestamp_millis())
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
    fn a_tick_stands_for_the_scheduled_time_it_fired_for_not_the_moment_it_fired() {
        let schedule = Schedule::parse("0 0 3 * * *", "Asia/Seoul").expect("schedule");
        // 03:00 in Seoul is 18:00 UTC the day before.
        let slot = chrono::DateTime::parse_from_rfc3339("2026-11-22T18:00:00Z").expect("time").timestamp_millis();
        assert_eq!(slot_of_tick(&schedule, slot), slot, "a tick on the dot");
        assert_eq!(slot_of_tick(&schedule, slot + 1_500), slot, "a tick the scheduler fired late");
        assert_eq!(
            slot_of_tick(&schedule, slot - 1),
            slot - 86_400_000,
            "a tick before 03:00 stands for the night before"
        );
    }
}
