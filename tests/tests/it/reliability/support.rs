//! What the reliability tests share: a query service started in-process on an
//! ephemeral port, HTTP answers (including raw requests that no URL library
//! would send unchanged), deterministic review data, and raw-row helpers that
//! copy tables between prefixes and read the rank table byte for byte.

use std::time::Duration;

use common::hbase::{Hbase, Retry, Row, RowMutation, ScanSpec, COLUMN_VALUE};
use common::model::{Comment, Extra, Order};
use common::store::{NewComment, Store};
use common::Id;
use integration_tests::test_id;
use query_api::{AppState, Args, Settings};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The as-of time of every ranking in these tests: a fixed instant, so runs compare byte for byte.
pub const AS_OF_MS: i64 = 1_750_000_000_000;
const DAY_MS: i64 = 86_400_000;

/// A query service serving on an ephemeral loopback port until dropped or shut down.
pub struct Service {
    pub base: String,
    pub address: std::net::SocketAddr,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

/// An HTTP answer: status, and the body as JSON when it is JSON.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub raw: String,
}

impl Answer {
    /// Whether the body is the API's error shape: `{"error": {"code": "...", "message": "..."}}`.
    pub fn has_error_shape(&self) -> bool {
        let error = &self.body["error"];
        error["code"].as_str().is_some_and(|code| !code.is_empty())
            && error["message"].as_str().is_some_and(|message| !message.is_empty())
    }

    /// The `comments` of a page, as stored comments.
    pub fn comments(&self) -> Vec<Comment> {
        self.body["comments"]
            .as_array()
            .unwrap_or_else(|| panic!("no comments in {}", self.raw))
            .iter()
            .map(|comment| serde_json::from_value(comment.clone()).expect("a comment"))
            .collect()
    }
}

impl Service {
    /// Starts the service over `store` with `settings`.
    pub async fn start(store: Store, settings: Settings) -> Service {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let address = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(query_api::serve(listener, AppState::new(store.reader(), settings), async move {
            // A dropped sender (a test that failed early) stops the service too.
            let _ = stopped.await;
        }));
        // Generous: a request the service never answers shows up as a client
        // error the tests count, not as a hung test.
        let client = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().expect("client");
        Service { base: format!("http://{address}"), address, client, stop: Some(stop), task }
    }

    pub async fn get(&self, path: &str) -> Answer {
        let response = self.client.get(format!("{}{path}", self.base)).send().await.expect("GET");
        answer(response).await
    }

    /// POSTs `body` as is, with `content_type` when given.
    pub async fn post_bytes(&self, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Answer {
        let mut request = self.client.post(format!("{}{path}", self.base)).body(body);
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        answer(request.send().await.expect("POST")).await
    }

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
        tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut bytes))
            .await
            .expect("the service answers a raw request")
            .expect("read response");
        parse_raw_response(&bytes)
    }

    /// The `/metrics` page.
    pub async fn metrics(&self) -> String {
        let response = self.client.get(format!("{}/metrics", self.base)).send().await.expect("GET /metrics");
        response.text().await.expect("metrics text")
    }

    /// Signals shutdown and waits for `serve` to return.
    pub async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = tokio::time::timeout(Duration::from_secs(20), &mut self.task)
            .await
            .expect("serve returns after the shutdown signal");
        served.expect("serve task").expect("serve result");
    }
}

pub async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let bytes = response.bytes().await.expect("body");
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    Answer { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null), raw }
}

/// Parses an HTTP/1.1 response with a `Content-Length` body (what the service sends unasked for gzip).
fn parse_raw_response(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let status_code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text}"));
    let status = StatusCode::from_u16(status_code).expect("status");
    Answer { status, body: serde_json::from_str(body).unwrap_or(Value::Null), raw: body.to_owned() }
}

/// A store with the query service's own HBase settings (its defaults: a 1.5 s
/// deadline and one retry, unless `extra_flags` say otherwise) reading the
/// tables of `tables_of` through the gateway at `address`.
pub fn service_store(address: &str, tables_of: &Store, extra_flags: &[&str]) -> Store {
    let mut flags = vec!["query-api", "--thrift-addr", address, "--table-prefix", &tables_of.tables().prefix];
    flags.extend_from_slice(extra_flags);
    let args = Args::try_parse_from(flags).expect("service flags");
    Store::new(Hbase::new(args.hbase_config()), tables_of.tables().clone())
}

/// Service settings with the ranked cache off, so every ranked read reaches HBase.
pub fn uncached_settings() -> Settings {
    Settings { ranked_cache_ttl: Duration::ZERO, ..Settings::default() }
}

/// The shape of a deterministic review data set.
#[derive(Debug, Clone, Copy)]
pub struct Catalogue {
    pub products: u64,
    pub comments_per_product: u64,
    pub users: u64,
}

impl Catalogue {
    pub fn product(&self, number: u64) -> Id {
        test_id("P", number)
    }

    pub fn user(&self, number: u64) -> Id {
        test_id("U", number)
    }

