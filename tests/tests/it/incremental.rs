//! Incremental runs against the real HBase (`ranker run --changed-since`):
//! each kind of change (new comment, edit, vote, delete, a bare index row)
//! by each writer (this project's write path; rows put directly, as the Java
//! service writes them) marks exactly its product, and the ranking record it
//! writes carries the product's review summary as a full run counts it; a
//! comment deleted the Java way leaves no trace and marks nothing (the walk
//! of `--check-all-slots` finds it in the ten best), while the write path's
//! delete marks its product wherever the comment ranked (the deletion
//! marker); the search reads only what was written since its watermark; the
//! rolling refresh ranks every product once in D nights by key range, near
//! equal slices cut where a listing of the whole range saw the products, and
//! refills a slot whose comment was deleted directly; nights the daemon
//! missed or whose run did not complete are made up by the next run that
//! completes, from `last` or from a time given, and cuts moved by a later
//! listing of everything keep every product within D nights (the planning
//! alone, over many histories: `refresh.rs`); a run killed with SIGKILL
//! leaves the watermark where it was, so the next `--changed-since last`
//! misses nothing; and a shard of a plan cut elsewhere starts from the shards
//! of the night before.
//!
//! A product a run ranked is told from one it left alone by the score of its
//! slots: after the full run every slot's score is rewritten to a sentinel
//! (same comments, so nothing dangles), and a ranking writes real scores.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::keys::{CommentKey, KeyRange};
use common::model::{Comment, Order, Record};
use common::store::lease::{Clock, SystemClock};
use common::store::runs::{completed_cover, RunKind, RunStatus};
use common::store::{NewComment, ProductRanking, Store};
use common::Id;
use integration_tests::fixtures::{post_all, post_numbered, write_ranking, AS_OF_MS};
use integration_tests::{cargo_binary, fresh_store, test_id, thrift_addr};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use ranker::history::{ChangedSince, ChangesWanted};
use ranker::lease::RunStop;
use ranker::recorded::{RecordedRun, RunIdentity};
use ranker::refresh::{night_of, refresh_ranges, RefreshCuts};
use ranker::{Incremental, PaceMode, RunOptions, RunReport, Scope};
use tokio_util::sync::CancellationToken;

use crate::rows::{delete_rows, drop_tables, java_json, java_post, put_value, rank_table, slots_by_product};

const DAY_MS: i64 = 86_400_000;
/// The as-of time of the runs: fixed, so a full run and an incremental run agree to the byte.
const AS_OF: i64 = AS_OF_MS;
/// The score every slot is rewritten to after the full run.
const SENTINEL: f64 = -1.0;
/// Comments per seeded product: more than ten, so one can be outside the ten best.
const PER_PRODUCT: u64 = 14;

fn product(number: u64) -> Id {
    test_id("p", number)
}

fn order(product: u64, index: u64) -> Id {
    test_id("o", product * 100 + index)
}

/// Writes `products` products of [`PER_PRODUCT`] comments (the harness's
/// numbered data set, a month before [`AS_OF`], a second apart).
async fn seed(store: &Store, products: u64) {
    post_numbered(store, products, PER_PRODUCT, |_, index| {
        AS_OF - 30 * DAY_MS + i64::try_from(index).expect("small") * 1_000
    })
    .await;
}

fn options(scope: Scope, incremental: Option<Incremental>) -> RunOptions {
    let mut options = RunOptions::new(scope, AS_OF);
    options.concurrency = 4;
    options.incremental = incremental;
    options
}

async fn run(store: &Store, options: &RunOptions) -> RunReport {
    let report = ranker::run(store, options, CancellationToken::new()).await.expect("run");
    assert!(report.failures.is_empty() && !report.interrupted, "{report:?}");
    report
}

/// Rewrites every product's ranking with the same comments and summary and
/// the sentinel score.
async fn mark_slots(store: &Store, products: u64) {
    for number in 0..products {
        let ranking = store.ranking(&product(number)).await.expect("ranking");
        let marked = ProductRanking {
            product: product(number),
            as_of_ms: AS_OF,
            ranked: ranking.slots.iter().map(|slot| (slot.comment, SENTINEL)).collect(),
            summary: ranking.summary.expect("a run wrote the summary"),
        };
        store.write_ranking(&marked).await.expect("mark the slots");
    }
}

/// The number of reviews in `number`'s stored summary.
async fn summarised_reviews(store: &Store, number: u64) -> u64 {
    store.ranking(&product(number)).await.expect("ranking").summary.expect("a summary").count()
}

/// The products whose slots a run rewrote since [`mark_slots`].
async fn ranked_products(store: &Store, products: u64) -> BTreeSet<u64> {
    let mut ranked = BTreeSet::new();
    for number in 0..products {
        let slots = store.rank_slots(&product(number)).await.expect("slots");
        if slots.iter().all(|slot| slot.score != Some(SENTINEL)) {
            ranked.insert(number);
        }
    }
    ranked
}

/// A cell time strictly after every write so far, by HBase's clock (the same
/// machine's): what `--changed-since` is given.
async fn watermark_now() -> i64 {
    tokio::time::sleep(Duration::from_millis(20)).await;
    let now = i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after the epoch").as_millis(),
    )
    .expect("fits");
    tokio::time::sleep(Duration::from_millis(20)).await;
    now
}

