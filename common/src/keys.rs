//! Row-key layout for every table: the only module that knows where each byte goes.
//!
//! Layouts (docs/contract.md §2; all integers big-endian, as Java's `Bytes.toBytes`):
//!
//! | table | key |
//! |---|---|
//! | `user`, `seller`, `product`, `order` | id(10) |
//! | `comment` | orderId(10) productId(10) |
//! | `user-comment` | userId(10) revTs(8) [tie(20)] |
//! | `product-comment` | productId(10) `c` revTs(8) revLen(4) [tie(20)], and productId(10) `d` (the deletion marker) |
//! | `product-comment-rank` | productId(10) `r` rank(2), and productId(10) `s` (the ranking record) |
//!
//! Everything this project writes carries the 20-byte `tie` (the comment's own
//! row key) so two comments in one millisecond never share an index row. The
//! parsers also accept the seed's shorter keys, because rows written by the
//! original Java service have them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::ids::{Id, InvalidId, ID_LEN};

/// A range of row keys, `[start, stop)`: `stop` `None` runs to the end of
/// the table. The one key-range type: a shard's range, a region's, a run's.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct KeyRange {
    /// The first key in the range.
    pub start: Vec<u8>,
    /// The first key after the range; `None`: to the end of the table.
    pub stop: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn everything() -> KeyRange {
        KeyRange { start: Vec::new(), stop: None }
    }

    /// Whether the range holds no key at all (a shard left without work when
    /// there are fewer places to cut than shards).
    pub fn is_empty(&self) -> bool {
        self.stop.as_deref().is_some_and(|stop| stop <= self.start.as_slice())
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.stop.as_deref().is_none_or(|stop| key < stop)
    }
}

/// The width of a comment row key: orderId then productId.
pub const COMMENT_KEY_LEN: usize = 2 * ID_LEN;
/// The separator byte between a product id and its comment index entries.
pub const PRODUCT_COMMENT_TAG: u8 = b'c';
/// The separator byte between a product id and its deletion marker: the row
/// the write path puts when it deletes one of the product's comments, so that
/// the delete leaves a cell an incremental run finds by time. It sorts after
/// the index entries, outside the `c` prefix every index reader scans.
pub const DELETION_MARKER_TAG: u8 = b'd';
/// The separator byte between a product id and its rank slots.
pub const RANK_TAG: u8 = b'r';
/// The separator byte between a product id and its ranking record: the whole
/// ranking as one row. It sorts after the slots, outside the `r` prefix the
/// original Java service scans, so that service never sees it.
pub const RANKING_RECORD_TAG: u8 = b's';
/// The highest rank slot the ranker writes.
pub const MAX_RANK: u16 = 10;

const REVERSE_TS_LEN: usize = 8;
const REVERSE_LEN_LEN: usize = 4;
const RANK_LEN: usize = 2;

/// `user-comment` key length without the tie (the seed's layout).
pub const USER_COMMENT_SEED_KEY_LEN: usize = ID_LEN + REVERSE_TS_LEN;
/// `user-comment` key length with the tie (this project's layout).
pub const USER_COMMENT_KEY_LEN: usize = USER_COMMENT_SEED_KEY_LEN + COMMENT_KEY_LEN;
/// `product-comment` prefix length: productId and the `c` tag.
pub const PRODUCT_COMMENT_PREFIX_LEN: usize = ID_LEN + 1;
/// `product-comment` key length without the tie (the seed's layout).
pub const PRODUCT_COMMENT_SEED_KEY_LEN: usize = PRODUCT_COMMENT_PREFIX_LEN + REVERSE_TS_LEN + REVERSE_LEN_LEN;
/// `product-comment` key length with the tie (this project's layout).
pub const PRODUCT_COMMENT_KEY_LEN: usize = PRODUCT_COMMENT_SEED_KEY_LEN + COMMENT_KEY_LEN;
/// `product-comment-rank` key length.
pub const RANK_KEY_LEN: usize = ID_LEN + 1 + RANK_LEN;

/// A key whose bytes do not follow the table's layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{table} key of {length} bytes does not follow the layout: {reason}")]
pub struct KeyError {
    /// The table whose layout was expected.
    pub table: &'static str,
    /// The length of the offending key.
    pub length: usize,
    /// What was wrong.
    pub reason: &'static str,
}

/// A comment's row key: orderId(10) then productId(10).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommentKey([u8; COMMENT_KEY_LEN]);

impl CommentKey {
    /// The key of the comment left for `product` on `order`.
    pub fn new(order: &Id, product: &Id) -> CommentKey {
        let mut bytes = [0; COMMENT_KEY_LEN];
        bytes[..ID_LEN].copy_from_slice(order.as_bytes());
        bytes[ID_LEN..].copy_from_slice(product.as_bytes());
        CommentKey(bytes)
    }

    /// Parses a comment row key, as found in the value of an index row.
    pub fn parse(bytes: &[u8]) -> Result<CommentKey, KeyError> {
        let error = |reason| KeyError { table: "comment", length: bytes.len(), reason };
        let array: [u8; COMMENT_KEY_LEN] = bytes.try_into().map_err(|_| error("expected 20 bytes"))?;
        Id::from_bytes("orderId", &array[..ID_LEN]).map_err(|_| error("orderId is not an id"))?;
        Id::from_bytes("productId", &array[ID_LEN..]).map_err(|_| error("productId is not an id"))?;
        Ok(CommentKey(array))
    }

