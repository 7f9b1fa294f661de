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
//! Each request reads at most a budget of index rows (the caller's), so a
//! product whose rows are unmarked cannot make one request read its whole
//! index: the page comes back short, with a cursor where the budget ran out.

use std::collections::{HashMap, HashSet};

use super::{index_entry, IndexEntry, IndexKind, Store};
use crate::error::Result;
use crate::hbase::{Retry, Row, RowMutation, ScanSpec, TimedRow, COLUMN_STARS, COLUMN_VALUE};
use crate::ids::Id;
use crate::keys::{self, CommentKey, KeyRange};
use crate::model::Comment;
use crate::summary::ReviewSummary;

/// The star a review counts under, as its summary counts it: 1 to 5, or 0 for
/// unrated (no rating, or one that is not an integer from 1 to 5).
pub fn star_of(comment: &Comment) -> u8 {
    comment.rating.as_ref().and_then(|rating| rating.stars()).unwrap_or(0)
}

/// The mark (`cf:r`) of an index row listing a review of `star` (0 to 5).
pub fn star_mark(star: u8) -> Vec<u8> {
    vec![b'0' + star.min(5)]
}

/// The star a mark names; `None` for a value no writer of this project puts.
pub(crate) fn parse_star_mark(mark: &[u8]) -> Option<u8> {
    match mark {
        [byte @ b'0'..=b'5'] => Some(byte - b'0'),
        _ => None,
    }
}

/// A set of stars, 0 (unrated) to 5: which reviews a filtered walk keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StarSet(u8);

impl StarSet {
    /// The reviews rated 1 to 5 stars, and the unrated ones.
    pub const ALL: StarSet = StarSet(0b11_1111);

    /// The set of `stars` (each 0 to 5; larger values are ignored).
    pub fn of(stars: impl IntoIterator<Item = u8>) -> StarSet {
        StarSet(stars.into_iter().filter(|star| *star <= 5).fold(0, |mask, star| mask | 1 << star))
    }

    /// Whether the set holds `star`.
    pub fn contains(self, star: u8) -> bool {
        star <= 5 && self.0 & (1 << star) != 0
    }

    /// The set's bits (bit `k` for `k` stars), for a cursor to name the set.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The stars in the set, in ascending order.
    pub fn stars(self) -> impl Iterator<Item = u8> {
        (0..=5).filter(move |star| self.contains(*star))
    }

    /// The region server's filter for the rows a walk of this set reads: a
    /// mark naming one of its stars, or no mark at all (`filterIfMissing`
    /// false), which the walk then checks against the comment itself.
    fn hbase_filter(self) -> String {
        let class: String = self.stars().map(|star| char::from(b'0' + star)).collect();
        format!("SingleColumnValueFilter('cf', 'r', =, 'regexstring:^[{class}]$', false, true)")
    }
}

/// A page of a filtered walk: the reviews kept, newest first, and where the
/// walk goes on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StarPage {
    /// The reviews of the page, each once, newest first.
    pub comments: Vec<Comment>,
    /// The index key where the walk goes on; `None` when the product's index
    /// has no row left after this page.
    pub next: Option<Vec<u8>>,
    /// The index rows read (those the region server's filter passed): what
    /// the page cost, counted against the caller's budget.
    pub rows_read: usize,
}

/// The reviews of a product listed after a time, counted at read time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListedSummary {
    /// The reviews counted.
    pub summary: ReviewSummary,
    /// Whether every such review was counted: `false` when there were more
    /// index rows than the read's bound, and only the newest were counted.
    pub complete: bool,
}

impl Store {
    /// Counts `product`'s reviews newer than `as_of_ms` (all of them for
    /// `None`) as a walk of its latest pages lists them, reading at most
    /// `max_rows` index rows (one scan, then one multi-get when it found any).
    /// What a summary adds, at read time, to the count of the run as of
    /// `as_of_ms`.
    pub async fn summary_after(&self, product: &Id, as_of_ms: Option<i64>, max_rows: usize) -> Result<ListedSummary> {
        let table = self.tables().product_comment.clone();
        let range = keys::product_comments_after(product, as_of_ms);
        // Through Thrift2, whose scan is one call (open, read, close), where a
        // Thrift1 scan is three: this read comes with every summary.
        let ranges = vec![(range.start, range.stop.unwrap_or_default())];
        let timed = self
            .hbase()
            .scan_row_ranges(&table, ranges, vec![COLUMN_VALUE.to_vec()], max_rows.saturating_add(1))
            .await?;
        let mut rows: Vec<Row> = timed.into_iter().map(untimed).collect();
        let complete = rows.len() <= max_rows;
        rows.truncate(max_rows);
        let entries: Vec<IndexEntry> =
            rows.iter().filter_map(|row| index_entry(self.tables(), &table, IndexKind::Product, row)).collect();
        let mut listed = ListedSummary { complete, ..ListedSummary::default() };
        if !entries.is_empty() {
            let page = super::IndexPage { entries, next: None };
            for comment in self.comments_of(&page).await? {
                listed.summary.add(&comment);
            }
        }
        Ok(listed)
    }

