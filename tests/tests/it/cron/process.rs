//! The real `ranker-cron` process against the real HBase: killed with SIGKILL
//! mid-run, stopped with SIGTERM mid-run, and refusing bad settings; and the
//! exit codes, signals (a second one exits at once) and logs of the other
//! binaries. Every binary is built through Cargo by `integration_tests::cargo_binary`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::keys::CommentKey;
use common::store::lease::{Clock, SystemClock};
use common::store::runs::{RunRecord, RunStatus};
use common::store::Store;
use cron::{Daemon, DaemonSettings, RetryPolicy, Schedule, StartMode};

use super::AnHourLater;
use integration_tests::fixtures::write_ranking;
use integration_tests::{
    cargo_binary, free_port, fresh_store, run_ranker, test_id, thrift_addr, wait_for, FaultyProxy, ProxyMode,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use ranker::lease::LeaseSettings;

const PRODUCTS: u64 = 150;
const COMMENTS_PER_PRODUCT: u64 = 3;
/// The score of the sentinel slot each product starts with, so a test can tell
/// a product's old slots from the ones a run wrote.
const OLD_SCORE: f64 = -1.0;

/// A `ranker-cron` child process, SIGKILLed if the test ends without reaping it.
struct DaemonProcess {
    child: Child,
    log: PathBuf,
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            drop(self.child.kill());
            drop(self.child.wait());
        }
        // Keep the daemon's log only when the test failed, for the post-mortem.
        if !std::thread::panicking() {
            drop(std::fs::remove_file(&self.log));
        }
    }
}

impl DaemonProcess {
    fn start(store: &Store, holder: &str, extra: &[&str]) -> DaemonProcess {
        let log = std::env::temp_dir().join(format!("ranker-cron-{}-{holder}.log", store.tables().prefix));
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(cargo_binary("ranker-cron"))
            .args(["--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix, "--holder", holder])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start ranker-cron");
        DaemonProcess { child, log }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        kill(pid, signal).expect("signal the daemon");
    }

    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "ranker-cron did not exit within {limit:?}:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Writes the products and their comments (the daemon tests' seed), and one
/// sentinel slot per product.
async fn seed(store: &Store) {
    super::seed(store, PRODUCTS, COMMENTS_PER_PRODUCT).await;
    for product in 0..PRODUCTS {
        write_ranking(store, &test_id("p", product), &[(old_slot(product), OLD_SCORE)]).await;
    }
}

fn old_slot(product: u64) -> CommentKey {
    CommentKey::new(&test_id("o", product * 100), &test_id("p", product))
}

async fn wait_for_run(store: &Store, holder: &str, status: RunStatus, limit: Duration) -> RunRecord {
    wait_for(limit, &format!("a {status} run by {holder}"), async || {
        let runs = store.recent_runs(20).await.expect("history");
        runs.into_iter().find(|run| run.holder == holder && run.status == status)
    })
    .await
}

/// Waits until a run has written the first product's new slots: products are
/// ranked in key order, so the run is then under way.
async fn wait_until_under_way(store: &Store) {
    wait_for(Duration::from_secs(30), "the run to reach the first product", async || {
        let slots = store.rank_slots(&test_id("p", 0)).await.expect("slots");
        (!slots.iter().any(|slot| slot.score == Some(OLD_SCORE))).then_some(())
    })
    .await;
}

/// Whether the metrics count one succeeded full run (labels in any order).
fn full_run_counted(metrics: &str) -> bool {
    metrics.lines().any(|line| {
        line.starts_with("reviews_ranker_cron_runs_total{")
            && line.contains("outcome=\"succeeded\"")
            && line.contains("kind=\"full\"")
            && line.ends_with("} 1")
    })
}

/// The value of the metric `name`, one without labels, in a Prometheus text exposition.
fn unlabelled_value(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))?.trim().parse().ok()
}

