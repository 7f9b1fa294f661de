//! Finding what changed since a time, for incremental ranking runs: the
//! products whose `comment` or `product-comment` rows were written since then
//! (by any writer: HBase stamps every cell it stores, whoever wrote it), and
//! the rank slots whose comment no longer exists (a delete leaves no cell to
//! find by time).
//!
//! Each call reads one bounded step and says where the next one resumes, so a
//! caller walks a whole table in steps that each fit an operation's deadline.

use std::collections::HashSet;

use super::{skip_row, SkipReason, Store};
use crate::error::Result;
use crate::hbase::{RangeScan, Retry, ScanCells, ScanSpec, COLUMN_VALUE};
use crate::ids::Id;
use crate::keys::{self, CommentKey};

/// A table in which a written cell means its product's ranking may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeSource {
    /// `comment` (orderId productId): a new comment, an edit, a vote (the
    /// vote counts live in the comment's JSON), a double post overwritten.
    Comments,
    /// `product-comment` (productId first): an index row added, by a writer
    /// or by `reviews-admin index repair`, lists a comment for its product.
    ProductIndex,
}

/// One step of [`Store::products_written_since`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrittenProducts {
    /// The products of the rows written since the bound, in scan order, with repeats.
    pub products: Vec<Id>,
    /// Rows written since the bound (including those whose key names no product).
    pub rows_written: u64,
    /// Where the next step starts; `None` when the range is exhausted.
    pub next: Option<Vec<u8>>,
}

/// A rank slot as a listing of `product-comment-rank` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedSlot {
    /// The ranked product.
    pub product: Id,
    /// 1 (best) to 10.
    pub rank: u16,
    /// The comment the slot names, when its value is a comment key.
    pub comment: Option<CommentKey>,
}

/// One step of [`Store::list_rank_slots`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotListing {
    /// The slots read, in key order.
    pub slots: Vec<ListedSlot>,
    /// Where the next step starts; `None` when the range is exhausted.
    pub next: Option<Vec<u8>>,
}

impl Store {
    /// Reads up to `rows` rows of `source` from `start` (before `stop`) and
    /// returns the products of those holding a cell written at or after
    /// `since_ms`. For [`ChangeSource::ProductIndex`] the range is a range of
    /// product keys; `comment` rows start with the order id, so for
    /// [`ChangeSource::Comments`] callers scan the whole table and keep the
    /// products they rank.
    pub async fn products_written_since(
        &self,
        source: ChangeSource,
        since_ms: i64,
        start: Vec<u8>,
        stop: Option<Vec<u8>>,
        rows: usize,
    ) -> Result<WrittenProducts> {
        let table = match source {
            ChangeSource::Comments => self.tables().comment.clone(),
            ChangeSource::ProductIndex => self.tables().product_comment.clone(),
        };
        // A time-range scan (Thrift2; Thrift1 can bound a scan's time only
        // from above): the region servers return only rows with a cell
        // written since the bound, and skip every store file whose cells are
        // all older, so finding a night's changes does not read the table.
        let scan = RangeScan {
            start,
            stop,
            time_range: Some(since_ms..i64::MAX),
            page_size: rows.max(1),
            cells: ScanCells::KeysOnly,
        };
        let mut scanner = self.hbase().range_scanner(&table, scan)?;
        let page = scanner.next_page().await?.unwrap_or_default();
        let mut written = WrittenProducts {
            rows_written: page.len() as u64,
            next: scanner.resumes_at().map(<[u8]>::to_vec),
            ..WrittenProducts::default()
        };
        let keys = page.iter().map(|row| &row.key);
        for key in keys {
            let product = match source {
                ChangeSource::Comments => CommentKey::parse(key).ok().map(|comment| comment.product_id()),
                ChangeSource::ProductIndex => keys::leading_id("productId", key),
            };
            match product {
                Some(product) => written.products.push(product),
                // Counted like every reader counts a row it cannot use.
                None => skip_row(self.tables(), &table, SkipReason::BadKey, key, &"the key names no product"),
            }
        }
        Ok(written)
    }

    /// Reads up to `rows` rank slots from `start` (before `stop`): which
    /// product, which rank, which comment. Ranking records are passed over;
    /// other rows whose key is not a rank key are skipped and counted.
    pub async fn list_rank_slots(&self, start: Vec<u8>, stop: Option<Vec<u8>>, rows: usize) -> Result<SlotListing> {
        let table = self.tables().product_comment_rank.clone();
        let rows = rows.max(1);
        let spec = ScanSpec::batch_page(start, stop, rows);
        let page = {
            let table = table.clone();
            self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
        };
        let mut listing = SlotListing::default();
        // Ranking records lie among the slots; the walk is of the slots alone.
        for row in page.iter().filter(|row| !keys::is_ranking_record_key(&row.key)) {
            let (Some(product), Ok(parsed)) = (keys::leading_id("productId", &row.key), keys::parse_rank_key(&row.key))
            else {
                skip_row(self.tables(), &table, SkipReason::BadKey, &row.key, &"not a rank key");
                continue;
            };
            let comment = row.value(COLUMN_VALUE).and_then(|value| CommentKey::parse(value).ok());
            listing.slots.push(ListedSlot { product, rank: parsed.rank, comment });
        }
        if page.len() == rows {
            listing.next = page.last().map(|last| keys::key_successor(&last.key));
        }
        Ok(listing)
    }

    /// Which of `comments` no longer exist in `comment`: an existence check
    /// (Thrift2 `existsAll`), so no comment's value is read for it.
    pub async fn missing_comments(&self, comments: &[CommentKey]) -> Result<HashSet<CommentKey>> {
        if comments.is_empty() {
            return Ok(HashSet::new());
        }
        let table = self.tables().comment.clone();
        let row_keys: Vec<Vec<u8>> = comments.iter().map(|comment| comment.as_bytes().to_vec()).collect();
        let exist = self.hbase().rows_exist(&table, row_keys).await?;
        Ok(comments.iter().zip(exist).filter(|(_, exists)| !exists).map(|(comment, _)| *comment).collect())
    }
}
