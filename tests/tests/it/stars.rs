//! A product's reviews by star, as a frontend reads them: the star filter and
//! the rating orders list exactly the reviews of the unfiltered walk whose
//! star matches, in its order, each once, before any run has marked the Java
//! service's rows and after; the run marks every listing row; a cursor serves
//! only the list it came from; the summaries of a listing page in one call;
//! and the authors of comments.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use common::hbase::{Row, COLUMN_STARS};
use common::keys::{self, CommentKey};
use common::model::{Comment, Extra, User};
use common::store::Store;
use common::Id;
use integration_tests::app::{service_store_via, uncached_settings, TestApp};
use integration_tests::fixtures::{new_comment, post_all, put_orders, AS_OF_MS};
use integration_tests::{fresh_store, test_id, thrift2_addr, thrift_addr, wait_for, FaultyProxy, ProxyMode};
use query_api::Settings;
use ranker::{Incremental, RunOptions, Scope};
use reqwest::StatusCode;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::rows::{drop_tables, put_rows, put_value, raw_rows};
use crate::summaries::{count_as_shown, mixed_reviews, post_reviews, rank};

/// The request deadline of the services that walk every filter and order:
/// the walks are hundreds of requests, which judge what is listed, not how
/// fast. On the test machine's two cores, beside the suite's heavier tests,
/// HBase sometimes answers one of them after the default 2 s, and a `timeout`
/// there says nothing about the filters.
const WALK_DEADLINE: Duration = Duration::from_secs(10);

/// The star of a comment as shown, by the rule the API documents and apart
/// from the service's code: a number that is an integer from 1 to 5, or such
/// a digit as a string; 0 (unrated) for anything else.
fn shown_star(comment: &Value) -> u8 {
    let summary = count_as_shown(std::slice::from_ref(comment));
    (1..=5).find(|star| summary.rated[usize::from(*star) - 1] == 1).unwrap_or(0)
}

fn order_ids(comments: &[Value]) -> Vec<String> {
    comments.iter().map(|comment| comment["orderId"].as_str().expect("an orderId").to_owned()).collect()
}

/// `comments` ordered by star (best first when `descending`), keeping their
/// order within a star, unrated last.
fn by_star(comments: &[Value], descending: bool) -> Vec<String> {
    let mut sorted = comments.to_vec();
    sorted.sort_by_key(|comment| match (shown_star(comment), descending) {
        (0, _) => 6,
        (star, true) => 5 - star,
        (star, false) => star - 1,
    });
    order_ids(&sorted)
}

