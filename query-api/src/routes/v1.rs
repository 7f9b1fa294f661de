//! The `/v1` reads frontends call: comments with opaque cursors, a product's
//! ranked comments with their rank and score, and its review summary.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use common::keys;
use common::store::IndexKind;

use super::{ranked_response, read_page, render_error, Unavailable};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{LimitQuery, PageQuery, ProductId, RawLimitQuery, RawPageQuery, UserId};
use crate::state::AppState;
use crate::views::{CommentsPage, RankedPage, ReviewSummaryView};

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
    params(ProductId, RawPageQuery),
    responses(
        (status = 200, description = "A page of comments, newest first.", body = CommentsPage),
        (status = 400, description = "Bad id, limit or cursor.", body = ErrorBody),
        Unavailable,
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
    params(UserId, RawPageQuery),
    responses(
        (status = 200, description = "A page of comments, newest first.", body = CommentsPage),
        (status = 400, description = "Bad id, limit or cursor.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_user_comments(
    State(state): State<AppState>,
    UserId(user): UserId,
    query: PageQuery,
) -> Result<Json<CommentsPage>, ApiError> {
    v1_page(&state, IndexKind::User, keys::user_comment_prefix(&user), query).await
}

/// A product's best comments, rank 1 first, with their rank and score.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments/ranked",
    tag = "v1",
    params(ProductId, RawLimitQuery),
    responses(
        (status = 200, description = "The ranked comments, best first.", body = RankedPage),
        (status = 400, description = "Bad id or limit.", body = ErrorBody),
        Unavailable,
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

/// A product's review summary: its reviews counted, per star, unrated, the
/// average and those with photos, as the last ranking run counted them.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments/summary",
    tag = "v1",
    params(ProductId),
    responses(
        (status = 200, description = "The product's review summary.", body = ReviewSummaryView),
        (status = 400, description = "Bad id.", body = ErrorBody),
        (status = 404, description = "No ranking run has counted this product yet (`no_summary`).", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_review_summary(
    State(state): State<AppState>,
    ProductId(product): ProductId,
) -> Result<Response, ApiError> {
    let ranking = state.ranking(product).await?;
    let Some(body) = ranking.summary_body() else {
        return Err(ApiError::new(
            ErrorCode::NoSummary,
            format!("no ranking run has counted the reviews of product {product} yet"),
        ));
    };
    Ok(ranked_response(&state, body.map_err(render_error)?))
}
