//! Region-aligned shards against the real HBase: the shards of every count
//! from 1 to 16 rank every product exactly once, on an unsplit and on a
//! pre-split table, including products that arrive after the plan was made;
//! the shards of one run agree on the plan the first of them stored, even
//! after the data's layout changed; and the CLI's `run --shard` and `shards`
//! use and show that plan.

use common::hbase::Hbase;
use common::schema::{self, RegionReplication, Regions};
use common::store::Store;
use common::tables::Tables;
use common::Id;
use integration_tests::fixtures::{new_comment, post_all, AS_OF_MS};
use integration_tests::{fresh_store, hbase_config, run_ranker, test_id, thrift_addr, unique_prefix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ranker::shard_plan::{self, PlanOrigin, ShardPlan};
use ranker::{KeyRange, RunOptions, Scope, Shard};
use tokio_util::sync::CancellationToken;

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Writes `comments_of(n)` comments (at least one) for each product, through the write path.
async fn seed(store: &Store, products: &[Id], first_order: u64, comments_of: impl Fn(usize) -> usize) -> u64 {
    let mut comments = Vec::new();
    let mut order = first_order;
    for (position, product) in products.iter().enumerate() {
        for slot in 0..comments_of(position).max(1) {
            let content = format!("review {slot} of {product}: sturdy and well made");
            comments.push(new_comment(&test_id("O", order), product, &test_id("U", order % 97), content, AS_OF_MS - 1));
            order += 1;
        }
    }
    post_all(store, comments).await;
    order
}

fn random_ids(rng: &mut StdRng, count: usize, first: Option<u8>) -> Vec<Id> {
    (0..count)
        .map(|_| {
            let mut text: String = (0..10).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
            if let Some(first) = first {
                text.replace_range(..1, &(first as char).to_string());
            }
            Id::parse("id", &text).expect("id")
        })
        .collect()
}

/// Products and comments each shard of `plan` reads now, by a read pass over its range.
async fn read_every_shard(store: &Store, plan: &ShardPlan) -> Vec<(KeyRange, u64, u64)> {
    let mut read = Vec::new();
    for index in 0..plan.count {
        let shard = Shard::new(index, plan.count).expect("shard");
        let range = plan.range(shard).expect("range");
        let options = RunOptions::new(Scope::Shard { shard, range: range.clone() }, AS_OF_MS);
        let report = ranker::read_pass(store, &options, CancellationToken::new()).await.expect("read pass");
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        read.push((range, report.products_ranked, report.comments_scored));
    }
    read
}

/// Asserts each shard read exactly the known products in its range, and all of them together.
fn assert_every_product_once(read: &[(KeyRange, u64, u64)], products: &[Id], what: &str) {
    for (index, (range, ranked, _)) in read.iter().enumerate() {
        let expected = products.iter().filter(|product| range.contains(product.as_bytes())).count() as u64;
        assert_eq!(*ranked, expected, "{what}: shard {index} ({range:?})");
    }
    let total: u64 = read.iter().map(|(_, ranked, _)| ranked).sum();
    assert_eq!(total, products.len() as u64, "{what}: every product once");
}

/// A store over fresh tables of one region each (the harness pre-splits its tables into four).
async fn unsplit_store(test_name: &str) -> Store {
    let tables = Tables::with_prefix(&unique_prefix(test_name)).expect("valid prefix");
    let hbase = Hbase::new(hbase_config(&thrift_addr()));
    schema::create_tables(&hbase, &tables, Regions::ONE, RegionReplication::PRIMARY_ONLY)
        .await
        .expect("create the tables");
    Store::new(hbase, tables)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_unsplit_table_shards_of_every_count_rank_every_product_once_including_products_added_later() {
    every_count_ranks_every_product_once(unsplit_store("shards_cover_unsplit").await, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_pre_split_table_shards_of_every_count_rank_every_product_once_including_products_added_later() {
    every_count_ranks_every_product_once(fresh_store("shards_cover_split").await, 4).await;
}

async fn every_count_ranks_every_product_once(store: Store, regions: usize) {
    let mut rng = StdRng::seed_from_u64(13);
    // Sequential ids (all `P0...`, in one corner of the key space) and random ones.
    let mut products: Vec<Id> = (1..=40).map(|number| test_id("P", number)).collect();
    products.extend(random_ids(&mut rng, 20, None));
    let mut next_order = seed(&store, &products, 1, |position| 1 + position % 4).await;
    let mut comments: u64 = (0..products.len()).map(|position| 1 + position as u64 % 4).sum();

    for count in 1..=16 {
        let plan_id = format!("cover-{count}");
        let (plan, origin) = shard_plan::agree_on_plan(&store, &plan_id, count, true).await.expect("plan");
        assert_eq!(origin, PlanOrigin::Written);
        assert_eq!(plan.regions, regions, "product-comment's regions, from getTableRegions");
        assert_eq!((plan.counted_products, plan.counted_comments), (products.len() as u64, comments));
        // Products arrive between planning and running: one after the sequential
        // ids, one before every id, one anywhere.
        let added = vec![
            test_id("P", 1_000 + u64::from(count)),
            test_id("0", u64::from(count)),
            random_ids(&mut rng, 1, None)[0],
        ];
        next_order = seed(&store, &added, next_order, |_| 2).await;
        products.extend(added);
        comments += 6;
        let read = read_every_shard(&store, &plan).await;
        assert_every_product_once(&read, &products, &format!("{count} shards"));
        assert_eq!(read.iter().map(|(_, _, comments)| comments).sum::<u64>(), comments);
        if count == 8 {
            // Most products have sequential ids (`P0...`); the plan
            // spreads them (two-character prefixes put them all in one shard),
            // and by its count no shard holds over 1.5 times the mean.
            let holders = read
                .iter()
                .filter(|(range, _, _)| (1..=40).any(|number| range.contains(test_id("P", number).as_bytes())))
                .count();
            assert!(holders >= 4, "the P0 products sit in {holders} shards: {:?}", plan.shards);
            let most = plan.shards.iter().map(|shard| shard.estimate.products).max().unwrap_or(0) as f64;
            assert!(most <= 1.5 * plan.counted_products as f64 / 8.0, "{:?}", plan.shards);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shards_of_a_run_use_the_plan_the_first_stored_even_after_the_layout_changed() {
    let store = fresh_store("shards_agree").await;
    let mut products: Vec<Id> = (1..=30).map(|number| test_id("P", number)).collect();
    let next_order = seed(&store, &products, 1, |position| 1 + position % 3).await;

    // Eight shard processes of one run start at once; one plan wins.
    let mut racing = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let store = store.clone();
        racing.spawn(async move { shard_plan::agree_on_plan(&store, "race", 8, true).await.expect("plan") });
    }
    let mut agreed: Vec<(ShardPlan, PlanOrigin)> = Vec::new();
    while let Some(joined) = racing.join_next().await {
        agreed.push(joined.expect("task"));
    }
    assert_eq!(agreed.iter().filter(|(_, origin)| *origin == PlanOrigin::Written).count(), 1, "one writer");
    let first = agreed[0].0.clone();
    assert!(agreed.iter().all(|(plan, _)| *plan == first), "every shard has the same plan");

    // The layout changes: 200 products arrive at the other end of the key space.
    let mut rng = StdRng::seed_from_u64(7);
    let arrivals = random_ids(&mut rng, 200, Some(b'z'));
    seed(&store, &arrivals, next_order, |_| 1).await;
    products.extend(arrivals);
    let fresh = shard_plan::compute_plan(&store, "race", 8).await.expect("fresh plan");
    let ranges = |plan: &ShardPlan| plan.shards.iter().map(|shard| shard.range.clone()).collect::<Vec<_>>();
    assert_ne!(ranges(&fresh), ranges(&first), "a plan made now cuts elsewhere");

    // A shard that starts (or is retried) now still gets the run's stored plan.
    let (later, origin) = shard_plan::agree_on_plan(&store, "race", 8, true).await.expect("plan");
    assert_eq!((origin, &later), (PlanOrigin::Stored, &first));
    let read = read_every_shard(&store, &later).await;
    assert_every_product_once(&read, &products, "stale plan");
    // A dry run or read pass of a new run stores nothing.
    let (_, origin) = shard_plan::agree_on_plan(&store, "dry", 8, false).await.expect("plan");
    assert_eq!(origin, PlanOrigin::Unstored);
    assert_eq!(store.shard_plan("dry", 8).await.expect("read"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_processes_of_one_as_of_share_the_first_ones_plan_and_shards_shows_it() {
    let store = fresh_store("shards_cli").await;
    let products: Vec<Id> = (1..=24).map(|number| test_id("P", number)).collect();
    seed(&store, &products, 1, |position| 1 + position % 2).await;
    let as_of = AS_OF_MS.to_string();
    let mut ranked = 0;
    for index in 0..3 {
        let shard = format!("{index}/3");
        // Each shard has a lease of its own, as the indexed Job's pods do.
        let lease = format!("nightly-shard-{index}-of-3");
        let output =
            run_ranker(&store, &["run", "--shard", &shard, "--as-of", &as_of, "--lease-name", &lease, "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("report");
        ranked += report["products_ranked"].as_u64().expect("count");
        let log = String::from_utf8_lossy(&output.stderr);
        let origin = if index == 0 { "Written" } else { "Stored" };
        assert!(log.contains(&format!("origin={origin}")), "shard {shard}: {log}");
    }
    assert_eq!(ranked, products.len() as u64);
    let plan_id = format!("asof-{AS_OF_MS}");
    let stored = store.shard_plan(&plan_id, 3).await.expect("read").expect("the first shard stored the plan");

    let output = run_ranker(&store, &["shards", "--count", "3", "--plan-id", &plan_id, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let stored: serde_json::Value = serde_json::from_slice(&stored).expect("stored plan");
    assert_eq!(shown["origin"], "stored");
    assert_eq!(shown["countedProducts"], 24);
    for index in 0..3 {
        let escaped = |key: &serde_json::Value| {
            key.as_array().map(|bytes| {
                let bytes: Vec<u8> = bytes.iter().map(|byte| byte.as_u64().expect("byte") as u8).collect();
                common::store::escape(&bytes)
            })
        };
        let range = &stored["shards"][index]["range"];
        assert_eq!(shown["shards"][index]["start"].as_str(), escaped(&range["start"]).as_deref());
        assert_eq!(shown["shards"][index]["stop"].as_str(), escaped(&range["stop"]).as_deref());
    }
    let products_shown: u64 = (0..3).map(|index| shown["shards"][index]["products"].as_u64().expect("n")).sum();
    assert_eq!(products_shown, 24);

    let table = run_ranker(&store, &["shards", "--count", "4"]);
    assert_eq!(table.status.code(), Some(0), "{}", String::from_utf8_lossy(&table.stderr));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("computed now, not stored") && text.contains("(end of table)"), "{text}");
    assert_eq!(text.lines().count(), 1 + 1 + 4 + 1, "{text}");
}
