//! The last good answer of each page read, kept so that a page served
//! before is still served when HBase fails (`stale-if-error`, RFC 5861).
//!
//! Kept: every read a frontend makes of comments, each per everything that
//! shapes its body: a product's ranked answers (`/v1` and seed), its summary,
//! `/v1/summaries` for one list of products, any page of a product's
//! comments (newest first, filtered by star or ordered by rating, first or
//! by cursor), any page of a user's timeline (`/v1` and seed's first), a
//! single review, and a server-rendered view. An answer an hour old is far
//! better than a 503 on the page that sells the product: rankings and
//! summaries change once a night and a product's or user's reviews change
//! slowly.
//!
//! The bound is in bytes. Past it, moka's TinyLFU admission weighs how
//! often a new answer is read against the answer it would evict, so
//! answers read rarely (a deep cursor page) give way to those read often (a
//! product page's first reads).
//!
//! Each kept answer carries the moment the HBase read behind it began, and a
//! kept answer is only ever replaced by one whose read began later, so two
//! reads finishing out of order never leave the older answer in place.
//!
//! This module does no I/O: [`crate::routes`] answers from it when the store
//! fails.

use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use common::keys::CommentKey;
use common::store::stars::StarList;
use common::Id;
use moka::ops::compute::Op;
use moka::sync::Cache;

use crate::encoding::Prepared;
use crate::telemetry;
use crate::widget::ViewKey;

/// The routes whose answers are kept, as their templates: `reviews_api_stale_answers_total`
/// starts at zero for each, so a rate over it exists before the first stale answer.
pub const KEPT_ROUTES: [&str; 10] = [
    "/v1/products/{productId}/comments",
    "/v1/products/{productId}/comments/ranked",
    "/v1/products/{productId}/comments/summary",
    "/v1/summaries",
    "/v1/users/{userId}/comments",
    "/v1/reviews/{reviewId}",
    "/v1/products/{productId}/reviews.html",
    "/product/{productId}/comments/latest",
    "/product/{productId}/comments/ranked",
    "/user/{userId}/comments/latest",
];

/// One read whose answer is kept: its route and everything that shapes its body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PageRead {
    /// `/v1/products/{id}/comments/ranked`.
    Ranked { product: Id, limit: usize, authors: bool },
    /// `/product/{id}/comments/ranked`.
    SeedRanked { product: Id, limit: usize },
    /// `/v1/products/{id}/comments/summary`.
    Summary { product: Id },
    /// `/v1/summaries` for these products, in this order.
    Summaries { products: Arc<[Id]> },
    /// `/v1/products/{id}/comments`: a page of the newest-first list
    /// (`list` `None`) or of a filtered or rating-ordered one, the first
    /// (`cursor` `None`) or the one the cursor names.
    ProductPage { product: Id, list: Option<StarList>, cursor: Option<Box<str>>, limit: usize, authors: bool },
    /// `/v1/users/{id}/comments`, the first page or the one the cursor names.
    UserPage { user: Id, cursor: Option<Box<str>>, limit: usize, authors: bool },
    /// `/v1/reviews/{id}`.
    Review { review: CommentKey, authors: bool },
    /// `/product/{id}/comments/latest`.
    SeedLatest { product: Id, limit: usize },
    /// `/user/{id}/comments/latest`.
    SeedUserLatest { user: Id, limit: usize },
    /// `/v1/products/{id}/reviews.html`.
    Widget(ViewKey),
}

impl PageRead {
    /// The bytes the key holds beyond its own size (the products of a
    /// summaries list, a cursor).
    fn heap_bytes(&self) -> usize {
        match self {
            PageRead::Summaries { products } => std::mem::size_of_val(&**products),
            PageRead::ProductPage { cursor, .. } | PageRead::UserPage { cursor, .. } => {
                cursor.as_ref().map_or(0, |cursor| cursor.len())
            }
            PageRead::Widget(view) => view.heap_bytes(),
            _ => 0,
        }
    }
}

/// An answer as served: its body and `Content-Type`, its `Cache-Control`,
/// and when the HBase read behind it began.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The body (JSON, or the HTML of a server-rendered widget) with its
    /// `ETag`, and its compressed variants when it is served many times (a
    /// cached ranking's answer, a rendered view).
    pub body: Arc<Prepared>,
    /// The body's `Content-Type` ([`JSON`] or [`HTML`]).
    pub content_type: &'static str,
    /// The answer's `Cache-Control`, when it has one.
    pub cache_control: Option<HeaderValue>,
    /// When the HBase read behind the body began: the order in which answers replace each other.
    pub read_at: Instant,
}

