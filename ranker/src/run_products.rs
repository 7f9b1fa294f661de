//! Which products a run ranks, one at a time in key order ([`Products`]):
//! the one product, the listing of a key range, or for an incremental run
//! those it finds changed merged with the listing of its refresh slices.

use std::collections::VecDeque;
use std::iter::Peekable;
use std::time::Instant;

use common::store::products::CountedIndexPage;
use common::store::Store;
use common::Id;
use tokio_util::sync::CancellationToken;

use crate::changes::{find_products, ChangeReport, ChosenProduct, Incremental};
use crate::discovery::{DiscoveredProduct, Discovery, ListingRetry};
use crate::pace::Pacer;
use crate::refresh::{nights_due, refresh_ranges, CutSampler};
use crate::shard::KeyRange;
use crate::{ProductFailure, RankerError, RunOptions, RunReport, Scope};

/// The products in `options.scope`, one at a time: the one product, the
/// listing of a key range, or for an incremental run those it finds changed
/// with the listing of the refresh slices due (what it found goes in the
/// report).
pub(crate) async fn choose_products(
    store: &Store,
    options: &RunOptions,
    pacer: &Pacer,
    stop: &CancellationToken,
    report: &mut RunReport,
) -> Result<Products, RankerError> {
    let range = match &options.scope {
        Scope::Product(product) => return Ok(Products::One(Some(*product))),
        // A shard left without keys (fewer places to cut than shards) has nothing to rank.
        Scope::Shard { range, .. } if range.is_empty() => return Ok(Products::One(None)),
        scope => scope.key_range().unwrap_or_else(KeyRange::everything),
    };
    let lister =
        RangeLister { store: store.clone(), pacer: pacer.clone(), retry: listing_retry(options), stop: stop.clone() };
    let Some(incremental) = options.incremental else {
        let discovery = lister.start(&range);
        return Ok(Products::Listed { discovery: Box::new(discovery), cuts: CutSampler::new() });
    };
    let started = Instant::now();
    let mut changes = ChangeReport {
        since_ms: incremental.since_ms,
        refresh_days: incremental.refresh_days,
        ..ChangeReport::default()
    };
    let found = find_products(store, &range, incremental, pacer, options.concurrency, stop, &mut changes).await?;
    // Stopped while searching: nothing ranked, reported as interrupted.
    let Some(chosen) = found else { return Ok(Products::One(None)) };
    let refresh = refresh_plan(store, &range, incremental, options.as_of_ms).await?;
    changes.refresh_ranges = refresh.len() as u64;
    changes.refreshed_whole_range = refresh.first() == Some(&range);
    changes.detection_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        since_ms = changes.since_ms,
        refresh_days = changes.refresh_days,
        products_written = changes.products_written,
        products_with_deleted_comments = changes.products_with_deleted_comments,
        slots_checked = changes.slots_checked,
        refresh_ranges = changes.refresh_ranges,
        refreshed_whole_range = changes.refreshed_whole_range,
        detection_ms = changes.detection_ms,
        "found what changed; ranking it with the refresh slices due"
    );
    // A refresh of the whole range lists every product of it, as a full run does, and records cuts.
    let cuts = changes.refreshed_whole_range.then(CutSampler::new);
    report.changes = Some(changes);
    Ok(Products::Incremental(Box::new(IncrementalProducts {
        chosen: chosen.into_iter().peekable(),
        refresh: RefreshListing { lister, ranges: refresh.into(), current: None, head: None },
        cuts,
    })))
}

/// The key ranges an incremental run over `range` refreshes whole: the
/// slices of the nights due ([`nights_due`]) under the cuts recorded by the
/// newest runs covering the range, or the whole range when no recorded cuts
/// cover it.
async fn refresh_plan(
    store: &Store,
    range: &KeyRange,
    incremental: Incremental,
    as_of_ms: i64,
) -> Result<Vec<KeyRange>, RankerError> {
    let Some(days) = incremental.refresh_days else { return Ok(Vec::new()) };
    let nights = nights_due(incremental.refreshed_until_ms, as_of_ms);
    if nights.is_empty() {
        return Ok(Vec::new());
    }
    match crate::history::recorded_cuts(store, range).await? {
        Some(cover) => Ok(refresh_ranges(&cover, range, days, nights)),
        None => {
            tracing::warn!("no completed run covering these products recorded refresh cuts: refreshing every product");
            Ok(vec![range.clone()])
        }
    }
}

fn listing_retry(options: &RunOptions) -> ListingRetry {
    ListingRetry { backoff: options.retry_backoff, patience: options.listing_patience }
}

/// The products of a run, one at a time.
pub(crate) enum Products {
    One(Option<Id>),
    /// A range's listing, sampled for the refresh cuts.
    Listed {
        discovery: Box<Discovery>,
        cuts: CutSampler,
    },
    /// Boxed: it holds a listing and more.
    Incremental(Box<IncrementalProducts>),
}

