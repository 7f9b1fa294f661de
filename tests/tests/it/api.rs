//! The query service end to end: started on port 0 against the real HBase and
//! called over HTTP, as a frontend would. Pagination (including the seed's
//! 18- and 23-byte index keys and comments arriving mid-walk), every 400, the
//! 404/405 shape, ranked reads and their cache, 503 with HBase unreachable,
//! recovery after a private gateway restarts, graceful shutdown, and
//! conditional reads (ETag, 304 without HBase).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::keys::{self, CommentKey};
use common::model::{Comment, Extra, User};
use common::store::{NewComment, Store};
use common::Id;
use integration_tests::app::{closed_address, comment_keys, service_store, Answer, TestApp};
use integration_tests::fixtures::{new_comment, put_orders, write_ranking};
use integration_tests::{fresh_store, test_id, thrift_addr, FaultyProxy, PrivateGateway, ProxyMode};
use query_api::Settings;
use reqwest::StatusCode;
use serde_json::json;

use crate::rows::put_values;

/// The service's default HBase deadline (a gateway that refuses is tried
/// again until it passes, in case it is back), plus room for the HTTP round
/// trip itself on a loaded two-core CI machine.
fn unavailable_within() -> Duration {
    let deadline_ms: u64 = query_api::config::DEFAULT_HBASE_TIMEOUT_MS.parse().expect("a number of milliseconds");
    Duration::from_millis(deadline_ms + 800)
}

/// Posts `count` comments by `user` on `product`, one on each order
/// `test_id(order_prefix, n)` (written first), saying "`content` n", `spacing_ms`
/// apart from 1,700,000,000,000 ms, oldest first: the small data set of the
/// ranked, handler and ETag tests.
async fn post_numbered_comments(
    store: &Store,
    product: &Id,
    user: &Id,
    (order_prefix, count): (&str, u64),
    content: &str,
    spacing_ms: i64,
) -> Vec<Comment> {
    let orders: Vec<(Id, Id)> = (0..count).map(|n| (test_id(order_prefix, n), *user)).collect();
    put_orders(store, &orders).await;
    let comments = orders
        .iter()
        .zip(0_i64..)
        .map(|((order, user), n)| {
            new_comment(order, product, user, format!("{content} {n}"), 1_700_000_000_000 + n * spacing_ms)
        })
        .collect();
    store.post_comments(comments).await.expect("comments")
}

/// Asserts `answer` is the 503 of HBase failing: `unavailable` when the
/// gateway refused in time, `timeout` when a loaded machine started the read so
/// late that the request's own deadline came first.
fn assert_store_failure(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.raw);
    let code = answer.body["error"]["code"].as_str().unwrap_or_default();
    assert!(["unavailable", "timeout"].contains(&code), "{}", answer.raw);
    assert!(answer.has_error_shape(), "{}", answer.raw);
}

/// A `/v1` ranked page as (rank, score, content) rows, in page order.
fn ranked_rows(page: &Answer) -> Vec<(u64, f64, String)> {
    page.comment_values()
        .iter()
        .map(|comment| {
            (
                comment["rank"].as_u64().expect("rank"),
                comment["score"].as_f64().expect("score"),
                comment["content"].as_str().expect("content").to_owned(),
            )
        })
        .collect()
}

/// The data set of the pagination tests: one product and one user with many
/// comments (several per millisecond, some of equal length), rows in the seed's
/// format, a dangling index row, and neighbouring products on both sides.
struct Catalogue {
    product: Id,
    user: Id,
    /// Every readable comment of `product`, in index order (newest first).
    product_order: Vec<CommentKey>,
    /// Every readable comment of `user`, in index order (newest first).
    user_order: Vec<CommentKey>,
    base_ms: i64,
}

