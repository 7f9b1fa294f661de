//! Demo and benchmark data: a realistic, reproducible shop, written through the
//! write path so every row is one the real service could have written.
//!
//! A [`DemoSpec`] (sizes, seed, skew) becomes a [`DemoPlan`], from which every
//! record is a pure function of the seed and the record's number: each record
//! draws from its own ChaCha stream, so records can be generated in any order,
//! lazily, a batch at a time, and the same seed and sizes give byte-identical
//! data whatever the batch size or concurrency of the load.
//!
//! Ids are readable: users `U000000001`, sellers `S000000001`, products
//! `P000000001` and orders `O000000001`, each next number with its first
//! character moved so the ids spread over a pre-split table's regions
//! (`common::keys::numbered_id`). Products are numbered by
//! popularity, so `P000000001` has the most comments; comments per product
//! follow a Zipf-like curve (a few hot products, a long tail). Every comment
//! comes with its own order, placed by its author, because the write path
//! accepts only comments on the author's own orders.
//!
//! [`load`] writes users, sellers and products, then comments in batches
//! (each batch: its orders, then [`Store::post_comments`]), several batches in
//! flight at once, and reports progress through a callback.

mod text;

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::time::{Duration, Instant};

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tokio::task::JoinSet;

use common::error::Error;
use common::ids::{Id, InvalidId};
use common::keys::CommentKey;
use common::model::{Comment, Extra, Order, Product, Rating, Record, Seller, User};
use common::store::{NewComment, Store};

pub use text::MAX_REVIEW_BYTES;

const DAY_MS: i64 = 86_400_000;

/// How far back comment timestamps reach from the end time: about two years.
pub const HISTORY_MS: i64 = 730 * DAY_MS;

/// How long before the oldest possible comment a product may have been listed.
const PRODUCT_LEAD_MS: i64 = 90 * DAY_MS;

/// The default end of the history, 2026-11-01T00:00:00Z. A fixed instant rather
/// than "now", so that the same seed and sizes give the same bytes on any day;
/// pass another end time for fresh timestamps.
pub const DEFAULT_END_TIME_MS: i64 = 1_793_491_200_000;

/// The latest accepted end time (the last millisecond of the year 9999).
const MAX_END_TIME_MS: i64 = 253_402_300_799_999;

/// Ids are a letter and nine digits, so no kind of record can have more than this.
pub const MAX_RECORDS: u64 = 999_999_999;

/// Zipf exponent of comments per user: a few very active users, most with a handful.
const USER_SKEW: f64 = 0.7;

/// Zipf exponent of comments per product among the hot products.
const HOT_SKEW: f64 = 1.0;

/// Zipf exponent of comments per product in the long tail; flat enough that the
/// tail's head stays below the hot products at the default sizes.
const TAIL_SKEW: f64 = 0.6;

/// Relative frequency of the star ratings 1 to 5 (shops skew to five stars).
const RATING_WEIGHTS: [u32; 5] = [4, 5, 10, 26, 55];

/// Relative frequency of 0 to 5 photos on a comment that reports photos.
const PHOTO_WEIGHTS: [u32; 6] = [30, 25, 20, 12, 8, 5];

/// Share of comments that carry helpful/unhelpful vote counts.
const VOTED_SHARE: f64 = 0.6;

/// Share of comments that report a photo count.
const PHOTO_SHARE: f64 = 0.5;

/// Most votes of either kind on one comment.
const MAX_VOTES: f64 = 10_000.0;

/// Comments checked in one round trip when looking for an earlier load.
const CHECK_CHUNK: usize = 1_000;

/// How many products and users a [`LoadReport`] names.
pub const REPORTED_PRODUCTS: usize = 3;
/// How many of the most active users a [`LoadReport`] names.
pub const REPORTED_USERS: usize = 5;

/// What can go wrong generating or loading demo data.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The sizes or skew do not describe a data set that can be generated.
    #[error("invalid demo data set: {0}")]
    InvalidSpec(String),
    /// The batch size or concurrency is out of range.
    #[error("invalid load options: {0}")]
    InvalidOptions(String),
    /// A generated id did not validate (a number out of range slipped past the spec's checks).
    #[error(transparent)]
    InvalidId(#[from] InvalidId),
    /// Looking for an earlier load of the same data failed.
    #[error("could not check the tables for an earlier load")]
    Check(#[source] Error),
    /// The tables hold part of this data set, or other records under its ids,
    /// which a load would overwrite (orders) or collide with (comments).
    #[error(
        "the tables already hold records this load would overwrite: of {sampled} sampled comments, {orders} orders \
         and {comments} comments exist, {matching} of them exactly as this data set has them; an earlier load was \
         interrupted, used another seed or sizes, or numbered its ids in sequence (`P000000002`, ...) as older \
         versions did: drop the tables (`reviews-admin schema drop`) or use another table prefix"
    )]
    Conflicting {
        /// Comments sampled (the first of every batch and the last).
        sampled: usize,
        /// Sampled orders that exist.
        orders: usize,
        /// Sampled comments that exist.
        comments: usize,
        /// Sampled comments that exist, with their orders, exactly as generated.
        matching: usize,
    },
    /// Writing one batch failed; earlier batches stay written.
    #[error("writing {phase} {first} to {last} failed")]
    Write {
        /// What was being written.
        phase: Phase,
        /// The number of the batch's first record.
        first: u64,
        /// The number of the batch's last record.
        last: u64,
        /// Why.
        #[source]
        source: Error,
    },
    /// A write task ended without an answer (it panicked or was cancelled).
    #[error("a write task ended abnormally: {0}")]
    Task(String),
}

/// The shape of a demo data set.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSpec {
    /// Number of users.
    pub users: u64,
    /// Number of sellers.
    pub sellers: u64,
    /// Number of products.
    pub products: u64,
    /// Number of comments (and of orders: one per comment).
    pub comments: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// How many products are "hot".
    pub hot_products: u64,
    /// Share of all comments that go to the hot products, 0 to 1.
    pub hot_share: f64,
    /// The hottest product gets at least this many comments.
    pub min_hottest_comments: u64,
    /// The newest possible comment timestamp, epoch milliseconds; comments
    /// spread over the [`HISTORY_MS`] before it, denser towards the end.
    pub end_time_ms: i64,
}

