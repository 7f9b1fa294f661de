//! `page-load`: a product page's reads at a fixed rate, every answer recorded,
//! for the fault scripts that restart HBase under a running query service
//! (`scripts/fault-hbase-restart.sh`, which also measures a cold start).
//!
//! The mix is what shoppers' pages ask: by default a product's ranked
//! reviews, its summary and its first latest page (a product page's first
//! reads), a user's timeline and a product's second page, a fifth each, over
//! products 1..=n (`admin::demo::product_id`) and users
//! `U000000001..=U<n>` drawn at random. `--routes` adds the other kinds a
//! frontend makes: a page deep in the hottest product (`P000000001`), a
//! product's one-star reviews, and a listing page's summaries of twelve
//! products. With `--warm` it first reads every product's three first reads
//! once, so that query-api keeps a last good copy of each, as the scripts'
//! "every page served before" needs, and walks the hottest product to
//! collect its deep cursors.
//!
//! The load is open-loop (requests go out on schedule whatever the answers'
//! latency). Each answer is one JSON line in `--out`: when its request was
//! due (Unix milliseconds), its route, status, latency, error code and
//! message (a refusal's says why), whether it was a stale copy (it had an
//! `Age`), whether it was read from a secondary region replica
//! (`X-Replica-Read`), and for a stale copy whether its body equals, byte
//! for byte, the last fresh answer this tool saw for that URL.
//!
//! With `--snapshot` it instead reads every product's ranked reviews,
//! summary and whole latest list (walked with its cursors) once, and writes
//! them to `--out` as one JSON object by path: two snapshots compare a catalog's
//! answers before and after a fault.

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

    /// Products 1..=n of the demo data (`admin::demo::product_id`) to read.
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

    /// The kinds of reads in the mix, comma-separated, in equal shares:
    /// ranked, summary, latest, user, next-page, deep-page, star, summaries,
    /// rating-order (best first), review (one review by the id a latest page
    /// gave it) and html (the server-rendered `reviews.html`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ranked,summary,latest,user,next-page")]
    routes: Vec<Route>,

    /// Read every product's answers once into this file instead of a timed load.
    #[arg(long)]
    snapshot: bool,
    /// The local address requests leave from (127.0.0.2, say, to count as
    /// another client of a service on the same machine).
    #[arg(long, value_name = "ADDRESS")]
    local_address: Option<std::net::IpAddr>,
    /// Send every request on a new connection, as a browser's first visit
    /// does, instead of keeping connections alive.
    #[arg(long)]
    new_connections: bool,
}

/// The routes of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Route {
    Ranked,
    Summary,
    Latest,
    User,
    NextPage,
    DeepPage,
    Star,
    Summaries,
    RatingOrder,
    Review,
    Html,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Ranked => "ranked",
            Route::Summary => "summary",
            Route::Latest => "latest",
            Route::User => "user",
            Route::NextPage => "next-page",
            Route::DeepPage => "deep-page",
            Route::Star => "star",
            Route::Summaries => "summaries",
            Route::RatingOrder => "rating-order",
            Route::Review => "review",
            Route::Html => "html",
        }
    }
}

/// The product whose deep pages `deep-page` reads: the demo's hottest.
const HOT_PRODUCT: u64 = 1;

/// How many times a snapshot or a walk reads a path that answers 503.
const SETTLE_TRIES: u32 = 10;

/// Products a listing page's `/v1/summaries` names.
const LISTING_PRODUCTS: u64 = 12;

/// What the requests share: the client, the last fresh body of each URL, and
/// the second-page cursors of the products' first pages.
struct Pages {
    client: reqwest::Client,
    base: String,
    /// Products 1..=products of the demo data exist.
    products: u64,
    last_fresh: Mutex<HashMap<String, Vec<u8>>>,
    cursors: Mutex<HashMap<u64, String>>,
    /// The id of the first review of each product's latest page, for `review`.
    review_ids: Mutex<HashMap<u64, String>>,
    /// Cursors of the hottest product's pages past its first ten, from `--warm`.
    deep_cursors: Vec<String>,
}

/// One answer, as recorded.
struct Seen {
    status: u16,
    code: Option<String>,
    message: Option<String>,
    stale: bool,
    /// Whether it was read (in part) from a secondary region replica.
    replica: bool,
    /// For a stale copy: whether it equals the last fresh answer to the same URL.
    same_as_last_fresh: Option<bool>,
}

