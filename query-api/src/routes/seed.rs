//! The routes of the original Java service, answering its JSON exactly: the
//! newest page by path, further pages by the previous page's `nextIndexKey`,
//! and a product's ranked comments.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, State};
use axum::response::Response;
use axum::routing::{post, MethodRouter};
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use common::keys;
use common::store::IndexKind;
use utoipa::openapi::{HttpMethod, OpenApi};
use utoipa::Modify;

use super::answers::Answers;
use super::{answer_kept, json_response, page_answer, prepared_answer, Unavailable};
use crate::encoding::AcceptedCodings;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{JsonBody, LimitQuery, ProductId, RawLimitQuery, UserId};
use crate::last_good::PageRead;
use crate::pages::{self, seed_page};
use crate::ranking_reads;
use crate::state::AppState;
use crate::views::{SeedCommentsPage, SeedPageRequest};

/// Standard base64 as Jackson writes `byte[]`, accepting input with or without
/// the trailing `=` padding (clients that strip it are common).
const SEED_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The longest `startIndexKey` accepted, in base64 characters; the longest index
/// key (43 bytes) takes 60. Anything longer is refused before decoding.
const MAX_START_INDEX_KEY_CHARS: usize = 128;

/// Seed: the newest page of a product's comments.
#[utoipa::path(
    get,
    path = "/product/{productId}/comments/latest",
    tag = "seed",
    params(ProductId, RawLimitQuery),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn seed_product_latest(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    let limit = limit.get();
    answer_kept(&state, PageRead::SeedLatest { product, limit }, accepted, async {
        let read_at = Instant::now();
        let body = seed_page(&state, IndexKind::Product, keys::product_comment_prefix(&product), None, limit).await?;
        Ok(page_answer(body, read_at))
    })
    .await
}

/// Seed: the newest page of a user's comments.
#[utoipa::path(
    get,
    path = "/user/{userId}/comments/latest",
    tag = "seed",
    params(UserId, RawLimitQuery),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn seed_user_latest(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    UserId(user): UserId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    let limit = limit.get();
    answer_kept(&state, PageRead::SeedUserLatest { user, limit }, accepted, async {
        let read_at = Instant::now();
        let body = seed_page(&state, IndexKind::User, keys::user_comment_prefix(&user), None, limit).await?;
        Ok(page_answer(body, read_at))
    })
    .await
}

/// Seed: the next page of a product's or a user's comments, from the previous
/// page's `nextIndexKey`; one handler for both routes, bound to its index by
/// [`next_page_route`]. The annotation documents the product's route;
/// [`NextPageDocs`] documents both from [`SeedIndex`]'s texts.
#[utoipa::path(
    post,
    path = "/product/comments/get",
    tag = "seed",
    operation_id = "seed_product_next",
    request_body = SeedPageRequest,
    responses(
        (status = 200, description = "The seed's GetCommentsResponse.", body = SeedCommentsPage),
        (status = 400, description = "Bad body, limit or startIndexKey.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn seed_next(index: SeedIndex, state: AppState, request: SeedPageRequest) -> Result<Response, ApiError> {
    let limit = crate::extract::Limit::from_json(request.limit.as_ref())?;
    let start = decode_start_index_key(request.start_index_key.as_deref())?;
    let prefix = seed_start_prefix(&start, index)?;
    let kind = match index {
        SeedIndex::Product => IndexKind::Product,
        SeedIndex::User => IndexKind::User,
    };
    seed_page(&state, kind, prefix, Some(start), limit.get()).await.map(json_response)
}

/// The route of `index`'s next page: [`seed_next`] bound to that index.
pub fn next_page_route(index: SeedIndex) -> MethodRouter<AppState> {
    post(move |State(state): State<AppState>, JsonBody(request): JsonBody<SeedPageRequest>| {
        seed_next(index, state, request)
    })
    // The only routes that read a body: the limit is theirs, not a layer every read passes.
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The largest request body accepted; the seed's next-page bodies are well under 1 KiB.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// Completes the OpenAPI document of the next-page routes: the user's route is
/// the product's operation (documented on [`seed_next`]) for the other index,
/// and each operation's summary and description come from [`SeedIndex`].
#[derive(Debug)]
pub struct NextPageDocs;

impl Modify for NextPageDocs {
    fn modify(&self, openapi: &mut OpenApi) {
        let product_path = SeedIndex::Product.next_page_path();
        let Some(operation) = openapi.paths.paths.get(product_path).and_then(|item| item.post.clone()) else {
            return;
        };
        for index in [SeedIndex::Product, SeedIndex::User] {
            let mut operation = operation.clone();
            operation.operation_id = Some(format!("seed_{}_next", index.field()));
            operation.summary = Some(index.next_page_summary().to_owned());
            operation.description = Some(index.next_page_description().to_owned());
            Answers::JSON_BODY.document(&mut operation);
            openapi.paths.add_path_operation(index.next_page_path(), vec![HttpMethod::Post], operation);
        }
    }
}

/// Seed: a product's ranked comments, rank 1 first.
#[utoipa::path(
    get,
    path = "/product/{productId}/comments/ranked",
    tag = "seed",
    params(ProductId, RawLimitQuery),
    responses(
        (status = 200, description = "The seed's GetCommentsResponse; `nextIndexKey` is always null.", body = SeedCommentsPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn seed_ranked(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
    LimitQuery(limit): LimitQuery,
) -> Result<Response, ApiError> {
    let limit = limit.get();
    answer_kept(&state, PageRead::SeedRanked { product, limit }, accepted, async {
        let ranking = ranking_reads::ranking(&state, product).await?;
        let prepared = pages::seed_ranked(&state, product, &ranking, limit)?;
        Ok(prepared_answer(&state, prepared, ranking.read_at()))
    })
    .await
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
pub enum SeedIndex {
    /// A product's comments, `/product/comments/get`.
    Product,
    /// A user's comments, `/user/comments/get`.
    User,
}

impl SeedIndex {
    /// The route of the index's next page.
    pub fn next_page_path(self) -> &'static str {
        match self {
            SeedIndex::Product => "/product/comments/get",
            SeedIndex::User => "/user/comments/get",
        }
    }

    fn field(self) -> &'static str {
        match self {
            SeedIndex::Product => "product",
            SeedIndex::User => "user",
        }
    }

    fn next_page_summary(self) -> &'static str {
        match self {
            SeedIndex::Product => {
                "Seed: the next page of a product's comments, from the previous page's `nextIndexKey`."
            }
            SeedIndex::User => "Seed: the next page of a user's comments, from the previous page's `nextIndexKey`.",
        }
    }

    fn next_page_description(self) -> &'static str {
        match self {
            SeedIndex::Product => {
                "The product is the one the key names (its first 11 bytes: product id and `c`), and the scan \
                 stops at the end of that product's rows, where the seed's own version scanned on into the next product's."
            }
            SeedIndex::User => {
                "The user is the one the key names (its first 10 bytes), and the scan stops at the end of that user's rows."
            }
        }
    }
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
    let field = index.field();
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
