//! Entity ids: exactly ten bytes, checked before any I/O, under two rules.
//!
//! Every table keys its rows by fixed-width ids, so an id of the wrong length
//! would silently shift every byte after it in an index key. Validating once,
//! at the edge, lets every other module take an [`Id`] and trust its width.
//!
//! - **Reading** ([`Id::parse`], [`Id::from_bytes`]): any ten bytes of printable
//!   ASCII other than `/`. The original Java service checked only the length
//!   (`KeyBytes.id10`), so it stored ids such as `JP-edge-01`; every read route,
//!   the cursor codec and the ranker must find those. `/` is refused because a
//!   path id cannot hold it unescaped and no route needs it; ids whose UTF-8 is
//!   not ten bytes (ten Hangul characters are a 30-byte key) stay refused.
//! - **Writing** ([`Id::parse_new`]): `[A-Za-z0-9]{10}`, what this project
//!   itself creates (the write path and demo data), so new ids are safe in any
//!   URL, log or shell without quoting.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The width of every id in bytes.
pub const ID_LEN: usize = 10;

/// A validated id (ten printable ASCII bytes, no `/`), stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id([u8; ID_LEN]);

/// An id that failed validation; names the field so the caller can tell the user which one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be exactly 10 {rule}, got {shown}")]
pub struct InvalidId {
    /// The name of the field or parameter that held the bad id.
    pub field: &'static str,
    /// The rule it broke, in words.
    pub rule: &'static str,
    /// The rejected input, quoted and shortened so a hostile value cannot flood a log line.
    pub shown: String,
}

/// The reading rule in words, as error messages and docs state it.
pub const STORED_ID_RULE: &str = "bytes of printable ASCII other than '/'";
/// The writing rule in words.
pub const NEW_ID_RULE: &str = "ASCII letters or digits";

/// Whether `byte` may appear in an id that is read: printable ASCII, not `/`.
fn is_stored_id_byte(byte: &u8) -> bool {
    (b' '..=b'~').contains(byte) && *byte != b'/'
}

impl Id {
    /// Parses `input` as the id held in `field`, under the reading rule (any
    /// id the original Java service could have stored and this code can key).
    pub fn parse(field: &'static str, input: &str) -> Result<Id, InvalidId> {
        Id::from_bytes(field, input.as_bytes())
    }

    /// Validates raw key bytes as the id held in `field`, under the reading rule.
    pub fn from_bytes(field: &'static str, bytes: &[u8]) -> Result<Id, InvalidId> {
        match <[u8; ID_LEN]>::try_from(bytes) {
            Ok(array) if array.iter().all(is_stored_id_byte) => Ok(Id(array)),
            _ => Err(InvalidId { field, rule: STORED_ID_RULE, shown: shorten(&String::from_utf8_lossy(bytes)) }),
        }
    }

    /// Parses `input` as a new id this project creates (`[A-Za-z0-9]{10}`).
    pub fn parse_new(field: &'static str, input: &str) -> Result<Id, InvalidId> {
        let id = Id::parse(field, input).map_err(|error| InvalidId { rule: NEW_ID_RULE, ..error })?;
        id.check_new(field)?;
        Ok(id)
    }

    /// Checks that this id follows the writing rule, for the write path.
    pub fn check_new(&self, field: &'static str) -> Result<(), InvalidId> {
        if self.0.iter().all(u8::is_ascii_alphanumeric) {
            Ok(())
        } else {
            Err(InvalidId { field, rule: NEW_ID_RULE, shown: shorten(self.as_str()) })
        }
    }

    /// The id's ten bytes, as they appear in row keys.
    pub fn as_bytes(&self) -> &[u8; ID_LEN] {
        &self.0
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Construction admits only printable ASCII, so this never fails.
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
    fn accepts_ten_alphanumerics_under_both_rules() {
        for id in [Id::parse("userId", "Ab3456789Z"), Id::parse_new("userId", "Ab3456789Z")] {
            let id = id.expect("valid id");
            assert_eq!(id.as_str(), "Ab3456789Z");
            assert_eq!(id.as_bytes(), b"Ab3456789Z");
        }
    }

    #[test]
    fn reads_what_the_java_service_stored_but_creates_only_alphanumerics() {
        for java in ["JP-edge-01", "ABCDE GHIJ", "a.b_c~d!e?", "%2F%2F%2F%", "<>{}[]|;:'"] {
            let id = Id::parse("productId", java).expect(java);
            assert_eq!(id.as_str(), java);
            let error = Id::parse_new("productId", java).expect_err(java);
            assert_eq!(
                error.to_string(),
                format!("productId must be exactly 10 ASCII letters or digits, got {java:?}")
            );
            assert!(id.check_new("productId").is_err());
        }
    }

    #[test]
    fn refuses_wrong_length_slashes_and_non_ascii_naming_the_field() {
        let hangul_ten_characters = "가나다라마바사아자차";
        for bad in
            ["", "short", "ABCDEFGHIJK", "ÄBCDEFGHI", "../../etc/", "ABCD/EFGHI", "ABCDE\tGHI\n", hangul_ten_characters]
        {
            let error = Id::parse("productId", bad).expect_err(bad);
            assert_eq!(error.field, "productId");
            assert!(error
                .to_string()
                .starts_with("productId must be exactly 10 bytes of printable ASCII other than '/'"));
        }
        assert!(Id::from_bytes("productId", b"ABCDE\x00GHI").is_err());
    }

    #[test]
    fn shortens_huge_input_in_the_message() {
        let huge = "x".repeat(10_000);
        let message = Id::parse("orderId", &huge).expect_err("too long").to_string();
        assert!(message.len() < 200, "{message}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_accepts_exactly_the_rules(input in ".{0,20}|[ -~]{10}") {
            let readable = input.len() == ID_LEN && input.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'/');
            let creatable = input.len() == ID_LEN && input.bytes().all(|b| b.is_ascii_alphanumeric());
            proptest::prop_assert_eq!(Id::parse("id", &input).is_ok(), readable);
            proptest::prop_assert_eq!(Id::parse_new("id", &input).is_ok(), creatable);
        }
    }
}
