//! `api-bench`: the load generator behind BENCHMARKS.md.
//!
//! In one run, at the same concurrency and against the same tables, it measures:
//!
//! - `raw`: a Rust client doing what one page read costs in HBase, through
//!   `common` directly: one 21-row index scan plus one 20-row multi-get;
//! - `http`: `GET /v1/products/{id}/comments?limit=20` on the service;
//! - `ranked-uncached`: ranked reads on a service started with the cache off;
//! - `ranked-cached`: ranked reads on a service whose cache was warmed first and
//!   outlives the run;
//! - `summary-uncached`, `summary-cached`: a product's review summary
//!   (`/v1/products/{id}/comments/summary`), on the same two services;
//! - `hot-latest`, `hot-rarest`, `hot-rating-asc`: the hottest product's
//!   (`--hot-product`) first page unfiltered, filtered to its rarest star (by
//!   its summary), and ordered worst star first, on the uncached service;
//! - `summaries-48`: `/v1/summaries` for 48 random ranked products (a listing
//!   page), on the uncached service;
//! - `absent-star`: the first page of a star a ranked product has no review
//!   of (by its summary), on the cached service: a filter is always walked;
//! - `reviews-html-cached`: a product's server-rendered widget (with its
//!   JSON-LD) on the cached service, against `ranked-cached`.
//!
//! Products are drawn uniformly at random from the tables. It starts the two
//! services itself (the `query-api` binary beside this one, on loopback ports)
//! with the same HBase flags it was given, so both sides get the same pool size.
//! Each scenario warms up, then runs for a fixed time; every request loop is
//! bounded in time and count (the closed loop of `bench::load`). It prints a
//! table, and writes `summary.csv` and `latency.csv` (percentile curves) for
//! `bench/plot-api.py`.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bench::load::{closed_loop, http_client, ClosedLoopOutcome};
use clap::Parser;
use common::config::HbaseArgs;
use common::store::products::ProductIndex;
use common::store::Store;
use common::Id;
use rand::Rng;

/// The page size of the measured reads, as the issue specifies.
const PAGE_SIZE: usize = 20;

/// Flags of the benchmark.
#[derive(Debug, Parser)]
#[command(name = "api-bench", about = "Load generator: the query service against a raw Rust client.")]
struct BenchArgs {
    /// Concurrent connections (and concurrent raw-client operations).
    #[arg(long, default_value_t = 32)]
    connections: usize,

    /// Measured seconds per scenario.
    #[arg(long, default_value_t = 30)]
    duration_secs: u64,

    /// Unmeasured warm-up seconds before each scenario.
    #[arg(long, default_value_t = 5)]
    warmup_secs: u64,

    /// Most products to draw from (read from the `product-comment` table).
    #[arg(long, default_value_t = 5_000)]
    products: usize,

    /// Scenarios to run, comma-separated: raw, http, ranked-uncached, ranked-cached,
    /// summary-uncached, summary-cached, hot-latest, hot-rarest, hot-rating-asc, summaries-48,
    /// absent-star, reviews-html-cached.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "raw,http,ranked-uncached,ranked-cached,summary-uncached,summary-cached,hot-latest,hot-rarest,hot-rating-asc,summaries-48,reviews-html-cached"
    )]
    scenarios: Vec<Scenario>,

    /// The product of the `hot-*` scenarios: the data set's hottest.
    #[arg(long, default_value = "P000000001")]
    hot_product: String,

    /// The `query-api` binary to start; default: the one beside this binary.
    #[arg(long)]
    api_bin: Option<PathBuf>,

    /// Where to write `summary.csv`, `latency.csv` and the services' logs.
    #[arg(long, default_value = "bench-results")]
    out_dir: PathBuf,

    /// Seed of the random product choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Which HBase and tables (passed on to the services too).
    #[command(flatten)]
    hbase: HbaseArgs,
}

