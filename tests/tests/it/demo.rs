//! The schema command and the demo loader against the real HBase: creating the
//! tables twice creates nothing the second time, and tables created without a
//! row index in their blocks get one from an upgrade that keeps their other
//! settings and rows; a small seeded load writes the
//! expected rows, which the store reads back consistently (every index row
//! names an existing comment of the right product or user, every comment sits
//! on its author's order); one seed gives byte-identical tables whatever the
//! batching; and a second load is a no-op while a mismatched one is refused.

use std::collections::HashMap;

use admin::demo::{self, DemoError, DemoPlan, DemoSpec, LoadOptions, LoadReport, Phase, Progress};
use common::hbase::{Hbase, Retry, Row};
use common::model::{Comment, Order, Product, Record, Seller, User};
use common::schema::{self, RegionReplication, Regions};
use common::store::Store;
use common::tables::Tables;
use integration_tests::{fresh_store, hbase_config, thrift_addr, unique_prefix};

use crate::rows::{drop_tables, raw_rows};

fn small_spec() -> DemoSpec {
    DemoSpec {
        users: 40,
        sellers: 4,
        products: 25,
        comments: 600,
        seed: 2024,
        hot_products: 2,
        hot_share: 0.3,
        min_hottest_comments: 200,
        ..DemoSpec::default()
    }
}

fn decode_all<R: Record>(rows: &[Row]) -> Vec<R> {
    rows.iter().map(|row| R::from_json(row.value(b"cf:q").expect("value")).expect("the row decodes")).collect()
}

async fn load(store: &Store, plan: &DemoPlan, options: LoadOptions) -> (LoadReport, Vec<Progress>) {
    let mut updates = Vec::new();
    let report = demo::load(store, plan, &options, |update| updates.push(update)).await.expect("load");
    (report, updates)
}

#[tokio::test]
async fn creating_the_schema_twice_creates_nothing_the_second_time() {
    let tables = Tables::with_prefix(&unique_prefix("schema")).expect("prefix");
    let hbase = Hbase::new(hbase_config(&thrift_addr()));
    let first =
        schema::create_tables(&hbase, &tables, Regions::new(3).expect("regions"), RegionReplication::PRIMARY_ONLY)
            .await
            .expect("first create");
    let names: Vec<&str> = first.iter().map(|outcome| outcome.name.as_str()).collect();
    assert_eq!(names, tables.all().to_vec());
    assert!(first.iter().all(|outcome| outcome.created), "{first:?}");
    let row_index = vec![("cf".to_owned(), "ROW_INDEX_V1".to_owned())];
    assert!(first.iter().all(|outcome| outcome.block_encodings == row_index), "{first:?}");

    // Existing tables keep their regions, whatever this call asks for.
    let second = schema::create_tables(&hbase, &tables, Regions::ONE, RegionReplication::PRIMARY_ONLY)
        .await
        .expect("second create");
    assert_eq!(second.len(), first.len());
    assert!(second.iter().all(|outcome| !outcome.created), "{second:?}");
    let split = schema::split_tables(&tables);
    for outcome in &first {
        let expected = if split.contains(&outcome.name.as_str()) { 3 } else { 1 };
        assert_eq!(outcome.regions, expected, "{outcome:?}");
    }
    assert_eq!(
        second.iter().map(|outcome| outcome.regions).collect::<Vec<_>>(),
        first.iter().map(|outcome| outcome.regions).collect::<Vec<_>>()
    );
    let existing = hbase.run(Retry::Idempotent, |connection| connection.table_names()).await.expect("list");
    assert!(tables.all().iter().all(|name| existing.iter().any(|table| table == name)));

    schema::drop_tables(&hbase, &tables).await.expect("drop");
    let after = hbase.run(Retry::Idempotent, |connection| connection.table_names()).await.expect("list");
    assert!(tables.all().iter().all(|name| !after.iter().any(|table| table == name)));
}

