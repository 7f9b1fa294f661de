//! The rolling refresh: which key ranges a night's incremental run re-ranks
//! whole, so that every product is ranked at least once in `D` nights.
//!
//! The recency term of a score drifts for every product, changed or not, so an
//! incremental run also re-ranks a `1/D` slice of its key range a night. The
//! slices are key ranges, not a hash of the id: a key range is listed by a
//! scan of that range, so a night's refresh costs its slice and nothing
//! proportional to the catalog. Ranking a product re-reads its index and
//! comments, so the refresh also refills any slot whose comment another
//! writer deleted without the write path's marker: the bound on such a slot
//! is the refresh period.
//!
//! The slices are cut where the products are: a run that lists every product
//! of its range (a full run, or an incremental run that refreshed its whole
//! range) samples the listing ([`CutSampler`]) and records [`CUT_PARTS`]`- 1`
//! product keys cutting its range into near-equal parts ([`RefreshCuts`]).
//! Later nights take the cuts of the newest completed runs covering their
//! range and refresh the parts of tonight's slice ([`refresh_ranges`]). The
//! cuts stay put until a run lists its range again, and that run ranked every
//! product of it, so a product is never more than `D` nights from a ranking
//! however the cuts move.

use std::ops::RangeInclusive;

use common::Id;

use crate::shard::KeyRange;

/// Milliseconds in a day: nights are counted in UTC days of the as-of time.
pub const DAY_MS: i64 = 86_400_000;
/// Parts a run's recorded cuts divide its range into: nights of a refresh
/// period up to this long get near-equal slices (a longer period leaves some
/// nights without a slice, and still refreshes every product once).
pub const CUT_PARTS: usize = 128;
/// Product keys a [`CutSampler`] holds at most: enough that each part is
/// several samples wide, so the parts' sizes differ by a quarter at most.
const SAMPLES: usize = 8 * CUT_PARTS;

/// The night an as-of time falls in: its UTC day since the epoch.
pub fn night_of(as_of_ms: i64) -> i64 {
    as_of_ms.div_euclid(DAY_MS)
}

/// The nights whose slices a run as of `as_of_ms` refreshes: those after the
/// night of `refreshed_until_ms` (the last completed run's as-of, whose run
/// refreshed its own night) up to tonight; tonight's alone without one.
/// Empty when tonight's slice was already refreshed.
pub fn nights_due(refreshed_until_ms: Option<i64>, as_of_ms: i64) -> RangeInclusive<i64> {
    let tonight = night_of(as_of_ms);
    let first = refreshed_until_ms.map_or(tonight, |after| night_of(after).saturating_add(1));
    first..=tonight
}

/// A range's cut keys, as a run that listed every product of the range recorded them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshCuts {
    /// The range the run listed.
    pub range: KeyRange,
    /// Product keys inside the range, ascending, cutting it into near-equal parts.
    pub cuts: Vec<Vec<u8>>,
}

impl RefreshCuts {
    /// The part of the range that night `night` refreshes with a period of
    /// `days` nights, when it has one. The range's parts (`cuts + 1` of them)
    /// are dealt to the nights `0..days` in order, `night mod days` taking parts
    /// `⌊k·parts/days⌋ .. ⌊(k+1)·parts/days⌋`: every part to exactly one night.
    pub fn slice(&self, days: u32, night: i64) -> Option<KeyRange> {
        let days = u64::from(days.max(1));
        let parts = self.cuts.len() as u64 + 1;
        let k = night.rem_euclid(days as i64) as u64;
        let (first, end) = ((k * parts / days) as usize, ((k + 1) * parts / days) as usize);
        if first == end {
            return None;
        }
        let start = if first == 0 { self.range.start.clone() } else { self.cuts[first - 1].clone() };
        let stop = if end == self.cuts.len() + 1 { self.range.stop.clone() } else { Some(self.cuts[end - 1].clone()) };
        Some(KeyRange { start, stop })
    }
}

/// The key ranges an incremental run over `range` refreshes on `nights`
/// with a period of `days`, ascending and disjoint, from `cover`: recorded
/// cuts, newest first, whose ranges together cover `range`. Where two
/// recorded ranges overlap the newer one's cuts count. `days` nights or more
/// refresh the whole range.
pub fn refresh_ranges(
    cover: &[RefreshCuts],
    range: &KeyRange,
    days: u32,
    nights: RangeInclusive<i64>,
) -> Vec<KeyRange> {
    if nights.is_empty() {
        return Vec::new();
    }
    if nights.end() - nights.start() + 1 >= i64::from(days.max(1)) {
        return vec![range.clone()];
    }
    // Which recorded cuts each part of `range` follows: the newest covering it.
    let mut unclaimed = vec![range.clone()];
    let mut claimed: Vec<(KeyRange, &RefreshCuts)> = Vec::new();
    for cuts in cover {
        let mut still = Vec::new();
        for piece in unclaimed {
            if let Some(inside) = intersection(&piece, &cuts.range) {
                claimed.push((inside, cuts));
            }
            still.extend(difference(&piece, &cuts.range));
        }
        unclaimed = still;
    }
    let mut ranges: Vec<KeyRange> = nights
        .flat_map(|night| {
            claimed
                .iter()
                .filter_map(move |(piece, cuts)| cuts.slice(days, night).and_then(|slice| intersection(piece, &slice)))
        })
        .collect();
    ranges.sort_by(|left, right| left.start.cmp(&right.start));
    merge_touching(ranges)
}

