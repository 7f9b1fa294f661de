//! The one retry policy of the workspace: exponential backoff with a cap and
//! jitter. Every loop that waits before trying again (an HBase operation, a
//! product, a listing step, a nightly run) takes its pauses from a
//! [`Backoff`]; what ends each loop (a deadline, an abandoned caller, a stop
//! token, a listing's patience) stays with the loop, because only it knows.
//!
//! The pauses are jittered downwards: each is its ceiling (the first pause,
//! doubled per retry, at most the cap) less a random part of up to a quarter
//! of it. Many callers that failed together (every product of a run when the
//! gateway went away) then come back spread out instead of in one burst, and
//! a pause never exceeds the ceiling the caller configured, so caps and
//! deadlines computed from the ceiling still hold.

use std::time::{Duration, Instant};

/// The largest share of a pause that jitter takes off, as 1/`JITTER_DIVISOR`.
const JITTER_DIVISOR: u32 = 4;

/// Exponential backoff: `first` before the first retry, doubling per retry, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
}

impl Backoff {
    /// Pauses starting at `first` and never longer than `max` (which also caps `first`).
    pub const fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { first, max }
    }

    /// Pauses starting at `first` and doubling without a cap, for loops that
    /// a deadline or a small number of attempts ends anyway.
    pub const fn uncapped(first: Duration) -> Backoff {
        Backoff { first, max: Duration::MAX }
    }

    /// The longest pause before retry number `retry` (1 is the first retry):
    /// `first` doubled `retry - 1` times, at most the cap.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }

    /// The pause before retry number `retry`: its [`ceiling`](Backoff::ceiling)
    /// less a random part of up to a quarter of it.
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self.ceiling(retry);
        // A quarter of the ceiling in nanoseconds fits 95 bits; scaled by a
        // 32-bit random fraction it stays within u128.
        let most = ceiling.as_nanos() / u128::from(JITTER_DIVISOR);
        let jitter = (most * u128::from(rand::random::<u32>())) >> 32;
        let seconds = u64::try_from(jitter / 1_000_000_000).unwrap_or(u64::MAX);
        let nanos = u32::try_from(jitter % 1_000_000_000).unwrap_or_default();
        ceiling.saturating_sub(Duration::new(seconds, nanos))
    }

    /// [`Backoff::delay`] for retry number `retry`, or `None` when sleeping it
    /// would reach `deadline`: a retry that could not finish in time is not worth its pause.
    pub fn delay_within(&self, retry: u32, deadline: Instant) -> Option<Duration> {
        let delay = self.delay(retry);
        (Instant::now() + delay < deadline).then_some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `delay` lies in the jitter window below `ceiling`.
    fn within_jitter(delay: Duration, ceiling: Duration) -> bool {
        delay <= ceiling && delay >= ceiling - ceiling / JITTER_DIVISOR
    }

    #[test]
    fn ceilings_double_up_to_the_cap() {
        let backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(25));
        let ceilings: Vec<Duration> = (1..=5).map(|retry| backoff.ceiling(retry)).collect();
        let seconds = [10, 20, 25, 25, 25].map(Duration::from_secs);
        assert_eq!(ceilings, seconds);
        // The cap applies to the first pause too.
        assert_eq!(Backoff::new(Duration::from_secs(9), Duration::from_secs(5)).ceiling(1), Duration::from_secs(5));
    }

    #[test]
    fn jitter_stays_within_a_quarter_below_the_ceiling_and_varies() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(60));
        for retry in 1..=12 {
            let ceiling = backoff.ceiling(retry);
            let delays: Vec<Duration> = (0..200).map(|_| backoff.delay(retry)).collect();
            for delay in &delays {
                assert!(within_jitter(*delay, ceiling), "retry {retry}: {delay:?} against a ceiling of {ceiling:?}");
            }
            // Two hundred draws that all came out the same would mean no jitter at all.
            assert!(delays.iter().any(|delay| *delay != delays[0]), "retry {retry}: no jitter in {delays:?}");
        }
    }

    #[test]
    fn the_cap_is_honoured_however_many_retries() {
        let cap = Duration::from_secs(5);
        let backoff = Backoff::new(Duration::from_millis(500), cap);
        for retry in [5, 6, 31, 32, 1_000, u32::MAX] {
            let delay = backoff.delay(retry);
            assert!(within_jitter(delay, cap), "retry {retry}: {delay:?}");
        }
    }

    #[test]
    fn uncapped_pauses_do_not_overflow() {
        let backoff = Backoff::uncapped(Duration::from_secs(1));
        assert_eq!(backoff.ceiling(u32::MAX), Duration::from_secs(1 << 31));
        let huge = Backoff::uncapped(Duration::MAX);
        assert!(within_jitter(huge.delay(u32::MAX), Duration::MAX));
    }

    #[test]
    fn no_pause_is_offered_that_would_reach_the_deadline() {
        let backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(1));
        let soon = Instant::now() + Duration::from_millis(100);
        assert_eq!(backoff.delay_within(1, soon), None, "a 150-200 ms pause cannot end before a 100 ms deadline");
        let later = Instant::now() + Duration::from_secs(2);
        for retry in 1..=8 {
            let delay = backoff.delay_within(retry, later).expect("a pause of at most a second fits in two");
            assert!(within_jitter(delay, backoff.ceiling(retry)), "{delay:?}");
            assert!(Instant::now() + delay < later);
        }
    }
}
