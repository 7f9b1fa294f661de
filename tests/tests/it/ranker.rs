//! The ranker against the real HBase: slots written and cleared, bad rows
//! skipped and counted, determinism to the byte, dry runs, shards, a product
//! with 100,000 comments, explain, failures and interruption.
//!
//! Expected picks are computed with the ranker's pure scoring core
//! (`score_terms` and the exhaustive greedy walk) over the very comments the
//! test wrote, never hard-coded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::hbase::{Hbase, COLUMN_SCORE, COLUMN_VALUE};
use common::keys::{self, CommentKey};
use common::model::{Comment, Extra, Order};
use common::store::products::{ListedProduct, ProductIndex};
use common::store::{NewComment, Store};
use common::tables::Tables;
use common::Id;
use integration_tests::{fresh_store, hbase_config, test_id, thrift_addr, unique_prefix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ranker::score::{is_eligible, score_terms};
use ranker::select::{select_exhaustively, Candidate, MAX_PICKS};
use ranker::{Incremental, LeftOutReason, RankerError, RunOptions, RunReport, Scope, ScoringConfig, Shard};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::rows::{delete_all_rows, put_value, put_values, raw_rows};

const DAY_MS: i64 = 86_400_000;
/// The as-of time of every run: a fixed instant, so expectations are exact.
const AS_OF: i64 = 1_750_000_000_000;

/// Writes comments through the write path, making the orders they need.
struct Seeder {
    store: Store,
    next_order: AtomicU64,
}

/// A comment to write; the seeder picks its order.
#[derive(Debug, Clone)]
struct Draft {
    user: Id,
    content: String,
    age_ms: i64,
    helpful: Option<u64>,
    unhelpful: Option<u64>,
    photos: Option<u32>,
}

fn draft(user: u64, content: &str, age_days: i64) -> Draft {
    Draft {
        user: test_id("U", user),
        content: content.to_owned(),
        age_ms: age_days * DAY_MS,
        helpful: None,
        unhelpful: None,
        photos: None,
    }
}

impl Seeder {
    fn new(store: &Store) -> Seeder {
        Seeder { store: store.clone(), next_order: AtomicU64::new(1) }
    }

    /// Writes `drafts` for `product` in batches of `batch` with `in_flight`
    /// batches at once, and returns the comments as stored.
    async fn post(&self, product: &Id, drafts: Vec<Draft>, batch: usize, in_flight: usize) -> Vec<Comment> {
        let first = self.next_order.fetch_add(drafts.len() as u64, Ordering::Relaxed);
        let news: Vec<NewComment> = drafts
            .into_iter()
            .enumerate()
            .map(|(index, draft)| NewComment {
                order_id: test_id("O", first + index as u64),
                product_id: *product,
                user_id: draft.user,
                content: draft.content,
                timestamp_ms: AS_OF - draft.age_ms,
                rating: None,
                helpful: draft.helpful,
                unhelpful: draft.unhelpful,
                photos: draft.photos,
            })
            .collect();
        let orders: Vec<Order> =
            news.iter().map(|new| Order { id: new.order_id, user_id: new.user_id, extra: Extra::new() }).collect();
        for chunk in orders.chunks(5_000) {
            self.store.put_records(chunk).await.expect("put orders");
        }
        let semaphore = Arc::new(tokio::sync::Semaphore::new(in_flight));
        let mut tasks = tokio::task::JoinSet::new();
        for (index, chunk) in news.chunks(batch).enumerate() {
            let permit = semaphore.clone().acquire_owned().await.expect("semaphore");
            let store = self.store.clone();
            let chunk = chunk.to_vec();
            tasks.spawn(async move {
                let _permit = permit;
                (index, store.post_comments(chunk).await.expect("post comments"))
            });
        }
        let mut written: BTreeMap<usize, Vec<Comment>> = BTreeMap::new();
        while let Some(done) = tasks.join_next().await {
            let (index, comments) = done.expect("post task");
            written.insert(index, comments);
        }
        written.into_values().flatten().collect()
    }
}

/// The picks the pure core makes over `comments`: (row key, score) best first.
fn expected_picks(comments: &[Comment]) -> Vec<(CommentKey, f64)> {
    let config = ScoringConfig::default();
    let candidates: Vec<Candidate> = comments
        .iter()
        .filter_map(|comment| {
            let terms = score_terms(&config, comment, AS_OF);
            is_eligible(&config, &terms).then(|| Candidate::new(comment, &terms))
        })
        .collect();
    select_exhaustively(candidates, MAX_PICKS).picks.iter().map(|pick| (pick.comment, pick.score)).collect()
}

async fn stored_picks(store: &Store, product: &Id) -> Vec<(u16, CommentKey, f64)> {
    store
        .rank_slots(product)
        .await
        .expect("rank slots")
        .into_iter()
        .map(|slot| (slot.rank, slot.comment, slot.score.expect("every slot carries its score")))
        .collect()
}

fn numbered(expected: &[(CommentKey, f64)]) -> Vec<(u16, CommentKey, f64)> {
    expected.iter().zip(1u16..).map(|((comment, score), rank)| (rank, *comment, *score)).collect()
}

fn options(scope: Scope) -> RunOptions {
    let mut options = RunOptions::new(scope, AS_OF);
    options.concurrency = 4;
    options.retry_backoff = Duration::from_millis(20);
    options
}

async fn run(store: &Store, options: &RunOptions) -> RunReport {
    ranker::run(store, options, CancellationToken::new()).await.expect("run")
}

/// Varied comments: some long, some short, votes and photos, a few repeated texts.
fn varied_drafts(rng: &mut StdRng, count: usize, users: u64) -> Vec<Draft> {
    const PHRASES: [&str; 8] = [
        "Great product, works exactly as described",
        "배송이 빨라요. 품질도 좋고 가격도 괜찮습니다",
        "ok",
        "Battery life is shorter than advertised, but the screen is lovely",
        "좋아요",
        "Would buy again, my kids love it",
        "The stitching came apart after two weeks of normal use",
        "Decent value for the money; packaging was damaged though",
    ];
    (0..count)
        .map(|_| {
            let phrase = PHRASES[rng.random_range(0..PHRASES.len())];
            let content = if rng.random_bool(0.3) {
                // Repeated texts with different case and spacing: duplicates after normalising.
                if rng.random_bool(0.5) {
                    phrase.to_uppercase()
                } else {
                    format!("  {}  ", phrase.replace(' ', "   "))
                }
            } else {
                let extra = rng.random_range(0..40);
                format!("{phrase} {}", "and more detail ".repeat(extra))
                    + &rng.random_range(0..1_000_000u32).to_string()
            };
            let mut draft = draft(rng.random_range(1..=users), &content, rng.random_range(0..900));
            draft.age_ms += rng.random_range(0..DAY_MS);
            draft.helpful = rng.random_bool(0.6).then(|| rng.random_range(0..300));
            draft.unhelpful = rng.random_bool(0.5).then(|| rng.random_range(0..100));
            draft.photos = rng.random_bool(0.3).then(|| rng.random_range(0..6));
            draft
        })
        .collect()
}

#[tokio::test]
async fn a_product_with_fewer_than_ten_eligible_comments_fills_only_their_slots() {
    let store = fresh_store("rank_few").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 1);
    let mut best = draft(1, "Excellent sound, the bass is deep and clear.", 3);
    best.helpful = Some(40);
    best.photos = Some(2);
    let drafts = vec![
        best,
        draft(2, "excellent   SOUND, the bass is deep and clear.", 1), // duplicate of the best after normalising
        draft(1, "The same author again, a long and thoughtful second review.", 2), // same user as the best
        draft(3, "too short", 0),                                      // 9 characters
        draft(4, "   tiny       ", 0),
        draft(5, "Arrived on time and works fine.", 30),
        draft(6, "Not worth the price, it broke within a month.", 400),
        draft(7, "ten chars!", 10), // exactly the minimum
    ];
    let comments = seeder.post(&product, drafts, 100, 1).await;
    let expected = expected_picks(&comments);
    assert_eq!(expected.len(), 4, "best, two plain ones and the minimum-length one");

    let report = run(&store, &options(Scope::Product(product))).await;
    assert_eq!(stored_picks(&store, &product).await, numbered(&expected));
    assert_eq!(expected[0].0, comments[0].row_key());
    assert_eq!((report.products_ranked, report.comments_scored), (1, 8));
    assert_eq!((report.slots_written, report.slots_deleted, report.skipped_rows), (4, 0, 0));
    assert!(report.failures.is_empty() && !report.interrupted && !report.dry_run);
    let mut slot_rows = raw_rows(&store, &store.tables().product_comment_rank).await;
    let record = slot_rows.pop().expect("the ranking record");
    assert_eq!(record.key, keys::ranking_record_key(&product), "the record sorts after the slots");
    let slot_keys: Vec<Vec<u8>> = slot_rows.iter().map(|row| row.key.clone()).collect();
    assert_eq!(slot_keys, (1..=4).map(|rank| keys::rank_key(&product, rank)).collect::<Vec<_>>());
    for (row, (comment, score)) in slot_rows.iter().zip(&expected) {
        assert_eq!(row.value(COLUMN_VALUE), Some(comment.as_bytes().as_slice()));
        assert_eq!(row.value(COLUMN_SCORE), Some(score.to_be_bytes().as_slice()), "cf:s is the big-endian f64");
    }
}

