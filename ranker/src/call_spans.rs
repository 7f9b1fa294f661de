//! A bound on the HBase call spans of a pass's own tasks: the listing of
//! products and the slot writer, whose calls belong to no one product.
//!
//! A nightly run lists millions of index rows a few hundred to a call and
//! writes its products' slots a few at a time; under a kept trace every one
//! of those calls would be a span of the one pass, and a trace of hundreds
//! of thousands of spans is one no trace store shows. The first calls of
//! each task are traced (what an on-call engineer reads: how long a listing
//! step or a write takes); the rest run outside any span.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tracing::instrument::Instrumented;
use tracing::Instrument as _;

/// The calls of one task that are traced.
pub(crate) const MAX_TRACED_CALLS: u32 = 1_000;

/// What is left of a task's budget of traced calls; its clones share it
/// (a stream of steps, each step a closure of its own).
#[derive(Debug, Clone)]
pub(crate) struct CallSpans {
    left: Arc<AtomicU32>,
}

impl CallSpans {
    /// A task's whole budget.
    pub(crate) fn new() -> CallSpans {
        CallSpans { left: Arc::new(AtomicU32::new(MAX_TRACED_CALLS)) }
    }

    /// `call` under the current span (the pass's) while the budget lasts,
    /// and under none afterwards, so that it makes no span of its own.
    pub(crate) fn traced<F: Future>(&self, call: F) -> Instrumented<F> {
        let spent = self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1));
        match spent {
            Ok(_) => call.in_current_span(),
            Err(_) => call.instrument(tracing::Span::none()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_traces_its_first_calls_and_no_more() {
        let spans = CallSpans::new();
        let shared = spans.clone();
        for _ in 0..MAX_TRACED_CALLS / 2 {
            drop(spans.traced(async {}));
            drop(shared.traced(async {}));
        }
        assert_eq!(spans.left.load(Ordering::Relaxed), 0, "the clones spend one budget");
        assert!(spans.traced(async {}).span().is_none(), "the call after the budget runs outside any span");
    }
}
