//! A multi-server HBase of a test's own: ZooKeeper, the master and N region
//! servers in JVMs of their own, with both Thrift gateways
//! (`hbase/hbasectl start --regionservers N`), in a run dir of its own in
//! the temporary directory and on free ports, so it runs beside the test command's
//! standalone HBase. What only a cluster can show (a region server killed
//! while the others serve on) is tested against it. Discarded (every JVM
//! killed, the data deleted) when dropped, a failed test's too.

use std::path::PathBuf;
use std::process::Command;

use common::hbase::{GatewayList, HbaseConfig};

use crate::free_port;

/// A running cluster; see the module's docs.
#[derive(Debug)]
pub struct TestCluster {
    run_dir: PathBuf,
    thrift_port: u16,
    thrift2_port: u16,
    zk_port: u16,
}

impl TestCluster {
    /// Starts a cluster of `regionservers` region servers (its run dir named
    /// after `name`, so that two tests' clusters stay apart) and waits until
    /// every one has reported for duty and both gateways answer. Blocking:
    /// call it from `spawn_blocking` in an async test.
    pub fn start(name: &str, regionservers: u32) -> TestCluster {
        let cluster = TestCluster::unstarted(name);
        cluster.hbasectl(&["start", "--regionservers", &regionservers.to_string()]);
        cluster
    }

    /// Runs `hbasectl start --regionservers N` as [`TestCluster::start`]
    /// does, with `environment` set over the cluster's own (a port another
    /// process holds, a heap size), and returns its output whether it
    /// failed or not: for tests of the starts it refuses. Whatever it
    /// started is discarded before this returns.
    pub fn start_output(name: &str, regionservers: u32, environment: &[(&str, &str)]) -> std::process::Output {
        TestCluster::unstarted(name)
            .command(&["start", "--regionservers", &regionservers.to_string()])
            .envs(environment.iter().copied())
            .output()
            .expect("run hbase/hbasectl")
    }

    /// A cluster's run dir (named after `name`, so that two tests' clusters
    /// stay apart) and free ports, nothing started yet.
    fn unstarted(name: &str) -> TestCluster {
        let run_dir = std::env::temp_dir().join(format!("reviews-test-cluster-{name}-{}", std::process::id()));
        TestCluster { run_dir, thrift_port: free_port(), thrift2_port: free_port(), zk_port: free_port() }
    }

    /// A pool configuration reaching this cluster's gateways, patient like
    /// [`crate::hbase_config`].
    pub fn hbase_config(&self) -> HbaseConfig {
        HbaseConfig {
            thrift1_gateways: GatewayList::single(self.thrift_address()),
            thrift2_gateways: GatewayList::single(self.thrift2_address()),
            ..crate::hbase_config(&self.thrift_address())
        }
    }

    /// The Thrift1 gateway's `host:port`.
    pub fn thrift_address(&self) -> String {
        format!("127.0.0.1:{}", self.thrift_port)
    }

    /// The Thrift2 gateway's `host:port`.
    pub fn thrift2_address(&self) -> String {
        format!("127.0.0.1:{}", self.thrift2_port)
    }

    /// The region server (its number, 1..N) serving the primary of `table`'s
    /// first region, as `hbasectl regions` reports it.
    pub fn primary_server_of(&self, table: &str) -> u32 {
        let printed = self.hbasectl(&["regions"]);
        primary_of(&printed, table)
            .unwrap_or_else(|| panic!("no region server holds the primary of {table}:\n{printed}"))
    }

    /// The region servers (their numbers) serving each replica of `table`'s
    /// first region, by replica id: the primary first.
    pub fn servers_of(&self, table: &str) -> Vec<u32> {
        let printed = self.hbasectl(&["regions"]);
        let mut replicas: Vec<(u32, u32)> = region_replicas(&printed)
            .filter(|replica| replica.table == table)
            .filter_map(|replica| Some((replica.id, replica.server?)))
            .collect();
        replicas.sort_unstable();
        replicas.into_iter().map(|(_, server)| server).collect()
    }

    /// The tables (hbase:meta included) of which region server `number`
    /// serves a region replica, one entry per replica.
    pub fn tables_served_by(&self, number: u32) -> Vec<String> {
        let printed = self.hbasectl(&["regions"]);
        region_replicas(&printed)
            .filter(|replica| replica.server == Some(number))
            .map(|replica| replica.table.to_owned())
            .collect()
    }

