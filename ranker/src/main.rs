//! The `ranker` command: parses flags, then calls the `ranker` library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use common::config::HbaseArgs;
use common::exit::ExitStatus;
use common::store::lease::{Clock, LeaseRequest, ReleaseOutcome, SystemClock, TakeOutcome};
use common::store::runs::RunStatus;
use common::store::Store;
use common::Id;
use metrics_exporter_prometheus::PrometheusHandle;
use ranker::console::{self, ProgressDisplay};
use ranker::history::{parse_time, ChangedSince};
use ranker::keeper::{keep_lease, KeeperEnd, StoreRenewer};
use ranker::recorded::RunIdentity;
use ranker::shard_plan::{self, PlanOrigin};
use ranker::telemetry::{Pushgateway, PUSH_INTERVAL};
use ranker::{Incremental, PaceMode, RankerConfig, RunOptions, RunProgress, RunReport, Scope, Shard};
use tokio_util::sync::CancellationToken;

/// Picks each product's ten best reviews and writes them to product-comment-rank.
///
/// Scores follow docs/contract.md §6 (substance, Wilson helpfulness, recency,
/// photos); see ranker.example.toml for every parameter. The same data and
/// the same --as-of always give the same slots.
#[derive(Debug, Parser)]
#[command(name = "ranker", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Rank every product (or one, or one shard) and write the slots.
    ///
    /// A full or shard run takes the nightly lease that `ranker-cron` takes, so
    /// it never interleaves with the nightly run; `--product` reruns do not.
    ///
    /// Exits 0 when every product was ranked, 1 when any failed (after its
    /// retries), 2 for a usage error, 75 when another run holds the lease (try
    /// later), 130 when stopped by SIGINT/SIGTERM (products in flight are
    /// finished first).
    Run(RunArgs),
    /// Show how one product's ranking comes about (writes nothing).
    ///
    /// Prints every term of each pick's score, and the notable comments left
    /// out: too short, duplicate content, or a second comment by a picked user.
    Explain(ExplainArgs),
    /// Read what `run` reads, without scoring or writing (benchmark baseline).
    ///
    /// Lists the same products and reads the same index rows and comments,
    /// through the same pool at the same concurrency, and reports comments/s.
    /// `run`'s comments/s divided by this is the ranking overhead ratio.
    BenchRead(BenchReadArgs),
    /// List recent runs of the nightly daemon (`ranker-cron`), newest first.
    ///
    /// Reads the run history in the `ranker-run` table: each attempt's as-of
    /// time, start and end, outcome and counts.
    Runs(RunsArgs),
    /// Show how `run --shard i/COUNT` cuts the products into COUNT shards.
    ///
    /// Prints each shard's key range and its estimated share of products and
    /// of comments. With --plan-id, the plan stored for that run if there is
    /// one; otherwise a plan computed now from product-comment's regions and a
    /// keys-only count of its rows (stored nowhere).
    Shards(ShardsArgs),
}

#[derive(Debug, Args)]
struct ShardsArgs {
    /// How many shards.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(ranker::shard::MAX_SHARDS)))]
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

#[derive(Debug, Args)]
struct RunsArgs {
    #[command(flatten)]
    hbase: HbaseArgs,

    /// How many runs to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

#[derive(Debug, Args)]
struct ScopeArgs {
    /// Rank only this product (a manual rerun).
    #[arg(long, value_name = "ID", conflicts_with = "shard")]
    product: Option<Id>,

    /// Rank only shard INDEX of COUNT (0 <= INDEX < COUNT, COUNT <= 1024),
    /// e.g. 3/8. The shards are contiguous key ranges cut along the regions of
    /// product-comment (inside a region at counted products where that
    /// balances better); the first shard of a run stores the plan in HBase and
    /// every other shard of the run uses it, so the COUNT shards of one run
    /// cover every product exactly once, including products added meanwhile.
    #[arg(long, value_name = "INDEX/COUNT")]
    shard: Option<Shard>,

