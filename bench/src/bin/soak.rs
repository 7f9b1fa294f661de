//! `soak`: holds a running query service at a fixed request rate with mixed
//! routes, and reports each window (by default each minute): requests, status
//! classes, p50/p99/max latency and the service's resident memory.
//!
//! The load is open-loop: requests are sent on a fixed schedule whatever the
//! service's latency, and each latency is measured from the moment its request
//! was due, so a stalled service shows up as latency instead of silently
//! lowering the rate (coordinated omission). With `--rate 0` it first measures
//! the service's sustainable rate closed-loop and soaks at a fraction of it.
//!
//! It exits non-zero when any answer was a 5xx or missing, when the rate could
//! not be held, or when the resident memory at the end differs from that
//! after the first window by more than `--max-rss-growth`; with `--report-only`
//! it reports the same and exits zero (benchmarks that measure a degradation).
//! `--windows-json PATH` also writes each window as one JSON line, for scripts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admin::demo;
use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bench::load::{closed_loop, http_client, Latency};
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Cursors kept for next-page requests.
const CURSOR_POOL: usize = 1_024;

#[derive(Debug, Parser)]
#[command(
    name = "soak",
    about = "Hold a query service at a fixed rate with mixed routes; report per-window p99 and RSS."
)]
struct SoakArgs {
    /// The service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    base: String,

    /// Requests per second; 0 measures the sustainable rate first and uses `--rate-fraction` of it.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,

    /// Share of the measured closed-loop throughput to soak at, with `--rate 0`.
    /// Half, because the closed-loop figure is a peak: at 70 % of it, HBase's
    /// slow spells on a two-core machine (p99 up to 500 ms) pushed more than
    /// the in-flight bound of requests into the service, and some were shed.
    #[arg(long, default_value_t = 0.5)]
    rate_fraction: f64,

    /// Seconds of closed-loop measurement, with `--rate 0`.
    #[arg(long, default_value_t = 20)]
    calibrate_secs: u64,

    /// Concurrent connections of the closed-loop measurement.
    #[arg(long, default_value_t = 16)]
    calibrate_connections: usize,

    /// Seconds to hold the rate.
    #[arg(long, default_value_t = 600)]
    duration_secs: u64,

    /// Seconds per reported window.
    #[arg(long, default_value_t = 60)]
    window_secs: u64,

    /// Requests in flight at most; a due request beyond this is counted as shed, not sent.
    #[arg(long, default_value_t = 512)]
    max_in_flight: usize,

    /// The service's process id, for its resident memory (VmRSS).
    #[arg(long)]
    pid: Option<u32>,

    /// Largest resident-memory change allowed from the end of the first window to the end, as a fraction.
    #[arg(long, default_value_t = 0.10)]
    max_rss_growth: f64,

    /// Products 1..=n of the demo data (`admin::demo::product_id`) to read.
    #[arg(long, default_value_t = 1_000)]
    products: u64,

    /// Users U000000001..=U<n> to read.
    #[arg(long, default_value_t = 5_000)]
    users: u64,

    /// Seed of the random route and id choice.
    #[arg(long, default_value_t = 7)]
    seed: u64,

    /// Also write each window as one JSON line to this file (seconds, counts,
    /// p50/p99/max in milliseconds, RSS in KiB).
    #[arg(long, value_name = "PATH")]
    windows_json: Option<std::path::PathBuf>,

    /// Report problems (5xx, shed, RSS growth) but exit zero: for benchmarks
    /// that measure how the service degrades rather than assert that it does not.
    #[arg(long)]
    report_only: bool,
    /// The local addresses requests leave from, comma-separated (127.0.0.2,
    /// say, to count as another client of a service on the same machine);
    /// several share the rate evenly, a crowd of clients, one after another.
    #[arg(long, value_name = "ADDRESS", value_delimiter = ',')]
    local_address: Vec<std::net::IpAddr>,
}

/// The routes of the mix.
#[derive(Debug, Clone, Copy)]
enum Route {
    ProductLatest,
    ProductNext,
    UserTimeline,
    Ranked,
    SeedProductLatest,
    SeedProductNext,
    SeedUserLatest,
    SeedRanked,
}

/// The mix, as cumulative weights out of 100.
const MIX: [(Route, u32); 8] = [
    (Route::ProductLatest, 25),
    (Route::ProductNext, 40),
    (Route::UserTimeline, 55),
    (Route::Ranked, 70),
    (Route::SeedProductLatest, 80),
    (Route::SeedProductNext, 85),
    (Route::SeedUserLatest, 90),
    (Route::SeedRanked, 100),
];

