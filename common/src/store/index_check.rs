//! Finding and repairing comments that no index row points at.
//!
//! The original Java service keyed its index rows by user and millisecond
//! (`user-comment`) and by product, millisecond and content length
//! (`product-comment`), without a tie: two comments of one user, or of one
//! product with equal content length, written in the same millisecond shared
//! one index row, and the second put overwrote the first's. The comment row
//! survives, but no list shows it. [`Store::check_indexes`] walks `comment` a
//! page at a time (memory bounded by the page, however large the table) and,
//! for each comment, scans the one millisecond of each index where its row
//! must sit (found by the comment's own timestamp) for a row naming it.
//! Repair writes the missing rows in this project's layout, with the tie
//! suffix, so they can never collide again; the rows that are there are left
//! alone.

use tokio::task::JoinSet;

use super::{write, Store};
use crate::error::Result;
use crate::hbase::{Retry, ScanSpec, COLUMN_VALUE};
use crate::keys::{self, CommentKey};
use crate::model::{Comment, Record};

/// Index lookups in flight at once while checking a page of comments.
const LOOKUPS_IN_FLIGHT: usize = 8;
/// How many missing index rows a report names (the counts cover all of them).
pub const REPORTED_KEYS: usize = 10;

/// What a check (or repair) looks at and does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexCheckOptions {
    /// Comment rows read per round trip.
    pub page_rows: usize,
    /// Write the missing index rows (`false`: only report them).
    pub repair: bool,
}

/// Which index lacks a row for a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissingIndex {
    /// `user-comment`.
    UserComment,
    /// `product-comment`.
    ProductComment,
}

/// One comment that an index does not list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MissingIndexRow {
    /// The comment's row key, as text.
    pub comment: String,
    /// The index that has no row for it.
    pub index: MissingIndex,
}

/// What a check or repair found and did, so far or in total.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexCheckReport {
    /// Comment rows read.
    pub comments_scanned: u64,
    /// Comment rows that do not decode (or whose JSON names another key);
    /// counted in `reviews_skipped_rows_total` and left alone.
    pub comments_skipped: u64,
    /// Comments without a `user-comment` row.
    pub missing_user_index: u64,
    /// Comments without a `product-comment` row.
    pub missing_product_index: u64,
    /// Index rows written (0 unless repairing).
    pub index_rows_written: u64,
    /// The first [`REPORTED_KEYS`] missing rows.
    pub first_missing: Vec<MissingIndexRow>,
}

impl IndexCheckReport {
    /// Missing index rows of both indexes.
    pub fn missing(&self) -> u64 {
        self.missing_user_index + self.missing_product_index
    }

    fn note_missing(&mut self, comment: &CommentKey, index: MissingIndex) {
        match index {
            MissingIndex::UserComment => self.missing_user_index += 1,
            MissingIndex::ProductComment => self.missing_product_index += 1,
        }
        if self.first_missing.len() < REPORTED_KEYS {
            self.first_missing.push(MissingIndexRow { comment: comment.to_string(), index });
        }
    }
}

impl Store {
    /// Walks every comment and finds (and with `options.repair`, writes) the
    /// index rows missing for it. `progress` sees the report after each page.
    pub async fn check_indexes(
        &self,
        options: IndexCheckOptions,
        mut progress: impl FnMut(&IndexCheckReport),
    ) -> Result<IndexCheckReport> {
        let table = self.tables().comment.clone();
        let page_rows = options.page_rows.max(1);
        let mut report = IndexCheckReport::default();
        let mut start = Vec::new();
        loop {
            let spec = ScanSpec::batch_page(start.clone(), None, page_rows);
            let rows = {
                let table = table.clone();
                self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
            };
            let comments: Vec<Comment> = rows
                .iter()
                .filter_map(|row| {
                    let value = row.value(COLUMN_VALUE)?;
                    match Comment::from_json(value) {
                        Ok(comment) if comment.row_key().as_bytes().as_slice() == row.key.as_slice() => Some(comment),
                        Ok(comment) => {
                            super::skip_row(
                                self.tables(),
                                &table,
                                super::SkipReason::KeyMismatch,
                                &row.key,
                                &format_args!("the JSON names {}", comment.row_key()),
                            );
                            None
                        }
                        Err(error) => {
                            super::skip_row(self.tables(), &table, super::SkipReason::BadJson, &row.key, &error);
                            None
                        }
                    }
                })
                .collect();
            report.comments_scanned += rows.len() as u64;
            report.comments_skipped += (rows.len() - comments.len()) as u64;
            self.check_page(&comments, options.repair, &mut report).await?;
            progress(&report);
            match rows.last() {
                Some(last) if rows.len() == page_rows => start = keys::key_successor(&last.key),
                _ => return Ok(report),
            }
        }
    }