impl Default for DemoSpec {
    /// A demo-sized shop that loads in seconds.
    fn default() -> Self {
        DemoSpec {
            users: 2_000,
            sellers: 20,
            products: 200,
            comments: 20_000,
            seed: 42,
            hot_products: 3,
            hot_share: 0.25,
            min_hottest_comments: 0,
            end_time_ms: DEFAULT_END_TIME_MS,
        }
    }
}

/// Bytes the plan and the load hold per user, up front: the author weights
/// (built, then kept as `WeightedIndex`'s cumulative weights) and the load's
/// comments-per-user tally, eight bytes each.
const PLANNED_BYTES_PER_USER: u64 = 24;
/// Bytes per product, up front: its weight, its comment count (and the
/// apportioning's scratch copy of it) and its end offset, eight bytes each.
const PLANNED_BYTES_PER_PRODUCT: u64 = 32;
/// The share of the machine's available memory a plan may take: the load also
/// needs its batches, the pool and the allocator's slack.
const PLANNED_SHARE_OF_AVAILABLE: u64 = 2;

impl DemoSpec {
    /// The memory a plan and its load allocate up front for this spec, in
    /// bytes (what grows with the counts; batches are bounded separately).
    pub fn planned_bytes(&self) -> u64 {
        self.users
            .saturating_mul(PLANNED_BYTES_PER_USER)
            .saturating_add(self.products.saturating_mul(PLANNED_BYTES_PER_PRODUCT))
    }

    /// Refuses a spec whose plan would take more than half of `available`
    /// bytes of memory, before anything is allocated for it.
    pub fn check_memory(&self, available: u64) -> Result<(), DemoError> {
        let needed = self.planned_bytes();
        let allowed = available / PLANNED_SHARE_OF_AVAILABLE;
        if needed > allowed {
            return Err(DemoError::InvalidSpec(format!(
                "{} users and {} products need about {} MiB of memory up front, more than half of the {} MiB \
                 available on this machine; use fewer users or products, or a larger machine",
                self.users,
                self.products,
                needed >> 20,
                available >> 20
            )));
        }
        Ok(())
    }

    /// Checks that the spec describes a data set that can be generated.
    pub fn validate(&self) -> Result<(), DemoError> {
        let invalid = |message: String| Err(DemoError::InvalidSpec(message));
        for (name, count) in
            [("users", self.users), ("sellers", self.sellers), ("products", self.products), ("comments", self.comments)]
        {
            if count > MAX_RECORDS {
                return invalid(format!("{name} is {count}; ids have nine digits, so the most is {MAX_RECORDS}"));
            }
        }
        if self.users == 0 || self.sellers == 0 || self.products == 0 {
            return invalid("users, sellers and products must each be at least 1".to_owned());
        }
        if self.hot_products > self.products {
            return invalid(format!("hot products ({}) exceed products ({})", self.hot_products, self.products));
        }
        if !(0.0..=1.0).contains(&self.hot_share) {
            return invalid(format!("hot share {} is outside 0..=1", self.hot_share));
        }
        if self.min_hottest_comments > self.comments {
            return invalid(format!(
                "the hottest product cannot get {} comments out of {}",
                self.min_hottest_comments, self.comments
            ));
        }
        let earliest = HISTORY_MS + PRODUCT_LEAD_MS;
        if !(earliest..=MAX_END_TIME_MS).contains(&self.end_time_ms) {
            return invalid(format!("end time {} ms is outside {earliest}..={MAX_END_TIME_MS}", self.end_time_ms));
        }
        Ok(())
    }
}

/// The memory this machine can still give, from `MemAvailable` in
/// /proc/meminfo; where that cannot be read, a fixed 4 GiB, so that the check
/// still refuses the absurd sizes.
fn available_memory_bytes() -> u64 {
    const FALLBACK_BYTES: u64 = 4 << 30;
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|meminfo| {
            meminfo.lines().find_map(|line| {
                let kib = line.strip_prefix("MemAvailable:")?.trim().strip_suffix("kB")?.trim();
                kib.parse::<u64>().ok().map(|kib| kib * 1024)
            })
        })
        .unwrap_or(FALLBACK_BYTES)
}

/// Independent random streams, one family per kind of record. The numbers (and
/// the index of `DemoPlan::stream_keys`, whose slot 0 is unused) are part of
/// every generated byte: changing them changes the data set of every seed.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Plan = 1,
    User = 2,
    Seller = 3,
    Product = 4,
    Comment = 5,
    Author = 6,
}

/// `a·x + b mod n` with `gcd(a, n) = 1`: a bijection of `0..n` that spreads
/// neighbours far apart. It turns the write order of comments into their slots,
/// so each batch mixes hot and cold products as a real shop's traffic would,
/// instead of writing one product's comments back to back.
#[derive(Debug, Clone, Copy)]
struct Shuffle {
    multiplier: u64,
    offset: u64,
    modulus: u64,
}

impl Shuffle {
    fn new(modulus: u64, rng: &mut ChaCha8Rng) -> Shuffle {
        if modulus == 0 {
            return Shuffle { multiplier: 0, offset: 0, modulus };
        }
        // Start near the golden ratio of the range: consecutive positions then
        // land in well separated slots.
        let mut multiplier = ((modulus as f64) * 0.618_033_988_75) as u64 % modulus;
        while greatest_common_divisor(multiplier, modulus) != 1 {
            multiplier = (multiplier + 1) % modulus;
        }
        Shuffle { multiplier, offset: rng.random_range(0..modulus), modulus }
    }

    fn apply(&self, position: u64) -> u64 {
        if self.modulus == 0 {
            return 0;
        }
        let mixed = u128::from(self.multiplier) * u128::from(position) + u128::from(self.offset);
        // The remainder is below the modulus, a u64.
        (mixed % u128::from(self.modulus)) as u64
    }
}

