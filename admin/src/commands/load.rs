//! `reviews-admin demo load`: a seeded data set (`crate::demo`) written
//! through the write path, with progress and a summary.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use common::config::HbaseArgs;
use common::hbase::Hbase;
use common::schema::{self, RegionReplication};
use common::store::Store;
use indicatif::HumanCount;
use serde::Serialize;

use super::progress::ProgressReporter;
use super::schema::RegionsArg;
use crate::demo::{self, DemoPlan, DemoSpec, LoadOptions, LoadReport, Ranked};

#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    hbase: HbaseArgs,
    #[command(flatten)]
    regions: RegionsArg,
    /// Number of users (U000000001, ...).
    #[arg(long, default_value_t = DemoSpec::default().users)]
    users: u64,
    /// Number of sellers (S000000001, ...).
    #[arg(long, default_value_t = DemoSpec::default().sellers)]
    sellers: u64,
    /// Number of products (P000000001 is the hottest).
    #[arg(long, default_value_t = DemoSpec::default().products)]
    products: u64,
    /// Number of comments, each on an order of its own (O000000001, ...).
    #[arg(long, default_value_t = DemoSpec::default().comments)]
    comments: u64,
    /// Seed of every random choice: the same seed and sizes give the same bytes.
    #[arg(long, default_value_t = DemoSpec::default().seed)]
    seed: u64,
    /// How many products are "hot".
    #[arg(long, default_value_t = DemoSpec::default().hot_products)]
    hot_products: u64,
    /// Share of all comments that go to the hot products (0 to 1).
    #[arg(long, default_value_t = DemoSpec::default().hot_share)]
    hot_share: f64,
    /// The hottest product gets at least this many comments.
    #[arg(long, default_value_t = DemoSpec::default().min_hottest_comments)]
    min_hottest_comments: u64,
    /// Newest possible comment time, epoch milliseconds; comments spread over
    /// the two years before it. Fixed by default so loads are reproducible; pass
    /// `$(date +%s000)` for fresh timestamps.
    #[arg(long, default_value_t = DemoSpec::default().end_time_ms)]
    end_time_ms: i64,
    /// Comments per write-path call (and records per put).
    #[arg(long, default_value_t = LoadOptions::default().batch_size)]
    batch_size: usize,
    /// Batches written concurrently (each holds one pooled connection while it writes).
    #[arg(long, default_value_t = LoadOptions::default().in_flight)]
    in_flight: usize,
    /// Also write the summary (sizes, timing, hottest products, most active users) as JSON to this file.
    #[arg(long)]
    summary_json: Option<PathBuf>,
}

/// Creates the missing tables, loads the data set and prints its summary.
pub async fn load_demo(args: &LoadArgs) -> anyhow::Result<()> {
    let spec = DemoSpec {
        users: args.users,
        sellers: args.sellers,
        products: args.products,
        comments: args.comments,
        seed: args.seed,
        hot_products: args.hot_products,
        hot_share: args.hot_share,
        min_hottest_comments: args.min_hottest_comments,
        end_time_ms: args.end_time_ms,
    };
    let plan = DemoPlan::new(spec)?;
    let options = LoadOptions { batch_size: args.batch_size, in_flight: args.in_flight };
    if args.in_flight > args.hbase.pool_size as usize {
        tracing::warn!(
            in_flight = args.in_flight,
            pool_size = args.hbase.pool_size,
            "more batches in flight than pooled connections: the extra batches wait for a connection"
        );
    }
    let hbase = Hbase::new(args.hbase.hbase_config());
    let tables = args.hbase.tables()?;
    // A fresh HBase has no tables yet; creating the missing ones lets one command set up a demo.
    // Replicas are a production setting an operator chooses (`schema create
    // --region-replication`), not a demo's.
    let outcomes = schema::create_tables(&hbase, &tables, args.regions.regions()?, RegionReplication::PRIMARY_ONLY)
        .await
        .with_context(|| {
            format!(
                "creating tables through the Thrift gateways at {} and {}",
                args.hbase.thrift_addr, args.hbase.thrift2_addr
            )
        })?;
    for outcome in outcomes.iter().filter(|outcome| outcome.created) {
        tracing::info!(table = %outcome.name, regions = outcome.regions, "created a missing table");
    }
    let store = Store::new(hbase, tables);
    let mut progress = ProgressReporter::new();
    let report = demo::load(&store, &plan, &options, |update| progress.update(update))
        .await
        .with_context(|| format!("loading demo data into tables {:?}*", args.hbase.table_prefix))?;
    progress.finish();
    print_summary(args, &report);
    if let Some(path) = &args.summary_json {
        write_summary_json(path, args, &report)?;
        println!("  summary written to {}", path.display());
    }
    Ok(())
}

