//! Answers prepared once with their compressed variants ([`Prepared`]), and
//! serving each request the variant its `Accept-Encoding` asks for
//! ([`Prepared::response`], by the handler, which takes the request's
//! [`AcceptedCodings`] as an extractor).
//!
//! Every browser sends `Accept-Encoding: gzip, deflate, br, zstd`. An answer
//! the service serves again and again (a cached ranking's answers, a rendered
//! widget view, the widget script) is compressed once per coding, with
//! brotli or gzip, by the first request that accepts that coding, and each
//! request after it gets the same bytes, instead of compressing them again
//! on every request. It is not compressed when it is prepared: most cached
//! answers are read by clients that accept no coding, or never again before
//! they expire. The widget script, compressed harder, is compressed at
//! start.
//!
//! Every other answer of [`MIN_COMPRESSED_BYTES`] or more is gzipped per
//! request at the fastest level ([`compress_per_request`]), from a deflate
//! state (`flate2` on zlib-rs) kept per thread and reset for each answer: a
//! compressor's tables are large, and building them for every answer is most
//! of what compressing a small answer costs.
//!
//! Each variant has its own `ETag` (the identity's with `-gz` or `-br`
//! added), so a cache or browser holding one variant revalidates that one,
//! and every answer with variants says `Vary: Accept-Encoding`.

use std::convert::Infallible;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorCode};
use crate::etag::entity_tag;

/// Below this size an answer is sent as it is: its compressed form would
/// save a few hundred bytes at most, less than the packet it travels in.
pub const MIN_COMPRESSED_BYTES: usize = 1024;

/// gzip's level for prepared answers: level 6 (zlib's default) is about as
/// small as level 9 on the service's JSON and HTML, in a quarter of a
/// millisecond for a ranked answer.
const GZIP_LEVEL: u32 = 6;
/// brotli's quality for prepared answers: 5 is the last step that shrinks
/// the service's answers much (quality 11 saves two or three points more, at
/// fifty times the time, too slow for a ranking reloaded every few seconds).
const BROTLI_QUALITY: u32 = 5;
/// brotli's window (log2 of its bytes), the format's default.
const BROTLI_WINDOW: u32 = 22;
/// A variant is kept only when it is at most this share of the identity's
/// size: one that saves less is not worth its memory.
const WORTH_KEEPING: f64 = 0.9;
/// The bytes an answer's variants made when first asked for may take
/// together, as a share of the identity's: weighed in the answer's cache
/// from the start, made or not, so the cache's bound holds whatever is made
/// later. A ranked answer's two take 48 % on the bench data (14,477 bytes:
/// brotli 3,303, gzip 3,753) and 59 % on the demo's, whose reviews are
/// Korean (10,687: 2,936 and 3,389); smaller answers compress less. A
/// variant that does not fit is not kept, and its requests get another
/// coding they accept or identity.
const VARIANT_ROOM: f64 = 0.8;

/// A content coding a prepared answer may be sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// brotli (`br`).
    Brotli,
    /// gzip.
    Gzip,
}

impl Coding {
    /// The coding's name in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }
}

/// How hard to compress: a body prepared for a ranking's lifetime, or one
/// prepared once for the life of the process (the widget script).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// [`GZIP_LEVEL`] and [`BROTLI_QUALITY`], each coding when a request
    /// first accepts it.
    Prepared,
    /// The smallest each coding makes, both at once (quality 11 takes tens
    /// of milliseconds, too long for a request to wait).
    Smallest,
}

/// One compressed form of an answer, with its own `ETag`.
#[derive(Debug)]
struct Variant {
    coding: Coding,
    body: Bytes,
    etag: HeaderValue,
}

