//! What a run did ([`RunReport`]) and, while it goes on, how far it is
//! ([`RunProgress`]).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::changes::ChangeReport;
use crate::pace::PaceReport;
use crate::telemetry;

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The as-of time the scores were computed for.
    pub as_of_ms: i64,
    /// Whether writes were skipped.
    pub dry_run: bool,
    /// Whether the run was stopped before it visited every product.
    pub interrupted: bool,
    /// Products ranked (their slots written, or computed in a dry run).
    pub products_ranked: u64,
    /// Comments read and scored (eligible or not).
    pub comments_scored: u64,
    /// Rank slots written (in a dry run, the slots a real run would write).
    pub slots_written: u64,
    /// Rank slots left from an earlier run and now removed (counted from the
    /// slots that existed; in a dry run, the slots that would be removed).
    pub slots_deleted: u64,
    /// Review summaries written, one per product ranked (none in a dry run).
    pub summaries_written: u64,
    /// Rows skipped: index rows with a bad key or value, index rows whose
    /// comment is gone, comments that do not decode.
    pub skipped_rows: u64,
    /// Multi-gets that fetched comments: small products share them, so there
    /// are fewer than products on a shop's long tail.
    pub comment_fetches: u64,
    /// Products that failed every attempt.
    pub failures: Vec<ProductFailure>,
    /// Wall-clock time of the run.
    pub duration_ms: u64,
    /// The pacing: mode, calls in flight, ceiling, mean rate.
    pub pacing: PaceReport,
    /// For an incremental run, what finding the changed products found and
    /// how long it took (included in `duration_ms`).
    pub changes: Option<ChangeReport>,
    /// Product keys cutting the run's range into near-equal parts, when the
    /// run listed every product of it and ranked each: recorded for the
    /// rolling refresh ([`crate::refresh`]), not printed.
    #[serde(skip)]
    pub refresh_cuts: Option<Vec<common::Id>>,
}

impl RunReport {
    /// Comments scored per second of the run.
    pub fn comments_per_second(&self) -> f64 {
        per_second(self.comments_scored, self.duration_ms)
    }

    /// Products ranked per second of the run.
    pub fn products_per_second(&self) -> f64 {
        per_second(self.products_ranked, self.duration_ms)
    }
}

fn per_second(count: u64, duration_ms: u64) -> f64 {
    count as f64 * 1000.0 / duration_ms.max(1) as f64
}

/// A product that could not be ranked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProductFailure {
    /// The product id (or, when discovery failed, the key range it was listing).
    pub product: String,
    /// The last attempt's error.
    pub error: String,
}

/// Counters a run updates as it goes, for progress displays, each also
/// counted in the run's metrics ([`telemetry`]), so one call counts an event
/// for both. Each is a running total; readers take rates from successive samples.
#[derive(Debug, Default)]
pub struct RunProgress {
    products_done: AtomicU64,
    comments_scored: AtomicU64,
    products_failed: AtomicU64,
}

/// One reading of [`RunProgress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Products finished (ranked or failed).
    pub products_done: u64,
    /// Comments scored so far.
    pub comments_scored: u64,
    /// Products that failed every attempt.
    pub products_failed: u64,
}

impl RunProgress {
    /// The counters now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            products_done: self.products_done.load(Ordering::Relaxed),
            comments_scored: self.comments_scored.load(Ordering::Relaxed),
            products_failed: self.products_failed.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn add_comments(&self, count: u64) {
        self.comments_scored.fetch_add(count, Ordering::Relaxed);
        telemetry::comments_scored(count);
    }

    pub(crate) fn finish_product(&self, failed: bool) {
        self.products_done.fetch_add(1, Ordering::Relaxed);
        telemetry::product_finished(failed);
        if failed {
            self.products_failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}
