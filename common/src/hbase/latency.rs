//! How long HBase operations take lately, against how long they take when
//! nothing crowds them: the signal a service sheds load by
//! ([`crate::hbase::Hbase::latency_ratio`]).
//!
//! A flood need not fill the pool to hurt: on a small machine the gateways,
//! the region servers and the service share the cores, and every operation
//! slows while the connections are still free. So each operation's time on
//! its connection is folded into a recent average, and the average is
//! compared with a baseline that follows it down at once and up only slowly
//! (a tenth of a percent a second), so sustained crowding stays visible for
//! minutes while a real change of the data's cost is learnt within a quarter
//! of an hour.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The weight of one operation in the recent average: it follows the last
/// few dozen operations.
const RECENT_WEIGHT: f64 = 0.05;
/// How fast the baseline may rise, per second.
const BASELINE_RISE_PER_SECOND: f64 = 1.001;

/// The recent average of operation times and its baseline.
///
/// Every operation of the process folds itself in, from the blocking pool's
/// threads at once: one that finds the state taken skips its sample rather
/// than wait (the average loses nothing a moment's crowd says), and readers
/// read the last ratio from an atomic, never the lock.
#[derive(Debug)]
pub(crate) struct CallLatency {
    state: Mutex<State>,
    /// The last [`CallLatency::ratio`], as `f64` bits.
    ratio_bits: AtomicU64,
}

#[derive(Debug)]
struct State {
    /// Microseconds; zero before the first operation.
    recent_us: f64,
    baseline_us: f64,
    updated: Instant,
}

impl CallLatency {
    pub(crate) fn new() -> CallLatency {
        let state = Mutex::new(State { recent_us: 0.0, baseline_us: 0.0, updated: Instant::now() });
        CallLatency { state, ratio_bits: AtomicU64::new(1.0_f64.to_bits()) }
    }

    /// Folds in one operation that held its connection for `took`.
    pub(crate) fn record(&self, took: Duration) {
        let micros = took.as_secs_f64() * 1e6;
        let Ok(mut state) = self.state.try_lock() else { return };
        let now = Instant::now();
        let seconds = now.saturating_duration_since(state.updated).as_secs_f64();
        state.updated = now;
        if state.recent_us == 0.0 {
            (state.recent_us, state.baseline_us) = (micros, micros);
            return;
        }
        state.recent_us += RECENT_WEIGHT * (micros - state.recent_us);
        state.baseline_us = (state.baseline_us * BASELINE_RISE_PER_SECOND.powf(seconds)).min(state.recent_us);
        if state.baseline_us > 0.0 {
            self.ratio_bits.store((state.recent_us / state.baseline_us).to_bits(), Ordering::Relaxed);
        }
    }

    /// The recent average over the baseline: 1 when operations take their
    /// usual time, 2 when twice as long; 1 before any operation.
    pub(crate) fn ratio(&self) -> f64 {
        f64::from_bits(self.ratio_bits.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crowded_operations_show_against_the_baseline_and_it_comes_back() {
        let latency = CallLatency::new();
        assert_eq!(latency.ratio(), 1.0);
        for _ in 0..200 {
            latency.record(Duration::from_millis(2));
        }
        assert!((latency.ratio() - 1.0).abs() < 0.01, "{}", latency.ratio());
        // Four times as slow for a while: the average follows, the baseline does not.
        for _ in 0..200 {
            latency.record(Duration::from_millis(8));
        }
        assert!(latency.ratio() > 3.5, "{}", latency.ratio());
        // Back to the usual time.
        for _ in 0..200 {
            latency.record(Duration::from_millis(2));
        }
        assert!(latency.ratio() < 1.1, "{}", latency.ratio());
        // Faster than ever: the baseline follows down at once.
        for _ in 0..200 {
            latency.record(Duration::from_millis(1));
        }
        assert!((latency.ratio() - 1.0).abs() < 0.05, "{}", latency.ratio());
    }
}
