//! Incremental runs: finding the products whose ranking may have changed
//! since a time, and the night's slice of the rolling refresh.
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
//!   product: index rows added for an existing comment;
//! - a delete leaves no cell to find by time, so the rank slots are walked and
//!   a slot naming a comment that no longer exists marks its product (a deleted
//!   comment outside the ten best cannot change the ten best);
//! - the same walk picks the products of the refresh slices due since the
//!   last completed run ([`in_refresh_nights`]; tonight's alone without one,
//!   [`in_refresh_slice`]), because the recency term drifts for every product.
//!
//! The walk over the rank table lists every ranked product, so it also gives
//! each chosen product's current slots, which the ranking needs to delete the
//! slots it no longer fills.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::pin::pin;
use std::time::Instant;

use common::keys::CommentKey;
use common::store::changes::{ChangeSource, SlotListing};
use common::store::Store;
use common::Id;
use futures_util::{stream, Stream, TryStreamExt};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::pace::Pacer;
use crate::shard::KeyRange;
use crate::RankerError;

/// Milliseconds in a day: nights are counted in UTC days of the as-of time.
const DAY_MS: i64 = 86_400_000;
/// Rows read per step of the time-range scans (keys only, so small on the wire).
const CHANGE_SCAN_ROWS: usize = 5_000;
/// Rank slots read per step of the slot walk; their comments' existence is
/// checked in one `existsAll` per step.
const SLOT_WALK_ROWS: usize = 1_000;

/// What makes a run incremental.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incremental {
    /// Rank the products with a cell written at or after this time (ms since
    /// the epoch, HBase cell time), or with a slot naming a deleted comment.
    pub since_ms: i64,
    /// Also rank tonight's `1/D` slice of every ranked product (`None`: no refresh).
    pub refresh_days: Option<u32>,
    /// The as-of time of the last completed run, when the watermark came from
    /// one: the refresh then takes the slices of every night after that run's
    /// night up to tonight, so a night whose run failed is made up by the next
    /// run that completes. `None`: tonight's slice only.
    pub refreshed_until_ms: Option<i64>,
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
    /// Rank slots read in the run's range.
    pub slots_read: u64,
    /// Rank slots naming a comment that no longer exists.
    pub slots_dangling: u64,
    /// Products with a comment or index row written since the watermark.
    pub products_written: u64,
    /// Products with a slot naming a deleted comment.
    pub products_with_deleted_comments: u64,
    /// Ranked products in the refresh slices due (see [`in_refresh_nights`]).
    pub products_refreshed: u64,
    /// Products the run ranks: the union of the three.
    pub products_to_rank: u64,
    /// Wall time spent finding them (before any ranking), in ms.
    pub detection_ms: u64,
}

/// A product an incremental run ranks, with the slots it has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChosenProduct {
    pub product: Id,
    /// Bit `r - 1` set when slot `r` exists.
    pub slot_mask: u16,
}

/// Which refresh bucket `product` falls in, `0..days`: a stable function of
/// the id alone (SHA-256, so the buckets are even whatever the ids look like,
/// and the same on every machine and release).
pub fn refresh_bucket(product: &Id, days: u32) -> u32 {
    let digest = Sha256::digest(product.as_bytes());
    let mut leading = [0u8; 8];
    leading.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(leading) % u64::from(days.max(1))) as u32
}

/// The night an as-of time falls in: its UTC day since the epoch.
pub fn night_of(as_of_ms: i64) -> i64 {
    as_of_ms.div_euclid(DAY_MS)
}

/// Whether `product` is re-ranked in full on the night of `as_of_ms` when the
/// refresh period is `days`: its bucket is the night's number modulo `days`,
/// so `days` consecutive nights refresh every product exactly once.
pub fn in_refresh_slice(product: &Id, days: u32, as_of_ms: i64) -> bool {
    let days = days.max(1);
    i64::from(refresh_bucket(product, days)) == night_of(as_of_ms).rem_euclid(i64::from(days))
}

/// Whether `product` is in the refresh slices of the nights after the night
/// of `after_ms` up to the night of `as_of_ms` (with `after_ms` `None`,
/// tonight's only). `days` or more nights refresh every product.
pub fn in_refresh_nights(product: &Id, days: u32, after_ms: Option<i64>, as_of_ms: i64) -> bool {
    let days = days.max(1);
    let tonight = night_of(as_of_ms);
    let first = after_ms.map_or(tonight, |after| night_of(after).saturating_add(1));
    if first > tonight {
        return false;
    }
    if tonight - first + 1 >= i64::from(days) {
        return true;
    }
    let bucket = i64::from(refresh_bucket(product, days));
    (first..=tonight).any(|night| night.rem_euclid(i64::from(days)) == bucket)
}

