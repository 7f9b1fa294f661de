//! The write path (docs/contract.md §4): post, edit and delete comments.
//!
//! Order of writes is what keeps readers safe without transactions: a comment
//! row is written before the index rows that point at it, and index rows are
//! deleted before the comment they point at. A crash in between leaves at worst
//! an index row whose comment is gone, which every reader skips, or a comment no
//! index names yet, which a retry of the delete finds and removes.
//!
//! Every write is safe to retry after an error whose effect is unknown (the
//! gateway went away before it answered): posting the same comment again
//! finds its own row and completes the index rows, and an edit that already
//! landed is recognised rather than reported as a conflict.

use std::collections::{HashMap, HashSet};

use super::{skip_row, SkipReason, Store};
use crate::error::{Error, Result};
use crate::hbase::{Retry, RowMutation, ScanSpec, COLUMN_STARS, COLUMN_VALUE, FAMILY};
use crate::ids::Id;
use crate::keys::{self, CommentKey};
use crate::model::{Comment, Extra, Order, Rating, Record};

/// The longest comment accepted, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// A comment to post.
#[derive(Debug, Clone, PartialEq)]
pub struct NewComment {
    /// The order the product was bought on; must belong to `user_id`.
    pub order_id: Id,
    /// The reviewed product.
    pub product_id: Id,
    /// The author.
    pub user_id: Id,
    /// The review text.
    pub content: String,
    /// When it was written, epoch milliseconds (not negative).
    pub timestamp_ms: i64,
    /// Star rating, 1 to 5.
    pub rating: Option<u8>,
    /// Helpful votes carried over from elsewhere (imports and demo data).
    pub helpful: Option<u64>,
    /// Unhelpful votes carried over from elsewhere.
    pub unhelpful: Option<u64>,
    /// Number of attached photos.
    pub photos: Option<u32>,
}

impl NewComment {
    fn validate(&self) -> Result<()> {
        // What this project writes follows the strict id rule, even though it
        // reads the looser ids the original Java service stored.
        self.order_id.check_new("orderId")?;
        self.product_id.check_new("productId")?;
        self.user_id.check_new("userId")?;
        if self.timestamp_ms < 0 {
            return Err(Error::InvalidInput(format!("timestamp {} is before 1970", self.timestamp_ms)));
        }
        validate_content(&self.content)?;
        if let Some(rating) = self.rating {
            if !(1..=5).contains(&rating) {
                return Err(Error::InvalidInput(format!("rating {rating} is outside 1..=5")));
            }
        }
        Ok(())
    }

    fn into_comment(self) -> Comment {
        Comment {
            order_id: self.order_id,
            product_id: self.product_id,
            user_id: self.user_id,
            content: Some(self.content),
            timestamp: self.timestamp_ms,
            edited: false,
            rating: self.rating.map(Rating::of_stars),
            helpful: self.helpful,
            unhelpful: self.unhelpful,
            photos: self.photos,
            extra: Extra::new(),
        }
    }
}

fn validate_content(content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::InvalidInput(format!(
            "content is {} bytes; the most allowed is {MAX_CONTENT_BYTES}",
            content.len()
        )));
    }
    Ok(())
}

/// The `user-comment` and `product-comment` rows this project writes for `comment`.
pub(super) fn index_mutations(comment: &Comment) -> (RowMutation, RowMutation) {
    let key = comment.row_key();
    let value = vec![(COLUMN_VALUE.to_vec(), key.as_bytes().to_vec())];
    let user = RowMutation::Put {
        key: keys::user_comment_key(&comment.user_id, comment.timestamp, &key),
        cells: value.clone(),
    };
    // The product's row carries the review's star mark too (see `stars`), so
    // a filtered walk never reads this comment for a star it does not have.
    let mut product_cells = value.clone();
    product_cells.push((COLUMN_STARS.to_vec(), super::star_marks::star_mark(super::star_marks::star_of(comment))));
    let product = RowMutation::Put {
        key: keys::product_comment_key(&comment.product_id, comment.timestamp, comment.content_utf8_len(), &key),
        cells: product_cells,
    };
    (user, product)
}

impl Store {
    /// Posts one comment: checks the order exists and belongs to the author,
    /// creates the comment row only if none exists for (order, product), then
    /// writes both index rows.
    pub async fn post_comment(&self, new: NewComment) -> Result<Comment> {
        new.validate()?;
        let order: Order = self
            .get_record(keys::entity_key(&new.order_id))
            .await?
            .ok_or_else(|| Error::NotFound(format!("order {}", new.order_id)))?;
        if order.user_id != new.user_id {
            return Err(Error::Conflict(format!("order {} belongs to another user", new.order_id)));
        }
        let comment = new.into_comment();
        // Compare-and-set on an absent cell: two posts racing for one (order,
        // product) cannot both win, and neither overwrites an existing review.
        let created = self.compare_and_set_comment(&comment.row_key(), None, comment.to_json()).await?;
        if !created {
            return Err(Error::Conflict(format!(
                "a comment for order {} and product {} already exists",
                comment.order_id, comment.product_id
            )));
        }
        self.write_index_rows(std::slice::from_ref(&comment)).await?;
        Ok(comment)
    }

