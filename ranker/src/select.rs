//! Choosing a product's best comments: the tie order, the greedy pick with
//! duplicate-content and one-per-user filtering, and an exact top-k in bounded
//! memory. Pure logic; parallel scoring with rayon, no I/O.
//!
//! # Why a ten-element heap is not enough
//!
//! The picks are defined (docs/contract.md §6) by sorting every eligible comment
//! and walking the list greedily, skipping a comment whose content or author
//! was already picked. A plain heap of the ten best scores is wrong: if the
//! best eleven comments are all by one user, the right answer contains ten
//! comments from further down, which the heap has thrown away. The greedy walk
//! is not even monotone: adding one comment can *unblock* others (a new best
//! comment that shares the content of the old first pick knocks it out, and
//! with it the reason a third comment, by that pick's author, was skipped).
//!
//! # The bounded pool, and why it is exact
//!
//! [`TopComments`] keeps a pool of candidates and, whenever it fills up, sorts
//! it and drops candidates that can *never* be picked, whatever comments
//! arrive later. Dropping a comment that greedy does not pick never changes
//! what greedy picks (the walk skips it without changing any state), so the
//! pool's picks always equal the picks over every comment seen. With `m` the
//! number of picks (10), a candidate `c` is dropped when any of these holds
//! among the comments ranked before it:
//!
//! 1. **Dominated**: a better comment has the same author *and* the same
//!    content. Whenever that one is not picked (cap reached, author taken or
//!    content taken), the same reason stops `c`; when it is picked, `c`'s author is taken.
//! 2. **Per author**: `m` better, non-dominated comments by `c`'s author. They
//!    have pairwise different contents. For `c` to be picked its author must
//!    still be free, so each of them was skipped for its *content*, which means
//!    `m` different comments were picked before `c`: the cap is reached.
//! 3. **Per content**: `m` better, non-dominated comments with `c`'s content;
//!    by the mirror argument (their authors are pairwise different) `c` can
//!    only be picked after `m` other picks.
//! 4. **Matched out**: `2m` better comments that pairwise share neither author
//!    nor content (a matching). Greedy picks, among the comments better than
//!    `c`, a maximal set without shared authors or contents; each pick shares
//!    something with at most two members of the matching (one author, one
//!    content), and every member is picked or shares something with a pick, so
//!    at least `m` comments are picked before `c`. The pool uses the greedy
//!    walk itself (without the cap) to find such a matching, and remembers its
//!    `2m`-th pick as a cutoff: a later comment that ranks after the cutoff is
//!    refused before its content is even hashed.
//!
//! Each rule looks only at comments that really exist, so it stays true as more
//! arrive. After a prune the pool holds at most `2m` picks of the uncapped walk
//! plus, for each of them, at most `m - 1` other comments sharing its author and
//! `m - 1` sharing its content: `4m² - 2m` (380 for `m = 10`). The pool prunes
//! when it reaches about twice that, so its memory is constant however many
//! comments a product has, and sorting costs `O(log pool)` per comment.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use common::keys::CommentKey;
use common::model::Comment;
use common::Id;
use rayon::prelude::*;
use serde::Serialize;

use crate::config::ScoringConfig;
use crate::score::{is_eligible, score_terms, ContentFingerprint, ScoreTerms};

/// The number of rank slots: the most comments picked per product.
pub const MAX_PICKS: usize = common::keys::MAX_RANK as usize;

/// Receives each comment too short to be eligible, with its terms (for `explain`).
pub type TooShortHandler<'a> = &'a mut dyn FnMut(&Comment, ScoreTerms);

/// What selection needs to know about one eligible comment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The comment's score.
    pub score: f64,
    /// When it was written (epoch ms): the first tie-break, newer first.
    pub timestamp_ms: i64,
    /// The comment's row key: the last tie-break, smaller first.
    pub comment: CommentKey,
    /// Its author: at most one pick per author.
    pub user: Id,
    /// Its normalised content: at most one pick per content.
    pub content: ContentFingerprint,
}

impl Candidate {
    /// The candidate for `comment`, with its already computed `terms`.
    pub fn new(comment: &Comment, terms: &ScoreTerms) -> Candidate {
        Candidate {
            score: terms.score,
            timestamp_ms: comment.timestamp,
            comment: comment.row_key(),
            user: comment.user_id,
            content: ContentFingerprint::of(comment.text()),
        }
    }
}

