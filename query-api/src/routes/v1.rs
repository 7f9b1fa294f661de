//! The `/v1` reads frontends call: comments with opaque cursors (a product's
//! filterable by star and orderable by rating), a product's ranked comments
//! with their rank and score, its review summary, and the summaries of a
//! listing page's products in one call.

use std::collections::HashMap;
use std::time::Instant;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::cursor::{self, ViewPosition};
use common::keys;
use common::model::Comment;
use common::store::stars::StarSet;
use common::store::IndexKind;
use common::Id;

use super::{answer_kept, ranked_answer, read_page, render, render_error, Unavailable};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{
    CommentOrder, PageQuery, ProductId, ProductPageQuery, RankedQuery, RawPageQuery, RawProductPageQuery,
    RawRankedQuery, RawSummariesQuery, SummariesQuery, UserId,
};
use crate::last_good::{Answer, PageRead};
use crate::state::AppState;
use crate::views::{Author, CommentView, CommentsPage, RankedPage, ReviewSummaryView, SummariesPage};

/// A `/v1` page: the cursor must lie inside `prefix`.
async fn v1_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    query: PageQuery,
) -> Result<Json<CommentsPage>, ApiError> {
    let start = query.cursor.as_deref().map(|cursor| cursor::decode(cursor, &prefix)).transpose()?;
    let (page, comments) = read_page(state, kind, prefix, start, query.limit.get()).await?;
    let next_cursor = page.next.as_deref().map(cursor::encode);
    comments_page(state, comments, next_cursor, query.include_author).await
}

/// The answer holding `comments`, with their authors when asked for.
async fn comments_page(
    state: &AppState,
    comments: Vec<Comment>,
    next_cursor: Option<String>,
    include_author: bool,
) -> Result<Json<CommentsPage>, ApiError> {
    let comments = if include_author {
        let authors = authors_of(state, comments.iter().map(|comment| comment.user_id)).await?;
        comments
            .into_iter()
            .map(|comment| {
                let author = authors.get(&comment.user_id).cloned().flatten();
                CommentView { comment, author: Some(author) }
            })
            .collect()
    } else {
        comments.into_iter().map(CommentView::plain).collect()
    };
    Ok(Json(CommentsPage { comments, next_cursor }))
}

/// The authors of `users`, by id, in one multi-get of the `user` table: `None`
/// for a user whose record is missing or does not decode (skipped and counted).
pub(crate) async fn authors_of(
    state: &AppState,
    users: impl IntoIterator<Item = Id>,
) -> Result<HashMap<Id, Option<Author>>, ApiError> {
    let mut ids: Vec<Id> = users.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let users = state.store().users(&ids).await?;
    Ok(ids.into_iter().zip(users).map(|(id, user)| (id, user.map(|user| Author { nickname: user.nickname }))).collect())
}

/// The passes of a filtered or rating-ordered list of a product's comments:
/// each pass walks the product's index newest first keeping one set of stars.
/// A star filter in newest order is one pass; a rating order is one pass per
/// star, best (or worst) first, then the unrated comments when no filter
/// excludes them.
fn passes(stars: Option<StarSet>, order: CommentOrder) -> Vec<StarSet> {
    let asked = |star: &u8| stars.is_none_or(|stars| stars.contains(*star));
    match order {
        CommentOrder::Newest => vec![stars.unwrap_or(StarSet::ALL)],
        CommentOrder::RatingDesc => {
            [5, 4, 3, 2, 1, 0].iter().filter(|star| asked(star)).map(|star| StarSet::of([*star])).collect()
        }
        CommentOrder::RatingAsc => {
            [1, 2, 3, 4, 5, 0].iter().filter(|star| asked(star)).map(|star| StarSet::of([*star])).collect()
        }
    }
}

