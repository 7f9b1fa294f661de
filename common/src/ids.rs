//! Entity ids: exactly ten ASCII letters or digits, checked before any I/O.
//!
//! Every table keys its rows by fixed-width ids, so an id of the wrong length
//! would silently shift every byte after it in an index key. Validating once,
//! at the edge, lets every other module take an [`Id`] and trust its width.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The width of every id in bytes.
pub const ID_LEN: usize = 10;

/// A validated id (`[A-Za-z0-9]{10}`), stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id([u8; ID_LEN]);

/// An id that failed validation; names the field so the caller can tell the user which one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be exactly 10 ASCII letters or digits, got {shown}")]
pub struct InvalidId {
    /// The name of the field or parameter that held the bad id.
    pub field: &'static str,
    /// The rejected input, quoted and shortened so a hostile value cannot flood a log line.
    pub shown: String,
}

impl Id {
    /// Parses `input` as the id held in `field`.
    pub fn parse(field: &'static str, input: &str) -> Result<Id, InvalidId> {
        Id::from_bytes(field, input.as_bytes())
    }

    /// Validates raw key bytes as the id held in `field`.
    pub fn from_bytes(field: &'static str, bytes: &[u8]) -> Result<Id, InvalidId> {
        let valid = bytes.len() == ID_LEN && bytes.iter().all(u8::is_ascii_alphanumeric);
        match <[u8; ID_LEN]>::try_from(bytes) {
            Ok(array) if valid => Ok(Id(array)),
            _ => Err(InvalidId { field, shown: shorten(&String::from_utf8_lossy(bytes)) }),
        }
    }

    /// The id's ten bytes, as they appear in row keys.
    pub fn as_bytes(&self) -> &[u8; ID_LEN] {
        &self.0
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Construction admits only ASCII alphanumerics, so this never fails.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

fn shorten(input: &str) -> String {
    const MAX_SHOWN_CHARS: usize = 40;
    if input.chars().count() <= MAX_SHOWN_CHARS {
        format!("{input:?}")
    } else {
        let head: String = input.chars().take(MAX_SHOWN_CHARS).collect();
        format!("{head:?}… ({} bytes)", input.len())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.as_str())
    }
}

impl FromStr for Id {
    type Err = InvalidId;

    fn from_str(input: &str) -> Result<Id, InvalidId> {
        Id::parse("id", input)
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Id::parse("id", &text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ten_alphanumerics() {
        let id = Id::parse("userId", "Ab3456789Z").expect("valid id");
        assert_eq!(id.as_str(), "Ab3456789Z");
        assert_eq!(id.as_bytes(), b"Ab3456789Z");
    }

    #[test]
    fn refuses_wrong_length_and_non_alphanumerics_naming_the_field() {
        for bad in ["", "short", "ABCDEFGHIJK", "ABCDE-GHIJ", "ABCDE GHIJ", "ÄBCDEFGHI", "../../etc/"] {
            let error = Id::parse("productId", bad).expect_err(bad);
            assert_eq!(error.field, "productId");
            assert!(error.to_string().starts_with("productId must be exactly 10"));
        }
    }

    #[test]
    fn shortens_huge_input_in_the_message() {
        let huge = "x".repeat(10_000);
        let message = Id::parse("orderId", &huge).expect_err("too long").to_string();
        assert!(message.len() < 200, "{message}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_accepts_exactly_the_pattern(input in ".{0,20}") {
            let valid = input.len() == ID_LEN && input.bytes().all(|b| b.is_ascii_alphanumeric());
            proptest::prop_assert_eq!(Id::parse("id", &input).is_ok(), valid);
        }
    }
}