    /// The order half of the key.
    pub fn order_id(&self) -> Id {
        Id::from_bytes("orderId", &self.0[..ID_LEN]).unwrap_or_else(|_| unreachable!("validated at construction"))
    }

    /// The product half of the key.
    pub fn product_id(&self) -> Id {
        Id::from_bytes("productId", &self.0[ID_LEN..]).unwrap_or_else(|_| unreachable!("validated at construction"))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; COMMENT_KEY_LEN] {
        &self.0
    }

    /// The review's public id: the key in base64url without padding (27
    /// characters). Clients treat it as opaque; it is stable for as long as
    /// the comment's row is, and safe in a path segment or a DOM id.
    pub fn review_id(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// The key a [`CommentKey::review_id`] names: an error for text that is
    /// not 20 bytes in base64url, `None` for 20 bytes that are no comment key
    /// (a well-formed id that names no review).
    pub fn from_review_id(id: &str) -> Result<Option<CommentKey>, KeyError> {
        let error = |reason| KeyError { table: "comment", length: id.len(), reason };
        let bytes = URL_SAFE_NO_PAD.decode(id).map_err(|_| error("review id is not base64url"))?;
        if bytes.len() != COMMENT_KEY_LEN {
            return Err(error("review id is not 20 bytes"));
        }
        Ok(CommentKey::parse(&bytes).ok())
    }
}

impl std::fmt::Debug for CommentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommentKey({}:{})", self.order_id(), self.product_id())
    }
}

impl std::fmt::Display for CommentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.order_id(), self.product_id())
    }
}

/// `i64::MAX - timestamp_ms`, big-endian: newer timestamps sort first.
///
/// Timestamps are milliseconds since the epoch and never negative; the write
/// path refuses negative ones, so saturation here only guards against overflow.
pub fn reverse_timestamp(timestamp_ms: i64) -> [u8; REVERSE_TS_LEN] {
    i64::MAX.saturating_sub(timestamp_ms.max(0)).to_be_bytes()
}

fn timestamp_from_reverse(bytes: [u8; REVERSE_TS_LEN]) -> i64 {
    i64::MAX - i64::from_be_bytes(bytes).max(0)
}

/// `i32::MAX - content_len`, big-endian: at one millisecond, longer comments sort first.
pub fn reverse_length(content_utf8_len: usize) -> [u8; REVERSE_LEN_LEN] {
    let length = i32::try_from(content_utf8_len).unwrap_or(i32::MAX);
    (i32::MAX - length).to_be_bytes()
}

/// The row key of an entity table (`user`, `seller`, `product`, `order`).
pub fn entity_key(id: &Id) -> Vec<u8> {
    id.as_bytes().to_vec()
}

/// The `user-comment` prefix holding every comment of `user`.
pub fn user_comment_prefix(user: &Id) -> Vec<u8> {
    user.as_bytes().to_vec()
}

/// The `user-comment` key of one comment (with the tie).
pub fn user_comment_key(user: &Id, timestamp_ms: i64, comment: &CommentKey) -> Vec<u8> {
    let mut key = Vec::with_capacity(USER_COMMENT_KEY_LEN);
    key.extend_from_slice(user.as_bytes());
    key.extend_from_slice(&reverse_timestamp(timestamp_ms));
    key.extend_from_slice(comment.as_bytes());
    key
}

/// The `product-comment` prefix holding every comment of `product`.
pub fn product_comment_prefix(product: &Id) -> Vec<u8> {
    tagged(product, PRODUCT_COMMENT_TAG)
}

/// `product`'s id followed by one tag byte: the start of every key of the
/// product's rows in `product-comment` and `product-comment-rank`.
fn tagged(product: &Id, tag: u8) -> Vec<u8> {
    let mut key = Vec::with_capacity(ID_LEN + 1);
    key.extend_from_slice(product.as_bytes());
    key.push(tag);
    key
}

/// The `product-comment` key of one comment (with the tie).
pub fn product_comment_key(product: &Id, timestamp_ms: i64, content_utf8_len: usize, comment: &CommentKey) -> Vec<u8> {
    let mut key = product_comment_prefix(product);
    key.reserve(PRODUCT_COMMENT_KEY_LEN - PRODUCT_COMMENT_PREFIX_LEN);
    key.extend_from_slice(&reverse_timestamp(timestamp_ms));
    key.extend_from_slice(&reverse_length(content_utf8_len));
    key.extend_from_slice(comment.as_bytes());
    key
}

/// The `user-comment` range of every row of `user` written in one millisecond.
///
/// The write path deletes a comment's index rows by scanning this range and
/// matching values, because the key alone cannot be rebuilt for rows in the
/// seed's layout or for comments whose content changed since they were indexed.
pub fn user_comment_millisecond_prefix(user: &Id, timestamp_ms: i64) -> Vec<u8> {
    let mut key = user_comment_prefix(user);
    key.extend_from_slice(&reverse_timestamp(timestamp_ms));
    key
}

