//! Two gateways of each kind behind the query service, and one of each
//! killed with SIGKILL under a read loop of every kind of page: while
//! another gateway of its kind lives, no read fails. The dead gateway's
//! connections are retired at the first sign of its death, the read that
//! saw it goes to the other gateway at once, and the dead one is probed
//! until it answers again and then given its share of the connections:
//! then the other gateways are killed in turn, and the reads ride on the
//! ones that came back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::hbase::{Hbase, HbaseConfig, Retry};
use integration_tests::app::{service_store_via, uncached_settings, TestApp};
use integration_tests::fixtures::{post_all, Catalogue};
use integration_tests::{fresh_store, hbase_config, thrift_addr, wait_for, PrivateGateway};
use query_api::Settings;
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use crate::rows::drop_tables;

/// Concurrent request loops.
const WORKERS: usize = 4;
/// The kinds of page read the load cycles through ([`path`]).
const PAGE_KINDS: usize = 8;
/// How long the loop reads before a kill, and after it.
const BEFORE_KILL: Duration = Duration::from_secs(2);
const AFTER_KILL: Duration = Duration::from_secs(5);
/// The deadlines of the service in this test: a request's (in its settings,
/// and in its flags, which cap its HBase deadline), and its HBase
/// operations'. Longer than the service's defaults (2.9 s and 2.5 s): on a
/// host of two cores that also runs HBase and four gateway JVMs, one of them
/// starting, a read may wait seconds for the CPU (the test command runs
/// these tests alone for that reason). A read the gateways' death failed
/// fails at once (a closed or refused socket), whatever the deadline, and
/// is seen all the same.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
const REQUEST_DEADLINE_MS: &str = "10000";
const HBASE_DEADLINE_MS: &str = "9000";
/// The slowest answer allowed: within the request deadline.
const SLOWEST: Duration = REQUEST_DEADLINE;

/// What one request saw.
#[derive(Debug, Clone)]
struct Sample {
    started: Instant,
    elapsed: Duration,
    route: &'static str,
    outcome: Result<StatusCode, String>,
}

/// The kinds of read that started at least half a second after `kill`.
fn kinds_after(samples: &[Sample], kill: Instant) -> std::collections::BTreeSet<&'static str> {
    let late = kill + Duration::from_millis(500);
    samples.iter().filter(|sample| sample.started >= late).map(|sample| sample.route).collect()
}