#[tokio::test]
async fn an_upgrade_gives_old_tables_a_row_index_and_keeps_their_other_settings_and_rows() {
    let store = fresh_store("schema_upgrade").await;
    let (hbase, tables) = (store.hbase().clone(), store.tables().clone());
    // The comment table as an older tool left it: no block encoding, and a
    // TTL of a day (a setting the upgrade must keep, though it never sets one).
    let day_secs = 24 * 60 * 60;
    let comment = tables.comment.clone();
    hbase
        .run_thrift2(Retry::Idempotent, move |connection| connection.unindex_with_time_to_live(&comment, day_secs))
        .await
        .expect("make the comment table old");
    let before = schema::create_tables(&hbase, &tables, Regions::ONE, RegionReplication::PRIMARY_ONLY)
        .await
        .expect("report the tables");
    let unindexed: Vec<&str> =
        before.iter().filter(|outcome| outcome.lacks_row_index()).map(|outcome| outcome.name.as_str()).collect();
    assert_eq!(unindexed, vec![tables.comment.as_str()], "{before:?}");
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis();
    let now_ms = i64::try_from(now_ms).expect("milliseconds fit");
    let day_ms = i64::from(day_secs) * 1_000;
    for (key, age_ms) in [("fresh", 60_000), ("expired", 2 * day_ms)] {
        let (comment, cells) = (tables.comment.clone(), vec![(b"cf:q".to_vec(), key.as_bytes().to_vec())]);
        hbase
            .run(Retry::Idempotent, move |connection| {
                connection.put_at(&comment, key.as_bytes(), cells.clone(), now_ms - age_ms)
            })
            .await
            .expect("write a cell");
    }
    let read_keys = || {
        let (hbase, comment) = (hbase.clone(), tables.comment.clone());
        async move {
            let rows = hbase
                .run(Retry::Idempotent, move |connection| {
                    connection.get_rows(&comment, &[b"fresh".to_vec(), b"expired".to_vec()], &[b"cf:q".to_vec()])
                })
                .await
                .expect("read back");
            rows.into_iter().map(|row| String::from_utf8(row.key).expect("ascii")).collect::<Vec<_>>()
        }
    };
    assert_eq!(read_keys().await, vec!["fresh"], "the day's TTL hides the older cell");

    let outcomes = schema::upgrade_tables(&hbase, &tables, None).await.expect("upgrade");
    assert_eq!(outcomes.len(), tables.all().len());
    for outcome in &outcomes {
        assert!(outcome.exists, "{outcome:?}");
        if outcome.name == tables.comment {
            assert_eq!(outcome.encodings_before, vec![("cf".to_owned(), "NONE".to_owned())]);
            assert_eq!(outcome.families_changed, vec!["cf".to_owned()]);
        } else {
            assert_eq!(outcome.encodings_before, vec![("cf".to_owned(), "ROW_INDEX_V1".to_owned())]);
            assert!(outcome.families_changed.is_empty(), "{outcome:?}");
        }
    }
    let now = schema::create_tables(&hbase, &tables, Regions::ONE, RegionReplication::PRIMARY_ONLY)
        .await
        .expect("report the tables");
    let row_index = vec![("cf".to_owned(), "ROW_INDEX_V1".to_owned())];
    assert!(now.iter().all(|outcome| !outcome.created && outcome.block_encodings == row_index), "{now:?}");
    // Had the upgrade sent the family back without its TTL, the expired cell
    // would be readable again (no compaction ran, so it is still on disk).
    assert_eq!(read_keys().await, vec!["fresh"], "the TTL outlived the upgrade");

    let again = schema::upgrade_tables(&hbase, &tables, None).await.expect("a second upgrade");
    assert!(again.iter().all(|outcome| outcome.families_changed.is_empty()), "{again:?}");
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn a_seeded_load_writes_the_expected_rows_and_the_store_reads_them_consistently() {
    let store = fresh_store("demoload").await;
    let plan = DemoPlan::new(small_spec()).expect("plan");
    let (report, updates) = load(&store, &plan, LoadOptions { batch_size: 64, in_flight: 3 }).await;

    assert!(!report.already_loaded);
    assert_eq!((report.users, report.sellers, report.products, report.orders, report.comments), (40, 4, 25, 600, 600));
    let finished: Vec<Phase> =
        updates.iter().filter(|update| update.done == update.total).map(|update| update.phase).collect();
    assert_eq!(finished, [Phase::Users, Phase::Sellers, Phase::Products, Phase::Comments]);

    let tables = store.tables().clone();
    let users: Vec<User> = decode_all(&raw_rows(&store, &tables.user).await);
    let sellers: Vec<Seller> = decode_all(&raw_rows(&store, &tables.seller).await);
    let products: Vec<Product> = decode_all(&raw_rows(&store, &tables.product).await);
    let orders: Vec<Order> = decode_all(&raw_rows(&store, &tables.order).await);
    let comments: Vec<Comment> = decode_all(&raw_rows(&store, &tables.comment).await);
    assert_eq!((users.len(), sellers.len(), products.len(), orders.len(), comments.len()), (40, 4, 25, 600, 600));
    assert_eq!(raw_rows(&store, &tables.user_comment).await.len(), 600);
    assert_eq!(raw_rows(&store, &tables.product_comment).await.len(), 600);
    assert!(raw_rows(&store, &tables.product_comment_rank).await.is_empty());
    // Rows come in key order, which is not the numbers' order: the ids are
    // spread over the key space (`keys::numbered_id`).
    let first_user = plan.user(1).expect("user");
    assert_eq!(users.iter().find(|user| user.id == first_user.id), Some(&first_user));
    let first_product = plan.product(1).expect("product");
    assert_eq!(products.iter().find(|product| product.id == first_product.id), Some(&first_product));

    // Every comment is the generated one and sits on its author's order.
    let order_owner: HashMap<_, _> = orders.iter().map(|order| (order.id, order.user_id)).collect();
    for comment in &comments {
        assert_eq!(order_owner[&comment.order_id], comment.user_id, "order {}", comment.order_id);
        let position: u64 = comment.order_id.as_str()[1..].parse::<u64>().expect("order number") - 1;
        let generated = plan.comment(position).expect("generated").comment;
        assert_eq!((comment.product_id, comment.user_id), (generated.product_id, generated.user_id));
        assert_eq!((comment.text(), comment.timestamp), (generated.content.as_str(), generated.timestamp_ms));
        assert!(!comment.edited);
    }

    // Each product's index, walked page by page, names exactly its comments, newest first.
    let mut indexed = 0;
    for number in 1..=25 {
        let product = demo::product_id(number).expect("id");
        let mut start = None;
        let mut timestamps = Vec::new();
        loop {
            let page = store.product_comment_page(&product, start, 50).await.expect("page");
            let read = store.comments_of(&page).await.expect("comments");
            assert_eq!(read.len(), page.entries.len(), "an index row of {product} names a missing comment");
            assert!(read.iter().all(|comment| comment.product_id == product));
            timestamps.extend(read.iter().map(|comment| comment.timestamp));
            start = page.next;
            if start.is_none() {
                break;
            }
        }
        assert!(timestamps.windows(2).all(|pair| pair[0] >= pair[1]), "{product} is not newest first");
        assert_eq!(timestamps.len() as u64, plan.product_comments(number), "{product}");
        indexed += timestamps.len();
    }
    assert_eq!(indexed, 600);
    assert_eq!(report.hottest_products[0].id, demo::product_id(1).expect("id"));
    assert!(report.hottest_products[0].comments >= 200);

    // The most active user's index holds exactly the comments the report counts, all theirs.
    let busiest = &report.active_users[0];
    let page = store.user_comment_page(&busiest.id, None, 100).await.expect("user page");
    assert!(page.next.is_none());
    let theirs = store.comments_of(&page).await.expect("user comments");
    assert_eq!(theirs.len() as u64, busiest.comments);
    assert_eq!(comments.iter().filter(|comment| comment.user_id == busiest.id).count() as u64, busiest.comments);
    assert!(theirs.iter().all(|comment| comment.user_id == busiest.id));

    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn one_seed_gives_byte_identical_tables_whatever_the_batching() {
    let spec = DemoSpec { comments: 300, min_hottest_comments: 0, ..small_spec() };
    let plan = DemoPlan::new(spec).expect("plan");
    let first = fresh_store("demosame1").await;
    let second = fresh_store("demosame2").await;
    load(&first, &plan, LoadOptions { batch_size: 50, in_flight: 1 }).await;
    load(&second, &plan, LoadOptions { batch_size: 128, in_flight: 4 }).await;
    for (table, other) in first.tables().all().iter().zip(second.tables().all()) {
        let rows = raw_rows(&first, table).await;
        assert_eq!(rows, raw_rows(&second, other).await, "{table} differs");
    }
    assert_eq!(raw_rows(&first, &first.tables().comment).await.len(), 300);
    drop_tables(&[&first, &second]).await;
}

#[tokio::test]
async fn loading_again_writes_nothing_and_a_different_data_set_on_top_is_refused() {
    let store = fresh_store("demoagain").await;
    let spec = DemoSpec { comments: 200, min_hottest_comments: 0, ..small_spec() };
    let plan = DemoPlan::new(spec.clone()).expect("plan");
    let (first, _) = load(&store, &plan, LoadOptions::default()).await;
    let (again, updates) = load(&store, &plan, LoadOptions::default()).await;
    assert!(again.already_loaded);
    assert!(updates.is_empty(), "a no-op load reported writing: {updates:?}");
    assert_eq!(again.active_users, first.active_users);
    assert_eq!(again.hottest_products, first.hottest_products);
    assert_eq!(raw_rows(&store, &store.tables().comment).await.len(), 200);

    // Other sizes or another seed would reuse the order ids with other owners: refused, nothing written.
    let before = raw_rows(&store, &store.tables().order).await;
    for other in [DemoSpec { comments: 260, ..spec.clone() }, DemoSpec { seed: spec.seed + 1, ..spec.clone() }] {
        let plan = DemoPlan::new(other).expect("plan");
        let refused = demo::load(&store, &plan, &LoadOptions { batch_size: 20, in_flight: 2 }, |_| {}).await;
        assert!(matches!(refused, Err(DemoError::Conflicting { .. })), "{refused:?}");
    }
    assert_eq!(raw_rows(&store, &store.tables().order).await, before);
    assert_eq!(raw_rows(&store, &store.tables().comment).await.len(), 200);
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn the_schema_commands_pre_split_the_id_keyed_tables_report_them_and_leave_current_ones_alone() {
    let tables = Tables::with_prefix(&unique_prefix("admin_regions")).expect("prefix");
    let (thrift1, thrift2) = (thrift_addr(), integration_tests::thrift2_addr());
    let create = |regions: &str| {
        let output = std::process::Command::new(integration_tests::cargo_binary("reviews-admin"))
            .args(["schema", "create", "--regions", regions, "--thrift-addr", &thrift1, "--thrift2-addr", &thrift2])
            .args(["--table-prefix", &tables.prefix])
            .output()
            .expect("run reviews-admin");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        println!("schema create --regions {regions}:\n{stdout}{}", String::from_utf8_lossy(&output.stderr));
        (output.status.code(), stdout, String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let line_of = |stdout: &str, table: &str| -> String {
        stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(table))
            .unwrap_or_else(|| panic!("no line for {table} in {stdout}"))
            .to_owned()
    };

    for nonsense in ["0", "1001", "four"] {
        let (code, _, stderr) = create(nonsense);
        assert_eq!(code, Some(2), "--regions {nonsense} must be refused as a usage error");
        assert!(stderr.contains("--regions"), "{stderr}");
    }
    let hbase = Hbase::new(hbase_config(&thrift_addr()));
    let existing = schema::table_names(&hbase).await.expect("list");
    assert!(!existing.iter().any(|name| name.starts_with(&tables.prefix)), "a refused call created tables");

    let (code, stdout, _) = create("5");
    assert_eq!(code, Some(0));
    assert!(line_of(&stdout, &tables.product_comment).ends_with("created (5 regions; cf ROW_INDEX_V1)"), "{stdout}");
    assert!(line_of(&stdout, &tables.comment).ends_with("created (5 regions; cf ROW_INDEX_V1)"), "{stdout}");
    assert!(line_of(&stdout, &tables.user).ends_with("created (1 region; cf ROW_INDEX_V1)"), "{stdout}");

    // A second run changes nothing, whatever it asks for, and says what is there.
    let (code, stdout, _) = create("2");
    assert_eq!(code, Some(0));
    assert!(
        line_of(&stdout, &tables.user_comment).ends_with("already exists (5 regions; cf ROW_INDEX_V1)"),
        "{stdout}"
    );
    assert!(line_of(&stdout, &tables.ranker_run).ends_with("already exists (1 region; cf ROW_INDEX_V1)"), "{stdout}");

    // Tables that have the row index are left alone by an upgrade.
    let output = std::process::Command::new(integration_tests::cargo_binary("reviews-admin"))
        .args(["schema", "upgrade", "--thrift-addr", &thrift1, "--thrift2-addr", &thrift2])
        .args(["--table-prefix", &tables.prefix])
        .output()
        .expect("run reviews-admin");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(line_of(&stdout, &tables.comment).ends_with("up to date (cf ROW_INDEX_V1)"), "{stdout}");
    assert!(stdout.ends_with("0 upgraded\n"), "{stdout}");
    schema::drop_tables(&hbase, &tables).await.expect("drop");
}
