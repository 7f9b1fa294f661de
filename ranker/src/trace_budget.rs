//! How much of a pass a kept trace holds: a span for each of its first
//! products ([`ProductSpans`]), and the first HBase calls of the pass's own
//! tasks ([`CallSpans`]: the listing of products, the change walks and the
//! slot writer, whose calls belong to no one product).
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

use common::Id;
use tracing::instrument::Instrumented;
use tracing::Instrument as _;

/// The most products of one pass that get a span of their own (with their
/// HBase calls under it): a nightly run ranks millions of products, and a
/// trace of millions of spans is one no trace store shows. The first ones a
/// pass starts are traced; the pass's span counts the rest.
pub(crate) const MAX_TRACED_PRODUCTS: u64 = 1_000;

/// The spans of a pass's products: one for each of the first
/// [`MAX_TRACED_PRODUCTS`] under a kept trace, none for the others.
#[derive(Debug, Default)]
pub(crate) struct ProductSpans {
    traced: u64,
    untraced: u64,
}

impl ProductSpans {
    /// The span of `product`'s ranking, every attempt of it, under the pass's.
    pub(crate) fn next(&mut self, product: &Id) -> tracing::Span {
        if !common::traces::in_kept_trace() {
            return tracing::Span::none();
        }
        if !self.take_one() {
            return tracing::Span::none();
        }
        tracing::info_span!("product", otel.name = "rank product", product = %product)
    }

    /// Whether the next product of the pass is traced, counting it either way.
    fn take_one(&mut self) -> bool {
        if self.traced < MAX_TRACED_PRODUCTS {
            self.traced += 1;
            true
        } else {
            self.untraced += 1;
            false
        }
    }

    /// Records the counts on the pass's span (the current one).
    pub(crate) fn record_on_pass(&self) {
        let pass = tracing::Span::current();
        pass.record("products_traced", self.traced);
        pass.record("products_untraced", self.untraced);
    }
}

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
    fn a_pass_traces_its_first_products_only_and_counts_the_rest() {
        let mut spans = ProductSpans::default();
        let traced = (0..MAX_TRACED_PRODUCTS + 5).filter(|_| spans.take_one()).count();
        assert_eq!(u64::try_from(traced).expect("count"), MAX_TRACED_PRODUCTS);
        assert_eq!((spans.traced, spans.untraced), (MAX_TRACED_PRODUCTS, 5));
    }

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
