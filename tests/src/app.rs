//! The query service under test: [`TestApp`] starts `query-api` in-process on
//! an ephemeral loopback port over a store (zero2prod's `spawn_app`), and
//! [`Answer`] is what every HTTP call to it returns.
//!
//! query-api's own handler tests (`query-api/src/handler_tests.rs`) keep their
//! `tower::ServiceExt::oneshot` answer: they call the router without a socket
//! or HBase, from inside query-api, which cannot depend on this crate (this
//! crate depends on query-api).

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::keys::CommentKey;
use common::model::Comment;
use common::store::Store;
use query_api::{AppState, Args, Settings};
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a request may take before the client gives up. Generous: a
/// request the service never answers shows up as a client error the tests
/// count or report, not as a hung test.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How many pages a walk may take before the test calls the list endless.
const MAX_PAGES: usize = 1_000;

/// How long [`TestApp::shut_down`] waits for `serve` to return.
const SHUTDOWN_WITHIN: Duration = Duration::from_secs(20);

/// A query service serving on an ephemeral loopback port until dropped or shut down.
#[derive(Debug)]
pub struct TestApp {
    /// `http://127.0.0.1:<port>`, to prefix paths with.
    pub base: String,
    /// The socket address the service listens on.
    pub address: std::net::SocketAddr,
    /// A client with the tests' request timeout, for requests the helpers do not cover.
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestApp {
    /// Starts the service over `store` (read through its read-only handle) with `settings`.
    pub async fn spawn(store: Store, settings: Settings) -> TestApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let address = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(query_api::serve(listener, AppState::new(store.reader(), settings), async move {
            // A dropped sender (a test that failed early) stops the service too.
            let _ = stopped.await;
        }));
        let client = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().expect("client");
        TestApp { base: format!("http://{address}"), address, client, stop: Some(stop), task }
    }

    /// `GET {path}`.
    pub async fn get(&self, path: &str) -> Answer {
        let response = self.client.get(format!("{}{path}", self.base)).send().await.expect("GET");
        Answer::from_response(response).await
    }

    /// `GET {path}` with `If-None-Match: {tag}`.
    pub async fn get_if_none_match(&self, path: &str, tag: &str) -> Answer {
        let request = self.client.get(format!("{}{path}", self.base)).header(reqwest::header::IF_NONE_MATCH, tag);
        Answer::from_response(request.send().await.expect("GET")).await
    }