async fn comment(store: &Store, product_number: u64, index: u64) -> Comment {
    let key = CommentKey::new(&order(product_number, index), &product(product_number));
    store.get_record::<Comment>(key.as_bytes().to_vec()).await.expect("read").expect("the comment exists")
}

/// A comment of a product outside its ten best.
async fn outside_the_ten_best(store: &Store, product_number: u64) -> CommentKey {
    let slots = store.rank_slots(&product(product_number)).await.expect("slots");
    (0..PER_PRODUCT)
        .map(|index| CommentKey::new(&order(product_number, index), &product(product_number)))
        .find(|key| slots.iter().all(|slot| slot.comment != *key))
        .expect("a comment outside the ten best")
}

/// The slot-1 comment of a product: deleting it must change the ten best.
async fn best_comment(store: &Store, product_number: u64) -> CommentKey {
    store.rank_slots(&product(product_number)).await.expect("slots")[0].comment
}

/// The product index row naming `key` (the write path's layout, with its tie).
async fn index_rows_of(store: &Store, comment: &Comment) -> Vec<Vec<u8>> {
    let key = CommentKey::new(&comment.order_id, &comment.product_id);
    let rows = crate::rows::raw_rows(store, &store.tables().product_comment).await;
    rows.into_iter()
        .filter(|row| row.value(common::hbase::COLUMN_VALUE) == Some(key.as_bytes().as_slice()))
        .map(|row| row.key)
        .collect()
}

