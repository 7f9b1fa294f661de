//! `page-load`: a product page's reads at a fixed rate, every answer recorded,
//! for the fault scripts that restart HBase under a running query service
//! (`scripts/fault-hbase-restart.sh`, which also measures a cold start).
//!
//! The mix is what shoppers' pages ask: a product's ranked reviews, its
//! summary and its first latest page (the reads query-api keeps a last good
//! copy of), a user's timeline and a product's second page (which it does
//! not), a fifth each, over products `P000000001..=P<n>` and users
//! `U000000001..=U<n>` drawn at random. With `--warm` it first reads every
//! product's three kept pages once, as the scripts' "every page served
//! before" needs.
//!
//! The load is open-loop (requests go out on schedule whatever the answers'
//! latency). Each answer is one JSON line in `--out`: when its request was
//! due (Unix milliseconds), its route, status, latency, error code, whether it
//! was a stale copy (it had an `Age`), and for a stale copy whether its body
//! equals, byte for byte, the last fresh answer this tool saw for that URL.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use admin::demo;
use anyhow::Context;
use bench::load::http_client;
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(name = "page-load", about = "A product page's reads at a fixed rate; every answer as one JSON line.")]
struct PageLoadArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    base: String,

    /// Requests per second.
    #[arg(long, default_value_t = 250.0)]
    rate: f64,

    /// Seconds to hold the rate.
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,

    /// Products P000000001..=P<n> to read.
    #[arg(long, default_value_t = 200)]
    products: u64,

    /// Users U000000001..=U<n> to read.
    #[arg(long, default_value_t = 2_000)]
    users: u64,

    /// First read every product's ranked, summary and first latest page once.
    #[arg(long)]
    warm: bool,

    /// Where the answers go, one JSON line each.
    #[arg(long)]
    out: std::path::PathBuf,

    /// Seed of the random choice of routes and ids.
    #[arg(long, default_value_t = 11)]
    seed: u64,
}

/// The routes of the mix.
#[derive(Debug, Clone, Copy)]
enum Route {
    Ranked,
    Summary,
    Latest,
    User,
    NextPage,
}

impl Route {
    const ALL: [Route; 5] = [Route::Ranked, Route::Summary, Route::Latest, Route::User, Route::NextPage];

    fn name(self) -> &'static str {
        match self {
            Route::Ranked => "ranked",
            Route::Summary => "summary",
            Route::Latest => "latest",
            Route::User => "user",
            Route::NextPage => "next-page",
        }
    }
}

/// What the requests share: the client, the last fresh body of each URL, and
/// the second-page cursors of the products' first pages.
struct Pages {
    client: reqwest::Client,
    base: String,
    last_fresh: Mutex<HashMap<String, Vec<u8>>>,
    cursors: Mutex<HashMap<u64, String>>,
}

/// One answer, as recorded.
struct Seen {
    status: u16,
    code: Option<String>,
    stale: bool,
    /// For a stale copy: whether it equals the last fresh answer to the same URL.
    same_as_last_fresh: Option<bool>,
}

impl Pages {
    fn path(&self, route: Route, product: u64, user: u64) -> anyhow::Result<String> {
        let product_id = demo::product_id(product)?;
        Ok(match route {
            Route::Ranked => format!("/v1/products/{product_id}/comments/ranked"),
            Route::Summary => format!("/v1/products/{product_id}/comments/summary"),
            Route::Latest => format!("/v1/products/{product_id}/comments?limit=20"),
            Route::User => format!("/v1/users/{}/comments?limit=20", demo::user_id(user)?),
            Route::NextPage => {
                let cursor = self.cursors.lock().ok().and_then(|cursors| cursors.get(&product).cloned());
                match cursor {
                    Some(cursor) => format!("/v1/products/{product_id}/comments?limit=20&cursor={cursor}"),
                    None => format!("/v1/products/{product_id}/comments?limit=20"),
                }
            }
        })
    }

