//! `reviews-admin`: operator commands for the review tables: create, upgrade or
//! drop the schema, load a seeded demo or benchmark data set through the write path, and
//! check or repair the comment indexes.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use admin::demo::{self, DemoError, DemoPlan, DemoSpec, LoadOptions, LoadReport, Phase, Progress, Ranked};
use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use common::config::{init_tracing, HbaseArgs};
use common::exit::ExitStatus;
use common::hbase::Hbase;
use common::schema::{self, Regions};
use common::store::{IndexCheckOptions, MissingIndex, Store};
use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// Operator commands for the product-review tables in HBase.
#[derive(Debug, Parser)]
#[command(name = "reviews-admin", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create or drop the tables.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Generate demo and benchmark data.
    #[command(subcommand)]
    Demo(DemoCommand),
    /// Find (and repair) comments that no index row points at.
    #[command(subcommand)]
    Index(IndexCommand),
}

#[derive(Debug, Subcommand)]
enum IndexCommand {
    /// Report every comment missing from `user-comment` or `product-comment`;
    /// never writes. Exits 1 when any is missing.
    Check(IndexArgs),
    /// Write the missing index rows (with this project's tie suffix) and report them.
    Repair {
        #[command(flatten)]
        args: IndexArgs,
        /// Report what would be written, and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Args)]
struct IndexArgs {
    #[command(flatten)]
    hbase: HbaseArgs,
    /// Comment rows read per round trip (memory holds one page).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    page_rows: u64,
    /// Also print the report as JSON on the last line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum SchemaCommand {
    /// Create every missing table (family `cf`); tables that exist are left alone.
    Create {
        #[command(flatten)]
        hbase: HbaseArgs,
        #[command(flatten)]
        regions: RegionsArg,
    },
    /// Give existing tables the settings `create` gives new ones (today: a
    /// row index in each data block, HBase's ROW_INDEX_V1), keeping every
    /// other setting of their families; tables that have them are left alone.
    Upgrade {
        #[command(flatten)]
        hbase: HbaseArgs,
    },
    /// Drop every table under a prefix (for test and benchmark prefixes).
    Drop {
        #[command(flatten)]
        hbase: HbaseArgs,
        /// Allow dropping the unprefixed tables, which hold production data.
        #[arg(long)]
        i_mean_the_production_tables: bool,
    },
}

/// How many regions the tables keyed by a random id are created with.
#[derive(Debug, Args)]
struct RegionsArg {
    /// Pre-split `comment`, `user-comment`, `product-comment` and
    /// `product-comment-rank` into this many regions, evenly over the id
    /// alphabet `[0-9A-Za-z]` (1 to 1000). Applies only to tables this
    /// command creates: existing tables keep their regions.
    #[arg(long = "regions", env = "REVIEWS_SCHEMA_REGIONS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(common::keys::MAX_SPLIT_REGIONS)))]
    count: u32,
}

impl RegionsArg {
    fn regions(&self) -> anyhow::Result<Regions> {
        Ok(Regions::new(self.count)?)
    }
}

#[derive(Debug, Subcommand)]
enum DemoCommand {
    /// Write a seeded, reproducible data set through the write path (creating missing tables first).
    Load(LoadArgs),
}

#[derive(Debug, Args)]
struct LoadArgs {
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

#[tokio::main]
async fn main() -> ExitCode {
    init_tracing();
    let outcome = match Cli::parse().command {
        Command::Schema(SchemaCommand::Create { hbase, regions }) => create_schema(&hbase, &regions).await,
        Command::Schema(SchemaCommand::Upgrade { hbase }) => upgrade_schema(&hbase).await,
        Command::Schema(SchemaCommand::Drop { hbase, i_mean_the_production_tables }) => {
            drop_schema(&hbase, i_mean_the_production_tables).await
        }
        Command::Demo(DemoCommand::Load(args)) => load_demo(&args).await,
        Command::Index(IndexCommand::Check(args)) => check_indexes(&args, IndexMode::Check).await,
        Command::Index(IndexCommand::Repair { args, dry_run }) => {
            check_indexes(&args, if dry_run { IndexMode::DryRun } else { IndexMode::Repair }).await
        }
    };
    match outcome {
        Ok(()) => ExitStatus::Success.into(),
        Err(error) => {
            // The cause chain on one line is what an operator needs; a stack
            // trace (which anyhow adds under RUST_BACKTRACE) is not.
            eprintln!("error: {error:#}");
            // Sizes or options that cannot work are usage errors, like a bad flag.
            let usage = error.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<DemoError>(),
                    Some(DemoError::InvalidSpec(_) | DemoError::InvalidOptions(_))
                )
            });
            if usage { ExitStatus::Usage } else { ExitStatus::Failure }.into()
        }
    }
}

