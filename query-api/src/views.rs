//! The JSON the routes answer with.
//!
//! A comment is shown as stored: [`common::model::Comment`] serialises the way
//! the seed's Jackson did (`edited`, unknown fields kept), so the service adds
//! nothing and loses nothing. `/v1` pages carry an opaque `nextCursor`; the
//! seed's routes carry `nextIndexKey` (standard base64, as Jackson writes
//! `byte[]`) and, like the seed's Jackson output, each comment's `rowKey`.
//! Each type derives its OpenAPI schema here, beside its serde shape (the
//! comment's own comes from `common::model::Comment`, `openapi` feature).

use std::borrow::Cow;

use axum::body::Bytes;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use common::model::Comment;
use common::summary::ReviewSummary;
use common::Id;
use serde::Serialize;
use utoipa::openapi::{ObjectBuilder, RefOr, Schema, Type};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorCode};

/// A page of comments, newest first (`/v1`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommentsPage {
    /// The page's comments, newest first (or in the `sort` asked for).
    pub comments: Vec<CommentView>,
    /// Pass as `cursor` to read the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// A review's id: opaque, URL-safe, stable as long as the review is (20
/// bytes in base64url, without padding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ReviewIdText(String);

impl utoipa::PartialSchema for ReviewIdText {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("A review's id: opaque, URL-safe, stable; `GET /v1/reviews/{id}` answers it."))
            .min_length(Some(27))
            .max_length(Some(27))
            .pattern(Some("^[A-Za-z0-9_-]{26}[AEIMQUYcgkosw048]$"))
            .examples(["T1JERVIwMDAwMVBST0RVQ1QwMDE"])
            .into()
    }
}

impl ToSchema for ReviewIdText {}

impl std::fmt::Display for ReviewIdText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A comment as stored, its review id, and its author when the request asked for it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CommentView {
    /// The review's id: `GET /v1/reviews/{id}` answers it.
    pub id: ReviewIdText,
    /// The comment as stored.
    #[serde(flatten)]
    pub comment: Comment,
    /// With `include=author`: who wrote it; `null` when the user's record is
    /// missing or does not read. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Author>, nullable = true)]
    pub author: Option<Option<Author>>,
}

impl CommentView {
    /// `comment`, without its author.
    pub fn plain(comment: Comment) -> CommentView {
        let (id, comment, _) = with_review_id(comment);
        CommentView { id, comment, author: None }
    }

    /// `comment`, by `author` (`None` when the user's record is missing).
    pub fn by(comment: Comment, author: Option<Author>) -> CommentView {
        CommentView { author: Some(author), ..CommentView::plain(comment) }
    }
}

/// `comment`'s review id, the comment without a stored field named `id` (the
/// review id takes that name in `/v1` answers, and a JSON object must not
/// hold a name twice), and that field's value.
fn with_review_id(mut comment: Comment) -> (ReviewIdText, Comment, Option<serde_json::Value>) {
    let stored_id = comment.extra.remove("id");
    (ReviewIdText(comment.row_key().review_id()), comment, stored_id)
}

/// A comment's author, as the `user` table names them.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Author {
    /// The name shown with the user's comments.
    pub nickname: String,
}

/// A comment with its place in the product's ranking (`/v1` ranked reads).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RankedComment {
    /// The review's id: `GET /v1/reviews/{id}` answers it.
    pub id: ReviewIdText,
    /// The comment as stored.
    #[serde(flatten)]
    pub comment: Comment,
    /// Its slot: 1 is the best.
    pub rank: u16,
    /// The score the ranker gave it, when the slot records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub score: Option<f64>,
    /// With `include=author`: who wrote it; `null` when the user's record is
    /// missing or does not read. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Author>, nullable = true)]
    pub author: Option<Option<Author>>,
    /// A field named `id` the stored JSON carried, which `/v1` answers leave
    /// out for the review id and the seed's ranked route still shows.
    #[serde(skip)]
    pub stored_id: Option<serde_json::Value>,
}

