//! `ranker shards`: how `run --shard i/COUNT` cuts the products.

use crate::console;
use crate::shard_plan::{self, PlanOrigin};
use anyhow::{Context, Result};
use clap::Args;
use common::config::HbaseArgs;
use common::exit::ExitStatus;

#[derive(Debug, Args)]
pub struct ShardsArgs {
    /// How many shards.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::MAX_SHARDS)))]
    count: u32,

    /// Show the plan stored for this run id (see `run --plan-id`), if any.
    #[arg(long, value_name = "ID", env = "RANKER_SHARD_PLAN")]
    plan_id: Option<String>,

    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    hbase: HbaseArgs,
}

pub async fn execute(args: ShardsArgs) -> Result<ExitStatus> {
    let store = args.hbase.store().context("configuring HBase access")?;
    let (plan, origin) = match &args.plan_id {
        Some(plan_id) => shard_plan::agree_on_plan(&store, plan_id, args.count, false).await,
        None => shard_plan::compute_plan(&store, "preview", args.count).await.map(|plan| (plan, PlanOrigin::Unstored)),
    }
    .context("planning the shards")?;
    let view = console::plan_view(&plan, origin);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view).context("encoding the plan")?);
    } else {
        print!("{}", console::format_plan_table(&view));
    }
    Ok(ExitStatus::Success)
}