/// The ranking order: higher score first, then newer timestamp, then smaller
/// comment row key. `Less` means `a` ranks before `b`. Total: two candidates
/// compare equal only when they name the same comment.
pub fn rank_order(a: &Candidate, b: &Candidate) -> Ordering {
    rank_order_of(a.score, a.timestamp_ms, &a.comment, b)
}

fn rank_order_of(score: f64, timestamp_ms: i64, comment: &CommentKey, other: &Candidate) -> Ordering {
    other
        .score
        .total_cmp(&score)
        .then_with(|| other.timestamp_ms.cmp(&timestamp_ms))
        .then_with(|| comment.cmp(&other.comment))
}

/// Why a comment that ranked above the last pick was not picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum PassReason {
    /// Its normalised content equals that of the pick at `rank`.
    DuplicateContent {
        /// The rank of the pick with the same content.
        rank: u16,
    },
    /// Its author already has the pick at `rank`.
    SameUser {
        /// The rank of the author's pick.
        rank: u16,
    },
}

/// A candidate the greedy walk skipped, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassedOver {
    /// The skipped comment.
    pub candidate: Candidate,
    /// Which pick blocked it.
    pub reason: PassReason,
}

/// The outcome of selection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// The picks, best first (rank 1 first); at most [`MAX_PICKS`].
    pub picks: Vec<Candidate>,
    /// Comments that ranked above the last pick (or anywhere, when fewer than
    /// the maximum were picked) but were skipped, in rank order. From
    /// [`TopComments`], only those still in its pool: a comment it dropped as
    /// never pickable (say, a third copy of a picked author's text) is not listed.
    pub passed_over: Vec<PassedOver>,
}

/// The reference definition of selection: sort every candidate and walk
/// greedily. Memory grows with the input; [`TopComments`] gives the same
/// answer in bounded memory, and the tests hold it to this one.
pub fn select_exhaustively(mut candidates: Vec<Candidate>, max_picks: usize) -> Selection {
    candidates.sort_unstable_by(rank_order);
    greedy_walk(candidates, max_picks)
}

/// Walks `sorted` (in rank order), picking greedily up to `max_picks`.
fn greedy_walk(mut sorted: Vec<Candidate>, max_picks: usize) -> Selection {
    // Two index rows can name one comment; it is one candidate.
    sorted.dedup_by(|later, earlier| later.comment == earlier.comment);
    let mut selection = Selection::default();
    let mut rank_of_user: HashMap<Id, u16> = HashMap::new();
    let mut rank_of_content: HashMap<ContentFingerprint, u16> = HashMap::new();
    for candidate in sorted {
        if selection.picks.len() >= max_picks {
            break;
        }
        let reason = if let Some(&rank) = rank_of_content.get(&candidate.content) {
            PassReason::DuplicateContent { rank }
        } else if let Some(&rank) = rank_of_user.get(&candidate.user) {
            PassReason::SameUser { rank }
        } else {
            let rank = u16::try_from(selection.picks.len() + 1).unwrap_or(u16::MAX);
            rank_of_user.insert(candidate.user, rank);
            rank_of_content.insert(candidate.content, rank);
            selection.picks.push(candidate);
            continue;
        };
        selection.passed_over.push(PassedOver { candidate, reason });
    }
    selection
}

/// The most candidates a pool holds right after a prune (see the module docs).
fn kept_bound(max_picks: usize) -> usize {
    (4 * max_picks * max_picks).saturating_sub(2 * max_picks).max(1)
}

/// An exact top-k under the greedy rules, in bounded memory (see the module docs).
#[derive(Debug, Clone)]
pub struct TopComments {
    max_picks: usize,
    capacity: usize,
    candidates: Vec<Candidate>,
    /// The `2m`-th pick of the uncapped walk at the last prune: whatever ranks
    /// after it can never be picked.
    cutoff: Option<Candidate>,
}

impl TopComments {
    /// A pool that picks up to `max_picks` comments.
    pub fn new(max_picks: usize) -> TopComments {
        TopComments::with_capacity(max_picks, 2 * kept_bound(max_picks) + 256)
    }

    /// A pool that prunes once it holds `capacity` candidates; raised, if need
    /// be, above what a prune may keep, so every prune frees room.
    pub fn with_capacity(max_picks: usize, capacity: usize) -> TopComments {
        let capacity = capacity.max(kept_bound(max_picks) + 1);
        TopComments { max_picks, capacity, candidates: Vec::with_capacity(capacity), cutoff: None }
    }

