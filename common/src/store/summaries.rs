//! The reviews of a product listed after a ranking run, counted at read time:
//! what a summary adds to the count the run wrote in the product's ranking
//! record, so a summary is current when it is read.
//!
//! A run counts the reviews written up to its as-of time; the reviews
//! written after it are the first rows of the product's index (newest first),
//! up to the rows of that millisecond. Each read counts them with the rule
//! every walk applies ([`listing`](super::listing)), so a summary counts the
//! reviews a walk of the product's latest pages shows, each once.
//!
//! One gap remains, by design: a review the Java service posts again for the
//! same order after a run (it overwrites the comment with a new timestamp and
//! adds an index row) was counted by the run under its first post and is
//! counted again here under its second, until the next run counts it once.
//! Telling the two apart would take a read of the product's older rows on
//! every summary.

use std::collections::HashMap;

use super::listing::Listing;
use super::{index_entry, untimed, IndexEntry, IndexKind, Store};
use crate::error::Result;
use crate::hbase::COLUMN_VALUE;
use crate::ids::Id;
use crate::keys;
use crate::summary::ReviewSummary;

/// The reviews of a product listed after a time, counted at read time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListedSummary {
    /// The reviews counted.
    pub summary: ReviewSummary,
    /// Whether every such review was counted: `false` when the read's bound
    /// of index rows ran out first, and only the newest were counted.
    pub complete: bool,
}

impl Store {
    /// Counts `product`'s reviews newer than `as_of_ms` (all of them for
    /// `None`), reading at most `max_rows` index rows: one scan through the
    /// Thrift2 gateway (one call, where a Thrift1 scan is three), then one
    /// multi-get when it found any.
    pub async fn summary_after(&self, product: &Id, as_of_ms: Option<i64>, max_rows: usize) -> Result<ListedSummary> {
        Ok(self.summaries_after(&[(*product, as_of_ms)], max_rows).await?.remove(0))
    }

    /// [`Store::summary_after`] for many products at once (each with the
    /// as-of time of the run that counted it, if any), lined up with
    /// `asked`: one scan of all their newer index rows (the region server
    /// seeks from one product's rows to the next), then one multi-get of the
    /// reviews found, however many products are asked. At most `max_rows`
    /// index rows are read in all; a product whose rows the scan did not
    /// finish is counted as far as it read and marked incomplete.
    pub async fn summaries_after(&self, asked: &[(Id, Option<i64>)], max_rows: usize) -> Result<Vec<ListedSummary>> {
        if asked.is_empty() {
            return Ok(Vec::new());
        }
        let table = self.tables().product_comment.clone();
        let asked_ranges: Vec<(Vec<u8>, Vec<u8>)> =
            asked.iter().map(|(product, as_of_ms)| keys::product_comments_after(product, *as_of_ms)).collect();
        let mut ranges = asked_ranges.clone();
        ranges.sort();
        ranges.dedup();
        let mut rows = self
            .hbase()
            .scan_row_ranges(&table, ranges, vec![COLUMN_VALUE.to_vec()], max_rows.saturating_add(1))
            .await?;
        // Past the bound: the product of the last row kept, and those after it, were not read whole.
        let unfinished_from = (rows.len() > max_rows).then(|| {
            rows.truncate(max_rows);
            rows.last().map(|row| row.key.clone()).unwrap_or_default()
        });
        let entries: Vec<IndexEntry> = rows
            .into_iter()
            .map(untimed)
            .filter_map(|row| index_entry(self.tables(), &table, IndexKind::Product, &row))
            .collect();
        let mut counted: HashMap<Id, ReviewSummary> = HashMap::new();
        // A shown review is its row's product's, so counting by its product id counts by row.
        for comment in self.shown_comments(&entries, &mut Listing::default()).await? {
            counted.entry(comment.product_id).or_default().add(&comment);
        }
        Ok(asked
            .iter()
            .zip(asked_ranges)
            .map(|((product, _), (_, stop))| ListedSummary {
                summary: counted.get(product).copied().unwrap_or_default(),
                complete: unfinished_from.as_ref().is_none_or(|last| stop <= *last),
            })
            .collect())
    }
}
