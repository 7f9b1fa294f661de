//! Pages of comments as the routes answer them: a product's or a user's
//! newest first by cursor, a product's filtered by star or ordered by rating,
//! the seed's pages by index key, and the authors a page shows on request.
//!
//! Every page is one walk of an index ([`common::store::Store::walk`]):
//! one index scan (one row more than asked, whose key says where the next
//! page starts) and one multi-get of the comments it names. A filtered or
//! rating-ordered page is the walks of its [`StarList`] in turn within the
//! service's budget of rows examined, whatever the cached summary counts.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use common::cursor::{self, ViewPosition};
use common::keys::{self, CommentKey};
use common::model::Comment;
use common::store::stars::StarList;
use common::store::{IndexKind, WalkRequest};
use common::Id;

use crate::encoding::Prepared;
use crate::error::ApiError;
use crate::prepared_ranking::Ranking;
use crate::state::AppState;
use crate::views::{
    render, render_error, Author, CommentView, CommentsPage, RankedComment, RankedPage, SeedCommentsPage,
};

/// A `/v1` page of `kind`'s index under `prefix` (a product's or a user's),
/// from `cursor` (which must lie inside `prefix`), with the comments' authors
/// when asked for.
pub async fn v1_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    cursor: Option<&str>,
    limit: usize,
    include_author: bool,
) -> Result<CommentsPage, ApiError> {
    let start = cursor.map(|cursor| cursor::decode(cursor, &prefix)).transpose()?;
    let page = plain_walk(state, kind, prefix, start, limit).await?;
    let next_cursor = page.next.as_deref().map(cursor::encode);
    with_authors(state, page.comments, next_cursor, include_author).await
}

/// The review stored under `key`, with its author when asked for; `None`
/// when no comment is stored there.
pub async fn review(state: &AppState, key: CommentKey, include_author: bool) -> Result<Option<CommentView>, ApiError> {
    let Some(comment) = state.store().get_comment(&key).await? else {
        return Ok(None);
    };
    let page = with_authors(state, vec![comment], None, include_author).await?;
    Ok(page.comments.into_iter().next())
}

/// The seed's JSON of one page of `kind`'s index under `prefix`, from `start`.
pub async fn seed_page(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    start: Option<Vec<u8>>,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let page = plain_walk(state, kind, prefix, start, limit).await?;
    render(&SeedCommentsPage::new(&page.comments, page.next.as_deref()))
}

async fn plain_walk(
    state: &AppState,
    kind: IndexKind,
    prefix: Vec<u8>,
    start: Option<Vec<u8>>,
    limit: usize,
) -> Result<common::store::WalkPage, ApiError> {
    let request = WalkRequest { kind, prefix, start, stars: None, limit, budget_rows: limit + 1 };
    Ok(state.store().walk(request).await?)
}

/// A page of `list` of `product`'s reviews from `cursor`, with authors when
/// asked for. Always walked, even when the cached summary counts none of the
/// list's stars: a review written since the ranking shows in its filter at
/// once, while the summary's counts may lag until the ranking is refreshed.
pub async fn star_list_page(
    state: &AppState,
    product: &Id,
    list: StarList,
    cursor: Option<&str>,
    limit: usize,
    include_author: bool,
) -> Result<CommentsPage, ApiError> {
    let prefix = keys::product_comment_prefix(product);
    let position = match cursor {
        Some(text) => cursor::decode_view(text, list.view(), &prefix)?,
        None => ViewPosition { phase: 0, key: None },
    };
    let budget = state.settings().star_budget_rows;
    let page = state.store().star_list_page(product, list, position, limit, budget).await?;
    let next_cursor = page.next.map(|position| cursor::encode_view(list.view(), &position));
    with_authors(state, page.comments, next_cursor, include_author).await
}

/// The ranked answer showing `ranking`'s best `limit` comments with their
/// authors' nicknames: for the whole ranking (what the review widget asks
/// for), rendered by the first request and kept with the ranking, which the
/// cache then weighs again ([`crate::ranked_cache::RankedCache::reweigh`]).
pub async fn ranked_with_authors(
    state: &AppState,
    product: Id,
    ranking: &Arc<Ranking>,
    limit: usize,
) -> Result<Arc<Prepared>, ApiError> {
    let whole = limit >= ranking.comments().len();
    if let Some(kept) = ranking.with_authors_body().filter(|_| whole) {
        return Ok(kept);
    }
    let body = render(&RankedPage::of(&ranked_comments_with_authors(state, ranking, limit).await?, ranking.summary()))?;
    if !whole {
        return Ok(Arc::new(Prepared::tagged(body)));
    }
    let kept = ranking.keep_with_authors_body(body);
    state.ranked_cache().reweigh(product, ranking);
    Ok(kept)
}

/// The seed's ranked answer showing `ranking`'s best `limit` comments: for
/// the whole ranking, rendered by the first request and kept with the
/// ranking ([`Ranking::keep_seed_body`]), which the cache then weighs again
/// ([`crate::ranked_cache::RankedCache::reweigh`]).
pub fn seed_ranked(
    state: &AppState,
    product: Id,
    ranking: &Arc<Ranking>,
    limit: usize,
) -> Result<Arc<Prepared>, ApiError> {
    if limit < ranking.comments().len() {
        return ranking.render_seed_body(limit).map_err(render_error);
    }
    if let Some(kept) = ranking.seed_body() {
        return Ok(kept);
    }
    let kept = ranking.keep_seed_body().map_err(render_error)?;
    state.ranked_cache().reweigh(product, ranking);
    Ok(kept)
}

/// `ranking`'s best `limit` comments, each with its author's nickname. The
/// authors are read once per cached ranking (one multi-get of the `user`
/// table), then taken from it.
pub async fn ranked_comments_with_authors(
    state: &AppState,
    ranking: &Ranking,
    limit: usize,
) -> Result<Vec<RankedComment>, ApiError> {
    let authors = ranking
        .authors()
        .get_or_try_init(|| authors_of(state, ranking.comments().iter().map(|ranked| ranked.comment.user_id)))
        .await?;
    let shown = &ranking.comments()[..limit.min(ranking.comments().len())];
    Ok(shown
        .iter()
        .map(|ranked| {
            let mut ranked = ranked.clone();
            ranked.author = Some(authors.get(&ranked.comment.user_id).cloned().flatten());
            ranked
        })
        .collect())
}

/// The answer holding `comments`, with their authors when asked for.
async fn with_authors(
    state: &AppState,
    comments: Vec<Comment>,
    next_cursor: Option<String>,
    include_author: bool,
) -> Result<CommentsPage, ApiError> {
    let comments = if include_author {
        let authors = authors_of(state, comments.iter().map(|comment| comment.user_id)).await?;
        comments
            .into_iter()
            .map(|comment| {
                let author = authors.get(&comment.user_id).cloned().flatten();
                CommentView::by(comment, author)
            })
            .collect()
    } else {
        comments.into_iter().map(CommentView::plain).collect()
    };
    Ok(CommentsPage { comments, next_cursor })
}

/// The authors of `users`, by id, in one multi-get of the `user` table: `None`
/// for a user whose record is missing or does not decode (skipped and counted).
async fn authors_of(
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