    /// The region server (its number) holding hbase:meta's primary, or
    /// `None` while nobody can say: meta not yet reopened after its
    /// server's death (the gateway's lookup of it fails or times out), or
    /// reopened on a server hbasectl does not know.
    pub fn meta_server(&self) -> Option<u32> {
        let output = self.command(&["regions"]).output().ok().filter(|output| output.status.success())?;
        primary_of(&String::from_utf8_lossy(&output.stdout), "hbase:meta")
    }

    /// What the Thrift2 gateway has logged so far (empty before it logs).
    pub fn thrift2_log(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("logs").join("thrift2.log")).unwrap_or_default()
    }

    /// Kills region server `number` with SIGKILL: a crash, nothing flushed.
    pub fn kill_regionserver(&self, number: u32) {
        self.hbasectl(&["kill-rs", &number.to_string()]);
    }

    /// Starts region server `number` again and waits until it has reported
    /// for duty (and, for a dedicated meta server, holds hbase:meta again).
    pub fn start_regionserver(&self, number: u32) {
        self.hbasectl(&["start-rs", &number.to_string()]);
    }

    /// Runs `hbase/hbasectl` on this cluster and returns what it printed;
    /// panics, with its output, when it fails.
    fn hbasectl(&self, arguments: &[&str]) -> String {
        let output = self.command(arguments).output().expect("run hbase/hbasectl");
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "hbase/hbasectl {arguments:?} failed with {}:\n{printed}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        printed
    }

    /// `hbase/hbasectl` with `arguments`, aimed at this cluster.
    fn command(&self, arguments: &[&str]) -> Command {
        let mut command = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../hbase/hbasectl"));
        command
            .args(arguments)
            .env("HBASE_RUN_DIR", &self.run_dir)
            .env("HBASE_THRIFT_PORT", self.thrift_port.to_string())
            .env("HBASE_THRIFT2_PORT", self.thrift2_port.to_string())
            .env("HBASE_ZK_PORT", self.zk_port.to_string())
            // Small heaps: a test writes a few hundred rows, and the machine
            // runs the standalone HBase of the other tests beside it.
            .env("HBASE_MASTER_HEAP", "512m")
            .env("HBASE_RS_HEAP", "512m")
            .env("HBASE_THRIFT_HEAP", "256m")
            .env("HBASE_WARM_SECS", "0")
            // Whatever else the caller's environment sets for its own HBase
            // (the test command's) must not shape this one.
            .env_remove("HBASE_MASTER_OPTS")
            .env_remove("HBASE_JVM_OPTS")
            .env_remove("HBASE_REGIONSERVERS")
            .env_remove("HBASE_RS_PORT")
            .env_remove("HBASE_MASTER_PORT")
            .env_remove("HBASE_META_REPLICAS")
            .env_remove("HBASE_META_SERVER")
            .env_remove("HBASE_GATEWAYS")
            .env_remove("HBASE_ZOOKEEPERS");
        command
    }
}

/// One line of `hbasectl regions`: `rs-K TABLE REPLICA_ID`.
struct RegionReplica<'a> {
    /// The region server's number; `None` for `rs-?`, a server hbasectl
    /// did not start (or a dead one's old port).
    server: Option<u32>,
    table: &'a str,
    id: u32,
}

/// The region server (its number) serving the primary of `table`'s first
/// region in `hbasectl regions`' output `printed`, when one does.
fn primary_of(printed: &str, table: &str) -> Option<u32> {
    region_replicas(printed)
        .find_map(|replica| (replica.table == table && replica.id == 0).then_some(replica.server).flatten())
}

/// The region replicas `hbasectl regions` printed, skipping any line not of its shape.
fn region_replicas(printed: &str) -> impl Iterator<Item = RegionReplica<'_>> {
    printed.lines().filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
        [server, table, id] => {
            Some(RegionReplica { server: server.strip_prefix("rs-")?.parse().ok(), table, id: id.parse().ok()? })
        }
        _ => None,
    })
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Not hbasectl(): a panic inside a drop during a failed test's unwind
        // would abort the whole test binary.
        let discarded = self.command(&["discard"]).output();
        match discarded {
            // A failed test leaves the cluster's logs behind to read.
            Ok(output) if output.status.success() && !std::thread::panicking() => {
                let _ = std::fs::remove_dir_all(&self.run_dir);
            }
            Ok(_) => eprintln!("the test cluster's logs are in {}", self.run_dir.join("logs").display()),
            Err(error) => eprintln!("could not discard the test cluster in {}: {error}", self.run_dir.display()),
        }
    }
}
