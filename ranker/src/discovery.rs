//! Finding the products a run must rank: every product with rows in
//! `product-comment` plus every product that still has rank slots (its
//! comments may all be gone, and its slots must then be cleared), each once.
//!
//! Two listers walk the two tables in key order on their own tasks, ahead of
//! the ranking, through bounded channels; [`Discovery::next`] merges their
//! sorted streams, so a product in both tables comes out once and memory does
//! not grow with the number of products.

use std::time::Duration;
use tracing::Instrument as _;

use common::retry::Backoff;
use common::store::products::{CountedIndexPage, ListedProduct, ProductIndex};
use common::store::Store;
use common::Id;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::pace::Pacer;
use crate::shard::KeyRange;
use crate::trace_budget::CallSpans;
use crate::ProductFailure;

/// Rows per listing step in `product-comment`: small, because each step jumps
/// past the last product's other rows anyway.
const COMMENT_LISTING_ROWS: usize = 256;
/// Rows per listing step in `product-comment-rank` (at most ten per product).
const SLOT_LISTING_ROWS: usize = 1_000;
/// Products each lister may run ahead of the ranking. With their whole
/// indexes (at most [`COMMENT_LISTING_ROWS`] rows each, about 100 bytes a
/// row) that is at most about 13 MB.
const LOOKAHEAD: usize = 512;

/// A product to rank, the slots it has now and, for a small product, its
/// whole comment index as the listing read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiscoveredProduct {
    pub product: Id,
    /// Bit `r - 1` set when slot `r` exists.
    pub slot_mask: u16,
    /// [`ListedProduct::whole_index`]: the product's index, read at most
    /// [`LOOKAHEAD`] products before it is ranked.
    pub whole_index: Option<CountedIndexPage>,
}

type Listed = Result<ListedProduct, ProductFailure>;

/// The merged, sorted stream of products in a key range.
pub(crate) struct Discovery {
    comments: Source,
    slots: Source,
    /// Owns the lister tasks: dropping the discovery stops them.
    _listers: JoinSet<()>,
}

struct Source {
    receiver: mpsc::Receiver<Listed>,
    head: Option<Listed>,
    done: bool,
}

impl Source {
    async fn peek(&mut self) -> Option<&Listed> {
        if self.head.is_none() && !self.done {
            self.head = self.receiver.recv().await;
            self.done = self.head.is_none();
        }
        self.head.as_ref()
    }
}

/// The longest pause between two tries of a listing step, so that a lister
/// notices HBase's return within seconds however long the outage was.
const MAX_LISTING_BACKOFF: Duration = Duration::from_secs(5);

/// How listing steps are retried.
///
/// Discovery is the spine of a run: when a listing step gives up, every
/// product after it is missing from the run. So a step waits out HBase being
/// unavailable for up to `patience` (longer than a product's own retries),
/// while an error that waiting cannot mend (a missing table, a request HBase
/// refuses) fails the step at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListingRetry {
    /// The pause after the first failure; it doubles up to [`MAX_LISTING_BACKOFF`]
    /// (which caps the first too), less jitter (`common::retry`).
    pub backoff: Duration,
    /// How long a step keeps trying while HBase is unavailable.
    pub patience: Duration,
}

/// What a lister's steps go through: the store, the run's pacer (a paced
/// run's listing steps take their turns like its other calls, so the run
/// never has more than its `max_in_flight` calls out, even while listing
/// runs ahead of the products), the retry rule and the run's stop.
#[derive(Debug, Clone)]
struct Lister {
    store: Store,
    pacer: Pacer,
    retry: ListingRetry,
    stop: CancellationToken,
}

impl Discovery {
    /// Starts listing the products in `range`.
    pub(crate) fn start(
        store: &Store,
        pacer: &Pacer,
        range: &KeyRange,
        retry: ListingRetry,
        stop: &CancellationToken,
    ) -> Discovery {
        let lister = Lister { store: store.clone(), pacer: pacer.clone(), retry, stop: stop.clone() };
        let mut listers = JoinSet::new();
        let mut source = |index, rows| {
            let (sender, receiver) = mpsc::channel(LOOKAHEAD);
            // Listing is the run's work: its reads belong under the run's span
            // (its first steps only: `CallSpans`).
            listers.spawn(list(lister.clone(), index, range.clone(), rows, sender).in_current_span());
            Source { receiver, head: None, done: false }
        };
        let comments = source(ProductIndex::Comments, COMMENT_LISTING_ROWS);
        let slots = source(ProductIndex::RankSlots, SLOT_LISTING_ROWS);
        Discovery { comments, slots, _listers: listers }
    }