/// An answer's bytes and `ETag`, made once, and its compressed variants,
/// each made once (none below [`MIN_COMPRESSED_BYTES`] or when compression
/// was not asked for).
#[derive(Debug)]
pub struct Prepared {
    identity: Bytes,
    etag: HeaderValue,
    /// How its variants are made; `None`: it has none.
    effort: Option<Effort>,
    /// Brotli's and gzip's variants (in [`CODINGS`]' order), each made by
    /// the first request that accepts its coding; `None` inside when it was
    /// not worth keeping or did not fit in `room`.
    variants: [OnceLock<Option<Variant>>; 2],
    /// The bytes the variants may take together, weighed made or not.
    room: usize,
    /// The bytes the variants made so far take.
    used: AtomicUsize,
    /// The read these bytes were last kept as a last good answer for (its
    /// key in [`crate::last_good`]), 0 when never: a cached answer served
    /// again finds itself kept without a lookup in that cache.
    kept_for_read: AtomicU64,
}

/// The codings a prepared answer may have variants in, smaller first: on a
/// tie of quality values, the earlier is sent.
const CODINGS: [Coding; 2] = [Coding::Brotli, Coding::Gzip];

impl Prepared {
    /// `body` and its tag, without variants: for answers served from a cache
    /// that is off, which would compress for one request only.
    pub fn tagged(body: Bytes) -> Prepared {
        Prepared {
            etag: entity_tag(&body),
            identity: body,
            effort: None,
            variants: Default::default(),
            room: 0,
            used: AtomicUsize::new(0),
            kept_for_read: AtomicU64::new(0),
        }
    }

    /// `body` tagged, with variants in brotli and gzip at `effort`: made by
    /// the first request accepting each, or both now for [`Effort::Smallest`].
    pub fn compressed(body: Bytes, effort: Effort) -> Prepared {
        let mut prepared = Prepared::tagged(body);
        if prepared.identity.len() < MIN_COMPRESSED_BYTES {
            return prepared;
        }
        prepared.effort = Some(effort);
        match effort {
            Effort::Prepared => prepared.room = (prepared.identity.len() as f64 * VARIANT_ROOM) as usize,
            Effort::Smallest => {
                // Both are made now, and weighed as made.
                for coding in CODINGS {
                    prepared.variant(coding);
                }
                prepared.room = prepared.used.load(Ordering::Relaxed);
            }
        }
        prepared
    }

    /// The identity bytes.
    pub fn body(&self) -> &Bytes {
        &self.identity
    }

    /// The identity's `ETag`.
    pub fn etag(&self) -> &HeaderValue {
        &self.etag
    }

    /// Whether these bytes were last kept as the last good answer of the
    /// read whose key is `read_key` (never 0).
    pub fn kept_for(&self, read_key: u64) -> bool {
        self.kept_for_read.load(Ordering::Relaxed) == read_key
    }

    /// Notes that these bytes were kept as the last good answer of the read
    /// whose key is `read_key` (never 0).
    pub fn note_kept_for(&self, read_key: u64) {
        self.kept_for_read.store(read_key, Ordering::Relaxed);
    }

    /// Whether it is offered in compressed variants (made or to be made).
    pub fn offers_variants(&self) -> bool {
        self.effort.is_some()
    }

    /// The variant in `coding`, made now if no request asked for it before;
    /// `None` when that variant is not worth keeping or does not fit.
    fn variant(&self, coding: Coding) -> Option<&Variant> {
        let effort = self.effort?;
        let index = CODINGS.iter().position(|known| *known == coding)?;
        self.variants[index]
            .get_or_init(|| {
                // Brotli, the smaller and what every browser accepts, has the
                // first claim on the room: a client accepting only gzip that
                // comes first must not leave the browsers without it.
                if coding != Coding::Brotli {
                    self.variant(Coding::Brotli);
                }
                self.make(coding, effort)
            })
            .as_ref()
    }