/// The `product-comment` range of every row of `product` written in one millisecond.
pub fn product_comment_millisecond_prefix(product: &Id, timestamp_ms: i64) -> Vec<u8> {
    let mut key = product_comment_prefix(product);
    key.extend_from_slice(&reverse_timestamp(timestamp_ms));
    key
}

/// The `product-comment` rows of `product`'s reviews newer than `as_of_ms`
/// (all of them for `None`), as `[start, stop)`: newest first, they are the
/// prefix's first rows, up to the rows of that millisecond. The range is
/// always bounded: without an as-of time it ends where the prefix does, at
/// the next tag after `'c'`, never at the end of the table.
pub fn product_comments_after(product: &Id, as_of_ms: Option<i64>) -> (Vec<u8>, Vec<u8>) {
    let stop = match as_of_ms {
        Some(as_of_ms) => product_comment_millisecond_prefix(product, as_of_ms),
        None => tagged(product, PRODUCT_COMMENT_TAG + 1),
    };
    (product_comment_prefix(product), stop)
}

/// The `product-comment-rank` prefix holding the rank slots of `product`.
pub fn rank_prefix(product: &Id) -> Vec<u8> {
    tagged(product, RANK_TAG)
}

/// The `product-comment-rank` key of slot `rank` (1 is best) of `product`.
pub fn rank_key(product: &Id, rank: u16) -> Vec<u8> {
    let mut key = rank_prefix(product);
    let rank = i16::try_from(rank).unwrap_or(i16::MAX);
    key.extend_from_slice(&rank.to_be_bytes());
    key
}

/// The `product-comment` key of `product`'s deletion marker.
pub fn deletion_marker_key(product: &Id) -> Vec<u8> {
    tagged(product, DELETION_MARKER_TAG)
}

/// The `product-comment-rank` key of `product`'s ranking record.
pub fn ranking_record_key(product: &Id) -> Vec<u8> {
    tagged(product, RANKING_RECORD_TAG)
}

/// Whether `key` is a ranking record's key (see [`ranking_record_key`]).
pub fn is_ranking_record_key(key: &[u8]) -> bool {
    key.len() == ID_LEN + 1 && key[ID_LEN] == RANKING_RECORD_TAG && leading_id("productId", key).is_some()
}

/// A parsed `user-comment` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserCommentKey {
    /// Whose comment it is.
    pub user: Id,
    /// When the comment was written, in epoch milliseconds.
    pub timestamp_ms: i64,
    /// The comment's row key, absent in the seed's layout.
    pub tie: Option<CommentKey>,
}

/// Parses a `user-comment` key in either layout (18 or 38 bytes).
pub fn parse_user_comment_key(key: &[u8]) -> Result<UserCommentKey, KeyError> {
    let error = |reason| KeyError { table: "user-comment", length: key.len(), reason };
    if key.len() != USER_COMMENT_SEED_KEY_LEN && key.len() != USER_COMMENT_KEY_LEN {
        return Err(error("expected 18 or 38 bytes"));
    }
    let user = Id::from_bytes("userId", &key[..ID_LEN]).map_err(|_| error("userId is not an id"))?;
    let timestamp_ms = timestamp_from_reverse(fixed(&key[ID_LEN..USER_COMMENT_SEED_KEY_LEN]));
    let tie = parse_tie(&key[USER_COMMENT_SEED_KEY_LEN..]).map_err(|_| error("tie is not a comment key"))?;
    Ok(UserCommentKey { user, timestamp_ms, tie })
}

/// A parsed `product-comment` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProductCommentKey {
    /// The product commented on.
    pub product: Id,
    /// When the comment was written, in epoch milliseconds.
    pub timestamp_ms: i64,
    /// The UTF-8 byte length of the content when the comment was indexed.
    pub content_utf8_len: u32,
    /// The comment's row key, absent in the seed's layout.
    pub tie: Option<CommentKey>,
}

/// Parses a `product-comment` key in either layout (23 or 43 bytes).
pub fn parse_product_comment_key(key: &[u8]) -> Result<ProductCommentKey, KeyError> {
    let error = |reason| KeyError { table: "product-comment", length: key.len(), reason };
    if key.len() != PRODUCT_COMMENT_SEED_KEY_LEN && key.len() != PRODUCT_COMMENT_KEY_LEN {
        return Err(error("expected 23 or 43 bytes"));
    }
    let product = Id::from_bytes("productId", &key[..ID_LEN]).map_err(|_| error("productId is not an id"))?;
    if key[ID_LEN] != PRODUCT_COMMENT_TAG {
        return Err(error("the byte after productId is not 'c'"));
    }
    let timestamp_start = PRODUCT_COMMENT_PREFIX_LEN;
    let length_start = timestamp_start + REVERSE_TS_LEN;
    let timestamp_ms = timestamp_from_reverse(fixed(&key[timestamp_start..length_start]));
    let reverse_len = i32::from_be_bytes(fixed(&key[length_start..PRODUCT_COMMENT_SEED_KEY_LEN]));
    let content_utf8_len = u32::try_from(i32::MAX - reverse_len.max(0)).unwrap_or(0);
    let tie = parse_tie(&key[PRODUCT_COMMENT_SEED_KEY_LEN..]).map_err(|_| error("tie is not a comment key"))?;
    Ok(ProductCommentKey { product, timestamp_ms, content_utf8_len, tie })
}

