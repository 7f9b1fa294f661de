//! The conditional GET of the comment reads (`crate::route_handling`): an
//! answer tagged ([`crate::etag`]; a prepared answer comes tagged in the
//! variant its request accepts, [`crate::encoding::Prepared::response`]),
//! and 304 without a body when the request already holds that tag.

use std::future::{ready, Future, Ready};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use futures_util::FutureExt as _;

use crate::around::{AnswerFuture, Around};
use crate::encoding;
use crate::etag::{entity_tag, none_match_hits};

/// Middleware for GET routes: tags a 200 answer, and turns it into a 304
/// with no body when the request already holds that tag. An answer that
/// comes with its `ETag` (a prepared answer's, in the variant its request
/// accepts) keeps it, unhashed.
#[derive(Debug, Clone, Copy)]
pub struct ConditionalGet;

impl Around for ConditionalGet {
    fn around<Beneath: AnswerFuture>(
        &self,
        request: Request,
        beneath: impl FnOnce(Request) -> Beneath,
    ) -> impl AnswerFuture {
        // Only the validators, and only when sent: most requests send none.
        let mut conditions = HeaderMap::new();
        for value in request.headers().get_all(header::IF_NONE_MATCH) {
            conditions.append(header::IF_NONE_MATCH, value.clone());
        }
        // Combinators, not an `async` block (see `crate::around`).
        beneath(request).then(move |response| tagged(conditions, response))
    }
}

/// `response` as [`ConditionalGet`] answers it to a request that sent the
/// validators `conditions`: at once when it is no 200 or comes tagged (a
/// prepared answer), else once its body is hashed.
fn tagged(conditions: HeaderMap, response: Response) -> Either<Ready<Response>, impl Future<Output = Response>> {
    if response.status() != StatusCode::OK {
        return Either::Left(ready(response));
    }
    if let Some(tag) = response.headers().get(header::ETAG).cloned() {
        let answer = if none_match_hits(&conditions, &tag) { not_modified(response.headers(), tag) } else { response };
        return Either::Left(ready(answer));
    }
    Either::Right(tagged_by_hash(conditions, response))
}

/// `response`, untagged, tagged by the hash of its body; 304 when the
/// request holds that tag.
async fn tagged_by_hash(conditions: HeaderMap, response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match encoding::buffered(body).await {
        Ok(bytes) => bytes,
        Err(failed) => return failed,
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
