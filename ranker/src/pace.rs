//! Pacing of a run, so that the nightly ranking leaves online reads their latency.
//!
//! The rule: a paced run (`--pace on`, the default) has at most
//! `pacing.max_in_flight` HBase calls out at once (one by default), whatever
//! its product concurrency, and, when `pacing.max_rate` is set, reads at most
//! that many comments per second. A run paced `off` has as many calls out as
//! its products make, under the same optional ceiling.
//!
//! Why this is enough: readers and the ranker queue for the same Thrift
//! gateway threads, region-server handlers and CPU. With one call out, the
//! run holds at most one of each, so a reader finds the rest free; and the
//! run is self-clocked, since it asks for its next page only when HBase has
//! answered the last: when readers make HBase slower, the run's calls take
//! longer and it asks for less, with no control law to tune. A rate cap
//! alone does not do this, HBase's own quota throttle included: the calls
//! under the cap still arrive together. docs/pacing.md says why, and where
//! the measurements against that throttle and a latency-driven law are
//! kept. The ceiling is for an operator who wants a run slower still, say on
//! a shared cluster by day.
//!
//! Invariants: at most `max_in_flight` calls made through [`Pacer::call`]
//! are in flight at any moment; over any span of `t` seconds from the start,
//! the comments granted before the last grant are at most
//! `max_rate * t + burst`, the burst being a tenth of a second of the rate
//! ([`TokenBucket`]).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::config::{PaceMode, PacingSettings};

/// How much of the rate the bucket holds when full: a tenth of a second's worth.
const BURST_SECONDS: f64 = 0.1;

/// What pacing did during a run (part of [`crate::RunReport`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaceReport {
    /// `on` or `off`.
    pub mode: PaceMode,
    /// The ceiling, comments per second, if one was set.
    pub max_rate: Option<f64>,
    /// The bound on HBase calls the run had in flight at once (`None` when `off`).
    pub max_in_flight: Option<usize>,
    /// Comments scored per second over the whole run.
    pub mean_rate: f64,
}

/// A token bucket of comments, the state of a run's ceiling: it fills at
/// `rate` per second up to `burst`. A take is granted whenever the bucket is
/// not in debt, whatever its size, and may leave it in debt, so the next take
/// waits for it: the rate holds for pages of any size, including pages larger
/// than the burst.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket of `rate` comments per second (finite and positive).
    pub(crate) fn new(rate: f64, now: Instant) -> TokenBucket {
        let burst = (rate * BURST_SECONDS).max(1.0);
        TokenBucket { rate, burst, tokens: burst, updated: now }
    }

    /// Takes `comments` at `now`, or says how long to wait before the bucket
    /// is out of debt and a take can be granted.
    pub(crate) fn take(&mut self, comments: usize, now: Instant) -> Result<(), Duration> {
        let refill = self.rate * now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + refill).min(self.burst);
        self.updated = self.updated.max(now);
        if self.tokens >= 0.0 {
            self.tokens -= comments as f64;
            return Ok(());
        }
        // At least a millisecond, so a debt of a fraction of a comment does
        // not spin.
        Err(Duration::from_secs_f64(-self.tokens / self.rate).max(Duration::from_millis(1)))
    }
}

/// What every product task of a run goes through before an HBase call;
/// cheap to clone.
#[derive(Debug, Clone)]
pub struct Pacer {
    inner: Arc<PacerInner>,
}

#[derive(Debug)]
struct PacerInner {
    mode: PaceMode,
    max_rate: Option<f64>,
    /// The ceiling's bucket. Waiters queue on this lock in arrival order
    /// (tokio's mutex is fair), so one product cannot starve the others.
    bucket: Option<tokio::sync::Mutex<TokenBucket>>,
    /// Turns for HBase calls when paced (`max_in_flight` of them), and how many.
    turns: Option<(tokio::sync::Semaphore, usize)>,
}

