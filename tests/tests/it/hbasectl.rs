//! `hbasectl start` refuses a cluster it cannot make before it launches any
//! JVM, and says why: a port another process holds, a heap size it cannot
//! read, more heap than the machine has. A start that launched half a
//! cluster first would fail a minute later, in a JVM's log.

use std::net::TcpListener;

use integration_tests::cluster::TestCluster;

/// What a start of a two-server cluster with `environment` set printed
/// (both streams); panics when it did not fail, or failed only after
/// launching a JVM.
fn refused_start(name: &str, environment: &[(&str, &str)]) -> String {
    let output = TestCluster::start_output(name, 2, environment);
    let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "the start succeeded:\n{printed}");
    assert!(!printed.contains("starting "), "the start launched a JVM before it was refused:\n{printed}");
    printed
}

#[test]
fn a_start_it_cannot_make_is_refused_with_its_reason_before_any_jvm_is_launched() {
    let holder = TcpListener::bind("127.0.0.1:0").expect("bind a port to hold");
    let held_port = holder.local_addr().expect("the held address").port().to_string();
    let printed = refused_start("held-port", &[("HBASE_ZK_PORT", &held_port)]);
    assert!(
        printed.contains(&format!("port {held_port} (ZooKeeper")) && printed.contains("already in use"),
        "{printed}"
    );

    // A size without its unit, which the JVM would take as 9000 bytes: too
    // small for any JVM to start with.
    let printed = refused_start("unreadable-heap", &[("HBASE_RS_HEAP", "9000")]);
    assert!(printed.contains("cannot read the heap size '9000'"), "{printed}");

    let printed = refused_start("too-much-heap", &[("HBASE_RS_HEAP", "100000g")]);
    assert!(printed.contains("not enough memory"), "{printed}");
}
