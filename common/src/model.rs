//! The stored records and their JSON, as the seed's Java service (Jackson over
//! Lombok classes) writes it.
//!
//! Two compatibility rules shape these types. Names are camelCase and the
//! boolean `isEdited` travels as `"edited"` (Jackson strips the `is`), with
//! `"isEdited"` accepted on read. And every field this code does not know (the
//! seed's `"rowKey"`, fields a newer version adds) is kept in `extra` and
//! written back on rewrite, so a rolling upgrade never drops data.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::Id;
use crate::keys::CommentKey;
use crate::tables::Tables;

/// Fields a record carries that this version does not model, kept verbatim.
pub type Extra = serde_json::Map<String, serde_json::Value>;

/// A shopper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// The user's id and row key.
    pub id: Id,
    /// The user's real name.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub name: String,
    /// The name shown next to the user's comments.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub nickname: String,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A seller of products.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seller {
    /// The seller's id and row key.
    pub id: Id,
    /// The seller's display name.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub name: String,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A product page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    /// The product's id and row key.
    pub id: Id,
    /// Who sells it.
    pub seller_id: Id,
    /// Rich content (images, markup): raw bytes, base64 in JSON as Jackson writes `byte[]`.
    #[serde(default, with = "base64_bytes")]
    pub content: Vec<u8>,
    /// Creation time, epoch milliseconds.
    #[serde(default)]
    pub created_at: i64,
    /// Last update time, epoch milliseconds.
    #[serde(default)]
    pub updated_at: i64,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An order: a comment may only be left by the user who placed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// The order's id and row key.
    pub id: Id,
    /// Who placed it.
    pub user_id: Id,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A review of one product on one order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A review as stored. Fields this version does not know (such as the seed's `rowKey`) are passed through."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    /// The order the product was bought on.
    #[cfg_attr(feature = "openapi", schema(value_type = String, min_length = 10, max_length = 10, pattern = "^[ -.0-~]{10}$", examples("ORDER00001")))]
    pub order_id: Id,
    /// The reviewed product.
    #[cfg_attr(feature = "openapi", schema(value_type = String, min_length = 10, max_length = 10, pattern = "^[ -.0-~]{10}$", examples("PRODUCT001")))]
    pub product_id: Id,
    /// The author, who placed the order.
    #[cfg_attr(feature = "openapi", schema(value_type = String, min_length = 10, max_length = 10, pattern = "^[ -.0-~]{10}$", examples("USER000001")))]
    pub user_id: Id,
    /// The review text; `None` where the Java service stored `"content": null`,
    /// which is served and rewritten as `null` (see [`Comment::text`]).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub content: Option<String>,
    /// When it was written, epoch milliseconds; also its position in both indexes.
    pub timestamp: i64,
    /// Whether the text changed after posting (Jackson's name for `isEdited`).
    #[serde(default, alias = "isEdited")]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub edited: bool,
    /// Star rating, when the shop collects one: an integer 1 to 5 as this
    /// project writes it; other writers' values (`"5"`, `4.5`, `0`) are kept as
    /// stored, and only an integer or its digit as a string (`"5"`) counts as
    /// stars ([`Rating::stars`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>, nullable = false))]
    pub rating: Option<Rating>,
    /// "Helpful" votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub helpful: Option<u64>,
    /// "Not helpful" votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub unhelpful: Option<u64>,
    /// How many photos are attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub photos: Option<u32>,
    /// Fields this version does not know, such as the seed's `rowKey`.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(value_type = std::collections::HashMap<String, serde_json::Value>))]
    pub extra: Extra,
}

/// A comment's `rating` exactly as stored.
///
/// This project writes an integer from 1 to 5, but a row is any JSON another
/// writer put there: a rating of `4.5`, `"5"` or `0` must neither make the
/// whole review unreadable nor be lost when the review is rewritten, so the
/// value is kept as it is and only [`Rating::stars`] interprets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rating(serde_json::Value);

impl Rating {
    /// A rating of `stars` stars, as the write path stores it.
    pub fn of_stars(stars: u8) -> Rating {
        Rating(serde_json::Value::from(stars))
    }

