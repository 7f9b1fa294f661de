//! Through HBase trouble, a product page that was served keeps being served
//! (issue 37): with both Thrift gateways behind [`FaultyProxy`]s that the tests
//! silence or slow down,
//!
//! - every page read served before (ranked, summary, `/v1/summaries`, a
//!   product's first, cursor, filtered and rating-ordered pages, user
//!   timelines, a single review) answers its last good copy, byte for byte,
//!   with `Age` and a `Cache-Control` carrying `stale-if-error`, while pages
//!   never served answer 503;
//! - a copy is only ever replaced by an answer whose read began later;
//! - an expired ranking is reloaded by one request while the others are
//!   answered from the expiring copy (stale-while-revalidate);
//! - a first latest page with its authors, which no cached ranking holds,
//!   is answered from its own kept copy, with its own `Age`.

use std::time::{Duration, Instant};

use common::model::{Extra, User};
use common::store::Store;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use integration_tests::app::{service_store_via, Answer, TestApp};
use integration_tests::fixtures::{new_comment, post_all, write_ranking, Catalogue, AS_OF_MS};
use integration_tests::{fresh_store, test_id, thrift2_addr, thrift_addr, wait_for, FaultyProxy, ProxyMode};
use query_api::Settings;
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use crate::rows::drop_tables;

/// HBase deadlines long enough for a read through a slowed gateway to end in an answer.
const PATIENT_FLAGS: &[&str] = &["--hbase-timeout-ms", "6000", "--request-timeout-ms", "8000"];
/// Patient enough for a call the test holds at the gateway for seconds: the
/// HBase deadline is capped at the request's, so both are raised.
const HELD_FLAGS: &[&str] = &["--hbase-timeout-ms", "20000", "--request-timeout-ms", "25000"];

/// Both gateways, each behind a proxy the test controls.
struct Gateways {
    thrift1: FaultyProxy,
    thrift2: FaultyProxy,
}

impl Gateways {
    async fn start() -> Gateways {
        Gateways {
            thrift1: FaultyProxy::start(&thrift_addr()).await,
            thrift2: FaultyProxy::start(&thrift2_addr()).await,
        }
    }

    fn set_mode(&self, mode: ProxyMode) {
        self.thrift1.set_mode(mode);
        self.thrift2.set_mode(mode);
    }

    /// A store with the service's own HBase settings (plus `flags`) over `tables_of`'s tables, through both proxies.
    fn store(&self, tables_of: &Store, flags: &[&str]) -> Store {
        service_store_via(&self.thrift1.address(), &self.thrift2.address(), tables_of, flags)
    }
}

/// Reviews of three products, ranked.
async fn ranked_catalogue(test: &str) -> (Store, Catalogue) {
    let tables = fresh_store(test).await;
    let catalogue = Catalogue { products: 3, comments_per_product: 15, users: 5 };
    post_all(&tables, catalogue.new_comments(0)).await;
    let report = ranker::run(&tables, &ranker::RunOptions::new(ranker::Scope::All, AS_OF_MS), CancellationToken::new())
        .await
        .expect("rank the products");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    (tables, catalogue)
}

fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer.headers.get(name).and_then(|value| value.to_str().ok())
}

