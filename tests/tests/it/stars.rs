//! A product's reviews by star, as a frontend reads them: the star filter and
//! the rating orders list exactly the reviews of the unfiltered walk whose
//! star matches, in its order, each once, before any run has marked the Java
//! service's rows and after; the run marks every listing row; a cursor serves
//! only the list it came from; the summaries of a listing page in one call;
//! and the authors of comments.

use common::hbase::COLUMN_STARS;
use common::keys::CommentKey;
use common::model::{Extra, User};
use common::Id;
use integration_tests::app::{uncached_settings, TestApp};
use integration_tests::fixtures::{new_comment, post_all, put_orders, AS_OF_MS};
use integration_tests::{fresh_store, test_id};
use query_api::Settings;
use reqwest::StatusCode;
use serde_json::Value;

use crate::rows::{drop_tables, put_value, raw_rows};
use crate::summaries::{count_as_shown, mixed_reviews, rank};

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
            let settings = Settings { star_budget_rows: budget, ..uncached_settings() };
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

    // The run marked every row that lists a review with that review's star.
    let listed: std::collections::HashMap<String, u8> = TestApp::spawn(store.clone(), uncached_settings())
        .await
        .walk_v1(&base, 100)
        .await
        .iter()
        .map(|comment| (comment["orderId"].as_str().expect("orderId").to_owned(), shown_star(comment)))
        .collect();
    let mut marked = 0;
    for row in raw_rows(&store, &store.tables().product_comment).await {
        let Some(comment) = row.value(b"cf:q").and_then(|value| CommentKey::parse(value).ok()) else { continue };
        let Some(star) = listed.get(comment.order_id().as_str()) else { continue };
        let mark = row.value(COLUMN_STARS).map(<[u8]>::to_vec);
        if mark.is_some() {
            marked += 1;
        }
        assert!(mark.is_none() || mark == Some(vec![b'0' + star]), "{comment}: {mark:?} for {star} stars");
    }
    assert!(marked >= 14, "every review's listing row is marked ({marked})");
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
async fn many_products_newer_reviews_are_counted_in_one_scan_as_one_by_one_and_past_the_bound_say_so() {
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
    // Past a bound of 5 rows, the products the scan did not finish are counted
    // one by one within it, and say they are not complete.
    let bounded = reader.summaries_after(&asked, 5).await.expect("bounded");
    for ((product, as_of_ms), listed) in asked.iter().zip(&bounded) {
        assert_eq!(*listed, reader.summary_after(product, *as_of_ms, 5).await.expect("one product"), "{product}");
    }
    assert!(!bounded[0].complete && bounded[3].complete);
    drop_tables(&[&store]).await;
}