#[tokio::test]
async fn stale_slots_are_removed_when_comments_go_away() {
    let store = fresh_store("rank_stale").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 2);
    let drafts =
        (1..=12).map(|n| draft(n, &format!("Review number {n} with enough text to count"), n as i64)).collect();
    let comments = seeder.post(&product, drafts, 100, 1).await;
    let first = run(&store, &options(Scope::All)).await;
    assert_eq!((first.products_ranked, first.slots_written, first.slots_deleted), (1, 10, 0));
    assert_eq!(stored_picks(&store, &product).await, numbered(&expected_picks(&comments)));

    for comment in &comments[..9] {
        store.delete_comment(&comment.order_id, &product).await.expect("delete comment");
    }
    let second = run(&store, &options(Scope::All)).await;
    assert_eq!(stored_picks(&store, &product).await, numbered(&expected_picks(&comments[9..])));
    assert_eq!((second.slots_written, second.slots_deleted), (3, 7));

    for comment in &comments[9..] {
        store.delete_comment(&comment.order_id, &product).await.expect("delete comment");
    }
    // The product has no comments left, only slots: discovery must still find it.
    let third = run(&store, &options(Scope::All)).await;
    assert_eq!((third.products_ranked, third.slots_written, third.slots_deleted), (1, 0, 3));
    assert!(store.rank_slots(&product).await.expect("slots").is_empty());
    // What is left is the ranking record of an empty ranking: the product has
    // been ranked, and has nothing to show.
    let left: Vec<Vec<u8>> =
        raw_rows(&store, &store.tables().product_comment_rank).await.into_iter().map(|row| row.key).collect();
    assert_eq!(left, [keys::ranking_record_key(&product)]);
    let ranking = store.ranking(&product).await.expect("ranking");
    assert_eq!((ranking.slots.len(), ranking.as_of_ms), (0, Some(AS_OF)));
}