    /// POSTs `body` as is, with `content_type` when given.
    pub async fn post_bytes(&self, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Answer {
        let mut request = self.client.post(format!("{}{path}", self.base)).body(body);
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        Answer::from_response(request.send().await.expect("POST")).await
    }

    /// POSTs `body` as `application/json`.
    pub async fn post_json(&self, path: &str, body: &Value) -> Answer {
        self.post_bytes(path, Some("application/json"), body.to_string().into_bytes()).await
    }

    /// Sends `GET {target}` over a plain TCP connection, exactly as written:
    /// URL libraries normalise `..` and `%2e%2e` segments away before sending.
    pub async fn raw_get(&self, target: &str) -> Answer {
        let mut stream = tokio::net::TcpStream::connect(self.address).await.expect("connect");
        let request = format!("GET {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.address);
        stream.write_all(request.as_bytes()).await.expect("write request");
        let mut bytes = Vec::new();
        tokio::time::timeout(REQUEST_TIMEOUT, stream.read_to_end(&mut bytes))
            .await
            .expect("the service answers a raw request")
            .expect("read response");
        Answer::from_raw_response(&bytes)
    }

    /// The `/metrics` page.
    pub async fn metrics(&self) -> String {
        let response = self.client.get(format!("{}/metrics", self.base)).send().await.expect("GET /metrics");
        response.text().await.expect("metrics text")
    }

    /// Every comment of a `/v1` list, as answered, following `nextCursor`
    /// with pages of `limit` until the list ends.
    pub async fn walk_v1(&self, path: &str, limit: usize) -> Vec<Value> {
        let pages = self.walk_v1_pages(path, limit).await;
        pages.iter().flat_map(|page| page.comment_values().iter().cloned()).collect()
    }

    /// Every page of a `/v1` list, as answered (headers and all), following
    /// `nextCursor` with pages of `limit` until the list ends; each page is
    /// checked to be a `200`.
    pub async fn walk_v1_pages(&self, path: &str, limit: usize) -> Vec<Answer> {
        match self.try_walk_v1_pages(path, limit).await {
            Ok(pages) => pages,
            Err(refused) => panic!("{path}: a page answered {}: {}", refused.status, refused.raw),
        }
    }

    /// Every page of a `/v1` list, as [`TestApp::walk_v1_pages`] walks it,
    /// or the first page that was not a `200`.
    pub async fn try_walk_v1_pages(&self, path: &str, limit: usize) -> Result<Vec<Answer>, Answer> {
        // `path` may carry a query of its own (`?rating=1`).
        let path = if path.contains('?') { format!("{path}&") } else { format!("{path}?") };
        let mut pages = Vec::new();
        let mut url = format!("{path}limit={limit}");
        for _ in 0..MAX_PAGES {
            let page = self.get(&url).await;
            if page.status != StatusCode::OK {
                return Err(page);
            }
            let next = page.body["nextCursor"].as_str().map(str::to_owned);
            pages.push(page);
            match next {
                Some(cursor) => url = format!("{path}limit={limit}&cursor={cursor}"),
                None => return Ok(pages),
            }
        }
        panic!("{path} did not end within {MAX_PAGES} pages");
    }

    /// Every comment of a seed list, as answered: the `latest` page, then
    /// `POST next` with each `nextIndexKey`, pages of `limit`.
    pub async fn walk_seed(&self, latest: &str, next: &str, limit: usize) -> Vec<Value> {
        let mut page = self.get(&format!("{latest}?limit={limit}")).await;
        let mut shown = Vec::new();
        for _ in 0..MAX_PAGES {
            assert_eq!(page.status, StatusCode::OK, "{latest}: {}", page.raw);
            shown.extend(page.comment_values().iter().cloned());
            let Some(start) = page.body["nextIndexKey"].as_str().map(str::to_owned) else {
                return shown;
            };
            // The seed's Jackson writes standard, padded base64.
            assert!(STANDARD.decode(&start).is_ok(), "{start}");
            page = self.post_json(next, &json!({"startIndexKey": start, "limit": limit})).await;
        }
        panic!("{latest} did not end within {MAX_PAGES} pages");
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn shut_down(self) {
        self.shut_down_within(SHUTDOWN_WITHIN).await;
    }

    /// Signals shutdown and waits for `serve` to return, failing after `within`.
    pub async fn shut_down_within(mut self, within: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let outcome = tokio::time::timeout(within, &mut self.task).await;
        let served =
            outcome.unwrap_or_else(|_| panic!("serve did not return within {within:?} of the shutdown signal"));
        served.expect("serve task").expect("serve result");
    }
}

/// An HTTP answer: status, headers, the body as received, and the body as JSON
/// (`Value::Null` when it is not JSON, as a 304's empty body is not).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    /// The body as received (lossy UTF-8), for messages and byte comparisons.
    pub raw: String,
}

impl Answer {
    /// Reads a `reqwest` response to its end.
    pub async fn from_response(response: reqwest::Response) -> Answer {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        let raw = String::from_utf8_lossy(&bytes).into_owned();
        Answer { status, headers, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null), raw }
    }

    /// Parses an HTTP/1.1 response with a `Content-Length` body (what the
    /// service sends unasked for gzip).
    fn from_raw_response(bytes: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
        let mut lines = head.split("\r\n");
        let status_code: u16 = lines
            .next()
            .and_then(|status_line| status_line.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {text}"));
        let mut headers = HeaderMap::new();
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            if let (Ok(name), Ok(value)) = (
                reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()),
                reqwest::header::HeaderValue::from_str(value.trim()),
            ) {
                headers.append(name, value);
            }
        }
        let status = StatusCode::from_u16(status_code).expect("status");
        Answer { status, headers, body: serde_json::from_str(body).unwrap_or(Value::Null), raw: body.to_owned() }
    }