fn greatest_common_divisor(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Splits `total` into whole parts proportional to `weights`, each at least
/// `floor` (the caller guarantees `floor * weights.len() <= total`); leftover
/// units go to the largest fractional parts, ties to the lower index.
fn apportion(total: u64, weights: &[f64], floor: u64) -> Vec<u64> {
    let parts = weights.len() as u64;
    if parts == 0 {
        return Vec::new();
    }
    let spread = total.saturating_sub(floor * parts);
    let weight_sum: f64 = weights.iter().sum();
    let shares: Vec<f64> = if weight_sum > 0.0 {
        weights.iter().map(|weight| weight / weight_sum * spread as f64).collect()
    } else {
        vec![spread as f64 / parts as f64; weights.len()]
    };
    let mut counts: Vec<u64> = shares.iter().map(|share| share.floor() as u64).collect();
    // Rounding can push the floors' sum a unit past `spread`; take it back from the largest.
    let mut assigned: u64 = counts.iter().sum();
    while assigned > spread {
        if let Some(largest) = counts.iter_mut().max() {
            *largest -= 1;
        }
        assigned -= 1;
    }
    let mut by_fraction: Vec<usize> = (0..counts.len()).collect();
    by_fraction.sort_by(|&a, &b| (shares[b] - shares[b].floor()).total_cmp(&(shares[a] - shares[a].floor())));
    for index in by_fraction.iter().cycle().take((spread - assigned) as usize) {
        counts[*index] += 1;
    }
    counts.iter().map(|count| count + floor).collect()
}

/// Comments per product, most first: `hot_share` of them over the hot products,
/// the rest over the tail, each along a Zipf-like curve; every product gets at
/// least one when there are enough, and the hottest at least `min_hottest_comments`.
fn product_comment_counts(spec: &DemoSpec) -> Vec<u64> {
    let products = spec.products as usize;
    let hot = spec.hot_products as usize;
    let zipf = |rank: usize, exponent: f64| ((rank + 1) as f64).powf(-exponent);
    let hot_norm: f64 = (0..hot).map(|rank| zipf(rank, HOT_SKEW)).sum();
    let tail_norm: f64 = (0..products - hot).map(|rank| zipf(rank, TAIL_SKEW)).sum();
    let weights: Vec<f64> = (0..products)
        .map(|index| {
            if index < hot {
                spec.hot_share * zipf(index, HOT_SKEW) / hot_norm
            } else {
                (1.0 - spec.hot_share) * zipf(index - hot, TAIL_SKEW) / tail_norm
            }
        })
        .collect();
    let floor = u64::from(spec.comments >= spec.products);
    let mut counts = apportion(spec.comments, &weights, floor);
    counts.sort_unstable_by(|a, b| b.cmp(a));
    if counts[0] < spec.min_hottest_comments {
        let rest_total = spec.comments - spec.min_hottest_comments;
        let rest_floor = u64::from(rest_total >= spec.products - 1);
        let mut rest = apportion(rest_total, &weights[1..], rest_floor);
        rest.sort_unstable_by(|a, b| b.cmp(a));
        counts = std::iter::once(spec.min_hottest_comments).chain(rest).collect();
    }
    counts
}

/// Picks an index with probability proportional to its weight.
fn pick_weighted<R: Rng>(rng: &mut R, weights: &[u32]) -> usize {
    let total: u32 = weights.iter().sum();
    let mut ticket = rng.random_range(0..total);
    for (index, weight) in weights.iter().enumerate() {
        if ticket < *weight {
            return index;
        }
        ticket -= weight;
    }
    weights.len() - 1
}

/// A uniform draw in `(0, 1]`, safe to raise to a negative power.
fn open_unit<R: Rng>(rng: &mut R) -> f64 {
    1.0 - rng.random::<f64>()
}

/// The ids of the data set's records, by number from 1: `U000000001`,
/// `P000000001` (the hottest product), ..., spread over the id space
/// ([`common::keys::numbered_id`]).
pub use common::keys::{
    numbered_order_id as order_id, numbered_product_id as product_id, numbered_seller_id as seller_id,
    numbered_user_id as user_id,
};

/// A comment together with the order it is left on.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoComment {
    /// The order, placed by the comment's author.
    pub order: Order,
    /// The comment.
    pub comment: NewComment,
}

/// A record and how many comments it has, for the load's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ranked {
    /// The product's or user's id.
    pub id: Id,
    /// How many comments it has.
    pub comments: u64,
}

/// Everything needed to generate any record of a [`DemoSpec`] on demand.
#[derive(Debug, Clone)]
pub struct DemoPlan {
    spec: DemoSpec,
    stream_keys: [[u8; 32]; 7],
    /// `product_ends[i]` is one past the last comment slot of product `i + 1`.
    product_ends: Vec<u64>,
    authors: WeightedIndex<f64>,
    shuffle: Shuffle,
}

impl DemoPlan {
    /// Validates `spec` and lays out its comments over products and users.
    pub fn new(spec: DemoSpec) -> Result<DemoPlan, DemoError> {
        spec.validate()?;
        spec.check_memory(available_memory_bytes())?;
        let mut stream_keys = [[0u8; 32]; 7];
        for (stream, key) in stream_keys.iter_mut().enumerate() {
            let mut root = ChaCha8Rng::seed_from_u64(spec.seed);
            root.set_stream(stream as u64);
            root.fill_bytes(key);
        }
        let product_ends: Vec<u64> = product_comment_counts(&spec)
            .into_iter()
            .scan(0u64, |end, count| {
                *end += count;
                Some(*end)
            })
            .collect();
        let author_weights = (0..spec.users).map(|rank| ((rank + 1) as f64).powf(-USER_SKEW));
        let authors = WeightedIndex::new(author_weights)
            .map_err(|error| DemoError::InvalidSpec(format!("cannot weight {} users: {error}", spec.users)))?;
        let mut plan = DemoPlan {
            spec,
            stream_keys,
            product_ends,
            authors,
            shuffle: Shuffle { multiplier: 0, offset: 0, modulus: 0 },
        };
        let mut plan_rng = plan.rng(Stream::Plan, 0);
        plan.shuffle = Shuffle::new(plan.spec.comments, &mut plan_rng);
        Ok(plan)
    }