/// The keys in both ranges, when there are any.
fn intersection(left: &KeyRange, right: &KeyRange) -> Option<KeyRange> {
    let start = left.start.clone().max(right.start.clone());
    let stop = match (&left.stop, &right.stop) {
        (None, stop) | (stop, None) => stop.clone(),
        (Some(left), Some(right)) => Some(left.clone().min(right.clone())),
    };
    let range = KeyRange { start, stop };
    (!range.is_empty()).then_some(range)
}

/// The keys of `piece` outside `taken`: up to two ranges.
fn difference(piece: &KeyRange, taken: &KeyRange) -> Vec<KeyRange> {
    let before = KeyRange { start: piece.start.clone(), stop: Some(taken.start.clone()) };
    let after = taken.stop.clone().map(|stop| KeyRange { start: stop, stop: None });
    [Some(before), after].into_iter().flatten().filter_map(|part| intersection(piece, &part)).collect()
}

/// Ascending ranges with those that overlap or meet joined into one.
fn merge_touching(ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    let mut merged: Vec<KeyRange> = Vec::new();
    for range in ranges {
        match merged.last_mut() {
            Some(last) if last.stop.as_ref().is_none_or(|stop| *stop >= range.start) => {
                last.stop = match (&last.stop, &range.stop) {
                    (None, _) | (_, None) => None,
                    (Some(left), Some(right)) => Some(left.clone().max(right.clone())),
                };
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// Evenly spaced product keys from a listing in key order, in bounded
/// memory: it keeps every `stride`-th product, and when it holds
/// [`SAMPLES`] keys it drops every other one and doubles the stride.
#[derive(Debug, Clone)]
pub(crate) struct CutSampler {
    kept: Vec<Id>,
    stride: u64,
    seen: u64,
}

impl CutSampler {
    pub(crate) fn new() -> CutSampler {
        CutSampler { kept: Vec::with_capacity(SAMPLES), stride: 1, seen: 0 }
    }

    /// Takes in the next product of the listing.
    pub(crate) fn add(&mut self, product: Id) {
        if self.seen % self.stride == 0 {
            self.kept.push(product);
            if self.kept.len() == SAMPLES {
                self.kept = self.kept.iter().step_by(2).copied().collect();
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }

    /// Up to [`CUT_PARTS`]` - 1` product keys cutting the listing into
    /// near-equal parts (the first product starts the first part, so it is
    /// never a cut); fewer products than parts give a part each.
    pub(crate) fn cuts(&self) -> Vec<Id> {
        let kept = self.kept.len();
        if kept == 0 {
            return Vec::new();
        }
        let mut cuts: Vec<Id> = (1..CUT_PARTS).map(|part| self.kept[part * kept / CUT_PARTS]).collect();
        cuts.dedup();
        cuts.retain(|cut| Some(cut) != self.kept.first());
        cuts
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    fn range(start: &str, stop: Option<&str>) -> KeyRange {
        KeyRange { start: key(start), stop: stop.map(key) }
    }

    fn cuts(start: &str, stop: Option<&str>, at: &[&str]) -> RefreshCuts {
        RefreshCuts { range: range(start, stop), cuts: at.iter().map(|cut| key(cut)).collect() }
    }

    fn id(number: u64) -> Id {
        Id::parse("productId", &format!("P{number:09}")).expect("id")
    }

    #[test]
    fn nights_are_utc_days_of_the_as_of_time() {
        assert_eq!(night_of(0), 0);
        assert_eq!(night_of(DAY_MS - 1), 0);
        assert_eq!(night_of(DAY_MS), 1);
        assert_eq!(night_of(-1), -1, "before the epoch still counts whole days");
    }

    #[test]
    fn the_nights_due_run_from_the_night_after_the_last_completed_run() {
        let tonight = 100 * DAY_MS + 5;
        assert_eq!(nights_due(None, tonight), 100..=100);
        assert_eq!(nights_due(Some(tonight - DAY_MS), tonight), 100..=100);
        assert!(nights_due(Some(tonight - 1), tonight).is_empty(), "tonight's slice was refreshed");
        assert_eq!(nights_due(Some(tonight - 3 * DAY_MS), tonight), 98..=100);
    }

    #[test]
    fn a_night_takes_its_share_of_the_parts_in_order() {
        let four_parts = cuts("", None, &["d", "h", "m"]);
        // Two nights: parts 0-1 and 2-3.
        assert_eq!(four_parts.slice(2, 10), Some(range("", Some("h"))));
        assert_eq!(four_parts.slice(2, 11), Some(range("h", None)));
        // More nights than parts: some nights have none, each part has one night.
        let slices: Vec<_> = (0..7).map(|night| four_parts.slice(7, night)).collect();
        assert_eq!(slices.iter().flatten().count(), 4);
        assert_eq!(slices[0], None);
        assert_eq!(slices[6], Some(range("m", None)));
        assert_eq!(cuts("c", Some("x"), &[]).slice(1, -4), Some(range("c", Some("x"))));
    }

    #[test]
    fn the_newest_cuts_decide_where_recorded_ranges_overlap() {
        // A run of everything, then a newer shard run of ["k", "t") with its own cuts.
        let everything = cuts("", None, &["f", "p"]);
        let shard = cuts("k", Some("t"), &["n", "q"]);
        let cover = [shard, everything];
        // Three nights: tonight is part 0 of each: ["", "f") of the old
        // cuts, ["k", "n") of the shard's; the old part 0 is outside the shard.
        assert_eq!(
            refresh_ranges(&cover, &KeyRange::everything(), 3, 30..=30),
            vec![range("", Some("f")), range("k", Some("n"))]
        );
        // Part 2 of each: ["p", ...) outside ["k", "t"), and ["q", "t"): they meet and join.
        assert_eq!(refresh_ranges(&cover, &KeyRange::everything(), 3, 32..=32), vec![range("q", None)]);
        // Every product in exactly one of the three nights.
        let nights: Vec<Vec<KeyRange>> =
            (30..33).map(|night| refresh_ranges(&cover, &KeyRange::everything(), 3, night..=night)).collect();
        for probe in ["", "a", "f", "k", "m", "n", "p", "q", "s", "t", "z"] {
            let holders = nights.iter().filter(|ranges| ranges.iter().any(|r| r.contains(probe.as_bytes()))).count();
            assert_eq!(holders, 1, "{probe:?}");
        }
    }

    #[test]
    fn a_run_over_a_shard_refreshes_only_inside_it_and_missed_nights_add_up() {
        let cover = [cuts("", None, &["d", "h", "m"])];
        assert_eq!(refresh_ranges(&cover, &range("e", Some("k")), 4, 9..=9), vec![range("e", Some("h"))]);
        assert_eq!(refresh_ranges(&cover, &range("e", Some("k")), 4, 8..=8), vec![], "part 0 lies outside");
        assert_eq!(refresh_ranges(&cover, &range("e", Some("k")), 4, 9..=10), vec![range("e", Some("k"))]);
        assert_eq!(refresh_ranges(&cover, &range("e", Some("k")), 4, 6..=9), vec![range("e", Some("k"))]);
        let none_due = nights_due(Some(9 * DAY_MS), 9 * DAY_MS + 1);
        assert!(refresh_ranges(&cover, &range("e", Some("k")), 4, none_due).is_empty());
    }

    #[test]
    fn the_sampler_cuts_a_long_listing_into_near_equal_parts() {
        let mut sampler = CutSampler::new();
        for number in 0..100_000 {
            sampler.add(id(number));
        }
        let cuts = sampler.cuts();
        assert_eq!(cuts.len(), CUT_PARTS - 1);
        let mut bounds: Vec<u64> = vec![0];
        bounds.extend(cuts.iter().map(|cut| cut.as_str()[1..].parse::<u64>().expect("number")));
        bounds.push(100_000);
        let ideal = 100_000 / CUT_PARTS as u64;
        for pair in bounds.windows(2) {
            let part = pair[1] - pair[0];
            assert!(part.abs_diff(ideal) <= ideal / 4, "a part of {part}, ideally {ideal}: {bounds:?}");
        }
    }

    #[test]
    fn a_short_listing_gets_a_part_per_product() {
        let mut sampler = CutSampler::new();
        for number in 0..5 {
            sampler.add(id(number));
        }
        assert_eq!(sampler.cuts(), (1..5).map(id).collect::<Vec<_>>());
        assert!(CutSampler::new().cuts().is_empty());
    }

    proptest! {
        #[test]
        fn every_key_is_refreshed_exactly_once_in_any_d_consecutive_nights(
            cut_count in 0usize..40, days in 1u32..60, first_night in -1_000i64..100_000, probe in "[a-z]{0,3}",
        ) {
            let at: Vec<String> = (0..cut_count).map(|n| format!("{}{}", (b'a' + (n % 26) as u8) as char, n / 26)).collect();
            let mut at: Vec<&str> = at.iter().map(String::as_str).collect();
            at.sort_unstable();
            at.dedup();
            let cover = [cuts("", None, &at)];
            let refreshes = (first_night..first_night + i64::from(days))
                .filter(|night| {
                    refresh_ranges(&cover, &KeyRange::everything(), days, *night..=*night)
                        .iter()
                        .any(|range| range.contains(probe.as_bytes()))
                })
                .count();
            prop_assert_eq!(refreshes, 1);
        }
    }
}