fn scrape(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lease_lapses_and_the_next_tick_proceeds() {
    let store = fresh_store("cron_sigkill").await;
    seed(&store).await;
    let metrics_port = free_port();
    let port_flag = format!("127.0.0.1:{metrics_port}");
    let mut process = DaemonProcess::start(
        &store,
        "killed-daemon",
        &["--once", "--lease-ttl-secs", "3", "--concurrency", "1", "--metrics-addr", &port_flag],
    );
    let killed_run = wait_for_run(&store, "killed-daemon", RunStatus::Running, Duration::from_secs(30)).await;
    // The daemon records the run as running a moment before it sets the gauge.
    wait_for(Duration::from_secs(10), "the in-progress gauge at 1", async || {
        scrape(metrics_port).contains("reviews_ranker_cron_run_in_progress 1").then_some(())
    })
    .await;

    process.signal(Signal::SIGKILL);
    assert!(process.wait(Duration::from_secs(10)).code().is_none(), "killed by a signal");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder.as_deref(), Some("killed-daemon"), "a killed holder cannot release its lease");
    assert!(lease.expires_ms > SystemClock.now_ms() - 3_000);

    // A second daemon ticking every second waits out the dead holder's lease, then runs.
    let settings = DaemonSettings {
        schedule: Schedule::parse("* * * * * *", "UTC").expect("schedule"),
        lease: LeaseSettings { name: "nightly".to_owned(), ttl: Duration::from_secs(3), holder: "survivor".to_owned() },
        retry: RetryPolicy { attempts: 1, ..RetryPolicy::default() },
        run_options: {
            let mut options = ranker::RunOptions::new(ranker::Scope::All, 0);
            options.concurrency = 4;
            options
        },
        incremental: None,
    };
    let survivor = Daemon::new(store.clone(), settings, Arc::new(SystemClock));
    let serving = tokio::spawn({
        let survivor = survivor.clone();
        async move { survivor.serve(StartMode::Schedule).await }
    });
    let next_run = wait_for_run(&store, "survivor", RunStatus::Succeeded, Duration::from_secs(30)).await;
    survivor.shutdown_token().cancel();
    serving.await.expect("task").expect("serve");

    assert!(next_run.started_ms >= lease.expires_ms, "the next run waited for the lease to lapse");
    assert_eq!(next_run.products, PRODUCTS);
    let closed = store.get_run(killed_run.started_ms, &killed_run.run_id).await.expect("get").expect("record");
    assert_eq!(closed.status, RunStatus::Interrupted, "{closed:?}");
    assert!(closed.error.as_deref().is_some_and(|error| error.contains("stopped renewing")), "{closed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_run_finishes_products_in_flight_records_the_run_interrupted_and_releases_the_lease() {
    let store = fresh_store("cron_sigterm").await;
    seed(&store).await;
    let mut process = DaemonProcess::start(
        &store,
        "stopped-daemon",
        &["--once", "--lease-ttl-secs", "30", "--concurrency", "2", "--no-metrics"],
    );
    wait_for_run(&store, "stopped-daemon", RunStatus::Running, Duration::from_secs(30)).await;
    wait_until_under_way(&store).await;
    process.signal(Signal::SIGTERM);
    let status = process.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(130), "--once exits 130 for an interrupted run:\n{}", process.log_text());

    let runs = store.recent_runs(10).await.expect("history");
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Interrupted, "{run:?}");
    assert!(run.error.as_deref().is_some_and(|error| error.contains("shutdown signal")), "{run:?}");
    assert!(run.products > 0 && run.products < PRODUCTS, "stopped mid-run: {run:?}");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder, None, "the lease was released");
    assert_eq!(lease.completed_slot_ms, None, "an interrupted night is not marked done");

    // Every product holds either its old slot or a complete new ranking: the
    // new ones must equal what a full run at the same as-of time writes.
    let mut after_stop = Vec::new();
    for product in 0..PRODUCTS {
        after_stop.push(store.rank_slots(&test_id("p", product)).await.expect("slots"));
    }
    let mut options = ranker::RunOptions::new(ranker::Scope::All, run.as_of_ms);
    options.concurrency = 4;
    let report = ranker::run(&store, &options, tokio_util::sync::CancellationToken::new()).await.expect("full run");
    assert_eq!(report.products_ranked, PRODUCTS);
    let mut new_products = 0;
    for (product, slots) in (0..PRODUCTS).zip(&after_stop) {
        let old = slots.len() == 1 && slots[0].comment == old_slot(product) && slots[0].score == Some(OLD_SCORE);
        if old {
            continue;
        }
        new_products += 1;
        let expected = store.rank_slots(&test_id("p", product)).await.expect("slots");
        assert_eq!(slots, &expected, "product {product} holds a mix of old and new slots");
    }
    assert_eq!(new_products, run.products, "the record counts exactly the products that got new slots");
}

