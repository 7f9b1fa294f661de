//! The handlers: the `/v1` reads, the seed-compatible reads, and the
//! operational endpoints.
//!
//! Every page read is one index scan (one row more than asked, whose key says
//! where the next page starts) followed by one multi-get of the comments it
//! names, whatever the page size. Ranked reads are one scan of the rank slots
//! and one multi-get, served from the cache when it holds them.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use common::keys;
use common::model::Comment;
use common::store::{IndexKind, IndexPage};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{JsonBody, LimitQuery, PageQuery, ProductId, UserId};
use crate::state::AppState;
use crate::views::{CommentsPage, RankedPage, SeedCommentsPage, SeedPageRequest, Status};

/// Standard base64 as Jackson writes `byte[]`, accepting input with or without
/// the trailing `=` padding (clients that strip it are common).
const SEED_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The longest `startIndexKey` accepted, in base64 characters; the longest index
/// key (43 bytes) takes 60. Anything longer is refused before decoding.
const MAX_START_INDEX_KEY_CHARS: usize = 128;

/// Reads one page of an index and, in one multi-get, the comments it names.
async fn read_page(
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

/// A `/v1` page: the cursor must lie inside `prefix`.
async fn v1_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    query: PageQuery,
) -> Result<Json<CommentsPage>, ApiError> {
    let start = query.cursor.as_deref().map(|cursor| common::cursor::decode(cursor, &prefix)).transpose()?;
    let (page, comments) = read_page(state, kind, prefix, start, query.limit.get()).await?;
    Ok(Json(CommentsPage { comments, next_cursor: page.next.as_deref().map(common::cursor::encode) }))
}

/// A product's comments, newest first, page by page.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments",
    tag = "v1",
    params(
        ("productId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "PRODUCT001"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20).", minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page; absent for the first page."),
    ),
    responses(
        (status = 200, description = "A page of comments, newest first.", body = CommentsPage),
        (status = 400, description = "Bad id, limit or cursor.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn v1_product_comments(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    query: PageQuery,
) -> Result<Json<CommentsPage>, ApiError> {
    v1_page(&state, IndexKind::Product, keys::product_comment_prefix(&product), query).await
}

/// A user's own comments, newest first, page by page.
#[utoipa::path(
    get,
    path = "/v1/users/{userId}/comments",
    tag = "v1",
    params(
        ("userId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "USER000001"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20).", minimum = 1, maximum = 100),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page; absent for the first page."),
    ),
    responses(
        (status = 200, description = "A page of comments, newest first.", body = CommentsPage),
        (status = 400, description = "Bad id, limit or cursor.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn v1_user_comments(
    State(state): State<AppState>,
    UserId(user): UserId,
    query: PageQuery,
) -> Result<Json<CommentsPage>, ApiError> {
    v1_page(&state, IndexKind::User, keys::user_comment_prefix(&user), query).await
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
fn ranked_response(state: &AppState, body: Bytes) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, ranked_cache_control(state)),
    ];
    (headers, body).into_response()
}

fn render_error(error: serde_json::Error) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("cannot render a ranking: {error}"))
}

