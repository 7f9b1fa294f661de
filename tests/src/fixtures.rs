//! Review data the tests write through the store's own write path: single
//! comments, their orders, and a deterministic catalogue of products, users and
//! comments large enough for load and fault tests.

use common::keys::CommentKey;
use common::model::{Comment, Extra, Order};
use common::store::{NewComment, ProductRanking, Store};
use common::summary::ReviewSummary;
use common::Id;

use crate::test_id;

/// The as-of time of every ranking in these tests: a fixed instant, so runs compare byte for byte.
pub const AS_OF_MS: i64 = 1_750_000_000_000;
const DAY_MS: i64 = 86_400_000;

/// A comment on `order` with no votes, photos or rating.
pub fn new_comment(order: &Id, product: &Id, user: &Id, content: impl Into<String>, timestamp_ms: i64) -> NewComment {
    NewComment {
        order_id: *order,
        product_id: *product,
        user_id: *user,
        content: content.into(),
        timestamp_ms,
        rating: None,
        helpful: None,
        unhelpful: None,
        photos: None,
    }
}

/// Writes one order per `(order, user)` pair, so comments on them may be posted.
pub async fn put_orders(store: &Store, orders: &[(Id, Id)]) {
    let orders: Vec<Order> =
        orders.iter().map(|(order, user)| Order { id: *order, user_id: *user, extra: Extra::new() }).collect();
    store.put_records(&orders).await.expect("put orders");
}

/// Writes `ranked` (best first) as `product`'s ranking, as a run as of
/// [`AS_OF_MS`] would (its ranking record and its slots), with an empty review
/// summary: tests of the summary rank with the ranker itself.
pub async fn write_ranking(store: &Store, product: &Id, ranked: &[(CommentKey, f64)]) {
    let ranking = ProductRanking {
        product: *product,
        as_of_ms: AS_OF_MS,
        ranked: ranked.to_vec(),
        summary: ReviewSummary::default(),
    };
    store.write_ranking(&ranking).await.expect("write a ranking");
}

/// Writes `products` products (`p0000000000`, `p0000000001`, ...) of
/// `per_product` comments each through the write path: comment `index` of
/// product `number` is on order `o{number * 100 + index}` by user
/// `u{number * 100 + index}`, five stars, `3 * index` helpful votes and one
/// unhelpful, longer the higher its index, written at
/// `timestamp_of(number, index)`. The small numbered data set of the run,
/// daemon and incremental tests, whose ids they name directly.
pub async fn post_numbered(store: &Store, products: u64, per_product: u64, timestamp_of: impl Fn(u64, u64) -> i64) {
    assert!(per_product <= 100, "order and user numbers are product * 100 + index");
    let mut comments = Vec::new();
    for number in 0..products {
        for index in 0..per_product {
            comments.push(NewComment {
                order_id: test_id("o", number * 100 + index),
                product_id: test_id("p", number),
                user_id: test_id("u", number * 100 + index),
                content: format!(
                    "Review {index} of product {number}: sturdy and well made{}",
                    " and more".repeat(usize::try_from(index).expect("small"))
                ),
                timestamp_ms: timestamp_of(number, index),
                rating: Some(5),
                helpful: Some(index * 3),
                unhelpful: Some(1),
                photos: None,
            });
        }
    }
    post_all(store, comments).await;
}

/// The shape of a deterministic review data set.
#[derive(Debug, Clone, Copy)]
pub struct Catalogue {
    pub products: u64,
    pub comments_per_product: u64,
    pub users: u64,
}

impl Catalogue {
    pub fn product(&self, number: u64) -> Id {
        test_id("P", number)
    }

    pub fn user(&self, number: u64) -> Id {
        test_id("U", number)
    }

    /// The comments of the data set: varied lengths, votes, photos and ages,
    /// a function of their position only, so every load writes the same bytes.
    pub fn new_comments(&self, first_order: u64) -> Vec<NewComment> {
        let mut comments = Vec::new();
        for product in 0..self.products {
            for slot in 0..self.comments_per_product {
                let position = product * self.comments_per_product + slot;
                let mix = position.wrapping_mul(2_654_435_761) % 1_000;
                let words = ["sturdy", "배송이 빨라요", "fits well", "great value", "조용하고 좋아요", "too small"];
                let word = words[usize::try_from(mix % 6).expect("small")];
                let content = format!(
                    "{word} — review {position}: {}",
                    "detail ".repeat(usize::try_from(mix % 40).expect("small"))
                );
                comments.push(NewComment {
                    order_id: test_id("O", first_order + position),
                    product_id: self.product(product),
                    user_id: self.user(position % self.users),
                    content,
                    timestamp_ms: AS_OF_MS
                        - i64::try_from(mix).expect("small") * DAY_MS / 3
                        - i64::try_from(slot).expect("small"),
                    rating: None,
                    helpful: (mix % 3 != 0).then_some(mix % 97),
                    unhelpful: (mix % 4 == 0).then_some(mix % 13),
                    photos: (mix % 5 == 0).then_some(u32::try_from(mix % 4).expect("small")),
                })
            }
        }
        comments
    }
}

/// Writes `comments` through the write path, with their orders, in batches.
pub async fn post_all(store: &Store, comments: Vec<NewComment>) -> Vec<Comment> {
    let orders: Vec<Order> =
        comments.iter().map(|new| Order { id: new.order_id, user_id: new.user_id, extra: Extra::new() }).collect();
    for chunk in orders.chunks(2_000) {
        store.put_records(chunk).await.expect("put orders");
    }
    let mut written = Vec::with_capacity(comments.len());
    let mut tasks = tokio::task::JoinSet::new();
    for (index, chunk) in comments.chunks(500).enumerate() {
        let store = store.clone();
        let chunk = chunk.to_vec();
        tasks.spawn(async move { (index, store.post_comments(chunk).await.expect("post comments")) });
    }
    let mut batches = Vec::new();
    while let Some(done) = tasks.join_next().await {
        batches.push(done.expect("post task"));
    }
    batches.sort_by_key(|(index, _)| *index);
    for (_, batch) in batches {
        written.extend(batch);
    }
    written
}
