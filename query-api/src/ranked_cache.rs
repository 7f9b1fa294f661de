//! The ranked-read cache and what it holds: each product's [`Ranking`] and
//! review summary, their answers rendered once when loaded, weighed in bytes.
//!
//! [`crate::state::AppState::ranking`] fills it from the store; this module
//! does no I/O.

use axum::body::Bytes;
use common::Id;
use moka::future::Cache;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

use crate::config::Settings;
use crate::views::{RankedComment, RankedPage, ReviewSummaryView, SeedCommentsPage};

/// The ranked-read cache: bounded by bytes (each ranking weighed by
/// [`Ranking::weight_bytes`]), not by entries, because one ranking of ten
/// 64 KiB comments weighs as much as two hundred typical ones.
///
/// A ranking is fresh for `--ranked-cache-ttl-ms` from the start of its read
/// ([`Ranking::read_at`]) and stays one more TTL, expired: then one request
/// reloads it while the others are answered from the expiring copy
/// ([`crate::state::AppState::ranking`]).
pub fn build(settings: &Settings) -> Cache<Id, Arc<Ranking>> {
    Cache::builder()
        .name("ranked")
        .weigher(|_product: &Id, ranking: &Arc<Ranking>| u32::try_from(ranking.weight_bytes()).unwrap_or(u32::MAX))
        .max_capacity(settings.ranked_cache_max_bytes.max(1))
        .time_to_live(settings.ranked_cache_ttl.saturating_mul(2))
        .build()
}

/// A product's ranking as served: the ranked comments and the product's review
/// summary, and the full answers of the ranked routes and of the summary route
/// rendered once when the ranking is loaded.
///
/// Rankings sit in the cache and are read far more often than they change, so
/// a cache hit for the whole ranking (any `limit` of 10 or more) writes
/// prepared bytes instead of serialising ten comments again.
#[derive(Debug)]
pub struct Ranking {
    comments: Vec<RankedComment>,
    summary: Option<ReviewSummaryView>,
    v1_body: Option<Bytes>,
    seed_body: Option<Bytes>,
    summary_body: Option<Bytes>,
    read_at: Instant,
}

impl Ranking {
    /// A ranking of `comments`, best first, beside the product's `summary`,
    /// read from HBase by a read that began at `read_at`.
    pub fn new(comments: Vec<RankedComment>, summary: Option<ReviewSummaryView>, read_at: Instant) -> Ranking {
        // Rendering these plain structs cannot fail; if it ever did, each
        // request would render (and report) on its own.
        let v1_body = render(&RankedPage::of(&comments, summary.as_ref())).ok();
        let seed_body = render(&SeedCommentsPage::of_ranked(&comments)).ok();
        let summary_body = summary.as_ref().and_then(|summary| render(summary).ok());
        Ranking { comments, summary, v1_body, seed_body, summary_body, read_at }
    }

    /// When the HBase read of this ranking began: its age is counted from here.
    pub fn read_at(&self) -> Instant {
        self.read_at
    }