/// A product's best comments, rank 1 first, with their rank and score.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments/ranked",
    tag = "v1",
    params(
        ("productId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "PRODUCT001"),
        ("limit" = Option<u32>, Query, description = "Most comments to return, 1 to 100 (default 20; at most 10 are ranked).", minimum = 1, maximum = 100),
    ),
    responses(
        (status = 200, description = "The ranked comments, best first.", body = RankedPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn v1_ranked_comments(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    let ranking = state.ranking(product).await?;
    let body = ranking.v1_body(limit.get()).map_err(render_error)?;
    Ok(ranked_response(&state, body))
}

/// Seed: the newest page of a product's comments.
#[utoipa::path(
    get,
    path = "/product/{productId}/comments/latest",
    tag = "seed",
    params(
        ("productId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "PRODUCT001"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20).", minimum = 1, maximum = 100),
    ),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn seed_product_latest(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    seed_page(&state, IndexKind::Product, keys::product_comment_prefix(&product), None, limit.get()).await
}

/// Seed: the newest page of a user's comments.
#[utoipa::path(
    get,
    path = "/user/{userId}/comments/latest",
    tag = "seed",
    params(
        ("userId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "USER000001"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 100 (default 20).", minimum = 1, maximum = 100),
    ),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn seed_user_latest(
    State(state): State<AppState>,
    UserId(user): UserId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    seed_page(&state, IndexKind::User, keys::user_comment_prefix(&user), None, limit.get()).await
}

/// Seed: the next page of a product's comments, from the previous page's `nextIndexKey`.
///
/// The product is the one the key names (its first 11 bytes: product id and
/// `c`), and the scan stops at the end of that product's rows, where the seed's
/// own version scanned on into the next product's.
#[utoipa::path(
    post,
    path = "/product/comments/get",
    tag = "seed",
    request_body = SeedPageRequest,
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad body, limit or startIndexKey.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn seed_product_next(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<SeedPageRequest>,
) -> Result<Response, ApiError> {
    let limit = crate::extract::Limit::from_json(request.limit.as_ref())?;
    let start = decode_start_index_key(request.start_index_key.as_deref())?;
    let prefix = seed_start_prefix(&start, SeedIndex::Product)?;
    seed_page(&state, IndexKind::Product, prefix, Some(start), limit.get()).await
}

/// Seed: the next page of a user's comments, from the previous page's `nextIndexKey`.
///
/// The user is the one the key names (its first 10 bytes), and the scan stops
/// at the end of that user's rows.
#[utoipa::path(
    post,
    path = "/user/comments/get",
    tag = "seed",
    request_body = SeedPageRequest,
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad body, limit or startIndexKey.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn seed_user_next(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<SeedPageRequest>,
) -> Result<Response, ApiError> {
    let limit = crate::extract::Limit::from_json(request.limit.as_ref())?;
    let start = decode_start_index_key(request.start_index_key.as_deref())?;
    let prefix = seed_start_prefix(&start, SeedIndex::User)?;
    seed_page(&state, IndexKind::User, prefix, Some(start), limit.get()).await
}

/// Seed: a product's ranked comments, rank 1 first.
#[utoipa::path(
    get,
    path = "/product/{productId}/comments/ranked",
    tag = "seed",
    params(
        ("productId" = String, Path, description = "Ten bytes of printable ASCII other than `/`, URL-encoded where needed (new ids are letters and digits).", example = "PRODUCT001"),
        ("limit" = Option<u32>, Query, description = "Most comments to return, 1 to 100 (default 20; at most 10 are ranked).", minimum = 1, maximum = 100),
    ),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse; `nextIndexKey` is always null.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody),
    )
)]
pub async fn seed_ranked(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    let ranking = state.ranking(product).await?;
    let body = ranking.seed_body(limit.get()).map_err(render_error)?;
    Ok(ranked_response(&state, body))
}

async fn seed_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    start: Option<Vec<u8>>,
    limit: usize,
) -> Result<Response, ApiError> {
    let (page, comments) = read_page(state, kind, prefix, start, limit).await?;
    Ok(Json(SeedCommentsPage::new(&comments, page.next.as_deref())).into_response())
}

/// Decodes a seed `startIndexKey` (standard base64).
fn decode_start_index_key(text: Option<&str>) -> Result<Vec<u8>, ApiError> {
    let Some(text) = text else {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            "startIndexKey is required (the previous page's nextIndexKey)",
        ));
    };
    if text.is_empty() || text.len() > MAX_START_INDEX_KEY_CHARS {
        return Err(ApiError::new(ErrorCode::InvalidCursor, "startIndexKey is empty or too long to be an index key"));
    }
    SEED_BASE64
        .decode(text)
        .map_err(|_| ApiError::new(ErrorCode::InvalidCursor, "startIndexKey is not standard base64"))
}

/// Which of the seed's indexes a next-page request reads.
#[derive(Debug, Clone, Copy)]
enum SeedIndex {
    Product,
    User,
}

