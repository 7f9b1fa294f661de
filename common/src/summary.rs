//! A product's review summary: how many reviews it has, how they rate, how
//! many carry photos. The ranker counts it in the pass that ranks the product
//! and writes it in the product's ranking record; query-api serves it.
//!
//! Counting is pure: [`ReviewSummary::add`] takes each review the ranker
//! reads, once, and the summary is exact for the reviews a walk of the
//! product's latest pages lists at the moment the ranker read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Comment;

/// The star values a rating can count as.
pub const STARS: std::ops::RangeInclusive<u8> = 1..=5;

/// A product's review summary. Its JSON is `{"count", "ratings": {"1": n,
/// ..., "5": n}, "unrated", "average", "withPhotos"}` (`average` is derived:
/// written for readers, not read back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "SummaryJson", try_from = "SummaryJson")]
pub struct ReviewSummary {
    /// Reviews rated 1 to 5 stars: `rated[0]` holds the one-star reviews.
    pub rated: [u64; 5],
    /// Reviews without a rating of 1 to 5 (absent, null, out of range, not an
    /// integer).
    pub unrated: u64,
    /// Reviews with at least one photo.
    pub with_photos: u64,
}

impl ReviewSummary {
    /// Counts one review.
    pub fn add(&mut self, comment: &Comment) {
        match comment.rating.as_ref().and_then(|rating| rating.stars()) {
            Some(stars) => self.rated[usize::from(stars - 1)] += 1,
            None => self.unrated += 1,
        }
        if comment.photos.is_some_and(|photos| photos >= 1) {
            self.with_photos += 1;
        }
    }

    /// Adds the reviews `other` counted (reviews neither counted).
    pub fn merge(&mut self, other: &ReviewSummary) {
        for (mine, theirs) in self.rated.iter_mut().zip(other.rated) {
            *mine += theirs;
        }
        self.unrated += other.unrated;
        self.with_photos += other.with_photos;
    }

    /// Reviews counted, each once: the rated ones and the unrated ones.
    pub fn count(&self) -> u64 {
        self.rated.iter().sum::<u64>() + self.unrated
    }

    /// The reviews rated `stars` (1 to 5); 0 for any other number.
    pub fn rated_with(&self, stars: u8) -> u64 {
        usize::from(stars).checked_sub(1).and_then(|index| self.rated.get(index)).copied().unwrap_or(0)
    }

    /// The mean of the rated reviews' stars; `None` when none is rated.
    pub fn average(&self) -> Option<f64> {
        let rated: u64 = self.rated.iter().sum();
        let stars: u64 = STARS.map(|stars| u64::from(stars) * self.rated_with(stars)).sum();
        (rated > 0).then(|| stars as f64 / rated as f64)
    }
}

/// [`ReviewSummary`]'s JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SummaryJson {
    count: u64,
    ratings: BTreeMap<u8, u64>,
    unrated: u64,
    #[serde(default, skip_deserializing)]
    average: Option<f64>,
    with_photos: u64,
}

impl From<ReviewSummary> for SummaryJson {
    fn from(summary: ReviewSummary) -> SummaryJson {
        SummaryJson {
            count: summary.count(),
            ratings: STARS.map(|stars| (stars, summary.rated_with(stars))).collect(),
            unrated: summary.unrated,
            average: summary.average(),
            with_photos: summary.with_photos,
        }
    }
}

impl TryFrom<SummaryJson> for ReviewSummary {
    type Error = String;

    /// Refuses a summary whose parts do not add up to its stored count.
    fn try_from(json: SummaryJson) -> Result<ReviewSummary, String> {
        let mut rated = [0; 5];
        for (stars, reviews) in json.ratings {
            let slot = usize::from(stars).checked_sub(1).and_then(|index| rated.get_mut(index));
            *slot.ok_or_else(|| format!("a rating of {stars} stars"))? = reviews;
        }
        let summary = ReviewSummary { rated, unrated: json.unrated, with_photos: json.with_photos };
        if summary.count() != json.count || summary.with_photos > json.count {
            return Err(format!("the summary's parts do not add up to its count {}", json.count));
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(rating: serde_json::Value, photos: Option<u32>) -> Comment {
        let mut json = json!({
            "orderId": "ORDER00001", "productId": "PRODUCT001", "userId": "USER000001",
            "content": "fine", "timestamp": 1, "edited": false, "rating": rating
        });
        if let Some(photos) = photos {
            json["photos"] = json!(photos);
        }
        serde_json::from_value(json).expect("comment")
    }

    #[test]
    fn each_review_counts_once_by_its_stars_or_as_unrated() {
        let mut summary = ReviewSummary::default();
        let reviews = [
            review(json!(5), Some(2)),
            review(json!(5), None),
            review(json!(4), Some(0)),
            review(json!(1), Some(1)),
            review(json!(null), None),
            review(json!(0), None),
            review(json!(6), None),
            review(json!(4.5), None),
            review(json!("5"), None),
        ];
        for review in &reviews {
            summary.add(review);
        }
        // `"5"` is five stars (as another writer stores it); 0, 6, 4.5 and null are not.
        assert_eq!(summary, ReviewSummary { rated: [1, 0, 0, 1, 3], unrated: 4, with_photos: 2 });
        assert_eq!(summary.count(), 9);
        assert_eq!(summary.average(), Some(20.0 / 5.0));
        assert_eq!(ReviewSummary::default().average(), None, "no rated review, no average");
    }

    #[test]
    fn the_stored_json_names_each_star_and_reads_back() {
        let summary = ReviewSummary { rated: [0, 1, 0, 2, 2], unrated: 1, with_photos: 3 };
        let json = serde_json::to_value(summary).expect("json");
        assert_eq!(
            json,
            json!({"count": 6, "ratings": {"1": 0, "2": 1, "3": 0, "4": 2, "5": 2}, "unrated": 1,
                   "average": 20.0 / 5.0, "withPhotos": 3})
        );
        assert_eq!(serde_json::from_value::<ReviewSummary>(json).expect("decode"), summary);
        let short = json!({"count": 2, "ratings": {"5": 1}, "unrated": 0, "withPhotos": 0});
        assert!(serde_json::from_value::<ReviewSummary>(short).is_err(), "parts that do not add up are refused");
        let six_stars = json!({"count": 1, "ratings": {"6": 1}, "unrated": 0, "withPhotos": 0});
        assert!(serde_json::from_value::<ReviewSummary>(six_stars).is_err());
    }
}
