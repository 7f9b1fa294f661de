//! The one error type every route answers with, and its JSON shape.
//!
//! Every failure, whether a bad id, a route that does not exist or HBase being
//! away, answers `{"error": {"code": "...", "message": "..."}}`. Clients branch
//! on `code`, which is stable; `message` is for people. A 4xx message says what
//! was wrong with the request. A 5xx message is generic on purpose: the cause
//! (a gateway address, an HBase exception) is logged with the request id, never
//! sent to the client.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// A stable, machine-readable error code; each maps to one HTTP status.
///
/// `EnumIter` lets tests walk every code, so a new code cannot dodge them;
/// `IntoStaticStr` gives each its name in the JSON body (`as_str`), snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    /// A path id is not ten bytes of printable ASCII other than `/`.
    InvalidId,
    /// `limit` is not an integer from 1 to 100.
    InvalidLimit,
    /// A cursor (or seed `startIndexKey`) is malformed or outside the list asked for.
    InvalidCursor,
    /// The query string does not parse.
    InvalidQuery,
    /// The JSON body does not parse or lacks a required field.
    InvalidBody,
    /// A body was sent without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// The body is larger than any request of this API needs.
    BodyTooLarge,
    /// No route has this path.
    NotFound,
    /// The product has no review summary: no run has counted a review of it and none is listed.
    NoSummary,
    /// No review has this id: it never existed, or it was deleted.
    NoReview,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// This client is over its rate, its requests in flight, or (while the
    /// service sheds load) its fair share: try again after `Retry-After`.
    TooManyRequests,
    /// HBase or its Thrift gateway did not answer in time.
    Unavailable,
    /// Every HBase connection was busy: the request was refused at once
    /// instead of queueing (try again after `Retry-After`).
    Overloaded,
    /// The request took longer than the service's per-request deadline.
    Timeout,
    /// Anything else: a bug or a misconfiguration (a missing table).
    Internal,
}

impl ErrorCode {
    /// The code as it appears in the JSON body.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the code says HBase failed to answer (down, busy or too slow),
    /// as opposed to a bad request or a bug: the failures a kept answer may stand in for.
    pub fn is_store_failure(self) -> bool {
        matches!(self, ErrorCode::Unavailable | ErrorCode::Overloaded | ErrorCode::Timeout)
    }

    /// The HTTP status this code answers with.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidId
            | ErrorCode::InvalidLimit
            | ErrorCode::InvalidCursor
            | ErrorCode::InvalidQuery
            | ErrorCode::InvalidBody => StatusCode::BAD_REQUEST,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::NotFound | ErrorCode::NoSummary | ErrorCode::NoReview => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unavailable | ErrorCode::Overloaded | ErrorCode::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What a 5xx answer says instead of its cause.
    fn public_message(self) -> &'static str {
        match self {
            ErrorCode::Unavailable => "the review store is unavailable; try again shortly",
            ErrorCode::Overloaded => "the service is overloaded; try again shortly",
            ErrorCode::Timeout => "the request took too long; try again shortly",
            _ => "internal error",
        }
    }
}

/// A failed request: what to tell the client, and (for 5xx) what to log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", code.as_str())]
pub struct ApiError {
    code: ErrorCode,
    detail: String,
}

impl ApiError {
    /// An error with `code`; `detail` is shown to the client for 4xx and only logged for 5xx.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> ApiError {
        ApiError { code, detail: detail.into() }
    }

    /// The error's code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The request outlived the service's per-request deadline.
    pub fn timeout(deadline: Duration) -> ApiError {
        ApiError::new(ErrorCode::Timeout, format!("no answer within the request deadline of {deadline:?}"))
    }

    /// Maps a data-layer error. Taken by reference because the ranked-read cache
    /// shares one loader error among every request that waited on it.
    pub fn from_store(error: &common::Error) -> ApiError {
        use common::Error;
        let code = match error {
            Error::InvalidId(_) => ErrorCode::InvalidId,
            Error::InvalidCursor(_) => ErrorCode::InvalidCursor,
            Error::InvalidInput(_) => ErrorCode::InvalidQuery,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::DeadlineExceeded(_) => ErrorCode::Timeout,
            Error::Overloaded(_) => ErrorCode::Overloaded,
            // The service reads with validated ids only, so these mean a missing
            // table, a gateway refusing a call, or a bug: nothing the client can fix.
            Error::NotFound(_) | Error::Conflict(_) | Error::Hbase(_) | Error::BadData { .. } => ErrorCode::Internal,
        };
        ApiError::new(code, error.to_string())
    }
}