impl RankedComment {
    /// `comment` in slot `rank`, scored `score` when the slot records one.
    pub fn new(comment: Comment, rank: u16, score: Option<f64>) -> RankedComment {
        let (id, comment, stored_id) = with_review_id(comment);
        RankedComment { id, comment, rank, score, author: None, stored_id }
    }

    /// The comment as stored, for the seed's ranked route: with its stored `id`.
    fn as_stored(&self) -> Cow<'_, Comment> {
        match &self.stored_id {
            None => Cow::Borrowed(&self.comment),
            Some(stored_id) => {
                let mut comment = self.comment.clone();
                comment.extra.insert("id".to_owned(), stored_id.clone());
                Cow::Owned(comment)
            }
        }
    }
}

/// The review summaries of a listing page's products (`/v1/summaries`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SummariesPage {
    /// One entry per product asked, in the order asked: its summary, or
    /// `null` when the product has no review.
    pub summaries: Vec<Option<ReviewSummaryView>>,
}

/// A product's ranked comments, best first, with its review summary (`/v1`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RankedPage<'a> {
    /// The ranked comments, rank 1 first; slots whose comment is gone are left out.
    pub comments: &'a [RankedComment],
    /// Always `null`: the ranking is one page.
    pub next_cursor: Option<String>,
    /// The product's review summary (as the summary route answers it);
    /// `null` when the product has no review.
    pub summary: Option<&'a ReviewSummaryView>,
}

impl<'a> RankedPage<'a> {
    /// The `/v1` answer showing `comments` and `summary`.
    pub fn of(comments: &'a [RankedComment], summary: Option<&'a ReviewSummaryView>) -> RankedPage<'a> {
        RankedPage { comments, next_cursor: None, summary }
    }
}

/// A product's review summary: how many reviews it has, how they rate, how
/// many carry photos. The ranking run of `asOf` counted the reviews written
/// up to then; the newer ones are counted when the summary is read.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewSummaryView {
    /// The product.
    #[schema(min_length = 10, max_length = 10, example = "PRODUCT001")]
    pub product_id: String,
    /// Reviews a walk of the product's latest pages listed, each once.
    #[schema(minimum = 0)]
    pub count: u64,
    /// Reviews per star: an integer rating from 1 to 5.
    pub ratings: RatingCounts,
    /// Reviews without such a rating (none, or another value); the five star
    /// counts and `unrated` add up to `count`.
    #[schema(minimum = 0)]
    pub unrated: u64,
    /// The mean stars of the rated reviews; `null` when none is rated.
    #[schema(minimum = 1, maximum = 5)]
    pub average: Option<f64>,
    /// Reviews with at least one photo.
    #[schema(minimum = 0)]
    pub with_photos: u64,
    /// The as-of time of the ranking run that counted the reviews written up
    /// to then, epoch milliseconds; the reviews written after it were counted
    /// when this summary was read. 0 when no run has counted the product:
    /// every review was counted at read time.
    #[schema(minimum = 0)]
    pub as_of: i64,
    /// Whether every review is counted. `false` only when more reviews were
    /// written after `asOf` than one read counts (1,000): then the newest of
    /// them are counted, and the next ranking run counts the rest.
    pub complete: bool,
}

/// Reviews per star rating.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RatingCounts {
    /// One-star reviews.
    #[serde(rename = "1")]
    #[schema(minimum = 0)]
    pub one: u64,
    /// Two-star reviews.
    #[serde(rename = "2")]
    #[schema(minimum = 0)]
    pub two: u64,
    /// Three-star reviews.
    #[serde(rename = "3")]
    #[schema(minimum = 0)]
    pub three: u64,
    /// Four-star reviews.
    #[serde(rename = "4")]
    #[schema(minimum = 0)]
    pub four: u64,
    /// Five-star reviews.
    #[serde(rename = "5")]
    #[schema(minimum = 0)]
    pub five: u64,
}

