//! Writing rankings with group commit: products that finish at about the
//! same time share one `mutateRows` call.
//!
//! Each product still waits for its own write to succeed before it counts as
//! ranked, and each product's slots are written by one call, so retries and
//! interruption behave as if every product wrote alone. When HBase is quick,
//! calls carry one product; when it is busy, products queue up during a call
//! and the next call takes them all, which spares HBase a round trip and a WAL
//! sync per product exactly when it has the least time for them.
//!
//! A paced run's writes take turns with its reads (`Pacer::call`), so that the
//! run never has more than its `max_in_flight` calls out at once: on a shop's
//! long tail of small products a write follows every few multi-gets.

use common::store::{ProductRanking, Store};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use crate::pace::Pacer;
use crate::trace_budget::CallSpans;

/// The most products one call writes (eleven rows each).
const MAX_PRODUCTS_PER_CALL: usize = 64;

struct WriteRequest {
    ranking: ProductRanking,
    done: oneshot::Sender<common::Result<()>>,
}

/// A handle on the writer task; cheap to clone. The task ends when every
/// handle is dropped and the queue is written.
#[derive(Clone)]
pub(crate) struct SlotWriter {
    requests: mpsc::Sender<WriteRequest>,
}

impl SlotWriter {
    /// Starts the writer task for `store`, its calls taking turns from
    /// `pacer`; the task ends once every handle is dropped and its queue is
    /// written. Once every `SlotWriter` is dropped, await the returned task:
    /// until it ends, it holds the span of the pass that started it.
    pub(crate) fn start(store: Store, pacer: Pacer) -> (SlotWriter, JoinHandle<()>) {
        let (requests, queue) = mpsc::channel(MAX_PRODUCTS_PER_CALL * 4);
        // One call writes several products' slots, so it belongs to no one
        // product's span: it goes under the pass that starts the writer (its
        // first calls only: `CallSpans`).
        let task = tokio::spawn(write_queued(store, pacer, queue).in_current_span());
        (SlotWriter { requests }, task)
    }

    /// Writes `ranking` over the product's last one, waiting until HBase took the write.
    pub(crate) async fn write(&self, ranking: ProductRanking) -> common::Result<()> {
        let (done, outcome) = oneshot::channel();
        let gone = || common::Error::Unavailable("the slot writer stopped".to_owned());
        self.requests.send(WriteRequest { ranking, done }).await.map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?
    }
}

async fn write_queued(store: Store, pacer: Pacer, mut queue: mpsc::Receiver<WriteRequest>) {
    let spans = CallSpans::new();
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_PRODUCTS_PER_CALL {
            match queue.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let (rankings, waiters): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|request| (request.ranking, request.done)).unzip();
        let outcome = spans.traced(pacer.call(store.write_rankings(&rankings))).await;
        for waiter in waiters {
            // A waiter that went away (its run was dropped) needs no answer.
            let _ = waiter.send(outcome.clone());
        }
    }
}
