//! A product's ranking in `product-comment-rank`: the ranking record this
//! project reads, and the rank slots the original Java service reads.
//!
//! HBase makes a mutation of one row visible all at once, and promises nothing
//! wider: the rows of one `mutateRows` call can be seen at different moments,
//! and HBase's Thrift1 handler applies a call's puts before its deletes. A
//! reader that scanned the slots while a shorter ranking replaced a longer one
//! saw the new slots `1..=k` beside the old slots `k+1..=10`, one review twice.
//! So every ranking is written whole into one row, the ranking record
//! (`productId 's'`, JSON in `cf:q`), and this project's readers take the
//! ranking from that row alone. The slots (`productId 'r' rank`) are still
//! written in the same call, for the Java service and for the batch tools that
//! walk them, and still read for a product no record exists for (ranked by the
//! Java service, or before the record existed).

use serde::{Deserialize, Serialize};

use super::{skip_row, SkipReason, Store};
use crate::error::Result;
use crate::hbase::{Retry, Row, RowMutation, ScanSpec, COLUMN_SCORE, COLUMN_VALUE, FAMILY};
use crate::ids::Id;
use crate::keys::{self, CommentKey, MAX_RANK};
use crate::summary::ReviewSummary;

/// The most rows one read of a product's slots takes: its ten, and room for
/// a few rows of a bad write between them.
const RANKING_READ_ROWS: usize = 2 * MAX_RANK as usize + 1;

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

/// A whole ranking of one product, as one run of the ranker made it: what is
/// written, and what [`Store::ranking`] reads back from the ranking record.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductRanking {
    /// The ranked product.
    pub product: Id,
    /// The as-of time of the run that ranked it, in milliseconds.
    pub as_of_ms: i64,
    /// The picks, best first, with their scores; at most [`MAX_RANK`] are kept.
    pub ranked: Vec<(CommentKey, f64)>,
    /// The product's review summary, counted in the same pass.
    pub summary: ReviewSummary,
}

/// A product's ranking as a reader finds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredRanking {
    /// The slots, best first; no comment appears twice.
    pub slots: Vec<RankSlot>,
    /// The as-of time of the run that wrote the ranking record; `None` when the
    /// product has no record and the slots were read instead.
    pub as_of_ms: Option<i64>,
    /// The review summary the record carries; `None` without a record.
    pub summary: Option<ReviewSummary>,
}

impl StoredRanking {
    /// The run's count of the product's reviews and that run's as-of time,
    /// when a ranking record carries both: what a summary as of now adds the
    /// newer reviews to.
    pub fn counted(&self) -> Option<(ReviewSummary, i64)> {
        self.summary.zip(self.as_of_ms)
    }
}

/// The ranking record's JSON, as a client of HBase other than this project
/// can read it: `{"productId", "asOf", "slots": [{"rank", "comment", "score"}],
/// "summary"}`, `comment` being the comment's 20-byte row key (ids are
/// printable ASCII) and `summary` a [`ReviewSummary`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RankingRecordJson {
    product_id: String,
    as_of: i64,
    slots: Vec<SlotJson>,
    #[serde(default)]
    summary: Option<ReviewSummary>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SlotJson {
    rank: u16,
    comment: String,
    score: f64,
}

impl ProductRanking {
    /// The ranking record's JSON.
    fn record_json(&self) -> Vec<u8> {
        let record = RankingRecordJson {
            product_id: self.product.to_string(),
            as_of: self.as_of_ms,
            slots: self
                .kept()
                .iter()
                .zip(1..)
                .map(|((comment, score), rank)| SlotJson { rank, comment: comment.to_string(), score: *score })
                .collect(),
            summary: Some(self.summary),
        };
        serde_json::to_vec(&record).unwrap_or_else(|_| unreachable!("the record holds only strings and numbers"))
    }

    /// The picks that get a slot.
    fn kept(&self) -> &[(CommentKey, f64)] {
        &self.ranked[..self.ranked.len().min(usize::from(MAX_RANK))]
    }

