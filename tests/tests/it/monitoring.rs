//! The monitoring of `deploy/monitoring/` against the live services: a real
//! Prometheus (Debian's `prometheus` package) scrapes query-api, ranker-cron
//! and a real Pushgateway that a `ranker run --pushgateway` pushes to, with
//! the repository's recording and alerting rules loaded. Every recording rule
//! and every dashboard expression must evaluate to a series, and every series
//! an alert selects must exist, so a metric or label renamed without its
//! rules fails here. `promtool check metrics` lints each live `/metrics`.
//!
//! The services run in the shapes that make every series exist: a healthy
//! query-api (traffic, cache hits, a corrupt and a lossy row, a refused
//! connection), one strained until it sheds and times out, one over tables
//! that do not exist (500s, HBase call errors), and one whose HBase is
//! unreachable (`/readyz` 503, connect errors).

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::model::Record;
use common::store::Store;
use integration_tests::app::closed_address;
use integration_tests::fixtures::{post_all, Catalogue};
use integration_tests::{cargo_binary, free_port, fresh_store, thrift_addr, wait_for};
use serde_json::Value;

use crate::rows::put_value;

/// A child process, killed when the test ends; its log is kept if the test fails.
struct Spawned {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Spawned {
    fn start(name: &str, program: &Path, args: &[String]) -> Spawned {
        let log = std::env::temp_dir().join(format!("monitoring-{name}-{}.log", std::process::id()));
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(program)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start {} ({error}); scripts/test.sh installs Prometheus, promtool and the \
                     Pushgateway (apt-get install prometheus prometheus-pushgateway)",
                    program.display()
                )
            });
        Spawned { name: name.to_owned(), child, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
        if std::thread::panicking() {
            eprintln!("--- log of {} ({}) ---\n{}", self.name, self.log.display(), self.log_text());
        } else {
            drop(std::fs::remove_file(&self.log));
        }
    }
}

/// The repository's `deploy/monitoring/` folder.
fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring").canonicalize().expect("deploy/monitoring")
}

fn query_api(name: &str, listen: u16, metrics: u16, extra: &[String]) -> Spawned {
    let mut args: Vec<String> =
        ["--listen", &format!("127.0.0.1:{listen}"), "--metrics-listen", &format!("127.0.0.1:{metrics}")]
            .map(str::to_owned)
            .to_vec();
    args.extend_from_slice(extra);
    Spawned::start(name, &cargo_binary("query-api"), &args)
}

fn flags(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs.iter().flat_map(|(flag, value)| [(*flag).to_owned(), (*value).to_owned()]).collect()
}

/// The repository's example scrape configuration (`prometheus.yml` in
/// `dir`), as operators copy it (its job names, `honor_labels`, rule files),
/// with its three jobs' targets replaced by `targets` in their order
/// (query-api, ranker-cron, pushgateway), its intervals cut to 1 s and its
/// rule files at absolute paths.
fn local_scrape_config(dir: &Path, targets: [String; 3]) -> String {
    let shipped = std::fs::read_to_string(dir.join("prometheus.yml")).expect("deploy/monitoring/prometheus.yml");
    let mut targets = targets.into_iter();
    let mut config = String::new();
    for line in shipped.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let line = if line.trim_start().starts_with("- targets: [") {
            format!("{indent}- targets: [{}]", targets.next().expect("more jobs in prometheus.yml than expected"))
        } else if line.trim_start().starts_with("- rules/") {
            line.replacen("rules/", &format!("{}/rules/", dir.display()), 1)
        } else {
            line.replace("interval: 15s", "interval: 1s")
        };
        config.push_str(&line);
        config.push('\n');
    }
    assert!(targets.next().is_none(), "prometheus.yml lost a job");
    config
}

/// Writes the products, ranks nothing yet, and stores one comment whose JSON
/// is truncated and one whose content holds a lone UTF-16 surrogate (as Java
/// writes a cut emoji), both under good index rows.
async fn seed(store: &Store, catalogue: &Catalogue) {
    let comments = post_all(store, catalogue.new_comments(0)).await;
    let tables = store.tables().clone();
    let truncated = &comments[0];
    let mut json = truncated.to_json();
    json.truncate(json.len() / 2);
    put_value(store, &tables.comment, truncated.row_key().as_bytes().to_vec(), json).await;
    let lossy = &comments[1];
    let mut value: Value = serde_json::from_slice(&lossy.to_json()).expect("json");
    value["content"] = Value::String("LONE-SURROGATE a review cut inside an emoji".to_owned());
    let text = value.to_string().replace("LONE-SURROGATE", r"\uD83D");
    put_value(store, &tables.comment, lossy.row_key().as_bytes().to_vec(), text.into_bytes()).await;
}

