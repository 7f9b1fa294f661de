//! How the shards of one run agree on one plan without a coordinator of our own.
//!
//! A plan is computed from `product-comment`'s regions (`getTableRegions`) and
//! a keys-only count of its rows per product ([`count_rows_per_product`]), then cut by the pure
//! `shard::plan_ranges`. Plans computed at different times can differ (regions split
//! and merge, products arrive), and two shards cut by different plans could
//! rank a product twice or not at all. So the plan of a run is stored once, in
//! the `ranker-lease` table under the run's plan id and shard count: the first
//! shard to get there writes it with a `checkAndPut` that expects no value, and
//! every other shard of the run (started at once, later, or retried after a
//! layout change) reads and uses that plan. Any stored plan covers the whole
//! key space, so a stale plan costs balance, never a product.
//!
//! The plan id names the run: `--plan-id`, or by default `asof-<ms>` when the
//! run has an explicit `--as-of` (the Kubernetes indexed Job passes the night's
//! 03:00, so its pods and their retries share one plan), else `day-<UTC date>`
//! (the shards of a manual run started the same UTC day share one plan).

use std::time::Instant;

use common::store::regions::PrefixRows;
use common::store::Store;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::shard::{estimate, plan_ranges, CountBucket, KeyRange, RangeEstimate, Shard};
use crate::{RankerError, Scope};

/// Keys read per step of the count's keys-only scan.
const COUNT_PAGE_ROWS: usize = 5_000;
/// The count's bucket budget over the whole table, shared among the regions:
/// once a region holds twice its share (a share is at least
/// [`MIN_REGION_BUCKETS`]), its light neighbouring buckets are merged in
/// pairs, so memory stays bounded however many products a region holds (the
/// cuts get coarser, not wrong). With many regions the floor wins: each keeps
/// up to `2 * MIN_REGION_BUCKETS`.
const MAX_COUNT_BUCKETS: usize = 65_536;
/// The fewest buckets a region keeps before merging: the data may all sit in
/// one region of many (sequential ids in an evenly pre-split table).
const MIN_REGION_BUCKETS: usize = 4_096;
/// Regions counted at once.
const COUNT_CONCURRENCY: usize = 4;

/// One run's cut of the key space into shards, as stored. Plans stored
/// before the row count was named for what it is (it reads every key) say
/// `sampledProducts`, `sampledComments` and `sampleMs`; they still decode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardPlan {
    /// The run the plan belongs to.
    pub plan_id: String,
    /// How many shards it cuts.
    pub count: u32,
    /// When it was computed, epoch milliseconds.
    pub created_ms: i64,
    /// Who computed it (`host:pid:random`).
    pub created_by: String,
    /// How many regions `product-comment` had.
    pub regions: usize,
    /// Products the count found.
    #[serde(alias = "sampledProducts")]
    pub counted_products: u64,
    /// Comments (`product-comment` rows) the count found.
    #[serde(alias = "sampledComments")]
    pub counted_comments: u64,
    /// How long reading the regions and counting the rows took.
    #[serde(alias = "sampleMs")]
    pub count_ms: u64,
    /// Shard `i`'s range and estimated share, in shard order.
    pub shards: Vec<PlannedShard>,
}

/// One shard of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedShard {
    /// The keys it ranks.
    pub range: KeyRange,
    /// What the count found in it.
    pub estimate: RangeEstimate,
}

/// Where the plan a shard uses came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOrigin {
    /// Another shard (or an earlier attempt) stored it first.
    Stored,
    /// This process computed and stored it.
    Written,
    /// Computed and not stored: a dry run, a read pass or `ranker shards`
    /// write nothing, so a later real run may cut differently.
    Unstored,
}

impl ShardPlan {
    /// The key range of `shard` (whose count must be the plan's).
    pub fn range(&self, shard: Shard) -> Result<KeyRange, RankerError> {
        if shard.count != self.count {
            return Err(RankerError::ShardPlan(format!("shard {shard} asked of a plan of {} shards", self.count)));
        }
        Ok(self.shards[shard.index as usize].range.clone())
    }

