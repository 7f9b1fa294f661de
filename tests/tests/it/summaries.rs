//! A product's review summary, as the ranker counts it in its own pass and
//! writes it in the ranking record: exact on what real tables hold (dangling
//! index rows, a review two index rows name, rows that do not decode, rows the
//! Java service wrote, ratings of every shape), equal to a count taken by
//! walking every latest page, shown by `explain`, kept for a product whose
//! reviews are all gone, and not written by a dry run; and the loads of
//! uncached rankings behind it, which share their HBase calls in batches and
//! are refused at once past the bound of loads waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::keys::{self, CommentKey};
use common::model::Comment;
use common::store::Store;
use common::summary::ReviewSummary;
use common::Id;
use integration_tests::app::{service_store_via, uncached_settings, Answer, TestApp};
use integration_tests::fixtures::{new_comment, post_all, put_orders, AS_OF_MS};
use integration_tests::{fresh_store, test_id, thrift2_addr, thrift_addr, wait_for, FaultyProxy, ProxyMode};
use query_api::Settings;
use ranker::{RunOptions, Scope};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::rows::{drop_tables, java_post, put_value};

const DAY_MS: i64 = 86_400_000;

pub(crate) async fn rank(store: &Store, product: &Id) -> ranker::RunReport {
    let report = ranker::run(store, &RunOptions::new(Scope::Product(*product), AS_OF_MS), CancellationToken::new())
        .await
        .expect("rank");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    report
}

async fn stored_summary(store: &Store, product: &Id) -> ReviewSummary {
    store.ranking(product).await.expect("ranking").summary.expect("the run wrote a summary")
}

/// Posts one review of `product` through the write path per (rating,
/// photos) shape, each on its own order (ids from `order_prefix`) by its own
/// user, with its own text, a minute apart from `newest_at` back.
pub(crate) async fn post_reviews(
    store: &Store,
    product: &Id,
    order_prefix: &str,
    shapes: &[(Option<u8>, Option<u32>)],
    newest_at: i64,
) -> Vec<Comment> {
    let orders: Vec<(Id, Id)> =
        (0..shapes.len() as u64).map(|n| (test_id(order_prefix, n), test_id(&format!("{order_prefix}U"), n))).collect();
    put_orders(store, &orders).await;
    let drafts = orders
        .iter()
        .zip(shapes)
        .zip(0..)
        .map(|(((order, user), (rating, photos)), n)| {
            let text = format!("A review through the write path, number {n}");
            let mut draft = new_comment(order, product, user, text, newest_at - n * 60_000);
            (draft.rating, draft.photos) = (*rating, *photos);
            draft
        })
        .collect();
    post_all(store, drafts).await
}

/// A review as the Java service stored it, with `fields` (rating, photos, ...)
/// in its JSON as they are.
fn java_review(order: &str, product: &Id, at: i64, fields: Value) -> Comment {
    let mut json = json!({
        "orderId": order, "productId": product.as_str(), "userId": format!("JU{}", &order[2..]),
        "content": format!("A review the Java service stored, {order}"), "timestamp": at, "edited": false
    });
    if let (Some(object), Value::Object(fields)) = (json.as_object_mut(), fields) {
        object.extend(fields);
    }
    serde_json::from_value(json).expect("a review")
}

/// A review row as the Java service put it, `json` byte for byte, with its
/// product index row in the seed's layout.
async fn put_java_row(store: &Store, comment: &CommentKey, json: String, at: i64) {
    let tables = store.tables();
    put_value(store, &tables.comment, comment.as_bytes().to_vec(), json.into_bytes()).await;
    let index_key = keys::product_comment_key(&comment.product_id(), at, 20, comment);
    let seed_index_key = index_key[..keys::PRODUCT_COMMENT_SEED_KEY_LEN].to_vec();
    put_value(store, &tables.product_comment, seed_index_key, comment.as_bytes().to_vec()).await;
}

