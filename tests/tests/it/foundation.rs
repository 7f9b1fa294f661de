//! The foundation against the real HBase: models, exact index bytes, the seed's
//! row formats, the write path's rules, and the storage layer's scans and pool.

use std::future::Future as _;
use std::time::Duration;

use common::hbase::{Connection, Hbase, HbaseConfig, Retry, RowMutation, ScanSpec, COLUMN_VALUE};
use common::keys::{self, CommentKey};
use common::model::{Extra, Order, Product, Seller, User};
use common::store::{NewComment, Store};
use common::traces::RequestContext;
use common::{Error, Id};
use integration_tests::fixtures::{new_comment, put_orders};
use integration_tests::{fresh_store, hbase_config, test_id, thrift_addr};

use crate::rows::{delete_all_rows, put_value, raw_rows};

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("valid id")
}

#[tokio::test]
async fn every_model_round_trips_through_hbase() {
    let store = fresh_store("models").await;
    let mut extra = Extra::new();
    extra.insert("rowKey".to_owned(), serde_json::json!("VTAwMDAwMDAwMQ=="));
    let user = User { id: id("U000000001"), name: "김철수".into(), nickname: "철수".into(), extra };
    let seller = Seller { id: id("S000000001"), name: "Good Seller".into(), extra: Extra::new() };
    let product = Product {
        id: id("P000000001"),
        seller_id: seller.id,
        content: vec![0, 1, 2, 254, 255],
        created_at: 1_700_000_000_000,
        updated_at: 1_700_000_000_001,
        extra: Extra::new(),
    };
    let order = Order { id: id("O000000001"), user_id: user.id, extra: Extra::new() };
    store.put_records(std::slice::from_ref(&user)).await.expect("put user");
    store.put_records(std::slice::from_ref(&seller)).await.expect("put seller");
    store.put_records(std::slice::from_ref(&product)).await.expect("put product");
    store.put_records(std::slice::from_ref(&order)).await.expect("put order");

    assert_eq!(store.get_record::<User>(keys::entity_key(&user.id)).await.expect("get"), Some(user));
    assert_eq!(store.get_record::<Seller>(keys::entity_key(&seller.id)).await.expect("get"), Some(seller));
    assert_eq!(store.get_record::<Product>(keys::entity_key(&product.id)).await.expect("get"), Some(product));
    assert_eq!(store.get_record::<Order>(keys::entity_key(&order.id)).await.expect("get"), Some(order.clone()));
    assert_eq!(store.get_record::<Order>(keys::entity_key(&id("O999999999"))).await.expect("get"), None);

    let posted = store
        .post_comment(NewComment {
            rating: Some(5),
            helpful: Some(7),
            unhelpful: Some(1),
            photos: Some(2),
            ..new_comment(&order.id, &id("P000000001"), &order.user_id, "배송이 빨라요 fast shipping", 42)
        })
        .await
        .expect("post");
    let read = store.get_comments(&[posted.row_key()]).await.expect("get comments");
    assert_eq!(read, vec![Some(posted)]);
}

/// The write path's index rows must be byte-identical to docs/contract.md §2. The
/// expected bytes come from the independent vectors (keys.json, case 1).
#[tokio::test]
async fn write_path_index_rows_have_the_exact_bytes_of_the_design() {
    let store = fresh_store("exactbytes").await;
    let (order, product, user) = (id("ORDaaaaaa1"), id("PRODbbbbb1"), id("USERccccc1"));
    put_orders(&store, &[(order, user)]).await;
    let content = "x".repeat(30);
    store.post_comment(new_comment(&order, &product, &user, &content, 1_700_000_000_000)).await.expect("post");

    let comment_key = hex::decode("4f52446161616161613150524f44626262626231").expect("hex");
    let user_rows = raw_rows(&store, &store.tables().user_comment).await;
    assert_eq!(user_rows.len(), 1);
    assert_eq!(
        hex::encode(&user_rows[0].key),
        "555345526363636363317ffffe74301a97ff4f52446161616161613150524f44626262626231"
    );
    assert_eq!(user_rows[0].value(COLUMN_VALUE), Some(comment_key.as_slice()));

    let product_rows = raw_rows(&store, &store.tables().product_comment).await;
    assert_eq!(product_rows.len(), 1);
    assert_eq!(
        hex::encode(&product_rows[0].key),
        "50524f44626262626231637ffffe74301a97ff7fffffe14f52446161616161613150524f44626262626231"
    );
    assert_eq!(product_rows[0].value(COLUMN_VALUE), Some(comment_key.as_slice()));

    let comment_rows = raw_rows(&store, &store.tables().comment).await;
    assert_eq!(comment_rows.len(), 1);
    assert_eq!(comment_rows[0].key, comment_key);
}

