//! The nightly lease around a run, one orchestration for `ranker run` and
//! `ranker-cron`: a run that must not overlap another takes the lease
//! ([`LeaseSettings::request`]), keeps it renewed every TTL/3 while it runs
//! and releases it at the end ([`while_held`]).
//!
//! A run stops as soon as it can no longer be sure the lease is ours (another
//! holder took it, or renewals kept failing until it was about to lapse).
//! Stopping then, rather than running on, is what keeps two runs from ranking
//! at once. Why a run was stopped travels with its stop token ([`RunStop`]),
//! so its record says "lost" for a lease taken over and "interrupted" for a
//! shutdown.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tracing::Instrument as _;

use common::store::lease::{Clock, HeldLease, LeaseRequest, ReleaseOutcome, RenewOutcome};
use common::store::Store;
use tokio_util::sync::CancellationToken;

/// Which lease a run takes, for how long, and under what name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The lease's name (its row in `ranker-lease`); runs that must not
    /// overlap share it.
    pub name: String,
    /// How long the lease lasts without renewal; renewed every third of it.
    pub ttl: Duration,
    /// Who takes it: `host:pid:random` unless configured.
    pub holder: String,
}

impl LeaseSettings {
    /// The request for the lease on behalf of the slot at `slot_ms`.
    pub fn request(&self, slot_ms: i64) -> LeaseRequest {
        LeaseRequest { name: self.name.clone(), holder: self.holder.clone(), slot_ms, ttl: self.ttl }
    }
}

/// Why a run was stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// A shutdown: a signal, or whoever owns the run's token cancelled it.
    Shutdown,
    /// The lease was taken over or could not be renewed in time.
    LeaseLost(String),
}

/// A run's stop token and why it was cancelled. Whoever stops the run for a
/// lost lease says so first ([`RunStop::lease_lost`]); any other cancellation,
/// the parent token's included, is a shutdown.
#[derive(Debug, Clone, Default)]
pub struct RunStop {
    token: CancellationToken,
    lease_lost: Arc<OnceLock<String>>,
}

impl RunStop {
    /// A stop nobody has asked for yet.
    pub fn new() -> RunStop {
        RunStop::default()
    }

    /// A stop that a shutdown of `parent` also asks for.
    pub fn child_of(parent: &CancellationToken) -> RunStop {
        RunStop { token: parent.child_token(), lease_lost: Arc::default() }
    }

    /// The token the run watches.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Stops the run for a shutdown.
    pub fn shut_down(&self) {
        self.token.cancel();
    }

    /// Stops the run because its lease is lost, saying why, unless it was
    /// already told to stop: then the first cause (a shutdown) stands.
    pub fn lease_lost(&self, reason: String) {
        if self.token.is_cancelled() {
            return;
        }
        // Set before the token is cancelled, so whoever sees the token
        // cancelled also sees the reason.
        let _ = self.lease_lost.set(reason);
        self.token.cancel();
    }

    /// Why the run was stopped; `None` while nobody has asked.
    pub fn cause(&self) -> Option<StopCause> {
        if let Some(reason) = self.lease_lost.get() {
            return Some(StopCause::LeaseLost(reason.clone()));
        }
        self.token.is_cancelled().then_some(StopCause::Shutdown)
    }
}

/// The shortest pause before retrying a failed renewal.
const MIN_RETRY_WAIT: Duration = Duration::from_millis(100);

/// Something that can extend a lease: the HBase lease in production.
trait Renewer: Send + 'static {
    /// Extends the lease to now + TTL.
    fn renew(&mut self) -> impl Future<Output = common::Result<RenewOutcome>> + Send;
    /// When the lease lapses unless renewed, in ms since the epoch.
    fn expires_ms(&self) -> i64;
}

/// Renews a [`HeldLease`] in HBase.
#[derive(Debug)]
struct StoreRenewer {
    store: Store,
    lease: HeldLease,
    clock: Arc<dyn Clock>,
}

impl StoreRenewer {
    /// Renews `lease` in `store`, judging time by `clock`.
    fn new(store: Store, lease: HeldLease, clock: Arc<dyn Clock>) -> StoreRenewer {
        StoreRenewer { store, lease, clock }
    }

    /// The lease as last renewed, for the release.
    fn into_lease(self) -> HeldLease {
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
/// lease is lost, stops the run (`stop_run`, saying why) and returns at once.
/// Gives the renewer back so the caller can release the lease.
///
/// A renewal in flight is never abandoned halfway: `done` is only looked at
/// between renewals, so the caller always knows the value it must release.
async fn keep_lease<R: Renewer>(
    mut renewer: R,
    every: Duration,
    clock: Arc<dyn Clock>,
    done: CancellationToken,
    stop_run: RunStop,
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
                stop_run.lease_lost(reason.clone());
                return (renewer, KeeperEnd::Lost(reason));
            }
            Err(error) => {
                let retry_wait_ms = i64::try_from(retry_wait.as_millis()).unwrap_or(i64::MAX);
                if clock.now_ms().saturating_add(retry_wait_ms) >= renewer.expires_ms() {
                    let reason = format!("the lease could not be renewed before it lapsed: {error}");
                    tracing::error!(%reason, "stopping the run: the lease may no longer be ours");
                    stop_run.lease_lost(reason.clone());
                    return (renewer, KeeperEnd::Lost(reason));
                }
                tracing::warn!(%error, ?retry_wait, "renewing the lease failed; retrying");
                wait = retry_wait;
            }
        }
    }
}

