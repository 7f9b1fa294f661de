//! The first views rendered lately ([`RenderedViews`]), each kept beside the
//! ranking it shows, so a product page served again costs a lookup, not a
//! rendering and a hash.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use common::keys::MAX_RANK;
use common::Id;

use super::messages::Lang;
use crate::encoding::{Effort, Prepared};

/// What shapes a rendered first view besides the ranking: the product, the
/// language, the ranked reviews shown and the name its JSON-LD gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    /// The product.
    pub product: Id,
    /// The language shown.
    pub lang: Lang,
    /// The most ranked reviews shown.
    pub limit: usize,
    /// The product's name, for its JSON-LD.
    pub name: Option<Arc<str>>,
}

impl ViewKey {
    /// The view of `product` in `lang` with at most `limit` ranked reviews,
    /// named `name`. A ranking holds at most [`MAX_RANK`] reviews, so any
    /// larger limit is the same view, kept once.
    pub fn new(product: Id, lang: Lang, limit: usize, name: Option<&str>) -> ViewKey {
        ViewKey { product, lang, limit: limit.min(usize::from(MAX_RANK)), name: name.map(Arc::from) }
    }

    /// The bytes the key holds beyond its own size.
    pub fn heap_bytes(&self) -> usize {
        self.name.as_deref().map_or(0, str::len)
    }
}

/// A first view as rendered: its HTML with its `ETag` and compressed
/// variants, and the read of the ranking it shows.
#[derive(Debug)]
pub struct Rendered {
    /// The HTML fragment, prepared once.
    pub prepared: Arc<Prepared>,
    /// When the read of the ranking it shows began.
    pub ranking_read_at: Instant,
}

/// The first views rendered lately, each kept while the ranking it shows is
/// the one the ranked-read cache holds: bounded in bytes, and never older
/// than two of that cache's TTLs (how long it keeps a ranking).
#[derive(Debug, Clone)]
pub struct RenderedViews {
    views: Option<moka::sync::Cache<ViewKey, Arc<Rendered>>>,
}

impl RenderedViews {
    /// Views kept up to `max_bytes` in all, for `ranking_ttl`; none when
    /// rankings are not cached (`ranking_ttl` zero).
    pub fn new(ranking_ttl: Duration, max_bytes: u64) -> RenderedViews {
        let views = (!ranking_ttl.is_zero()).then(|| {
            moka::sync::Cache::builder()
                .name("rendered-views")
                .weigher(|key: &ViewKey, view: &Arc<Rendered>| {
                    u32::try_from(view.prepared.weight_bytes() + key.heap_bytes() + 256).unwrap_or(u32::MAX)
                })
                .max_capacity(max_bytes.max(1))
                .time_to_live(ranking_ttl.saturating_mul(2))
                .build()
        });
        RenderedViews { views }
    }

    /// The view of `key` kept, if it was rendered from the ranking read at `ranking_read_at`.
    pub fn get(&self, key: &ViewKey, ranking_read_at: Instant) -> Option<Arc<Rendered>> {
        self.views.as_ref()?.get(key).filter(|view| view.ranking_read_at == ranking_read_at)
    }

    /// Keeps `body`, the view of `key` rendered from the ranking read at
    /// `ranking_read_at`, with its `ETag` and (when views are kept, to be
    /// served many times) its compressed variants.
    pub fn keep(&self, key: ViewKey, body: Bytes, ranking_read_at: Instant) -> Arc<Rendered> {
        let prepared =
            if self.views.is_some() { Prepared::compressed(body, Effort::Prepared) } else { Prepared::tagged(body) };
        let view = Arc::new(Rendered { prepared: Arc::new(prepared), ranking_read_at });
        if let Some(views) = &self.views {
            views.insert(key, Arc::clone(&view));
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_view_is_reused_only_for_the_ranking_it_was_rendered_from() {
        let key = ViewKey {
            product: Id::parse("productId", "PRODUCT001").expect("id"),
            lang: Lang::Ko,
            limit: 10,
            name: None,
        };
        let (read_at, reloaded_at) = (Instant::now(), Instant::now() + Duration::from_millis(1));
        let views = RenderedViews::new(Duration::from_secs(10), 1 << 20);
        let kept = views.keep(key.clone(), Bytes::from_static(b"<p>first</p>"), read_at);
        assert_eq!(kept.prepared.etag(), &crate::etag::entity_tag(b"<p>first</p>"));
        assert_eq!(
            views.get(&key, read_at).map(|view| view.prepared.body().clone()),
            Some(kept.prepared.body().clone())
        );
        assert!(views.get(&key, reloaded_at).is_none(), "a reloaded ranking is rendered again");
        assert!(views.get(&ViewKey { lang: Lang::En, ..key.clone() }, read_at).is_none());
        let uncached = RenderedViews::new(Duration::ZERO, 1 << 20);
        uncached.keep(key.clone(), Bytes::from_static(b"<p>first</p>"), read_at);
        assert!(uncached.get(&key, read_at).is_none(), "nothing is kept while rankings are not cached");
    }
}
