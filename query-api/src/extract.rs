//! Request extractors that validate at the edge and reject in the API's JSON shape.
//!
//! axum's own extractors answer a bad path, query or body with plain text; these
//! wrap them so every rejection is an [`ApiError`], and so an id, a limit or a
//! body is checked once, before any handler (or HBase) sees it.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use common::Id;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{ApiError, ErrorCode};

/// The page size when a request names none.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest page size a request may ask for.
pub const MAX_LIMIT: usize = 100;

/// A validated page size: `1..=MAX_LIMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(usize);

impl Limit {
    /// The page size.
    pub fn get(self) -> usize {
        self.0
    }

    /// Parses the `limit` query parameter; absent means [`DEFAULT_LIMIT`].
    pub fn from_query(text: Option<&str>) -> Result<Limit, ApiError> {
        let Some(text) = text else {
            return Ok(Limit(DEFAULT_LIMIT));
        };
        match text.parse::<usize>() {
            Ok(limit) => Limit::checked(limit),
            Err(_) => Err(limit_error(&format!("{:?}", shorten(text)))),
        }
    }

    /// Reads the seed body's `limit`; absent or `null` means [`DEFAULT_LIMIT`].
    /// A number with no fraction (`77.0`) is the integer it equals, as in JSON
    /// Schema (and as a client that writes every number as a double sends it).
    pub fn from_json(value: Option<&serde_json::Value>) -> Result<Limit, ApiError> {
        match value {
            None | Some(serde_json::Value::Null) => Ok(Limit(DEFAULT_LIMIT)),
            Some(serde_json::Value::Number(number)) => {
                let whole = number.as_u64().or_else(|| {
                    number
                        .as_f64()
                        .filter(|float| float.fract() == 0.0 && (1.0..=MAX_LIMIT as f64).contains(float))
                        .map(|float| float as u64)
                });
                match whole.and_then(|n| usize::try_from(n).ok()) {
                    Some(limit) => Limit::checked(limit),
                    None => Err(limit_error(&number.to_string())),
                }
            }
            Some(other) => Err(limit_error(&shorten(&other.to_string()))),
        }
    }

    fn checked(limit: usize) -> Result<Limit, ApiError> {
        if (1..=MAX_LIMIT).contains(&limit) {
            Ok(Limit(limit))
        } else {
            Err(limit_error(&limit.to_string()))
        }
    }
}

fn limit_error(shown: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidLimit, format!("limit must be an integer from 1 to {MAX_LIMIT}, got {shown}"))
}

/// Cuts client input that is echoed in a message, so a huge value cannot flood a response or a log.
fn shorten(text: &str) -> String {
    const MAX_SHOWN_CHARS: usize = 40;
    if text.chars().count() <= MAX_SHOWN_CHARS {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX_SHOWN_CHARS).collect::<String>())
    }
}

/// Extracts the single path parameter of a route as an [`Id`], naming `field` in errors.
async fn path_id<S: Send + Sync>(parts: &mut Parts, state: &S, field: &'static str) -> Result<Id, ApiError> {
    let Path(raw) = Path::<String>::from_request_parts(parts, state).await.map_err(|rejection| match rejection {
        // The segment did not decode (bad percent-encoding, not UTF-8): the id is bad.
        PathRejection::FailedToDeserializePathParams(error) => {
            ApiError::new(ErrorCode::InvalidId, format!("{field} is not a valid path segment: {}", error.body_text()))
        }
        other => ApiError::new(ErrorCode::Internal, format!("path extraction failed: {}", other.body_text())),
    })?;
    Ok(Id::parse(field, &raw)?)
}

/// The `{productId}` of a route, validated.
#[derive(Debug, Clone, Copy, IntoParams)]
#[into_params(names("productId"), parameter_in = Path)]
pub struct ProductId(
    /// Ten bytes of printable ASCII other than `/` (space to `.`, `0` to `~`),
    /// URL-encoded where needed; new ids are letters and digits.
    #[param(value_type = String, min_length = 10, max_length = 10, pattern = "^[ -.0-~]{10}$", example = "P000000001")]
    pub Id,
);

impl<S: Send + Sync> FromRequestParts<S> for ProductId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_id(parts, state, "productId").await.map(ProductId)
    }
}