    /// The run whose shard plan to use or store [default: asof-<ms> with an
    /// explicit --as-of, else day-<UTC date>]. Give every shard of one run the
    /// same value.
    #[arg(long, value_name = "ID", env = "RANKER_SHARD_PLAN", requires = "shard")]
    plan_id: Option<String>,
}

impl ScopeArgs {
    /// The scope before a shard's plan is known: a `--shard` run gets its
    /// range once HBase has been asked for the plan (`shard_scope`).
    fn scope_before_shard_range(&self) -> Scope {
        match self.product {
            Some(product) => Scope::Product(product),
            None => Scope::All,
        }
    }
}

#[derive(Debug, Args)]
struct PassArgs {
    #[command(flatten)]
    scope: ScopeArgs,

    /// Products ranked at once [default: run.concurrency of the config, 8].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,

    /// Index rows read per round trip, and most comments per multi-get, 1 to
    /// 5000, paced or not [default: run.page_rows, 1000; when paced,
    /// pacing.page_rows, 250].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=ranker::config::MAX_PAGE_ROWS as i64))]
    page_rows: Option<u16>,

    /// Attempts per product before it counts as failed [default: run.product_attempts, 3].
    #[arg(long, value_name = "N")]
    attempts: Option<u32>,

    /// Configuration file (TOML; see ranker.example.toml). Defaults apply without one.
    #[arg(long, value_name = "PATH", env = "RANKER_CONFIG")]
    config: Option<PathBuf>,

    /// Print the final report as JSON on stdout instead of text.
    #[arg(long)]
    json: bool,

    /// Pacing: `on` makes at most pacing.max_in_flight HBase calls at once (one),
    /// so online reads keep their latency; `off` for a maintenance window
    /// [default: pacing.mode of the config, on; `off` for bench-read].
    #[arg(long, value_enum, value_name = "MODE", env = "RANKER_PACE")]
    pace: Option<PaceMode>,

    /// Hard ceiling on comments per second, in both pacing modes [default: pacing.max_rate, none].
    #[arg(long, value_name = "N", env = "RANKER_MAX_RATE", value_parser = parse_rate)]
    max_rate: Option<f64>,

    #[command(flatten)]
    hbase: HbaseArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The as-of time of the recency term: RFC 3339 (2024-05-01T03:00:00+09:00)
    /// or epoch milliseconds [default: now].
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    as_of: Option<i64>,

    /// Compute and report, but write nothing (takes no lease).
    #[arg(long)]
    dry_run: bool,

    /// Rank only the products whose ranking may have changed since TIME: a
    /// comment or index row written since (by any writer: HBase's cell
    /// times), or a rank slot naming a deleted comment; plus tonight's slice
    /// of the rolling refresh. `last`: since the earliest start of the newest
    /// completed runs that together cover the same products, less
    /// --skew-margin-secs (every product when there are none). TIME: RFC 3339
    /// or epoch milliseconds.
    #[arg(long, value_name = "TIME|last", conflicts_with = "product")]
    changed_since: Option<ChangedSince>,

    /// With --changed-since, every product is also re-ranked once in D nights
    /// (each night the products whose id hashes to its bucket), because the
    /// recency term drifts [default: incremental.refresh_days of the config, 7].
    #[arg(long, value_name = "D", requires = "changed_since", value_parser = clap::value_parser!(u32).range(1..))]
    refresh_days: Option<u32>,

    /// With --changed-since last, look for changes from this many seconds
    /// before the last completed run's start, for clock skew between hosts
    /// [default: incremental.skew_margin_secs of the config, 300].
    #[arg(long, value_name = "SECS", requires = "changed_since")]
    skew_margin_secs: Option<u64>,

    /// Push the run's metrics to the Prometheus Pushgateway at URL: its
    /// progress every 15 s and its outcome at the end, in the group
    /// job="reviews_ranker", scope="all" (or "shard-I-of-N"). For runs a
    /// scheduler starts, such as a Kubernetes CronJob, which no scrape finds.
    #[arg(long, value_name = "URL", env = "RANKER_PUSHGATEWAY", value_parser = parse_push_url,
          conflicts_with_all = ["product", "dry_run"])]
    pushgateway: Option<String>,

