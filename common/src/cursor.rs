//! Opaque page cursors: base64url (no padding) of the next index row key.
//!
//! A cursor is only ever a position inside one index prefix. Decoding takes the
//! prefix the request asked for and refuses a cursor outside it, so a client
//! cannot use a cursor from one product (or a forged one) to read another's rows.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The longest cursor accepted: the longest index key (43 bytes) in base64 is 58
/// characters; anything much longer is refused before decoding.
pub const MAX_CURSOR_CHARS: usize = 128;

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not base64url, or too long to be any index key.
    #[error("cursor is malformed")]
    Malformed,
    /// Decodes, but points outside the list that was asked for.
    #[error("cursor does not belong to this list")]
    OutsidePrefix,
}

/// Encodes the index key where the next page starts.
pub fn encode(next_index_key: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(next_index_key)
}

/// Decodes a cursor into the index key it names, refusing one outside `prefix`.
pub fn decode(cursor: &str, prefix: &[u8]) -> Result<Vec<u8>, CursorError> {
    if cursor.is_empty() || cursor.len() > MAX_CURSOR_CHARS {
        return Err(CursorError::Malformed);
    }
    let key = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| CursorError::Malformed)?;
    // A key equal to the prefix would restart the list rather than continue it;
    // no cursor this service hands out looks like that, so it is refused too.
    if key.len() <= prefix.len() || !key.starts_with(prefix) {
        return Err(CursorError::OutsidePrefix);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_key_inside_its_prefix() {
        let key = b"PRODUCT001c\x7f\xff\x00\x01".to_vec();
        let cursor = encode(&key);
        assert!(!cursor.contains(['+', '/', '=']));
        assert_eq!(decode(&cursor, b"PRODUCT001c"), Ok(key));
    }

    #[test]
    fn refuses_another_prefix_garbage_and_oversized_input() {
        let cursor = encode(b"PRODUCT001c\x7f\xff");
        assert_eq!(decode(&cursor, b"PRODUCT002c"), Err(CursorError::OutsidePrefix));
        assert_eq!(decode(&encode(b"PRODUCT001c"), b"PRODUCT001c"), Err(CursorError::OutsidePrefix));
        assert_eq!(decode("***", b"P"), Err(CursorError::Malformed));
        assert_eq!(decode("", b"P"), Err(CursorError::Malformed));
        assert_eq!(decode(&"A".repeat(10_000), b"P"), Err(CursorError::Malformed));
    }

    proptest::proptest! {
        #[test]
        fn decoding_never_panics(input in ".{0,200}", prefix in proptest::collection::vec(proptest::num::u8::ANY, 0..16)) {
            let _ = decode(&input, &prefix);
        }

        #[test]
        fn every_encoded_key_inside_the_prefix_decodes(suffix in proptest::collection::vec(proptest::num::u8::ANY, 1..40)) {
            let mut key = b"USER000001".to_vec();
            key.extend_from_slice(&suffix);
            proptest::prop_assert_eq!(decode(&encode(&key), b"USER000001"), Ok(key));
        }
    }
}
