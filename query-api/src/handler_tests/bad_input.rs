//! Client mistakes (bad ids, limits, cursors, bodies, routes, methods): answered 4xx in the API's error shape, before any HBase call.

use super::*;

#[tokio::test]
async fn bad_ids_answer_400_before_any_hbase_call() {
    let app = offline_app(Duration::from_secs(5));
    for uri in [
        "/v1/products/short/comments",
        "/v1/products/PRODUCT0011/comments",
        "/v1/products/PRODUCT%2F01/comments",
        "/v1/products/%FF%FEPRODUC/comments",
        "/v1/products/PRODUC%0A001/comments",
        "/v1/products/PRODUC%7F001/comments",
        "/v1/products/%EA%B0%80%EB%82%98%EB%8B%A4%EB%9D%BC%EB%A7%88%EB%B0%94%EC%82%AC%EC%95%84%EC%9E%90%EC%B0%A8/comments",
        "/v1/users/u/comments",
        "/v1/products/..%2F..%2Fetc/comments/ranked",
        "/product/%C3%84BCDEFGHI/comments/latest",
        "/user/USER0%2F0000/comments/latest",
        "/product/x/comments/ranked",
        "/v1/reviews/T1JERVIwMDAwMVBST0RVQ1QwMDE=",
        "/v1/reviews/AAAAAAAAAAAAAAAAAAAAAAAAAAB",
        "/v1/reviews/short",
        "/v1/reviews/%FF",
    ] {
        let started = Instant::now();
        let answer = get(&app, uri).await;
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_id");
        // The store's gateway refuses connections; a call would take a retry backoff at least.
        assert!(started.elapsed() < Duration::from_millis(500), "{uri} took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn bad_limits_answer_400() {
    let app = offline_app(Duration::from_secs(5));
    for limit in ["0", "101", "-1", "abc", "", "1e3", "99999999999999999999"] {
        for route in [
            "/v1/products/PRODUCT001/comments",
            "/v1/users/USER000001/comments",
            "/v1/products/PRODUCT001/comments/ranked",
            "/product/PRODUCT001/comments/latest",
            "/user/USER000001/comments/latest",
            "/product/PRODUCT001/comments/ranked",
        ] {
            get(&app, &format!("{route}?limit={limit}")).await.assert_error(StatusCode::BAD_REQUEST, "invalid_limit");
        }
    }
    post_json(&app, "/product/comments/get", r#"{"startIndexKey":"UFJPRFVDVDAwMWN/","limit":0}"#)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_limit");
    post_json(&app, "/user/comments/get", r#"{"startIndexKey":"VVNFUjAwMDAwMX8=","limit":"many"}"#)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_limit");
}

#[tokio::test]
async fn bad_cursors_answer_400() {
    let app = offline_app(Duration::from_secs(5));
    let other_product = common::cursor::encode(b"PRODUCT002c\x7f\xff\xff\xff");
    let user_cursor_on_product = common::cursor::encode(b"USER000001\x7f\xff\xff");
    for cursor in ["***", "", "A", &"A".repeat(300), &other_product, &user_cursor_on_product, "UFJPRFVDVDAwMWM"] {
        get(&app, &format!("/v1/products/PRODUCT001/comments?cursor={cursor}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");
    }
    let product_cursor_on_user = common::cursor::encode(b"PRODUCT001c\x7f");
    get(&app, &format!("/v1/users/USER000001/comments?cursor={product_cursor_on_user}"))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_cursor");
}

#[tokio::test]
async fn bad_seed_bodies_answer_400_413_or_415() {
    let app = offline_app(Duration::from_secs(5));
    for (route, body, code) in [
        ("/product/comments/get", "not json", "invalid_body"),
        ("/product/comments/get", "{}", "invalid_body"),
        ("/product/comments/get", r#"{"startIndexKey": 5}"#, "invalid_body"),
        ("/product/comments/get", r#"{"startIndexKey": "***"}"#, "invalid_cursor"),
        // "PRODUCT001x": an 11-byte prefix whose tag is not 'c'.
        ("/product/comments/get", r#"{"startIndexKey": "UFJPRFVDVDAwMXg="}"#, "invalid_cursor"),
        // A user-comment key sent to the product route.
        ("/product/comments/get", r#"{"startIndexKey": "VVNFUjAwMDAwMX8="}"#, "invalid_cursor"),
        // "USER/00001": not an id (a '/'), so no user's prefix.
        ("/user/comments/get", r#"{"startIndexKey": "VVNFUi8wMDAwMX8="}"#, "invalid_cursor"),
        ("/user/comments/get", r#"[1, 2]"#, "invalid_body"),
    ] {
        post_json(&app, route, body).await.assert_error(StatusCode::BAD_REQUEST, code);
    }
    let without_type = Request::post("/product/comments/get").body(Body::from("{}")).expect("request");
    send(&app, without_type).await.assert_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let huge = format!(r#"{{"startIndexKey": "{}"}}"#, "A".repeat(100_000));
    post_json(&app, "/product/comments/get", &huge).await.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json() {
    let app = offline_app(Duration::from_secs(5));
    get(&app, "/nope").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    get(&app, "/v1/products/PRODUCT001").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    get(&app, "/v1/products/PRODUCT001/comments/ranked/extra").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    let wrong_method = get(&app, "/product/comments/get").await;
    wrong_method.assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    assert_eq!(wrong_method.headers[header::ALLOW], "POST");
    post_json(&app, "/v1/products/PRODUCT001/comments", "{}")
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let delete = Request::delete("/healthz").body(Body::empty()).expect("request");
    send(&app, delete).await.assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}
