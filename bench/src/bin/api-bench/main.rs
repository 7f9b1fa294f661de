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
//!   JSON-LD) on the cached service, against `ranked-cached`;
//! - `script`: the widgets' script (`/widget/v1/reviews.js`), prepared once;
//! - `anchor`: the floor, a bare axum server (`anchor`, beside this binary)
//!   answering the bytes of a ranked answer with nothing else, so the cached
//!   reads can be told apart from what any server on this machine costs.
//!
//! Every scenario runs once per `--encodings` entry: `identity` sends no
//! `Accept-Encoding` (as curl does), `browser` sends a browser's
//! (`gzip, deflate, br, zstd`) and reads the compressed bytes as they come.
//!
//! Products are drawn uniformly at random from the tables. It starts the two
//! services itself (the `query-api` binary beside this one, on loopback ports,
//! and the anchor when asked for)
//! with the same HBase flags it was given, so both sides get the same pool size.
//! Each scenario warms up, then runs for a fixed time; every request loop is
//! bounded in time and count (the closed loop of `bench::load`). It prints a
//! table, and writes `summary.csv` and `latency.csv` (percentile curves) for
//! `bench/plot-api.py`.

mod report;
mod scenario;
mod services;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use common::config::HbaseArgs;
use common::exit::ExitStatus;
use common::store::products::ProductIndex;
use common::store::Store;
use common::Id;

use report::{print_outcome, print_ratios, write_latency_curves, write_summary};
use scenario::{run_scenario, Clients, Encoding, Scenario, Workload};
use services::{start_anchor, start_service};

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
    /// absent-star, reviews-html-cached, script, anchor.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "raw,http,ranked-uncached,ranked-cached,summary-uncached,summary-cached,hot-latest,hot-rarest,hot-rating-asc,summaries-48,reviews-html-cached"
    )]
    scenarios: Vec<Scenario>,

    /// The `Accept-Encoding` each scenario runs with, comma-separated:
    /// identity (none sent), browser (a browser's).
    #[arg(long, value_delimiter = ',', default_value = "identity")]
    encodings: Vec<Encoding>,

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

fn main() -> ExitCode {
    let args = BenchArgs::parse();
    common::shutdown::run_main("api-bench", async {
        match bench(args).await {
            Ok(()) => ExitStatus::Success,
            Err(error) => common::exit::report_failure(&error, |_| false),
        }
    })
}

async fn bench(args: BenchArgs) -> anyhow::Result<()> {
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
    let clients = Clients::new(args.connections)?;
    let workload =
        Arc::new(Workload { store, clients, products, ranked_products, hot_product, rarest_star, absent_stars });
    let anchor = match (args.scenarios.contains(&Scenario::Anchor), &cached) {
        (true, Some(cached)) => Some(start_anchor(&args, &workload, &cached.base).await?),
        _ => None,
    };

    let mut outcomes = Vec::new();
    for (scenario, encoding) in
        args.scenarios.iter().flat_map(|scenario| args.encodings.iter().map(move |encoding| (scenario, *encoding)))
    {
        let service = match scenario {
            Scenario::Raw => None,
            Scenario::Anchor => anchor.as_ref(),
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
            let seed = args.seed.wrapping_add(1);
            run_scenario(&workload, *scenario, encoding, &base, args.connections, warmup, seed).await?;
        }
        let duration = Duration::from_secs(args.duration_secs);
        let outcome =
            run_scenario(&workload, *scenario, encoding, &base, args.connections, duration, args.seed).await?;
        print_outcome(&outcome);
        outcomes.push(outcome);
    }
    print_ratios(&outcomes);
    write_summary(&args.out_dir.join("summary.csv"), &outcomes, args.connections)?;
    write_latency_curves(&args.out_dir.join("latency.csv"), &outcomes)?;
    println!("wrote {}/summary.csv and {}/latency.csv", args.out_dir.display(), args.out_dir.display());
    drop((cached, uncached, anchor));
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
        let response =
            workload.clients.of(Encoding::Identity).get(&url).send().await.context("warming the ranked cache")?;
        if !response.status().is_success() {
            bail!("warming the ranked cache: {url} answered {}", response.status());
        }
    }
    Ok(())
}
