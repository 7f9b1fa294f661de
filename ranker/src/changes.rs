//! Incremental runs: finding the products whose ranking may have changed
//! since a time, in what changed and nothing proportional to the catalog.
//!
//! A product's ten best can change only when one of its comments is added,
//! edited, voted on or deleted, or when time moves the recency term. Every
//! writer (this project's write path, the original Java service writing rows
//! directly, `reviews-admin index repair`) leaves HBase cell timestamps on
//! what it writes, so:
//!
//! - `comment` rows written since the watermark name their product in their
//!   key (orderId productId): new comments, edits, votes (the vote counts live
//!   in the comment's JSON), double posts overwritten;
//! - `product-comment` rows written since the watermark start with their
//!   product: index rows added for an existing comment, and the deletion
//!   marker the write path puts when it deletes a comment.
//!
//! A comment another writer deleted directly leaves no cell to find by time.
//! Its product is re-ranked by its refresh slice within the refresh period
//! ([`crate::refresh`]), and every reader leaves its slot out meanwhile;
//! [`Incremental::check_all_slots`] finds such deletes at once, at the price
//! of a walk over every rank slot of the range (after rows were purged).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::pin::pin;

use common::keys::CommentKey;
use common::store::changes::{ChangeSource, SlotListing};
use common::store::Store;
use common::Id;
use futures_util::{stream, Stream, TryStreamExt};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::pace::Pacer;
use crate::shard::KeyRange;
use crate::trace_budget::CallSpans;
use crate::RankerError;

/// Rows read per step of the time-range scans (keys only, so small on the wire).
const CHANGE_SCAN_ROWS: usize = 5_000;
/// Rank slots read per step of the slot walk; their comments' existence is
/// checked in one `existsAll` per step.
const SLOT_WALK_ROWS: usize = 1_000;

/// What makes a run incremental.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incremental {
    /// Rank the products with a cell written at or after this time (ms since
    /// the epoch, HBase cell time).
    pub since_ms: i64,
    /// Also re-rank the refresh slices due, so that every product is ranked
    /// once in this many nights (`None`: no refresh).
    pub refresh_days: Option<u32>,
    /// The as-of time of the last completed run, when the watermark came from
    /// one: the refresh then takes the slices of every night after that run's
    /// night up to tonight, so a night whose run failed is made up by the next
    /// run that completes. `None`: tonight's slice only.
    pub refreshed_until_ms: Option<i64>,
    /// Also read every rank slot of the range and rank the products with a
    /// slot naming a comment that no longer exists (rows deleted directly).
    pub check_all_slots: bool,
}

/// What finding the changed products found, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChangeReport {
    /// The cell time changes were looked for from (ms since the epoch).
    pub since_ms: i64,
    /// The rolling refresh's period in nights, when there is one.
    pub refresh_days: Option<u32>,
    /// `comment` rows written since the watermark (of any product; the run keeps those in its range).
    pub comment_rows_written: u64,
    /// `product-comment` rows written since the watermark in the run's range.
    pub index_rows_written: u64,
    /// Rank slots whose comment's existence was checked (only with
    /// [`Incremental::check_all_slots`]: every slot of the range).
    pub slots_checked: u64,
    /// Checked slots naming a comment that no longer exists.
    pub slots_dangling: u64,
    /// Products with a comment or index row written since the watermark.
    pub products_written: u64,
    /// Products with a checked slot naming a deleted comment.
    pub products_with_deleted_comments: u64,
    /// Key ranges of the refresh slices due, listed whole as a full run lists.
    pub refresh_ranges: u64,
    /// Whether the refresh took the run's whole range: the refresh period or
    /// more since the last completed run, or no recorded cuts covering it.
    pub refreshed_whole_range: bool,
    /// Products listed in the refresh ranges (counted as the run lists them).
    pub products_refreshed: u64,
    /// Products the run ranks: the union of the three (counted as it ranks them).
    pub products_to_rank: u64,
    /// Wall time spent finding what changed and planning the refresh (before
    /// any ranking), in ms.
    pub detection_ms: u64,
}

