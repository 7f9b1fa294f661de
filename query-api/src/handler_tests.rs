//! Handler tests through `tower::ServiceExt::oneshot`: the whole router and its
//! middleware, without a socket and without HBase: the store's gateway address
//! refuses connections, which proves a refused request never reaches HBase.
//! The tests that read data from HBase are in the integration-test binary
//! (`tests/tests/it/api.rs`).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use common::hbase::{GatewayList, Hbase, HbaseConfig};
use common::store::ReadStore;
use common::tables::Tables;
use tower::ServiceExt;

use crate::config::Settings;
use crate::state::AppState;

/// An address where nothing listens: connecting is refused at once.
const CLOSED_ADDRESS: &str = "127.0.0.1:1";

fn offline_state(operation_timeout: Duration) -> AppState {
    let hbase = Hbase::new(HbaseConfig {
        thrift1_gateways: GatewayList::single(CLOSED_ADDRESS),
        connect_timeout: Duration::from_millis(100),
        operation_timeout,
        retries: 1,
        ..HbaseConfig::default()
    });
    let store = ReadStore::new(hbase, Tables::with_prefix("offline_").expect("prefix"));
    AppState::new(store, Settings::default())
}

fn offline_app(operation_timeout: Duration) -> Router {
    crate::app(offline_state(operation_timeout))
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the API's error shape with `status` and `code`.
    fn assert_error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}", self.text());
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|message| !message.is_empty()), "{body}");
        assert_eq!(self.headers[header::CONTENT_TYPE], "application/json");
    }
}

async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.expect("the router is infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 16 << 20).await.expect("body").to_vec();
    Answer { status, headers, body }
}

async fn get(app: &Router, uri: &str) -> Answer {
    send(app, Request::get(uri).body(Body::empty()).expect("request")).await
}

async fn post_json(app: &Router, uri: &str, body: &str) -> Answer {
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_owned()))
        .expect("request");
    send(app, request).await
}

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

#[tokio::test]
async fn an_unreachable_hbase_answers_503_within_the_deadline() {
    let app = offline_app(Duration::from_millis(400));
    for uri in [
        "/v1/products/PRODUCT001/comments",
        "/v1/products/PRODUCT001/comments/ranked",
        "/user/USER000001/comments/latest",
        "/readyz",
    ] {
        let started = Instant::now();
        let answer = get(&app, uri).await;
        answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
        assert_eq!(answer.headers[header::RETRY_AFTER], "1");
        assert!(!answer.text().contains(CLOSED_ADDRESS), "the cause leaked: {}", answer.text());
        assert!(started.elapsed() < Duration::from_secs(2), "{uri} took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn a_read_cut_short_by_the_request_deadline_is_a_timeout() {
    // A gateway that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let settings = Settings { request_timeout: Duration::from_millis(300), ..Settings::default() };
    let hbase = Hbase::new(crate::config::service_hbase_config(
        HbaseConfig { thrift1_gateways: GatewayList::single(address), ..HbaseConfig::default() },
        settings.request_timeout,
    ));
    let store = ReadStore::new(hbase, Tables::with_prefix("black_hole_").expect("prefix"));
    let app = crate::app(AppState::new(store, settings));
    let started = Instant::now();
    let answer = get(&app, "/v1/products/P000000001/comments").await;
    answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "timeout");
    assert!(started.elapsed() < Duration::from_secs(1), "answered after {:?}", started.elapsed());
}

#[tokio::test]
async fn health_carries_a_request_id_and_metrics_count_requests() {
    let app = offline_app(Duration::from_secs(5));
    let answer = get(&app, "/healthz").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["status"], "ok");
    let request_id = answer.headers.get("x-request-id").expect("a request id").to_str().expect("ascii");
    assert_eq!(request_id.len(), 36, "a UUID: {request_id}");

    let mine =
        Request::get("/healthz").header("x-request-id", "caller-chosen-id").body(Body::empty()).expect("request");
    assert_eq!(send(&app, mine).await.headers["x-request-id"], "caller-chosen-id");

    get(&app, "/v1/products/bad/comments").await;
    let metrics = get(&app, "/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    let text = metrics.text();
    assert!(
        text.contains("reviews_api_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"}"),
        "{text}"
    );
    assert!(
        text.contains("route=\"/v1/products/{productId}/comments\",status=\"400\""),
        "requests are counted by route template: {text}"
    );
    assert!(
        text.contains("reviews_api_http_errors_total{route=\"/v1/products/{productId}/comments\",code=\"invalid_id\"}"),
        "errors are counted by route template and code: {text}"
    );
    assert!(text.contains("reviews_api_http_request_duration_seconds_bucket"), "{text}");
}

#[tokio::test]
async fn responses_are_gzipped_when_asked() {
    let app = offline_app(Duration::from_secs(5));
    let request =
        Request::get("/openapi.json").header(header::ACCEPT_ENCODING, "gzip").body(Body::empty()).expect("request");
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers[header::CONTENT_ENCODING], "gzip");
}