/// The two bytes a filtered list's cursor carries to name its filter and
/// order, so it is refused by any other list.
fn view_bytes(stars: Option<StarSet>, order: CommentOrder) -> [u8; 2] {
    let order = match order {
        CommentOrder::Newest => 0,
        CommentOrder::RatingDesc => 1,
        CommentOrder::RatingAsc => 2,
    };
    [stars.map_or(0, StarSet::bits), order]
}

/// A page of a product's comments filtered by star or ordered by rating:
/// the list's passes in turn, from the cursor's, until the page is full or
/// the request's budget of index rows is spent.
async fn star_list_page(
    state: &AppState,
    product: &Id,
    query: &ProductPageQuery,
) -> Result<(Vec<Comment>, Option<String>), ApiError> {
    let prefix = keys::product_comment_prefix(product);
    let view = view_bytes(query.stars, query.order);
    let passes = passes(query.stars, query.order);
    let mut position = match &query.page.cursor {
        Some(text) => cursor::decode_view(text, view, &prefix)?,
        None => ViewPosition { phase: 0, key: None },
    };
    if usize::from(position.phase) >= passes.len() {
        return Err(cursor::CursorError::OutsidePrefix.into());
    }
    let limit = query.page.limit.get();
    let mut budget = state.settings().star_budget_rows;
    let mut comments = Vec::with_capacity(limit);
    loop {
        let stars = passes[usize::from(position.phase)];
        let wanted = limit - comments.len();
        let page = state.store().star_page(product, stars, position.key.take(), wanted, budget).await?;
        budget = budget.saturating_sub(page.rows_read);
        comments.extend(page.comments);
        match page.next {
            Some(next) => position.key = Some(next),
            None if usize::from(position.phase) + 1 == passes.len() => return Ok((comments, None)),
            None => position = ViewPosition { phase: position.phase + 1, key: None },
        }
        if comments.len() >= limit || budget == 0 {
            return Ok((comments, Some(cursor::encode_view(view, &position))));
        }
    }
}

