//! Ranking one product: stream its `product-comment` prefix in bounded pages,
//! fetch each page's comments with one multi-get, score on rayon, keep the
//! best in a bounded pool, then replace the product's rank slots in one
//! `mutateRows`. The three stages overlap: the index is read a few pages
//! ahead, and the next page's comments are fetched while rayon scores the
//! current page, so one product with a million comments is not one long
//! chain of round trips. A small product whose whole index product discovery
//! already read skips the index stage.
//!
//! At most two pages of comments of one product are in memory at once (the
//! one being scored and the one being fetched), plus a few pages of 20-byte
//! keys, and the pool is bounded, so memory does not depend on how many
//! comments the product has.

use std::sync::Arc;

use common::keys::{CommentKey, MAX_RANK};
use common::model::Comment;
use common::store::listing::{Listing, Verdict};
use common::store::products::CountedIndexPage;
use common::store::{ProductRanking, Store};
use common::summary::ReviewSummary;
use common::Id;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::config::ScoringConfig;
use crate::fetch::CommentFetcher;
use crate::pace::Pacer;
use crate::select::{Selection, TopComments, MAX_PICKS};
use crate::writer::SlotWriter;
use crate::{RankerError, RunProgress};

/// Index pages read ahead of the comment fetches, per product. Keys are 20
/// bytes each, so this costs little memory and hides the index scans.
const INDEX_READ_AHEAD: usize = 2;

/// What ranking one product needs besides the store.
#[derive(Clone)]
pub(crate) struct ProductJob {
    /// How comments are scored.
    pub scoring: Arc<ScoringConfig>,
    /// The as-of time of the recency term.
    pub as_of_ms: i64,
    /// Where slots are written; `None` in a dry run.
    pub writer: Option<SlotWriter>,
    /// Index rows read per round trip.
    pub page_rows: usize,
    /// The run's shared rate and turns, for the index reads.
    pub pacer: Pacer,
    /// The run's comment fetches, which take their rate and turns from the
    /// same pacer and share multi-gets between products.
    pub fetcher: CommentFetcher,
    /// Where to count scored comments as they go.
    pub progress: Arc<RunProgress>,
}

/// What ranking one product did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProductOutcome {
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
pub(crate) struct StreamTotals {
    /// The comments read and handed to the page work, each once.
    pub listed: u64,
    /// The comments written at or before the stream's
    /// [`StreamOptions::summary_through_ms`], counted.
    pub summary: ReviewSummary,
    /// Index rows skipped, comments gone, comments that do not decode.
    pub skipped_rows: u64,
}

/// One page of a product's comments.
struct CommentPage {
    comments: Vec<Comment>,
    skipped_rows: u64,
    /// The page's index rows whose star mark is missing or wrong, with the
    /// star each should carry (see `common::store::stars`).
    marks_to_fix: Vec<(Vec<u8>, u8)>,
}

/// Where a ranking pass fixes the star marks of the index rows it read, so
/// query-api's star filter can skip the rows of other stars without reading
/// their comments. Absent in dry runs and `explain`, which write nothing.
#[derive(Clone)]
pub(crate) struct StarMarker {
    store: Store,
    pacer: Pacer,
}

impl StarMarker {
    /// Marks through `store`, taking the run's turns from `pacer` like every other call.
    pub(crate) fn new(store: Store, pacer: Pacer) -> StarMarker {
        StarMarker { store, pacer }
    }

    async fn fix(&self, marks: Vec<(Vec<u8>, u8)>) -> common::Result<()> {
        if marks.is_empty() {
            return Ok(());
        }
        self.pacer.call(self.store.put_star_marks(marks)).await
    }
}

/// Index pages of one product: read ahead on their own task, or split from
/// the whole index that discovery read.
pub(crate) struct IndexReader {
    pages: IndexPages,
    /// The walk's state across pages: a double post within a millisecond
    /// may put its two rows on two pages, and the comment counts once.
    listing: Listing,
}

