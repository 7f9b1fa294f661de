//! Handler tests through `tower::ServiceExt::oneshot`: the whole router and its
//! middleware, without a socket and without HBase: the store's gateway address
//! refuses connections, which proves a refused request never reaches HBase.
//! The tests that read data from HBase are in the integration-test binary
//! (`tests/tests/it/api.rs`). Here the helpers every test uses; the tests
//! in one module per job.

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

mod bad_input;
mod cors;
mod encoding;
mod front_door;
mod openapi;
mod ranked_cache;

/// An address where nothing listens: connecting is refused at once.
const CLOSED_ADDRESS: &str = "127.0.0.1:1";

/// A store whose gateway refuses every connection at once.
pub(crate) fn offline_store(operation_timeout: Duration) -> ReadStore {
    let hbase = Hbase::new(HbaseConfig {
        thrift1_gateways: GatewayList::single(CLOSED_ADDRESS),
        connect_timeout: Duration::from_millis(100),
        operation_timeout,
        retries: 1,
        ..HbaseConfig::default()
    });
    ReadStore::new(hbase, Tables::with_prefix("offline_").expect("prefix"))
}

fn offline_state(operation_timeout: Duration) -> AppState {
    AppState::new(offline_store(operation_timeout), Settings::default())
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
