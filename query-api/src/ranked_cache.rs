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
use std::hash::RandomState;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderValue;
use common::Id;
use quick_cache::sync::{Cache, DefaultLifecycle, EntryAction, EntryResult};
use quick_cache::{OptionsBuilder, Weighter};

use crate::config::Settings;
use crate::error::ApiError;
use crate::prepared_ranking::Ranking;
use crate::telemetry;

/// The least bytes each of the cache's shards holds: a shard admits no
/// ranking heavier than its own bound, and the heaviest (ten 64 KiB
/// comments, their answers and variants) weigh about 2 MiB.
const SHARD_LEAST_BYTES: u64 = 32 * 1024 * 1024;
/// What a typical ranking weighs, to size the cache's tables (an estimate
/// within an order of magnitude does).
const TYPICAL_RANKING_BYTES: u64 = 16 * 1024;

/// The ranked-read cache, or no cache at all when its TTL is zero.
///
/// Bounded by bytes (each ranking weighed by [`Ranking::weight_bytes`]), not
/// by entries, because one ranking of ten 64 KiB comments weighs as much as
/// two hundred typical ones. A ranking is fresh for `--ranked-cache-ttl-ms`
/// from the start of its read ([`Ranking::read_at`]) and is served one more
/// TTL, expired: then one request reloads it while the others are answered
/// from the expiring copy. Older, it is a miss.
///
/// `quick_cache`, not moka (which the last-good copies and the rendered
/// views keep): a hit here is every cached read, and moka records each read
/// for its admission policy, a tenth of a cached ranked read's CPU time.
#[derive(Clone)]
pub struct RankedCache {
    /// Hashed with std's SipHash: the products are the clients' to choose.
    cache: Option<Arc<RankingCache>>,
    ttl: Duration,
    /// The products whose expired ranking one request is reloading now.
    refreshing: Arc<Mutex<HashSet<Id>>>,
    /// What ranked reads answer in `Cache-Control`, made once.
    cache_control: HeaderValue,
    results: CacheResults,
}

type RankingCache = Cache<Id, Weighed, ByWeight, RandomState, DefaultLifecycle<Id, Weighed>>;

/// A cached ranking and the weight it was counted at. The cache asks an
/// entry's weight again when it evicts it, and must get what it counted,
/// while a ranking gains answers as they are first asked for
/// ([`RankedCache::reweigh`] counts them).
#[derive(Clone)]
struct Weighed {
    ranking: Arc<Ranking>,
    weight: u64,
}

impl Weighed {
    fn new(ranking: Arc<Ranking>) -> Weighed {
        // Never zero: the cache never evicts an entry that weighs nothing.
        let weight = ranking.weight_bytes().max(1);
        Weighed { ranking, weight }
    }
}

/// Weighs a [`Weighed`] ranking by the weight it was counted at.
#[derive(Clone, Copy)]
struct ByWeight;

impl Weighter<Id, Weighed> for ByWeight {
    fn weight(&self, _product: &Id, weighed: &Weighed) -> u64 {
        weighed.weight
    }
}