enum IndexPages {
    Reading {
        pages: mpsc::Receiver<common::Result<CountedIndexPage>>,
        /// Stops the read-ahead when the product's ranking ends early (an error).
        _task: AbortOnDrop,
    },
    Listed(std::vec::IntoIter<CountedIndexPage>),
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl IndexReader {
    /// The pages of `product`'s index, `rows` entries a page at most: split
    /// from `whole_index` when discovery read it, else read from HBase.
    pub(crate) fn for_product(
        store: &Store,
        product: &Id,
        whole_index: Option<&CountedIndexPage>,
        rows: usize,
        pacer: &Pacer,
    ) -> IndexReader {
        match whole_index {
            Some(whole_index) => IndexReader::listed(whole_index, rows),
            None => IndexReader::start(store, product, rows, pacer),
        }
    }

    /// Starts reading `product`'s index, `rows` rows a page, at most
    /// [`INDEX_READ_AHEAD`] pages ahead of the consumer.
    ///
    /// Index scans take turns with the run's other calls but draw nothing from
    /// its ceiling: the bounded read-ahead ties them to the comment fetches,
    /// which do, so a run scans its index at its comments' rate too.
    fn start(store: &Store, product: &Id, rows: usize, pacer: &Pacer) -> IndexReader {
        let (sender, pages) = mpsc::channel(INDEX_READ_AHEAD);
        let store = store.clone();
        let product = *product;
        let pacer = pacer.clone();
        // The read-ahead reads for the product whose span starts it.
        let task = tokio::spawn(
            async move {
                let mut start = None;
                loop {
                    let page = pacer.call(store.product_comment_page_counted(&product, start, rows)).await;
                    let next = page.as_ref().ok().and_then(|page| page.next.clone());
                    let failed = page.is_err();
                    if sender.send(page).await.is_err() || failed {
                        return;
                    }
                    match next {
                        Some(next) => start = Some(next),
                        None => return,
                    }
                }
            }
            .in_current_span(),
        );
        IndexReader::of(IndexPages::Reading { pages, _task: AbortOnDrop(task) })
    }

    /// Pages of at most `rows` entries from a product's whole index, so that
    /// its multi-gets are no larger than an index read would have made them.
    /// The skipped rows count with the first page.
    fn listed(whole_index: &CountedIndexPage, rows: usize) -> IndexReader {
        let mut skipped = whole_index.skipped;
        let mut pages: Vec<CountedIndexPage> = whole_index
            .entries
            .chunks(rows.max(1))
            .map(|chunk| CountedIndexPage {
                entries: chunk.to_vec(),
                skipped: std::mem::take(&mut skipped),
                next: None,
            })
            .collect();
        if pages.is_empty() {
            pages.push(CountedIndexPage { entries: Vec::new(), skipped, next: None });
        }
        IndexReader::of(IndexPages::Listed(pages.into_iter()))
    }

    fn of(pages: IndexPages) -> IndexReader {
        IndexReader { pages, listing: Listing::default() }
    }

    async fn next_index_page(&mut self) -> Option<common::Result<CountedIndexPage>> {
        match &mut self.pages {
            IndexPages::Reading { pages, .. } => pages.recv().await,
            IndexPages::Listed(pages) => pages.next().map(Ok),
        }
    }

    /// Fetches the comments of the next index page; `None` after the last page.
    /// The page keeps the comments its rows show, by the rule every walk of an
    /// index applies ([`Listing`]); rows that cannot be used (bad index rows,
    /// comments gone or undecodable, stale rows, another product's comments)
    /// are left out and counted; a second row listing a comment is left out,
    /// not counted (it is no bad data).
    async fn next_page(&mut self, fetcher: &CommentFetcher) -> common::Result<Option<CommentPage>> {
        let Some(index) = self.next_index_page().await else {
            return Ok(None);
        };
        let index = index?;
        let keys: Vec<CommentKey> = index.entries.iter().map(|entry| entry.comment).collect();
        let fetched = fetcher.fetch(keys).await?;
        let marks_to_fix = common::store::stars::marks_to_fix(&index.entries, &fetched);
        let mut skipped_rows = index.skipped;
        let mut comments = Vec::with_capacity(fetched.len());
        for (entry, comment) in index.entries.iter().zip(fetched) {
            match self.listing.judge(entry, comment.as_ref()) {
                Verdict::Shown => comments.extend(comment),
                Verdict::Repeat => {}
                Verdict::Gone | Verdict::Stale | Verdict::OtherOwner => skipped_rows += 1,
            }
        }
        Ok(Some(CommentPage { comments, skipped_rows, marks_to_fix }))
    }
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

/// What a product's stream does besides handing its comments to the work.
#[derive(Clone, Copy)]
pub(crate) struct StreamOptions<'a> {
    /// Where to count the comments as they go.
    pub progress: Option<&'a RunProgress>,
    /// Where to fix the index rows' star marks; `None` writes nothing.
    pub marker: Option<&'a StarMarker>,
    /// The summary counts the reviews written at or before this time (the
    /// run's as-of time): readers count the newer ones at read time, from the
    /// index rows after it, so no review is counted twice.
    pub summary_through_ms: i64,
}

/// Streams every comment a product's `index` shows through `work`, one page at
/// a time, as a three-stage pipeline: the index is read ahead on its own task
/// (unless discovery read all of it), the next page's comments are fetched
/// while the current page is processed on rayon (and, with a `marker`, while
/// its index rows' star marks are fixed).
pub(crate) async fn stream_comments<S, W>(
    mut index: IndexReader,
    fetcher: &CommentFetcher,
    state: S,
    work: W,
    options: StreamOptions<'_>,
) -> Result<(S, StreamTotals), RankerError>
where
    S: Send + 'static,
    W: Fn(&mut S, Vec<Comment>) + Clone + Send + Sync + 'static,
{
    let mut totals = StreamTotals::default();
    let mut state = state;
    let mut current = index.next_page(fetcher).await?;
    while let Some(page) = current {
        let count = page.comments.len() as u64;
        totals.listed += count;
        for comment in page.comments.iter().filter(|comment| comment.timestamp <= options.summary_through_ms) {
            totals.summary.add(comment);
        }
        totals.skipped_rows += page.skipped_rows;
        let page_work = work.clone();
        let comments = page.comments;
        let processed = on_rayon(move || {
            page_work(&mut state, comments);
            state
        });
        let marks = page.marks_to_fix;
        let marked = async {
            match options.marker {
                Some(marker) => marker.fix(marks).await,
                None => Ok(()),
            }
        };
        let (processed, next, marked) = tokio::join!(processed, index.next_page(fetcher), marked);
        state = processed?;
        marked?;
        if let Some(progress) = options.progress {
            progress.add_comments(count);
        }
        current = next?;
    }
    Ok((state, totals))
}

/// Scores every comment of `product` and returns the selection. Writes no
/// ranking; unless the job is a dry run, fixes the star marks of its index rows.
pub(crate) async fn select_for_product(
    store: &Store,
    product: &Id,
    whole_index: Option<&CountedIndexPage>,
    job: &ProductJob,
) -> Result<(Selection, StreamTotals), RankerError> {
    let scoring = job.scoring.clone();
    let as_of_ms = job.as_of_ms;
    let work = move |pool: &mut TopComments, comments: Vec<Comment>| {
        pool.offer_comments(&scoring, as_of_ms, &comments, None);
    };
    let index = IndexReader::for_product(store, product, whole_index, job.page_rows, &job.pacer);
    let marker = job.writer.is_some().then(|| StarMarker::new(store.clone(), job.pacer.clone()));
    let options =
        StreamOptions { progress: Some(&job.progress), marker: marker.as_ref(), summary_through_ms: job.as_of_ms };
    let (pool, totals) = stream_comments(index, &job.fetcher, TopComments::new(MAX_PICKS), work, options).await?;
    Ok((pool.finish(), totals))
}

/// Ranks `product` and, unless it is a dry run, replaces its slots.
/// `existing_slots` has bit `r - 1` set for each slot `r` it has now; it
/// decides how many slots count as deleted. `whole_index` is the product's
/// index when discovery read all of it.
pub(crate) async fn rank_product(
    store: &Store,
    product: &Id,
    existing_slots: u16,
    whole_index: Option<&CountedIndexPage>,
    job: &ProductJob,
) -> Result<ProductOutcome, RankerError> {
    let (selection, totals) = select_for_product(store, product, whole_index, job).await?;
    let ranked: Vec<(CommentKey, f64)> = selection.picks.iter().map(|pick| (pick.comment, pick.score)).collect();
    if let Some(writer) = &job.writer {
        // One mutateRows carries the ranking record and all ten slots (1..=k
        // put, k+1..=10 deleted). Readers of this project take the ranking from
        // the record, one row, which HBase writes whole. The slots are not
        // written atomically (the Java service may see a mix while the call is
        // applied, or after HBase failed part way through it, until the
        // product's retry or the next run overwrites them).
        let ranking = ProductRanking {
            product: *product,
            as_of_ms: job.as_of_ms,
            ranked: ranked.clone(),
            summary: totals.summary,
        };
        writer.write(ranking).await?;
    }
    let kept_slots = (1u16 << ranked.len().min(usize::from(MAX_RANK))) - 1;
    Ok(ProductOutcome {
        comments_scored: totals.listed,
        skipped_rows: totals.skipped_rows,
        slots_written: ranked.len() as u64,
        slots_deleted: u64::from((existing_slots & !kept_slots).count_ones()),
        ranked,
    })
}

/// The slots `product` has now, as a mask (bit `r - 1` for slot `r`).
pub(crate) async fn existing_slot_mask(store: &Store, product: &Id) -> common::Result<u16> {
    let slots = store.rank_slots(product).await?;
    Ok(slots.iter().fold(0, |mask, slot| mask | 1 << (slot.rank - 1)))
}

#[cfg(test)]
mod tests {
    use common::keys::CommentKey;
    use common::store::products::CountedIndexPage;
    use common::store::{IndexEntry, IndexKind};
    use common::Id;