#[test]
fn bad_schedules_and_zones_are_refused_at_start_with_a_clear_error() {
    for (flag, value, message) in [
        ("--schedule", "61 * * * * *", "invalid cron expression \"61 * * * * *\""),
        ("--time-zone", "Mars/Olympus", "unknown time zone \"Mars/Olympus\""),
    ] {
        let output = Command::new(cargo_binary("ranker-cron"))
            .args([flag, value, "--no-metrics"])
            .output()
            .expect("run ranker-cron");
        assert_eq!(output.status.code(), Some(2), "a bad setting is a usage error");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_runs_at_once_then_keeps_the_schedule_and_serves_the_metrics_an_operator_alerts_on() {
    let store = fresh_store("cron_run_now").await;
    seed(&store).await;
    let metrics_port = free_port();
    let port_flag = format!("127.0.0.1:{metrics_port}");
    // The default schedule (03:00 in Seoul) is hours away: only --run-now can explain a run now.
    let mut process = DaemonProcess::start(
        &store,
        "run-now-daemon",
        &["--run-now", "--concurrency", "4", "--metrics-addr", &port_flag],
    );
    let run = wait_for_run(&store, "run-now-daemon", RunStatus::Succeeded, Duration::from_secs(60)).await;
    assert_eq!(run.products, PRODUCTS);

    // The record is written before the metrics; give the daemon a moment to count the run.
    let metrics = wait_for(Duration::from_secs(10), "one succeeded full run counted", async || {
        Some(scrape(metrics_port)).filter(|metrics| full_run_counted(metrics))
    })
    .await;
    assert!(metrics.contains(&format!("reviews_ranker_products_total{{result=\"ranked\"}} {PRODUCTS}")), "{metrics}");
    assert!(metrics.contains("reviews_ranker_cron_run_in_progress 0"), "{metrics}");
    assert_described_and_namespaced(&metrics);
    let last_success = unlabelled_value(&metrics, "reviews_ranker_cron_last_success_timestamp_seconds")
        .unwrap_or_else(|| panic!("no last-success gauge:\n{metrics}"));
    let ended_ms = run.ended_ms.expect("a finished run has an end");
    assert!((last_success - ended_ms as f64 / 1_000.0).abs() < 1.0, "{last_success} vs {ended_ms}");

    // After the run the daemon keeps its schedule: still running, and a manual
    // --once beside it on the same metrics port runs without metrics instead of failing.
    assert!(process.child.try_wait().expect("poll").is_none(), "the daemon exited:\n{}", process.log_text());
    // The daemon counts the run before it releases the lease; a manual run
    // started in between would find the lease held and exit 75.
    wait_for(Duration::from_secs(30), "the run-now daemon released the lease", async || {
        store.lease("nightly").await.ok().flatten().filter(|lease| lease.holder.is_none())
    })
    .await;
    let mut manual = DaemonProcess::start(&store, "manual-once", &["--once", "--metrics-addr", &port_flag]);
    let status = manual.wait(Duration::from_secs(60));
    // The night's slot differs from the run-now slot, so the manual run ranks again and succeeds.
    assert_eq!(status.code(), Some(0), "{}", manual.log_text());
    assert!(manual.log_text().contains("running once without them"), "{}", manual.log_text());

    process.signal(Signal::SIGTERM);
    assert_eq!(process.wait(Duration::from_secs(30)).code(), Some(0), "{}", process.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_another_run_holds_the_lease_full_runs_exit_75_naming_it_and_reruns_of_one_product_go_ahead() {
    let store = fresh_store("cron_lease_exit_codes").await;
    seed(&store).await;
    // Another daemon, mid-run: it holds the nightly lease for a slot of its own.
    let holder = "other-host:4242:nightly";
    let request = common::store::lease::LeaseRequest {
        name: "nightly".to_owned(),
        holder: holder.to_owned(),
        slot_ms: SystemClock.now_ms() - 60_000,
        ttl: Duration::from_secs(600),
    };
    let common::store::lease::TakeOutcome::Taken { lease: held, .. } =
        store.take_lease(&request, &SystemClock).await.expect("take the lease")
    else {
        panic!("a fresh table's lease is free");
    };

    let mut once = DaemonProcess::start(&store, "second-daemon", &["--once", "--no-metrics"]);
    let status = once.wait(Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(75),
        "--once while another holds the night is told to try later:\n{}",
        once.log_text()
    );
    assert!(!once.log_text().contains('\u{1b}'), "a log file carries no ANSI escape codes:\n{}", once.log_text());

    let full = run_ranker(&store, &["run"]);
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains(holder), "the refusal names the holder: {stderr}");
    let shard = run_ranker(&store, &["run", "--shard", "0/2"]);
    assert_eq!(shard.status.code(), Some(75), "{}", String::from_utf8_lossy(&shard.stderr));
    assert_eq!(stored_products(&store).await, 0, "a refused run wrote nothing");

    let product = test_id("p", 7);
    let one = run_ranker(&store, &["run", "--product", &product.to_string()]);
    assert_eq!(one.status.code(), Some(0), "{}", String::from_utf8_lossy(&one.stderr));
    assert_eq!(stored_products(&store).await, 1, "a rerun of one product needs no lease");

    let forced = run_ranker(&store, &["run", "--ignore-lease"]);
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert_eq!(forced.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("WARN") && stderr.contains("--ignore-lease"), "the override is logged at warn: {stderr}");
    assert_eq!(stored_products(&store).await, PRODUCTS, "--ignore-lease ranks every product");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder.as_deref(), Some(holder), "--ignore-lease leaves the holder's lease alone");

    // Once the holder releases, a full run takes the lease, ranks, and frees it again.
    store.release_lease(held, false, &SystemClock).await.expect("release");
    let full = run_ranker(&store, &["run"]);
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("took the lease"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "a log written to a pipe carries no ANSI escape codes: {stderr}");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder, None, "the manual run released the lease");
    assert_eq!(lease.completed_slot_ms, None, "a manual run marks no nightly slot done");
}

/// Products whose slots a run wrote (the seed's sentinel slots do not count).
async fn stored_products(store: &Store) -> u64 {
    let mut products = 0;
    for product in 0..PRODUCTS {
        let slots = store.rank_slots(&test_id("p", product)).await.expect("slots");
        if slots.iter().any(|slot| slot.comment != old_slot(product)) {
            products += 1;
        }
    }
    products
}

#[test]
fn usage_errors_exit_2_in_every_binary() {
    let config = std::env::temp_dir().join(format!("usage-errors-{}.toml", std::process::id()));
    std::fs::write(&config, "[run]\npage_rows = 100000\n").expect("write a config");
    let config = config.to_str().expect("utf-8 path");
    let cases: [(&str, &[&str], &str); 8] = [
        ("ranker", &["run", "--concurrency", "many"], "invalid value"),
        ("ranker", &["run", "--page-rows", "5001"], "5001 is not in 1..=5000"),
        ("ranker", &["run", "--config", config], "run.page_rows must be from 1 to 5000, got 100000"),
        ("ranker", &["run", "--lease-ttl-secs", "1"], "invalid value"),
        ("ranker", &["no-such-command"], "unrecognized subcommand"),
        ("query-api", &["--listen", "not-an-address"], "invalid value"),
        ("query-api", &["--table-prefix=bad/prefix"], "invalid --table-prefix"),
        // A billion users and products would need some 53 GB up front: refused before allocating.
        (
            "reviews-admin",
            &["demo", "load", "--users", "999999999", "--products", "999999999"],
            "available on this machine",
        ),
    ];
    for (binary, args, message) in cases {
        // Built (when stale) before the clock starts: the bound is the binary's, not cargo's.
        let binary_path = cargo_binary(binary);
        let started = Instant::now();
        let output = Command::new(binary_path)
            .args(args)
            .args(["--thrift-addr", "127.0.0.1:1"])
            .output()
            .expect("run the binary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{binary} {args:?}: {stderr}");
        assert!(stderr.contains(message), "{binary} {args:?}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10), "{binary} {args:?} took {:?}", started.elapsed());
    }
    drop(std::fs::remove_file(config));
}

/// Checks a Prometheus page: every metric has HELP text and a TYPE, and every
/// series is in the `reviews_` namespace; histograms render as buckets.
fn assert_described_and_namespaced(page: &str) {
    let body = page.split_once("\r\n\r\n").map_or(page, |(_, body)| body);
    let mut typed = Vec::new();
    for line in body.lines().filter(|line| !line.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().expect("a name");
            assert!(body.contains(&format!("# HELP {name} ")), "{name} has no HELP text:\n{body}");
            typed.push(name.to_owned());
        } else if !line.starts_with('#') {
            assert!(line.starts_with("reviews_"), "a series outside the reviews_ namespace: {line}");
        }
    }
    assert!(!typed.is_empty(), "no metrics at all:\n{body}");
    if body.contains("reviews_hbase_call_seconds") {
        assert!(body.contains("# TYPE reviews_hbase_call_seconds histogram"), "{body}");
        assert!(body.contains("reviews_hbase_call_seconds_bucket{"), "{body}");
    }
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_api_serves_metrics_on_its_own_listener_and_logs_without_colour_to_a_file() {
    let store = fresh_store("qapi_metrics_listen").await;
    let (port, metrics_port) = (free_port(), free_port());
    let log = std::env::temp_dir().join(format!("{}query-api.log", store.tables().prefix));
    let mut child = Command::new(cargo_binary("query-api"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(["--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start query-api");
    wait_for(Duration::from_secs(30), "query-api to listen", async || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(drop)
    })
    .await;
    let ranked = http_get(port, &format!("/v1/products/{}/comments/ranked", test_id("p", 1)));
    assert!(ranked.starts_with("HTTP/1.0 200") || ranked.starts_with("HTTP/1.1 200"), "{ranked}");
    let on_main = http_get(port, "/metrics");
    assert!(on_main.contains(" 404 "), "the main listener no longer serves /metrics: {on_main}");
    let metrics = http_get(metrics_port, "/metrics");
    assert!(metrics.contains(" 200 "), "{metrics}");
    assert!(metrics.contains("reviews_api_http_requests_total{"), "{metrics}");
    assert!(metrics.contains("reviews_hbase_call_seconds_bucket{"), "a real HBase call was timed:\n{metrics}");
    assert_described_and_namespaced(&metrics);

    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a drained stop is a success");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("request") && text.contains("/v1/products/{productId}/comments/ranked"),
        "one access line per request at debug:\n{text}"
    );
    assert!(!text.contains('\u{1b}'), "a log written to a file carries no ANSI escape codes:\n{text}");
    drop(std::fs::remove_file(log));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ranker_exits_130_when_interrupted_and_1_when_it_fails() {
    let store = fresh_store("ranker_exit_codes").await;
    seed(&store).await;
    let mut child = Command::new(cargo_binary("ranker"))
        .args(["run", "--concurrency", "1", "--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the ranker");
    wait_until_under_way(&store).await;
    kill(Pid::from_raw(i32::try_from(child.id()).expect("pid")), Signal::SIGINT).expect("SIGINT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "an interrupted run exits 130");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder, None, "the interrupted run released the lease");

    // Nothing listens on port 1: the product cannot be read, and the run fails.
    let failed = Command::new(cargo_binary("ranker"))
        .args(["explain", "--product", &test_id("p", 0).to_string(), "--thrift-addr", "127.0.0.1:1"])
        .args(["--hbase-timeout-ms", "500", "--hbase-retries", "0"])
        .output()
        .expect("run the ranker");
    assert_eq!(failed.status.code(), Some(1), "{}", String::from_utf8_lossy(&failed.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_without_waiting_for_the_products_in_flight() {
    let store = fresh_store("ranker_second_signal").await;
    seed(&store).await;
    // The ranker reaches HBase through a proxy the test can silence, so the
    // product in flight at the first signal cannot finish soon.
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    let log = std::env::temp_dir().join(format!("{}ranker.log", store.tables().prefix));
    let mut child = Command::new(cargo_binary("ranker"))
        .args(["run", "--concurrency", "1", "--thrift-addr", &proxy.address()])
        .args(["--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start the ranker");
    wait_until_under_way(&store).await;
    proxy.set_mode(ProxyMode::BlackHole);
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    kill(pid, Signal::SIGINT).expect("first SIGINT");
    // The first signal asks for a graceful stop, which now waits on a silent gateway.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(child.try_wait().expect("poll").is_none(), "the graceful stop could not have finished yet");
    let signalled = Instant::now();
    kill(pid, Signal::SIGINT).expect("second SIGINT");
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll") {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(10), "the second signal did not end the ranker");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(signalled.elapsed() < Duration::from_secs(5), "exited {:?} after the second signal", signalled.elapsed());
    assert!(text.contains("stopping: finishing the products in flight"), "{text}");
    assert!(text.contains("second signal: exiting now"), "{text}");
    drop(std::fs::remove_file(log));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reruns_and_dry_runs_leave_no_run_record_and_a_failing_product_exits_1() {
    let store = fresh_store("ranker_unrecorded").await;
    seed(&store).await;
    let product = test_id("p", 3).to_string();
    let rerun = run_ranker(&store, &["run", "--product", &product]);
    assert_eq!(rerun.status.code(), Some(0), "{}", String::from_utf8_lossy(&rerun.stderr));
    let dry = run_ranker(&store, &["run", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", String::from_utf8_lossy(&dry.stderr));
    assert_eq!(store.recent_runs(10).await.expect("history"), Vec::new(), "neither is in the run history");

    // Tables that do not exist: the product fails its one attempt.
    let failing = Command::new(cargo_binary("ranker"))
        .args(["run", "--product", &product, "--attempts", "1", "--json"])
        .args(["--thrift-addr", &thrift_addr(), "--table-prefix", "ranker_unrecorded_missing_"])
        .stdin(Stdio::null())
        .output()
        .expect("run the ranker");
    assert_eq!(failing.status.code(), Some(1), "{}", String::from_utf8_lossy(&failing.stderr));
    let report: serde_json::Value = serde_json::from_slice(&failing.stdout).expect("the JSON report");
    assert_eq!(report["failures"][0]["product"], product.as_str(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_is_taken_over_stops_and_exits_1() {
    let store = fresh_store("ranker_lease_lost").await;
    seed(&store).await;
    // Slow enough (450 comments at 50/s) to be mid-run when the lease goes.
    let child = Command::new(cargo_binary("ranker"))
        .args(["run", "--concurrency", "1", "--max-rate", "50", "--lease-ttl-secs", "3", "--json"])
        .args(["--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the ranker");
    wait_until_under_way(&store).await;
    let usurper = common::store::lease::LeaseRequest {
        name: "nightly".to_owned(),
        holder: "usurper".to_owned(),
        slot_ms: SystemClock.now_ms(),
        ttl: Duration::from_secs(600),
    };
    let taken = store.take_lease(&usurper, &AnHourLater).await.expect("take over the lease");
    assert!(matches!(taken, common::store::lease::TakeOutcome::Taken { .. }), "{taken:?}");

    let output = tokio::task::spawn_blocking(move || child.wait_with_output()).await.expect("join").expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the run stopped because"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the JSON report");
    assert_eq!(report["interrupted"], true, "the run stopped early: {report}");
    assert!(report["products_ranked"].as_u64().expect("count") < PRODUCTS, "{report}");
    let lease = store.lease("nightly").await.expect("read").expect("row");
    assert_eq!(lease.holder.as_deref(), Some("usurper"), "the stopped run left the new holder's lease alone");
    // The history says the run lost its lease, not that a signal stopped it.
    let runs = store.recent_runs(10).await.expect("read the run history");
    let [record] = &runs[..] else { panic!("one recorded run: {runs:?}") };
    assert_eq!(record.status, RunStatus::Lost, "{record:?}");
    let error = record.error.as_deref().unwrap_or_default();
    assert!(error.contains("taken over") && error.contains("usurper"), "{record:?}");
    assert!(record.ended_ms.is_some(), "{record:?}");
}

/// query-api's `reviews_api_connections_open` (its main listener's
/// connections; the metrics listener's are not counted), scraped from `metrics_port`.
fn connections_open(metrics_port: u16) -> Option<f64> {
    unlabelled_value(&scrape(metrics_port), "reviews_api_connections_open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_api_answers_the_requests_in_flight_on_sigterm_then_exits_0() {
    let store = fresh_store("qapi_sigterm_drain").await;
    seed(&store).await;
    // The service reaches HBase through a proxy the test can slow down.
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    let (port, metrics_port) = (free_port(), free_port());
    let mut child = Command::new(cargo_binary("query-api"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(["--thrift-addr", &proxy.address(), "--table-prefix", &store.tables().prefix])
        .args(["--request-timeout-ms", "20000", "--hbase-timeout-ms", "20000", "--ranked-cache-ttl-ms", "0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start query-api");
    // No idle connections kept: the only connection open once the service
    // answers is then the request in flight below.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    let url = format!("http://127.0.0.1:{port}/v1/products/{}/comments", test_id("p", 1));
    wait_for(Duration::from_secs(30), "query-api answering", async || {
        client.get(&url).send().await.ok().filter(|answer| answer.status() == 200).map(drop)
    })
    .await;

    // The readiness checks' connections are closed (none is kept idle), so
    // the next connection the service counts is the request's.
    wait_for(Duration::from_secs(10), "no connection open", async || {
        (connections_open(metrics_port)? == 0.0).then_some(())
    })
    .await;

    // Every chunk of an HBase answer now waits 400 ms: a page read (a dozen
    // chunks) is in flight for about five seconds, within the 10 s drain.
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(400)));
    let in_flight = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { client.get(&url).send().await.map(|answer| answer.status()) }
    });
    wait_for(Duration::from_secs(10), "the request's connection to be open", async || {
        (connections_open(metrics_port)? == 1.0).then_some(())
    })
    .await;
    // Inside the first 400 ms an answer waits, so the request has been read.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!in_flight.is_finished(), "the request is still in flight");
    kill(Pid::from_raw(i32::try_from(child.id()).expect("pid")), Signal::SIGTERM).expect("SIGTERM");
    let status = in_flight.await.expect("join").expect("the request in flight is answered");
    assert_eq!(status, 200, "the request in flight got its answer");
    let exited = tokio::task::spawn_blocking(move || child.wait()).await.expect("join").expect("wait");
    assert_eq!(exited.code(), Some(0), "a drained stop is a success");
}