    /// The spec this plan generates.
    pub fn spec(&self) -> &DemoSpec {
        &self.spec
    }

    fn rng(&self, stream: Stream, number: u64) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::from_seed(self.stream_keys[stream as usize]);
        rng.set_stream(number);
        rng
    }

    /// User `number` (1-based).
    pub fn user(&self, number: u64) -> Result<User, DemoError> {
        let mut rng = self.rng(Stream::User, number);
        Ok(User {
            id: user_id(number)?,
            name: text::person_name(&mut rng),
            nickname: text::nickname(&mut rng),
            extra: Extra::new(),
        })
    }

    /// Seller `number` (1-based).
    pub fn seller(&self, number: u64) -> Result<Seller, DemoError> {
        let mut rng = self.rng(Stream::Seller, number);
        Ok(Seller { id: seller_id(number)?, name: text::seller_name(&mut rng), extra: Extra::new() })
    }

    /// Product `number` (1-based), listed before its oldest possible comment.
    pub fn product(&self, number: u64) -> Result<Product, DemoError> {
        let mut rng = self.rng(Stream::Product, number);
        let id = product_id(number)?;
        let seller = rng.random_range(1..=self.spec.sellers);
        let created_at = self.history_start_ms() - rng.random_range(0..PRODUCT_LEAD_MS);
        let updated_at = created_at + rng.random_range(0..=self.spec.end_time_ms - created_at);
        Ok(Product {
            id,
            seller_id: seller_id(seller)?,
            content: text::product_page(&mut rng, id.as_str()),
            created_at,
            updated_at,
            extra: Extra::new(),
        })
    }

    /// The oldest possible comment timestamp.
    pub fn history_start_ms(&self) -> i64 {
        self.spec.end_time_ms - HISTORY_MS
    }

    /// How many comments product `number` (1-based) gets.
    pub fn product_comments(&self, number: u64) -> u64 {
        let index = number.saturating_sub(1) as usize;
        let end = self.product_ends.get(index).copied().unwrap_or(0);
        let start = if index == 0 { 0 } else { self.product_ends.get(index - 1).copied().unwrap_or(end) };
        end - start
    }

    /// The products with the most comments, most first.
    pub fn hottest_products(&self, count: usize) -> Result<Vec<Ranked>, DemoError> {
        let mut numbers: Vec<u64> = (1..=self.spec.products).collect();
        numbers.sort_by_key(|number| std::cmp::Reverse(self.product_comments(*number)));
        numbers
            .into_iter()
            .take(count)
            .map(|number| Ok(Ranked { id: product_id(number)?, comments: self.product_comments(number) }))
            .collect()
    }

    /// The product (1-based number) that the comment written at `position` reviews.
    fn product_of(&self, position: u64) -> u64 {
        let slot = self.shuffle.apply(position);
        self.product_ends.partition_point(|end| *end <= slot) as u64 + 1
    }

    /// The author (1-based user number) of the comment written at `position`.
    pub fn author_of(&self, position: u64) -> u64 {
        let mut rng = self.rng(Stream::Author, position);
        self.authors.sample(&mut rng) as u64 + 1
    }

    /// The comment written at `position` (0-based, below `spec.comments`) and
    /// its order, `O` followed by `position + 1`.
    pub fn comment(&self, position: u64) -> Result<DemoComment, DemoError> {
        let user = user_id(self.author_of(position))?;
        let order = Order { id: order_id(position + 1)?, user_id: user, extra: Extra::new() };
        let mut rng = self.rng(Stream::Comment, position);
        let rating = pick_weighted(&mut rng, &RATING_WEIGHTS) as u8 + 1;
        let content = text::review(&mut rng, rating);
        // Skewed towards the end: a shop gets more reviews as it grows.
        let age = (HISTORY_MS as f64 * rng.random::<f64>().powf(1.5)) as i64;
        let (helpful, unhelpful) = if rng.random_bool(VOTED_SHARE) {
            // Heavy-tailed: most comments get no votes, a few get hundreds, and
            // longer texts reach more readers. Low ratings draw more "unhelpful".
            let reach = 1.0 + content.chars().count() as f64 / 200.0;
            let helpful = ((open_unit(&mut rng).powf(-0.8) - 1.0) * reach).floor().min(MAX_VOTES);
            let harshness = if rating <= 2 { 1.0 } else { 0.3 };
            let unhelpful = ((open_unit(&mut rng).powf(-0.6) - 1.0) * harshness).floor().min(MAX_VOTES);
            (Some(helpful as u64), Some(unhelpful as u64))
        } else {
            (None, None)
        };
        let photos = rng.random_bool(PHOTO_SHARE).then(|| pick_weighted(&mut rng, &PHOTO_WEIGHTS) as u32);
        let comment = NewComment {
            order_id: order.id,
            product_id: product_id(self.product_of(position))?,
            user_id: user,
            content,
            timestamp_ms: self.spec.end_time_ms - age,
            rating: Some(rating),
            helpful,
            unhelpful,
            photos,
        };
        Ok(DemoComment { order, comment })
    }

    /// Counts comments per user over the whole data set and names the most active.
    fn most_active_users(&self, comments_per_user: &[u64], count: usize) -> Result<Vec<Ranked>, DemoError> {
        let mut numbers: Vec<usize> = (0..comments_per_user.len()).collect();
        numbers.sort_by_key(|index| std::cmp::Reverse(comments_per_user[*index]));
        numbers
            .into_iter()
            .take(count)
            .map(|index| Ok(Ranked { id: user_id(index as u64 + 1)?, comments: comments_per_user[index] }))
            .collect()
    }
}

/// How a load runs.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Records per write call (comments per [`Store::post_comments`] call).
    pub batch_size: usize,
    /// Batches being written at once.
    pub in_flight: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { batch_size: 1_000, in_flight: 4 }
    }
}