#[tokio::test]
async fn star_filters_and_rating_orders_list_exactly_the_matching_reviews_of_the_unfiltered_walk() {
    let store = fresh_store("stars_walks").await;
    let product = test_id("ST", 1);
    mixed_reviews(&store, &product).await;
    let base = format!("/v1/products/{product}/comments");

    // Before any run the Java service's rows carry no star mark, and the
    // filter reads their comments; after the run every listing row has one.
    for ranked in [false, true] {
        if ranked {
            rank(&store, &product).await;
        }
        // A budget of 2 rows a request makes short pages the walk must follow.
        for budget in [1_000, 2] {
            let settings = Settings { star_budget_rows: budget, request_timeout: WALK_DEADLINE, ..uncached_settings() };
            let service = TestApp::spawn(store.clone(), settings).await;
            let all = service.walk_v1(&base, 100).await;
            assert_eq!(all.len(), 14);
            let summary = match ranked {
                true => Some(store.ranking(&product).await.expect("ranking").summary.expect("a summary")),
                false => None,
            };
            for star in 1..=5u8 {
                let expected: Vec<Value> = all.iter().filter(|comment| shown_star(comment) == star).cloned().collect();
                for limit in [1, 7, 100] {
                    let walked = service.walk_v1(&format!("{base}?rating={star}"), limit).await;
                    assert_eq!(walked, expected, "rating={star}, pages of {limit}, budget {budget}, ranked {ranked}");
                }
                if let Some(summary) = &summary {
                    assert_eq!(expected.len() as u64, summary.rated_with(star), "ratings[{star}] of the summary");
                }
            }
            if budget == 2 {
                // Two rows examined give at most two reviews: a short page that says where to go on.
                let short = service.get(&format!("{base}?rating=5&limit=7")).await;
                assert!(short.comment_values().len() <= 2, "{}", short.raw);
                assert!(short.body["nextCursor"].is_string(), "{}", short.raw);
            }
            let four_or_five: Vec<Value> =
                all.iter().filter(|comment| matches!(shown_star(comment), 4 | 5)).cloned().collect();
            assert_eq!(service.walk_v1(&format!("{base}?rating=5,4"), 3).await, four_or_five);

            for limit in [1, 7, 100] {
                let descending = service.walk_v1(&format!("{base}?sort=rating_desc"), limit).await;
                assert_eq!(order_ids(&descending), by_star(&all, true), "rating_desc, pages of {limit}");
                let ascending = service.walk_v1(&format!("{base}?sort=rating_asc"), limit).await;
                assert_eq!(order_ids(&ascending), by_star(&all, false), "rating_asc, pages of {limit}");
            }
            let ones_and_fives: Vec<Value> =
                all.iter().filter(|comment| matches!(shown_star(comment), 1 | 5)).cloned().collect();
            let walked = service.walk_v1(&format!("{base}?sort=rating_asc&rating=5,1"), 2).await;
            assert_eq!(order_ids(&walked), by_star(&ones_and_fives, false));
            service.shut_down().await;
        }
    }

    // The run marked every row that lists a review with that review's star,
    // and no other row: 14 reviews' rows, and the second row of the review
    // posted twice in one millisecond (it lists the review too).
    let listed: HashMap<String, (u8, i64)> = TestApp::spawn(store.clone(), uncached_settings())
        .await
        .walk_v1(&base, 100)
        .await
        .iter()
        .map(|comment| {
            let order = comment["orderId"].as_str().expect("orderId").to_owned();
            (order, (shown_star(comment), comment["timestamp"].as_i64().expect("timestamp")))
        })
        .collect();
    let mut marked = 0;
    for row in raw_rows(&store, &store.tables().product_comment).await {
        let Ok(index) = keys::parse_product_comment_key(&row.key) else { continue };
        let comment = row.value(b"cf:q").and_then(|value| CommentKey::parse(value).ok()).expect("a comment key");
        let mark = row.value(COLUMN_STARS).map(<[u8]>::to_vec);
        match listed.get(comment.order_id().as_str()) {
            Some((star, at)) if *at == index.timestamp_ms => {
                assert_eq!(mark, Some(vec![b'0' + star]), "{comment}: the row listing a {star}-star review");
                marked += 1;
            }
            _ => assert_eq!(mark, None, "{comment}: a row that lists no review at its time is left unmarked"),
        }
    }
    assert_eq!(marked, 15, "every listing row is marked");
    drop_tables(&[&store]).await;
}

/// The star mark of the index row that lists `comment` (posted through the write path).
async fn mark_of(store: &Store, comment: &Comment) -> Option<u8> {
    let row = listing_row(store, comment).await;
    row.value(COLUMN_STARS).map(|mark| mark[0])
}

/// The `product-comment` row that lists `comment`.
async fn listing_row(store: &Store, comment: &Comment) -> Row {
    raw_rows(store, &store.tables().product_comment)
        .await
        .into_iter()
        .find(|row| {
            row.value(b"cf:q") == Some(comment.row_key().as_bytes().as_slice())
                && keys::parse_product_comment_key(&row.key).is_ok_and(|key| key.timestamp_ms == comment.timestamp)
        })
        .expect("the review's listing row")
}

/// Marks the row listing `comment` with `star`, as a writer that changed the
/// rating behind the ranker's back leaves it.
async fn put_mark(store: &Store, comment: &Comment, star: u8) {
    let key = listing_row(store, comment).await.key;
    let row = Row { key, cells: BTreeMap::from([(COLUMN_STARS.to_vec(), vec![b'0' + star])]) };
    put_rows(store, &store.tables().product_comment, vec![row]).await;
}

