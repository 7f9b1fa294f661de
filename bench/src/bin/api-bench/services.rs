//! The processes the benchmark measures: `query-api` with its cache on or
//! off, and the anchor.

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::scenario::{Encoding, Workload};
use crate::BenchArgs;

/// A child process serving HTTP (`query-api` or the anchor), killed when dropped.
pub struct ServiceProcess {
    child: Child,
    pub base: String,
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        // Our own child, by its handle; a failure means it already exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `query-api` on a free loopback port with the bench's HBase flags and
/// the given ranked-cache TTL, and waits until it is ready.
pub async fn start_service(args: &BenchArgs, name: &str, ranked_cache_ttl_ms: u64) -> anyhow::Result<ServiceProcess> {
    let binary = match &args.api_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("cannot locate this binary")?
            .with_file_name(format!("query-api{}", std::env::consts::EXE_SUFFIX)),
    };
    let listen = free_loopback_address()?;
    let log_path = args.out_dir.join(format!("service-{name}.log"));
    let log = File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let child = Command::new(&binary)
        .args(["--listen", &listen.to_string()])
        .args(["--thrift-addr", &args.hbase.thrift_addr.to_string()])
        .args(["--table-prefix", &args.hbase.table_prefix])
        .args(["--pool-size", &args.hbase.pool_size.to_string()])
        .args(["--ranked-cache-ttl-ms", &ranked_cache_ttl_ms.to_string()])
        // Room for every product's ranking and rendered view with their
        // compressed variants (about 100 KiB together here), so the cached
        // runs measure hits.
        .args(["--ranked-cache-max-bytes", &(args.products.max(1) as u64 * 192 * 1024).max(256 << 20).to_string()])
        // The HBase deadline and retries stay the service's own defaults, as in production.
        .env_remove("REVIEWS_HBASE_TIMEOUT_MS")
        .env_remove("REVIEWS_HBASE_RETRIES")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| {
            format!("cannot start {} (build it with `cargo build --release -p query-api -p bench`)", binary.display())
        })?;
    let service = ServiceProcess { child, base: format!("http://{listen}") };
    wait_until_ready(&service, name, "/readyz", &log_path).await?;
    println!("service {name} ({}) ready, ranked cache TTL {ranked_cache_ttl_ms} ms", service.base);
    Ok(service)
}

/// Starts the anchor (the `anchor` binary beside this one) on a free
/// loopback port, answering the bytes `base` answers for the first ranked
/// product's ranked read.
pub async fn start_anchor(args: &BenchArgs, workload: &Workload, base: &str) -> anyhow::Result<ServiceProcess> {
    let product = workload.ranked_products.first().context("anchor: no ranked product")?;
    let url = format!("{base}/v1/products/{product}/comments/ranked");
    let body = workload.clients.of(Encoding::Identity).get(&url).send().await.context("anchor: the ranked answer")?;
    let body = body.bytes().await.context("anchor: the ranked answer's body")?;
    let body_path = args.out_dir.join("anchor-body.json");
    std::fs::write(&body_path, &body).with_context(|| format!("cannot write {}", body_path.display()))?;
    let binary = std::env::current_exe()
        .context("cannot locate this binary")?
        .with_file_name(format!("anchor{}", std::env::consts::EXE_SUFFIX));
    let listen = free_loopback_address()?;
    let log_path = args.out_dir.join("service-anchor.log");
    let log = File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let child = Command::new(&binary)
        .args(["--listen", &listen.to_string()])
        .arg("--body")
        .arg(&body_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| {
            format!("cannot start {} (build it with `cargo build --release -p bench`)", binary.display())
        })?;
    let anchor = ServiceProcess { child, base: format!("http://{listen}") };
    wait_until_ready(&anchor, "anchor", "/anchor", &log_path).await?;
    println!("anchor ({}) ready, answering {} bytes", anchor.base, body.len());
    Ok(anchor)
}

/// A loopback address with a port nothing listens on now.
fn free_loopback_address() -> anyhow::Result<SocketAddr> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .context("no free port")?;
    Ok(SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Waits up to a minute for `service` to answer `path` with success.
async fn wait_until_ready(service: &ServiceProcess, name: &str, path: &str, log_path: &Path) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client.get(format!("{}{path}", service.base)).send().await;
        if ready.is_ok_and(|response| response.status().is_success()) {
            return Ok(());
        }
        if Instant::now() > ready_by {
            bail!("service {name} not ready within 60 s; see {}", log_path.display());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
