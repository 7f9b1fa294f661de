//! One ranking run from start to record, as `ranker run` and `ranker-cron`
//! both make it: the start is taken, the run is prepared (a shard's range,
//! what changed since the last completed run), its record is written to the
//! run history as running, the ranker runs, and the record is rewritten with
//! how it ended.
//!
//! The invariant kept here, once for both binaries: **the start is taken
//! before anything is prepared, listed or searched.** A change the run could
//! miss is then newer than its start, and the start is what the next
//! incremental run's watermark is computed from ([`crate::history::watermark_of`]).
//! What the binaries keep to themselves is what differs between them: how the
//! lease is taken (a slot of the night, or a manual take), the run id, and
//! what they show (metrics, or a progress line and a summary).

use common::store::lease::Clock;
use common::store::runs::RunRecord;
use common::store::Store;
use tokio_util::sync::CancellationToken;

use crate::{history, RankerError, RunOptions, RunReport};

/// A recorded run's name in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdentity {
    /// The record's id (unique; see `common::store::runs::validate_run_id`).
    pub run_id: String,
    /// Who runs it: the daemon's or the host's holder name.
    pub holder: String,
    /// The scheduled time it stands for (a manual run: its lease's take).
    pub slot_ms: i64,
    /// Which attempt at the slot, from 1.
    pub attempt: u32,
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
/// (A one-product rerun or a dry run is not recorded: nothing reads its
/// record back, so it prepares and calls [`crate::run`] itself.)
/// `prepare` sets what the run ranks once the start is taken; an error
/// preparing ends the run (and its record) as failed. The run logs its own
/// figures; the lines here name the record. `stop` ends the
/// run after the products in flight; `shutdown` tells, in the record, a
/// process shutting down from a run stopped for another reason (a lost lease).
pub async fn run_recorded(
    store: &Store,
    mut options: RunOptions,
    identity: RunIdentity,
    clock: &dyn Clock,
    prepare: impl AsyncFnOnce(&mut RunOptions) -> Result<(), RankerError>,
    stop: CancellationToken,
    shutdown: &CancellationToken,
) -> RecordedRun {
    let started_ms = clock.now_ms();
    let prepared = prepare(&mut options).await;
    let RunIdentity { run_id, holder, slot_ms, attempt } = identity;
    let mut record = history::started_record(run_id, holder, slot_ms, attempt, started_ms, &options);
    history::save(store, &record).await;
    tracing::info!(run_id = %record.run_id, slot_ms, attempt, kind = record.kind.as_str(),
        changed_since_ms = record.changed_since_ms, "recorded the run as running");
    let result = match prepared {
        Ok(()) => crate::run(store, &options, stop).await,
        Err(error) => Err(error),
    };
    record.ended_ms = Some(clock.now_ms());
    history::conclude(&mut record, &result, shutdown.is_cancelled());
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
