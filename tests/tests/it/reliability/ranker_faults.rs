//! The ranker under faults: the real `ranker` binary killed with SIGKILL part
//! way through a run and run again, and the library losing its Thrift gateway
//! mid-run. Either way the final rank table equals, byte for byte, the one an
//! uninterrupted run over identical data writes.
//!
//! Each test ranks an "old" state first, then changes the data (new strong
//! comments on some products, every comment of others deleted), so a run that
//! stops part way leaves some products with old slots and some with new ones,
//! and only a complete rerun makes every product match the reference.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hbase::{GatewayList, Hbase, HbaseConfig};
use common::store::lease::Clock;
use common::store::{NewComment, Store};
use integration_tests::{cargo_binary, fresh_store, thrift_addr, PrivateGateway};
use ranker::{RunOptions, Scope};
use tokio_util::sync::CancellationToken;

use integration_tests::fixtures::{post_all, Catalogue, AS_OF_MS};

use crate::rows::{copy_ranking_tables, drop_tables, rank_table, slots_by_product, SlotsByProduct};

/// Index rows read per round trip: small, so that one product takes several
/// round trips and a run lasts long enough to be interrupted part way.
const PAGE_ROWS: usize = 2;
const OLD_AS_OF_MS: i64 = AS_OF_MS - 400 * 86_400_000;
/// How long the gateway stays down during a ranking run, before its restart begins.
const OUTAGE: Duration = Duration::from_secs(6);

/// The data of a fault test, ranked once at an older as-of time, then changed.
async fn load_changed_catalogue(name: &str, catalogue: &Catalogue) -> Store {
    let store = fresh_store(name).await;
    let posted = post_all(&store, catalogue.new_comments(0)).await;
    let old = ranker::run(&store, &RunOptions::new(Scope::All, OLD_AS_OF_MS), CancellationToken::new())
        .await
        .expect("the old ranking");
    assert!(old.failures.is_empty(), "{:?}", old.failures);

    // Every third product gets a long, much-liked review that takes its first slot.
    let first_order = catalogue.products * catalogue.comments_per_product;
    let strong: Vec<NewComment> = (0..catalogue.products)
        .step_by(3)
        .map(|product| NewComment {
            order_id: integration_tests::test_id("O", first_order + product),
            product_id: catalogue.product(product),
            user_id: catalogue.user(catalogue.users + 1),
            content: format!("A thorough review of product {product}: {}", "well made and worth it. ".repeat(30)),
            timestamp_ms: AS_OF_MS - 1_000,
            rating: Some(5),
            helpful: Some(500),
            unhelpful: Some(3),
            photos: Some(3),
        })
        .collect();
    post_all(&store, strong).await;
    // Every comment of product 1 is deleted: a rerun must clear all its slots.
    for comment in posted.iter().filter(|comment| comment.product_id == catalogue.product(1)) {
        store.delete_comment(&comment.order_id, &comment.product_id).await.expect("delete a comment");
    }
    store
}

/// A fresh set of tables holding a byte-for-byte copy of `source`'s.
async fn copy_of(source: &Store, name: &str) -> Store {
    let copy = fresh_store(name).await;
    copy_ranking_tables(source, &copy).await;
    copy
}

/// A store over `tables_of`'s tables reached through `gateway`, with a short
/// deadline (2 s, one retry) so that an outage shows within seconds.
fn store_through(gateway: &PrivateGateway, tables_of: &Store) -> Store {
    let hbase = Hbase::new(HbaseConfig {
        thrift1_gateways: GatewayList::single(gateway.address()),
        thrift2_gateways: GatewayList::single(integration_tests::thrift2_addr()),
        pool_size: 4,
        operation_timeout: Duration::from_secs(2),
        retries: 1,
        ..HbaseConfig::default()
    });
    Store::new(hbase, tables_of.tables().clone())
}

/// How far a run has come: products whose slots already equal the
/// reference's, among those whose slots the run must change.
fn progress(now: &SlotsByProduct, old: &SlotsByProduct, reference: &SlotsByProduct) -> (usize, usize) {
    let products: BTreeSet<&Vec<u8>> = old.keys().chain(reference.keys()).collect();
    let changing: Vec<&Vec<u8>> =
        products.into_iter().filter(|product| old.get(*product) != reference.get(*product)).collect();
    let done = changing.iter().filter(|product| now.get(**product) == reference.get(**product)).count();
    (done, changing.len())
}