    /// The bytes this ranking holds, as the ranked-read cache weighs it: the
    /// rendered answers (both ranked reads and the summary), the comments
    /// (weighed by their JSON in the `/v1` answer, which spells out every
    /// string they hold), and a fixed overhead for the structs and the cache's
    /// own entry.
    pub fn weight_bytes(&self) -> u64 {
        const ENTRY_OVERHEAD_BYTES: usize = 1024;
        let rendered = |body: &Option<Bytes>| body.as_ref().map_or(0, Bytes::len);
        let comments_json = match &self.v1_body {
            Some(body) => body.len(),
            // Never seen (rendering plain structs does not fail); weigh the worst case.
            None => self.comments.len() * common::store::MAX_CONTENT_BYTES,
        };
        let structs = self.comments.len() * std::mem::size_of::<RankedComment>();
        let total = rendered(&self.v1_body)
            + rendered(&self.seed_body)
            + rendered(&self.summary_body)
            + comments_json
            + structs
            + ENTRY_OVERHEAD_BYTES;
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// The ranked comments, best first.
    pub fn comments(&self) -> &[RankedComment] {
        &self.comments
    }

    /// The product's review summary; `None` when no run has counted it.
    pub fn summary(&self) -> Option<&ReviewSummaryView> {
        self.summary.as_ref()
    }

    /// The `/v1` answer showing the best `limit` comments and the summary.
    pub fn v1_body(&self, limit: usize) -> Result<Bytes, serde_json::Error> {
        match &self.v1_body {
            Some(body) if limit >= self.comments.len() => Ok(body.clone()),
            _ => render(&RankedPage::of(&self.comments[..limit.min(self.comments.len())], self.summary.as_ref())),
        }
    }

    /// The summary route's answer; `None` when no run has counted the product.
    pub fn summary_body(&self) -> Option<Result<Bytes, serde_json::Error>> {
        let summary = self.summary.as_ref()?;
        Some(self.summary_body.clone().map_or_else(|| render(summary), Ok))
    }

    /// The seed's answer showing the best `limit` comments.
    pub fn seed_body(&self, limit: usize) -> Result<Bytes, serde_json::Error> {
        match &self.seed_body {
            Some(body) if limit >= self.comments.len() => Ok(body.clone()),
            _ => render(&SeedCommentsPage::of_ranked(&self.comments[..limit.min(self.comments.len())])),
        }
    }
}

fn render(value: &impl Serialize) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(value).map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use common::model::Comment;

    use super::*;

    fn comment() -> Comment {
        serde_json::from_value(serde_json::json!({
            "orderId": "ORDER00001", "productId": "PRODUCT001", "userId": "USER000001",
            "content": "fine", "timestamp": 1_700_000_000_000_i64, "edited": false
        }))
        .expect("comment")
    }

    #[test]
    fn prepared_ranking_bodies_equal_freshly_rendered_ones() {
        let ranked: Vec<RankedComment> = (1..=3)
            .map(|rank| RankedComment { comment: comment(), rank, score: Some(1.0 / f64::from(rank)), author: None })
            .collect();
        let product = common::Id::parse("productId", "PRODUCT001").expect("id");
        let counted = common::summary::ReviewSummary { rated: [0, 0, 0, 0, 3], ..Default::default() };
        let summary = ReviewSummaryView::new(&product, &counted, 1, true);
        let ranking = Ranking::new(ranked.clone(), Some(summary.clone()), Instant::now());
        let parse = |bytes: Bytes| serde_json::from_slice::<serde_json::Value>(&bytes).expect("json");
        let full = parse(ranking.v1_body(20).expect("v1"));
        assert_eq!(full, serde_json::to_value(RankedPage::of(&ranked, Some(&summary))).expect("json"));
        assert_eq!(full["summary"]["count"], 3);
        let alone = parse(ranking.summary_body().expect("a summary").expect("rendered"));
        assert_eq!(alone, serde_json::to_value(&summary).expect("json"));
        assert!(Ranking::new(ranked.clone(), None, Instant::now()).summary_body().is_none());
        assert!(parse(Ranking::new(ranked.clone(), None, Instant::now()).v1_body(20).expect("v1"))["summary"].is_null());
        assert_eq!(full["comments"].as_array().map(Vec::len), Some(3));
        assert!(full["nextCursor"].is_null());
        let two = parse(ranking.v1_body(2).expect("v1"));
        assert_eq!(two["comments"].as_array().map(Vec::len), Some(2));
        assert_eq!(two["summary"], full["summary"], "a shorter page carries the same summary");
        assert_eq!(two["comments"][1]["rank"], 2);
        let seed = parse(ranking.seed_body(1).expect("seed"));
        assert_eq!(seed["comments"].as_array().map(Vec::len), Some(1));
        assert!(seed["comments"][0].get("rank").is_none());
        assert!(seed["nextIndexKey"].is_null());
        assert_eq!(parse(ranking.seed_body(100).expect("seed"))["comments"].as_array().map(Vec::len), Some(3));
    }
}