    /// Checks what a stored plan must be for the shards to cover every key once.
    fn validate(&self, count: u32) -> Result<(), RankerError> {
        let invalid = |reason: &str| {
            Err(RankerError::ShardPlan(format!(
                "the stored plan {:?} of {count} shards {reason}; delete its row (shard-plan:{count}:{}) in ranker-lease, \
                 once no shard of that run is running, to plan again",
                self.plan_id, self.plan_id
            )))
        };
        if self.count != count || self.shards.len() != count as usize {
            return invalid("has the wrong number of shards");
        }
        let ranges: Vec<&KeyRange> = self.shards.iter().map(|shard| &shard.range).collect();
        let meets = ranges.windows(2).all(|pair| pair[0].stop.as_ref() == Some(&pair[1].start));
        let ordered = ranges.iter().all(|range| range.stop.as_ref().is_none_or(|stop| *stop >= range.start));
        if !ranges[0].start.is_empty() || ranges[ranges.len() - 1].stop.is_some() || !meets || !ordered {
            return invalid("does not cover the key space once, in order");
        }
        Ok(())
    }
}

/// The default plan id of a sharded run: its explicit as-of time, or the UTC day.
pub fn default_plan_id(explicit_as_of_ms: Option<i64>, now_ms: i64) -> String {
    match explicit_as_of_ms {
        Some(as_of_ms) => format!("asof-{as_of_ms}"),
        None => {
            let day = chrono::DateTime::from_timestamp_millis(now_ms).unwrap_or_default().format("%Y-%m-%d");
            format!("day-{day}")
        }
    }
}

/// The plan of run `plan_id` cut into `count` shards: the stored one if any;
/// otherwise a new one, stored first-writer-wins when `may_store` (then the
/// plan returned is whichever got stored).
pub async fn agree_on_plan(
    store: &Store,
    plan_id: &str,
    count: u32,
    may_store: bool,
) -> Result<(ShardPlan, PlanOrigin), RankerError> {
    if let Some(bytes) = store.shard_plan(plan_id, count).await? {
        return Ok((decode(&bytes, count)?, PlanOrigin::Stored));
    }
    let plan = compute_plan(store, plan_id, count).await?;
    if !may_store {
        return Ok((plan, PlanOrigin::Unstored));
    }
    let bytes = serde_json::to_vec(&plan).map_err(|error| RankerError::ShardPlan(error.to_string()))?;
    let stored = store.agree_on_shard_plan(plan_id, count, bytes.clone()).await?;
    if stored == bytes {
        Ok((plan, PlanOrigin::Written))
    } else {
        Ok((decode(&stored, count)?, PlanOrigin::Stored))
    }
}

/// The scope of `shard`: its key range in the plan of run `plan_id`, agreed
/// through HBase ([`agree_on_plan`]) before anything reads the range.
pub async fn shard_scope(store: &Store, shard: Shard, plan_id: &str, may_store: bool) -> Result<Scope, RankerError> {
    let (plan, origin) = agree_on_plan(store, plan_id, shard.count, may_store).await?;
    let range = plan.range(shard)?;
    let estimate = plan.shards[shard.index as usize].estimate;
    tracing::info!(
        %shard,
        plan_id,
        ?origin,
        plan_created_by = %plan.created_by,
        start = %common::store::escape(&range.start),
        stop = %range.stop.as_deref().map_or_else(|| "(end of table)".to_owned(), common::store::escape),
        estimated_products = estimate.products,
        estimated_comments = estimate.comments,
        "ranking the shard's key range"
    );
    Ok(Scope::Shard { shard, range })
}

fn decode(bytes: &[u8], count: u32) -> Result<ShardPlan, RankerError> {
    let plan: ShardPlan = serde_json::from_slice(bytes)
        .map_err(|error| RankerError::ShardPlan(format!("the stored shard plan does not decode: {error}")))?;
    plan.validate(count)?;
    Ok(plan)
}

/// Reads the regions and counts the rows now and cuts `count` shards (stores nothing).
pub async fn compute_plan(store: &Store, plan_id: &str, count: u32) -> Result<ShardPlan, RankerError> {
    let started = Instant::now();
    let regions = store.product_comment_regions().await?;
    let counted = count_rows_per_product(store, &regions).await?;
    let starts: Vec<Vec<u8>> = regions.iter().map(|region| region.start.clone()).collect();
    let shards = plan_ranges(&starts, &counted, count)
        .into_iter()
        .map(|range| PlannedShard { estimate: estimate(&range, &counted), range })
        .collect();
    let count_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let plan = ShardPlan {
        plan_id: plan_id.to_owned(),
        count,
        created_ms: chrono::Utc::now().timestamp_millis(),
        created_by: common::store::lease::default_holder(),
        regions: regions.len(),
        counted_products: counted.iter().map(|bucket| bucket.products).sum(),
        counted_comments: counted.iter().map(|bucket| bucket.comments).sum(),
        count_ms,
        shards,
    };
    tracing::info!(
        plan_id,
        count,
        regions = plan.regions,
        products = plan.counted_products,
        comments = plan.counted_comments,
        count_ms,
        "computed a shard plan"
    );
    Ok(plan)
}

