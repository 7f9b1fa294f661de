//! The `/v1` reads frontends call: comments with opaque cursors (a product's
//! filterable by star and orderable by rating), a product's ranked comments
//! with their rank and score, its review summary, and the summaries of a
//! listing page's products in one call.

use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use common::keys;
use common::store::stars::StarList;
use common::store::IndexKind;

use super::{answer_kept, page_answer, prepared_answer, ranked_answer, Unavailable};
use crate::encoding::AcceptedCodings;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{
    CommentOrder, IncludeQuery, PageQuery, ProductId, ProductPageQuery, RankedQuery, RawIncludeQuery, RawPageQuery,
    RawProductPageQuery, RawRankedQuery, RawSummariesQuery, ReviewId, SummariesQuery, UserId,
};
use crate::last_good::PageRead;
use crate::pages;
use crate::ranking_reads;
use crate::state::AppState;
use crate::views::{render, render_error, CommentView, CommentsPage, RankedPage, ReviewSummaryView, SummariesPage};

/// A product's comments, newest first, page by page; or only those of some
/// stars (`rating`), or by star (`sort`).
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments",
    tag = "v1",
    params(ProductId, RawProductPageQuery),
    responses(
        (status = 200, description = "A page of comments, newest first (or in the order asked for). A filtered or \
                                      rating-ordered page examines at most the service's row budget \
                                      (`--star-budget-rows`, 10,000 by default: every index row passed over \
                                      counts, matching or not), so it may hold fewer than `limit` comments while \
                                      `nextCursor` is set.",
         body = CommentsPage),
        (status = 400, description = "Bad id, limit, cursor, rating, sort or include.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_product_comments(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
    query: ProductPageQuery,
) -> Result<Response, ApiError> {
    let ProductPageQuery { page: PageQuery { limit, cursor, include_author: authors }, stars, order } = query;
    let limit = limit.get();
    let list = (stars.is_some() || order != CommentOrder::Newest).then_some(StarList { stars, order });
    let read = PageRead::ProductPage { product, list, cursor: cursor.as_deref().map(Box::from), limit, authors };
    answer_kept(&state, read, accepted, async {
        let read_at = Instant::now();
        let cursor = cursor.as_deref();
        let page = match list {
            Some(list) => pages::star_list_page(&state, &product, list, cursor, limit, authors).await?,
            None => {
                let prefix = keys::product_comment_prefix(&product);
                pages::v1_page(&state, IndexKind::Product, prefix, cursor, limit, authors).await?
            }
        };
        Ok(page_answer(render(&page)?, read_at))
    })
    .await
}

/// A user's own comments, newest first, page by page.
#[utoipa::path(
    get,
    path = "/v1/users/{userId}/comments",
    tag = "v1",
    params(UserId, RawPageQuery),
    responses(
        (status = 200, description = "A page of comments, newest first.", body = CommentsPage),
        (status = 400, description = "Bad id, limit, cursor or include.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_user_comments(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    UserId(user): UserId,
    query: PageQuery,
) -> Result<Response, ApiError> {
    let PageQuery { limit, cursor, include_author: authors } = query;
    let limit = limit.get();
    let read = PageRead::UserPage { user, cursor: cursor.as_deref().map(Box::from), limit, authors };
    answer_kept(&state, read, accepted, async {
        let read_at = Instant::now();
        let prefix = keys::user_comment_prefix(&user);
        let page = pages::v1_page(&state, IndexKind::User, prefix, cursor.as_deref(), limit, authors).await?;
        Ok(page_answer(render(&page)?, read_at))
    })
    .await
}

/// One review, by the `id` a `/v1` answer gave it: a frontend's permalink.
#[utoipa::path(
    get,
    path = "/v1/reviews/{reviewId}",
    tag = "v1",
    params(ReviewId, RawIncludeQuery),
    responses(
        (status = 200, description = "The review.", body = CommentView),
        (status = 400, description = "Bad review id or include.", body = ErrorBody),
        (status = 404, description = "No review has this id (`no_review`): it was never written, or it was deleted.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_review(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ReviewId(key): ReviewId,
    query: IncludeQuery,
) -> Result<Response, ApiError> {
    // An id that names no comment key names no review: nothing to read.
    let Some(review) = key else {
        return Err(no_review());
    };
    let authors = query.include_author;
    answer_kept(&state, PageRead::Review { review, authors }, accepted, async {
        let read_at = Instant::now();
        let view = pages::review(&state, review, authors).await?.ok_or_else(no_review)?;
        Ok(page_answer(render(&view)?, read_at))
    })
    .await
}

/// The answer for a review id that names no review.
fn no_review() -> ApiError {
    ApiError::new(ErrorCode::NoReview, "no review has this id")
}

/// A product's best comments, rank 1 first, with their rank and score.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments/ranked",
    tag = "v1",
    params(ProductId, RawRankedQuery),
    responses(
        (status = 200, description = "The ranked comments, best first.", body = RankedPage),
        (status = 400, description = "Bad id, limit or include.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_ranked_comments(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
    query: RankedQuery,
) -> Result<Response, ApiError> {
    let limit = query.limit.get();
    let read = PageRead::Ranked { product, limit, authors: query.include_author };
    answer_kept(&state, read, accepted, async {
        let ranking = ranking_reads::ranking(&state, product).await?;
        // The answer is as old as the ranking it shows, however recently its authors were read.
        if query.include_author {
            // Boxed: its reads of HBase make a future kilobytes large, which
            // every cached read would otherwise carry and copy.
            let prepared = Box::pin(pages::ranked_with_authors(&state, product, &ranking, limit)).await?;
            return Ok(prepared_answer(&state, prepared, ranking.read_at()));
        }
        Ok(prepared_answer(&state, ranking.v1_body(limit).map_err(render_error)?, ranking.read_at()))
    })
    .await
}

/// A product's review summary: its reviews counted, per star, unrated, the
/// average and those with photos: as the last ranking run counted them, plus
/// the reviews written after its as-of time, counted at read time.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments/summary",
    tag = "v1",
    params(ProductId),
    responses(
        (status = 200, description = "The product's review summary.", body = ReviewSummaryView),
        (status = 400, description = "Bad id.", body = ErrorBody),
        (status = 404, description = "The product has no review: no run has counted one and none is listed (`no_summary`).", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_review_summary(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
) -> Result<Response, ApiError> {
    answer_kept(&state, PageRead::Summary { product }, accepted, async {
        let ranking = ranking_reads::ranking(&state, product).await?;
        let Some(body) = ranking.summary_body() else {
            return Err(ApiError::new(ErrorCode::NoSummary, format!("product {product} has no review to summarise")));
        };
        Ok(prepared_answer(&state, body.map_err(render_error)?, ranking.read_at()))
    })
    .await
}

/// The review summaries of up to 100 products, in the order asked: what a
/// listing page shows under each product, in one call.
#[utoipa::path(
    get,
    path = "/v1/summaries",
    tag = "v1",
    params(RawSummariesQuery),
    responses(
        (status = 200, description = "One entry per product asked, in that order: its summary, or `null` when the \
                                      product has no review.", body = SummariesPage),
        (status = 400, description = "productIds missing, with a bad id, or naming more than 100 products.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_summaries(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    SummariesQuery(products): SummariesQuery,
) -> Result<Response, ApiError> {
    let read = PageRead::Summaries { products: products.clone().into() };
    answer_kept(&state, read, accepted, async {
        // As old as the oldest cached summary it shows.
        let (summaries, read_at) = ranking_reads::listing_summaries(&state, &products).await?;
        Ok(ranked_answer(&state, render(&SummariesPage { summaries })?, read_at))
    })
    .await
}
