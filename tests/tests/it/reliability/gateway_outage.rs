//! The Thrift gateway stopped and restarted while the query service is under
//! load: during the outage every request answers within the configured
//! deadline (no hang, no 500, no dropped connection): 503, or for the page
//! reads served before, their last good answer marked stale (`Age`);
//! and within five seconds of the gateway's return every request succeeds
//! again, fresh, with no restart of the service.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use integration_tests::{fresh_store, PrivateGateway};
use reqwest::StatusCode;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use integration_tests::app::{service_store, uncached_settings, TestApp};
use integration_tests::fixtures::{post_all, Catalogue};
use query_api::Settings;

use crate::rows::drop_tables;

/// The service's HBase deadline in this test: 1.5 s, under its default (2.5
/// s), so that the outage of its one gateway is answered 503 within 2 s.
const HBASE_TIMEOUT_MS: u64 = 1_500;
/// The service's request deadline in this test (its default: 2.9 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The bound on any answer during the outage: the request deadline plus
/// generous room for a loaded two-core machine.
const ANSWER_WITHIN: Duration = REQUEST_TIMEOUT.saturating_add(Duration::from_millis(1_500));
/// How soon after the gateway answers again every request must succeed.
const RECOVERY_WITHIN: Duration = Duration::from_secs(5);
/// Concurrent request loops.
const WORKERS: usize = 8;
/// The most requests the whole test sends, whatever the timing: a bounded loop.
const MAX_REQUESTS: usize = 200_000;

/// What one request saw.
#[derive(Debug, Clone)]
struct Sample {
    started: Instant,
    elapsed: Duration,
    route: &'static str,
    /// The HTTP status, or the client's error when no answer came.
    outcome: Result<StatusCode, String>,
    /// Whether the answer was a last good copy (it had an `Age`).
    stale: bool,
}

/// Whether `route` is one of the reads whose last good answer is served when
/// HBase fails: every GET; the seed's next page, a POST, is not kept.
fn kept(route: &str) -> bool {
    route != "seed product next"
}

