//! What every request shares: the store, the settings, the ranked-read cache,
//! the last good answers and the metrics handle.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::keys::{self, CommentKey};
use common::store::stars::ListedSummary;
use common::store::{ReadStore, SkipReason};
use common::summary::ReviewSummary;
use common::Id;
use metrics_exporter_prometheus::PrometheusHandle;
use moka::future::Cache;

use crate::config::Settings;
use crate::error::ApiError;
use crate::last_good::{self, LastGood};
use crate::ranked_cache::{self, Ranking};
use crate::telemetry;
use crate::views::{RankedComment, ReviewSummaryView};

/// The state behind every route; cheap to clone (everything inside is shared).
#[derive(Clone)]
pub struct AppState {
    store: ReadStore,
    settings: Arc<Settings>,
    ranked_cache: Option<Cache<Id, Arc<Ranking>>>,
    /// The products whose expired ranking one request is reloading now.
    refreshing: Arc<Mutex<HashSet<Id>>>,
    last_good: Option<LastGood>,
    metrics: PrometheusHandle,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.store)
            .field("settings", &self.settings)
            .field("ranked_cache_entries", &self.ranked_cache.as_ref().map(Cache::entry_count))
            .field("last_good", &self.last_good)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state of a service reading `store` with `settings`. Installs the
    /// process's Prometheus recorder on first use. The store is read-only by
    /// type: nothing the routes reach can write.
    pub fn new(store: ReadStore, settings: Settings) -> AppState {
        let ranked_cache = (!settings.ranked_cache_ttl.is_zero()).then(|| ranked_cache::build(&settings));
        let metrics = telemetry::prometheus_handle();
        if ranked_cache.is_some() {
            // Beside the cache's weight, so an alert can tell how close it is to its bound.
            metrics::gauge!(telemetry::RANKED_CACHE_MAX_BYTES).set(settings.ranked_cache_max_bytes as f64);
        }
        let last_good = LastGood::new(settings.stale_if_error, settings.stale_cache_max_bytes);
        if last_good.is_some() {
            // From zero, so a rate over them exists before the first outage.
            for route in last_good::KEPT_ROUTES {
                metrics::counter!(telemetry::STALE_ANSWERS, "route" => route).increment(0);
            }
        }
        AppState { store, settings: Arc::new(settings), ranked_cache, refreshing: Arc::default(), last_good, metrics }
    }

    /// The store the routes read.
    pub fn store(&self) -> &ReadStore {
        &self.store
    }

    /// The service's settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The handle that renders `/metrics`.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.metrics
    }

    /// The last good answers of product pages, unless `--stale-if-error-secs` is 0.
    pub fn last_good(&self) -> Option<&LastGood> {
        self.last_good.as_ref()
    }

    /// `product`'s ranked comments, from the cache when it holds them.
    ///
    /// A cached ranking is fresh for the cache's TTL. Once it has expired (and
    /// for one more TTL, after which the cache drops it), the first request
    /// to find it so reloads it and waits for HBase, while the requests that
    /// come during that reload are answered from the expiring copy: a popular
    /// product sends one read to HBase at expiry, and no request but that
    /// one waits. So no answer is older than the TTL plus one reload. A
    /// failed reload leaves the expiring copy in place.
    ///
    /// Concurrent misses for one product share a single load (the cache
    /// coalesces them). Failed loads are not cached.
    pub async fn ranking(&self, product: Id) -> Result<Arc<Ranking>, ApiError> {
        let Some(cache) = &self.ranked_cache else {
            metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => "disabled").increment(1);
            return load_ranking(&self.store, product).await.map_err(ApiError::from);
        };
        if let Some(cached) = cache.get(&product).await {
            if cached.read_at().elapsed() < self.settings.ranked_cache_ttl {
                metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => "hit").increment(1);
                return Ok(cached);
            }
            let Some(_claim) = RefreshClaim::take(&self.refreshing, product) else {
                metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => "refreshing").increment(1);
                return Ok(cached);
            };
            let fresh = load_ranking(&self.store, product).await?;
            cache.insert(product, Arc::clone(&fresh)).await;
            metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weighted_size() as f64);
            metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => "refresh").increment(1);
            return Ok(fresh);
        }
        let entry = cache
            .entry(product)
            .or_try_insert_with(load_ranking(&self.store, product))
            .await
            .map_err(|error| ApiError::from_store(&error))?;
        let result = if entry.is_fresh() { "miss" } else { "hit" };
        // moka weighs entries as they are inserted and evicts soon after, so
        // this trails the truth by at most a few recent loads.
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weighted_size() as f64);
        metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => result).increment(1);
        Ok(entry.into_value())
    }

    /// The review summaries of `products`, lined up with them (`None` for a
    /// product with no review): from the ranked-read cache where it holds
    /// the product; the rest from their ranking records in one multi-get and
    /// their reviews newer than each record in one scan (and one multi-get
    /// when it finds any). Loaded summaries are not cached: the cache holds
    /// whole rankings.
    pub async fn summaries(&self, products: &[Id]) -> Result<Vec<Option<ReviewSummaryView>>, ApiError> {
        let mut found: HashMap<Id, Option<ReviewSummaryView>> = HashMap::new();
        if let Some(cache) = &self.ranked_cache {
            for product in products {
                if let Some(ranking) = cache.get(product).await {
                    if ranking.read_at().elapsed() < self.settings.ranked_cache_ttl {
                        found.insert(*product, ranking.summary().cloned());
                    }
                }
            }
        }
        let mut missing: Vec<Id> = products.iter().filter(|product| !found.contains_key(product)).copied().collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let records = self.store.ranking_records(&missing).await?;
            let counted: Vec<Option<(ReviewSummary, i64)>> = records
                .into_iter()
                .map(|record| record.and_then(|record| record.summary.zip(record.as_of_ms)))
                .collect();
            let asked: Vec<(Id, Option<i64>)> = missing
                .iter()
                .zip(&counted)
                .map(|(product, counted)| (*product, counted.map(|(_, as_of)| as_of)))
                .collect();
            let newer = self.store.summaries_after(&asked, LIVE_SUMMARY_MAX_ROWS).await?;
            for ((product, counted), newer) in missing.into_iter().zip(counted).zip(newer) {
                found.insert(product, with_newer(&product, counted, newer));
            }
        }
        Ok(products.iter().map(|product| found.get(product).cloned().flatten()).collect())
    }
}

