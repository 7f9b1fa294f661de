//! Ranking one product: stream its `product-comment` prefix in bounded pages,
//! fetch each page's comments with one multi-get, score on rayon while the
//! next page is being read, keep the best in a bounded pool, then replace the
//! product's rank slots in one `mutateRows`.
//!
//! At most two pages of one product are in memory at once (the one being
//! scored and the one being read), and the pool is bounded, so memory does not
//! depend on how many comments the product has.

use std::sync::Arc;

use common::keys::{CommentKey, MAX_RANK};
use common::model::Comment;
use common::store::Store;
use common::Id;

use crate::config::ScoringConfig;
use crate::select::{Selection, TopComments, MAX_PICKS};
use crate::{RankerError, RunProgress};

/// What ranking one product needs besides the store.
#[derive(Debug, Clone)]
pub struct ProductJob {
    /// How comments are scored.
    pub scoring: Arc<ScoringConfig>,
    /// The as-of time of the recency term.
    pub as_of_ms: i64,
    /// Compute, but write nothing.
    pub dry_run: bool,
    /// Index rows read per round trip.
    pub page_rows: usize,
    /// Where to count scored comments as they go.
    pub progress: Option<Arc<RunProgress>>,
}

/// What ranking one product did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProductOutcome {
    /// The picks, rank 1 first, with their scores.
    pub ranked: Vec<(CommentKey, f64)>,
    /// Comments read and scored.
    pub comments_scored: u64,
    /// Index rows skipped, comments gone, comments that do not decode.
    pub skipped_rows: u64,
    /// Slots written (or, in a dry run, that would be).
    pub slots_written: u64,
    /// Slots that existed beyond the new picks and were removed (or would be).
    pub slots_deleted: u64,
}

/// Totals of one product's pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTotals {
    /// Comments read (and handed to the page work).
    pub comments: u64,
    /// Index rows skipped, comments gone, comments that do not decode.
    pub skipped_rows: u64,
}

/// One page of a product's comments.
struct CommentPage {
    comments: Vec<Comment>,
    skipped_rows: u64,
    next: Option<Vec<u8>>,
}

/// Reads one page of `product`'s index and the comments it names. Rows that
/// cannot be used (bad index rows, comments gone or undecodable, comments of
/// another product) are left out and counted.
async fn read_page(store: &Store, product: &Id, start: Option<Vec<u8>>, rows: usize) -> common::Result<CommentPage> {
    let index = store.product_comment_page_counted(product, start, rows).await?;
    let keys: Vec<CommentKey> = index.entries.iter().map(|entry| entry.comment).collect();
    let fetched = if keys.is_empty() { Vec::new() } else { store.get_comments(&keys).await? };
    let named = fetched.len() as u64;
    let comments: Vec<Comment> =
        fetched.into_iter().flatten().filter(|comment| comment.product_id == *product).collect();
    let skipped_rows = index.skipped + named - comments.len() as u64;
    Ok(CommentPage { comments, skipped_rows, next: index.next })
}

/// Runs `work` on the rayon pool and waits for it without blocking a tokio
/// worker thread. A panic in `work` comes back as an error instead of
/// aborting the process (rayon's default for a panic in a spawned job).
pub(crate) async fn on_rayon<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, RankerError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        // The receiver is gone only when the caller stopped waiting; nothing to tell it.
        let _ = sender.send(outcome);
    });
    match receiver.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a scoring task panicked".to_owned());
            Err(RankerError::Scoring(message))
        }
        Err(_) => Err(RankerError::Scoring("a scoring task was dropped".to_owned())),
    }
}

/// Streams every comment of `product` through `work` (run on rayon, one page
/// at a time), reading the next page while the current one is processed.
pub(crate) async fn stream_comments<S, W>(
    store: &Store,
    product: &Id,
    page_rows: usize,
    state: S,
    work: W,
    progress: Option<&RunProgress>,
) -> Result<(S, StreamTotals), RankerError>
where
    S: Send + 'static,
    W: Fn(&mut S, Vec<Comment>) + Clone + Send + Sync + 'static,
{
    let mut totals = StreamTotals::default();
    let mut state = state;
    let mut page = read_page(store, product, None, page_rows).await?;
    loop {
        let count = page.comments.len() as u64;
        totals.comments += count;
        totals.skipped_rows += page.skipped_rows;
        let next = page.next.take();
        let comments = std::mem::take(&mut page.comments);
        let page_work = work.clone();
        let processed = on_rayon(move || {
            page_work(&mut state, comments);
            state
        });
        match next {
            None => {
                state = processed.await?;
                add_comments(progress, count);
                return Ok((state, totals));
            }
            Some(start) => {
                let (processed, fetched) = tokio::join!(processed, read_page(store, product, Some(start), page_rows));
                state = processed?;
                add_comments(progress, count);
                page = fetched?;
            }
        }
    }
}

fn add_comments(progress: Option<&RunProgress>, count: u64) {
    if let Some(progress) = progress {
        progress.add_comments(count);
    }
}

/// Scores every comment of `product` and returns the selection (no writes).
pub async fn select_for_product(
    store: &Store,
    product: &Id,
    job: &ProductJob,
) -> Result<(Selection, StreamTotals), RankerError> {
    let scoring = job.scoring.clone();
    let as_of_ms = job.as_of_ms;
    let work = move |pool: &mut TopComments, comments: Vec<Comment>| {
        pool.offer_comments(&scoring, as_of_ms, &comments, None);
    };
    let (pool, totals) =
        stream_comments(store, product, job.page_rows, TopComments::new(MAX_PICKS), work, job.progress.as_deref())
            .await?;
    Ok((pool.finish(), totals))
}

/// Ranks `product` and, unless it is a dry run, replaces its slots.
/// `existing_slots` has bit `r - 1` set for each slot `r` it has now; it
/// decides how many slots count as deleted.
pub async fn rank_product(
    store: &Store,
    product: &Id,
    existing_slots: u16,
    job: &ProductJob,
) -> Result<ProductOutcome, RankerError> {
    let (selection, totals) = select_for_product(store, product, job).await?;
    let ranked: Vec<(CommentKey, f64)> = selection.picks.iter().map(|pick| (pick.comment, pick.score)).collect();
    if !job.dry_run {
        // One mutateRows: slots 1..=k put, k+1..=10 deleted. A run stopped or
        // killed around it leaves the product with its old slots or its new ones.
        store.replace_rank_slots(product, &ranked).await?;
    }
    let kept_slots = (1u16 << ranked.len().min(usize::from(MAX_RANK))) - 1;
    Ok(ProductOutcome {
        comments_scored: totals.comments,
        skipped_rows: totals.skipped_rows,
        slots_written: ranked.len() as u64,
        slots_deleted: u64::from((existing_slots & !kept_slots).count_ones()),
        ranked,
    })
}

/// The slots `product` has now, as a mask (bit `r - 1` for slot `r`).
pub async fn existing_slot_mask(store: &Store, product: &Id) -> common::Result<u16> {
    let slots = store.rank_slots(product).await?;
    Ok(slots.iter().fold(0, |mask, slot| mask | 1 << (slot.rank - 1)))
}
