//! Rows exactly as the original Java service writes them (issue 10): Jackson
//! JSON with `edited` and `rowKey`, the seed's 18- and 23-byte index keys, put
//! through raw Thrift. Each case the service could write and this project used
//! to lose is read back by every read route, ranked, explained and repaired:
//!
//! - content holding an unpaired UTF-16 surrogate (Jackson writes `\uD83D`);
//! - ids of any ten printable ASCII bytes (`JP-edge-01`, `USR edge 1`), and a
//!   ten-Hangul-character product id stored as a 30-byte key;
//! - `"content": null`;
//! - one comment posted twice: the row overwritten, the first post's index
//!   rows left pointing at the second (and a double post within one
//!   millisecond, whose two product index rows are neighbours).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::keys::{self, CommentKey};
use common::model::Comment;
use common::store::Store;
use common::Id;
use integration_tests::fresh_store;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use integration_tests::app::{uncached_settings, TestApp};
use integration_tests::fixtures::AS_OF_MS;

use crate::rows::{drop_tables, put_value, raw_rows};

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("an id the Java service could store")
}

/// One `POST /comment` of the Java service, byte for byte: the comment row
/// (Jackson over the Lombok class: `edited`, then `rowKey` from `getRowKey()`)
/// and both index rows in the seed's layout. `content_json` is the JSON
/// Jackson wrote for the content; `java_utf8_len` is what Java's
/// `getBytes(UTF_8).length` gave (0 for null).
async fn java_post(
    store: &Store,
    order: &Id,
    product: &Id,
    user: &Id,
    content_json: &str,
    java_utf8_len: usize,
    at: i64,
) {
    let key = CommentKey::new(order, product);
    let json = format!(
        r#"{{"orderId":"{order}","productId":"{product}","userId":"{user}","content":{content_json},"timestamp":{at},"edited":false,"rowKey":"{}"}}"#,
        STANDARD.encode(key.as_bytes())
    );
    let tables = store.tables();
    put_value(store, &tables.comment, key.as_bytes().to_vec(), json.into_bytes()).await;
    let product_key =
        keys::product_comment_key(product, at, java_utf8_len, &key)[..keys::PRODUCT_COMMENT_SEED_KEY_LEN].to_vec();
    put_value(store, &tables.product_comment, product_key, key.as_bytes().to_vec()).await;
    put_value(store, &tables.user_comment, keys::user_comment_millisecond_prefix(user, at), key.as_bytes().to_vec())
        .await;
}

fn orders(comments: &[Value]) -> Vec<String> {
    comments.iter().map(|comment| comment["orderId"].as_str().expect("orderId").to_owned()).collect()
}

fn metric(metrics: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .filter(|line| labels.iter().all(|(label, value)| line.contains(&format!("{label}=\"{value}\""))))
        .filter_map(|line| line.rsplit(' ').next().and_then(|value| value.parse::<f64>().ok()))
        .map(|value| value as u64)
        .sum()
}

