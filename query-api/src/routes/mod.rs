//! The handlers, one module per audience: [`v1`] for frontends, [`widget`]
//! for shops' pages (the review widgets), [`seed`] for clients of the
//! original Java service, [`ops`] for operators (health, readiness,
//! metrics); here what they share (answering a kept read, stale
//! when HBase fails) and the fallbacks.
//!
//! A handler parses its request (with [`crate::extract`]), calls one function
//! of [`crate::pages`] or [`crate::ranking_reads`], and renders the answer.

pub mod answers;
pub mod ops;
pub mod seed;
pub mod v1;
pub mod widget;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use futures_util::FutureExt as _;
use utoipa::IntoResponses;

use crate::encoding::{AcceptedCodings, Prepared};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::last_good::{self, Answer, PageRead};
use crate::state::AppState;
use crate::telemetry::ServedStale;
use crate::widget::shown_stale;

/// A ranked read's answer: prepared JSON, cacheable by clients for as long as
/// this service caches it, from a read of HBase that began at `read_at`.
pub(crate) fn ranked_answer(state: &AppState, body: Bytes, read_at: Instant) -> Answer {
    prepared_answer(state, Arc::new(Prepared::tagged(body)), read_at)
}

/// A first page's answer: JSON read now, whose caching nobody promises.
pub(crate) fn page_answer(body: Bytes, read_at: Instant) -> Answer {
    Answer { body: Arc::new(Prepared::tagged(body)), content_type: last_good::JSON, cache_control: None, read_at }
}

/// A ranked read's answer from a body prepared once ([`Prepared`]), with
/// its `ETag` and compressed variants.
pub(crate) fn prepared_answer(state: &AppState, body: Arc<Prepared>, read_at: Instant) -> Answer {
    Answer {
        body,
        content_type: last_good::JSON,
        cache_control: Some(state.ranked_cache().cache_control().clone()),
        read_at,
    }
}

/// How much of the request's deadline is left for answering from the last
/// good copy once the read of HBase has given up: a quarter of it, at most
/// this much.
const STALE_ANSWER_MARGIN: Duration = Duration::from_millis(250);

/// Answers `read` with `fresh`, and keeps the answer as `read`'s last good
/// one. When HBase fails (unavailable, busy, or too slow for the request's
/// deadline less [`STALE_ANSWER_MARGIN`]), answers the last good one instead,
/// marked stale, when one is kept; otherwise the failure.
///
/// Not an `async fn`, and no `await` in it: what follows the read is
/// synchronous, so the future returned is the read's (timed, when answers
/// are kept), with a map over its outcome. An `async fn` (or block) would hold `fresh` as its
/// argument and again where it awaits it, twice the bytes on every read's
/// future, copied as that future moves through the layers.
pub(crate) fn answer_kept<'state>(
    state: &'state AppState,
    read: PageRead,
    accepted: AcceptedCodings,
    fresh: impl Future<Output = Result<Answer, ApiError>> + 'state,
) -> impl Future<Output = Result<Response, ApiError>> + 'state {
    let Some(last_good) = state.last_good() else {
        // Nothing kept, nothing to leave time for: the front door's deadline bounds the read.
        return Either::Left(fresh.map(move |outcome| outcome.map(|answer| fresh_response(answer, accepted))));
    };
    let request_timeout = state.settings().request_timeout;
    let deadline = request_timeout.saturating_sub(STALE_ANSWER_MARGIN.min(request_timeout / 4));
    Either::Right(crate::deadline::within(deadline, fresh).map(move |outcome| {
        match outcome.unwrap_or_else(|_| Err(ApiError::timeout(deadline))) {
            Ok(answer) => {
                last_good.remember(read, &answer);
                Ok(fresh_response(answer, accepted))
            }
            Err(error) if error.code().is_store_failure() => match last_good.recall(&read) {
                Some(kept) => {
                    // Counted by route in reviews_api_stale_answers_total; one line per answer would flood the log in an outage.
                    tracing::debug!(cause = %error, "HBase failed; answering the last good copy");
                    Ok(stale_response(&kept, last_good.keep_for(), accepted))
                }
                None => Err(error),
            },
            Err(error) => Err(error),
        }
    }))
}

/// A fresh answer: its body, `Content-Type`, `Cache-Control` and (when
/// computed with it) `ETag`.
fn fresh_response(answer: Answer, accepted: AcceptedCodings) -> Response {
    let mut response = answer.body.response(accepted, HeaderValue::from_static(answer.content_type));
    if let Some(cache_control) = answer.cache_control {
        response.headers_mut().insert(header::CACHE_CONTROL, cache_control);
    }
    response
}

/// An answer of prepared JSON.
pub(crate) fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// A kept answer served because HBase failed: the same body (a widget's view
/// with its stale notice shown), its `Age` (since the read behind it began),
/// and a `Cache-Control` saying it is stale and may be served while errors
/// last (RFC 5861), for as long as this service keeps it.
fn stale_response(kept: &Answer, keep_for: Duration, accepted: AcceptedCodings) -> Response {
    let age = kept.read_at.elapsed().as_secs();
    let cache_control = format!("public, max-age=0, stale-if-error={}", keep_for.as_secs());
    let headers = [
        (header::CACHE_CONTROL, HeaderValue::from_str(&cache_control).unwrap_or(HeaderValue::from_static("no-cache"))),
        (header::AGE, HeaderValue::from(age)),
    ];
    let content_type = HeaderValue::from_static(kept.content_type);
    // A widget's view shows its stale notice: other bytes, compressed as they go.
    let mut response = if kept.content_type == last_good::HTML {
        ([(header::CONTENT_TYPE, content_type)], headers, shown_stale(kept.body.body())).into_response()
    } else {
        (headers, kept.body.response(accepted, content_type)).into_response()
    };
    response.extensions_mut().insert(ServedStale);
    response
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
#[response(
    status = 503,
    description = "HBase is unavailable (`unavailable`), busy (`overloaded`) or too slow (`timeout`), and no last good \
                   answer is kept for this read; see Retry-After."
)]
pub struct Unavailable(pub ErrorBody);