impl ReviewSummaryView {
    /// `product`'s `summary`, counted by the run as of `as_of_ms` and at read
    /// time after it; `complete` when the read counted every newer review.
    pub fn new(product: &Id, summary: &ReviewSummary, as_of_ms: i64, complete: bool) -> ReviewSummaryView {
        ReviewSummaryView {
            product_id: product.to_string(),
            count: summary.count(),
            ratings: RatingCounts {
                one: summary.rated_with(1),
                two: summary.rated_with(2),
                three: summary.rated_with(3),
                four: summary.rated_with(4),
                five: summary.rated_with(5),
            },
            unrated: summary.unrated,
            average: summary.average(),
            with_photos: summary.with_photos,
            as_of: as_of_ms,
            complete,
        }
    }

    /// The reviews of `star` stars (1 to 5), or unrated for 0.
    pub fn reviews_of(&self, star: u8) -> u64 {
        match star {
            1 => self.ratings.one,
            2 => self.ratings.two,
            3 => self.ratings.three,
            4 => self.ratings.four,
            5 => self.ratings.five,
            _ => self.unrated,
        }
    }
}

/// A comment as the seed's service answered it: the stored JSON plus `rowKey`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeedComment<'a> {
    #[serde(flatten)]
    #[schema(value_type = Comment)]
    comment: Cow<'a, Comment>,
    /// Base64 of the row key. Absent when the stored JSON already carries one
    /// (rows the seed wrote), so the key never appears twice.
    #[serde(rename = "rowKey", skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    row_key: Option<String>,
}

impl<'a> SeedComment<'a> {
    /// Shows `comment` the way the seed's Jackson did.
    pub fn new(comment: &'a Comment) -> SeedComment<'a> {
        SeedComment::of(Cow::Borrowed(comment))
    }

    fn of(comment: Cow<'a, Comment>) -> SeedComment<'a> {
        let row_key = (!comment.extra.contains_key("rowKey")).then(|| STANDARD.encode(comment.row_key().as_bytes()));
        SeedComment { comment, row_key }
    }
}

/// The seed's `GetCommentsResponse`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedCommentsPage<'a> {
    /// The page's comments.
    pub comments: Vec<SeedComment<'a>>,
    /// Standard base64 of the index key where the next page starts (send it as
    /// `startIndexKey`); `null` on the last page and for ranked reads.
    pub next_index_key: Option<String>,
}

impl<'a> SeedCommentsPage<'a> {
    /// A seed page of `comments`, continuing at `next_index_key`.
    pub fn new(comments: impl IntoIterator<Item = &'a Comment>, next_index_key: Option<&[u8]>) -> Self {
        SeedCommentsPage {
            comments: comments.into_iter().map(SeedComment::new).collect(),
            next_index_key: next_index_key.map(|key| STANDARD.encode(key)),
        }
    }
}

impl<'a> SeedCommentsPage<'a> {
    /// The seed's answer showing `ranked` (without their rank and score).
    pub fn of_ranked(ranked: &'a [RankedComment]) -> SeedCommentsPage<'a> {
        SeedCommentsPage {
            comments: ranked.iter().map(|ranked| SeedComment::of(ranked.as_stored())).collect(),
            next_index_key: None,
        }
    }
}

/// The seed's `GetByIndexStartRequest`.
#[derive(Debug, Clone, serde::Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedPageRequest {
    /// The `nextIndexKey` of the previous page (standard base64; never `null`): it must
    /// start with a valid id (and `c` after a product id), and the page never
    /// leaves that id's rows; anything else answers 400 `invalid_cursor`.
    #[schema(required = true, nullable = false, format = Byte, min_length = 4, max_length = 128, example = "UDAwMDAwMDAwMWN//////////w==")]
    pub start_index_key: Option<String>,
    /// Page size, 1 to 100 (`null` or absent: 20). A number with no fraction,
    /// such as `77.0`, is the integer it equals.
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100, example = 20)]
    pub limit: Option<serde_json::Value>,
}

