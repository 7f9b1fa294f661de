//! Keeping the lease while a run goes on: renew it every TTL/3, and stop the
//! run as soon as it can no longer be sure the lease is ours (another daemon
//! took it, or renewals kept failing until it was about to lapse). Stopping
//! then, rather than running on, is what keeps two daemons from ranking at once.
//! `ranker-cron` keeps the nightly lease with it, and so does a manual full or
//! shard `ranker run`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use common::store::lease::{Clock, HeldLease, RenewOutcome};
use common::store::Store;
use tokio_util::sync::CancellationToken;

/// The shortest pause before retrying a failed renewal.
const MIN_RETRY_WAIT: Duration = Duration::from_millis(100);

/// Something that can extend a lease: the HBase lease in production.
pub trait Renewer: Send + 'static {
    /// Extends the lease to now + TTL.
    fn renew(&mut self) -> impl Future<Output = common::Result<RenewOutcome>> + Send;
    /// When the lease lapses unless renewed, in ms since the epoch.
    fn expires_ms(&self) -> i64;
}

/// Renews a [`HeldLease`] in HBase.
#[derive(Debug)]
pub struct StoreRenewer {
    store: Store,
    lease: HeldLease,
    clock: Arc<dyn Clock>,
}

impl StoreRenewer {
    /// Renews `lease` in `store`, judging time by `clock`.
    pub fn new(store: Store, lease: HeldLease, clock: Arc<dyn Clock>) -> StoreRenewer {
        StoreRenewer { store, lease, clock }
    }

    /// The lease as last renewed, for the release.
    pub fn into_lease(self) -> HeldLease {
        self.lease
    }
}

impl Renewer for StoreRenewer {
    fn renew(&mut self) -> impl Future<Output = common::Result<RenewOutcome>> + Send {
        self.store.renew_lease(&mut self.lease, self.clock.as_ref())
    }

    fn expires_ms(&self) -> i64 {
        self.lease.state().expires_ms
    }
}

/// How keeping the lease ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeeperEnd {
    /// The run ended while the lease was still ours.
    Kept,
    /// The lease was lost (or could not be renewed in time); the run was told to stop.
    Lost(String),
}

/// Renews through `renewer` every `every` until `done` is cancelled. When the
/// lease is lost, cancels `stop_run` and returns at once. Gives the renewer back
/// so the caller can release the lease.
///
/// A renewal in flight is never abandoned halfway: `done` is only looked at
/// between renewals, so the caller always knows the value it must release.
pub async fn keep_lease<R: Renewer>(
    mut renewer: R,
    every: Duration,
    clock: Arc<dyn Clock>,
    done: CancellationToken,
    stop_run: CancellationToken,
) -> (R, KeeperEnd) {
    let retry_wait = (every / 4).max(MIN_RETRY_WAIT);
    let mut wait = every;
    loop {
        tokio::select! {
            () = done.cancelled() => return (renewer, KeeperEnd::Kept),
            () = tokio::time::sleep(wait) => {}
        }
        match renewer.renew().await {
            Ok(RenewOutcome::Renewed) => {
                tracing::debug!(expires_ms = renewer.expires_ms(), "renewed the lease");
                wait = every;
            }
            Ok(RenewOutcome::Lost(now_held_by)) => {
                let holder = now_held_by.and_then(|state| state.holder).unwrap_or_else(|| "nobody".to_owned());
                let reason = format!("the lease was taken over (now held by {holder})");
                tracing::error!(%reason, "stopping the run: the lease is no longer ours");
                stop_run.cancel();
                return (renewer, KeeperEnd::Lost(reason));
            }
            Err(error) => {
                let retry_wait_ms = i64::try_from(retry_wait.as_millis()).unwrap_or(i64::MAX);
                if clock.now_ms().saturating_add(retry_wait_ms) >= renewer.expires_ms() {
                    let reason = format!("the lease could not be renewed before it lapsed: {error}");
                    tracing::error!(%reason, "stopping the run: the lease may no longer be ours");
                    stop_run.cancel();
                    return (renewer, KeeperEnd::Lost(reason));
                }
                tracing::warn!(%error, ?retry_wait, "renewing the lease failed; retrying");
                wait = retry_wait;
            }
        }
    }
}

