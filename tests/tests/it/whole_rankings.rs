//! A reader sees one whole ranking while the ranker rewrites it: never a
//! comment twice, never slots of two rankings. Rankings of ten and of four
//! comments take turns while readers poll, at the store and through HTTP.
//!
//! HBase's Thrift1 handler applies a `mutateRows` call's puts before its
//! deletes, so a reader of the slots alone saw a shorter ranking's slots beside
//! the longer one's last slots (issue: 4.2 % of answers held a comment twice).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::keys::CommentKey;
use common::store::Store;
use common::Id;
use integration_tests::app::{uncached_settings, TestApp};
use integration_tests::fixtures::{new_comment, post_all, put_orders, write_ranking};
use integration_tests::{fresh_store, test_id};
use query_api::Settings;
use reqwest::StatusCode;

use crate::rows::drop_tables;

/// How many times the two rankings replace each other in one test.
const REWRITES: usize = 150;
/// Readers polling at once.
const READERS: usize = 4;

/// The two rankings that take turns: ten comments, and four of them in
/// another order, so that slots of both seen at once repeat a comment.
struct Rankings {
    product: Id,
    long: Vec<(CommentKey, f64)>,
    short: Vec<(CommentKey, f64)>,
}

impl Rankings {
    async fn post(store: &Store) -> Rankings {
        let product = test_id("W", 1);
        let orders: Vec<(Id, Id)> = (0..10).map(|n| (test_id("WO", n), test_id("WU", n))).collect();
        put_orders(store, &orders).await;
        let comments = orders
            .iter()
            .zip(0_i64..)
            .map(|((order, user), n)| {
                new_comment(order, &product, user, format!("whole ranking review {n}"), 1_700_000_000_000 + n)
            })
            .collect();
        let keys: Vec<CommentKey> = post_all(store, comments).await.iter().map(|comment| comment.row_key()).collect();
        let long = keys.iter().map(|key| (*key, 0.5)).collect();
        let short = keys.iter().rev().take(4).map(|key| (*key, 0.9)).collect();
        Rankings { product, long, short }
    }

    /// Whether `shown` is exactly one of the two rankings.
    fn is_one_whole_ranking(&self, shown: &[CommentKey]) -> bool {
        let keys = |ranking: &[(CommentKey, f64)]| ranking.iter().map(|(key, _)| *key).collect::<Vec<_>>();
        shown == keys(&self.long) || shown == keys(&self.short)
    }

    /// Writes the two rankings in turn, [`REWRITES`] times, then says it is done.
    async fn rewrite(self: Arc<Self>, store: Store, done: Arc<AtomicBool>) {
        for turn in 0..REWRITES {
            let ranking = if turn % 2 == 0 { &self.short } else { &self.long };
            write_ranking(&store, &self.product, ranking).await;
        }
        done.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_store_reader_sees_one_whole_ranking_while_rankings_of_other_lengths_replace_it() {
    let store = fresh_store("whole_store").await;
    let rankings = Arc::new(Rankings::post(&store).await);
    write_ranking(&store, &rankings.product, &rankings.long).await;
    let done = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(rankings.clone().rewrite(store.clone(), done.clone()));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (reader, rankings, done) = (store.reader(), rankings.clone(), done.clone());
            tokio::spawn(async move {
                let mut reads = 0;
                while !done.load(Ordering::SeqCst) {
                    let ranking = reader.ranking(&rankings.product).await.expect("read the ranking");
                    let shown: Vec<CommentKey> = ranking.slots.iter().map(|slot| slot.comment).collect();
                    assert!(rankings.is_one_whole_ranking(&shown), "read {reads} saw a torn ranking: {shown:?}");
                    assert!(ranking.as_of_ms.is_some(), "read from the ranking record");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    writer.await.expect("writer");
    let mut reads = 0;
    for reader in readers {
        reads += reader.await.expect("a reader saw only whole rankings");
    }
    println!("{reads} store reads during {REWRITES} rewrites, each one whole ranking");
    assert!(reads >= READERS, "the readers read while the rankings were rewritten");
    drop_tables(&[&store]).await;
}

/// Polls `path` until the rewrites are done; checks every answer is one whole
/// ranking and that one `ETag` always names the same answer. Returns the reads.
async fn poll_ranked(
    service: Arc<TestApp>,
    path: String,
    rankings: Arc<Rankings>,
    done: Arc<AtomicBool>,
) -> HashMap<String, Vec<CommentKey>> {
    let mut answers_by_tag: HashMap<String, Vec<CommentKey>> = HashMap::new();
    while !done.load(Ordering::SeqCst) {
        let answer = service.get(&path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.raw);
        let shown = answer.comment_keys();
        assert!(rankings.is_one_whole_ranking(&shown), "{path} answered a torn ranking: {shown:?}");
        let tag = answer.headers["etag"].to_str().expect("an ETag").to_owned();
        let earlier = answers_by_tag.entry(tag.clone()).or_insert_with(|| shown.clone());
        assert_eq!(*earlier, shown, "{path}: the ETag {tag} named two answers");
    }
    answers_by_tag
}

async fn http_readers_see_whole_rankings(test_name: &str, settings: Settings) {
    let store = fresh_store(test_name).await;
    let rankings = Arc::new(Rankings::post(&store).await);
    write_ranking(&store, &rankings.product, &rankings.long).await;
    let service = Arc::new(TestApp::spawn(store.clone(), settings).await);
    let done = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(rankings.clone().rewrite(store.clone(), done.clone()));
    let product = rankings.product;
    let paths = [format!("/v1/products/{product}/comments/ranked"), format!("/product/{product}/comments/ranked")];
    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let path = paths[reader % paths.len()].clone();
            tokio::spawn(poll_ranked(service.clone(), path, rankings.clone(), done.clone()))
        })
        .collect();
    writer.await.expect("writer");
    let mut tags = 0;
    for reader in readers {
        tags += reader.await.expect("every answer was one whole ranking").len();
    }
    println!("{test_name}: {tags} distinct ETags over {REWRITES} rewrites, each naming one whole ranking");
    assert!(tags >= READERS, "every reader was answered");
    Arc::into_inner(service).expect("the readers are done").shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn ranked_routes_answer_one_whole_ranking_while_it_is_rewritten_uncached() {
    http_readers_see_whole_rankings("whole_http_uncached", uncached_settings()).await;
}

#[tokio::test]
async fn ranked_routes_answer_one_whole_ranking_while_it_is_rewritten_cached() {
    // A short TTL, so the cache is filled again many times during the rewrites:
    // a torn ranking it took would be served to every reader until it expired.
    let settings = Settings { ranked_cache_ttl: Duration::from_millis(20), ..Settings::default() };
    http_readers_see_whole_rankings("whole_http_cached", settings).await;
}