impl Products {
    pub(crate) async fn next(&mut self) -> Option<Result<ProductToRank, ProductFailure>> {
        match self {
            // A single product's slots are read by its worker, inside its retries.
            Products::One(product) => product.take().map(|product| Ok(ProductToRank::read_slots(product))),
            Products::Listed { discovery, cuts } => {
                let found = discovery.next().await?;
                if let Ok(found) = &found {
                    cuts.add(found.product);
                }
                Some(found.map(|found| ProductToRank::discovered(found, false)))
            }
            Products::Incremental(products) => products.next().await,
        }
    }

    /// The cuts of the listing so far, when it is of the run's whole range.
    pub(crate) fn cuts(&self) -> Option<Vec<Id>> {
        match self {
            Products::One(_) => None,
            Products::Listed { cuts, .. } => Some(cuts.cuts()),
            Products::Incremental(products) => products.cuts.as_ref().map(CutSampler::cuts),
        }
    }
}

/// An incremental run's products: those it found changed merged in key order
/// with the listing of its refresh ranges, each product once.
pub(crate) struct IncrementalProducts {
    chosen: Peekable<std::vec::IntoIter<ChosenProduct>>,
    refresh: RefreshListing,
    /// Samples the refresh listing when it is of the run's whole range.
    cuts: Option<CutSampler>,
}

impl IncrementalProducts {
    pub(crate) async fn next(&mut self) -> Option<Result<ProductToRank, ProductFailure>> {
        let listed = self.refresh.peek().await;
        let take_listed = match (self.chosen.peek(), listed) {
            (None, None) => return None,
            // A listing failure goes first: it is reported, and that listing has stopped.
            (_, Some(Err(_))) | (None, Some(Ok(_))) => true,
            (Some(_), None) => false,
            (Some(chosen), Some(Ok(listed))) => listed.product <= chosen.product,
        };
        if !take_listed {
            return self.chosen.next().map(|chosen| Ok(ProductToRank::chosen(chosen)));
        }
        let listed = match self.refresh.head.take()? {
            Ok(listed) => listed,
            Err(failure) => return Some(Err(failure)),
        };
        // A changed product inside a refresh range is ranked once, with the slots the listing saw.
        self.chosen.next_if(|chosen| chosen.product == listed.product);
        if let Some(cuts) = self.cuts.as_mut() {
            cuts.add(listed.product);
        }
        Some(Ok(ProductToRank::discovered(listed, true)))
    }
}
/// The listing of an incremental run's refresh ranges, one range after the
/// other (they are ascending and disjoint, so the products come in key order).
struct RefreshListing {
    lister: RangeLister,
    ranges: VecDeque<KeyRange>,
    current: Option<Discovery>,
    /// The next product or listing failure, once peeked.
    head: Option<Result<DiscoveredProduct, ProductFailure>>,
}

impl RefreshListing {
    async fn peek(&mut self) -> Option<&Result<DiscoveredProduct, ProductFailure>> {
        while self.head.is_none() {
            match self.current.as_mut() {
                Some(discovery) => {
                    self.head = discovery.next().await;
                    if self.head.is_none() {
                        self.current = None;
                    }
                }
                None => {
                    let range = self.ranges.pop_front()?;
                    self.current = Some(self.lister.start(&range));
                }
            }
        }
        self.head.as_ref()
    }
}

/// What starting the listing of a key range needs.
struct RangeLister {
    store: Store,
    pacer: Pacer,
    retry: ListingRetry,
    stop: CancellationToken,
}

impl RangeLister {
    fn start(&self, range: &KeyRange) -> Discovery {
        Discovery::start(&self.store, &self.pacer, range, self.retry, &self.stop)
    }
}

/// A product to rank and, when a listing saw them, the slots it has now and
/// its whole comment index.
#[derive(Debug, Clone)]
pub(crate) struct ProductToRank {
    pub(crate) product: Id,
    pub(crate) slot_mask: Option<u16>,
    pub(crate) whole_index: Option<CountedIndexPage>,
    /// Listed by an incremental run's refresh.
    pub(crate) refreshed: bool,
}

impl ProductToRank {
    /// A product whose worker reads its slots.
    fn read_slots(product: Id) -> ProductToRank {
        ProductToRank { product, slot_mask: None, whole_index: None, refreshed: false }
    }

    /// A product an incremental run found changed.
    fn chosen(chosen: ChosenProduct) -> ProductToRank {
        ProductToRank { product: chosen.product, slot_mask: chosen.slot_mask, whole_index: None, refreshed: false }
    }

    /// A product a listing found.
    fn discovered(found: DiscoveredProduct, refreshed: bool) -> ProductToRank {
        ProductToRank {
            product: found.product,
            slot_mask: Some(found.slot_mask),
            whole_index: found.whole_index,
            refreshed,
        }
    }
}