    async fn read(&self, route: Route, product: u64, path: &str) -> Result<Seen, String> {
        let response =
            self.client.get(format!("{}{path}", self.base)).send().await.map_err(|error| error.to_string())?;
        let status = response.status().as_u16();
        let stale = response.headers().contains_key("age");
        let body = response.bytes().await.map_err(|error| error.to_string())?.to_vec();
        let parsed: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        let code = parsed.as_ref().and_then(|value| value["error"]["code"].as_str().map(str::to_owned));
        let mut same_as_last_fresh = None;
        if status == 200 {
            let mut last_fresh = self.last_fresh.lock().map_err(|_| "poisoned".to_owned())?;
            if stale {
                same_as_last_fresh = Some(last_fresh.get(path) == Some(&body));
            } else {
                last_fresh.insert(path.to_owned(), body);
            }
        }
        if let (Route::Latest, Some(cursor)) =
            (route, parsed.as_ref().and_then(|value| value["nextCursor"].as_str().map(str::to_owned)))
        {
            if let Ok(mut cursors) = self.cursors.lock() {
                cursors.insert(product, cursor);
            }
        }
        Ok(Seen { status, code, stale, same_as_last_fresh })
    }
}

fn unix_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = PageLoadArgs::parse();
    anyhow::ensure!(args.rate.is_finite() && args.rate > 0.0, "--rate must be positive");
    anyhow::ensure!(args.products > 0 && args.users > 0, "--products and --users must be positive");
    let pages = Arc::new(Pages {
        client: http_client(512)?,
        base: args.base.trim_end_matches('/').to_owned(),
        last_fresh: Mutex::new(HashMap::new()),
        cursors: Mutex::new(HashMap::new()),
    });
    if args.warm {
        let started = Instant::now();
        let mut failed = 0;
        for product in 1..=args.products {
            for route in [Route::Ranked, Route::Summary, Route::Latest] {
                let path = pages.path(route, product, 1)?;
                if !matches!(pages.read(route, product, &path).await, Ok(Seen { status: 200, .. })) {
                    failed += 1;
                }
            }
        }
        eprintln!(
            "page-load: read {} products' ranked, summary and first latest pages in {:.1} s ({failed} not 200)",
            args.products,
            started.elapsed().as_secs_f64()
        );
    }

    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?,
    );
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    let mut random = StdRng::seed_from_u64(args.seed);
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let end = Instant::now() + Duration::from_secs(args.duration_secs);
    let mut tasks = tokio::task::JoinSet::new();
    while Instant::now() < end {
        tokio::select! {
            Some(line) = receiver.recv() => writeln!(out, "{line}")?,
            due = ticker.tick() => {
                let route = Route::ALL[random.random_range(0..Route::ALL.len())];
                let product = random.random_range(1..=args.products);
                let user = random.random_range(1..=args.users);
                let path = pages.path(route, product, user)?;
                let (pages, sender) = (Arc::clone(&pages), sender.clone());
                let due_unix_ms = unix_ms();
                tasks.spawn(async move {
                    let seen = pages.read(route, product, &path).await;
                    let latency_ms = due.elapsed().as_secs_f64() * 1_000.0;
                    let line = match seen {
                        Ok(seen) => json!({
                            "due_ms": due_unix_ms, "route": route.name(), "status": seen.status,
                            "latency_ms": latency_ms, "code": seen.code, "stale": seen.stale,
                            "same_as_last_fresh": seen.same_as_last_fresh,
                        }),
                        Err(error) => json!({
                            "due_ms": due_unix_ms, "route": route.name(), "status": 0,
                            "latency_ms": latency_ms, "code": error, "stale": false,
                        }),
                    };
                    let _ = sender.send(line);
                });
            }
        }
        while tasks.try_join_next().is_some() {}
    }
    drop(sender);
    while tasks.join_next().await.is_some() {}
    while let Some(line) = receiver.recv().await {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
