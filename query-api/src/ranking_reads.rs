//! A product's ranking and its review summary as served, and the summaries
//! of a listing page: how they are loaded from the store and when the cache
//! answers instead.
//!
//! A summary is current when it is loaded: the count the last ranking run
//! wrote in the product's ranking record, plus the reviews listed after the
//! run's as-of time, counted at read time
//! ([`common::store::summaries`]). Under the ranked-read cache a summary is
//! as old as the ranking it came with: at most the cache's TTL, plus one
//! reload while a product's expired ranking is being reloaded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use common::keys;
use common::store::summaries::ListedSummary;
use common::store::SkipReason;
use common::summary::ReviewSummary;
use common::Id;

use crate::error::ApiError;
use crate::prepared_ranking::Ranking;
use crate::ranking_batches::{LoadedReads, LIVE_SUMMARY_MAX_ROWS};
use crate::state::AppState;
use crate::views::{RankedComment, ReviewSummaryView};

/// `product`'s ranked comments and summary, from the ranked-read cache when
/// it holds them fresh (see [`crate::ranked_cache::RankedCache::get_or_load`]).
pub async fn ranking(state: &AppState, product: Id) -> Result<Arc<Ranking>, ApiError> {
    let ranking = state.ranked_cache().get_or_load(product, || load_ranking(state, product)).await?;
    ranking.note_origin();
    Ok(ranking)
}

/// The review summaries of `products`, lined up with them (`None` for a
/// product with no review), and when the oldest HBase read behind them began.
///
/// From the ranked-read cache where it holds the product fresh; the rest
/// from their ranking records in one multi-get and their reviews newer than
/// each record in one scan (and one multi-get when it finds any), however
/// many products are named. Loaded summaries are not cached: the cache holds
/// whole rankings.
pub async fn listing_summaries(
    state: &AppState,
    products: &[Id],
) -> Result<(Vec<Option<ReviewSummaryView>>, Instant), ApiError> {
    let mut read_at = Instant::now();
    let mut found: HashMap<Id, Option<ReviewSummaryView>> = HashMap::new();
    for product in products {
        if let Some(ranking) = state.ranked_cache().fresh(product) {
            ranking.note_origin();
            read_at = read_at.min(ranking.read_at());
            found.insert(*product, ranking.summary().cloned());
        }
    }
    let mut missing: Vec<Id> = products.iter().filter(|product| !found.contains_key(product)).copied().collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        let records = state.store().ranking_records(&missing).await?;
        let counted: Vec<Option<(ReviewSummary, i64)>> =
            records.into_iter().map(|record| record.and_then(|record| record.counted())).collect();
        let asked: Vec<(Id, Option<i64>)> = missing
            .iter()
            .zip(&counted)
            .map(|(product, counted)| (*product, counted.map(|(_, as_of)| as_of)))
            .collect();
        let newer = state.store().summaries_after(&asked, LIVE_SUMMARY_MAX_ROWS).await?;
        for ((product, counted), newer) in missing.into_iter().zip(counted).zip(newer) {
            found.insert(product, with_newer(&product, counted, newer));
        }
    }
    let summaries = products.iter().map(|product| found.get(product).cloned().flatten()).collect();
    Ok((summaries, read_at))
}

/// Loads `product`'s ranking: its record (or its slots without one), its
/// reviews newer than the record, and its ranked comments, read with the
/// loads of other products asking at the same moment ([`crate::ranking_batches`]);
/// slots whose comment is gone (or belongs to another product) are left out.
pub async fn load_ranking(state: &AppState, product: Id) -> common::Result<Arc<Ranking>> {
    let read_at = Instant::now();
    let LoadedReads { ranking, newer, comments, from_replica } = state.loads().load(product).await?;
    let counted = ranking.counted();
    let store = state.store();
    let ranked = ranking
        .slots
        .into_iter()
        .zip(comments)
        .filter_map(|(slot, comment)| {
            // A slot naming another product's comment can only come from a bad
            // write (the seed's upsert route took any key); showing it would
            // put one product's review on another's page.
            if slot.comment.product_id() != product {
                store.count_skipped_row(
                    &store.tables().product_comment_rank,
                    SkipReason::OtherProduct,
                    &keys::rank_key(&product, slot.rank),
                    &format_args!("rank {} of product {product} names comment {}", slot.rank, slot.comment),
                );
                return None;
            }
            comment.map(|comment| RankedComment::new(comment, slot.rank, slot.score))
        })
        .collect();
    // Offered in compressed variants, each made once, only when the cache
    // will serve the ranking again and again.
    let compress = !state.settings().ranked_cache_ttl.is_zero();
    let ranking = Ranking::new(ranked, with_newer(&product, counted, newer), read_at, compress);
    Ok(Arc::new(ranking.read_from_replica(from_replica)))
}

/// The run's count (`counted`: the summary and the run's as-of time, when a
/// run counted the product) plus the reviews counted after it; `None` when no
/// run counted the product and it lists no review.
fn with_newer(product: &Id, counted: Option<(ReviewSummary, i64)>, newer: ListedSummary) -> Option<ReviewSummaryView> {
    match counted {
        Some((mut summary, as_of_ms)) => {
            summary.merge(&newer.summary);
            Some(ReviewSummaryView::new(product, &summary, as_of_ms, newer.complete))
        }
        None if newer.summary.count() > 0 => Some(ReviewSummaryView::new(product, &newer.summary, 0, newer.complete)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product() -> Id {
        Id::parse("productId", "PRODUCT001").expect("id")
    }

    #[test]
    fn a_summary_adds_the_newer_reviews_to_the_runs_count_and_exists_only_with_a_review() {
        let counted = ReviewSummary { rated: [0, 0, 0, 1, 2], unrated: 0, with_photos: 1 };
        let newer =
            ListedSummary { summary: ReviewSummary { rated: [1, 0, 0, 0, 0], ..Default::default() }, complete: false };
        let view = with_newer(&product(), Some((counted, 7)), newer).expect("a summary");
        assert_eq!((view.count, view.ratings.one, view.as_of, view.complete), (4, 1, 7, false));
        let never_ranked = with_newer(&product(), None, newer).expect("counted at read time");
        assert_eq!((never_ranked.count, never_ranked.as_of), (1, 0));
        assert!(with_newer(&product(), None, ListedSummary { complete: true, ..Default::default() }).is_none());
    }
}
