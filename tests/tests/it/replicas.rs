//! Region replicas (issue 41): a product page keeps being served, from a
//! secondary region replica and marked so, while the region server holding
//! its primary is dead.
//!
//! The test command's HBase is standalone: its one region server holds every
//! replica, so no secondary outlives a primary there. This test starts a
//! cluster of its own (ZooKeeper, a master and two region servers, see
//! [`TestCluster`]), creates the tables a page reads with two replicas per
//! region, kills -9 the region server serving the ranking table's primary
//! (one that does not serve hbase:meta), and reads the page at once, long
//! before HBase has noticed the death and reopened the region elsewhere.
//! First, on the same cluster, `schema upgrade` gives tables created without
//! replicas theirs.

use std::time::Duration;

use common::hbase::Hbase;
use common::schema::{self, RegionReplication, Regions};
use common::store::Store;
use common::tables::Tables;
use integration_tests::app::{service_store_via, uncached_settings, TestApp};
use integration_tests::cluster::TestCluster;
use integration_tests::fixtures::{post_all, Catalogue};
use integration_tests::unique_prefix;
use reqwest::StatusCode;

use crate::summaries::rank;

/// How long the test lets the secondaries catch up with the writes before
/// the kill. They follow their primary's edits by asynchronous replication,
/// typically within milliseconds; a secondary behind its primary would serve
/// an older page, which is what timeline reads allow, but not what this test
/// compares against.
const REPLICATION_CATCH_UP: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_page_whose_primary_region_server_was_killed_is_served_from_a_secondary_and_marked_stale() {
    let cluster = tokio::task::spawn_blocking(|| TestCluster::start(2)).await.expect("start the cluster");
    let hbase = Hbase::new(cluster.hbase_config());
    upgrading_gives_existing_tables_their_replicas(&cluster, &hbase).await;
    let (tables, victim) = tables_ranked_away_from_meta(&cluster, &hbase).await;
    let store = Store::new(hbase, tables.clone());
    let catalogue = Catalogue { products: 2, comments_per_product: 25, users: 7 };
    post_all(&store, catalogue.new_comments(1)).await;
    let product = catalogue.product(0);
    rank(&store, &product).await;
    tokio::time::sleep(REPLICATION_CATCH_UP).await;

    let service = service_store_via(
        &cluster.thrift_address(),
        &cluster.thrift2_address(),
        &store,
        &["--read-consistency", "timeline"],
    );
    let app = TestApp::spawn(service, uncached_settings()).await;
    let ranked_path = format!("/v1/products/{product}/comments/ranked");
    let latest_path = format!("/v1/products/{product}/comments");
    let before = app.get(&ranked_path).await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.raw);
    assert!(before.comment_values().len() >= 5, "a ranked page: {}", before.raw);
    let walked_before = app.walk_v1(&latest_path, 7).await;
    assert_eq!(walked_before.len(), 25, "every review of the product, walked in pages of 7");

    // A short blocking call: the service waits on this runtime meanwhile, but nothing asks it anything.
    cluster.kill_regionserver(victim);

    let during = app.get(&ranked_path).await;
    assert_eq!(during.status, StatusCode::OK, "served through the crash: {}", during.raw);
    assert_eq!(
        during.headers.get("x-replica-read").and_then(|value| value.to_str().ok()),
        Some("stale"),
        "an answer read from a secondary says so"
    );
    assert!(during.headers.get("age").is_none(), "read from HBase, not the last good copy kept for outages");
    assert_eq!(during.body, before.body, "the secondary serves the same ranking");
    let walked_during = app.walk_v1(&latest_path, 7).await;
    assert_eq!(walked_during, walked_before, "a cursor walk lists each review once, as before the crash");
    let metrics = app.metrics().await;
    assert!(
        metrics.lines().any(|line| line.starts_with("reviews_api_replica_reads_total{")
            && line.contains("comments/ranked")
            && !line.ends_with(" 0")),
        "the replica answer is counted by route:\n{metrics}"
    );
    app.shut_down().await;
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("discard the cluster");
}

/// Creates the tables, with two replicas for those a page reads, under fresh
/// prefixes until the region server serving the ranking table's primary
/// does not also serve hbase:meta, and returns them with that server. The
/// crash of meta's server stalls every lookup of a moved region until meta
/// is reopened elsewhere, replicas of the tables or not (hbase/README.md):
/// not what this test shows. Where HBase puts a new table is its own choice,
/// so a few tries may be needed.
async fn tables_ranked_away_from_meta(cluster: &TestCluster, hbase: &Hbase) -> (Tables, u32) {
    let replicated = RegionReplication::new(2).expect("two replicas");
    for _ in 0..8 {
        let tables = Tables::with_prefix(&unique_prefix("replicas")).expect("prefix");
        let created = schema::create_tables(hbase, &tables, Regions::ONE, replicated).await.expect("create the tables");
        for outcome in &created {
            let wanted = if schema::read_tables(&tables).contains(&outcome.name.as_str()) { 2 } else { 1 };
            assert_eq!(outcome.region_replication, wanted, "{}: replicas as created", outcome.name);
            assert_eq!(outcome.regions, 1, "{}: replicas are not counted as regions", outcome.name);
        }
        let ranking_server = cluster.primary_server_of(&tables.product_comment_rank);
        if ranking_server != cluster.primary_server_of("hbase:meta") {
            return (tables, ranking_server);
        }
    }
    panic!("eight sets of tables all put their ranking table's primary beside hbase:meta");
}

/// `schema upgrade --region-replication 2` on tables created without
/// replicas: the tables a page reads get a secondary of each region, served
/// by the other region server; the others, and a second upgrade, change
/// nothing.
async fn upgrading_gives_existing_tables_their_replicas(cluster: &TestCluster, hbase: &Hbase) {
    let tables = Tables::with_prefix(&unique_prefix("upgrade")).expect("prefix");
    schema::create_tables(hbase, &tables, Regions::ONE, RegionReplication::PRIMARY_ONLY).await.expect("create");
    let replicated = RegionReplication::new(2).expect("two replicas");
    let upgraded = schema::upgrade_tables(hbase, &tables, Some(replicated)).await.expect("upgrade");
    for outcome in &upgraded {
        let wanted = schema::read_tables(&tables).contains(&outcome.name.as_str()).then_some((1, 2));
        assert_eq!(outcome.replication_changed, wanted, "{}: replication changed", outcome.name);
    }
    let comment_replicas = cluster.servers_of(&tables.comment);
    assert_eq!(comment_replicas.len(), 2, "a primary and a secondary: {comment_replicas:?}");
    assert_ne!(comment_replicas[0], comment_replicas[1], "on two servers: {comment_replicas:?}");
    let again = schema::upgrade_tables(hbase, &tables, Some(replicated)).await.expect("upgrade again");
    assert!(again.iter().all(|outcome| outcome.replication_changed.is_none()), "a second upgrade changes nothing");
}
