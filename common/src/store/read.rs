//! [`ReadStore`]: the reads query-api serves, and nothing that writes.
//!
//! "query-api never writes" is kept by the type, not by convention: the
//! service's state holds a `ReadStore`, which wraps a [`Store`] it never hands
//! out, so a write cannot be called from the service even by mistake.

use super::stars::{StarList, StarListPage};
use super::summaries::ListedSummary;
use super::{SkipReason, Store, StoredRanking, WalkPage, WalkRequest};
use crate::cursor::ViewPosition;
use crate::error::Result;
use crate::hbase::Hbase;
use crate::ids::Id;
use crate::keys::CommentKey;
use crate::model::{Comment, User};
use crate::tables::Tables;

/// Read-only typed access to one set of tables; cheap to clone and share.
///
/// Each method is the [`Store`] method of the same name. A write does not
/// compile, whatever features `common` is built with:
///
/// ```compile_fail
/// # async fn write(store: common::store::ReadStore, user: common::model::User) {
/// store.put_records(&[user]).await.unwrap();
/// # }
/// ```
///
/// nor does reaching for the store or the pool inside it:
///
/// ```compile_fail
/// # fn pool(store: common::store::ReadStore) {
/// let _ = store.store.hbase();
/// # }
/// ```
///
/// while the same write through a [`Store`] does:
///
/// ```no_run
/// # async fn write(store: common::store::Store, user: common::model::User) {
/// store.put_records(&[user]).await.unwrap();
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ReadStore {
    store: Store,
}

impl ReadStore {
    /// A read-only store over `tables` reached through `hbase`.
    pub fn new(hbase: Hbase, tables: Tables) -> ReadStore {
        ReadStore { store: Store::new(hbase, tables) }
    }

    /// The tables this store reads.
    pub fn tables(&self) -> &Tables {
        self.store.tables()
    }

    /// Whether HBase is busy now ([`Hbase::busy`]): while it is, the service must shed.
    pub fn hbase_busy(&self) -> bool {
        self.store.hbase().busy()
    }

    /// How long HBase operations take lately over their usual time
    /// ([`Hbase::latency_ratio`]).
    pub fn hbase_latency_ratio(&self) -> f64 {
        self.store.hbase().latency_ratio()
    }

    /// HBase operations running now ([`Hbase::in_flight`]).
    pub fn hbase_operations(&self) -> usize {
        self.store.hbase().in_flight()
    }

    /// The connections of a gateway's pool: how many HBase operations run at once.
    pub fn hbase_connections(&self) -> usize {
        usize::try_from(self.store.hbase().config().pool_size).unwrap_or(usize::MAX).max(1)
    }

    /// Whether pages can be read: one row of the rankings table, read as a
    /// page reads (with the pool's consistency, retried like any read). It
    /// is what a service's readiness asks, so it must not ask more than the
    /// pages do: listing tables would reach the master, which no page read
    /// needs, and a master restarting would take every replica of the
    /// service out of its load balancer while the pages could be served.
    /// A missing table fails it ([`crate::Error::NotFound`]).
    pub async fn check_ready(&self) -> Result<()> {
        let table = self.store.tables().product_comment_rank.clone();
        // No ranking row starts with a zero byte (every one starts with a
        // product id), and HBase refuses an empty row key.
        self.store.page_values(&table, vec![b"\0readiness".to_vec()]).await.map(drop)
    }

    /// One page of a walk of an index ([`Store::walk`]).
    pub async fn walk(&self, request: WalkRequest) -> Result<WalkPage> {
        self.store.walk(request).await
    }

    /// One comment by key, its absence confirmed by the primary ([`Store::get_comment`]).
    pub async fn get_comment(&self, key: &CommentKey) -> Result<Option<Comment>> {
        self.store.get_comment(key).await
    }

    /// Comments by key in one multi-get ([`Store::get_comments`]).
    pub async fn get_comments(&self, keys: &[CommentKey]) -> Result<Vec<Option<Comment>>> {
        self.store.get_comments(keys).await
    }

    /// `product`'s ranking, one whole ranking best first ([`Store::ranking`]).
    pub async fn ranking(&self, product: &Id) -> Result<StoredRanking> {
        self.store.ranking(product).await
    }

    /// The rankings of `products`, records in one multi-get ([`Store::rankings`]).
    pub async fn rankings(&self, products: &[Id]) -> Result<Vec<StoredRanking>> {
        self.store.rankings(products).await
    }

    /// A page of a star-filtered or rating-ordered list of a product's
    /// reviews ([`Store::star_list_page`]).
    pub async fn star_list_page(
        &self,
        product: &Id,
        list: StarList,
        position: ViewPosition,
        limit: usize,
        budget_rows: usize,
    ) -> Result<StarListPage> {
        self.store.star_list_page(product, list, position, limit, budget_rows).await
    }

    /// `product`'s reviews newer than `as_of_ms`, counted now
    /// ([`Store::summary_after`]).
    pub async fn summary_after(&self, product: &Id, as_of_ms: Option<i64>, max_rows: usize) -> Result<ListedSummary> {
        self.store.summary_after(product, as_of_ms, max_rows).await
    }

    /// [`Store::summary_after`] for many products in one scan ([`Store::summaries_after`]).
    pub async fn summaries_after(&self, asked: &[(Id, Option<i64>)], max_rows: usize) -> Result<Vec<ListedSummary>> {
        self.store.summaries_after(asked, max_rows).await
    }

    /// The users `ids` name, in one multi-get, lined up with `ids`: `None`
    /// where the row is missing or does not decode ([`Store::get_records`]).
    pub async fn users(&self, ids: &[Id]) -> Result<Vec<Option<User>>> {
        self.store.get_records(ids.iter().map(|id| id.as_bytes().to_vec()).collect()).await
    }

    /// The ranking records of `products` in one multi-get ([`Store::ranking_records`]).
    pub async fn ranking_records(&self, products: &[Id]) -> Result<Vec<Option<StoredRanking>>> {
        self.store.ranking_records(products).await
    }

    /// Counts and logs a row the caller skipped ([`Store::count_skipped_row`]).
    pub fn count_skipped_row(&self, table: &str, reason: SkipReason, key: &[u8], detail: &dyn std::fmt::Display) {
        self.store.count_skipped_row(table, reason, key, detail);
    }
}

impl Store {
    /// A read-only handle on the same tables and pool, for code that must not
    /// write (a query service built from a store that also seeds its tables).
    pub fn reader(&self) -> ReadStore {
        ReadStore { store: self.clone() }
    }
}
