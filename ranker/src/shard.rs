//! Splitting the product key space into `n` disjoint, contiguous key ranges,
//! so `n` machines can share one run (`--shard i/n`, `i` counted from 0 like
//! Kubernetes' `JOB_COMPLETION_INDEX`).
//!
//! [`plan_ranges`] is the pure part: from the start keys of `product-comment`'s
//! regions and a count of its rows per product ([`CountBucket`]s), it cuts the
//! key space where each shard gets a near-equal share of products and of
//! comments, preferring region boundaries (a shard then reads whole regions)
//! and cutting inside a region at a counted product where no boundary is close
//! enough. Whatever the inputs, the ranges start at the empty key, meet end to
//! end and run to the end of the table, and every cut is a product prefix, so
//! every key (valid id or not, present at planning time or added later) belongs
//! to exactly one shard. How the shards of one run agree on one plan is
//! [`crate::shard_plan`]'s job.

use std::fmt;
use std::str::FromStr;

use common::keys;
use serde::{Deserialize, Serialize};

/// The most shards of one run: a plan is stored in one cell and read by every
/// shard, so it stays small.
pub const MAX_SHARDS: u32 = 1024;
/// How close (as a fraction of the mean shard's share) a region boundary must
/// come to the ideal cut to be used instead of a counted product's key (within the
/// bound on every shard's share, which holds either way).
const REGION_TOLERANCE: f64 = 0.15;

/// One of `count` shards of the product key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, `0..count`.
    pub index: u32,
    /// How many shards share the run, `1..=1024`.
    pub count: u32,
}

pub use common::keys::KeyRange;

/// A `--shard` value that is not `i/n` with `0 <= i < n <= 1024`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a shard is written INDEX/COUNT with 0 <= INDEX < COUNT <= {MAX_SHARDS} (for example 3/8), got {0:?}")]
pub struct InvalidShard(String);

impl Shard {
    /// Shard `index` of `count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, InvalidShard> {
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(InvalidShard(format!("{index}/{count}")));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = InvalidShard;

    fn from_str(text: &str) -> Result<Shard, InvalidShard> {
        let invalid = || InvalidShard(text.to_owned());
        let (index, count) = text.trim().split_once('/').ok_or_else(invalid)?;
        let index = index.trim().parse().map_err(|_| invalid())?;
        let count = count.trim().parse().map_err(|_| invalid())?;
        Shard::new(index, count).map_err(|_| invalid())
    }
}

/// Consecutive products as the planner's count saw them: from `first_key` (a
/// product prefix) up to the next bucket's first key, `products` products with
/// `comments` rows of `product-comment` in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountBucket {
    /// The first product prefix of the bucket.
    pub first_key: Vec<u8>,
    /// Products in the bucket.
    pub products: u64,
    /// `product-comment` rows (comments) of those products.
    pub comments: u64,
}

/// What the count says one range holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeEstimate {
    /// Products whose count bucket starts in the range.
    pub products: u64,
    /// Their comments.
    pub comments: u64,
}

/// Sums the buckets whose first key lies in `range`.
pub fn estimate(range: &KeyRange, counted: &[CountBucket]) -> RangeEstimate {
    counted.iter().filter(|bucket| range.contains(&bucket.first_key)).fold(RangeEstimate::default(), |sum, bucket| {
        RangeEstimate { products: sum.products + bucket.products, comments: sum.comments + bucket.comments }
    })
}

