//! Distributed traces in a real trace store: Jaeger, built from its Go
//! module and started by `scripts/jaeger.sh run`, receives the spans of
//! query-api and of the ranker over OTLP, and its query API shows them as
//! one trace each, with the HBase calls under the spans that made them.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::fixtures::{post_all, Catalogue};
use integration_tests::{
    cargo_binary, free_port, fresh_store, thrift2_addr, thrift_addr, wait_for, wait_showing, KilledOnDrop,
};
use serde_json::Value;

use crate::rows::drop_tables;

/// Jaeger on free ports, killed when the test ends.
struct Jaeger {
    _process: KilledOnDrop,
    otlp_port: u16,
    query_port: u16,
    /// Asks Jaeger's query API, each question bounded so a wait cannot hang on one.
    client: reqwest::Client,
}

/// How long a test waits for spans to be in Jaeger.
const JAEGER_PATIENCE: Duration = Duration::from_secs(30);

impl Jaeger {
    /// Starts Jaeger (building it first if no build is there yet: minutes)
    /// and waits until its health check says it serves.
    async fn start() -> Jaeger {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/jaeger.sh");
        let (otlp_port, query_port, grpc_port, health_port) = (free_port(), free_port(), free_port(), free_port());
        let mut process = KilledOnDrop(
            Command::new(script)
                .arg("run")
                .env("JAEGER_OTLP_HTTP_PORT", otlp_port.to_string())
                .env("JAEGER_QUERY_PORT", query_port.to_string())
                .env("JAEGER_QUERY_GRPC_PORT", grpc_port.to_string())
                .env("JAEGER_HEALTH_PORT", health_port.to_string())
                .stdin(Stdio::null())
                .spawn()
                .expect("start scripts/jaeger.sh run"),
        );
        let health = format!("http://127.0.0.1:{health_port}/status");
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
        wait_for(Duration::from_secs(600), "Jaeger to serve", async || {
            if let Ok(Some(status)) = process.0.try_wait() {
                panic!("scripts/jaeger.sh run ended ({status}) before Jaeger served; it builds Jaeger with Go");
            }
            let answer = client.get(&health).send().await.ok()?;
            answer.status().is_success().then_some(())
        })
        .await;
        Jaeger { _process: process, otlp_port, query_port, client }
    }

    /// The variables that make a binary export its spans here.
    fn exporting_to(&self, command: &mut Command) {
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{}", self.otlp_port))
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_SERVICE_NAME")
            .env_remove("OTEL_TRACES_SAMPLER");
    }

    /// Runs `ranker run` on the tables of `prefix` (one product's, or all of
    /// them) with its spans exported here, and waits for it to exit 0.
    async fn run_ranker(&self, prefix: &str, product: Option<&str>) {
        let mut ranker = Command::new(cargo_binary("ranker"));
        ranker.args(["run", "--table-prefix", prefix]);
        if let Some(product) = product {
            ranker.args(["--product", product]);
        }
        ranker.args(["--thrift-addr", &thrift_addr(), "--thrift2-addr", &thrift2_addr()]).stdout(Stdio::null());
        self.exporting_to(&mut ranker);
        let ranked = tokio::task::spawn_blocking(move || ranker.status()).await.expect("ranker task").expect("ranker");
        assert!(ranked.success(), "ranker run: {ranked}");
    }

    /// The spans of trace `trace_id` once they hold what `whole` looks for:
    /// a service's spans arrive in batches, a parent's often after its children's.
    async fn trace(&self, trace_id: &str, whole: impl Fn(&[JaegerSpan]) -> bool) -> Vec<JaegerSpan> {
        let url = format!("http://127.0.0.1:{}/api/traces/{trace_id}", self.query_port);
        wait_showing(JAEGER_PATIENCE, &format!("the whole trace {trace_id} in Jaeger"), async || {
            let mut traces = self.traces_at(&url).await?;
            match traces.iter().position(|spans| whole(spans)) {
                Some(found) => Ok(traces.swap_remove(found)),
                None => Err(operations_of(&traces)),
            }
        })
        .await
    }

    /// The traces of `service` that Jaeger holds (at most 50), once they
    /// are what `done` looks for: a command's root span ends last and leaves
    /// in its final batch, which Jaeger may store a moment after the command
    /// has exited.
    async fn traces_of(&self, service: &str, done: impl Fn(&[Vec<JaegerSpan>]) -> bool) -> Vec<Vec<JaegerSpan>> {
        let url = format!("http://127.0.0.1:{}/api/traces?service={service}&limit=50", self.query_port);
        wait_showing(JAEGER_PATIENCE, &format!("the traces of {service} the test looks for"), async || {
            let traces = self.traces_at(&url).await?;
            if done(&traces) {
                Ok(traces)
            } else {
                Err(operations_of(&traces))
            }
        })
        .await
    }

