//! A product's reviews by star: the star marks on `product-comment` rows, and
//! the filtered and rating-ordered walks of a product's index they make cheap.
//!
//! A review's star lives in its comment's JSON, in another table than the
//! index, so HBase cannot filter the index by it. This project therefore marks
//! each `product-comment` row with the star of the comment it lists (`cf:r`,
//! one ASCII byte: `'1'` to `'5'`, `'0'` for unrated): the write path marks the
//! rows it writes, and the ranker marks the rows of every product it ranks
//! whose mark is missing or wrong (rows the Java service wrote, or ratings
//! another writer changed). A filtered walk asks the region server for the
//! rows whose mark is one of the stars asked **or that have no mark**, then
//! reads those comments and keeps the ones whose own rating is one of the
//! stars. So the comment's JSON stays the only truth: a missing mark costs a
//! comment read, never a review, and a mark left wrong by a writer that changed
//! a rating after the last run hides that review from its new star until the
//! next run marks it again.
//!
//! Each request examines at most a budget of index rows (the caller's,
//! counted by the region server, see `store::walk`), so neither a rare
//! star nor a product whose rows are unmarked can make one request read its
//! whole index: the page comes back short, with a cursor where the budget ran
//! out.
//!
//! A list of a product's reviews filtered by star or ordered by rating is a
//! sequence of such walks ([`StarList::passes`]): one for a filter in newest
//! order, one per star for a rating order. [`Store::star_list_page`] runs them
//! in turn within one budget, and its cursor names the list
//! ([`StarList::view`]) so no other list accepts it.

use super::star_marks::star_mark;
pub use super::star_marks::{star_of, StarSet};
use super::walk::WalkRequest;
use super::{IndexEntry, IndexKind, Store};
use crate::cursor::ViewPosition;
use crate::error::Result;
use crate::hbase::{Retry, RowMutation, COLUMN_STARS};
use crate::ids::Id;
use crate::keys;
use crate::model::Comment;

/// The order of a list of a product's reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CommentOrder {
    /// Newest first (the default).
    #[default]
    Newest,
    /// Most stars first, newest first within a star, unrated last.
    RatingDesc,
    /// Fewest stars first, newest first within a star, unrated last.
    RatingAsc,
}

/// A list of a product's reviews other than the plain newest-first one: some
/// stars only, or ordered by rating, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StarList {
    /// Only the reviews of these stars; `None`: every review.
    pub stars: Option<StarSet>,
    /// The list's order.
    pub order: CommentOrder,
}

impl StarList {
    /// The walks the list is made of, in turn, each newest first keeping one
    /// set of stars. A star filter in newest order is one walk; a rating
    /// order is one per star, best (or worst) first, then the unrated reviews
    /// when no filter excludes them.
    pub fn passes(self) -> Vec<StarSet> {
        let asked = |star: &u8| self.stars.is_none_or(|stars| stars.contains(*star));
        let by_star =
            |order: [u8; 6]| order.iter().filter(|star| asked(star)).map(|star| StarSet::of([*star])).collect();
        match self.order {
            CommentOrder::Newest => vec![self.stars.unwrap_or(StarSet::ALL)],
            CommentOrder::RatingDesc => by_star([5, 4, 3, 2, 1, 0]),
            CommentOrder::RatingAsc => by_star([1, 2, 3, 4, 5, 0]),
        }
    }

    /// The two bytes a cursor of this list carries to name it, so that any
    /// other list refuses the cursor.
    pub fn view(self) -> [u8; 2] {
        let order = match self.order {
            CommentOrder::Newest => 0,
            CommentOrder::RatingDesc => 1,
            CommentOrder::RatingAsc => 2,
        };
        [self.stars.map_or(0, StarSet::bits), order]
    }
}

/// A page of a [`StarList`]: its reviews and where the list goes on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StarListPage {
    /// The reviews, in the list's order, each once.
    pub comments: Vec<Comment>,
    /// Where the list goes on; `None` after its last review.
    pub next: Option<ViewPosition>,
    /// The index rows the page examined (see [`super::WalkPage::rows_examined`]).
    pub rows_examined: usize,
}