impl Pages {
    /// The path of `route` for `product` and `user`; `pick` chooses among
    /// the deep cursors and the listing's products.
    fn path(&self, route: Route, product: u64, user: u64, pick: u64) -> anyhow::Result<String> {
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
            Route::DeepPage => {
                let hot = demo::product_id(HOT_PRODUCT)?;
                match self.deep_cursors.len() {
                    0 => format!("/v1/products/{hot}/comments?limit=20"),
                    count => {
                        let cursor = &self.deep_cursors[usize::try_from(pick).unwrap_or(0) % count];
                        format!("/v1/products/{hot}/comments?limit=20&cursor={cursor}")
                    }
                }
            }
            Route::Star => format!("/v1/products/{product_id}/comments?rating=1&limit=20"),
            Route::RatingOrder => format!("/v1/products/{product_id}/comments?sort=rating_desc&limit=20"),
            Route::Html => format!("/v1/products/{product_id}/reviews.html"),
            Route::Review => {
                let id = self.review_ids.lock().ok().and_then(|ids| ids.get(&product).cloned());
                match id {
                    Some(id) => format!("/v1/reviews/{id}"),
                    // Not seen yet: the latest page that gives it.
                    None => format!("/v1/products/{product_id}/comments?limit=20"),
                }
            }
            Route::Summaries => {
                let ids: Vec<String> = (0..LISTING_PRODUCTS)
                    .map(|offset| demo::product_id((product + offset * 7) % self.products + 1).map(|id| id.to_string()))
                    .collect::<Result<_, _>>()?;
                format!("/v1/summaries?productIds={}", ids.join(","))
            }
        })
    }

    async fn read(&self, route: Route, product: u64, path: &str) -> Result<Seen, String> {
        let response =
            self.client.get(format!("{}{path}", self.base)).send().await.map_err(|error| error.to_string())?;
        let status = response.status().as_u16();
        let stale = response.headers().contains_key("age");
        let replica = response.headers().contains_key("x-replica-read");
        let body = response.bytes().await.map_err(|error| error.to_string())?.to_vec();
        let parsed: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        let error_field =
            |field: &str| parsed.as_ref().and_then(|value| value["error"][field].as_str().map(str::to_owned));
        let (code, message) = (error_field("code"), error_field("message"));
        let mut same_as_last_fresh = None;
        if status == 200 {
            let mut last_fresh = self.last_fresh.lock().map_err(|_| "poisoned".to_owned())?;
            if stale {
                same_as_last_fresh = Some(last_fresh.get(path) == Some(&body));
            } else {
                last_fresh.insert(path.to_owned(), body);
            }
        }
        if let (Route::Latest | Route::Review, Some(page)) = (route, parsed.as_ref()) {
            if let (Some(cursor), Ok(mut cursors)) = (page["nextCursor"].as_str(), self.cursors.lock()) {
                cursors.insert(product, cursor.to_owned());
            }
            if let (Some(id), Ok(mut ids)) = (page["comments"][0]["id"].as_str(), self.review_ids.lock()) {
                ids.insert(product, id.to_owned());
            }
        }
        Ok(Seen { status, code, message, stale, replica, same_as_last_fresh })
    }

    /// GETs `path` and returns its status and JSON body.
    async fn get_json(&self, path: &str) -> anyhow::Result<(u16, serde_json::Value)> {
        let response = self.client.get(format!("{}{path}", self.base)).send().await?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(serde_json::Value::Null)))
    }

    /// GETs `path` as [`Pages::get_json`] does, reading it again while it
    /// answers 503 (HBase or a gateway too slow, as on a cluster just
    /// started on a loaded machine), up to [`SETTLE_TRIES`] times a second
    /// apart: the answers a snapshot keeps and the cursors a walk follows
    /// are the service's answers, not its moments of overload.
    async fn get_json_settled(&self, path: &str) -> anyhow::Result<(u16, serde_json::Value)> {
        let mut tries = 1;
        loop {
            let (status, body) = self.get_json(path).await?;
            if status != 503 || tries == SETTLE_TRIES {
                return Ok((status, body));
            }
            eprintln!("page-load: {path} answered 503 ({body}); reading it again in 1 s");
            tokio::time::sleep(Duration::from_secs(1)).await;
            tries += 1;
        }
    }

    /// Walks `product`'s latest list with its cursors, `limit` a page:
    /// every comment, and the cursor of each page after the first.
    async fn walk(&self, product: u64, limit: usize) -> anyhow::Result<(Vec<serde_json::Value>, Vec<String>)> {
        let first = format!("/v1/products/{}/comments?limit={limit}", demo::product_id(product)?);
        let (mut comments, mut cursors, mut path) = (Vec::new(), Vec::new(), first.clone());
        loop {
            let (status, page) = self.get_json_settled(&path).await?;
            anyhow::ensure!(status == 200, "{path} answered {status}: {page}");
            comments.extend(page["comments"].as_array().cloned().unwrap_or_default());
            match page["nextCursor"].as_str() {
                Some(cursor) => {
                    cursors.push(cursor.to_owned());
                    path = format!("{first}&cursor={cursor}");
                }
                None => return Ok((comments, cursors)),
            }
        }
    }

    /// Every product's ranked reviews, summary and whole latest list, by path.
    async fn snapshot(&self) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
        let mut answers = serde_json::Map::new();
        for product in 1..=self.products {
            let id = demo::product_id(product)?;
            for path in [format!("/v1/products/{id}/comments/ranked"), format!("/v1/products/{id}/comments/summary")] {
                let (status, body) = self.get_json_settled(&path).await?;
                answers.insert(path, json!({ "status": status, "body": body }));
            }
            let (comments, _) = self.walk(product, 100).await?;
            answers.insert(format!("/v1/products/{id}/comments (walked)"), serde_json::Value::Array(comments));
        }
        Ok(answers)
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
    anyhow::ensure!(!args.routes.is_empty(), "--routes names no route");
    let mut pages = Pages {
        client: http_client(if args.new_connections { 0 } else { 512 }, args.local_address)?,
        base: args.base.trim_end_matches('/').to_owned(),
        products: args.products,
        last_fresh: Mutex::new(HashMap::new()),
        cursors: Mutex::new(HashMap::new()),
        review_ids: Mutex::new(HashMap::new()),
        deep_cursors: Vec::new(),
    };
    if args.snapshot {
        let answers = pages.snapshot().await?;
        std::fs::write(&args.out, serde_json::to_vec(&answers)?)
            .with_context(|| format!("writing {}", args.out.display()))?;
        eprintln!("page-load: {} answers written to {}", answers.len(), args.out.display());
        return Ok(());
    }
    if args.warm && args.routes.contains(&Route::DeepPage) {
        let (_, cursors) = pages.walk(HOT_PRODUCT, 20).await?;
        pages.deep_cursors = cursors.into_iter().skip(10).collect();
        eprintln!("page-load: {} deep cursors of product {HOT_PRODUCT}", pages.deep_cursors.len());
    }
    let pages = Arc::new(pages);
    if args.warm {
        let started = Instant::now();
        let mut failed = 0;
        for product in 1..=args.products {
            for route in [Route::Ranked, Route::Summary, Route::Latest] {
                let path = pages.path(route, product, 1, 0)?;
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
                let route = args.routes[random.random_range(0..args.routes.len())];
                let product = random.random_range(1..=args.products);
                let user = random.random_range(1..=args.users);
                let path = pages.path(route, product, user, random.random_range(0..u64::MAX))?;
                let (pages, sender) = (Arc::clone(&pages), sender.clone());
                let due_unix_ms = unix_ms();
                tasks.spawn(async move {
                    let seen = pages.read(route, product, &path).await;
                    let latency_ms = due.elapsed().as_secs_f64() * 1_000.0;
                    let line = match seen {
                        Ok(seen) => json!({
                            "due_ms": due_unix_ms, "route": route.name(), "status": seen.status,
                            "latency_ms": latency_ms, "code": seen.code, "message": seen.message, "stale": seen.stale,
                            "replica": seen.replica, "same_as_last_fresh": seen.same_as_last_fresh,
                        }),
                        Err(error) => json!({
                            "due_ms": due_unix_ms, "route": route.name(), "status": 0,
                            "latency_ms": latency_ms, "code": error, "stale": false, "replica": false,
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