async fn write_catalogue(store: &Store) -> Catalogue {
    let base_ms = 1_700_000_000_000;
    let product = test_id("P", 1);
    let neighbours = [test_id("P", 0), test_id("P", 2)];
    let users = [test_id("U", 1), test_id("U", 2), test_id("U", 3)];
    let mut orders = Vec::new();
    let mut comments = Vec::new();
    for n in 0..40_u64 {
        let order = test_id("O", n);
        let user = users[usize::try_from(n % 3).expect("small")];
        orders.push((order, user));
        // Three comments per millisecond; contents of equal length at one
        // millisecond make the tie suffix decide their order.
        let timestamp = base_ms + i64::try_from(n / 3).expect("small") * 1_000;
        let content = format!("review {:02} {}", n, "x".repeat(usize::try_from(n % 2).expect("small")));
        comments.push(new_comment(&order, &product, &user, content, timestamp));
    }
    for (index, neighbour) in neighbours.iter().enumerate() {
        for n in 0..3_u64 {
            let order = test_id("N", u64::try_from(index).expect("small") * 10 + n);
            orders.push((order, users[0]));
            comments.push(new_comment(&order, neighbour, &users[0], format!("neighbour {n}"), base_ms + 999_000));
        }
    }
    put_orders(store, &orders).await;
    let posted = store.post_comments(comments).await.expect("post comments");

    // Rows the seed's Java service wrote: JSON with its rowKey getter, and
    // index keys without the tie (23 and 18 bytes).
    let tables = store.tables().clone();
    let (mut seed_comments, mut seed_product_rows, mut seed_user_rows) = (Vec::new(), Vec::new(), Vec::new());
    let mut seed_keys = Vec::new();
    for n in 0..6_u64 {
        let order = test_id("S", n);
        let user = users[0];
        let key = CommentKey::new(&order, &product);
        let timestamp = base_ms + 500 + i64::try_from(n).expect("small") * 7_000;
        let content = format!("seed review {n}");
        let edited_field = if n % 2 == 0 { "edited" } else { "isEdited" };
        let json = json!({
            "orderId": order.as_str(), "productId": product.as_str(), "userId": user.as_str(),
            "content": content, "timestamp": timestamp, edited_field: false,
            "rowKey": STANDARD.encode(key.as_bytes()),
        });
        seed_comments.push((key.as_bytes().to_vec(), serde_json::to_vec(&json).expect("json")));
        let product_key = keys::product_comment_key(&product, timestamp, content.len(), &key);
        seed_product_rows.push((product_key[..keys::PRODUCT_COMMENT_SEED_KEY_LEN].to_vec(), key.as_bytes().to_vec()));
        let user_key = keys::user_comment_key(&user, timestamp, &key);
        seed_user_rows.push((user_key[..keys::USER_COMMENT_SEED_KEY_LEN].to_vec(), key.as_bytes().to_vec()));
        seed_keys.push((key, timestamp, content.len(), user));
    }
    // An index row whose comment was never written: readers skip it.
    let dangling = CommentKey::new(&test_id("D", 1), &product);
    seed_product_rows
        .push((keys::product_comment_key(&product, base_ms + 3_500, 5, &dangling), dangling.as_bytes().to_vec()));
    put_values(store, &tables.comment, seed_comments).await;
    put_values(store, &tables.product_comment, seed_product_rows).await;
    put_values(store, &tables.user_comment, seed_user_rows).await;

    // The expected orders are the index key orders, from the key builders.
    let mut product_rows: Vec<(Vec<u8>, CommentKey)> = posted
        .iter()
        .filter(|comment| comment.product_id == product)
        .map(|comment| {
            let key = comment.row_key();
            (keys::product_comment_key(&product, comment.timestamp, comment.content_utf8_len(), &key), key)
        })
        .collect();
    let mut user_rows: Vec<(Vec<u8>, CommentKey)> = posted
        .iter()
        .filter(|comment| comment.user_id == users[0])
        .map(|comment| (keys::user_comment_key(&users[0], comment.timestamp, &comment.row_key()), comment.row_key()))
        .collect();
    for (key, timestamp, length, user) in seed_keys {
        let product_key = keys::product_comment_key(&product, timestamp, length, &key);
        product_rows.push((product_key[..keys::PRODUCT_COMMENT_SEED_KEY_LEN].to_vec(), key));
        let user_key = keys::user_comment_key(&user, timestamp, &key);
        user_rows.push((user_key[..keys::USER_COMMENT_SEED_KEY_LEN].to_vec(), key));
    }
    product_rows.sort();
    user_rows.sort();
    Catalogue {
        product,
        user: users[0],
        product_order: product_rows.into_iter().map(|(_, key)| key).collect(),
        user_order: user_rows.into_iter().map(|(_, key)| key).collect(),
        base_ms,
    }
}