/// Rows the seed's Java service wrote: JSON with `rowKey` and `isEdited`, index
/// keys without the tie (23 bytes for a product, 18 for a user).
#[tokio::test]
async fn comments_in_the_seeds_format_read_back_through_both_indexes() {
    let store = fresh_store("seedformat").await;
    let (order, product, user) = (id("ORDseed001"), id("PRODseed01"), id("USERseed01"));
    let key = CommentKey::new(&order, &product);
    let json = serde_json::json!({
        "orderId": "ORDseed001", "productId": "PRODseed01", "userId": "USERseed01",
        "content": "Java가 쓴 리뷰입니다", "timestamp": 1_600_000_000_000_i64, "isEdited": true,
        "rowKey": "T1JEc2VlZDAwMVBST0RzZWVkMDE="
    });
    put_value(&store, &store.tables().comment, key.as_bytes().to_vec(), serde_json::to_vec(&json).expect("json")).await;
    let product_key = keys::product_comment_key(&product, 1_600_000_000_000, 27, &key)[..23].to_vec();
    let user_key = keys::user_comment_millisecond_prefix(&user, 1_600_000_000_000);
    assert_eq!((product_key.len(), user_key.len()), (23, 18));
    put_value(&store, &store.tables().product_comment, product_key, key.as_bytes().to_vec()).await;
    put_value(&store, &store.tables().user_comment, user_key, key.as_bytes().to_vec()).await;

    let page = store.product_comment_page(&product, None, 20).await.expect("product page");
    let comments = store.comments_of(&page).await.expect("comments");
    assert_eq!(comments.len(), 1);
    assert!(comments[0].edited);
    assert_eq!(comments[0].text(), "Java가 쓴 리뷰입니다");
    assert_eq!(comments[0].extra.get("rowKey"), Some(&serde_json::json!("T1JEc2VlZDAwMVBST0RzZWVkMDE=")));
    let page = store.user_comment_page(&user, None, 20).await.expect("user page");
    assert_eq!(store.comments_of(&page).await.expect("comments").len(), 1);

    // Editing keeps the unknown field; deleting finds the seed's short index keys.
    let edited = store.edit_comment(&order, &product, "고쳤어요 edited".into()).await.expect("edit");
    let stored = raw_rows(&store, &store.tables().comment).await;
    let stored: serde_json::Value =
        serde_json::from_slice(stored[0].value(COLUMN_VALUE).expect("value")).expect("json");
    assert_eq!(stored["rowKey"], serde_json::json!("T1JEc2VlZDAwMVBST0RzZWVkMDE="));
    assert_eq!(stored["content"], serde_json::json!(edited.content));
    store.delete_comment(&order, &product).await.expect("delete");
    for table in [&store.tables().comment, &store.tables().user_comment] {
        assert!(raw_rows(&store, table).await.is_empty(), "{table} still has rows");
    }
    assert_eq!(only_the_deletion_marker(&store, &product).await, key.as_bytes(), "it names the deleted comment");
}

/// Asserts that `product-comment` holds nothing but `product`'s deletion
/// marker (the write path's delete leaves it for incremental runs), and
/// returns the comment key it names.
async fn only_the_deletion_marker(store: &Store, product: &Id) -> Vec<u8> {
    let rows = raw_rows(store, &store.tables().product_comment).await;
    let keys: Vec<&[u8]> = rows.iter().map(|row| row.key.as_slice()).collect();
    assert_eq!(keys, [keys::deletion_marker_key(product).as_slice()], "only the deletion marker is left");
    rows[0].value(COLUMN_VALUE).expect("the marker's value").to_vec()
}