/// The routes the load mixes, each a request builder over the service's base URL.
fn request(
    client: &reqwest::Client,
    base: &str,
    catalogue: &Catalogue,
    turn: usize,
) -> (&'static str, reqwest::RequestBuilder) {
    let number = u64::try_from(turn).expect("small") % catalogue.products;
    let product = catalogue.product(number);
    let user = catalogue.user(number % catalogue.users);
    match turn % 7 {
        0 => ("v1 product", client.get(format!("{base}/v1/products/{product}/comments?limit=20"))),
        1 => ("v1 user", client.get(format!("{base}/v1/users/{user}/comments?limit=20"))),
        2 => ("v1 ranked", client.get(format!("{base}/v1/products/{product}/comments/ranked"))),
        3 => ("seed product latest", client.get(format!("{base}/product/{product}/comments/latest?limit=10"))),
        4 => ("seed user latest", client.get(format!("{base}/user/{user}/comments/latest?limit=10"))),
        5 => ("seed ranked", client.get(format!("{base}/product/{product}/comments/ranked"))),
        _ => {
            let start = STANDARD.encode(common::keys::product_comment_prefix(&product));
            (
                "seed product next",
                client.post(format!("{base}/product/comments/get")).json(&json!({"startIndexKey": start, "limit": 5})),
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn query_api_under_load_answers_503_through_a_gateway_outage_and_recovers_within_five_seconds() {
    let store = fresh_store("rel_gateway_load").await;
    let catalogue = Catalogue { products: 20, comments_per_product: 15, users: 12 };
    post_all(&store, catalogue.new_comments(0)).await;
    super::rank_all(&store).await;

    let gateway = Arc::new(tokio::task::spawn_blocking(PrivateGateway::start).await.expect("start a private gateway"));
    let timeout = HBASE_TIMEOUT_MS.to_string();
    let service = TestApp::spawn(
        service_store(&gateway.address(), &store, &["--hbase-timeout-ms", &timeout]),
        Settings { request_timeout: REQUEST_TIMEOUT, ..uncached_settings() },
    )
    .await;

    // A gateway that has just started answers its first calls slowly (it opens
    // its own HBase connection and looks up regions), and a loaded CI machine
    // can stretch that past the test's 1.5 s HBase deadline. Warm every route of
    // every product until it answers 200, so "before the outage" measures a
    // working service, and every product page has a last good copy.
    let warm_until = Instant::now() + Duration::from_secs(60);
    let every_route_of_every_product = 7 * usize::try_from(catalogue.products).expect("small");
    for turn in 0..every_route_of_every_product {
        loop {
            let (route, builder) = request(&service.client, &service.base, &catalogue, turn);
            let status = builder.send().await.map(|response| response.status());
            if matches!(status, Ok(StatusCode::OK)) {
                break;
            }
            assert!(Instant::now() < warm_until, "{route} never answered 200 through the fresh gateway: {status:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let samples: Arc<Mutex<Vec<Sample>>> = Arc::new(Mutex::new(Vec::new()));
    let stop_load = CancellationToken::new();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let (client, base, samples, stop_load) =
            (service.client.clone(), service.base.clone(), Arc::clone(&samples), stop_load.clone());
        workers.spawn(async move {
            let mut turn = worker;
            while !stop_load.is_cancelled() && samples.lock().expect("samples").len() < MAX_REQUESTS {
                let (route, builder) = request(&client, &base, &catalogue, turn);
                let started = Instant::now();
                let answer = builder.send().await.map_err(|error| error.to_string());
                let stale = answer.as_ref().is_ok_and(|response| response.headers().contains_key("age"));
                let outcome = answer.map(|response| response.status());
                let sample = Sample { started, elapsed: started.elapsed(), route, outcome, stale };
                samples.lock().expect("samples").push(sample);
                turn += WORKERS;
                // Paced a little, so the load does not starve the JVMs sharing the machine.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stop_requested = Instant::now();
    let stopping = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || stopping.stop()).await.expect("stop the private gateway");
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let resume_requested = Instant::now();
    let resuming = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || resuming.resume()).await.expect("restart the private gateway");
    let back = Instant::now();
    tokio::time::sleep(RECOVERY_WITHIN + Duration::from_secs(3)).await;
    stop_load.cancel();
    while let Some(done) = workers.join_next().await {
        done.expect("load worker");
    }
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));

    let count = |filter: &dyn Fn(&Sample) -> bool| samples.iter().filter(|sample| filter(sample)).count();
    let is = |sample: &Sample, status: StatusCode| sample.outcome.as_ref().is_ok_and(|seen| *seen == status);
    let served_stale = |sample: &Sample| is(sample, StatusCode::OK) && sample.stale;
    let before = |sample: &Sample| sample.started + sample.elapsed < stop_requested;
    let during = |sample: &Sample| sample.started >= stopped && sample.started + sample.elapsed < resume_requested;
    let settled = |sample: &Sample| sample.started >= back + RECOVERY_WITHIN;
    let since_back = |sample: &Sample| sample.started >= back;
    let first_ok_after_back = samples
        .iter()
        .filter(|sample| since_back(sample) && is(sample, StatusCode::OK))
        .map(|sample| sample.started + sample.elapsed - back)
        .min();
    let last_failure_after_back = samples
        .iter()
        .filter(|sample| since_back(sample) && !is(sample, StatusCode::OK))
        .map(|sample| sample.started + sample.elapsed - back)
        .max();
    let slowest_503 = samples
        .iter()
        .filter(|sample| is(sample, StatusCode::SERVICE_UNAVAILABLE))
        .map(|sample| sample.elapsed)
        .max()
        .unwrap_or_default();
    println!(
        "gateway outage under load: {} requests ({} x 200, {} x 503, {} other, {} without answer); \
         before: {} ({} ok); outage: {} ({} x 503, {} stale, slowest 503 {:?}); gateway stop took {:?}, restart {:?}; \
         after return: first 200 at +{:?}, last non-200 at +{:?}; from +5 s: {} ({} ok)",
        samples.len(),
        count(&|s| is(s, StatusCode::OK)),
        count(&|s| is(s, StatusCode::SERVICE_UNAVAILABLE)),
        count(&|s| s
            .outcome
            .as_ref()
            .is_ok_and(|seen| *seen != StatusCode::OK && *seen != StatusCode::SERVICE_UNAVAILABLE)),
        count(&|s| s.outcome.is_err()),
        count(&before),
        count(&|s| before(s) && is(s, StatusCode::OK)),
        count(&during),
        count(&|s| during(s) && is(s, StatusCode::SERVICE_UNAVAILABLE)),
        count(&|s| during(s) && served_stale(s)),
        slowest_503,
        stopped - stop_requested,
        back - resume_requested,
        first_ok_after_back,
        last_failure_after_back,
        count(&settled),
        count(&|s| settled(s) && is(s, StatusCode::OK)),
    );

    for sample in &samples {
        match &sample.outcome {
            Err(error) => panic!("{} got no answer after {:?}: {error}", sample.route, sample.elapsed),
            Ok(status) => assert!(
                *status == StatusCode::OK || *status == StatusCode::SERVICE_UNAVAILABLE,
                "{} answered {status}",
                sample.route
            ),
        }
        assert!(sample.elapsed < ANSWER_WITHIN, "{} took {:?}", sample.route, sample.elapsed);
    }
    assert!(count(&before) > 0, "no request finished before the outage");
    assert_eq!(
        count(&|s| before(s) && is(s, StatusCode::OK) && !s.stale),
        count(&before),
        "all succeed before the outage, fresh"
    );
    assert!(count(&during) > 0, "no request ran during the outage");
    for sample in samples.iter().filter(|sample| during(sample)) {
        let stale_copy = kept(sample.route) && served_stale(sample);
        assert!(
            is(sample, StatusCode::SERVICE_UNAVAILABLE) || stale_copy,
            "{} answered {:?} (stale: {}) during the outage",
            sample.route,
            sample.outcome,
            sample.stale
        );
    }
    assert!(count(&|s| during(s) && served_stale(s)) > 0, "no product page was served stale during the outage");
    assert!(count(&settled) > 0, "no request ran after the recovery window");
    assert_eq!(
        count(&|s| settled(s) && is(s, StatusCode::OK) && !s.stale),
        count(&settled),
        "every request from {RECOVERY_WITHIN:?} after the gateway's return succeeds, fresh"
    );
    assert_eq!(service.get("/readyz").await.status, StatusCode::OK, "ready again without a restart");
    service.shut_down().await;
    tokio::task::spawn_blocking(move || drop(gateway)).await.expect("stop the private gateway for good");
    drop_tables(&[&store]).await;
}