    /// The comments of the data set: varied lengths, votes, photos and ages,
    /// a function of their position only, so every load writes the same bytes.
    pub fn new_comments(&self, first_order: u64) -> Vec<NewComment> {
        let mut comments = Vec::new();
        for product in 0..self.products {
            for slot in 0..self.comments_per_product {
                let position = product * self.comments_per_product + slot;
                let mix = position.wrapping_mul(2_654_435_761) % 1_000;
                let words = ["sturdy", "배송이 빨라요", "fits well", "great value", "조용하고 좋아요", "too small"];
                let word = words[usize::try_from(mix % 6).expect("small")];
                let content = format!(
                    "{word} — review {position}: {}",
                    "detail ".repeat(usize::try_from(mix % 40).expect("small"))
                );
                comments.push(NewComment {
                    order_id: test_id("O", first_order + position),
                    product_id: self.product(product),
                    user_id: self.user(position % self.users),
                    content,
                    timestamp_ms: AS_OF_MS
                        - i64::try_from(mix).expect("small") * DAY_MS / 3
                        - i64::try_from(slot).expect("small"),
                    rating: None,
                    helpful: (mix % 3 != 0).then_some(mix % 97),
                    unhelpful: (mix % 4 == 0).then_some(mix % 13),
                    photos: (mix % 5 == 0).then_some(u32::try_from(mix % 4).expect("small")),
                })
            }
        }
        comments
    }
}

/// Writes `comments` through the write path, with their orders, in batches.
pub async fn post_all(store: &Store, comments: Vec<NewComment>) -> Vec<Comment> {
    let orders: Vec<Order> =
        comments.iter().map(|new| Order { id: new.order_id, user_id: new.user_id, extra: Extra::new() }).collect();
    for chunk in orders.chunks(2_000) {
        store.put_records(chunk).await.expect("put orders");
    }
    let mut written = Vec::with_capacity(comments.len());
    let mut tasks = tokio::task::JoinSet::new();
    for (index, chunk) in comments.chunks(500).enumerate() {
        let store = store.clone();
        let chunk = chunk.to_vec();
        tasks.spawn(async move { (index, store.post_comments(chunk).await.expect("post comments")) });
    }
    let mut batches = Vec::new();
    while let Some(done) = tasks.join_next().await {
        batches.push(done.expect("post task"));
    }
    batches.sort_by_key(|(index, _)| *index);
    for (_, batch) in batches {
        written.extend(batch);
    }
    written
}

/// Every row of `table`, every column.
pub async fn raw_rows(hbase: &Hbase, table: &str) -> Vec<Row> {
    let table = table.to_owned();
    let spec = ScanSpec {
        start: Vec::new(),
        stop: None,
        limit: usize::MAX,
        page_size: 1_000,
        columns: Vec::new(),
        cache_blocks: true,
    };
    hbase.run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await.expect("scan a table")
}

/// Writes `rows` as they are (every column) into `table`.
pub async fn put_rows(hbase: &Hbase, table: &str, rows: Vec<Row>) {
    for chunk in rows.chunks(1_000) {
        let table = table.to_owned();
        let mutations: Vec<RowMutation> = chunk
            .iter()
            .map(|row| RowMutation::Put {
                key: row.key.clone(),
                cells: row.cells.iter().map(|(column, value)| (column.clone(), value.clone())).collect(),
            })
            .collect();
        hbase
            .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone()))
            .await
            .expect("put raw rows");
    }
}

/// Puts one `cf:q` value as is.
pub async fn put_value(store: &Store, table: &str, key: Vec<u8>, value: Vec<u8>) {
    let mut cells = std::collections::BTreeMap::new();
    cells.insert(COLUMN_VALUE.to_vec(), value);
    put_rows(store.hbase(), table, vec![Row { key, cells }]).await;
}

/// Copies the tables a ranking reads and writes from `from` into `to`, byte for byte.
pub async fn copy_ranking_tables(from: &Store, to: &Store) {
    let pairs = [
        (&from.tables().comment, &to.tables().comment),
        (&from.tables().product_comment, &to.tables().product_comment),
        (&from.tables().user_comment, &to.tables().user_comment),
        (&from.tables().product_comment_rank, &to.tables().product_comment_rank),
    ];
    for (source, target) in pairs {
        let rows = raw_rows(from.hbase(), source).await;
        put_rows(to.hbase(), target, rows).await;
    }
}

/// One rank row as stored: (row key, `cf:q`, `cf:s`).
pub type RankRow = (Vec<u8>, Vec<u8>, Vec<u8>);

/// A rank table grouped by product id.
pub type SlotsByProduct = std::collections::BTreeMap<Vec<u8>, Vec<RankRow>>;

/// The rank table as (key, cf:q, cf:s) triples, in key order: what "byte-identical" compares.
pub async fn rank_table(store: &Store) -> Vec<RankRow> {
    raw_rows(store.hbase(), &store.tables().product_comment_rank)
        .await
        .into_iter()
        .map(|row| {
            let value = row.value(COLUMN_VALUE).unwrap_or_default().to_vec();
            let score = row.value(common::hbase::COLUMN_SCORE).unwrap_or_default().to_vec();
            (row.key, value, score)
        })
        .collect()
}

/// The rank table grouped by product (the first ten key bytes).
pub fn slots_by_product(table: &[RankRow]) -> SlotsByProduct {
    let mut by_product = SlotsByProduct::new();
    for slot in table {
        let product = slot.0.get(..common::ids::ID_LEN).unwrap_or(&slot.0).to_vec();
        by_product.entry(product).or_default().push(slot.clone());
    }
    by_product
}

/// Drops the tables of `stores` (each test's own), so repeated runs do not
/// pile up tables in the HBase master's memory.
pub async fn drop_tables(stores: &[&Store]) {
    let mut drops = tokio::task::JoinSet::new();
    for store in stores {
        let store = (*store).clone();
        drops.spawn(async move { common::schema::drop_tables(store.hbase(), store.tables()).await });
    }
    while let Some(dropped) = drops.join_next().await {
        dropped.expect("drop task").expect("drop the test's tables");
    }
}
