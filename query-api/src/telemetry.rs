//! Metrics and request tracing: the Prometheus recorder, the per-request
//! metrics middleware and the span every request's log lines carry.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Histogram buckets in seconds, for request latency and HBase call latency
/// alike: from sub-millisecond cache hits to the 2 s request deadline and past it.
const LATENCY_BUCKETS_SECONDS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0];

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
            let builder = PrometheusBuilder::new();
            let builder = match builder.set_buckets(LATENCY_BUCKETS_SECONDS) {
                Ok(builder) => builder,
                Err(error) => {
                    tracing::warn!(%error, "latency buckets refused; histograms render as summaries");
                    PrometheusBuilder::new()
                }
            };
            match builder.install_recorder() {
                Ok(handle) => handle,
                Err(error) => {
                    tracing::warn!(%error, "another metrics recorder is installed; /metrics will be empty");
                    PrometheusBuilder::new().build_recorder().handle()
                }
            }
        })
        .clone()
}

/// Counts each request and records its latency, by route template (never the
/// raw path, whose ids would make one series per product) and status.
pub async fn record_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let elapsed = started.elapsed().as_secs_f64();
    metrics::histogram!("http_request_duration_seconds", "method" => method.clone(), "route" => route.clone())
        .record(elapsed);
    metrics::counter!("http_requests_total", "method" => method, "route" => route, "status" => status).increment(1);
    response
}

/// The span of one request: its id (from `x-request-id`, set by the request-id
/// layer just outside), method and path. Every log line inside carries them.
pub fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let request_id = request.headers().get("x-request-id").and_then(|value| value.to_str().ok()).unwrap_or("-");
    tracing::info_span!(
        "request",
        request_id = %request_id,
        method = %request.method(),
        path = %request.uri().path(),
    )
}