/// One measured workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// One 21-row index scan plus one 20-row multi-get, through `common`.
    Raw,
    /// The service's latest-comments page.
    Http,
    /// Ranked reads with the service's cache off.
    RankedUncached,
    /// Ranked reads with the service's cache warm.
    RankedCached,
    /// Review summaries with the service's cache off.
    SummaryUncached,
    /// Review summaries with the service's cache warm.
    SummaryCached,
    /// The hottest product's first page, unfiltered.
    HotLatest,
    /// The hottest product's first page of its rarest star.
    HotRarest,
    /// The hottest product's first page, worst star first.
    HotRatingAsc,
    /// The summaries of 48 ranked products in one call.
    #[value(name = "summaries-48")]
    Summaries48,
    /// A product's first page of a star it has no review of, its ranking cached.
    AbsentStar,
    /// A product's server-rendered widget, its ranking cached.
    ReviewsHtmlCached,
}

/// Products a `summaries-48` request names: a listing page of 48.
const LISTING_PAGE_PRODUCTS: usize = 48;

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Raw => "raw",
            Scenario::Http => "http",
            Scenario::RankedUncached => "ranked-uncached",
            Scenario::RankedCached => "ranked-cached",
            Scenario::SummaryUncached => "summary-uncached",
            Scenario::SummaryCached => "summary-cached",
            Scenario::HotLatest => "hot-latest",
            Scenario::HotRarest => "hot-rarest",
            Scenario::HotRatingAsc => "hot-rating-asc",
            Scenario::Summaries48 => "summaries-48",
            Scenario::AbsentStar => "absent-star",
            Scenario::ReviewsHtmlCached => "reviews-html-cached",
        }
    }

    /// Whether the scenario reads from the service whose ranked-read cache is on.
    fn uses_cache(self) -> bool {
        matches!(
            self,
            Scenario::Http
                | Scenario::RankedCached
                | Scenario::SummaryCached
                | Scenario::AbsentStar
                | Scenario::ReviewsHtmlCached
        )
    }

    /// Whether the scenario reads ranked products (their rankings or summaries).
    fn reads_rankings(self) -> bool {
        !matches!(self, Scenario::Raw | Scenario::Http)
    }
}

/// What one scenario measured.
struct Outcome {
    scenario: Scenario,
    measured: ClosedLoopOutcome,
}

/// A `query-api` child process, killed when dropped.
struct ServiceProcess {
    child: Child,
    base: String,
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        // Our own child, by its handle; a failure means it already exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shared inputs of every worker.
struct Workload {
    store: Store,
    client: reqwest::Client,
    products: Vec<Id>,
    ranked_products: Vec<Id>,
    hot_product: Id,
    /// The hottest product's rarest star, by its summary.
    rarest_star: u8,
    /// Ranked products with a star each has no review of, by its summary
    /// (read only when `absent-star` runs).
    absent_stars: Vec<(Id, u8)>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    common::config::init_tracing();
    let args = BenchArgs::parse();
    if args.connections == 0 || args.duration_secs == 0 {
        bail!("--connections and --duration-secs must be positive");
    }
    std::fs::create_dir_all(&args.out_dir).with_context(|| format!("cannot create {}", args.out_dir.display()))?;
    let store = args.hbase.store().context("invalid HBase flags")?;
    store.reader().check_ready().await.context("HBase does not answer")?;

    let products = list_products(&store, ProductIndex::Comments, args.products).await?;
    if products.is_empty() {
        bail!("no product has comments in tables with prefix {:?}; load demo data first", args.hbase.table_prefix);
    }
    let ranked_products = list_products(&store, ProductIndex::RankSlots, args.products).await?;
    println!(
        "{} products with comments, {} with rank slots; {} connections, {} s warm-up + {} s per scenario",
        products.len(),
        ranked_products.len(),
        args.connections,
        args.warmup_secs,
        args.duration_secs
    );
    let ranked_products = if ranked_products.is_empty() {
        println!("no product is ranked yet (run the ranker first): ranked reads will return empty rankings");
        products.clone()
    } else {
        ranked_products
    };

