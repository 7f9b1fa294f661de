//! What operators call: liveness, readiness and the Prometheus metrics.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::Unavailable;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::views::Status;

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Status)))]
pub async fn healthz() -> Json<Status> {
    Json(Status { status: "ok".to_owned() })
}

/// Readiness: the service can serve. Until a page read has answered once
/// since start, readiness reads one (HBase answers through the gateways; the
/// master is not asked), so a replica that cannot reach HBase at all (a
/// wrong address, a gateway it may not reach) never takes traffic. From
/// then on an HBase outage does not make it unready: HBase is every
/// replica's, so its outage would take every replica out of the load
/// balancer at once, and with them the last good copies and the quick 503s
/// each would answer (measured: with the read on every probe, the crash of
/// the region server holding hbase:meta turned every read into the
/// balancer's own 503 for ten seconds). From SIGTERM on it answers 503,
/// so the balancer stops sending before the drain
/// (`--unready-before-drain-ms`).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses((status = 200, body = Status), Unavailable)
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    if state.is_stopping() {
        return Err(ApiError::new(ErrorCode::Unavailable, "the service is stopping"));
    }
    if !state.has_read() {
        state.store().check_ready().await.map_err(|error| ApiError::new(ErrorCode::Unavailable, error.to_string()))?;
        state.mark_has_read();
    }
    Ok(Json(Status { status: "ready".to_owned() }))
}

/// Prometheus metrics: requests by route and status, latencies, HBase calls, skipped rows.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text format.", content_type = "text/plain"))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    // The admissions are tallied under the admission's lock, not counted one by one.
    state.clients().publish_tallies();
    let body = state.metrics().render();
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], body).into_response()
}
