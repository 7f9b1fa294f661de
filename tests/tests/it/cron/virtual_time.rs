//! The daemon's waiting, run in tokio's paused (virtual) time against the real
//! HBase: production-sized pauses (minutes of retry backoff, a ten-minute
//! lease renewed every third of it) pass in moments. Tokio does not advance
//! paused time while an HBase call runs on the blocking pool, so every HBase
//! round trip still completes for real.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::store::lease::{Clock, LeaseRequest, SystemClock, TakeOutcome};
use common::store::runs::RunStatus;
use cron::{Daemon, DaemonSettings, RetryPolicy, Schedule, SlotOutcome};
use integration_tests::fresh_store;
use ranker::lease::LeaseSettings;

/// Wall-clock time that moves with tokio's (paused) time, so a lease's
/// expiry passes in virtual minutes as it would in real ones.
#[derive(Debug)]
struct VirtualClock {
    origin_ms: i64,
    start: tokio::time::Instant,
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> i64 {
        self.origin_ms + i64::try_from(self.start.elapsed().as_millis()).expect("a test's virtual time")
    }
}

#[tokio::test(start_paused = true)]
async fn failed_runs_are_retried_after_the_policys_backoff_while_the_lease_is_kept() {
    let store = fresh_store("cron_virtual_retry").await;
    let mut run_options = ranker::RunOptions::new(ranker::Scope::All, 0);
    // Options the ranker refuses: every attempt fails at once, without I/O.
    run_options.page_rows = 0;
    let settings = DaemonSettings {
        schedule: Schedule::parse("0 0 3 * * *", "Asia/Seoul").expect("schedule"),
        lease: LeaseSettings {
            name: "nightly".to_owned(),
            ttl: Duration::from_secs(600),
            holder: "daemon-a".to_owned(),
        },
        retry: RetryPolicy { attempts: 3, backoff: Duration::from_secs(300), max_backoff: Duration::from_secs(1_800) },
        run_options,
        incremental: None,
    };
    let clock = Arc::new(VirtualClock { origin_ms: SystemClock.now_ms(), start: tokio::time::Instant::now() });
    let daemon = Daemon::new(store.clone(), settings, clock.clone());
    let wall = Instant::now();
    let virtual_start = tokio::time::Instant::now();
    let slot_ms = 1_795_000_000_000;
    // A second daemon tries to take the lease 640 s in: past the 600-s TTL of
    // the lease as first taken, inside the second backoff (the third attempt
    // starts 675 s in at the earliest). Only renewal keeps the lease held.
    let rival = tokio::spawn({
        let (store, clock) = (store.clone(), clock.clone());
        async move {
            tokio::time::sleep(Duration::from_secs(640)).await;
            let request = LeaseRequest {
                name: "nightly".to_owned(),
                holder: "daemon-b".to_owned(),
                slot_ms,
                ttl: Duration::from_secs(600),
            };
            store.take_lease(&request, clock.as_ref()).await.expect("try the lease")
        }
    });

    let outcome = daemon.run_slot(slot_ms).await.expect("slot");
    let rival = rival.await.expect("the rival's task");
    assert!(matches!(rival, TakeOutcome::Held(_)), "the renewed lease was still held at 640 s: {rival:?}");

    let SlotOutcome::Ran(last) = outcome else { panic!("expected a run, got {outcome:?}") };
    assert_eq!((last.status, last.attempt), (RunStatus::Failed, 3));
    // 300 s before the second attempt, 600 s before the third, each less up to
    // a quarter of jitter: at least 675 s, which two equal pauses (at most 600 s) cannot reach.
    let waited = virtual_start.elapsed();
    assert!(waited >= Duration::from_secs(675) && waited < Duration::from_secs(960), "{waited:?}");
    assert!(wall.elapsed() < Duration::from_secs(60), "virtual time did not pass for real: {:?}", wall.elapsed());
    let attempts: Vec<u32> = store.recent_runs(10).await.expect("history").iter().map(|run| run.attempt).collect();
    assert_eq!(attempts, [3, 2, 1]);
    // The lease, renewed through the minutes of backoff, was still ours to
    // release, and the night counts as done.
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!((lease.holder, lease.completed_slot_ms), (None, Some(slot_ms)));
    assert_eq!(lease.completed_by.as_deref(), Some("daemon-a"));
}
