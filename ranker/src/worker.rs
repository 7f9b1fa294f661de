//! One product of a run, ranked (or, in the read-only pass, read) with its
//! retries: [`Worker`], cloned into every product task.

use std::sync::Arc;

use common::retry::Backoff;
use common::store::Store;
use tokio_util::sync::CancellationToken;

use crate::config::PaceMode;
use crate::fetch::CommentFetcher;
use crate::pace::Pacer;
use crate::product::{
    existing_slot_mask, rank_product, stream_comments, IndexReader, ProductJob, ProductOutcome, StreamOptions,
};
use crate::run_products::ProductToRank;
use crate::writer::SlotWriter;
use crate::{RankerError, RunOptions};

/// What each product goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Score, select and write slots.
    Rank,
    /// Read the same index rows and comments, and nothing else.
    ReadOnly,
}

/// Everything a product task needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct Worker {
    store: Store,
    pub(crate) job: Arc<ProductJob>,
    pass: Pass,
    attempts: u32,
    backoff: Backoff,
    stop: CancellationToken,
}

impl Worker {
    /// The workers of a run under `options`, sharing one pacer and fetcher,
    /// and `writer` unless the run writes nothing; logs how the run is set up.
    pub(crate) fn new(
        store: &Store,
        options: &RunOptions,
        pass: Pass,
        pacer: &Pacer,
        writer: Option<SlotWriter>,
        stop: &CancellationToken,
    ) -> Worker {
        let dry_run = writer.is_none();
        // Smaller pages when paced: a reader queues behind a big multi-get for
        // as long as it holds a gateway thread and a handler.
        let page_rows = match options.pacing.mode {
            PaceMode::On => options.pacing.page_rows,
            PaceMode::Off => options.page_rows,
        };
        let job = Arc::new(ProductJob {
            scoring: Arc::new(options.scoring.clone()),
            as_of_ms: options.as_of_ms,
            writer,
            page_rows,
            pacer: pacer.clone(),
            fetcher: CommentFetcher::new(store.clone(), pacer.clone(), page_rows),
            // Counted whether or not anybody watches: the counts feed the metrics too.
            progress: options.progress.clone().unwrap_or_default(),
        });
        tracing::info!(
            scope = ?options.scope,
            as_of_ms = options.as_of_ms,
            dry_run,
            ?pass,
            concurrency = options.concurrency,
            pace = options.pacing.mode.as_str(),
            max_rate = options.pacing.max_rate,
            page_rows,
            "run started"
        );
        Worker {
            store: store.clone(),
            job,
            pass,
            attempts: options.product_attempts,
            // Uncapped: a product has few attempts, so its pauses stay short.
            backoff: Backoff::uncapped(options.retry_backoff),
            stop: stop.clone(),
        }
    }

    /// One product, with retries.
    pub(crate) async fn product(&self, found: ProductToRank) -> Result<ProductOutcome, String> {
        let mut attempt = 1;
        loop {
            match self.attempt(&found).await {
                Ok(outcome) => return Ok(outcome),
                Err(error) if attempt < self.attempts && !self.stop.is_cancelled() => {
                    let delay = self.backoff.delay(attempt);
                    tracing::warn!(product = %found.product, attempt, %error, ?delay, "ranking a product failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.stop.cancelled() => return Err(format!("{error} (not retried: the run was stopped)")),
                    }
                    attempt += 1;
                }
                Err(error) => {
                    tracing::error!(product = %found.product, attempts = attempt, %error, "ranking a product failed");
                    return Err(error.to_string());
                }
            }
        }
    }

    /// One try at the product. Every try uses the index discovery handed
    /// over, when it did (borrowed: each try splits it into its own pages): a
    /// retry follows a failed multi-get or slot write, and the listing's rows
    /// are as good as they were on the first try.
    async fn attempt(&self, found: &ProductToRank) -> Result<ProductOutcome, RankerError> {
        let product = found.product;
        match self.pass {
            Pass::Rank => {
                let slot_mask = match found.slot_mask {
                    Some(mask) => mask,
                    None => self.job.pacer.call(existing_slot_mask(&self.store, &product)).await?,
                };
                rank_product(&self.store, &product, slot_mask, found.whole_index.as_ref(), &self.job).await
            }
            Pass::ReadOnly => {
                let count = |_: &mut (), _: Vec<common::model::Comment>| {};
                let job = &self.job;
                let index = IndexReader::for_product(
                    &self.store,
                    &product,
                    found.whole_index.as_ref(),
                    job.page_rows,
                    &job.pacer,
                );
                let options =
                    StreamOptions { progress: Some(&job.progress), marker: None, summary_through_ms: job.as_of_ms };
                let ((), totals) = stream_comments(index, &job.fetcher, (), count, options).await?;
                Ok(ProductOutcome {
                    comments_scored: totals.listed,
                    skipped_rows: totals.skipped_rows,
                    ..ProductOutcome::default()
                })
            }
        }
    }
}