    use super::IndexReader;

    fn entries(count: u64) -> Vec<IndexEntry> {
        let product = Id::parse("product", "P000000001").expect("id");
        (0..count)
            .map(|n| {
                let order = Id::parse("order", &format!("O{n:09}")).expect("id");
                IndexEntry {
                    kind: IndexKind::Product,
                    owner: product,
                    index_key: vec![n as u8],
                    timestamp_ms: n as i64,
                    comment: CommentKey::new(&order, &product),
                    star_mark: None,
                }
            })
            .collect()
    }

    async fn pages(reader: &mut IndexReader) -> Vec<(usize, u64)> {
        let mut pages = Vec::new();
        while let Some(page) = reader.next_index_page().await {
            let page = page.expect("a listed page never fails");
            assert_eq!(page.next, None);
            pages.push((page.entries.len(), page.skipped));
        }
        pages
    }

    #[tokio::test]
    async fn a_listed_index_is_split_into_pages_no_larger_than_a_read_would_make() {
        let whole = CountedIndexPage { entries: entries(5), skipped: 3, next: None };
        let mut reader = IndexReader::listed(&whole, 2);
        assert_eq!(pages(&mut reader).await, vec![(2, 3), (2, 0), (1, 0)], "skipped rows count once, first");
        let mut reader = IndexReader::listed(&whole, 250);
        assert_eq!(pages(&mut reader).await, vec![(5, 3)]);

        let mut reader = IndexReader::listed(&whole, 2);
        let mut keys = Vec::new();
        while let Some(page) = reader.next_index_page().await {
            keys.extend(page.expect("page").entries.into_iter().map(|entry| entry.comment));
        }
        assert_eq!(keys, entries(5).into_iter().map(|entry| entry.comment).collect::<Vec<_>>(), "in order, each once");

        let empty = CountedIndexPage { entries: Vec::new(), skipped: 2, next: None };
        let mut reader = IndexReader::listed(&empty, 250);
        assert_eq!(pages(&mut reader).await, vec![(0, 2)], "a product whose every row was bad still counts them");
    }
}
