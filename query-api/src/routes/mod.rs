//! The handlers, one module per audience: [`v1`] for frontends, [`seed`] for
//! clients of the original Java service, [`ops`] for operators (health,
//! readiness, metrics); here what they share and the fallbacks.
//!
//! Every page read is one index scan (one row more than asked, whose key says
//! where the next page starts) followed by one multi-get of the comments it
//! names, whatever the page size. Ranked and summary reads are one scan of the
//! product's ranking (its ranking record, or the slots of a product without
//! one) and one multi-get, served from the cache when it holds them.

pub mod ops;
pub mod seed;
pub mod v1;

use axum::body::Bytes;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use common::model::Comment;
use common::store::{IndexKind, IndexPage};
use utoipa::IntoResponses;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;

/// Reads one page of an index and, in one multi-get, the comments it names.
pub(crate) async fn read_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    start: Option<Vec<u8>>,
    limit: usize,
) -> Result<(IndexPage, Vec<Comment>), ApiError> {
    let page = state.store().index_page(kind, prefix, start, limit).await?;
    // An empty page needs no multi-get (and must not fail on one when HBase is flaky).
    let comments = if page.entries.is_empty() { Vec::new() } else { state.store().comments_of(&page).await? };
    Ok((page, comments))
}

/// The `Cache-Control` of ranked reads: they change only when the ranker runs,
/// so clients and proxies may keep them as long as this service's cache does.
fn ranked_cache_control(state: &AppState) -> HeaderValue {
    let seconds = state.settings().ranked_cache_ttl.as_secs();
    if seconds == 0 {
        HeaderValue::from_static("no-cache")
    } else {
        HeaderValue::from_str(&format!("public, max-age={seconds}")).unwrap_or(HeaderValue::from_static("no-cache"))
    }
}

/// A ranked read's answer: prepared JSON, cacheable by clients for as long as
/// this service caches it.
pub(crate) fn ranked_response(state: &AppState, body: Bytes) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, ranked_cache_control(state)),
    ];
    (headers, body).into_response()
}

pub(crate) fn render_error(error: serde_json::Error) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("cannot render a ranking: {error}"))
}

/// Any path no route has.
pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {method} {}", uri.path()))
}

/// A known path asked with a method it does not have.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} does not accept {method}", uri.path()))
}

/// The answer of every route that reads HBase when HBase cannot serve it, as
/// the OpenAPI document lists it (`responses(.., Unavailable)`); the answer
/// itself is the [`ApiError`] of an unavailable or overloaded store.
#[derive(Debug, IntoResponses)]
#[response(status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.")]
pub struct Unavailable(pub ErrorBody);