    /// The next product in key order, a listing failure, or `None` at the end.
    pub(crate) async fn next(&mut self) -> Option<Result<DiscoveredProduct, ProductFailure>> {
        // Failures go first: they are reported, and the lister that failed has stopped.
        let comments = self.comments.peek().await.cloned();
        let slots = self.slots.peek().await.cloned();
        let (take_comments, take_slots) = match (&comments, &slots) {
            (None, None) => return None,
            (Some(Err(_)), _) | (Some(Ok(_)), None) => (true, false),
            (_, Some(Err(_))) | (None, Some(Ok(_))) => (false, true),
            (Some(Ok(left)), Some(Ok(right))) => match left.product.cmp(&right.product) {
                std::cmp::Ordering::Less => (true, false),
                std::cmp::Ordering::Greater => (false, true),
                std::cmp::Ordering::Equal => (true, true),
            },
        };
        let mut merged: Option<Result<DiscoveredProduct, ProductFailure>> = None;
        for (take, source) in [(take_comments, &mut self.comments), (take_slots, &mut self.slots)] {
            if !take {
                continue;
            }
            merged = match (merged, source.head.take()) {
                (_, Some(Err(failure))) => Some(Err(failure)),
                (Some(Ok(found)), Some(Ok(listed))) => Some(Ok(DiscoveredProduct {
                    product: found.product,
                    slot_mask: found.slot_mask | listed.slot_mask,
                    whole_index: found.whole_index.or(listed.whole_index),
                })),
                (_, Some(Ok(listed))) => Some(Ok(DiscoveredProduct {
                    product: listed.product,
                    slot_mask: listed.slot_mask,
                    whole_index: listed.whole_index,
                })),
                (merged, None) => merged,
            };
        }
        merged
    }
}

/// Walks one table's products in `range`, sending each once (neighbours that
/// a page boundary split are merged) until the range ends, the receiver goes
/// away, the run is stopped, or a step fails every attempt.
async fn list(lister: Lister, index: ProductIndex, range: KeyRange, rows: usize, sender: mpsc::Sender<Listed>) {
    let mut start = range.start.clone();
    let mut pending: Option<ListedProduct> = None;
    let spans = CallSpans::new();
    loop {
        if lister.stop.is_cancelled() {
            return;
        }
        let listing = match spans.traced(list_step(&lister, index, &start, &range, rows)).await {
            Ok(listing) => listing,
            Err(error) => {
                let table = match index {
                    ProductIndex::Comments => "product-comment",
                    ProductIndex::RankSlots => "product-comment-rank",
                };
                let failure = ProductFailure {
                    product: format!("(listing {table} from key {})", common::store::escape(&start)),
                    error: error.to_string(),
                };
                if let Some(product) = pending.take() {
                    let _ = sender.send(Ok(product)).await;
                }
                let _ = sender.send(Err(failure)).await;
                return;
            }
        };
        for listed in listing.products {
            match pending.as_mut() {
                // Only rank-slot pages share a product (comment pages never
                // do), and they carry no index; an index marked whole is all
                // of the product's index whichever page read it.
                Some(current) if current.product == listed.product => {
                    current.slot_mask |= listed.slot_mask;
                    current.whole_index = current.whole_index.take().or(listed.whole_index);
                }
                _ => {
                    if let Some(done) = pending.replace(listed) {
                        if sender.send(Ok(done)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        match listing.next {
            Some(next) => start = next,
            None => break,
        }
    }
    if let Some(product) = pending {
        let _ = sender.send(Ok(product)).await;
    }
}

async fn list_step(
    lister: &Lister,
    index: ProductIndex,
    start: &[u8],
    range: &KeyRange,
    rows: usize,
) -> Result<common::store::products::ProductListing, common::Error> {
    let Lister { store, pacer, retry, stop } = lister;
    let backoff = Backoff::new(retry.backoff, MAX_LISTING_BACKOFF);
    let mut attempt = 1;
    let mut first_failure: Option<tokio::time::Instant> = None;
    loop {
        match pacer.call(store.list_products(index, start.to_vec(), range.stop.clone(), rows)).await {
            Ok(listing) => return Ok(listing),
            Err(error) if error.is_transient() && !stop.is_cancelled() => {
                let failing_for = first_failure.get_or_insert_with(tokio::time::Instant::now).elapsed();
                if failing_for >= retry.patience {
                    return Err(error);
                }
                let delay = backoff.delay(attempt);
                tracing::warn!(%error, attempt, ?failing_for, ?delay, "listing products failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return Err(error),
                }
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}
