//! Region replicas (issue 41): a product page keeps being served, from a
//! secondary region replica and marked so, while the region server holding
//! its primary is dead.
//!
//! The test command's HBase is standalone: its one region server holds every
//! replica, so no secondary outlives a primary there. This test starts a
//! cluster of its own (ZooKeeper, a master and two region servers, see
//! [`TestCluster`]), creates the tables a page reads with two replicas per
//! region, has the primaries of the tables the page reads (the ranking, and
//! the product's index and comments that a cursor walk reads) served by the
//! region server that does not serve hbase:meta, kills -9 that server, and
//! reads the page at once, long before HBase has noticed the death and
//! reopened the regions elsewhere. First, on the same cluster, `schema
//! upgrade` gives tables created without replicas theirs.

use std::time::Duration;

use common::hbase::{Hbase, Retry};
use common::keys::CommentKey;
use common::schema::{self, RegionReplication, Regions};
use common::store::Store;
use common::tables::Tables;
use integration_tests::app::{service_store_via, uncached_settings, Answer, TestApp};
use integration_tests::cluster::TestCluster;
use integration_tests::fixtures::{post_all, Catalogue};
use integration_tests::{test_id, unique_prefix, wait_for};
use reqwest::StatusCode;
use serde_json::Value;

use crate::summaries::rank;

/// How long the test lets the secondaries catch up with the writes before
/// the kill. They follow their primary's edits by asynchronous replication,
/// typically within milliseconds; a secondary behind its primary would serve
/// an older page, which is what timeline reads allow, but not what this test
/// compares against.
const REPLICATION_CATCH_UP: Duration = Duration::from_secs(3);

/// How many times a table is created before the test gives up on HBase ever
/// putting its primary on the server to be killed. Each creation is a coin
/// toss between the two servers, so twenty tails in a row is a broken
/// placement, not bad luck.
const PLACEMENT_TRIES: u32 = 20;

/// Reviews per page of the cursor walk: 25 reviews make four pages.
const WALK_PAGE: usize = 7;

