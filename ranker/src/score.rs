//! The default score of one comment (docs/contract.md §6): pure arithmetic, no I/O.
//!
//! Every term is exposed on its own so `explain` can show how a score came
//! about, and so tests can check each formula against hand-computed values.

use common::model::Comment;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::ScoringConfig;

/// Milliseconds in a day: the recency half-life is configured in days.
const MILLIS_PER_DAY: f64 = 86_400_000.0;

/// Every term of one comment's score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScoreTerms {
    /// Unicode scalar values of the trimmed content.
    pub chars: usize,
    /// `min(1, ln(1 + chars) / ln(1 + cap))`.
    pub substance: f64,
    /// Wilson lower bound of the helpful share of votes; 0 without votes.
    pub helpfulness: f64,
    /// `0.5 ^ (age in days / half-life)`; 1 for comments not older than the as-of time.
    pub recency: f64,
    /// `min(photos, cap) / cap`.
    pub photo: f64,
    /// The weighted sum of the four terms.
    pub score: f64,
}

/// The number of characters that count toward a comment's length: Unicode
/// scalar values with leading and trailing white space trimmed.
pub fn content_chars(content: &str) -> usize {
    content.trim().chars().count()
}

/// `min(1, ln(1 + chars) / ln(1 + cap))`: grows quickly for short texts and
/// flattens out, so a wall of text does not beat a useful paragraph by much.
pub fn substance(chars: usize, length_cap_chars: usize) -> f64 {
    let cap = length_cap_chars.max(1) as f64;
    ((chars as f64).ln_1p() / cap.ln_1p()).min(1.0)
}

/// The lower bound of the Wilson score interval for `helpful` successes out of
/// `helpful + unhelpful` votes (Evan Miller, "How Not To Sort By Average
/// Rating"): a comment with 9 of 10 helpful votes ranks below one with 90 of 100.
pub fn wilson_lower_bound(helpful: u64, unhelpful: u64, z: f64) -> f64 {
    // Counts go through f64 so that absurd vote counts cannot overflow.
    let positive = helpful as f64;
    let total = positive + unhelpful as f64;
    if total == 0.0 {
        return 0.0;
    }
    let share = positive / total;
    let z_squared = z * z;
    let spread = z * ((share * (1.0 - share) + z_squared / (4.0 * total)) / total).sqrt();
    let bound = (share + z_squared / (2.0 * total) - spread) / (1.0 + z_squared / total);
    // Rounding can leave a bound of 0 (no helpful votes) a hair below zero.
    bound.clamp(0.0, 1.0)
}

/// `0.5 ^ (max(0, as_of - timestamp) / day / half_life_days)`.
pub fn recency(timestamp_ms: i64, as_of_ms: i64, half_life_days: f64) -> f64 {
    let age_ms = as_of_ms.saturating_sub(timestamp_ms).max(0) as f64;
    0.5_f64.powf(age_ms / MILLIS_PER_DAY / half_life_days)
}

/// `min(photos, cap) / cap`.
pub fn photo(photos: u32, photo_cap: u32) -> f64 {
    let cap = photo_cap.max(1);
    f64::from(photos.min(cap)) / f64::from(cap)
}

/// Every term of `comment`'s score at time `as_of_ms`. Eligibility is left to
/// the caller ([`ScoreTerms::chars`] against [`ScoringConfig::min_chars`]) so
/// that `explain` can also say what a too-short comment would have scored.
pub fn score_terms(config: &ScoringConfig, comment: &Comment, as_of_ms: i64) -> ScoreTerms {
    let chars = content_chars(comment.text());
    let substance = substance(chars, config.length_cap_chars);
    let helpfulness = wilson_lower_bound(comment.helpful.unwrap_or(0), comment.unhelpful.unwrap_or(0), config.wilson_z);
    let recency = recency(comment.timestamp, as_of_ms, config.recency_half_life_days);
    let photo = photo(comment.photos.unwrap_or(0), config.photo_cap);
    let weights = &config.weights;
    let score = weights.substance * substance
        + weights.helpfulness * helpfulness
        + weights.recency * recency
        + weights.photo * photo;
    ScoreTerms { chars, substance, helpfulness, recency, photo, score }
}

/// Whether a comment with these terms may be ranked at all.
pub fn is_eligible(config: &ScoringConfig, terms: &ScoreTerms) -> bool {
    terms.chars >= config.min_chars
}

/// The normalised content two comments are compared by: lower-cased (each
/// character on its own, so the result does not depend on its neighbours),
/// runs of white space folded to one space, trimmed.
pub fn normalize_content(content: &str) -> String {
    let mut normalized = String::with_capacity(content.len());
    for_each_normalized_char(content, |character| normalized.push(character));
    normalized
}

