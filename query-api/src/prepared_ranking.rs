//! A product's ranking as served ([`Ranking`]): its ranked comments and
//! review summary, with the answers of the `/v1` ranked and summary routes
//! rendered and tagged once, when it is loaded, and the others (the seed's,
//! the one with authors) by the first request for them; each answer is
//! compressed once per coding, by the first request accepting it
//! (`crate::encoding::Prepared`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use common::Id;
use serde::Serialize;
use tokio::sync::OnceCell;

use crate::encoding::{Effort, Prepared};
use crate::views::{Author, RankedComment, RankedPage, ReviewSummaryView, SeedCommentsPage};

/// A product's ranking as served: the ranked comments and the product's review
/// summary, and the full answers of the `/v1` ranked route and of the summary
/// route rendered once when the ranking is loaded.
///
/// Rankings sit in the cache and are read far more often than they change, so
/// a cache hit for the whole ranking (any `limit` of 10 or more) writes
/// prepared bytes, tagged once, instead of serialising ten comments and
/// hashing them again.
#[derive(Debug)]
pub struct Ranking {
    comments: Vec<RankedComment>,
    summary: Option<ReviewSummaryView>,
    v1_body: Option<Arc<Prepared>>,
    summary_body: Option<Arc<Prepared>>,
    /// The seed's answer of the whole ranking, prepared by the first request
    /// for it: only clients of the original Java service ask for it, so
    /// rendering and tagging it on every load would mostly be wasted.
    seed_body: OnceLock<Arc<Prepared>>,
    /// The comments' authors, read the first time a request asks for them
    /// and cached with the ranking: a product page asks on every view. Ten
    /// nicknames at most, weighed ahead ([`Ranking::weight_bytes`]).
    authors: OnceCell<HashMap<Id, Option<Author>>>,
    /// The `/v1` answer with authors (what the review widget asks for),
    /// prepared by the first request for it.
    with_authors_body: OnceLock<Arc<Prepared>>,
    /// Whether this ranking's answers are offered in compressed variants, each
    /// made once (it is cached).
    compress: bool,
    read_at: Instant,
    from_replica: bool,
}

impl Ranking {
    /// A ranking of `comments`, best first, beside the product's `summary`,
    /// read from HBase by a read that began at `read_at`. Its answers are
    /// rendered here and kept with their compressed variants when
    /// `compress` (the ranking is to be cached and served many times);
    /// otherwise each request's is rendered and compressed as it goes.
    pub fn new(
        comments: Vec<RankedComment>,
        summary: Option<ReviewSummaryView>,
        read_at: Instant,
        compress: bool,
    ) -> Ranking {
        // A ranking served once (the cache is off) renders only the answer
        // asked for, when asked.
        let (v1_body, summary_body) = if compress {
            let prepare = |body: Bytes| prepare(body, true);
            // Rendering these plain structs cannot fail; if it ever did, each
            // request would render (and report) on its own.
            (
                render(&RankedPage::of(&comments, summary.as_ref())).ok().map(prepare),
                summary.as_ref().and_then(|summary| render(summary).ok()).map(prepare),
            )
        } else {
            (None, None)
        };
        Ranking {
            comments,
            summary,
            v1_body,
            summary_body,
            seed_body: OnceLock::new(),
            authors: OnceCell::new(),
            with_authors_body: OnceLock::new(),
            compress,
            read_at,
            from_replica: false,
        }
    }

    /// The same ranking, marked as read (in part) from a secondary region
    /// replica when `from_replica`: every answer served from it says so
    /// ([`Ranking::note_origin`]), for as long as it is cached.
    pub fn read_from_replica(self, from_replica: bool) -> Ranking {
        Ranking { from_replica, ..self }
    }

    /// Marks the request serving this ranking as served from a secondary
    /// replica when the ranking was read from one (`common::hbase::note_replica_read`).
    pub fn note_origin(&self) {
        if self.from_replica {
            common::hbase::note_replica_read();
        }
    }

    /// When the HBase read of this ranking began: its age is counted from here.
    pub fn read_at(&self) -> Instant {
        self.read_at
    }

    /// Whether the ranking is younger than `ttl`: the one freshness rule of
    /// the cache, for whole rankings and the summaries taken from them alike.
    pub fn is_fresh(&self, ttl: Duration) -> bool {
        self.read_at.elapsed() < ttl
    }

