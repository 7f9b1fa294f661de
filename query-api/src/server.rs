//! The router with its middleware, and serving it with a graceful, bounded shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::around::AroundLayer;
use crate::clients;
use crate::connections::serve_connections;
use crate::front_door::{FrontDoor, REPLICA_READ_HEADER, REQUEST_ID_HEADER};
use crate::openapi::{self, ApiDoc, TypedParameters};
use crate::route_handling::{ByRoute, HandledRoutes, Handling, RouteHandling};
use crate::routes;
use crate::routes::answers::{documented, Answers};
use crate::routes::seed::SeedIndex;
use crate::state::AppState;

/// How often histogram samples are folded into the exported buckets.
const METRICS_UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The whole service as a router, ready for `axum::serve` or `tower::ServiceExt::oneshot`.
pub fn app(state: AppState) -> Router {
    let (routes, handling) = routes(&state);
    with_middleware(routes, handling, state)
}

/// The service's routes, before the middleware every request gets, and
/// what that middleware does to each one's requests beyond the front door.
/// Each route is registered once: its path and OpenAPI operation come from
/// its handler's `utoipa::path`, what it answers beyond its body from the
/// [`Answers`] it is registered with, and its [`Handling`] with it. The
/// reads and the demo pages are limited per client (`crate::clients`); the
/// probes, `/metrics` and the API's documentation never are.
fn routes(state: &AppState) -> (Router<AppState>, RouteHandling) {
    use routes::{ops, seed, v1, widget};
    use Handling::{Limited, LimitedAndConditional};
    let settings = state.settings();
    // The comment reads answer conditional GETs (ETag, If-None-Match → 304).
    let reads = HandledRoutes::new(OpenApiRouter::with_openapi(ApiDoc::openapi()))
        .routes(documented(utoipa_axum::routes!(v1::v1_product_comments), Answers::PAGE), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(v1::v1_user_comments), Answers::PAGE), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(v1::v1_review), Answers::PAGE), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(v1::v1_ranked_comments), Answers::RANKED), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(v1::v1_review_summary), Answers::RANKED), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(v1::v1_summaries), Answers::RANKED), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(widget::product_reviews_html), Answers::RANKED), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(seed::seed_product_latest), Answers::SEED_PAGE), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(seed::seed_user_latest), Answers::SEED_PAGE), LimitedAndConditional)
        .routes(documented(utoipa_axum::routes!(seed::seed_ranked), Answers::SEED_RANKED), LimitedAndConditional)
        .route(widget::SCRIPT_PATH, get(widget::widget_script), LimitedAndConditional)
        // Documented by `ApiDoc` from `seed_next`: one operation, two indexes.
        .route(SeedIndex::Product.next_page_path(), seed::next_page_route(SeedIndex::Product), Limited)
        .route(SeedIndex::User.next_page_path(), seed::next_page_route(SeedIndex::User), Limited);
    // The demo pages read HBase like the reads, and are limited like them.
    let reads = if settings.demo_pages {
        reads.route("/demo/products/{productId}", get(widget::demo_product_page), Limited).route(
            "/demo/listing",
            get(widget::demo_listing_page),
            Limited,
        )
    } else {
        reads
    };
    let (reads, handling) = reads.into_parts();
    let mut router = reads
        .routes(documented(utoipa_axum::routes!(ops::healthz), Answers::OPERATIONS))
        .routes(documented(utoipa_axum::routes!(ops::readyz), Answers::OPERATIONS));
    // `/metrics` is documented wherever it is served: here, or on its own listener.
    let (metrics, metrics_docs) = OpenApiRouter::new()
        .routes(documented(utoipa_axum::routes!(ops::metrics), Answers::OPERATIONS))
        .split_for_parts();
    if settings.metrics_on_main_listener {
        router = router.merge(OpenApiRouter::from(metrics));
    }
    let (router, mut openapi) = router.split_for_parts();
    openapi.merge(metrics_docs);
    TypedParameters.modify(&mut openapi);
    let router = router
        .merge(openapi::docs(openapi))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed);
    (router, handling)
}

