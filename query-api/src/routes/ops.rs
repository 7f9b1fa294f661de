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

/// Readiness: a page can be read (HBase answers a page's read through the
/// gateways; the master is not asked). Any failure, a missing table too, is
/// 503: the load balancer sends the requests elsewhere. So is a service
/// told to stop (SIGTERM), which keeps serving a moment before it drains
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
    state.store().check_ready().await.map_err(|error| ApiError::new(ErrorCode::Unavailable, error.to_string()))?;
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
    let body = state.metrics().render();
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], body).into_response()
}
