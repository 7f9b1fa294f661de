//! A replica told to stop (SIGTERM) behind a load balancer: `/readyz`
//! answers 503 at once, so the balancer's health checks take it out, while
//! it still serves every request for `--unready-before-drain-ms`; then it
//! stops accepting, finishes what is in flight and exits 0.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{cargo_binary, free_port, fresh_store, thrift2_addr, thrift_addr, wait_for, KilledOnDrop};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::rows::drop_tables;

/// How long the replica serves unready in this test. `/readyz` must turn
/// within the first half of it, which leaves the poll room on a two-core
/// machine running the suite's region-server clusters beside it.
const UNREADY_FOR: Duration = Duration::from_millis(3_000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_told_to_stop_turns_unready_first_and_serves_on_until_it_drains() {
    let store = fresh_store("stopping").await;
    let port = free_port();
    let unready_ms = UNREADY_FOR.as_millis().to_string();
    let mut child = KilledOnDrop(
        Command::new(cargo_binary("query-api"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--thrift-addr", &thrift_addr()])
            .args(["--thrift2-addr", &thrift2_addr(), "--table-prefix", &store.tables().prefix])
            .args(["--unready-before-drain-ms", &unready_ms])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start query-api"),
    );
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let base = format!("http://127.0.0.1:{port}");
    let status = |path: &'static str| {
        let (client, base) = (client.clone(), base.clone());
        async move { client.get(format!("{base}{path}")).send().await.map(|response| response.status().as_u16()) }
    };
    wait_for(Duration::from_secs(30), "the replica to be ready", async || {
        matches!(status("/readyz").await, Ok(200)).then_some(())
    })
    .await;

    kill(Pid::from_raw(i32::try_from(child.0.id()).expect("pid")), Signal::SIGTERM).expect("SIGTERM");
    let signalled = Instant::now();
    wait_for(UNREADY_FOR / 2, "/readyz to answer 503", async || {
        matches!(status("/readyz").await, Ok(503)).then_some(())
    })
    .await;
    // Unready, and still serving pages, on new connections too.
    while signalled.elapsed() < UNREADY_FOR - Duration::from_millis(500) {
        let page = status("/v1/products/PRODUCT001/comments").await;
        assert!(matches!(page, Ok(200)), "a page {:?} after SIGTERM: {page:?}", signalled.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exited = tokio::task::spawn_blocking(move || child.0.wait().map(|status| status.code()))
        .await
        .expect("wait task")
        .expect("wait");
    assert_eq!(exited, Some(0), "a stop is a success");
    assert!(signalled.elapsed() >= UNREADY_FOR, "it drained only after {:?}", signalled.elapsed());
    drop_tables(&[&store]).await;
}