/// A parsed `product-comment-rank` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankKey {
    /// The ranked product.
    pub product: Id,
    /// The slot, 1 (best) to [`MAX_RANK`].
    pub rank: u16,
}

/// Parses a `product-comment-rank` key; slots outside `1..=MAX_RANK` are refused.
pub fn parse_rank_key(key: &[u8]) -> Result<RankKey, KeyError> {
    let error = |reason| KeyError { table: "product-comment-rank", length: key.len(), reason };
    if key.len() != RANK_KEY_LEN {
        return Err(error("expected 13 bytes"));
    }
    let product = Id::from_bytes("productId", &key[..ID_LEN]).map_err(|_| error("productId is not an id"))?;
    if key[ID_LEN] != RANK_TAG {
        return Err(error("the byte after productId is not 'r'"));
    }
    let rank = i16::from_be_bytes(fixed(&key[ID_LEN + 1..]));
    match u16::try_from(rank) {
        Ok(rank) if (1..=MAX_RANK).contains(&rank) => Ok(RankKey { product, rank }),
        _ => Err(error("rank is outside 1..=10")),
    }
}

/// The id every key of the entity, index and rank tables begins with (a
/// user's or a product's), or `None` when the key's first ten bytes are not one.
pub fn leading_id(field: &'static str, key: &[u8]) -> Option<Id> {
    key.get(..ID_LEN).and_then(|bytes| Id::from_bytes(field, bytes).ok())
}

/// Whether a key's first ten bytes hold non-ASCII bytes: the original Java
/// service stored a ten-character id such as ten Hangul syllables as a 30-byte
/// key, which no reader can tell from its neighbours. Readers count such keys
/// apart from other bad keys.
pub fn leading_id_is_multibyte(key: &[u8]) -> bool {
    key.iter().take(ID_LEN).any(|byte| !byte.is_ascii())
}

/// The smallest key greater than every key that starts with the same ten
/// bytes as `key` (its leading id, or whatever stands in its place): where a
/// listing of ids resumes after `key`. `None` when no such key exists.
pub fn next_leading_id(key: &[u8]) -> Option<Vec<u8>> {
    prefix_successor(key.get(..ID_LEN).unwrap_or(key))
}

/// The smallest key greater than every key that starts with `prefix`: a scan's stop row.
///
/// `None` means no such key exists (the prefix is empty or all `0xff`), so the
/// scan must run to the end of the table.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last_incrementable = prefix.iter().rposition(|&byte| byte != u8::MAX)?;
    let mut successor = prefix[..=last_incrementable].to_vec();
    successor[last_incrementable] += 1;
    Some(successor)
}

/// The smallest key strictly greater than `key`: where a scan resumes after it.
pub fn key_successor(key: &[u8]) -> Vec<u8> {
    let mut successor = Vec::with_capacity(key.len() + 1);
    successor.extend_from_slice(key);
    successor.push(0);
    successor
}

fn parse_tie(bytes: &[u8]) -> Result<Option<CommentKey>, KeyError> {
    if bytes.is_empty() {
        Ok(None)
    } else {
        CommentKey::parse(bytes).map(Some)
    }
}

fn fixed<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut array = [0; N];
    array.copy_from_slice(bytes);
    array
}

/// `ranker-run` key: revTs(started, 8) then the run id's ASCII bytes.
///
/// The reversed start time puts the newest run first, so a scan from the start
/// of the table lists runs newest first; the run id after it keeps two runs
/// started in one millisecond apart.
pub fn ranker_run_key(started_ms: i64, run_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(REVERSE_TS_LEN + run_id.len());
    key.extend_from_slice(&reverse_timestamp(started_ms));
    key.extend_from_slice(run_id.as_bytes());
    key
}

/// A parsed `ranker-run` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankerRunKey {
    /// When the run started, in ms since the epoch.
    pub started_ms: i64,
    /// The run's id.
    pub run_id: String,
}

/// Parses a `ranker-run` key: 8 bytes of reversed start time, then a non-empty
/// printable-ASCII run id.
pub fn parse_ranker_run_key(key: &[u8]) -> Result<RankerRunKey, KeyError> {
    let error = |reason| KeyError { table: "ranker-run", length: key.len(), reason };
    if key.len() <= REVERSE_TS_LEN {
        return Err(error("shorter than a start time and a run id"));
    }
    let (time, id) = key.split_at(REVERSE_TS_LEN);
    if !id.iter().all(u8::is_ascii_graphic) {
        return Err(error("the run id is not printable ASCII"));
    }
    let run_id = String::from_utf8_lossy(id).into_owned();
    Ok(RankerRunKey { started_ms: timestamp_from_reverse(fixed(time)), run_id })
}

/// `ranker-lease` key: the lease's name (one row per lease, such as `nightly`).
pub fn ranker_lease_key(lease_name: &str) -> Vec<u8> {
    lease_name.as_bytes().to_vec()
}

/// `ranker-lease` key of a sharded run's plan: `shard-plan:COUNT:PLAN_ID`, one
/// row per plan id and shard count, beside the leases (whose names, such as
/// `nightly` or `nightly-shard-3-of-8`, never take this form).
pub fn shard_plan_key(plan_id: &str, count: u32) -> Vec<u8> {
    format!("shard-plan:{count}:{plan_id}").into_bytes()
}

