//! Which index rows show a review: the one rule every reader of an index
//! applies, whether it shows a page (query-api's plain and star-filtered
//! walks), counts a summary (the ranker's pass, a summary's newer reviews, a
//! listing page's summaries) or ranks a product.
//!
//! An index row shows the comment it names when three things hold:
//!
//! - the comment exists (a row left behind by a delete shows nothing);
//! - the row is the one that lists it ([`IndexEntry::lists`]): the original
//!   Java service overwrote a comment posted twice for one order and product
//!   and left the first post's rows pointing at the second post, so only the
//!   row whose timestamp is the comment's own lists it;
//! - the comment belongs to the row's owner: a `product-comment` row filed
//!   under product P shows only a comment of P, a `user-comment` row of user
//!   U only a comment of U (a bad write by another client can name anyone's).
//!
//! and the same comment was not shown by an earlier row of the same walk: two
//! rows that list one comment at one millisecond (a double post within a
//! millisecond, whose content lengths differ) are neighbours in key order, so
//! a walk remembers only the comments of the millisecond it is in.
//!
//! This module is pure: [`Listing::judge`] decides from a row and the comment
//! it names; the store counts and logs what it leaves out.

use crate::keys::CommentKey;
use crate::model::Comment;

use super::{IndexEntry, IndexKind};

/// What a walk does with one index row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The row shows its comment.
    Shown,
    /// The row lists a comment an earlier row of the walk showed: left out,
    /// and no bad data.
    Repeat,
    /// The comment is gone (or did not decode): counted where it was read.
    Gone,
    /// The row is not the one that lists the comment (the Java service's
    /// double post): counted as `stale_index`.
    Stale,
    /// The comment belongs to another product (or user) than the row's owner:
    /// counted as `other_product` (or `other_user`).
    OtherOwner,
}

/// The state of one walk of an index: the comments shown at the millisecond
/// the walk is in. Start a fresh one per walk; a walk that goes on across
/// pages keeps its listing, so it shows each comment once however its rows
/// fall on the pages.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    millisecond: Option<i64>,
    shown: Vec<CommentKey>,
}

impl Listing {
    /// What the walk does with `entry`, which names `comment` (`None` when it
    /// is gone). Rows must be judged in key order.
    pub fn judge(&mut self, entry: &IndexEntry, comment: Option<&Comment>) -> Verdict {
        let Some(comment) = comment else {
            return Verdict::Gone;
        };
        if !entry.lists(comment) {
            return Verdict::Stale;
        }
        if !entry.owns(comment) {
            return Verdict::OtherOwner;
        }
        if self.millisecond != Some(comment.timestamp) {
            self.millisecond = Some(comment.timestamp);
            self.shown.clear();
        }
        if self.shown.contains(&entry.comment) {
            return Verdict::Repeat;
        }
        self.shown.push(entry.comment);
        Verdict::Shown
    }
}

impl IndexEntry {
    /// Whether `comment` belongs to the product or user this row is filed under.
    pub fn owns(&self, comment: &Comment) -> bool {
        match self.kind {
            IndexKind::Product => comment.product_id == self.owner,
            IndexKind::User => comment.user_id == self.owner,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::Id;

    use super::*;

    fn id(kind: &'static str, text: &str) -> Id {
        Id::parse(kind, text).expect("id")
    }

    fn comment(order: &str, product: &str, timestamp: i64) -> Comment {
        serde_json::from_value(serde_json::json!({
            "orderId": order, "productId": product, "userId": "USER000001",
            "content": "fine", "timestamp": timestamp, "edited": false
        }))
        .expect("comment")
    }

    fn product_row(owner: &str, listed: &Comment, timestamp_ms: i64) -> IndexEntry {
        IndexEntry {
            kind: IndexKind::Product,
            owner: id("productId", owner),
            index_key: Vec::new(),
            timestamp_ms,
            comment: listed.row_key(),
            star_mark: None,
        }
    }

    #[test]
    fn a_row_shows_its_owners_comment_once_at_the_comments_own_time() {
        let mut listing = Listing::default();
        let first = comment("ORDER00001", "PRODUCT001", 20);
        let second = comment("ORDER00002", "PRODUCT001", 20);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &first, 20), Some(&first)), Verdict::Shown);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &second, 20), Some(&second)), Verdict::Shown);
        // A second row at the same millisecond (a double post within it) repeats the comment.
        assert_eq!(listing.judge(&product_row("PRODUCT001", &first, 20), Some(&first)), Verdict::Repeat);
        // The Java service's overwritten post: the old row names the comment at another time.
        let reposted = comment("ORDER00003", "PRODUCT001", 15);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &reposted, 10), Some(&reposted)), Verdict::Stale);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &reposted, 15), Some(&reposted)), Verdict::Shown);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &reposted, 15), None), Verdict::Gone);
    }

    #[test]
    fn a_row_filed_under_another_owner_shows_nothing() {
        let mut listing = Listing::default();
        let elsewhere = comment("ORDER00001", "PRODUCT002", 20);
        // The row's value names PRODUCT002's comment, but the row is filed under PRODUCT001.
        assert_eq!(listing.judge(&product_row("PRODUCT001", &elsewhere, 20), Some(&elsewhere)), Verdict::OtherOwner);
        assert_eq!(listing.judge(&product_row("PRODUCT002", &elsewhere, 20), Some(&elsewhere)), Verdict::Shown);
        let user_row = IndexEntry {
            kind: IndexKind::User,
            owner: id("userId", "USER000002"),
            index_key: Vec::new(),
            timestamp_ms: 20,
            comment: elsewhere.row_key(),
            star_mark: None,
        };
        assert_eq!(listing.judge(&user_row, Some(&elsewhere)), Verdict::OtherOwner, "USER000001's comment");
    }

    #[test]
    fn a_comment_shown_at_an_earlier_millisecond_is_forgotten_once_the_walk_moves_on() {
        // A walk is newest first, so a comment cannot come back at a later
        // millisecond unless another walk lists it; the listing stays small.
        let mut listing = Listing::default();
        let older = comment("ORDER00001", "PRODUCT001", 10);
        let newer = comment("ORDER00002", "PRODUCT001", 20);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &newer, 20), Some(&newer)), Verdict::Shown);
        assert_eq!(listing.judge(&product_row("PRODUCT001", &older, 10), Some(&older)), Verdict::Shown);
        assert_eq!(listing.shown.len(), 1);
    }
}
