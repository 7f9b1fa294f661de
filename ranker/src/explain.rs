//! `ranker explain`: how one product's ranking comes about. It ranks the
//! product exactly as a run would (without writing), then shows every term of
//! each pick's score and the notable comments that were left out: those that
//! ranked above the last pick but repeat a picked content or author, and
//! too-short comments that would otherwise have made the list.

use std::collections::HashMap;
use std::sync::Arc;

use common::keys::CommentKey;
use common::model::Comment;
use common::store::Store;
use common::summary::ReviewSummary;
use common::Id;
use serde::Serialize;

use crate::config::ScoringConfig;
use crate::fetch::CommentFetcher;
use crate::pace::Pacer;
use crate::product::{stream_comments, IndexReader, StreamOptions, StreamTotals};
use crate::score::{score_terms, ScoreTerms};
use crate::select::{rank_order, Candidate, PassReason, Selection, TopComments, MAX_PICKS};
use crate::RankerError;

/// Characters of content shown per comment.
const PREVIEW_CHARS: usize = 80;
/// Keys per multi-get when fetching the comments to show.
const FETCH_BATCH: usize = 1_000;

/// How one product's ranking came about.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The product.
    pub product: String,
    /// The as-of time of the recency term.
    pub as_of_ms: i64,
    /// The scoring parameters used.
    pub scoring: ScoringConfig,
    /// Comments read and scored.
    pub comments_scored: u64,
    /// Rows skipped (bad index rows, comments gone or undecodable).
    pub skipped_rows: u64,
    /// The product's review summary, as a run writes it beside the slots.
    pub reviews: ReviewSummary,
    /// The picks, rank 1 first.
    pub ranked: Vec<ExplainedComment>,
    /// Notable comments that were not picked, in the order they ranked.
    pub left_out: Vec<LeftOut>,
}

/// One comment as `explain` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CommentSummary {
    /// The comment's row key (orderId then productId).
    pub comment: String,
    /// Its author.
    pub user_id: String,
    /// When it was written, epoch ms.
    pub timestamp_ms: i64,
    /// Helpful votes (0 when absent).
    pub helpful: u64,
    /// Unhelpful votes (0 when absent).
    pub unhelpful: u64,
    /// Attached photos (0 when absent).
    pub photos: u32,
    /// Every term of its score.
    pub terms: ScoreTerms,
    /// The start of its content, on one line; `None` when the stored content is `null`.
    pub content_preview: Option<String>,
}

/// A pick and its rank.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainedComment {
    /// 1 (best) to 10.
    pub rank: u16,
    /// The comment.
    #[serde(flatten)]
    pub summary: CommentSummary,
}

/// A comment that was not picked, and why.
#[derive(Debug, Clone, Serialize)]
pub struct LeftOut {
    /// Why it was not picked.
    pub reason: LeftOutReason,
    /// The comment.
    #[serde(flatten)]
    pub summary: CommentSummary,
}

/// Why a notable comment was not picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum LeftOutReason {
    /// Fewer characters than the minimum.
    TooShort {
        /// Its length in characters.
        chars: usize,
        /// The minimum.
        min_chars: usize,
    },
    /// Its normalised content equals the pick at `rank`.
    DuplicateContent {
        /// The pick it repeats.
        rank: u16,
    },
    /// Its author already has the pick at `rank`.
    SameUser {
        /// The author's pick.
        rank: u16,
    },
}

/// The best too-short comments, by the score they would have had; bounded.
#[derive(Debug, Default)]
struct TooShort {
    best: Vec<Candidate>,
}

impl TooShort {
    fn offer(&mut self, comment: &Comment, terms: ScoreTerms) {
        self.best.push(Candidate::new(comment, &terms));
        if self.best.len() >= 2 * MAX_PICKS {
            self.best.sort_unstable_by(rank_order);
            self.best.truncate(MAX_PICKS);
        }
    }

    fn into_sorted(mut self) -> Vec<Candidate> {
        self.best.sort_unstable_by(rank_order);
        self.best.dedup_by(|later, earlier| later.comment == earlier.comment);
        self.best.truncate(MAX_PICKS);
        self.best
    }
}

