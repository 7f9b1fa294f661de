//! Comment fetches of several products in one multi-get.
//!
//! A multi-get costs HBase a part per call (the gateway's and the region
//! server's work to take it in, split it and answer) besides its part per
//! row. Most of a shop's products are small, so a run that fetched each
//! product's comments alone would pay the per-call part thousands of times
//! for a few dozen rows each; sharing calls pays it about half as often.
//!
//! So fetches queue here and whoever gets the next turn for a call takes the
//! fetches queued behind it too, up to a page of rows, and answers them all
//! from one multi-get (group commit, applied to reads). Nothing waits to fill a
//! batch: a fetch with nobody queued behind it goes alone, as before. Unpaced
//! runs have no turns to wait for, so a fetch is taken by its own caller right
//! after it is queued: they share a call only when two fetches are queued in
//! the same instant, and otherwise call as they did.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::keys::CommentKey;
use common::model::Comment;
use common::store::Store;
use tokio::sync::oneshot;

use crate::pace::Pacer;

/// What one multi-get answers for one fetch: each key's comment, if it exists.
type Fetched = common::Result<Vec<Option<Comment>>>;

/// Fetches comments for every product of a run; cheap to clone.
#[derive(Clone)]
pub(crate) struct CommentFetcher {
    inner: Arc<FetcherInner>,
}

struct FetcherInner {
    store: Store,
    pacer: Pacer,
    queue: Mutex<FetchQueue>,
    next_id: AtomicU64,
    /// Multi-gets made, for the run's report.
    calls: AtomicU64,
}

/// Fetches waiting for a call, oldest first.
struct FetchQueue {
    waiting: VecDeque<Waiting>,
    /// Most rows one multi-get asks for (a fetch larger than this goes alone).
    max_rows: usize,
}

struct Waiting {
    id: u64,
    keys: Vec<CommentKey>,
    answer: oneshot::Sender<Fetched>,
}

impl CommentFetcher {
    /// A fetcher whose calls take turns and rate from `pacer` and ask for at
    /// most `max_rows` rows each.
    pub(crate) fn new(store: Store, pacer: Pacer, max_rows: usize) -> CommentFetcher {
        CommentFetcher {
            inner: Arc::new(FetcherInner {
                store,
                pacer,
                queue: Mutex::new(FetchQueue { waiting: VecDeque::new(), max_rows: max_rows.max(1) }),
                next_id: AtomicU64::new(0),
                calls: AtomicU64::new(0),
            }),
        }
    }

    /// Multi-gets made so far.
    pub(crate) fn calls(&self) -> u64 {
        self.inner.calls.load(Ordering::Relaxed)
    }

    /// The comments named by `keys`, in their order (`None` for a comment
    /// that is gone), possibly fetched together with other products' comments.
    pub(crate) async fn fetch(&self, keys: Vec<CommentKey>) -> Fetched {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &self.inner;
        inner.pacer.acquire(keys.len()).await;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        inner.lock_queue().waiting.push_back(Waiting { id, keys, answer });
        let batch = inner
            .pacer
            .call(async {
                // With the turn: unless an earlier turn took this fetch along,
                // take it and those queued behind it, and make the call.
                let batch = inner.lock_queue().take_batch(id)?;
                let keys: Vec<CommentKey> = batch.iter().flat_map(|waiting| waiting.keys.iter().copied()).collect();
                inner.calls.fetch_add(1, Ordering::Relaxed);
                let fetched = inner.store.get_comments(&keys).await;
                Some((batch, fetched))
            })
            .await;
        if let Some((batch, fetched)) = batch {
            answer_all(batch, fetched);
        }
        answered.await.unwrap_or_else(|_| {
            // The caller that took this fetch along was dropped mid-call (its
            // run stopped): an error this product's retry may mend.
            Err(common::Error::Unavailable("the multi-get carrying this fetch was cancelled".to_owned()))
        })
    }
}