    fn make(&self, coding: Coding, effort: Effort) -> Option<Variant> {
        let compressed = compress(&self.identity, coding, effort)?;
        let worth = compressed.len() as f64 <= self.identity.len() as f64 * WORTH_KEEPING;
        if compressed.is_empty() || !worth {
            return None;
        }
        // The bytes are taken only when they fit, in one step, however the
        // two codings' first requests interleave. Variants made at start
        // have no room to fit in: the answer is weighed as they are made.
        let room = match effort {
            Effort::Prepared => self.room,
            Effort::Smallest => usize::MAX,
        };
        let fits = |used: usize| used.checked_add(compressed.len()).filter(|total| *total <= room);
        self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, fits).ok()?;
        Some(Variant { coding, etag: variant_tag(&self.etag, coding), body: Bytes::from(compressed) })
    }

    /// This answer to a request that accepts `accepted`, as `content_type`:
    /// the variant it asks for ([`Prepared::for_codings`]) with that
    /// variant's `ETag` and `Content-Encoding`, and `Vary: Accept-Encoding`
    /// when the answer offers variants. Chosen by the handler, before the
    /// conditional GET compares tags (`crate::conditional`), so a 304 is
    /// judged against the variant's tag.
    pub fn response(&self, accepted: AcceptedCodings, content_type: HeaderValue) -> Response {
        let (body, etag, coding) = self.for_codings(accepted);
        let mut response = Response::new(Body::from(body.clone()));
        let headers = response.headers_mut();
        // Room for what the layers above add (the request id, the length,
        // `Cache-Control`) without growing the map.
        headers.reserve(8);
        headers.insert(header::CONTENT_TYPE, content_type);
        headers.insert(header::ETAG, etag.clone());
        if self.offers_variants() {
            headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        }
        if let Some(coding) = coding {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
        }
        response
    }

    /// The bytes held, the room of the variants included (made or not):
    /// what a cache of prepared answers weighs them by, the same for as
    /// long as the answer lives.
    pub fn weight_bytes(&self) -> usize {
        self.identity.len() + self.room
    }

    /// The bytes, `ETag` and coding (`None`: identity) to answer a request
    /// whose `Accept-Encoding` is `accepted`.
    #[cfg(test)]
    fn for_request(&self, accepted: &HeaderMap) -> (&Bytes, &HeaderValue, Option<Coding>) {
        self.for_codings(AcceptedCodings::of(accepted))
    }

    /// The bytes, `ETag` and coding (`None`: identity) to answer a request
    /// that accepts `weights`. The variant is made now when this request is
    /// the first to accept its coding (brotli's first, see [`Prepared::variant`]);
    /// a request waiting for another to make it blocks its thread for that
    /// long, about a millisecond for a ranked answer (mostly brotli's).
    fn for_codings(&self, weights: AcceptedCodings) -> (&Bytes, &HeaderValue, Option<Coding>) {
        // Highest quality value first; on a tie brotli, the smaller.
        let order = if weights.gzip > weights.brotli { [Coding::Gzip, Coding::Brotli] } else { CODINGS };
        order
            .into_iter()
            .filter(|coding| weights.quality(*coding) > 0.0 && weights.quality(*coding) >= weights.identity)
            .find_map(|coding| self.variant(coding))
            .map_or((&self.identity, &self.etag, None), |variant| (&variant.body, &variant.etag, Some(variant.coding)))
    }
}

/// The quality identity has when `Accept-Encoding` does not name it: it is
/// acceptable (RFC 9110 §12.5.3), but below any coding the client named,
/// however low its q-value.
const UNNAMED_IDENTITY: f32 = 0.0001;

/// The quality values a request's `Accept-Encoding` gives the codings this
/// service prepares, and identity (RFC 9110 §12.5.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AcceptedCodings {
    brotli: f32,
    gzip: f32,
    identity: f32,
}