#[tokio::test]
async fn a_wrong_star_mark_never_shows_a_review_under_another_star_and_full_and_incremental_runs_fix_it() {
    let store = fresh_store("stars_wrong_mark").await;
    let product = test_id("ST", 20);
    let posted =
        post_reviews(&store, &product, "WM", &[(Some(5), None), (Some(5), None), (Some(3), None)], AS_OF_MS - 60_000)
            .await;
    rank(&store, &product).await;
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let base = format!("/v1/products/{product}/comments");
    let fives = || async { order_ids(&service.walk_v1(&format!("{base}?rating=5"), 10).await) };
    let both = vec![posted[0].order_id.to_string(), posted[1].order_id.to_string()];
    assert_eq!(fives().await, both);

    // The first five-star review's row marked one star, behind the ranker's back.
    put_mark(&store, &posted[0], 1).await;
    assert!(service.walk_v1(&format!("{base}?rating=1"), 10).await.is_empty(), "the comment's rating is the truth");
    assert_eq!(fives().await, [posted[1].order_id.to_string()], "hidden from its own star until a run marks it");
    assert_eq!(service.walk_v1(&base, 10).await.len(), 3, "and shown unfiltered");

    rank(&store, &product).await;
    assert_eq!(mark_of(&store, &posted[0]).await, Some(b'5'), "a full run marks it again");
    assert_eq!(fives().await, both);

    // An incremental run marks the rows of every product it ranks too.
    put_mark(&store, &posted[0], 1).await;
    let since_ms = i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after the epoch").as_millis(),
    )
    .expect("fits")
        - 1_000;
    let (order, user) = (test_id("WMN", 1), test_id("WMNU", 1));
    put_orders(&store, &[(order, user)]).await;
    post_all(&store, vec![new_comment(&order, &product, &user, "A change for the night", AS_OF_MS - 1_000)]).await;
    let mut options = RunOptions::new(Scope::All, AS_OF_MS);
    options.incremental =
        Some(Incremental { since_ms, refresh_days: None, refreshed_until_ms: None, check_all_slots: false });
    let report = ranker::run(&store, &options, CancellationToken::new()).await.expect("an incremental run");
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(mark_of(&store, &posted[0]).await, Some(b'5'), "the incremental run marks it again");
    assert_eq!(fives().await, both);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_filtered_page_examines_at_most_its_budget_of_rows_matching_or_not() {
    let store = fresh_store("stars_budget").await;
    let product = test_id("ST", 21);
    let shapes = vec![(Some(5), None); 30];
    post_reviews(&store, &product, "BU", &shapes, AS_OF_MS - 60_000).await;
    let settings = Settings { star_budget_rows: 10, ..uncached_settings() };
    let service = TestApp::spawn(store.clone(), settings).await;
    let base = format!("/v1/products/{product}/comments?limit=5");

    // No one-star review among 30 rows, 10 examined a request: three empty
    // pages, each ending where its budget did, the last one where the index does.
    let mut url = format!("{base}&rating=1");
    let mut requests = 0;
    loop {
        let page = service.get(&url).await;
        assert_eq!(page.status, StatusCode::OK, "{url}: {}", page.raw);
        assert!(page.comment_values().is_empty(), "{url}");
        requests += 1;
        match page.body["nextCursor"].as_str() {
            Some(cursor) if requests < 10 => url = format!("{base}&rating=1&cursor={cursor}"),
            Some(_) => panic!("the walk did not end"),
            None => break,
        }
    }
    assert_eq!(requests, 3, "30 rows, at most 10 examined a request");

    // A star every row has fills its page well within the budget.
    let fives = service.get(&format!("{base}&rating=5")).await;
    assert_eq!(fives.comment_values().len(), 5);
    assert!(fives.body["nextCursor"].is_string());
    assert_eq!(service.walk_v1(&format!("/v1/products/{product}/comments?rating=5"), 7).await.len(), 30);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_star_the_cached_summary_has_no_review_of_is_still_read_from_hbase_never_answered_empty() {
    let store = fresh_store("stars_known_empty").await;
    let product = test_id("ST", 22);
    post_reviews(&store, &product, "KE", &[(Some(5), None), (Some(4), None), (Some(4), None)], AS_OF_MS - 60_000).await;
    rank(&store, &product).await;
    let (thrift1, thrift2) = (FaultyProxy::start(&thrift_addr()).await, FaultyProxy::start(&thrift2_addr()).await);
    let settings = Settings { ranked_cache_ttl: Duration::from_secs(120), ..Settings::default() };
    let service =
        TestApp::spawn(service_store_via(&thrift1.address(), &thrift2.address(), &store, &[]), settings).await;
    let summary = service.get(&format!("/v1/products/{product}/comments/summary")).await;
    assert_eq!(summary.status, StatusCode::OK, "{}", summary.raw);
    assert_eq!((summary.body["ratings"]["1"].as_u64(), summary.body["complete"].as_bool()), (Some(0), Some(true)));

    // HBase silent: a filtered page is refused even for the stars the cached
    // summary says no review has, since a review of them may have been
    // written since the ranking; an empty page would hide it. The summary
    // itself is the cached ranking's, answered without HBase.
    thrift1.set_mode(ProxyMode::BlackHole);
    thrift2.set_mode(ProxyMode::BlackHole);
    let base = format!("/v1/products/{product}/comments");
    for query in ["rating=1", "rating=1,2,3", "rating=2&sort=rating_asc", "rating=4"] {
        let page = service.get(&format!("{base}?{query}")).await;
        page.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    }
    let cached = service.get(&format!("{base}/summary")).await;
    assert_eq!((cached.status, &cached.raw), (StatusCode::OK, &summary.raw), "the cached summary");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_cursor_serves_only_the_list_it_came_from_and_bad_parameters_answer_400() {
    let store = fresh_store("stars_cursors").await;
    let product = test_id("ST", 2);
    mixed_reviews(&store, &product).await;
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let base = format!("/v1/products/{product}/comments");
    let cursor_of =
        |answer: &integration_tests::app::Answer| answer.body["nextCursor"].as_str().expect("a cursor").to_owned();
    let five = cursor_of(&service.get(&format!("{base}?rating=5&limit=1")).await);
    let plain = cursor_of(&service.get(&format!("{base}?limit=1")).await);
    let sorted = cursor_of(&service.get(&format!("{base}?sort=rating_desc&limit=1")).await);
    for (query, cursor) in [
        ("", &five),
        ("rating=4&", &five),
        ("rating=5,4&", &five),
        ("sort=rating_desc&rating=5&", &five),
        ("rating=5&", &plain),
        ("sort=rating_desc&", &plain),
        ("sort=rating_asc&", &sorted),
        ("", &sorted),
    ] {
        let answer = service.get(&format!("{base}?{query}cursor={cursor}")).await;
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");
    }
    let other = test_id("ST", 3);
    let answer = service.get(&format!("/v1/products/{other}/comments?rating=5&cursor={five}")).await;
    answer.assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");
    assert_eq!(service.get(&format!("{base}?rating=5&limit=1&cursor={five}")).await.status, StatusCode::OK);

    for query in ["rating=0", "rating=6", "rating=", "rating=1,", "rating=one", "sort=stars", "include=authors"] {
        service.get(&format!("{base}?{query}")).await.assert_error(StatusCode::BAD_REQUEST, "invalid_query");
    }
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

/// The summary as the three routes answer it, which must agree.
async fn summary_now(service: &TestApp, product: &Id) -> Value {
    let single = service.get(&format!("/v1/products/{product}/comments/summary")).await;
    assert_eq!(single.status, StatusCode::OK, "{}", single.raw);
    let ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(ranked.body["summary"], single.body, "the ranked answer's summary");
    let listed = service.get(&format!("/v1/summaries?productIds={product}")).await;
    assert_eq!(listed.body["summaries"][0], single.body, "/v1/summaries");
    single.body
}

#[tokio::test]
async fn a_review_posted_after_the_run_is_in_the_filter_the_order_and_the_summary_at_once() {
    let store = fresh_store("stars_after_run").await;
    let product = test_id("ST", 4);
    mixed_reviews(&store, &product).await;
    rank(&store, &product).await;
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let base = format!("/v1/products/{product}/comments");
    let before = service.walk_v1(&format!("{base}?rating=1"), 100).await;
    let summary_before = summary_now(&service, &product).await;
    assert_eq!(summary_before["count"], 14);

    let (order, user) = (test_id("NEWO", 1), test_id("NEWU", 1));
    put_orders(&store, &[(order, user)]).await;
    let mut draft = new_comment(&order, &product, &user, "Posted after the run, one star", AS_OF_MS + 1);
    (draft.rating, draft.photos) = (Some(1), Some(2));
    post_all(&store, vec![draft]).await;

    let after = service.walk_v1(&format!("{base}?rating=1"), 100).await;
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[0]["orderId"], order.as_str(), "newest first");
    let ascending = service.walk_v1(&format!("{base}?sort=rating_asc"), 5).await;
    assert_eq!(ascending[0]["orderId"], order.as_str(), "the newest one-star review leads rating_asc");
    let summary = summary_now(&service, &product).await;
    assert_eq!(summary["count"], 15);
    assert_eq!(summary["ratings"]["1"], summary_before["ratings"]["1"].as_u64().expect("a count") + 1);
    assert_eq!(summary["withPhotos"], summary_before["withPhotos"].as_u64().expect("a count") + 1);
    assert_eq!(summary["asOf"], AS_OF_MS, "asOf stays the run's");
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["ratings"]["1"], after.len(), "walking rating=1 gives ratings[1] of the same moment");
    let all = service.walk_v1(&base, 100).await;
    assert_eq!(serde_json::to_value(count_as_shown(&all)).expect("json")["ratings"], summary["ratings"]);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn under_the_ranked_cache_a_summary_is_as_old_as_its_ranking_while_the_star_filter_is_live() {
    let store = fresh_store("stars_cached_summary").await;
    let product = test_id("ST", 8);
    // Five and four stars only: the ranking's summary counts no review of one to three stars.
    let shapes = [(Some(5), None), (Some(4), None), (Some(4), None)];
    post_reviews(&store, &product, "CS", &shapes, AS_OF_MS - 60_000).await;
    rank(&store, &product).await;
    // A TTL no test outlasts: every read below comes within it, so the
    // ranking the first read caches is the cached one throughout.
    let settings = Settings { ranked_cache_ttl: Duration::from_secs(600), ..Settings::default() };
    let service = TestApp::spawn(store.clone(), settings).await;
    let base = format!("/v1/products/{product}/comments");
    let ranked = service.get(&format!("{base}/ranked")).await;
    assert_eq!(ranked.status, StatusCode::OK, "{}", ranked.raw);
    let cached_summary = &ranked.body["summary"];
    assert_eq!(
        (&cached_summary["count"], &cached_summary["ratings"]["1"], &cached_summary["complete"]),
        (&Value::from(3), &Value::from(0), &Value::from(true)),
        "the cached ranking's summary knows every review, none of them one star: {}",
        ranked.raw
    );
    let summary_path = format!("{base}/summary");
    let before = service.get(&summary_path).await;
    assert_eq!(&before.body, cached_summary, "the summary route answers the cached ranking's summary");

    let (order, user) = (test_id("CSO", 1), test_id("CSU", 1));
    put_orders(&store, &[(order, user)]).await;
    let mut draft = new_comment(&order, &product, &user, "Posted while the ranking is cached", AS_OF_MS + 1);
    draft.rating = Some(1);
    let new_review = post_all(&store, vec![draft]).await[0].row_key();

    // A star filter reads the index as it is now, even for the stars the
    // cached summary has no review of: the new review shows at once.
    for query in ["rating=1", "rating=1,2,3", "rating=1&sort=rating_desc"] {
        let page = service.get(&format!("{base}?{query}")).await;
        assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.raw);
        assert_eq!(page.comment_keys(), [new_review], "{query}: the new one-star review at once: {}", page.raw);
    }
    let ascending = service.get(&format!("{base}?sort=rating_asc&limit=1")).await;
    assert_eq!(ascending.comment_keys(), [new_review], "the new one-star review leads rating_asc");
    // The summary is the cached ranking's, which the new review is not in.
    let cached = service.get(&summary_path).await;
    assert_eq!(cached.raw, before.raw, "within the TTL the summary is the cached one");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_cached_summary_counts_a_review_posted_meanwhile_once_its_ranking_expires() {
    let store = fresh_store("stars_summary_expiry").await;
    let product = test_id("ST", 9);
    mixed_reviews(&store, &product).await;
    rank(&store, &product).await;
    let ttl = Duration::from_secs(3);
    let service = TestApp::spawn(store.clone(), Settings { ranked_cache_ttl: ttl, ..Settings::default() }).await;
    let base = format!("/v1/products/{product}/comments");
    let summary_path = format!("{base}/summary");
    let cached_at = Instant::now();
    let before = service.get(&summary_path).await;
    assert_eq!(before.body["count"], 14, "{}", before.raw);

    let (order, user) = (test_id("CEO", 1), test_id("CEU", 1));
    put_orders(&store, &[(order, user)]).await;
    let mut draft = new_comment(&order, &product, &user, "Posted while the summary is cached", AS_OF_MS + 1);
    draft.rating = Some(1);
    post_all(&store, vec![draft]).await;

    // Once the TTL has passed, one reload counts the new review.
    let fresh = wait_for(ttl * 4, "the summary to count the new review", async || {
        let summary = service.get(&summary_path).await;
        (summary.body["count"] == 15).then_some(summary)
    })
    .await;
    assert!(cached_at.elapsed() >= ttl, "not before the cached ranking expired");
    let ones = service.walk_v1(&format!("{base}?rating=1"), 100).await;
    assert_eq!(fresh.body["ratings"]["1"], ones.len(), "and then agrees with the filter");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_run_counts_the_reviews_up_to_its_as_of_time_and_readers_count_the_rest_each_once() {
    let store = fresh_store("stars_split").await;
    let product = test_id("ST", 5);
    mixed_reviews(&store, &product).await;
    // As of the middle of the reviews (they span 41 minutes a day before
    // AS_OF_MS): the run counts the older ones, readers the newer ones.
    let as_of = AS_OF_MS - 86_400_000 - 20 * 60_000;
    let report = ranker::run(
        &store,
        &ranker::RunOptions::new(ranker::Scope::Product(product), as_of),
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .expect("rank");
    assert_eq!(report.comments_scored, 14, "the run scores every review");
    let stored = store.ranking(&product).await.expect("ranking").summary.expect("a summary");
    assert!(stored.count() < 14 && stored.count() > 0, "the record counts the reviews up to its as-of: {stored:?}");

    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let summary = summary_now(&service, &product).await;
    let all = service.walk_v1(&format!("/v1/products/{product}/comments"), 100).await;
    let shown = serde_json::to_value(count_as_shown(&all)).expect("json");
    for field in ["count", "ratings", "unrated", "withPhotos"] {
        assert_eq!(summary[field], shown[field], "{field}: each review counted once");
    }
    assert_eq!(summary["asOf"], as_of);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_product_no_run_has_counted_is_summarised_at_read_time() {
    let store = fresh_store("stars_unranked").await;
    let product = test_id("ST", 6);
    mixed_reviews(&store, &product).await;
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let summary = summary_now(&service, &product).await;
    let all = service.walk_v1(&format!("/v1/products/{product}/comments"), 100).await;
    let shown = serde_json::to_value(count_as_shown(&all)).expect("json");
    for field in ["count", "ratings", "unrated", "withPhotos"] {
        assert_eq!(summary[field], shown[field], "{field}");
    }
    assert_eq!((summary["asOf"].clone(), summary["complete"].clone()), (Value::from(0), Value::from(true)));
    let empty = test_id("ST", 7);
    let answer = service.get(&format!("/v1/products/{empty}/comments/summary")).await;
    answer.assert_error(StatusCode::NOT_FOUND, "no_summary");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn summaries_of_a_listing_page_equal_the_single_reads_in_the_order_asked() {
    let store = fresh_store("stars_summaries").await;
    let products: Vec<Id> = (10..13).map(|n| test_id("ST", n)).collect();
    for product in &products {
        mixed_reviews(&store, product).await;
    }
    for product in &products[..2] {
        rank(&store, product).await;
    }
    let never_ranked = products[2];
    let no_reviews = test_id("ST", 13);
    let cached = Settings { ranked_cache_ttl: std::time::Duration::from_secs(10), ..Default::default() };
    for settings in [uncached_settings(), cached] {
        let service = TestApp::spawn(store.clone(), settings).await;
        // Warm the cache for one of them, so the answer mixes cached and read summaries.
        let single = service.get(&format!("/v1/products/{}/comments/summary", products[1])).await;
        assert_eq!(single.status, StatusCode::OK);
        let asked = [products[1], never_ranked, no_reviews, products[0], products[1]];
        let ids: Vec<&str> = asked.iter().map(Id::as_str).collect();
        let answer = service.get(&format!("/v1/summaries?productIds={}", ids.join(","))).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        assert!(answer.headers.contains_key("etag"));
        assert!(answer.headers.contains_key("cache-control"));
        let summaries = answer.body["summaries"].as_array().expect("summaries").clone();
        assert_eq!(summaries.len(), 5);
        for (product, summary) in asked.iter().zip(&summaries) {
            let single = service.get(&format!("/v1/products/{product}/comments/summary")).await;
            if *product == no_reviews {
                single.assert_error(StatusCode::NOT_FOUND, "no_summary");
                assert!(summary.is_null());
            } else {
                assert_eq!(*summary, single.body, "{product}");
            }
        }
        assert_eq!(summaries[1]["asOf"], 0, "the product no run counted is counted at read time");
        assert_eq!(summaries[1]["count"], 14);

        let too_many = vec![products[0].as_str(); 101].join(",");
        for query in [
            String::new(),
            "?productIds=".to_owned(),
            "?productIds=short".to_owned(),
            format!("?productIds={too_many}"),
        ] {
            let answer = service.get(&format!("/v1/summaries{query}")).await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}: {}", answer.raw);
        }
        let hundred = vec![products[0].as_str(); 100].join(",");
        let answer = service.get(&format!("/v1/summaries?productIds={hundred}")).await;
        assert_eq!(answer.body["summaries"].as_array().map(Vec::len), Some(100));
        service.shut_down().await;
    }
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn include_author_names_each_comment_s_author_from_the_user_table() {
    let store = fresh_store("stars_authors").await;
    let product = test_id("ST", 20);
    let users: Vec<Id> = (0..3).map(|n| test_id("AU", n)).collect();
    let orders: Vec<(Id, Id)> = (0..3).map(|n| (test_id("AO", n), users[n as usize])).collect();
    put_orders(&store, &orders).await;
    let drafts = orders
        .iter()
        .zip(0..)
        .map(|((order, user), n)| {
            let mut draft = new_comment(order, &product, user, format!("A review by author number {n}"), AS_OF_MS - n);
            draft.rating = Some(5);
            draft
        })
        .collect();
    post_all(&store, drafts).await;
    // The first user reads, the second's record does not decode, the third has none.
    let nickname = "Reviewer One";
    store
        .put_records(&[User {
            id: users[0],
            name: "Real Name".to_owned(),
            nickname: nickname.to_owned(),
            extra: Extra::new(),
        }])
        .await
        .expect("put user");
    put_value(&store, &store.tables().user.clone(), users[1].as_bytes().to_vec(), b"{not json".to_vec()).await;
    rank(&store, &product).await;

    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let expected = [serde_json::json!({"nickname": nickname}), Value::Null, Value::Null];
    let author_of = |comments: &[Value]| -> Vec<(String, Value)> {
        comments
            .iter()
            .map(|comment| (comment["userId"].as_str().expect("userId").to_owned(), comment["author"].clone()))
            .collect()
    };
    let wanted: Vec<(String, Value)> =
        users.iter().map(|user| user.to_string()).zip(expected.iter().cloned()).collect();
    for path in [
        format!("/v1/products/{product}/comments?include=author"),
        format!("/v1/products/{product}/comments?include=author&rating=5"),
        format!("/v1/products/{product}/comments?include=author&sort=rating_desc"),
    ] {
        let answer = service.get(&path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.raw);
        assert_eq!(author_of(answer.comment_values()), wanted, "{path}");
    }
    let ranked = service.get(&format!("/v1/products/{product}/comments/ranked?include=author")).await;
    let mut ranked_authors = author_of(ranked.comment_values());
    ranked_authors.sort_by(|left, right| left.0.cmp(&right.0));
    assert_eq!(ranked_authors, wanted);
    assert!(ranked.body["summary"].is_object());
    let own = service.get(&format!("/v1/users/{}/comments?include=author", users[0])).await;
    assert_eq!(author_of(own.comment_values()), vec![wanted[0].clone()]);
    // Without include=author there is no author field at all.
    let plain = service.get(&format!("/v1/products/{product}/comments")).await;
    assert!(plain.comment_values().iter().all(|comment| comment.get("author").is_none()));
    let plain_ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert!(plain_ranked.comment_values().iter().all(|comment| comment.get("author").is_none()));
    let metrics = service.metrics().await;
    assert!(
        metrics.lines().any(|line| line.starts_with("reviews_skipped_rows_total") && line.contains("table=\"user\"")),
        "the unreadable and missing users are counted"
    );
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn many_products_newer_reviews_are_counted_in_one_scan_as_one_by_one_and_those_past_the_bound_say_so() {
    let store = fresh_store("stars_batch_tail").await;
    let products: Vec<Id> = (30..33).map(|n| test_id("ST", n)).collect();
    for product in &products {
        mixed_reviews(&store, product).await;
    }
    let reader = store.reader();
    // The middle product as if a run had counted its reviews up to 20 minutes
    // into them; the others as never counted.
    let as_of = AS_OF_MS - 86_400_000 - 20 * 60_000;
    let asked: Vec<(Id, Option<i64>)> =
        vec![(products[2], None), (products[1], Some(as_of)), (products[0], None), (test_id("ST", 39), None)];
    let together = reader.summaries_after(&asked, 1_000).await.expect("one scan");
    for ((product, as_of_ms), listed) in asked.iter().zip(&together) {
        let alone = reader.summary_after(product, *as_of_ms, 1_000).await.expect("one product");
        assert_eq!(*listed, alone, "{product}");
        assert!(listed.complete);
    }
    assert_eq!(together[0].summary.count(), 14);
    assert!(together[1].summary.count() > 0 && together[1].summary.count() < 14);
    assert_eq!(together[3].summary.count(), 0, "a product with no review");
    // Past a bound of 5 rows in all, the one scan stops: the first product in
    // key order (ST30, with 14 rows) is counted as far as it was read, the
    // products after it not at all, and every one of them says so. No read
    // per product follows: the calls do not grow with the products named.
    let bounded = reader.summaries_after(&asked, 5).await.expect("bounded");
    assert_eq!(bounded[2], reader.summary_after(&products[0], None, 5).await.expect("alone"), "the same five rows");
    assert_eq!(bounded[2].summary.count(), 5);
    for later in [0, 1, 3] {
        assert_eq!(bounded[later].summary.count(), 0, "{}: not reached", asked[later].0);
    }
    assert!(bounded.iter().all(|listed| !listed.complete), "{bounded:?}");
    drop_tables(&[&store]).await;
}