/// The address of a "gateway" that accepts connections and never answers,
/// as a Thrift gateway stuck in a long pause looks to its clients.
fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for connection in listener.incoming().flatten() {
            held.push(connection);
        }
    });
    address
}

/// Waits until the Prometheus server or Pushgateway at `base` says it is
/// ready: on a loaded machine either takes seconds to open its storage and
/// listen, and a question asked before that is refused.
async fn wait_until_ready(client: &reqwest::Client, base: &str, what: &str) {
    wait_for(Duration::from_secs(60), &format!("{what} to be ready"), async || {
        (status_of(client, &format!("{base}/-/ready")).await == Some(200)).then_some(())
    })
    .await;
}

/// One answer's status, without caring for its body.
async fn status_of(client: &reqwest::Client, url: &str) -> Option<u16> {
    client.get(url).send().await.ok().map(|response| response.status().as_u16())
}

/// Prometheus' answer to an instant query: the result vector, or the error.
async fn instant_query(client: &reqwest::Client, prometheus: &str, expr: &str) -> Result<Vec<Value>, String> {
    let response = client
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let body: Value = response.json().await.map_err(|error| error.to_string())?;
    if body["status"] != "success" {
        return Err(format!("{}: {}", body["errorType"], body["error"]));
    }
    match &body["data"]["result"] {
        Value::Array(series) => Ok(series.clone()),
        // A scalar (e.g. time()) is one value.
        other => Ok(vec![other.clone()]),
    }
}

/// Every rule Prometheus loaded: (rule name, expression, is an alert).
async fn loaded_rules(client: &reqwest::Client, prometheus: &str) -> Vec<(String, String, bool)> {
    let body: Value =
        client.get(format!("{prometheus}/api/v1/rules")).send().await.expect("rules").json().await.expect("rules json");
    let mut found = Vec::new();
    for group in body["data"]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["name"].as_str().expect("name").to_owned();
            let expr = rule["query"].as_str().expect("query").to_owned();
            found.push((name, expr, rule["type"] == "alerting"));
        }
    }
    found
}

/// Every query of the dashboard: (panel title, expression).
fn dashboard_expressions(dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir.join("grafana/reviews.json")).expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard json");
    let mut found = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("?").to_owned();
            found.push((title, target["expr"].as_str().expect("expr").to_owned()));
        }
    }
    found
}

/// The series selectors of an expression: every metric name of ours (raw
/// `reviews_*`, recorded `level:reviews_*:ops` or `reviews:*`) or `up`, with
/// its label matchers. A selector that matches nothing is a misspelt metric,
/// label or value: the alert would silently never fire.
fn selectors(expr: &str) -> Vec<String> {
    let pattern = regex::Regex::new(r"\b((?:[a-z_]+:)?reviews[a-z0-9_:]*|up)\b(\{[^}]*\})?").expect("pattern");
    pattern
        .captures_iter(expr)
        .filter(|captures| &captures[1] != "up" || captures.get(2).is_some())
        .map(|captures| captures[0].to_owned())
        .collect()
}