/// What the requests share: the clients, ids, and cursors harvested from answers.
struct Workload {
    /// One per local address, taken in turn.
    clients: Vec<reqwest::Client>,
    next_client: AtomicUsize,
    base: String,
    products: u64,
    users: u64,
    v1_cursors: Mutex<VecDeque<(String, String)>>,
    seed_keys: Mutex<VecDeque<String>>,
}

/// How one request ended.
enum Outcome {
    Status(u16),
    NoAnswer,
}

impl Workload {
    fn pick(&self, random: &mut StdRng) -> (Route, common::Id, common::Id) {
        let roll = random.random_range(0..100);
        let route = MIX.iter().find(|(_, below)| roll < *below).map_or(Route::ProductLatest, |(route, _)| *route);
        // A third of the reads go to the three hottest products, as on a shop's front page.
        let product_number =
            if random.random_bool(0.3) { random.random_range(1..=3) } else { random.random_range(1..=self.products) };
        let product = demo::product_id(product_number).unwrap_or_else(|_| demo::product_id(1).expect("id"));
        let user = demo::user_id(random.random_range(1..=self.users)).unwrap_or(product);
        (route, product, user)
    }

    fn remember<T>(pool: &Mutex<VecDeque<T>>, item: T) {
        if let Ok(mut pool) = pool.lock() {
            if pool.len() >= CURSOR_POOL {
                pool.pop_front();
            }
            pool.push_back(item);
        }
    }

    fn take<T>(pool: &Mutex<VecDeque<T>>) -> Option<T> {
        pool.lock().ok().and_then(|mut pool| pool.pop_front())
    }

    /// The next client in turn.
    fn client(&self) -> &reqwest::Client {
        &self.clients[self.next_client.fetch_add(1, Ordering::Relaxed) % self.clients.len()]
    }

    async fn send(&self, route: Route, product: common::Id, user: common::Id) -> Outcome {
        let base = &self.base;
        let client = self.client();
        // The product whose list a v1 page reads: a next page's own, or the one picked.
        let mut asked_product = product.to_string();
        let request = match route {
            Route::ProductLatest => client.get(format!("{base}/v1/products/{product}/comments?limit=20")),
            Route::ProductNext => match Self::take(&self.v1_cursors) {
                Some((cursor_product, cursor)) => {
                    asked_product = cursor_product;
                    client.get(format!("{base}/v1/products/{asked_product}/comments?limit=20&cursor={cursor}"))
                }
                None => client.get(format!("{base}/v1/products/{product}/comments?limit=20")),
            },
            Route::UserTimeline => client.get(format!("{base}/v1/users/{user}/comments?limit=20")),
            Route::Ranked => client.get(format!("{base}/v1/products/{product}/comments/ranked")),
            Route::SeedProductLatest => client.get(format!("{base}/product/{product}/comments/latest?limit=20")),
            Route::SeedProductNext => {
                let start = Self::take(&self.seed_keys)
                    .unwrap_or_else(|| STANDARD.encode(common::keys::product_comment_prefix(&product)));
                client.post(format!("{base}/product/comments/get")).json(&json!({"startIndexKey": start, "limit": 20}))
            }
            Route::SeedUserLatest => client.get(format!("{base}/user/{user}/comments/latest?limit=20")),
            Route::SeedRanked => client.get(format!("{base}/product/{product}/comments/ranked")),
        };
        let Ok(response) = request.send().await else {
            return Outcome::NoAnswer;
        };
        let status = response.status().as_u16();
        let Ok(body) = response.bytes().await else {
            return Outcome::NoAnswer;
        };
        // Keep the next positions of product pages for later next-page requests.
        if status == 200 {
            if let Ok(page) = serde_json::from_slice::<serde_json::Value>(&body) {
                match (&route, page["nextCursor"].as_str(), page["nextIndexKey"].as_str()) {
                    (Route::ProductLatest | Route::ProductNext, Some(cursor), _) => {
                        Self::remember(&self.v1_cursors, (asked_product, cursor.to_owned()));
                    }
                    (Route::SeedProductLatest | Route::SeedProductNext, _, Some(key)) => {
                        Self::remember(&self.seed_keys, key.to_owned());
                    }
                    _ => {}
                }
            }
        }
        Outcome::Status(status)
    }
}

/// Counts of one window.
struct Window {
    latency: Latency,
    ok: u64,
    client_errors: u64,
    /// Of the client errors, 429s: refused as over this client's share.
    too_many: u64,
    server_errors: u64,
    no_answer: u64,
    shed: u64,
}

impl Window {
    fn new() -> anyhow::Result<Window> {
        Ok(Window {
            latency: Latency::new()?,
            ok: 0,
            client_errors: 0,
            too_many: 0,
            server_errors: 0,
            no_answer: 0,
            shed: 0,
        })
    }

