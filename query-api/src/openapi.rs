//! The OpenAPI document, generated from the handlers' annotations and the
//! schemas the answer types derive (`common::model::Comment` derives its own
//! with `common`'s `openapi` feature), and the browsable `/docs` page.
//!
//! `/docs` is Swagger UI served from this binary: `utoipa-swagger-ui` with its
//! `vendored` feature takes the Swagger UI files from a crate on crates.io (no
//! download in the build script) and embeds them, and the validator badge (the
//! one thing Swagger UI would fetch from the internet) is switched off. The
//! page works with no network at all.

use common::model::Comment;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn, ParameterStyle};
use utoipa::openapi::{
    ArrayBuilder, ContentBuilder, ObjectBuilder, Ref, RefOr, Required, ResponseBuilder, Schema, Type,
};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::error::{ErrorBody, ErrorDetail};
use crate::extract::MAX_SUMMARY_PRODUCTS;
use crate::routes;
use crate::routes::seed::NextPageDocs;
use crate::views::{
    Author, CommentView, CommentsPage, RankedComment, RankedPage, RatingCounts, ReviewIdText, ReviewSummaryView,
    SeedComment, SeedCommentsPage, SeedPageRequest, Status, SummariesPage,
};

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// Where the browsable documentation is served.
pub const DOCS_PATH: &str = "/docs";

/// The service's OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Product reviews query API",
        description = "Read-only access to product reviews kept in HBase: a product's and a user's comments \
                       newest first (cursor pages), and a product's best comments as chosen by the ranker. \
                       The `seed` routes answer exactly as the original Java service did.",
    ),
    paths(
        routes::v1::v1_product_comments,
        routes::v1::v1_user_comments,
        routes::v1::v1_ranked_comments,
        routes::v1::v1_review_summary,
        routes::v1::v1_summaries,
        routes::v1::v1_review,
        routes::widget::product_reviews_html,
        routes::seed::seed_product_latest,
        routes::seed::seed_next,
        routes::seed::seed_user_latest,
        routes::seed::seed_ranked,
        routes::ops::healthz,
        routes::ops::readyz,
        routes::ops::metrics,
    ),
    modifiers(&NextPageDocs, &MiddlewareDocs, &TypedParameters),
    components(schemas(
        Comment,
        CommentView,
        ReviewIdText,
        Author,
        SummariesPage,
        SeedComment,
        RankedComment,
        CommentsPage,
        RankedPage,
        ReviewSummaryView,
        RatingCounts,
        SeedCommentsPage,
        SeedPageRequest,
        ErrorBody,
        ErrorDetail,
        Status,
    )),
    tags(
        (name = "v1", description = "Comments with opaque cursors."),
        (name = "widget", description = "The review widgets' server-rendered first view, for shops' pages."),
        (name = "seed", description = "Compatible with the original Java service's routes and JSON."),
        (name = "operations", description = "Health, readiness and metrics."),
    )
)]
pub struct ApiDoc;

/// Completes each operation with what the middleware answers, not its handler:
/// the comment reads' conditional GET (`If-None-Match`, `ETag`, 304) and the
/// ranked and summary reads' `Cache-Control`; the 500 and the 503's
/// `Retry-After` of every route that reads HBase; the 429 of every route a
/// client's limits apply to; the 413 and 415 of a JSON body.
#[derive(Debug)]
pub struct MiddlewareDocs;

impl Modify for MiddlewareDocs {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let widget = path.ends_with("/reviews.html");
            let conditional = path.contains("/comments")
                || path.ends_with("/summaries")
                || path.starts_with("/v1/reviews/")
                || widget;
            if let Some(get) = item.get.as_mut().filter(|_| conditional) {
                // Ranked and summary reads (and the widget's view of them) change only when the ranker runs;
                // pages do not say how long they keep.
                let cached =
                    path.ends_with("/ranked") || path.ends_with("/summary") || path.ends_with("/summaries") || widget;
                document_conditional_get(get, cached);
            }
            // The probes and `/metrics` are never limited (`crate::clients`).
            let limited = !matches!(path.as_str(), "/healthz" | "/readyz" | "/metrics");
            for operation in [item.get.as_mut(), item.post.as_mut()].into_iter().flatten() {
                document_server_errors(operation);
                if limited {
                    document_too_many_requests(operation);
                }
            }
            if let Some(post) = item.post.as_mut() {
                let responses = &mut post.responses.responses;
                responses
                    .insert("413".to_owned(), error_response("The body is larger than 16 KiB (`body_too_large`)."));
                responses.insert(
                    "415".to_owned(),
                    error_response(
                        "The body is not sent as `Content-Type: application/json` (`unsupported_media_type`).",
                    ),
                );
            }
        }
    }
}

/// Types the query parameters that the extractors parse by hand (so a bad
/// value answers in the API's error shape) the way a generated client should
/// offer them: `sort` and `include` as enums, `rating` and `productIds` as
/// arrays sent comma-separated (`style: form, explode: false`), which is what
/// the service reads.
#[derive(Debug)]
pub struct TypedParameters;

impl Modify for TypedParameters {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let parameters = openapi
            .paths
            .paths
            .values_mut()
            .filter_map(|item| item.get.as_mut())
            .filter_map(|operation| operation.parameters.as_mut())
            .flatten()
            .filter(|parameter| parameter.parameter_in == ParameterIn::Query);
        for parameter in parameters {
            let schema: Schema = match parameter.name.as_str() {
                "include" => enum_of(&["author"]),
                "sort" => enum_of(&["newest", "rating_desc", "rating_asc"]),
                "rating" => {
                    let star = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(5));
                    ArrayBuilder::new().items(star).min_items(Some(1)).into()
                }
                "productIds" => {
                    let id = ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(10))
                        .max_length(Some(10))
                        .pattern(Some("^[ -+.0-~-]{10}$"));
                    ArrayBuilder::new().items(id).min_items(Some(1)).max_items(Some(MAX_SUMMARY_PRODUCTS)).into()
                }
                _ => continue,
            };
            if matches!(schema, Schema::Array(_)) {
                parameter.style = Some(ParameterStyle::Form);
                parameter.explode = Some(false);
            }
            parameter.schema = Some(RefOr::T(schema));
        }
    }
}

fn enum_of(values: &[&str]) -> Schema {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().copied())).into()
}

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

/// The routes serving `/openapi.json` and the Swagger UI under `/docs`.
pub fn docs(openapi: utoipa::openapi::OpenApi) -> SwaggerUi {
    SwaggerUi::new(DOCS_PATH)
        .url(OPENAPI_PATH, openapi)
        .config(Config::default().validator_url("none").try_it_out_enabled(true))
}