    /// [`Store::summary_after`] for many products at once (each named once,
    /// with the as-of time of the run that counted it, if any), lined up with
    /// `asked`: one scan of all their newest index rows through the Thrift2
    /// gateway (the region server seeks from one product's rows to the next),
    /// then one multi-get of the reviews found. When more than `max_rows`
    /// rows are found in all, the products the scan did not finish are
    /// counted one by one, each within `max_rows`.
    pub async fn summaries_after(&self, asked: &[(Id, Option<i64>)], max_rows: usize) -> Result<Vec<ListedSummary>> {
        let table = self.tables().product_comment.clone();
        let mut by_key: Vec<(usize, KeyRange)> = asked
            .iter()
            .enumerate()
            .map(|(position, (product, as_of_ms))| (position, keys::product_comments_after(product, *as_of_ms)))
            .collect();
        by_key.sort_by(|left, right| left.1.start.cmp(&right.1.start));
        let ranges: Vec<(Vec<u8>, Vec<u8>)> =
            by_key.iter().map(|(_, range)| (range.start.clone(), range.stop.clone().unwrap_or_default())).collect();
        let columns = vec![COLUMN_VALUE.to_vec()];
        let mut rows = self.hbase().scan_row_ranges(&table, ranges, columns, max_rows.saturating_add(1)).await?;
        // Past the bound: the last row's product and those after it were not read whole.
        let unfinished_from = (rows.len() > max_rows).then(|| {
            rows.truncate(max_rows);
            rows.last().map(|row| row.key.clone()).unwrap_or_default()
        });
        let entries: Vec<IndexEntry> = rows
            .into_iter()
            .map(|timed| Row {
                key: timed.key,
                cells: timed.cells.into_iter().map(|cell| (cell.column, cell.value)).collect(),
            })
            .filter_map(|row| index_entry(self.tables(), &table, IndexKind::Product, &row))
            .collect();
        let mut counted: HashMap<Id, ReviewSummary> = HashMap::new();
        if !entries.is_empty() {
            for comment in self.comments_of(&super::IndexPage { entries, next: None }).await? {
                counted.entry(comment.product_id).or_default().add(&comment);
            }
        }
        let mut listed = vec![ListedSummary::default(); asked.len()];
        for (position, range) in by_key {
            let (product, as_of_ms) = &asked[position];
            let unfinished =
                unfinished_from.as_ref().is_some_and(|last| range.stop.as_ref().is_none_or(|stop| stop > last));
            listed[position] = if unfinished {
                self.summary_after(product, *as_of_ms, max_rows).await?
            } else {
                ListedSummary { summary: counted.get(product).copied().unwrap_or_default(), complete: true }
            };
        }
        Ok(listed)
    }