    fn record(&mut self, outcome: &Outcome, latency: Duration) {
        self.latency.record(latency);
        match outcome {
            Outcome::Status(status) if *status < 400 => self.ok += 1,
            Outcome::Status(status) if *status < 500 => {
                self.client_errors += 1;
                self.too_many += u64::from(*status == 429);
            }
            Outcome::Status(_) => self.server_errors += 1,
            Outcome::NoAnswer => self.no_answer += 1,
        }
    }
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Closed-loop throughput of the mix with `connections` loops for `seconds`.
async fn calibrate(workload: &Arc<Workload>, connections: usize, seconds: u64, seed: u64) -> anyhow::Result<f64> {
    let workload = Arc::clone(workload);
    let measured = closed_loop(connections, Duration::from_secs(seconds), seed, move |random| {
        let (route, product, user) = workload.pick(random);
        let workload = Arc::clone(&workload);
        async move { matches!(workload.send(route, product, user).await, Outcome::Status(status) if status < 500) }
    })
    .await?;
    if measured.failed > 0 {
        bail!("{} requests failed (5xx or no answer) while measuring the sustainable rate", measured.failed);
    }
    Ok(measured.succeeded as f64 / seconds as f64)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = SoakArgs::parse();
    if args.window_secs == 0 || args.duration_secs < args.window_secs {
        bail!("--duration-secs must be at least one --window-secs (and windows longer than 0 s)");
    }
    let addresses: Vec<Option<std::net::IpAddr>> = match args.local_address.as_slice() {
        [] => vec![None],
        addresses => addresses.iter().copied().map(Some).collect(),
    };
    let clients = addresses
        .into_iter()
        .map(|address| http_client(args.max_in_flight, address))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let workload = Arc::new(Workload {
        clients,
        next_client: AtomicUsize::new(0),
        base: args.base.trim_end_matches('/').to_owned(),
        products: args.products.max(1),
        users: args.users.max(1),
        v1_cursors: Mutex::new(VecDeque::new()),
        seed_keys: Mutex::new(VecDeque::new()),
    });

    let rate = if args.rate > 0.0 {
        args.rate
    } else {
        let measured = calibrate(&workload, args.calibrate_connections, args.calibrate_secs, args.seed).await?;
        println!(
            "sustainable rate: {measured:.0} req/s closed-loop at {} connections over {} s; soaking at {:.0} % = {:.0} req/s",
            args.calibrate_connections,
            args.calibrate_secs,
            args.rate_fraction * 100.0,
            measured * args.rate_fraction
        );
        measured * args.rate_fraction
    };
    if !(rate.is_finite() && rate > 0.0) {
        bail!("no usable rate ({rate})");
    }

    // Each answer carries the window its request was due in, so the schedule
    // never pauses at a window boundary to wait for slow answers.
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<(usize, Outcome, Duration)>();
    let window_count = usize::try_from(args.duration_secs / args.window_secs).context("window count")?;
    let window_length = Duration::from_secs(args.window_secs);
    let mut windows: Vec<Window> = (0..window_count).map(|_| Window::new()).collect::<anyhow::Result<_>>()?;
    let in_flight: Arc<Vec<AtomicUsize>> = Arc::new((0..window_count).map(|_| AtomicUsize::new(0)).collect());
    let mut random = StdRng::seed_from_u64(args.seed);
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let end = started + window_length * u32::try_from(window_count).context("window count")?;
    // How long a window's last answers may take before it is reported anyway.
    let straggler_grace = Duration::from_secs(30);
    let mut reported = 0;
    let mut totals = Window::new()?;
    let mut first_window_rss: Option<u64> = None;
    let mut last_rss: Option<u64> = None;
    let mut sent: u64 = 0;
    let mut housekeeping = tokio::time::interval(Duration::from_millis(200));
    let mut windows_json = match &args.windows_json {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    println!(
        "window  seconds  requests  req/s   2xx/3xx   4xx  5xx  no-answer  shed   p50 ms   p99 ms   max ms   rss MiB"
    );
    while reported < window_count {
        tokio::select! {
            biased;
            Some((index, outcome, latency)) = receiver.recv() => windows[index].record(&outcome, latency),
            due = ticker.tick(), if Instant::now() < end => {
                let index = usize::try_from(started.elapsed().as_secs() / args.window_secs).unwrap_or(usize::MAX);
                if index >= window_count {
                    continue;
                }
                sent += 1;
                let in_flight_now: usize = in_flight.iter().map(|count| count.load(Ordering::Relaxed)).sum();
                if in_flight_now >= args.max_in_flight {
                    windows[index].shed += 1;
                    continue;
                }
                let (route, product, user) = workload.pick(&mut random);
                let (workload, sender, in_flight) = (Arc::clone(&workload), sender.clone(), Arc::clone(&in_flight));
                in_flight[index].fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let outcome = workload.send(route, product, user).await;
                    // Measured from when the request was due, not when it went out.
                    let latency = due.elapsed();
                    // Sent before the count drops, so a window reported as settled has every answer queued.
                    let _ = sender.send((index, outcome, latency));
                    in_flight[index].fetch_sub(1, Ordering::Relaxed);
                });
            }
            _ = housekeeping.tick() => {}
        }
        // Report every window that has ended and whose answers are all in.
        while reported < window_count {
            let window_end = started + window_length * u32::try_from(reported + 1).context("window number")?;
            let now = Instant::now();
            let settled = in_flight[reported].load(Ordering::Relaxed) == 0;
            if now < window_end || (!settled && now < window_end + straggler_grace) {
                break;
            }
            while let Ok((index, outcome, latency)) = receiver.try_recv() {
                windows[index].record(&outcome, latency);
            }
            let window = &windows[reported];
            let rss = args.pid.and_then(rss_kib);
            if reported == 0 {
                first_window_rss = rss;
            }
            last_rss = rss;
            let requests = window.latency.count();
            let latency = window.latency.summary();
            println!(
                "{:>6}  {:>7}  {requests:>8}  {:>5.0}  {:>8}  {:>4}  {:>3}  {:>9}  {:>4}  {:>7.1}  {:>7.1}  {:>7.1}  {:>8}",
                reported + 1,
                window_end.duration_since(started).as_secs(),
                requests as f64 / args.window_secs as f64,
                window.ok,
                window.client_errors,
                window.server_errors,
                window.no_answer,
                window.shed,
                latency.p50,
                latency.p99,
                latency.max,
                rss.map_or_else(|| "-".to_owned(), |kib| format!("{:.1}", kib as f64 / 1024.0)),
            );
            if let Some(out) = windows_json.as_mut() {
                use std::io::Write as _;
                let line = json!({
                    "window": reported + 1,
                    "end_secs": window_end.duration_since(started).as_secs(),
                    "requests": requests,
                    "ok": window.ok,
                    "client_errors": window.client_errors,
                    "too_many_requests": window.too_many,
                    "server_errors": window.server_errors,
                    "no_answer": window.no_answer,
                    "shed": window.shed,
                    "p50_ms": latency.p50,
                    "p99_ms": latency.p99,
                    "max_ms": latency.max,
                    "rss_kib": rss,
                });
                writeln!(out, "{line}").and_then(|()| out.flush()).context("writing the windows JSON")?;
            }
            totals.latency.merge(&window.latency)?;
            totals.ok += window.ok;
            totals.client_errors += window.client_errors;
            totals.too_many += window.too_many;
            totals.server_errors += window.server_errors;
            totals.no_answer += window.no_answer;
            totals.shed += window.shed;
            reported += 1;
        }
    }