/// Cuts the key space into `count` ranges, shard `i` ranking `ranges[i]`.
///
/// `region_starts` are the start keys of `product-comment`'s regions (any
/// order; the empty key of the first region is ignored), `counted` the row
/// counts of its products. Each shard should get `1 / count` of the products
/// and of the comments. The plan first finds the smallest bound `B` such that
/// the key space can be cut into `count` ranges none of which holds more than
/// `B` times the mean share of products or of comments (a few hot products
/// can force `B` above 1: a product is never split), and allows each shard
/// [`BOUND_SLACK`] above that (at least [`BALANCED_ENOUGH`] times the mean).
/// Within that bound, shard by shard, the cut goes to the region boundary
/// nearest the ideal cut (an equal share of what is left, products and
/// comments weighed equally) when one lies within [`REGION_TOLERANCE`] of a
/// mean share, so evenly filled regions are dealt out whole, balanced by
/// region count; otherwise (fewer regions than shards, or uneven regions such
/// as one full region of sequential ids) to the nearest counted product. Without
/// counts (an empty table), whole regions are dealt out by count, and an
/// empty table of one region is cut at two-character id prefixes, where
/// random ids would land evenly.
///
/// Every cut is a product prefix, so no product's rows are split; equal cuts
/// leave some shards an empty range when there are fewer places to cut than shards.
pub fn plan_ranges(region_starts: &[Vec<u8>], counted: &[CountBucket], count: u32) -> Vec<KeyRange> {
    let count = count.max(1) as usize;
    let mut boundaries: Vec<Vec<u8>> = region_starts
        .iter()
        .map(|start| keys::product_boundary(start).to_vec())
        .filter(|boundary| !boundary.is_empty())
        .collect();
    boundaries.sort();
    boundaries.dedup();
    let counts = Counts::new(counted);
    let cuts = if counts.keys.is_empty() || counts.total_weight() == 0.0 {
        cuts_by_region_count(&boundaries, count)
    } else {
        cuts_by_counts(&boundaries, &counts, count)
    };
    let mut ranges = Vec::with_capacity(count);
    let mut start = Vec::new();
    for cut in cuts {
        ranges.push(KeyRange { start: std::mem::replace(&mut start, cut.clone()), stop: Some(cut) });
    }
    ranges.push(KeyRange { start, stop: None });
    ranges
}

/// How far above the best achievable bound a shard may go so that the cuts
/// can fall on region boundaries and near the ideal.
const BOUND_SLACK: f64 = 1.05;
/// A bound at which no shard is worth moving a cut for.
const BALANCED_ENOUGH: f64 = 1.2;

/// The `count - 1` cuts of a table with nothing counted in it.
fn cuts_by_region_count(boundaries: &[Vec<u8>], count: usize) -> Vec<Vec<u8>> {
    (1..count)
        .map(|k| {
            if boundaries.is_empty() {
                let position = k * keys::ID_ALPHABET.len() * keys::ID_ALPHABET.len() / count;
                vec![
                    keys::ID_ALPHABET[position / keys::ID_ALPHABET.len()],
                    keys::ID_ALPHABET[position % keys::ID_ALPHABET.len()],
                ]
            } else {
                let regions = boundaries.len() + 1;
                boundaries[(k * regions / count).max(1) - 1].clone()
            }
        })
        .collect()
}

/// The `count - 1` cuts of a counted table (see [`plan_ranges`]).
fn cuts_by_counts(boundaries: &[Vec<u8>], counts: &Counts, count: usize) -> Vec<Vec<u8>> {
    let buckets = counts.keys.len();
    // The slack never takes a bound under 1.5 over 1.45: 1.5 is the target.
    let best = counts.best_bound(count);
    let bound = best.max((best * BOUND_SLACK).clamp(BALANCED_ENOUGH, 1.45));
    let (next, groups) = counts.packing(bound, count);
    // Region boundaries by the index of the first bucket at or after them.
    let boundary_positions: Vec<(usize, &Vec<u8>)> =
        boundaries.iter().map(|boundary| (counts.keys.partition_point(|key| key < boundary), boundary)).collect();
    let total = counts.total_weight();
    let mean = total / count as f64;
    let mut cuts: Vec<Vec<u8>> = Vec::with_capacity(count - 1);
    let mut position = 0;
    for k in 1..count {
        let shards_left = count - k + 1;
        let ideal = counts.weight_before(position) + (total - counts.weight_before(position)) / shards_left as f64;
        let distance = |end: usize| (counts.weight_before(end) - ideal).abs();
        // An end is allowed when this shard stays within the bound and the
        // shards after it can take the rest within it too.
        let allowed = |end: usize| end >= position && end <= next[position] && groups[end] < shards_left;
        let previous = cuts.last();
        let region = boundary_positions
            .iter()
            .filter(|(end, boundary)| allowed(*end) && previous.is_none_or(|previous| *boundary >= previous))
            .min_by(|left, right| distance(left.0).total_cmp(&distance(right.0)));
        let (end, cut) = match region {
            Some((end, boundary)) if distance(*end) <= REGION_TOLERANCE * mean => (*end, (*boundary).clone()),
            _ => {
                // A counted product: the ends before the last bucket always
                // have a key to cut at (the rest then fits one shard).
                let end = (position..buckets)
                    .filter(|&end| allowed(end))
                    .min_by(|&left, &right| distance(left).total_cmp(&distance(right)))
                    .unwrap_or(position.min(buckets - 1));
                (end, counts.keys[end].clone())
            }
        };
        let cut = match previous {
            Some(previous) if *previous > cut => previous.clone(),
            _ => cut,
        };
        cuts.push(cut);
        position = end;
    }
    cuts
}