#[tokio::test]
async fn rows_the_java_service_wrote_read_back_on_every_route_and_rank_once() {
    let store = fresh_store("java_rows").await;
    let tables = store.tables().clone();
    let product = id("JP-edge-01");
    let (user, spaced_user) = (id("USR-edge01"), id("USR edge 1"));
    let at = |offset: i64| AS_OF_MS - 86_400_000 - offset;

    // Newest first, the product lists: ORD-DOUBLE (reposted at 500), ORD-SURROG,
    // ORD-NULLCT, ORD-SAMEMS, then ORD-OTHER1..4.
    let surrogate = r#""a truncated emoji at the very end of a long review \uD83D""#;
    java_post(&store, &id("ORD-SURROG"), &product, &user, surrogate, 52, at(1_000)).await;
    java_post(&store, &id("ORD-NULLCT"), &product, &user, "null", 0, at(2_000)).await;
    // Posted twice: the second post overwrites the comment row; the first
    // post's index rows (at 3_000) still point at it.
    java_post(&store, &id("ORD-DOUBLE"), &product, &user, r#""the first wording of this review""#, 33, at(3_000)).await;
    java_post(&store, &id("ORD-DOUBLE"), &product, &user, r#""the second and final wording of it""#, 35, at(500)).await;
    // Posted twice within one millisecond: two neighbouring product index rows
    // (lengths 30 and 31), one user index row.
    java_post(&store, &id("ORD-SAMEMS"), &product, &user, r#""same millisecond, first text 1""#, 31, at(4_000)).await;
    java_post(&store, &id("ORD-SAMEMS"), &product, &user, r#""same millisecond, text two 2""#, 30, at(4_000)).await;
    for n in 1..=4 {
        let content = format!(r#""an ordinary review number {n} with enough words to rank""#);
        java_post(&store, &id(&format!("ORD-OTHER{n}")), &product, &spaced_user, &content, 52, at(5_000 + n)).await;
    }
    // A product whose ten Hangul characters the Java service stored as a 30-byte key.
    let hangul_key = [
        "가나다라마바사아자차".as_bytes(),
        &keys::product_comment_key(&product, at(1), 9, &CommentKey::new(&id("ORD-HANGUL"), &product))[10..23],
    ]
    .concat();
    put_value(&store, &tables.product_comment, hangul_key, b"not a 20-byte comment key".to_vec()).await;

    let expected_product = [
        "ORD-DOUBLE",
        "ORD-SURROG",
        "ORD-NULLCT",
        "ORD-SAMEMS",
        "ORD-OTHER1",
        "ORD-OTHER2",
        "ORD-OTHER3",
        "ORD-OTHER4",
    ];
    let expected_user = ["ORD-DOUBLE", "ORD-SURROG", "ORD-NULLCT", "ORD-SAMEMS"];
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    // Every page size, so that the stale row, the same-millisecond pair and
    // the lone surrogate each fall on and across page boundaries.
    for limit in 1..=9 {
        for (path, expected) in [
            ("/v1/products/JP-edge-01/comments", &expected_product[..]),
            ("/v1/products/JP%2Dedge%2D01/comments", &expected_product[..]),
            ("/v1/users/USR-edge01/comments", &expected_user[..]),
        ] {
            let shown = service.walk_v1(path, limit).await;
            assert_eq!(orders(&shown), expected, "{path}, limit {limit}");
        }
        let seed = service.walk_seed("/product/JP-edge-01/comments/latest", "/product/comments/get", limit).await;
        assert_eq!(orders(&seed), expected_product, "seed product route, limit {limit}");
        let seed = service.walk_seed("/user/USR-edge01/comments/latest", "/user/comments/get", limit).await;
        assert_eq!(orders(&seed), expected_user, "seed user route, limit {limit}");
    }
    let spaced = service.walk_v1("/v1/users/USR%20edge%201/comments", 20).await;
    assert_eq!(orders(&spaced), ["ORD-OTHER1", "ORD-OTHER2", "ORD-OTHER3", "ORD-OTHER4"]);
    for refused in ["/v1/products/JP%2Fedge-01/comments", "/v1/products/%EA%B0%80%EB%82%98%EB%8B%A4%EB%9D%BC%EB%A7%88%EB%B0%94%EC%82%AC%EC%95%84%EC%9E%90%EC%B0%A8/comments"] {
        let answer = service.get(refused).await;
        assert_eq!((answer.status, answer.body["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_id")));
    }

    // What each route answers for the lone surrogate, the null and the double post.
    let v1 = service.walk_v1("/v1/products/JP-edge-01/comments", 20).await;
    let seed = service.walk_seed("/product/JP-edge-01/comments/latest", "/product/comments/get", 20).await;
    for shown in [&v1, &seed] {
        assert_eq!(shown[1]["content"], "a truncated emoji at the very end of a long review \u{FFFD}");
        assert_eq!(shown[2]["content"], Value::Null, "null is answered as stored");
        assert_eq!(shown[0]["content"], "the second and final wording of it");
        assert_eq!(shown[3]["content"], "same millisecond, text two 2");
        assert_eq!(shown[1]["rowKey"], STANDARD.encode(CommentKey::new(&id("ORD-SURROG"), &product).as_bytes()));
    }
    // Reading did not rewrite the row.
    let stored = store.comments_of(&store.user_comment_page(&user, None, 20).await.expect("page")).await.expect("read");
    assert_eq!(stored.len(), 4);
    let raw = raw_rows(&store, &tables.comment).await;
    let surrogate_row = raw.iter().find(|row| row.key.starts_with(b"ORD-SURROG")).expect("the row");
    assert!(String::from_utf8_lossy(surrogate_row.value(b"cf:q").expect("cf:q")).contains(r"\uD83D"));

    // The ranker: every product with a readable id is ranked; the null comment
    // is not eligible; the double-posted comment takes one slot at most; the
    // Hangul key is skipped and counted by its reason.
    let report = ranker::run(&store, &ranker::RunOptions::new(ranker::Scope::All, AS_OF_MS), CancellationToken::new())
        .await
        .expect("rank");
    println!(
        "ranker over the Java rows: {} products, {} comments scored, {} skipped rows",
        report.products_ranked, report.comments_scored, report.skipped_rows
    );
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.products_ranked, 1);
    // Eight distinct comments: the stale index row of the double post is
    // skipped, and the same-millisecond pair names one comment, scored (and
    // counted in the product's review summary) once.
    assert_eq!(report.comments_scored, 8);
    assert_eq!(report.skipped_rows, 1, "the double post's stale index row");
    let slots = store.rank_slots(&product).await.expect("slots");
    let mut ranked: Vec<String> = slots.iter().map(|slot| slot.comment.order_id().to_string()).collect();
    println!("ranked: {ranked:?}");
    assert!(!ranked.contains(&"ORD-NULLCT".to_owned()), "null content is not eligible");
    ranked.sort();
    let before = ranked.len();
    ranked.dedup();
    assert_eq!(ranked.len(), before, "one slot per comment");
    // One pick per author: USR-edge01's best, and one of USR edge 1's.
    assert_eq!(ranked.len(), 2);
    let metrics = service.metrics().await;
    assert!(
        metric(&metrics, "reviews_skipped_rows_total", &[("table", "product-comment"), ("reason", "multibyte_id")]) > 0,
        "the 30-byte Hangul key is counted as multibyte_id"
    );
    assert!(metric(&metrics, "reviews_lossy_json_rows_total", &[("kind", "comment")]) > 0);

    for path in ["/v1/products/JP-edge-01/comments/ranked", "/product/JP-edge-01/comments/ranked"] {
        let answer = service.get(path).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        let shown: Vec<String> = orders(answer.body["comments"].as_array().expect("comments"));
        assert_eq!(shown, slots.iter().map(|slot| slot.comment.order_id().to_string()).collect::<Vec<_>>(), "{path}");
    }

    // `explain` (the `--product` path of the ranker) takes the Java id and
    // shows the same picks; a null content is shown as null, never as text.
    let explanation =
        ranker::explain(&store, &product, AS_OF_MS, &ranker::ScoringConfig::default(), 3).await.expect("explain");
    let explained: Vec<String> = explanation.ranked.iter().map(|pick| pick.summary.comment[..10].to_owned()).collect();
    assert_eq!(explained, slots.iter().map(|slot| slot.comment.order_id().to_string()).collect::<Vec<_>>());
    let left_out = |order: &str| {
        explanation.left_out.iter().filter(|left| left.summary.comment.starts_with(order)).collect::<Vec<_>>()
    };
    let null_content = left_out("ORD-NULLCT");
    assert_eq!(null_content.len(), 1, "the null comment is left out as too short");
    assert_eq!(null_content[0].summary.content_preview, None);
    assert!(left_out("ORD-SAMEMS").len() <= 1 && left_out("ORD-DOUBLE").len() <= 1, "each comment is explained once");
    println!("{}", ranker::console::explanation(&explanation));

    // Editing the lone-surrogate comment rewrites it and keeps every other field.
    let edited = store.edit_comment(&id("ORD-SURROG"), &product, "now whole: 😀".to_owned()).await.expect("edit");
    assert_eq!(edited.content.as_deref(), Some("now whole: 😀"));
    let raw = raw_rows(&store, &tables.comment).await;
    let rewritten: Value = serde_json::from_slice(
        raw.iter().find(|row| row.key.starts_with(b"ORD-SURROG")).and_then(|row| row.value(b"cf:q")).expect("cf:q"),
    )
    .expect("valid JSON now");
    assert_eq!(rewritten["rowKey"], STANDARD.encode(CommentKey::new(&id("ORD-SURROG"), &product).as_bytes()));
    assert_eq!(rewritten["edited"], true);
    assert_eq!(rewritten["userId"], "USR-edge01");
    let _: Comment = serde_json::from_value(rewritten).expect("a comment");

    service.shut_down().await;
    drop_tables(&[&store]).await;
}

/// Runs `reviews-admin index <verb>` over `store`'s tables: its exit code and
/// the JSON report on its last line.
fn admin_index(store: &Store, verb: &[&str]) -> (i32, Value) {
    let output = std::process::Command::new(integration_tests::cargo_binary("reviews-admin"))
        .arg("index")
        .args(verb)
        .args(["--page-rows", "2", "--json", "--thrift-addr", &integration_tests::thrift_addr()])
        .args(["--table-prefix", &store.tables().prefix])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run reviews-admin");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("reviews-admin index {}:\n{stdout}{}", verb.join(" "), String::from_utf8_lossy(&output.stderr));
    let report = serde_json::from_str(stdout.lines().last().expect("a report")).expect("the JSON report");
    (output.status.code().expect("an exit code"), report)
}

async fn row_count(store: &Store, table: &str) -> usize {
    raw_rows(store, table).await.len()
}

#[tokio::test]
async fn index_rows_the_java_service_lost_to_same_millisecond_collisions_are_found_and_repaired() {
    let store = fresh_store("java_index_repair").await;
    let tables = store.tables().clone();
    let (product, other_product) = (id("JP-edge-01"), id("PRODUCT002"));
    let (user, other_user) = (id("USR-edge01"), id("USER000002"));
    let at = AS_OF_MS - 86_400_000;
    // One user, two products, one millisecond: the second post's user-comment
    // row (18 bytes, no tie) replaced the first's.
    java_post(&store, &id("ORDER00001"), &product, &user, r#""first of two in one millisecond""#, 32, at).await;
    java_post(&store, &id("ORDER00002"), &other_product, &user, r#""second of two in one millisecond""#, 33, at).await;
    // One product, two users, one millisecond, equal content length: the
    // product-comment row (23 bytes) was replaced.
    java_post(&store, &id("ORDER00003"), &product, &other_user, r#""equal length text A""#, 19, at - 7).await;
    java_post(&store, &id("ORDER00004"), &product, &id("USER000003"), r#""equal length text B""#, 19, at - 7).await;
    // Intact rows, one whose Java length (a lone surrogate counted as one byte)
    // is not what this code computes, and a comment row that does not decode.
    java_post(&store, &id("ORDER00005"), &product, &other_user, r#""cut \uD83D""#, 5, at - 100).await;
    java_post(&store, &id("ORDER00006"), &other_product, &other_user, "null", 0, at - 200).await;
    put_value(&store, &tables.comment, b"ORDER00007PRODUCT002".to_vec(), b"{truncated".to_vec()).await;
    let before = (row_count(&store, &tables.user_comment).await, row_count(&store, &tables.product_comment).await);

    let (code, report) = admin_index(&store, &["check"]);
    assert_eq!(code, 1, "check fails while rows are missing");
    assert_eq!(
        (report["comments_scanned"].as_u64(), report["comments_skipped"].as_u64()),
        (Some(7), Some(1)),
        "{report}"
    );
    assert_eq!((report["missing_user_index"].as_u64(), report["missing_product_index"].as_u64()), (Some(1), Some(1)));
    assert_eq!(
        report["first_missing"],
        json!([{"comment": "ORDER00001JP-edge-01", "index": "user-comment"},
               {"comment": "ORDER00003JP-edge-01", "index": "product-comment"}])
    );
    let (code, report) = admin_index(&store, &["repair", "--dry-run"]);
    assert_eq!((code, report["index_rows_written"].as_u64()), (0, Some(0)));
    let unchanged = (row_count(&store, &tables.user_comment).await, row_count(&store, &tables.product_comment).await);
    assert_eq!(unchanged, before, "check and --dry-run write nothing");

    let (code, report) = admin_index(&store, &["repair"]);
    assert_eq!((code, report["index_rows_written"].as_u64()), (0, Some(2)), "{report}");
    let (code, report) = admin_index(&store, &["check"]);
    assert_eq!(
        (code, report["missing_user_index"].as_u64(), report["missing_product_index"].as_u64()),
        (0, Some(0), Some(0))
    );
    let (_, report) = admin_index(&store, &["repair"]);
    assert_eq!(report["index_rows_written"].as_u64(), Some(0), "a second repair has nothing to do");

    // Both lists show every comment again, the repaired ones at their own time.
    let service = TestApp::spawn(store.clone(), uncached_settings()).await;
    let of_user = service.walk_v1("/v1/users/USR-edge01/comments", 1).await;
    let mut shown = orders(&of_user);
    shown.sort();
    assert_eq!(shown, ["ORDER00001", "ORDER00002"]);
    let of_product = service.walk_v1("/v1/products/JP-edge-01/comments", 1).await;
    // At one millisecond, the Java row (23 bytes) sorts before the repaired one (its tie appended).
    assert_eq!(orders(&of_product), ["ORDER00001", "ORDER00004", "ORDER00003", "ORDER00005"]);
    service.shut_down().await;
    drop_tables(&[&store]).await;
}