    /// The number of candidates held now.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Whether the pool holds no candidate.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// The most candidates this pool ever holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether a comment with this score, timestamp and key could still be
    /// picked; `false` means offering it would be wasted work.
    pub fn admits(&self, score: f64, timestamp_ms: i64, comment: &CommentKey) -> bool {
        self.cutoff.as_ref().is_none_or(|cutoff| rank_order_of(score, timestamp_ms, comment, cutoff) == Ordering::Less)
    }

    /// Adds one eligible comment.
    pub fn offer(&mut self, candidate: Candidate) {
        if !self.admits(candidate.score, candidate.timestamp_ms, &candidate.comment) {
            return;
        }
        if self.candidates.len() >= self.capacity {
            self.prune();
        }
        self.candidates.push(candidate);
    }

    /// Scores `comments` in parallel (rayon) and offers the eligible ones.
    /// Returns how many comments were scored. Too-short comments are handed
    /// to `on_too_short` when given (for `explain`).
    pub fn offer_comments(
        &mut self,
        config: &ScoringConfig,
        as_of_ms: i64,
        comments: &[Comment],
        on_too_short: Option<TooShortHandler<'_>>,
    ) -> u64 {
        let pool = &*self;
        let scored: Vec<(usize, ScoreTerms, Option<Candidate>)> = comments
            .par_iter()
            .enumerate()
            .filter_map(|(index, comment)| {
                let terms = score_terms(config, comment, as_of_ms);
                if !is_eligible(config, &terms) {
                    return Some((index, terms, None));
                }
                // Hashing the content is the costly part; skip it for comments
                // that rank after the cutoff and so can never be picked.
                pool.admits(terms.score, comment.timestamp, &comment.row_key())
                    .then(|| (index, terms, Some(Candidate::new(comment, &terms))))
            })
            .collect();
        let mut on_too_short = on_too_short;
        for (index, terms, candidate) in scored {
            match candidate {
                Some(candidate) => self.offer(candidate),
                None => {
                    if let Some(callback) = on_too_short.as_mut() {
                        callback(&comments[index], terms);
                    }
                }
            }
        }
        comments.len() as u64
    }

    /// Drops every candidate that can never be picked (rules 1 to 4 of the module docs).
    fn prune(&mut self) {
        let mut sorted = std::mem::take(&mut self.candidates);
        sorted.sort_unstable_by(rank_order);
        let max_picks = self.max_picks;
        let mut kept = Vec::with_capacity(self.capacity);
        let mut seen_comments: HashSet<CommentKey> = HashSet::new();
        let mut seen_pairs: HashSet<(Id, ContentFingerprint)> = HashSet::new();
        let mut per_user: HashMap<Id, usize> = HashMap::new();
        let mut per_content: HashMap<ContentFingerprint, usize> = HashMap::new();
        let mut picked_users: HashSet<Id> = HashSet::new();
        let mut picked_contents: HashSet<ContentFingerprint> = HashSet::new();
        for candidate in sorted {
            if !seen_comments.insert(candidate.comment) || !seen_pairs.insert((candidate.user, candidate.content)) {
                continue;
            }
            let by_user = per_user.entry(candidate.user).or_default();
            *by_user += 1;
            let by_content = per_content.entry(candidate.content).or_default();
            *by_content += 1;
            if *by_user > max_picks || *by_content > max_picks {
                continue;
            }
            kept.push(candidate);
            if !picked_users.contains(&candidate.user) && !picked_contents.contains(&candidate.content) {
                picked_users.insert(candidate.user);
                picked_contents.insert(candidate.content);
                if picked_users.len() == 2 * max_picks {
                    self.cutoff = Some(candidate);
                    break;
                }
            }
        }
        debug_assert!(kept.len() <= kept_bound(max_picks), "the pool kept {} candidates", kept.len());
        self.candidates = kept;
    }

