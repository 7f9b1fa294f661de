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
use utoipa::openapi::path::{ParameterIn, ParameterStyle};
use utoipa::openapi::{ArrayBuilder, ObjectBuilder, RefOr, Schema, Type};
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
    // Every other route's operation comes with its registration (`crate::server`).
    paths(routes::seed::seed_next),
    modifiers(&NextPageDocs),
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

/// The routes serving `/openapi.json` and the Swagger UI under `/docs`.
pub fn docs(openapi: utoipa::openapi::OpenApi) -> SwaggerUi {
    SwaggerUi::new(DOCS_PATH)
        .url(OPENAPI_PATH, openapi)
        .config(Config::default().validator_url("none").try_it_out_enabled(true))
}