#[tokio::test]
async fn dangling_index_rows_and_corrupt_json_are_skipped_and_counted() {
    let store = fresh_store("rank_bad_rows").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 3);
    let drafts = (1..=6).map(|n| draft(n, &format!("A perfectly ordinary review, number {n}"), n as i64)).collect();
    let comments = seeder.post(&product, drafts, 100, 1).await;
    let tables = store.tables().clone();

    // An index row whose comment was never written.
    let ghost = CommentKey::new(&test_id("O", 999), &product);
    put_value(
        &store,
        &tables.product_comment,
        keys::product_comment_key(&product, AS_OF, 40, &ghost),
        ghost.as_bytes().to_vec(),
    )
    .await;
    // A comment whose JSON is corrupt.
    put_value(&store, &tables.comment, comments[0].row_key().as_bytes().to_vec(), b"{\"orderId\": truncated".to_vec())
        .await;
    // An index row with a key of the wrong length, and one whose value is not a comment key.
    let mut short_key = keys::product_comment_prefix(&product);
    short_key.extend_from_slice(b"12345");
    put_value(&store, &tables.product_comment, short_key, ghost.as_bytes().to_vec()).await;
    let other = CommentKey::new(&test_id("O", 998), &product);
    put_value(
        &store,
        &tables.product_comment,
        keys::product_comment_key(&product, AS_OF - 5, 3, &other),
        b"garbage".to_vec(),
    )
    .await;

    let report = run(&store, &options(Scope::All)).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.skipped_rows, 4, "ghost comment, corrupt JSON, short key, bad value");
    assert_eq!(report.comments_scored, 5);
    assert_eq!(stored_picks(&store, &product).await, numbered(&expected_picks(&comments[1..])));
}

