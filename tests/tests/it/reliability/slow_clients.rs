//! Slow, idle and too many clients: a connection that sends half a request
//! header is closed after the header read timeout, an idle keep-alive
//! connection after the keep-alive timeout (and not after the header read
//! timeout, as a load balancer's pooled connection must not be), and beyond the connection cap a
//! new client gets a fast 503 while ordinary service resumes once the slow
//! clients go; the real binary, held to a small file limit and flooded with
//! idle connections, never runs out of files.
//!
//! Every wait is for an event (a close, an answer) with a generous upper
//! bound: the suite runs eight tests at once on a loaded two-core machine.
//! The one fixed pause is the idle time a pooled connection must survive.

use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::app::TestApp;
use integration_tests::{cargo_binary, free_port, fresh_store, thrift_addr, KilledOnDrop};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use query_api::connections::ConnectionLimits;
use query_api::Settings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::rows::drop_tables;

/// The longest any close or answer below may take before the test calls it missing.
const PATIENCE: Duration = Duration::from_secs(20);
/// A request head cut before its end: the client never sends the blank line.
const HALF_A_HEADER: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slow";

fn settings(header_read_timeout: Duration, keep_alive_timeout: Duration, max_connections: usize) -> Settings {
    Settings {
        connections: ConnectionLimits { header_read_timeout, keep_alive_timeout, max_connections },
        ..Settings::default()
    }
}

/// Reads until the service closes the connection; how long that took after
/// `since`, or `None` when it was still open after [`PATIENCE`].
async fn closed_after(stream: &mut TcpStream, since: Instant) -> Option<Duration> {
    let mut buffer = [0u8; 4096];
    let waited = tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    waited.ok().map(|()| since.elapsed())
}

