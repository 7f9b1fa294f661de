//! Typed access to the tables: records, index pages, rank slots, and the write path.
//!
//! [`Store`] reads and writes; the ranker and the admin tools hold one.
//! [`ReadStore`] offers only the reads query-api serves, so the service cannot
//! write even by mistake: it holds no value that has a write method.
//!
//! [`Store`] turns rows into models and models into rows, and is where the
//! "survive what a real table holds" rules live: an index row with a key of the
//! wrong layout, a value that is not a comment key, a comment that is gone or
//! does not decode: each is skipped, counted in
//! `reviews_skipped_rows_total{table,reason}` and logged, never an error.

pub mod changes;
mod index_check;
pub mod lease;
pub mod listing;
pub mod products;
mod rank;
mod read;
pub mod regions;
pub mod runs;
mod star_marks;
pub mod stars;
pub mod summaries;
mod walk;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

pub use index_check::{IndexCheckOptions, IndexCheckReport, MissingIndex, MissingIndexRow};
pub use rank::{ProductRanking, RankSlot, StoredRanking};
pub use read::ReadStore;
pub use walk::{WalkPage, WalkRequest};
pub use write::{NewComment, MAX_CONTENT_BYTES};

use crate::error::{Error, Result};
use crate::hbase::{Hbase, Retry, Row, RowMutation, ScanSpec, COLUMN_STARS, COLUMN_VALUE};
use crate::ids::Id;
use crate::keys::{self, CommentKey};
use crate::model::{Comment, Record};
use crate::tables::Tables;

/// Rows fetched per round trip when paging through an index.
const INDEX_PAGE_ROWS: usize = 1_000;

/// Typed access to one set of tables; cheap to clone and share.
#[derive(Debug, Clone)]
pub struct Store {
    hbase: Hbase,
    tables: Arc<Tables>,
}

/// Which index a page comes from; decides how its keys are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// `user-comment`: userId revTs [tie].
    User,
    /// `product-comment`: productId `c` revTs revLen [tie].
    Product,
}

/// One index row: where it sits, whose it is, and the comment it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The index the row belongs to.
    pub kind: IndexKind,
    /// The product (`product-comment`) or user (`user-comment`) the row is
    /// filed under: the id its key starts with.
    pub owner: Id,
    /// The index row's key.
    pub index_key: Vec<u8>,
    /// The timestamp in the index key: the comment's, unless the row is stale.
    pub timestamp_ms: i64,
    /// The comment's row key (the index row's value).
    pub comment: CommentKey,
    /// The star mark of a `product-comment` row (`cf:r`, see [`stars`]), when
    /// the read asked for it and the row has a valid one.
    pub star_mark: Option<u8>,
}

impl IndexEntry {
    /// Whether this row is the one that lists `comment`, rather than a stale
    /// row left by an overwrite.
    ///
    /// The original Java service overwrote a comment posted twice for one
    /// order and product, and left the first post's index rows pointing at the
    /// second post. Only the row whose timestamp is the comment's own lists it:
    /// a rule each page applies alone, so a walk shows the comment once however
    /// far apart its rows fall. (The content length in a product key cannot be
    /// used: an edit keeps the key, and Java counts a lone surrogate as one byte.)
    pub fn lists(&self, comment: &Comment) -> bool {
        self.comment == comment.row_key() && self.timestamp_ms == comment.timestamp
    }

    /// Whether `other` names the same comment at the same millisecond: two such
    /// rows (a double post within one millisecond) are always neighbours.
    fn same_listing(&self, other: &IndexEntry) -> bool {
        self.comment == other.comment && self.timestamp_ms == other.timestamp_ms
    }
}

/// A page of an index, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexPage {
    /// The page's entries, in key order (newest first).
    pub entries: Vec<IndexEntry>,
    /// The key of the first row after this page, if there is one.
    pub next: Option<Vec<u8>>,
}

/// Decodes a record read from `table`; one that does not decode is [`Error::BadData`].
fn decode_record<R: Record>(table: &str, value: &[u8]) -> Result<R> {
    R::from_json(value).map_err(|error| Error::BadData {
        table: table.to_owned(),
        reason: format!("{} does not decode: {error}", R::KIND),
    })
}