#[tokio::test]
async fn the_same_as_of_twice_gives_identical_bytes() {
    let store = fresh_store("rank_deterministic").await;
    let seeder = Seeder::new(&store);
    let mut rng = StdRng::seed_from_u64(7);
    for number in 1..=6 {
        let drafts = varied_drafts(&mut rng, 60, 25);
        seeder.post(&test_id("P", number), drafts, 500, 2).await;
    }
    let table = store.tables().product_comment_rank.clone();
    let first_report = run(&store, &options(Scope::All)).await;
    let first = raw_rows(&store, &table).await;
    assert_eq!(first_report.products_ranked, 6);
    assert_eq!(first.len(), 66, "six products, ten slots and a ranking record each");
    let slots = first.iter().filter(|row| !keys::is_ranking_record_key(&row.key));
    assert!(slots.clone().all(|row| row.value(COLUMN_SCORE).is_some_and(|score| score.len() == 8)));
    assert_eq!(slots.count(), 60);

    delete_all_rows(&store, &store.tables().product_comment_rank).await;
    let mut concurrent = options(Scope::All);
    concurrent.concurrency = 1;
    concurrent.page_rows = 7;
    run(&store, &concurrent).await;
    assert_eq!(raw_rows(&store, &table).await, first, "other pacing, same bytes");

    let mut later = options(Scope::All);
    later.as_of_ms = AS_OF + 400 * DAY_MS;
    run(&store, &later).await;
    assert_ne!(raw_rows(&store, &table).await, first, "a later as-of changes the recency term");
}

#[tokio::test]
async fn a_dry_run_writes_nothing() {
    let store = fresh_store("rank_dry").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 4);
    let drafts = (1..=15).map(|n| draft(n, &format!("Dry run review {n}, long enough"), n as i64)).collect();
    seeder.post(&product, drafts, 100, 1).await;
    // A stale slot from an earlier run on a product with no comments.
    let gone = test_id("P", 5);
    let stale = CommentKey::new(&test_id("O", 777), &gone);
    put_value(&store, &store.tables().product_comment_rank, keys::rank_key(&gone, 1), stale.as_bytes().to_vec()).await;
    let before = raw_rows(&store, &store.tables().product_comment_rank).await;

    let mut dry = options(Scope::All);
    dry.dry_run = true;
    let report = run(&store, &dry).await;
    assert!(report.dry_run);
    assert_eq!((report.products_ranked, report.comments_scored), (2, 15));
    assert_eq!((report.slots_written, report.slots_deleted), (10, 1), "what a real run would do");
    assert_eq!(raw_rows(&store, &store.tables().product_comment_rank).await, before);
}

