//! Batch and online traffic sharing one HBase (issue 9), and abandoned work
//! under an outage (issue 11, item 2), through a [`FaultyProxy`] in front of
//! the shared gateway that the tests slow down or silence while they run:
//!
//! - a paced ranking run keeps one HBase call in flight whatever its product
//!   concurrency, also while the gateway is slow and while an incremental run
//!   searches for what changed (an unpaced one does not);
//! - query-api refuses instead of queueing: a request waits at most the queue
//!   timeout for an HBase connection, a waiter beyond the bound is refused at
//!   once, and a ranked read in the cache is served while every connection is busy;
//! - during an outage the operations in flight never exceed the pool, and right
//!   after the gateway returns the service answers at once, with no backlog of
//!   abandoned work to drain;
//! - one client cannot take the service from the others (issue 44): while
//!   HBase calls queue, a client asking more than its fair share is refused
//!   with 429 and another client is served; a forwarding header counts only from a trusted
//!   proxy; an API key is a client of its own, and an exempt one is never
//!   refused; a refusal costs HBase nothing; the probes and `/metrics` are
//!   never limited, and a browser can read a refusal and its `Retry-After`.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hbase::{GatewayList, Hbase, HbaseConfig};
use common::store::Store;
use integration_tests::{fresh_store, thrift2_addr, thrift_addr, wait_for, FaultyProxy, ProxyMode};
use query_api::clients::ClientPolicy;
use query_api::Settings;
use ranker::{Incremental, PaceMode, PacingSettings, RunOptions, RunProgress, Scope};
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use integration_tests::app::{Answer, TestApp};
use integration_tests::fixtures::{post_all, Catalogue, AS_OF_MS};

/// A store over `tables_of`'s tables, reached through `proxy`.
fn store_through(proxy: &FaultyProxy, tables_of: &Store, config: HbaseConfig) -> (Store, Hbase) {
    // The Thrift2 gateway directly: summaries read their newer reviews through it.
    let hbase = Hbase::new(HbaseConfig {
        thrift1_gateways: GatewayList::single(proxy.address()),
        thrift2_gateways: GatewayList::single(thrift2_addr()),
        ..config
    });
    (Store::new(hbase.clone(), tables_of.tables().clone()), hbase)
}

/// The output of `work` and the most operations `hbase` had in flight at
/// once while it ran (sampled every millisecond).
async fn peak_in_flight<T>(hbase: &Hbase, work: impl Future<Output = T>) -> (T, usize) {
    let hbase = hbase.clone();
    peak_while(move || hbase.in_flight(), work).await
}

/// The output of `work` and the most operations `hbase` had waiting for a
/// connection at once while it ran (sampled every millisecond).
async fn peak_queued<T>(hbase: &Hbase, work: impl Future<Output = T>) -> (T, usize) {
    let hbase = hbase.clone();
    peak_while(move || hbase.queued(), work).await
}