/// One whole `GET /healthz` on `stream`, keeping the connection open; its status line.
async fn get_healthz(stream: &mut TcpStream) -> String {
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await.expect("request");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains("\"status\"") {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await.expect("an answer in time");
        match read.expect("read") {
            0 => break,
            n => answer.extend_from_slice(&buffer[..n]),
        }
    }
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

/// A new client's `GET /healthz`: its status, or `None` when the connection
/// was closed or reset without an answer (a refusal too).
async fn new_client_status(address: std::net::SocketAddr) -> Option<u16> {
    let attempt = async {
        let mut stream = TcpStream::connect(address).await.ok()?;
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        text.split_whitespace().nth(1).and_then(|status| status.parse().ok())
    };
    tokio::time::timeout(PATIENCE, attempt).await.expect("a new client is answered or refused in time")
}

#[tokio::test]
async fn half_sent_headers_are_closed_after_the_header_read_timeout() {
    let store = fresh_store("slow_headers").await;
    let timeout = Duration::from_millis(400);
    let service = TestApp::spawn(store.clone(), settings(timeout, Duration::from_secs(60), 1_000)).await;
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(service.address).await.expect("connect");
        stream.write_all(HALF_A_HEADER).await.expect("half a header");
        slow.push(stream);
    }
    for (number, stream) in slow.iter_mut().enumerate() {
        let closed = closed_after(stream, started).await;
        let closed = closed.unwrap_or_else(|| panic!("connection {number} was still open after {PATIENCE:?}"));
        assert!(closed >= timeout, "connection {number} was closed after {closed:?}, before the timeout");
    }
    let metrics = service.metrics().await;
    assert!(
        metrics.lines().any(|line| line.starts_with("reviews_api_connections_closed_total{reason=\"header_timeout\"}")),
        "header timeouts are counted:\n{metrics}"
    );
    // Ordinary requests are served as before.
    assert_eq!(service.get("/healthz").await.status, reqwest::StatusCode::OK);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let store = fresh_store("slow_idle").await;
    let keep_alive = Duration::from_millis(400);
    let service = TestApp::spawn(store.clone(), settings(Duration::from_secs(60), keep_alive, 1_000)).await;
    let mut stream = TcpStream::connect(service.address).await.expect("connect");
    assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"));
    // A second request on the same connection, well within the timeout: it
    // is kept alive. Timed from before it is sent: the service's idle timer
    // starts when it has written the answer, which a loaded machine may let
    // this test read some milliseconds later (398 ms of 400 was once seen).
    let sent = Instant::now();
    assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"));
    let closed = closed_after(&mut stream, sent).await.expect("the idle connection is closed");
    assert!(closed >= keep_alive, "closed after {closed:?}, before the keep-alive timeout");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_outlives_the_header_read_timeout() {
    let store = fresh_store("slow_pooled").await;
    let header_timeout = Duration::from_millis(300);
    let service = TestApp::spawn(store.clone(), settings(header_timeout, Duration::from_secs(60), 1_000)).await;
    let mut stream = TcpStream::connect(service.address).await.expect("connect");
    assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"));
    // Idle, as a load balancer's pooled connection is, for several header timeouts.
    tokio::time::sleep(header_timeout * 4).await;
    assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"), "the idle connection was kept");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn at_the_cap_a_new_client_is_refused_fast_and_served_again_once_the_slow_clients_go() {
    let store = fresh_store("slow_cap").await;
    let cap = 20;
    let service = TestApp::spawn(store.clone(), settings(Duration::from_secs(60), Duration::from_secs(60), cap)).await;
    let mut slow = Vec::new();
    for _ in 0..cap {
        let mut stream = TcpStream::connect(service.address).await.expect("connect");
        stream.write_all(HALF_A_HEADER).await.expect("half a header");
        slow.push(stream);
    }
    // The slow clients are accepted as the service gets to them: wait for the
    // first refusal, each attempt answered (or closed) at once.
    let deadline = Instant::now() + PATIENCE;
    let refused = loop {
        let asked = Instant::now();
        let status = new_client_status(service.address).await;
        if status != Some(200) {
            break (status, asked.elapsed());
        }
        assert!(Instant::now() < deadline, "no refusal with {cap} slow clients holding the cap");
    };
    assert!(matches!(refused.0, None | Some(503)), "a refusal is a 503 or a close: {refused:?}");
    assert!(refused.1 < Duration::from_secs(2), "the refusal took {:?}", refused.1);
    drop(slow);
    let deadline = Instant::now() + PATIENCE;
    while new_client_status(service.address).await != Some(200) {
        assert!(Instant::now() < deadline, "not served again after the slow clients went");
    }
    let metrics = service.metrics().await;
    assert!(metrics.contains("reviews_api_connections_refused_total "), "refusals are counted:\n{metrics}");
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_held_to_512_open_files_and_flooded_with_idle_connections_never_runs_out_of_files() {
    let store = fresh_store("slow_files").await;
    let port = free_port();
    let log = std::env::temp_dir().join(format!("{}query-api.log", store.tables().prefix));
    let binary = cargo_binary("query-api");
    let command = format!(
        "ulimit -n 512 && exec {} --listen 127.0.0.1:{port} --thrift-addr {} --table-prefix {} \
         --header-read-timeout-ms 60000 --keep-alive-timeout-ms 60000",
        binary.display(),
        thrift_addr(),
        store.tables().prefix
    );
    let mut child = KilledOnDrop(
        Command::new("sh")
            .args(["-c", &command])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start query-api"),
    );
    let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    integration_tests::wait_for(PATIENCE, "query-api to listen", async || {
        TcpStream::connect(address).await.ok().map(drop)
    })
    .await;

    // Far more idle connections than 512 files allow.
    let mut idle = Vec::new();
    for _ in 0..800 {
        match TcpStream::connect(address).await {
            Ok(stream) => idle.push(stream),
            Err(error) => panic!("the kernel refused a connection: {error}"),
        }
    }
    let status = new_client_status(address).await;
    assert!(matches!(status, None | Some(200) | Some(503)), "{status:?}");
    drop(idle);
    let deadline = Instant::now() + PATIENCE;
    while new_client_status(address).await != Some(200) {
        assert!(Instant::now() < deadline, "not served again after the idle clients went");
    }

    kill(Pid::from_raw(i32::try_from(child.0.id()).expect("pid")), Signal::SIGTERM).expect("SIGTERM");
    assert_eq!(child.0.wait().expect("wait").code(), Some(0));
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains("Too many open files"), "the process ran out of files:\n{text}");
    assert!(text.contains("lowered"), "the cap was lowered to fit 512 open files:\n{text}");
    drop(std::fs::remove_file(log));
    drop_tables(&[&store]).await;
}