#[tokio::test]
async fn a_prepared_answer_is_sent_in_the_variant_asked_for_and_revalidated_as_that_variant() {
    let app = offline_app(Duration::from_secs(5));
    let script = |accept: Option<&str>, if_none_match: Option<&str>| {
        let mut request = Request::get(crate::routes::widget::SCRIPT_PATH);
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT_ENCODING, accept);
        }
        if let Some(tag) = if_none_match {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        send(&app, request.body(Body::empty()).expect("request"))
    };
    let identity = script(None, None).await;
    assert_eq!(identity.status, StatusCode::OK);
    assert!(identity.headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(identity.headers[header::VARY], "accept-encoding");
    let browser = script(Some("gzip, deflate, br, zstd"), None).await;
    assert_eq!(browser.headers[header::CONTENT_ENCODING], "br", "a browser gets brotli");
    let mut decoded = Vec::new();
    std::io::Read::read_to_end(&mut brotli::Decompressor::new(&browser.body[..], 4096), &mut decoded).expect("br");
    assert_eq!(decoded, identity.body, "the variant decodes to the identity");
    assert!(browser.body.len() * 3 < identity.body.len(), "{} of {} bytes", browser.body.len(), identity.body.len());
    let gzip = script(Some("gzip"), None).await;
    assert_eq!(gzip.headers[header::CONTENT_ENCODING], "gzip");
    let tags =
        [&identity, &browser, &gzip].map(|answer| answer.headers[header::ETAG].to_str().expect("tag").to_owned());
    assert!(tags[0] != tags[1] && tags[1] != tags[2] && tags[0] != tags[2], "a tag per variant: {tags:?}");
    // A browser holding the brotli variant revalidates it: 304, naming it.
    let revalidated = script(Some("gzip, deflate, br, zstd"), Some(&tags[1])).await;
    assert_eq!(revalidated.status, StatusCode::NOT_MODIFIED);
    assert_eq!(revalidated.headers[header::ETAG], tags[1].as_str());
    assert_eq!(revalidated.headers[header::VARY], "accept-encoding");
    // The gzip variant's tag does not stand for the brotli one.
    assert_eq!(script(Some("br"), Some(&tags[2])).await.status, StatusCode::OK);
}

/// A browser's GET of `uri` from a page on `origin`.
fn read_from(origin: &str, uri: &str) -> Request<Body> {
    Request::builder().uri(uri).header(header::ORIGIN, origin).body(Body::empty()).expect("request")
}

/// A browser's preflight, from a page on `origin`, of a GET of a product's comments.
fn preflight_from(origin: &str) -> Request<Body> {
    Request::builder()
        .method(Method::OPTIONS)
        .uri("/v1/products/PRODUCT001/comments")
        .header(header::ORIGIN, origin)
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
        .body(Body::empty())
        .expect("request")
}

