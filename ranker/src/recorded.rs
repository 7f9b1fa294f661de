//! One ranking run from start to end, as `ranker run` and `ranker-cron` both
//! make it: the start is taken, the run is prepared (a shard's range, what
//! changed since the last completed run), its record is written to the run
//! history as running, the ranker runs, and the record is rewritten with how
//! it ended ([`run_recorded`]). A run started by hand is also held under the
//! nightly lease when it needs the night to itself ([`run_by_hand`]); the
//! daemon holds the lease around its attempts itself, through the same
//! [`crate::lease::while_held`].
//!
//! The invariant kept here, once for both binaries: **the start is taken
//! before anything is prepared, listed or searched.** A change the run could
//! miss is then newer than its start, and the start is what the next
//! incremental run's watermark is computed from ([`crate::history::watermark_of`]).

use std::sync::Arc;

use common::store::lease::{Clock, LeaseState, TakeOutcome};
use common::store::runs::{RunRecord, RunStatus};
use common::store::Store;

use crate::history;
use crate::lease::{while_held, KeeperEnd, LeaseSettings, RunStop};
use crate::{RankerError, RunOptions, RunReport};

/// A recorded run's name in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdentity {
    /// The record's id (unique; see `common::store::runs::validate_run_id`).
    pub run_id: String,
    /// Who runs it: the daemon's or the host's holder name.
    pub holder: String,
    /// The scheduled time it stands for (a run by hand: its start).
    pub slot_ms: i64,
    /// Which attempt at the slot, from 1.
    pub attempt: u32,
}

impl RunIdentity {
    /// Attempt `attempt` at the scheduled slot `slot_ms`: `<slot>-a<attempt>-<random>`.
    pub fn scheduled(holder: String, slot_ms: i64, attempt: u32) -> RunIdentity {
        RunIdentity { run_id: run_id(slot_ms, &format!("a{attempt}")), holder, slot_ms, attempt }
    }

    /// A run started by hand at `started_ms`, which stands for its slot: `<start>-manual-<random>`.
    pub fn by_hand(holder: String, started_ms: i64) -> RunIdentity {
        RunIdentity { run_id: run_id(started_ms, "manual"), holder, slot_ms: started_ms, attempt: 1 }
    }
}

/// A run id: the slot's UTC time, what the run is, and a random part (two
/// daemons may attempt one slot, two operators may start runs in one second).
fn run_id(slot_ms: i64, what: &str) -> String {
    let slot = chrono::DateTime::from_timestamp_millis(slot_ms).unwrap_or_default();
    format!("{}-{what}-{:06x}", slot.format("%Y%m%dT%H%M%SZ"), rand::random::<u32>() >> 8)
}

/// What a recorded run did.
#[derive(Debug)]
pub struct RecordedRun {
    /// The record as saved at the end.
    pub record: RunRecord,
    /// The ranker's report, or why the run could not proceed.
    pub result: Result<RunReport, RankerError>,
}

/// Prepares and runs one ranking under `options`, recorded as `identity`.
/// `prepare` sets what the run ranks once the start is taken; an error
/// preparing ends the run (and its record) as failed. `stop` ends the run
/// after the products in flight, and says in the record why (a shutdown, or
/// a lost lease). The run logs its own figures; the lines here name the record.
pub async fn run_recorded(
    store: &Store,
    mut options: RunOptions,
    identity: RunIdentity,
    clock: &dyn Clock,
    prepare: impl AsyncFnOnce(&mut RunOptions) -> Result<(), RankerError>,
    stop: &RunStop,
) -> RecordedRun {
    let started_ms = clock.now_ms();
    let prepared = prepare(&mut options).await;
    let RunIdentity { run_id, holder, slot_ms, attempt } = identity;
    let mut record = history::started_record(run_id, holder, slot_ms, attempt, started_ms, &options);
    history::save(store, &record).await;
    tracing::info!(run_id = %record.run_id, slot_ms, attempt, kind = record.kind.as_str(),
        changed_since_ms = record.changed_since_ms, "recorded the run as running");
    let result = match prepared {
        Ok(()) => crate::run(store, &options, stop.token().clone()).await,
        Err(error) => Err(error),
    };
    record.ended_ms = Some(clock.now_ms());
    history::conclude(&mut record, &result, stop.cause().as_ref());
    history::save(store, &record).await;
    tracing::info!(
        run_id = %record.run_id,
        status = %record.status,
        products_changed = record.products_changed,
        error = record.error.as_deref().unwrap_or_default(),
        "recorded how the run ended"
    );
    RecordedRun { record, result }
}

/// How a run started by hand is held, recorded and made.
#[derive(Debug, Clone)]
pub struct ByHand {
    /// The lease to hold while it runs; `None` for a run that does not need
    /// the night to itself (one product, a dry run) or was told to ignore it.
    pub lease: Option<LeaseSettings>,
    /// The holder's name to record it under in the run history (what
    /// `--changed-since last` reads back): the runs that rank a whole scope
    /// and write. `None`: not recorded.
    pub recorded_as: Option<String>,
    /// Read what a run reads without scoring or writing ([`crate::read_pass`]).
    pub read_only: bool,
}