/// The names of the spans that have closed, as a subscriber sees them.
#[derive(Clone, Default)]
struct ClosedSpans(Arc<Mutex<Vec<&'static str>>>);

impl<S> tracing_subscriber::Layer<S> for ClosedSpans
where
    S: tracing::Subscriber + for<'lookup> tracing_subscriber::registry::LookupSpan<'lookup>,
{
    fn on_close(&self, id: tracing::span::Id, context: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = context.span(&id) {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push(span.name());
        }
    }
}

/// A run returns only once the tasks it started are done, its slot writer
/// among them. Each holds the span it was started under (with an export, the
/// pass's, under the command's root), and a span is exported only once
/// closed: a writer still alive when the binary flushed its last spans took
/// the trace's root with it. On this current-thread runtime a task left
/// behind has had no chance to end when `run` returns, so the caller's span
/// would still be open.
#[tokio::test]
async fn a_run_returns_only_once_its_tasks_have_ended_and_let_go_of_its_span() {
    let store = fresh_store("rank_tasks").await;
    let product = test_id("P", 6);
    let drafts = (1..=3).map(|n| draft(n, &format!("A review of a run's tasks {n}, long enough"), n as i64)).collect();
    Seeder::new(&store).post(&product, drafts, 100, 1).await;
    let closed = ClosedSpans::default();
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(closed.clone()));

    let report = run(&store, &options(Scope::Product(product))).instrument(tracing::info_span!("caller")).await;

    assert_eq!(report.slots_written, 3);
    let closed = closed.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(closed.contains(&"caller"), "a task of the run still holds the caller's span; closed: {closed:?}");
}

/// The same when the run fails before its first product, its writer
/// started: here an incremental run's search for what changed, on tables
/// that were never created. (A full run's listing fails product by
/// product instead, and returns its report.)
#[tokio::test]
async fn a_run_that_fails_before_its_first_product_returns_only_once_its_tasks_have_ended() {
    let tables = Tables::with_prefix(&unique_prefix("rank_no_tables")).expect("a valid prefix");
    let store = Store::new(Hbase::new(hbase_config(&thrift_addr())), tables);
    let closed = ClosedSpans::default();
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(closed.clone()));
    let mut incremental = options(Scope::All);
    incremental.incremental = Some(Incremental {
        since_ms: AS_OF - DAY_MS,
        refresh_days: None,
        refreshed_until_ms: None,
        check_all_slots: false,
    });

    let outcome =
        ranker::run(&store, &incremental, CancellationToken::new()).instrument(tracing::info_span!("caller")).await;

    // Storage: the run got past its options and started its writer.
    assert!(matches!(outcome, Err(RankerError::Storage(_))), "no table to search for changes: {outcome:?}");
    let closed = closed.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(closed.contains(&"caller"), "a task of the run still holds the caller's span; closed: {closed:?}");
}

#[tokio::test]
async fn shards_cover_every_product_exactly_once() {
    let store = fresh_store("rank_shards").await;
    let seeder = Seeder::new(&store);
    let mut rng = StdRng::seed_from_u64(11);
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut products: Vec<Id> = Vec::new();
    while products.len() < 40 {
        let text: String = (0..10).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
        let product = Id::parse("id", &text).expect("id");
        if !products.contains(&product) {
            products.push(product);
        }
    }
    for product in &products[..36] {
        let count = rng.random_range(1..4);
        let drafts = varied_drafts(&mut rng, count, 10);
        seeder.post(product, drafts, 100, 1).await;
    }
    // Four products have only slots left (their comments are gone).
    for product in &products[36..] {
        let stale = CommentKey::new(&test_id("O", 5_000), product);
        put_value(&store, &store.tables().product_comment_rank, keys::rank_key(product, 1), stale.as_bytes().to_vec())
            .await;
    }

    let count = 5;
    let (plan, _) = ranker::shard_plan::agree_on_plan(&store, "rank-shards", count, true).await.expect("plan");
    let mut ranked = 0;
    for index in 0..count {
        let shard = Shard::new(index, count).expect("shard");
        let range = plan.range(shard).expect("range");
        let report = run(&store, &options(Scope::Shard { shard, range: range.clone() })).await;
        let in_range = products.iter().filter(|product| range.contains(product.as_bytes())).count();
        assert_eq!(report.products_ranked, in_range as u64, "shard {shard}");
        ranked += report.products_ranked;
    }
    assert_eq!(ranked, products.len() as u64, "every product once");
    for product in &products[36..] {
        assert!(store.rank_slots(product).await.expect("slots").is_empty(), "stale slots of {product} cleared");
    }
    // Together the shards wrote exactly what one unsharded run writes: it
    // finds nothing to change.
    let table = store.tables().product_comment_rank.clone();
    let sharded = raw_rows(&store, &table).await;
    assert!(!sharded.is_empty());
    let whole = run(&store, &options(Scope::All)).await;
    assert_eq!(whole.products_ranked, 40, "the slot-only products keep the record of an empty ranking");
    assert_eq!(raw_rows(&store, &table).await, sharded);
}