/// Ranks `product` as a run at `as_of_ms` would, writing nothing, and explains the result.
pub async fn explain(
    store: &Store,
    product: &Id,
    as_of_ms: i64,
    scoring: &ScoringConfig,
    page_rows: usize,
) -> Result<Explanation, RankerError> {
    scoring.validate()?;
    let (selection, too_short, totals) = rank_like_a_run(store, product, as_of_ms, scoring, page_rows).await?;
    let left_out = notable_left_out(&selection, too_short, scoring);
    let wanted: Vec<CommentKey> = selection
        .picks
        .iter()
        .map(|pick| pick.comment)
        .chain(left_out.iter().map(|(candidate, _)| candidate.comment))
        .collect();
    let comments = fetch(store, &wanted).await?;
    let summary = |key: &CommentKey| comments.get(key).map(|comment| summarize(scoring, comment, as_of_ms));
    let ranked = selection
        .picks
        .iter()
        .zip(1u16..)
        .filter_map(|(pick, rank)| summary(&pick.comment).map(|summary| ExplainedComment { rank, summary }))
        .collect();
    let left_out = left_out
        .into_iter()
        .filter_map(|(candidate, reason)| {
            let summary = summary(&candidate.comment)?;
            let reason = match reason {
                LeftOutReason::TooShort { min_chars, .. } => {
                    LeftOutReason::TooShort { chars: summary.terms.chars, min_chars }
                }
                other => other,
            };
            Some(LeftOut { reason, summary })
        })
        .collect();
    Ok(Explanation {
        product: product.to_string(),
        as_of_ms,
        scoring: scoring.clone(),
        comments_scored: totals.listed,
        skipped_rows: totals.skipped_rows,
        reviews: totals.summary,
        ranked,
        left_out,
    })
}

/// Streams `product`'s comments through the selection a run makes, keeping
/// aside the best of those too short to rank: the selection, those, and what
/// the stream read.
async fn rank_like_a_run(
    store: &Store,
    product: &Id,
    as_of_ms: i64,
    scoring: &ScoringConfig,
    page_rows: usize,
) -> Result<(Selection, TooShort, StreamTotals), RankerError> {
    let config = Arc::new(scoring.clone());
    let work = move |(pool, too_short): &mut (TopComments, TooShort), comments: Vec<Comment>| {
        pool.offer_comments(&config, as_of_ms, &comments, Some(&mut |comment, terms| too_short.offer(comment, terms)));
    };
    let state = (TopComments::new(MAX_PICKS), TooShort::default());
    let pacer = Pacer::unlimited();
    let index = IndexReader::for_product(store, product, None, page_rows.max(1), &pacer);
    let fetcher = CommentFetcher::new(store.clone(), pacer, page_rows);
    // The reviews the run as of the same time would count in its summary.
    let options = StreamOptions { progress: None, marker: None, summary_through_ms: as_of_ms };
    let ((pool, too_short), totals) = stream_comments(index, &fetcher, state, work, options).await?;
    Ok((pool.finish(), too_short, totals))
}

/// The comments worth saying why they were left out, best first: those the
/// selection passed over (a duplicate, a second by one user), and the too
/// short ones that would have ranked above the last pick, or any when the
/// list had room.
fn notable_left_out(
    selection: &Selection,
    too_short: TooShort,
    scoring: &ScoringConfig,
) -> Vec<(Candidate, LeftOutReason)> {
    let last_pick = (selection.picks.len() == MAX_PICKS).then(|| selection.picks[MAX_PICKS - 1]);
    let too_short = too_short
        .into_sorted()
        .into_iter()
        .filter(|candidate| last_pick.is_none_or(|last| rank_order(candidate, &last).is_lt()));
    let mut left_out: Vec<(Candidate, LeftOutReason)> = selection
        .passed_over
        .iter()
        .map(|passed| {
            let reason = match passed.reason {
                PassReason::DuplicateContent { rank } => LeftOutReason::DuplicateContent { rank },
                PassReason::SameUser { rank } => LeftOutReason::SameUser { rank },
            };
            (passed.candidate, reason)
        })
        .chain(
            too_short.map(|candidate| (candidate, LeftOutReason::TooShort { chars: 0, min_chars: scoring.min_chars })),
        )
        .collect();
    left_out.sort_by(|(left, _), (right, _)| rank_order(left, right));
    left_out
}

async fn fetch(store: &Store, keys: &[CommentKey]) -> Result<HashMap<CommentKey, Comment>, RankerError> {
    let mut found = HashMap::with_capacity(keys.len());
    for batch in keys.chunks(FETCH_BATCH) {
        for comment in store.get_comments(batch).await?.into_iter().flatten() {
            found.insert(comment.row_key(), comment);
        }
    }
    Ok(found)
}

fn summarize(scoring: &ScoringConfig, comment: &Comment, as_of_ms: i64) -> CommentSummary {
    // One line per comment: runs of white space (line breaks included) shown as one space.
    let mut words = comment.text().split_whitespace().flat_map(|word| std::iter::once(' ').chain(word.chars())).skip(1);
    let mut content_preview: String = words.by_ref().take(PREVIEW_CHARS).collect();
    if words.next().is_some() {
        content_preview.push('…');
    }
    CommentSummary {
        comment: comment.row_key().to_string(),
        user_id: comment.user_id.to_string(),
        timestamp_ms: comment.timestamp,
        helpful: comment.helpful.unwrap_or(0),
        unhelpful: comment.unhelpful.unwrap_or(0),
        photos: comment.photos.unwrap_or(0),
        terms: score_terms(scoring, comment, as_of_ms),
        content_preview: comment.content.is_some().then_some(content_preview),
    }
}