    #[command(flatten)]
    lease: LeaseArgs,

    #[command(flatten)]
    pass: PassArgs,
}

/// The lease a full or shard run shares with `ranker-cron`.
#[derive(Debug, Args)]
struct LeaseArgs {
    /// The lease taken by a full or shard run: the one `ranker-cron` takes
    /// (its --lease-name), so the two never rank at the same time.
    #[arg(long, value_name = "NAME", env = "RANKER_CRON_LEASE", default_value = "nightly")]
    lease_name: String,

    /// Seconds the lease lasts without renewal (renewed every third of it).
    #[arg(long, value_name = "SECS", env = "RANKER_CRON_LEASE_TTL_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(3..))]
    lease_ttl_secs: u64,

    /// Run without the lease even if another run holds it (emergencies only:
    /// the two runs may leave products ranked at two as-of times).
    #[arg(long)]
    ignore_lease: bool,
}

#[derive(Debug, Args)]
struct ExplainArgs {
    /// The product to explain.
    #[arg(long, value_name = "ID")]
    product: Id,

    /// The as-of time: RFC 3339 or epoch milliseconds [default: now].
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    as_of: Option<i64>,

    /// Configuration file (TOML; see ranker.example.toml).
    #[arg(long, value_name = "PATH", env = "RANKER_CONFIG")]
    config: Option<PathBuf>,

    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    hbase: HbaseArgs,
}

#[derive(Debug, Args)]
struct BenchReadArgs {
    #[command(flatten)]
    pass: PassArgs,
}

/// Parses a rate in comments per second: a finite number above zero.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("expected comments per second, a number above 0, got {text:?}")),
    }
}