impl LoadOptions {
    /// The largest batch accepted: beyond a few thousand comments a batch only
    /// adds latency and memory, and its Thrift messages grow to tens of megabytes.
    pub const MAX_BATCH_SIZE: usize = 10_000;
    /// The most batches in flight accepted.
    pub const MAX_IN_FLIGHT: usize = 64;

    fn validate(&self) -> Result<(), DemoError> {
        if !(1..=Self::MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(DemoError::InvalidOptions(format!(
                "batch size {} is outside 1..={}",
                self.batch_size,
                Self::MAX_BATCH_SIZE
            )));
        }
        if !(1..=Self::MAX_IN_FLIGHT).contains(&self.in_flight) {
            return Err(DemoError::InvalidOptions(format!(
                "in-flight batches {} is outside 1..={}",
                self.in_flight,
                Self::MAX_IN_FLIGHT
            )));
        }
        Ok(())
    }
}

/// The stages of a load, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Writing users.
    Users,
    /// Writing sellers.
    Sellers,
    /// Writing products.
    Products,
    /// Writing orders and comments.
    Comments,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Users => "users",
            Phase::Sellers => "sellers",
            Phase::Products => "products",
            Phase::Comments => "comments",
        })
    }
}

/// Where a load stands: `done` of `total` records of `phase` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The stage.
    pub phase: Phase,
    /// Records of this stage written so far.
    pub done: u64,
    /// Records this stage writes.
    pub total: u64,
}

/// What a load did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The whole data set was already in the tables; nothing was written.
    pub already_loaded: bool,
    /// Users in the data set.
    pub users: u64,
    /// Sellers in the data set.
    pub sellers: u64,
    /// Products in the data set.
    pub products: u64,
    /// Orders in the data set (one per comment).
    pub orders: u64,
    /// Comments in the data set.
    pub comments: u64,
    /// Time of the whole load.
    pub elapsed: Duration,
    /// Time spent writing orders and comments.
    pub comments_elapsed: Duration,
    /// The products with the most comments, most first.
    pub hottest_products: Vec<Ranked>,
    /// The users with the most comments, most first.
    pub active_users: Vec<Ranked>,
}

impl LoadReport {
    /// Comments written per second of the comment stage (0 when nothing was written).
    pub fn comments_per_second(&self) -> f64 {
        let seconds = self.comments_elapsed.as_secs_f64();
        if self.already_loaded || seconds <= 0.0 {
            0.0
        } else {
            self.comments as f64 / seconds
        }
    }
}

/// What an earlier load left in the tables.
enum Earlier {
    Nothing,
    Everything,
    Other { sampled: usize, orders: usize, comments: usize, matching: usize },
}

/// Reads rows by key from `table`, in chunks of [`CHECK_CHUNK`], keyed by row key.
async fn read_rows(store: &Store, table: &str, keys: &[Vec<u8>]) -> Result<HashMap<Vec<u8>, Vec<u8>>, DemoError> {
    let mut found = HashMap::new();
    for chunk in keys.chunks(CHECK_CHUNK) {
        found.extend(store.stored_values(table, chunk.to_vec()).await.map_err(DemoError::Check)?);
    }
    Ok(found)
}

/// Whether a stored comment is exactly the generated one (as posted, never edited).
fn is_generated(stored: &[u8], generated: &NewComment) -> bool {
    Comment::from_json(stored).is_ok_and(|comment| {
        comment.user_id == generated.user_id
            && comment.product_id == generated.product_id
            && comment.text() == generated.content
            && comment.timestamp == generated.timestamp_ms
            && comment.rating.as_ref().and_then(Rating::stars) == generated.rating
            && comment.helpful == generated.helpful
            && comment.unhelpful == generated.unhelpful
            && comment.photos == generated.photos
            && !comment.edited
    })
}

/// Looks for an earlier load by sampling this data set's orders and comments:
/// the first of every batch, and the last. The data is deterministic, so
/// finding every sample exactly as generated means this data set is loaded;
/// finding none means the ids are free; anything else means a load stopped
/// part way or other data uses the same ids, which a load must not overwrite.
async fn earlier_load(store: &Store, plan: &DemoPlan, stride: usize) -> Result<Earlier, DemoError> {
    let total = plan.spec.comments;
    if total == 0 {
        return Ok(Earlier::Nothing);
    }
    let mut positions: Vec<u64> = (0..total).step_by(stride).collect();
    if positions.last() != Some(&(total - 1)) {
        positions.push(total - 1);
    }
    let samples =
        positions.iter().map(|position| plan.comment(*position)).collect::<Result<Vec<DemoComment>, DemoError>>()?;
    let order_keys: Vec<Vec<u8>> = samples.iter().map(|sample| sample.order.row_key()).collect();
    let comment_keys: Vec<Vec<u8>> = samples
        .iter()
        .map(|sample| CommentKey::new(&sample.comment.order_id, &sample.comment.product_id).as_bytes().to_vec())
        .collect();
    let orders = read_rows(store, &store.tables().order, &order_keys).await?;
    let comments = read_rows(store, &store.tables().comment, &comment_keys).await?;
    let matching = samples
        .iter()
        .zip(order_keys.iter().zip(&comment_keys))
        .filter(|(sample, (order_key, comment_key))| {
            let order_matches =
                orders.get(*order_key).is_some_and(|stored| stored.as_slice() == sample.order.to_json());
            let comment_matches =
                comments.get(*comment_key).is_some_and(|stored| is_generated(stored, &sample.comment));
            order_matches && comment_matches
        })
        .count();
    let sampled = samples.len();
    Ok(if orders.is_empty() && comments.is_empty() {
        Earlier::Nothing
    } else if matching == sampled {
        Earlier::Everything
    } else {
        Earlier::Other { sampled, orders: orders.len(), comments: comments.len(), matching }
    })
}