    /// The mutations that make `product-comment-rank` hold this ranking: the
    /// record, slots `1..=k` put, slots `k+1..=10` deleted.
    fn mutations(&self) -> Vec<RowMutation> {
        let mut mutations = Vec::with_capacity(usize::from(MAX_RANK) + 1);
        mutations.push(RowMutation::Put {
            key: keys::ranking_record_key(&self.product),
            cells: vec![(COLUMN_VALUE.to_vec(), self.record_json())],
        });
        for rank in 1..=MAX_RANK {
            let key = keys::rank_key(&self.product, rank);
            mutations.push(match self.kept().get(usize::from(rank) - 1) {
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
}

/// Decodes a ranking record of `product`, refusing one that is not a whole
/// ranking of it: ranks `1..=k` in order, each comment the product's and named once.
fn decode_record(product: &Id, value: &[u8]) -> std::result::Result<StoredRanking, String> {
    let record: RankingRecordJson =
        serde_json::from_slice(value).map_err(|error| format!("the record does not decode: {error}"))?;
    if record.product_id != product.as_str() {
        return Err(format!("the record names product {}", record.product_id));
    }
    if record.slots.len() > usize::from(MAX_RANK) {
        return Err(format!("the record has {} slots", record.slots.len()));
    }
    let mut slots: Vec<RankSlot> = Vec::with_capacity(record.slots.len());
    for (slot, rank) in record.slots.into_iter().zip(1..) {
        let comment = CommentKey::parse(slot.comment.as_bytes()).map_err(|error| error.to_string())?;
        if slot.rank != rank || comment.product_id() != *product || slots.iter().any(|seen| seen.comment == comment) {
            return Err(format!("slot {rank} is out of order, another product's, or a repeat"));
        }
        slots.push(RankSlot { rank, comment, score: Some(slot.score) });
    }
    Ok(StoredRanking { slots, as_of_ms: Some(record.as_of), summary: record.summary })
}

impl Store {
    /// Reads `product`'s ranking: the ranking record when the product has one
    /// (one get, the common case: every product this project ranked), else
    /// its slots (one scan), each comment kept at its best rank only (slots
    /// of two rankings seen at once).
    pub async fn ranking(&self, product: &Id) -> Result<StoredRanking> {
        Ok(self.rankings(std::slice::from_ref(product)).await?.remove(0))
    }

    /// [`Store::ranking`] for many products, lined up with `products`: their
    /// records in one multi-get, then the slots of each product without one
    /// (one scan each, side by side).
    pub async fn rankings(&self, products: &[Id]) -> Result<Vec<StoredRanking>> {
        let records = self.ranking_records(products).await?;
        futures_util::future::try_join_all(products.iter().zip(records).map(|(product, record)| async move {
            match record {
                Some(record) => Ok(record),
                None => self.ranking_from_slots(product).await,
            }
        }))
        .await
    }

    /// Reads `product`'s ranking from its slots alone (one scan), for a
    /// product without a ranking record: each comment kept at its best rank
    /// (slots of two rankings seen at once).
    async fn ranking_from_slots(&self, product: &Id) -> Result<StoredRanking> {
        let table = self.tables().product_comment_rank.clone();
        let prefix = keys::rank_prefix(product);
        let spec = ScanSpec {
            start: prefix.clone(),
            stop: keys::prefix_successor(&prefix),
            limit: RANKING_READ_ROWS,
            page_size: RANKING_READ_ROWS,
            columns: vec![COLUMN_VALUE.to_vec(), COLUMN_SCORE.to_vec()],
            cache_blocks: true,
        };
        let rows = self.hbase().read_scan(&table, spec, None).await?;
        let mut slots: Vec<RankSlot> = Vec::with_capacity(rows.len());
        for slot in self.decode_slots(&table, rows) {
            if slots.iter().any(|kept| kept.comment == slot.comment) {
                let detail = format_args!("slot {} repeats comment {}", slot.rank, slot.comment);
                skip_row(self.tables(), &table, SkipReason::RepeatedSlot, &keys::rank_key(product, slot.rank), &detail);
                continue;
            }
            slots.push(slot);
        }
        Ok(StoredRanking { slots, as_of_ms: None, summary: None })
    }

    /// The ranking records of `products` in one multi-get, lined up with
    /// `products`: `None` for a product without a record (never ranked by
    /// this project) or whose record does not decode (skipped and counted as
    /// `bad_json`). For reads that want the summaries alone.
    pub async fn ranking_records(&self, products: &[Id]) -> Result<Vec<Option<StoredRanking>>> {
        let table = self.tables().product_comment_rank.clone();
        let keys: Vec<Vec<u8>> = products.iter().map(keys::ranking_record_key).collect();
        let values = self.page_values(&table, keys.clone()).await?;
        Ok(products
            .iter()
            .zip(&keys)
            .map(|(product, key)| {
                let value = values.get(key)?;
                decode_record(product, value)
                    .inspect_err(|reason| skip_row(self.tables(), &table, SkipReason::BadJson, key, reason))
                    .ok()
            })
            .collect())
    }

    /// Reads `product`'s rank slots as the Java service does (the ranking
    /// record is not read), best first. Slots that do not decode are skipped.
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
        let rows = self.hbase().read_scan(&table, spec, None).await?;
        Ok(self.decode_slots(&table, rows).collect())
    }

    /// The slots among `rows` of `table`, in key order; rows that are not a
    /// slot with a comment key are skipped and counted.
    fn decode_slots<'a>(&'a self, table: &'a str, rows: Vec<Row>) -> impl Iterator<Item = RankSlot> + 'a {
        rows.into_iter().filter_map(move |row| {
            let rank = match keys::parse_rank_key(&row.key) {
                Ok(parsed) => parsed.rank,
                Err(error) => {
                    skip_row(self.tables(), table, SkipReason::BadKey, &row.key, &error);
                    return None;
                }
            };
            let comment = match row.value(COLUMN_VALUE).map(CommentKey::parse) {
                Some(Ok(comment)) => comment,
                Some(Err(error)) => {
                    skip_row(self.tables(), table, SkipReason::BadValue, &row.key, &error);
                    return None;
                }
                None => {
                    skip_row(self.tables(), table, SkipReason::NoValue, &row.key, &"the slot has no cf:q");
                    return None;
                }
            };
            let score =
                row.value(COLUMN_SCORE).and_then(|bytes| <[u8; 8]>::try_from(bytes).ok()).map(f64::from_be_bytes);
            Some(RankSlot { rank, comment, score })
        })
    }

    /// Writes `ranking`: its record, and its slots as the Java service reads them.
    pub async fn write_ranking(&self, ranking: &ProductRanking) -> Result<()> {
        self.write_rankings(std::slice::from_ref(ranking)).await
    }

    /// Writes several products' rankings in one `mutateRows` round trip, each
    /// as [`Store::write_ranking`] does. Batch jobs group products finishing
    /// together this way, which saves HBase a call (and a WAL sync) per product.
    pub async fn write_rankings(&self, rankings: &[ProductRanking]) -> Result<()> {
        let table = self.tables().product_comment_rank.clone();
        let mutations: Vec<RowMutation> = rankings.iter().flat_map(ProductRanking::mutations).collect();
        self.hbase().run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product() -> Id {
        Id::parse("productId", "PRODUCT001").expect("id")
    }

    fn comment(order: &str) -> CommentKey {
        CommentKey::new(&Id::parse("orderId", order).expect("id"), &product())
    }

    #[test]
    fn a_record_reads_back_as_the_ranking_it_was_written_from() {
        let ranking = ProductRanking {
            product: product(),
            as_of_ms: 1_700_000_000_000,
            ranked: vec![(comment("ORDER00002"), 0.75), (comment("ORDER00001"), 0.5)],
            summary: ReviewSummary { rated: [0, 0, 0, 1, 1], unrated: 1, with_photos: 1 },
        };
        let json: serde_json::Value = serde_json::from_slice(&ranking.record_json()).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "productId": "PRODUCT001",
                "asOf": 1_700_000_000_000_i64,
                "slots": [
                    {"rank": 1, "comment": "ORDER00002PRODUCT001", "score": 0.75},
                    {"rank": 2, "comment": "ORDER00001PRODUCT001", "score": 0.5},
                ],
                "summary": {"count": 3, "ratings": {"1": 0, "2": 0, "3": 0, "4": 1, "5": 1}, "unrated": 1,
                            "average": 4.5, "withPhotos": 1},
            })
        );
        let read = decode_record(&product(), &ranking.record_json()).expect("decodes");
        assert_eq!(read.as_of_ms, Some(1_700_000_000_000));
        assert_eq!(read.summary, Some(ranking.summary));
        let slots: Vec<_> = read.slots.iter().map(|slot| (slot.rank, slot.comment, slot.score)).collect();
        assert_eq!(slots, vec![(1, comment("ORDER00002"), Some(0.75)), (2, comment("ORDER00001"), Some(0.5))]);
    }

    #[test]
    fn a_ranking_writes_its_record_and_all_ten_slots() {
        let ranking = ProductRanking {
            product: product(),
            as_of_ms: 1,
            ranked: vec![(comment("ORDER00001"), 0.5)],
            summary: ReviewSummary::default(),
        };
        let mutations = ranking.mutations();
        assert_eq!(mutations.len(), 11);
        assert!(matches!(&mutations[0], RowMutation::Put { key, .. } if *key == keys::ranking_record_key(&product())));
        assert!(matches!(&mutations[1], RowMutation::Put { key, .. } if *key == keys::rank_key(&product(), 1)));
        assert!(mutations[2..].iter().all(|mutation| matches!(mutation, RowMutation::Delete { .. })));
    }

    #[test]
    fn a_record_that_is_not_one_whole_ranking_of_the_product_is_refused() {
        let record = |slots: serde_json::Value| {
            serde_json::to_vec(&serde_json::json!({"productId": "PRODUCT001", "asOf": 1, "slots": slots}))
                .expect("json")
        };
        let slot = |rank: u16, order: &str| serde_json::json!({"rank": rank, "comment": format!("{order}PRODUCT001"), "score": 0.5});
        assert!(decode_record(&product(), &record(serde_json::json!([slot(1, "ORDER00001")]))).is_ok());
        assert!(decode_record(&product(), &record(serde_json::json!([slot(2, "ORDER00001")]))).is_err(), "gap");
        let repeated = serde_json::json!([slot(1, "ORDER00001"), slot(2, "ORDER00001")]);
        assert!(decode_record(&product(), &record(repeated)).is_err(), "a comment twice");
        let other = serde_json::json!([{"rank": 1, "comment": "ORDER00001PRODUCT002", "score": 0.5}]);
        assert!(decode_record(&product(), &record(other)).is_err(), "another product's comment");
        let other_product = Id::parse("productId", "PRODUCT002").expect("id");
        assert!(decode_record(&other_product, &record(serde_json::json!([]))).is_err(), "another product's record");
        assert!(decode_record(&product(), b"{not json").is_err());
    }
}