#[tokio::test]
async fn a_product_with_a_hundred_thousand_comments_ranks_exactly() {
    let store = fresh_store("rank_hot").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 6);
    let mut rng = StdRng::seed_from_u64(2024);
    // 2,000 authors for 100,000 comments: authors repeat and texts repeat,
    // so the duplicate and one-per-user rules matter at this scale too.
    let drafts = varied_drafts(&mut rng, 100_000, 2_000);
    let comments = seeder.post(&product, drafts, 2_000, 4).await;
    assert_eq!(comments.len(), 100_000);
    let expected = expected_picks(&comments);
    assert_eq!(expected.len(), 10);

    let report = run(&store, &options(Scope::Product(product))).await;
    assert_eq!((report.comments_scored, report.skipped_rows, report.slots_written), (100_000, 0, 10));
    let stored = stored_picks(&store, &product).await;
    assert_eq!(stored.len(), 10);
    for ((rank, comment, score), (expected_comment, expected_score)) in stored.iter().zip(&expected) {
        assert_eq!(comment, expected_comment, "rank {rank}");
        assert_eq!(score.to_bits(), expected_score.to_bits(), "rank {rank}: the score is bit-identical");
    }
}

#[tokio::test]
async fn explain_shows_every_term_and_why_comments_were_left_out() {
    let store = fresh_store("rank_explain").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 7);
    let mut short = draft(9, "Superb!", 0);
    short.helpful = Some(500);
    short.photos = Some(3);
    let mut first = draft(1, "Solid build quality and fast shipping.", 1);
    first.helpful = Some(50);
    let drafts = vec![
        first,
        draft(2, "SOLID build quality   and fast shipping.", 2),
        draft(1, "Second thoughts from the first reviewer, still happy.", 3),
        short,
    ];
    let comments = seeder.post(&product, drafts, 100, 1).await;
    let explanation =
        ranker::explain(&store, &product, AS_OF, &ScoringConfig::default(), 1_000).await.expect("explain");

    assert_eq!(explanation.comments_scored, 4);
    assert_eq!(explanation.ranked.len(), 1);
    let pick = &explanation.ranked[0];
    assert_eq!(pick.summary.comment, comments[0].row_key().to_string());
    let terms = pick.summary.terms;
    let weights = ScoringConfig::default().weights;
    let sum = weights.substance * terms.substance
        + weights.helpfulness * terms.helpfulness
        + weights.recency * terms.recency
        + weights.photo * terms.photo;
    assert_eq!(sum.to_bits(), terms.score.to_bits());
    let reasons: Vec<(String, LeftOutReason)> =
        explanation.left_out.iter().map(|left| (left.summary.comment.clone(), left.reason)).collect();
    assert!(reasons.contains(&(comments[1].row_key().to_string(), LeftOutReason::DuplicateContent { rank: 1 })));
    assert!(reasons.contains(&(comments[2].row_key().to_string(), LeftOutReason::SameUser { rank: 1 })));
    assert!(reasons.contains(&(comments[3].row_key().to_string(), LeftOutReason::TooShort { chars: 7, min_chars: 10 })));
    assert!(store.rank_slots(&product).await.expect("slots").is_empty(), "explain writes nothing");
}

#[tokio::test]
async fn a_failing_product_is_retried_then_reported_and_a_stopped_run_starts_nothing() {
    let store = fresh_store("rank_failures").await;
    let seeder = Seeder::new(&store);
    let product = test_id("P", 8);
    seeder.post(&product, vec![draft(1, "A review that will never be ranked.", 1)], 10, 1).await;

    // A store whose tables do not exist: every attempt fails.
    let missing =
        Store::new(store.hbase().clone(), common::tables::Tables::with_prefix("t_missing_ranker_").expect("prefix"));
    let mut failing = options(Scope::Product(product));
    failing.product_attempts = 2;
    let report = run(&missing, &failing).await;
    assert_eq!(report.products_ranked, 0);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].product, product.to_string());

    let stop = CancellationToken::new();
    stop.cancel();
    let report = ranker::run(&store, &options(Scope::All), stop).await.expect("run");
    assert!(report.interrupted);
    assert_eq!(report.products_ranked, 0);
    assert!(store.rank_slots(&product).await.expect("slots").is_empty());
}