    /// The bytes this ranking holds, as the ranked-read cache weighs it: the
    /// rendered answers (the `/v1` ranked one and the summary, and the
    /// seed's and the one with authors once kept) with the room for their
    /// compressed variants, the comments
    /// (weighed by their JSON in the `/v1` answer, which spells out every
    /// string they hold), their authors (read later, so weighed ahead at a
    /// nickname's usual size), and a fixed overhead for the structs and the
    /// cache's own entry.
    pub fn weight_bytes(&self) -> u64 {
        const ENTRY_OVERHEAD_BYTES: usize = 1024;
        const AUTHOR_BYTES: usize = 128;
        let rendered = |body: &Option<Arc<Prepared>>| body.as_ref().map_or(0, |prepared| prepared.weight_bytes());
        let comments_json = match &self.v1_body {
            Some(prepared) => prepared.body().len(),
            // Never seen (rendering plain structs does not fail); weigh the worst case.
            None => self.comments.len() * common::store::MAX_CONTENT_BYTES,
        };
        let structs = self.comments.len() * (std::mem::size_of::<RankedComment>() + AUTHOR_BYTES);
        // The answers with authors and the seed's once a request rendered
        // them: the cache weighs the ranking again then (`RankedCache::reweigh`).
        let kept = |body: &OnceLock<Arc<Prepared>>| body.get().map_or(0, |prepared| prepared.weight_bytes());
        let total = rendered(&self.v1_body)
            + kept(&self.with_authors_body)
            + kept(&self.seed_body)
            + rendered(&self.summary_body)
            + comments_json
            + structs
            + ENTRY_OVERHEAD_BYTES;
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// The ranked comments, best first.
    pub fn comments(&self) -> &[RankedComment] {
        &self.comments
    }

    /// The `/v1` answer of the whole ranking with its authors, `body`, as
    /// the first request for it rendered it: kept (with compressed variants
    /// when the ranking is cached) for the requests after it.
    pub fn keep_with_authors_body(&self, body: Bytes) -> Arc<Prepared> {
        Arc::clone(self.with_authors_body.get_or_init(|| prepare(body, self.compress)))
    }

    /// The `/v1` answer of the whole ranking with its authors, once a request rendered it.
    pub fn with_authors_body(&self) -> Option<Arc<Prepared>> {
        self.with_authors_body.get().cloned()
    }

    /// The cell of the comments' authors, filled by the first read that needs them.
    pub fn authors(&self) -> &OnceCell<HashMap<Id, Option<Author>>> {
        &self.authors
    }

    /// The product's review summary; `None` when no run has counted it.
    pub fn summary(&self) -> Option<&ReviewSummaryView> {
        self.summary.as_ref()
    }

    /// The `/v1` answer showing the best `limit` comments and the summary.
    pub fn v1_body(&self, limit: usize) -> Result<Arc<Prepared>, serde_json::Error> {
        match &self.v1_body {
            Some(prepared) if limit >= self.comments.len() => Ok(Arc::clone(prepared)),
            _ => {
                let shown = &self.comments[..limit.min(self.comments.len())];
                render(&RankedPage::of(shown, self.summary.as_ref())).map(|body| Arc::new(Prepared::tagged(body)))
            }
        }
    }

    /// The summary route's answer; `None` when no run has counted the product.
    pub fn summary_body(&self) -> Option<Result<Arc<Prepared>, serde_json::Error>> {
        let summary = self.summary.as_ref()?;
        Some(match &self.summary_body {
            Some(prepared) => Ok(Arc::clone(prepared)),
            None => render(summary).map(|body| Arc::new(Prepared::tagged(body))),
        })
    }

    /// The seed's answer showing the best `limit` comments, rendered now and
    /// kept by nobody: a request for a shorter list than the ranking. The
    /// whole ranking's is [`Ranking::keep_seed_body`]'s.
    pub fn render_seed_body(&self, limit: usize) -> Result<Arc<Prepared>, serde_json::Error> {
        let shown = &self.comments[..limit.min(self.comments.len())];
        render(&SeedCommentsPage::of_ranked(shown)).map(|body| Arc::new(Prepared::tagged(body)))
    }

    /// The seed's answer of the whole ranking, rendered by the first request
    /// for it and kept (with compressed variants when the ranking is cached)
    /// for the requests after it.
    pub fn keep_seed_body(&self) -> Result<Arc<Prepared>, serde_json::Error> {
        if let Some(kept) = self.seed_body() {
            return Ok(kept);
        }
        let body = render(&SeedCommentsPage::of_ranked(&self.comments))?;
        Ok(Arc::clone(self.seed_body.get_or_init(|| prepare(body, self.compress))))
    }

    /// The seed's answer of the whole ranking, once a request rendered it.
    pub fn seed_body(&self) -> Option<Arc<Prepared>> {
        self.seed_body.get().cloned()
    }
}

/// `body` prepared with its variants when `compress`, else only tagged.
fn prepare(body: Bytes, compress: bool) -> Arc<Prepared> {
    Arc::new(if compress { Prepared::compressed(body, Effort::Prepared) } else { Prepared::tagged(body) })
}

fn render(value: &impl Serialize) -> Result<Bytes, serde_json::Error> {
    serde_json::to_vec(value).map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use common::model::Comment;

    use super::*;

    #[test]
    fn a_ranking_is_fresh_for_the_ttl_from_the_start_of_its_read() {
        let read_at = Instant::now() - Duration::from_secs(5);
        let ranking = Ranking::new(Vec::new(), None, read_at, false);
        assert!(ranking.is_fresh(Duration::from_secs(6)));
        assert!(!ranking.is_fresh(Duration::from_secs(5)));
        assert!(!ranking.is_fresh(Duration::ZERO), "a zero TTL keeps nothing fresh");
    }

    fn comment() -> Comment {
        serde_json::from_value(serde_json::json!({
            "orderId": "ORDER00001", "productId": "PRODUCT001", "userId": "USER000001",
            "content": "fine", "timestamp": 1_700_000_000_000_i64, "edited": false
        }))
        .expect("comment")
    }

    #[test]
    fn prepared_ranking_bodies_equal_freshly_rendered_ones() {
        let ranked: Vec<RankedComment> =
            (1..=3).map(|rank| RankedComment::new(comment(), rank, Some(1.0 / f64::from(rank)))).collect();
        let product = common::Id::parse("productId", "PRODUCT001").expect("id");
        let counted = common::summary::ReviewSummary { rated: [0, 0, 0, 0, 3], ..Default::default() };
        let summary = ReviewSummaryView::new(&product, &counted, 1, true);
        let ranking = Ranking::new(ranked.clone(), Some(summary.clone()), Instant::now(), true);
        let parse = |prepared: Arc<Prepared>| {
            assert_eq!(prepared.etag(), &crate::etag::entity_tag(prepared.body()), "tagged with its own tag");
            serde_json::from_slice::<serde_json::Value>(prepared.body()).expect("json")
        };
        let full = parse(ranking.v1_body(20).expect("v1"));
        assert_eq!(full, serde_json::to_value(RankedPage::of(&ranked, Some(&summary))).expect("json"));
        assert_eq!(full["summary"]["count"], 3);
        let alone = parse(ranking.summary_body().expect("a summary").expect("rendered"));
        assert_eq!(alone, serde_json::to_value(&summary).expect("json"));
        assert!(Ranking::new(ranked.clone(), None, Instant::now(), false).summary_body().is_none());
        assert!(parse(Ranking::new(ranked.clone(), None, Instant::now(), false).v1_body(20).expect("v1"))["summary"]
            .is_null());
        assert_eq!(full["comments"].as_array().map(Vec::len), Some(3));
        assert!(full["nextCursor"].is_null());
        let two = parse(ranking.v1_body(2).expect("v1"));
        assert_eq!(two["comments"].as_array().map(Vec::len), Some(2));
        assert_eq!(two["summary"], full["summary"], "a shorter page carries the same summary");
        assert_eq!(two["comments"][1]["rank"], 2);
        let seed = parse(ranking.render_seed_body(1).expect("seed"));
        assert_eq!(seed["comments"].as_array().map(Vec::len), Some(1));
        assert!(seed["comments"][0].get("rank").is_none());
        assert!(seed["nextIndexKey"].is_null());
        assert_eq!(parse(ranking.render_seed_body(100).expect("seed"))["comments"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn the_seed_answer_is_prepared_by_the_first_request_for_it_and_weighed_from_then_on() {
        // Enough comments for the answer to be compressed (a kilobyte or more).
        let ranked: Vec<RankedComment> =
            (1..=10).map(|rank| RankedComment::new(comment(), rank, Some(1.0 / f64::from(rank)))).collect();
        let ranking = Ranking::new(ranked.clone(), None, Instant::now(), true);
        let loaded = ranking.weight_bytes();

        assert!(ranking.seed_body().is_none(), "not rendered before a request asks for it");
        let kept = ranking.keep_seed_body().expect("rendered");
        assert!(kept.offers_variants(), "a cached ranking's seed answer is offered compressed once kept");
        let rendered =
            Ranking::new(ranked.clone(), None, Instant::now(), false).render_seed_body(10).expect("rendered");
        assert_eq!(kept.body(), rendered.body(), "the seed's answer of the whole ranking");
        assert_eq!(kept.etag(), rendered.etag());
        let uncached = Ranking::new(ranked, None, Instant::now(), false).keep_seed_body().expect("rendered");
        assert!(!uncached.offers_variants(), "a ranking served once (no cache) is not compressed ahead");
        assert_eq!(ranking.weight_bytes(), loaded + kept.weight_bytes() as u64, "weighed once kept, not before");

        let again = ranking.keep_seed_body().expect("kept");
        assert!(Arc::ptr_eq(&kept, &again), "a later request finds it kept");
        assert!(Arc::ptr_eq(&kept, &ranking.seed_body().expect("kept")));
        assert!(!Arc::ptr_eq(&kept, &ranking.render_seed_body(9).expect("rendered")), "a shorter one is rendered");
        assert_eq!(ranking.weight_bytes(), loaded + kept.weight_bytes() as u64);
    }
}