#[tokio::test]
async fn two_comments_by_one_user_in_one_millisecond_both_stay_indexed() {
    let store = fresh_store("samems").await;
    let user = id("USERsame01");
    let (order_a, order_b) = (id("ORDsame001"), id("ORDsame002"));
    put_orders(&store, &[(order_a, user)]).await;
    put_orders(&store, &[(order_b, user)]).await;
    let product = id("PRODsame01");
    // Same user, same millisecond, same product, same length: the seed's keys collide on both indexes.
    store.post_comment(new_comment(&order_a, &product, &user, "first review!!", 1_000)).await.expect("post a");
    store.post_comment(new_comment(&order_b, &product, &user, "other review!", 1_000)).await.expect("post b");

    let user_page = store.user_comment_page(&user, None, 20).await.expect("user page");
    assert_eq!(user_page.entries.len(), 2);
    let product_page = store.product_comment_page(&product, None, 20).await.expect("product page");
    assert_eq!(product_page.entries.len(), 2);
    let contents: Vec<String> = store
        .comments_of(&user_page)
        .await
        .expect("comments")
        .into_iter()
        .map(|comment| comment.text().to_owned())
        .collect();
    assert!(contents.contains(&"first review!!".to_owned()) && contents.contains(&"other review!".to_owned()));
}

#[tokio::test]
async fn the_write_path_enforces_ownership_and_uniqueness_and_edits_in_place() {
    let store = fresh_store("writepath").await;
    let (owner, stranger, order, product) = (id("USERowner1"), id("USERother1"), id("ORDown0001"), id("PRODown001"));
    put_orders(&store, &[(order, owner)]).await;

    let missing = store.post_comment(new_comment(&id("ORDnone001"), &product, &owner, "hello there", 5)).await;
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    let foreign = store.post_comment(new_comment(&order, &product, &stranger, "not my order", 5)).await;
    assert!(matches!(foreign, Err(Error::Conflict(_))), "{foreign:?}");
    assert!(raw_rows(&store, &store.tables().comment).await.is_empty());

    let posted = store.post_comment(new_comment(&order, &product, &owner, "original text", 5)).await.expect("post");
    let again = store.post_comment(new_comment(&order, &product, &owner, "second try", 6)).await;
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");

    let index_before = raw_rows(&store, &store.tables().product_comment).await;
    let edited = store.edit_comment(&order, &product, "changed text, much longer".into()).await.expect("edit");
    assert!(edited.edited);
    assert_eq!(edited.timestamp, posted.timestamp);
    assert_eq!(raw_rows(&store, &store.tables().product_comment).await, index_before, "edit must not move index rows");
    let read = store.get_comments(&[posted.row_key()]).await.expect("read");
    assert_eq!(read[0].as_ref().map(|comment| comment.text()), Some("changed text, much longer"));

    // Deleting after an edit still finds the index row, whose key holds the old length.
    store.delete_comment(&order, &product).await.expect("delete");
    assert_eq!(only_the_deletion_marker(&store, &product).await, posted.row_key().as_bytes());
    assert!(raw_rows(&store, &store.tables().user_comment).await.is_empty());
    assert!(matches!(store.delete_comment(&order, &product).await, Err(Error::NotFound(_))));
}