/// A name for this process in leases and history: `host:pid:random`. The
/// random part tells apart two daemons in one process (tests) and a restarted
/// daemon that got the same pid.
pub fn default_holder() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    let host: String = host.chars().map(|c| if c.is_ascii_graphic() { c } else { '_' }).collect();
    format!("{host}:{}:{:08x}", std::process::id(), rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Wall-clock milliseconds that follow tokio's (paused) clock.
    #[derive(Debug)]
    struct TokioClock {
        epoch_ms: i64,
        start: tokio::time::Instant,
    }

    impl TokioClock {
        fn new() -> Arc<TokioClock> {
            Arc::new(TokioClock { epoch_ms: 1_800_000_000_000, start: tokio::time::Instant::now() })
        }
    }

    impl Clock for TokioClock {
        fn now_ms(&self) -> i64 {
            self.epoch_ms + i64::try_from(self.start.elapsed().as_millis()).expect("small")
        }
    }

    /// Answers renewals from a script (then renews successfully), recording when each came.
    struct ScriptedRenewer {
        clock: Arc<TokioClock>,
        ttl_ms: i64,
        expires_ms: i64,
        script: VecDeque<Option<RenewOutcome>>,
        calls_at_ms: Vec<i64>,
    }

    impl ScriptedRenewer {
        fn new(clock: Arc<TokioClock>, ttl: Duration, script: Vec<Option<RenewOutcome>>) -> ScriptedRenewer {
            let ttl_ms = i64::try_from(ttl.as_millis()).expect("small");
            let expires_ms = clock.now_ms() + ttl_ms;
            ScriptedRenewer { clock, ttl_ms, expires_ms, script: script.into(), calls_at_ms: Vec::new() }
        }

        fn elapsed_calls_s(&self) -> Vec<i64> {
            self.calls_at_ms.iter().map(|at| (at - self.clock.epoch_ms) / 1_000).collect()
        }
    }

    impl Renewer for ScriptedRenewer {
        fn renew(&mut self) -> impl Future<Output = common::Result<RenewOutcome>> + Send {
            let now = self.clock.now_ms();
            self.calls_at_ms.push(now);
            let outcome = match self.script.pop_front().unwrap_or(Some(RenewOutcome::Renewed)) {
                Some(RenewOutcome::Renewed) => {
                    self.expires_ms = now + self.ttl_ms;
                    Ok(RenewOutcome::Renewed)
                }
                Some(lost) => Ok(lost),
                None => Err(common::Error::Unavailable("gateway down".to_owned())),
            };
            std::future::ready(outcome)
        }

        fn expires_ms(&self) -> i64 {
            self.expires_ms
        }
    }

    const TTL: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn renews_every_third_of_the_ttl_until_the_run_ends() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), CancellationToken::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, Vec::new());
        let keeper = tokio::spawn(keep_lease(renewer, TTL / 3, clock.clone(), done.clone(), stop_run.clone()));
        tokio::time::sleep(Duration::from_secs(95)).await;
        done.cancel();
        let (renewer, end) = keeper.await.expect("keeper");
        assert_eq!(end, KeeperEnd::Kept);
        assert_eq!(renewer.elapsed_calls_s(), vec![10, 20, 30, 40, 50, 60, 70, 80, 90]);
        assert!(!stop_run.is_cancelled());
        assert!(renewer.expires_ms() > clock.now_ms());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_stops_the_run_at_once() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), CancellationToken::new());
        let script = vec![Some(RenewOutcome::Renewed), Some(RenewOutcome::Lost(None))];
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, script);
        let (renewer, end) = keep_lease(renewer, TTL / 3, clock, done, stop_run.clone()).await;
        assert!(matches!(end, KeeperEnd::Lost(reason) if reason.contains("taken over")));
        assert!(stop_run.is_cancelled());
        assert_eq!(renewer.elapsed_calls_s(), vec![10, 20]);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_renewals_are_retried_sooner_and_a_success_keeps_the_run_going() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), CancellationToken::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, vec![None, None, Some(RenewOutcome::Renewed)]);
        let keeper = tokio::spawn(keep_lease(renewer, TTL / 3, clock.clone(), done.clone(), stop_run.clone()));
        tokio::time::sleep(Duration::from_secs(30)).await;
        done.cancel();
        let (renewer, end) = keeper.await.expect("keeper");
        assert_eq!(end, KeeperEnd::Kept);
        // Failures at 10 s and 12.5 s are retried after a quarter of the interval.
        let calls_ms: Vec<i64> = renewer.calls_at_ms.iter().map(|at| at - clock.epoch_ms).collect();
        assert_eq!(calls_ms, vec![10_000, 12_500, 15_000, 25_000]);
        assert!(!stop_run.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_failing_until_the_lease_lapses_stop_the_run_before_it_lapses() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), CancellationToken::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, (0..100).map(|_| None).collect());
        let lapses_at = renewer.expires_ms();
        let (renewer, end) = keep_lease(renewer, TTL / 3, clock.clone(), done, stop_run.clone()).await;
        assert!(matches!(end, KeeperEnd::Lost(reason) if reason.contains("could not be renewed")));
        assert!(stop_run.is_cancelled());
        assert!(clock.now_ms() < lapses_at, "stopped {} ms after the lapse", clock.now_ms() - lapses_at);
        assert!(renewer.calls_at_ms.len() >= 5, "retried {} times", renewer.calls_at_ms.len());
    }
}
