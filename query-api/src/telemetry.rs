//! Metrics and request tracing: the Prometheus recorder, the per-request
//! metrics middleware and the span every request's log lines carry.

use std::cell::RefCell;
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::error::ErrorCode;

/// Requests answered, by method, route template and status.
pub const HTTP_REQUESTS: &str = "reviews_api_http_requests_total";
/// Request latency, by method and route template: a histogram.
pub const HTTP_REQUEST_SECONDS: &str = "reviews_api_http_request_duration_seconds";
/// Error answers, by route template and error code (`overloaded`, `timeout`, `unavailable`, ...).
pub const HTTP_ERRORS: &str = "reviews_api_http_errors_total";
/// Ranked reads by what the cache did (`hit`, `miss`, `refresh`, `refreshing`, `disabled`).
pub const RANKED_CACHE_REQUESTS: &str = "reviews_api_ranked_cache_requests_total";
/// The ranked-read cache's current weight in bytes.
pub const RANKED_CACHE_BYTES: &str = "reviews_api_ranked_cache_bytes";
/// The ranked-read cache's bound in bytes (`--ranked-cache-max-bytes`), when the cache is on.
pub const RANKED_CACHE_MAX_BYTES: &str = "reviews_api_ranked_cache_max_bytes";

/// Answers served from the last good copy because HBase failed, by route template.
pub const STALE_ANSWERS: &str = "reviews_api_stale_answers_total";
/// Answers read (in part) from a secondary region replica, by route template.
pub const REPLICA_ANSWERS: &str = "reviews_api_replica_reads_total";
/// The bytes the last good answers weigh (bounded by `--stale-cache-max-bytes`).
pub const LAST_GOOD_BYTES: &str = "reviews_api_last_good_bytes";

/// Requests by client class: a configured API key's name, `address` or `other` (`crate::clients`).
pub const CLIENT_REQUESTS: &str = "reviews_api_client_requests_total";
/// Requests refused with 429, by client class and reason (`fair_share`, `in_flight`, `rate`).
pub const CLIENT_REFUSALS: &str = "reviews_api_client_refusals_total";
/// Requests admitted, by client class and kind (`crate::clients::ADMISSION_KINDS`).
pub const CLIENT_ADMISSIONS: &str = "reviews_api_client_admissions_total";
/// Seconds whose admitted requests overflowed what the service could serve (`crate::clients`).
pub const OVERFLOWED_SECONDS: &str = "reviews_api_overflowed_seconds_total";

/// Connections open now.
pub const CONNECTIONS_OPEN: &str = "reviews_api_connections_open";
/// Connections refused at the cap (`--max-connections`).
pub const CONNECTIONS_REFUSED: &str = "reviews_api_connections_refused_total";
/// Connections the service closed, by reason: `header_timeout` (a request
/// head did not arrive in time) or `idle` (the keep-alive timeout).
pub const CONNECTIONS_CLOSED: &str = "reviews_api_connections_closed_total";

/// Requests slower than this log one `info` line (every request logs one at `debug`).
pub const SLOW_REQUEST: Duration = Duration::from_millis(500);

/// The handle of the process's Prometheus recorder, installed on first call.
///
/// A process has one global `metrics` recorder, and tests build many services
/// in one process, so the first call installs it and later calls share it. If
/// something else installed a recorder first, `/metrics` renders an empty page
/// rather than failing the service.
pub fn prometheus_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = match common::telemetry::prometheus_builder().install_recorder() {
                Ok(handle) => handle,
                Err(error) => {
                    tracing::warn!(%error, "another metrics recorder is installed; /metrics will be empty");
                    PrometheusBuilder::new().build_recorder().handle()
                }
            };
            describe_metrics();
            handle
        })
        .clone()
}

