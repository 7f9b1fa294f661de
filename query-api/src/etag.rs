//! Entity tags: every comment read carries an `ETag`, and a request whose
//! `If-None-Match` names it is answered 304 without a body (by
//! [`crate::conditional`]).
//!
//! The tag is a SHA-256 of the JSON body (the first 128 bits, hex), so equal
//! answers get equal tags whichever instance of the service renders them. It is
//! sent as a weak tag (`W/"..."`) because the compression layer may send the
//! same answer gzipped, and a strong tag must differ between encodings;
//! `If-None-Match` compares weakly anyway (RFC 9110 §13.1.2). Ranked reads come
//! from the cache, so a 304 for a cached ranking costs a hash and no HBase call.

use axum::http::{header, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

/// Bytes of the SHA-256 kept in the tag: 128 bits make a collision between
/// two answers of one URL practically impossible.
const TAG_BYTES: usize = 16;

/// The entity tag of `body`.
pub fn entity_tag(body: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(body);
    HeaderValue::from_str(&format!("W/\"{}\"", hex::encode(&digest[..TAG_BYTES])))
        .unwrap_or(HeaderValue::from_static("W/\"\""))
}

/// Whether an `If-None-Match` header matches `tag`: `*`, or any listed tag
/// equal to it under the weak comparison (the `W/` prefix is ignored).
pub fn none_match_hits(if_none_match: &HeaderMap, tag: &HeaderValue) -> bool {
    if !if_none_match.contains_key(header::IF_NONE_MATCH) {
        return false;
    }
    let Ok(ours) = tag.to_str().map(opaque) else {
        return false;
    };
    if_none_match
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|candidate| candidate.trim() == "*" || opaque(candidate) == ours)
}

/// An entity tag without its weakness marker, for the weak comparison.
fn opaque(tag: &str) -> &str {
    tag.trim().trim_start_matches("W/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(value).expect("header"));
        headers
    }

    #[test]
    fn tags_follow_the_body_and_match_weakly_in_lists_or_as_a_star() {
        let tag = entity_tag(b"{\"comments\":[]}");
        assert_eq!(tag, entity_tag(b"{\"comments\":[]}"));
        assert_ne!(tag, entity_tag(b"{\"comments\":[1]}"));
        let text = tag.to_str().expect("ascii").to_owned();
        assert!(text.starts_with("W/\"") && text.len() == 3 + 2 * TAG_BYTES + 1, "{text}");
        assert!(none_match_hits(&conditions(&text), &tag));
        assert!(none_match_hits(&conditions(text.trim_start_matches("W/")), &tag), "strong form of the same tag");
        assert!(none_match_hits(&conditions(&format!("\"other\", {text}")), &tag));
        assert!(none_match_hits(&conditions("*"), &tag));
        assert!(!none_match_hits(&conditions("\"other\""), &tag));
        assert!(!none_match_hits(&HeaderMap::new(), &tag));
    }
}