#[tokio::test]
async fn posting_again_after_a_half_done_post_completes_it_and_never_overwrites_another_review() {
    let store = fresh_store("repost").await;
    let (user, product) = (id("USERrepost"), id("PRODrepost"));
    let (single, bulk_a, bulk_b) = (id("ORDrepost1"), id("ORDrepost2"), id("ORDrepost3"));
    for order in [&single, &bulk_a, &bulk_b] {
        put_orders(&store, &[(*order, user)]).await;
    }
    let tables = store.tables().clone();

    // One post: the comment row landed, its index rows did not.
    let first = new_comment(&single, &product, &user, "posted once, indexed later", 1_000);
    let posted = store.post_comment(first.clone()).await.expect("post");
    delete_all_rows(&store, &tables.user_comment).await;
    delete_all_rows(&store, &tables.product_comment).await;
    assert_eq!(store.post_comment(first.clone()).await.expect("the same post again"), posted);
    assert_eq!(raw_rows(&store, &tables.user_comment).await.len(), 1);
    assert_eq!(raw_rows(&store, &tables.product_comment).await.len(), 1);

    // A bulk post, likewise, and then once more when it is already complete.
    let batch = vec![
        new_comment(&bulk_a, &product, &user, "bulk review number one", 2_000),
        new_comment(&bulk_b, &product, &user, "bulk review number two", 3_000),
    ];
    store.post_comments(batch.clone()).await.expect("bulk post");
    delete_all_rows(&store, &tables.product_comment).await;
    store.post_comments(batch.clone()).await.expect("the same batch again");
    store.post_comments(batch.clone()).await.expect("the same batch a third time");
    store.post_comment(first).await.expect("the first post, a third time");
    assert_eq!(raw_rows(&store, &tables.user_comment).await.len(), 3);
    assert_eq!(raw_rows(&store, &tables.product_comment).await.len(), 3);

    // Another review for an (order, product) that has one is still refused,
    // alone or in a batch, and the stored review is untouched.
    let other = new_comment(&single, &product, &user, "a different review", 1_000);
    assert!(matches!(store.post_comment(other.clone()).await, Err(Error::Conflict(_))));
    assert!(matches!(store.post_comments(vec![other]).await, Err(Error::Conflict(_))));
    let read = store.get_comments(&[posted.row_key()]).await.expect("read");
    assert_eq!(read[0].as_ref(), Some(&posted));
}

#[tokio::test]
async fn scans_honour_stop_rows_limits_and_pages() {
    let store = fresh_store("scans").await;
    let table = store.tables().user.clone();
    let mutations: Vec<RowMutation> = (0..50u8)
        .map(|n| RowMutation::Put { key: vec![b'k', n], cells: vec![(COLUMN_VALUE.to_vec(), vec![n])] })
        .collect();
    {
        let table = table.clone();
        store.hbase().run(Retry::Idempotent, move |c| c.mutate_rows(&table, mutations.clone())).await.expect("put");
    }
    let scan = |start: Vec<u8>, stop: Option<Vec<u8>>, limit: usize, page_size: usize| {
        let table = table.clone();
        let spec = ScanSpec { start, stop, limit, page_size, columns: vec![COLUMN_VALUE.to_vec()], cache_blocks: true };
        let hbase = store.hbase().clone();
        async move { hbase.run(Retry::Idempotent, move |c| c.scan(&table, &spec)).await.expect("scan") }
    };
    let firsts: Vec<u8> = scan(vec![b'k', 10], Some(vec![b'k', 20]), 100, 3).await.iter().map(|r| r.key[1]).collect();
    assert_eq!(firsts, (10..20).collect::<Vec<u8>>(), "stop row is exclusive, pages of 3 join up");
    let limited = scan(vec![b'k'], keys::prefix_successor(b"k"), 7, 2).await;
    assert_eq!(limited.len(), 7);
    assert_eq!(limited.last().map(|row| row.key.clone()), Some(vec![b'k', 6]));
    assert!(scan(vec![b'k', 60], None, 10, 10).await.is_empty());

    // Multi-get drops missing rows; results are matched by key.
    let keys_wanted = vec![vec![b'k', 3], vec![b'x'], vec![b'k', 1]];
    let got = {
        let table = table.clone();
        store
            .hbase()
            .run(Retry::Idempotent, move |c| c.get_rows(&table, &keys_wanted, &[COLUMN_VALUE.to_vec()]))
            .await
            .expect("get rows")
    };
    let mut got_keys: Vec<Vec<u8>> = got.into_iter().map(|row| row.key).collect();
    got_keys.sort();
    assert_eq!(got_keys, vec![vec![b'k', 1], vec![b'k', 3]]);
}

#[tokio::test]
async fn check_and_put_and_atomic_increment_behave_as_compare_and_set_and_counter() {
    let store = fresh_store("cas").await;
    let table = store.tables().ranker_lease.clone();
    let outcome = store
        .hbase()
        .run(Retry::Once, move |c| {
            let first = c.check_and_put(&table, b"lease", COLUMN_VALUE, None, b"a".to_vec())?;
            let second = c.check_and_put(&table, b"lease", COLUMN_VALUE, None, b"b".to_vec())?;
            let swap = c.check_and_put(&table, b"lease", COLUMN_VALUE, Some(b"a"), b"c".to_vec())?;
            let stale = c.check_and_put(&table, b"lease", COLUMN_VALUE, Some(b"a"), b"d".to_vec())?;
            let counter = (
                c.atomic_increment(&table, b"counter", b"cf:n", 5)?,
                c.atomic_increment(&table, b"counter", b"cf:n", -2)?,
            );
            Ok((first, second, swap, stale, counter))
        })
        .await
        .expect("cas");
    assert_eq!(outcome, (true, false, true, false, (5, 3)));
}

