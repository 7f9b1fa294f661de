//! CORS: only configured origins may read answers, and a browser can read a late answer's 503.

use super::*;

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
    let router = crate::server::with_middleware(routes, Default::default(), AppState::new(store, settings));
    let answer = send(&router, read_from("https://shop.example", "/slow")).await;
    answer.assert_error(StatusCode::SERVICE_UNAVAILABLE, "timeout");
    assert_eq!(answer.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://shop.example");
    assert!(answer.headers.contains_key("x-request-id"));
    let exposed = answer.headers[header::ACCESS_CONTROL_EXPOSE_HEADERS].to_str().expect("ascii");
    assert!(exposed.contains("retry-after") && exposed.contains("x-request-id"), "{exposed}");
}
