//! The star a review counts under, the mark (`cf:r`) that names it on the
//! review's `product-comment` row, and sets of stars: the vocabulary both the
//! index walk (`store::walk`) and the star lists (`store::stars`) speak.

use crate::model::Comment;

/// The star a review counts under, as its summary counts it: 1 to 5, or 0 for
/// unrated (no rating, or one that is not an integer from 1 to 5).
pub fn star_of(comment: &Comment) -> u8 {
    comment.rating.as_ref().and_then(|rating| rating.stars()).unwrap_or(0)
}

/// The mark (`cf:r`) of an index row listing a review of `star` (0 to 5).
pub fn star_mark(star: u8) -> Vec<u8> {
    vec![b'0' + star.min(5)]
}

/// The star a mark names; `None` for a value no writer of this project puts.
pub(crate) fn parse_star_mark(mark: &[u8]) -> Option<u8> {
    match mark {
        [byte @ b'0'..=b'5'] => Some(byte - b'0'),
        _ => None,
    }
}

/// A set of stars, 0 (unrated) to 5: which reviews a filtered walk keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StarSet(u8);

impl StarSet {
    /// The reviews rated 1 to 5 stars, and the unrated ones.
    pub const ALL: StarSet = StarSet(0b11_1111);

    /// The set of `stars` (each 0 to 5; larger values are ignored).
    pub fn of(stars: impl IntoIterator<Item = u8>) -> StarSet {
        StarSet(stars.into_iter().filter(|star| *star <= 5).fold(0, |mask, star| mask | 1 << star))
    }

    /// Whether the set holds `star`.
    pub fn contains(self, star: u8) -> bool {
        star <= 5 && self.0 & (1 << star) != 0
    }

    /// The set's bits (bit `k` for `k` stars), for a cursor to name the set.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The stars in the set, in ascending order.
    pub fn stars(self) -> impl Iterator<Item = u8> {
        (0..=5).filter(move |star| self.contains(*star))
    }

    /// Whether the set holds no star.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The region server's filter for a walk of this (non-empty) set that
    /// examines at most `budget_rows` rows: `PageFilter` first, which counts
    /// every row the region server reaches and ends the scan after that
    /// many; then a mark naming one of the set's stars, or no mark at all
    /// (`filterIfMissing` false), which the walk checks against the comment.
    pub(super) fn hbase_filter(self, budget_rows: usize) -> String {
        let class: String = self.stars().map(|star| char::from(b'0' + star)).collect();
        format!(
            "PageFilter ({budget_rows}) AND SingleColumnValueFilter('cf', 'r', =, 'regexstring:^[{class}]$', false, true)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_set_holds_what_it_was_made_of_and_names_it_in_distinct_bits() {
        let set = StarSet::of([1, 5]);
        assert!(set.contains(1) && set.contains(5));
        assert!(!set.contains(0) && !set.contains(3) && !set.contains(9));
        assert_eq!(set.stars().collect::<Vec<_>>(), vec![1, 5]);
        assert_eq!(set.bits(), 0b10_0010);
        assert_ne!(StarSet::of([1]).bits(), StarSet::of([1, 2]).bits());
        assert_eq!(StarSet::ALL.stars().count(), 6);
    }

    #[test]
    fn the_filter_counts_every_row_first_then_keeps_the_marked_stars_and_unmarked_rows() {
        assert_eq!(
            StarSet::of([0, 4, 5]).hbase_filter(300),
            "PageFilter (300) AND SingleColumnValueFilter('cf', 'r', =, 'regexstring:^[045]$', false, true)"
        );
        assert!(StarSet::of([]).is_empty() && !StarSet::of([0]).is_empty());
    }

    #[test]
    fn marks_name_stars_zero_to_five_only() {
        for star in 0..=5 {
            assert_eq!(parse_star_mark(&star_mark(star)), Some(star));
        }
        assert_eq!(parse_star_mark(b"6"), None);
        assert_eq!(parse_star_mark(b"11"), None);
        assert_eq!(parse_star_mark(b""), None);
    }
}