/// Registers every metric's HELP text: the service's own and the shared ones.
fn describe_metrics() {
    common::telemetry::describe_shared_metrics();
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by method, route template and status");
    metrics::describe_histogram!(
        HTTP_REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "HTTP request latency, by method and route template"
    );
    metrics::describe_counter!(
        HTTP_ERRORS,
        "HTTP error answers, by route template and error code (the body's error.code)"
    );
    metrics::describe_gauge!(CONNECTIONS_OPEN, "HTTP connections open, at most --max-connections");
    metrics::describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections answered 503 and closed at once because --max-connections were open"
    );
    metrics::describe_counter!(
        CONNECTIONS_CLOSED,
        "Connections the service closed: header_timeout (no whole request head in time) or idle (keep-alive timeout)"
    );
    metrics::describe_gauge!(
        RANKED_CACHE_MAX_BYTES,
        metrics::Unit::Bytes,
        "The ranked-read cache's bound, --ranked-cache-max-bytes (absent when the cache is off)"
    );
    metrics::describe_counter!(
        RANKED_CACHE_REQUESTS,
        "Ranked reads by what the cache did: hit, miss, refresh (reloaded an expired ranking), refreshing \
         (answered from the expiring copy while another request reloads it) or disabled"
    );
    metrics::describe_counter!(
        STALE_ANSWERS,
        "Answers served from the last good copy (Age, stale-if-error) because HBase failed, by route template"
    );
    metrics::describe_counter!(
        REPLICA_ANSWERS,
        "Answers read in part or whole from a secondary region replica (X-Replica-Read: stale), by route template"
    );
    metrics::describe_gauge!(
        LAST_GOOD_BYTES,
        metrics::Unit::Bytes,
        "Bytes the last good answers weigh, bounded by --stale-cache-max-bytes"
    );
    metrics::describe_gauge!(
        RANKED_CACHE_BYTES,
        metrics::Unit::Bytes,
        "Bytes the ranked-read cache holds (comments and rendered answers), bounded by --ranked-cache-max-bytes"
    );
    metrics::describe_counter!(
        CLIENT_REQUESTS,
        "Requests by client class: a configured API key's name, address (by the client's address) or other"
    );
    metrics::describe_counter!(
        CLIENT_ADMISSIONS,
        "Requests admitted, by client class and kind: calm (the service was not shedding), sheltered (within the \
         even share, its HBase work may take the kept connections), within (within its fair rate), room (over its \
         fair rate, a place in the room), newcomer (come less than a second ago) or exempt"
    );
    metrics::describe_counter!(
        OVERFLOWED_SECONDS,
        "Seconds in which one in a hundred of the admitted requests (and ten or more) ended unserved while the \
         service shed: what it served then counts, for a while, as the most it can serve"
    );
    metrics::describe_counter!(
        CLIENT_REFUSALS,
        "Requests refused with 429, by client class and reason: fair_share (over its share while HBase is busy), \
         in_flight (--client-max-in-flight) or rate (--client-rate)"
    );
}

/// Marks an answer served from the last good copy, for [`record_answer`] to count by route.
#[derive(Debug, Clone, Copy)]
pub struct ServedStale;

/// Marks an answer read (in part) from a secondary region replica, for
/// [`record_answer`] to count by route.
#[derive(Debug, Clone, Copy)]
pub struct ServedFromReplica;

/// The route template of a request (never the raw path, whose ids would
/// make one series per product), `unmatched` when no route has its path.
pub fn route_of(request: &Request) -> MatchedRoute {
    MatchedRoute(request.extensions().get::<MatchedPath>().cloned())
}

/// A request's route template, or none ([`route_of`]).
#[derive(Debug, Clone)]
pub struct MatchedRoute(Option<MatchedPath>);

impl MatchedRoute {
    pub fn as_str(&self) -> &str {
        self.0.as_ref().map_or("unmatched", MatchedPath::as_str)
    }
}

/// The method a request counts under: any token is a method in HTTP, and
/// those the service does not know count as one, `OTHER`.
pub fn method_label(method: &Method) -> Method {
    match *method {
        Method::GET | Method::HEAD | Method::POST | Method::PUT | Method::DELETE | Method::OPTIONS | Method::PATCH => {
            method.clone()
        }
        _ => OTHER_METHOD.clone(),
    }
}