#[tokio::test]
async fn a_page_whose_primary_region_server_was_killed_is_served_from_a_secondary_and_marked_stale() {
    let cluster = tokio::task::spawn_blocking(|| TestCluster::start("replicas", 2)).await.expect("start the cluster");
    let hbase = Hbase::new(cluster.hbase_config());
    upgrading_gives_existing_tables_their_replicas(&cluster, &hbase).await;
    let (tables, victim) = tables_whose_page_reads_are_served_away_from_meta(&cluster, &hbase).await;
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

    // While every server lives, the primaries answer, and nothing is marked.
    // A timeline read also asks a secondary when its primary has not answered
    // within the wait hbase/conf/cluster-site.xml.in sets, and the answer it
    // then takes from the secondary is rightly marked, so on a loaded machine
    // one read may be.
    // On a loaded machine a read of a cluster this young may also outlast
    // the service's HBase deadline (a 503 `unavailable`: the gateway still
    // looking regions up, JVMs still compiling), which says nothing about
    // replicas either.
    // The reads are repeated until the primaries answered every one of them:
    // a service that marked every answer, read from a secondary or not,
    // never gets there.
    let (before, pages_before) = wait_for(
        Duration::from_secs(60),
        "a ranked page and a whole cursor walk answered by the primaries alone",
        async || {
            let (ranked, pages) = match ranked_page_and_walk(&app, &ranked_path, &latest_path).await {
                Ok(read) => read,
                Err(unanswered) if unanswered.status == StatusCode::SERVICE_UNAVAILABLE => {
                    eprintln!("replicas: a read before the kill was not answered in time: {}", unanswered.raw);
                    return None;
                }
                Err(refused) => panic!("a read before the kill answered {}: {}", refused.status, refused.raw),
            };
            let marked = replica_read(&ranked).is_some() || pages.iter().any(|page| replica_read(page).is_some());
            (!marked).then_some((ranked, pages))
        },
    )
    .await;
    assert!(before.comment_values().len() >= 5, "a ranked page: {}", before.raw);
    let walked_before = comments_of(&pages_before);
    assert_eq!(walked_before.len(), 25, "every review of the product, walked in pages of {WALK_PAGE}");
    assert_eq!(pages_before.len(), 4, "a walk of several pages, each read from HBase");

    // Nothing moved a region since the tables were placed (HBase's balancer
    // may, every few minutes): every read below needs the killed server.
    for table in page_tables(&tables) {
        assert_eq!(cluster.primary_server_of(table), victim, "{table}: its primary on the server to kill");
    }
    // A short blocking call: the service waits on this runtime meanwhile, but nothing asks it anything.
    cluster.kill_regionserver(victim);

    let during = app.get(&ranked_path).await;
    assert_eq!(during.status, StatusCode::OK, "served through the crash: {}", during.raw);
    assert_eq!(replica_read(&during), Some("stale"), "an answer read from a secondary says so");
    assert!(during.headers.get("age").is_none(), "read from HBase, not the last good copy kept for outages");
    assert_eq!(during.body, before.body, "the secondary serves the same ranking");
    // A read answered by a secondary has the gateway (hbasectl's, not
    // HBase's own: HBASE_THRIFT2_READS=blocking) probe the primary's server,
    // which refuses connections; from then on it reads that server's
    // regions from their secondaries alone. The reads below, of those
    // regions, must answer as before.
    if std::env::var("HBASE_THRIFT2_READS").as_deref() != Ok("blocking") {
        wait_for(Duration::from_secs(10), "the Thrift2 gateway to find the killed server down", async || {
            let read = app.get(&ranked_path).await;
            assert_eq!(read.status, StatusCode::OK, "served through the crash: {}", read.raw);
            cluster
                .thrift2_log()
                .contains("refuses connections: timeline reads of its regions ask their other replicas alone")
                .then_some(())
        })
        .await;
    }
    // Every page of the walk reads the index and the comments, whose
    // primaries are on the dead server: each page is a secondary's, and says so.
    let pages_during = app.walk_v1_pages(&latest_path, WALK_PAGE).await;
    for (number, page) in pages_during.iter().enumerate() {
        assert_eq!(replica_read(page), Some("stale"), "page {number} of the walk after the kill");
        assert!(page.headers.get("age").is_none(), "page {number}: read from HBase, not a kept copy");
    }
    assert_eq!(comments_of(&pages_during), walked_before, "a cursor walk lists each review once, as before the crash");
    // A single review is a secondary's too; but a secondary's "no such
    // review" is not taken for the truth (it may be behind its primary), and
    // with the primary dead nobody can say: 503, never a 404 that browsers,
    // caches and crawlers would keep.
    let stored = walked_before[0]["id"].as_str().expect("a review id");
    let review = app.get(&format!("/v1/reviews/{stored}")).await;
    assert_eq!(review.status, StatusCode::OK, "a stored review through the crash: {}", review.raw);
    assert_eq!(replica_read(&review), Some("stale"), "read from a secondary, and saying so");
    let never_written = CommentKey::new(&test_id("O", 999_999_999), &product).review_id();
    let absent = app.get(&format!("/v1/reviews/{never_written}")).await;
    assert_eq!(
        absent.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "no word of absence while the primary is dead: {}",
        absent.raw
    );
    let metrics = app.metrics().await;
    for route in ["/v1/products/{productId}/comments/ranked", "/v1/products/{productId}/comments"] {
        let series = format!("reviews_api_replica_reads_total{{route=\"{route}\"}} ");
        assert!(
            metrics.lines().any(|line| line.starts_with(&series) && !line.ends_with(" 0")),
            "the replica answers are counted by route ({route}):\n{metrics}"
        );
    }
    app.shut_down().await;
    tokio::task::spawn_blocking(move || drop(cluster)).await.expect("discard the cluster");
}

/// The ranked page at `ranked_path` and every page of the cursor walk of
/// `latest_path`, or the first of them that was not a `200`.
async fn ranked_page_and_walk(
    app: &TestApp,
    ranked_path: &str,
    latest_path: &str,
) -> Result<(Answer, Vec<Answer>), Answer> {
    let ranked = app.get(ranked_path).await;
    if ranked.status != StatusCode::OK {
        return Err(ranked);
    }
    let pages = app.try_walk_v1_pages(latest_path, WALK_PAGE).await?;
    Ok((ranked, pages))
}

/// The `X-Replica-Read` header of `answer`, when it has one.
fn replica_read(answer: &Answer) -> Option<&str> {
    answer.headers.get("x-replica-read").and_then(|value| value.to_str().ok())
}

/// The comments of a walk's `pages`, in order.
fn comments_of(pages: &[Answer]) -> Vec<Value> {
    pages.iter().flat_map(|page| page.comment_values().iter().cloned()).collect()
}

