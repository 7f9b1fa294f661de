//! The one walk of an index that every page read makes: query-api's plain
//! pages of a product or user, and its star-filtered ones.
//!
//! A walk reads one page of index rows from a start key (one row more than
//! asked: its key is where the next page starts), reads the comments they
//! name in one multi-get, and keeps the ones [`listing`](super::listing)
//! says the rows show. A filtered walk asks the region server for the rows
//! whose star mark is one of the stars asked (or that have none, see
//! [`stars`](super::stars)) and keeps the comments whose own star is one of
//! them.
//!
//! A filtered walk may pass over many rows to find a few (a rare star of a
//! product with a hundred thousand reviews), so it is bounded by a budget of
//! rows *examined*: the region server stops after that many rows, matching or
//! not (`PageFilter` first in the filter list, counting every row it sees).
//! When the page comes back short, the walk cannot tell from the rows alone
//! whether the index ended or the budget did, so it reads the keys it passed
//! over (one more call, keys only, only then) to learn where the next page
//! starts.

use super::listing::Listing;
use super::star_marks::{star_of, StarSet};
use super::{IndexKind, Store};
use crate::error::Result;
use crate::hbase::{RangeScan, ScanCells, ScanSpec, COLUMN_STARS, COLUMN_VALUE};
use crate::keys;
use crate::model::Comment;

/// One page of a walk, as the caller asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkRequest {
    /// The index walked.
    pub kind: IndexKind,
    /// The key prefix of the product's or user's rows; the walk never leaves it.
    pub prefix: Vec<u8>,
    /// Where the page starts: a key inside `prefix` (a cursor's), or the
    /// prefix's first row when `None`.
    pub start: Option<Vec<u8>>,
    /// Only the reviews of these stars (a product's index only); `None`: every review.
    pub stars: Option<StarSet>,
    /// The most reviews the page holds.
    pub limit: usize,
    /// The most index rows a filtered walk examines (a plain walk reads
    /// `limit + 1`, whatever this says).
    pub budget_rows: usize,
}

/// A page of a walk.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WalkPage {
    /// The reviews the page's rows show, newest first, each once.
    pub comments: Vec<Comment>,
    /// The index key where the walk goes on; `None` when the index has no
    /// row left after this page.
    pub next: Option<Vec<u8>>,
    /// The index rows the page examined. A filtered page's are exact when it
    /// came back short, and the whole budget when it filled (the region server
    /// does not say how many rows it passed over): never more than the budget.
    /// A plain page's are the rows it lists and the one after them.
    pub rows_examined: usize,
}

impl Store {
    /// One page of `request`'s walk, as this module's docs describe it.
    ///
    /// Walking from the first row, each page from the last page's `next`,
    /// lists exactly the reviews of the unfiltered walk whose star is asked,
    /// in the same order, each once.
    pub async fn walk(&self, request: WalkRequest) -> Result<WalkPage> {
        match request.stars {
            None => self.plain_walk(request).await,
            // No star asked: nothing to show, and no regex to build from an empty class.
            Some(stars) if stars.is_empty() => Ok(WalkPage::default()),
            Some(stars) => self.filtered_walk(request, stars).await,
        }
    }

    async fn plain_walk(&self, request: WalkRequest) -> Result<WalkPage> {
        let page = self.index_page(request.kind, request.prefix, request.start, request.limit).await?;
        let comments = self.shown_comments(&page.entries, &mut Listing::default()).await?;
        let rows_examined = page.entries.len() + usize::from(page.next.is_some());
        Ok(WalkPage { comments, next: page.next, rows_examined })
    }

    async fn filtered_walk(&self, request: WalkRequest, stars: StarSet) -> Result<WalkPage> {
        let table = self.index_table(request.kind).to_owned();
        let stop = keys::prefix_successor(&request.prefix);
        let start = request.start.unwrap_or_else(|| request.prefix.clone());
        let budget = request.budget_rows.max(1);
        let limit = request.limit.max(1);
        let spec = ScanSpec {
            start: start.clone(),
            stop: stop.clone(),
            limit: limit + 1,
            page_size: limit + 1,
            columns: vec![COLUMN_VALUE.to_vec(), COLUMN_STARS.to_vec()],
            cache_blocks: true,
        };
        let filter = stars.hbase_filter(budget);
        let rows = self.hbase().read_scan(&table, spec, Some(filter)).await?;
        let (entries, lookahead) = self.entries_and_lookahead(&table, request.kind, rows, limit);
        let last_returned = entries.last().map(|entry| entry.index_key.clone());
        let comments: Vec<Comment> = self
            .shown_comments(&entries, &mut Listing::default())
            .await?
            .into_iter()
            .filter(|comment| stars.contains(star_of(comment)))
            .collect();
        if let Some(lookahead) = lookahead {
            let last = entries.last().cloned();
            let next = match last {
                Some(last) => self.next_listing_start(&table, request.kind, lookahead, &last, stop).await?,
                None => Some(lookahead.key),
            };
            return Ok(WalkPage { comments, next, rows_examined: budget });
        }
        // Short: the index ended, or the budget did. The keys passed over say which.
        let probe = RangeScan {
            start: start.clone(),
            stop: stop.clone(),
            time_range: None,
            page_size: budget + 1,
            cells: ScanCells::KeysOnly,
        };
        let mut passed: Vec<Vec<u8>> = match self.hbase().range_scanner(&table, probe)?.next_page().await? {
            Some(rows) => rows.into_iter().map(|row| row.key).collect(),
            None => Vec::new(),
        };
        if passed.len() <= budget {
            return Ok(WalkPage { comments, next: None, rows_examined: passed.len() });
        }
        let first_unexamined = passed.swap_remove(budget);
        let next = match passed.pop() {
            // The last row examined showed a review: the next page must not
            // start at its twin (a double post within one millisecond), which
            // the page of that one row knows how to pass.
            Some(last_examined) if last_returned.as_ref() == Some(&last_examined) => {
                self.index_page(request.kind, request.prefix, Some(last_examined), 1).await?.next
            }
            _ => Some(first_unexamined),
        };
        // A review written between the two reads shifts the keys passed over
        // by one; the next page still starts after every row this one returned.
        let next = match (next, last_returned) {
            (Some(next), Some(last)) if next <= last => Some(keys::key_successor(&last)),
            (next, _) => next,
        };
        Ok(WalkPage { comments, next, rows_examined: budget })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hbase::{GatewayList, Hbase, HbaseConfig};
    use crate::ids::Id;
    use crate::tables::Tables;

    /// A store whose gateways refuse every connection: any read fails.
    fn offline_store() -> Store {
        let hbase = Hbase::new(HbaseConfig {
            thrift1_gateways: GatewayList::single("127.0.0.1:1"),
            thrift2_gateways: GatewayList::single("127.0.0.1:1"),
            connect_timeout: Duration::from_millis(100),
            operation_timeout: Duration::from_millis(500),
            retries: 0,
            ..HbaseConfig::default()
        });
        Store::new(hbase, Tables::with_prefix("offline_").expect("prefix"))
    }

    #[tokio::test]
    async fn a_walk_of_no_star_is_empty_without_reading_hbase() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let request = |stars| WalkRequest {
            kind: IndexKind::Product,
            prefix: keys::product_comment_prefix(&product),
            start: None,
            stars: Some(stars),
            limit: 20,
            budget_rows: 100,
        };
        let store = offline_store();
        let page = store.walk(request(StarSet::of([]))).await.expect("no read, no failure");
        assert_eq!(page, WalkPage::default());
        assert!(store.walk(request(StarSet::of([5]))).await.is_err(), "a walk of a star reads HBase");
    }
}
