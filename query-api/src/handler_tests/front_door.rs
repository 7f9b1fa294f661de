//! What every request gets on its way in and out: the deadline and the 503 of an unreachable or slow HBase, the request id, the metrics, the generic 500 of a panic.

use super::*;

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
async fn a_requests_log_lines_name_its_request_id_method_and_path() {
    // The front door calls the layers beneath outside the request's log
    // context and polls their answer in it: the line the failure logs names
    // the request, in the service's own format. The lines' buffer is
    // leaked, so that the subscriber may borrow it as long as it lives.
    let lines: &'static std::sync::Mutex<Vec<u8>> = Box::leak(Box::default());
    let format = common::traces::LogFormat::Text { colour: false };
    let subscriber = tracing_subscriber::layer::SubscriberExt::with(
        tracing_subscriber::registry(),
        common::traces::log_lines(format, Some("debug"), move || {
            tracing_subscriber::fmt::MakeWriter::make_writer(lines)
        }),
    );
    let _logging = tracing::subscriber::set_default(subscriber);
    // `tracing` caches whether a call site is wanted, process-wide. With one
    // dispatcher registered, a call site first reached by another test's
    // thread (which has no subscriber) is cached as never wanted, and this
    // test's lines would be lost. With a second one registered for the
    // test's length, every call site asks both, and the registry wants all.
    let _every_call_site_wanted = tracing::Dispatch::new(tracing_subscriber::registry());
    tracing::callsite::rebuild_interest_cache();
    let app = offline_app(Duration::from_millis(400));
    let request = Request::get("/v1/products/PRODUCT001/comments")
        .header("x-request-id", "caller-chosen-id")
        .body(Body::empty())
        .expect("request");
    send(&app, request).await.assert_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    let logged = String::from_utf8(lines.lock().expect("the lines").clone()).expect("utf-8");
    // The failure's line, and the access line the front door logs last.
    for message in [": request failed", ": request route="] {
        let line = logged.lines().find(|line| line.contains(message)).unwrap_or_else(|| panic!("{logged}"));
        assert!(
            line.contains("request{request_id=caller-chosen-id method=GET path=/v1/products/PRODUCT001/comments}:"),
            "{line}"
        );
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
    let router = crate::server::with_middleware(routes, Default::default(), AppState::new(store, Settings::default()));
    let answer = get(&router, "/boom").await;
    answer.assert_error(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    assert!(!answer.text().contains("secret"), "{}", answer.text());
    assert!(answer.headers.contains_key("x-request-id"), "the layers outside the catcher still ran");
    let metrics = get(&offline_app(Duration::from_secs(5)), "/metrics").await.text();
    assert!(metrics.contains("route=\"/boom\",status=\"500\""), "the 500 is counted: {metrics}");
}
