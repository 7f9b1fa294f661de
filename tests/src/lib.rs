//! Harness for the integration tests: each test gets its own set of tables in
//! the one real HBase the test command started, isolated by a table prefix
//! (the zero2prod "database per test" idea, at HBase's scale).
//!
//! - [`app`]: the query service started on an ephemeral port ([`app::TestApp`])
//!   and its HTTP answers ([`app::Answer`]).
//! - [`cluster`]: a multi-server HBase of a test's own ([`cluster::TestCluster`]).
//! - [`fixtures`]: review data written through the store's write path.
//! - Here: fresh stores, test ids, the binaries process tests spawn, and a
//!   private gateway and a faulty proxy for outage tests.
//!
//! The raw-row helpers (scans and byte-for-byte writes) need common's
//! `test-support` feature, which stays a dev-dependency so no service is ever
//! built with it: they live in the test binary, `tests/it/rows.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::hbase::{GatewayList, Hbase, HbaseConfig};
use common::schema::{self, RegionReplication, Regions};
use common::store::Store;
use common::tables::Tables;

pub mod app;
pub mod cluster;
pub mod fixtures;

/// The Thrift gateway the tests use: `REVIEWS_THRIFT_ADDR`, else the local default.
pub fn thrift_addr() -> String {
    std::env::var("REVIEWS_THRIFT_ADDR").unwrap_or_else(|_| "127.0.0.1:9090".to_owned())
}

/// The Thrift2 gateway the tests use: `REVIEWS_THRIFT2_ADDR`, else the port
/// after the Thrift1 gateway's (where `hbase/hbasectl` starts it by default).
pub fn thrift2_addr() -> String {
    std::env::var("REVIEWS_THRIFT2_ADDR").unwrap_or_else(|_| {
        let thrift1 = thrift_addr();
        let (host, port) = thrift1.rsplit_once(':').expect("REVIEWS_THRIFT_ADDR is host:port");
        let port: u16 = port.parse().expect("REVIEWS_THRIFT_ADDR has a numeric port");
        format!("{host}:{}", port + 1)
    })
}

/// A pool configuration for tests: the gateway at `address` (and the shared
/// Thrift2 gateway), patient enough for a loaded CI machine.
pub fn hbase_config(address: &str) -> HbaseConfig {
    HbaseConfig {
        thrift1_gateways: GatewayList::single(address),
        thrift2_gateways: GatewayList::single(thrift2_addr()),
        pool_size: 8,
        operation_timeout: Duration::from_secs(60),
        ..HbaseConfig::default()
    }
}

/// A table prefix no other test (in this or another run) uses.
pub fn unique_prefix(test_name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let sequence = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name: String = test_name.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
    format!("t_{name}_{}_{nanos:x}{sequence}_", std::process::id())
}

/// The regions of each test's tables keyed by a random id: a few, so reads and
/// scans cross region boundaries as they do on a real cluster.
pub fn test_regions() -> Regions {
    Regions::new(4).expect("a valid region count")
}

/// A store over freshly created tables of its own, reached through `address`,
/// the tables keyed by a random id split into [`test_regions`].
///
/// Panics, naming the fix, when HBase does not answer: an integration test
/// without HBase must fail, never pass by skipping.
pub async fn fresh_store_at(test_name: &str, address: &str) -> Store {
    let tables = Tables::with_prefix(&unique_prefix(test_name)).expect("valid prefix");
    let hbase = Hbase::new(hbase_config(address));
    if let Err(error) = schema::create_tables(&hbase, &tables, test_regions(), RegionReplication::PRIMARY_ONLY).await {
        panic!("cannot create test tables at {address} ({error}); start HBase with `hbase/hbasectl start`");
    }
    Store::new(hbase, tables)
}

/// A store over freshly created tables of its own on the shared gateway.
pub async fn fresh_store(test_name: &str) -> Store {
    fresh_store_at(test_name, &thrift_addr()).await
}

/// A loopback port nothing listens on now, for a process a test starts.
///
/// The port comes from below the kernel's ephemeral range, never from it. A
/// port the kernel picks for `bind(0)` lies in that range, and so does the
/// local port of every outgoing connection; one picked that way and released
/// for a process to bind a moment later can be taken in between by any of
/// the connections the tests running beside it open (CI once saw Jaeger's
/// query port taken so). Below the range only this function hands ports out:
/// each call moves on to the next port, starting from a place set by the
/// process id, so no two calls of one test process return the same port and
/// test processes side by side start far apart.
pub fn free_port() -> u16 {
    /// How many ports below the ephemeral range are handed out: enough for
    /// every test of a run, and above the fixed ports of this repository's
    /// scripts (ZooKeeper at 21810 to 22390, services at 20000).
    const SPAN: u16 = 8_000;
    static NEXT: Mutex<Option<u16>> = Mutex::new(None);
    let ephemeral_start = ephemeral_range_start();
    let first = ephemeral_start - SPAN;
    let mut next = NEXT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut offset = next.unwrap_or_else(|| (std::process::id() % u32::from(SPAN)) as u16);
    for _ in 0..SPAN {
        let port = first + offset;
        offset = (offset + 1) % SPAN;
        // Bound and dropped at once: only to see that nothing listens there now.
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            *next = Some(offset);
            return port;
        }
    }
    panic!("no free loopback port in {first}..{ephemeral_start}");
}