/// Writes `total` records of `phase`: `generate` builds the batch of a range of
/// record positions (on the caller's task, so generation is sequential and
/// memory holds at most `in_flight` batches), `write` stores it on a task of
/// its own. Stops at the first failed batch; batches still in flight are
/// abandoned.
async fn write_batches<B, Fut>(
    store: &Store,
    phase: Phase,
    total: u64,
    options: &LoadOptions,
    mut generate: impl FnMut(Range<u64>) -> Result<B, DemoError>,
    write: impl Fn(Store, B) -> Fut,
    on_progress: &mut impl FnMut(Progress),
) -> Result<(), DemoError>
where
    Fut: Future<Output = Result<(), Error>> + Send + 'static,
{
    let mut tasks: JoinSet<(Range<u64>, Result<(), Error>)> = JoinSet::new();
    let mut next = 0;
    let mut done = 0;
    on_progress(Progress { phase, done, total });
    while next < total || !tasks.is_empty() {
        if next < total && tasks.len() < options.in_flight {
            let range = next..(next + options.batch_size as u64).min(total);
            next = range.end;
            let batch = generate(range.clone())?;
            let writing = write(store.clone(), batch);
            tasks.spawn(async move { (range, writing.await) });
            continue;
        }
        let Some(joined) = tasks.join_next().await else {
            break;
        };
        let (range, outcome) = joined.map_err(|error| DemoError::Task(error.to_string()))?;
        outcome.map_err(|source| DemoError::Write { phase, first: range.start + 1, last: range.end, source })?;
        done += range.end - range.start;
        on_progress(Progress { phase, done, total });
    }
    Ok(())
}