/// The counts by distinct product prefix, with running sums.
struct Counts {
    /// The buckets' first keys as product prefixes, sorted and distinct.
    keys: Vec<Vec<u8>>,
    /// `products_before[i]`: products in the buckets before `keys[i]`; one longer than `keys`.
    products_before: Vec<u64>,
    /// The same for comments.
    comments_before: Vec<u64>,
}

impl Counts {
    fn new(counted: &[CountBucket]) -> Counts {
        let mut buckets: Vec<(Vec<u8>, u64, u64)> = counted
            .iter()
            .map(|bucket| (keys::product_boundary(&bucket.first_key).to_vec(), bucket.products, bucket.comments))
            .collect();
        buckets.sort_by(|left, right| left.0.cmp(&right.0));
        let mut counts = Counts { keys: Vec::new(), products_before: vec![0], comments_before: vec![0] };
        for (key, products, comments) in buckets {
            if counts.keys.last() != Some(&key) {
                counts.keys.push(key);
                counts.products_before.push(*counts.products_before.last().unwrap_or(&0));
                counts.comments_before.push(*counts.comments_before.last().unwrap_or(&0));
            }
            if let (Some(running_products), Some(running_comments)) =
                (counts.products_before.last_mut(), counts.comments_before.last_mut())
            {
                *running_products += products;
                *running_comments += comments;
            }
        }
        counts
    }

    fn products(&self) -> u64 {
        *self.products_before.last().unwrap_or(&0)
    }

    fn comments(&self) -> u64 {
        *self.comments_before.last().unwrap_or(&0)
    }

    /// The share of products plus the share of comments in the buckets before `end`.
    fn weight_before(&self, end: usize) -> f64 {
        let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
        share(self.products_before[end], self.products()) + share(self.comments_before[end], self.comments())
    }

    fn total_weight(&self) -> f64 {
        self.weight_before(self.keys.len())
    }

    /// Whether buckets `start..end` hold at most `bound` times the mean
    /// share (of `count` shards) of products and of comments.
    fn fits(&self, start: usize, end: usize, bound: f64, count: usize) -> bool {
        let within = |before: &[u64], whole: u64| {
            (before[end] - before[start]) as f64 <= bound * whole as f64 / count as f64 + 1e-9
        };
        within(&self.products_before, self.products()) && within(&self.comments_before, self.comments())
    }

    /// For a bound: `next[i]`, the furthest end of a shard starting at bucket
    /// `i`, and `groups[i]`, the fewest shards that take buckets `i..` within
    /// the bound (`usize::MAX` when a single bucket exceeds it). Packing each
    /// shard as full as it goes is optimal for contiguous ranges.
    fn packing(&self, bound: f64, count: usize) -> (Vec<usize>, Vec<usize>) {
        let buckets = self.keys.len();
        let mut next = vec![buckets; buckets + 1];
        let mut end = 0;
        for (start, furthest) in next.iter_mut().enumerate().take(buckets) {
            end = end.max(start);
            while end < buckets && self.fits(start, end + 1, bound, count) {
                end += 1;
            }
            *furthest = end;
        }
        let mut groups: Vec<usize> = vec![0; buckets + 1];
        for start in (0..buckets).rev() {
            groups[start] = if next[start] > start { groups[next[start]].saturating_add(1) } else { usize::MAX };
        }
        (next, groups)
    }

