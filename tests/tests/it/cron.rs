//! Integration tests: the cron daemon's lease, run history and scheduling
//! against the real HBase. Daemons run in-process here, each with its own
//! holder name; `process` kills and signals the real `ranker-cron` process,
//! and `virtual_time` runs production-sized pauses in tokio's paused time.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hbase::{Retry, RowMutation, COLUMN_VALUE};
use common::keys;
use common::store::lease::{Clock, LeaseRequest, ReleaseOutcome, RenewOutcome, SystemClock, TakeOutcome};
use common::store::runs::{RunKind, RunRecord, RunStatus};
use common::store::Store;
use cron::{Daemon, DaemonSettings, RetryPolicy, Schedule, SlotOutcome, StartMode};
use integration_tests::fixtures::post_numbered;
use integration_tests::{fresh_store, test_id, wait_for};
use ranker::console::format_runs_table;
use ranker::lease::LeaseSettings;

/// A clock the test moves by hand, so lease expiry needs no waiting.
#[derive(Debug)]
struct ManualClock(AtomicI64);

impl ManualClock {
    fn at(ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicI64::new(ms)))
    }

    fn advance(&self, by: Duration) {
        self.0.fetch_add(i64::try_from(by.as_millis()).expect("small"), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

fn request(holder: &str, slot_ms: i64, ttl: Duration) -> LeaseRequest {
    LeaseRequest { name: "nightly".to_owned(), holder: holder.to_owned(), slot_ms, ttl }
}

mod process;
mod virtual_time;

/// Writes `products` products with `per_product` comments each (the
/// harness's numbered data set, a second apart).
async fn seed(store: &Store, products: u64, per_product: u64) {
    post_numbered(store, products, per_product, |number, index| {
        1_700_000_000_000 + i64::try_from(number * 100 + index).expect("small") * 1_000
    })
    .await;
}

fn settings(holder: &str, expression: &str, attempts: u32) -> DaemonSettings {
    let mut run_options = ranker::RunOptions::new(ranker::Scope::All, 0);
    run_options.concurrency = 4;
    DaemonSettings {
        schedule: Schedule::parse(expression, "UTC").expect("schedule"),
        lease: LeaseSettings { name: "nightly".to_owned(), ttl: Duration::from_secs(10), holder: holder.to_owned() },
        retry: RetryPolicy { attempts, backoff: Duration::from_millis(200), max_backoff: Duration::from_millis(200) },
        run_options,
        incremental: None,
    }
}

/// A clock an hour ahead, to which every lease held now has lapsed.
#[derive(Debug)]
struct AnHourLater;

impl Clock for AnHourLater {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + 3_600_000
    }
}

fn ran(outcome: &SlotOutcome) -> &RunRecord {
    match outcome {
        SlotOutcome::Ran(record) => record,
        other => panic!("expected a run, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_goes_to_one_holder_expires_and_is_released_only_by_its_holder() {
    let store = fresh_store("cron_lease").await;
    let clock = ManualClock::at(1_800_000_000_000);
    let ttl = Duration::from_secs(600);
    let slot = 1_799_999_000_000;

    let TakeOutcome::Taken { lease: mut lease_a, expired } =
        store.take_lease(&request("daemon-a", slot, ttl), clock.as_ref()).await.expect("take")
    else {
        panic!("a free lease must be taken");
    };
    assert!(expired.is_none());
    assert_eq!(lease_a.state().holder.as_deref(), Some("daemon-a"));
    assert_eq!(lease_a.state().expires_ms, clock.now_ms() + 600_000);
    let held = store.take_lease(&request("daemon-b", slot, ttl), clock.as_ref()).await.expect("take");
    assert!(matches!(&held, TakeOutcome::Held(state) if state.holder.as_deref() == Some("daemon-a")), "{held:?}");

    clock.advance(Duration::from_secs(300));
    assert!(matches!(store.renew_lease(&mut lease_a, clock.as_ref()).await.expect("renew"), RenewOutcome::Renewed));
    assert_eq!(store.lease("nightly").await.expect("read").expect("row").expires_ms, clock.now_ms() + 600_000);

    // daemon-a stops renewing (it died): after the TTL the lease is free to take.
    clock.advance(Duration::from_secs(599));
    assert!(matches!(
        store.take_lease(&request("daemon-b", slot, ttl), clock.as_ref()).await.expect("take"),
        TakeOutcome::Held(_)
    ));
    clock.advance(Duration::from_secs(1));
    let TakeOutcome::Taken { lease: lease_b, expired } =
        store.take_lease(&request("daemon-b", slot, ttl), clock.as_ref()).await.expect("take")
    else {
        panic!("an expired lease must be taken");
    };
    assert_eq!(expired.and_then(|state| state.holder).as_deref(), Some("daemon-a"));

    // The old holder can neither renew nor release what is no longer its lease.
    let renewed = store.renew_lease(&mut lease_a, clock.as_ref()).await.expect("renew");
    assert!(matches!(&renewed, RenewOutcome::Lost(Some(state)) if state.holder.as_deref() == Some("daemon-b")));
    let released = store.release_lease(lease_a, true, clock.as_ref()).await.expect("release");
    assert!(matches!(released, ReleaseOutcome::NotOurs(_)));
    assert_eq!(store.lease("nightly").await.expect("read").expect("row").holder.as_deref(), Some("daemon-b"));

    // The holder's release frees the lease and marks the slot done.
    assert!(matches!(
        store.release_lease(lease_b, true, clock.as_ref()).await.expect("release"),
        ReleaseOutcome::Released
    ));
    let free = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!((free.holder, free.completed_slot_ms), (None, Some(slot)));
    assert_eq!(free.completed_by.as_deref(), Some("daemon-b"));
    let again = store.take_lease(&request("daemon-a", slot, ttl), clock.as_ref()).await.expect("take");
    assert!(matches!(again, TakeOutcome::Completed(_)), "a completed slot is never run again: {again:?}");
    let next_night = store.take_lease(&request("daemon-a", slot + 86_400_000, ttl), clock.as_ref()).await;
    assert!(matches!(next_night.expect("take"), TakeOutcome::Taken { expired: None, .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_holders_take_a_free_lease_exactly_once() {
    let store = fresh_store("cron_lease_race").await;
    let slot = now_ms();
    let attempts = (0..8).map(|daemon| {
        let store = store.clone();
        tokio::spawn(async move {
            store.take_lease(&request(&format!("daemon-{daemon}"), slot, Duration::from_secs(60)), &SystemClock).await
        })
    });
    let mut winners = Vec::new();
    for (daemon, attempt) in attempts.enumerate() {
        match attempt.await.expect("task").expect("take") {
            TakeOutcome::Taken { .. } => winners.push(format!("daemon-{daemon}")),
            TakeOutcome::Held(_) => {}
            TakeOutcome::Completed(state) => panic!("nothing completed yet: {state:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one holder wins: {winners:?}");
    let stored = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(stored.holder.as_ref(), Some(&winners[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_lease_is_an_error_never_a_free_lease() {
    let store = fresh_store("cron_lease_garbage").await;
    let table = store.tables().ranker_lease.clone();
    let garbage = vec![RowMutation::Put {
        key: keys::ranker_lease_key("nightly"),
        cells: vec![(COLUMN_VALUE.to_vec(), b"{oops".to_vec())],
    }];
    store
        .hbase()
        .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, garbage.clone()))
        .await
        .expect("put");
    let error = store.take_lease(&request("daemon-a", now_ms(), Duration::from_secs(60)), &SystemClock).await;
    let error = error.expect_err("garbage must not count as a free lease");
    assert!(error.to_string().contains("delete the row"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_history_lists_the_newest_run_first_and_skips_rows_that_do_not_decode() {
    let store = fresh_store("cron_history").await;
    let record = |run_id: &str, started_ms: i64, status: RunStatus| RunRecord {
        status,
        ..RunRecord::started(run_id.to_owned(), "daemon-a".to_owned(), started_ms, 1, started_ms)
    };
    let mut newest = record("run-3", 3_000, RunStatus::Running);
    for run in [record("run-1", 1_000, RunStatus::Failed), record("run-2", 2_000, RunStatus::Succeeded), newest.clone()]
    {
        store.record_run(&run).await.expect("record");
    }
    newest.status = RunStatus::Succeeded;
    newest.ended_ms = Some(3_500);
    newest.products = 7;
    store.record_run(&newest).await.expect("update");
    let table = store.tables().ranker_run.clone();
    let garbage = vec![RowMutation::Put {
        key: keys::ranker_run_key(2_500, "garbage"),
        cells: vec![(COLUMN_VALUE.to_vec(), b"not json".to_vec())],
    }];
    store
        .hbase()
        .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, garbage.clone()))
        .await
        .expect("put");

    let runs = store.recent_runs(10).await.expect("history");
    let ids: Vec<&str> = runs.iter().map(|run| run.run_id.as_str()).collect();
    assert_eq!(ids, ["run-3", "run-2", "run-1"]);
    assert_eq!(runs[0], newest, "an update rewrites the same record");
    assert_eq!(store.recent_runs(1).await.expect("history").len(), 1);
    assert_eq!(store.get_run(1_000, "run-1").await.expect("get").map(|run| run.status), Some(RunStatus::Failed));
    let table = format_runs_table(&runs);
    assert_eq!(table.lines().count(), 4, "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_every_two_seconds_runs_and_records_each_run() {
    let store = fresh_store("cron_schedule").await;
    seed(&store, 5, 4).await;
    let daemon = Daemon::new(store.clone(), settings("daemon-a", "*/2 * * * * *", 1), Arc::new(SystemClock));
    let serving = tokio::spawn({
        let daemon = daemon.clone();
        async move { daemon.serve(StartMode::Schedule).await }
    });
    let runs = wait_for(Duration::from_secs(20), "two finished runs", || async {
        let runs = store.recent_runs(20).await.expect("history");
        (runs.iter().filter(|run| run.status != RunStatus::Running).count() >= 2).then_some(runs)
    })
    .await;
    daemon.shutdown_token().cancel();
    assert!(serving.await.expect("task").expect("serve").is_none());

    let finished: Vec<&RunRecord> = runs.iter().filter(|run| run.status != RunStatus::Running).collect();
    for run in &finished {
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert_eq!(run.slot_ms % 2_000, 0, "slots are the schedule's even seconds: {run:?}");
        assert_eq!(run.as_of_ms, run.slot_ms);
        assert_eq!((run.products, run.comments_scored, run.failures), (5, 20, 0), "{run:?}");
        assert!(run.ended_ms.is_some_and(|ended| ended >= run.started_ms));
        assert_eq!(run.holder, "daemon-a");
    }
    assert!(runs.windows(2).all(|pair| pair[0].started_ms >= pair[1].started_ms), "newest first");
    assert_eq!(store.rank_slots(&test_id("p", 0)).await.expect("slots").len(), 4);
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert!(lease.completed_slot_ms >= Some(finished[0].slot_ms));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_never_run_at_once_and_never_run_a_slot_twice() {
    let store = fresh_store("cron_two_daemons").await;
    seed(&store, 12, 4).await;
    let daemons: Vec<Daemon> = ["daemon-a", "daemon-b"]
        .into_iter()
        .map(|holder| Daemon::new(store.clone(), settings(holder, "*/2 * * * * *", 1), Arc::new(SystemClock)))
        .collect();

    // The same slot asked of both at once: one runs it, the other stands aside.
    let slot = (now_ms() / 1_000 - 3_600) * 1_000;
    let (first, second) = tokio::join!(daemons[0].run_slot(slot), daemons[1].run_slot(slot));
    let outcomes = [first.expect("slot"), second.expect("slot")];
    let runs = outcomes.iter().filter(|outcome| matches!(outcome, SlotOutcome::Ran(_))).count();
    assert_eq!(runs, 1, "exactly one daemon runs the slot: {outcomes:?}");
    assert!(outcomes.iter().all(|outcome| matches!(
        outcome,
        SlotOutcome::Ran(_) | SlotOutcome::LeaseHeld(_) | SlotOutcome::AlreadyCompleted(_)
    )));
    for daemon in &daemons {
        let again = daemon.run_slot(slot).await.expect("slot");
        assert!(matches!(again, SlotOutcome::AlreadyCompleted(_)), "a finished slot is not run again: {again:?}");
    }

    // Both on one schedule: every tick fires on both.
    let serving: Vec<_> = daemons
        .iter()
        .map(|daemon| {
            let daemon = daemon.clone();
            tokio::spawn(async move { daemon.serve(StartMode::Schedule).await })
        })
        .collect();
    wait_for(Duration::from_secs(25), "three scheduled runs", || async {
        let runs = store.recent_runs(50).await.expect("history");
        (runs.iter().filter(|run| run.slot_ms != slot && run.status == RunStatus::Succeeded).count() >= 3).then_some(())
    })
    .await;
    for daemon in &daemons {
        daemon.shutdown_token().cancel();
    }
    for task in serving {
        task.await.expect("task").expect("serve");
    }

    let mut runs = store.recent_runs(50).await.expect("history");
    runs.reverse();
    let mut slots = HashSet::new();
    for run in &runs {
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert!(slots.insert(run.slot_ms), "slot {} was run twice: {runs:#?}", run.slot_ms);
    }
    for pair in runs.windows(2) {
        let earlier_end = pair[0].ended_ms.expect("ended");
        assert!(pair[1].started_ms >= earlier_end, "two runs overlapped: {:#?}", pair);
    }
    let holders: HashSet<&str> = runs.iter().map(|run| run.holder.as_str()).collect();
    assert!(holders.iter().all(|holder| ["daemon-a", "daemon-b"].contains(holder)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_while_the_previous_run_goes_on_is_skipped() {
    let store = fresh_store("cron_overlap").await;
    seed(&store, 40, 3).await;
    let mut settings = settings("daemon-a", "0 0 3 * * *", 1);
    settings.run_options.concurrency = 1;
    let daemon = Daemon::new(store.clone(), settings, Arc::new(SystemClock));
    let first_slot = now_ms() - 60_000;
    let first = tokio::spawn({
        let daemon = daemon.clone();
        async move { daemon.run_slot(first_slot).await }
    });
    wait_for(Duration::from_secs(20), "the first run to start", || async {
        let runs = store.recent_runs(5).await.expect("history");
        runs.iter().any(|run| run.status == RunStatus::Running).then_some(())
    })
    .await;
    let overlapping = daemon.run_slot(first_slot + 1_000).await.expect("slot");
    assert_eq!(overlapping, SlotOutcome::Overlap);
    let first = first.await.expect("task").expect("slot");
    assert_eq!(ran(&first).status, RunStatus::Succeeded);
    assert_eq!(ran(&first).products, 40);
    let runs = store.recent_runs(5).await.expect("history");
    assert_eq!(runs.len(), 1, "the skipped tick left no record: {runs:#?}");
    let next = daemon.run_slot(first_slot + 1_000).await.expect("slot");
    assert_eq!(ran(&next).status, RunStatus::Succeeded, "once the run ended, the next tick runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_is_taken_over_is_recorded_as_lost_and_leaves_the_slot_open() {
    let store = fresh_store("cron_lease_lost").await;
    seed(&store, 40, 3).await;
    // Slow enough (120 comments at 20/s) to be mid-run when the lease goes;
    // the 10-s lease is renewed every 3.3 s, which is when the loss is seen.
    let mut settings = settings("daemon-a", "0 0 3 * * *", 3);
    settings.run_options.concurrency = 1;
    settings.run_options.pacing.max_rate = Some(20.0);
    let daemon = Daemon::new(store.clone(), settings, Arc::new(SystemClock));
    let slot_ms = now_ms() - 60_000;
    let running = tokio::spawn({
        let daemon = daemon.clone();
        async move { daemon.run_slot(slot_ms).await }
    });
    wait_for(Duration::from_secs(20), "the run to start", || async {
        let runs = store.recent_runs(5).await.expect("history");
        runs.iter().any(|run| run.status == RunStatus::Running).then_some(())
    })
    .await;
    let taken = store.take_lease(&request("usurper", slot_ms, Duration::from_secs(600)), &AnHourLater).await;
    assert!(matches!(taken, Ok(TakeOutcome::Taken { .. })), "{taken:?}");

    let outcome = running.await.expect("task").expect("slot");
    let record = ran(&outcome);
    assert_eq!(record.status, RunStatus::Lost, "{record:?}");
    let error = record.error.as_deref().unwrap_or_default();
    assert!(error.contains("taken over") && error.contains("usurper"), "{record:?}");
    assert!(record.products < 40, "the run stopped early: {record:?}");
    assert_eq!(record.attempt, 1, "a lost lease is not retried");
    assert_eq!(outcome.exit_status(), common::exit::ExitStatus::Failure);
    let stored = store.recent_runs(5).await.expect("history");
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!((stored[0].status, stored[0].error.as_deref()), (RunStatus::Lost, record.error.as_deref()));
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder.as_deref(), Some("usurper"), "the new holder's lease is left alone");
    assert_ne!(lease.completed_slot_ms, Some(slot_ms), "the slot is not marked completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_is_retried_per_the_policy_and_every_attempt_is_recorded() {
    let store = fresh_store("cron_retry").await;
    seed(&store, 2, 2).await;
    let mut settings = settings("daemon-a", "0 0 3 * * *", 3);
    // Options the ranker refuses make every attempt fail the same way.
    settings.run_options.page_rows = 0;
    let daemon = Daemon::new(store.clone(), settings, Arc::new(SystemClock));
    let slot = now_ms() - 1_000;
    let started = Instant::now();
    let outcome = daemon.run_slot(slot).await.expect("slot");
    assert_eq!(ran(&outcome).status, RunStatus::Failed);
    assert_eq!(ran(&outcome).attempt, 3);
    // Pauses of 200 ms (less up to a quarter of jitter) before the second and the third attempt.
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    let runs = store.recent_runs(10).await.expect("history");
    let attempts: Vec<u32> = runs.iter().map(|run| run.attempt).collect();
    assert_eq!(attempts, [3, 2, 1]);
    assert!(runs.iter().all(|run| run.status == RunStatus::Failed && run.slot_ms == slot && run.as_of_ms == slot));
    assert!(runs[0].error.as_deref().is_some_and(|error| error.contains("page rows")), "{:?}", runs[0].error);
    // Every attempt spent: the night counts as done and is not run again.
    assert!(matches!(daemon.run_slot(slot).await.expect("slot"), SlotOutcome::AlreadyCompleted(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_lease_lapses_and_the_next_tick_runs_and_closes_its_run() {
    let store = fresh_store("cron_dead_holder").await;
    seed(&store, 3, 2).await;
    let dead_slot = now_ms() - 60_000;
    let ttl = Duration::from_millis(1_500);
    let taken = store.take_lease(&request("dead-holder", dead_slot, ttl), &SystemClock).await.expect("take");
    assert!(matches!(taken, TakeOutcome::Taken { .. }));
    let abandoned = RunRecord::started("dead-run".to_owned(), "dead-holder".to_owned(), dead_slot, 1, dead_slot + 5);
    store.record_run(&abandoned).await.expect("record");

    let daemon = Daemon::new(store.clone(), settings("daemon-b", "0 0 3 * * *", 1), Arc::new(SystemClock));
    let next_slot = dead_slot + 30_000;
    let blocked = daemon.run_slot(next_slot).await.expect("slot");
    assert!(matches!(&blocked, SlotOutcome::LeaseHeld(state) if state.holder.as_deref() == Some("dead-holder")));

    let outcome = wait_for(Duration::from_secs(10), "the dead holder's lease to lapse", || async {
        match daemon.run_slot(next_slot).await.expect("slot") {
            SlotOutcome::LeaseHeld(_) => None,
            other => Some(other),
        }
    })
    .await;
    assert_eq!(ran(&outcome).status, RunStatus::Succeeded);
    let closed = store.get_run(abandoned.started_ms, "dead-run").await.expect("get").expect("record");
    assert_eq!(closed.status, RunStatus::Interrupted);
    assert!(closed.error.as_deref().is_some_and(|error| error.contains("stopped renewing")), "{closed:?}");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!((lease.holder, lease.completed_slot_ms), (None, Some(next_slot)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_daemon_runs_the_slot_when_the_holders_run_ends_without_completing_it() {
    let store = fresh_store("cron_standby").await;
    seed(&store, 3, 2).await;
    let standby = Daemon::new(store.clone(), settings("daemon-b", "0 0 3 * * *", 1), Arc::new(SystemClock));
    let ttl = Duration::from_secs(60);

    // The holder completes the slot: the standby stops waiting and runs nothing.
    let completed_slot = now_ms() - 120_000;
    let TakeOutcome::Taken { lease, .. } =
        store.take_lease(&request("daemon-a", completed_slot, ttl), &SystemClock).await.expect("take")
    else {
        panic!("a free lease must be taken");
    };
    let waiting = tokio::spawn({
        let standby = standby.clone();
        async move { standby.run_slot(completed_slot).await }
    });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!waiting.is_finished(), "the standby waits while the holder runs the same slot");
    store.release_lease(lease, true, &SystemClock).await.expect("release");
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("in time").expect("task");
    assert!(matches!(outcome.expect("slot"), SlotOutcome::AlreadyCompleted(_)));

    // The holder's run ends without completing the slot (it was stopped): the standby runs it.
    let interrupted_slot = now_ms() - 60_000;
    let TakeOutcome::Taken { lease, .. } =
        store.take_lease(&request("daemon-a", interrupted_slot, ttl), &SystemClock).await.expect("take")
    else {
        panic!("a free lease must be taken");
    };
    let waiting = tokio::spawn({
        let standby = standby.clone();
        async move { standby.run_slot(interrupted_slot).await }
    });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!waiting.is_finished());
    store.release_lease(lease, false, &SystemClock).await.expect("release");
    let outcome = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("in time").expect("task");
    let outcome = outcome.expect("slot");
    let record = ran(&outcome);
    assert_eq!(
        (record.status, record.slot_ms, record.holder.as_str()),
        (RunStatus::Succeeded, interrupted_slot, "daemon-b")
    );
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!((lease.completed_slot_ms, lease.completed_by.as_deref()), (Some(interrupted_slot), Some("daemon-b")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_nights_rank_what_changed_and_the_full_schedule_ranks_everything() {
    let store = fresh_store("cron_incremental").await;
    seed(&store, 12, 3).await;
    let mut settings = settings("daemon-a", "0 0 3 * * *", 1);
    settings.incremental = Some(cron::IncrementalNights {
        // 2026-11-22 was a Sunday.
        full_schedule: Some(Schedule::parse("0 0 3 * * Sun", "UTC").expect("full schedule")),
        // Long enough that the refresh slice of a night is a product or two at most.
        refresh_days: 1_000,
        skew_margin: Duration::ZERO,
    });
    let daemon = Daemon::new(store.clone(), settings, Arc::new(SystemClock));
    let (friday, saturday, sunday) = (1_795_143_600_000, 1_795_230_000_000, 1_795_316_400_000);

    // No completed run yet: the first incremental night ranks everything.
    let first = daemon.run_slot(friday).await.expect("slot");
    assert_eq!((ran(&first).status, ran(&first).kind, ran(&first).products), (RunStatus::Succeeded, RunKind::Full, 12));

    // One product changes; the next night ranks it (and its refresh slice, if any), from the first run's start.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let key = keys::CommentKey::new(&test_id("o", 500), &test_id("p", 5));
    let mut comment =
        store.get_record::<common::model::Comment>(key.as_bytes().to_vec()).await.expect("read").expect("exists");
    comment.helpful = Some(10_000);
    store.put_records(&[comment]).await.expect("a vote");
    let second = daemon.run_slot(saturday).await.expect("slot");
    let second = ran(&second);
    assert_eq!((second.status, second.kind), (RunStatus::Succeeded, RunKind::Incremental));
    assert_eq!(second.changed_since_ms, Some(ran(&first).started_ms));
    // The night's slice of the key range, cut where the first run (a listing of everything) recorded.
    let cuts = ran(&first).refresh_cuts.clone().expect("the first run listed everything and cut it");
    let cover = [ranker::refresh::RefreshCuts {
        range: keys::KeyRange::everything(),
        cuts: cuts.iter().map(|cut| hex::decode(cut).expect("hex")).collect(),
    }];
    let night = ranker::refresh::night_of(saturday);
    let slice = ranker::refresh::refresh_ranges(&cover, &keys::KeyRange::everything(), 1_000, night..=night);
    let refreshed = (0..12)
        .filter(|number| *number != 5 && slice.iter().any(|range| range.contains(test_id("p", *number).as_bytes())))
        .count() as u64;
    assert_eq!(second.products, 1 + refreshed, "the changed product and the night's refresh slice");
    assert_eq!(second.products_changed, Some(1 + refreshed));

    // The full schedule's night ranks everything again.
    let third = daemon.run_slot(sunday).await.expect("slot");
    assert_eq!((ran(&third).kind, ran(&third).products), (RunKind::Full, 12));
}