    /// Whether the body is the API's error shape: `{"error": {"code": "...", "message": "..."}}`.
    pub fn has_error_shape(&self) -> bool {
        let error = &self.body["error"];
        error["code"].as_str().is_some_and(|code| !code.is_empty())
            && error["message"].as_str().is_some_and(|message| !message.is_empty())
    }

    /// Asserts `status` and the API's error shape with `code`.
    pub fn assert_error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}", self.raw);
        assert_eq!(self.body["error"]["code"], code, "{}", self.raw);
        assert!(self.has_error_shape(), "{}", self.raw);
    }

    /// The `comments` of a page, as answered.
    pub fn comment_values(&self) -> &[Value] {
        self.body["comments"].as_array().unwrap_or_else(|| panic!("no comments in {}", self.raw))
    }

    /// The `comments` of a page, as stored comments.
    /// Each `/v1` comment's `id` is checked to be its review id and left out,
    /// so the comment compares equal to the one stored.
    pub fn comments(&self) -> Vec<Comment> {
        self.comment_values()
            .iter()
            .map(|value| {
                let mut value = value.clone();
                let id = value.as_object_mut().and_then(|object| object.remove("id"));
                let comment: Comment = serde_json::from_value(value).expect("a comment");
                if let Some(id) = id {
                    assert_eq!(id, comment.row_key().review_id(), "the review id of {comment:?}");
                }
                comment
            })
            .collect()
    }

    /// The row keys of the `comments` of a page, in page order.
    pub fn comment_keys(&self) -> Vec<CommentKey> {
        comment_keys(self.comment_values())
    }
}

/// The row keys of `comments` as answered (a page's, or a walk's), in order.
pub fn comment_keys(comments: &[Value]) -> Vec<CommentKey> {
    comments
        .iter()
        .map(|comment| serde_json::from_value::<Comment>(comment.clone()).expect("a comment").row_key())
        .collect()
}

/// A store with the query service's own HBase settings (its defaults: a 2.5 s
/// deadline and one retry, unless `extra_flags` say otherwise, never the tests'
/// patient ones) reading the tables of `tables_of` through the gateway at `address`.
pub fn service_store(address: &str, tables_of: &Store, extra_flags: &[&str]) -> Store {
    service_store_via(address, &crate::thrift2_addr(), tables_of, extra_flags)
}

/// [`service_store`] with its Thrift2 gateway at `thrift2_address` too (a
/// proxy in front of it, for tests where both gateways fail).
pub fn service_store_via(address: &str, thrift2_address: &str, tables_of: &Store, extra_flags: &[&str]) -> Store {
    let mut flags = vec![
        "query-api",
        "--thrift-addr",
        address,
        "--thrift2-addr",
        thrift2_address,
        "--table-prefix",
        &tables_of.tables().prefix,
    ];
    flags.extend_from_slice(extra_flags);
    let args = Args::try_parse_from(flags).expect("service flags");
    Store::new(common::hbase::Hbase::new(args.hbase_config()), tables_of.tables().clone())
}

/// Service settings with the ranked cache off, so every ranked read reaches HBase.
pub fn uncached_settings() -> Settings {
    Settings { ranked_cache_ttl: Duration::ZERO, ..Settings::default() }
}

/// An address on which nothing listens: connecting is refused at once.
pub fn closed_address() -> String {
    format!("127.0.0.1:{}", crate::free_port())
}