#[tokio::test]
async fn every_kind_of_change_by_every_writer_marks_its_product_and_only_it() {
    let store = fresh_store("incr_kinds").await;
    const PRODUCTS: u64 = 14;
    seed(&store, PRODUCTS).await;
    // Product 8's newest comment loses its index row before the full run, so
    // the full run cannot see it; writing the row back (as `index repair` or
    // a Java writer would) is then a change by itself.
    let unindexed = comment(&store, 8, PER_PRODUCT - 1).await;
    let unindexed_rows = index_rows_of(&store, &unindexed).await;
    delete_rows(&store, &store.tables().product_comment.clone(), unindexed_rows.clone()).await;
    integration_tests::outlast_delete_markers().await;
    run(&store, &options(Scope::All, None)).await;
    mark_slots(&store, PRODUCTS).await;
    let since_ms = watermark_now().await;

    // Our write path.
    let new_by_us = NewComment {
        order_id: test_id("n", 1),
        product_id: product(1),
        user_id: test_id("u", 9_001),
        content: "A brand new and very thorough review, the best one yet by far".to_owned(),
        timestamp_ms: AS_OF - DAY_MS,
        rating: Some(5),
        helpful: Some(500),
        unhelpful: None,
        photos: Some(3),
    };
    store
        .put_records(&[Order { id: new_by_us.order_id, user_id: new_by_us.user_id, extra: Default::default() }])
        .await
        .expect("order");
    store.post_comment(new_by_us).await.expect("post");
    store
        .edit_comment(&order(2, 0), &product(2), "Edited: now a long and helpful review of it all".to_owned())
        .await
        .expect("edit");
    let best = best_comment(&store, 4).await;
    store.delete_comment(&best.order_id(), &product(4)).await.expect("delete");

    // The Java service's way: rows put and deleted directly.
    let mut voted = comment(&store, 3, 0).await;
    voted.helpful = Some(10_000);
    put_value(
        &store,
        &store.tables().comment.clone(),
        CommentKey::new(&voted.order_id, &voted.product_id).as_bytes().to_vec(),
        java_json(&voted),
    )
    .await;
    let mut new_by_java = comment(&store, 5, 0).await;
    new_by_java.order_id = test_id("n", 5);
    new_by_java.user_id = test_id("u", 9_005);
    new_by_java.timestamp = AS_OF - 2 * DAY_MS;
    new_by_java.helpful = Some(400);
    java_post(&store, &new_by_java).await;
    let mut edited_by_java = comment(&store, 6, 1).await;
    edited_by_java.content = Some("Edited the Java way into a much longer and better review".to_owned());
    edited_by_java.edited = true;
    put_value(
        &store,
        &store.tables().comment.clone(),
        CommentKey::new(&edited_by_java.order_id, &edited_by_java.product_id).as_bytes().to_vec(),
        java_json(&edited_by_java),
    )
    .await;
    let best = best_comment(&store, 7).await;
    let deleted = store.get_record::<Comment>(best.as_bytes().to_vec()).await.expect("read").expect("exists");
    let deleted_index = index_rows_of(&store, &deleted).await;
    delete_rows(&store, &store.tables().product_comment.clone(), deleted_index).await;
    delete_rows(&store, &store.tables().comment.clone(), vec![best.as_bytes().to_vec()]).await;
    put_value(
        &store,
        &store.tables().product_comment.clone(),
        unindexed_rows[0].clone(),
        CommentKey::new(&unindexed.order_id, &unindexed.product_id).as_bytes().to_vec(),
    )
    .await;

    // A comment outside product 9's ten best deleted the Java way leaves no
    // trace a time-range scan could see (its index rows and row go), and its
    // ten best cannot change: product 9 waits for its refresh slice, its
    // summary one review too many until then.
    let outside = outside_the_ten_best(&store, 9).await;
    let outside_comment =
        store.get_record::<Comment>(outside.as_bytes().to_vec()).await.expect("read").expect("exists");
    let outside_index = index_rows_of(&store, &outside_comment).await;
    delete_rows(&store, &store.tables().product_comment.clone(), outside_index).await;
    delete_rows(&store, &store.tables().comment.clone(), vec![outside.as_bytes().to_vec()]).await;
    // The write path's delete of a comment outside product 10's ten best puts
    // the product's deletion marker, so its summary is counted again.
    let outside = outside_the_ten_best(&store, 10).await;
    store.delete_comment(&outside.order_id(), &product(10)).await.expect("delete");

    let nightly = Incremental { since_ms, refresh_days: None, refreshed_until_ms: None, check_all_slots: false };
    let report = run(&store, &options(Scope::All, Some(nightly))).await;
    let changes = report.changes.clone().expect("an incremental run reports what it found");
    let expected: BTreeSet<u64> = (1..=6).chain([8, 10]).collect();
    assert_eq!(ranked_products(&store, PRODUCTS).await, expected, "{changes:?}");
    assert_eq!(report.products_ranked, 8);
    assert_eq!(report.summaries_written, 8);
    assert_eq!(
        (
            changes.products_written,
            changes.products_with_deleted_comments,
            changes.products_refreshed,
            changes.products_to_rank
        ),
        (8, 0, 0, 8),
        "written: 1, 2, 3, 5, 6, 8, and 4 and 10 by their deletion markers"
    );
    // The search read the rows written since the watermark and nothing else:
    // new by us, edit, vote, new the Java way, edit the Java way; two new
    // index rows, one put back and two deletion markers. No rank slot.
    assert_eq!((changes.comment_rows_written, changes.index_rows_written), (5, 5), "{changes:?}");
    assert_eq!((changes.slots_checked, changes.slots_dangling), (0, 0), "{changes:?}");
    let mut summarised = Vec::new();
    for number in [0, 1, 4, 5, 7, 8, 9, 10] {
        summarised.push((number, summarised_reviews(&store, number).await));
    }
    assert_eq!(
        summarised,
        [(0, 14), (1, 15), (4, 13), (5, 15), (7, 14), (8, 14), (9, 14), (10, 13)],
        "reviews added and deleted by either writer are counted; products 7 and 9's Java deletes wait for their refresh"
    );
    // Product 7's slot still names its deleted best comment (every answer
    // leaves such a slot out: api.rs) until its refresh slice or a walk of
    // every slot, which an operator who deleted rows asks for.
    let deleted_key = CommentKey::new(&deleted.order_id, &deleted.product_id);
    assert_eq!(best_comment(&store, 7).await, deleted_key);
    let mut incremental = slots_by_product(&rank_table(&store).await);
    mark_slots(&store, PRODUCTS).await;
    let since_ms = watermark_now().await;
    let walk = Incremental { since_ms, refresh_days: None, refreshed_until_ms: None, check_all_slots: true };
    let report = run(&store, &options(Scope::All, Some(walk))).await;
    let changes = report.changes.clone().expect("an incremental run reports what it found");
    assert_eq!(ranked_products(&store, PRODUCTS).await, [7].into(), "{changes:?}");
    assert_eq!(
        (changes.products_written, changes.products_with_deleted_comments, changes.products_to_rank),
        (0, 1, 1),
        "{changes:?}"
    );
    assert_eq!((changes.slots_checked, changes.slots_dangling), (PRODUCTS * 10, 1), "{changes:?}");
    assert_ne!(best_comment(&store, 7).await, deleted_key);
    assert_eq!(summarised_reviews(&store, 7).await, 13);
    let seven = product(7).as_bytes().to_vec();
    let walked = slots_by_product(&rank_table(&store).await).remove(&seven);
    incremental.insert(seven, walked.expect("product 7's slots"));
    let expected: BTreeSet<u64> = (1..=8).chain([10]).collect();

    // The ranked products now hold exactly what a full run as of the same time gives them.
    run(&store, &options(Scope::All, None)).await;
    let full = slots_by_product(&rank_table(&store).await);
    for number in &expected {
        let key = product(*number).as_bytes().to_vec();
        assert_eq!(incremental.get(&key), full.get(&key), "product {number}");
    }
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn an_unpaced_slot_walk_checks_several_steps_at_once_and_finds_every_deleted_comment() {
    // More slots than one step of the walk reads (1,000): unpaced, the run
    // checks up to its concurrency of steps at once, and they must come back
    // in key order for each product to be settled whole.
    let store = fresh_store("incr_steps").await;
    const PRODUCTS: u64 = 250;
    seed(&store, PRODUCTS).await;
    run(&store, &options(Scope::All, None)).await;
    mark_slots(&store, PRODUCTS).await;
    // Product 0 keeps five of its slots, every other product ten, so product
    // 100 spans the first step's end (slots 995-1004) and product 200 the
    // second's: their slots must be merged across steps. Best comments go in
    // each step and on both sides of each step's end, deleted the Java way
    // (the row alone, no cell a time-range scan could see), so only the walk
    // can find them.
    let first = store.rank_slots(&product(0)).await.expect("slots");
    let kept: Vec<(CommentKey, f64)> = first.iter().take(5).map(|slot| (slot.comment, SENTINEL)).collect();
    write_ranking(&store, &product(0), &kept).await;
    let deleted: BTreeSet<u64> = [0, 50, 99, 100, 101, 150, 199, 200, 249].into();
    for number in &deleted {
        let best = best_comment(&store, *number).await;
        delete_rows(&store, &store.tables().comment.clone(), vec![best.as_bytes().to_vec()]).await;
    }
    let since_ms = watermark_now().await;

    let walk = Incremental { since_ms, refresh_days: None, refreshed_until_ms: None, check_all_slots: true };
    let mut unpaced = options(Scope::All, Some(walk));
    unpaced.pacing.mode = PaceMode::Off;
    let report = run(&store, &unpaced).await;
    let changes = report.changes.clone().expect("an incremental run reports what it found");
    assert_eq!(changes.slots_checked, PRODUCTS * 10 - 5, "{changes:?}");
    assert_eq!(changes.slots_dangling, deleted.len() as u64, "{changes:?}");
    assert_eq!(
        (changes.products_written, changes.products_with_deleted_comments, changes.products_to_rank),
        (0, deleted.len() as u64, deleted.len() as u64),
        "{changes:?}"
    );
    assert_eq!(ranked_products(&store, PRODUCTS).await, deleted);
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn the_rolling_refresh_ranks_every_product_once_in_d_nights_and_refills_a_slot_deleted_directly() {
    let store = fresh_store("incr_refresh").await;
    const PRODUCTS: u64 = 24;
    const DAYS: u32 = 3;
    seed(&store, PRODUCTS).await;
    let nightly = |since_ms, night: u32| {
        let mut tonight = options(
            Scope::All,
            Some(Incremental { since_ms, refresh_days: Some(DAYS), refreshed_until_ms: None, check_all_slots: false }),
        );
        tonight.as_of_ms = AS_OF + i64::from(night) * DAY_MS;
        tonight
    };

    // No completed run has recorded cuts: the refresh lists the whole range,
    // as a full run does, and cuts it where the products are.
    let first_night = nightly(watermark_now().await, 0);
    let first = run(&store, &first_night).await;
    let changes = first.changes.clone().expect("changes");
    assert!(changes.refreshed_whole_range, "{changes:?}");
    assert_eq!((changes.products_refreshed, first.products_ranked), (PRODUCTS, PRODUCTS));
    let cuts = first.refresh_cuts.clone().expect("a listing of the whole range is cut");
    assert_eq!(cuts, (1..PRODUCTS).map(product).collect::<Vec<_>>(), "fewer products than parts: a part each");
    record_completed(&store, &first_night, first).await;

    // Product 5's best comment deleted the Java way: no cell to find by time.
    let gone = best_comment(&store, 5).await;
    delete_rows(&store, &store.tables().comment.clone(), vec![gone.as_bytes().to_vec()]).await;
    let since_ms = watermark_now().await;
    let cover =
        [RefreshCuts { range: KeyRange::everything(), cuts: cuts.iter().map(|cut| cut.as_bytes().to_vec()).collect() }];
    let mut seen = BTreeSet::new();
    for night in 1..=DAYS {
        mark_slots(&store, PRODUCTS).await;
        let tonight = nightly(since_ms, night);
        let report = run(&store, &tonight).await;
        let changes = report.changes.expect("changes");
        let ranked = ranked_products(&store, PRODUCTS).await;
        let number = night_of(tonight.as_of_ms);
        let ranges = refresh_ranges(&cover, &KeyRange::everything(), DAYS, number..=number);
        let slice: BTreeSet<u64> =
            (0..PRODUCTS).filter(|n| ranges.iter().any(|range| range.contains(product(*n).as_bytes()))).collect();
        assert_eq!(ranked, slice, "night {night}: its key range and nothing else (nothing was written)");
        assert_eq!(ranked.len() as u64, PRODUCTS / u64::from(DAYS), "night {night}: near-equal slices");
        assert_eq!(
            (changes.products_refreshed, changes.refresh_ranges, changes.refreshed_whole_range, changes.slots_checked),
            (ranked.len() as u64, 1, false, 0),
            "night {night}: {changes:?}"
        );
        assert!(seen.is_disjoint(&ranked), "night {night} re-ranked a product of an earlier night");
        seen.extend(ranked);
        let names_gone = store.rank_slots(&product(5)).await.expect("slots").iter().any(|slot| slot.comment == gone);
        assert_eq!(names_gone, !seen.contains(&5), "night {night}: product 5's slot is refilled on its night");
    }
    assert_eq!(seen, (0..PRODUCTS).collect(), "every product in {DAYS} nights");
    drop_tables(&[&store]).await;
}

/// The refresh period of the tests of missed nights and moving cuts.
const PERIOD: u32 = 4;

/// The as-of time of night `night` of a test's history (night 0 is [`AS_OF`]'s).
fn night_as_of(night: i64) -> i64 {
    AS_OF + night * DAY_MS
}

/// One night's run as `ranker run --as-of <night> [--changed-since <since>
/// --refresh-days <days>]` (or the daemon) makes it, recorded in the run
/// history: the watermark and the refresh's nights come from the history
/// (`ranker::history::make_incremental`), the cuts too. Without `since` a full
/// run. A `stop` already asked for interrupts it before it ranks anything.
async fn recorded_night(
    store: &Store,
    night: i64,
    since: Option<ChangedSince>,
    days: u32,
    stop: &RunStop,
) -> RecordedRun {
    let mut tonight = options(Scope::All, None);
    tonight.as_of_ms = night_as_of(night);
    let wanted = since.map(|since| ChangesWanted {
        since,
        refresh_days: days,
        skew_margin: Duration::ZERO,
        check_all_slots: false,
    });
    let identity = RunIdentity::by_hand("refresh-test".to_owned(), SystemClock.now_ms());
    let prepare = async |options: &mut RunOptions| match &wanted {
        Some(wanted) => ranker::history::make_incremental(store, options, wanted).await,
        None => Ok(()),
    };
    ranker::recorded::run_recorded(store, tonight, identity, &SystemClock, prepare, stop).await
}

/// A night's run that completed: its report, which products it ranked (of
/// `products`, by their slots' scores, re-marked after), and each product's
/// last night ranked updated.
async fn completed_night(
    store: &Store,
    night: i64,
    since: Option<ChangedSince>,
    days: u32,
    products: &BTreeSet<u64>,
    last_ranked: &mut BTreeMap<u64, i64>,
) -> (RecordedRun, BTreeSet<u64>) {
    let recorded = recorded_night(store, night, since, days, &RunStop::new()).await;
    assert_eq!(recorded.record.status, RunStatus::Succeeded, "night {night}: {:?}", recorded.record);
    let mut ranked = BTreeSet::new();
    for number in products {
        let slots = store.rank_slots(&product(*number)).await.expect("slots");
        if !slots.is_empty() && slots.iter().all(|slot| slot.score != Some(SENTINEL)) {
            ranked.insert(*number);
            last_ranked.insert(*number, night);
        }
    }
    mark_slots_of(store, products).await;
    (recorded, ranked)
}

/// [`mark_slots`] for the products numbered `products`.
async fn mark_slots_of(store: &Store, products: &BTreeSet<u64>) {
    for number in products {
        let ranking = store.ranking(&product(*number)).await.expect("ranking");
        let marked = ProductRanking {
            product: product(*number),
            as_of_ms: AS_OF,
            ranked: ranking.slots.iter().map(|slot| (slot.comment, SENTINEL)).collect(),
            summary: ranking.summary.expect("a run wrote the summary"),
        };
        store.write_ranking(&marked).await.expect("mark the slots");
    }
}

/// The bound after a completed run of every product on night `night`: each
/// was ranked by a completed run less than `days` nights before it.
#[track_caller]
fn assert_within(days: u32, night: i64, last_ranked: &BTreeMap<u64, i64>, products: &BTreeSet<u64>) {
    let late: Vec<(u64, Option<i64>)> = products
        .iter()
        .map(|number| (*number, last_ranked.get(number).copied()))
        .filter(|(_, last)| last.is_none_or(|last| night - last >= i64::from(days)))
        .collect();
    assert!(
        late.is_empty(),
        "night {night}: products last ranked {days} nights ago or more (product, night): {late:?}"
    );
}

/// The cuts a run recorded.
fn recorded_cuts(recorded: &RecordedRun) -> RefreshCuts {
    let cuts = recorded.record.refresh_cuts.as_ref().expect("the run recorded cuts");
    RefreshCuts { range: KeyRange::everything(), cuts: cuts.iter().map(|cut| hex::decode(cut).expect("hex")).collect() }
}

/// The products of `products` in the refresh slices of `nights` under `cuts`.
fn slices(cuts: &RefreshCuts, days: u32, nights: RangeInclusive<i64>, products: &BTreeSet<u64>) -> BTreeSet<u64> {
    let nights = night_of(night_as_of(*nights.start()))..=night_of(night_as_of(*nights.end()));
    let ranges = refresh_ranges(std::slice::from_ref(cuts), &KeyRange::everything(), days, nights);
    products.iter().copied().filter(|n| ranges.iter().any(|range| range.contains(product(*n).as_bytes()))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nights_missed_or_failed_are_made_up_by_the_next_run_and_a_slot_deleted_directly_waits_at_most_d_nights() {
    let store = fresh_store("incr_missed").await;
    const PRODUCTS: u64 = 24;
    seed(&store, PRODUCTS).await;
    let all: BTreeSet<u64> = (0..PRODUCTS).collect();
    let mut last_ranked = BTreeMap::new();
    let last = Some(ChangedSince::Last);
    let (full, _) = completed_night(&store, 0, None, PERIOD, &all, &mut last_ranked).await;
    let cuts = recorded_cuts(&full);

    // A comment of a product whose slice is night 2's deleted the Java way:
    // no cell to find by time, only its refresh slice refills the slot.
    let deleted = *slices(&cuts, PERIOD, 2..=2, &all).first().expect("night 2 has a slice");
    let gone = best_comment(&store, deleted).await;
    delete_rows(&store, &store.tables().comment.clone(), vec![gone.as_bytes().to_vec()]).await;

    let (first, ranked) = completed_night(&store, 1, last, PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 1, &last_ranked, &all);
    assert_eq!(ranked, slices(&cuts, PERIOD, 1..=1, &all), "night 1: its slice");
    assert_eq!(first.record.refresh_cuts, None, "a slice is no listing of everything");

    // Nights 2 and 3: the daemon did not run. Night 4 makes up their slices.
    let (fourth, ranked) = completed_night(&store, 4, last, PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 4, &last_ranked, &all);
    assert_eq!(ranked, slices(&cuts, PERIOD, 2..=4, &all), "night 4: the slices of nights 2, 3 and 4");
    let changes = fourth.result.as_ref().expect("report").changes.clone().expect("incremental");
    assert_eq!((changes.refreshed_whole_range, changes.products_written), (false, 0), "{changes:?}");
    let slots = store.rank_slots(&product(deleted)).await.expect("slots");
    assert!(slots.iter().all(|slot| slot.comment != gone), "the deleted comment's slot is refilled on night 4");

    // Night 5's run is stopped before it ranks anything: it does not count,
    // and night 6 makes up night 5's slice with its own.
    let stopped = RunStop::new();
    stopped.shut_down();
    let fifth = recorded_night(&store, 5, last, PERIOD, &stopped).await;
    assert_eq!(fifth.record.status, RunStatus::Interrupted);
    let (_, ranked) = completed_night(&store, 6, last, PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 6, &last_ranked, &all);
    assert_eq!(ranked, slices(&cuts, PERIOD, 5..=6, &all), "night 6: the slices of nights 5 and 6");

    // Nights 7 to 10, D of them, missed: night 11 ranks everything, a listing
    // of the whole range that records its cuts again.
    let (eleventh, ranked) = completed_night(&store, 11, last, PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 11, &last_ranked, &all);
    assert_eq!(ranked, all, "night 11 after {PERIOD} missed nights: everything");
    let changes = eleventh.result.as_ref().expect("report").changes.clone().expect("incremental");
    assert!(changes.refreshed_whole_range, "{changes:?}");
    assert_eq!(recorded_cuts(&eleventh), cuts, "the same products, cut in the same places");
    drop_tables(&[&store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_changed_since_a_time_makes_up_the_nights_since_the_last_completed_run() {
    let store = fresh_store("incr_since_time").await;
    const PRODUCTS: u64 = 24;
    seed(&store, PRODUCTS).await;
    let all: BTreeSet<u64> = (0..PRODUCTS).collect();
    let mut last_ranked = BTreeMap::new();
    let (full, _) = completed_night(&store, 0, None, PERIOD, &all, &mut last_ranked).await;
    let cuts = recorded_cuts(&full);
    let (_, ranked) = completed_night(&store, 1, Some(ChangedSince::Last), PERIOD, &all, &mut last_ranked).await;
    assert_eq!(ranked, slices(&cuts, PERIOD, 1..=1, &all));

    // Nights 2 and 3 missed; then an operator runs from a time of their
    // choosing, after a vote on a product of night 1's slice.
    let since_ms = watermark_now().await;
    let voted = *slices(&cuts, PERIOD, 1..=1, &all).first().expect("night 1 has a slice");
    let mut vote = comment(&store, voted, 0).await;
    vote.helpful = Some(10_000);
    store.put_records(&[vote]).await.expect("a vote");
    let (fourth, ranked) =
        completed_night(&store, 4, Some(ChangedSince::Time(since_ms)), PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 4, &last_ranked, &all);
    let changes = fourth.result.as_ref().expect("report").changes.clone().expect("incremental");
    assert_eq!((changes.since_ms, fourth.record.changed_since_ms), (since_ms, Some(since_ms)), "from the time given");
    let mut expected = slices(&cuts, PERIOD, 2..=4, &all);
    expected.insert(voted);
    assert_eq!(ranked, expected, "night 4: the product voted on and the slices of nights 2, 3 and 4");

    // It completed, so the next night's run from `last` starts after it.
    let (_, ranked) = completed_night(&store, 5, Some(ChangedSince::Last), PERIOD, &all, &mut last_ranked).await;
    assert_within(PERIOD, 5, &last_ranked, &all);
    assert_eq!(ranked, slices(&cuts, PERIOD, 5..=5, &all), "night 5: its slice alone");
    drop_tables(&[&store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cuts_moved_by_a_later_listing_of_everything_keep_every_product_within_d_nights() {
    let store = fresh_store("incr_cuts_move").await;
    const DAYS: u32 = 3;
    // Products 0, 4, 8, ... 92 first. The ones that come later fall among
    // the first eight, three in each gap, so the parts there get four times
    // the products: a listing of everything then cuts elsewhere.
    let first: BTreeSet<u64> = (0..24).map(|n| 4 * n).collect();
    let added: BTreeSet<u64> = (0..8).flat_map(|n| [4 * n + 1, 4 * n + 2, 4 * n + 3]).collect();
    let all: BTreeSet<u64> = first.union(&added).copied().collect();
    post_products(&store, &first).await;
    let mut last_ranked = BTreeMap::new();
    let last = Some(ChangedSince::Last);
    let (full, _) = completed_night(&store, 0, None, DAYS, &first, &mut last_ranked).await;
    let first_cuts = recorded_cuts(&full);
    let (_, ranked) = completed_night(&store, 1, last, DAYS, &first, &mut last_ranked).await;
    assert_within(DAYS, 1, &last_ranked, &first);
    assert_eq!(ranked, slices(&first_cuts, DAYS, 1..=1, &first), "night 1");

    // The new products are changes night 2 finds; its slice follows the old cuts.
    post_products(&store, &added).await;
    let (_, ranked) = completed_night(&store, 2, last, DAYS, &all, &mut last_ranked).await;
    assert_within(DAYS, 2, &last_ranked, &all);
    let expected: BTreeSet<u64> = slices(&first_cuts, DAYS, 2..=2, &all).union(&added).copied().collect();
    assert_eq!(ranked, expected, "night 2: the new products and the slice under the old cuts");

    // Nights 3 to 5 missed: night 6 lists everything and cuts it where the
    // products are now; the nights after follow the new cuts.
    let (sixth, ranked) = completed_night(&store, 6, last, DAYS, &all, &mut last_ranked).await;
    assert_within(DAYS, 6, &last_ranked, &all);
    assert_eq!(ranked, all, "night 6: everything");
    let moved = recorded_cuts(&sixth);
    let mut seen = BTreeSet::new();
    for night in 7..=9 {
        let (_, ranked) = completed_night(&store, night, last, DAYS, &all, &mut last_ranked).await;
        assert_within(DAYS, night, &last_ranked, &all);
        assert_eq!(ranked, slices(&moved, DAYS, night..=night, &all), "night {night}: its slice under the new cuts");
        assert_eq!(ranked.len(), all.len() / DAYS as usize, "night {night}: near-equal slices of the new products too");
        assert_ne!(ranked, slices(&first_cuts, DAYS, night..=night, &all), "night {night}: the slices moved");
        assert!(seen.is_disjoint(&ranked), "night {night} ranked a product again");
        seen.extend(ranked);
    }
    assert_eq!(seen, all, "every product in {DAYS} nights");
    // Only the runs that listed everything recorded cuts.
    let runs = store.recent_runs(20).await.expect("history");
    let with_cuts: Vec<i64> =
        runs.iter().rev().filter(|run| run.refresh_cuts.is_some()).map(|run| run.as_of_ms).collect();
    assert_eq!(with_cuts, [night_as_of(0), night_as_of(6)]);
    drop_tables(&[&store]).await;
}

/// Writes the products numbered `numbers` as [`seed`] writes its products.
async fn post_products(store: &Store, numbers: &BTreeSet<u64>) {
    let mut comments = Vec::new();
    for number in numbers {
        for index in 0..PER_PRODUCT {
            comments.push(NewComment {
                order_id: order(*number, index),
                product_id: product(*number),
                user_id: test_id("u", number * 100 + index),
                content: format!("Review {index} of product {number}: sturdy{}", " and more".repeat(index as usize)),
                timestamp_ms: AS_OF - 30 * DAY_MS + i64::try_from(index).expect("small") * 1_000,
                rating: Some(5),
                helpful: Some(index * 3),
                unhelpful: Some(1),
                photos: None,
            });
        }
    }
    post_all(store, comments).await;
}

/// Records `report` as a completed run under `options`, as `ranker run` and
/// `ranker-cron` record theirs: what the next runs read their cuts from.
async fn record_completed(store: &Store, options: &RunOptions, report: RunReport) {
    let started_ms = watermark_now().await;
    let mut record = ranker::history::started_record(
        format!("test-{started_ms}"),
        "incremental-test".to_owned(),
        options.as_of_ms,
        1,
        started_ms,
        options,
    );
    ranker::history::conclude(&mut record, &Ok(report), None);
    assert_eq!(record.status, RunStatus::Succeeded);
    ranker::history::save(store, &record).await;
}

/// A `ranker` child process, SIGKILLed if the test ends without reaping it.
struct RankerProcess(Option<Child>);

impl Drop for RankerProcess {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                drop(child.kill());
                drop(child.wait());
            }
        }
    }
}

fn ranker(store: &Store, arguments: &[&str]) -> RankerProcess {
    let child = Command::new(cargo_binary("ranker"))
        .args(["run", "--thrift-addr", &thrift_addr(), "--table-prefix", &store.tables().prefix])
        .args(["--as-of", &AS_OF.to_string(), "--pace", "off", "--json"])
        .args(arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ranker");
    RankerProcess(Some(child))
}

fn finish(mut process: RankerProcess) -> serde_json::Value {
    let child = process.0.take().expect("a running process");
    let output = child.wait_with_output().expect("ranker output");
    assert!(output.status.success(), "ranker exited with {}", output.status);
    serde_json::from_slice(&output.stdout).expect("the JSON report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_incremental_run_leaves_the_watermark_and_the_next_misses_nothing() {
    let store = fresh_store("incr_sigkill").await;
    const PRODUCTS: u64 = 60;
    seed(&store, PRODUCTS).await;
    let full = finish(ranker(&store, &["--lease-ttl-secs", "3"]));
    assert_eq!(full["changes"], serde_json::Value::Null, "a full run");
    let runs = store.recent_runs(10).await.expect("history");
    let full_run = runs.first().expect("the full run is recorded").clone();
    assert_eq!((full_run.status, full_run.kind), (RunStatus::Succeeded, RunKind::Full));

    // Every product changes (a vote on its first comment), so the incremental
    // run has work enough to be killed in the middle of.
    for number in 0..PRODUCTS {
        let mut voted = comment(&store, number, 0).await;
        voted.helpful = Some(900 + number);
        put_value(&store, &store.tables().comment.clone(), voted.row_key().as_bytes().to_vec(), voted.to_json()).await;
    }
    mark_slots(&store, PRODUCTS).await;
    let killed =
        ranker(&store, &["--changed-since", "last", "--lease-ttl-secs", "3", "--concurrency", "1", "--max-rate", "40"]);
    integration_tests::wait_for(Duration::from_secs(60), "the incremental run to rank a product", async || {
        (!ranked_products(&store, PRODUCTS).await.is_empty()).then_some(())
    })
    .await;
    let pid = killed.0.as_ref().expect("running").id();
    kill(Pid::from_raw(i32::try_from(pid).expect("pid")), Signal::SIGKILL).expect("SIGKILL");
    drop(killed);
    let partly = ranked_products(&store, PRODUCTS).await;
    assert!(!partly.is_empty() && partly.len() < PRODUCTS as usize, "killed mid-run: {} ranked", partly.len());
    let runs = store.recent_runs(10).await.expect("history");
    assert_eq!(
        (runs[0].status, runs[0].kind),
        (RunStatus::Running, RunKind::Incremental),
        "a killed run never completes"
    );

    // A change after the kill, then the next run from `last`.
    let mut late = comment(&store, PRODUCTS - 1, 1).await;
    late.content = Some("Changed after the killed run: a longer and more useful review now".to_owned());
    put_value(&store, &store.tables().comment.clone(), late.row_key().as_bytes().to_vec(), late.to_json()).await;
    tokio::time::sleep(Duration::from_secs(4)).await; // The killed run's lease (3 s) lapses.
    let next = finish(ranker(&store, &["--changed-since", "last"]));
    // From the full run's start (less the default five minutes of skew margin), not the killed run's.
    assert_eq!(next["changes"]["since_ms"].as_i64(), Some(full_run.started_ms - 300_000), "{next}");
    assert_eq!(ranked_products(&store, PRODUCTS).await, (0..PRODUCTS).collect(), "nothing missed");
    let runs = store.recent_runs(10).await.expect("history");
    assert_eq!(
        (runs[0].status, runs[0].kind, runs[0].products_changed),
        (RunStatus::Succeeded, RunKind::Incremental, Some(PRODUCTS))
    );

    // And what it wrote is what a full run writes.
    let incremental = rank_table(&store).await;
    finish(ranker(&store, &["--lease-ttl-secs", "3"]));
    assert_eq!(incremental, rank_table(&store).await);
    drop_tables(&[&store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_cut_elsewhere_starts_from_the_shards_of_the_night_before() {
    let store = fresh_store("incr_shard_cover").await;
    const PRODUCTS: u64 = 30;
    seed(&store, PRODUCTS).await;
    // Last night: two shards under that night's plan, each a full run of its range.
    for shard in ["0/2", "1/2"] {
        let report = finish(ranker(&store, &["--shard", shard, "--plan-id", "night-1"]));
        assert_eq!(report["changes"], serde_json::Value::Null, "a full run of shard {shard}");
    }
    let night = store.recent_runs(10).await.expect("history");
    assert_eq!(night.len(), 2);
    assert!(
        night.iter().all(|run| run.status == RunStatus::Succeeded
            && completed_cover(std::slice::from_ref(run), &KeyRange::everything()).is_none()),
        "{night:?}"
    );

    // Tonight's plan has three shards: the middle one spans last night's cut,
    // so neither of last night's shards holds its range alone, but together
    // they do. It starts from the earlier of their starts (less the default
    // five minutes of skew margin), instead of ranking its whole range.
    let middle = finish(ranker(&store, &["--shard", "1/3", "--plan-id", "night-2", "--changed-since", "last"]));
    let earliest = night.iter().map(|run| run.started_ms).min().expect("two runs");
    assert_eq!(middle["changes"]["since_ms"].as_i64(), Some(earliest - 300_000), "{middle}");
    let runs = store.recent_runs(10).await.expect("history");
    let tonight = &runs[0];
    assert_eq!((tonight.status, tonight.kind), (RunStatus::Succeeded, RunKind::Incremental));
    let tonights = KeyRange {
        start: hex::decode(&tonight.range_start).expect("hex"),
        stop: tonight.range_stop.as_ref().map(|stop| hex::decode(stop).expect("hex")),
    };
    assert!(
        night.iter().all(|run| completed_cover(std::slice::from_ref(run), &tonights).is_none()),
        "no one shard covers it: {runs:?}"
    );
    drop_tables(&[&store]).await;
}