/// A product an incremental run found changed, with the slots it has now
/// when the search read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChosenProduct {
    pub product: Id,
    /// Bit `r - 1` set when slot `r` exists; `None` when the search did not
    /// read the product's slots (its ranking reads them).
    pub slot_mask: Option<u16>,
}

/// Finds the products in `range` with a cell written since
/// `incremental.since_ms` and, with [`Incremental::check_all_slots`], those
/// with a slot naming a deleted comment (up to `concurrency` existence checks
/// at once), in key order. Every call takes its turn from `pacer`, so a paced
/// run has no more calls in flight while it searches than while it ranks.
/// `report` receives the counts (not the time). Returns `None` when `stop`
/// was cancelled before the search ended.
pub(crate) async fn find_products(
    store: &Store,
    range: &KeyRange,
    incremental: Incremental,
    pacer: &Pacer,
    concurrency: usize,
    stop: &CancellationToken,
    report: &mut ChangeReport,
) -> Result<Option<Vec<ChosenProduct>>, RankerError> {
    let Some(written) = products_written_since(store, range, incremental.since_ms, pacer, stop, report).await? else {
        return Ok(None);
    };
    if !incremental.check_all_slots {
        return Ok(Some(written.into_iter().map(|product| ChosenProduct { product, slot_mask: None }).collect()));
    }
    let mut walk = SlotWalk::new(written);
    let mut pages = pin!(slot_pages_checked(store, range, pacer, concurrency, stop));
    while let Some((listing, missing)) = pages.try_next().await? {
        if stop.is_cancelled() {
            return Ok(None);
        }
        walk.add(&listing, &missing, report);
    }
    if stop.is_cancelled() {
        return Ok(None);
    }
    report.products_with_deleted_comments = walk.deleted.len() as u64;
    let chosen = walk.chosen.into_iter();
    Ok(Some(chosen.map(|(product, mask)| ChosenProduct { product, slot_mask: Some(mask) }).collect()))
}

/// The products in `range` with a comment or an index row written since
/// `since_ms` (counted in `report`); `None` when stopped. The two time-range
/// scans are independent, so they run side by side.
async fn products_written_since(
    store: &Store,
    range: &KeyRange,
    since_ms: i64,
    pacer: &Pacer,
    stop: &CancellationToken,
    report: &mut ChangeReport,
) -> Result<Option<BTreeSet<Id>>, RankerError> {
    let whole_table = KeyRange::everything();
    let (comments, index) = tokio::try_join!(
        written_products(store, pacer, ChangeSource::Comments, since_ms, &whole_table, range, stop),
        written_products(store, pacer, ChangeSource::ProductIndex, since_ms, range, range, stop),
    )?;
    let (Some(comments), Some(index)) = (comments, index) else { return Ok(None) };
    (report.comment_rows_written, report.index_rows_written) = (comments.rows_written, index.rows_written);
    let written: BTreeSet<Id> = comments.products.into_iter().chain(index.products).collect();
    report.products_written = written.len() as u64;
    Ok(Some(written))
}

/// Every rank slot in `range`, a listing step at a time, each step with the
/// comments its slots name that no longer exist.
///
/// Listing slots is cheap (a one-column scan: about 5 ms per 1,000 slots on
/// the benchmark data) and checking their comments exist is not (about 27 ms
/// per 1,000, a get per comment on the region servers), so the steps are
/// listed in key order and up to `concurrency` of them are checked at once
/// (fewer when the pacer holds fewer turns); `try_buffered` hands them back in
/// key order, which [`SlotWalk::add`] relies on. The closures own what they
/// use (clones of handles): futures borrowing from the caller are not `Send`
/// for every lifetime, which the cron daemon's spawned runs need.
fn slot_pages_checked(
    store: &Store,
    range: &KeyRange,
    pacer: &Pacer,
    concurrency: usize,
    stop: &CancellationToken,
) -> impl Stream<Item = Result<(SlotListing, HashSet<CommentKey>), common::Error>> {
    // The walk's calls are the pass's: only its first ones are traced.
    let spans = CallSpans::new();
    let pages = stream::try_unfold(Some(range.start.clone()), {
        let (store, pacer, stop_key, stop) = (store.clone(), pacer.clone(), range.stop.clone(), stop.clone());
        let spans = spans.clone();
        move |start| {
            let (store, pacer, stop_key, stop) = (store.clone(), pacer.clone(), stop_key.clone(), stop.clone());
            let spans = spans.clone();
            async move {
                let Some(start) = start.filter(|_| !stop.is_cancelled()) else { return Ok(None) };
                let listing = spans.traced(pacer.call(store.list_rank_slots(start, stop_key, SLOT_WALK_ROWS))).await?;
                let next = listing.next.clone();
                Ok::<_, common::Error>(Some((listing, next)))
            }
        }
    });
    pages
        .map_ok({
            let (store, pacer) = (store.clone(), pacer.clone());
            move |listing| {
                let (store, pacer, spans) = (store.clone(), pacer.clone(), spans.clone());
                async move {
                    let named: Vec<_> = listing.slots.iter().filter_map(|slot| slot.comment).collect();
                    let missing = spans.traced(pacer.call(store.missing_comments(&named))).await;
                    Ok((listing, missing?))
                }
            }
        })
        .try_buffered(concurrency.max(1))
}