/// Why a row was skipped: the `reason` label of `reviews_skipped_rows_total`.
///
/// One enum, so every place that skips a row uses the same few label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum SkipReason {
    /// The row key does not have the table's layout.
    BadKey,
    /// The row has no `cf:q` cell (a rank slot or index row without its value).
    NoValue,
    /// The `cf:q` value is not what the table stores (say, not a comment key).
    BadValue,
    /// An index row or rank slot names a comment that is gone.
    Missing,
    /// The comment's JSON names another row than the one it is stored in.
    KeyMismatch,
    /// The stored JSON does not decode.
    BadJson,
    /// A product's rank slot or `product-comment` row names a comment of
    /// another product.
    OtherProduct,
    /// A `user-comment` row names a comment of another user.
    OtherUser,
    /// A rank slot names a comment a better slot of the product names too:
    /// slots of two rankings read at once, for a product with no ranking record.
    RepeatedSlot,
    /// An index row left pointing at a comment that was overwritten by a later
    /// post (the original Java service's double post); the row at the
    /// comment's own timestamp lists it instead.
    StaleIndex,
    /// The key's leading id is not ASCII: the original Java service stored a
    /// ten-character id such as ten Hangul syllables as a 30-byte key.
    MultibyteId,
}

impl SkipReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Counts a skipped row in `reviews_skipped_rows_total{table, reason}` and logs
/// it. `table` is the full name read; the label is the table's name without
/// the deployment's prefix, so dashboards and alerts read the same everywhere.
pub(crate) fn skip_row(tables: &Tables, table: &str, reason: SkipReason, key: &[u8], detail: &dyn std::fmt::Display) {
    let label = tables.unprefixed(table);
    metrics::counter!(crate::telemetry::SKIPPED_ROWS, "table" => label.to_owned(), "reason" => reason.as_str())
        .increment(1);
    tracing::warn!(table = label, reason = reason.as_str(), key = %escape(key), %detail, "skipped a row");
}

