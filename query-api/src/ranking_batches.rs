//! The reads behind loading a product's ranking, shared by the loads that
//! ask at the same moment.
//!
//! A ranking that is not cached costs three reads: the ranking record (one
//! get), the reviews listed after the record's as-of time (one scan, so the
//! summary is current), and the ranked comments (one multi-get). Each opens
//! an operation on a region server, and on a busy service most of an
//! uncached read's cost is those operations, not the bytes. So concurrent
//! loads are coalesced: a load hands its product to one task, which takes
//! every product waiting and reads their records in one multi-get, then all
//! their newer reviews in one scan (`MultiRowRangeFilter`) beside all their
//! ranked comments in one multi-get. A load waits for nothing but reads in
//! flight: when HBase is idle a batch holds one product and costs what a load
//! alone costs; under load the batches grow, and the operations per load
//! shrink with them.
//!
//! Batching never changes an answer. A product without a record has its
//! slots scanned on its own; and when the batch's shared scan
//! stops at its bound of rows before a product's newer reviews are all read,
//! that product is read again alone, within a bound of its own, so its
//! summary is exactly what a load of it alone would count.

use std::collections::{BTreeMap, HashMap};

use common::keys::CommentKey;
use common::model::Comment;
use common::store::summaries::ListedSummary;
use common::store::{ReadStore, StoredRanking};
use common::Id;
use futures_util::future::try_join_all;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Index rows one summary read counts past its run's as-of time at most, and
/// one batch's shared scan in all.
pub const LIVE_SUMMARY_MAX_ROWS: usize = 1_000;

/// The most products one batch reads: its comment multi-get then names at
/// most ten times as many rows.
const MAX_BATCH_PRODUCTS: usize = 32;

/// Batches in flight at once. While they are, new loads wait in the queue
/// and form the next batch; more in flight would shrink the batches without
/// making HBase any faster.
const MAX_BATCHES_IN_FLIGHT: usize = 4;

/// Loads that may wait for a batch; one more is refused at once, as the
/// service refuses rather than queues (docs/pacing.md): eight full batches.
const MAX_QUEUED_LOADS: usize = 256;

/// What a ranking load reads from HBase.
#[derive(Debug, Clone)]
pub struct LoadedReads {
    /// The product's ranking: its record, or its slots without one.
    pub ranking: StoredRanking,
    /// The reviews listed after the record's as-of time (all of them without
    /// a record that counted the product).
    pub newer: ListedSummary,
    /// The ranked comments, lined up with `ranking.slots`: `None` where one is gone.
    pub comments: Vec<Option<Comment>>,
    /// Whether a secondary region replica answered any read of the batch
    /// these came from (a timeline read whose primary was slow or down).
    pub from_replica: bool,
}

/// One load waiting for its batch.
struct Ask {
    product: Id,
    reply: oneshot::Sender<common::Result<LoadedReads>>,
}

/// The handle through which loads share their reads; cheap to clone. The
/// task behind it ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct SharedLoads {
    asks: mpsc::Sender<Ask>,
}

impl SharedLoads {
    /// Starts the task that batches loads of `store`'s rankings. Must be
    /// called within a Tokio runtime.
    pub fn start(store: ReadStore) -> SharedLoads {
        let (asks, waiting) = mpsc::channel(MAX_QUEUED_LOADS);
        tokio::spawn(batch_loads(store, waiting));
        SharedLoads { asks }
    }

    /// What loading `product`'s ranking reads, read with the loads asking
    /// at the same moment. [`common::Error::Overloaded`] (counted as
    /// `reviews_hbase_overloaded_total{reason="queue_full"}`) when
    /// [`MAX_QUEUED_LOADS`] loads already wait.
    pub async fn load(&self, product: Id) -> common::Result<LoadedReads> {
        let (reply, answer) = oneshot::channel();
        let stopped = || common::Error::Unavailable("the service is stopping".to_owned());
        match self.asks.try_send(Ask { product, reply }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                metrics::counter!(common::telemetry::HBASE_OVERLOADED, "reason" => "queue_full").increment(1);
                return Err(common::Error::Overloaded(format!("{MAX_QUEUED_LOADS} ranking loads already wait")));
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(stopped()),
        }
        answer.await.map_err(|_| stopped())?
    }
}