/// The first port of the kernel's ephemeral range (Linux's
/// `ip_local_port_range`; its default, 32768, where that cannot be read).
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .filter(|start: &u16| *start > 30_000)
        .unwrap_or(32_768)
}

/// Ten-character ids for tests: `prefix` (up to 4 characters) and a zero-padded number.
pub fn test_id(prefix: &str, number: u64) -> common::Id {
    let text = format!("{prefix}{number:0width$}", width = 10 - prefix.len());
    common::Id::parse("id", &text).expect("test ids are valid")
}

/// The path of the workspace binary `bin` (`ranker`, `ranker-cron`,
/// `query-api`, `reviews-admin`), built by Cargo for the tests that spawn it.
///
/// `cargo test` builds a package's binaries only for that package's own
/// integration tests, so a test here cannot count on finding them built. This
/// runs `cargo build --workspace --bin <bin>` once per test process and binary:
/// a no-op when the binary is up to date. `--workspace` resolves features as
/// `cargo build --workspace --bins` does, so the two builds share their
/// artifacts instead of rebuilding each other's (a `-p <package>` build unifies
/// fewer features and would relink the binary in place).
pub fn cargo_binary(bin: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    // Held while building, so tests that want the same binary at once build it once.
    let mut built = BUILT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(path) = built.get(bin) {
        return path.clone();
    }
    let workspace_manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let run = escargot::CargoBuild::new()
        .manifest_path(workspace_manifest)
        .arg("--workspace")
        .arg("--locked")
        .bin(bin)
        .current_release()
        .run()
        .unwrap_or_else(|error| panic!("cargo could not build the {bin} binary: {error}"));
    let path = run.path().to_path_buf();
    built.insert(bin.to_owned(), path.clone());
    path
}