/// How a run started by hand ended.
#[derive(Debug)]
pub enum ByHandEnd {
    /// Another run holds the lease: nothing ran.
    LeaseBusy(LeaseState),
    /// The run ran (or could not proceed).
    Ran {
        /// The ranker's report, or why the run could not proceed (boxed: a
        /// report is large beside a lease's state).
        result: Box<Result<RunReport, RankerError>>,
        /// How it ended ([`history::end_of`]), which its exit status follows.
        status: RunStatus,
        /// Why the lease was lost, when it was.
        lease_lost: Option<String>,
    },
}

/// Runs `options` as `by_hand` says: takes the lease when it needs one (or
/// reports who holds it), keeps it while the run goes on, records the run
/// when it is recorded, and releases the lease. The lease's slot is the
/// wall-clock time of the take: every slot the daemon completed lies before
/// it, so the daemon's "already completed" never refuses a run by hand, and a
/// daemon whose tick fires meanwhile sees another slot held and skips that
/// tick. A run by hand never marks a slot completed.
pub async fn run_by_hand(
    store: &Store,
    options: RunOptions,
    by_hand: ByHand,
    clock: Arc<dyn Clock>,
    prepare: impl AsyncFnOnce(&mut RunOptions) -> Result<(), RankerError>,
    stop: &RunStop,
) -> Result<ByHandEnd, RankerError> {
    let held = match &by_hand.lease {
        Some(settings) => match store
            .take_lease(&settings.request(clock.now_ms()), clock.as_ref())
            .await
            .map_err(|source| RankerError::TakeLease { name: settings.name.clone(), source })?
        {
            TakeOutcome::Taken { lease, .. } => {
                tracing::info!(lease = %settings.name, holder = %settings.holder, "took the lease for this run");
                Some((lease, settings.ttl))
            }
            TakeOutcome::Held(state) | TakeOutcome::Completed(state) => return Ok(ByHandEnd::LeaseBusy(state)),
        },
        None => None,
    };
    let work = run_maybe_recorded(store, options, &by_hand, clock.as_ref(), prepare, stop);
    let ((result, status), end) = match held {
        Some((lease, ttl)) => while_held(store, &clock, lease, ttl, stop, work, |_| false).await,
        None => (work.await, KeeperEnd::Kept),
    };
    let lease_lost = match end {
        KeeperEnd::Lost(reason) => Some(reason),
        KeeperEnd::Kept => None,
    };
    Ok(ByHandEnd::Ran { result: Box::new(result), status, lease_lost })
}

/// The run of [`run_by_hand`] once the lease (if any) is held: recorded, or
/// prepared and run directly when nothing reads its record back.
async fn run_maybe_recorded(
    store: &Store,
    mut options: RunOptions,
    by_hand: &ByHand,
    clock: &dyn Clock,
    prepare: impl AsyncFnOnce(&mut RunOptions) -> Result<(), RankerError>,
    stop: &RunStop,
) -> (Result<RunReport, RankerError>, RunStatus) {
    if let Some(holder) = &by_hand.recorded_as {
        let identity = RunIdentity::by_hand(holder.clone(), clock.now_ms());
        let recorded = run_recorded(store, options, identity, clock, prepare, stop).await;
        return (recorded.result, recorded.record.status);
    }
    let result = match prepare(&mut options).await {
        Err(error) => Err(error),
        Ok(()) if by_hand.read_only => crate::read_pass(store, &options, stop.token().clone()).await,
        Ok(()) => crate::run(store, &options, stop.token().clone()).await,
    };
    let (status, _) = history::end_of(&result, stop.cause().as_ref());
    (result, status)
}

#[cfg(test)]
mod tests {
    use common::store::runs::validate_run_id;

    use super::*;

    const SLOT_MS: i64 = 1_795_000_000_000;

    #[test]
    fn run_ids_name_the_slot_and_what_ran_and_differ_between_runs() {
        let scheduled = RunIdentity::scheduled("daemon".to_owned(), SLOT_MS, 2);
        assert!(scheduled.run_id.starts_with("20261118T110640Z-a2-"), "{scheduled:?}");
        assert_eq!((scheduled.slot_ms, scheduled.attempt), (SLOT_MS, 2));
        let by_hand = RunIdentity::by_hand("host".to_owned(), SLOT_MS);
        assert!(by_hand.run_id.starts_with("20261118T110640Z-manual-"), "{by_hand:?}");
        assert_eq!((by_hand.slot_ms, by_hand.attempt), (SLOT_MS, 1));
        for id in [&scheduled.run_id, &by_hand.run_id] {
            assert!(validate_run_id(id).is_ok(), "{id}");
        }
        let again = RunIdentity::scheduled("daemon".to_owned(), SLOT_MS, 2);
        assert_ne!(again.run_id, scheduled.run_id, "two daemons' attempts at one slot differ");
    }
}