/// A product's comments, newest first, page by page; or only those of some
/// stars (`rating`), or by star (`sort`).
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/comments",
    tag = "v1",
    params(ProductId, RawProductPageQuery),
    responses(
        (status = 200, description = "A page of comments, newest first (or in the order asked for). A filtered or \
                                      rating-ordered page may hold fewer than `limit` comments while `nextCursor` \
                                      is set. When HBase fails, a first page (no cursor, filter or order) that \
                                      was served before is answered again, stale, with `Age`.", body = CommentsPage,
         headers(("Age" = u64, description = "Only on a stale answer: seconds since the read behind it."))),
        (status = 400, description = "Bad id, limit, cursor, rating, sort or include.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_product_comments(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    query: ProductPageQuery,
) -> Result<Response, ApiError> {
    let prefix = keys::product_comment_prefix(&product);
    if query.stars.is_some() || query.order != CommentOrder::Newest {
        let (comments, next_cursor) = star_list_page(&state, &product, &query).await?;
        return Ok(comments_page(&state, comments, next_cursor, query.page.include_author).await?.into_response());
    }
    if query.page.cursor.is_some() {
        return Ok(v1_page(&state, IndexKind::Product, prefix, query.page).await?.into_response());
    }
    // The first page a product page shows: kept, to be served stale when HBase fails.
    let read = PageRead::Latest { product, limit: query.page.limit.get(), authors: query.page.include_author };
    answer_kept(&state, read, async {
        let read_at = Instant::now();
        let Json(page) = v1_page(&state, IndexKind::Product, prefix, query.page).await?;
        Ok(Answer { body: render(&page)?, cache_control: None, read_at })
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
    params(ProductId, RawRankedQuery),
    responses(
        (status = 200, description = "The ranked comments, best first; when HBase fails, the last good answer, \
                                      stale, with `Age`.", body = RankedPage,
         headers(("Age" = u64, description = "Only on a stale answer: seconds since the read behind it."))),
        (status = 400, description = "Bad id, limit or include.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_ranked_comments(
    State(state): State<AppState>,
    ProductId(product): ProductId,
    query: RankedQuery,
) -> Result<Response, ApiError> {
    let limit = query.limit.get();
    let read = PageRead::Ranked { product, limit, authors: query.include_author };
    answer_kept(&state, read, async {
        let read_at = Instant::now();
        let ranking = state.ranking(product).await?;
        if !query.include_author {
            let body = ranking.v1_body(limit).map_err(render_error)?;
            return Ok(ranked_answer(&state, body, ranking.read_at()));
        }
        let shown = &ranking.comments()[..limit.min(ranking.comments().len())];
        let authors = authors_of(&state, shown.iter().map(|ranked| ranked.comment.user_id)).await?;
        let with_authors: Vec<_> = shown
            .iter()
            .map(|ranked| {
                let mut ranked = ranked.clone();
                ranked.author = Some(authors.get(&ranked.comment.user_id).cloned().flatten());
                ranked
            })
            .collect();
        let body = render(&RankedPage::of(&with_authors, ranking.summary()))?;
        Ok(ranked_answer(&state, body, read_at))
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
        (status = 200, description = "The product's review summary; when HBase fails, the last good answer, \
                                      stale, with `Age`.", body = ReviewSummaryView,
         headers(("Age" = u64, description = "Only on a stale answer: seconds since the read behind it."))),
        (status = 400, description = "Bad id.", body = ErrorBody),
        (status = 404, description = "The product has no review: no run has counted one and none is listed (`no_summary`).", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_review_summary(
    State(state): State<AppState>,
    ProductId(product): ProductId,
) -> Result<Response, ApiError> {
    answer_kept(&state, PageRead::Summary { product }, async {
        let ranking = state.ranking(product).await?;
        let Some(body) = ranking.summary_body() else {
            return Err(ApiError::new(ErrorCode::NoSummary, format!("product {product} has no review to summarise")));
        };
        Ok(ranked_answer(&state, body.map_err(render_error)?, ranking.read_at()))
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
                                      product has no review. When HBase fails, the last good answer for the same \
                                      list, stale, with `Age`.", body = SummariesPage,
         headers(("Age" = u64, description = "Only on a stale answer: seconds since the read behind it."))),
        (status = 400, description = "productIds missing, with a bad id, or naming more than 100 products.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn v1_summaries(
    State(state): State<AppState>,
    SummariesQuery(products): SummariesQuery,
) -> Result<Response, ApiError> {
    let read = PageRead::Summaries { products: products.clone().into() };
    answer_kept(&state, read, async {
        let read_at = Instant::now();
        let summaries = state.summaries(&products).await?;
        Ok(ranked_answer(&state, render(&SummariesPage { summaries })?, read_at))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rating_order_walks_each_star_then_the_unrated_and_a_filter_keeps_its_stars() {
        let stars =
            |passes: Vec<StarSet>| passes.into_iter().map(|set| set.stars().collect::<Vec<_>>()).collect::<Vec<_>>();
        assert_eq!(
            stars(passes(None, CommentOrder::RatingDesc)),
            vec![vec![5], vec![4], vec![3], vec![2], vec![1], vec![0]]
        );
        assert_eq!(
            stars(passes(None, CommentOrder::RatingAsc)),
            vec![vec![1], vec![2], vec![3], vec![4], vec![5], vec![0]]
        );
        assert_eq!(stars(passes(Some(StarSet::of([2, 4])), CommentOrder::RatingAsc)), vec![vec![2], vec![4]]);
        assert_eq!(stars(passes(Some(StarSet::of([2, 4])), CommentOrder::Newest)), vec![vec![2, 4]]);
        assert_ne!(view_bytes(Some(StarSet::of([1])), CommentOrder::Newest), view_bytes(None, CommentOrder::Newest));
        assert_ne!(view_bytes(None, CommentOrder::RatingAsc), view_bytes(None, CommentOrder::RatingDesc));
    }
}