/// A product whose expired ranking one request is reloading; the claim ends
/// when that request ends, whether its reload succeeded, failed or was
/// dropped with the request.
struct RefreshClaim {
    refreshing: Arc<Mutex<HashSet<Id>>>,
    product: Id,
}

impl RefreshClaim {
    /// The claim on reloading `product`, or `None` when another request holds it.
    fn take(refreshing: &Arc<Mutex<HashSet<Id>>>, product: Id) -> Option<RefreshClaim> {
        // A poisoned set only means a panic elsewhere while it was held; the set itself is sound.
        let mut held = refreshing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.insert(product).then(|| RefreshClaim { refreshing: Arc::clone(refreshing), product })
    }
}

impl Drop for RefreshClaim {
    fn drop(&mut self) {
        let mut held = self.refreshing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.remove(&self.product);
    }
}

/// Index rows one summary read counts past its run's as-of time at most.
const LIVE_SUMMARY_MAX_ROWS: usize = 1_000;

/// `product`'s summary as of now: the run's count (`counted`: the summary and
/// the run's as-of time, when a run counted the product) plus the reviews
/// listed after the run's as-of time, counted now (all of them when no run
/// counted it). `None` only when no run counted it and it lists no review.
async fn current_summary(
    store: &ReadStore,
    product: &Id,
    counted: Option<(ReviewSummary, i64)>,
) -> common::Result<Option<ReviewSummaryView>> {
    let as_of_ms = counted.map(|(_, as_of_ms)| as_of_ms);
    let newer = store.summary_after(product, as_of_ms, LIVE_SUMMARY_MAX_ROWS).await?;
    Ok(with_newer(product, counted, newer))
}

/// The run's count (if any) plus the reviews counted after it; `None` when
/// both are empty of reviews and no run counted the product.
fn with_newer(product: &Id, counted: Option<(ReviewSummary, i64)>, newer: ListedSummary) -> Option<ReviewSummaryView> {
    match counted {
        Some((mut summary, as_of_ms)) => {
            summary.merge(&newer.summary);
            Some(ReviewSummaryView::new(product, &summary, as_of_ms, newer.complete))
        }
        None if newer.summary.count() > 0 => Some(ReviewSummaryView::new(product, &newer.summary, 0, newer.complete)),
        None => None,
    }
}

/// Reads `product`'s ranking (one whole ranking, see [`ReadStore::ranking`]),
/// then beside each other its summary as of now and its comments in one
/// multi-get; slots whose
/// comment is gone (or belongs to another product) are left out.
async fn load_ranking(store: &ReadStore, product: Id) -> common::Result<Arc<Ranking>> {
    let read_at = Instant::now();
    let stored = store.ranking(&product).await?;
    let slots = stored.slots;
    let keys: Vec<CommentKey> = slots.iter().map(|slot| slot.comment).collect();
    // The live count and the ranked comments are independent reads.
    let (summary, comments) =
        tokio::try_join!(current_summary(store, &product, stored.summary.zip(stored.as_of_ms)), async {
            if keys.is_empty() {
                Ok(Vec::new())
            } else {
                store.get_comments(&keys).await
            }
        },)?;
    let ranked = slots
        .into_iter()
        .zip(comments)
        .filter_map(|(slot, comment)| {
            // A slot naming another product's comment can only come from a bad
            // write (the seed's upsert route took any key); showing it would
            // put one product's review on another's page.
            if slot.comment.product_id() != product {
                store.count_skipped_row(
                    &store.tables().product_comment_rank,
                    SkipReason::OtherProduct,
                    &keys::rank_key(&product, slot.rank),
                    &format_args!("rank {} of product {product} names comment {}", slot.rank, slot.comment),
                );
                return None;
            }
            comment.map(|comment| RankedComment { comment, rank: slot.rank, score: slot.score, author: None })
        })
        .collect();
    Ok(Arc::new(Ranking::new(ranked, summary, read_at)))
}