impl std::fmt::Debug for RankedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankedCache")
            .field("ttl", &self.ttl)
            .field("entries", &self.cache.as_ref().map(|cache| cache.len()))
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
            let max_bytes = settings.ranked_cache_max_bytes.max(1);
            let shards = usize::try_from(max_bytes / SHARD_LEAST_BYTES).unwrap_or(usize::MAX).clamp(1, 16);
            let items = usize::try_from(max_bytes / TYPICAL_RANKING_BYTES).unwrap_or(usize::MAX).max(16);
            let options = OptionsBuilder::new()
                .shards(shards)
                .estimated_items_capacity(items)
                .weight_capacity(max_bytes)
                .build()
                .unwrap_or_else(|_| unreachable!("both capacities are set"));
            Arc::new(Cache::with_options(options, ByWeight, RandomState::new(), DefaultLifecycle::default()))
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
    pub fn fresh(&self, product: &Id) -> Option<Arc<Ranking>> {
        let ranking = self.cache.as_ref()?.get(product)?.ranking;
        ranking.is_fresh(self.ttl).then_some(ranking)
    }

    /// Whether an expired `ranking` may still be served while it is reloaded.
    fn servable(&self, ranking: &Ranking) -> bool {
        ranking.is_fresh(self.ttl.saturating_mul(2))
    }

    /// `product`'s ranking: from the cache when it holds a fresh one, else
    /// from `load`.
    ///
    /// Once a cached ranking has expired (and for one more TTL, after which
    /// it is a miss), the first request to find it so reloads it and
    /// waits for HBase, while the requests that come during that reload are
    /// answered from the expiring copy: a popular product sends one read to
    /// HBase at expiry, and no request but that one waits. So no answer is
    /// older than the TTL plus one reload. A failed reload leaves the
    /// expiring copy in place.
    ///
    /// Concurrent misses for one product share a single load: the others
    /// wait for it, and one of them loads again if it fails. Failed loads
    /// are not cached.
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
        if let Some(Weighed { ranking: cached, .. }) = cache.get(&product) {
            if cached.is_fresh(self.ttl) {
                self.results.hit.increment(1);
                return Ok(cached);
            }
            if self.servable(&cached) {
                return Box::pin(self.refresh(cache, product, cached, load)).await;
            }
        }
        Box::pin(self.load_missing(cache, product, load)).await
    }

    /// Reloads `product`'s expired ranking `cached`, or answers it while
    /// another request does.
    async fn refresh<F>(
        &self,
        cache: &RankingCache,
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
        cache.insert(product, Weighed::new(Arc::clone(&fresh)));
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weight() as f64);
        self.results.refresh.increment(1);
        Ok(fresh)
    }

    /// Loads `product`'s ranking, which the cache does not hold (or holds
    /// too old to serve), once for every request that asks meanwhile.
    async fn load_missing<F>(
        &self,
        cache: &RankingCache,
        product: Id,
        load: impl FnOnce() -> F,
    ) -> Result<Arc<Ranking>, ApiError>
    where
        F: Future<Output = common::Result<Arc<Ranking>>>,
    {
        // Another request may have loaded it since the lookup, or be loading
        // it now (then this waits for its load).
        let held = cache
            .entry_async(&product, |_, held| {
                if self.servable(&held.ranking) {
                    EntryAction::Retain(Arc::clone(&held.ranking))
                } else {
                    EntryAction::ReplaceWithGuard
                }
            })
            .await;
        let guard = match held {
            EntryResult::Retained(ranking) => {
                self.results.hit.increment(1);
                return Ok(ranking);
            }
            EntryResult::Vacant(guard) | EntryResult::Replaced(guard, _) => guard,
            EntryResult::Removed(..) | EntryResult::Timeout => {
                unreachable!("the entry is only retained or replaced, and waited for without a timeout")
            }
        };
        // A failed load drops the guard: a request waiting for it loads next.
        let ranking = load().await?;
        // Refused only when a refresh put a ranking in meanwhile, which stays.
        let _ = guard.insert(Weighed::new(Arc::clone(&ranking)));
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weight() as f64);
        self.results.miss.increment(1);
        Ok(ranking)
    }
}

impl RankedCache {
    /// Weighs `ranking` again, when the cache still holds it for `product`:
    /// called by each request that found an answer missing from it and kept
    /// one, which its first weighing could not count (the seed's, the one
    /// with authors); when first requests race, by each of them, and
    /// weighing the same ranking twice weighs it the same. At once, under
    /// the entry's lock, so a refresh that replaced the ranking meanwhile
    /// stays, and no request dropped after keeping the answer can leave it
    /// unweighed.
    pub fn reweigh(&self, product: Id, ranking: &Arc<Ranking>) {
        let Some(cache) = &self.cache else { return };
        // No wait for a load in flight: the ranking it brings is weighed whole.
        let _ = cache.entry(&product, Some(Duration::ZERO), |_, held| {
            if Arc::ptr_eq(&held.ranking, ranking) {
                *held = Weighed::new(Arc::clone(ranking));
            }
            EntryAction::Retain(())
        });
        metrics::gauge!(telemetry::RANKED_CACHE_BYTES).set(cache.weight() as f64);
    }