    /// Posts many comments in three batched writes (comments, then each index):
    /// the bulk form of [`Store::post_comment`] used by loaders. Every comment is
    /// checked first (orders exist and belong to their authors, no other comment
    /// exists for the same order and product, no duplicates within the batch);
    /// nothing is written unless all pass. A comment row that already holds
    /// exactly what the batch would write is the batch's own, from an earlier
    /// try that failed part way, so posting the same batch again completes it.
    ///
    /// Unlike [`Store::post_comment`] the check and the write are two steps,
    /// not one compare-and-set: it is meant for a loader that owns its data,
    /// not for posts racing each other.
    pub async fn post_comments(&self, batch: Vec<NewComment>) -> Result<Vec<Comment>> {
        for new in &batch {
            new.validate()?;
        }
        let mut seen = HashSet::new();
        if let Some(duplicate) = batch.iter().find(|new| !seen.insert(CommentKey::new(&new.order_id, &new.product_id)))
        {
            return Err(Error::Conflict(format!(
                "the batch holds two comments for order {} and product {}",
                duplicate.order_id, duplicate.product_id
            )));
        }
        let orders = self.orders_by_id(batch.iter().map(|new| new.order_id).collect()).await?;
        for new in &batch {
            match orders.get(&new.order_id) {
                None => return Err(Error::NotFound(format!("order {}", new.order_id))),
                Some(order) if order.user_id != new.user_id => {
                    return Err(Error::Conflict(format!("order {} belongs to another user", new.order_id)))
                }
                Some(_) => {}
            }
        }
        let comments: Vec<Comment> = batch.into_iter().map(NewComment::into_comment).collect();
        let rows: HashMap<Vec<u8>, Vec<u8>> =
            comments.iter().map(|comment| (comment.row_key().as_bytes().to_vec(), comment.to_json())).collect();
        for (key, stored) in self.stored_values(&self.tables().comment, rows.keys().cloned().collect()).await? {
            if rows.get(&key) != Some(&stored) {
                return Err(Error::Conflict(format!("a comment with key {} already exists", super::escape(&key))));
            }
        }
        let puts: Vec<RowMutation> = rows
            .into_iter()
            .map(|(key, json)| RowMutation::Put { key, cells: vec![(COLUMN_VALUE.to_vec(), json)] })
            .collect();
        let table = self.tables().comment.clone();
        self.hbase().run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, puts.clone())).await?;
        self.write_index_rows(&comments).await?;
        Ok(comments)
    }

    async fn write_index_rows(&self, comments: &[Comment]) -> Result<()> {
        let (user_rows, product_rows): (Vec<_>, Vec<_>) = comments.iter().map(index_mutations).unzip();
        let user_table = self.tables().user_comment.clone();
        let product_table = self.tables().product_comment.clone();
        self.hbase()
            .run(Retry::Idempotent, move |connection| {
                connection.mutate_rows(&user_table, user_rows.clone())?;
                connection.mutate_rows(&product_table, product_rows.clone())
            })
            .await
    }

    async fn orders_by_id(&self, mut ids: Vec<Id>) -> Result<HashMap<Id, Order>> {
        ids.sort_unstable();
        ids.dedup();
        let table = self.tables().order.clone();
        let row_keys: Vec<Vec<u8>> = ids.iter().map(keys::entity_key).collect();
        let rows = {
            let table = table.clone();
            self.hbase()
                .run(Retry::Idempotent, move |connection| {
                    connection.get_rows(&table, &row_keys, &[COLUMN_VALUE.to_vec()])
                })
                .await?
        };
        let mut orders = HashMap::with_capacity(rows.len());
        for row in rows {
            let Some(value) = row.value(COLUMN_VALUE) else {
                skip_row(self.tables(), &table, SkipReason::NoValue, &row.key, &"the order row has no cf:q");
                continue;
            };
            let order = Order::from_json(value).map_err(|error| Error::BadData {
                table: table.clone(),
                reason: format!("order does not decode: {error}"),
            })?;
            orders.insert(order.id, order);
        }
        Ok(orders)
    }

    /// Replaces a comment's text and marks it edited. Index keys stay as they
    /// were, so the comment keeps its place in both lists. The new row replaces
    /// exactly the one that was read: an edit racing a delete or another edit
    /// is refused with [`Error::Conflict`] rather than resurrecting the deleted
    /// comment or losing the other edit.
    pub async fn edit_comment(&self, order: &Id, product: &Id, content: String) -> Result<Comment> {
        validate_content(&content)?;
        let key = CommentKey::new(order, product);
        let table = self.tables().comment.clone();
        let stored =
            self.stored_value(&table, key.as_bytes().to_vec()).await?.ok_or_else(|| comment_not_found(&key))?;
        let mut comment: Comment = super::decode_record(&table, &stored)?;
        comment.content = Some(content);
        comment.edited = true;
        if !self.compare_and_set_comment(&key, Some(stored), comment.to_json()).await? {
            return Err(Error::Conflict(format!(
                "the comment for order {order} and product {product} changed or was deleted while it was being edited"
            )));
        }
        Ok(comment)
    }

    /// Puts `value` in the comment row `key` if the row holds `expected` (`None`:
    /// if there is no row). Also true when the row already holds `value`: that
    /// is an earlier try of this same write whose answer was lost, since a
    /// compare-and-set is not retried blindly.
    async fn compare_and_set_comment(
        &self,
        key: &CommentKey,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool> {
        let table = self.tables().comment.clone();
        let swapped = {
            let (table, key, value) = (table.clone(), *key, value.clone());
            self.hbase()
                .run(Retry::Once, move |connection| {
                    connection.check_and_put(&table, key.as_bytes(), COLUMN_VALUE, expected.as_deref(), value.clone())
                })
                .await?
        };
        if swapped {
            return Ok(true);
        }
        Ok(self.stored_value(&table, key.as_bytes().to_vec()).await?.is_some_and(|stored| stored == value))
    }

    /// Deletes a comment and every index row that names it, then marks its
    /// product as having lost a comment (the deletion marker, for incremental
    /// runs). Safe to retry: the index rows go first, so a half-done delete
    /// still finds the comment.
    pub async fn delete_comment(&self, order: &Id, product: &Id) -> Result<()> {
        let key = CommentKey::new(order, product);
        let comment = self.existing_comment(&key).await?;
        let tables = self.tables().clone();
        let marker = keys::deletion_marker_key(product);
        // The index keys cannot simply be rebuilt: rows in the seed's layout have no
        // tie, and the product key holds the content length at posting time, which
        // an edit may have changed. So scan the comment's millisecond in each index
        // and delete exactly the rows whose value names this comment.
        let ranges = [
            (tables.user_comment.clone(), keys::user_comment_millisecond_prefix(&comment.user_id, comment.timestamp)),
            (
                tables.product_comment.clone(),
                keys::product_comment_millisecond_prefix(&comment.product_id, comment.timestamp),
            ),
        ];
        self.hbase()
            .run(Retry::Idempotent, move |connection| {
                for (table, prefix) in &ranges {
                    let spec = ScanSpec {
                        start: prefix.clone(),
                        stop: keys::prefix_successor(prefix),
                        limit: usize::MAX,
                        page_size: 1_000,
                        columns: vec![COLUMN_VALUE.to_vec()],
                        cache_blocks: true,
                    };
                    let deletes: Vec<RowMutation> = connection
                        .scan(table, &spec)?
                        .into_iter()
                        .filter(|row| row.value(COLUMN_VALUE) == Some(key.as_bytes().as_slice()))
                        .map(|row| RowMutation::Delete { key: row.key, family: FAMILY.as_bytes().to_vec() })
                        .collect();
                    connection.mutate_rows(table, deletes)?;
                }
                connection.mutate_rows(
                    &tables.comment,
                    vec![RowMutation::Delete { key: key.as_bytes().to_vec(), family: FAMILY.as_bytes().to_vec() }],
                )?;
                // A delete leaves no cell a time-range scan can find, so the
                // product's deletion marker is put last: the next incremental
                // run finds the product by it and counts the product's reviews
                // again, whichever comment went.
                connection.mutate_rows(
                    &tables.product_comment,
                    vec![RowMutation::Put {
                        key: marker.clone(),
                        cells: vec![(COLUMN_VALUE.to_vec(), key.as_bytes().to_vec())],
                    }],
                )
            })
            .await
    }

    async fn existing_comment(&self, key: &CommentKey) -> Result<Comment> {
        self.get_record::<Comment>(key.as_bytes().to_vec()).await?.ok_or_else(|| comment_not_found(key))
    }
}

