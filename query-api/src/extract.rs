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
use common::keys::CommentKey;
use common::store::stars::StarSet;
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

/// The `{reviewId}` of a route: the comment key it names, from the id `/v1`
/// answers carry; `None` for a well-formed id that names no comment.
#[derive(Debug, Clone, Copy, IntoParams)]
#[into_params(names("reviewId"), parameter_in = Path)]
pub struct ReviewId(
    /// A review's `id`, as a `/v1` answer carries it: 20 bytes in base64url
    /// without padding (so its last character is one of `AEIMQUYcgkosw048`).
    #[param(value_type = String, min_length = 27, max_length = 27, pattern = "^[A-Za-z0-9_-]{26}[AEIMQUYcgkosw048]$", example = "T1JERVIwMDAwMVBST0RVQ1QwMDE")]
    pub Option<CommentKey>,
);

impl<S: Send + Sync> FromRequestParts<S> for ReviewId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state).await.map_err(|rejection| {
            ApiError::new(
                ErrorCode::InvalidId,
                format!("reviewId is not a valid path segment: {}", rejection.body_text()),
            )
        })?;
        CommentKey::from_review_id(&raw).map(ReviewId).map_err(|_| {
            ApiError::new(ErrorCode::InvalidId, format!("reviewId {:?} is not a review id", shorten(&raw)))
        })
    }
}

/// The query parameters of a page request, as sent (validated by
/// [`PageQuery`]); they document the page routes' parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
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
    /// `author` adds each comment's `author` (`{"nickname"}` from the user's
    /// record, `null` when the user has none that reads).
    #[param(value_type = Option<String>)]
    pub include: Option<String>,
}

/// `?limit=&cursor=&include=`, with the limit and include validated. The
/// cursor stays text: only the handler knows which prefix it must lie in.
#[derive(Debug, Clone)]
pub struct PageQuery {
    /// The page size.
    pub limit: Limit,
    /// The opaque cursor of the page to read, absent for the first page.
    pub cursor: Option<String>,
    /// Whether each comment names its author (`include=author`).
    pub include_author: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for PageQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawPageQuery>(parts)?;
        Ok(PageQuery {
            limit: Limit::from_query(raw.limit.as_deref())?,
            cursor: raw.cursor,
            include_author: include_author(raw.include.as_deref())?,
        })
    }
}

/// Reads `include`: absent, or `author`.
fn include_author(include: Option<&str>) -> Result<bool, ApiError> {
    match include {
        None => Ok(false),
        Some("author") => Ok(true),
        Some(other) => {
            Err(ApiError::new(ErrorCode::InvalidQuery, format!("include must be \"author\", got {:?}", shorten(other))))
        }
    }
}

pub use common::store::stars::CommentOrder;

/// Reads `sort`: `newest` (the default), `rating_desc` or `rating_asc`.
fn parse_order(text: Option<&str>) -> Result<CommentOrder, ApiError> {
    match text {
        None | Some("newest") => Ok(CommentOrder::Newest),
        Some("rating_desc") => Ok(CommentOrder::RatingDesc),
        Some("rating_asc") => Ok(CommentOrder::RatingAsc),
        Some(other) => Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("sort must be newest, rating_desc or rating_asc, got {:?}", shorten(other)),
        )),
    }
}

/// The query parameters of a product's comment pages, as sent (validated by
/// [`ProductPageQuery`]).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawProductPageQuery {
    /// Page size, 1 to 100 (default 20). A filtered or rating-ordered page
    /// may hold fewer comments while `nextCursor` is set: each request
    /// examines a bounded number of index rows (the service's budget, 10,000
    /// by default, matching or not), and the next page goes on from there.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page of this same list (base64url, no
    /// padding), asked with the same `rating` and `sort`; absent for the first
    /// page. Any other value, however well formed, answers 400 `invalid_cursor`.
    #[param(min_length = 2, max_length = 128, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Only the comments of these stars: one of 1 to 5, or several
    /// comma-separated (`4,5`). A comment's star is its `rating` when that is
    /// an integer from 1 to 5 (`5.0` and `"5"` count as 5); unrated comments
    /// match no star. The same rule counts the summary's `ratings`.
    #[param(value_type = Option<String>)]
    pub rating: Option<String>,
    /// `newest` (default), `rating_desc` or `rating_asc`: by star, newest
    /// first within a star, unrated comments last in both.
    #[param(value_type = Option<String>)]
    pub sort: Option<String>,
    /// `author` adds each comment's `author` (`{"nickname"}` from the user's
    /// record, `null` when the user has none that reads).
    #[param(value_type = Option<String>)]
    pub include: Option<String>,
}