/// The tables the product page of this test reads: the ranking, and the
/// product's index and comments, which each page of the cursor walk reads.
fn page_tables(tables: &Tables) -> [&str; 3] {
    [&tables.product_comment_rank, &tables.product_comment, &tables.comment]
}

/// Creates every missing table of `tables`, those a page reads in two
/// replicas, one region each, and checks what was created.
pub(crate) async fn create_replicated_tables(hbase: &Hbase, tables: &Tables) {
    let replicated = RegionReplication::new(2).expect("two replicas");
    let created = create_tables_once_the_master_takes_them(hbase, tables, replicated).await;
    for outcome in &created {
        let wanted = if schema::read_tables(tables).contains(&outcome.name.as_str()) { 2 } else { 1 };
        assert_eq!(outcome.region_replication, wanted, "{}: replicas as created", outcome.name);
        assert_eq!(outcome.regions, 1, "{}: replicas are not counted as regions", outcome.name);
    }
}

/// Creates the tables, with two replicas for those a page reads, so that the
/// primary of each table the page of this test reads ([`page_tables`]) is
/// served by the region server that does not serve hbase:meta, and its
/// secondary by the other; returns them with that server, the one to kill.
///
/// The crash of meta's server stalls the lookup of every region whose
/// primary's location the gateway has dropped, until meta is reopened
/// elsewhere: not what this test shows (docs/what-it-survives.md).
async fn tables_whose_page_reads_are_served_away_from_meta(cluster: &TestCluster, hbase: &Hbase) -> (Tables, u32) {
    let tables = Tables::with_prefix(&unique_prefix("replicas")).expect("prefix");
    let meta_server = cluster.primary_server_of("hbase:meta");
    let victim = (1..=2).find(|server| *server != meta_server).expect("two region servers");
    place_primaries(cluster, hbase, &tables, &page_tables(&tables), victim).await;
    (tables, victim)
}

/// Creates `tables` (two replicas for those a page reads), re-creating each
/// of `placed` until its primary is served by region server `server` and
/// its secondary by the other. Where HBase opens a new table's region is its
/// own choice (a server at random, the secondary on another one), and no
/// gateway can move a region, so a table whose primary lands elsewhere is
/// dropped and created again (`create_tables` creates only what is missing).
async fn place_primaries(cluster: &TestCluster, hbase: &Hbase, tables: &Tables, placed: &[&str], server: u32) {
    create_replicated_tables(hbase, tables).await;
    let other = (1..=2).find(|number| *number != server).expect("two region servers");
    for table in placed {
        let mut creations = 1;
        while cluster.primary_server_of(table) != server {
            assert!(
                creations < PLACEMENT_TRIES,
                "{creations} creations of {table} all put its primary on server {other}"
            );
            let name = (*table).to_owned();
            hbase.run(Retry::Idempotent, move |connection| connection.drop_table(&name)).await.expect("drop the table");
            create_replicated_tables(hbase, tables).await;
            creations += 1;
        }
        assert_eq!(cluster.servers_of(table), [server, other], "{table}: the primary and the secondary");
    }
}

/// `schema upgrade --region-replication 2` on tables created without
/// replicas: the tables a page reads get a secondary of each region, served
/// by the other region server; the others, and a second upgrade, change
/// nothing.
async fn upgrading_gives_existing_tables_their_replicas(cluster: &TestCluster, hbase: &Hbase) {
    let tables = Tables::with_prefix(&unique_prefix("upgrade")).expect("prefix");
    create_tables_once_the_master_takes_them(hbase, &tables, RegionReplication::PRIMARY_ONLY).await;
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

/// Creates every missing table of `tables` (one region each, `replication`
/// for those a page reads). A master just started serves reads before it
/// creates tables ("Master is initializing", for longer on a busy machine):
/// the creation on a new cluster is tried again until the master takes it.
async fn create_tables_once_the_master_takes_them(
    hbase: &Hbase,
    tables: &Tables,
    replication: RegionReplication,
) -> Vec<schema::TableOutcome> {
    wait_for(Duration::from_secs(240), "the cluster's master to create tables", async || {
        match schema::create_tables(hbase, tables, Regions::ONE, replication).await {
            Ok(created) => Some(created),
            Err(common::Error::Unavailable(_)) => None,
            Err(error) => panic!("create the tables: {error}"),
        }
    })
    .await
}