    let needs_cached = args.scenarios.iter().any(|scenario| scenario.uses_cache());
    let needs_uncached = args.scenarios.iter().any(|scenario| *scenario != Scenario::Raw && !scenario.uses_cache());
    // The cached service keeps every entry for the whole run, so the cached
    // scenario measures a warm cache rather than a TTL expiring mid-run.
    let whole_run_ms = (args.warmup_secs + args.duration_secs + 60) * 1_000 * args.scenarios.len() as u64;
    let cached = if needs_cached { Some(start_service(&args, "cached", whole_run_ms).await?) } else { None };
    let uncached = if needs_uncached { Some(start_service(&args, "uncached", 0).await?) } else { None };

    let hot_product = Id::parse("--hot-product", &args.hot_product).context("--hot-product")?;
    let rarest_star = match store.ranking(&hot_product).await.context("cannot read the hot product's ranking")?.summary
    {
        Some(summary) => (1..=5).min_by_key(|star| summary.rated_with(*star)).unwrap_or(1),
        None => 1,
    };
    println!("hot product {hot_product}: its rarest star is {rarest_star}");
    let absent_stars = if args.scenarios.contains(&Scenario::AbsentStar) {
        absent_stars(&store, &ranked_products).await?
    } else {
        Vec::new()
    };
    let client = http_client(args.connections, None)?;
    let workload =
        Arc::new(Workload { store, client, products, ranked_products, hot_product, rarest_star, absent_stars });