    let elapsed = started.elapsed().as_secs_f64();
    let answered = totals.latency.count();
    let latency = totals.latency.summary();
    println!(
        "total: {answered} answered of {sent} due in {elapsed:.0} s ({:.0} req/s held, target {rate:.0}); 2xx/3xx {}, 4xx {} \
         (429 {}), 5xx {}, no answer {}, shed {}; p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms",
        answered as f64 / elapsed,
        totals.ok,
        totals.client_errors,
        totals.too_many,
        totals.server_errors,
        totals.no_answer,
        totals.shed,
        latency.p50,
        latency.p99,
        latency.p999,
        latency.max,
    );
    let mut problems = Vec::new();
    if totals.server_errors > 0 || totals.no_answer > 0 {
        problems.push(format!("{} answers were 5xx and {} never came", totals.server_errors, totals.no_answer));
    }
    if totals.shed > 0 {
        problems.push(format!("{} requests were shed: the rate was not held", totals.shed));
    }
    if let (Some(first), Some(last)) = (first_window_rss, last_rss) {
        let growth = (last as f64 - first as f64) / first as f64;
        println!(
            "rss: {:.1} MiB after the first window, {:.1} MiB at the end ({:+.1} %)",
            first as f64 / 1024.0,
            last as f64 / 1024.0,
            growth * 100.0
        );
        if growth.abs() > args.max_rss_growth {
            problems.push(format!("resident memory changed by {:+.1} %", growth * 100.0));
        }
    } else if args.pid.is_some() {
        problems.push("the service's resident memory could not be read (did it exit?)".to_owned());
    }
    if problems.is_empty() {
        println!("soak passed");
        Ok(())
    } else if args.report_only {
        println!("soak report: {}", problems.join("; "));
        Ok(())
    } else {
        bail!("soak failed: {}", problems.join("; "))
    }
}
