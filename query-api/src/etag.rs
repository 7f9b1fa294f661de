//! Conditional GETs: every comment read carries an `ETag`, and a request whose
//! `If-None-Match` names it is answered 304 without a body.
//!
//! The tag is a SHA-256 of the JSON body (the first 128 bits, hex), so equal
//! answers get equal tags whichever instance of the service renders them. It is
//! sent as a weak tag (`W/"..."`) because the compression layer may send the
//! same answer gzipped, and a strong tag must differ between encodings;
//! `If-None-Match` compares weakly anyway (RFC 9110 §13.1.2). Ranked reads come
//! from the cache, so a 304 for a cached ranking costs a hash and no HBase call.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::encoding::{self, AcceptedCodings};
use crate::error::{ApiError, ErrorCode};

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

/// Middleware for GET routes: answers a prepared answer's variant that the
/// request accepts ([`encoding::serve_prepared`]), tags a 200 answer, and
/// turns it into a 304 with no body when the request already holds that
/// tag. An answer that comes with its `ETag` (computed once with a kept
/// body) keeps it, unhashed.
///
/// One middleware for both, not a layer each: every layer boxes its future
/// and clones the route beneath it on each request, and on a cached read
/// that bookkeeping is a good part of the cost.
pub async fn conditional_get(request: Request, next: Next) -> Response {
    let accepted = AcceptedCodings::of(request.headers());
    // Only the validators, and only when sent: most requests send none.
    let mut conditions = HeaderMap::new();
    for value in request.headers().get_all(header::IF_NONE_MATCH) {
        conditions.append(header::IF_NONE_MATCH, value.clone());
    }
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let response = encoding::serve_prepared(accepted, response);
    if let Some(tag) = response.headers().get(header::ETAG).cloned() {
        return if none_match_hits(&conditions, &tag) { not_modified(response.headers(), tag) } else { response };
    }
    let (mut parts, body) = response.into_parts();
    // The handlers answer with bodies built in memory (at most a page of 100
    // comments), so buffering them costs a copy at most.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return ApiError::new(ErrorCode::Internal, format!("cannot read the answer's body: {error}"))
                .into_response()
        }
    };
    let tag = entity_tag(&bytes);
    if none_match_hits(&conditions, &tag) {
        return not_modified(&parts.headers, tag);
    }
    parts.headers.insert(header::ETAG, tag);
    Response::from_parts(parts, Body::from(bytes))
}

/// A 304 for the answer with `headers`, tagged `tag`: it repeats the
/// validators and caching headers a 200 would carry (RFC 9110 §15.4.5), and
/// nothing else; the `Age` of a kept answer served stale too, so a client
/// revalidating its copy learns it is stale.
fn not_modified(headers: &HeaderMap, tag: HeaderValue) -> Response {
    let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
    let kept = not_modified.headers_mut();
    kept.insert(header::ETAG, tag);
    for name in [header::CACHE_CONTROL, header::VARY, header::AGE] {
        if let Some(value) = headers.get(&name) {
            kept.insert(name, value.clone());
        }
    }
    not_modified
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