/// The output of `work` and the largest value `sample` gave while it ran
/// (sampled every millisecond).
async fn peak_while<T>(sample: impl Fn() -> usize + Send + 'static, work: impl Future<Output = T>) -> (T, usize) {
    let peak = Arc::new(AtomicUsize::new(0));
    let sampler = tokio::spawn({
        let peak = peak.clone();
        async move {
            loop {
                peak.fetch_max(sample(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    let output = work.await;
    sampler.abort();
    (output, peak.load(Ordering::Relaxed))
}

/// Run options of these tests: product concurrency 8, pages of 25 rows,
/// paced by `mode`.
fn options(mode: PaceMode) -> RunOptions {
    let mut options = RunOptions::new(Scope::All, AS_OF_MS);
    options.concurrency = 8;
    options.page_rows = 25;
    options.pacing = PacingSettings { mode, page_rows: 25, ..PacingSettings::default() };
    options
}

/// Ranks `tables` through `proxy` paced by `mode`, while the gateway is slow
/// (every answer 20 ms late) from the 10th product finished to the 20th: the
/// report, and the most HBase operations in flight at once.
async fn run_through_a_slow_phase(proxy: &FaultyProxy, tables: &Store, mode: PaceMode) -> (ranker::RunReport, usize) {
    let (store, hbase) = store_through(proxy, tables, integration_tests::hbase_config(&proxy.address()));
    let progress = Arc::new(RunProgress::default());
    let options = RunOptions { progress: Some(progress.clone()), ..options(mode) };
    let run = tokio::spawn(async move { ranker::run(&store, &options, CancellationToken::new()).await });
    let switch_the_proxy = async {
        for (products, mode) in [(10, ProxyMode::Delay(Duration::from_millis(20))), (20, ProxyMode::Pass)] {
            let what = format!("{products} products ranked");
            wait_for(Duration::from_secs(60), &what, async || {
                (progress.snapshot().products_done >= products).then_some(())
            })
            .await;
            proxy.set_mode(mode);
        }
        run.await.expect("run task").expect("the run")
    };
    peak_in_flight(&hbase, switch_the_proxy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paced_run_keeps_one_call_in_flight_through_a_slow_gateway() {
    let catalogue = Catalogue { products: 40, comments_per_product: 100, users: 200 };
    let tables = fresh_store("paced_run_one_call").await;
    post_all(&tables, catalogue.new_comments(0)).await;
    let proxy = FaultyProxy::start(&thrift_addr()).await;

    let (paced, paced_peak) = run_through_a_slow_phase(&proxy, &tables, PaceMode::On).await;
    let (unpaced, unpaced_peak) = run_through_a_slow_phase(&proxy, &tables, PaceMode::Off).await;

    for report in [&paced, &unpaced] {
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(report.products_ranked, catalogue.products);
    }
    assert_eq!(paced.pacing.max_in_flight, Some(1));
    // Every call of the run, its product listing's too, takes its turn.
    assert_eq!(paced_peak, 1, "a paced run had {paced_peak} operations in flight at once");
    // The sampling sees overlapping calls when there are some: unpaced, the
    // eight products' calls overlap while every answer is late.
    assert!(unpaced_peak > 2, "an unpaced run had only {unpaced_peak} operations in flight at once");
}

/// An incremental run over `tables` paced by `mode`, of everything written
/// since the epoch (so its two time-range scans read every row, side by side
/// when nothing holds them back): the report, and the most HBase operations
/// in flight at once, the Thrift2 pool's included.
async fn search_and_rank_everything(tables: &Store, mode: PaceMode) -> (ranker::RunReport, usize) {
    let hbase = Hbase::new(integration_tests::hbase_config(&thrift_addr()));
    let store = Store::new(hbase.clone(), tables.tables().clone());
    let everything = Incremental { since_ms: 0, refresh_days: None, refreshed_until_ms: None, check_all_slots: true };
    let options = RunOptions { incremental: Some(everything), ..options(mode) };
    let (report, peak) = peak_in_flight(&hbase, ranker::run(&store, &options, CancellationToken::new())).await;
    (report.expect("the incremental run"), peak)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paced_incremental_run_keeps_one_call_in_flight_while_it_searches() {
    let catalogue = Catalogue { products: 40, comments_per_product: 100, users: 200 };
    let tables = fresh_store("paced_search_one_call").await;
    post_all(&tables, catalogue.new_comments(0)).await;
    // Slots, for the search's slot walk to list and check.
    ranker::run(&tables, &options(PaceMode::Off), CancellationToken::new()).await.expect("the full run");

    let (paced, paced_peak) = search_and_rank_everything(&tables, PaceMode::On).await;
    let (unpaced, unpaced_peak) = search_and_rank_everything(&tables, PaceMode::Off).await;

    for report in [paced, unpaced] {
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        let changes = report.changes.expect("an incremental run reports its search");
        assert_eq!((changes.products_to_rank, changes.slots_checked), (catalogue.products, catalogue.products * 10));
    }
    // The scans, the slot listing and the existence checks take turns too.
    assert_eq!(paced_peak, 1, "a paced incremental run had {paced_peak} operations in flight at once");
    assert!(unpaced_peak >= 2, "an unpaced incremental run had only {unpaced_peak} operations in flight at once");
}

/// Starts GETs of `path` that hold HBase connections while the proxy is silent.
fn hold(service: &TestApp, path: &str, count: usize) -> tokio::task::JoinSet<()> {
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (client, url) = (service.client.clone(), format!("{}{path}", service.base));
        held.spawn(async move {
            let _ = client.get(url).send().await;
        });
    }
    held
}

/// Waits until `condition` holds, for at most five seconds.
async fn until(what: &str, condition: impl Fn() -> bool) {
    wait_for(Duration::from_secs(5), what, async || condition().then_some(())).await;
}

/// The pool of the overload tests: two connections, a queue of two waiting
/// at most `queue_timeout`, patient deadlines so only the queue bound decides.
fn small_pool(queue_timeout: Duration) -> HbaseConfig {
    HbaseConfig {
        pool_size: 2,
        operation_timeout: Duration::from_secs(8),
        io_timeout: Duration::from_secs(8),
        retries: 0,
        queue_timeout: Some(queue_timeout),
        max_queued: Some(2),
        ..HbaseConfig::default()
    }
}

fn patient_settings() -> Settings {
    Settings { request_timeout: Duration::from_secs(10), ..Settings::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn query_api_refuses_instead_of_queueing_when_every_connection_is_busy() {
    let tables = fresh_store("api_refuses_when_busy").await;
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    let queue_timeout = Duration::from_millis(1_000);
    let (store, hbase) = store_through(&proxy, &tables, small_pool(queue_timeout));
    // Every request here is one client's: this is the queue's own bound, not
    // the fair shedding in front of it (which would refuse that client sooner).
    let settings =
        Settings { clients: ClientPolicy { fair_shedding: false, ..ClientPolicy::default() }, ..patient_settings() };
    let service = TestApp::spawn(store, settings).await;
    let product = integration_tests::test_id("P", 1);

    // The gateway goes silent; two requests take both connections and hang.
    proxy.set_mode(ProxyMode::BlackHole);
    let _held = hold(&service, &format!("/v1/products/{product}/comments"), 2);
    until("both connections are busy", || hbase.in_flight() == 2).await;

    // Two more wait for a connection (the queue's bound)...
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (client, url) = (service.client.clone(), format!("{}/v1/products/{product}/comments", service.base));
            tokio::spawn(async move {
                let asked = Instant::now();
                let response = client.get(url).send().await.expect("GET");
                (response.status(), response.headers().contains_key(reqwest::header::RETRY_AFTER), asked.elapsed())
            })
        })
        .collect();
    until("two requests wait for a connection", || hbase.queued() == 2).await;

    // ...so the next one is refused at once, without waiting the queue
    // timeout: the two that queued before it are still waiting when its
    // answer comes (had it waited, they would have given up first).
    let refused = service.get(&format!("/v1/users/{product}/comments")).await;
    refused.assert_error(StatusCode::SERVICE_UNAVAILABLE, "overloaded");
    assert_eq!(
        refused.headers.get(reqwest::header::RETRY_AFTER).map(|value| value.to_str().unwrap_or_default()),
        Some("1")
    );
    assert_eq!(hbase.queued(), 2, "refused at once, while the earlier two still waited");

    // The waiters give up after the queue timeout, not the 8-s operation deadline.
    for waiter in waiting {
        let (status, has_retry_after, took) = waiter.await.expect("waiter");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(has_retry_after);
        assert!(took >= queue_timeout && took < queue_timeout * 2, "waited {took:?} for a {queue_timeout:?} queue");
    }
    proxy.set_mode(ProxyMode::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cached_ranking_is_served_while_every_connection_is_busy() {
    let tables = fresh_store("cached_ranking_while_busy").await;
    let catalogue = Catalogue { products: 1, comments_per_product: 30, users: 30 };
    post_all(&tables, catalogue.new_comments(0)).await;
    let ranked =
        ranker::run(&tables, &RunOptions::new(Scope::All, AS_OF_MS), CancellationToken::new()).await.expect("ranking");
    assert_eq!(ranked.products_ranked, 1);
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    let (store, hbase) = store_through(&proxy, &tables, small_pool(Duration::from_millis(200)));
    let service = TestApp::spawn(store, patient_settings()).await;
    let path = format!("/v1/products/{}/comments/ranked", catalogue.product(0));
    let fresh = service.get(&path).await;
    assert_eq!(fresh.status, StatusCode::OK, "{}", fresh.raw);

    proxy.set_mode(ProxyMode::BlackHole);
    let _held = hold(&service, &format!("/v1/products/{}/comments", catalogue.product(0)), 2);
    until("both connections are busy", || hbase.in_flight() == 2).await;
    // Answered while both connections hang for good and the queue would
    // refuse a waiter after 200 ms: a cache hit waits for no connection.
    let cached = service.get(&path).await;
    assert_eq!(cached.status, StatusCode::OK, "{}", cached.raw);
    assert_eq!(cached.body, fresh.body);
    assert_eq!(hbase.in_flight(), 2, "the held reads still hold both connections");
    // An uncached read, by contrast, cannot be answered now.
    service
        .get(&format!("/v1/products/{}/comments/ranked", catalogue.product(7)))
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "overloaded");
    proxy.set_mode(ProxyMode::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outage_leaves_no_backlog_of_abandoned_work() {
    let tables = fresh_store("outage_leaves_no_backlog").await;
    let catalogue = Catalogue { products: 1, comments_per_product: 5, users: 5 };
    post_all(&tables, catalogue.new_comments(0)).await;
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    // The service's own settings (a 1.5-s HBase deadline inside a 2-s request
    // deadline, one retry), with a queue patient enough that requests do wait
    // for connections: what matters here is what becomes of the work of
    // requests that have given up. Every request is one client's, so the fair
    // shedding (which would refuse it its backlog) is off.
    // And no last good copy is kept, so every request below needs HBase.
    let settings = Settings {
        clients: ClientPolicy { fair_shedding: false, ..ClientPolicy::default() },
        stale_if_error: Duration::ZERO,
        ..Settings::default()
    };
    let operation_timeout = Duration::from_millis(1_500);
    let config = query_api::config::service_hbase_config(
        HbaseConfig {
            pool_size: 4,
            operation_timeout,
            retries: 1,
            queue_timeout: Some(Duration::from_secs(2)),
            max_queued: Some(1_000),
            ..HbaseConfig::default()
        },
        settings.request_timeout,
    );
    let (store, hbase) = store_through(&proxy, &tables, config);
    let service = TestApp::spawn(store, settings.clone()).await;
    let path = format!("/v1/users/{}/comments", catalogue.user(0));
    assert_eq!(service.get(&path).await.status, StatusCode::OK);

    // A silent gateway, under 20 requests per second for three seconds: more
    // than four connections can serve, so requests queue for one.
    proxy.set_mode(ProxyMode::BlackHole);
    let sending_ends = Instant::now() + Duration::from_secs(3);
    let mut requests = tokio::task::JoinSet::new();
    let mut most_in_flight = 0;
    while Instant::now() < sending_ends {
        let (client, url) = (service.client.clone(), format!("{}{path}", service.base));
        requests.spawn(async move {
            let asked = Instant::now();
            let status = client.get(url).send().await.map(|response| response.status());
            (status, asked.elapsed())
        });
        most_in_flight = most_in_flight.max(hbase.in_flight());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let in_time = settings.request_timeout + Duration::from_millis(500);
    while let Some(done) = requests.join_next().await {
        let (status, took) = done.expect("request task");
        assert_eq!(status.expect("an answer"), StatusCode::SERVICE_UNAVAILABLE);
        assert!(took < in_time, "every request answered within its deadline: {took:?}");
        most_in_flight = most_in_flight.max(hbase.in_flight());
    }
    assert!(most_in_flight <= 4, "operations in flight exceeded the pool: {most_in_flight}");

    // Every request has had its answer, so no HBase work may be left: work
    // whose caller has gone ends by the caller's deadline (or never starts)
    // instead of holding a connection for a fresh timeout of its own.
    // Work that held a connection for a fresh operation timeout of its own
    // would still be in flight 1.5 s after its caller's answer.
    let settled = Instant::now();
    until("no abandoned work holds a connection", || hbase.in_flight() == 0).await;
    assert!(settled.elapsed() < operation_timeout / 2, "abandoned work ran {:?} on", settled.elapsed());

    // The gateway returns: nothing abandoned is queued or in flight between
    // a new request and HBase, so it is answered.
    assert_eq!((hbase.in_flight(), hbase.queued()), (0, 0), "no backlog to drain");
    proxy.set_mode(ProxyMode::Pass);
    let answer = service.get(&path).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
}

/// A client whose connections leave from `local`: the service tells clients
/// apart by address, and the loopback network has many (127.0.0.1, .2, ...).
fn client_from(local: &str) -> reqwest::Client {
    let local: std::net::IpAddr = local.parse().expect("address");
    reqwest::Client::builder().local_address(local).timeout(Duration::from_secs(20)).build().expect("client")
}

/// `GET {path}` by `client` with `headers`: the whole answer.
async fn answer_to(client: &reqwest::Client, service: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client.get(format!("{}{path}", service.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Answer::from_response(request.send().await.expect("GET")).await
}

/// `GET {path}` by `client` with `headers`: the status, the `Retry-After`
/// header and the error code, if any.
async fn get_as(
    client: &reqwest::Client,
    service: &TestApp,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Option<String>, Option<String>) {
    let answer = answer_to(client, service, path, headers).await;
    let retry_after =
        answer.headers.get(reqwest::header::RETRY_AFTER).map(|value| value.to_str().expect("ascii").to_owned());
    (answer.status, retry_after, answer.body["error"]["code"].as_str().map(str::to_owned))
}

/// The value of the counter sample `series` (name and labels, as `/metrics` prints it).
fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

const SHOP_KEY: &str = "shop-web-0123456789";
const BATCH_KEY: &str = "batch-job-0123456789";

fn keyed_policy() -> ClientPolicy {
    ClientPolicy {
        api_keys: vec![
            format!("shop-web={SHOP_KEY}").parse().expect("key"),
            format!("batch={BATCH_KEY}").parse().expect("key"),
        ],
        exempt_keys: vec!["batch".to_owned()],
        ..ClientPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flooding_client_is_refused_with_429_while_another_is_served() {
    let tables = fresh_store("fair_shedding").await;
    let catalogue = Catalogue { products: 1, comments_per_product: 30, users: 30 };
    post_all(&tables, catalogue.new_comments(0)).await;
    ranker::run(&tables, &RunOptions::new(Scope::All, AS_OF_MS), CancellationToken::new()).await.expect("ranking");
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    // Room in the queue for more than the greedy client's reads: a read let
    // in past the shedding would wait there, where the test sees it, instead
    // of being refused by the queue's own bound.
    let queue_timeout = Duration::from_secs(5);
    let pool = HbaseConfig { max_queued: Some(8), ..small_pool(queue_timeout) };
    let (store, hbase) = store_through(&proxy, &tables, pool);
    let service = TestApp::spawn(store, Settings { clients: keyed_policy(), ..patient_settings() }).await;
    let (greedy, polite) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let ranked = format!("/v1/products/{}/comments/ranked", catalogue.product(0));
    assert_eq!(get_as(&greedy, &service, &ranked, &[]).await.0, StatusCode::OK, "the ranking is cached");

    // The gateway goes silent; the greedy client's reads take both
    // connections, and one more waits for a connection: the service must shed.
    proxy.set_mode(ProxyMode::BlackHole);
    let latest = format!("{}/v1/products/{}/comments", service.base, catalogue.product(0));
    let mut held = tokio::task::JoinSet::new();
    for expected_in_flight in [1, 2] {
        held.spawn(greedy.get(&latest).send());
        until("the greedy client holds a connection more", || hbase.in_flight() == expected_in_flight).await;
    }
    held.spawn(greedy.get(&latest).send());
    until("a request of the greedy client waits for a connection", || hbase.queued() == 1).await;

    // Alone, the greedy client is not refused: its read waits like any other.
    let alone = tokio::spawn(greedy.get(&latest).send());
    until("the greedy client's read waits too", || hbase.queued() == 2).await;
    // Another client reads a page the cache holds: within its share, served.
    assert_eq!(get_as(&polite, &service, &ranked, &[]).await.0, StatusCode::OK);
    // Now the greedy client, four in flight on an HBase that answers nothing,
    // asks more than the service serves (or, within a second of its first
    // request, more than a newcomer's pair): refused at once, for reads
    // that need HBase (a latest page is never cached) as for a page the
    // cache holds; a forwarding header from it (an untrusted peer) changes
    // nothing. A refusal costs HBase nothing: none of the refused reads
    // waits for a connection, as each would behind the silent gateway had
    // it been let in.
    let latest_page = format!("/v1/products/{}/comments", catalogue.product(0));
    let refused_reads = [
        (&latest_page, &[][..]),
        (&latest_page, &[("x-forwarded-for", "203.0.113.77")][..]),
        (&latest_page, &[("forwarded", "for=198.51.100.1")][..]),
        (&ranked, &[][..]),
    ];
    for (path, headers) in refused_reads {
        let started = Instant::now();
        let (refused, most_queued) = peak_queued(&hbase, get_as(&greedy, &service, path, headers)).await;
        let took = started.elapsed();
        assert_eq!(
            refused,
            (StatusCode::TOO_MANY_REQUESTS, Some("1".to_owned()), Some("too_many_requests".to_owned())),
            "{path} {headers:?}"
        );
        assert_eq!(most_queued, 2, "{path} {headers:?}: the refusal cost no HBase work, no read of it waited");
        assert!(took < queue_timeout, "{path} {headers:?}: refused at once, not after a wait: {took:?}");
    }
    // The probes and /metrics are never limited: the load balancer and
    // Prometheus see the service as it is, whoever calls them. (/readyz asks
    // HBase, which is silent here: the rate test below shows it unlimited.)
    for probe in ["/healthz", "/metrics"] {
        let (status, retry_after, _) = get_as(&greedy, &service, probe, &[]).await;
        assert_eq!((status, retry_after), (StatusCode::OK, None), "{probe} from the refused client");
    }
    // The other client is still within its share.
    assert_eq!(get_as(&polite, &service, &ranked, &[]).await.0, StatusCode::OK);
    // So is a named key from the greedy client's own address: a client of its own.
    assert_eq!(get_as(&greedy, &service, &ranked, &[("x-api-key", SHOP_KEY)]).await.0, StatusCode::OK);
    assert_eq!(hbase.queued(), 2, "the greedy client's two reads still wait, no more");

    let metrics = service.metrics().await;
    assert_eq!(counter(&metrics, r#"reviews_api_client_refusals_total{class="address",reason="fair_share"}"#), 4);
    assert_eq!(counter(&metrics, r#"reviews_api_client_requests_total{class="shop-web"}"#), 1);
    assert_eq!(counter(&metrics, r#"reviews_api_client_refusals_total{class="shop-web",reason="fair_share"}"#), 0);
    // Let in as what it was: new to the service while it shed.
    assert_eq!(counter(&metrics, r#"reviews_api_client_admissions_total{class="shop-web",kind="newcomer"}"#), 1);
    proxy.set_mode(ProxyMode::Pass);
    held.abort_all();
    alone.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_a_trusted_proxy_says_which_client_a_request_is_from() {
    let store = fresh_store("trusted_proxies").await;
    // One request a second per client: the second within the second tells
    // whether two requests counted as one client.
    let policy = ClientPolicy {
        trusted_proxies: vec![query_api::clients::parse_trusted_proxy("127.0.0.1").expect("proxy")],
        rate_per_second: std::num::NonZeroU32::new(1),
        ..keyed_policy()
    };
    let service = TestApp::spawn(store, Settings { clients: policy, ..patient_settings() }).await;
    let path = format!("/v1/products/{}/comments", integration_tests::test_id("P", 1));
    let (proxy, stranger) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    let status =
        async |client: &reqwest::Client, headers: &[(&str, &str)]| get_as(client, &service, &path, headers).await;

    // Through the trusted proxy: two shoppers are two clients, the first one again is refused.
    assert_eq!(status(&proxy, &[("x-forwarded-for", "203.0.113.1")]).await.0, StatusCode::OK);
    assert_eq!(status(&proxy, &[("x-forwarded-for", "203.0.113.2")]).await.0, StatusCode::OK);
    let again = status(&proxy, &[("x-forwarded-for", "198.51.100.9, 203.0.113.1")]).await;
    assert_eq!((again.0, again.2.as_deref()), (StatusCode::TOO_MANY_REQUESTS, Some("too_many_requests")));
    // From a peer nobody trusts, the same headers are ignored: one client.
    assert_eq!(status(&stranger, &[("x-forwarded-for", "203.0.113.3")]).await.0, StatusCode::OK);
    assert_eq!(status(&stranger, &[("x-forwarded-for", "203.0.113.4")]).await.0, StatusCode::TOO_MANY_REQUESTS);
    // A named key is a client of its own; an exempt one is never refused.
    assert_eq!(status(&stranger, &[("x-api-key", SHOP_KEY)]).await.0, StatusCode::OK);
    assert_eq!(status(&stranger, &[("x-api-key", SHOP_KEY)]).await.0, StatusCode::TOO_MANY_REQUESTS);
    for _ in 0..5 {
        assert_eq!(status(&stranger, &[("x-api-key", BATCH_KEY)]).await.0, StatusCode::OK);
    }
    let metrics = service.metrics().await;
    assert_eq!(counter(&metrics, r#"reviews_api_client_refusals_total{class="address",reason="rate"}"#), 2);
    assert_eq!(counter(&metrics, r#"reviews_api_client_refusals_total{class="shop-web",reason="rate"}"#), 1);
    assert_eq!(counter(&metrics, r#"reviews_api_client_requests_total{class="batch"}"#), 5);
}

/// The key of the client the two tests below limit to one request a second:
/// a class of its own, so that its refusals are not counted with those the
/// other tests count (the metrics are the process's, shared by the tests
/// running at once).
const RATED_KEY: &str = "rated-shop-0123456789";

/// One request a second for the client with [`RATED_KEY`] (and for each address).
fn rated_policy() -> ClientPolicy {
    ClientPolicy {
        api_keys: vec![format!("rated-shop={RATED_KEY}").parse().expect("key")],
        rate_per_second: std::num::NonZeroU32::new(1),
        ..ClientPolicy::default()
    }
}

/// Sends `GET {path}` as `client` with `headers` until one is refused for
/// its rate (the first may spend the second's one request), and returns that
/// refusal.
async fn refused_for_rate(client: &reqwest::Client, service: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    wait_for(Duration::from_secs(10), "a request refused for its client's rate", async || {
        let answer = answer_to(client, service, path, headers).await;
        (answer.status == StatusCode::TOO_MANY_REQUESTS).then_some(answer)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_probes_and_metrics_are_never_limited_while_their_client_is_refused_for_its_rate() {
    let store = fresh_store("unlimited_probes").await;
    let service = TestApp::spawn(store, Settings { clients: rated_policy(), ..patient_settings() }).await;
    let client = client_from("127.0.0.1");
    let as_rated = [("x-api-key", RATED_KEY)];
    let page = format!("/v1/products/{}/comments", integration_tests::test_id("P", 1));
    for probe in ["/healthz", "/readyz", "/metrics"] {
        // The client is over its rate this very moment...
        let refused = refused_for_rate(&client, &service, &page, &as_rated).await;
        refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
        // ...and its probe is answered all the same, and costs it nothing.
        let answer = answer_to(&client, &service, probe, &as_rated).await;
        assert_eq!(answer.status, StatusCode::OK, "{probe} from a client refused for its rate: {}", answer.raw);
        assert!(answer.headers.get(reqwest::header::RETRY_AFTER).is_none(), "{probe}");
    }
    service.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_can_read_a_429_and_its_retry_after() {
    let store = fresh_store("cors_refusal").await;
    let shop = "https://shop.example";
    let settings = Settings { cors_origins: vec![shop.to_owned()], clients: rated_policy(), ..patient_settings() };
    let service = TestApp::spawn(store, settings).await;
    let client = client_from("127.0.0.1");
    let page = format!("/v1/products/{}/comments", integration_tests::test_id("P", 1));
    // What a shop's page sends from the browser: its origin, and its key.
    let from_the_shop = [("origin", shop), ("x-api-key", RATED_KEY)];
    let refused = refused_for_rate(&client, &service, &page, &from_the_shop).await;
    refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    let header = |name: &str| refused.headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let retry_after: u64 =
        header("retry-after").parse().unwrap_or_else(|_| panic!("a Retry-After: {:?}", refused.headers));
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    // Without these the browser hides the answer from the page's script,
    // which then cannot tell a refusal from a network failure, nor when to retry.
    assert_eq!(header("access-control-allow-origin"), shop, "{:?}", refused.headers);
    let exposed: Vec<String> =
        header("access-control-expose-headers").split(',').map(|name| name.trim().to_ascii_lowercase()).collect();
    assert!(exposed.iter().any(|name| name == "retry-after"), "Retry-After exposed: {exposed:?}");
    service.shut_down().await;
}