/// Finds the products in `range` an incremental run must rank, in key order,
/// with up to `concurrency` existence checks of the slot walk at once. Every
/// call (time-range scan steps, slot listing steps, existence checks) takes
/// its turn from `pacer`, so a paced run has no more calls in flight while it
/// searches than while it ranks. Returns `None` when `stop` was cancelled
/// before the search ended.
pub(crate) async fn find_products(
    store: &Store,
    range: &KeyRange,
    incremental: Incremental,
    as_of_ms: i64,
    pacer: &Pacer,
    concurrency: usize,
    stop: &CancellationToken,
) -> Result<Option<(Vec<ChosenProduct>, ChangeReport)>, RankerError> {
    let started = Instant::now();
    let mut report =
        ChangeReport { since_ms: incremental.since_ms, refresh_days: incremental.refresh_days, ..Default::default() };
    let Some(written) = products_written_since(store, range, incremental.since_ms, pacer, stop, &mut report).await?
    else {
        return Ok(None);
    };
    let mut walk = SlotWalk::new(written, incremental, as_of_ms);
    let mut pages = pin!(slot_pages_checked(store, range, pacer, concurrency, stop));
    while let Some((listing, missing)) = pages.try_next().await? {
        if stop.is_cancelled() {
            return Ok(None);
        }
        walk.add(&listing, &missing, &mut report);
    }
    if stop.is_cancelled() {
        return Ok(None);
    }
    report.products_with_deleted_comments = walk.deleted.len() as u64;
    report.products_refreshed = walk.refreshed.len() as u64;
    report.products_to_rank = walk.chosen.len() as u64;
    report.detection_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let products = walk.chosen.into_iter().map(|(product, slot_mask)| ChosenProduct { product, slot_mask }).collect();
    Ok(Some((products, report)))
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
    let pages = stream::try_unfold(Some(range.start.clone()), {
        let (store, pacer, stop_key, stop) = (store.clone(), pacer.clone(), range.stop.clone(), stop.clone());
        move |start| {
            let (store, pacer, stop_key, stop) = (store.clone(), pacer.clone(), stop_key.clone(), stop.clone());
            async move {
                let Some(start) = start.filter(|_| !stop.is_cancelled()) else { return Ok(None) };
                let listing = pacer.call(store.list_rank_slots(start, stop_key, SLOT_WALK_ROWS)).await?;
                let next = listing.next.clone();
                Ok::<_, common::Error>(Some((listing, next)))
            }
        }
    });
    pages
        .map_ok({
            let (store, pacer) = (store.clone(), pacer.clone());
            move |listing| {
                let (store, pacer) = (store.clone(), pacer.clone());
                async move {
                    let named: Vec<_> = listing.slots.iter().filter_map(|slot| slot.comment).collect();
                    let missing = pacer.call(store.missing_comments(&named)).await;
                    Ok((listing, missing?))
                }
            }
        })
        .try_buffered(concurrency.max(1))
}

/// The slot walk's state: every ranked product's slots, which of them name
/// deleted comments, and which products are chosen for the run.
#[derive(Debug)]
struct SlotWalk {
    /// Products with rows written since the watermark: chosen whatever their slots say.
    written: BTreeSet<Id>,
    incremental: Incremental,
    as_of_ms: i64,
    /// The products to rank, with the slots each has now.
    chosen: BTreeMap<Id, u16>,
    /// Products with a slot naming a deleted comment.
    deleted: BTreeSet<Id>,
    /// Products in the refresh slices of the nights since the last run.
    refreshed: BTreeSet<Id>,
    /// Slots seen of products whose slots may go on in the next step.
    masks: BTreeMap<Id, u16>,
}

impl SlotWalk {
    /// A walk that chooses the `written` products whatever their slots say.
    fn new(written: BTreeSet<Id>, incremental: Incremental, as_of_ms: i64) -> SlotWalk {
        SlotWalk {
            chosen: written.iter().map(|product| (*product, 0)).collect(),
            written,
            incremental,
            as_of_ms,
            deleted: BTreeSet::new(),
            refreshed: BTreeSet::new(),
            masks: BTreeMap::new(),
        }
    }