    /// The smallest bound (times the mean share) within which `count` shards can take every bucket.
    fn best_bound(&self, count: usize) -> f64 {
        let (mut low, mut high) = (0.0, count as f64);
        for _ in 0..40 {
            let middle = (low + high) / 2.0;
            if self.packing(middle, count).1[0] <= count {
                high = middle;
            } else {
                low = middle;
            }
        }
        high
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_index_over_count() {
        assert_eq!("3/8".parse::<Shard>(), Ok(Shard { index: 3, count: 8 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard { index: 0, count: 1 }));
        for bad in ["", "3", "8/8", "9/8", "0/0", "-1/4", "a/b", "1/1025", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 3, count: 8 }.to_string(), "3/8");
    }

    /// Sequential ten-character ids, all in one corner of the key space: `P`
    /// and nine digits, consecutive (how the demo numbered its products
    /// before `common::keys::numbered_id` spread them).
    fn demo_like(products: u64) -> Vec<CountBucket> {
        (1..=products)
            .map(|number| CountBucket {
                first_key: format!("P{number:09}").into_bytes(),
                products: 1,
                comments: 1 + number % 19,
            })
            .collect()
    }

    /// The id alphabet cut evenly into `regions`, as `reviews-admin schema create --regions` does.
    fn even_region_starts(regions: usize) -> Vec<Vec<u8>> {
        (0..regions)
            .map(|region| {
                if region == 0 {
                    Vec::new()
                } else {
                    vec![keys::ID_ALPHABET[region * keys::ID_ALPHABET.len() / regions]]
                }
            })
            .collect()
    }

    fn shares(ranges: &[KeyRange], counted: &[CountBucket]) -> (f64, f64) {
        let estimates: Vec<RangeEstimate> = ranges.iter().map(|range| estimate(range, counted)).collect();
        let worst = |value: fn(&RangeEstimate) -> u64| {
            let total: u64 = estimates.iter().map(value).sum();
            let max = estimates.iter().map(value).max().unwrap_or(0);
            max as f64 / (total as f64 / ranges.len() as f64)
        };
        (worst(|estimate| estimate.products), worst(|estimate| estimate.comments))
    }

    #[test]
    fn one_shard_is_everything() {
        assert_eq!(plan_ranges(&[], &[], 1), vec![KeyRange::everything()]);
        assert_eq!(plan_ranges(&even_region_starts(8), &demo_like(100), 1), vec![KeyRange::everything()]);
    }

    #[test]
    fn demo_data_in_one_region_of_an_evenly_split_table_is_cut_inside_that_region() {
        let counted = demo_like(2_000);
        for regions in [1, 8] {
            let ranges = plan_ranges(&even_region_starts(regions), &counted, 8);
            let (products, comments) = shares(&ranges, &counted);
            assert!(products <= 1.05 && comments <= 1.05, "{regions} regions: {products} {comments}");
        }
    }

    #[test]
    fn a_few_hot_products_get_shards_of_their_own_and_the_rest_stay_balanced() {
        // Product n has 2,000 / n + 20 comments (Zipf and a floor): the two
        // hottest together hold 1.55 times a mean shard's comments, and a
        // cut by combined weight alone would give them one shard. No
        // contiguous cut does better than about 1.48 times the mean here.
        let counted: Vec<CountBucket> = (1..=200)
            .map(|number| CountBucket {
                first_key: format!("P{number:09}").into_bytes(),
                products: 1,
                comments: 2_000 / number + 20,
            })
            .collect();
        let ranges = plan_ranges(&[Vec::new()], &counted, 8);
        let (products, comments) = shares(&ranges, &counted);
        assert!(products <= 1.5 && comments <= 1.5, "{products} {comments}: {ranges:?}");
        assert!(ranges[0].contains(b"P000000001") && !ranges[0].contains(b"P000000002"), "{ranges:?}");
    }

    #[test]
    fn evenly_filled_regions_are_dealt_out_whole() {
        // 16 regions over the alphabet, random-looking ids spread evenly over them.
        let starts = even_region_starts(16);
        let counted: Vec<CountBucket> = (0..62 * 62)
            .map(|position| CountBucket {
                first_key: vec![keys::ID_ALPHABET[position / 62], keys::ID_ALPHABET[position % 62], b'x'],
                products: 1,
                comments: 5,
            })
            .collect();
        let ranges = plan_ranges(&starts, &counted, 8);
        let cuts: Vec<Vec<u8>> = ranges.iter().filter_map(|range| range.stop.clone()).collect();
        assert!(cuts.iter().all(|cut| starts.contains(cut)), "every cut is a region boundary: {cuts:?}");
        let (products, comments) = shares(&ranges, &counted);
        assert!(products < 1.2 && comments < 1.2, "{products} {comments}");
    }

    #[test]
    fn without_counts_regions_are_dealt_out_by_count_or_the_alphabet_is_cut() {
        let ranges = plan_ranges(&even_region_starts(8), &[], 4);
        let cuts: Vec<Vec<u8>> = ranges.iter().filter_map(|range| range.stop.clone()).collect();
        let starts = even_region_starts(8);
        assert_eq!(cuts, vec![starts[2].clone(), starts[4].clone(), starts[6].clone()]);
        // Fewer regions than shards: some shards get an empty range.
        let ranges = plan_ranges(&even_region_starts(2), &[], 4);
        assert_eq!(ranges.iter().filter(|range| range.is_empty()).count(), 2, "{ranges:?}");
        // One region and nothing in it: two-character id prefixes.
        let ranges = plan_ranges(&[Vec::new()], &[], 2);
        assert_eq!(ranges[0].stop.as_deref(), Some(&b"V0"[..]), "{ranges:?}");
    }

    #[test]
    fn a_region_boundary_inside_a_product_is_cut_back_to_the_product() {
        let starts = vec![Vec::new(), b"P000000500c\x7f\x01".to_vec()];
        let ranges = plan_ranges(&starts, &demo_like(1_000), 2);
        assert_eq!(ranges[0].stop.as_deref(), Some(&b"P000000500"[..]));
    }

    fn region_layout() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..14), 0..24)
    }

    fn counted_layout() -> impl Strategy<Value = Vec<CountBucket>> {
        proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 1..12), 0u64..50, 0u64..5_000)
                .prop_map(|(first_key, products, comments)| CountBucket { first_key, products, comments }),
            0..200,
        )
    }

    proptest! {
        #[test]
        fn ranges_are_ordered_disjoint_and_cover_every_key(
            starts in region_layout(),
            counted in counted_layout(),
            count in 1u32..=16,
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..16), 1..20),
        ) {
            let ranges = plan_ranges(&starts, &counted, count);
            prop_assert_eq!(ranges.len(), count as usize);
            prop_assert!(ranges[0].start.is_empty());
            prop_assert_eq!(&ranges[ranges.len() - 1].stop, &None);
            for pair in ranges.windows(2) {
                let stop = pair[0].stop.clone().expect("inner ranges stop");
                prop_assert!(pair[0].start <= stop);
                prop_assert_eq!(&stop, &pair[1].start);
            }
            for key in keys {
                prop_assert_eq!(ranges.iter().filter(|range| range.contains(&key)).count(), 1);
            }
        }

        #[test]
        fn a_product_never_straddles_two_shards(
            mut starts in region_layout(),
            mut counted in counted_layout(),
            count in 2u32..=16,
            id in "[0-9A-Za-z]{10}",
            inside in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..4),
            suffixes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6),
        ) {
            // Region boundaries inside the product's index rows, and most of
            // the counted comments on it, so that cuts fall at and inside it:
            // random layouts alone almost never put one there.
            for tail in &inside {
                starts.push([id.as_bytes(), b"c", tail].concat());
            }
            counted.push(CountBucket { first_key: id.as_bytes().to_vec(), products: 1, comments: 1_000_000 });
            let ranges = plan_ranges(&starts, &counted, count);
            let holder = |key: &[u8]| ranges.iter().position(|range| range.contains(key));
            let first = holder(id.as_bytes());
            for suffix in suffixes {
                let key = [id.as_bytes(), &suffix].concat();
                prop_assert_eq!(holder(&key), first);
            }
        }
    }
}
