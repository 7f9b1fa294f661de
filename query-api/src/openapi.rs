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
use utoipa::OpenApi;
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::error::{ErrorBody, ErrorDetail};
use crate::routes;
use crate::routes::seed::NextPageDocs;
use crate::views::{
    CommentsPage, RankedComment, RankedPage, RatingCounts, ReviewSummaryView, SeedComment, SeedCommentsPage,
    SeedPageRequest, Status,
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
        routes::seed::seed_product_latest,
        routes::seed::seed_next,
        routes::seed::seed_user_latest,
        routes::seed::seed_ranked,
        routes::ops::healthz,
        routes::ops::readyz,
        routes::ops::metrics,
    ),
    modifiers(&NextPageDocs),
    components(schemas(
        Comment,
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
        (name = "seed", description = "Compatible with the original Java service's routes and JSON."),
        (name = "operations", description = "Health, readiness and metrics."),
    )
)]
pub struct ApiDoc;

/// The routes serving `/openapi.json` and the Swagger UI under `/docs`.
pub fn docs(openapi: utoipa::openapi::OpenApi) -> SwaggerUi {
    SwaggerUi::new(DOCS_PATH)
        .url(OPENAPI_PATH, openapi)
        .config(Config::default().validator_url("none").try_it_out_enabled(true))
}