/// Counts an answered request and records its latency, by route template
/// and status; logs its access line (debug, or info when slow) under its
/// `span` (none unless its trace is exported, [`request_span`]), and
/// records route and status on that span.
pub fn record_answer(span: &tracing::Span, route: &str, method: &Method, elapsed: Duration, response: &Response) {
    let status = response.status();
    RequestMetrics::of(route, method, status.as_u16(), |metrics| {
        metrics.seconds.record(elapsed.as_secs_f64());
        metrics.requests.increment(1);
    });
    record_on_span(span, route, status);
    let elapsed_ms = elapsed.as_secs_f64() * 1_000.0;
    if elapsed >= SLOW_REQUEST {
        tracing::info!(parent: span, %route, status = status.as_u16(), elapsed_ms, "slow request");
    } else {
        tracing::debug!(parent: span, %route, status = status.as_u16(), elapsed_ms, "request");
    }
    if let Some(code) = response.extensions().get::<ErrorCode>() {
        metrics::counter!(HTTP_ERRORS, "route" => route.to_owned(), "code" => code.as_str()).increment(1);
    }
    if response.extensions().get::<ServedStale>().is_some() {
        metrics::counter!(STALE_ANSWERS, "route" => route.to_owned()).increment(1);
    }
    if response.extensions().get::<ServedFromReplica>().is_some() {
        metrics::counter!(REPLICA_ANSWERS, "route" => route.to_owned()).increment(1);
    }
}

/// The label of a method the service does not know (`FOO`, `PROPFIND`...).
static OTHER_METHOD: LazyLock<Method> = LazyLock::new(|| Method::from_bytes(b"OTHER").unwrap_or(Method::GET));

/// The latency histogram and the request counter of one route, method and
/// status, registered the first time they answer on a thread and kept by
/// it: counting a request is then a lookup, not a registration with freshly
/// built labels. Each thread keeps its own handles (to the same series: the
/// recorder registers a name and labels once), so a lookup writes nothing
/// another thread reads; one map behind a lock had every request of both
/// workers take that lock's cache line in turn.
#[derive(Debug)]
struct RequestMetrics {
    seconds: metrics::Histogram,
    requests: metrics::Counter,
}

/// Route template -> (method, status) -> its metrics. Hashed with
/// `foldhash`, not std's SipHash, which showed in a cached read's profile:
/// the keys are the router's templates, the known methods and the statuses
/// the service answers, none of them chosen by a client.
type RequestMetricsByRoute = foldhash::HashMap<Box<str>, foldhash::HashMap<(Method, u16), RequestMetrics>>;

thread_local! {
    static KNOWN_ON_THIS_THREAD: RefCell<RequestMetricsByRoute> = RefCell::default();
}

impl RequestMetrics {
    /// Runs `record` with the metrics of `route`, `method` and `status`.
    fn of(route: &str, method: &Method, status: u16, record: impl FnOnce(&RequestMetrics)) {
        KNOWN_ON_THIS_THREAD.with_borrow_mut(|known| {
            if let Some(metrics) = known.get(route).and_then(|by_status| by_status.get(&(method.clone(), status))) {
                return record(metrics);
            }
            let metrics = known.entry(route.into()).or_default().entry((method.clone(), status)).or_insert_with(|| {
                let labels = [("method", method.as_str().to_owned()), ("route", route.to_owned())];
                RequestMetrics {
                    seconds: metrics::histogram!(HTTP_REQUEST_SECONDS, &labels),
                    requests: metrics::counter!(
                        HTTP_REQUESTS,
                        "method" => method.as_str().to_owned(),
                        "route" => route.to_owned(),
                        "status" => status.to_string()
                    ),
                }
            });
            record(metrics);
        });
    }
}

/// The span of one request whose trace is exported, `Span::none()` for
/// any other (its log lines name it by a [`common::traces::RequestContext`]):
/// named by its route template, continuing the caller's trace (W3C
/// `traceparent`), with the request's id, method and path, which its log
/// lines show too; [`record_answer`] records its status.
pub fn request_span(request: &Request, request_id: &axum::http::HeaderValue, route: &MatchedRoute) -> tracing::Span {
    common::traces::root_span(Some(request.headers()), || {
        tracing::info_span!(
            "request",
            request_id = %request_id.to_str().unwrap_or("-"),
            method = %request.method(),
            path = %request.uri().path(),
            otel.name = %format_args!("{} {}", request.method(), route.as_str()),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            http.route = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
        )
    })
}

/// Records the request's route template and status on its span; a 5xx
/// marks the span failed.
fn record_on_span(span: &tracing::Span, route: &str, status: axum::http::StatusCode) {
    span.record("http.route", route);
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}
