//! What a shop's page reads beyond the JSON pages: each review by its id,
//! a product's server-rendered first view (`reviews.html`) and the widgets'
//! script. What the widgets do with them in a browser is tested in Chromium
//! (`widget/test/`, run by `scripts/browser-tests.sh`).

use common::model::{Extra, User};
use common::store::ProductRanking;
use common::summary::ReviewSummary;
use integration_tests::app::TestApp;
use integration_tests::fixtures::{new_comment, put_orders, write_ranking, AS_OF_MS};
use integration_tests::{fresh_store, test_id};
use query_api::Settings;
use reqwest::StatusCode;

#[tokio::test]
async fn every_listed_review_is_read_again_by_its_id_until_it_is_deleted() {
    let store = fresh_store("widget_review_ids").await;
    let (product, user) = (test_id("P", 1), test_id("U", 1));
    store
        .put_records(&[User { id: user, name: "Kim".into(), nickname: "kim".into(), extra: Extra::new() }])
        .await
        .expect("user");
    let orders: Vec<_> = (0..3).map(|n| (test_id("O", n), user)).collect();
    put_orders(&store, &orders).await;
    let comments = orders
        .iter()
        .zip(0_i64..)
        .map(|((order, user), n)| new_comment(order, &product, user, format!("review {n}"), 1_700_000_000_000 + n))
        .collect();
    let posted = store.post_comments(comments).await.expect("comments");
    let service = TestApp::spawn(store.clone(), Settings::default()).await;

    let page = service.get(&format!("/v1/products/{product}/comments")).await;
    let listed = page.comment_values().to_vec();
    assert_eq!(listed.len(), 3);
    for value in &listed {
        let id = value["id"].as_str().expect("an id");
        assert!(id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'), "URL-safe: {id}");
        let one = service.get(&format!("/v1/reviews/{id}?include=author")).await;
        assert_eq!(one.status, StatusCode::OK, "{}", one.raw);
        assert_eq!(one.body["id"], id);
        assert_eq!(one.body["content"], value["content"]);
        assert_eq!(one.body["author"]["nickname"], "kim");
        assert!(one.headers.contains_key(reqwest::header::ETAG));
    }
    // The ranked read names the same reviews by the same ids.
    write_ranking(&store, &product, &[(posted[0].row_key(), 0.9)]).await;
    let ranked = service.get(&format!("/v1/products/{product}/comments/ranked")).await;
    assert_eq!(ranked.body["comments"][0]["id"], posted[0].row_key().review_id());

    store.delete_comment(&posted[1].order_id, &product).await.expect("delete");
    let gone = service.get(&format!("/v1/reviews/{}", posted[1].row_key().review_id())).await;
    gone.assert_error(StatusCode::NOT_FOUND, "no_review");
    service.get("/v1/reviews/not-a-review-id").await.assert_error(StatusCode::BAD_REQUEST, "invalid_id");
    // Well formed, but its 20 bytes are no comment key: no such review.
    service.get("/v1/reviews/AAAAAAAAAAAAAAAAAAAAAAAAAAA").await.assert_error(StatusCode::NOT_FOUND, "no_review");
    service.shut_down().await;
}

#[tokio::test]
async fn a_product_page_is_rendered_for_the_shop_with_its_json_ld_and_cached_by_etag() {
    let store = fresh_store("widget_reviews_html").await;
    let (product, user) = (test_id("P", 2), test_id("U", 2));
    store
        .put_records(&[User { id: user, name: "Lee".into(), nickname: "lee <3".into(), extra: Extra::new() }])
        .await
        .expect("user");
    put_orders(&store, &[(test_id("O", 1), user), (test_id("O", 2), user)]).await;
    let mut rated = new_comment(&test_id("O", 1), &product, &user, "kettle boils fast", 1_700_000_000_000);
    rated.rating = Some(4);
    let unrated = new_comment(&test_id("O", 2), &product, &user, "no stars here", 1_700_000_000_001);
    let posted = store.post_comments(vec![rated, unrated]).await.expect("comments");
    // As the ranker writes it: the slots and the summary it counted.
    let ranking = ProductRanking {
        product,
        as_of_ms: AS_OF_MS,
        ranked: vec![(posted[0].row_key(), 0.9), (posted[1].row_key(), 0.5)],
        summary: ReviewSummary { rated: [0, 0, 0, 1, 0], unrated: 1, with_photos: 0 },
    };
    store.write_ranking(&ranking).await.expect("ranking");
    let service = TestApp::spawn(store.clone(), Settings::default()).await;

    let path = format!("/v1/products/{product}/reviews.html?name=Kettle&lang=ko");
    let page = service.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.raw);
    assert_eq!(page.headers[reqwest::header::CONTENT_TYPE], "text/html; charset=utf-8");
    let html = &page.raw;
    assert!(
        html.starts_with(&format!(
            r#"<product-reviews product-id="{product}" lang="ko"><template shadowrootmode="open">"#
        )),
        "{html}"
    );
    for comment in &posted {
        assert!(html.contains(&format!(r#"id="review-{}""#, comment.row_key().review_id())), "{html}");
    }
    assert!(html.contains("lee &lt;3") && html.contains("상품 리뷰"), "escaped nickname, Korean heading: {html}");
    let json_ld =
        html.split(r#"<script type="application/ld+json">"#).nth(1).expect("JSON-LD").trim_end_matches("</script>");
    let json_ld: serde_json::Value = serde_json::from_str(json_ld).expect("JSON-LD parses");
    assert_eq!(json_ld["name"], "Kettle");
    assert_eq!(json_ld["aggregateRating"]["ratingValue"], 4.0);
    assert_eq!(json_ld["aggregateRating"]["reviewCount"], 2);
    assert_eq!(json_ld["review"].as_array().map(Vec::len), Some(1), "the rated review only: {json_ld}");
    assert_eq!(json_ld["review"][0]["author"]["name"], "lee <3");

    let tag = page.headers[reqwest::header::ETAG].to_str().expect("ascii").to_owned();
    assert_eq!(service.get_if_none_match(&path, &tag).await.status, StatusCode::NOT_MODIFIED);
    assert_eq!(page.headers[reqwest::header::CACHE_CONTROL], "public, max-age=10");

    let unnamed = service.get(&format!("/v1/products/{product}/reviews.html")).await;
    assert!(!unnamed.raw.contains("ld+json") && unnamed.raw.contains(r#"lang="en""#), "{}", unnamed.raw);
    service
        .get(&format!("/v1/products/{product}/reviews.html?name="))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_query");
    service
        .get(&format!("/v1/products/{product}/reviews.html?lang=%3Cb%3E"))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_query");
    service
        .get(&format!("/v1/products/{product}/reviews.html?limit=0"))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_limit");

    let script = service.get("/widget/v1/reviews.js").await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(script.headers[reqwest::header::CONTENT_TYPE], "text/javascript; charset=utf-8");
    assert!(script.raw.contains("customElements.define('product-reviews'"), "the script defines the widgets");
    // The demo pages are off unless asked for.
    service.get(&format!("/demo/products/{product}")).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    service.shut_down().await;
}
