//! `ranker`: picks each product's ten best comments and writes them to
//! `product-comment-rank` (docs/contract.md §5).
//!
//! - [`score`] computes one comment's score and its terms, and [`select`]
//!   picks the best ten under the duplicate and one-per-user rules in bounded
//!   memory: together the scoring core, which does no I/O.
//! - [`product`] ranks one product: it streams the product's index in pages,
//!   fetches comments with multi-gets, scores on rayon and writes the slots.
//! - [`run()`] ranks every product (or one, or one [`Shard`]) concurrently,
//!   retrying and reporting failures; [`recorded`] wraps it in a run recorded
//!   in the run history, which the CLI and the cron daemon both call.
//! - [`shard`] cuts the key space into shards along `product-comment`'s
//!   regions (a pure function), and [`shard_plan`] counts the table's rows
//!   per product and makes the shards of one run agree on one plan through HBase.
//! - [`explain()`] shows how one product's ranking came about; [`read_pass()`]
//!   reads what a run reads without scoring or writing (the benchmark baseline).
//! - [`pace`] paces a run (one HBase call in flight, an optional ceiling on
//!   comments per second), so the nightly run leaves online reads their latency.
//! - [`config`] is the TOML configuration file; [`telemetry`] the run's
//!   metrics and their push to a Prometheus Pushgateway.

pub mod changes;
pub mod config;
pub mod console;
mod discovery;
mod explain;
mod fetch;
pub mod history;
pub mod keeper;
pub mod pace;
mod product;
pub mod recorded;
mod run;
pub mod score;
pub mod select;
pub mod shard;
pub mod shard_plan;
pub mod telemetry;
mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use changes::{ChangeReport, Incremental};
pub use config::{RankerConfig, RunSettings, ScoringConfig, Weights};
pub use explain::{explain, ExplainedComment, Explanation, LeftOut, LeftOutReason};
pub use pace::{PaceMode, PaceReport, PacingSettings};
pub use run::{read_pass, run};
pub use shard::{InvalidShard, KeyRange, Shard};

/// Which products a run ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every product with comments or rank slots.
    All,
    /// One product (a manual rerun).
    Product(common::Id),
    /// The products whose ids fall in one shard's key range, taken from the
    /// run's plan ([`shard_plan::agree_on_plan`]).
    Shard {
        /// Which shard.
        shard: Shard,
        /// Its range in the run's plan.
        range: KeyRange,
    },
}

impl Scope {
    /// The product key range a listed scope covers; `None` for one product.
    pub fn key_range(&self) -> Option<KeyRange> {
        match self {
            Scope::All => Some(KeyRange::everything()),
            Scope::Shard { range, .. } => Some(range.clone()),
            Scope::Product(_) => None,
        }
    }
}

/// How to run.
#[derive(Clone)]
pub struct RunOptions {
    /// Which products to rank.
    pub scope: Scope,
    /// The as-of time `T` of the recency term, epoch milliseconds. The same
    /// data and the same as-of time give the same slots, byte for byte.
    pub as_of_ms: i64,
    /// Compute and report, but write nothing.
    pub dry_run: bool,
    /// Products ranked at once.
    pub concurrency: usize,
    /// How comments are scored.
    pub scoring: ScoringConfig,
    /// Attempts per product before it is reported as failed (1 = no retry).
    pub product_attempts: u32,
    /// Pause before a product's second attempt; doubles for each further attempt, less jitter (`common::retry`).
    pub retry_backoff: Duration,
    /// Index rows (and comments) read per round trip within one product.
    pub page_rows: usize,
    /// How long product discovery keeps retrying a listing step while HBase is
    /// unavailable. Longer than a product's retries on purpose: a failed
    /// product is one product, but a listing that gives up loses every
    /// product after it from the run.
    pub listing_patience: Duration,
    /// How the run paces itself (`on` by default; `ranker bench-read` turns it off).
    pub pacing: PacingSettings,
    /// Live counters for a progress display; `None` when nobody watches.
    pub progress: Option<Arc<RunProgress>>,
    /// Rank only what may have changed (and tonight's refresh slice); `None`
    /// ranks every product in scope.
    pub incremental: Option<Incremental>,
}

impl RunOptions {
    /// Options for `scope` at `as_of_ms` with every other setting at its
    /// default: a real (not dry) run paced by [`RunSettings::default`].
    pub fn new(scope: Scope, as_of_ms: i64) -> RunOptions {
        RunOptions::with_config(scope, as_of_ms, &RankerConfig::default())
    }

    /// Options for `scope` at `as_of_ms`, scored and paced by `config`.
    pub fn with_config(scope: Scope, as_of_ms: i64, config: &RankerConfig) -> RunOptions {
        RunOptions {
            scope,
            as_of_ms,
            dry_run: false,
            concurrency: config.run.concurrency,
            scoring: config.scoring.clone(),
            product_attempts: config.run.product_attempts,
            retry_backoff: config.run.retry_backoff(),
            page_rows: config.run.page_rows,
            listing_patience: config.run.listing_patience(),
            pacing: config.pacing.clone(),
            progress: None,
            incremental: None,
        }
    }

    fn validate(&self) -> Result<(), RankerError> {
        self.scoring.validate()?;
        if self.concurrency == 0 {
            return Err(RankerError::InvalidOptions("concurrency must be at least 1".to_owned()));
        }
        if self.product_attempts == 0 {
            return Err(RankerError::InvalidOptions("product attempts must be at least 1".to_owned()));
        }
        if !(1..=config::MAX_PAGE_ROWS).contains(&self.page_rows) {
            return Err(RankerError::InvalidOptions(format!(
                "page rows must be from 1 to {}, got {}",
                config::MAX_PAGE_ROWS,
                self.page_rows
            )));
        }
        self.pacing.validate().map_err(RankerError::InvalidOptions)?;
        if let Some(incremental) = self.incremental {
            if matches!(self.scope, Scope::Product(_)) {
                return Err(RankerError::InvalidOptions(
                    "an incremental run ranks all products or a shard, not one product".to_owned(),
                ));
            }
            if incremental.refresh_days == Some(0) {
                return Err(RankerError::InvalidOptions("refresh days must be at least 1".to_owned()));
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("scope", &self.scope)
            .field("as_of_ms", &self.as_of_ms)
            .field("dry_run", &self.dry_run)
            .field("concurrency", &self.concurrency)
            .field("scoring", &self.scoring)
            .field("product_attempts", &self.product_attempts)
            .field("retry_backoff", &self.retry_backoff)
            .field("page_rows", &self.page_rows)
            .field("listing_patience", &self.listing_patience)
            .field("pacing", &self.pacing)
            .field("progress", &self.progress.is_some())
            .field("incremental", &self.incremental)
            .finish()
    }
}

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

/// Why a run (as a whole) could not proceed. A failing product is not one of
/// these: it is retried, then listed in [`RunReport::failures`].
#[derive(Debug, thiserror::Error)]
pub enum RankerError {
    /// The configuration file is unreadable or holds a meaningless value.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The run options are inconsistent.
    #[error("invalid run options: {0}")]
    InvalidOptions(String),
    /// HBase failed an operation the whole run depends on.
    #[error(transparent)]
    Storage(#[from] common::Error),
    /// The run's shard plan could not be made, stored or read back.
    #[error("shard plan: {0}")]
    ShardPlan(String),
    /// Scoring on the rayon pool panicked; a bug, reported instead of aborting.
    #[error("scoring failed: {0}")]
    Scoring(String),
}
