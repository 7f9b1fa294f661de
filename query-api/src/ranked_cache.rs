//! The ranked-read cache and what it holds: each product's [`Ranking`] and
//! review summary, their answers rendered once (when loaded, or by the first
//! request for one that few ask for), weighed in bytes.
//!
//! [`RankedCache::get_or_load`] is the one way a ranking is read: a fresh
//! copy from the cache, else the caller's load; it owns the refresh protocol
//! and the one freshness rule ([`Ranking::is_fresh`]). The load itself is the
//! caller's ([`crate::ranking_reads::load_ranking`]): this module does no I/O.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderValue;
use common::Id;
use moka::future::Cache;
use moka::ops::compute::Op;

use crate::config::Settings;
use crate::error::ApiError;
use crate::prepared_ranking::Ranking;
use crate::telemetry;

/// The ranked-read cache, or no cache at all when its TTL is zero.
///
/// Bounded by bytes (each ranking weighed by [`Ranking::weight_bytes`]), not
/// by entries, because one ranking of ten 64 KiB comments weighs as much as
/// two hundred typical ones. A ranking is fresh for `--ranked-cache-ttl-ms`
/// from the start of its read ([`Ranking::read_at`]) and stays one more TTL,
/// expired: then one request reloads it while the others are answered from
/// the expiring copy.
#[derive(Clone)]
pub struct RankedCache {
    cache: Option<Cache<Id, Arc<Ranking>>>,
    ttl: Duration,
    /// The products whose expired ranking one request is reloading now.
    refreshing: Arc<Mutex<HashSet<Id>>>,
    /// What ranked reads answer in `Cache-Control`, made once.
    cache_control: HeaderValue,
    results: CacheResults,
}

impl std::fmt::Debug for RankedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankedCache")
            .field("ttl", &self.ttl)
            .field("entries", &self.cache.as_ref().map(Cache::entry_count))
            .finish_non_exhaustive()
    }
}

impl RankedCache {
    /// The cache `settings` ask for (none when the TTL is zero).
    pub fn new(settings: &Settings) -> RankedCache {
        let ttl = settings.ranked_cache_ttl;
        let cache = (!ttl.is_zero()).then(|| {
            // Beside the cache's weight, so an alert can tell how close it is to its bound.
            metrics::gauge!(telemetry::RANKED_CACHE_MAX_BYTES).set(settings.ranked_cache_max_bytes as f64);
            Cache::builder()
                .name("ranked")
                .weigher(|_product: &Id, ranking: &Arc<Ranking>| {
                    u32::try_from(ranking.weight_bytes()).unwrap_or(u32::MAX)
                })
                .max_capacity(settings.ranked_cache_max_bytes.max(1))
                .time_to_live(ttl.saturating_mul(2))
                .build()
        });
        let seconds = ttl.as_secs();
        let cache_control = if seconds == 0 {
            HeaderValue::from_static("no-cache")
        } else {
            HeaderValue::from_str(&format!("public, max-age={seconds}")).unwrap_or(HeaderValue::from_static("no-cache"))
        };
        RankedCache { cache, ttl, refreshing: Arc::default(), cache_control, results: CacheResults::new() }
    }

    /// The `Cache-Control` of ranked reads: they change only when the ranker
    /// runs, so clients and proxies may keep them as long as this cache does.
    pub fn cache_control(&self) -> &HeaderValue {
        &self.cache_control
    }

    /// `product`'s cached ranking while it is fresh; `None` when the cache
    /// does not hold it, holds it expired, or is off. Never loads.
    pub async fn fresh(&self, product: &Id) -> Option<Arc<Ranking>> {
        let ranking = self.cache.as_ref()?.get(product).await?;
        ranking.is_fresh(self.ttl).then_some(ranking)
    }

    /// `product`'s ranking: from the cache when it holds a fresh one, else
    /// from `load`.
    ///
    /// Once a cached ranking has expired (and for one more TTL, after which
    /// the cache drops it), the first request to find it so reloads it and
    /// waits for HBase, while the requests that come during that reload are
    /// answered from the expiring copy: a popular product sends one read to
    /// HBase at expiry, and no request but that one waits. So no answer is
    /// older than the TTL plus one reload. A failed reload leaves the
    /// expiring copy in place.
    ///
    /// Concurrent misses for one product share a single load (the cache
    /// coalesces them). Failed loads are not cached.
    pub async fn get_or_load<F>(&self, product: Id, load: impl FnOnce() -> F) -> Result<Arc<Ranking>, ApiError>
    where
        F: Future<Output = common::Result<Arc<Ranking>>>,
    {
        // A hit, by far the most common answer, is a lookup. The loads are
        // boxed, so that a hit's future is not as large as theirs: it would
        // be kilobytes, moved and copied through every layer of every request.
        let Some(cache) = &self.cache else {
            self.results.disabled.increment(1);
            return Box::pin(load()).await.map_err(ApiError::from);
        };
        if let Some(cached) = cache.get(&product).await {
            if cached.is_fresh(self.ttl) {
                self.results.hit.increment(1);
                return Ok(cached);
            }
            return Box::pin(self.refresh(cache, product, cached, load)).await;
        }
        Box::pin(self.load_missing(cache, product, load)).await
    }

