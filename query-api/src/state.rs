//! What every request shares: the store, the settings, the batched ranking
//! loads, the ranked-read cache, the last good answers, the clients' counts
//! and the metrics handle. Fields and accessors
//! only: what requests do with them lives in [`crate::pages`] and
//! [`crate::ranking_reads`].

use std::sync::Arc;

use common::store::ReadStore;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::clients::Clients;
use crate::config::Settings;
use crate::last_good::{self, LastGood};
use crate::ranked_cache::RankedCache;
use crate::ranking_batches::SharedLoads;
use crate::telemetry;
use crate::widget::RenderedViews;

/// The state behind every route: one `Arc`, so the clone every extractor
/// and middleware makes of it is one atomic increment, not one per `Arc`
/// and channel each of its caches holds.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

/// What [`AppState`] shares.
#[derive(Debug)]
struct Shared {
    store: ReadStore,
    settings: Settings,
    loads: SharedLoads,
    ranked_cache: RankedCache,
    last_good: Option<LastGood>,
    rendered_views: RenderedViews,
    clients: Clients,
    metrics: PrometheusHandle,
    /// Set when the service has been told to stop: `/readyz` answers 503
    /// from then on, so load balancers stop sending before the drain.
    stopping: std::sync::atomic::AtomicBool,
    /// Set once a page read has answered since start: from then on an
    /// HBase outage does not make the service unready (see `routes::ops`).
    has_read: std::sync::atomic::AtomicBool,
}

impl AppState {
    /// The state of a service reading `store` with `settings`. Installs the
    /// process's Prometheus recorder on first use. The store is read-only by
    /// type: nothing the routes reach can write. Must be called within a
    /// Tokio runtime: it starts the task that batches ranking loads.
    pub fn new(store: ReadStore, settings: Settings) -> AppState {
        let metrics = telemetry::prometheus_handle();
        let loads = SharedLoads::start(store.clone());
        let ranked_cache = RankedCache::new(&settings);
        let last_good = LastGood::new(settings.stale_if_error, settings.stale_cache_max_bytes);
        if last_good.is_some() {
            // From zero, so a rate over them exists before the first outage.
            for route in last_good::KEPT_ROUTES {
                metrics::counter!(telemetry::STALE_ANSWERS, "route" => route).increment(0);
            }
        }
        let clients = Clients::new(settings.clients.clone());
        // The widget script is compressed at start, not by its first request.
        std::sync::LazyLock::force(&crate::widget::SCRIPT);
        // Rendered views sit beside the rankings they show, in half their
        // budget: a view weighs about as much as its ranking (style and
        // markup beside the embedded answer), so the views of the rankings
        // held fit beside them.
        let rendered_views = RenderedViews::new(settings.ranked_cache_ttl, settings.ranked_cache_max_bytes / 2);
        AppState(Arc::new(Shared {
            store,
            settings,
            loads,
            ranked_cache,
            last_good,
            rendered_views,
            clients,
            metrics,
            stopping: std::sync::atomic::AtomicBool::new(false),
            has_read: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Marks the service as stopping: `/readyz` answers 503 from now on.
    pub fn mark_stopping(&self) {
        self.0.stopping.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the service has been told to stop.
    pub fn is_stopping(&self) -> bool {
        self.0.stopping.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that a page read has answered since start.
    pub fn mark_has_read(&self) {
        self.0.has_read.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a page read has answered since start.
    pub fn has_read(&self) -> bool {
        self.0.has_read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store the routes read.
    pub fn store(&self) -> &ReadStore {
        &self.0.store
    }

    /// The service's settings.
    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// The reads of ranking loads, shared by concurrent loads.
    pub fn loads(&self) -> &SharedLoads {
        &self.0.loads
    }

    /// The ranked-read cache (off when `--ranked-cache-ttl-ms` is 0).
    pub fn ranked_cache(&self) -> &RankedCache {
        &self.0.ranked_cache
    }

    /// The clients' requests in flight and limits.
    pub fn clients(&self) -> &Clients {
        &self.0.clients
    }

    /// The handle that renders `/metrics`.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.0.metrics
    }

    /// The first views of the review widget rendered lately.
    pub fn rendered_views(&self) -> &RenderedViews {
        &self.0.rendered_views
    }

    /// The last good answers of product pages, unless `--stale-if-error-secs` is 0.
    pub fn last_good(&self) -> Option<&LastGood> {
        self.0.last_good.as_ref()
    }
}