/// Runs the `ranker` binary with `args` against `store`'s tables (through the
/// test HBase's Thrift1 gateway, logging at info) to its end.
pub fn run_ranker(store: &Store, args: &[&str]) -> std::process::Output {
    std::process::Command::new(cargo_binary("ranker"))
        .args(args)
        .args(["--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the ranker")
}

/// Waits until puts can no longer be hidden by deletes just made.
///
/// HBase stamps a delete with the server's current millisecond, and the
/// marker hides every put of its row stamped at or before it, so a row
/// rewritten within the same millisecond as its delete would vanish. Tests
/// that delete rows and write them again call this in between.
pub async fn outlast_delete_markers() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// A child process killed when the test ends, failed or not, so that a
/// failing test leaves no service behind on its port.
#[derive(Debug)]
pub struct KilledOnDrop(pub std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        // Already gone when the test stopped it: nothing to do.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private Thrift gateway on its own port, against the shared HBase, that a
/// test may stop, kill and restart to simulate an outage without disturbing
/// the shared gateways other tests use. Stopped when dropped.
#[derive(Debug)]
pub struct PrivateGateway {
    port: u16,
    /// `thrift1` or `thrift2`, as `hbasectl start-gateway` names the kinds.
    kind: &'static str,
}

impl PrivateGateway {
    /// Starts a Thrift1 gateway on a free port and waits until it answers.
    pub fn start() -> PrivateGateway {
        PrivateGateway::start_of("thrift1")
    }

    /// Starts a Thrift2 gateway on a free port and waits until it answers.
    pub fn start_thrift2() -> PrivateGateway {
        PrivateGateway::start_of("thrift2")
    }

    fn start_of(kind: &'static str) -> PrivateGateway {
        let gateway = PrivateGateway { port: free_port(), kind };
        gateway.resume();
        gateway
    }

    /// Kills the gateway with SIGKILL (a crash: its connections are reset,
    /// nothing is said first) until [`Self::resume`].
    pub fn kill(&self) {
        hbasectl(&["kill-gateway", &self.port.to_string()]);
    }

    /// The gateway's `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the gateway (connections to it are refused until [`Self::resume`]).
    pub fn stop(&self) {
        hbasectl(&["stop-gateway", &self.port.to_string(), self.kind]);
    }

    /// Starts the gateway again on the same port and waits until it answers.
    pub fn resume(&self) {
        hbasectl(&["start-gateway", &self.port.to_string(), self.kind]);
    }

    /// How many clients' connections the gateway holds open now (the
    /// established connections on its port, as the kernel lists them).
    pub fn client_connections(&self) -> usize {
        established_connections().iter().filter(|connection| connection.local_port == self.port).count()
    }

    /// How many connections the gateway's JVM holds open to the region
    /// server of `hbase:meta`: one once its HBase client has read anything
    /// (every read first looks its region up there), none before.
    pub fn connections_to_meta_server(&self) -> usize {
        let meta_port = meta_server_port();
        let pid_file = match self.kind {
            "thrift2" => format!("gateway2-{}.pid", self.port),
            _ => format!("gateway-{}.pid", self.port),
        };
        let run_dir = std::env::var("HBASE_RUN_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../hbase/run").to_owned());
        let pid = std::fs::read_to_string(Path::new(&run_dir).join(&pid_file))
            .unwrap_or_else(|error| panic!("read the gateway's pid file {pid_file} in {run_dir}: {error}"));
        // The gateway's sockets, by inode, as its file descriptors name them.
        let descriptors =
            std::fs::read_dir(format!("/proc/{}/fd", pid.trim())).expect("list the gateway's descriptors");
        let sockets: std::collections::HashSet<String> = descriptors
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter_map(|target| {
                let target = target.to_string_lossy().into_owned();
                Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
            })
            .collect();
        established_connections()
            .iter()
            .filter(|connection| connection.remote_port == meta_port && sockets.contains(&connection.inode))
            .count()
    }
}

/// One established TCP connection of this host, as the kernel lists it.
struct Established {
    local_port: u16,
    remote_port: u16,
    /// The socket's inode, as a process's file descriptor names it (`socket:[INODE]`).
    inode: String,
}

/// Every established TCP connection of this host, IPv4 and IPv6 (a JVM's
/// sockets are IPv6 ones unless told otherwise).
fn established_connections() -> Vec<Established> {
    let port = |address: &str| address.rsplit_once(':').and_then(|(_, port)| u16::from_str_radix(port, 16).ok());
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    // The fields: slot, local address, remote address, state
                    // (01: established), ..., the socket's inode (the tenth).
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    if fields.get(3) != Some(&"01") {
                        return None;
                    }
                    Some(Established {
                        local_port: port(fields.get(1)?)?,
                        remote_port: port(fields.get(2)?)?,
                        inode: (*fields.get(9)?).to_owned(),
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The port of the region server holding `hbase:meta`, as the Thrift2
/// gateway locates it (`thrift_probe.py regions`: "HOST:PORT TABLE REPLICA_ID").
fn meta_server_port() -> u16 {
    let (host, port) =
        thrift2_addr().rsplit_once(':').map(|(host, port)| (host.to_owned(), port.to_owned())).expect("host:port");
    let probe = concat!(env!("CARGO_MANIFEST_DIR"), "/../hbase/thrift_probe.py");
    let output = std::process::Command::new("python3")
        .args([probe, "--host", &host, "--port", &port, "regions"])
        .output()
        .expect("run thrift_probe.py regions");
    assert!(output.status.success(), "thrift_probe.py regions: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [address, "hbase:meta", "0"] => address.rsplit_once(':').and_then(|(_, port)| port.parse().ok()),
            _ => None,
        })
        .expect("hbase:meta has a primary region")
}

impl Drop for PrivateGateway {
    fn drop(&mut self) {
        self.stop();
    }
}

fn hbasectl(arguments: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../hbase/hbasectl");
    let status = std::process::Command::new(script).args(arguments).status().expect("run hbase/hbasectl");
    assert!(status.success(), "hbase/hbasectl {arguments:?} failed with {status}");
}

/// What a [`FaultyProxy`] does with the gateway's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Passes every byte on at once.
    Pass,
    /// Holds each chunk of an answer this long before passing it on: a slow
    /// gateway (or an HBase busy with someone else's work).
    Delay(Duration),
    /// Holds every answer until the mode changes: a gateway whose calls a
    /// test lets finish exactly when it chooses.
    Hold,
    /// Swallows every answer: a gateway that accepts calls and never answers
    /// (a hung process, a host gone without a reset: the outage that costs
    /// callers the most). Answers swallowed are lost for good, so a connection
    /// that lost one stays out of step after the mode changes, as a connection
    /// to a gateway that restarted would.
    BlackHole,
}

/// A TCP proxy in front of a Thrift gateway whose answers a test can slow down
/// or withhold while it runs, to show how callers behave when the gateway
/// turns slow or silent and when it comes back. Dropping it stops it and
/// every connection through it, held answers included.
#[derive(Debug)]
pub struct FaultyProxy {
    address: String,
    mode: tokio::sync::watch::Sender<ProxyMode>,
    call_chunks: std::sync::Arc<std::sync::atomic::AtomicU64>,
    answer_chunks: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultyProxy {
    /// Starts a proxy to `upstream` on a free port, passing everything on.
    pub async fn start(upstream: &str) -> FaultyProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address").to_string();
        let mode = tokio::sync::watch::Sender::new(ProxyMode::Pass);
        let call_chunks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let answer_chunks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let upstream = upstream.to_owned();
        let (shared_mode, shared_calls, shared_answers) = (mode.clone(), call_chunks.clone(), answer_chunks.clone());
        let task = tokio::spawn(async move {
            // The connections' tasks belong to this set, which this task owns:
            // aborting it (the proxy dropped) aborts them too, so every
            // connection through a dropped proxy closes and its callers see
            // the gateway gone, as they would if it had died.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let client = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        // A refused accept (out of descriptors, a connection
                        // reset before it was taken) must not end the
                        // connections already through.
                        Err(error) => {
                            eprintln!("FaultyProxy: accept failed: {error}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    },
                    // Reaps finished connections, so the set holds only live ones.
                    Some(_) = connections.join_next() => continue,
                };
                let (upstream, mode) = (upstream.clone(), shared_mode.subscribe());
                let (calls, answers) = (shared_calls.clone(), shared_answers.clone());
                connections.spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    // Calls go through untouched; answers take the mode.
                    tokio::join!(
                        forward(client_read, server_write, calls, None),
                        forward(server_read, client_write, answers, Some(mode))
                    );
                });
            }
        });
        FaultyProxy { address, mode, call_chunks, answer_chunks, task }
    }

    /// The proxy's `host:port`, to give callers instead of the gateway's.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// Changes what happens to answers from now on. An answer held by
    /// [`ProxyMode::Hold`] goes on, unchanged, once its connection sees
    /// another mode (a change back to `Hold` before then keeps it held).
    pub fn set_mode(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }

    /// How many chunks of calls callers have sent through the proxy so far.
    /// A caller sends a call whole and waits for its answer before the next
    /// one on that connection, and a call of the sizes the tests make (a
    /// multi-get of a few hundred keys at most) arrives in one chunk, so this
    /// counts the Thrift calls made through the proxy; a call split across
    /// chunks would only be counted more than once, never less.
    pub fn call_chunks(&self) -> u64 {
        self.call_chunks.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many chunks of answers the gateway has sent through the proxy so
    /// far, counted as they arrive (before a delay holds them): a test waits
    /// on it to know that a call has reached the gateway and been answered.
    pub fn answer_chunks(&self) -> u64 {
        self.answer_chunks.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for FaultyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` into `to` until either side closes, counting each chunk in
/// `chunks`; for answers (`modes` given), applies the mode of the moment to each chunk.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    chunks: std::sync::Arc<std::sync::atomic::AtomicU64>,
    mut modes: Option<tokio::sync::watch::Receiver<ProxyMode>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        chunks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(modes) = modes.as_mut() {
            let current = *modes.borrow();
            match current {
                ProxyMode::Pass => {}
                ProxyMode::Delay(delay) => tokio::time::sleep(delay).await,
                // Woken by `set_mode`; an error is the proxy gone.
                ProxyMode::Hold => {
                    if modes.wait_for(|mode| *mode != ProxyMode::Hold).await.is_err() {
                        return;
                    }
                }
                ProxyMode::BlackHole => continue,
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// Polls `check` until it answers `Some`, and returns that; fails the test,
/// naming `what`, after `limit`. Tests wait for events with this (a run
/// recorded, a port answering, a connection taken) instead of sleeping a
/// guess. The pause between polls starts at 5 ms, so a quick event is seen
/// quickly, and doubles up to 100 ms, so a slow one costs little.
pub async fn wait_for<T>(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_showing(limit, what, async || check().await.ok_or_else(String::new)).await
}

/// As [`wait_for`], but `check` says what it saw when the event has not
/// come yet (`Err`), and the failure shows the last of it, so that it tells
/// a wait that came close from one that saw nothing.
pub async fn wait_showing<T>(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    loop {
        let seen = match check().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            let shown = if seen.is_empty() { String::new() } else { format!("; last seen: {seen}") };
            panic!("timed out after {limit:?} waiting for {what}{shown}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