/// The part of a `product-comment` or `product-comment-rank` key that names
/// its product: the first ten bytes (all of a shorter key). A key range cut at
/// such a prefix never splits one product's rows, because every row of a
/// product sorts on the same side of it; region boundaries, which HBase may
/// place inside a product's rows, are cut back to it before a shard uses them.
pub fn product_boundary(key: &[u8]) -> &[u8] {
    &key[..key.len().min(ID_LEN)]
}

/// The bytes of the ids this project creates (`[0-9A-Za-z]`), in byte order.
pub const ID_ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Digits of a split key: 62^4 (some 14.8 million) positions place the
/// splits of up to [`MAX_SPLIT_REGIONS`] regions within 0.01 % of even.
const SPLIT_KEY_DIGITS: u32 = 4;

/// The most regions [`region_split_keys`] divides a table into.
pub const MAX_SPLIT_REGIONS: u32 = 1_000;

/// Where to split a table whose row keys start with a random id (`comment`,
/// `user-comment`, `product-comment`, `product-comment-rank`) into `regions`
/// regions holding equal shares of the ids: the `regions - 1` keys, sorted.
///
/// HBase's `RegionSplitter` splits the space of hexadecimal keys evenly
/// (`HexStringSplit`); ids are base 62, so this does the same in base 62:
/// split `i` is the fraction `i / regions` of the id space, written as a
/// four-digit base-62 number in the alphabet's byte order, with its trailing
/// `0` digits dropped (no id sorts between `FV` and `FV00`). Four regions
/// split at `FV`, `V` and `kV`. `regions` is clamped to
/// `1..=MAX_SPLIT_REGIONS`; one region has no split.
pub fn region_split_keys(regions: u32) -> Vec<Vec<u8>> {
    let regions = u64::from(regions.clamp(1, MAX_SPLIT_REGIONS));
    let base = ID_ALPHABET.len() as u64;
    let positions = base.pow(SPLIT_KEY_DIGITS);
    (1..regions)
        .map(|split| {
            let mut position = split * positions / regions;
            let mut key = vec![0u8; SPLIT_KEY_DIGITS as usize];
            for digit in key.iter_mut().rev() {
                *digit = ID_ALPHABET[(position % base) as usize];
                position /= base;
            }
            while key.len() > 1 && key.last() == Some(&ID_ALPHABET[0]) {
                key.pop();
            }
            key
        })
        .collect()
}

/// How far apart the first characters of consecutive [`numbered_id`]s lie in
/// [`ID_ALPHABET`]. 23 shares no factor with 62, so 62 consecutive numbers
/// take every first character once; and a hop of 23 (about two regions of
/// six) puts a data set's few hottest records, its first numbers, in
/// different regions.
const NUMBERED_ID_STEP: u64 = 23;

/// The id of record `number` (from 1) of a numbered data set, such as the
/// demo and benchmark data: its kind's `letter` (`P` for a product, `U` for a
/// user, ...) then the number in nine digits, with the letter moved on
/// [`NUMBERED_ID_STEP`] places of [`ID_ALPHABET`] for each number after the
/// first. Record 1 keeps the letter (`P000000001`); record 2 is `m000000002`.
///
/// Why the first character moves: a pre-split table's regions are cut on
/// the first characters of its ids ([`region_split_keys`]), so with one
/// letter every id of a kind would sort into one region, and a region
/// server's death would take either all of the data or none of it. Moved,
/// the ids spread over the regions as random ids do.
pub fn numbered_id(field: &'static str, letter: u8, number: u64) -> Result<Id, InvalidId> {
    let base = ID_ALPHABET.len() as u64;
    let hops = (number % base + base - 1) % base;
    let first = ID_ALPHABET
        .iter()
        .position(|&character| character == letter)
        .map_or(letter, |at| ID_ALPHABET[((at as u64 + hops * NUMBERED_ID_STEP) % base) as usize]);
    Id::parse_new(field, &format!("{}{number:09}", char::from(first)))
}

/// The id of user `number` (from 1) of a numbered data set: `U000000001`,
/// then spread ([`numbered_id`]).
pub fn numbered_user_id(number: u64) -> Result<Id, InvalidId> {
    numbered_id("userId", b'U', number)
}

/// The id of seller `number`: `S000000001`, then spread.
pub fn numbered_seller_id(number: u64) -> Result<Id, InvalidId> {
    numbered_id("sellerId", b'S', number)
}

/// The id of product `number`: `P000000001` (the demo data's hottest), then
/// `m000000002`, ...
pub fn numbered_product_id(number: u64) -> Result<Id, InvalidId> {
    numbered_id("productId", b'P', number)
}