impl From<common::Error> for ApiError {
    fn from(error: common::Error) -> ApiError {
        ApiError::from_store(&error)
    }
}

impl From<common::ids::InvalidId> for ApiError {
    fn from(error: common::ids::InvalidId) -> ApiError {
        ApiError::new(ErrorCode::InvalidId, error.to_string())
    }
}

impl From<common::cursor::CursorError> for ApiError {
    fn from(error: common::cursor::CursorError) -> ApiError {
        ApiError::new(ErrorCode::InvalidCursor, error.to_string())
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code, such as `invalid_id`, `invalid_limit`,
    /// `invalid_cursor`, `not_found` or `unavailable`.
    #[schema(example = "invalid_limit")]
    pub code: String,
    /// Human-readable explanation.
    #[schema(example = "limit must be an integer from 1 to 100, got \"0\"")]
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.code.status();
        let message = if status.is_server_error() {
            // The span of the request (with its request id) is current here, so
            // the log line and the client's answer can be matched up.
            match self.code {
                ErrorCode::Internal => {
                    tracing::error!(code = self.code.as_str(), cause = %self.detail, "request failed")
                }
                // Under overload this is every refused request: counted in
                // reviews_hbase_overloaded_total, logged only at debug.
                ErrorCode::Overloaded => {
                    tracing::debug!(code = self.code.as_str(), cause = %self.detail, "request refused")
                }
                _ => tracing::warn!(code = self.code.as_str(), cause = %self.detail, "request failed"),
            }
            self.code.public_message().to_owned()
        } else {
            self.detail
        };
        let body = ErrorBody { error: ErrorDetail { code: self.code.as_str().to_owned(), message } };
        let mut response = (status, axum::Json(body)).into_response();
        // For the metrics middleware, which counts errors by code: a 503 alone
        // does not say whether HBase was down, saturated or too slow.
        response.extensions_mut().insert(self.code);
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // HBase outages seen here last seconds (a gateway restart), so tell
            // well-behaved clients to come back soon rather than hammer.
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(error: ApiError) -> (StatusCode, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("body");
        (status, serde_json::from_slice(&bytes).expect("json"))
    }

    #[tokio::test]
    async fn client_errors_show_their_detail() {
        let (status, body) = body_of(ApiError::new(ErrorCode::InvalidLimit, "limit must be 1 to 100")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["code"], "invalid_limit");
        assert_eq!(body["error"]["message"], "limit must be 1 to 100");
    }

    #[tokio::test]
    async fn server_errors_hide_their_cause() {
        let cause = common::Error::Unavailable("cannot connect to 10.0.0.7:9090".to_owned());
        let (status, body) = body_of(ApiError::from(cause)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "unavailable");
        assert!(!body.to_string().contains("10.0.0.7"), "{body}");

        let (status, body) = body_of(ApiError::from(common::Error::Hbase("TableNotFound: secret".to_owned()))).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["code"], "internal");
        assert!(!body.to_string().contains("secret"), "{body}");
    }

    #[tokio::test]
    async fn overload_answers_503_overloaded_with_retry_after() {
        let response = ApiError::from(common::Error::Overloaded("64 operations wait".to_owned())).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let (_, body) = body_of(ApiError::from(common::Error::Overloaded("64 operations wait".to_owned()))).await;
        assert_eq!(body["error"]["code"], "overloaded");
        assert!(!body.to_string().contains("64 operations"), "{body}");
    }

    #[test]
    fn every_code_has_a_distinct_name() {
        use strum::IntoEnumIterator;
        // The list comes from the enum itself, so a new variant is checked without anyone adding it here.
        let codes: Vec<ErrorCode> = ErrorCode::iter().collect();
        assert!(codes.len() >= 12, "the enum lists {} codes", codes.len());
        let names: std::collections::HashSet<&str> = codes.iter().map(|code| code.as_str()).collect();
        assert_eq!(names.len(), codes.len(), "two codes share a name: {names:?}");
        // Clients branch on these names: they are the variants' names in snake case.
        assert_eq!(ErrorCode::UnsupportedMediaType.as_str(), "unsupported_media_type");
        assert_eq!(ErrorCode::NoReview.as_str(), "no_review");
        for code in codes {
            assert!(code.status().is_client_error() || code.status().is_server_error(), "{code:?}");
        }
    }
}