    /// Up to `limit` of `product`'s reviews whose star is in `stars`, newest
    /// first, from `start` (an index key inside the product's prefix, or its
    /// first row), reading at most about `budget_rows` index rows: the walk
    /// stops early when the budget runs out, and the page is then shorter than
    /// `limit` while `next` is set.
    ///
    /// Walking from the first row, each page from the last page's `next`, lists
    /// exactly the reviews of the product's unfiltered walk whose star is in
    /// `stars`, in the same order, each once.
    pub async fn star_page(
        &self,
        product: &Id,
        stars: StarSet,
        start: Option<Vec<u8>>,
        limit: usize,
        budget_rows: usize,
    ) -> Result<StarPage> {
        let table = self.tables().product_comment.clone();
        let prefix = keys::product_comment_prefix(product);
        let stop = keys::prefix_successor(&prefix);
        let filter = stars.hbase_filter();
        let mut start = start.unwrap_or_else(|| prefix.clone());
        let mut page = StarPage::default();
        let mut shown: HashSet<CommentKey> = HashSet::new();
        loop {
            let wanted = limit.saturating_sub(page.comments.len()).max(1);
            let spec = ScanSpec {
                start: start.clone(),
                stop: stop.clone(),
                // One row more than asked: its key is where the walk goes on.
                limit: wanted + 1,
                page_size: wanted + 1,
                columns: vec![COLUMN_VALUE.to_vec(), COLUMN_STARS.to_vec()],
                cache_blocks: true,
            };
            let mut rows = {
                let (table, filter) = (table.clone(), filter.clone());
                self.hbase()
                    .run(Retry::Idempotent, move |connection| connection.scan_with_filter(&table, &spec, &filter))
                    .await?
            };
            let lookahead = (rows.len() > wanted).then(|| rows.swap_remove(wanted));
            rows.truncate(wanted);
            page.rows_read += rows.len();
            let entries: Vec<IndexEntry> =
                rows.iter().filter_map(|row| index_entry(self.tables(), &table, IndexKind::Product, row)).collect();
            let keys: Vec<CommentKey> = entries.iter().map(|entry| entry.comment).collect();
            let comments = if keys.is_empty() { Vec::new() } else { self.get_comments(&keys).await? };
            for (entry, comment) in entries.iter().zip(comments) {
                let Some(comment) = comment else { continue };
                if entry.lists(&comment) && stars.contains(star_of(&comment)) && shown.insert(entry.comment) {
                    page.comments.push(comment);
                }
            }
            page.next = match (lookahead, entries.last()) {
                (Some(lookahead), Some(last)) => {
                    self.next_listing_start(&table, IndexKind::Product, lookahead, last, stop.clone()).await?
                }
                (lookahead, _) => lookahead.map(|row| row.key),
            };
            match &page.next {
                Some(next) if page.comments.len() < limit && page.rows_read < budget_rows => start = next.clone(),
                _ => return Ok(page),
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

/// A Thrift2 row as a Thrift1 one: its key and its cells' values.
fn untimed(row: TimedRow) -> Row {
    Row { key: row.key, cells: row.cells.into_iter().map(|cell| (cell.column, cell.value)).collect() }
}

/// The rows of `product`'s index `entries` whose mark differs from the star of
/// the comment they list (`comments` lines up with `entries`; `None` where a
/// comment is gone), with the star each should carry. Rows that list no
/// comment of `product` (gone, a stale row, another product's) are left as
/// they are.
pub fn marks_to_fix(product: &Id, entries: &[IndexEntry], comments: &[Option<Comment>]) -> Vec<(Vec<u8>, u8)> {
    entries
        .iter()
        .zip(comments)
        .filter_map(|(entry, comment)| {
            let comment = comment.as_ref().filter(|comment| entry.lists(comment) && comment.product_id == *product)?;
            let star = star_of(comment);
            (entry.star_mark != Some(star)).then(|| (entry.index_key.clone(), star))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_set_holds_what_it_was_made_of_and_names_it_in_distinct_bits() {
        let set = StarSet::of([1, 5]);
        assert!(set.contains(1) && set.contains(5));
        assert!(!set.contains(0) && !set.contains(3) && !set.contains(9));
        assert_eq!(set.stars().collect::<Vec<_>>(), vec![1, 5]);
        assert_eq!(set.bits(), 0b10_0010);
        assert_ne!(StarSet::of([1]).bits(), StarSet::of([1, 2]).bits());
        assert_eq!(StarSet::ALL.stars().count(), 6);
    }

    #[test]
    fn the_filter_keeps_the_marked_stars_and_unmarked_rows() {
        assert_eq!(
            StarSet::of([0, 4, 5]).hbase_filter(),
            "SingleColumnValueFilter('cf', 'r', =, 'regexstring:^[045]$', false, true)"
        );
    }

    #[test]
    fn marks_name_stars_zero_to_five_only() {
        for star in 0..=5 {
            assert_eq!(parse_star_mark(&star_mark(star)), Some(star));
        }
        assert_eq!(parse_star_mark(b"6"), None);
        assert_eq!(parse_star_mark(b"11"), None);
        assert_eq!(parse_star_mark(b""), None);
    }
}