/// Classifies each product's slots: (equal to the reference, equal to the old ones, anything else).
fn states(now: &SlotsByProduct, old: &SlotsByProduct, reference: &SlotsByProduct) -> (usize, usize, usize) {
    let products: BTreeSet<&Vec<u8>> = old.keys().chain(reference.keys()).collect();
    let (mut new, mut unchanged, mut mixed) = (0, 0, 0);
    for product in products {
        if now.get(product) == reference.get(product) {
            new += 1;
        } else if now.get(product) == old.get(product) {
            unchanged += 1;
        } else {
            mixed += 1;
        }
    }
    (new, unchanged, mixed)
}

/// The lease TTL of the killed run: how long its lease outlives it.
const KILLED_LEASE_TTL: Duration = Duration::from_secs(3);

fn ranker_command(binary: &PathBuf, store: &Store, config: &PathBuf) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["run", "--as-of", &AS_OF_MS.to_string(), "--concurrency", "1", "--json"])
        // A killed run cannot release the nightly lease; a short TTL lets the rerun take it soon after.
        .args(["--lease-ttl-secs", &KILLED_LEASE_TTL.as_secs().to_string()])
        .arg("--config")
        .arg(config)
        .args(["--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ranker_killed_mid_run_then_rerun_leaves_the_same_bytes_as_an_uninterrupted_run() {
    let binary = cargo_binary("ranker");
    let catalogue = Catalogue { products: 150, comments_per_product: 12, users: 40 };
    let source = load_changed_catalogue("rel_kill_source", &catalogue).await;
    let reference = copy_of(&source, "rel_kill_reference").await;
    let killed = copy_of(&source, "rel_kill_rerun").await;
    let old = slots_by_product(&rank_table(&source).await);

    let config = std::env::temp_dir().join(format!("{}ranker.toml", killed.tables().prefix));
    std::fs::write(&config, format!("[run]\npage_rows = {PAGE_ROWS}\n")).expect("write the ranker config");

    let started = Instant::now();
    let status = ranker_command(&binary, &reference, &config).status().expect("run the ranker");
    assert!(status.success(), "the reference run failed: {status}");
    let reference_run = started.elapsed();
    let reference_table = rank_table(&reference).await;
    let reference_slots = slots_by_product(&reference_table);

    let mut child = ranker_command(&binary, &killed, &config).spawn().expect("start the ranker");
    let started = Instant::now();
    let (done_at_kill, changing) = loop {
        let now = slots_by_product(&rank_table(&killed).await);
        let (done, changing) = progress(&now, &old, &reference_slots);
        assert!(changing > 10, "the data change must touch many products, touched {changing}");
        // The fault strikes once the first changed product is written, so a
        // fast machine cannot finish the run first.
        if done >= 1 {
            child.kill().expect("SIGKILL the ranker");
            break (done, changing);
        }
        if let Some(status) = child.try_wait().expect("poll the ranker") {
            panic!("the ranker finished ({status}) before it could be killed part way: give it more data");
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the ranker made no progress in 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let killed_status = child.wait().expect("reap the ranker");
    let after_kill = slots_by_product(&rank_table(&killed).await);
    let (done_after_kill, _) = progress(&after_kill, &old, &reference_slots);
    let (new, unchanged, mixed) = states(&after_kill, &old, &reference_slots);
    assert!(done_after_kill < changing, "the kill came too late: every product was already ranked");

    // The killed run still holds the nightly lease until it lapses: a rerun at
    // once is told to try later (75), one after the TTL takes the lease and runs.
    let lease = killed.lease("nightly").await.expect("read the lease").expect("the killed run's lease");
    assert!(lease.holder.is_some(), "a killed run cannot release its lease: {lease:?}");
    let refused = ranker_command(&binary, &killed, &config).status().expect("rerun the ranker at once");
    if common::store::lease::SystemClock.now_ms() < lease.expires_ms {
        assert_eq!(refused.code(), Some(75), "a rerun while the killed run's lease holds must be told to try later");
    }
    tokio::time::sleep(KILLED_LEASE_TTL).await;
    let status = ranker_command(&binary, &killed, &config).status().expect("rerun the ranker");
    assert!(status.success(), "the rerun failed: {status}");
    let rerun_table = rank_table(&killed).await;
    println!(
        "ranker SIGKILL: reference run {reference_run:?}; killed ({killed_status}) after {:?} with {done_at_kill} of \
         {changing} changing products done ({done_after_kill} once reaped; products new/old/other: {new}/{unchanged}/{mixed}); \
         rerun rank table {} rows, reference {} rows, identical: {}",
        started.elapsed(),
        rerun_table.len(),
        reference_table.len(),
        rerun_table == reference_table
    );
    assert!(!killed_status.success(), "the ranker was killed, not finished");
    assert_eq!(mixed, 0, "a killed run leaves each product with its old slots or its new ones");
    assert!(rerun_table == reference_table, "the rerun's rank table differs from the uninterrupted run's");
    let _ = std::fs::remove_file(config);
    drop_tables(&[&source, &reference, &killed]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_dying_mid_run_fails_products_visibly_and_a_rerun_leaves_no_mix() {
    // Enough work (one product at a time, 24 comments in pages of 2, at a
    // capped rate) that the run is still going when the gateway is gone.
    let catalogue = Catalogue { products: 300, comments_per_product: 24, users: 40 };
    let source = load_changed_catalogue("rel_gwrank_source", &catalogue).await;
    let reference = copy_of(&source, "rel_gwrank_reference").await;
    let faulty = copy_of(&source, "rel_gwrank_faulty").await;
    let old = slots_by_product(&rank_table(&source).await);

    let mut options = RunOptions::new(Scope::All, AS_OF_MS);
    options.concurrency = 1;
    options.page_rows = PAGE_ROWS;
    options.product_attempts = 2;
    options.retry_backoff = Duration::from_millis(300);
    let report = ranker::run(&reference, &options, CancellationToken::new()).await.expect("the reference run");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let reference_table = rank_table(&reference).await;
    let reference_slots = slots_by_product(&reference_table);

    let gateway = Arc::new(tokio::task::spawn_blocking(PrivateGateway::start).await.expect("start a private gateway"));
    let through_gateway = store_through(&gateway, &faulty);
    // The run under test is held to a ceiling that makes it last about
    // seventy-two seconds (7,200 comments at 100/s), far longer than a kill
    // takes, even with the whole test suite slowing this test's scans of the
    // rank table and the kill. Unbounded, the adaptive pacing lets a quiet
    // machine finish the whole run before the fault strikes.
    let mut slow_options = options.clone();
    slow_options.pacing.max_rate = Some(100.0);
    let run = tokio::spawn({
        let (store, options) = (through_gateway.clone(), slow_options);
        async move { ranker::run(&store, &options, CancellationToken::new()).await }
    });
    let started = Instant::now();
    loop {
        let now = slots_by_product(&rank_table(&faulty).await);
        let (done, _) = progress(&now, &old, &reference_slots);
        // The fault strikes once the first changed product is written, so a
        // fast machine cannot finish the run first.
        if done >= 1 {
            break;
        }
        if run.is_finished() {
            let report = run.await.expect("run task");
            panic!("the run finished before the gateway could be stopped: give it more data. {report:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the run made no progress in 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A crash (SIGKILL), not a graceful stop: the JVM decides how long its
    // shutdown takes, and on a loaded two-core machine that outlasted the
    // whole run once.
    let killing = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || killing.kill()).await.expect("kill the private gateway");
    assert!(!run.is_finished(), "the run finished before the gateway was gone: give it more data");
    // Down for longer than a product's whole retry budget (two attempts of
    // at most 2 s each, 300 ms apart), so the products in flight fail.
    tokio::time::sleep(OUTAGE).await;
    let resuming = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || resuming.resume()).await.expect("restart the private gateway");
    let report = run.await.expect("run task").expect("the run itself completes");

    let after = slots_by_product(&rank_table(&faulty).await);
    let (new, unchanged, mixed) = states(&after, &old, &reference_slots);
    let failed: BTreeSet<String> = report.failures.iter().map(|failure| failure.product.clone()).collect();
    let products: BTreeSet<String> =
        old.keys().chain(reference_slots.keys()).map(|product| String::from_utf8_lossy(product).into_owned()).collect();
    println!(
        "gateway death mid-run: {} products, {} ranked, {} reported failed (e.g. {:?}); slots new/old/other: \
         {new}/{unchanged}/{mixed}",
        products.len(),
        report.products_ranked,
        failed.len(),
        report.failures.first(),
    );
    assert!(!report.failures.is_empty(), "the outage must show in the report");
    for failure in &report.failures {
        assert!(products.contains(&failure.product), "a failure names a product of the run: {failure:?}");
        // Usually "HBase is unavailable", but a gateway still starting may refuse a call instead.
        assert!(!failure.error.is_empty(), "the failure says why: {failure:?}");
    }
    assert_eq!(report.products_ranked as usize + failed.len(), products.len(), "every product is ranked or reported");
    for product in &products {
        if !failed.contains(product) {
            assert_eq!(
                after.get(product.as_bytes()),
                reference_slots.get(product.as_bytes()),
                "product {product} was reported ranked, so it holds the new slots"
            );
        }
    }

    // The rerun goes through the same pool and the same (restarted) gateway.
    let rerun = ranker::run(&through_gateway, &options, CancellationToken::new()).await.expect("the rerun");
    assert!(rerun.failures.is_empty(), "{:?}", rerun.failures);
    let rerun_table = rank_table(&faulty).await;
    assert!(rerun_table == reference_table, "after the rerun the rank table differs from the uninterrupted run's");
    tokio::task::spawn_blocking(move || drop(gateway)).await.expect("stop the private gateway for good");
    drop_tables(&[&source, &reference, &faulty]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_waits_out_an_outage_within_its_patience_and_reports_the_listing_it_gave_up() {
    let catalogue = Catalogue { products: 12, comments_per_product: 3, users: 10 };
    let store = fresh_store("rel_listing_patience").await;
    post_all(&store, catalogue.new_comments(0)).await;
    let gateway = Arc::new(tokio::task::spawn_blocking(PrivateGateway::start).await.expect("start a private gateway"));
    let through_gateway = store_through(&gateway, &store);
    let stopping = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || stopping.stop()).await.expect("stop the private gateway");

    // An outage longer than the patience: the run gives up listing, says so,
    // and returns rather than hanging. Nothing was discovered, so nothing is written.
    let mut options = RunOptions::new(Scope::All, AS_OF_MS);
    options.retry_backoff = Duration::from_millis(100);
    options.listing_patience = Duration::from_secs(2);
    let started = Instant::now();
    let report =
        ranker::run(&through_gateway, &options, CancellationToken::new()).await.expect("the run itself completes");
    assert!(started.elapsed() < Duration::from_secs(30), "giving up took {:?}", started.elapsed());
    assert_eq!(report.products_ranked, 0);
    assert!(!report.failures.is_empty(), "the abandoned listing must show in the report");
    for failure in &report.failures {
        assert!(failure.product.starts_with("(listing "), "only listings failed: {failure:?}");
        assert!(failure.error.contains("unavailable"), "the failure says why: {failure:?}");
    }
    assert!(rank_table(&store).await.is_empty());

    // An outage shorter than the patience: the run waits for the gateway and
    // then ranks every product, reporting nothing.
    options.listing_patience = Duration::from_secs(120);
    let run = tokio::spawn({
        let (store, options) = (through_gateway.clone(), options.clone());
        async move { ranker::run(&store, &options, CancellationToken::new()).await }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!run.is_finished(), "the run must wait for the gateway, not give up or finish without it");
    let resuming = Arc::clone(&gateway);
    tokio::task::spawn_blocking(move || resuming.resume()).await.expect("restart the private gateway");
    let report = run.await.expect("run task").expect("the run itself completes");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.products_ranked, catalogue.products);
    assert_eq!(slots_by_product(&rank_table(&store).await).len(), usize::try_from(catalogue.products).expect("small"));

    tokio::task::spawn_blocking(move || drop(gateway)).await.expect("stop the private gateway for good");
    drop_tables(&[&store]).await;
}