#[tokio::test]
async fn a_listing_hands_over_the_whole_index_of_every_product_smaller_than_its_page() {
    let store = fresh_store("rank_whole_index").await;
    let table = store.tables().product_comment.clone();
    // Index rows only (listing reads no comment): products of 3, 2, 300, 5 and
    // 2 rows, the last with a bad value, plus a row that starts with the fourth
    // product's id but lies outside its index prefix. With four-row pages the
    // second product straddles the first page's end.
    let sizes: [(u64, u64); 5] = [(1, 3), (2, 2), (3, 300), (4, 5), (5, 2)];
    let mut rows = Vec::new();
    for (product_number, size) in sizes {
        let product = test_id("P", product_number);
        for n in 0..size {
            let comment = CommentKey::new(&test_id("O", product_number * 1_000 + n), &product);
            let key = keys::product_comment_key(&product, AS_OF - n as i64, 10, &comment);
            rows.push((key, comment.as_bytes().to_vec()));
        }
    }
    rows.last_mut().expect("rows").1 = b"not a comment key".to_vec();
    let mut outside = test_id("P", 4).as_bytes().to_vec();
    outside.push(0);
    rows.push((outside, b"outside the prefix".to_vec()));
    put_values(&store, &table, rows).await;

    for page_rows in [4, 256] {
        let mut listed: Vec<ListedProduct> = Vec::new();
        let mut start = Vec::new();
        loop {
            let listing =
                store.list_products(ProductIndex::Comments, start, None, page_rows).await.expect("list products");
            listed.extend(listing.products);
            match listing.next {
                Some(next) => start = next,
                None => break,
            }
        }
        let products: Vec<Id> = listed.iter().map(|listed| listed.product).collect();
        assert_eq!(
            products,
            (1..=5).map(|n| test_id("P", n)).collect::<Vec<_>>(),
            "each once, in order, rows {page_rows}"
        );
        for listed in &listed {
            let whole_expected = sizes
                .iter()
                .any(|&(number, size)| test_id("P", number) == listed.product && (size as usize) < page_rows);
            let Some(whole) = &listed.whole_index else {
                assert!(!whole_expected, "{} should come whole with rows {page_rows}", listed.product);
                continue;
            };
            assert!(whole_expected, "{} is not smaller than a page of {page_rows}", listed.product);
            let read = store.product_comment_page_counted(&listed.product, None, 1_000).await.expect("read index");
            assert_eq!(whole, &read, "{}: the listing's index is what a read of the index gives", listed.product);
        }
    }
    let last = store.product_comment_page_counted(&test_id("P", 5), None, 1_000).await.expect("read index");
    assert_eq!((last.entries.len(), last.skipped), (1, 1), "the bad value is skipped and counted");
}

#[tokio::test]
async fn a_paced_run_shares_multi_gets_between_small_products_and_ranks_each_exactly() {
    let store = fresh_store("rank_shared_fetches").await;
    let seeder = Seeder::new(&store);
    let mut rng = StdRng::seed_from_u64(23);
    let mut posted = Vec::new();
    for number in 1..=40 {
        let product = test_id("P", number);
        let count = rng.random_range(3..=20);
        let drafts = varied_drafts(&mut rng, count, 50);
        posted.push((product, seeder.post(&product, drafts, 100, 1).await));
    }

    // The default pacing has one call in flight, so the products ranked at
    // once queue their fetches behind it and the next call carries several.
    let mut options = options(Scope::All);
    options.concurrency = 8;
    let report = run(&store, &options).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.products_ranked, 40);
    assert!(
        report.comment_fetches < report.products_ranked,
        "{} multi-gets for {} products: none was shared",
        report.comment_fetches,
        report.products_ranked
    );
    for (product, comments) in &posted {
        assert_eq!(stored_picks(&store, product).await, numbered(&expected_picks(comments)), "{product}");
    }
}