#[test]
fn selectors_are_found_in_expressions() {
    assert_eq!(
        selectors(r#"sum by (route) (rate(reviews_api_http_requests_total{status=~"5.."}[5m])) / up{job="x"}"#),
        [r#"reviews_api_http_requests_total{status=~"5.."}"#, r#"up{job="x"}"#]
    );
    assert_eq!(
        selectors("instance:reviews_api_ranked_cache_bytes:ratio > 0.9"),
        ["instance:reviews_api_ranked_cache_bytes:ratio"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_alert_and_dashboard_expression_selects_live_series() {
    let dir = monitoring_dir();
    let store = fresh_store("monitoring").await;
    let catalogue = Catalogue { products: 6, comments_per_product: 12, users: 5 };
    seed(&store, &catalogue).await;
    let prefix = store.tables().prefix.clone();
    let hbase = flags(&[("--thrift-addr", &thrift_addr()), ("--table-prefix", &prefix)]);

    // The Pushgateway, and a pushed run of every product.
    let pushgateway_port = free_port();
    let _pushgateway = Spawned::start(
        "pushgateway",
        Path::new("prometheus-pushgateway"),
        &[format!("--web.listen-address=127.0.0.1:{pushgateway_port}")],
    );
    let pushgateway = format!("http://127.0.0.1:{pushgateway_port}");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    wait_until_ready(&client, &pushgateway, "the Pushgateway").await;
    let pushed_run = Command::new(cargo_binary("ranker"))
        .args(["run", "--pushgateway", &pushgateway, "--lease-name", "monitoring-pushed"])
        .args(&hbase)
        .stdin(Stdio::null())
        .output()
        .expect("ranker run");
    assert!(pushed_run.status.success(), "{}", String::from_utf8_lossy(&pushed_run.stderr));

    // ranker-cron ranks once now, then waits for its schedule: an
    // incremental night from the pushed run's watermark, so the gauges of
    // what it found are live too.
    let cron_port = free_port();
    let mut cron_args = hbase.clone();
    cron_args.extend(flags(&[("--metrics-addr", &format!("127.0.0.1:{cron_port}")), ("--holder", "monitoring")]));
    cron_args.extend(["--run-now".to_owned(), "--incremental".to_owned()]);
    let _cron = Spawned::start("ranker-cron", &cargo_binary("ranker-cron"), &cron_args);

    // The four query-api shapes (see the module's docs).
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_port(), free_port())).collect();
    let healthy = [hbase.clone(), flags(&[("--max-connections", "3")])].concat();
    let strained = [
        // Both kinds of gateway: with Thrift1 silent, `auto` reads timeline,
        // through Thrift2, and a Thrift2 that answers lets a read through.
        flags(&[("--thrift-addr", &black_hole()), ("--thrift2-addr", &black_hole()), ("--table-prefix", &prefix)]),
        flags(&[("--pool-size", "1"), ("--hbase-max-queued", "0"), ("--request-timeout-ms", "200")]),
    ]
    .concat();
    let missing_tables = flags(&[("--thrift-addr", &thrift_addr()), ("--table-prefix", "monitoring_absent_")]);
    let unreachable = flags(&[("--thrift-addr", &closed_address()), ("--hbase-retries", "0")]);
    let _apis: Vec<Spawned> = [
        ("api-healthy", healthy),
        ("api-strained", strained),
        ("api-missing", missing_tables),
        ("api-down", unreachable),
    ]
    .into_iter()
    .zip(&ports)
    .map(|((name, extra), (listen, metrics))| query_api(name, *listen, *metrics, &extra))
    .collect();

    // Prometheus, scraping all of it every second with the repository's rules.
    let prometheus_port = free_port();
    let work = tempfile::tempdir().expect("temp dir");
    let api_targets: Vec<String> = ports.iter().map(|(_, metrics)| format!("'127.0.0.1:{metrics}'")).collect();
    let config = local_scrape_config(
        &dir,
        [api_targets.join(", "), format!("'127.0.0.1:{cron_port}'"), format!("'127.0.0.1:{pushgateway_port}'")],
    );
    let config_path = work.path().join("prometheus.yml");
    std::fs::write(&config_path, config).expect("config");
    let check = Command::new("promtool").args(["check", "config"]).arg(&config_path).output().expect("promtool");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let _prometheus = Spawned::start(
        "prometheus",
        Path::new("prometheus"),
        &[
            format!("--config.file={}", config_path.display()),
            format!("--storage.tsdb.path={}", work.path().join("data").display()),
            format!("--web.listen-address=127.0.0.1:{prometheus_port}"),
        ],
    );
    let prometheus = format!("http://127.0.0.1:{prometheus_port}");
    wait_until_ready(&client, &prometheus, "Prometheus").await;

    // Traffic: every route of the healthy instance, twice (cache misses, then
    // hits), the corrupt and lossy rows among them, and bad requests.
    let (healthy_port, strained_port, missing_port, down_port) = (ports[0].0, ports[1].0, ports[2].0, ports[3].0);
    wait_for(Duration::from_secs(60), "every query-api answers /healthz", async || {
        for (listen, _) in &ports {
            status_of(&client, &format!("http://127.0.0.1:{listen}/healthz")).await.filter(|status| *status == 200)?;
        }
        Some(())
    })
    .await;
    let product = catalogue.product(0);
    let user = catalogue.user(0);
    let paths = [
        format!("/v1/products/{product}/comments"),
        format!("/v1/users/{user}/comments"),
        format!("/v1/products/{product}/comments/ranked"),
        format!("/v1/products/{product}/comments/summary"),
        "/v1/products/bad/comments".to_owned(),
        "/readyz".to_owned(),
    ];
    for _ in 0..2 {
        for path in &paths {
            status_of(&client, &format!("http://127.0.0.1:{healthy_port}{path}")).await.expect("answered");
            status_of(&client, &format!("http://127.0.0.1:{missing_port}{path}")).await.expect("answered");
            status_of(&client, &format!("http://127.0.0.1:{down_port}{path}")).await.expect("answered");
        }
    }
    // The strained instance: concurrent reads through one connection to a
    // gateway that never answers, none queued: the one holding the connection
    // times out, the others are refused as overloaded.
    let strained_answers = futures_util::future::join_all((0..40).map(|_| {
        let (client, url) =
            (client.clone(), format!("http://127.0.0.1:{strained_port}/v1/products/{product}/comments"));
        async move { status_of(&client, &url).await }
    }))
    .await;
    assert!(strained_answers.iter().all(|status| *status == Some(503)), "{strained_answers:?}");
    // Three idle connections fill the healthy instance's cap; a fourth is refused.
    let held: Vec<TcpStream> =
        (0..3).map(|_| TcpStream::connect(("127.0.0.1", healthy_port)).expect("connect")).collect();
    wait_for(Duration::from_secs(10), "a connection over the cap is refused", async || {
        let mut extra = TcpStream::connect(("127.0.0.1", healthy_port)).ok()?;
        extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
        let mut answer = String::new();
        extra.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        std::io::Read::read_to_string(&mut extra, &mut answer).ok();
        answer.starts_with("HTTP/1.1 503").then_some(())
    })
    .await;
    drop(held);

    // The daemon's run has succeeded, so its last-success gauge exists.
    wait_for(Duration::from_secs(120), "ranker-cron reports a successful run", async || {
        let metrics =
            client.get(format!("http://127.0.0.1:{cron_port}/metrics")).send().await.ok()?.text().await.ok()?;
        metrics.contains("reviews_ranker_cron_last_success_timestamp_seconds ").then_some(())
    })
    .await;

    // promtool lints every live exposition.
    let mut expositions = vec![format!("http://127.0.0.1:{cron_port}/metrics"), format!("{pushgateway}/metrics")];
    expositions.extend(ports.iter().map(|(_, metrics)| format!("http://127.0.0.1:{metrics}/metrics")));
    for url in &expositions {
        let text = client.get(url).send().await.expect("scrape").text().await.expect("text");
        let mut lint = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool");
        lint.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
        let output = lint.wait_with_output().expect("promtool");
        assert!(
            output.status.success(),
            "promtool check metrics on {url}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // Every recording rule and dashboard query gives a series, every alert's
    // selectors match one, and every alert's expression evaluates.
    let rules = loaded_rules(&client, &prometheus).await;
    let dashboard = dashboard_expressions(&dir);
    let alerts = rules.iter().filter(|(_, _, alert)| *alert).count();
    assert_eq!((alerts, rules.len() - alerts), (16, 16), "Prometheus loaded other rules than deploy/monitoring/rules");
    assert!(dashboard.len() >= 30, "panels lost: {}", dashboard.len());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let missing = missing_series(&client, &prometheus, &rules, &dashboard).await;
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "expressions without live series:\n{}", missing.join("\n"));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What of the rules and the dashboard selects no live series (or fails to evaluate).
async fn missing_series(
    client: &reqwest::Client,
    prometheus: &str,
    rules: &[(String, String, bool)],
    dashboard: &[(String, String)],
) -> Vec<String> {
    let mut missing = Vec::new();
    for (name, expr, alert) in rules {
        match instant_query(client, prometheus, expr).await {
            Err(error) => missing.push(format!("{name}: {expr}: {error}")),
            Ok(series) if series.is_empty() && !alert => missing.push(format!("recording rule {name}: no series")),
            Ok(_) => {}
        }
        if *alert {
            for selector in selectors(expr) {
                if instant_query(client, prometheus, &selector).await.map_or(true, |series| series.is_empty()) {
                    missing.push(format!("alert {name}: {selector} matches no series"));
                }
            }
        }
    }
    for (title, expr) in dashboard {
        if instant_query(client, prometheus, expr).await.map_or(true, |series| series.is_empty()) {
            missing.push(format!("panel {title:?}: {expr}: no series"));
        }
    }
    missing
}