    /// Looks up both index rows of each comment and handles the missing ones.
    async fn check_page(&self, comments: &[Comment], repair: bool, report: &mut IndexCheckReport) -> Result<()> {
        // Two short scans per comment, a few comments at a time: the round trips
        // overlap, and the pool is not drained for other work.
        let mut found = vec![(false, false); comments.len()];
        let mut lookups = JoinSet::new();
        for (position, comment) in comments.iter().enumerate() {
            if lookups.len() >= LOOKUPS_IN_FLIGHT {
                let (position, listed) = joined(lookups.join_next().await)?;
                found[position] = listed;
            }
            let (store, comment) = (self.clone(), comment.clone());
            lookups.spawn(async move {
                let user = store
                    .index_lists(
                        &store.tables().user_comment,
                        keys::user_comment_millisecond_prefix(&comment.user_id, comment.timestamp),
                        &comment,
                    )
                    .await?;
                let product = store
                    .index_lists(
                        &store.tables().product_comment,
                        keys::product_comment_millisecond_prefix(&comment.product_id, comment.timestamp),
                        &comment,
                    )
                    .await?;
                Ok((position, (user, product)))
            });
        }
        while let Some(outcome) = lookups.join_next().await {
            let (position, listed) = joined(Some(outcome))?;
            found[position] = listed;
        }
        let mut user_rows = Vec::new();
        let mut product_rows = Vec::new();
        for (comment, (in_user, in_product)) in comments.iter().zip(found) {
            let (user_row, product_row) = write::index_mutations(comment);
            if !in_user {
                report.note_missing(&comment.row_key(), MissingIndex::UserComment);
                user_rows.push(user_row);
            }
            if !in_product {
                report.note_missing(&comment.row_key(), MissingIndex::ProductComment);
                product_rows.push(product_row);
            }
        }
        if !repair {
            return Ok(());
        }
        for (table, rows) in [(&self.tables().user_comment, user_rows), (&self.tables().product_comment, product_rows)]
        {
            if rows.is_empty() {
                continue;
            }
            let written = rows.len() as u64;
            let table = table.clone();
            // Puts of fixed keys and values: repeating one after an unknown outcome is harmless.
            self.hbase().run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, rows.clone())).await?;
            report.index_rows_written += written;
        }
        Ok(())
    }

    /// Whether any row of `table` under `prefix` (one millisecond of one user
    /// or product) names `comment`.
    async fn index_lists(&self, table: &str, prefix: Vec<u8>, comment: &Comment) -> Result<bool> {
        let wanted = comment.row_key();
        let spec = ScanSpec {
            stop: keys::prefix_successor(&prefix),
            start: prefix,
            // Rows sharing one millisecond are few: a page of them answers at once.
            limit: usize::MAX,
            page_size: 100,
            columns: vec![COLUMN_VALUE.to_vec()],
            cache_blocks: false,
        };
        let table = table.to_owned();
        let rows = self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?;
        Ok(rows.iter().any(|row| row.value(COLUMN_VALUE) == Some(wanted.as_bytes().as_slice())))
    }
}

/// A comment's position in its page, and whether the user and the product index list it.
type Listed = (usize, (bool, bool));

/// The outcome of a lookup from [`JoinSet::join_next`] on a set known not to be
/// empty. A lookup that panicked is a bug: its panic carries on here.
fn joined(outcome: Option<std::result::Result<Result<Listed>, tokio::task::JoinError>>) -> Result<Listed> {
    match outcome {
        Some(Ok(result)) => result,
        Some(Err(error)) => std::panic::resume_unwind(error.into_panic()),
        None => unreachable!("joined only while lookups are in flight"),
    }
}
