//! What each route answers beyond its handler's body ([`Answers`]): the
//! headers and statuses that the shared answer paths and the middleware add,
//! said once where the route is registered ([`documented`]), from which its
//! OpenAPI operation is completed.

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::{
    ContentBuilder, KnownFormat, ObjectBuilder, Ref, RefOr, Required, ResponseBuilder, SchemaFormat, Type,
};
use utoipa_axum::router::UtoipaMethodRouter;

/// What a route answers beyond its handler's body: the headers and statuses
/// that the shared answer paths and the middleware add. Each route says it
/// once, where it is registered ([`documented`]), and the OpenAPI document
/// follows from it.
#[derive(Debug, Clone, Copy)]
pub struct Answers {
    /// A client's limits apply (`crate::clients`): 429 with `Retry-After`.
    pub limited: bool,
    /// Reads HBase: a 503 with `Retry-After` and a 500.
    pub reads_hbase: bool,
    /// A conditional GET: `ETag`, `If-None-Match` and 304.
    pub conditional: bool,
    /// Changes only when the ranker runs: `Cache-Control` (the ranked cache's TTL).
    pub cached: bool,
    /// Its last good answer is kept and served stale when HBase fails, with `Age`.
    pub kept: bool,
    /// May be read in part from a secondary region replica: `X-Replica-Read`.
    pub replica: bool,
    /// Takes a JSON body: 413 when it is too large, 415 when it is not JSON.
    pub json_body: bool,
}

impl Answers {
    const NOTHING: Answers = Answers {
        limited: false,
        reads_hbase: false,
        conditional: false,
        cached: false,
        kept: false,
        replica: false,
        json_body: false,
    };
    /// The probes and `/metrics`: never limited, so a load balancer and
    /// Prometheus see the service as it is.
    pub const OPERATIONS: Answers = Answers { reads_hbase: true, ..Answers::NOTHING };
    /// A page of comments read from HBase, kept and served stale when HBase fails.
    pub const PAGE: Answers =
        Answers { limited: true, reads_hbase: true, conditional: true, kept: true, replica: true, ..Answers::NOTHING };
    /// A ranked read: a page cached with its ranking.
    pub const RANKED: Answers = Answers { cached: true, ..Answers::PAGE };
    /// The seed's GET reads: as the Java service answered them, without replica marks.
    pub const SEED_PAGE: Answers = Answers { replica: false, ..Answers::PAGE };
    /// The seed's ranked read: cached with its ranking.
    pub const SEED_RANKED: Answers = Answers { cached: true, ..Answers::SEED_PAGE };
    /// A request with a JSON body (the seed's next pages).
    pub const JSON_BODY: Answers = Answers { limited: true, reads_hbase: true, json_body: true, ..Answers::NOTHING };

    /// Completes `operation` with what these answers add to it.
    pub fn document(self, operation: &mut Operation) {
        if self.conditional {
            document_conditional_get(operation, self.cached);
        }
        if let Some(RefOr::T(ok)) = operation.responses.responses.get_mut("200") {
            if self.kept {
                ok.description.push_str(KEPT);
                let seconds = ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                    .minimum(Some(0));
                ok.headers
                    .insert("Age".to_owned(), HeaderBuilder::new().schema(seconds).description(Some(AGE)).build());
            }
            if self.replica {
                ok.headers.insert("X-Replica-Read".to_owned(), string_header(REPLICA_READ));
            }
        }
        if self.reads_hbase {
            document_server_errors(operation);
        }
        if self.limited {
            document_too_many_requests(operation);
        }
        if self.json_body {
            let responses = &mut operation.responses.responses;
            responses.insert("413".to_owned(), error_response("The body is larger than 16 KiB (`body_too_large`)."));
            responses.insert(
                "415".to_owned(),
                error_response("The body is not sent as `Content-Type: application/json` (`unsupported_media_type`)."),
            );
        }
    }
}

/// `route` with its operations completed by `answers`: how every route but
/// the seed's next pages is registered, so its path (in its handler's
/// `utoipa::path`) and what it answers are each written once.
pub fn documented<S>(route: UtoipaMethodRouter<S>, answers: Answers) -> UtoipaMethodRouter<S> {
    let (schemas, mut paths, method_router) = route;
    for item in paths.paths.values_mut() {
        for operation in [item.get.as_mut(), item.post.as_mut()].into_iter().flatten() {
            answers.document(operation);
        }
    }
    (schemas, paths, method_router)
}

const KEPT: &str = " When HBase fails, the last good answer to the same request is answered again, stale, with `Age`.";
const AGE: &str = "Only on a stale answer: seconds since the read behind it.";
const REPLICA_READ: &str = "Only on an answer read in part from a secondary region replica \
                            (`--read-consistency timeline`, while a primary is slow or down): `stale`.";

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new().schema(ObjectBuilder::new().schema_type(Type::String)).description(Some(description)).build()
}

fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
    RefOr::T(ResponseBuilder::new().description(description).content("application/json", content).build())
}

const ETAG: &str =
    "A weak tag of the answer's body; send it back in `If-None-Match` to get 304 while the answer is the same.";
const CACHE_CONTROL: &str =
    "`public, max-age=<the ranked-read cache's TTL in seconds>`, or `no-cache` with the cache off.";

fn document_conditional_get(operation: &mut Operation, cached: bool) {
    let if_none_match = ParameterBuilder::new()
        .name("If-None-Match")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some("`ETag`s of answers the client holds (or `*`): one that is still the answer gets 304."))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build();
    operation.parameters.get_or_insert_with(Vec::new).push(if_none_match);
    let mut not_modified = ResponseBuilder::new()
        .description("The answer is the one `If-None-Match` names; no body.")
        .header("ETag", string_header(ETAG));
    if cached {
        not_modified = not_modified.header("Cache-Control", string_header(CACHE_CONTROL));
    }
    let responses = &mut operation.responses.responses;
    responses.insert("304".to_owned(), RefOr::T(not_modified.build()));
    if let Some(RefOr::T(ok)) = responses.get_mut("200") {
        ok.headers.insert("ETag".to_owned(), string_header(ETAG));
        if cached {
            ok.headers.insert("Cache-Control".to_owned(), string_header(CACHE_CONTROL));
        }
    }
}

/// An operation that can answer 503 reads HBase: it can also answer 500 (a
/// missing table, a bug), and its 503 says when to retry.
fn document_server_errors(operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    let Some(RefOr::T(unavailable)) = responses.get_mut("503") else {
        return;
    };
    unavailable.headers.insert("Retry-After".to_owned(), string_header("Seconds to wait before trying again: `1`."));
    responses.insert(
        "500".to_owned(),
        error_response("Something went wrong that the client cannot fix (`internal`); the cause is logged."),
    );
}

/// A route a client's limits apply to answers 429 with `Retry-After`.
fn document_too_many_requests(operation: &mut Operation) {
    let mut refused = error_response(
        "This client is over its request rate or requests in flight, or, while the service sheds load, over its \
         fair share of it (`too_many_requests`); other clients are still served.",
    );
    if let RefOr::T(response) = &mut refused {
        response.headers.insert("Retry-After".to_owned(), string_header("Whole seconds to wait before trying again."));
    }
    operation.responses.responses.insert("429".to_owned(), refused);
}
