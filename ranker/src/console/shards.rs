//! `ranker shards`: a plan's shards with their key ranges and estimated
//! shares, as a table or as JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::shard_plan::{PlanOrigin, ShardPlan};

/// One shard as `ranker shards --json` prints it: keys escaped for reading
/// (`\xNN` for bytes outside printable ASCII), shares as fractions of what the count found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardView {
    /// The shard's index.
    pub index: u32,
    /// Its first key, escaped (empty: the start of the table).
    pub start: String,
    /// The first key after it, escaped; `None`: the end of the table.
    pub stop: Option<String>,
    /// Products the count found in it.
    pub products: u64,
    /// Their fraction of every counted product.
    pub product_share: f64,
    /// Comments the count found in it.
    pub comments: u64,
    /// Their fraction of every counted comment.
    pub comment_share: f64,
}

/// A plan as `ranker shards --json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The run the plan belongs to.
    pub plan_id: String,
    /// Whether it was stored already or computed for this listing.
    pub origin: PlanOrigin,
    /// How many shards.
    pub count: u32,
    /// Regions of `product-comment` when the plan was made.
    pub regions: usize,
    /// Products the count found.
    pub counted_products: u64,
    /// Comments the count found.
    pub counted_comments: u64,
    /// How long reading the regions and counting the rows took.
    pub count_ms: u64,
    /// The largest shard's share over the mean share, for products.
    pub max_over_mean_products: f64,
    /// The same for comments.
    pub max_over_mean_comments: f64,
    /// The shards in order.
    pub shards: Vec<ShardView>,
}

/// The view of `plan`.
pub fn plan_view(plan: &ShardPlan, origin: PlanOrigin) -> PlanView {
    let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
    let shards: Vec<ShardView> = plan
        .shards
        .iter()
        .zip(0..)
        .map(|(shard, index)| ShardView {
            index,
            start: common::store::escape(&shard.range.start),
            stop: shard.range.stop.as_deref().map(common::store::escape),
            products: shard.estimate.products,
            product_share: share(shard.estimate.products, plan.counted_products),
            comments: shard.estimate.comments,
            comment_share: share(shard.estimate.comments, plan.counted_comments),
        })
        .collect();
    let max_over_mean = |value: fn(&ShardView) -> f64| {
        let max = shards.iter().map(value).fold(0.0, f64::max);
        max * f64::from(plan.count.max(1))
    };
    PlanView {
        plan_id: plan.plan_id.clone(),
        origin,
        count: plan.count,
        regions: plan.regions,
        counted_products: plan.counted_products,
        counted_comments: plan.counted_comments,
        count_ms: plan.count_ms,
        max_over_mean_products: max_over_mean(|shard| shard.product_share),
        max_over_mean_comments: max_over_mean(|shard| shard.comment_share),
        shards,
    }
}

/// The plan as a table, with a header saying where it came from.
pub fn format_plan_table(view: &PlanView) -> String {
    let origin = match view.origin {
        PlanOrigin::Stored => "stored",
        PlanOrigin::Written => "stored now",
        PlanOrigin::Unstored => "computed now, not stored",
    };
    let mut text = format!(
        "plan {:?} ({origin}): {} shards over {} region(s); counted {} products, {} comments in {:.1} s\n",
        view.plan_id,
        view.count,
        view.regions,
        view.counted_products,
        view.counted_comments,
        view.count_ms as f64 / 1000.0,
    );
    let _ = writeln!(
        text,
        "{:>5}  {:<24} {:<24} {:>10} {:>7} {:>12} {:>7}",
        "shard", "start", "stop", "products", "share", "comments", "share"
    );
    for shard in &view.shards {
        let start = if shard.start.is_empty() { "(start of table)".to_owned() } else { shard.start.clone() };
        let stop = shard.stop.clone().unwrap_or_else(|| "(end of table)".to_owned());
        let _ = writeln!(
            text,
            "{:>5}  {start:<24} {stop:<24} {:>10} {:>6.1}% {:>12} {:>6.1}%",
            shard.index,
            shard.products,
            shard.product_share * 100.0,
            shard.comments,
            shard.comment_share * 100.0
        );
    }
    let _ = writeln!(
        text,
        "largest shard / mean: products {:.2}, comments {:.2}",
        view.max_over_mean_products, view.max_over_mean_comments
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{estimate, plan_ranges, CountBucket};
    use crate::shard_plan::PlannedShard;

    #[test]
    fn the_table_shows_escaped_ranges_and_shares() {
        let samples = vec![
            CountBucket { first_key: b"A000000000".to_vec(), products: 3, comments: 30 },
            CountBucket { first_key: b"B\xff00000000".to_vec(), products: 1, comments: 10 },
        ];
        let plan = ShardPlan {
            plan_id: "asof-1".to_owned(),
            count: 2,
            created_ms: 0,
            created_by: "test".to_owned(),
            regions: 1,
            counted_products: 4,
            counted_comments: 40,
            count_ms: 1_500,
            shards: plan_ranges(&[], &samples, 2)
                .into_iter()
                .map(|range| PlannedShard { estimate: estimate(&range, &samples), range })
                .collect(),
        };
        let view = plan_view(&plan, PlanOrigin::Unstored);
        assert_eq!(view.shards[1].start, "B\\xff00000000");
        assert_eq!((view.shards[0].products, view.shards[1].comments), (3, 10));
        assert!((view.max_over_mean_products - 1.5).abs() < 1e-9, "{}", view.max_over_mean_products);
        let table = format_plan_table(&view);
        assert!(table.contains("(start of table)") && table.contains("(end of table)"), "{table}");
        assert!(table.contains("75.0%") && table.contains("computed now, not stored"), "{table}");
    }
}