/// A product's comment page request: the page, the star filter and the order.
#[derive(Debug, Clone)]
pub struct ProductPageQuery {
    /// The page, the cursor and `include`.
    pub page: PageQuery,
    /// The stars asked for (`rating=`), `None` for every comment.
    pub stars: Option<StarSet>,
    /// The order asked for.
    pub order: CommentOrder,
}

impl<S: Send + Sync> FromRequestParts<S> for ProductPageQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawProductPageQuery>(parts)?;
        Ok(ProductPageQuery {
            page: PageQuery {
                limit: Limit::from_query(raw.limit.as_deref())?,
                cursor: raw.cursor,
                include_author: include_author(raw.include.as_deref())?,
            },
            stars: raw.rating.as_deref().map(parse_stars).transpose()?,
            order: parse_order(raw.sort.as_deref())?,
        })
    }
}

/// Reads `rating`: stars 1 to 5, comma-separated (repeats allowed).
fn parse_stars(text: &str) -> Result<StarSet, ApiError> {
    let stars: Option<Vec<u8>> = text
        .split(',')
        .map(|part| match part.as_bytes() {
            [digit @ b'1'..=b'5'] => Some(digit - b'0'),
            _ => None,
        })
        .collect();
    stars.map(StarSet::of).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidQuery,
            format!("rating must be stars from 1 to 5, comma-separated, got {:?}", shorten(text)),
        )
    })
}

/// The query parameters of a ranked read, as sent (validated by [`RankedQuery`]).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawRankedQuery {
    /// Page size, 1 to 100 (default 20); ranked reads return at most the 10 ranked comments.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// `author` adds each comment's `author` (`{"nickname"}` from the user's
    /// record, `null` when the user has none that reads).
    #[param(value_type = Option<String>)]
    pub include: Option<String>,
}

/// `?limit=&include=` of a ranked read, validated.
#[derive(Debug, Clone, Copy)]
pub struct RankedQuery {
    /// The most comments shown.
    pub limit: Limit,
    /// Whether each comment names its author.
    pub include_author: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for RankedQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawRankedQuery>(parts)?;
        Ok(RankedQuery {
            limit: Limit::from_query(raw.limit.as_deref())?,
            include_author: include_author(raw.include.as_deref())?,
        })
    }
}

/// The query parameters of a one-review read, as sent (validated by [`IncludeQuery`]).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawIncludeQuery {
    /// `author` adds the comment's `author` (`{"nickname"}` from the user's
    /// record, `null` when the user has none that reads).
    #[param(value_type = Option<String>)]
    pub include: Option<String>,
}

/// `?include=` alone, validated: whether the answer names the author.
#[derive(Debug, Clone, Copy)]
pub struct IncludeQuery {
    /// Whether the comment names its author.
    pub include_author: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for IncludeQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawIncludeQuery>(parts)?;
        Ok(IncludeQuery { include_author: include_author(raw.include.as_deref())? })
    }
}

/// The longest product name a server-rendered widget takes for its JSON-LD.
pub const MAX_PRODUCT_NAME_CHARS: usize = 200;

/// The query parameters of a server-rendered widget, as sent (validated by [`WidgetQuery`]).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawWidgetQuery {
    /// The language shown: `ko` (and its regions) in Korean, anything else in English (default `en`).
    #[param(value_type = Option<String>, max_length = 35, pattern = "^[A-Za-z0-9-]*$", example = "ko")]
    pub lang: Option<String>,
    /// Ranked reviews shown, 1 to 100 (default 10; a ranking holds at most 10).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// The product's name as the shop's page shows it, for the schema.org
    /// `Product` JSON-LD (which needs one); without it, no JSON-LD.
    #[param(value_type = Option<String>, min_length = 1, max_length = 200, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", example = "Electric kettle 1.7 l")]
    pub name: Option<String>,
}

/// `?lang=&limit=&name=` of a server-rendered widget, validated.
#[derive(Debug, Clone)]
pub struct WidgetQuery {
    /// The language tag asked for (`None`: English).
    pub lang: Option<String>,
    /// Ranked reviews shown.
    pub limit: Limit,
    /// The product's name, for its JSON-LD.
    pub name: Option<String>,
}

/// The ranked reviews a server-rendered widget shows unless asked otherwise: the whole ranking.
const DEFAULT_WIDGET_LIMIT: &str = "10";

impl<S: Send + Sync> FromRequestParts<S> for WidgetQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawWidgetQuery>(parts)?;
        if let Some(name) = &raw.name {
            let chars = name.chars().count();
            if chars == 0 || chars > MAX_PRODUCT_NAME_CHARS || name.chars().any(char::is_control) {
                return Err(ApiError::new(
                    ErrorCode::InvalidQuery,
                    format!("name must be 1 to {MAX_PRODUCT_NAME_CHARS} characters without control characters"),
                ));
            }
        }
        if raw
            .lang
            .as_ref()
            .is_some_and(|lang| lang.len() > 35 || !lang.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("lang must be a language tag, got {:?}", shorten(raw.lang.as_deref().unwrap_or_default())),
            ));
        }
        Ok(WidgetQuery {
            lang: raw.lang,
            limit: Limit::from_query(Some(raw.limit.as_deref().unwrap_or(DEFAULT_WIDGET_LIMIT)))?,
            name: raw.name,
        })
    }
}