/// Counts `product-comment`'s rows per product, region by region (a few
/// regions at once), with keys-only scans that leave the block cache alone.
pub async fn count_rows_per_product(store: &Store, regions: &[KeyRange]) -> Result<Vec<CountBucket>, RankerError> {
    let cap = (MAX_COUNT_BUCKETS / regions.len().max(1)).max(MIN_REGION_BUCKETS);
    let mut per_region: Vec<Vec<CountBucket>> = vec![Vec::new(); regions.len()];
    let mut counting = JoinSet::new();
    for (index, region) in regions.iter().enumerate() {
        while counting.len() >= COUNT_CONCURRENCY {
            collect(&mut counting, &mut per_region).await?;
        }
        let (store, region) = (store.clone(), region.clone());
        counting.spawn(async move { (index, count_region(&store, &region, cap).await) });
    }
    while !counting.is_empty() {
        collect(&mut counting, &mut per_region).await?;
    }
    Ok(per_region.into_iter().flatten().collect())
}

type RegionCount = (usize, Result<Vec<CountBucket>, common::Error>);

async fn collect(counting: &mut JoinSet<RegionCount>, per_region: &mut [Vec<CountBucket>]) -> Result<(), RankerError> {
    if let Some(joined) = counting.join_next().await {
        let (index, buckets) =
            joined.map_err(|error| RankerError::ShardPlan(format!("counting a region's rows failed: {error}")))?;
        per_region[index] = buckets?;
    }
    Ok(())
}

async fn count_region(store: &Store, region: &KeyRange, cap: usize) -> Result<Vec<CountBucket>, common::Error> {
    let mut buckets: Vec<CountBucket> = Vec::new();
    // The product the last bucket ends with: a product cut by a page boundary continues it.
    let mut last_prefix: Vec<u8> = Vec::new();
    let mut start = region.start.clone();
    loop {
        let page = store.count_product_comment_rows(start, region.stop.clone(), COUNT_PAGE_ROWS).await?;
        for PrefixRows { prefix, rows } in page.prefixes {
            match buckets.last_mut() {
                Some(last) if prefix == last_prefix => last.comments += rows,
                _ => {
                    buckets.push(CountBucket { first_key: prefix.clone(), products: 1, comments: rows });
                    last_prefix = prefix;
                }
            }
        }
        if buckets.len() >= 2 * cap {
            buckets = merge_pairs(buckets);
        }
        match page.next {
            Some(next) => start = next,
            None => return Ok(buckets),
        }
    }
}

