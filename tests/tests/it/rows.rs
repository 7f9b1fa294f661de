//! Raw-row helpers every module of this binary shares: scan whole tables, write
//! rows byte for byte (as the Java service wrote them, or corrupt), delete
//! rows, copy and compare rank tables, and drop a test's tables.
//!
//! They need `Store::hbase` and `Hbase::run`, which only common's
//! `test-support` feature makes public. That feature is a dev-dependency of
//! this crate, so it reaches this test binary only: were these helpers in the
//! `integration_tests` library, the feature would become a normal dependency
//! and `cargo build --workspace` would build the services with it too.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::hbase::{Retry, Row, RowMutation, ScanSpec, COLUMN_SCORE, COLUMN_VALUE, FAMILY};
use common::keys::{self, CommentKey};
use common::model::Comment;
use common::store::Store;
use integration_tests::outlast_delete_markers;

/// Every row of `table`, every column, in key order.
pub async fn raw_rows(store: &Store, table: &str) -> Vec<Row> {
    let table = table.to_owned();
    let spec = ScanSpec {
        start: Vec::new(),
        stop: None,
        limit: usize::MAX,
        page_size: 1_000,
        columns: Vec::new(),
        cache_blocks: true,
    };
    store.hbase().run(Retry::Idempotent, move |connection| connection.scan(&table, &spec)).await.expect("scan a table")
}

/// Writes `rows` as they are (every column) into `table`.
pub async fn put_rows(store: &Store, table: &str, rows: Vec<Row>) {
    for chunk in rows.chunks(1_000) {
        let table = table.to_owned();
        let mutations: Vec<RowMutation> = chunk
            .iter()
            .map(|row| RowMutation::Put {
                key: row.key.clone(),
                cells: row.cells.iter().map(|(column, value)| (column.clone(), value.clone())).collect(),
            })
            .collect();
        store
            .hbase()
            .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone()))
            .await
            .expect("put raw rows");
    }
}

/// Puts one `cf:q` value as is.
pub async fn put_value(store: &Store, table: &str, key: Vec<u8>, value: Vec<u8>) {
    put_values(store, table, vec![(key, value)]).await;
}

/// Puts `(key, cf:q value)` pairs as they are.
pub async fn put_values(store: &Store, table: &str, rows: Vec<(Vec<u8>, Vec<u8>)>) {
    let rows = rows
        .into_iter()
        .map(|(key, value)| Row { key, cells: BTreeMap::from([(COLUMN_VALUE.to_vec(), value)]) })
        .collect();
    put_rows(store, table, rows).await;
}

/// Deletes rows directly, as the Java service's delete did.
pub async fn delete_rows(store: &Store, table: &str, keys: Vec<Vec<u8>>) {
    let table = table.to_owned();
    let deletes: Vec<RowMutation> =
        keys.into_iter().map(|key| RowMutation::Delete { key, family: FAMILY.as_bytes().to_vec() }).collect();
    store
        .hbase()
        .run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, deletes.clone()))
        .await
        .expect("delete rows");
}

/// Deletes every row of `table`, then waits until the rows may be written again.
pub async fn delete_all_rows(store: &Store, table: &str) {
    let keys = raw_rows(store, table).await.into_iter().map(|row| row.key).collect();
    delete_rows(store, table, keys).await;
    outlast_delete_markers().await;
}

/// Copies the tables a ranking reads and writes from `from` into `to`, byte for byte.
pub async fn copy_ranking_tables(from: &Store, to: &Store) {
    let pairs = [
        (&from.tables().comment, &to.tables().comment),
        (&from.tables().product_comment, &to.tables().product_comment),
        (&from.tables().user_comment, &to.tables().user_comment),
        (&from.tables().product_comment_rank, &to.tables().product_comment_rank),
    ];
    for (source, target) in pairs {
        let rows = raw_rows(from, source).await;
        put_rows(to, target, rows).await;
    }
}

/// One rank row as stored: (row key, `cf:q`, `cf:s`).
pub type RankRow = (Vec<u8>, Vec<u8>, Vec<u8>);

/// A rank table grouped by product id.
pub type SlotsByProduct = BTreeMap<Vec<u8>, Vec<RankRow>>;

/// The rank table as (key, cf:q, cf:s) triples, in key order: what "byte-identical" compares.
pub async fn rank_table(store: &Store) -> Vec<RankRow> {
    raw_rows(store, &store.tables().product_comment_rank)
        .await
        .into_iter()
        .map(|row| {
            let value = row.value(COLUMN_VALUE).unwrap_or_default().to_vec();
            let score = row.value(COLUMN_SCORE).unwrap_or_default().to_vec();
            (row.key, value, score)
        })
        .collect()
}

/// The rank table grouped by product (the first ten key bytes).
pub fn slots_by_product(table: &[RankRow]) -> SlotsByProduct {
    let mut by_product = SlotsByProduct::new();
    for slot in table {
        let product = slot.0.get(..common::ids::ID_LEN).unwrap_or(&slot.0).to_vec();
        by_product.entry(product).or_default().push(slot.clone());
    }
    by_product
}

/// Drops the tables of `stores` (each test's own), so repeated runs do not
/// pile up tables in the HBase master's memory.
pub async fn drop_tables(stores: &[&Store]) {
    let mut drops = tokio::task::JoinSet::new();
    for store in stores {
        let store = (*store).clone();
        drops.spawn(async move { common::schema::drop_tables(store.hbase(), store.tables()).await });
    }
    while let Some(dropped) = drops.join_next().await {
        dropped.expect("drop task").expect("drop the test's tables");
    }
}

/// The comment row as the Java service writes it (Jackson over its class).
pub fn java_json(comment: &Comment) -> Vec<u8> {
    let key = CommentKey::new(&comment.order_id, &comment.product_id);
    let mut json = serde_json::to_value(comment).expect("json");
    json["rowKey"] = STANDARD.encode(key.as_bytes()).into();
    serde_json::to_vec(&json).expect("encode")
}

/// A new comment the Java way: the comment row and both index rows, put directly.
pub async fn java_post(store: &Store, comment: &Comment) {
    let key = CommentKey::new(&comment.order_id, &comment.product_id);
    let tables = store.tables();
    put_value(store, &tables.comment, key.as_bytes().to_vec(), java_json(comment)).await;
    let length = comment.content.as_deref().unwrap_or_default().len();
    let product_key = keys::product_comment_key(&comment.product_id, comment.timestamp, length, &key)
        [..keys::PRODUCT_COMMENT_SEED_KEY_LEN]
        .to_vec();
    put_value(store, &tables.product_comment, product_key, key.as_bytes().to_vec()).await;
    let user_key = keys::user_comment_millisecond_prefix(&comment.user_id, comment.timestamp);
    put_value(store, &tables.user_comment, user_key, key.as_bytes().to_vec()).await;
}