#[tokio::test]
async fn cors_allows_only_configured_origins() {
    let hbase =
        Hbase::new(HbaseConfig { thrift1_gateways: GatewayList::single(CLOSED_ADDRESS), ..HbaseConfig::default() });
    let store = ReadStore::new(hbase, Tables::with_prefix("offline_").expect("prefix"));
    let settings = Settings { cors_origins: vec!["https://shop.example".to_owned()], ..Settings::default() };
    let app = crate::app(AppState::new(store, settings));
    let allowed = send(&app, preflight_from("https://shop.example")).await;
    assert_eq!(allowed.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://shop.example");
    // A frontend may send its API key.
    let allowed_headers = allowed.headers[header::ACCESS_CONTROL_ALLOW_HEADERS].to_str().expect("ascii");
    assert!(allowed_headers.contains("x-api-key"), "{allowed_headers}");
    // It may revalidate what it holds and name its requests.
    for wanted in ["if-none-match", "x-request-id"] {
        assert!(allowed_headers.contains(wanted), "{wanted} not in {allowed_headers}");
    }
    // It may read what tells a fresh answer from a kept one, and the request id.
    let read = read_from("https://shop.example", "/healthz");
    let answer = send(&app, read).await;
    let exposed = answer.headers[header::ACCESS_CONTROL_EXPOSE_HEADERS].to_str().expect("ascii").to_owned();
    for wanted in ["etag", "age", "x-request-id", "x-replica-read", "retry-after"] {
        assert!(exposed.contains(wanted), "{wanted} not in {exposed}");
    }
    let refused = send(&app, preflight_from("https://evil.example")).await;
    assert!(refused.headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

#[tokio::test]
async fn without_configured_origins_no_answer_carries_cors_headers() {
    let app = offline_app(Duration::from_secs(5));
    let read = read_from("https://shop.example", "/healthz");
    let answer = send(&app, read).await;
    assert_eq!(answer.status, StatusCode::OK);
    let cors_headers: Vec<_> =
        answer.headers.keys().filter(|name| name.as_str().starts_with("access-control-")).collect();
    assert!(cors_headers.is_empty(), "{cors_headers:?}");
    // The answer is the same for every origin: nothing to vary by.
    assert!(answer.headers.get(header::VARY).is_none_or(|vary| !vary.to_str().expect("ascii").contains("origin")));
    let refused = send(&app, preflight_from("https://shop.example")).await;
    assert_eq!(refused.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(refused.headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

#[tokio::test]
async fn the_openapi_document_lists_every_route() {
    let app = offline_app(Duration::from_secs(5));
    let document = get(&app, "/openapi.json").await.json();
    let paths = document["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/v1/products/{productId}/comments", "get"),
        ("/v1/users/{userId}/comments", "get"),
        ("/v1/products/{productId}/comments/ranked", "get"),
        ("/v1/products/{productId}/comments/summary", "get"),
        ("/v1/summaries", "get"),
        ("/v1/reviews/{reviewId}", "get"),
        ("/product/{productId}/comments/latest", "get"),
        ("/product/comments/get", "post"),
        ("/user/{userId}/comments/latest", "get"),
        ("/user/comments/get", "post"),
        ("/product/{productId}/comments/ranked", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    ] {
        assert!(paths.get(path).and_then(|item| item.get(method)).is_some(), "{method} {path} is not documented");
    }
    for schema in [
        "Comment",
        "SeedComment",
        "RankedComment",
        "CommentsPage",
        "SeedCommentsPage",
        "ErrorBody",
        "ReviewSummaryView",
        "SummariesPage",
        "CommentView",
        "Author",
    ] {
        assert!(document["components"]["schemas"].get(schema).is_some(), "schema {schema} is missing");
    }
}

/// Every operation of the document, as (path, method, operation).
fn operations(document: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            let item = item.as_object().expect("path item");
            item.iter().map(|(method, operation)| (path.clone(), method.clone(), operation.clone()))
        })
        .collect()
}

#[tokio::test]
async fn the_openapi_document_declares_every_constraint_and_status_the_service_answers() {
    let app = offline_app(Duration::from_secs(5));
    let document = get(&app, "/openapi.json").await.json();
    for (path, method, operation) in operations(&document) {
        let name = format!("{method} {path}");
        let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
        let parameter = |wanted: &str| parameters.iter().find(|parameter| parameter["name"] == wanted).cloned();
        for id in ["productId", "userId"] {
            if let Some(id) = parameter(id) {
                let schema = &id["schema"];
                assert_eq!((&schema["minLength"], &schema["maxLength"]), (&10.into(), &10.into()), "{name}");
                assert_eq!(schema["pattern"], "^[ -.0-~]{10}$", "{name}");
            }
        }
        if let Some(limit) = parameter("limit") {
            assert_eq!((&limit["schema"]["minimum"], &limit["schema"]["maximum"]), (&1.into(), &100.into()), "{name}");
        }
        if let Some(cursor) = parameter("cursor") {
            assert!(cursor["schema"]["pattern"].is_string(), "{name}: the cursor's alphabet");
        }
        let responses = operation["responses"].as_object().expect("responses");
        let has = |status: &str| responses.contains_key(status);
        if parameters.iter().any(|parameter| parameter["in"] == "path" || parameter["name"] == "limit") {
            assert!(has("400"), "{name} answers 400 for a bad id or limit");
        }
        if has("503") {
            assert!(has("500"), "{name} reads HBase and can answer 500");
            assert!(responses["503"]["headers"].get("Retry-After").is_some(), "{name}: Retry-After on 503");
        }
        let widget = path.ends_with("/reviews.html");
        if method == "get"
            && (path.contains("/comments")
                || path.ends_with("/summaries")
                || path.starts_with("/v1/reviews/")
                || widget)
        {
            assert!(has("304"), "{name} answers conditional GETs");
            assert!(responses["200"]["headers"].get("ETag").is_some(), "{name}: ETag on 200");
            assert!(parameter("If-None-Match").is_some(), "{name}: If-None-Match");
            let cached =
                path.ends_with("/ranked") || path.ends_with("/summary") || path.ends_with("/summaries") || widget;
            assert_eq!(responses["200"]["headers"].get("Cache-Control").is_some(), cached, "{name}: Cache-Control");
        }
        if method == "post" {
            for status in ["400", "413", "415"] {
                assert!(has(status), "{name} answers {status} for a bad body");
            }
        }
    }
    let summary = &document["paths"]["/v1/products/{productId}/comments/summary"]["get"]["responses"];
    assert!(summary.get("404").is_some(), "a product no run counted answers 404");
    let request = &document["components"]["schemas"]["SeedPageRequest"];
    assert_eq!(request["required"], serde_json::json!(["startIndexKey"]), "{request}");
    assert_eq!(request["properties"]["startIndexKey"]["format"], "byte");
    assert_eq!(request["properties"]["startIndexKey"]["type"], "string", "null is refused, so not allowed");

    // Typed for generated clients: enums, and arrays sent comma-separated.
    let parameter_of = |path: &str, name: &str| {
        document["paths"][path]["get"]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|parameter| parameter["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{path} has no parameter {name}"))
    };
    let comments = "/v1/products/{productId}/comments";
    let rating = parameter_of(comments, "rating");
    assert_eq!((&rating["style"], &rating["explode"]), (&"form".into(), &false.into()), "{rating}");
    assert_eq!(rating["schema"]["type"], "array");
    assert_eq!(rating["schema"]["items"], serde_json::json!({"type": "integer", "minimum": 1, "maximum": 5}));
    assert_eq!(
        parameter_of(comments, "sort")["schema"]["enum"],
        serde_json::json!(["newest", "rating_desc", "rating_asc"])
    );
    for path in
        [comments, "/v1/users/{userId}/comments", "/v1/products/{productId}/comments/ranked", "/v1/reviews/{reviewId}"]
    {
        assert_eq!(parameter_of(path, "include")["schema"]["enum"], serde_json::json!(["author"]), "{path}");
    }
    let product_ids = parameter_of("/v1/summaries", "productIds");
    assert_eq!(
        (&product_ids["required"], &product_ids["style"], &product_ids["explode"]),
        (&true.into(), &"form".into(), &false.into())
    );
    assert_eq!((&product_ids["schema"]["type"], &product_ids["schema"]["maxItems"]), (&"array".into(), &100.into()));
    assert_eq!(product_ids["schema"]["items"]["pattern"], "^[ -+.0-~-]{10}$");
    assert!(document["paths"]["/v1/summaries"]["get"]["responses"].get("400").is_some());
    let review = &document["paths"]["/v1/reviews/{reviewId}"]["get"]["responses"];
    assert!(review.get("404").is_some() && review.get("304").is_some(), "{review}");
}

#[tokio::test]
async fn the_docs_page_loads_nothing_from_the_internet() {
    let app = offline_app(Duration::from_secs(5));
    assert_eq!(get(&app, "/docs").await.status, StatusCode::SEE_OTHER);
    let page = get(&app, "/docs/").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    assert!(html.contains("swagger-ui-bundle.js"), "{html}");
    // Every asset the page names is served by this service.
    let mut assets = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for piece in html.split(attribute).skip(1) {
            let asset = piece.split('"').next().unwrap_or_default().to_owned();
            assert!(!asset.contains("//"), "the page references an external asset: {asset}");
            assets.push(asset.trim_start_matches("./").to_owned());
        }
    }
    assert!(assets.len() >= 5, "{assets:?}");
    for asset in &assets {
        let answer = get(&app, &format!("/docs/{asset}")).await;
        assert_eq!(answer.status, StatusCode::OK, "/docs/{asset}");
        if asset.ends_with(".css") {
            // CSS may only use inline data: URLs (the SVG namespace inside them is not fetched).
            for reference in answer.text().split("url(").skip(1) {
                let target = reference.trim_start_matches(['"', '\'']);
                assert!(target.starts_with("data:"), "{asset} loads {}", &target[..target.len().min(60)]);
            }
        }
    }
    // The validator badge is the one thing Swagger UI would fetch from the internet.
    let initializer = get(&app, "/docs/swagger-initializer.js").await.text();
    assert!(initializer.contains(r#""validatorUrl": "none""#), "{initializer}");
    assert!(initializer.contains("/openapi.json"), "{initializer}");
}

#[tokio::test]
async fn a_panicking_handler_answers_a_generic_500_through_the_services_middleware() {
    // No real route panics, so a route of the test's own is wrapped in the
    // service's middleware: the same stack `app` builds.
    let routes = Router::new().route(
        "/boom",
        axum::routing::get(|| async {
            if std::hint::black_box(true) {
                panic!("secret detail");
            }
            "unreachable"
        }),
    );
    let store = ReadStore::new(Hbase::new(HbaseConfig::default()), Tables::with_prefix("panic_").expect("prefix"));
    let router = crate::server::with_middleware(routes, AppState::new(store, Settings::default()));
    let answer = get(&router, "/boom").await;
    answer.assert_error(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    assert!(!answer.text().contains("secret"), "{}", answer.text());
    assert!(answer.headers.contains_key("x-request-id"), "the layers outside the catcher still ran");
    let metrics = get(&offline_app(Duration::from_secs(5)), "/metrics").await.text();
    assert!(metrics.contains("route=\"/boom\",status=\"500\""), "the 500 is counted: {metrics}");
}

#[tokio::test]
async fn a_browser_can_read_the_503_of_an_answer_later_than_the_deadline() {
    // No real route is reliably slow without HBase, so a route of the test's
    // own, slower than the deadline, is wrapped in the service's middleware.
    let routes = Router::new().route(
        "/slow",
        axum::routing::get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "too late"
        }),
    );
    let store = ReadStore::new(Hbase::new(HbaseConfig::default()), Tables::with_prefix("slow_").expect("prefix"));
    let settings = Settings {
        request_timeout: Duration::from_millis(50),
        cors_origins: vec!["https://shop.example".to_owned()],
        ..Settings::default()
    };
    let router = crate::server::with_middleware(routes, AppState::new(store, settings));
    let answer = send(&router, read_from("https://shop.example", "/slow")).await;
    answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "timeout");
    assert_eq!(answer.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://shop.example");
    assert!(answer.headers.contains_key("x-request-id"));
    let exposed = answer.headers[header::ACCESS_CONTROL_EXPOSE_HEADERS].to_str().expect("ascii");
    assert!(exposed.contains("retry-after") && exposed.contains("x-request-id"), "{exposed}");
}

#[tokio::test]
async fn the_seed_ranked_route_has_the_cache_weigh_the_answer_it_keeps() {
    // A ranking already cached and fresh: the route reads no HBase.
    let state = offline_state(Duration::from_millis(200));
    let product = common::Id::parse("productId", "PRODUCT001").expect("id");
    let ranking = std::sync::Arc::new(crate::prepared_ranking::Ranking::new(Vec::new(), None, Instant::now(), true));
    let loaded = std::sync::Arc::clone(&ranking);
    let cache = state.ranked_cache().clone();
    cache.get_or_load(product, || async move { Ok(loaded) }).await.expect("cached");
    let (before, _) = cache.settled_size().await;

    let answer = get(&crate::app(state), "/product/PRODUCT001/comments/ranked").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let (kept, kept_now) = ranking.keep_seed_body().expect("kept");
    assert!(!kept_now, "the request kept the answer first");
    assert_eq!(answer.body, kept.body().to_vec());
    // The cache weighs it again in a task of its own.
    let weighed = async {
        loop {
            let (after, _) = cache.settled_size().await;
            if after != before {
                return after;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let after = tokio::time::timeout(Duration::from_secs(5), weighed).await.expect("weighed again");
    assert_eq!(after - before, kept.weight_bytes() as u64);
}