/// The `Content-Type` of a JSON answer.
pub const JSON: &str = "application/json";
/// The `Content-Type` of an HTML answer.
pub const HTML: &str = "text/html; charset=utf-8";

/// The last good answers, bounded in bytes and kept at most
/// `--stale-if-error-secs` after they were last replaced.
///
/// A synchronous cache: every kept answer is looked up on its route's every
/// request (a cached ranking's answer only to find it kept already), and a
/// lookup that never waits needs no future around it.
#[derive(Debug, Clone)]
pub struct LastGood {
    answers: Cache<PageRead, Arc<Answer>>,
    keep_for: Duration,
    /// `reviews_api_last_good_bytes`, set when an answer is kept.
    bytes: metrics::Gauge,
    /// Hashes a read into the key its kept bytes remember ([`Prepared::kept_for`]).
    read_keys: foldhash::fast::RandomState,
}

/// What one kept answer costs beyond its body and key: the cache's entry, the
/// `Arc`, the struct and the header.
const ENTRY_OVERHEAD_BYTES: usize = 512;

impl LastGood {
    /// Keeps answers up to `keep_for` and `max_bytes` in all; `None` when
    /// `keep_for` is zero (no stale answers).
    pub fn new(keep_for: Duration, max_bytes: u64) -> Option<LastGood> {
        if keep_for.is_zero() {
            return None;
        }
        let answers = Cache::builder()
            .name("last-good")
            .weigher(|read: &PageRead, answer: &Arc<Answer>| {
                let bytes = answer.body.weight_bytes() + read.heap_bytes() + ENTRY_OVERHEAD_BYTES;
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            .max_capacity(max_bytes.max(1))
            .time_to_live(keep_for)
            .build();
        Some(LastGood {
            answers,
            keep_for,
            bytes: metrics::gauge!(telemetry::LAST_GOOD_BYTES),
            read_keys: foldhash::fast::RandomState::default(),
        })
    }

    /// How long an answer is kept after it was last replaced.
    pub fn keep_for(&self) -> Duration {
        self.keep_for
    }

    /// Keeps `answer` as `read`'s last good one, unless the one kept comes
    /// from a read that began as late or later (the same cached ranking
    /// served again, or a read that overtook this one).
    ///
    /// The common case, a cached answer served again, costs no lookup: its
    /// bytes remember the read they were last kept for. A kept answer is
    /// then not touched as it is served, and may be evicted as the least
    /// used before it is replaced; its bytes are served at most as long as
    /// the cache that holds them keeps them (a ranking's answers
    /// `--ranked-cache-ttl-ms`, 10 s by default, a rendered view twice
    /// that), and the next bytes read for it are kept again.
    pub fn remember(&self, read: PageRead, answer: &Answer) {
        // Never 0, the mark of bytes never kept.
        let read_key = self.read_keys.hash_one(&read) | 1;
        if answer.body.kept_for(read_key) {
            return;
        }
        // A lookup first: an answer kept as late needs no copy of it, nor
        // the entry's lock; the compute below checks again under that lock.
        let kept_as_late = self.answers.get(&read).is_some_and(|kept| kept.read_at >= answer.read_at);
        if !kept_as_late {
            let newer = Arc::new(answer.clone());
            self.answers.entry(read).and_compute_with(|kept| match kept {
                Some(kept) if kept.value().read_at >= newer.read_at => Op::Nop,
                _ => Op::Put(newer),
            });
            self.bytes.set(self.answers.weighted_size() as f64);
        }
        answer.body.note_kept_for(read_key);
    }

    /// The last good answer of `read`, if one is kept.
    pub fn recall(&self, read: &PageRead) -> Option<Arc<Answer>> {
        self.answers.get(read)
    }

    /// The bytes the kept answers weigh now (trailing the truth by the few
    /// most recent inserts, as moka weighs them in the background).
    pub fn weighted_bytes(&self) -> u64 {
        self.answers.weighted_size()
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;

    use super::*;

    fn answer(body: &'static str, read_at: Instant) -> Answer {
        Answer {
            body: Arc::new(Prepared::tagged(Bytes::from_static(body.as_bytes()))),
            content_type: JSON,
            cache_control: None,
            read_at,
        }
    }

    fn product() -> Id {
        Id::parse("productId", "PRODUCT001").expect("id")
    }

    #[test]
    fn an_answer_is_only_replaced_by_one_read_later() {
        let kept = LastGood::new(Duration::from_secs(60), 1 << 20).expect("on");
        let read = PageRead::Summary { product: product() };
        let earlier = Instant::now();
        let later = earlier + Duration::from_millis(5);
        kept.remember(read.clone(), &answer("later", later));
        kept.remember(read.clone(), &answer("earlier, finished last", earlier));
        assert_eq!(kept.recall(&read).expect("kept").body.body(), "later");
        let latest = later + Duration::from_millis(5);
        kept.remember(read.clone(), &answer("latest", latest));
        assert_eq!(kept.recall(&read).expect("kept").body.body(), "latest");
        let other = PageRead::ProductPage { product: product(), list: None, cursor: None, limit: 20, authors: false };
        assert!(kept.recall(&other).is_none(), "each read keeps its own answer");
    }

    #[test]
    fn bytes_served_again_are_kept_for_each_read_and_never_over_a_newer_answer() {
        let kept = LastGood::new(Duration::from_secs(60), 1 << 20).expect("on");
        let (summary, latest) = (
            PageRead::Summary { product: product() },
            PageRead::ProductPage { product: product(), list: None, cursor: None, limit: 20, authors: false },
        );
        let earlier = answer("one body, two reads", Instant::now());
        kept.remember(summary.clone(), &earlier);
        kept.remember(latest.clone(), &earlier);
        assert!(kept.recall(&latest).is_some(), "the bytes kept for one read are kept for another too");
        let newer = answer("newer", earlier.read_at + Duration::from_millis(5));
        kept.remember(summary.clone(), &newer);
        // The earlier bytes, served again (a request that took them before
        // the newer read finished), remember being kept for this read.
        kept.remember(summary.clone(), &earlier);
        assert_eq!(kept.recall(&summary).expect("kept").body.body(), "newer");
        assert_eq!(kept.recall(&latest).expect("kept").body.body(), "one body, two reads");
    }

    #[test]
    fn each_page_of_each_list_keeps_its_own_answer() {
        use common::store::stars::CommentOrder;
        let kept = LastGood::new(Duration::from_secs(60), 1 << 20).expect("on");
        let page = |list: Option<StarList>, cursor: Option<&str>| PageRead::ProductPage {
            product: product(),
            list,
            cursor: cursor.map(Box::from),
            limit: 20,
            authors: false,
        };
        let by_rating = Some(StarList { stars: None, order: CommentOrder::RatingDesc });
        let reads =
            [page(None, None), page(None, Some("second")), page(by_rating, None), page(by_rating, Some("second"))];
        let read_at = Instant::now();
        for (number, read) in reads.iter().enumerate() {
            let body = Bytes::from(format!("page {number}"));
            let answer =
                Answer { body: Arc::new(Prepared::tagged(body)), content_type: JSON, cache_control: None, read_at };
            kept.remember(read.clone(), &answer);
        }
        for (number, read) in reads.iter().enumerate() {
            assert_eq!(kept.recall(read).expect("kept").body.body(), format!("page {number}").as_bytes(), "{read:?}");
        }
    }

    #[test]
    fn zero_keeps_nothing() {
        assert!(LastGood::new(Duration::ZERO, 1 << 20).is_none());
    }

    #[test]
    fn an_answer_is_kept_no_longer_than_stale_if_error_secs_after_it_was_last_replaced() {
        let keep_for = Duration::from_millis(200);
        let kept = LastGood::new(keep_for, 1 << 20).expect("on");
        let read = PageRead::Summary { product: product() };
        kept.remember(read.clone(), &answer("kept", Instant::now()));
        assert!(kept.recall(&read).is_some());
        std::thread::sleep(keep_for * 2);
        assert!(kept.recall(&read).is_none(), "gone once --stale-if-error-secs has passed");
    }

    #[test]
    fn the_answers_kept_weigh_no_more_than_the_byte_bound() {
        let large = Answer {
            body: Arc::new(Prepared::tagged(Bytes::from(vec![b'x'; 10_000]))),
            content_type: JSON,
            cache_control: None,
            read_at: Instant::now(),
        };
        let max_bytes = 50_000;
        let kept = LastGood::new(Duration::from_secs(60), max_bytes).expect("on");
        let reads: Vec<PageRead> = (1..=20)
            .map(|number| PageRead::ProductPage {
                product: Id::parse("productId", &format!("PRODUCT{number:03}")).expect("id"),
                list: None,
                cursor: None,
                limit: 20,
                authors: false,
            })
            .collect();
        for read in &reads {
            kept.remember(read.clone(), &large);
        }
        kept.answers.run_pending_tasks();
        assert!(kept.weighted_bytes() <= max_bytes, "{} bytes kept", kept.weighted_bytes());
        let still_kept = reads.iter().filter(|read| kept.recall(read).is_some()).count();
        assert!((1..=4).contains(&still_kept), "about four answers of 10 KB fit in 50 KB, {still_kept} kept");
    }
}