/// Checks a Pushgateway's base URL: http or https, with a host.
fn parse_push_url(text: &str) -> Result<String, String> {
    match reqwest::Url::parse(text.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(text.trim().to_owned()),
        Ok(_) => Err(format!("expected an http(s) URL such as http://pushgateway:9091, got {text:?}")),
        Err(error) => Err(format!("expected an http(s) URL such as http://pushgateway:9091: {error}")),
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn load_config(path: Option<&PathBuf>) -> Result<RankerConfig> {
    match path {
        Some(path) => RankerConfig::load(path).with_context(|| format!("loading the configuration {}", path.display())),
        None => Ok(RankerConfig::default()),
    }
}

/// The options of a pass under `config` (the pass's `--config`, loaded once
/// by the caller); `default_pace` applies when neither `--pace` nor the
/// configuration file's `pacing.mode` says otherwise (`None`: the config's).
fn options(pass: &PassArgs, config: &RankerConfig, as_of_ms: i64, default_pace: Option<PaceMode>) -> RunOptions {
    let mut options = RunOptions::with_config(pass.scope.scope_before_shard_range(), as_of_ms, config);
    if let Some(mode) = pass.pace.or(default_pace) {
        options.pacing.mode = mode;
    }
    if let Some(max_rate) = pass.max_rate {
        options.pacing.max_rate = Some(max_rate);
    }
    if let Some(concurrency) = pass.concurrency {
        options.concurrency = concurrency;
    }
    // The flag sets the page of whichever mode the run uses; the file keeps
    // one size per mode, since a paced run's smaller pages hold a gateway
    // thread for less time (ranker/ranker.example.toml).
    if let Some(page_rows) = pass.page_rows {
        options.page_rows = usize::from(page_rows);
        options.pacing.page_rows = usize::from(page_rows);
    }
    if let Some(attempts) = pass.attempts {
        options.product_attempts = attempts;
    }
    options
}

/// Runs a pass with a progress display, prints its summary, and picks the
/// exit status. With `lease`, the pass runs only while it holds that lease.
/// `explicit_as_of_ms` is the `--as-of` given, which names a shard run's plan
/// unless `--plan-id` does.
async fn run_pass(
    pass: &PassArgs,
    mut options: RunOptions,
    read_only: bool,
    lease: Option<&LeaseArgs>,
    setup: RunSetup,
    explicit_as_of_ms: Option<i64>,
) -> Result<ExitStatus> {
    let store = pass.hbase.store().context("configuring HBase access")?;
    let progress = Arc::new(RunProgress::default());
    options.progress = Some(progress.clone());
    let stop = CancellationToken::new();
    // The first SIGINT or SIGTERM finishes the products in flight; a second exits at once.
    common::shutdown::stop_on_signals({
        let stop = stop.clone();
        move |_| {
            eprintln!("stopping: finishing the products in flight (signal again to quit at once)");
            stop.cancel();
        }
    });
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let keeper = match lease {
        Some(lease) => match take_manual_lease(&store, lease, clock.as_ref()).await? {
            Some(held) => {
                let done = CancellationToken::new();
                let task = tokio::spawn(keep_lease(
                    StoreRenewer::new(store.clone(), held, clock.clone()),
                    Duration::from_secs(lease.lease_ttl_secs) / 3,
                    clock.clone(),
                    done.clone(),
                    stop.clone(),
                ));
                Some((done, task))
            }
            None => return Ok(ExitStatus::TryLater),
        },
        None => None,
    };
    // What the run ranks, prepared once its start is taken: a shard's range
    // from the run's plan, agreed through HBase before anything reads the
    // range, then what changed since the watermark. Only a run that writes
    // stores a shard plan: a dry run or a read pass uses the run's stored
    // plan if there is one, else a fresh one.
    let may_store = !read_only && !options.dry_run;
    let prepare = async |options: &mut RunOptions| -> Result<(), ranker::RankerError> {
        if let Some(shard) = pass.scope.shard {
            options.scope = shard_scope(&store, &pass.scope, shard, explicit_as_of_ms, may_store).await?;
        }
        make_incremental(&store, options, &setup).await
    };
    let verb = if read_only { "read" } else { "ranked" };
    let display = ProgressDisplay::start(progress, verb);
    let outcome = if setup.record {
        let slot_ms = clock.now_ms();
        let identity = RunIdentity {
            run_id: manual_run_id(slot_ms),
            holder: ranker::keeper::default_holder(),
            slot_ms,
            attempt: 1,
        };
        ranker::recorded::run_recorded(&store, options, identity, clock.as_ref(), prepare, stop.clone(), &stop)
            .await
            .result
    } else {
        // Nothing reads back the record of a one-product rerun, a dry run or
        // a read pass, so they keep none.
        match prepare(&mut options).await {
            Err(error) => Err(error),
            Ok(()) if read_only => ranker::read_pass(&store, &options, stop.clone()).await,
            Ok(()) => ranker::run(&store, &options, stop.clone()).await,
        }
    };
    display.finish().await;
    let lease_lost = match keeper {
        Some((done, task)) => release_manual_lease(&store, done, task, clock.as_ref()).await,
        None => false,
    };
    let report: RunReport = outcome.context("the run could not proceed")?;
    if pass.json {
        println!("{}", serde_json::to_string_pretty(&report).context("encoding the report")?);
    } else {
        print!("{}", console::summary(&report, read_only));
    }
    // A lost lease stopped the run like a signal would have, but nobody asked
    // for it: the run failed, and the log says why.
    Ok(if lease_lost || !report.failures.is_empty() {
        ExitStatus::Failure
    } else if report.interrupted {
        ExitStatus::Interrupted
    } else {
        ExitStatus::Success
    })
}

/// The Pushgateway group of a run: `all`, or `shard-I-of-N`.
fn push_scope(scope: &ScopeArgs) -> String {
    match scope.shard {
        Some(shard) => format!("shard-{}-of-{}", shard.index, shard.count),
        None => "all".to_owned(),
    }
}

/// A run's metrics on their way to a Pushgateway: the process's recorder, a
/// task pushing them every [`PUSH_INTERVAL`], and the last push at the end.
struct RunPush {
    gateway: Pushgateway,
    handle: PrometheusHandle,
    periodic: tokio::task::JoinHandle<()>,
}

impl RunPush {
    /// Installs the recorder and starts the periodic pushes, the first at
    /// once: the counters start at 0 in the Pushgateway, so the alerts'
    /// `increase()` sees this run's first failed product.
    fn start(url: &str, scope: &str) -> Result<RunPush> {
        let recorder = common::telemetry::prometheus_builder().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
        common::telemetry::describe_shared_metrics();
        ranker::telemetry::describe_metrics();
        ranker::telemetry::describe_run_gauges();
        ranker::telemetry::initialize_counters();
        metrics::gauge!(ranker::telemetry::RUN_IN_PROGRESS).set(1.0);
        let gateway = Pushgateway::new(url, scope);
        let periodic = tokio::spawn({
            let (gateway, handle) = (gateway.clone(), handle.clone());
            async move {
                let mut ticks = tokio::time::interval(PUSH_INTERVAL);
                loop {
                    ticks.tick().await;
                    if let Err(error) = gateway.push(handle.render()).await {
                        tracing::warn!(%error, "pushing the run's progress failed; the next push tries again");
                    }
                }
            }
        });
        Ok(RunPush { gateway, handle, periodic })
    }

    /// Sets the outcome gauges from the run's `status` and pushes them. A
    /// failed push is logged: the run's own outcome does not depend on it.
    async fn finish(self, status: &Result<ExitStatus>, duration: Duration) {
        self.periodic.abort();
        let outcome = match status {
            Ok(ExitStatus::Success) => RunStatus::Succeeded,
            Ok(ExitStatus::Interrupted) => RunStatus::Interrupted,
            // Another run of this scope holds the lease and pushes its own outcome.
            Ok(ExitStatus::TryLater) => return,
            Ok(ExitStatus::Failure | ExitStatus::Usage) | Err(_) => RunStatus::Failed,
        };
        ranker::telemetry::run_ended(outcome, now_ms() as f64 / 1_000.0, duration);
        match self.gateway.push(self.handle.render()).await {
            Ok(()) => tracing::info!(outcome = outcome.as_str(), "pushed the run's metrics"),
            Err(error) => tracing::error!(%error, "pushing the run's outcome failed; alerts see the previous one"),
        }
    }
}

/// What a run does besides ranking: whether it is incremental, and whether it
/// is recorded in the run history.
#[derive(Debug, Clone, Copy, Default)]
struct RunSetup {
    /// Rank only what changed since then.
    changed_since: Option<ChangedSince>,
    /// The rolling refresh's period in nights.
    refresh_days: u32,
    /// Subtracted from the last completed run's start.
    skew_margin: Duration,
    /// Record the run in the run history (full, shard and incremental runs
    /// that write: what `--changed-since last` reads back).
    record: bool,
}

/// Makes `options` incremental when `setup` says so, resolving `last`.
async fn make_incremental(
    store: &Store,
    options: &mut RunOptions,
    setup: &RunSetup,
) -> Result<(), ranker::RankerError> {
    let (since_ms, refreshed_until_ms) = match setup.changed_since {
        None => return Ok(()),
        Some(ChangedSince::Time(since_ms)) => (since_ms, None),
        Some(ChangedSince::Last) => {
            options.incremental =
                ranker::history::incremental_since_last(store, &options.scope, setup.refresh_days, setup.skew_margin)
                    .await?;
            if options.incremental.is_none() {
                eprintln!(
                    "ranker: no completed runs covering these products in the run history: ranking every product"
                );
            }
            return Ok(());
        }
    };
    options.incremental = Some(Incremental { since_ms, refresh_days: Some(setup.refresh_days), refreshed_until_ms });
    Ok(())
}

/// A manual run's id in the history: when it started and a random part.
fn manual_run_id(started_ms: i64) -> String {
    let started = chrono::DateTime::from_timestamp_millis(started_ms).unwrap_or_default();
    format!("{}-manual-{:06x}", started.format("%Y%m%dT%H%M%SZ"), rand::random::<u32>() >> 8)
}

/// The scope of `shard`: its range in the run's plan, agreed through HBase.
async fn shard_scope(
    store: &Store,
    scope: &ScopeArgs,
    shard: Shard,
    explicit_as_of_ms: Option<i64>,
    may_store: bool,
) -> Result<Scope, ranker::RankerError> {
    let plan_id = scope.plan_id.clone().unwrap_or_else(|| shard_plan::default_plan_id(explicit_as_of_ms, now_ms()));
    let (plan, origin) = shard_plan::agree_on_plan(store, &plan_id, shard.count, may_store).await?;
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

async fn shards(args: &ShardsArgs) -> Result<ExitCode> {
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
    Ok(ExitCode::SUCCESS)
}

/// Takes the lease for a manual run, or says who holds it and returns `None`.
///
/// The lease's slot is the wall-clock time of the take: every slot the daemon
/// completed lies before it, so the daemon's "already completed" record never
/// refuses a manual run, and a daemon whose tick fires meanwhile sees another
/// slot held and skips that tick (the manual run ranks the night instead).
async fn take_manual_lease(
    store: &Store,
    lease: &LeaseArgs,
    clock: &dyn Clock,
) -> Result<Option<common::store::lease::HeldLease>> {
    let request = LeaseRequest {
        name: lease.lease_name.clone(),
        holder: ranker::keeper::default_holder(),
        slot_ms: clock.now_ms(),
        ttl: Duration::from_secs(lease.lease_ttl_secs),
    };
    let outcome =
        store.take_lease(&request, clock).await.with_context(|| format!("taking the lease {:?}", lease.lease_name))?;
    match outcome {
        TakeOutcome::Taken { lease: held, .. } => {
            tracing::info!(lease = %lease.lease_name, holder = %request.holder, "took the lease for this run");
            Ok(Some(held))
        }
        TakeOutcome::Held(state) | TakeOutcome::Completed(state) => {
            let holder = state.holder.or(state.completed_by).unwrap_or_else(|| "an unknown holder".to_owned());
            let expires = chrono::DateTime::from_timestamp_millis(state.expires_ms)
                .map_or_else(|| state.expires_ms.to_string(), |time| time.to_rfc3339());
            eprintln!(
                "ranker: the lease {:?} is held by {holder} until {expires}; another run has the night. \
                 Try again later, rerun single products with --product, or (emergencies only) pass --ignore-lease",
                lease.lease_name
            );
            Ok(None)
        }
    }
}

/// Stops renewing and frees the lease; `true` when it was lost during the run.
async fn release_manual_lease(
    store: &Store,
    done: CancellationToken,
    task: tokio::task::JoinHandle<(StoreRenewer, KeeperEnd)>,
    clock: &dyn Clock,
) -> bool {
    done.cancel();
    match task.await {
        Ok((renewer, KeeperEnd::Kept)) => {
            // A manual run never marks a nightly slot done: `completed` stays false.
            match store.release_lease(renewer.into_lease(), false, clock).await {
                Ok(ReleaseOutcome::Released) => tracing::info!("released the lease"),
                Ok(ReleaseOutcome::NotOurs(_)) => {
                    tracing::warn!("the lease was no longer ours at release; left it alone")
                }
                Err(error) => tracing::error!(%error, "releasing the lease failed; it lapses at its expiry"),
            }
            false
        }
        Ok((_, KeeperEnd::Lost(reason))) => {
            eprintln!("ranker: the run stopped because {reason}");
            true
        }
        Err(error) => {
            tracing::error!(%error, "the lease keeper failed; the lease lapses at its expiry");
            false
        }
    }
}

async fn explain(args: &ExplainArgs) -> Result<ExitCode> {
    let config = load_config(args.config.as_ref())?;
    let store = args.hbase.store().context("configuring HBase access")?;
    let as_of_ms = args.as_of.unwrap_or_else(now_ms);
    let explanation = ranker::explain(&store, &args.product, as_of_ms, &config.scoring, config.run.page_rows)
        .await
        .with_context(|| format!("explaining product {}", args.product))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&explanation).context("encoding the explanation")?);
    } else {
        print!("{}", console::explanation(&explanation));
    }
    Ok(ExitCode::SUCCESS)
}