#[tokio::test]
async fn an_operation_on_the_blocking_pool_runs_in_the_request_that_asked_for_it() {
    // What it logs names the request (`RequestContext`), as what the request's
    // own future logs does; outside a request, it names none.
    let store = fresh_store("request_context").await;
    let current_request = || Ok(RequestContext::current().map(|request| format!("{request:?}")));
    let request = RequestContext::new(
        http::HeaderValue::from_static("caller-chosen-id"),
        http::Method::GET,
        http::Uri::from_static("/v1/products/P000000001/comments"),
    );
    let mut operation = std::pin::pin!(store.hbase().run(Retry::Once, move |_| current_request()));
    let seen = std::future::poll_fn(|context| request.in_scope(|| operation.as_mut().poll(context)))
        .await
        .expect("the operation");
    assert!(seen.as_deref().is_some_and(|seen| seen.contains("caller-chosen-id")), "{seen:?}");
    let outside = store.hbase().run(Retry::Once, move |_| current_request()).await.expect("the operation");
    assert_eq!(outside, None);
}

/// Bad input is refused by value checks before the store touches the network:
/// against a closed port, these fail as invalid input, never as unavailable.
#[tokio::test]
async fn bad_input_is_refused_before_any_io() {
    for bad in ["", "short", "WAY_TOO_LONG_ID", "ABC/../DEF", "한국어아이디입니다"] {
        assert!(Id::parse("productId", bad).is_err(), "{bad}");
    }
    let config = HbaseConfig { operation_timeout: Duration::from_secs(2), ..hbase_config("127.0.0.1:1") };
    let unreachable = Store::new(Hbase::new(config), common::tables::Tables::with_prefix("never_").expect("prefix"));
    let (order, product, user) = (id("ORDbad0001"), id("PRODbad001"), id("USERbad001"));
    let negative = unreachable.post_comment(new_comment(&order, &product, &user, "fine text", -1)).await;
    assert!(matches!(negative, Err(Error::InvalidInput(_))), "{negative:?}");
    let huge = "가".repeat(30_000);
    let oversized = unreachable.post_comment(new_comment(&order, &product, &user, &huge, 1)).await;
    assert!(matches!(oversized, Err(Error::InvalidInput(_))), "{oversized:?}");
    let edit = unreachable.edit_comment(&order, &product, huge).await;
    assert!(matches!(edit, Err(Error::InvalidInput(_))), "{edit:?}");
    // The same store does reach for the network for valid input, and reports it as unavailable.
    let valid = unreachable.post_comment(new_comment(&order, &product, &user, "fine text", 1)).await;
    assert!(matches!(valid, Err(Error::Unavailable(_))), "{valid:?}");
}

/// The gateway closes connections idle for 60 s. A raw connection is broken by
/// that; the pool notices and hands out a working one instead.
#[tokio::test]
async fn pooled_connections_survive_the_gateways_idle_close() {
    let store = fresh_store("idle").await;
    let pooled = store.clone();
    pooled.hbase().check_ready().await.expect("warm the pool");
    let address = thrift_addr();
    let raw_outcome = tokio::task::spawn_blocking(move || {
        let mut raw = Connection::open(&address, Duration::from_secs(1), Duration::from_secs(10)).expect("open");
        raw.table_names().expect("fresh connection works");
        std::thread::sleep(Duration::from_secs(65));
        let outcome = raw.table_names();
        (outcome.is_err(), raw.is_broken())
    })
    .await
    .expect("join");
    assert_eq!(raw_outcome, (true, true), "the gateway should have closed the idle raw connection");
    let product = test_id("P", 1);
    let page = pooled.product_comment_page(&product, None, 5).await.expect("pooled read after idle close");
    assert!(page.entries.is_empty());
}