/// The summary of `comments` counted by their JSON, apart from the ranker's
/// code: an integer rating from 1 to 5 is its stars, anything else unrated.
pub(crate) fn count_as_shown(comments: &[Value]) -> ReviewSummary {
    let mut summary = ReviewSummary::default();
    for comment in comments {
        // A number, or a one-digit string as another writer may store it.
        let rating = comment
            .get("rating")
            .and_then(|rating| rating.as_f64().or_else(|| rating.as_str().filter(|text| text.len() == 1)?.parse().ok()))
            .filter(|stars| stars.fract() == 0.0);
        match rating.filter(|stars| (1.0..=5.0).contains(stars)) {
            Some(stars) => summary.rated[stars as usize - 1] += 1,
            None => summary.unrated += 1,
        }
        if comment.get("photos").and_then(Value::as_u64).is_some_and(|photos| photos >= 1) {
            summary.with_photos += 1;
        }
    }
    summary
}

/// Reviews of `product` of every shape a real table holds: through the write
/// path (5, 5, 4 and 1 stars, one unrated; photos 2, 0 and 1), the Java
/// service's rows with ratings that are no stars (0, 6, 4.5, null) and a
/// `"5"`, a review whose content serde_json alone refuses and one whose
/// content is null, a review posted twice in one millisecond (two index rows
/// name it), one posted twice a minute apart (the first post's index row
/// left stale), an index row whose review was never written and one whose
/// review does not decode. 14 reviews show; a day before [`AS_OF_MS`].
pub(crate) async fn mixed_reviews(store: &Store, product: &Id) {
    let tables = store.tables().clone();
    let at = |minutes: i64| AS_OF_MS - DAY_MS - minutes * 60_000;

    // Through the write path: 5, 5, 4 and 1 stars, one unrated; photos 2, 0 and 1.
    let shapes = [(Some(5), Some(2)), (Some(5), None), (Some(4), Some(0)), (Some(1), Some(1)), (None, None)];
    post_reviews(store, product, "SO", &shapes, at(0)).await;

    // The Java service's rows: ratings it could store that are no stars (one
    // an explicit null), two rated ones whose content serde_json alone refuses
    // or is null, a review posted twice in one millisecond (two index rows name
    // it), and one posted twice a minute apart (the first post's index row
    // left stale).
    for (n, rating) in [json!(0), json!(6), json!(4.5), json!("5")].into_iter().enumerate() {
        let order = format!("JORDER{n:04}");
        java_post(store, &java_review(&order, product, at(10 + n as i64), json!({"rating": rating}))).await;
    }
    let row = |order: &Id, content: &str, rating: &str, at: i64| {
        format!(
            r#"{{"orderId":"{order}","productId":"{product}","userId":"JUSPECIAL1","content":{content},"timestamp":{at},"edited":false,"rating":{rating}}}"#
        )
    };
    let null_rating = CommentKey::new(&test_id("JN", 1), product);
    put_java_row(store, &null_rating, row(&null_rating.order_id(), r#""rated null""#, "null", at(15)), at(15)).await;
    let surrogate = CommentKey::new(&test_id("JS", 1), product);
    put_java_row(store, &surrogate, row(&surrogate.order_id(), r#""a cut emoji \uD83D""#, "3", at(20)), at(20)).await;
    java_post(store, &java_review("JNULLCONTE", product, at(21), json!({"content": null, "rating": 2}))).await;
    let same_millisecond = java_review("JSAMEMS001", product, at(22), json!({"rating": 4, "photos": 1}));
    java_post(store, &same_millisecond).await;
    let mut reposted_text = same_millisecond.clone();
    reposted_text.content = Some("the same review, posted again in its millisecond".to_owned());
    java_post(store, &reposted_text).await;
    java_post(store, &java_review("JDOUBLE001", product, at(30), json!({"rating": 5}))).await;
    java_post(store, &java_review("JDOUBLE001", product, at(23), json!({"rating": 5, "photos": 3}))).await;

    // Rows no walk shows: an index row whose review was never written, and one
    // whose review does not decode.
    let ghost = CommentKey::new(&test_id("GH", 1), product);
    put_value(
        store,
        &tables.product_comment,
        keys::product_comment_key(product, at(40), 10, &ghost),
        ghost.as_bytes().to_vec(),
    )
    .await;
    let broken = CommentKey::new(&test_id("BR", 1), product);
    put_value(store, &tables.comment, broken.as_bytes().to_vec(), br#"{"orderId": truncated"#.to_vec()).await;
    put_value(
        store,
        &tables.product_comment,
        keys::product_comment_key(product, at(41), 10, &broken),
        broken.as_bytes().to_vec(),
    )
    .await;
}

#[tokio::test]
async fn a_summary_counts_exactly_the_reviews_a_walk_of_the_latest_pages_lists() {
    let store = fresh_store("summary_exact").await;
    let product = test_id("S", 1);
    mixed_reviews(&store, &product).await;

    let report = rank(&store, &product).await;
    assert_eq!(report.summaries_written, 1);
    let summary = stored_summary(&store, &product).await;
    // Write path 5, Java unrated 4 (0, 6, 4.5, null), Java's "5" as 5 stars,
    // the cut emoji 3 stars, the null content 2 stars, the same-millisecond
    // review once (4 stars, a photo), the reposted one once (5 stars, 3 photos).
    let expected = ReviewSummary { rated: [1, 1, 1, 2, 4], unrated: 5, with_photos: 4 };
    assert_eq!(summary, expected);
    assert_eq!(summary.count(), 14);
    assert_eq!(summary.average(), Some(34.0 / 9.0));
    assert_eq!(report.comments_scored, 14, "each review is scored once");

    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    for limit in [1, 3, 100] {
        let walked = service.walk_v1(&format!("/v1/products/{product}/comments"), limit).await;
        assert_eq!(count_as_shown(&walked), summary, "a walk of pages of {limit}");
    }
    service.shut_down().await;

    let explanation =
        ranker::explain(&store, &product, AS_OF_MS, &ranker::ScoringConfig::default(), 3).await.expect("explain");
    assert_eq!(explanation.reviews, summary, "explain counts what the run wrote");
    let shown = ranker::console::explanation(&explanation);
    let line = format!("14 reviews: 5* 4, 4* 2, 3* 1, 2* 1, 1* 1, unrated 5; average {:.2}; 4 with photos", 34.0 / 9.0);
    assert!(shown.contains(&line), "{shown}");
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_product_whose_reviews_are_all_gone_keeps_a_summary_of_none() {
    let store = fresh_store("summary_gone").await;
    let product = test_id("S", 2);
    let posted = post_reviews(&store, &product, "GO", &[(Some(4), None), (Some(4), None)], AS_OF_MS - DAY_MS).await;
    rank(&store, &product).await;
    assert_eq!(stored_summary(&store, &product).await.count(), 2);

    for review in &posted {
        store.delete_comment(&review.order_id, &product).await.expect("delete");
    }
    let report = rank(&store, &product).await;
    assert_eq!((report.products_ranked, report.summaries_written), (1, 1));
    let ranking = store.ranking(&product).await.expect("ranking");
    assert!(ranking.slots.is_empty());
    let summary = ranking.summary.expect("a summary");
    assert_eq!(summary, ReviewSummary::default());
    assert_eq!(summary.average(), None);
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_dry_run_writes_no_summary() {
    let store = fresh_store("summary_dry").await;
    let product = test_id("S", 3);
    let orders = [(test_id("DO", 0), test_id("DU", 0))];
    put_orders(&store, &orders).await;
    post_all(&store, vec![new_comment(&orders[0].0, &product, &orders[0].1, "A review nobody ranks", AS_OF_MS)]).await;
    let mut options = RunOptions::new(Scope::Product(product), AS_OF_MS);
    options.dry_run = true;
    let report = ranker::run(&store, &options, CancellationToken::new()).await.expect("dry run");
    assert_eq!((report.products_ranked, report.summaries_written), (1, 0));
    assert_eq!(store.ranking(&product).await.expect("ranking").summary, None);
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn the_summary_route_answers_the_stored_summary_cached_and_conditionally_like_the_ranked_read() {
    let store = fresh_store("summary_http").await;
    let product = test_id("S", 4);
    post_reviews(&store, &product, "HO", &[(Some(5), Some(1)), (Some(3), Some(1)), (None, None)], AS_OF_MS - DAY_MS)
        .await;
    rank(&store, &product).await;
    let expected = json!({
        "productId": product.as_str(), "count": 3, "ratings": {"1": 0, "2": 0, "3": 1, "4": 0, "5": 1},
        "unrated": 1, "average": 4.0, "withPhotos": 2, "asOf": AS_OF_MS, "complete": true
    });

    let cached = query_api::Settings { ranked_cache_ttl: std::time::Duration::from_secs(10), ..Default::default() };
    for (settings, cache_control) in [(uncached_settings(), "no-cache"), (cached, "public, max-age=10")] {
        let service = TestApp::spawn(store.clone(), settings).await;
        let path = format!("/v1/products/{product}/comments/summary");
        let answer = service.get(&path).await;
        assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.raw);
        assert_eq!(answer.body, expected);
        assert_eq!(answer.headers["cache-control"], cache_control);
        let tag = answer.headers["etag"].to_str().expect("an ETag").to_owned();
        let again = service.get_if_none_match(&path, &tag).await;
        assert_eq!(again.status, reqwest::StatusCode::NOT_MODIFIED);

        let ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
        assert_eq!(ranked.body["summary"], expected, "the ranked answer carries the same summary");
        assert_eq!(ranked.comment_keys().len(), 3);
        let limited = service.get(&format!("/v1/products/{product}/comments/ranked?limit=1")).await;
        assert_eq!(limited.body["summary"], expected);

        let unranked = service.get(&format!("/v1/products/{}/comments/summary", test_id("S", 5))).await;
        unranked.assert_error(reqwest::StatusCode::NOT_FOUND, "no_summary");
        let unranked_page = service.get(&format!("/v1/products/{}/comments/ranked", test_id("S", 5))).await;
        assert!(unranked_page.body["summary"].is_null(), "{}", unranked_page.raw);
        service
            .get("/v1/products/short/comments/summary")
            .await
            .assert_error(reqwest::StatusCode::BAD_REQUEST, "invalid_id");
        service.shut_down().await;
    }
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_review_the_java_service_posts_again_after_a_run_counts_twice_until_the_next_run() {
    // The documented gap (common::store::summaries): the run counted the
    // first post, the read counts the second, and the next run counts it once.
    let store = fresh_store("summary_repost").await;
    let product = test_id("S", 9);
    let first = java_review("JREPOST001", &product, AS_OF_MS - DAY_MS, json!({"rating": 5}));
    java_post(&store, &first).await;
    java_post(&store, &java_review("JOTHER0001", &product, AS_OF_MS - DAY_MS + 60_000, json!({"rating": 3}))).await;
    rank(&store, &product).await;
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let path = format!("/v1/products/{product}/comments/summary");
    assert_eq!(service.get(&path).await.body["count"], 2);

    java_post(&store, &java_review("JREPOST001", &product, AS_OF_MS + 1_000, json!({"rating": 5}))).await;
    assert_eq!(service.walk_v1(&format!("/v1/products/{product}/comments"), 10).await.len(), 2, "shown once");
    assert_eq!(service.get(&path).await.body["count"], 3, "counted twice until the next run");

    let next_night = RunOptions::new(Scope::Product(product), AS_OF_MS + 2_000);
    ranker::run(&store, &next_night, CancellationToken::new()).await.expect("the next run");
    assert_eq!(service.get(&path).await.body["count"], 2, "once after it");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uncached_loads_of_one_and_of_many_products_each_get_their_own_ranking() {
    // Loads asking at once share their reads (query_api::ranking_batches):
    // the same product twice in a batch, and products with and without newer
    // reviews, each get exactly what a load alone gets, for fewer HBase calls.
    let store = fresh_store("summary_shared_loads").await;
    let products: Vec<Id> = (20..24).map(|n| test_id("S", n)).collect();
    for product in &products {
        mixed_reviews(&store, product).await;
    }
    for product in &products[..3] {
        rank(&store, product).await;
    }
    let (thrift1, thrift2) = (FaultyProxy::start(&thrift_addr()).await, FaultyProxy::start(&thrift2_addr()).await);
    let patient = ["--hbase-timeout-ms", "6000", "--request-timeout-ms", "8000"];
    let store_via_proxies = service_store_via(&thrift1.address(), &thrift2.address(), &store, &patient);
    // No last good copies: a failed load must show, not be answered from a copy.
    let settings =
        Settings { request_timeout: Duration::from_secs(8), stale_if_error: Duration::ZERO, ..uncached_settings() };
    let service = TestApp::spawn(store_via_proxies, settings).await;
    let calls = || thrift1.call_chunks() + thrift2.call_chunks();
    let calls_before_alone = calls();
    let alone: Vec<(String, String)> = {
        let mut answers = Vec::new();
        for product in &products {
            let ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
            let summary = service.get(&format!("/v1/products/{product}/comments/summary")).await;
            assert_eq!((ranked.status, summary.status), (reqwest::StatusCode::OK, reqwest::StatusCode::OK));
            answers.push((ranked.raw, summary.raw));
        }
        answers
    };
    // Each of those eight loads was alone: each product's two loads made
    // the HBase calls of two loads of it in batches of their own.
    let calls_alone = calls() - calls_before_alone;
    // Slow answers keep the first batches in flight while the rest of the
    // requests queue, so the next batch holds every product, most of them twice.
    thrift1.set_mode(ProxyMode::Delay(Duration::from_millis(100)));
    thrift2.set_mode(ProxyMode::Delay(Duration::from_millis(100)));
    let calls_before_together = calls();
    let requests = (0..64).map(|turn| {
        let (index, ranked) = (turn % products.len(), turn % 3 == 0);
        let route = if ranked { "ranked" } else { "summary" };
        let path = format!("/v1/products/{}/comments/{route}", products[index]);
        let service = &service;
        async move { (index, ranked, service.get(&path).await) }
    });
    for (index, ranked, answer) in futures_util::future::join_all(requests).await {
        assert_eq!(answer.status, reqwest::StatusCode::OK, "{}", answer.raw);
        let expected = if ranked { &alone[index].0 } else { &alone[index].1 };
        assert_eq!(&answer.raw, expected, "product {} read with others", products[index]);
    }
    // The 64 loads, 16 of each product, would each have cost what a load of
    // it alone costs: eight times the calls of the eight loads above. Loads
    // that shared a batch shared its calls.
    let calls_together = calls() - calls_before_together;
    let calls_unbatched = calls_alone * 64 / 8;
    assert!(
        calls_together * 2 <= calls_unbatched,
        "the loads formed batches: {calls_together} HBase calls for 64 loads, {calls_unbatched} without batches"
    );
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

/// Loads that wait for a batch at most (`query_api::ranking_batches`'s
/// `MAX_QUEUED_LOADS`), beside those in the batches in flight: four batches
/// of 32 at most, and one load taken that waits for a batch to finish.
const MOST_LOADS_ADMITTED_AT_ONCE: usize = 256 + 4 * 32 + 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ranking_loads_beyond_the_256_waiting_for_a_batch_are_refused_at_once_and_counted() {
    let store = fresh_store("summary_loads_queue").await;
    let product = test_id("S", 30);
    post_reviews(&store, &product, "QF", &[(Some(5), Some(1)), (Some(3), None)], AS_OF_MS - DAY_MS).await;
    rank(&store, &product).await;
    let (thrift1, thrift2) = (FaultyProxy::start(&thrift_addr()).await, FaultyProxy::start(&thrift2_addr()).await);
    // Deadlines far beyond the held answers below, so only the loads' queue refuses.
    let patient = ["--hbase-timeout-ms", "30000", "--request-timeout-ms", "40000"];
    let store_via_proxies = service_store_via(&thrift1.address(), &thrift2.address(), &store, &patient);
    // No last good copies: a refused load must show as the refusal, not as a kept copy.
    let settings =
        Settings { request_timeout: Duration::from_secs(40), stale_if_error: Duration::ZERO, ..uncached_settings() };
    let service = TestApp::spawn(store_via_proxies, settings).await;
    let url = format!("{}/v1/products/{product}/comments/summary", service.base);
    let alone = service.get(&format!("/v1/products/{product}/comments/summary")).await;
    assert_eq!(alone.status, reqwest::StatusCode::OK, "{}", alone.raw);
    let queue_full = r#"reviews_hbase_overloaded_total{reason="queue_full"}"#;
    let refused_before = counter_value(&service.metrics().await, queue_full);

    // Every answer of HBase is held five seconds: the first batches keep
    // their loads while all the requests arrive (the ranked cache is off, so
    // each is a load of its own), and the queue behind them fills.
    let hold = Duration::from_secs(5);
    thrift1.set_mode(ProxyMode::Delay(hold));
    thrift2.set_mode(ProxyMode::Delay(hold));
    let loads = MOST_LOADS_ADMITTED_AT_ONCE + 35;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
    let refused = Arc::new(AtomicUsize::new(0));
    let requests = (0..loads).map(|_| {
        let (request, refused) = (client.get(&url), refused.clone());
        async move {
            let sent = Instant::now();
            let answer = Answer::from_response(request.send().await.expect("GET")).await;
            if answer.status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
                refused.fetch_add(1, Ordering::SeqCst);
            }
            (answer, sent.elapsed())
        }
    });
    let answers = tokio::spawn(futures_util::future::join_all(requests));
    let least_refused = loads - MOST_LOADS_ADMITTED_AT_ONCE;
    wait_for(Duration::from_secs(30), &format!("{least_refused} loads refused"), async || {
        (refused.load(Ordering::SeqCst) >= least_refused).then_some(())
    })
    .await;
    // HBase answers at once again: the batches finish and the loads waiting are served.
    thrift1.set_mode(ProxyMode::Pass);
    thrift2.set_mode(ProxyMode::Pass);
    let answers = answers.await.expect("the requests");

    let mut refusals = 0;
    for (answer, took) in &answers {
        if answer.status == reqwest::StatusCode::OK {
            assert_eq!(answer.raw, alone.raw, "a load admitted is answered as a load alone");
        } else {
            answer.assert_error(reqwest::StatusCode::SERVICE_UNAVAILABLE, "overloaded");
            assert!(*took < hold, "refused at once, without waiting for HBase: {took:?}");
            refusals += 1;
        }
    }
    assert!(refusals >= least_refused, "{refusals} of {loads} loads refused");
    assert!(refusals < loads, "the loads admitted are served");
    // The counter is the process's, and other tests may add to it, never take from it.
    let refused_after = counter_value(&service.metrics().await, queue_full);
    assert!(
        refused_after - refused_before >= refusals as f64,
        "{queue_full} counts each: {refused_before} to {refused_after}"
    );
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

/// The value of the sample `series` (its name and labels, as `/metrics` prints them); 0 when absent.
fn counter_value(metrics: &str, series: &str) -> f64 {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}