fn ranked_list(ranked: &[Ranked]) -> String {
    ranked
        .iter()
        .map(|item| format!("{} ({} comments)", item.id, HumanCount(item.comments)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_summary(args: &LoadArgs, report: &LoadReport) {
    let prefix = &args.hbase.table_prefix;
    if report.already_loaded {
        println!(
            "The tables {prefix:?}* at {} already hold this data set (seed {}); nothing was written.",
            args.hbase.thrift_addr, args.seed
        );
    } else {
        println!("Loaded demo data into tables {prefix:?}* at {} (seed {}):", args.hbase.thrift_addr, args.seed);
    }
    println!("  users      {:>12}", HumanCount(report.users).to_string());
    println!("  sellers    {:>12}", HumanCount(report.sellers).to_string());
    println!("  products   {:>12}", HumanCount(report.products).to_string());
    println!("  orders     {:>12}", HumanCount(report.orders).to_string());
    println!("  comments   {:>12}", HumanCount(report.comments).to_string());
    if !report.already_loaded {
        println!(
            "  elapsed    {:>10.1} s (comments and orders {:.1} s: {:.0} comments/s)",
            report.elapsed.as_secs_f64(),
            report.comments_elapsed.as_secs_f64(),
            report.comments_per_second()
        );
    }
    println!("  hottest products:   {}", ranked_list(&report.hottest_products));
    println!("  most active users:  {}", ranked_list(&report.active_users));
}

/// The facts of a load, for scripts (the demo prints example requests with them) and benchmarks.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    thrift_addr: &'a str,
    table_prefix: &'a str,
    seed: u64,
    end_time_ms: i64,
    hot_products: u64,
    hot_share: f64,
    min_hottest_comments: u64,
    batch_size: usize,
    in_flight: usize,
    already_loaded: bool,
    users: u64,
    sellers: u64,
    products: u64,
    orders: u64,
    comments: u64,
    elapsed_seconds: f64,
    comments_seconds: f64,
    comments_per_second: f64,
    hottest_products: &'a [Ranked],
    active_users: &'a [Ranked],
}

fn write_summary_json(path: &Path, args: &LoadArgs, report: &LoadReport) -> anyhow::Result<()> {
    let summary = Summary {
        thrift_addr: &args.hbase.thrift_addr.to_string(),
        table_prefix: &args.hbase.table_prefix,
        seed: args.seed,
        end_time_ms: args.end_time_ms,
        hot_products: args.hot_products,
        hot_share: args.hot_share,
        min_hottest_comments: args.min_hottest_comments,
        batch_size: args.batch_size,
        in_flight: args.in_flight,
        already_loaded: report.already_loaded,
        users: report.users,
        sellers: report.sellers,
        products: report.products,
        orders: report.orders,
        comments: report.comments,
        elapsed_seconds: report.elapsed.as_secs_f64(),
        comments_seconds: report.comments_elapsed.as_secs_f64(),
        comments_per_second: report.comments_per_second(),
        hottest_products: &report.hottest_products,
        active_users: &report.active_users,
    };
    if let Some(directory) = path.parent().filter(|directory| !directory.as_os_str().is_empty()) {
        std::fs::create_dir_all(directory).with_context(|| format!("creating {}", directory.display()))?;
    }
    let mut json = serde_json::to_vec_pretty(&summary).context("encoding the summary")?;
    json.push(b'\n');
    std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
}