    /// Takes in one listing step (in key order) and the comments its slots
    /// name that are gone. Every product but the step's last is complete and
    /// is settled at once, so memory holds the chosen products, not every
    /// ranked one.
    fn add(&mut self, listing: &SlotListing, missing: &HashSet<CommentKey>, report: &mut ChangeReport) {
        report.slots_read += listing.slots.len() as u64;
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
            let refresh = self.incremental.refresh_days.is_some_and(|days| {
                in_refresh_nights(&product, days, self.incremental.refreshed_until_ms, self.as_of_ms)
            });
            if refresh {
                self.refreshed.insert(product);
            }
            if refresh || self.deleted.contains(&product) || self.written.contains(&product) {
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
    loop {
        if stop.is_cancelled() {
            return Ok(None);
        }
        let step = pacer
            .call(store.products_written_since(source, since_ms, start, scan.stop.clone(), CHANGE_SCAN_ROWS))
            .await?;
        found.rows_written += step.rows_written;
        found.products.extend(step.products.into_iter().filter(|product| keep.contains(product.as_bytes())));
        match step.next {
            Some(next) => start = next,
            None => return Ok(Some(found)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn id(text: &str) -> Id {
        Id::parse("productId", text).expect("id")
    }

    #[test]
    fn nights_are_utc_days_of_the_as_of_time() {
        assert_eq!(night_of(0), 0);
        assert_eq!(night_of(DAY_MS - 1), 0);
        assert_eq!(night_of(DAY_MS), 1);
        assert_eq!(night_of(-1), -1, "before the epoch still counts whole days");
    }

    #[test]
    fn the_bucket_is_pinned_to_the_ids_sha_256() {
        // The slice a product falls in must not move between releases or
        // machines. Expected values from Python: int.from_bytes(sha256(id)[:8], "big") % days.
        for (text, by_7, by_1000) in [("P000000001", 4, 184), ("P000000002", 1, 241), ("Zq9xY3kL0a", 0, 958)] {
            assert_eq!(refresh_bucket(&id(text), 7), by_7, "{text}");
            assert_eq!(refresh_bucket(&id(text), 1_000), by_1000, "{text}");
            assert_eq!(refresh_bucket(&id(text), 1), 0, "{text}");
        }
    }

    #[test]
    fn buckets_are_even_over_ids() {
        let days = 7;
        let mut counts = vec![0u32; days as usize];
        for n in 0..7_000 {
            counts[refresh_bucket(&id(&format!("P{n:09}")), days) as usize] += 1;
        }
        // 1,000 expected per bucket; a binomial's spread is about 30.
        assert!(counts.iter().all(|count| (850..1_150).contains(count)), "{counts:?}");
    }

    #[test]
    fn missed_nights_are_made_up_by_the_next_completed_run() {
        let product = id("P000000001");
        let days = 7;
        let tonight = 100 * DAY_MS + 5;
        // Without a completed run to start from, and one night on: tonight's slice.
        assert_eq!(in_refresh_nights(&product, days, None, tonight), in_refresh_slice(&product, days, tonight));
        assert_eq!(
            in_refresh_nights(&product, days, Some(tonight - DAY_MS), tonight),
            in_refresh_slice(&product, days, tonight)
        );
        // The same night again: its slice was refreshed by the run that completed.
        assert!(!in_refresh_nights(&product, days, Some(tonight - 1), tonight));
        // Three nights since the last completed run: the three slices.
        let three = in_refresh_nights(&product, days, Some(tonight - 3 * DAY_MS), tonight);
        let expected = (0..3).any(|back| in_refresh_slice(&product, days, tonight - back * DAY_MS));
        assert_eq!(three, expected);
        // A week or more: everything.
        assert!(in_refresh_nights(&product, days, Some(tonight - 7 * DAY_MS), tonight));
    }

    proptest! {
        #[test]
        fn every_product_is_refreshed_exactly_once_in_any_d_consecutive_nights(
            text in "[0-9A-Za-z]{10}", days in 1u32..60, first_night in -1_000i64..100_000,
        ) {
            let product = id(&text);
            let refreshes = (first_night..first_night + i64::from(days))
                .filter(|night| in_refresh_slice(&product, days, night * DAY_MS + 3 * 3_600_000))
                .count();
            prop_assert_eq!(refreshes, 1);
        }
    }
}