    /// Reloads `product`'s expired ranking `cached`, or answers it while
    /// another request reloads it.
    async fn refresh<F>(
        &self,
        cache: &Cache<Id, Arc<Ranking>>,
        product: Id,
        cached: Arc<Ranking>,
        load: impl FnOnce() -> F,
    ) -> Result<Arc<Ranking>, ApiError>
    where
        F: Future<Output = common::Result<Arc<Ranking>>>,
    {
        let Some(_claim) = RefreshClaim::take(&self.refreshing, product) else {
            self.results.refreshing.increment(1);
            return Ok(cached);
        };
        let fresh = load().await?;
        cache.insert(product, Arc::clone(&fresh)).await;
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weighted_size() as f64);
        self.results.refresh.increment(1);
        Ok(fresh)
    }

    /// Loads `product`'s ranking into the cache, which holds none, sharing
    /// the load with concurrent requests for it.
    async fn load_missing<F>(
        &self,
        cache: &Cache<Id, Arc<Ranking>>,
        product: Id,
        load: impl FnOnce() -> F,
    ) -> Result<Arc<Ranking>, ApiError>
    where
        F: Future<Output = common::Result<Arc<Ranking>>>,
    {
        let entry =
            cache.entry(product).or_try_insert_with(load()).await.map_err(|error| ApiError::from_store(&error))?;
        let result = if entry.is_fresh() { &self.results.miss } else { &self.results.hit };
        // moka weighs entries as they are inserted and evicts soon after, so
        // this trails the truth by at most a few recent loads.
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weighted_size() as f64);
        result.increment(1);
        Ok(entry.into_value())
    }
}

impl RankedCache {
    /// Weighs `ranking` again, when the cache still holds it for `product`:
    /// called by each request that found an answer missing from it and kept
    /// one, which its first weighing could not count (the seed's, the one
    /// with authors); when first requests race, by each of them, and
    /// putting the same ranking back twice weighs it the same. In a task of
    /// its own, so that a request dropped meanwhile (past its deadline, its
    /// client gone) cannot leave that answer held and unweighed; the handle
    /// is for tests, which wait for it. With the cache off, nothing holds
    /// the ranking: no task.
    pub fn reweigh(&self, product: Id, ranking: &Arc<Ranking>) -> Option<tokio::task::JoinHandle<()>> {
        let cache = self.cache.clone()?;
        let ranking = Arc::clone(ranking);
        Some(tokio::spawn(async move {
            // Put back only while the cache still holds this very ranking, in
            // one step: a refresh that replaced it meanwhile stays.
            cache
                .entry(product)
                .and_compute_with(|held| {
                    let op = match held {
                        Some(held) if Arc::ptr_eq(held.value(), &ranking) => Op::Put(Arc::clone(&ranking)),
                        _ => Op::Nop,
                    };
                    std::future::ready(op)
                })
                .await;
            metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weighted_size() as f64);
        }))
    }

    /// The bytes the cached rankings weigh once the cache's pending
    /// evictions have run, and how many it holds; `(0, 0)` when it is off.
    pub async fn settled_size(&self) -> (u64, u64) {
        let Some(cache) = &self.cache else {
            return (0, 0);
        };
        cache.run_pending_tasks().await;
        (cache.weighted_size(), cache.entry_count())
    }
}

/// `reviews_api_ranked_cache_requests_total` by result, registered once: a
/// cached read only increments.
#[derive(Debug, Clone)]
struct CacheResults {
    hit: metrics::Counter,
    miss: metrics::Counter,
    refresh: metrics::Counter,
    refreshing: metrics::Counter,
    disabled: metrics::Counter,
}

impl CacheResults {
    fn new() -> CacheResults {
        let counter = |result: &'static str| metrics::counter!(telemetry::RANKED_CACHE_REQUESTS, "result" => result);
        CacheResults {
            hit: counter("hit"),
            miss: counter("miss"),
            refresh: counter("refresh"),
            refreshing: counter("refreshing"),
            disabled: counter("disabled"),
        }
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::body::Bytes;

    use super::*;

    #[tokio::test]
    async fn a_ranking_that_gains_its_answer_with_authors_is_weighed_with_it() {
        let settings = Settings { ranked_cache_ttl: Duration::from_secs(60), ..Settings::default() };
        let cache = RankedCache::new(&settings);
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let ranking = Arc::new(Ranking::new(Vec::new(), None, Instant::now(), true));
        let loaded = Arc::clone(&ranking);
        cache.get_or_load(product, || async move { Ok(loaded) }).await.expect("loaded");
        let (before, _) = cache.settled_size().await;
        let answer = Bytes::from("{\"comments\":[],\"author\":\"x\"}".repeat(100));
        let kept = ranking.keep_with_authors_body(answer);
        cache.reweigh(product, &ranking).expect("the cache is on").await.expect("reweighed");
        let (after, entries) = cache.settled_size().await;
        assert_eq!(entries, 1);
        assert_eq!(after - before, kept.weight_bytes() as u64, "the answer and its variants weighed");
        assert!(kept.offers_variants(), "a cached ranking's answers are offered compressed");
    }

    #[test]
    fn with_the_cache_off_nothing_is_weighed_again() {
        // No runtime here: a spawned task would panic.
        let cache = RankedCache::new(&Settings { ranked_cache_ttl: Duration::ZERO, ..Settings::default() });
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let ranking = Arc::new(Ranking::new(Vec::new(), None, Instant::now(), false));
        assert!(cache.reweigh(product, &ranking).is_none());
    }
}