/// A SHA-256 digest of a comment's normalised content.
///
/// The ranker compares comments by this digest instead of keeping their text:
/// candidates then cost 32 bytes each whatever the comments' length, and
/// SHA-256 has no known collisions, so equal digests mean equal content.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentFingerprint([u8; 32]);

impl std::fmt::Debug for ContentFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head: String = self.0[..6].iter().map(|byte| format!("{byte:02x}")).collect();
        write!(f, "ContentFingerprint({head}…)")
    }
}

impl ContentFingerprint {
    /// The fingerprint of `content`'s normalised form, computed without
    /// building the normalised string.
    pub fn of(content: &str) -> ContentFingerprint {
        let mut hasher = Sha256::new();
        let mut buffer = [0u8; 4];
        for_each_normalized_char(content, |character| {
            hasher.update(character.encode_utf8(&mut buffer).as_bytes());
        });
        ContentFingerprint(hasher.finalize().into())
    }
}

fn for_each_normalized_char(content: &str, mut emit: impl FnMut(char)) {
    let mut pending_space = false;
    let mut started = false;
    for character in content.chars() {
        if character.is_whitespace() {
            // Only a space between two words survives: leading white space is
            // dropped because nothing was emitted yet, trailing because no word follows.
            pending_space = started;
            continue;
        }
        if pending_space {
            emit(' ');
            pending_space = false;
        }
        started = true;
        character.to_lowercase().for_each(&mut emit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::model::Extra;
    use common::Id;

    const DAY_MS: i64 = 86_400_000;

    fn comment(content: &str, timestamp: i64, helpful: u64, unhelpful: u64, photos: u32) -> Comment {
        Comment {
            order_id: Id::parse("o", "ORDER00001").expect("id"),
            product_id: Id::parse("p", "PRODUCT001").expect("id"),
            user_id: Id::parse("u", "USER000001").expect("id"),
            content: Some(content.to_owned()),
            timestamp,
            edited: false,
            rating: None,
            helpful: Some(helpful),
            unhelpful: Some(unhelpful),
            photos: Some(photos),
            extra: Extra::new(),
        }
    }

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < 1e-12
    }

    #[test]
    fn chars_count_scalar_values_of_the_trimmed_content() {
        assert_eq!(content_chars("  hello \n"), 5);
        assert_eq!(content_chars("좋아요 정말"), 6);
        assert_eq!(content_chars("\u{3000}é\u{0301}\t"), 2, "ideographic space trimmed, combining mark counted");
        assert_eq!(content_chars(""), 0);
    }

    #[test]
    fn substance_follows_the_log_curve_up_to_the_cap() {
        assert_eq!(substance(0, 1000), 0.0);
        assert!(close(substance(10, 1000), 11f64.ln() / 1001f64.ln()));
        assert_eq!(substance(1000, 1000), 1.0);
        assert_eq!(substance(50_000, 1000), 1.0);
    }

    #[test]
    fn wilson_matches_hand_computed_values() {
        assert_eq!(wilson_lower_bound(0, 0, 1.96), 0.0);
        assert_eq!(wilson_lower_bound(0, 10, 1.96), 0.0);
        // p = 0.9, n = 10: (0.9 + 0.19208 - 1.96*sqrt((0.09 + 0.009604)/10)) / 1.38416
        let expected = (0.9 + 1.96 * 1.96 / 20.0 - 1.96 * ((0.09 + 1.96 * 1.96 / 40.0) / 10.0_f64).sqrt())
            / (1.0 + 1.96 * 1.96 / 10.0);
        assert!(close(wilson_lower_bound(9, 1, 1.96), expected));
        assert!((wilson_lower_bound(9, 1, 1.96) - 0.5958).abs() < 1e-4);
        assert!(wilson_lower_bound(90, 10, 1.96) > wilson_lower_bound(9, 1, 1.96));
        assert!(close(wilson_lower_bound(3, 1, 0.0), 0.75));
        assert!(wilson_lower_bound(u64::MAX, u64::MAX, 1.96).is_finite());
    }

    #[test]
    fn recency_halves_every_half_life_and_never_exceeds_one() {
        let as_of = 1_000 * DAY_MS;
        assert_eq!(recency(as_of, as_of, 180.0), 1.0);
        assert_eq!(recency(as_of + DAY_MS, as_of, 180.0), 1.0, "future comments count as new");
        assert!(close(recency(as_of - 180 * DAY_MS, as_of, 180.0), 0.5));
        assert!(close(recency(as_of - 360 * DAY_MS, as_of, 180.0), 0.25));
        assert!(recency(i64::MIN, i64::MAX, 180.0) >= 0.0);
    }

    #[test]
    fn photo_is_capped() {
        assert_eq!(photo(0, 3), 0.0);
        assert!(close(photo(1, 3), 1.0 / 3.0));
        assert_eq!(photo(3, 3), 1.0);
        assert_eq!(photo(30, 3), 1.0);
    }

    #[test]
    fn the_score_is_the_weighted_sum_of_the_designs_terms() {
        let config = ScoringConfig::default();
        let as_of = 2_000 * DAY_MS;
        let content = "   This blender is great, crushes ice fine.  ";
        let terms = score_terms(&config, &comment(content, as_of - 90 * DAY_MS, 9, 1, 2), as_of);
        let chars = content.trim().chars().count();
        assert_eq!(terms.chars, chars);
        let substance = ((1 + chars) as f64).ln() / 1001f64.ln();
        let helpfulness = wilson_lower_bound(9, 1, 1.96);
        let recency = 0.5f64.powf(0.5);
        let photo = 2.0 / 3.0;
        assert!(close(terms.substance, substance));
        assert!(close(terms.helpfulness, helpfulness));
        assert!(close(terms.recency, recency));
        assert!(close(terms.photo, photo));
        assert!(close(terms.score, 0.45 * substance + 0.30 * helpfulness + 0.15 * recency + 0.10 * photo));
        assert!(is_eligible(&config, &terms));
        assert!(!is_eligible(&config, &score_terms(&config, &comment(" short   ", as_of, 0, 0, 0), as_of)));
        assert!(is_eligible(&config, &score_terms(&config, &comment("ten chars!", as_of, 0, 0, 0), as_of)));
    }

    #[test]
    fn absent_votes_and_photos_count_as_zero() {
        let config = ScoringConfig::default();
        let mut bare = comment("a perfectly fine comment", 0, 0, 0, 0);
        let with_zeros = score_terms(&config, &bare, 0);
        bare.helpful = None;
        bare.unhelpful = None;
        bare.photos = None;
        assert_eq!(score_terms(&config, &bare, 0), with_zeros);
    }

    #[test]
    fn normalisation_lowercases_folds_white_space_and_trims() {
        assert_eq!(normalize_content("  Great\t\tProduct \n FOR  me "), "great product for me");
        assert_eq!(normalize_content("좋아요  좋아요"), "좋아요 좋아요");
        assert_eq!(normalize_content("İ"), "i\u{307}");
        assert_eq!(normalize_content(" \t "), "");
        assert_eq!(ContentFingerprint::of("Great  product"), ContentFingerprint::of("great product "));
        assert_ne!(ContentFingerprint::of("great product"), ContentFingerprint::of("great products"));
    }

    proptest::proptest! {
        #[test]
        fn the_fingerprint_is_the_digest_of_the_normalised_text(content in "\\PC{0,40}") {
            let expected: [u8; 32] = Sha256::digest(normalize_content(&content).as_bytes()).into();
            proptest::prop_assert_eq!(ContentFingerprint::of(&content), ContentFingerprint(expected));
            proptest::prop_assert_eq!(normalize_content(&normalize_content(&content)), normalize_content(&content));
        }

        #[test]
        fn scores_are_finite_and_bounded_by_the_weights(
            content in "\\PC{0,60}", age_days in 0i64..10_000, helpful in 0u64..1_000_000,
            unhelpful in 0u64..1_000_000, photos in 0u32..100,
        ) {
            let config = ScoringConfig::default();
            let as_of = 20_000 * DAY_MS;
            let terms = score_terms(&config, &comment(&content, as_of - age_days * DAY_MS, helpful, unhelpful, photos), as_of);
            for term in [terms.substance, terms.helpfulness, terms.recency, terms.photo] {
                proptest::prop_assert!((0.0..=1.0).contains(&term));
            }
            proptest::prop_assert!(terms.score.is_finite() && terms.score >= 0.0 && terms.score <= 1.0 + 1e-12);
        }

        #[test]
        fn more_helpful_votes_never_lower_the_score(helpful in 0u64..100_000, unhelpful in 0u64..100_000, extra in 1u64..1000) {
            let z = 1.96;
            proptest::prop_assert!(wilson_lower_bound(helpful + extra, unhelpful, z) >= wilson_lower_bound(helpful, unhelpful, z));
        }

        #[test]
        fn longer_comments_never_score_lower_up_to_the_cap(shorter in 0usize..2_000, extra in 0usize..2_000) {
            proptest::prop_assert!(substance(shorter + extra, 1000) >= substance(shorter, 1000));
        }
    }
}