impl Store {
    /// A page of `list` of `product`'s reviews from `position` (the list's
    /// first review for phase 0 and no key): the list's walks in turn, each
    /// from where the last ended, until `limit` reviews are found or
    /// `budget_rows` index rows are examined. The page is short, with a
    /// `next`, when the budget runs out first. A position whose phase the
    /// list does not have (a cursor of another list) is
    /// [`crate::Error::InvalidCursor`].
    pub async fn star_list_page(
        &self,
        product: &Id,
        list: StarList,
        mut position: ViewPosition,
        limit: usize,
        budget_rows: usize,
    ) -> Result<StarListPage> {
        let passes = list.passes();
        if usize::from(position.phase) >= passes.len() {
            return Err(crate::cursor::CursorError::OutsidePrefix.into());
        }
        let mut page = StarListPage { comments: Vec::with_capacity(limit), next: None, rows_examined: 0 };
        loop {
            let walk = self
                .walk(WalkRequest {
                    kind: IndexKind::Product,
                    prefix: keys::product_comment_prefix(product),
                    start: position.key.take(),
                    stars: Some(passes[usize::from(position.phase)]),
                    limit: limit - page.comments.len(),
                    budget_rows: budget_rows - page.rows_examined,
                })
                .await?;
            page.rows_examined += walk.rows_examined;
            page.comments.extend(walk.comments);
            match walk.next {
                Some(next) => position.key = Some(next),
                None if usize::from(position.phase) + 1 == passes.len() => return Ok(page),
                None => position = ViewPosition { phase: position.phase + 1, key: None },
            }
            if page.comments.len() >= limit || page.rows_examined >= budget_rows {
                page.next = Some(position);
                return Ok(page);
            }
        }
    }

    /// Marks each of `rows` (a `product-comment` key and the star of the
    /// comment it lists) with its star, in one batch. For the ranker, which
    /// reads every comment a row lists and so knows when a mark is missing or
    /// wrong.
    pub async fn put_star_marks(&self, rows: Vec<(Vec<u8>, u8)>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let table = self.tables().product_comment.clone();
        let mutations: Vec<RowMutation> = rows
            .into_iter()
            .map(|(key, star)| RowMutation::Put { key, cells: vec![(COLUMN_STARS.to_vec(), star_mark(star))] })
            .collect();
        self.hbase().run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone())).await
    }
}

/// The rows among `entries` (a product's index rows) whose mark differs from
/// the star of the comment they list (`comments` lines up with `entries`;
/// `None` where a comment is gone), with the star each should carry. Rows
/// that list no comment of their product (gone, a stale row, another
/// product's: see [`super::listing`]) are left as they are.
pub fn marks_to_fix(entries: &[IndexEntry], comments: &[Option<Comment>]) -> Vec<(Vec<u8>, u8)> {
    entries
        .iter()
        .zip(comments)
        .filter_map(|(entry, comment)| {
            let comment = comment.as_ref().filter(|comment| entry.lists(comment) && entry.owns(comment))?;
            let star = star_of(comment);
            (entry.star_mark != Some(star)).then(|| (entry.index_key.clone(), star))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rating_order_walks_each_star_then_the_unrated_and_a_filter_keeps_its_stars() {
        let stars =
            |list: StarList| list.passes().into_iter().map(|set| set.stars().collect::<Vec<_>>()).collect::<Vec<_>>();
        let list = |stars: Option<StarSet>, order| StarList { stars, order };
        assert_eq!(
            stars(list(None, CommentOrder::RatingDesc)),
            vec![vec![5], vec![4], vec![3], vec![2], vec![1], vec![0]]
        );
        assert_eq!(
            stars(list(None, CommentOrder::RatingAsc)),
            vec![vec![1], vec![2], vec![3], vec![4], vec![5], vec![0]]
        );
        assert_eq!(stars(list(Some(StarSet::of([2, 4])), CommentOrder::RatingAsc)), vec![vec![2], vec![4]]);
        assert_eq!(stars(list(Some(StarSet::of([2, 4])), CommentOrder::Newest)), vec![vec![2, 4]]);
        let view = |stars, order| list(stars, order).view();
        assert_ne!(view(Some(StarSet::of([1])), CommentOrder::Newest), view(None, CommentOrder::Newest));
        assert_ne!(view(None, CommentOrder::RatingAsc), view(None, CommentOrder::RatingDesc));
    }
}