/// The slot walk's state: which products have a slot naming a deleted
/// comment, and the slots of every product it chooses.
#[derive(Debug)]
struct SlotWalk {
    /// Products with rows written since the watermark: chosen whatever their slots say.
    written: BTreeSet<Id>,
    /// The products to rank, with the slots each has now (none for a written
    /// product the walk never lists).
    chosen: BTreeMap<Id, u16>,
    /// Products with a slot naming a deleted comment.
    deleted: BTreeSet<Id>,
    /// Slots seen of products whose slots may go on in the next step.
    masks: BTreeMap<Id, u16>,
}

impl SlotWalk {
    /// A walk that chooses the `written` products whatever their slots say.
    fn new(written: BTreeSet<Id>) -> SlotWalk {
        SlotWalk {
            chosen: written.iter().map(|product| (*product, 0)).collect(),
            written,
            deleted: BTreeSet::new(),
            masks: BTreeMap::new(),
        }
    }

    /// Takes in one listing step (in key order) and the comments its slots
    /// name that are gone. Every product but the step's last is complete and
    /// is settled at once, so memory holds the chosen products, not every
    /// ranked one.
    fn add(&mut self, listing: &SlotListing, missing: &HashSet<CommentKey>, report: &mut ChangeReport) {
        report.slots_checked += listing.slots.len() as u64;
        for slot in &listing.slots {
            *self.masks.entry(slot.product).or_default() |= 1 << (slot.rank - 1);
            if slot.comment.is_some_and(|comment| missing.contains(&comment)) {
                report.slots_dangling += 1;
                self.deleted.insert(slot.product);
            }
        }
        let last = listing.slots.last().map(|slot| slot.product);
        let complete: Vec<Id> =
            self.masks.keys().filter(|product| Some(**product) != last || listing.next.is_none()).copied().collect();
        for product in complete {
            let mask = self.masks.remove(&product).unwrap_or_default();
            if self.deleted.contains(&product) || self.written.contains(&product) {
                self.chosen.insert(product, mask);
            }
        }
    }
}

/// What one time-range scan found.
struct Written {
    products: Vec<Id>,
    rows_written: u64,
}

/// Walks `scan` of `source` for rows written since `since_ms`, keeping the
/// products inside `keep`; `None` when stopped.
async fn written_products(
    store: &Store,
    pacer: &Pacer,
    source: ChangeSource,
    since_ms: i64,
    scan: &KeyRange,
    keep: &KeyRange,
    stop: &CancellationToken,
) -> Result<Option<Written>, RankerError> {
    let mut found = Written { products: Vec::new(), rows_written: 0 };
    let mut start = scan.start.clone();
    let spans = CallSpans::new();
    loop {
        if stop.is_cancelled() {
            return Ok(None);
        }
        let step = spans
            .traced(pacer.call(store.products_written_since(
                source,
                since_ms,
                start,
                scan.stop.clone(),
                CHANGE_SCAN_ROWS,
            )))
            .await?;
        found.rows_written += step.rows_written;
        found.products.extend(step.products.into_iter().filter(|product| keep.contains(product.as_bytes())));
        match step.next {
            Some(next) => start = next,
            None => return Ok(Some(found)),
        }
    }
}
