//! What a run is asked to do: which products ([`Scope`]) and how
//! ([`RunOptions`]), checked once before it starts.

use std::sync::Arc;
use std::time::Duration;

use crate::changes::Incremental;
use crate::config::{check_page_rows, PacingSettings, RankerConfig, ScoringConfig};
use crate::report::RunProgress;
use crate::shard::{KeyRange, Shard};
use crate::RankerError;

/// Which products a run ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every product with comments or rank slots.
    All,
    /// One product (a manual rerun).
    Product(common::Id),
    /// The products whose ids fall in one shard's key range, taken from the
    /// run's plan ([`crate::shard_plan::agree_on_plan`]).
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
    /// default: a real (not dry) run, scored, paced and retried as
    /// [`RankerConfig::default`] says.
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

    pub(crate) fn validate(&self) -> Result<(), RankerError> {
        self.scoring.validate()?;
        if self.concurrency == 0 {
            return Err(RankerError::InvalidOptions("concurrency must be at least 1".to_owned()));
        }
        if self.product_attempts == 0 {
            return Err(RankerError::InvalidOptions("product attempts must be at least 1".to_owned()));
        }
        check_page_rows("page rows", self.page_rows).map_err(RankerError::InvalidOptions)?;
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