/// The page kinds a frontend reads, each a path on the service. Uncached,
/// so every read reaches HBase through the gateways: Thrift1 for the index
/// pages, rankings and comments, Thrift2 for the filtered pages, cursor
/// walks and summaries.
fn path(catalogue: &Catalogue, cursors: &[String], turn: usize) -> (&'static str, String) {
    let number = u64::try_from(turn).expect("small") % catalogue.products;
    let product = catalogue.product(number);
    let user = catalogue.user(number % catalogue.users);
    match turn % PAGE_KINDS {
        0 => ("latest", format!("/v1/products/{product}/comments?limit=10")),
        1 => ("user timeline", format!("/v1/users/{user}/comments?limit=10")),
        2 => ("ranked", format!("/v1/products/{product}/comments/ranked")),
        3 => ("summary", format!("/v1/products/{product}/comments/summary")),
        4 => ("five stars", format!("/v1/products/{product}/comments?rating=5&limit=5")),
        5 => ("rating order", format!("/v1/products/{product}/comments?sort=rating_desc&limit=5")),
        6 => (
            "listing summaries",
            format!("/v1/summaries?productIds={product},{}", catalogue.product((number + 1) % catalogue.products)),
        ),
        _ => {
            let cursor = &cursors[turn % cursors.len()];
            (
                "cursor page",
                format!("/v1/products/{product}/comments?limit=5&cursor={cursor}", product = catalogue.product(0)),
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_killed_under_load_costs_no_read_while_another_of_its_kind_lives() {
    let store = fresh_store("rel_gateway_failover").await;
    let catalogue = Catalogue { products: 8, comments_per_product: 15, users: 6 };
    post_all(&store, catalogue.new_comments(0)).await;
    super::rank_all(&store).await;

    let gateways = tokio::task::spawn_blocking(|| {
        [
            PrivateGateway::start(),
            PrivateGateway::start(),
            PrivateGateway::start_thrift2(),
            PrivateGateway::start_thrift2(),
        ]
    })
    .await
    .expect("start two private gateways of each kind");
    let gateways = Arc::new(gateways);
    let thrift1 = format!("{},{}", gateways[0].address(), gateways[1].address());
    let thrift2 = format!("{},{}", gateways[2].address(), gateways[3].address());
    // The service's own defaults (a 2.5 s deadline, one retry) and strong
    // reads: the gateways' death is what is tested, not the region servers'.
    let service = TestApp::spawn(
        service_store_via(
            &thrift1,
            &thrift2,
            &store,
            &[
                "--read-consistency",
                "strong",
                "--request-timeout-ms",
                REQUEST_DEADLINE_MS,
                "--hbase-timeout-ms",
                HBASE_DEADLINE_MS,
            ],
        ),
        Settings { request_timeout: REQUEST_DEADLINE, ..uncached_settings() },
    )
    .await;

    // Cursors into product 0's list, and every route answering once, before the load.
    let first = service.get(&format!("/v1/products/{}/comments?limit=5", catalogue.product(0))).await;
    let mut cursors = Vec::new();
    let mut next = first.body["nextCursor"].as_str().map(str::to_owned);
    while let Some(cursor) = next {
        let page =
            service.get(&format!("/v1/products/{}/comments?limit=5&cursor={cursor}", catalogue.product(0))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.raw);
        next = page.body["nextCursor"].as_str().map(str::to_owned);
        cursors.push(cursor);
    }
    assert!(cursors.len() >= 2, "product 0 has pages after the first: {}", first.raw);
    let warm_until = Instant::now() + Duration::from_secs(60);
    for turn in 0..PAGE_KINDS * usize::try_from(catalogue.products).expect("small") {
        loop {
            let (route, target) = path(&catalogue, &cursors, turn);
            let answer = service.get(&target).await;
            if answer.status == StatusCode::OK {
                break;
            }
            assert!(Instant::now() < warm_until, "{route} never answered 200 through fresh gateways: {}", answer.raw);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let samples: Arc<Mutex<Vec<Sample>>> = Arc::new(Mutex::new(Vec::new()));
    let stop_load = CancellationToken::new();
    let cursors = Arc::new(cursors);
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let (client, base, samples, stop_load, cursors) =
            (service.client.clone(), service.base.clone(), samples.clone(), stop_load.clone(), cursors.clone());
        workers.spawn(async move {
            let mut turn = worker;
            while !stop_load.is_cancelled() {
                let (route, target) = path(&catalogue, &cursors, turn);
                let started = Instant::now();
                let outcome = client
                    .get(format!("{base}{target}"))
                    .send()
                    .await
                    .map(|response| response.status())
                    .map_err(|error| error.to_string());
                samples.lock().expect("samples").push(Sample { started, elapsed: started.elapsed(), route, outcome });
                turn += WORKERS;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }

    // First the first gateway of each kind dies; then, once both are back,
    // the second of each, so that the reads must ride on the gateways that
    // were dead a moment ago.
    tokio::time::sleep(BEFORE_KILL).await;
    let kills = gateways.clone();
    let first_kill = tokio::task::spawn_blocking(move || {
        kills[0].kill();
        kills[2].kill();
        Instant::now()
    })
    .await
    .expect("kill the first gateway of each kind");
    tokio::time::sleep(AFTER_KILL).await;
    let revive = gateways.clone();
    tokio::task::spawn_blocking(move || {
        revive[0].resume();
        revive[2].resume();
    })
    .await
    .expect("restart the first gateways");
    // The probes find them back within their longest pause (5 s) and a
    // warm-up read, and the service's pools move connections to them as
    // they are handed back, so that they serve reads before the others die.
    // A gateway that got none would take every read at once at the second
    // kill. The bound is generous: a warm-up read that outlives the HBase
    // deadline is sent again after the next pause.
    wait_for(Duration::from_secs(30), "the restarted gateways to be given connections", async || {
        [&gateways[0], &gateways[2]].iter().all(|gateway| gateway.client_connections() > 0).then_some(())
    })
    .await;
    tokio::time::sleep(BEFORE_KILL).await;
    let kills = gateways.clone();
    let second_kill = tokio::task::spawn_blocking(move || {
        kills[1].kill();
        kills[3].kill();
        Instant::now()
    })
    .await
    .expect("kill the second gateway of each kind");
    tokio::time::sleep(AFTER_KILL).await;
    // On a loaded machine the reads after the second kill may be few and
    // slow: the load goes on until every kind has run after it, within a
    // bound.
    let give_up = Instant::now() + Duration::from_secs(20);
    while kinds_after(&samples.lock().expect("samples"), second_kill).len() < PAGE_KINDS && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_load.cancel();
    while let Some(done) = workers.join_next().await {
        done.expect("load worker");
    }
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));

    let after = |kill: Instant| samples.iter().filter(move |sample| sample.started + sample.elapsed >= kill).count();
    let since = |sample: &Sample, kill: Instant| match sample.started.checked_duration_since(kill) {
        Some(after) => format!("{after:?} after"),
        None => format!("{:?} before", kill - sample.started),
    };
    let describe = |sample: &Sample| {
        format!(
            "{} {:?} after {:?}, started {} the first kill, {} the second",
            sample.route,
            sample.outcome,
            sample.elapsed,
            since(sample, first_kill),
            since(sample, second_kill)
        )
    };
    let mut by_time: Vec<&Sample> = samples.iter().collect();
    by_time.sort_by_key(|sample| std::cmp::Reverse(sample.elapsed));
    let slowest = by_time.first().map(|sample| sample.elapsed).unwrap_or_default();
    println!(
        "gateway failover: {} reads, {} finished after the first kill, {} after the second; the slowest: {:?}",
        samples.len(),
        after(first_kill),
        after(second_kill),
        by_time.iter().take(3).map(|sample| describe(sample)).collect::<Vec<_>>()
    );
    let failed: Vec<&Sample> = samples.iter().filter(|sample| !matches!(sample.outcome, Ok(StatusCode::OK))).collect();
    let described: Vec<String> = failed.iter().take(5).map(|sample| describe(sample)).collect();
    assert!(failed.is_empty(), "{} of {} reads failed: {described:?}", failed.len(), samples.len());
    assert!(slowest < SLOWEST, "the slowest read took {slowest:?}");
    for kill in [first_kill, second_kill] {
        let routes_after = kinds_after(&samples, kill);
        assert_eq!(routes_after.len(), PAGE_KINDS, "every kind of read ran after the kill: {routes_after:?}");
    }

    service.shut_down().await;
    tokio::task::spawn_blocking(move || drop(gateways)).await.expect("stop the private gateways");
    drop_tables(&[&store]).await;
}

/// The pool's half of the story, call by call: a pool whose connections
/// are spread over two gateways, one of them killed. Every connection to
/// the dead gateway fails its next call; the first to fail takes the
/// gateway out (new connections go to the other, and the dead one's others
/// are retired at their next checkout), so with one retry (the service's
/// default) no call fails. Restarted, the gateway is put back by its probe,
/// once a warm-up read has made its HBase client reach the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_gateway_is_taken_out_at_its_first_failure_and_probed_back() {
    let gateways = tokio::task::spawn_blocking(|| [PrivateGateway::start(), PrivateGateway::start()])
        .await
        .expect("start two private gateways");
    let list = format!("{},{}", gateways[0].address(), gateways[1].address());
    let hbase = Hbase::new(HbaseConfig {
        thrift1_gateways: list.parse().expect("a valid list"),
        pool_size: 8,
        retries: 1,
        ..hbase_config(&thrift_addr())
    });
    // Eight calls at once, each holding its connection a moment, use every
    // connection of the pool: the first round opens eight, four to each
    // gateway; every later round uses each of them again.
    let round = |hbase: Hbase| async move {
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let hbase = hbase.clone();
            calls.spawn(async move {
                hbase
                    .run(Retry::Idempotent, |connection| {
                        connection.ping()?;
                        std::thread::sleep(Duration::from_millis(100));
                        Ok(())
                    })
                    .await
            });
        }
        let mut outcomes = Vec::new();
        while let Some(done) = calls.join_next().await {
            outcomes.push(done.expect("task"));
        }
        outcomes
    };
    for outcome in round(hbase.clone()).await {
        outcome.expect("a call through a live gateway");
    }
    assert_eq!(hbase.live_gateways().0, 2);
    let gateways = Arc::new(gateways);
    let killing = gateways.clone();
    tokio::task::spawn_blocking(move || killing[0].kill()).await.expect("kill the first gateway");
    for number in 0..3 {
        for outcome in round(hbase.clone()).await {
            assert!(outcome.is_ok(), "a call of round {number} after the kill failed: {outcome:?}");
        }
    }
    assert_eq!(hbase.live_gateways().0, 1, "the dead gateway is out");
    // Back, it is found by its probe (every 0.25 to 5 s), and serves again.
    // The calls here are pings, which never reach HBase: the restarted
    // gateway's HBase client has reached the region server of hbase:meta
    // by then only because the probe's warm-up read made it, before any
    // caller was sent to it.
    let reviving = gateways.clone();
    tokio::task::spawn_blocking(move || reviving[0].resume()).await.expect("restart the first gateway");
    wait_for(Duration::from_secs(10), "the probe to put the gateway back", async || {
        (hbase.live_gateways().0 == 2).then_some(())
    })
    .await;
    let warmed = gateways.clone();
    let meta_connections =
        tokio::task::spawn_blocking(move || warmed[0].connections_to_meta_server()).await.expect("count connections");
    assert!(meta_connections > 0, "the gateway put back holds no connection to hbase:meta's region server");
    for outcome in round(hbase.clone()).await {
        outcome.expect("a call once both gateways live again");
    }
    tokio::task::spawn_blocking(move || drop(gateways)).await.expect("stop the private gateways");
}
