//! How a failed run is retried: a number of attempts, paused by the
//! workspace's one backoff policy (`common::retry`: doubling, capped, jittered).

use std::time::Duration;

use common::retry::Backoff;

/// Attempts per scheduled slot and the pauses between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, at least 1 (1 = no retry).
    pub attempts: u32,
    /// Pause before the second attempt; doubles for each further attempt,
    /// each pause less up to a quarter of jitter.
    pub backoff: Duration,
    /// The longest pause between two attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 3, backoff: Duration::from_secs(300), max_backoff: Duration::from_secs(1_800) }
    }
}

impl RetryPolicy {
    /// The pause before attempt number `attempt` (2 for the first retry), or
    /// `None` when the policy allows no such attempt.
    pub fn delay_before(&self, attempt: u32) -> Option<Duration> {
        if attempt < 2 || attempt > self.attempts {
            return None;
        }
        Some(Backoff::new(self.backoff, self.max_backoff).delay(attempt - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `delay` is `ceiling` less at most the quarter that jitter may take.
    fn jittered_from(delay: Option<Duration>, ceiling: Option<Duration>) -> bool {
        match (delay, ceiling) {
            (None, None) => true,
            (Some(delay), Some(ceiling)) => delay <= ceiling && delay >= ceiling - ceiling / 4,
            _ => false,
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_stops_after_the_last_attempt() {
        let policy =
            RetryPolicy { attempts: 5, backoff: Duration::from_secs(10), max_backoff: Duration::from_secs(25) };
        let ceilings = [None, Some(10), Some(20), Some(25), Some(25), None].map(|secs| secs.map(Duration::from_secs));
        for (attempt, ceiling) in (1..=6).zip(ceilings) {
            let delay = policy.delay_before(attempt);
            assert!(jittered_from(delay, ceiling), "attempt {attempt}: {delay:?} against {ceiling:?}");
        }
        let once = RetryPolicy { attempts: 1, ..policy };
        assert_eq!(once.delay_before(2), None);
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let policy =
            RetryPolicy { attempts: u32::MAX, backoff: Duration::from_secs(1), max_backoff: Duration::from_secs(60) };
        let delay = policy.delay_before(u32::MAX);
        assert!(jittered_from(delay, Some(Duration::from_secs(60))), "{delay:?}");
    }
}