/// Writes the data set of `plan` into `store`'s tables, which must exist.
///
/// Users, sellers and products are plain puts (rewriting them is harmless).
/// Each batch of comments is written as its orders, then one
/// [`Store::post_comments`] call, which checks ownership and writes comment
/// rows before index rows. When the tables already hold this whole data set
/// the load writes nothing and says so; when they hold part of it, or other
/// records under its order and comment ids, it refuses before writing anything.
pub async fn load(
    store: &Store,
    plan: &DemoPlan,
    options: &LoadOptions,
    mut on_progress: impl FnMut(Progress),
) -> Result<LoadReport, DemoError> {
    options.validate()?;
    let started = Instant::now();
    let spec = plan.spec();
    let mut comments_per_user = vec![0u64; spec.users as usize];
    let mut report = LoadReport {
        already_loaded: false,
        users: spec.users,
        sellers: spec.sellers,
        products: spec.products,
        orders: spec.comments,
        comments: spec.comments,
        elapsed: Duration::ZERO,
        comments_elapsed: Duration::ZERO,
        hottest_products: plan.hottest_products(REPORTED_PRODUCTS)?,
        active_users: Vec::new(),
    };
    match earlier_load(store, plan, options.batch_size).await? {
        Earlier::Other { sampled, orders, comments, matching } => {
            return Err(DemoError::Conflicting { sampled, orders, comments, matching })
        }
        Earlier::Everything => {
            for position in 0..spec.comments {
                comments_per_user[plan.author_of(position) as usize - 1] += 1;
            }
            report.already_loaded = true;
        }
        Earlier::Nothing => {
            put_entities(store, Phase::Users, spec.users, options, |number| plan.user(number), &mut on_progress)
                .await?;
            put_entities(store, Phase::Sellers, spec.sellers, options, |number| plan.seller(number), &mut on_progress)
                .await?;
            put_entities(
                store,
                Phase::Products,
                spec.products,
                options,
                |number| plan.product(number),
                &mut on_progress,
            )
            .await?;
            let comments_started = Instant::now();
            write_batches(
                store,
                Phase::Comments,
                spec.comments,
                options,
                |positions| {
                    let size = (positions.end - positions.start) as usize;
                    let mut orders = Vec::with_capacity(size);
                    let mut comments = Vec::with_capacity(size);
                    for position in positions {
                        let DemoComment { order, comment } = plan.comment(position)?;
                        comments_per_user[plan.author_of(position) as usize - 1] += 1;
                        orders.push(order);
                        comments.push(comment);
                    }
                    Ok((orders, comments))
                },
                |store: Store, (orders, comments): (Vec<Order>, Vec<NewComment>)| async move {
                    // The orders first: post_comments refuses a comment whose order is missing.
                    store.put_records(&orders).await?;
                    store.post_comments(comments).await.map(drop)
                },
                &mut on_progress,
            )
            .await?;
            report.comments_elapsed = comments_started.elapsed();
        }
    }
    report.active_users = plan.most_active_users(&comments_per_user, REPORTED_USERS)?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Writes records `1..=total` made by `make` with plain batched puts.
async fn put_entities<R: Record + Sync>(
    store: &Store,
    phase: Phase,
    total: u64,
    options: &LoadOptions,
    make: impl Fn(u64) -> Result<R, DemoError>,
    on_progress: &mut impl FnMut(Progress),
) -> Result<(), DemoError> {
    write_batches(
        store,
        phase,
        total,
        options,
        |positions| positions.map(|position| make(position + 1)).collect::<Result<Vec<R>, DemoError>>(),
        |store: Store, records: Vec<R>| async move { store.put_records(&records).await },
        on_progress,
    )
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    fn small_spec(seed: u64) -> DemoSpec {
        DemoSpec {
            users: 300,
            sellers: 7,
            products: 50,
            comments: 5_000,
            seed,
            hot_products: 3,
            hot_share: 0.3,
            min_hottest_comments: 0,
            end_time_ms: DEFAULT_END_TIME_MS,
        }
    }

    fn plan(spec: DemoSpec) -> DemoPlan {
        DemoPlan::new(spec).expect("valid spec")
    }

    fn all_comments(plan: &DemoPlan) -> Vec<DemoComment> {
        (0..plan.spec().comments).map(|position| plan.comment(position).expect("comment")).collect()
    }

    fn comment_json(demo: &DemoComment) -> Vec<u8> {
        let comment = demo.comment.clone();
        let record = common::model::Comment {
            order_id: comment.order_id,
            product_id: comment.product_id,
            user_id: comment.user_id,
            content: Some(comment.content),
            timestamp: comment.timestamp_ms,
            edited: false,
            rating: comment.rating.map(Rating::of_stars),
            helpful: comment.helpful,
            unhelpful: comment.unhelpful,
            photos: comment.photos,
            extra: Extra::new(),
        };
        record.to_json()
    }

    #[test]
    fn the_same_seed_gives_the_same_records_and_another_seed_different_ones() {
        let first = plan(small_spec(7));
        let second = plan(small_spec(7));
        let other = plan(small_spec(8));
        for number in 1..=first.spec().users {
            assert_eq!(first.user(number).expect("user").to_json(), second.user(number).expect("user").to_json());
        }
        for number in 1..=first.spec().products {
            let product = first.product(number).expect("product");
            assert_eq!(product.to_json(), second.product(number).expect("product").to_json());
        }
        let first_comments: Vec<Vec<u8>> = all_comments(&first).iter().map(comment_json).collect();
        let second_comments: Vec<Vec<u8>> = all_comments(&second).iter().map(comment_json).collect();
        assert_eq!(first_comments, second_comments);
        let other_comments: Vec<Vec<u8>> = all_comments(&other).iter().map(comment_json).collect();
        let same = first_comments.iter().zip(&other_comments).filter(|(a, b)| a == b).count();
        assert!(same < first_comments.len() / 100, "{same} comments identical across seeds");
    }

    #[test]
    fn records_do_not_depend_on_the_order_they_are_generated_in() {
        let plan = plan(small_spec(3));
        let forward: Vec<DemoComment> = all_comments(&plan);
        for position in (0..plan.spec().comments).rev().step_by(97) {
            assert_eq!(plan.comment(position).expect("comment"), forward[position as usize]);
        }
    }

    #[test]
    fn ids_are_readable_valid_and_orders_unique_and_owned_by_the_author() {
        assert_eq!(user_id(1).expect("id").as_str(), "U000000001");
        assert_eq!(product_id(2).expect("id").as_str(), "m000000002");
        assert!(product_id(MAX_RECORDS).expect("id").as_str().ends_with("999999999"));
        let plan = plan(small_spec(1));
        let comments = all_comments(&plan);
        let orders: HashSet<Id> = comments.iter().map(|demo| demo.order.id).collect();
        assert_eq!(orders.len(), comments.len());
        let users: HashSet<Id> = (1..=plan.spec().users).map(|number| user_id(number).expect("id")).collect();
        let sellers: HashSet<Id> = (1..=plan.spec().sellers).map(|number| seller_id(number).expect("id")).collect();
        for demo in &comments {
            assert_eq!(demo.order.user_id, demo.comment.user_id);
            assert_eq!(demo.order.id, demo.comment.order_id);
            assert!(users.contains(&demo.comment.user_id));
        }
        for number in 1..=plan.spec().products {
            assert!(sellers.contains(&plan.product(number).expect("product").seller_id));
        }
    }

    #[test]
    fn comments_per_product_are_skewed_with_the_hottest_first_and_every_product_covered() {
        let plan = plan(small_spec(11));
        let mut per_product: HashMap<Id, u64> = HashMap::new();
        for demo in all_comments(&plan) {
            *per_product.entry(demo.comment.product_id).or_default() += 1;
        }
        let counts: Vec<u64> = (1..=plan.spec().products)
            .map(|number| per_product.get(&product_id(number).expect("id")).copied().unwrap_or(0))
            .collect();
        // What was generated is exactly what the plan promised, product by product.
        for (index, count) in counts.iter().enumerate() {
            assert_eq!(*count, plan.product_comments(index as u64 + 1), "product {}", index + 1);
        }
        assert_eq!(counts.iter().sum::<u64>(), plan.spec().comments);
        assert!(counts.windows(2).all(|pair| pair[0] >= pair[1]), "{counts:?}");
        assert!(counts.iter().all(|count| *count >= 1), "{counts:?}");
        let hot: u64 = counts[..3].iter().sum();
        assert!(hot as f64 >= 0.29 * plan.spec().comments as f64, "hot products got {hot}");
        assert!(counts[0] > 10 * counts[counts.len() - 1], "{counts:?}");
        let hottest = plan.hottest_products(3).expect("hottest");
        assert_eq!(hottest[0], Ranked { id: product_id(1).expect("id"), comments: counts[0] });
        assert_eq!(hottest.iter().map(|ranked| ranked.comments).collect::<Vec<_>>(), counts[..3].to_vec());
    }

    #[test]
    fn the_hottest_product_gets_at_least_the_guaranteed_count() {
        let spec = DemoSpec { min_hottest_comments: 2_500, ..small_spec(5) };
        let plan = plan(spec);
        let hottest = product_id(1).expect("id");
        let generated = all_comments(&plan).iter().filter(|demo| demo.comment.product_id == hottest).count();
        assert_eq!(generated, 2_500);
        assert_eq!(plan.product_comments(1), 2_500);
        assert!((2..=50).all(|number| plan.product_comments(number) >= 1 && plan.product_comments(number) < 2_500));
    }

    #[test]
    fn some_users_write_many_comments_and_most_few() {
        let plan = plan(small_spec(2));
        let mut per_user = vec![0u64; plan.spec().users as usize];
        for position in 0..plan.spec().comments {
            per_user[plan.author_of(position) as usize - 1] += 1;
        }
        let active = plan.most_active_users(&per_user, 3).expect("active");
        assert_eq!(active[0].comments, *per_user.iter().max().expect("users"));
        let median = {
            let mut sorted = per_user.clone();
            sorted.sort_unstable();
            sorted[sorted.len() / 2]
        };
        assert!(active[0].comments >= 5 * median.max(1), "top {} median {median}", active[0].comments);
    }

    #[test]
    fn content_mixes_languages_lengths_and_repeated_phrases() {
        let plan = plan(small_spec(9));
        let comments = all_comments(&plan);
        let contents: Vec<&str> = comments.iter().map(|demo| demo.comment.content.as_str()).collect();
        let hangul = |c: char| ('\u{AC00}'..='\u{D7A3}').contains(&c);
        let has_hangul = |text: &&str| text.chars().any(hangul);
        let has_latin = |text: &&str| text.chars().any(|c| c.is_ascii_alphabetic());
        let share = |count: usize| count as f64 / contents.len() as f64;
        let korean_only = contents.iter().filter(|text| has_hangul(text) && !has_latin(text)).count();
        let latin_only = contents.iter().filter(|text| has_latin(text) && !has_hangul(text)).count();
        let mixed = contents.iter().filter(|text| has_hangul(text) && has_latin(text)).count();
        assert!(share(korean_only) > 0.3, "korean {korean_only}");
        assert!(share(latin_only) > 0.1, "latin {latin_only}");
        assert!(share(mixed) > 0.03, "mixed {mixed}");
        let short = contents.iter().filter(|text| text.trim().chars().count() < 10).count();
        assert!((0.05..0.25).contains(&share(short)), "short {short}");
        let long = contents.iter().filter(|text| text.len() >= 1_000).count();
        assert!(long > 0, "no long reviews");
        assert!(contents.iter().all(|text| !text.trim().is_empty() && text.len() <= MAX_REVIEW_BYTES));
        // Stock phrases recur, verbatim and after the ranker's normalisation.
        let normalised = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for text in contents.iter().filter(|text| text.trim().chars().count() >= 10) {
            *seen.entry(normalised(text)).or_default() += 1;
        }
        assert!(seen.get("good product").copied().unwrap_or(0) >= 5, "{:?}", seen.get("good product"));
    }

    #[test]
    fn fields_stay_in_their_ranges_and_optional_ones_are_sometimes_absent() {
        let plan = plan(small_spec(4));
        let comments = all_comments(&plan);
        let start = plan.history_start_ms();
        let end = plan.spec().end_time_ms;
        let mut created = HashMap::new();
        for number in 1..=plan.spec().products {
            let product = plan.product(number).expect("product");
            assert!(
                product.created_at < start && product.created_at <= product.updated_at && product.updated_at <= end
            );
            assert!(!product.content.is_empty());
            created.insert(product.id, product.created_at);
        }
        for demo in &comments {
            let comment = &demo.comment;
            assert!((start..=end).contains(&comment.timestamp_ms));
            assert!(comment.timestamp_ms > created[&comment.product_id]);
            assert!(matches!(comment.rating, Some(1..=5)));
            assert!(comment.photos.is_none_or(|photos| photos <= 5));
        }
        let recent = comments.iter().filter(|demo| demo.comment.timestamp_ms > end - HISTORY_MS / 2).count();
        assert!(recent > comments.len() / 2, "the newer year holds {recent}");
        for present in [
            comments.iter().filter(|demo| demo.comment.helpful.is_some()).count(),
            comments.iter().filter(|demo| demo.comment.photos.is_some()).count(),
        ] {
            assert!(present > comments.len() / 4 && present < comments.len() * 9 / 10, "{present}");
        }
        let ratings: HashSet<u8> = comments.iter().filter_map(|demo| demo.comment.rating).collect();
        assert_eq!(ratings.len(), 5);
        let most_helpful = comments.iter().filter_map(|demo| demo.comment.helpful).max().unwrap_or(0);
        assert!(most_helpful >= 50, "most helpful votes {most_helpful}");
    }

    #[test]
    fn refuses_specs_that_cannot_be_generated() {
        let base = small_spec(1);
        let bad = [
            DemoSpec { users: 0, ..base.clone() },
            DemoSpec { products: 0, ..base.clone() },
            DemoSpec { comments: MAX_RECORDS + 1, ..base.clone() },
            DemoSpec { hot_products: 51, ..base.clone() },
            DemoSpec { hot_share: 1.5, ..base.clone() },
            DemoSpec { hot_share: f64::NAN, ..base.clone() },
            DemoSpec { min_hottest_comments: 5_001, ..base.clone() },
            DemoSpec { end_time_ms: 0, ..base.clone() },
        ];
        for spec in bad {
            assert!(matches!(DemoPlan::new(spec.clone()), Err(DemoError::InvalidSpec(_))), "{spec:?}");
        }
        for options in [LoadOptions { batch_size: 0, in_flight: 1 }, LoadOptions { batch_size: 10, in_flight: 0 }] {
            assert!(matches!(options.validate(), Err(DemoError::InvalidOptions(_))));
        }
    }

    #[test]
    fn edge_sizes_still_generate() {
        for (products, comments, hot) in [(1, 0, 0), (1, 1, 1), (10, 3, 2), (5, 5, 5), (20, 100, 0)] {
            let spec = DemoSpec { products, comments, hot_products: hot, ..small_spec(1) };
            let plan = plan(spec);
            let total: u64 = (1..=products).map(|number| plan.product_comments(number)).sum();
            assert_eq!(total, comments);
            assert_eq!(all_comments(&plan).len() as u64, comments);
        }
    }

    #[test]
    fn apportion_splits_exactly_and_honours_the_floor() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0], 0), vec![4, 3, 3]);
        assert_eq!(apportion(10, &[0.0, 0.0], 1), vec![5, 5]);
        assert_eq!(apportion(7, &[5.0, 1.0, 0.0], 1), vec![4, 2, 1]);
        let weights: Vec<f64> = (1..=1000).map(|rank| f64::from(rank).powf(-0.6)).collect();
        let counts = apportion(1_000_003, &weights, 1);
        assert_eq!(counts.iter().sum::<u64>(), 1_000_003);
        assert!(counts.iter().all(|count| *count >= 1));
    }

    #[test]
    fn sizes_that_cannot_fit_in_memory_are_refused_with_the_estimate() {
        let huge = DemoSpec { users: MAX_RECORDS, products: MAX_RECORDS, ..DemoSpec::default() };
        assert!(huge.validate().is_ok(), "the ids fit; only the memory does not");
        let error = huge.check_memory(8 << 30).expect_err("8 GiB cannot hold a plan of a billion users");
        let message = error.to_string();
        assert!(message.contains("53405 MiB") && message.contains("8192 MiB"), "{message}");
        assert!(DemoSpec::default().check_memory(8 << 30).is_ok());
        assert!(matches!(DemoPlan::new(huge), Err(DemoError::InvalidSpec(_))), "the plan refuses it before allocating");
    }
}