    /// The bytes the cached rankings weigh and how many it holds; `(0, 0)`
    /// when it is off.
    pub fn size(&self) -> (u64, u64) {
        self.cache.as_ref().map_or((0, 0), |cache| (cache.weight(), cache.len() as u64))
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
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use axum::body::Bytes;

    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn cache() -> RankedCache {
        RankedCache::new(&Settings { ranked_cache_ttl: TTL, ..Settings::default() })
    }

    fn product() -> Id {
        Id::parse("productId", "PRODUCT001").expect("id")
    }

    /// An empty ranking whose read began `age` ago.
    fn ranking_read(age: Duration) -> Arc<Ranking> {
        Arc::new(Ranking::new(Vec::new(), None, Instant::now() - age, true))
    }

    /// `product()`'s ranking from `cache`, loading `loaded` on a miss.
    async fn get(cache: &RankedCache, loaded: &Arc<Ranking>) -> Arc<Ranking> {
        let loaded = Arc::clone(loaded);
        cache.get_or_load(product(), || async move { Ok(loaded) }).await.expect("a load that cannot fail")
    }

    #[tokio::test]
    async fn a_ranking_that_gains_its_answer_with_authors_is_weighed_with_it() {
        let cache = cache();
        let ranking = ranking_read(Duration::ZERO);
        get(&cache, &ranking).await;
        let (before, _) = cache.size();
        let answer = Bytes::from("{\"comments\":[],\"author\":\"x\"}".repeat(100));
        let kept = ranking.keep_with_authors_body(answer);
        cache.reweigh(product(), &ranking);
        let (after, entries) = cache.size();
        assert_eq!(entries, 1);
        assert_eq!(after - before, kept.weight_bytes() as u64, "the answer and its variants weighed");
        assert!(kept.offers_variants(), "a cached ranking's answers are offered compressed");
    }

    #[tokio::test]
    async fn a_ranking_replaced_in_the_cache_is_not_weighed_back_in() {
        let cache = cache();
        let held = ranking_read(Duration::ZERO);
        get(&cache, &held).await;
        let (before, _) = cache.size();
        let replaced = ranking_read(Duration::ZERO);
        replaced.keep_with_authors_body(Bytes::from("{\"comments\":[]}".repeat(100)));
        cache.reweigh(product(), &replaced);
        assert_eq!(cache.size(), (before, 1));
        assert!(Arc::ptr_eq(&get(&cache, &replaced).await, &held), "the held ranking stays");
    }

    #[tokio::test]
    async fn concurrent_misses_for_one_product_share_one_load() {
        let cache = cache();
        let loads = AtomicUsize::new(0);
        let ranking = ranking_read(Duration::ZERO);
        let load = || async {
            loads.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(Arc::clone(&ranking))
        };
        let (first, second) = tokio::join!(cache.get_or_load(product(), load), cache.get_or_load(product(), load));
        assert!(Arc::ptr_eq(&first.expect("loaded"), &second.expect("loaded")));
        assert_eq!(loads.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_failed_shared_load_fails_its_own_request_and_the_waiting_request_loads_again() {
        let cache = cache();
        let (loads, running, most_running) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let ranking = ranking_read(Duration::ZERO);
        // The first load fails once the second request waits for it; the second succeeds.
        let load = || async {
            let attempt = loads.fetch_add(1, Ordering::Relaxed);
            most_running.fetch_max(running.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            running.fetch_sub(1, Ordering::Relaxed);
            if attempt == 0 {
                return Err(common::Error::Unavailable("the gateway went away".to_owned()));
            }
            Ok(Arc::clone(&ranking))
        };
        let (first, second) = tokio::join!(cache.get_or_load(product(), load), cache.get_or_load(product(), load));
        assert_eq!(first.expect_err("its load failed").code(), crate::error::ErrorCode::Unavailable);
        assert!(Arc::ptr_eq(&second.expect("loaded by the request that waited"), &ranking));
        assert_eq!(loads.load(Ordering::Relaxed), 2);
        assert_eq!(most_running.load(Ordering::Relaxed), 1, "one after the other, not at once");
        assert!(Arc::ptr_eq(&cache.fresh(&product()).expect("cached"), &ranking));
    }

    #[tokio::test]
    async fn an_expired_ranking_is_served_while_one_request_reloads_it() {
        let cache = cache();
        let expiring = ranking_read(TTL + TTL / 2);
        get(&cache, &expiring).await;
        let fresh = ranking_read(Duration::ZERO);
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reloading = cache.get_or_load(product(), || async {
            released.await.expect("released");
            Ok(Arc::clone(&fresh))
        });
        tokio::pin!(reloading);
        assert!(futures_util::poll!(&mut reloading).is_pending(), "the first request reloads and waits");
        let meanwhile = cache
            .get_or_load(product(), || async { unreachable!("one reload at a time") })
            .await
            .expect("the expiring copy");
        assert!(Arc::ptr_eq(&meanwhile, &expiring));
        release.send(()).expect("the reload waits");
        assert!(Arc::ptr_eq(&reloading.await.expect("reloaded"), &fresh));
        assert!(Arc::ptr_eq(&cache.fresh(&product()).expect("cached"), &fresh));
    }

    #[tokio::test]
    async fn a_ranking_older_than_twice_the_ttl_is_a_miss() {
        let cache = cache();
        get(&cache, &ranking_read(TTL * 2 + Duration::from_secs(1))).await;
        assert!(cache.fresh(&product()).is_none());
        let fresh = ranking_read(Duration::ZERO);
        assert!(Arc::ptr_eq(&get(&cache, &fresh).await, &fresh), "loaded again, not served old");
    }

    #[tokio::test]
    async fn with_the_cache_off_every_read_loads() {
        let cache = RankedCache::new(&Settings { ranked_cache_ttl: Duration::ZERO, ..Settings::default() });
        let (first, second) = (ranking_read(Duration::ZERO), ranking_read(Duration::ZERO));
        get(&cache, &first).await;
        assert!(Arc::ptr_eq(&get(&cache, &second).await, &second));
        cache.reweigh(product(), &second);
        assert_eq!(cache.size(), (0, 0));
    }
}