impl Pacer {
    /// A pacer following `settings`, starting now.
    pub fn new(settings: &PacingSettings) -> Pacer {
        let turns = match settings.mode {
            PaceMode::On => Some((tokio::sync::Semaphore::new(settings.max_in_flight), settings.max_in_flight)),
            PaceMode::Off => None,
        };
        Pacer {
            inner: Arc::new(PacerInner {
                mode: settings.mode,
                max_rate: settings.max_rate,
                bucket: settings.max_rate.map(|rate| tokio::sync::Mutex::new(TokenBucket::new(rate, Instant::now()))),
                turns,
            }),
        }
    }

    /// A pacer that never waits (explanations).
    pub fn unlimited() -> Pacer {
        Pacer::new(&PacingSettings { mode: PaceMode::Off, max_rate: None, ..PacingSettings::default() })
    }

    /// Waits until `comments` may be fetched under the ceiling, if there is one.
    pub async fn acquire(&self, comments: usize) {
        let Some(bucket) = &self.inner.bucket else {
            return;
        };
        let mut bucket = bucket.lock().await;
        while let Err(wait) = bucket.take(comments, Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }

    /// Makes one HBase call of the run, after waiting for a turn when paced.
    pub(crate) async fn call<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        // The semaphore is never closed, so a turn always comes.
        let _turn = match &self.inner.turns {
            Some((turns, _)) => turns.acquire().await.ok(),
            None => None,
        };
        call.await
    }

    /// What the pacing was, for a run that scored `comments` in `duration`.
    pub fn report(&self, comments: u64, duration: Duration) -> PaceReport {
        PaceReport {
            mode: self.inner.mode,
            max_rate: self.inner.max_rate,
            max_in_flight: self.inner.turns.as_ref().map(|(_, count)| *count),
            mean_rate: comments as f64 / duration.as_secs_f64().max(1e-3),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The ceiling holds: when a take is granted, what was granted before
        /// it is at most the burst plus the rate times the time since the
        /// start, for any page sizes and any times of asking.
        #[test]
        fn a_bucket_never_grants_more_than_its_rate_and_burst(
            rate in 1.0_f64..100_000.0,
            takes in proptest::collection::vec((1_usize..=5_000, 0_u64..2_000), 1..200),
        ) {
            let start = Instant::now();
            let mut bucket = TokenBucket::new(rate, start);
            let (mut now, mut granted) = (start, 0.0);
            for (comments, pause_ms) in takes {
                now += Duration::from_millis(pause_ms);
                while let Err(wait) = bucket.take(comments, now) {
                    prop_assert!(wait > Duration::ZERO);
                    now += wait;
                }
                let allowed = bucket.burst + rate * (now - start).as_secs_f64();
                prop_assert!(granted <= allowed * (1.0 + 1e-9), "{granted} granted before {allowed} allowed");
                granted += comments as f64;
            }
        }

        /// Waits are as short as the ceiling allows: a take made after its
        /// predecessor's debt was paid off is granted at once, and a wait
        /// never exceeds the time the debt takes to pay off.
        #[test]
        fn a_bucket_makes_no_take_wait_longer_than_its_debt(
            rate in 1.0_f64..100_000.0,
            first in 1_usize..=5_000,
            second in 1_usize..=5_000,
        ) {
            let start = Instant::now();
            let mut bucket = TokenBucket::new(rate, start);
            prop_assert!(bucket.take(first, start).is_ok());
            let debt = (first as f64 - bucket.burst).max(0.0);
            let paid_off = Duration::from_secs_f64(debt / rate);
            match bucket.take(second, start) {
                Ok(()) => prop_assert!(debt == 0.0),
                Err(wait) => {
                    prop_assert!(wait <= paid_off.max(Duration::from_millis(1)) + Duration::from_micros(1));
                    prop_assert!(bucket.take(second, start + paid_off + Duration::from_micros(1)).is_ok());
                }
            }
        }
    }

    /// Drives `tasks` product tasks taking pages of `page` comments for
    /// `seconds` of paused time; the comments they were granted.
    async fn drive(pacer: &Pacer, tasks: usize, page: usize, seconds: u64) -> usize {
        let granted = Arc::new(AtomicUsize::new(0));
        let until = Instant::now() + Duration::from_secs(seconds);
        let mut running = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let (pacer, granted) = (pacer.clone(), granted.clone());
            running.spawn(async move {
                while Instant::now() < until {
                    pacer.acquire(page).await;
                    granted.fetch_add(page, Ordering::Relaxed);
                    pacer.call(tokio::time::sleep(Duration::from_millis(2))).await;
                }
            });
        }
        while running.join_next().await.is_some() {}
        granted.load(Ordering::Relaxed)
    }