async fn runs(args: &RunsArgs) -> Result<ExitCode> {
    let store = args.hbase.store().context("configuring HBase access")?;
    let runs = store.recent_runs(args.limit).await.context("reading the run history")?;
    print!("{}", console::format_runs_table(&runs));
    Ok(ExitCode::SUCCESS)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    common::config::init_tracing();
    match run_command(&cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("Error: {error:#}");
            // A configuration that does not validate is a usage error, like a bad flag.
            let usage = error.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<ranker::RankerError>(),
                    Some(ranker::RankerError::InvalidConfig(_) | ranker::RankerError::InvalidOptions(_))
                )
            });
            if usage { ExitStatus::Usage } else { ExitStatus::Failure }.into()
        }
    }
}

async fn run_command(cli: &Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::Run(args) => {
            let config = load_config(args.pass.config.as_ref())?;
            let mut options = options(&args.pass, &config, args.as_of.unwrap_or_else(now_ms), None);
            options.dry_run = args.dry_run;
            // A rerun of one product is how an operator fixes a night by hand,
            // and a dry run writes nothing: neither needs the night to itself.
            let needs_lease = !args.dry_run && args.pass.scope.product.is_none();
            if needs_lease && args.lease.ignore_lease {
                tracing::warn!(lease = %args.lease.lease_name, "--ignore-lease: running without the lease; a nightly run may rank at the same time");
            }
            let lease = (needs_lease && !args.lease.ignore_lease).then_some(&args.lease);
            let setup = RunSetup {
                changed_since: args.changed_since,
                refresh_days: args.refresh_days.unwrap_or(config.incremental.refresh_days),
                skew_margin: args
                    .skew_margin_secs
                    .map_or_else(|| config.incremental.skew_margin(), Duration::from_secs),
                record: needs_lease,
            };
            let push = match &args.pushgateway {
                Some(url) => Some(RunPush::start(url, &push_scope(&args.pass.scope))?),
                None => None,
            };
            let started = std::time::Instant::now();
            let status = run_pass(&args.pass, options, false, lease, setup, args.as_of).await;
            if let Some(push) = push {
                push.finish(&status, started.elapsed()).await;
            }
            status.map(Into::into)
        }
        Command::Shards(args) => shards(args).await,
        Command::Explain(args) => explain(args).await,
        Command::Runs(args) => runs(args).await,
        Command::BenchRead(args) => {
            // The raw baseline: unpaced unless --pace says otherwise.
            let config = load_config(args.pass.config.as_ref())?;
            let options = options(&args.pass, &config, now_ms(), Some(PaceMode::Off));
            run_pass(&args.pass, options, true, None, RunSetup::default(), None).await.map(Into::into)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn as_of_takes_rfc_3339_in_any_offset_or_epoch_milliseconds() {
        assert_eq!(parse_time("1714532400000"), Ok(1_714_532_400_000));
        assert_eq!(parse_time("2024-05-01T03:00:00Z"), Ok(1_714_532_400_000));
        assert_eq!(parse_time(" 2024-05-01T12:00:00+09:00 "), Ok(1_714_532_400_000));
        for bad in ["", "yesterday", "2024-05-01", "2024-05-01 03:00", "1e12"] {
            let error = parse_time(bad).expect_err(bad);
            assert!(error.contains("RFC 3339"), "{bad}: {error}");
        }
    }

    #[test]
    fn run_refuses_a_bad_shard_or_product_before_touching_hbase() {
        let parse = |arguments: &[&str]| Cli::try_parse_from([&["ranker", "run"], arguments].concat());
        assert!(parse(&["--shard", "3/8", "--as-of", "2024-05-01T03:00:00Z", "--dry-run"]).is_ok());
        for bad in [["--shard", "8/8"], ["--product", "short"], ["--as-of", "tomorrow"]] {
            let error = parse(&bad).expect_err("refused");
            assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation, "{bad:?}");
        }
    }

    #[test]
    fn pushgateway_takes_an_http_url_and_only_for_recorded_runs() {
        let parse = |arguments: &[&str]| Cli::try_parse_from([&["ranker", "run"], arguments].concat());
        for good in
            [&["--pushgateway", "http://pushgateway:9091"][..], &["--pushgateway", "https://p/", "--shard", "1/4"]]
        {
            assert!(parse(good).is_ok(), "{good:?}");
        }
        for bad in [
            &["--pushgateway", "pushgateway:9091"][..],
            &["--pushgateway", "ftp://pushgateway"],
            &["--pushgateway", "http://p:9091", "--product", "P000000001"],
            &["--pushgateway", "http://p:9091", "--dry-run"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let scope = |arguments: &[&str]| match parse(arguments).expect("parses") {
            Cli { command: Command::Run(args) } => push_scope(&args.pass.scope),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(scope(&[]), "all");
        assert_eq!(scope(&["--shard", "3/8"]), "shard-3-of-8");
    }

    #[test]
    fn changed_since_takes_a_time_or_last_and_refresh_days_need_it() {
        let parse = |arguments: &[&str]| Cli::try_parse_from([&["ranker", "run"], arguments].concat());
        for good in [
            &["--changed-since", "last"][..],
            &["--changed-since", "2024-05-01T03:00:00Z", "--refresh-days", "7"],
            &["--changed-since", "1714532400000", "--skew-margin-secs", "60", "--shard", "1/4"],
        ] {
            assert!(parse(good).is_ok(), "{good:?}");
        }
        for bad in [
            &["--changed-since", "yesterday"][..],
            &["--refresh-days", "7"],
            &["--changed-since", "last", "--refresh-days", "0"],
            &["--changed-since", "last", "--product", "P000000001"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pace_flags_override_the_config_and_bench_read_is_unpaced() {
        let pass = |arguments: &[&str]| match Cli::try_parse_from([&["ranker"], arguments].concat()).expect("parses") {
            Cli { command: Command::Run(args) } => options(&args.pass, &RankerConfig::default(), 0, None),
            Cli { command: Command::BenchRead(args) } => {
                options(&args.pass, &RankerConfig::default(), 0, Some(PaceMode::Off))
            }
            other => panic!("unexpected {other:?}"),
        };
        let run = pass(&["run"]);
        assert_eq!((run.pacing.mode, run.pacing.max_rate), (PaceMode::On, None));
        let run = pass(&["run", "--pace", "off", "--max-rate", "20000"]);
        assert_eq!((run.pacing.mode, run.pacing.max_rate), (PaceMode::Off, Some(20_000.0)));
        assert_eq!(pass(&["bench-read"]).pacing.mode, PaceMode::Off);
        let pages = pass(&["run", "--page-rows", "40"]);
        assert_eq!((pages.page_rows, pages.pacing.page_rows), (40, 40), "the flag sets the page of both modes");
        let defaults = pass(&["run"]);
        assert_eq!((defaults.page_rows, defaults.pacing.page_rows), (1_000, 250));
        assert_eq!(pass(&["bench-read", "--pace", "on"]).pacing.mode, PaceMode::On);
        assert_eq!(pass(&["run", "--pace", "adaptive"]).pacing.mode, PaceMode::On, "the earlier law's name");
        for bad in [["--pace", "sometimes"], ["--max-rate", "0"], ["--max-rate", "fast"]] {
            assert!(Cli::try_parse_from([&["ranker", "run"][..], &bad[..]].concat()).is_err(), "{bad:?}");
        }
    }
}