/// The most products one `/v1/summaries` request may name.
pub const MAX_SUMMARY_PRODUCTS: usize = 100;

/// The query parameters of `/v1/summaries`, as sent (validated by [`SummariesQuery`]).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RawSummariesQuery {
    /// 1 to 100 product ids, comma-separated (repeats allowed; each answered
    /// in its place): each ten bytes of printable ASCII other than `/` and
    /// `,` (an id holding a comma cannot be asked here).
    #[serde(rename = "productIds")]
    #[param(
        rename = "productIds",
        required = true,
        value_type = String
    )]
    pub product_ids: Option<String>,
}

/// The products of a `/v1/summaries` request, validated, in the order asked.
#[derive(Debug, Clone)]
pub struct SummariesQuery(pub Vec<Id>);

impl<S: Send + Sync> FromRequestParts<S> for SummariesQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawSummariesQuery>(parts)?;
        let Some(text) = raw.product_ids else {
            return Err(ApiError::new(ErrorCode::InvalidQuery, "productIds is required"));
        };
        let ids: Vec<&str> = text.split(',').collect();
        if ids.len() > MAX_SUMMARY_PRODUCTS {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("productIds names {} products; at most {MAX_SUMMARY_PRODUCTS} are allowed", ids.len()),
            ));
        }
        let products = ids.into_iter().map(|id| Id::parse("productIds", id)).collect::<Result<Vec<Id>, _>>()?;
        Ok(SummariesQuery(products))
    }
}

/// The query parameters of a one-page read, as sent (validated by
/// [`LimitQuery`]); they document those routes' parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
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

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = raw_query::<RawLimitQuery>(parts)?;
        Ok(LimitQuery(Limit::from_query(raw.limit.as_deref())?))
    }
}

/// The query string of `parts` as `Raw`, a string that does not parse
/// answered 400 `invalid_query`. A request without one (most first pages and
/// ranked reads) gets `Raw::default()`, what deserializing nothing gives
/// (every field of a `Raw*Query` is optional), without the deserializer's work.
fn raw_query<Raw: DeserializeOwned + Default>(parts: &Parts) -> Result<Raw, ApiError> {
    match parts.uri.query() {
        None | Some("") => Ok(Raw::default()),
        Some(_) => Query::try_from_uri(&parts.uri).map(|Query(raw)| raw).map_err(query_rejection),
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
    fn rating_takes_stars_one_to_five_comma_separated_and_nothing_else() {
        assert_eq!(parse_stars("1").map(StarSet::bits), Ok(StarSet::of([1]).bits()));
        assert_eq!(parse_stars("4,5,4").map(StarSet::bits), Ok(StarSet::of([4, 5]).bits()));
        for bad in ["", "0", "6", "1,", ",1", "1,,2", "a", "12", " 1", "1;2", "-1"] {
            assert_eq!(parse_stars(bad).expect_err(bad).code(), ErrorCode::InvalidQuery, "{bad}");
        }
        assert_eq!(parse_order(None), Ok(CommentOrder::Newest));
        assert_eq!(parse_order(Some("rating_asc")), Ok(CommentOrder::RatingAsc));
        assert!(parse_order(Some("stars")).is_err());
        assert_eq!(include_author(Some("author")), Ok(true));
        assert!(include_author(Some("authors")).is_err());
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

    /// The request parts of `uri`.
    fn parts(uri: &str) -> Parts {
        Request::get(uri).body(()).expect("a request").into_parts().0
    }

    #[test]
    fn a_query_string_absent_or_empty_reads_as_nothing_asked_and_one_that_does_not_parse_is_invalid() {
        for uri in ["/page", "/page?"] {
            let raw = raw_query::<RawPageQuery>(&parts(uri)).expect(uri);
            assert_eq!((raw.limit, raw.cursor, raw.include), (None, None, None), "{uri}");
        }
        let raw = raw_query::<RawPageQuery>(&parts("/page?limit=5&include=author")).expect("parses");
        assert_eq!((raw.limit.as_deref(), raw.cursor, raw.include.as_deref()), (Some("5"), None, Some("author")));
        let error = raw_query::<RawPageQuery>(&parts("/page?limit=5&limit=6")).expect_err("a field twice");
        assert_eq!(error.code(), ErrorCode::InvalidQuery);
    }
}