/// Takes the loads waiting, up to [`MAX_BATCH_PRODUCTS`] at a time and
/// [`MAX_BATCHES_IN_FLIGHT`] batches at once, until every handle is gone.
async fn batch_loads(store: ReadStore, mut waiting: mpsc::Receiver<Ask>) {
    let in_flight = std::sync::Arc::new(Semaphore::new(MAX_BATCHES_IN_FLIGHT));
    while let Some(first) = waiting.recv().await {
        // Never closed, so acquiring only waits.
        let Ok(permit) = std::sync::Arc::clone(&in_flight).acquire_owned().await else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_PRODUCTS {
            match waiting.try_recv() {
                Ok(ask) => batch.push(ask),
                Err(_) => break,
            }
        }
        let store = store.clone();
        tokio::spawn(async move {
            answer_batch(&store, batch).await;
            drop(permit);
        });
    }
}

/// Reads `batch`'s products together and answers each load; a failed read
/// fails every load of the batch. When a secondary replica answered any of
/// the batch's reads, every load of it is marked so (the reads are shared,
/// so which product's rows came from it is not known).
async fn answer_batch(store: &ReadStore, batch: Vec<Ask>) {
    let mut products: Vec<Id> = batch.iter().map(|ask| ask.product).collect();
    products.sort_unstable();
    products.dedup();
    match common::hbase::noting_replica_reads(read_together(store, &products)).await {
        (Ok(mut read), from_replica) => {
            for reads in read.values_mut() {
                reads.from_replica = from_replica;
            }
            for ask in batch {
                // Two loads of one product in a batch share its reads.
                let reads = read
                    .get(&ask.product)
                    .cloned()
                    .ok_or_else(|| common::Error::Hbase(format!("product {} was asked but not read", ask.product)));
                // A load whose request is gone no longer waits for its answer.
                let _ = ask.reply.send(reads);
            }
        }
        (Err(error), _) => {
            for ask in batch {
                let _ = ask.reply.send(Err(error.clone()));
            }
        }
    }
}

/// The reads of loading each of `products` (sorted, distinct), by product.
async fn read_together(store: &ReadStore, products: &[Id]) -> common::Result<BTreeMap<Id, LoadedReads>> {
    let rankings = store.rankings(products).await?;
    // A run's count goes with its as-of time; without one, every review is counted now.
    let asked: Vec<(Id, Option<i64>)> = products
        .iter()
        .zip(&rankings)
        .map(|(product, ranking)| (*product, ranking.counted().map(|(_, as_of_ms)| as_of_ms)))
        .collect();
    let keys: Vec<CommentKey> =
        rankings.iter().flat_map(|ranking| ranking.slots.iter().map(|slot| slot.comment)).collect();
    let (newer, comments) = tokio::try_join!(newer_reviews(store, &asked), async {
        if keys.is_empty() {
            Ok(Vec::new())
        } else {
            store.get_comments(&keys).await
        }
    })?;
    let by_key: HashMap<CommentKey, Option<Comment>> = keys.into_iter().zip(comments).collect();
    Ok(products
        .iter()
        .zip(rankings)
        .zip(newer)
        .map(|((product, ranking), newer)| {
            let comments = ranking.slots.iter().map(|slot| by_key.get(&slot.comment).cloned().flatten()).collect();
            (*product, LoadedReads { ranking, newer, comments, from_replica: false })
        })
        .collect())
}

/// The reviews of each of `asked` newer than its as-of time, in one scan;
/// a product the scan did not finish is read again alone (each within its own
/// bound), so batching never makes a summary incomplete.
async fn newer_reviews(store: &ReadStore, asked: &[(Id, Option<i64>)]) -> common::Result<Vec<ListedSummary>> {
    let together = store.summaries_after(asked, LIVE_SUMMARY_MAX_ROWS).await?;
    if asked.len() == 1 || together.iter().all(|listed| listed.complete) {
        return Ok(together);
    }
    try_join_all(asked.iter().zip(together).map(|((product, as_of_ms), listed)| async move {
        if listed.complete {
            Ok(listed)
        } else {
            store.summary_after(product, *as_of_ms, LIVE_SUMMARY_MAX_ROWS).await
        }
    }))
    .await
}