/// What `index` does with the missing rows it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexMode {
    Check,
    DryRun,
    Repair,
}

async fn check_indexes(args: &IndexArgs, mode: IndexMode) -> anyhow::Result<()> {
    let store = args.hbase.store()?;
    let options = IndexCheckOptions {
        page_rows: usize::try_from(args.page_rows).unwrap_or(usize::MAX),
        repair: mode == IndexMode::Repair,
    };
    // A long walk shows how far it is: a spinner on a terminal, a log line every
    // ten seconds otherwise (cron, CI, kubectl logs).
    let spinner = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut last_log = Instant::now();
    let report = store
        .check_indexes(options, |so_far| {
            let line = format!(
                "{} comments scanned, {} missing index rows, {} written",
                HumanCount(so_far.comments_scanned),
                HumanCount(so_far.missing()),
                HumanCount(so_far.index_rows_written)
            );
            match &spinner {
                Some(bar) => bar.set_message(line),
                None if last_log.elapsed() >= Duration::from_secs(10) => {
                    tracing::info!("{line}");
                    last_log = Instant::now();
                }
                None => {}
            }
        })
        .await
        .with_context(|| format!("checking the comment indexes of tables {:?}*", args.hbase.table_prefix))?;
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    println!("comments scanned:             {}", report.comments_scanned);
    println!("comments that do not decode:  {}", report.comments_skipped);
    println!("missing user-comment rows:    {}", report.missing_user_index);
    println!("missing product-comment rows: {}", report.missing_product_index);
    let written = match mode {
        IndexMode::Repair => format!("{} index rows written", report.index_rows_written),
        IndexMode::DryRun => format!("dry run: {} index rows would be written, none was", report.missing()),
        IndexMode::Check => "check: nothing written".to_owned(),
    };
    println!("{written}");
    for missing in &report.first_missing {
        let index = match missing.index {
            MissingIndex::UserComment => "user-comment",
            MissingIndex::ProductComment => "product-comment",
        };
        println!("  {} has no {index} row", missing.comment);
    }
    if report.missing() > report.first_missing.len() as u64 {
        println!("  ... and {} more", report.missing() - report.first_missing.len() as u64);
    }
    if args.json {
        println!("{}", serde_json::to_string(&report).context("rendering the report as JSON")?);
    }
    if mode == IndexMode::Check && report.missing() > 0 {
        bail!("{} index rows are missing; `reviews-admin index repair` writes them", report.missing());
    }
    Ok(())
}

async fn create_schema(args: &HbaseArgs, regions: &RegionsArg) -> anyhow::Result<()> {
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let outcomes = schema::create_tables(&hbase, &tables, regions.regions()?).await.with_context(|| {
        format!("creating tables through the Thrift gateways at {} and {}", args.thrift_addr, args.thrift2_addr)
    })?;
    for outcome in &outcomes {
        let what = if outcome.created { "created" } else { "already exists" };
        let plural = if outcome.regions == 1 { "" } else { "s" };
        let encodings = family_list(&outcome.block_encodings);
        println!("{:<48} {what} ({} region{plural}; {encodings})", outcome.name, outcome.regions);
    }
    let created = outcomes.iter().filter(|outcome| outcome.created).count();
    println!("{created} created, {} already existed", outcomes.len() - created);
    let unindexed = outcomes.iter().filter(|outcome| outcome.lacks_row_index()).count();
    if unindexed > 0 {
        println!(
            "{unindexed} existing tables lack a row index in their data blocks, which makes every get slower; \
             `reviews-admin schema upgrade` adds it"
        );
    }
    Ok(())
}

