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
#[serde(rename_all = "camelCase")]
pub struct Comment {
    /// The order the product was bought on.
    pub order_id: Id,
    /// The reviewed product.
    pub product_id: Id,
    /// The author, who placed the order.
    pub user_id: Id,
    /// The review text.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// When it was written, epoch milliseconds; also its position in both indexes.
    pub timestamp: i64,
    /// Whether the text changed after posting (Jackson's name for `isEdited`).
    #[serde(default, alias = "isEdited")]
    pub edited: bool,
    /// Star rating, 1 to 5, when the shop collects one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<u8>,
    /// "Helpful" votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helpful: Option<u64>,
    /// "Not helpful" votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhelpful: Option<u64>,
    /// How many photos are attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub photos: Option<u32>,
    /// Fields this version does not know, such as the seed's `rowKey`.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Comment {
    /// The comment's row key: orderId then productId.
    pub fn row_key(&self) -> CommentKey {
        CommentKey::new(&self.order_id, &self.product_id)
    }

    /// The content's UTF-8 length, which orders same-millisecond comments in the product index.
    pub fn content_utf8_len(&self) -> usize {
        self.content.len()
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

    /// Decodes the JSON stored in `cf:q`.
    fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
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
            content: "좋아요 great".into(),
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

    proptest::proptest! {
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
                content, timestamp, edited, rating: Some(4), helpful, unhelpful: None, photos, extra: Extra::new(),
            };
            proptest::prop_assert_eq!(Comment::from_json(&comment.to_json()).expect("decode"), comment);
        }
    }
}
