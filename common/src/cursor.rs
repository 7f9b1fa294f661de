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

/// The first byte of a cursor of a filtered or reordered list. No index key
/// starts with it (keys start with an id of printable ASCII), so such a
/// cursor is refused by a plain list, and a plain list's cursor by a
/// filtered one.
const VIEW_CURSOR_TAG: u8 = 0xF1;

/// A position in a filtered or reordered list: which of the list's passes
/// (`phase`) and the index key it goes on from (`None`: the pass's first row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewPosition {
    /// The pass of the list: one star of a rating order, or 0 for a filter.
    pub phase: u8,
    /// The index key the pass goes on from, inside the list's prefix.
    pub key: Option<Vec<u8>>,
}

/// Encodes the position of a list that `view` names (its filter and order,
/// two bytes the caller defines), so the cursor is only valid for that view.
pub fn encode_view(view: [u8; 2], position: &ViewPosition) -> String {
    let mut bytes = vec![VIEW_CURSOR_TAG, view[0], view[1], position.phase];
    bytes.extend_from_slice(position.key.as_deref().unwrap_or_default());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes a cursor of the list `view` names over `prefix`, refusing one
/// issued for another view, another list, or a key outside `prefix`.
pub fn decode_view(cursor: &str, view: [u8; 2], prefix: &[u8]) -> Result<ViewPosition, CursorError> {
    if cursor.is_empty() || cursor.len() > MAX_CURSOR_CHARS {
        return Err(CursorError::Malformed);
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| CursorError::Malformed)?;
    let [tag, first, second, phase, key @ ..] = bytes.as_slice() else {
        return Err(CursorError::OutsidePrefix);
    };
    if *tag != VIEW_CURSOR_TAG || [*first, *second] != view {
        return Err(CursorError::OutsidePrefix);
    }
    if key.is_empty() {
        return Ok(ViewPosition { phase: *phase, key: None });
    }
    if key.len() <= prefix.len() || !key.starts_with(prefix) {
        return Err(CursorError::OutsidePrefix);
    }
    Ok(ViewPosition { phase: *phase, key: Some(key.to_vec()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_cursor_is_valid_for_its_view_and_list_only() {
        let key = b"PRODUCT001c\x7f\xff\x00\x01".to_vec();
        let position = ViewPosition { phase: 2, key: Some(key.clone()) };
        let cursor = encode_view([0b10, 1], &position);
        assert_eq!(decode_view(&cursor, [0b10, 1], b"PRODUCT001c"), Ok(position));
        assert_eq!(decode_view(&cursor, [0b11, 1], b"PRODUCT001c"), Err(CursorError::OutsidePrefix));
        assert_eq!(decode_view(&cursor, [0b10, 2], b"PRODUCT001c"), Err(CursorError::OutsidePrefix));
        assert_eq!(decode_view(&cursor, [0b10, 1], b"PRODUCT002c"), Err(CursorError::OutsidePrefix));
        assert_eq!(decode(&cursor, b"PRODUCT001c"), Err(CursorError::OutsidePrefix), "a plain list refuses it");
        assert_eq!(decode_view(&encode(&key), [0b10, 1], b"PRODUCT001c"), Err(CursorError::OutsidePrefix));
        let start = ViewPosition { phase: 3, key: None };
        assert_eq!(decode_view(&encode_view([1, 0], &start), [1, 0], b"PRODUCT001c"), Ok(start));
        assert_eq!(decode_view("AA", [1, 0], b"P"), Err(CursorError::OutsidePrefix));
    }

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