/// Renders a row key for a log line: printable ASCII as is, other bytes as `\xNN`.
pub fn escape(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

impl Store {
    /// A store over `tables` reached through `hbase`.
    pub fn new(hbase: Hbase, tables: Tables) -> Store {
        Store { hbase, tables: Arc::new(tables) }
    }

    /// The pool this store uses: raw access, for the store's own modules and,
    /// with the `test-support` feature, the integration tests.
    #[cfg_attr(feature = "test-support", visibility::make(pub))]
    pub(crate) fn hbase(&self) -> &Hbase {
        &self.hbase
    }

    /// The tables this store reads and writes.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Writes records (users, sellers, products, orders) in one batch, replacing
    /// any with the same id.
    pub async fn put_records<R: Record>(&self, records: &[R]) -> Result<()> {
        let table = R::table(&self.tables).to_owned();
        let mutations: Vec<RowMutation> = records
            .iter()
            .map(|record| RowMutation::Put {
                key: record.row_key(),
                cells: vec![(COLUMN_VALUE.to_vec(), record.to_json())],
            })
            .collect();
        self.hbase.run(Retry::Idempotent, move |connection| connection.mutate_rows(&table, mutations.clone())).await
    }

    /// Reads one record; a row that does not decode is [`Error::BadData`].
    pub async fn get_record<R: Record>(&self, key: Vec<u8>) -> Result<Option<R>> {
        let table = R::table(&self.tables).to_owned();
        let Some(value) = self.stored_value(&table, key).await? else {
            return Ok(None);
        };
        decode_record(&table, &value).map(Some)
    }

    /// Counts and logs a row that a reader of this store skipped (see
    /// [`SkipReason`]); for readers outside the store, such as query-api.
    pub fn count_skipped_row(&self, table: &str, reason: SkipReason, key: &[u8], detail: &dyn std::fmt::Display) {
        skip_row(&self.tables, table, reason, key, detail);
    }

    /// The bytes in `cf:q` of each of `keys` in `table` that has them, as
    /// stored, by row key; in one multi-get. For comparing rows with what a
    /// writer means to write (a post's check for an existing review, the demo
    /// loader's check of an earlier load).
    /// Always from the primaries (strong), whatever the pool's page reads
    /// ask for: a writer's check must see what was written.
    pub async fn stored_values(&self, table: &str, keys: Vec<Vec<u8>>) -> Result<HashMap<Vec<u8>, Vec<u8>>> {
        let table = table.to_owned();
        let rows = self
            .hbase
            .run(Retry::Idempotent, move |connection| connection.get_rows(&table, &keys, &[COLUMN_VALUE.to_vec()]))
            .await?;
        Ok(values_by_key(rows))
    }

    /// [`Store::stored_values`] as a page reads them: with the pool's read
    /// consistency, so a secondary replica may answer.
    pub(crate) async fn page_values(&self, table: &str, keys: Vec<Vec<u8>>) -> Result<HashMap<Vec<u8>, Vec<u8>>> {
        Ok(values_by_key(self.hbase.read_rows(table, keys, vec![COLUMN_VALUE.to_vec()]).await?))
    }

    /// Reads records by key in one multi-get. The result lines up with `keys`:
    /// `None` where the row is missing or does not decode (both skipped and
    /// counted, as `missing` and `bad_json`).
    pub async fn get_records<R: Record>(&self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<R>>> {
        let table = R::table(&self.tables).to_owned();
        let values = self.page_values(&table, keys.clone()).await?;
        Ok(keys
            .iter()
            .map(|key| {
                let Some(value) = values.get(key) else {
                    skip_row(&self.tables, &table, SkipReason::Missing, key, &format_args!("no {} row", R::KIND));
                    return None;
                };
                match decode_record::<R>(&table, value) {
                    Ok(record) => Some(record),
                    Err(error) => {
                        skip_row(&self.tables, &table, SkipReason::BadJson, key, &error);
                        None
                    }
                }
            })
            .collect())
    }

    /// The bytes in `cf:q` of one row, as stored.
    async fn stored_value(&self, table: &str, key: Vec<u8>) -> Result<Option<Vec<u8>>> {
        Ok(self.stored_values(table, vec![key.clone()]).await?.remove(&key))
    }

    /// Reads one comment by key: `None` only when HBase says it is not
    /// stored (a secondary replica's word alone is not taken for it:
    /// [`Hbase::read_row`]) or it does not decode (skipped and counted).
    pub async fn get_comment(&self, key: &CommentKey) -> Result<Option<Comment>> {
        let table = self.tables.comment.clone();
        // No row is an answer (a review nobody wrote), not an index row
        // pointing at a lost comment: it is not counted as skipped.
        let Some(row) = self.hbase.read_row(&table, key.as_bytes().to_vec(), vec![COLUMN_VALUE.to_vec()]).await? else {
            return Ok(None);
        };
        Ok(decode_comments(&self.tables, &table, std::slice::from_ref(key), vec![row]).pop().flatten())
    }

    /// Reads comments by key in one multi-get. The result lines up with `keys`:
    /// `None` where the comment is gone or does not decode (skipped and counted).
    pub async fn get_comments(&self, keys: &[CommentKey]) -> Result<Vec<Option<Comment>>> {
        let table = self.tables.comment.clone();
        let row_keys: Vec<Vec<u8>> = keys.iter().map(|key| key.as_bytes().to_vec()).collect();
        let rows = self.hbase.read_rows(&table, row_keys, vec![COLUMN_VALUE.to_vec()]).await?;
        Ok(decode_comments(&self.tables, &table, keys, rows))
    }

    /// Reads a page of `limit` entries of an index, starting at `start` (a key
    /// inside `prefix`, or the prefix's first row when `None`). Never reads past
    /// the prefix; rows that do not decode are skipped.
    pub async fn index_page(
        &self,
        kind: IndexKind,
        prefix: Vec<u8>,
        start: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<IndexPage> {
        let table = self.index_table(kind).to_owned();
        let stop = keys::prefix_successor(&prefix);
        let spec = ScanSpec {
            start: start.unwrap_or(prefix),
            stop: stop.clone(),
            // One row more than asked: its key is where the next page starts.
            limit: limit.saturating_add(1),
            page_size: limit.saturating_add(1).min(INDEX_PAGE_ROWS),
            columns: vec![COLUMN_VALUE.to_vec()],
            cache_blocks: true,
        };
        let rows = self.hbase.read_scan(&table, spec, None).await?;
        let (entries, lookahead) = self.entries_and_lookahead(&table, kind, rows, limit);
        let next = match (lookahead, entries.last()) {
            (Some(lookahead), Some(last)) => self.next_listing_start(&table, kind, lookahead, last, stop).await?,
            (lookahead, _) => lookahead.map(|row| row.key),
        };
        Ok(IndexPage { entries, next })
    }

    /// The index table of `kind`.
    fn index_table(&self, kind: IndexKind) -> &str {
        match kind {
            IndexKind::User => &self.tables().user_comment,
            IndexKind::Product => &self.tables().product_comment,
        }
    }

    /// The entries of the first `limit` of `rows` (rows that are not index
    /// rows skipped and counted) and the row after them, if there is one.
    fn entries_and_lookahead(
        &self,
        table: &str,
        kind: IndexKind,
        mut rows: Vec<Row>,
        limit: usize,
    ) -> (Vec<IndexEntry>, Option<Row>) {
        let lookahead = (rows.len() > limit).then(|| rows.swap_remove(limit));
        rows.truncate(limit);
        let entries = rows.iter().filter_map(|row| index_entry(self.tables(), table, kind, row)).collect();
        (entries, lookahead)
    }

    /// Where the page after one ending at `last` starts: at `lookahead` (the
    /// row after the page), unless that row lists the same comment at the same
    /// millisecond as `last` (a same-millisecond double post); then past every
    /// such row, so the comment does not start the next page again.
    async fn next_listing_start(
        &self,
        table: &str,
        kind: IndexKind,
        mut lookahead: Row,
        last: &IndexEntry,
        stop: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        // Parsed without counting: the row is counted when its own page reads it.
        while parse_index_entry(kind, &lookahead).is_ok_and(|entry| entry.same_listing(last)) {
            let spec = ScanSpec {
                start: keys::key_successor(&lookahead.key),
                stop: stop.clone(),
                limit: 1,
                page_size: 1,
                columns: vec![COLUMN_VALUE.to_vec()],
                // A reader's page: the same blocks its own scan just cached.
                cache_blocks: true,
            };
            let rows = self.hbase.read_scan(table, spec, None).await?;
            match rows.into_iter().next() {
                Some(row) => lookahead = row,
                None => return Ok(None),
            }
        }
        Ok(Some(lookahead.key))
    }

    /// A page of `product`'s comments index, newest first.
    pub async fn product_comment_page(&self, product: &Id, start: Option<Vec<u8>>, limit: usize) -> Result<IndexPage> {
        self.index_page(IndexKind::Product, keys::product_comment_prefix(product), start, limit).await
    }

    /// A page of `user`'s comments index, newest first.
    pub async fn user_comment_page(&self, user: &Id, start: Option<Vec<u8>>, limit: usize) -> Result<IndexPage> {
        self.index_page(IndexKind::User, keys::user_comment_prefix(user), start, limit).await
    }

    /// Reads the comments an index page names, in page order, leaving out the
    /// ones the page's rows do not show ([`listing`]: gone, stale, another
    /// owner's, or shown by an earlier row), each counted where it is bad data.
    pub async fn comments_of(&self, page: &IndexPage) -> Result<Vec<Comment>> {
        self.shown_comments(&page.entries, &mut listing::Listing::default()).await
    }

    /// The comments `entries` show, in order, read in one multi-get (none when
    /// `entries` is empty) and judged by `listing`, which a walk across pages
    /// keeps from page to page. Rows left out as stale or another owner's are
    /// counted in `reviews_skipped_rows_total` and logged.
    pub(crate) async fn shown_comments(
        &self,
        entries: &[IndexEntry],
        listing: &mut listing::Listing,
    ) -> Result<Vec<Comment>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<CommentKey> = entries.iter().map(|entry| entry.comment).collect();
        let comments = self.get_comments(&keys).await?;
        Ok(entries
            .iter()
            .zip(comments)
            .filter_map(|(entry, comment)| match listing.judge(entry, comment.as_ref()) {
                listing::Verdict::Shown => comment,
                verdict => {
                    self.count_left_out(entry, verdict, comment.as_ref());
                    None
                }
            })
            .collect())
    }

    /// Counts and logs an index row a walk left out as bad data: a stale row
    /// (against the comment table, as its comment's timestamp says) or a row
    /// naming another owner's comment (against the index table). Repeats and
    /// gone comments are not counted here: a repeat is no bad data, and a gone
    /// comment was counted by the multi-get that missed it.
    fn count_left_out(&self, entry: &IndexEntry, verdict: listing::Verdict, comment: Option<&Comment>) {
        let Some(comment) = comment else { return };
        match verdict {
            listing::Verdict::Stale => skip_row(
                &self.tables,
                &self.tables.comment,
                SkipReason::StaleIndex,
                &entry.index_key,
                &format_args!("the comment's timestamp is {}", comment.timestamp),
            ),
            listing::Verdict::OtherOwner => {
                let (table, reason, owner) = match entry.kind {
                    IndexKind::Product => (&self.tables.product_comment, SkipReason::OtherProduct, comment.product_id),
                    IndexKind::User => (&self.tables.user_comment, SkipReason::OtherUser, comment.user_id),
                };
                skip_row(
                    &self.tables,
                    table,
                    reason,
                    &entry.index_key,
                    &format_args!("the row is {}'s, the comment {}'s", entry.owner, owner),
                );
            }
            listing::Verdict::Shown | listing::Verdict::Repeat | listing::Verdict::Gone => {}
        }
    }
}

/// Checks an index row's key layout and value; `None` (counted) when either is wrong.
pub(crate) fn index_entry(tables: &Tables, table: &str, kind: IndexKind, row: &Row) -> Option<IndexEntry> {
    match parse_index_entry(kind, row) {
        Ok(entry) => Some(entry),
        Err((reason, detail)) => {
            skip_row(tables, table, reason, &row.key, &detail);
            None
        }
    }
}

/// An index row as an entry, or the skip reason and detail when it is not one.
fn parse_index_entry(kind: IndexKind, row: &Row) -> std::result::Result<IndexEntry, (SkipReason, String)> {
    let layout = match kind {
        IndexKind::User => keys::parse_user_comment_key(&row.key).map(|parsed| (parsed.user, parsed.timestamp_ms)),
        IndexKind::Product => {
            keys::parse_product_comment_key(&row.key).map(|parsed| (parsed.product, parsed.timestamp_ms))
        }
    };
    let (owner, timestamp_ms) = layout.map_err(|error| (SkipReason::BadKey, error.to_string()))?;
    let value = row.value(COLUMN_VALUE).ok_or((SkipReason::NoValue, "the row has no cf:q".to_owned()))?;
    let comment = CommentKey::parse(value).map_err(|error| (SkipReason::BadValue, error.to_string()))?;
    let star_mark = row.value(COLUMN_STARS).and_then(star_marks::parse_star_mark);
    Ok(IndexEntry { kind, owner, index_key: row.key.clone(), timestamp_ms, comment, star_mark })
}

/// A Thrift2 row as a Thrift1 one: its key and its cells' values.
pub(super) fn untimed(row: crate::hbase::TimedRow) -> Row {
    Row { key: row.key, cells: row.cells.into_iter().map(|cell| (cell.column, cell.value)).collect() }
}

/// Matches multi-get results to `keys` by row key (Thrift1 drops missing rows,
/// The `cf:q` value of each row that has one, by row key.
fn values_by_key(rows: Vec<Row>) -> HashMap<Vec<u8>, Vec<u8>> {
    rows.into_iter()
        .filter_map(|row| {
            let value = row.value(COLUMN_VALUE)?.to_vec();
            Some((row.key, value))
        })
        .collect()
}

/// so positions do not line up) and decodes each comment.
pub(crate) fn decode_comments(
    tables: &Tables,
    table: &str,
    keys: &[CommentKey],
    rows: Vec<Row>,
) -> Vec<Option<Comment>> {
    let by_key: HashMap<Vec<u8>, Row> = rows.into_iter().map(|row| (row.key.clone(), row)).collect();
    keys.iter()
        .map(|key| {
            let Some(row) = by_key.get(key.as_bytes().as_slice()) else {
                skip_row(
                    tables,
                    table,
                    SkipReason::Missing,
                    key.as_bytes(),
                    &"an index row points at a comment that is gone",
                );
                return None;
            };
            let Some(value) = row.value(COLUMN_VALUE) else {
                skip_row(tables, table, SkipReason::NoValue, key.as_bytes(), &"the comment row has no cf:q");
                return None;
            };
            match Comment::from_json(value) {
                Ok(comment) if comment.row_key() == *key => Some(comment),
                Ok(comment) => {
                    skip_row(
                        tables,
                        table,
                        SkipReason::KeyMismatch,
                        key.as_bytes(),
                        &format_args!("the JSON names {}", comment.row_key()),
                    );
                    None
                }
                Err(error) => {
                    skip_row(tables, table, SkipReason::BadJson, key.as_bytes(), &error);
                    None
                }
            }
        })
        .collect()
}