/// Shrinks the buckets by merging neighbouring pairs, each keeping its first
/// key, but only pairs that together weigh at most four times an average
/// bucket (products and comments weighed equally): a hot product stays a
/// bucket of its own, so the plan can still give it a shard. At most a quarter
/// of the pairs can be that heavy, so each pass shrinks the list by a quarter
/// or more.
fn merge_pairs(buckets: Vec<CountBucket>) -> Vec<CountBucket> {
    let products: u64 = buckets.iter().map(|bucket| bucket.products).sum();
    let comments: u64 = buckets.iter().map(|bucket| bucket.comments).sum();
    let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
    let weight =
        |products_part: u64, comments_part: u64| share(products_part, products) + share(comments_part, comments);
    let limit = 4.0 * 2.0 / buckets.len().max(1) as f64;
    let mut merged: Vec<CountBucket> = Vec::with_capacity(buckets.len());
    let mut last_is_pair = true;
    for bucket in buckets {
        match merged.last_mut() {
            Some(last)
                if !last_is_pair
                    && weight(last.products + bucket.products, last.comments + bucket.comments) <= limit =>
            {
                last.products += bucket.products;
                last.comments += bucket.comments;
                last_is_pair = true;
            }
            _ => {
                merged.push(bucket);
                last_is_pair = false;
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(key: &str, products: u64, comments: u64) -> CountBucket {
        CountBucket { first_key: key.as_bytes().to_vec(), products, comments }
    }

    #[test]
    fn merging_pairs_keeps_every_count_and_each_pairs_first_key() {
        let merged = merge_pairs(vec![bucket("a", 1, 3), bucket("b", 1, 4), bucket("c", 2, 5)]);
        assert_eq!(merged, vec![bucket("a", 2, 7), bucket("c", 2, 5)]);
    }

    #[test]
    fn merging_leaves_a_hot_product_a_bucket_of_its_own() {
        let mut buckets = vec![bucket("P1", 1, 100_000), bucket("P2", 1, 50)];
        buckets.extend((3..40).map(|n| bucket(&format!("P{n:02}"), 1, 50)));
        let merged = merge_pairs(buckets);
        assert_eq!(merged[0], bucket("P1", 1, 100_000));
        assert!(merged.len() <= 30, "{}", merged.len());
        assert_eq!(merged.iter().map(|bucket| bucket.products).sum::<u64>(), 39);
    }

    #[test]
    fn the_default_plan_id_is_the_explicit_as_of_or_the_utc_day() {
        assert_eq!(default_plan_id(Some(1_714_532_400_000), 0), "asof-1714532400000");
        assert_eq!(default_plan_id(None, 1_714_532_400_000), "day-2024-05-01");
    }

    fn plan(count: u32, ranges: Vec<KeyRange>) -> ShardPlan {
        ShardPlan {
            plan_id: "p".to_owned(),
            count,
            created_ms: 0,
            created_by: "test".to_owned(),
            regions: 1,
            counted_products: 0,
            counted_comments: 0,
            count_ms: 0,
            shards: ranges
                .into_iter()
                .map(|range| PlannedShard { range, estimate: RangeEstimate::default() })
                .collect(),
        }
    }

    #[test]
    fn a_stored_plan_reads_back_and_a_broken_one_is_refused() {
        let good = plan(3, plan_ranges(&[], &[bucket("P1", 1, 1), bucket("P2", 1, 1), bucket("P3", 1, 1)], 3));
        let bytes = serde_json::to_vec(&good).expect("encode");
        assert_eq!(decode(&bytes, 3).expect("decode"), good);
        assert!(decode(&bytes, 4).is_err(), "a plan of 3 is not one of 4");
        let older = String::from_utf8(bytes.clone())
            .expect("json")
            .replace("countedProducts", "sampledProducts")
            .replace("countedComments", "sampledComments")
            .replace("countMs", "sampleMs");
        assert_ne!(older.as_bytes(), &bytes[..]);
        assert_eq!(decode(older.as_bytes(), 3).expect("a plan stored by an older ranker"), good);
        let gap = plan(
            2,
            vec![
                KeyRange { start: Vec::new(), stop: Some(b"P1".to_vec()) },
                KeyRange { start: b"P2".to_vec(), stop: None },
            ],
        );
        assert!(decode(&serde_json::to_vec(&gap).expect("encode"), 2).is_err(), "a gap loses products");
        assert!(decode(b"{}", 2).is_err());
    }

    #[test]
    fn a_layout_change_changes_a_fresh_plan_but_not_the_ranges_a_stored_plan_gives() {
        // Simulated at the pure seam (Thrift1 cannot split a region): the
        // first shard planned with one region, a later one would see eight.
        let samples: Vec<CountBucket> = (0..800).map(|n| bucket(&format!("P{n:09}"), 1, 1 + n % 7)).collect();
        let before = plan(8, plan_ranges(&[Vec::new()], &samples, 8));
        let starts: Vec<Vec<u8>> =
            (0..8).map(|n| if n == 0 { Vec::new() } else { format!("P{:09}", n * 100 + 3).into_bytes() }).collect();
        let after = plan_ranges(&starts, &samples, 8);
        assert_ne!(before.shards.iter().map(|shard| shard.range.clone()).collect::<Vec<_>>(), after);
        let stored = decode(&serde_json::to_vec(&before).expect("encode"), 8).expect("decode");
        for index in 0..8 {
            let shard = Shard::new(index, 8).expect("shard");
            assert_eq!(stored.range(shard).expect("range"), before.shards[index as usize].range);
        }
        assert!(stored.range(Shard::new(0, 4).expect("shard")).is_err());
    }
}