/// The answer of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct Status {
    /// `ok` (the process runs) or `ready` (HBase answers).
    pub status: String,
}

/// A page as JSON, for an answer that is kept or prepared.
pub fn render(value: &impl Serialize) -> Result<Bytes, ApiError> {
    serde_json::to_vec(value).map(Bytes::from).map_err(render_error)
}

/// A failure to render an answer: the service's own fault, a 500.
pub fn render_error(error: serde_json::Error) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("cannot render an answer: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(extra: serde_json::Value) -> Comment {
        let mut json = serde_json::json!({
            "orderId": "ORDER00001", "productId": "PRODUCT001", "userId": "USER000001",
            "content": "fine", "timestamp": 1_700_000_000_000_i64, "edited": false
        });
        if let (Some(object), serde_json::Value::Object(extra)) = (json.as_object_mut(), extra) {
            object.extend(extra);
        }
        serde_json::from_value(json).expect("comment")
    }

    #[test]
    fn seed_comments_carry_the_row_key_once() {
        let fresh = comment(serde_json::json!({}));
        let shown = serde_json::to_value(SeedComment::new(&fresh)).expect("json");
        assert_eq!(shown["rowKey"], STANDARD.encode(b"ORDER00001PRODUCT001"));
        assert_eq!(shown["edited"], false);

        let from_seed = comment(serde_json::json!({"rowKey": "T1JERVIwMDAwMVBST0RVQ1QwMDE="}));
        let text = serde_json::to_string(&SeedComment::new(&from_seed)).expect("json");
        assert_eq!(text.matches("rowKey").count(), 1, "{text}");
    }

    #[test]
    fn a_summary_names_each_star_and_its_freshness() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let summary = ReviewSummary { rated: [0, 0, 1, 1, 2], unrated: 1, with_photos: 2 };
        let shown =
            serde_json::to_value(ReviewSummaryView::new(&product, &summary, 1_700_000_000_000, true)).expect("json");
        assert_eq!(
            shown,
            serde_json::json!({
                "productId": "PRODUCT001", "count": 5, "ratings": {"1": 0, "2": 0, "3": 1, "4": 1, "5": 2},
                "unrated": 1, "average": 4.25, "withPhotos": 2, "asOf": 1_700_000_000_000_i64, "complete": true
            })
        );
        let none_rated = ReviewSummary { unrated: 1, ..ReviewSummary::default() };
        let shown = serde_json::to_value(ReviewSummaryView::new(&product, &none_rated, 1, true)).expect("json");
        assert!(shown["average"].is_null());
    }

    #[test]
    fn ranked_comments_flatten_the_comment_and_add_rank_and_score() {
        let ranked = RankedComment::new(comment(serde_json::json!({"helpful": 3, "id": "stored"})), 2, Some(0.5));
        let shown = serde_json::to_value(&ranked).expect("json");
        assert_eq!(shown["id"], "T1JERVIwMDAwMVBST0RVQ1QwMDE", "the review id replaces a stored `id`");
        let seed = serde_json::to_value(SeedCommentsPage::of_ranked(std::slice::from_ref(&ranked))).expect("json");
        assert_eq!(seed["comments"][0]["id"], "stored", "the seed's route shows the comment as stored");
        assert_eq!(serde_json::to_string(&ranked).expect("json").matches("\"id\"").count(), 1);
        assert_eq!(shown["rank"], 2);
        assert_eq!(shown["score"], 0.5);
        assert_eq!(shown["helpful"], 3);
        assert_eq!(shown["orderId"], "ORDER00001");
        let unscored = RankedComment { score: None, ..ranked };
        assert!(serde_json::to_value(&unscored).expect("json").get("score").is_none());
    }
}