    /// The stars, when the value is an integer from 1 to 5 (`5.0` is the
    /// integer 5, as in JSON Schema, and so is the string `"5"`, which other
    /// writers store); `None` for anything else.
    pub fn stars(&self) -> Option<u8> {
        let stars = match &self.0 {
            serde_json::Value::Number(number) => match number.as_u64() {
                Some(integer) => integer,
                None => number.as_f64().filter(|float| float.fract() == 0.0 && (1.0..=5.0).contains(float))? as u64,
            },
            serde_json::Value::String(text) if text.len() == 1 => text.parse::<u64>().ok()?,
            _ => return None,
        };
        u8::try_from(stars).ok().filter(|stars| (1..=5).contains(stars))
    }
}

impl Comment {
    /// The comment's row key: orderId then productId.
    pub fn row_key(&self) -> CommentKey {
        CommentKey::new(&self.order_id, &self.product_id)
    }

    /// The review text, empty when none is stored: what the ranker scores.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or_default()
    }

    /// The content's UTF-8 length, which orders same-millisecond comments in the
    /// product index (the Java service took 0 for `null`).
    pub fn content_utf8_len(&self) -> usize {
        self.text().len()
    }
}

/// Encoding a record as the JSON stored in `cf:q`.
pub trait Record: Serialize + for<'de> Deserialize<'de> + Send + 'static {
    /// What the record is, for messages ("order ORDER00001 not found").
    const KIND: &'static str;

    /// The full name of the table the record lives in.
    fn table(tables: &Tables) -> &str;

    /// The record's row key.
    fn row_key(&self) -> Vec<u8>;

    /// The JSON bytes stored in `cf:q`.
    fn to_json(&self) -> Vec<u8> {
        // Serialising these plain structs into a Vec cannot fail: every key is a
        // string and no custom serializer returns an error.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes the JSON stored in `cf:q`. Text Jackson wrote with an unpaired
    /// UTF-16 surrogate is read with U+FFFD in its place (the stored row is left
    /// as it is) and counted in `reviews_lossy_json_rows_total{kind}`.
    fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        let strict_error = match serde_json::from_slice(bytes) {
            Ok(record) => return Ok(record),
            Err(error) => error,
        };
        // Only a failed parse pays for the scan; valid JSON never has lone surrogates.
        let std::borrow::Cow::Owned(repaired) = crate::jackson::replace_lone_surrogates(bytes) else {
            return Err(strict_error);
        };
        let record = serde_json::from_slice(&repaired)?;
        metrics::counter!(crate::telemetry::LOSSY_JSON_ROWS, "kind" => Self::KIND).increment(1);
        tracing::debug!(kind = Self::KIND, "read a record whose JSON holds an unpaired UTF-16 surrogate as U+FFFD");
        Ok(record)
    }
}

impl Record for User {
    const KIND: &'static str = "user";
    fn table(tables: &Tables) -> &str {
        &tables.user
    }
    fn row_key(&self) -> Vec<u8> {
        self.id.as_bytes().to_vec()
    }
}

impl Record for Seller {
    const KIND: &'static str = "seller";
    fn table(tables: &Tables) -> &str {
        &tables.seller
    }
    fn row_key(&self) -> Vec<u8> {
        self.id.as_bytes().to_vec()
    }
}

impl Record for Product {
    const KIND: &'static str = "product";
    fn table(tables: &Tables) -> &str {
        &tables.product
    }
    fn row_key(&self) -> Vec<u8> {
        self.id.as_bytes().to_vec()
    }
}

impl Record for Order {
    const KIND: &'static str = "order";
    fn table(tables: &Tables) -> &str {
        &tables.order
    }
    fn row_key(&self) -> Vec<u8> {
        self.id.as_bytes().to_vec()
    }
}

impl Record for Comment {
    const KIND: &'static str = "comment";
    fn table(tables: &Tables) -> &str {
        &tables.comment
    }
    fn row_key(&self) -> Vec<u8> {
        Comment::row_key(self).as_bytes().to_vec()
    }
}

/// Jackson writes `null` for an unset `String`; read it as empty text.
fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// Jackson's `byte[]` encoding: standard base64 with padding, `null` for none.
mod base64_bytes {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            None => Ok(Vec::new()),
            Some(text) => STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(text: &str) -> Id {
        Id::parse("id", text).expect("valid id")
    }