impl AcceptedCodings {
    /// What the `Accept-Encoding` of a request with `headers` accepts.
    pub fn of(headers: &HeaderMap) -> AcceptedCodings {
        let (mut brotli, mut gzip, mut identity, mut any) = (None, None, None, None);
        let values = headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|value| value.to_str().ok());
        for element in values.flat_map(|value| value.split(',')) {
            let mut parts = element.split(';');
            let coding = parts.next().unwrap_or("").trim();
            // A malformed or out-of-range q-value refuses the coding, as a
            // client that wrote it cannot be assumed to read it.
            let quality = parts
                .find_map(|parameter| {
                    let (name, value) = parameter.split_once('=')?;
                    name.trim().eq_ignore_ascii_case("q").then(|| value.trim().parse::<f32>().unwrap_or(0.0))
                })
                .unwrap_or(1.0);
            let quality = if (0.0..=1.0).contains(&quality) { quality } else { 0.0 };
            let slot = if coding.eq_ignore_ascii_case("br") {
                &mut brotli
            } else if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                &mut gzip
            } else if coding.eq_ignore_ascii_case("identity") {
                &mut identity
            } else if coding == "*" {
                &mut any
            } else {
                continue;
            };
            *slot = Some(quality);
        }
        let unnamed = any.unwrap_or(0.0);
        AcceptedCodings {
            brotli: brotli.unwrap_or(unnamed),
            gzip: gzip.unwrap_or(unnamed),
            // Identity is acceptable unless refused by name or by `*;q=0`;
            // unnamed, it ranks below every coding the client named.
            identity: identity
                .unwrap_or(any.map_or(UNNAMED_IDENTITY, |any| if any > 0.0 { UNNAMED_IDENTITY } else { 0.0 })),
        }
    }

    fn quality(self, coding: Coding) -> f32 {
        match coding {
            Coding::Brotli => self.brotli,
            Coding::Gzip => self.gzip,
        }
    }
}

/// A handler takes its request's `Accept-Encoding` as an argument, to answer
/// a [`Prepared`] answer in the variant the request accepts. It never
/// rejects: a header it cannot read names no coding, and identity is sent.
impl<S: Send + Sync> FromRequestParts<S> for AcceptedCodings {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<AcceptedCodings, Infallible> {
        Ok(AcceptedCodings::of(&parts.headers))
    }
}

/// `body` in `coding` at `effort`, its buffer no larger than its bytes (a
/// cache weighs a variant by its length); `None` should the encoder fail.
fn compress(body: &[u8], coding: Coding, effort: Effort) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() / 3);
    match coding {
        Coding::Gzip => {
            let level = match effort {
                Effort::Prepared => GZIP_LEVEL,
                Effort::Smallest => 9,
            };
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
            encoder.write_all(body).ok()?;
            out = encoder.finish().ok()?;
        }
        Coding::Brotli => {
            let quality = match effort {
                Effort::Prepared => BROTLI_QUALITY,
                Effort::Smallest => 11,
            };
            let mut encoder = brotli::CompressorWriter::new(&mut out, 4096, quality, BROTLI_WINDOW);
            encoder.write_all(body).ok()?;
            encoder.flush().ok()?;
            drop(encoder);
        }
    }
    out.shrink_to_fit();
    Some(out)
}

/// The identity's tag with the coding named inside its quotes: `W/"…-gz"`.
fn variant_tag(identity: &HeaderValue, coding: Coding) -> HeaderValue {
    let suffix = match coding {
        Coding::Brotli => "-br",
        Coding::Gzip => "-gz",
    };
    let text = identity.to_str().unwrap_or("W/\"\"");
    let tag = format!("{}{suffix}\"", text.strip_suffix('"').unwrap_or(text));
    HeaderValue::from_str(&tag).unwrap_or_else(|_| identity.clone())
}

/// The bytes of an answer's body, or the 500 to answer when it cannot be
/// read. The service's answers are built in memory (a page of 100 comments
/// at most; the documentation's assets), so buffering costs a copy at most.
pub(crate) async fn buffered(body: Body) -> Result<Bytes, Response> {
    axum::body::to_bytes(body, usize::MAX).await.map_err(|error| {
        ApiError::new(ErrorCode::Internal, format!("cannot read the answer's body: {error}")).into_response()
    })
}