    let mut outcomes = Vec::new();
    for scenario in &args.scenarios {
        let service = match scenario {
            Scenario::Raw => None,
            _ if scenario.uses_cache() => cached.as_ref(),
            _ => uncached.as_ref(),
        };
        let base = service.map(|service| service.base.clone()).unwrap_or_default();
        if matches!(scenario, Scenario::RankedCached | Scenario::SummaryCached | Scenario::ReviewsHtmlCached) {
            warm_ranked_cache(&workload, workload.ranked_products.iter(), &base).await?;
        }
        if *scenario == Scenario::AbsentStar {
            warm_ranked_cache(&workload, workload.absent_stars.iter().map(|(product, _)| product), &base).await?;
        }
        let warmup = Duration::from_secs(args.warmup_secs);
        if !warmup.is_zero() {
            run_scenario(&workload, *scenario, &base, args.connections, warmup, args.seed.wrapping_add(1)).await?;
        }
        let outcome = run_scenario(
            &workload,
            *scenario,
            &base,
            args.connections,
            Duration::from_secs(args.duration_secs),
            args.seed,
        )
        .await?;
        print_outcome(&outcome);
        outcomes.push(outcome);
    }
    print_ratios(&outcomes);
    write_summary(&args.out_dir.join("summary.csv"), &outcomes, args.connections)?;
    write_latency_curves(&args.out_dir.join("latency.csv"), &outcomes)?;
    println!("wrote {}/summary.csv and {}/latency.csv", args.out_dir.display(), args.out_dir.display());
    drop(cached);
    drop(uncached);
    Ok(())
}

/// Up to `wanted` products that have rows in `index`, in key order.
async fn list_products(store: &Store, index: ProductIndex, wanted: usize) -> anyhow::Result<Vec<Id>> {
    let mut products: Vec<Id> = Vec::new();
    let mut start = Vec::new();
    while products.len() < wanted {
        let listing = store.list_products(index, start, None, 1_000).await.context("cannot list products")?;
        for listed in listing.products {
            // A product's rows may straddle two listing pages.
            if products.last() != Some(&listed.product) {
                products.push(listed.product);
            }
        }
        match listing.next {
            Some(next) => start = next,
            None => break,
        }
    }
    products.truncate(wanted);
    Ok(products)
}

/// Starts `query-api` on a free loopback port with the bench's HBase flags and
/// the given ranked-cache TTL, and waits until it is ready.
async fn start_service(args: &BenchArgs, name: &str, ranked_cache_ttl_ms: u64) -> anyhow::Result<ServiceProcess> {
    let binary = match &args.api_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("cannot locate this binary")?
            .with_file_name(format!("query-api{}", std::env::consts::EXE_SUFFIX)),
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .context("no free port")?;
    let listen = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path = args.out_dir.join(format!("service-{name}.log"));
    let log = File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let child = Command::new(&binary)
        .args(["--listen", &listen.to_string()])
        .args(["--thrift-addr", &args.hbase.thrift_addr])
        .args(["--table-prefix", &args.hbase.table_prefix])
        .args(["--pool-size", &args.hbase.pool_size.to_string()])
        .args(["--ranked-cache-ttl-ms", &ranked_cache_ttl_ms.to_string()])
        // Room for every product's ranking (a few KiB each here), so the cached run measures hits.
        .args(["--ranked-cache-max-bytes", &(args.products.max(1) as u64 * 64 * 1024).max(256 << 20).to_string()])
        // The HBase deadline and retries stay the service's own defaults, as in production.
        .env_remove("REVIEWS_HBASE_TIMEOUT_MS")
        .env_remove("REVIEWS_HBASE_RETRIES")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| {
            format!("cannot start {} (build it with `cargo build --release -p query-api -p bench`)", binary.display())
        })?;
    let service = ServiceProcess { child, base: format!("http://{listen}") };
    let client = reqwest::Client::new();
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client.get(format!("{}/readyz", service.base)).send().await;
        if ready.is_ok_and(|response| response.status().is_success()) {
            println!("service {name} ({}) ready, ranked cache TTL {ranked_cache_ttl_ms} ms", service.base);
            return Ok(service);
        }
        if Instant::now() > ready_by {
            bail!("service {name} not ready within 60 s; see {}", log_path.display());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ranked products among `ranked` (the first 2,000) whose summary has no
/// review of some star, each with the first such star.
async fn absent_stars(store: &Store, ranked: &[Id]) -> anyhow::Result<Vec<(Id, u8)>> {
    let mut found = Vec::new();
    for product in ranked.iter().take(2_000) {
        let ranking = store.ranking(product).await.context("cannot read a ranking")?;
        let absent = ranking.summary.and_then(|summary| (1..=5).find(|star| summary.rated_with(*star) == 0));
        if let Some(star) = absent {
            found.push((*product, star));
        }
    }
    if found.is_empty() {
        bail!("absent-star: no ranked product lacks a star");
    }
    println!("absent-star: {} ranked products with a star they have no review of", found.len());
    Ok(found)
}

/// Reads each of `products`' rankings once, so a cached scenario starts warm.
async fn warm_ranked_cache(workload: &Workload, products: impl Iterator<Item = &Id>, base: &str) -> anyhow::Result<()> {
    for product in products {
        let url = format!("{base}/v1/products/{product}/comments/ranked");
        let response = workload.client.get(&url).send().await.context("warming the ranked cache")?;
        if !response.status().is_success() {
            bail!("warming the ranked cache: {url} answered {}", response.status());
        }
    }
    Ok(())
}

/// Runs `connections` workers for `duration` and merges what they measured.
async fn run_scenario(
    workload: &Arc<Workload>,
    scenario: Scenario,
    base: &str,
    connections: usize,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    let workload = Arc::clone(workload);
    let base: Arc<str> = Arc::from(base);
    let measured = closed_loop(connections, duration, seed, move |random| {
        let count = if scenario == Scenario::Summaries48 { LISTING_PAGE_PRODUCTS } else { 1 };
        let products: Vec<Id> = match scenario {
            Scenario::AbsentStar => {
                vec![workload.absent_stars[random.random_range(0..workload.absent_stars.len())].0]
            }
            _ if scenario.reads_rankings() => (0..count)
                .map(|_| workload.ranked_products[random.random_range(0..workload.ranked_products.len())])
                .collect(),
            _ => (0..count).map(|_| workload.products[random.random_range(0..workload.products.len())]).collect(),
        };
        let (workload, base) = (Arc::clone(&workload), Arc::clone(&base));
        async move { one_request(&workload, scenario, &base, &products).await }
    })
    .await?;
    Ok(Outcome { scenario, measured })
}

/// One operation of `scenario` on `products` (one, or a listing page's);
/// whether it succeeded.
async fn one_request(workload: &Workload, scenario: Scenario, base: &str, products: &[Id]) -> bool {
    let product = &products[0];
    let hot = workload.hot_product;
    match scenario {
        Scenario::Raw => {
            // Exactly the HBase work of one service page: the scan, then the
            // multi-get (skipped for an empty page, as the service skips it).
            let Ok(page) = workload.store.product_comment_page(product, None, PAGE_SIZE).await else {
                return false;
            };
            page.entries.is_empty() || workload.store.comments_of(&page).await.is_ok()
        }
        Scenario::Http => http_ok(workload, &format!("{base}/v1/products/{product}/comments?limit={PAGE_SIZE}")).await,
        Scenario::RankedUncached | Scenario::RankedCached => {
            http_ok(workload, &format!("{base}/v1/products/{product}/comments/ranked")).await
        }
        Scenario::SummaryUncached | Scenario::SummaryCached => {
            http_ok(workload, &format!("{base}/v1/products/{product}/comments/summary")).await
        }
        Scenario::ReviewsHtmlCached => {
            http_ok(workload, &format!("{base}/v1/products/{product}/reviews.html?name=Bench%20product")).await
        }
        Scenario::HotLatest => http_ok(workload, &format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}")).await,
        Scenario::HotRarest => {
            let star = workload.rarest_star;
            http_ok(workload, &format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}&rating={star}")).await
        }
        Scenario::HotRatingAsc => {
            http_ok(workload, &format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}&sort=rating_asc")).await
        }
        Scenario::Summaries48 => {
            let ids: Vec<&str> = products.iter().map(Id::as_str).collect();
            http_ok(workload, &format!("{base}/v1/summaries?productIds={}", ids.join(","))).await
        }
        Scenario::AbsentStar => {
            let star = workload.absent_stars.iter().find(|(absent, _)| absent == product).map_or(1, |(_, star)| *star);
            http_ok(workload, &format!("{base}/v1/products/{product}/comments?limit={PAGE_SIZE}&rating={star}")).await
        }
    }
}

/// GETs `url` and reads the whole body; whether it answered 200.
async fn http_ok(workload: &Workload, url: &str) -> bool {
    match workload.client.get(url).send().await {
        Ok(response) => response.status().is_success() && response.bytes().await.is_ok(),
        Err(_) => false,
    }
}

fn print_outcome(outcome: &Outcome) {
    let latency = outcome.measured.latency.summary();
    println!(
        "{:<16} {:>9} ok {:>6} err {:>10.0} req/s   p50 {:>7.2} ms   p99 {:>7.2} ms   p99.9 {:>7.2} ms   max {:>8.2} ms",
        outcome.scenario.name(),
        outcome.measured.succeeded,
        outcome.measured.failed,
        outcome.measured.throughput(),
        latency.p50,
        latency.p99,
        latency.p999,
        latency.max,
    );
}

fn throughput_of(outcomes: &[Outcome], scenario: Scenario) -> Option<f64> {
    outcomes.iter().find(|outcome| outcome.scenario == scenario).map(|outcome| outcome.measured.throughput())
}

fn p99_of(outcomes: &[Outcome], scenario: Scenario) -> Option<f64> {
    outcomes.iter().find(|outcome| outcome.scenario == scenario).map(|outcome| outcome.measured.latency.summary().p99)
}

fn print_ratios(outcomes: &[Outcome]) {
    for (filtered, target) in
        [(Scenario::HotRarest, Scenario::HotLatest), (Scenario::HotRatingAsc, Scenario::HotLatest)]
    {
        if let (Some(p99), Some(base_p99), Some(rps), Some(base_rps)) = (
            p99_of(outcomes, filtered),
            p99_of(outcomes, target),
            throughput_of(outcomes, filtered),
            throughput_of(outcomes, target),
        ) {
            println!(
                "{} / {}: p99 {:.2}x (target <= 2), throughput {:.2}x (target >= 0.5)",
                filtered.name(),
                target.name(),
                p99 / base_p99,
                rps / base_rps
            );
        }
    }
    if let (Some(absent), Some(page)) = (p99_of(outcomes, Scenario::AbsentStar), p99_of(outcomes, Scenario::Http)) {
        println!("absent-star / http p99: {:.2}x (target <= 1)", absent / page);
    }
    if let (Some(batch), Some(single)) =
        (p99_of(outcomes, Scenario::Summaries48), p99_of(outcomes, Scenario::SummaryUncached))
    {
        println!("summaries-48 / summary-uncached p99: {:.2}x (target <= 2)", batch / single);
    }
    if let (Some(http), Some(raw)) = (throughput_of(outcomes, Scenario::Http), throughput_of(outcomes, Scenario::Raw)) {
        println!("http / raw throughput: {:.2} (target >= 0.80)", http / raw);
    }
    if let (Some(cached), Some(uncached)) =
        (throughput_of(outcomes, Scenario::RankedCached), throughput_of(outcomes, Scenario::RankedUncached))
    {
        println!("ranked cached / uncached throughput: {:.1}x (target >= 10x)", cached / uncached);
    }
    if let (Some(html), Some(json)) =
        (throughput_of(outcomes, Scenario::ReviewsHtmlCached), throughput_of(outcomes, Scenario::RankedCached))
    {
        println!("reviews-html-cached / ranked-cached throughput: {:.2} (target >= 0.5)", html / json);
    }
    for (summary, ranked) in
        [(Scenario::SummaryUncached, Scenario::RankedUncached), (Scenario::SummaryCached, Scenario::RankedCached)]
    {
        if let (Some(summary_rps), Some(ranked_rps)) =
            (throughput_of(outcomes, summary), throughput_of(outcomes, ranked))
        {
            println!("{} / {} throughput: {:.2}", summary.name(), ranked.name(), summary_rps / ranked_rps);
        }
    }
}

fn write_summary(path: &Path, outcomes: &[Outcome], connections: usize) -> anyhow::Result<()> {
    let mut file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(file, "scenario,connections,seconds,requests,errors,throughput_rps,p50_ms,p90_ms,p99_ms,p999_ms,max_ms")?;
    for outcome in outcomes {
        let latency = outcome.measured.latency.summary();
        writeln!(
            file,
            "{},{},{:.3},{},{},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3}",
            outcome.scenario.name(),
            connections,
            outcome.measured.elapsed.as_secs_f64(),
            outcome.measured.succeeded,
            outcome.measured.failed,
            outcome.measured.throughput(),
            latency.p50,
            latency.p90,
            latency.p99,
            latency.p999,
            latency.max,
        )?;
    }
    Ok(())
}

/// Each scenario's latency at percentiles from 0 to 99.999, for a percentile plot.
fn write_latency_curves(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let mut file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(file, "scenario,percentile,latency_ms")?;
    // Denser towards the tail, where the interesting differences are.
    let mut percentiles: Vec<f64> = (0..90).map(f64::from).collect();
    percentiles.extend((0..90).map(|step| 90.0 + f64::from(step) * 0.1));
    percentiles.extend((0..90).map(|step| 99.0 + f64::from(step) * 0.01));
    percentiles.extend((0..10).map(|step| 99.9 + f64::from(step) * 0.01));
    percentiles.extend([99.995, 99.999]);
    for outcome in outcomes {
        for percentile in &percentiles {
            writeln!(
                file,
                "{},{percentile:.3},{:.3}",
                outcome.scenario.name(),
                outcome.measured.latency.millis_at(percentile / 100.0)
            )?;
        }
    }
    Ok(())
}