fn comment_not_found(key: &CommentKey) -> Error {
    Error::NotFound(format!("comment for order {} and product {}", key.order_id(), key.product_id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_comment(order: &str, product: &str, user: &str) -> NewComment {
        let id = |text: &str| Id::parse("id", text).expect("a readable id");
        NewComment {
            order_id: id(order),
            product_id: id(product),
            user_id: id(user),
            content: "a review".to_owned(),
            timestamp_ms: 1,
            rating: None,
            helpful: None,
            unhelpful: None,
            photos: None,
        }
    }

    #[test]
    fn the_write_path_keeps_the_strict_id_rule_for_what_it_creates() {
        assert!(new_comment("ORDER00001", "PRODUCT001", "USER000001").validate().is_ok());
        // Readable (the Java service stored such ids) but not what this project writes.
        for (comment, field) in [
            (new_comment("ORDER-0001", "PRODUCT001", "USER000001"), "orderId"),
            (new_comment("ORDER00001", "JP-edge-01", "USER000001"), "productId"),
            (new_comment("ORDER00001", "PRODUCT001", "USR edge 1"), "userId"),
        ] {
            match comment.validate() {
                Err(Error::InvalidId(error)) => {
                    assert_eq!(error.field, field);
                    assert!(error.to_string().contains("ASCII letters or digits"), "{error}");
                }
                other => panic!("{field}: expected an invalid id, got {other:?}"),
            }
        }
    }
}