    #[tokio::test(start_paused = true)]
    async fn the_ceiling_holds_in_both_modes_and_is_reached() {
        for mode in [PaceMode::On, PaceMode::Off] {
            let pacer = Pacer::new(&PacingSettings { mode, max_rate: Some(3_000.0), ..PacingSettings::default() });
            let mean = drive(&pacer, 8, 250, 20).await as f64 / 20.0;
            // The burst and the pages in flight at the end allow a little over.
            assert!(mean <= 3_000.0 * 1.05, "{mode:?}: {mean} comments/s over a 3,000 ceiling");
            assert!(mean >= 3_000.0 * 0.95, "{mode:?}: {mean} comments/s, well under the ceiling");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_ceiling_nothing_waits_for_the_rate() {
        let pacer = Pacer::new(&PacingSettings::default());
        let started = Instant::now();
        for _ in 0..1_000 {
            pacer.acquire(1_000).await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
        let report = pacer.report(1_000_000, Duration::from_secs(2));
        assert_eq!(
            (report.mode, report.max_rate, report.max_in_flight, report.mean_rate),
            (PaceMode::On, None, Some(1), 500_000.0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_run_has_at_most_max_in_flight_calls() {
        for (mode, max_in_flight, expected_peak) in [(PaceMode::On, 1, 1), (PaceMode::On, 2, 2), (PaceMode::Off, 1, 8)]
        {
            let pacer = Pacer::new(&PacingSettings { mode, max_in_flight, ..PacingSettings::default() });
            let in_flight = Arc::new(AtomicUsize::new(0));
            let peak = Arc::new(AtomicUsize::new(0));
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..8 {
                let (pacer, in_flight, peak) = (pacer.clone(), in_flight.clone(), peak.clone());
                calls.spawn(async move {
                    pacer
                        .call(async {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                });
            }
            while calls.join_next().await.is_some() {}
            assert_eq!(peak.load(Ordering::SeqCst), expected_peak, "{mode:?}, max_in_flight {max_in_flight}");
        }
    }

    #[test]
    fn the_mode_of_the_earlier_law_still_parses_as_on() {
        let settings: PacingSettings = toml::from_str("mode = \"adaptive\"\n").expect("adaptive parses");
        assert_eq!(settings.mode, PaceMode::On);
        assert!(toml::from_str::<PacingSettings>("tolerance = 1.5\n").is_err(), "keys of the earlier law are refused");
    }

    #[test]
    fn meaningless_settings_are_refused() {
        assert!(PacingSettings::default().validate().is_ok());
        for bad in [
            PacingSettings { max_rate: Some(0.0), ..PacingSettings::default() },
            PacingSettings { max_rate: Some(f64::NAN), ..PacingSettings::default() },
            PacingSettings { page_rows: 0, ..PacingSettings::default() },
            PacingSettings { page_rows: 5_001, ..PacingSettings::default() },
            PacingSettings { max_in_flight: 0, ..PacingSettings::default() },
        ] {
            assert!(bad.validate().is_err(), "accepted {bad:?}");
        }
    }
}