    /// The picks over every comment offered.
    pub fn finish(mut self) -> Selection {
        self.candidates.sort_unstable_by(rank_order);
        greedy_walk(self.candidates, self.max_picks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::model::Extra;
    use proptest::prelude::*;

    const DAY_MS: i64 = 86_400_000;
    const AS_OF: i64 = 20_000 * DAY_MS;

    fn id(prefix: &str, number: usize) -> Id {
        Id::parse("id", &format!("{prefix}{number:0width$}", width = 10 - prefix.len())).expect("id")
    }

    /// A candidate with an explicit score; `content` and `user` are small
    /// numbers so that tests can make them collide on purpose.
    fn candidate(order: usize, score: f64, timestamp_ms: i64, user: usize, content: usize) -> Candidate {
        Candidate {
            score,
            timestamp_ms,
            comment: CommentKey::new(&id("O", order), &id("P", 1)),
            user: id("U", user),
            content: ContentFingerprint::of(&format!("content {content}")),
        }
    }

    fn comment(order: usize, user: usize, content: &str, age_days: i64, helpful: u64, photos: u32) -> Comment {
        Comment {
            order_id: id("O", order),
            product_id: id("P", 1),
            user_id: id("U", user),
            content: Some(content.to_owned()),
            timestamp: AS_OF - age_days * DAY_MS,
            edited: false,
            rating: None,
            helpful: Some(helpful),
            unhelpful: Some(0),
            photos: Some(photos),
            extra: Extra::new(),
        }
    }

    fn keys(selection: &Selection) -> Vec<CommentKey> {
        selection.picks.iter().map(|pick| pick.comment).collect()
    }

    fn rank_with_pool(comments: &[Comment], capacity: usize) -> Selection {
        let mut pool = TopComments::with_capacity(MAX_PICKS, capacity);
        for chunk in comments.chunks(7) {
            pool.offer_comments(&ScoringConfig::default(), AS_OF, chunk, None);
        }
        pool.finish()
    }

    #[test]
    fn one_comment_offered_twice_takes_one_slot_and_is_not_reported_as_left_out() {
        // Two index rows naming one comment (the Java service's double post in
        // one millisecond) reach the pool in different pages, with other
        // comments in between and after: one slot, no "same user" entry.
        let twice = comment(1, 1, "a long and thoughtful review of the product", 1, 9, 1);
        let others: Vec<Comment> =
            (2..30).map(|n| comment(n, n, &format!("another long enough review number {n}"), 2, 1, 0)).collect();
        let mut offered = vec![twice.clone()];
        offered.extend(others.iter().take(10).cloned());
        offered.push(twice.clone());
        offered.extend(others.iter().skip(10).cloned());
        for capacity in [MAX_PICKS, 4 * MAX_PICKS] {
            let selection = rank_with_pool(&offered, capacity);
            let picks = keys(&selection);
            assert_eq!(picks.iter().filter(|key| **key == twice.row_key()).count(), 1, "{picks:?}");
            assert_eq!(picks.len(), MAX_PICKS);
            assert!(selection.passed_over.iter().all(|passed| passed.candidate.comment != twice.row_key()));
        }
    }

    #[test]
    fn ties_break_on_newer_timestamp_then_smaller_row_key() {
        let a = candidate(2, 0.5, 100, 1, 1);
        let newer = candidate(3, 0.5, 200, 2, 2);
        let smaller_key = candidate(1, 0.5, 100, 3, 3);
        let better = candidate(9, 0.6, 0, 4, 4);
        let selection = select_exhaustively(vec![a, newer, smaller_key, better], MAX_PICKS);
        assert_eq!(keys(&selection), vec![better.comment, newer.comment, smaller_key.comment, a.comment]);
    }

    #[test]
    fn skips_duplicate_content_and_second_comments_by_a_picked_user() {
        let first = candidate(1, 0.9, 0, 1, 1);
        let same_content = candidate(2, 0.8, 0, 2, 1);
        let same_user = candidate(3, 0.7, 0, 1, 3);
        let fine = candidate(4, 0.6, 0, 4, 4);
        let selection = select_exhaustively(vec![same_user, fine, first, same_content], MAX_PICKS);
        assert_eq!(keys(&selection), vec![first.comment, fine.comment]);
        assert_eq!(
            selection.passed_over,
            vec![
                PassedOver { candidate: same_content, reason: PassReason::DuplicateContent { rank: 1 } },
                PassedOver { candidate: same_user, reason: PassReason::SameUser { rank: 1 } },
            ]
        );
    }

    #[test]
    fn a_ten_element_heap_would_be_wrong_but_the_pool_is_not() {
        // The eleven best comments are all by user 1; the right answer takes
        // one of them and nine comments from further down.
        let mut candidates: Vec<Candidate> = (0..11).map(|n| candidate(n, 0.9 - n as f64 * 0.001, 0, 1, n)).collect();
        candidates.extend((11..40).map(|n| candidate(n, 0.5 - n as f64 * 0.001, 0, n, n)));
        let expected = select_exhaustively(candidates.clone(), MAX_PICKS);
        assert_eq!(expected.picks.len(), 10);
        assert_eq!(expected.picks[0].comment, candidates[0].comment);
        assert!(expected.picks[1..].iter().all(|pick| pick.user != id("U", 1)));
        let mut pool = TopComments::new(MAX_PICKS);
        candidates.iter().for_each(|candidate| pool.offer(*candidate));
        assert_eq!(pool.finish().picks, expected.picks);
    }

    #[test]
    fn a_late_comment_can_unblock_earlier_ones() {
        // Before the late comment, user 2's second comment is blocked by their
        // first; the late comment takes the first's content and so frees user 2.
        let first_of_user = candidate(1, 0.8, 0, 2, 1);
        let second_of_user = candidate(2, 0.7, 0, 2, 2);
        let late = candidate(3, 0.9, 0, 3, 1);
        let mut all = vec![first_of_user, second_of_user];
        all.extend((0..40).map(|filler| candidate(100 + filler, 0.1, 0, 100 + filler, 100 + filler)));
        assert_eq!(select_exhaustively(all.clone(), 2).picks, vec![first_of_user, all[2]]);
        all.push(late);
        let mut pool = TopComments::with_capacity(2, 0);
        all.iter().for_each(|candidate| pool.offer(*candidate));
        let selection = pool.finish();
        assert_eq!(selection.picks, vec![late, second_of_user]);
        assert_eq!(selection.picks, select_exhaustively(all, 2).picks);
    }

    #[test]
    fn memory_stays_bounded_for_a_hundred_thousand_comments() {
        let mut pool = TopComments::new(MAX_PICKS);
        let mut all = Vec::new();
        for n in 0..100_000usize {
            // Few users and few contents: the worst case for the pruning rules.
            let candidate = candidate(n, ((n * 7919) % 10_007) as f64 / 10_007.0, n as i64, n % 37, n % 53);
            pool.offer(candidate);
            assert!(pool.len() <= pool.capacity());
            all.push(candidate);
        }
        assert_eq!(pool.finish().picks, select_exhaustively(all, MAX_PICKS).picks);
    }

    #[test]
    fn scoring_a_page_offers_only_eligible_comments_and_reports_short_ones() {
        let comments = vec![
            comment(1, 1, "too short", 0, 100, 3),
            comment(2, 2, "long enough to count", 0, 0, 0),
            comment(3, 3, "   tiny    ", 0, 0, 0),
        ];
        let mut pool = TopComments::new(MAX_PICKS);
        let mut too_short = Vec::new();
        let scored = pool.offer_comments(
            &ScoringConfig::default(),
            AS_OF,
            &comments,
            Some(&mut |comment: &Comment, terms: ScoreTerms| too_short.push((comment.order_id, terms.chars))),
        );
        assert_eq!(scored, 3);
        assert_eq!(too_short, vec![(id("O", 1), 9), (id("O", 3), 4)]);
        assert_eq!(keys(&pool.finish()), vec![comments[1].row_key()]);
    }

    /// Candidates with deliberately colliding users, contents and scores.
    fn candidates_strategy() -> impl Strategy<Value = Vec<Candidate>> {
        proptest::collection::vec((0u8..20, 0i64..4, 0usize..12, 0usize..12), 0..300).prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(order, (score, timestamp, user, content))| {
                    candidate(order, f64::from(score) / 20.0, timestamp, user, content)
                })
                .collect()
        })
    }

    /// Realistic comments: a few users write many, some texts repeat.
    fn comments_strategy() -> impl Strategy<Value = Vec<Comment>> {
        let texts = [
            "Great product, works well",
            "great  PRODUCT, works well ",
            "meh",
            "Arrived broken, sad.",
            "좋아요 정말 좋아요 추천합니다",
            "Exactly as described, would buy again.",
        ];
        proptest::collection::vec((0usize..15, 0usize..texts.len(), 0usize..40, 0i64..800, 0u64..50, 0u32..5), 0..120)
            .prop_map(move |rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(order, (user, text, padding, age, helpful, photos))| {
                        let content = format!("{}{}", texts[text], " and more".repeat(padding % 4));
                        comment(order, user, &content, age, helpful, photos)
                    })
                    .collect()
            })
    }

    proptest! {
        #[test]
        fn the_bounded_pool_equals_the_exhaustive_walk(candidates in candidates_strategy(), max_picks in 1usize..6) {
            let mut pool = TopComments::with_capacity(max_picks, 0);
            for candidate in &candidates {
                pool.offer(*candidate);
                prop_assert!(pool.len() <= pool.capacity());
            }
            let bounded = pool.finish();
            let exhaustive = select_exhaustively(candidates, max_picks);
            prop_assert_eq!(&bounded.picks, &exhaustive.picks);
            // The pool may have dropped some skipped comments for good; those it kept are reported alike.
            prop_assert!(bounded.passed_over.iter().all(|passed| exhaustive.passed_over.contains(passed)));
        }

        #[test]
        fn picks_are_few_distinct_and_independent_of_input_order(
            shuffled in comments_strategy().prop_flat_map(|comments| (Just(comments.clone()), Just(comments).prop_shuffle())),
        ) {
            let (comments, shuffled) = shuffled;
            let selection = rank_with_pool(&comments, 0);
            prop_assert!(selection.picks.len() <= MAX_PICKS);
            let users: HashSet<Id> = selection.picks.iter().map(|pick| pick.user).collect();
            let contents: HashSet<ContentFingerprint> = selection.picks.iter().map(|pick| pick.content).collect();
            prop_assert_eq!(users.len(), selection.picks.len());
            prop_assert_eq!(contents.len(), selection.picks.len());
            prop_assert_eq!(&rank_with_pool(&comments, 0), &selection, "deterministic");
            prop_assert_eq!(rank_with_pool(&shuffled, 0), selection, "independent of input order");
        }

        #[test]
        fn more_helpful_votes_never_lose_a_pick_or_its_rank(
            comments in comments_strategy(), pick in any::<proptest::sample::Index>(), votes in 1u64..500,
        ) {
            let before = rank_with_pool(&comments, 0);
            // Without a pick there is nothing to vote up; the case says nothing, so it is discarded.
            prop_assume!(!before.picks.is_empty());
            // The pick is drawn among the picks that exist, so every kept case votes one up.
            let pick = pick.index(before.picks.len());
            let picked = before.picks[pick];
            let mut changed = comments.clone();
            let target = changed.iter_mut().find(|comment| comment.row_key() == picked.comment).expect("picked comment");
            target.helpful = Some(target.helpful.unwrap_or(0) + votes);
            let after = rank_with_pool(&changed, 0);
            let new_rank = after.picks.iter().position(|candidate| candidate.comment == picked.comment);
            prop_assert!(new_rank.is_some_and(|rank| rank <= pick), "rank {pick} became {new_rank:?}");
        }

        #[test]
        fn longer_content_never_loses_a_pick_or_its_rank(
            lengths in proptest::collection::vec(10usize..1_200, 1..30), pick in any::<proptest::sample::Index>(), extra in 1usize..400,
        ) {
            // Unique contents (each starts with its own number), so lengthening
            // one cannot create or remove a duplicate.
            let make = |lengths: &[usize]| -> Vec<Comment> {
                lengths.iter().enumerate().map(|(n, &length)| {
                    let mut content = format!("#{n:03} ");
                    content.push_str(&"x".repeat(length - content.len()));
                    comment(n, n, &content, (n as i64 * 37) % 400, (n as u64 * 13) % 7, 0)
                }).collect()
            };
            let length_cap = ScoringConfig::default().length_cap_chars;
            let before = rank_with_pool(&make(&lengths), 0);
            prop_assume!(!before.picks.is_empty());
            let pick = pick.index(before.picks.len());
            let picked = before.picks[pick];
            let position = (0..lengths.len()).find(|&n| id("U", n) == picked.user).expect("author");
            // Content at or past the length cap cannot get longer in the score's
            // eyes; such a case would compare a ranking with itself, so it is discarded.
            prop_assume!(lengths[position] < length_cap);
            let mut longer = lengths.clone();
            longer[position] = (longer[position] + extra).min(length_cap);
            prop_assert!(longer[position] > lengths[position]);
            let after = rank_with_pool(&make(&longer), 0);
            let new_rank = after.picks.iter().position(|candidate| candidate.comment == picked.comment);
            prop_assert!(new_rank.is_some_and(|rank| rank <= pick), "rank {pick} became {new_rank:?}");
        }
    }
}
