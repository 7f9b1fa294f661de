//! What operators call: liveness, readiness and the Prometheus metrics.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::Unavailable;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::Status;

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Status)))]
pub async fn healthz() -> Json<Status> {
    Json(Status { status: "ok".to_owned() })
}

/// Readiness: HBase answers through the Thrift gateway.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses((status = 200, body = Status), Unavailable)
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    state.store().check_ready().await?;
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