/// Keeps `lease` renewed while `work` runs (stopping it through `stop` if the
/// lease is lost), then releases the lease, marking its slot completed when
/// `completed` says so of the work's result. A lease lost midway is left to
/// its new holder. Returns the work's result and how keeping the lease ended.
pub async fn while_held<T>(
    store: &Store,
    clock: &Arc<dyn Clock>,
    lease: HeldLease,
    ttl: Duration,
    stop: &RunStop,
    work: impl Future<Output = T>,
    completed: impl FnOnce(&T) -> bool,
) -> (T, KeeperEnd) {
    let done = CancellationToken::new();
    // Should the caller drop this future midway, the keeper stops renewing
    // too, and the lease lapses at its expiry.
    let _stop_keeping_if_dropped = done.clone().drop_guard();
    // The renewals are the command's work: under its span.
    let keeper = tokio::spawn(
        keep_lease(
            StoreRenewer::new(store.clone(), lease, clock.clone()),
            ttl / 3,
            clock.clone(),
            done.clone(),
            stop.clone(),
        )
        .in_current_span(),
    );
    let result = work.await;
    done.cancel();
    let end = match keeper.await {
        Ok((renewer, KeeperEnd::Kept)) => {
            let completed = completed(&result);
            match store.release_lease(renewer.into_lease(), completed, clock.as_ref()).await {
                Ok(ReleaseOutcome::Released) => tracing::info!(completed, "released the lease"),
                Ok(ReleaseOutcome::NotOurs(state)) => tracing::warn!(
                    holder = state.and_then(|state| state.holder).unwrap_or_default(),
                    "the lease was no longer ours at release; left it alone"
                ),
                Err(error) => tracing::error!(%error, "releasing the lease failed; it lapses at its expiry"),
            }
            KeeperEnd::Kept
        }
        Ok((_, lost)) => lost,
        Err(error) => {
            tracing::error!(%error, "the lease keeper failed; the lease lapses at its expiry");
            KeeperEnd::Kept
        }
    };
    (result, end)
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

    #[test]
    fn a_stop_is_a_shutdown_unless_the_lease_was_lost_first() {
        let shutdown = CancellationToken::new();
        let stop = RunStop::child_of(&shutdown);
        assert_eq!(stop.cause(), None);
        shutdown.cancel();
        assert_eq!(stop.cause(), Some(StopCause::Shutdown), "the parent's shutdown stops the run");
        let lost = RunStop::new();
        lost.lease_lost("taken over".to_owned());
        lost.shut_down();
        assert_eq!(lost.cause(), Some(StopCause::LeaseLost("taken over".to_owned())), "the first cause counts");
        let shut_down = RunStop::new();
        shut_down.shut_down();
        shut_down.lease_lost("taken over while the products in flight finished".to_owned());
        assert_eq!(shut_down.cause(), Some(StopCause::Shutdown), "a shutdown first stays a shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn renews_every_third_of_the_ttl_until_the_run_ends() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), RunStop::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, Vec::new());
        let keeper = tokio::spawn(keep_lease(renewer, TTL / 3, clock.clone(), done.clone(), stop_run.clone()));
        tokio::time::sleep(Duration::from_secs(95)).await;
        done.cancel();
        let (renewer, end) = keeper.await.expect("keeper");
        assert_eq!(end, KeeperEnd::Kept);
        assert_eq!(renewer.elapsed_calls_s(), vec![10, 20, 30, 40, 50, 60, 70, 80, 90]);
        assert_eq!(stop_run.cause(), None);
        assert!(renewer.expires_ms() > clock.now_ms());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_stops_the_run_at_once() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), RunStop::new());
        let script = vec![Some(RenewOutcome::Renewed), Some(RenewOutcome::Lost(None))];
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, script);
        let (renewer, end) = keep_lease(renewer, TTL / 3, clock, done, stop_run.clone()).await;
        assert!(matches!(&end, KeeperEnd::Lost(reason) if reason.contains("taken over")));
        assert!(stop_run.token().is_cancelled());
        assert!(matches!(stop_run.cause(), Some(StopCause::LeaseLost(reason)) if reason.contains("taken over")));
        assert_eq!(renewer.elapsed_calls_s(), vec![10, 20]);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_renewals_are_retried_sooner_and_a_success_keeps_the_run_going() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), RunStop::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, vec![None, None, Some(RenewOutcome::Renewed)]);
        let keeper = tokio::spawn(keep_lease(renewer, TTL / 3, clock.clone(), done.clone(), stop_run.clone()));
        tokio::time::sleep(Duration::from_secs(30)).await;
        done.cancel();
        let (renewer, end) = keeper.await.expect("keeper");
        assert_eq!(end, KeeperEnd::Kept);
        // Failures at 10 s and 12.5 s are retried after a quarter of the interval.
        let calls_ms: Vec<i64> = renewer.calls_at_ms.iter().map(|at| at - clock.epoch_ms).collect();
        assert_eq!(calls_ms, vec![10_000, 12_500, 15_000, 25_000]);
        assert_eq!(stop_run.cause(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_failing_until_the_lease_lapses_stop_the_run_before_it_lapses() {
        let clock = TokioClock::new();
        let (done, stop_run) = (CancellationToken::new(), RunStop::new());
        let renewer = ScriptedRenewer::new(clock.clone(), TTL, (0..100).map(|_| None).collect());
        let lapses_at = renewer.expires_ms();
        let (renewer, end) = keep_lease(renewer, TTL / 3, clock.clone(), done, stop_run.clone()).await;
        assert!(matches!(end, KeeperEnd::Lost(reason) if reason.contains("could not be renewed")));
        assert!(matches!(stop_run.cause(), Some(StopCause::LeaseLost(_))), "the run's record says the lease was lost");
        assert!(clock.now_ms() < lapses_at, "stopped {} ms after the lapse", clock.now_ms() - lapses_at);
        assert!(renewer.calls_at_ms.len() >= 5, "retried {} times", renewer.calls_at_ms.len());
    }
}