/// Wraps `routes` in the service's middleware, outermost first: CORS (when
/// origins are configured), then the front door (request id, span, deadline,
/// metrics, per-request compression, the panic's 500), which applies each
/// route's [`Handling`] (its client limits and conditional GET) within it.
/// One layer of the router's, so one boxed route around each handler (see
/// `crate::route_handling`), and one boxed future. Tests wrap routes of
/// their own in it to reach what no real route does (a handler that panics).
pub(crate) fn with_middleware(routes: Router<AppState>, handling: RouteHandling, state: AppState) -> Router {
    let request_timeout = state.settings().request_timeout;
    let cors = cors_layer(&state.settings().cors_origins, &state.settings().clients.api_key_header);
    let shedding = clients::Shedding::new(state.clients().clone(), state.store().clone());
    let middleware = ServiceBuilder::new()
        // Outermost, so every answer a browser may read carries its headers,
        // the front door's 503 for a late answer among them. A preflight is
        // answered here, before the front door: it is not counted.
        .option_layer(cors)
        .layer(AroundLayer(FrontDoor {
            deadline: request_timeout,
            by_route: Arc::new(ByRoute { handling, shedding }),
        }));
    routes.layer(middleware).with_state(state)
}

/// The router of the separate metrics listener (`--metrics-listen`): `/metrics` only.
pub fn metrics_app(state: AppState) -> Router {
    Router::new().route("/metrics", get(routes::ops::metrics)).fallback(routes::not_found).with_state(state)
}

/// CORS for browser frontends: only the configured origins, `*` for any;
/// no layer at all when none is configured. Then no other origin may read an
/// answer, and an answer is the same whatever origin asks, so there is no
/// header to add, not even `Vary: Origin`, and a preflight is answered as
/// any request the routes do not take (405). A frontend may send its API key (`api_key_header`), revalidate
/// what it holds (`If-None-Match`) and name its request (`x-request-id`); it
/// may read what tells a fresh answer from a kept one (`ETag`, `Age`,
/// [`REPLICA_READ_HEADER`]), the request id to quote in a report, and when to
/// retry (`Retry-After`).
fn cors_layer(origins: &[String], api_key_header: &axum::http::HeaderName) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allowed = if origins.iter().any(|origin| origin == "*") {
        AllowOrigin::any()
    } else {
        let parsed: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|origin| match HeaderValue::from_str(origin) {
                Ok(value) => Some(value),
                Err(_) => {
                    tracing::warn!(origin, "ignoring a CORS origin that is not a valid header value");
                    None
                }
            })
            .collect();
        AllowOrigin::list(parsed)
    };
    let layer = CorsLayer::new()
        .allow_origin(allowed)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::IF_NONE_MATCH, REQUEST_ID_HEADER, api_key_header.clone()])
        .expose_headers([
            header::ETAG,
            header::AGE,
            header::RETRY_AFTER,
            REQUEST_ID_HEADER,
            HeaderName::from_static(REPLICA_READ_HEADER),
        ])
        .max_age(Duration::from_secs(3_600));
    Some(layer)
}

/// Serves `state` on `listener` until `shutdown` completes, then stops
/// accepting and lets in-flight requests finish for at most the drain deadline.
/// Connections are kept within the settings' timeouts and cap
/// ([`crate::connections`]).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let drain_deadline = state.settings().drain_deadline;
    let limits = state.settings().connections;
    let (metrics, clients) = (state.metrics().clone(), state.clients().clone());
    let upkeep = tokio::spawn(async move {
        let mut every = tokio::time::interval(METRICS_UPKEEP_EVERY);
        loop {
            every.tick().await;
            metrics.run_upkeep();
            clients.forget_idle();
            clients.publish_tallies();
        }
    });
    serve_connections(listener, app(state), limits, drain_deadline, shutdown).await;
    upkeep.abort();
    Ok(())
}