/// The id of order `number`: `O000000001`, then spread.
pub fn numbered_order_id(number: u64) -> Result<Id, InvalidId> {
    numbered_id("orderId", b'O', number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vectors {
        cases: Vec<Case>,
    }

    #[derive(Deserialize)]
    struct Input {
        #[serde(rename = "orderId")]
        order_id: String,
        #[serde(rename = "productId")]
        product_id: String,
        #[serde(rename = "userId")]
        user_id: String,
        content_utf8_bytes: usize,
        timestamp_ms: i64,
    }

    #[derive(Deserialize)]
    struct Case {
        input: Input,
        comment_row_key_hex: String,
        user_comment_key_seed_hex: String,
        user_comment_key_hex: String,
        product_comment_key_seed_hex: String,
        product_comment_key_hex: String,
        product_comment_prefix_hex: String,
        rank_keys_hex: std::collections::BTreeMap<u16, String>,
    }

    /// The vectors were computed independently of this code (with Java's
    /// `Bytes.toBytes`), so they catch a layout mistake that a round-trip would not.
    fn vectors() -> Vectors {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/keys.json");
        let text = std::fs::read_to_string(path).expect("read keys.json");
        serde_json::from_str(&text).expect("parse keys.json")
    }

    #[test]
    fn builders_match_the_independent_vectors_byte_for_byte() {
        let vectors = vectors();
        assert!(vectors.cases.len() >= 3);
        for case in vectors.cases {
            let input = &case.input;
            let order = Id::parse("orderId", &input.order_id).expect("order id");
            let product = Id::parse("productId", &input.product_id).expect("product id");
            let user = Id::parse("userId", &input.user_id).expect("user id");
            let comment = CommentKey::new(&order, &product);
            let ts = input.timestamp_ms;
            let len = input.content_utf8_bytes;

            assert_eq!(hex::encode(comment.as_bytes()), case.comment_row_key_hex);
            assert_eq!(hex::encode(user_comment_key(&user, ts, &comment)), case.user_comment_key_hex);
            assert_eq!(hex::encode(user_comment_millisecond_prefix(&user, ts)), case.user_comment_key_seed_hex);
            assert_eq!(hex::encode(product_comment_key(&product, ts, len, &comment)), case.product_comment_key_hex);
            assert_eq!(hex::encode(product_comment_prefix(&product)), case.product_comment_prefix_hex);
            let seed_product_key = &product_comment_key(&product, ts, len, &comment)[..PRODUCT_COMMENT_SEED_KEY_LEN];
            assert_eq!(hex::encode(seed_product_key), case.product_comment_key_seed_hex);
            for (rank, expected) in &case.rank_keys_hex {
                assert_eq!(&hex::encode(rank_key(&product, *rank)), expected);
            }
        }
    }

    #[test]
    fn parsers_read_both_layouts_of_the_vectors() {
        for case in vectors().cases {
            let input = &case.input;
            let comment =
                CommentKey::parse(&hex::decode(&case.comment_row_key_hex).expect("hex")).expect("comment key");
            assert_eq!(comment.order_id().as_str(), input.order_id);
            assert_eq!(comment.product_id().as_str(), input.product_id);

            let full =
                parse_user_comment_key(&hex::decode(&case.user_comment_key_hex).expect("hex")).expect("user key");
            assert_eq!(
                (full.user.as_str(), full.timestamp_ms, full.tie),
                (input.user_id.as_str(), input.timestamp_ms, Some(comment))
            );
            let seed = parse_user_comment_key(&hex::decode(&case.user_comment_key_seed_hex).expect("hex"))
                .expect("seed user key");
            assert_eq!((seed.timestamp_ms, seed.tie), (input.timestamp_ms, None));

            let full = parse_product_comment_key(&hex::decode(&case.product_comment_key_hex).expect("hex"))
                .expect("product key");
            assert_eq!(full.product.as_str(), input.product_id);
            assert_eq!(full.timestamp_ms, input.timestamp_ms);
            assert_eq!(full.content_utf8_len as usize, input.content_utf8_bytes);
            assert_eq!(full.tie, Some(comment));
            let seed = parse_product_comment_key(&hex::decode(&case.product_comment_key_seed_hex).expect("hex"))
                .expect("seed key");
            assert_eq!((seed.timestamp_ms, seed.tie), (input.timestamp_ms, None));

            for (rank, key_hex) in &case.rank_keys_hex {
                let parsed = parse_rank_key(&hex::decode(key_hex).expect("hex")).expect("rank key");
                assert_eq!((parsed.product.as_str(), parsed.rank), (input.product_id.as_str(), *rank));
            }
        }
    }

    #[test]
    fn newer_and_then_longer_comments_sort_first() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let comment = CommentKey::new(&Id::parse("orderId", "ORDER00001").expect("id"), &product);
        let older = product_comment_key(&product, 1_000, 500, &comment);
        let newer_short = product_comment_key(&product, 2_000, 5, &comment);
        let newer_long = product_comment_key(&product, 2_000, 50, &comment);
        assert!(newer_long < newer_short && newer_short < older);
    }

    #[test]
    fn parsers_refuse_wrong_lengths_and_tags() {
        assert!(parse_product_comment_key(&[b'a'; 22]).is_err());
        let mut wrong_tag = product_comment_prefix(&Id::parse("p", "PRODUCT001").expect("id"));
        wrong_tag[10] = b'r';
        wrong_tag.resize(PRODUCT_COMMENT_SEED_KEY_LEN, 0);
        assert!(parse_product_comment_key(&wrong_tag).is_err());
        assert!(parse_user_comment_key(&[b'a'; 19]).is_err());
        let mut rank_zero = rank_prefix(&Id::parse("p", "PRODUCT001").expect("id"));
        rank_zero.extend_from_slice(&0i16.to_be_bytes());
        assert!(parse_rank_key(&rank_zero).is_err());
        assert!(CommentKey::parse(b"short").is_err());
    }

    #[test]
    fn the_ranking_record_sorts_after_the_slots_and_outside_their_prefix() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let record = ranking_record_key(&product);
        assert_eq!(record, b"PRODUCT001s".to_vec());
        assert!(is_ranking_record_key(&record));
        assert!(!record.starts_with(&rank_prefix(&product)), "the Java service's slot scan never reads it");
        assert!(rank_key(&product, MAX_RANK) < record, "one scan from the slots' prefix reaches it last");
        assert!(parse_rank_key(&record).is_err());
        assert!(!is_ranking_record_key(&rank_key(&product, 1)));
        assert!(!is_ranking_record_key(b"PRODUCT00/s"));
    }

    #[test]
    fn the_deletion_marker_sorts_after_the_index_and_outside_its_prefix() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let marker = deletion_marker_key(&product);
        assert_eq!(marker, b"PRODUCT001d".to_vec());
        assert!(!marker.starts_with(&product_comment_prefix(&product)), "no index page reads it");
        assert_eq!(leading_id("productId", &marker), Some(product), "a time scan finds its product");
        assert!(prefix_successor(&product_comment_prefix(&product)).is_some_and(|stop| stop <= marker));
    }

    #[test]
    fn successors_bound_a_prefix_scan() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[b'a', 0xff, 0xff]), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(&[0xff]), None);
        assert_eq!(prefix_successor(b""), None);
        assert_eq!(key_successor(b"ab"), b"ab\0".to_vec());
    }

    #[test]
    fn the_leading_id_of_a_key_and_where_the_next_id_begins() {
        let product = Id::parse("productId", "P000000001").expect("product id");
        let order = Id::parse("orderId", "O000000001").expect("order id");
        let key = product_comment_key(&product, 1, 2, &CommentKey::new(&order, &product));
        assert_eq!(leading_id("productId", &key), Some(product));
        assert_eq!(leading_id("productId", &rank_key(&product, 3)), Some(product));
        assert_eq!(leading_id("productId", b"P00000"), None, "too short for an id");
        assert_eq!(leading_id("productId", b"P0000/0001c"), None, "not an id");
        assert_eq!(
            leading_id("productId", "가나다라마바사아자차".as_bytes()),
            None,
            "ten Hangul characters are 30 bytes"
        );
        assert!(leading_id_is_multibyte("가나다라마바사아자차c".as_bytes()));
        assert!(!leading_id_is_multibyte(b"P0000/0001c"));
        assert!(!leading_id_is_multibyte(b"P00"));
        let java = Id::parse("productId", "JP-edge-01").expect("the Java service's id");
        assert_eq!(leading_id("productId", &rank_key(&java, 1)), Some(java));
        assert_eq!(next_leading_id(&key), Some(b"P000000002".to_vec()));
        assert!(next_leading_id(&key).is_some_and(|next| next.as_slice() > key.as_slice()));
    }

    #[test]
    fn numbered_ids_keep_the_first_letter_and_number_and_spread_over_the_regions() {
        let id = |letter, number| numbered_id("id", letter, number).expect("id").as_str().to_owned();
        assert_eq!(id(b'P', 1), "P000000001");
        assert_eq!(id(b'U', 1), "U000000001");
        assert_eq!(id(b'P', 2), "m000000002");
        assert_eq!(id(b'P', 63), "P000000063", "62 numbers on, the letter comes round again");
        assert_eq!(id(b'O', 1_000_000), "l001000000");
        assert!(numbered_id("id", b'P', 1_000_000_000).is_err(), "ten digits do not fit");
        assert!(numbered_id("id", b'-', 1).is_err());
        // Two hundred products (the demo's) spread over six regions evenly,
        // and the five hottest over five of them.
        let splits = region_split_keys(6);
        let region = |number| {
            let key = id(b'P', number);
            splits.partition_point(|split| split.as_slice() <= key.as_bytes())
        };
        let mut counts = [0usize; 6];
        (1..=200).for_each(|number| counts[region(number)] += 1);
        assert!(counts.iter().all(|count| (30..=37).contains(count)), "{counts:?}");
        let hottest: std::collections::HashSet<usize> = (1..=5).map(region).collect();
        assert_eq!(hottest.len(), 5);
    }

    #[test]
    fn split_keys_divide_the_id_space_evenly() {
        let text = |regions| -> Vec<String> {
            region_split_keys(regions).into_iter().map(|key| String::from_utf8(key).expect("ascii")).collect()
        };
        assert!(region_split_keys(1).is_empty());
        assert_eq!(text(2), ["V"]);
        assert_eq!(text(4), ["FV", "V", "kV"]);
        assert_eq!(text(8), ["7kV", "FV", "NFV", "V", "ckV", "kV", "sFV"]);
        for regions in [2, 3, 4, 7, 8, 13, 64, 100, MAX_SPLIT_REGIONS] {
            let splits = region_split_keys(regions);
            assert_eq!(splits.len(), regions as usize - 1);
            assert!(splits.windows(2).all(|pair| pair[0] < pair[1]), "{regions}: not sorted and distinct");
            assert!(splits.iter().flatten().all(u8::is_ascii_alphanumeric));
            // Every two-character id prefix (3,844 of them) falls in one region;
            // each region gets its equal share, give or take one prefix.
            let mut counts = vec![0usize; regions as usize];
            for first in ID_ALPHABET {
                for second in ID_ALPHABET {
                    let id = [*first, *second, b'0', b'0', b'0', b'0', b'0', b'0', b'0', b'0'];
                    counts[splits.partition_point(|split| split.as_slice() <= id.as_slice())] += 1;
                }
            }
            let share = 3_844.0 / f64::from(regions);
            assert!(counts.iter().all(|&count| (count as f64 - share).abs() <= 1.0), "{regions}: {counts:?}");
        }
    }

    #[test]
    fn a_review_id_is_the_comment_key_in_base64url_and_reads_back() {
        let key = CommentKey::new(
            &Id::parse("orderId", "ORDER00001").expect("id"),
            &Id::parse("productId", "PRODUCT001").expect("id"),
        );
        assert_eq!(key.review_id(), "T1JERVIwMDAwMVBST0RVQ1QwMDE");
        assert_eq!(CommentKey::from_review_id(&key.review_id()), Ok(Some(key)));
        let url_unsafe = CommentKey::new(
            &Id::parse("orderId", "~~~~~~~~~~").expect("id"),
            &Id::parse("productId", "??????????").expect("id"),
        );
        assert!(url_unsafe.review_id().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(CommentKey::from_review_id(&url_unsafe.review_id()), Ok(Some(url_unsafe)));
        for bad in [
            "",
            "T1JERVIwMDAwMVBST0RVQ1QwMDE=",
            "T1JERVIwMDAwMVBST0RVQ1QwMD",
            "not an id!",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAB",
        ] {
            assert!(CommentKey::from_review_id(bad).is_err(), "{bad}");
        }
        assert_eq!(CommentKey::from_review_id("AAAAAAAAAAAAAAAAAAAAAAAAAAA"), Ok(None), "20 bytes, no ids");
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = parse_user_comment_key(&bytes);
            let _ = parse_product_comment_key(&bytes);
            let _ = parse_rank_key(&bytes);
            let _ = CommentKey::parse(&bytes);
        }

        #[test]
        fn every_key_with_the_prefix_sorts_below_its_successor(
            prefix in proptest::collection::vec(proptest::num::u8::ANY, 1..12),
            suffix in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
        ) {
            if let Some(stop) = prefix_successor(&prefix) {
                let mut key = prefix.clone();
                key.extend_from_slice(&suffix);
                proptest::prop_assert!(key < stop);
                proptest::prop_assert!(prefix < stop);
            }
        }

        #[test]
        fn built_keys_parse_back(ts in 0i64..=i64::MAX, len in 0usize..=(i32::MAX as usize)) {
            let product = Id::parse("p", "PRODUCT001").expect("id");
            let user = Id::parse("u", "USER000001").expect("id");
            let comment = CommentKey::new(&Id::parse("o", "ORDER00001").expect("id"), &product);
            let parsed = parse_product_comment_key(&product_comment_key(&product, ts, len, &comment)).expect("parse");
            proptest::prop_assert_eq!((parsed.timestamp_ms, parsed.content_utf8_len as usize, parsed.tie), (ts, len, Some(comment)));
            let parsed = parse_user_comment_key(&user_comment_key(&user, ts, &comment)).expect("parse");
            proptest::prop_assert_eq!((parsed.timestamp_ms, parsed.tie), (ts, Some(comment)));
        }
    }

    #[test]
    fn run_keys_list_the_newest_run_first_and_parse_back() {
        let older = ranker_run_key(1_700_000_000_000, "run-b");
        let newer = ranker_run_key(1_700_000_000_001, "run-a");
        let same_ms = ranker_run_key(1_700_000_000_001, "run-c");
        assert!(newer < same_ms && same_ms < older);
        assert_eq!(&older[..8], &reverse_timestamp(1_700_000_000_000));
        assert_eq!(&older[8..], b"run-b");
        let parsed = parse_ranker_run_key(&newer).expect("run key");
        assert_eq!(parsed, RankerRunKey { started_ms: 1_700_000_000_001, run_id: "run-a".to_owned() });
        assert!(parse_ranker_run_key(&reverse_timestamp(5)).is_err());
        let mut unprintable = ranker_run_key(5, "x");
        unprintable.push(0);
        assert!(parse_ranker_run_key(&unprintable).is_err());
        assert_eq!(ranker_lease_key("nightly"), b"nightly".to_vec());
        assert_eq!(shard_plan_key("asof-1", 8), b"shard-plan:8:asof-1".to_vec());
        assert_eq!(product_boundary(b"P000000001c\x00\x01"), b"P000000001");
        assert_eq!(product_boundary(b"P0"), b"P0");
    }

    #[test]
    fn the_rows_after_a_run_are_a_bounded_range_inside_the_products_prefix() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let prefix = product_comment_prefix(&product);
        let (start, stop) = product_comments_after(&product, None);
        assert_eq!(start, prefix);
        assert_eq!(Some(stop.clone()), prefix_successor(&prefix), "every row of the product, and no other");
        let (start, after_run) = product_comments_after(&product, Some(1_700_000_000_000));
        assert!(start < after_run && after_run < stop, "a run's rows end inside the prefix");
        assert_eq!(after_run, product_comment_millisecond_prefix(&product, 1_700_000_000_000));
    }
}