/// Asserts that `answer` is `served` again, marked stale, with an `Age` no
/// larger than the time since `read_before` (a moment before the read behind
/// `served` began).
fn assert_stale_copy(path: &str, answer: &Answer, served: &Answer, read_before: Instant) {
    assert_eq!(answer.status, StatusCode::OK, "{path} while HBase is silent: {}", answer.raw);
    assert_eq!(answer.raw, served.raw, "{path}: the stale answer is the last good one, byte for byte");
    assert_eq!(header(answer, "etag"), header(served, "etag"), "{path}");
    let age: u64 = header(answer, "age").and_then(|age| age.parse().ok()).unwrap_or_else(|| panic!("{path}: no Age"));
    let bound = read_before.elapsed().as_secs();
    assert!(age <= bound, "{path}: Age {age}, but its read began less than {bound} s ago");
    let cache_control = header(answer, "cache-control").unwrap_or_default();
    assert!(cache_control.contains("stale-if-error=3600"), "{path}: Cache-Control {cache_control}");
    assert!(cache_control.contains("max-age=0"), "{path}: Cache-Control {cache_control}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_served_is_answered_stale_while_hbase_is_silent_and_pages_never_served_answer_503() {
    let (tables, catalogue) = ranked_catalogue("stale_product_page").await;
    let gateways = Gateways::start().await;
    // The ranked cache off: every read below reaches HBase, so only the last good copies can answer.
    let settings = Settings { ranked_cache_ttl: Duration::ZERO, ..Settings::default() };
    let service = TestApp::spawn(gateways.store(&tables, &[]), settings).await;
    let (product, other, user) = (catalogue.product(0), catalogue.product(1), catalogue.user(0));
    let mut kept_paths = vec![
        format!("/v1/products/{product}/comments?limit=5"),
        format!("/v1/products/{product}/comments/ranked"),
        format!("/v1/products/{product}/comments/ranked?include=author"),
        format!("/v1/products/{product}/comments/summary"),
        format!("/v1/summaries?productIds={product},{other},{product}"),
        format!("/v1/products/{product}/comments?limit=5&rating=4,5"),
        format!("/v1/products/{product}/comments?limit=5&sort=rating_asc"),
        format!("/v1/users/{user}/comments?limit=3"),
        format!("/product/{product}/comments/latest?limit=5"),
        format!("/product/{product}/comments/ranked"),
        format!("/user/{user}/comments/latest"),
    ];
    let mut served = Vec::new();
    let read_before = Instant::now();
    for path in &kept_paths {
        let answer = service.get(path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.raw);
        assert!(header(&answer, "age").is_none(), "{path}: a fresh answer has no Age");
        served.push(answer);
    }
    // The pages the first ones lead to: the product's second page, the
    // user's, and the first page's first review on its own.
    let next_page = |answer: &Answer| answer.body["nextCursor"].as_str().expect("a next page").to_owned();
    let review = served[0].comment_values()[0]["id"].as_str().expect("a review id").to_owned();
    let (product_cursor, user_cursor) = (next_page(&served[0]), next_page(&served[7]));
    let followed = [
        format!("/v1/products/{product}/comments?limit=5&cursor={product_cursor}"),
        format!("/v1/users/{user}/comments?limit=3&cursor={user_cursor}"),
        format!("/v1/reviews/{review}"),
    ];
    for path in followed {
        let answer = service.get(&path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.raw);
        served.push(answer);
        kept_paths.push(path);
    }
    let never_served = [
        // The same reads with another limit, filter, order or author: other answers, never served.
        format!("/v1/products/{product}/comments?limit=6"),
        format!("/v1/products/{product}/comments?limit=5&rating=1"),
        format!("/v1/products/{product}/comments?limit=5&sort=rating_desc"),
        format!("/v1/users/{user}/comments?limit=3&include=author"),
        format!("/v1/users/{}/comments", catalogue.user(1)),
        format!("/v1/products/{other}/comments/ranked"),
        format!("/v1/reviews/{review}?include=author"),
    ];

    gateways.set_mode(ProxyMode::BlackHole);
    let kept = futures_util::future::join_all(kept_paths.iter().map(|path| service.get(path))).await;
    for ((path, answer), served) in kept_paths.iter().zip(&kept).zip(&served) {
        assert_stale_copy(path, answer, served, read_before);
    }
    let refused = futures_util::future::join_all(never_served.iter().map(|path| service.get(path))).await;
    for (path, answer) in never_served.iter().zip(refused) {
        answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert!(header(&answer, "age").is_none(), "{path}");
    }
    let metrics = service.metrics().await;
    for route in [
        "/v1/products/{productId}/comments",
        "/v1/products/{productId}/comments/ranked",
        "/v1/summaries",
        "/v1/users/{userId}/comments",
        "/v1/reviews/{reviewId}",
        "/product/{productId}/comments/latest",
        "/user/{userId}/comments/latest",
    ] {
        let line = format!("reviews_api_stale_answers_total{{route=\"{route}\"}}");
        let count: f64 = metrics
            .lines()
            .find_map(|row| row.strip_prefix(&line).and_then(|value| value.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {line} in /metrics"));
        assert!(count >= 1.0, "{line} {count}");
    }

    // HBase answers again: a review posted now is on the first page at once.
    gateways.set_mode(ProxyMode::Pass);
    let order = test_id("O", 999);
    let posted = post_all(
        &tables,
        vec![new_comment(&order, &product, &catalogue.user(0), "after the outage", AS_OF_MS + 1_000)],
    )
    .await;
    let newest = posted[0].row_key();
    let fresh = wait_for(Duration::from_secs(30), "a fresh first page after the outage", async || {
        let answer = service.get(&kept_paths[0]).await;
        (answer.status == StatusCode::OK && header(&answer, "age").is_none()).then_some(answer)
    })
    .await;
    assert_eq!(fresh.comment_keys().first(), Some(&newest), "the new review leads the fresh page");
    service.shut_down().await;
    drop_tables(&[&tables]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_copy_is_never_an_answer_older_than_the_newest_served() {
    let (tables, catalogue) = ranked_catalogue("stale_never_older").await;
    let gateways = Gateways::start().await;
    // The ranked cache off, so each read below reads HBase; patient deadlines,
    // so the slowed read ends in an answer, not a timeout.
    let settings =
        Settings { ranked_cache_ttl: Duration::ZERO, request_timeout: Duration::from_secs(8), ..Settings::default() };
    let service = TestApp::spawn(gateways.store(&tables, PATIENT_FLAGS), settings).await;
    let product = catalogue.product(0);
    let path = format!("/v1/products/{product}/comments/ranked");
    let first = service.get(&path).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);

    // An early read takes the ranking through Thrift1 at once, then waits on
    // its summary's answer through a slowed Thrift2 while a new ranking is
    // written and a later read is answered at once: the early read finishes
    // last, with the older ranking. Its Thrift2 call comes after its ranking
    // read, so once Thrift2 has answered it, the ranking has been read.
    gateways.thrift2.set_mode(ProxyMode::Delay(Duration::from_millis(3_000)));
    let answered_before = gateways.thrift2.answer_chunks();
    let early = tokio::spawn({
        let request = service.client.get(format!("{}{path}", service.base));
        async move { Answer::from_response(request.send().await.expect("GET")).await }
    });
    wait_for(Duration::from_secs(5), "the early read's call to Thrift2", async || {
        (gateways.thrift2.answer_chunks() > answered_before).then_some(())
    })
    .await;
    let read_before = Instant::now();
    let best = first.comment_keys()[1];
    write_ranking(&tables, &product, &[(best, 0.99)]).await;
    gateways.thrift2.set_mode(ProxyMode::Pass);
    let later = service.get(&path).await;
    assert_eq!(later.status, StatusCode::OK, "{}", later.raw);
    assert_eq!(later.comment_keys(), [best], "the later read sees the new ranking");
    assert!(!early.is_finished(), "the early read is still held up");
    let early = early.await.expect("the early read");
    assert_eq!(early.raw, first.raw, "the early read began before the new ranking was written");

    gateways.set_mode(ProxyMode::BlackHole);
    let stale = service.get(&path).await;
    assert_stale_copy(&path, &stale, &later, read_before);
    service.shut_down().await;
    drop_tables(&[&tables]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_ranking_is_reloaded_by_one_request_while_fifty_are_answered_from_the_expiring_copy() {
    let (tables, catalogue) = ranked_catalogue("stale_while_revalidate").await;
    let gateways = Gateways::start().await;
    // An expired ranking stays cached for one more TTL, after which a request
    // finds none and waits for the load: five seconds give the fifty requests
    // below ample time to arrive within it.
    let ttl = Duration::from_secs(5);
    let settings = Settings { ranked_cache_ttl: ttl, request_timeout: Duration::from_secs(25), ..Settings::default() };
    let service = TestApp::spawn(gateways.store(&tables, HELD_FLAGS), settings).await;
    let product = catalogue.product(0);
    let path = format!("/v1/products/{product}/comments/ranked");
    let cached = service.get(&path).await;
    let cached_at = Instant::now();
    assert_eq!(cached.status, StatusCode::OK, "{}", cached.raw);

    // A new ranking, which only a reload can show; then the cached one expires.
    let best = cached.comment_keys()[1];
    write_ranking(&tables, &product, &[(best, 0.99)]).await;
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;

    // The gateway's answers are held, so the reload cannot finish while the
    // fifty requests, sent together, are answered: forty-nine from the
    // expiring copy, without a call to HBase; only then is the reload let go.
    gateways.set_mode(ProxyMode::Hold);
    let mut requests: FuturesUnordered<_> = (0..50).map(|_| service.get(&path)).collect();
    let mut answers = Vec::new();
    let forty_nine = async {
        while answers.len() < 49 {
            answers.push(requests.next().await.expect("fifty requests"));
        }
    };
    let answered_while_held = tokio::time::timeout(Duration::from_secs(10), forty_nine).await;
    gateways.set_mode(ProxyMode::Pass);
    answered_while_held.unwrap_or_else(|_| {
        panic!(
            "{} of the fifty answered while the reload was held, not 49; {:?} after the ranking was cached \
             (kept for twice the TTL)",
            answers.len(),
            cached_at.elapsed()
        )
    });
    let reloaded = requests.next().await.expect("the fiftieth request");
    // The requests borrow `service`, which `shut_down` consumes below.
    drop(requests);
    assert!(answers.iter().chain([&reloaded]).all(|answer| answer.status == StatusCode::OK));
    assert!(answers.iter().all(|answer| answer.raw == cached.raw), "the others are answered from the expiring copy");
    assert_eq!(reloaded.comment_keys(), [best], "one request reloads the expired ranking");
    let after = service.get(&path).await;
    assert_eq!(after.comment_keys(), [best], "the reloaded ranking is cached");
    assert_eq!(after.raw, reloaded.raw);
    service.shut_down().await;
    drop_tables(&[&tables]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_answer_is_as_old_as_the_ranking_it_shows_however_recently_it_was_served() {
    let (tables, catalogue) = ranked_catalogue("stale_age_of_ranking").await;
    let gateways = Gateways::start().await;
    let settings = Settings { ranked_cache_ttl: Duration::from_secs(120), ..Settings::default() };
    let service = TestApp::spawn(gateways.store(&tables, &[]), settings).await;
    let product = catalogue.product(0);
    let read_before = Instant::now();
    let cached = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(cached.status, StatusCode::OK, "{}", cached.raw);

    // Served later from the cached ranking: with authors (read now, then
    // cached with the ranking), and in a listing's summaries beside a
    // product not cached (read now).
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let with_authors = format!("/v1/products/{product}/comments/ranked?include=author");
    let listing = format!("/v1/summaries?productIds={product},{}", catalogue.product(1));
    let authors_served = service.get(&with_authors).await;
    assert_eq!(authors_served.status, StatusCode::OK, "{}", authors_served.raw);
    let served = service.get(&listing).await;
    assert_eq!(served.status, StatusCode::OK, "{listing}: {}", served.raw);
    gateways.set_mode(ProxyMode::BlackHole);
    let stale = service.get(&listing).await;
    assert_stale_copy(&listing, &stale, &served, read_before);
    let age: u64 = header(&stale, "age").and_then(|age| age.parse().ok()).expect("an Age");
    assert!(age >= 2, "{listing}: Age {age}, though the ranking it shows was read over two seconds before");
    // The authors were cached with the ranking: HBase is not needed to answer them again.
    let from_cache = service.get(&with_authors).await;
    assert_eq!((from_cache.status, &from_cache.raw), (StatusCode::OK, &authors_served.raw));
    assert!(header(&from_cache, "age").is_none(), "a fresh answer from the cached ranking");
    service.shut_down().await;
    drop_tables(&[&tables]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_first_page_with_authors_is_answered_from_its_own_kept_copy_with_its_age_while_hbase_is_silent() {
    let (tables, catalogue) = ranked_catalogue("stale_latest_with_authors").await;
    let users: Vec<User> = (0..catalogue.users)
        .map(|number| User {
            id: catalogue.user(number),
            name: format!("Real Name {number}"),
            nickname: format!("Reviewer {number}"),
            extra: Extra::new(),
        })
        .collect();
    tables.put_records(&users).await.expect("put the users");
    let gateways = Gateways::start().await;
    // The ranked cache on, as a deployment has it: it holds rankings with
    // their authors, never a latest page, so the latest page with authors is
    // read from HBase every time, and while HBase is silent only its kept
    // copy can answer it.
    let settings = Settings { ranked_cache_ttl: Duration::from_secs(120), ..Settings::default() };
    let service = TestApp::spawn(gateways.store(&tables, &[]), settings).await;
    let product = catalogue.product(0);
    let ranked_with_authors = format!("/v1/products/{product}/comments/ranked?include=author");
    let cached_ranking = service.get(&ranked_with_authors).await;
    assert_eq!(cached_ranking.status, StatusCode::OK, "{}", cached_ranking.raw);
    let latest_with_authors = format!("/v1/products/{product}/comments?limit=5&include=author");
    let read_before = Instant::now();
    let served = service.get(&latest_with_authors).await;
    assert_eq!(served.status, StatusCode::OK, "{}", served.raw);
    assert!(header(&served, "age").is_none(), "a fresh answer has no Age");
    assert_eq!(served.comment_values().len(), 5, "{}", served.raw);
    for comment in served.comment_values() {
        assert!(comment["author"]["nickname"].is_string(), "each review with its author: {comment}");
    }

    // The kept copy ages with the outage, and says how old it is. Each answer
    // comes once the read of HBase has given up, so a few answers in, the
    // copy is two seconds old.
    gateways.set_mode(ProxyMode::BlackHole);
    let stale =
        wait_for(Duration::from_secs(30), "the kept first page with authors to be two seconds old", async || {
            let answer = service.get(&latest_with_authors).await;
            assert_stale_copy(&latest_with_authors, &answer, &served, read_before);
            let age: u64 = header(&answer, "age").and_then(|age| age.parse().ok()).expect("an Age");
            (age >= 2).then_some(answer)
        })
        .await;
    assert!(stale.headers.get("x-replica-read").is_none(), "a kept copy says nothing of replicas");
    // A user's timeline with authors, never served, has no kept copy: refused, not answered stale.
    let timeline = service.get(&format!("/v1/users/{}/comments?include=author", catalogue.user(0))).await;
    timeline.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(header(&timeline, "age").is_none(), "{}", timeline.raw);
    // The ranked page with authors needs no HBase: the cached ranking answers it fresh.
    let from_cache = service.get(&ranked_with_authors).await;
    assert_eq!((from_cache.status, &from_cache.raw), (StatusCode::OK, &cached_ranking.raw));
    assert!(header(&from_cache, "age").is_none(), "a fresh answer from the cached ranking");
    service.shut_down().await;
    drop_tables(&[&tables]).await;
}