#[tokio::test]
async fn walking_every_page_returns_every_comment_once_newest_first() {
    let store = fresh_store("api_walk").await;
    let catalogue = write_catalogue(&store).await;
    let service = TestApp::spawn(store.clone(), Settings::default()).await;
    let product_path = format!("/v1/products/{}/comments", catalogue.product);

    // Walk the product by hand, posting newer comments after the first page:
    // they sort before the cursor, so the walk neither repeats nor skips anything.
    let first = service.get(&format!("{product_path}?limit=7")).await;
    let mut seen = first.comment_keys();
    let late_orders: Vec<(Id, Id)> = (0..3).map(|n| (test_id("L", n), catalogue.user)).collect();
    put_orders(&store, &late_orders).await;
    let late: Vec<NewComment> = late_orders
        .iter()
        .map(|(order, user)| {
            new_comment(order, &catalogue.product, user, "arrived mid-walk", catalogue.base_ms + 5_000_000)
        })
        .collect();
    store.post_comments(late).await.expect("late comments");
    let mut cursor = first.body["nextCursor"].as_str().map(str::to_owned);
    while let Some(next) = cursor {
        let page = service.get(&format!("{product_path}?limit=7&cursor={next}")).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        seen.extend(page.comment_keys());
        cursor = page.body["nextCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(seen, catalogue.product_order, "every comment once, newest first, none of the late ones");

    // A fresh walk sees the late comments first, then the same list.
    let late_keys: HashSet<CommentKey> =
        late_orders.iter().map(|(order, _)| CommentKey::new(order, &catalogue.product)).collect();
    let again = comment_keys(&service.walk_v1(&product_path, 100).await);
    assert_eq!(again[..3].iter().copied().collect::<HashSet<_>>(), late_keys);
    assert_eq!(again[3..], catalogue.product_order[..]);
    assert_eq!(again.iter().collect::<HashSet<_>>().len(), again.len(), "no comment twice");

    // The user's timeline, and the seed's routes for both lists, with page sizes
    // that do and do not divide the list.
    let user_path = format!("/v1/users/{}/comments", catalogue.user);
    let user_walk = comment_keys(&service.walk_v1(&user_path, 1).await);
    assert_eq!(user_walk[3..], catalogue.user_order[..]);
    let seed_product = comment_keys(
        &service
            .walk_seed(&format!("/product/{}/comments/latest", catalogue.product), "/product/comments/get", 5)
            .await,
    );
    assert_eq!(seed_product[3..], catalogue.product_order[..]);
    let seed_user = comment_keys(
        &service.walk_seed(&format!("/user/{}/comments/latest", catalogue.user), "/user/comments/get", 4).await,
    );
    assert_eq!(seed_user[3..], catalogue.user_order[..]);

    // Seed routes show each comment as the seed's Jackson did, rowKey included exactly once.
    let seed_page = service.get(&format!("/product/{}/comments/latest?limit=100", catalogue.product)).await;
    for comment in seed_page.body["comments"].as_array().expect("comments") {
        let key = CommentKey::new(
            &Id::parse("orderId", comment["orderId"].as_str().expect("orderId")).expect("id"),
            &catalogue.product,
        );
        assert_eq!(comment["rowKey"], STANDARD.encode(key.as_bytes()), "{comment}");
        assert!(comment.get("edited").is_some(), "{comment}");
    }
    service.shut_down().await;
}

#[tokio::test]
async fn seed_next_pages_never_read_past_their_product() {
    let store = fresh_store("api_seed_prefix").await;
    let catalogue = write_catalogue(&store).await;
    let service = TestApp::spawn(store.clone(), Settings::default()).await;
    // P1's rows are followed in the table by P2's: a start key near P1's end
    // with a large limit must stop at P1's last comment.
    let head = service.get(&format!("/product/{}/comments/latest?limit=44", catalogue.product)).await;
    let start = head.body["nextIndexKey"].as_str().expect("rows left after the first page").to_owned();
    let tail = service.post_json("/product/comments/get", &json!({"startIndexKey": start, "limit": 100})).await;
    assert_eq!(tail.status, StatusCode::OK, "{}", tail.body);
    let shown = head.comment_keys().len();
    assert!(shown < catalogue.product_order.len());
    assert_eq!(tail.comment_keys(), catalogue.product_order[shown..]);
    assert!(tail.body["nextIndexKey"].is_null(), "{}", tail.body);

    // The bare prefix (11 bytes) is a valid start: the product's newest comment.
    let prefix = keys::product_comment_prefix(&catalogue.product);
    let from_prefix = service
        .post_json("/product/comments/get", &json!({"startIndexKey": STANDARD.encode(&prefix), "limit": 2}))
        .await;
    assert_eq!(from_prefix.comment_keys(), catalogue.product_order[..2]);
    service.shut_down().await;
}

#[tokio::test]
async fn every_bad_request_answers_400_with_a_code() {
    let store = fresh_store("api_bad_requests").await;
    let catalogue = write_catalogue(&store).await;
    let service = TestApp::spawn(store.clone(), Settings::default()).await;
    let product = catalogue.product;

    for path in [
        "/v1/products/P1/comments",
        "/v1/products/P00000000001/comments",
        "/v1/products/P0000%2F001/comments",
        "/v1/users/U%FF00000001/comments",
        "/v1/products/P%0900000001/comments/ranked",
        "/product/P000000%2F01/comments/latest",
        "/user/u/comments/latest",
        "/product/%00%00%00%00%00%00%00%00%00%00/comments/ranked",
    ] {
        service.get(path).await.assert_error(StatusCode::BAD_REQUEST, "invalid_id");
    }
    for limit in ["0", "101", "-5", "ten", "", "2.5"] {
        service
            .get(&format!("/v1/products/{product}/comments?limit={limit}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_limit");
        service
            .get(&format!("/product/{product}/comments/ranked?limit={limit}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_limit");
    }

    // A real cursor of another product, a user's cursor, garbage, and a forged key.
    let neighbour_page = service.get(&format!("/v1/products/{}/comments?limit=1", test_id("P", 0))).await;
    let neighbour_cursor = neighbour_page.body["nextCursor"].as_str().expect("a neighbour cursor").to_owned();
    let user_page = service.get(&format!("/v1/users/{}/comments?limit=1", catalogue.user)).await;
    let user_cursor = user_page.body["nextCursor"].as_str().expect("a user cursor").to_owned();
    let forged = common::cursor::encode(b"P000000001r\x00\x01");
    for cursor in [neighbour_cursor.as_str(), user_cursor.as_str(), "%%%", "!!", forged.as_str(), "AAAA"] {
        service
            .get(&format!("/v1/products/{product}/comments?cursor={cursor}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");
    }
    let product_cursor = service.get(&format!("/v1/products/{product}/comments?limit=1")).await.body["nextCursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    service
        .get(&format!("/v1/users/{}/comments?cursor={product_cursor}", catalogue.user))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");

    for (route, body, code) in [
        ("/product/comments/get", json!({}), "invalid_body"),
        ("/product/comments/get", json!({"startIndexKey": 42}), "invalid_body"),
        ("/product/comments/get", json!({"startIndexKey": "not base64!"}), "invalid_cursor"),
        ("/product/comments/get", json!({"startIndexKey": STANDARD.encode(b"P000000001")}), "invalid_cursor"),
        ("/product/comments/get", json!({"startIndexKey": STANDARD.encode(b"P000000001r\x00\x01")}), "invalid_cursor"),
        ("/product/comments/get", json!({"startIndexKey": STANDARD.encode([b'P'; 60])}), "invalid_cursor"),
        ("/user/comments/get", json!({"startIndexKey": STANDARD.encode(b"U0000/0001\x7f")}), "invalid_cursor"),
        (
            "/user/comments/get",
            json!({"startIndexKey": STANDARD.encode(b"U000000001\x7f"), "limit": 101}),
            "invalid_limit",
        ),
        ("/user/comments/get", json!([]), "invalid_body"),
    ] {
        service.post_json(route, &body).await.assert_error(StatusCode::BAD_REQUEST, code);
    }
    let not_json = service
        .client
        .post(format!("{}/product/comments/get", service.base))
        .header("content-type", "application/json")
        .body("{\"startIndexKey\":")
        .send()
        .await
        .expect("POST");
    Answer::from_response(not_json).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    service.shut_down().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_404_and_405_in_json() {
    let store = fresh_store("api_routes").await;
    let service = TestApp::spawn(store, Settings::default()).await;
    service.get("/").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    service.get("/v2/products/P000000001/comments").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    service.get("/product/comments/get").await.assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    service
        .post_json("/v1/products/P000000001/comments", &json!({}))
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let response = service.client.put(format!("{}/readyz", service.base)).send().await.expect("PUT");
    Answer::from_response(response).await.assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    // Health, readiness, metrics, the document and the docs page answer.
    assert_eq!(service.get("/healthz").await.body["status"], "ok");
    assert_eq!(service.get("/readyz").await.body["status"], "ready");
    assert!(service.get("/openapi.json").await.body["paths"]["/product/comments/get"]["post"].is_object());
    let docs = service.client.get(format!("{}/docs/", service.base)).send().await.expect("docs");
    assert_eq!(docs.status(), StatusCode::OK);
    service.shut_down().await;
}

#[tokio::test]
async fn ranked_reads_follow_the_slots_and_skip_gone_comments() {
    let store = fresh_store("api_ranked").await;
    let product = test_id("R", 1);
    let user = test_id("U", 9);
    let posted = post_numbered_comments(&store, &product, &user, ("RO", 4), "ranked review", 1).await;
    let slots = [
        (posted[2].row_key(), 0.91),
        (posted[0].row_key(), 0.75),
        (posted[3].row_key(), 0.5),
        (posted[1].row_key(), 0.25),
    ];
    write_ranking(&store, &product, &slots).await;
    store.delete_comment(&posted[3].order_id, &product).await.expect("delete one");

    let ttl = Duration::from_secs(3);
    let service = TestApp::spawn(store.clone(), Settings { ranked_cache_ttl: ttl, ..Settings::default() }).await;
    let ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(ranked.status, StatusCode::OK, "{}", ranked.body);
    assert_eq!(ranked.headers["cache-control"], "public, max-age=3");
    let shown = ranked_rows(&ranked);
    let expected = [
        (1, 0.91, posted[2].text().to_owned()),
        (2, 0.75, posted[0].text().to_owned()),
        (4, 0.25, posted[1].text().to_owned()),
    ];
    assert_eq!(shown, expected, "rank order, slot 3's comment is gone");
    let limited = service.get(&format!("/v1/products/{product}/comments/ranked?limit=2")).await;
    assert_eq!(limited.comment_keys(), [posted[2].row_key(), posted[0].row_key()]);
    let seed = service.get(&format!("/product/{product}/comments/ranked")).await;
    assert_eq!(seed.comment_keys(), [posted[2].row_key(), posted[0].row_key(), posted[1].row_key()]);
    assert!(seed.body["nextIndexKey"].is_null());
    assert!(seed.body["comments"][0].get("rank").is_none(), "the seed's shape has no rank");

    // A new ranking shows once the cache entry expires, not before.
    write_ranking(&store, &product, &[(posted[1].row_key(), 0.99)]).await;
    let cached = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(cached.comment_keys().len(), 3, "served from the cache within its TTL");
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let fresh = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(fresh.comment_keys(), [posted[1].row_key()]);

    // A product nobody ranked has an empty ranking.
    let empty = service.get(&format!("/v1/products/{}/comments/ranked", test_id("R", 2))).await;
    assert_eq!(empty.body["comments"], json!([]));

    let text = service.metrics().await;
    for series in [
        "reviews_api_ranked_cache_requests_total{result=\"hit\"}",
        "reviews_hbase_call_seconds",
        "reviews_skipped_rows_total",
    ] {
        assert!(text.contains(series), "{series} missing from /metrics");
    }
    service.shut_down().await;
}

#[tokio::test]
async fn an_unreachable_gateway_answers_503_within_the_hbase_deadline() {
    let store = fresh_store("api_unreachable").await;
    let unreachable = service_store(&closed_address(), &store, &[]);
    let service = TestApp::spawn(unreachable, Settings::default()).await;
    let product = test_id("P", 1);
    for path in [
        format!("/v1/products/{product}/comments"),
        format!("/v1/products/{product}/comments/ranked"),
        format!("/product/{product}/comments/latest"),
        "/readyz".to_owned(),
    ] {
        let started = Instant::now();
        let answer = service.get(&path).await;
        let elapsed = started.elapsed();
        answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert!(elapsed < unavailable_within(), "{path} took {elapsed:?}");
    }
    let started = Instant::now();
    let start_key = STANDARD.encode(keys::product_comment_prefix(&product));
    service
        .post_json("/product/comments/get", &json!({"startIndexKey": start_key}))
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(started.elapsed() < unavailable_within());
    assert_eq!(service.get("/healthz").await.status, StatusCode::OK, "the process itself stays healthy");
    service.shut_down().await;
}

#[tokio::test]
async fn the_service_recovers_by_itself_when_its_gateway_returns() {
    let store = fresh_store("api_recovery").await;
    let catalogue = write_catalogue(&store).await;
    let gateway = Arc::new(tokio::task::spawn_blocking(PrivateGateway::start).await.expect("start a private gateway"));
    let service = TestApp::spawn(service_store(&gateway.address(), &store, &[]), Settings::default()).await;
    let path = format!("/v1/products/{}/comments?limit=100", catalogue.product);
    // A gateway just started answers its first calls slowly (it opens its own
    // HBase connection and looks the regions up), which on a loaded two-core
    // machine can outlast the service's 2.5 s deadline: the page is served
    // once it answers, and only then does the outage begin.
    let served = integration_tests::wait_for(Duration::from_secs(60), "the page through the new gateway", async || {
        Some(service.get(&path).await).filter(|answer| answer.status == StatusCode::OK)
    })
    .await;
    assert_eq!(served.comment_keys(), catalogue.product_order);

    let stopping = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || stopping.stop()).await.expect("stop the private gateway");
    // The page served before is answered from its last good copy; one never served answers 503.
    let never_served = format!("/v1/products/{}/comments?limit=99", catalogue.product);
    for _ in 0..3 {
        let started = Instant::now();
        let answer = service.get(&path).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        assert!(answer.headers.contains_key("age"), "a stale copy says its age");
        assert!(started.elapsed() < unavailable_within(), "the stale copy took {:?}", started.elapsed());
        let started = Instant::now();
        assert_store_failure(&service.get(&never_served).await);
        assert!(started.elapsed() < unavailable_within(), "503 took {:?}", started.elapsed());
    }
    assert_store_failure(&service.get("/readyz").await);

    let resuming = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || resuming.resume()).await.expect("restart the private gateway");
    // A fresh gateway JVM on a busy two-core machine can take seconds to answer its first calls.
    let recovered =
        integration_tests::wait_for(Duration::from_secs(60), "an answer after the gateway returned", async || {
            Some(service.get(&path).await)
                .filter(|answer| answer.status == StatusCode::OK && !answer.headers.contains_key("age"))
        })
        .await;
    assert_eq!(recovered.comment_keys(), catalogue.product_order);
    // Readiness lists the tables through the new gateway, whose JVM may still
    // be too cold to answer within the deadline of the first calls.
    integration_tests::wait_for(Duration::from_secs(60), "readiness after the gateway returned", async || {
        Some(service.get("/readyz").await).filter(|ready| ready.status == StatusCode::OK)
    })
    .await;
    service.shut_down().await;
    tokio::task::spawn_blocking(move || drop(gateway)).await.expect("stop the private gateway for good");
}

#[tokio::test]
async fn shutdown_drains_requests_in_flight_up_to_the_deadline() {
    let store = fresh_store("api_shutdown").await;
    // HBase is unreachable with a 3 s deadline, so each request takes about 3 s.
    let slow_flags = ["--hbase-timeout-ms", "3000", "--request-timeout-ms", "5000"];
    let path = format!("/v1/products/{}/comments", test_id("P", 1));

    // A generous drain deadline: the request in flight gets its answer before serve returns.
    let patient = Settings { drain_deadline: Duration::from_secs(10), ..Settings::default() };
    let service = TestApp::spawn(service_store(&closed_address(), &store, &slow_flags), patient).await;
    let in_flight = tokio::spawn({
        let request = service.client.get(format!("{}{path}", service.base));
        async move { request.send().await.map(|response| response.status()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let base = service.base.clone();
    service.shut_down_within(Duration::from_secs(8)).await;
    assert_eq!(in_flight.await.expect("task").expect("answered"), StatusCode::SERVICE_UNAVAILABLE);
    let refused = reqwest::Client::new().get(format!("{base}/healthz")).send().await;
    assert!(refused.is_err(), "a stopped service must not accept connections");

    // A short drain deadline: serve returns at the deadline, not when the request would finish.
    let hasty = Settings { drain_deadline: Duration::from_millis(200), ..Settings::default() };
    let service = TestApp::spawn(service_store(&closed_address(), &store, &slow_flags), hasty).await;
    let in_flight = tokio::spawn(service.client.get(format!("{}{path}", service.base)).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    service.shut_down_within(Duration::from_secs(8)).await;
    assert!(started.elapsed() < Duration::from_millis(1_500), "serve took {:?} to return", started.elapsed());
    in_flight.abort();
}

#[tokio::test]
async fn pages_and_rankings_come_from_hbase() {
    let store = fresh_store("api_handlers").await;
    let user = test_id("U", 1);
    let product = test_id("P", 1);
    store
        .put_records(&[User { id: user, name: "Kim".into(), nickname: "k".into(), extra: Extra::new() }])
        .await
        .expect("user");
    let posted = post_numbered_comments(&store, &product, &user, ("O", 5), "review number", 1_000).await;
    let service = TestApp::spawn(store.clone(), Settings::default()).await;

    // Two pages of two and a last page of one, newest first.
    let mut seen = Vec::new();
    let mut path = format!("/v1/products/{product}/comments?limit=2");
    loop {
        let page = service.get(&path).await.body;
        for comment in page["comments"].as_array().expect("comments") {
            seen.push(comment["content"].as_str().expect("content").to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/v1/products/{product}/comments?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    let newest_first: Vec<String> = posted.iter().rev().map(|comment| comment.text().to_owned()).collect();
    assert_eq!(seen, newest_first);

    // Ranked: slot 2 names a comment that is then deleted, so it is skipped.
    let ranked = [(posted[1].row_key(), 0.9), (posted[3].row_key(), 0.8), (posted[0].row_key(), 0.7)];
    write_ranking(&store, &product, &ranked).await;
    store.delete_comment(&posted[3].order_id, &product).await.expect("delete");
    let answer = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["cache-control"], "public, max-age=10");
    let shown = ranked_rows(&answer);
    assert_eq!(shown, [(1, 0.9, posted[1].text().to_owned()), (3, 0.7, posted[0].text().to_owned())]);
    assert!(answer.body["nextCursor"].is_null());

    let seed = service.get(&format!("/product/{product}/comments/ranked?limit=1")).await.body;
    assert_eq!(seed["comments"].as_array().expect("comments").len(), 1);
    assert_eq!(seed["comments"][0]["content"], posted[1].text());
    assert!(seed["nextIndexKey"].is_null());
    service.shut_down().await;
}

#[tokio::test]
async fn a_changed_answer_gets_a_new_etag_and_the_old_tag_gets_the_new_answer() {
    let store = fresh_store("api_etag_change").await;
    let product = test_id("P", 8);
    let user = test_id("U", 8);
    post_numbered_comments(&store, &product, &user, ("F", 2), "an early review", 1).await;
    let service = TestApp::spawn(store.clone(), Settings::default()).await;
    let path = format!("/v1/products/{product}/comments");
    let before = service.get(&path).await;
    let tag = before.headers[reqwest::header::ETAG].to_str().expect("ascii").to_owned();

    // A third comment, of the same user and product (orders F0, F1 and now F2).
    let newer = new_comment(&test_id("F", 2), &product, &user, "a later review", 1_700_000_100_000);
    put_orders(&store, &[(test_id("F", 2), user)]).await;
    store.post_comments(vec![newer]).await.expect("comment");
    let after = service.get_if_none_match(&path, &tag).await;
    assert_eq!(after.status, StatusCode::OK, "the old tag no longer matches: {}", after.raw);
    assert_ne!(after.headers[reqwest::header::ETAG], tag.as_str(), "a new answer, a new tag");
    assert_eq!(after.comment_values().len(), before.comment_values().len() + 1, "{}", after.raw);
    service.shut_down().await;
}

#[tokio::test]
async fn comment_reads_carry_an_etag_and_a_matching_if_none_match_answers_304_without_hbase() {
    let store = fresh_store("api_etag").await;
    let product = test_id("P", 7);
    let user = test_id("U", 7);
    let posted = post_numbered_comments(&store, &product, &user, ("E", 3), "tagged review", 1).await;
    write_ranking(&store, &product, &[(posted[2].row_key(), 0.9), (posted[0].row_key(), 0.5)]).await;

    // The service reaches HBase through a proxy the test can silence.
    let proxy = FaultyProxy::start(&thrift_addr()).await;
    let settings = Settings { ranked_cache_ttl: Duration::from_secs(600), ..Settings::default() };
    let service = TestApp::spawn(service_store(&proxy.address(), &store, &[]), settings).await;

    let pages = [
        format!("/v1/products/{product}/comments/ranked"),
        format!("/product/{product}/comments/ranked"),
        format!("/v1/products/{product}/comments?limit=2"),
        format!("/v1/users/{user}/comments"),
        format!("/product/{product}/comments/latest"),
        format!("/user/{user}/comments/latest"),
    ];
    // The first calls through the new proxy open its connections to the
    // gateway, which on a loaded two-core machine can fail or outlast the
    // service's deadline (seen: 503 unavailable); the test is about what
    // follows, so it begins once a page is served.
    integration_tests::wait_for(Duration::from_secs(60), "the first page through the proxy", async || {
        Some(service.get(&pages[0]).await).filter(|answer| answer.status == StatusCode::OK)
    })
    .await;
    let mut tags = Vec::new();
    for path in &pages {
        let first = service.get(path).await;
        assert_eq!(first.status, StatusCode::OK, "{path}: {}", first.raw);
        let tag = first
            .headers
            .get(reqwest::header::ETAG)
            .unwrap_or_else(|| panic!("{path} has no ETag"))
            .to_str()
            .expect("ascii");
        let again = service.get(path).await;
        assert_eq!(again.headers[reqwest::header::ETAG], tag, "{path}: the same answer, the same tag");
        let not_modified = service.get_if_none_match(path, tag).await;
        assert_eq!(not_modified.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(not_modified.raw.is_empty(), "{path}: a 304 has no body");
        assert_eq!(not_modified.headers[reqwest::header::ETAG], tag, "{path}");
        let changed = service.get_if_none_match(path, "W/\"0123456789abcdef0123456789abcdef\"").await;
        assert_eq!(changed.status, StatusCode::OK, "{path}: another tag gets the answer");
        assert_eq!(changed.raw, first.raw, "{path}");
        tags.push(tag.to_owned());
    }

    let metrics = service.metrics().await;
    assert!(metrics.contains("reviews_api_ranked_cache_bytes"), "the cache's size is exported:\n{metrics}");

    // With the gateway silent, the cached rankings still answer 304 (without
    // HBase), and every page served answers its last good copy, which the
    // client holds: 304 too. A page never served needs HBase, and fails.
    proxy.set_mode(ProxyMode::BlackHole);
    let answers =
        futures_util::future::join_all(pages.iter().zip(&tags).map(|(path, tag)| service.get_if_none_match(path, tag)))
            .await;
    for (path, not_modified) in pages.iter().zip(answers) {
        assert_eq!(not_modified.status, StatusCode::NOT_MODIFIED, "{path} with HBase gone: {}", not_modified.raw);
    }
    let never_served = format!("/v1/users/{user}/comments?limit=1");
    let page = service.get_if_none_match(&never_served, &tags[3]).await;
    assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE, "a page never served needs HBase: {}", page.raw);
    service.shut_down().await;
}
