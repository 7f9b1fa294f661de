//! What a sharded run needs to plan its shards: the regions of
//! `product-comment`, a count of its rows per product, and a first-writer-wins
//! record in `ranker-lease` through which the shards of one run agree on one plan.

use super::Store;
use crate::error::{Error, Result};
use crate::hbase::{Retry, ScanSpec, COLUMN_VALUE};
use crate::keys::{self, KeyRange};

/// The rows of one product prefix ([`keys::product_boundary`]) seen in a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixRows {
    /// The product prefix (the key's first ten bytes, whether or not they are a valid id).
    pub prefix: Vec<u8>,
    /// How many `product-comment` rows start with it in the page.
    pub rows: u64,
}

/// A page of row counts per product prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixRowsPage {
    /// Prefixes in key order. The last prefix of one page may continue on the
    /// next: callers add equal neighbours together.
    pub prefixes: Vec<PrefixRows>,
    /// Where the next page starts; `None` when the range is exhausted.
    pub next: Option<Vec<u8>>,
}

impl Store {
    /// The regions of `product-comment`, each its key range, in key order
    /// (as `table_regions` gives them).
    pub async fn product_comment_regions(&self) -> Result<Vec<KeyRange>> {
        let table = self.tables().product_comment.clone();
        let regions: Vec<KeyRange> = self
            .hbase()
            .run(Retry::Idempotent, move |connection| connection.table_regions(&table))
            .await?
            .into_iter()
            .map(|region| KeyRange {
                start: region.start_key,
                stop: (!region.end_key.is_empty()).then_some(region.end_key),
            })
            .collect();
        if regions.is_empty() {
            return Err(Error::Hbase(format!("HBase lists no region of {}", self.tables().product_comment)));
        }
        Ok(regions)
    }

    /// Counts the `product-comment` rows in `[start, stop)` per product prefix,
    /// reading at most `rows` keys (keys only: the values stay on the region
    /// server, and the blocks stay out of its cache).
    pub async fn count_product_comment_rows(
        &self,
        start: Vec<u8>,
        stop: Option<Vec<u8>>,
        rows: usize,
    ) -> Result<PrefixRowsPage> {
        let table = self.tables().product_comment.clone();
        let rows = rows.max(1);
        let spec = ScanSpec::batch_page(start, stop.clone(), rows);
        let page = self.hbase().run(Retry::Idempotent, move |connection| connection.scan_keys(&table, &spec)).await?;
        let mut counted = PrefixRowsPage::default();
        for key in &page {
            let prefix = keys::product_boundary(key);
            match counted.prefixes.last_mut() {
                Some(last) if last.prefix == prefix => last.rows += 1,
                _ => counted.prefixes.push(PrefixRows { prefix: prefix.to_vec(), rows: 1 }),
            }
        }
        if page.len() == rows {
            counted.next = page
                .last()
                .map(|last| keys::key_successor(last))
                .filter(|next| stop.as_ref().is_none_or(|stop| next < stop));
        }
        Ok(counted)
    }

    /// The shard plan stored under `plan_id` for `count` shards, if any.
    pub async fn shard_plan(&self, plan_id: &str, count: u32) -> Result<Option<Vec<u8>>> {
        let table = self.tables().ranker_lease.clone();
        let keys = vec![keys::shard_plan_key(plan_id, count)];
        let rows = self
            .hbase()
            .run(Retry::Idempotent, move |connection| connection.get_rows(&table, &keys, &[COLUMN_VALUE.to_vec()]))
            .await?;
        Ok(rows.into_iter().next().and_then(|row| row.cells.into_values().next()))
    }

    /// Stores `plan` under `plan_id` and `count` unless a plan is stored there
    /// already, and returns the stored plan: ours, or the one that got there
    /// first. A `checkAndPut` expecting no value decides between shards racing
    /// to store theirs, so every shard of a run ends up with the same bytes.
    pub async fn agree_on_shard_plan(&self, plan_id: &str, count: u32, plan: Vec<u8>) -> Result<Vec<u8>> {
        let table = self.tables().ranker_lease.clone();
        let key = keys::shard_plan_key(plan_id, count);
        let written = {
            let plan = plan.clone();
            self.hbase()
                .run(Retry::Once, move |connection| {
                    connection.check_and_put(&table, &key, COLUMN_VALUE, None, plan.clone())
                })
                .await
        };
        match written {
            Ok(true) => Ok(plan),
            // Someone stored a plan first, or the reply was lost and the write
            // may or may not have happened: either way the row now says which
            // plan is the run's.
            Ok(false) => self.shard_plan(plan_id, count).await?.ok_or_else(|| {
                Error::Conflict(format!("the shard plan {plan_id:?} of {count} was refused yet is not stored"))
            }),
            Err(error) if error.is_transient() => self.shard_plan(plan_id, count).await?.ok_or(error),
            Err(error) => Err(error),
        }
    }
}
