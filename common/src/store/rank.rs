//! The `product-comment-rank` slots: reading them, and replacing them after a ranking.

use super::{skip_row, SkipReason, Store};
use crate::error::Result;
use crate::hbase::{Retry, RowMutation, ScanSpec, COLUMN_SCORE, COLUMN_VALUE, FAMILY};
use crate::ids::Id;
use crate::keys::{self, CommentKey, MAX_RANK};

/// One filled rank slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSlot {
    /// 1 (best) to 10.
    pub rank: u16,
    /// The ranked comment's row key.
    pub comment: CommentKey,
    /// The score the ranker gave it, when the slot carries one (`cf:s`).
    pub score: Option<f64>,
}

impl Store {
    /// Reads `product`'s rank slots, best first. Slots that do not decode are skipped.
    pub async fn rank_slots(&self, product: &Id) -> Result<Vec<RankSlot>> {
        let table = self.tables().product_comment_rank.clone();
        let prefix = keys::rank_prefix(product);
        let spec = ScanSpec {
            start: prefix.clone(),
            stop: keys::prefix_successor(&prefix),
            limit: usize::from(MAX_RANK) + 1,
            page_size: usize::from(MAX_RANK) + 1,
            columns: vec![COLUMN_VALUE.to_vec(), COLUMN_SCORE.to_vec()],
            cache_blocks: true,
        };
        let rows = {
            let table = table.clone();
            self.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await?
        };
        let mut slots = Vec::with_capacity(rows.len());
        for row in rows {
            let rank = match keys::parse_rank_key(&row.key) {
                Ok(parsed) => parsed.rank,
                Err(error) => {
                    skip_row(self.tables(), &table, SkipReason::BadKey, &row.key, &error);
                    continue;
                }
            };
            let comment = match row.value(COLUMN_VALUE).map(CommentKey::parse) {
                Some(Ok(comment)) => comment,
                Some(Err(error)) => {
                    skip_row(self.tables(), &table, SkipReason::BadValue, &row.key, &error);
                    continue;
                }
                None => {
                    skip_row(self.tables(), &table, SkipReason::NoValue, &row.key, &"the slot has no cf:q");
                    continue;
                }
            };
            let score =
                row.value(COLUMN_SCORE).and_then(|bytes| <[u8; 8]>::try_from(bytes).ok()).map(f64::from_be_bytes);
            slots.push(RankSlot { rank, comment, score });
        }
        Ok(slots)
    }

    /// Writes `ranked` (best first, at most 10) into slots `1..=k` with their
    /// scores, then deletes slots `k+1..=10`. Returns (slots written, slots deleted).
    ///
    /// Both happen in one `mutateRows` round trip; puts and deletes touch
    /// different rows, so HBase's puts-before-deletes order within a batch is harmless.
    pub async fn replace_rank_slots(&self, product: &Id, ranked: &[(CommentKey, f64)]) -> Result<(usize, usize)> {
        let table = self.tables().product_comment_rank.clone();
        let mutations = rank_mutations(product, ranked);
        let written = ranked.len().min(usize::from(MAX_RANK));
        let deleted = mutations.len() - written;
        self.hbase()
            .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone()))
            .await?;
        Ok((written, deleted))
    }
}

/// The mutations that make `product`'s slots hold exactly `ranked`.
pub fn rank_mutations(product: &Id, ranked: &[(CommentKey, f64)]) -> Vec<RowMutation> {
    let mut mutations = Vec::with_capacity(usize::from(MAX_RANK));
    for rank in 1..=MAX_RANK {
        let key = keys::rank_key(product, rank);
        mutations.push(match ranked.get(usize::from(rank) - 1) {
            Some((comment, score)) => RowMutation::Put {
                key,
                cells: vec![
                    (COLUMN_VALUE.to_vec(), comment.as_bytes().to_vec()),
                    (COLUMN_SCORE.to_vec(), score.to_be_bytes().to_vec()),
                ],
            },
            None => RowMutation::Delete { key, family: FAMILY.as_bytes().to_vec() },
        });
    }
    mutations
}