/// The `{userId}` of a route, validated.
#[derive(Debug, Clone, Copy, IntoParams)]
#[into_params(names("userId"), parameter_in = Path)]
pub struct UserId(
    /// Ten bytes of printable ASCII other than `/` (space to `.`, `0` to `~`),
    /// URL-encoded where needed; new ids are letters and digits.
    #[param(value_type = String, min_length = 10, max_length = 10, pattern = "^[ -.0-~]{10}$", example = "U000000001")]
    pub Id,
);

impl<S: Send + Sync> FromRequestParts<S> for UserId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_id(parts, state, "userId").await.map(UserId)
    }
}

/// The query parameters of a page request, as sent (validated by
/// [`PageQuery`]); they document the page routes' parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawPageQuery {
    /// Page size, 1 to 100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page of this same list (base64url, no
    /// padding); absent for the first page. Any other value, however well
    /// formed, answers 400 `invalid_cursor`.
    #[param(min_length = 2, max_length = 128, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// `?limit=&cursor=`, with the limit validated. The cursor stays text: only the
/// handler knows which prefix it must lie in.
#[derive(Debug, Clone)]
pub struct PageQuery {
    /// The page size.
    pub limit: Limit,
    /// The opaque cursor of the page to read, absent for the first page.
    pub cursor: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for PageQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(raw) = Query::<RawPageQuery>::from_request_parts(parts, state).await.map_err(query_rejection)?;
        Ok(PageQuery { limit: Limit::from_query(raw.limit.as_deref())?, cursor: raw.cursor })
    }
}

/// The query parameters of a one-page read, as sent (validated by
/// [`LimitQuery`]); they document those routes' parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawLimitQuery {
    /// Page size, 1 to 100 (default 20); ranked reads return at most the 10 ranked comments.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
}

/// `?limit=` alone, validated: for reads that have no further pages (ranked)
/// or take their position from the body (the seed's routes).
#[derive(Debug, Clone, Copy)]
pub struct LimitQuery(pub Limit);

impl<S: Send + Sync> FromRequestParts<S> for LimitQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(raw) = Query::<RawLimitQuery>::from_request_parts(parts, state).await.map_err(query_rejection)?;
        Ok(LimitQuery(Limit::from_query(raw.limit.as_deref())?))
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    ApiError::new(ErrorCode::InvalidQuery, format!("the query string does not parse: {}", rejection.body_text()))
}

/// A JSON body whose rejections answer in the API's error shape.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(JsonBody(value)),
            Err(rejection) => Err(json_rejection(&rejection)),
        }
    }
}

fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let code = match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::BodyTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        _ => ErrorCode::InvalidBody,
    };
    ApiError::new(code, rejection.body_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_defaults_to_twenty_and_accepts_one_to_a_hundred() {
        assert_eq!(Limit::from_query(None).map(Limit::get), Ok(DEFAULT_LIMIT));
        assert_eq!(Limit::from_query(Some("1")).map(Limit::get), Ok(1));
        assert_eq!(Limit::from_query(Some("100")).map(Limit::get), Ok(100));
        assert_eq!(Limit::from_json(None).map(Limit::get), Ok(DEFAULT_LIMIT));
        assert_eq!(Limit::from_json(Some(&serde_json::json!(null))).map(Limit::get), Ok(DEFAULT_LIMIT));
        assert_eq!(Limit::from_json(Some(&serde_json::json!(7))).map(Limit::get), Ok(7));
        assert_eq!(
            Limit::from_json(Some(&serde_json::json!(77.0))).map(Limit::get),
            Ok(77),
            "an integer by JSON Schema"
        );
    }

    #[test]
    fn limit_refuses_everything_else_with_invalid_limit() {
        for bad in ["0", "101", "-1", "", "abc", "1.5", " 5", "99999999999999999999999"] {
            let error = Limit::from_query(Some(bad)).expect_err(bad);
            assert_eq!(error.code(), ErrorCode::InvalidLimit, "{bad}");
        }
        for bad in [
            serde_json::json!(0),
            serde_json::json!(101),
            serde_json::json!(-3),
            serde_json::json!(2.5),
            serde_json::json!(101.0),
            serde_json::json!(0.0),
        ] {
            let error = Limit::from_json(Some(&bad)).expect_err("bad limit");
            assert_eq!(error.code(), ErrorCode::InvalidLimit, "{bad}");
        }
        let error = Limit::from_json(Some(&serde_json::json!("x".repeat(10_000)))).expect_err("string limit");
        assert!(error.to_string().len() < 200);
    }
}