    /// The traces Jaeger's query API answers at `url`, or what went wrong in
    /// words: its status and the `errors` it names (a trace or a service it
    /// does not hold), or the request's failure.
    async fn traces_at(&self, url: &str) -> Result<Vec<Vec<JaegerSpan>>, String> {
        let response = self.client.get(url).send().await.map_err(|error| error.to_string())?;
        let status = response.status();
        let answer: Value = response.json().await.map_err(|error| format!("{status}: {error}"))?;
        if !status.is_success() {
            return Err(format!("{status}: {}", answer["errors"]));
        }
        Ok(answer["data"].as_array().map(|traces| traces.iter().map(spans_of).collect()).unwrap_or_default())
    }
}

/// The operations of each trace, for a wait's failure to show what Jaeger held.
fn operations_of(traces: &[Vec<JaegerSpan>]) -> String {
    let operations: Vec<Vec<&str>> =
        traces.iter().map(|spans| spans.iter().map(|span| span.operation.as_str()).collect()).collect();
    format!("traces of these operations: {operations:?}")
}

/// One span as Jaeger's query API gives it.
#[derive(Debug, Clone)]
struct JaegerSpan {
    span_id: String,
    parent_id: Option<String>,
    operation: String,
    service: String,
    tags: HashMap<String, Value>,
}