    #[test]
    fn comment_json_uses_jacksons_names_and_omits_absent_optionals() {
        let comment = Comment {
            order_id: id("ORDER00001"),
            product_id: id("PRODUCT001"),
            user_id: id("USER000001"),
            content: Some("좋아요 great".into()),
            timestamp: 1_700_000_000_000,
            edited: false,
            rating: None,
            helpful: Some(3),
            unhelpful: None,
            photos: None,
            extra: Extra::new(),
        };
        let value: serde_json::Value = serde_json::from_slice(&comment.to_json()).expect("json");
        assert_eq!(
            value,
            json!({"orderId": "ORDER00001", "productId": "PRODUCT001", "userId": "USER000001",
                   "content": "좋아요 great", "timestamp": 1_700_000_000_000_i64, "edited": false, "helpful": 3})
        );
    }

    #[test]
    fn any_stored_rating_decodes_and_only_an_integer_from_one_to_five_or_its_digit_counts_as_stars() {
        let with_rating = |rating: &str| {
            let json = format!(
                r#"{{"orderId":"ORDER00001","productId":"PRODUCT001","userId":"USER000001","content":"x","timestamp":1,"edited":false{rating}}}"#
            );
            Comment::from_json(json.as_bytes()).expect("a comment decodes whatever its rating")
        };
        let stars = |rating: &str| with_rating(rating).rating.and_then(|rating| rating.stars());
        assert_eq!(stars(r#","rating":4"#), Some(4));
        assert_eq!(stars(r#","rating":5.0"#), Some(5));
        assert_eq!(stars(r#","rating":"5""#), Some(5));
        assert_eq!(stars(r#","rating":"1""#), Some(1));
        for unrated in [
            "",
            r#","rating":null"#,
            r#","rating":0"#,
            r#","rating":6"#,
            r#","rating":4.5"#,
            r#","rating":"6""#,
            r#","rating":"05""#,
            r#","rating":"4.0""#,
            r#","rating":" 5""#,
            r#","rating":-1"#,
            r#","rating":[5]"#,
        ] {
            assert_eq!(stars(unrated), None, "{unrated}");
        }
        let kept = with_rating(r#","rating":4.5"#);
        let rewritten: serde_json::Value = serde_json::from_slice(&kept.to_json()).expect("json");
        assert_eq!(rewritten["rating"], json!(4.5), "a rewrite keeps what was stored");
    }

    #[test]
    fn reads_the_seeds_rows_and_keeps_unknown_fields_on_rewrite() {
        let seed = br#"{"orderId":"ORDER00001","productId":"PRODUCT001","userId":"USER000001",
            "content":"ok","timestamp":5,"isEdited":true,"rowKey":"T1JERVIwMDAwMVBST0RVQ1QwMDE=","futureField":[1,2]}"#;
        let comment = Comment::from_json(seed).expect("decode");
        assert!(comment.edited);
        assert_eq!(comment.extra.get("rowKey"), Some(&json!("T1JERVIwMDAwMVBST0RVQ1QwMDE=")));
        let rewritten: serde_json::Value = serde_json::from_slice(&comment.to_json()).expect("json");
        assert_eq!(rewritten["rowKey"], json!("T1JERVIwMDAwMVBST0RVQ1QwMDE="));
        assert_eq!(rewritten["futureField"], json!([1, 2]));
        assert_eq!(rewritten["edited"], json!(true));
        assert!(rewritten.get("isEdited").is_none());
    }

    #[test]
    fn product_content_is_base64_and_null_fields_read_as_empty() {
        let product = Product {
            id: id("PRODUCT001"),
            seller_id: id("SELLER0001"),
            content: vec![0, 255, 10],
            created_at: 1,
            updated_at: 2,
            extra: Extra::new(),
        };
        let value: serde_json::Value = serde_json::from_slice(&product.to_json()).expect("json");
        assert_eq!(value["content"], json!("AP8K"));
        assert_eq!(Product::from_json(&product.to_json()).expect("decode"), product);

        let user = User::from_json(br#"{"id":"USER000001","name":null,"nickname":"nick"}"#).expect("decode");
        assert_eq!(user.name, "");
    }

    #[test]
    fn refuses_records_with_bad_ids_or_types() {
        assert!(Order::from_json(br#"{"id":"short","userId":"USER000001"}"#).is_err());
        assert!(Comment::from_json(
            br#"{"orderId":"ORDER00001","productId":"PRODUCT001","userId":"USER000001","timestamp":"soon"}"#
        )
        .is_err());
        assert!(Comment::from_json(b"{not json").is_err());
    }

    /// A comment row exactly as the Java service writes it, with `content_json`
    /// (already JSON) as its content.
    fn seed_comment_json(content_json: &str) -> Vec<u8> {
        format!(
            r#"{{"orderId":"ORDER00001","productId":"PRODUCT001","userId":"USER000001","content":{content_json},"timestamp":1700000000000,"edited":false,"rowKey":"T1JERVIwMDAwMVBST0RVQ1QwMDE=","extraField":{{"kept":true}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn null_content_reads_as_none_and_is_written_back_as_null() {
        let comment = Comment::from_json(&seed_comment_json("null")).expect("decode");
        assert_eq!(comment.content, None);
        assert_eq!(comment.text(), "");
        assert_eq!(comment.content_utf8_len(), 0);
        let rewritten: serde_json::Value = serde_json::from_slice(&comment.to_json()).expect("json");
        assert_eq!(rewritten["content"], serde_json::Value::Null);
        assert_eq!(rewritten["extraField"], json!({"kept": true}));
    }

    #[test]
    fn a_lone_surrogate_reads_as_a_replacement_character_and_keeps_every_other_field() {
        let comment = Comment::from_json(&seed_comment_json(r#""cut emoji \uD83D""#)).expect("decode");
        assert_eq!(comment.content.as_deref(), Some("cut emoji \u{FFFD}"));
        assert_eq!(comment.extra.get("rowKey"), Some(&json!("T1JERVIwMDAwMVBST0RVQ1QwMDE=")));
        assert_eq!(comment.extra.get("extraField"), Some(&json!({"kept": true})));
        // An escaped backslash followed by "ud83d" is text, not a surrogate.
        let literal = Comment::from_json(&seed_comment_json(r#""\\ud83d""#)).expect("decode");
        assert_eq!(literal.content.as_deref(), Some("\\ud83d"));
        // Other broken JSON stays an error.
        assert!(Comment::from_json(&seed_comment_json(r#""\uD83D"#)).is_err());
    }

    proptest::proptest! {
        /// Whatever UTF-16 a Java string holds, Jackson's JSON of it decodes
        /// without panicking, as the string's lossy UTF-8; and when the string
        /// is valid Unicode it round-trips through this codec unchanged.
        #[test]
        fn jackson_escaped_content_decodes_and_valid_content_round_trips(
            units in proptest::collection::vec(
                proptest::prop_oneof![proptest::num::u16::ANY, 0xD800u16..0xE000, 0x20u16..0x7F], 0..40)
        ) {
            let stored = seed_comment_json(&crate::jackson::tests::jackson_string(&units));
            let comment = Comment::from_json(&stored).expect("Jackson's JSON decodes");
            proptest::prop_assert_eq!(comment.text(), String::from_utf16_lossy(&units));
            proptest::prop_assert_eq!(&comment.extra["rowKey"], &json!("T1JERVIwMDAwMVBST0RVQ1QwMDE="));
            if let Ok(valid) = String::from_utf16(&units) {
                proptest::prop_assert_eq!(comment.content.as_deref(), Some(valid.as_str()));
                proptest::prop_assert_eq!(Comment::from_json(&comment.to_json()).expect("round trip"), comment);
            }
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = Comment::from_json(&bytes);
            let _ = Product::from_json(&bytes);
        }

        #[test]
        fn comments_round_trip(content in ".{0,64}", timestamp in 0i64..=i64::MAX, edited: bool,
                               helpful in proptest::option::of(0u64..1000), photos in proptest::option::of(0u32..10)) {
            let comment = Comment {
                order_id: id("ORDER00001"), product_id: id("PRODUCT001"), user_id: id("USER000001"),
                content: Some(content), timestamp, edited, rating: Some(Rating::of_stars(4)), helpful, unhelpful: None, photos, extra: Extra::new(),
            };
            proptest::prop_assert_eq!(Comment::from_json(&comment.to_json()).expect("decode"), comment);
        }
    }
}