async fn upgrade_schema(args: &HbaseArgs) -> anyhow::Result<()> {
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let outcomes = schema::upgrade_tables(&hbase, &tables).await.with_context(|| {
        format!("upgrading tables through the Thrift gateways at {} and {}", args.thrift_addr, args.thrift2_addr)
    })?;
    for outcome in &outcomes {
        let what = if !outcome.exists {
            "does not exist (`reviews-admin schema create` creates it)".to_owned()
        } else if outcome.families_changed.is_empty() {
            format!("up to date ({})", family_list(&outcome.encodings_before))
        } else {
            format!(
                "row index added to {} (was {})",
                outcome.families_changed.join(", "),
                family_list(&outcome.encodings_before)
            )
        };
        println!("{:<48} {what}", outcome.name);
    }
    let upgraded: Vec<&str> = outcomes
        .iter()
        .filter(|outcome| !outcome.families_changed.is_empty())
        .map(|outcome| outcome.name.as_str())
        .collect();
    println!("{} upgraded", upgraded.len());
    if let Some(first) = upgraded.first() {
        // No Thrift gateway can ask for a major compaction (schema::upgrade_tables says why).
        println!(
            "files written before keep their layout until HBase compacts them; to rewrite them now, \
             run `major_compact '<table>'` in the HBase shell for each table upgraded (e.g. '{first}'), \
             in a quiet hour: it rewrites the whole table"
        );
    }
    Ok(())
}

/// Families and their block encodings, as `cf ROW_INDEX_V1, other NONE`.
fn family_list(encodings: &[(String, String)]) -> String {
    let families: Vec<String> = encodings.iter().map(|(family, encoding)| format!("{family} {encoding}")).collect();
    families.join(", ")
}

async fn drop_schema(args: &HbaseArgs, production_confirmed: bool) -> anyhow::Result<()> {
    if args.table_prefix.is_empty() && !production_confirmed {
        bail!(
            "refusing to drop the unprefixed tables, which hold production data: pass --table-prefix for test or \
             benchmark tables, or --i-mean-the-production-tables if you really mean it"
        );
    }
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let existing = schema::table_names(&hbase)
        .await
        .with_context(|| format!("listing tables through the Thrift gateway at {}", args.thrift_addr))?;
    schema::drop_tables(&hbase, &tables).await.with_context(|| format!("dropping tables {}*", args.table_prefix))?;
    let mut dropped = 0;
    for name in tables.all() {
        let was_there = existing.iter().any(|table| table == name);
        dropped += usize::from(was_there);
        println!("{name:<48} {}", if was_there { "dropped" } else { "did not exist" });
    }
    println!("{dropped} dropped");
    Ok(())
}

async fn load_demo(args: &LoadArgs) -> anyhow::Result<()> {
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
    let outcomes = schema::create_tables(&hbase, &tables, args.regions.regions()?).await.with_context(|| {
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

/// Shows progress: a bar per phase on a terminal, otherwise a log line at each
/// phase's start and end and every few seconds in between.
struct ProgressReporter {
    bar: Option<ProgressBar>,
    phase: Option<Phase>,
    phase_started: Instant,
    last_line: Instant,
    interactive: bool,
}

impl ProgressReporter {
    /// How often a non-interactive load logs its progress.
    const LOG_EVERY: Duration = Duration::from_secs(5);

    fn new() -> ProgressReporter {
        ProgressReporter {
            bar: None,
            phase: None,
            phase_started: Instant::now(),
            last_line: Instant::now(),
            interactive: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, progress: Progress) {
        if self.phase != Some(progress.phase) {
            self.finish();
            self.start(progress);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(progress.done);
        } else if progress.done == progress.total || self.last_line.elapsed() >= Self::LOG_EVERY {
            self.log_line(progress);
        }
    }

    fn start(&mut self, progress: Progress) {
        self.phase = Some(progress.phase);
        self.phase_started = Instant::now();
        self.last_line = Instant::now();
        if self.interactive {
            let bar = ProgressBar::with_draw_target(Some(progress.total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix:>9} [{bar:40.cyan/blue}] {human_pos}/{human_len} {per_sec} elapsed {elapsed} ETA {eta}",
            )
            .map(|style| style.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(progress.phase.to_string());
            self.bar = Some(bar);
        } else {
            tracing::info!(phase = %progress.phase, total = progress.total, "writing");
        }
    }

    fn log_line(&mut self, progress: Progress) {
        self.last_line = Instant::now();
        let seconds = self.phase_started.elapsed().as_secs_f64();
        let rate = if seconds > 0.0 { progress.done as f64 / seconds } else { 0.0 };
        let percent = if progress.total == 0 { 100.0 } else { 100.0 * progress.done as f64 / progress.total as f64 };
        tracing::info!(
            phase = %progress.phase,
            done = progress.done,
            total = progress.total,
            "{:.1} % written, {rate:.0} {}/s",
            percent,
            progress.phase
        );
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
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
        thrift_addr: &args.hbase.thrift_addr,
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