impl FetcherInner {
    fn lock_queue(&self) -> std::sync::MutexGuard<'_, FetchQueue> {
        // No code panics while holding the lock; if one did, the queue is still whole.
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl FetchQueue {
    /// Fetch `id` and the oldest fetches queued behind it that fit in
    /// `max_rows` with it; `None` when `id` is no longer queued (an earlier
    /// call carries it).
    fn take_batch(&mut self, id: u64) -> Option<Vec<Waiting>> {
        let position = self.waiting.iter().position(|waiting| waiting.id == id)?;
        let first = self.waiting.remove(position)?;
        let mut rows = first.keys.len();
        let mut batch = vec![first];
        let mut index = 0;
        while index < self.waiting.len() && rows < self.max_rows {
            if rows + self.waiting[index].keys.len() <= self.max_rows {
                let waiting = self.waiting.remove(index)?;
                rows += waiting.keys.len();
                batch.push(waiting);
            } else {
                index += 1;
            }
        }
        Some(batch)
    }
}

/// Hands each fetch of `batch` its part of one multi-get's answer (in the
/// order of the keys the call asked for), or the call's error.
fn answer_all(batch: Vec<Waiting>, fetched: Fetched) {
    match fetched {
        Ok(comments) => {
            let mut comments = comments.into_iter();
            for waiting in batch {
                let part: Vec<Option<Comment>> = comments.by_ref().take(waiting.keys.len()).collect();
                // A fetch whose product stopped waiting needs no answer.
                let _ = waiting.answer.send(Ok(part));
            }
        }
        Err(error) => {
            for waiting in batch {
                let _ = waiting.answer.send(Err(error.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use common::keys::CommentKey;
    use common::model::Comment;
    use common::Id;
    use tokio::sync::oneshot;

    use super::{answer_all, FetchQueue, Fetched, Waiting};

    fn key(n: u64) -> CommentKey {
        let order = Id::parse("order", &format!("O{n:09}")).expect("id");
        CommentKey::new(&order, &Id::parse("product", "P000000001").expect("id"))
    }

    /// A queued fetch of `rows` keys numbered from `id * 1000`, and where its answer arrives.
    fn waiting(id: u64, rows: u64) -> (Waiting, oneshot::Receiver<Fetched>) {
        let (answer, answered) = oneshot::channel();
        (Waiting { id, keys: (0..rows).map(|n| key(id * 1_000 + n)).collect(), answer }, answered)
    }

    fn queue(sizes: &[u64], max_rows: usize) -> FetchQueue {
        let waiting = sizes.iter().enumerate().map(|(id, &rows)| waiting(id as u64, rows).0).collect();
        FetchQueue { waiting, max_rows }
    }

    fn ids(batch: &[Waiting]) -> Vec<u64> {
        batch.iter().map(|waiting| waiting.id).collect()
    }

    #[test]
    fn a_batch_is_the_callers_fetch_then_the_oldest_queued_that_fit() {
        let mut fetches = queue(&[100, 120, 200, 30, 50], 250);
        let batch = fetches.take_batch(1).expect("queued");
        assert_eq!(ids(&batch), vec![1, 0, 3], "120 + 100 + 30 rows; 200 and then 50 would not fit");
        assert_eq!(fetches.waiting.iter().map(|waiting| waiting.id).collect::<Vec<_>>(), vec![2, 4]);
        assert!(fetches.take_batch(0).is_none(), "an earlier call carries fetch 0");
        assert_eq!(ids(&fetches.take_batch(4).expect("queued")), vec![4, 2]);
        assert!(fetches.waiting.is_empty());
    }

    #[test]
    fn a_fetch_larger_than_a_batch_goes_alone() {
        let mut fetches = queue(&[10, 400, 10], 250);
        assert_eq!(ids(&fetches.take_batch(1).expect("queued")), vec![1]);
        assert_eq!(ids(&fetches.take_batch(2).expect("queued")), vec![2, 0]);
    }

    /// A comment told apart by its timestamp.
    fn comment(timestamp: i64) -> Comment {
        serde_json::from_value(serde_json::json!({
            "orderId": "O000000001", "productId": "P000000001", "userId": "U000000001",
            "content": "fine", "timestamp": timestamp,
        }))
        .expect("comment")
    }

    fn timestamps(part: &[Option<Comment>]) -> Vec<Option<i64>> {
        part.iter().map(|comment| comment.as_ref().map(|comment| comment.timestamp)).collect()
    }

    #[tokio::test]
    async fn each_fetch_gets_its_own_part_of_the_answer_or_the_error() {
        let (first, first_answer) = waiting(1, 2);
        let (second, second_answer) = waiting(2, 3);
        // The call's answer for five keys: comments 0, 2 and 4 exist.
        let answer: Vec<Option<Comment>> = (0..5).map(|n| (n % 2 == 0).then(|| comment(n))).collect();
        answer_all(vec![first, second], Ok(answer));
        let first_part = first_answer.await.expect("answered").expect("ok");
        let second_part = second_answer.await.expect("answered").expect("ok");
        assert_eq!(timestamps(&first_part), vec![Some(0), None]);
        assert_eq!(timestamps(&second_part), vec![Some(2), None, Some(4)]);

        let (first, first_answer) = waiting(1, 2);
        let (second, second_answer) = waiting(2, 3);
        answer_all(vec![first, second], Err(common::Error::Unavailable("gateway gone".to_owned())));
        for answered in [first_answer, second_answer] {
            let error = answered.await.expect("answered").expect_err("the call's error");
            assert!(error.is_transient(), "{error}");
        }
    }
}
