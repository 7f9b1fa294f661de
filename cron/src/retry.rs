//! How a failed run is retried: a number of attempts with exponential backoff.

use std::time::Duration;

/// Attempts per scheduled slot and the pauses between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, at least 1 (1 = no retry).
    pub attempts: u32,
    /// Pause before the second attempt; doubles for each further attempt.
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
        let doublings = (attempt - 2).min(31);
        Some(self.backoff.saturating_mul(1 << doublings).min(self.max_backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_stops_after_the_last_attempt() {
        let policy =
            RetryPolicy { attempts: 5, backoff: Duration::from_secs(10), max_backoff: Duration::from_secs(25) };
        let delays: Vec<Option<Duration>> = (1..=6).map(|attempt| policy.delay_before(attempt)).collect();
        assert_eq!(
            delays,
            vec![
                None,
                Some(Duration::from_secs(10)),
                Some(Duration::from_secs(20)),
                Some(Duration::from_secs(25)),
                Some(Duration::from_secs(25)),
                None
            ]
        );
        let once = RetryPolicy { attempts: 1, ..policy };
        assert_eq!(once.delay_before(2), None);
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let policy =
            RetryPolicy { attempts: u32::MAX, backoff: Duration::from_secs(1), max_backoff: Duration::from_secs(60) };
        assert_eq!(policy.delay_before(u32::MAX), Some(Duration::from_secs(60)));
    }
}