/// For every answer (called by [`crate::front_door`]): gzips `response`
/// when it is at least [`MIN_COMPRESSED_BYTES`] and its request accepted gzip
/// (by its q-values, `accepted`), unless it is already encoded, was chosen
/// by the request's `Accept-Encoding` already (a prepared answer with
/// variants, [`Prepared::response`], says `Vary: Accept-Encoding`), or is
/// not text.
pub async fn compress_per_request(accepted: AcceptedCodings, mut response: Response) -> Response {
    let compressible = response.headers().get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(
        |content_type| {
            content_type.starts_with("application/json")
                || content_type.starts_with("text/")
                || content_type.starts_with("application/javascript")
        },
    );
    let chosen_by_coding =
        response.headers().get_all(header::VARY).iter().any(|value| value.as_bytes() == b"accept-encoding");
    if !compressible || response.headers().contains_key(header::CONTENT_ENCODING) || chosen_by_coding {
        return response;
    }
    // Whether this answer is compressed depends on the request's header, so
    // a shared cache keeps one copy per value of it.
    response.headers_mut().append(header::VARY, HeaderValue::from_static("accept-encoding"));
    if accepted.gzip <= 0.0 || accepted.gzip < accepted.identity {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match buffered(body).await {
        Ok(bytes) => bytes,
        Err(failed) => return failed,
    };
    if bytes.len() < MIN_COMPRESSED_BYTES {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let Some(gzipped) = gzip_fastest(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(gzipped))
}

/// `body` in gzip at deflate's fastest level, from a deflate state kept per
/// thread and reset for each body; `None` should deflate fail.
fn gzip_fastest(body: &[u8]) -> Option<Vec<u8>> {
    thread_local! {
        static DEFLATE: std::cell::RefCell<flate2::Compress> =
            std::cell::RefCell::new(flate2::Compress::new(flate2::Compression::fast(), false));
    }
    // The gzip header (RFC 1952): no name, no time, any operating system.
    let mut out = Vec::with_capacity(body.len() / 2 + 64);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    let deflated = DEFLATE.with(|deflate| {
        let mut deflate = deflate.borrow_mut();
        deflate.reset();
        loop {
            let consumed = usize::try_from(deflate.total_in()).unwrap_or(body.len()).min(body.len());
            match deflate.compress_vec(&body[consumed..], &mut out, flate2::FlushCompress::Finish) {
                Ok(flate2::Status::StreamEnd) => return true,
                // Out of room: the rest goes into more.
                Ok(_) => out.reserve(body.len() / 4 + 64),
                // Deflating bytes in memory does not fail; were it to, the
                // stream would be cut, so it is made again the plain way.
                Err(_) => return false,
            }
        }
    });
    if !deflated {
        return None;
    }
    let mut crc = flate2::Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE: the length modulo 2^32, as RFC 1952 defines it.
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn accepting(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(value).expect("header"));
        headers
    }

    fn json(bytes: usize) -> Bytes {
        let review = r#"{"orderId":"ORDER00001","content":"Arrived quickly and works as described. ","rating":5},"#;
        Bytes::from(review.repeat(bytes / review.len() + 1).into_bytes())
    }

    #[test]
    fn each_request_gets_the_smallest_variant_it_accepts_by_its_quality_values() {
        let prepared = Prepared::compressed(json(10_000), Effort::Prepared);
        let coding = |accept: &str| prepared.for_request(&accepting(accept)).2;
        assert_eq!(coding("gzip, deflate, br, zstd"), Some(Coding::Brotli), "a browser's header");
        assert_eq!(coding("gzip"), Some(Coding::Gzip));
        assert_eq!(coding("br;q=0.5, gzip"), Some(Coding::Gzip), "gzip preferred by its q-value");
        assert_eq!(coding("br;q=0, gzip;q=0"), None, "both refused");
        assert_eq!(coding("*"), Some(Coding::Brotli), "any coding");
        assert_eq!(coding("*;q=0.1, identity"), None, "identity preferred over any coding");
        assert_eq!(coding("gzip;q=0.8, br;q=0.5"), Some(Coding::Gzip), "an unnamed identity ranks below them");
        assert_eq!(coding("zstd, deflate"), None, "nothing prepared fits: identity");
        assert_eq!(coding("gzip;q=abc"), None, "a malformed q-value refuses its coding");
        assert_eq!(prepared.for_request(&HeaderMap::new()).2, None, "no header: identity");
    }

    #[test]
    fn variants_decode_to_the_identity_and_carry_tags_of_their_own() {
        let body = json(10_000);
        let prepared = Prepared::compressed(body.clone(), Effort::Prepared);
        let (gzipped, gzip_tag, _) = prepared.for_request(&accepting("gzip"));
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&gzipped[..]).read_to_end(&mut decoded).expect("gzip");
        assert_eq!(decoded, body);
        let (brotli, brotli_tag, _) = prepared.for_request(&accepting("br"));
        let mut decoded = Vec::new();
        brotli::Decompressor::new(&brotli[..], 4096).read_to_end(&mut decoded).expect("brotli");
        assert_eq!(decoded, body);
        let identity_tag = prepared.etag().to_str().expect("ascii").to_owned();
        assert_eq!(gzip_tag.to_str().expect("ascii"), format!("{}-gz\"", identity_tag.trim_end_matches('"')));
        assert_ne!(gzip_tag, brotli_tag);
        assert!(gzipped.len() * 3 < body.len() && brotli.len() < gzipped.len(), "{} {}", gzipped.len(), brotli.len());
        assert!(gzipped.len() + brotli.len() <= prepared.weight_bytes() - body.len(), "within the room weighed");
    }

    #[test]
    fn a_variant_is_made_by_the_first_request_accepting_it_and_served_again_after() {
        let body = json(10_000);
        let prepared = Prepared::compressed(body.clone(), Effort::Prepared);
        let weighed = prepared.weight_bytes();
        assert!(prepared.offers_variants());
        assert_eq!(prepared.used.load(Ordering::Relaxed), 0, "nothing compressed before a request asks");
        let (identity, _, coding) = prepared.for_request(&HeaderMap::new());
        assert_eq!((identity, coding), (&body, None));
        assert_eq!(prepared.used.load(Ordering::Relaxed), 0, "a request accepting no coding compresses nothing");

        let (first, _, _) = prepared.for_request(&accepting("gzip, deflate, br, zstd"));
        let brotli_bytes = prepared.used.load(Ordering::Relaxed);
        assert_eq!(brotli_bytes, first.len(), "brotli made, gzip not");
        let (again, _, coding) = prepared.for_request(&accepting("br"));
        assert_eq!((again.as_ptr(), coding), (first.as_ptr(), Some(Coding::Brotli)), "the same bytes, not made again");
        let (gzipped, _, coding) = prepared.for_request(&accepting("gzip"));
        assert_eq!(coding, Some(Coding::Gzip));
        assert_eq!(prepared.used.load(Ordering::Relaxed), brotli_bytes + gzipped.len());
        assert_eq!(prepared.weight_bytes(), weighed, "weighed the same before and after");
    }

    #[test]
    fn a_variant_that_does_not_fit_the_room_is_not_kept_and_its_request_gets_identity() {
        // Hex digits carry four bits a byte: each coding halves them, and
        // both together take more than the room.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let hex: String = (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from_digit((state % 16) as u32, 16).expect("a digit")
            })
            .collect();
        let prepared = Prepared::compressed(Bytes::from(hex), Effort::Prepared);
        // A client accepting only gzip comes first: brotli takes its room
        // first all the same, and gzip does not fit beside it.
        let (_, etag, coding) = prepared.for_request(&accepting("gzip"));
        assert_eq!(coding, None, "no room left for gzip");
        assert_eq!(etag, prepared.etag());
        let (brotli, _, coding) = prepared.for_request(&accepting("br"));
        assert_eq!(coding, Some(Coding::Brotli), "{} of {} bytes", brotli.len(), prepared.body().len());
        assert_eq!(prepared.used.load(Ordering::Relaxed), brotli.len(), "brotli alone holds room");
        assert!(brotli.len() <= prepared.weight_bytes() - prepared.body().len());
        let (_, _, coding) = prepared.for_request(&accepting("gzip, br;q=0.5"));
        assert_eq!(coding, Some(Coding::Brotli), "the coding preferred is not kept: the other one accepted");
    }

    #[test]
    fn the_smallest_effort_makes_both_variants_at_once_and_weighs_them() {
        let body = json(10_000);
        let prepared = Prepared::compressed(body.clone(), Effort::Smallest);
        assert!(prepared.variants.iter().all(|variant| matches!(variant.get(), Some(Some(_)))), "both made");
        let made = prepared.used.load(Ordering::Relaxed);
        assert!(made > 0);
        assert_eq!(prepared.weight_bytes(), body.len() + made, "weighed as made");
    }

    #[test]
    fn per_request_gzip_decodes_to_the_body_however_often_its_state_is_reused() {
        for size in [MIN_COMPRESSED_BYTES, 10_000, 300_000] {
            let body = json(size);
            for _ in 0..3 {
                let mut decoded = Vec::new();
                flate2::read::GzDecoder::new(&gzip_fastest(&body).expect("deflate")[..])
                    .read_to_end(&mut decoded)
                    .expect("gzip");
                assert_eq!(decoded, body, "{size} bytes");
            }
        }
    }

    #[test]
    fn a_response_carries_the_variant_its_request_accepts_with_that_variants_tag_and_coding() {
        let prepared = Prepared::compressed(json(10_000), Effort::Prepared);
        let json_type = HeaderValue::from_static("application/json");
        let browser = prepared.response(AcceptedCodings::of(&accepting("gzip, deflate, br, zstd")), json_type.clone());
        let headers = browser.headers();
        assert_eq!(headers[header::CONTENT_ENCODING], "br");
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(headers[header::VARY], "accept-encoding");
        assert_ne!(&headers[header::ETAG], prepared.etag(), "the variant's own tag");
        let plain = prepared.response(AcceptedCodings::of(&HeaderMap::new()), json_type.clone());
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(&plain.headers()[header::ETAG], prepared.etag());
        assert_eq!(plain.headers()[header::VARY], "accept-encoding", "identity chosen by the header varies too");
        let small = Prepared::compressed(json(500), Effort::Prepared);
        let small = small.response(AcceptedCodings::of(&accepting("br")), json_type);
        assert!(small.headers().get(header::VARY).is_none(), "no variants: nothing varies");
        assert!(small.headers().get(header::CONTENT_ENCODING).is_none());
    }

    #[tokio::test]
    async fn an_answer_chosen_by_its_coding_is_not_gzipped_again_per_request() {
        let body = json(10_000);
        let prepared = Prepared::compressed(body.clone(), Effort::Prepared);
        let chosen = prepared
            .response(AcceptedCodings::of(&accepting("identity")), HeaderValue::from_static("application/json"));
        let served = compress_per_request(AcceptedCodings::of(&accepting("gzip")), chosen).await;
        assert!(served.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(served.headers().get_all(header::VARY).iter().count(), 1, "said once");
        assert_eq!(buffered(served.into_body()).await.expect("a body"), body);
        // The same bytes not chosen by their coding are gzipped.
        let mut plain = Response::new(Body::from(body));
        plain.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let gzipped = compress_per_request(AcceptedCodings::of(&accepting("gzip")), plain).await;
        assert_eq!(gzipped.headers()[header::CONTENT_ENCODING], "gzip");
    }

    #[test]
    fn a_small_answer_has_no_variants() {
        let prepared = Prepared::compressed(json(500), Effort::Smallest);
        assert!(prepared.body().len() < MIN_COMPRESSED_BYTES && !prepared.offers_variants());
        assert_eq!(prepared.weight_bytes(), prepared.body().len());
    }
}