/// The spans of one trace of a `/api/traces` answer.
fn spans_of(trace: &Value) -> Vec<JaegerSpan> {
    let services: HashMap<&str, &str> = trace["processes"]
        .as_object()
        .map(|processes| {
            processes
                .iter()
                .map(|(id, process)| (id.as_str(), process["serviceName"].as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    trace["spans"]
        .as_array()
        .map(|spans| {
            spans
                .iter()
                .map(|span| JaegerSpan {
                    span_id: span["spanID"].as_str().unwrap_or_default().to_owned(),
                    parent_id: span["references"].as_array().and_then(|references| {
                        references
                            .iter()
                            .find(|reference| reference["refType"] == "CHILD_OF")
                            .and_then(|reference| reference["spanID"].as_str())
                            .map(str::to_owned)
                    }),
                    operation: span["operationName"].as_str().unwrap_or_default().to_owned(),
                    service: services
                        .get(span["processID"].as_str().unwrap_or_default())
                        .copied()
                        .unwrap_or("")
                        .to_owned(),
                    tags: span["tags"]
                        .as_array()
                        .map(|tags| {
                            tags.iter()
                                .filter_map(|tag| Some((tag["key"].as_str()?.to_owned(), tag["value"].clone())))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_continues_the_callers_trace_and_its_hbase_calls_are_its_children_in_jaeger() {
    let jaeger = Jaeger::start().await;
    let catalogue = Catalogue { products: 2, comments_per_product: 6, users: 5 };
    let store = fresh_store("traces").await;
    post_all(&store, catalogue.new_comments(0)).await;
    let product = catalogue.product(0).to_string();
    let prefix = store.tables().prefix.clone();

    // The ranker: one trace per run, a span per product under it, the
    // product's HBase calls under that.
    jaeger.run_ranker(&prefix, Some(&product)).await;
    // The binary sends its spans before it exits; the root's batch, the
    // last, is waited for.
    let traces = jaeger
        .traces_of("ranker", |traces| {
            traces.iter().any(|spans| spans.iter().any(|span| span.operation == "ranker run"))
        })
        .await;
    assert_eq!(traces.len(), 1, "one command, one trace: {traces:#?}");
    let run = &traces[0];
    let root = run.iter().find(|span| span.operation == "ranker run").expect("the command's span");
    assert_eq!(root.parent_id, None, "the command is the root of its trace: {run:#?}");
    let pass = run.iter().find(|span| span.operation == "ranking pass").expect("the pass's span");
    assert_eq!(pass.parent_id.as_deref(), Some(root.span_id.as_str()));
    let product_span = run.iter().find(|span| span.operation == "rank product").expect("a product span");
    assert_eq!(product_span.parent_id.as_deref(), Some(pass.span_id.as_str()));
    assert_eq!(product_span.tags.get("product").and_then(Value::as_str), Some(product.as_str()));
    let product_reads: Vec<&JaegerSpan> =
        run.iter().filter(|span| span.parent_id.as_deref() == Some(product_span.span_id.as_str())).collect();
    assert!(
        product_reads.iter().any(|span| span.tags.get("db.collection.name").and_then(Value::as_str)
            == Some(format!("{prefix}product-comment").as_str())),
        "the product's index scan is a child of its span: {run:#?}"
    );

    let port = free_port();
    let mut service = Command::new(cargo_binary("query-api"));
    service
        .args(["--listen", &format!("127.0.0.1:{port}"), "--table-prefix", &prefix])
        .args(["--thrift-addr", &thrift_addr(), "--thrift2-addr", &thrift2_addr()])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    jaeger.exporting_to(&mut service);
    let _service = KilledOnDrop(service.spawn().expect("start query-api"));
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let base = format!("http://127.0.0.1:{port}");
    wait_for(Duration::from_secs(30), "query-api to be ready", async || {
        let answer = client.get(format!("{base}/readyz")).send().await.ok()?;
        answer.status().is_success().then_some(())
    })
    .await;

    // A caller that decided not to keep its trace (flags 00): nothing of the
    // request may be exported. Asked first, so that once the kept trace
    // below is in Jaeger, this one would have been too.
    let dropped_trace = format!("{:032x}", rand::random::<u128>());
    let answer = client
        .get(format!("{base}/v1/products/{product}/comments"))
        .header("traceparent", format!("00-{dropped_trace}-{:016x}-00", rand::random::<u64>() | 1))
        .send()
        .await
        .expect("latest page");
    assert_eq!(answer.status(), 200);

    // A caller's trace (a CDN or a frontend) with its own span: the request
    // must become that span's child, in the same trace.
    let trace_id = format!("{:032x}", rand::random::<u128>());
    let caller_span = format!("{:016x}", rand::random::<u64>() | 1);
    let answer = client
        .get(format!("{base}/v1/products/{product}/comments"))
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .send()
        .await
        .expect("latest page");
    assert_eq!(answer.status(), 200);

    let is_request =
        |span: &JaegerSpan| span.service == "query-api" && span.operation == "GET /v1/products/{productId}/comments";
    // The request's span and at least one call under it.
    let spans = jaeger
        .trace(&trace_id, |spans| {
            spans
                .iter()
                .filter(|span| is_request(span))
                .any(|request| spans.iter().any(|span| span.parent_id.as_deref() == Some(request.span_id.as_str())))
        })
        .await;
    let request = spans.iter().find(|span| is_request(span)).expect("the request's span, named by its route");
    assert_eq!(request.parent_id.as_deref(), Some(caller_span.as_str()), "the caller's span is the request's parent");
    assert_eq!(request.tags.get("http.response.status_code").and_then(Value::as_i64), Some(200));
    let calls: Vec<&JaegerSpan> =
        spans.iter().filter(|span| span.parent_id.as_deref() == Some(request.span_id.as_str())).collect();
    let index_scan: Vec<&&JaegerSpan> = calls
        .iter()
        .filter(|span| {
            span.tags.get("db.collection.name").and_then(Value::as_str)
                == Some(format!("{prefix}product-comment").as_str())
        })
        .collect();
    assert!(!index_scan.is_empty(), "the product-comment scan's calls are children of the request: {spans:#?}");
    let gateways = [thrift_addr(), thrift2_addr()];
    for call in &index_scan {
        let gateway = call.tags.get("hbase.gateway").and_then(Value::as_str).unwrap_or_default();
        assert!(gateways.iter().any(|address| address == gateway), "each call names its gateway: {call:#?}");
    }
    assert!(
        index_scan.iter().any(|call| call.tags.get("hbase.rows").and_then(Value::as_i64).is_some_and(|rows| rows > 0)),
        "a page of the scan says how many rows it carried: {index_scan:#?}"
    );
    let dropped = jaeger
        .client
        .get(format!("http://127.0.0.1:{}/api/traces/{dropped_trace}", jaeger.query_port))
        .send()
        .await
        .expect("Jaeger's query API");
    assert_eq!(dropped.status(), 404, "a trace its caller did not keep is not exported");
    drop_tables(&[&store]).await;
}

/// A run's tasks can outlive its command: the slot writer ends when the last
/// handle on it drops, an aborted lister or read-ahead when the runtime next
/// gets to it. Each holds a span of the run's trace, and a span (and every
/// parent above it) is exported only once closed, so a task still alive
/// when the exporter made its last flush took the run's root with it. Every
/// run of several, single products and full runs (listers, the lease), must
/// arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ranker_run_exports_its_whole_trace_before_it_exits() {
    const RUNS: usize = 8;
    let jaeger = Jaeger::start().await;
    let catalogue = Catalogue { products: 3, comments_per_product: 4, users: 5 };
    let store = fresh_store("traces_whole").await;
    post_all(&store, catalogue.new_comments(0)).await;
    let product = catalogue.product(1).to_string();
    let prefix = store.tables().prefix.clone();
    for run in 0..RUNS {
        jaeger.run_ranker(&prefix, (run % 2 == 0).then_some(product.as_str())).await;
    }
    let whole = |spans: &[JaegerSpan]| {
        let root = spans.iter().find(|span| span.operation == "ranker run" && span.parent_id.is_none());
        root.is_some_and(|root| {
            spans.iter().any(|span| span.operation == "ranking pass" && span.parent_id.as_ref() == Some(&root.span_id))
        })
    };
    jaeger.traces_of("ranker", |traces| traces.len() == RUNS && traces.iter().all(|spans| whole(spans))).await;
    drop_tables(&[&store]).await;
}