/// The index prefix a seed start key lies in, taken from the key itself: the id
/// in its first bytes and, for products, the `c` tag after it. The key may be
/// any position inside that prefix (a row that does not decode still marks a
/// valid place to resume). Its length is not checked against the index key
/// layouts: a page's `nextIndexKey` is the key of the next row as stored, and
/// a table may hold rows with keys of unexpected length (skipped when read),
/// so refusing them would stop a client's walk at such a row. The base64 text
/// is bounded by [`MAX_START_INDEX_KEY_CHARS`], as `/v1` cursors are.
fn seed_start_prefix(start: &[u8], index: SeedIndex) -> Result<Vec<u8>, ApiError> {
    let field = match index {
        SeedIndex::Product => "product",
        SeedIndex::User => "user",
    };
    let refuse = |reason: &str| ApiError::new(ErrorCode::InvalidCursor, format!("startIndexKey {reason}"));
    let id =
        keys::leading_id("startIndexKey", start).ok_or_else(|| refuse(&format!("does not start with a {field} id")))?;
    let prefix = match index {
        SeedIndex::Product => keys::product_comment_prefix(&id),
        SeedIndex::User => keys::user_comment_prefix(&id),
    };
    if !start.starts_with(&prefix) {
        return Err(refuse("is not a product comment index key (no 'c' after the product id)"));
    }
    Ok(prefix)
}

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
    responses((status = 200, body = Status), (status = 503, description = "HBase is unavailable (`unavailable`) or busy (`overloaded`); see Retry-After.", body = ErrorBody))
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

/// Any path no route has.
pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {method} {}", uri.path()))
}

/// A known path asked with a method it does not have.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} does not accept {method}", uri.path()))
}

#[cfg(test)]
mod tests {
    use common::Id;

    use super::*;

    #[test]
    fn seed_start_keys_name_their_own_prefix() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let mut key = keys::product_comment_prefix(&product);
        key.extend_from_slice(&[0x7f; 12]);
        assert_eq!(seed_start_prefix(&key, SeedIndex::Product).expect("valid"), keys::product_comment_prefix(&product));

        let user = Id::parse("userId", "USER000001").expect("id");
        let mut key = keys::user_comment_prefix(&user);
        key.extend_from_slice(&[0x7f; 8]);
        assert_eq!(seed_start_prefix(&key, SeedIndex::User).expect("valid"), keys::user_comment_prefix(&user));
        // A stored row's key longer than the layout is still a place to resume from.
        key.extend_from_slice(&[0x7f; 40]);
        assert_eq!(seed_start_prefix(&key, SeedIndex::User).expect("valid"), keys::user_comment_prefix(&user));
    }

    #[test]
    fn seed_start_keys_outside_any_prefix_are_refused() {
        let refused = |key: &[u8], index| {
            let error = seed_start_prefix(key, index).expect_err("refused");
            assert_eq!(error.code(), ErrorCode::InvalidCursor, "{error}");
        };
        refused(b"", SeedIndex::Product);
        refused(b"PRODUCT0", SeedIndex::Product);
        refused(b"PRODUCT001x\x7f\xff", SeedIndex::Product);
        refused(b"PRODUCT00/c\x7f\xff", SeedIndex::Product);
        refused(&[b'A'; 44], SeedIndex::Product);
        refused(b"USER/00001\x7f\xff", SeedIndex::User);
        refused(&[b'A'; 9], SeedIndex::User);
    }

    #[test]
    fn start_index_keys_are_standard_base64_with_or_without_padding() {
        assert_eq!(decode_start_index_key(Some("UFJPRFVDVDAwMWM=")).expect("padded"), b"PRODUCT001c");
        assert_eq!(decode_start_index_key(Some("UFJPRFVDVDAwMWM")).expect("unpadded"), b"PRODUCT001c");
        for bad in ["", "***", "UFJP_FVD", &"A".repeat(500)] {
            let error = decode_start_index_key(Some(bad)).expect_err(bad);
            assert_eq!(error.code(), ErrorCode::InvalidCursor);
        }
        assert_eq!(decode_start_index_key(None).expect_err("missing").code(), ErrorCode::InvalidBody);
    }
}
