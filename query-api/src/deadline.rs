//! A deadline on a piece of work whose timer is set only if the work waits.
//!
//! `tokio::time::timeout` reads the clock and makes a timer entry (a lookup
//! of the runtime's handle, a reference count) when it is made, and drops
//! them after. A cached read is answered at its first poll, and a request
//! has two deadlines (the front door's and the kept answers' margin), so on
//! the service's hottest path that was work for nothing. Here the deadline
//! counts from the work's first wait: a read that never waits never touches
//! the clock or the timer wheel, and one that waits gets its whole duration
//! from then, which is microseconds after it was asked.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

/// The work outlived its deadline ([`within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

pin_project! {
    /// [`within`]'s future.
    pub(crate) struct Deadline<Work> {
        #[pin]
        work: Work,
        #[pin]
        timer: Option<Sleep>,
        duration: Duration,
    }
}

/// `work`'s output, or [`Elapsed`] once it has waited `duration` since it
/// first waited. On tokio's clock, as `tokio::time::timeout` is, so paused
/// time (tests) moves it.
pub(crate) fn within<Work: Future>(duration: Duration, work: Work) -> Deadline<Work> {
    Deadline { work, timer: None, duration }
}

impl<Work: Future> Future for Deadline<Work> {
    type Output = Result<Work::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.work.poll(context) {
            return Poll::Ready(Ok(output));
        }
        if this.timer.is_none() {
            this.timer.set(Some(tokio::time::sleep_until(Instant::now() + *this.duration)));
        }
        match this.timer.as_pin_mut() {
            Some(timer) => timer.poll(context).map(|()| Err(Elapsed)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_ready_at_once_is_answered_without_a_timer() {
        assert_eq!(within(Duration::ZERO, async { 7 }).await, Ok(7));
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_waits_past_the_deadline_elapses_and_work_within_it_answers() {
        let slow = within(Duration::from_millis(100), tokio::time::sleep(Duration::from_millis(150)));
        assert_eq!(slow.await, Err(Elapsed));
        let quick = within(Duration::from_millis(100), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            "answered"
        });
        assert_eq!(quick.await, Ok("answered"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_first_wait_not_from_when_it_was_made() {
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        let work = within(Duration::from_millis(100), async move {
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(80)).await;
        });
        // Made long before it is first polled: its 100 ms start at the first wait.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(work.await, Ok(()));
        assert_eq!(polls.load(Ordering::Relaxed), 1);
    }
}
