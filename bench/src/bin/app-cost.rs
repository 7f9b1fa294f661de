//! `app-cost`: what query-api's router costs one request, beside the
//! anchor's router answering the same bytes, in one process on one thread.
//!
//! Each request is handed to the router as the service's connection task
//! hands it (`tower::ServiceExt::oneshot`, the peer's address attached) and
//! its body read; no socket, no HTTP parsing. `bench/wrk-ab.sh` measures the
//! whole service, where the kernel's and hyper's work (the same for both
//! routers) and the machine's noise are most of each figure; this measures
//! the part the service's own code decides, so that a change worth a few
//! per cent of a cached read shows. The ranking is read from HBase once,
//! before the rounds: the measured requests are cache hits. (A read the
//! service does not cache would wait on HBase, whose calls run on tokio's
//! blocking threads, whose CPU time this does not count: measure cached
//! reads only.)
//!
//! Each round runs the service's router, the anchor's twice, and the
//! service's again (A N N A), and prints their nanoseconds per request (the
//! thread's CPU time) and the service's cost beyond the anchor.
//!
//! With `--only service` (or `anchor`) each round runs that router twice
//! and nothing else: `bench/app-instructions.sh` counts the instructions
//! of each under callgrind, a figure this machine's noise does not move.
//!
//! The service's flags follow `--`, parsed as query-api parses them (its
//! defaults included); unless they name `--ranked-cache-ttl-ms`, a ranking
//! is kept for an hour, so that no measured read reloads it (that flag then
//! overrides `REVIEWS_API_RANKED_CACHE_TTL_MS`, as any flag does):
//!
//!     app-cost --rounds 3 -- --table-prefix bench_

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use clap::Parser;
use common::hbase::Hbase;
use common::store::ReadStore;
use query_api::AppState;
use tower::ServiceExt as _;

/// The allocator query-api runs with: allocation is part of what is measured.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long a ranking is kept unless the service's flags say otherwise: longer than any run.
const RANKED_CACHE_TTL_MS: &str = "3600000";

/// One of the two routers measured; `--only` names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Measured {
    /// query-api's.
    Service,
    /// The anchor's.
    Anchor,
}

/// Flags of the benchmark; the service's own follow `--`.
#[derive(Debug, Parser)]
#[command(name = "app-cost", about = "CPU time per request of query-api's router and of the anchor's, in process.")]
struct AppCostArgs {
    /// The read, as the router sees its path and query.
    #[arg(long, default_value = "/v1/products/P000000001/comments/ranked")]
    path: String,

    /// Send a browser's `Accept-Encoding` (gzip, deflate, br, zstd); the
    /// anchor then answers the compressed bytes query-api answered first.
    #[arg(long)]
    browser: bool,

    /// Requests per run.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(1..))]
    requests: u32,

    /// Rounds of A N N A.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,

    /// Run one router only, twice a round (A A or N N).
    #[arg(long, value_enum)]
    only: Option<Measured>,

    /// query-api's flags (`--table-prefix`, `--ranked-cache-ttl-ms`, ...).
    #[arg(last = true)]
    service: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = AppCostArgs::parse();
    let mut service_flags = vec!["query-api".to_owned()];
    if !args.service.iter().any(|flag| flag.starts_with("--ranked-cache-ttl-ms")) {
        service_flags.extend(["--ranked-cache-ttl-ms".to_owned(), RANKED_CACHE_TTL_MS.to_owned()]);
    }
    service_flags.extend(args.service.iter().cloned());
    let service = query_api::Args::try_parse_from(service_flags).unwrap_or_else(|error| error.exit());
    let _tracing = common::traces::init("app-cost");
    // One thread, as one connection's requests run: nothing else competes for it.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("building a runtime")?;
    runtime.block_on(measure(&args, &service))
}

async fn measure(args: &AppCostArgs, service_args: &query_api::Args) -> anyhow::Result<()> {
    let tables = service_args.hbase.tables().context("invalid --table-prefix")?;
    let store = ReadStore::new(Hbase::new(service_args.resolved_hbase_config(&tables).await), tables);
    let state = AppState::new(store, service_args.settings());
    let service = query_api::app(state.clone());
    // The first request reads HBase and fills the caches; its bytes are what the anchor answers.
    let (status, body) = answer(&service, request(args, &args.path)?).await?;
    if status != StatusCode::OK {
        bail!("{} answered {status}: {}", args.path, String::from_utf8_lossy(&body));
    }
    if service_args.ranked_cache_ttl_ms < 60_000 {
        eprintln!("app-cost: --ranked-cache-ttl-ms is under a minute: some measured reads may reload the ranking");
    }
    let anchor = bench::anchor_router(body.clone());
    println!("bytes per answer: {}; {} requests per run; ns per request (thread CPU time)", body.len(), args.requests);
    for round in 1..=args.rounds {
        let runs = match args.only {
            None => vec![Measured::Service, Measured::Anchor, Measured::Anchor, Measured::Service],
            Some(only) => vec![only; 2],
        };
        // Each router's nanoseconds per request, summed over its runs.
        let (mut service_ns, mut anchor_ns) = (0.0, 0.0);
        for measured in runs {
            let (router, path) = match measured {
                Measured::Service => (&service, args.path.as_str()),
                Measured::Anchor => (&anchor, "/anchor"),
            };
            let ns = run(args, router, path).await? / 2.0;
            // What the service's upkeep task does every few seconds: fold
            // the latency samples into the histograms (outside the timing).
            state.metrics().run_upkeep();
            match measured {
                Measured::Service => service_ns += ns,
                Measured::Anchor => anchor_ns += ns,
            }
        }
        match args.only {
            None => println!(
                "round {round}: query-api {service_ns:.0}, anchor {anchor_ns:.0}, beyond the anchor {:.0}, ratio {:.2}",
                service_ns - anchor_ns,
                service_ns / anchor_ns
            ),
            Some(Measured::Service) => println!("round {round}: query-api {service_ns:.0}"),
            Some(Measured::Anchor) => println!("round {round}: anchor {anchor_ns:.0}"),
        }
    }
    Ok(())
}

/// The thread CPU nanoseconds per request of `args.requests` requests of `path` to `router`.
async fn run(args: &AppCostArgs, router: &Router, path: &str) -> anyhow::Result<f64> {
    let started = thread_cpu_time()?;
    for _ in 0..args.requests {
        let (status, _) = answer(router, request(args, path)?).await?;
        if status != StatusCode::OK {
            bail!("{path} answered {status} during the run");
        }
    }
    let spent = thread_cpu_time()?.saturating_sub(started);
    Ok(spent.as_nanos() as f64 / f64::from(args.requests))
}

/// A GET of `path` from a loopback client, as the connection task hands it on.
fn request(args: &AppCostArgs, path: &str) -> anyhow::Result<Request<Body>> {
    let mut builder = Request::get(path).header(header::HOST, "127.0.0.1");
    if args.browser {
        builder = builder.header(header::ACCEPT_ENCODING, "gzip, deflate, br, zstd");
    }
    let mut request = builder.body(Body::empty()).with_context(|| format!("{path:?} is not a request's path"))?;
    request.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    Ok(request)
}

/// `router`'s status and body for `request`.
async fn answer(router: &Router, request: Request<Body>) -> anyhow::Result<(StatusCode, Bytes)> {
    let response = router.clone().oneshot(request).await.unwrap_or_else(|never| match never {});
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.context("reading an answer's body")?;
    Ok((status, body))
}

/// The CPU time this thread has used.
fn thread_cpu_time() -> anyhow::Result<Duration> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .context("reading the thread's CPU clock")?;
    Ok(Duration::from(now))
}
