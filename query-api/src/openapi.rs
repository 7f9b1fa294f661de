//! The OpenAPI document, generated from the handlers' annotations, and the
//! browsable `/docs` page.
//!
//! `/docs` is Swagger UI served from this binary: `utoipa-swagger-ui` with its
//! `vendored` feature takes the Swagger UI files from a crate on crates.io (no
//! download in the build script) and embeds them, and the validator badge (the
//! one thing Swagger UI would fetch from the internet) is switched off. The
//! page works with no network at all.

use std::borrow::Cow;

use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::RefOr;
use utoipa::{OpenApi, PartialSchema, ToSchema};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::error::{ErrorBody, ErrorDetail};
use crate::routes;
use crate::views::{CommentsPage, RankedPage, SeedCommentsPage, SeedPageRequest, Status};

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
        routes::v1_product_comments,
        routes::v1_user_comments,
        routes::v1_ranked_comments,
        routes::seed_product_latest,
        routes::seed_product_next,
        routes::seed_user_latest,
        routes::seed_user_next,
        routes::seed_ranked,
        routes::healthz,
        routes::readyz,
        routes::metrics,
    ),
    components(schemas(
        CommentSchema,
        SeedCommentSchema,
        RankedCommentSchema,
        CommentsPage,
        RankedPage,
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

fn string(description: &str) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description))
}

fn id(description: &str, example: &str) -> ObjectBuilder {
    string(description).min_length(Some(10)).max_length(Some(10)).pattern(Some("^[ -.0-~]{10}$")).examples([example])
}

fn integer(description: &str, format: KnownFormat) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(format)))
        .description(Some(description))
}

/// A comment as stored (the seed's Jackson JSON). Documents
/// [`common::model::Comment`], which lives in `common` and knows nothing of OpenAPI.
#[derive(Debug)]
pub struct CommentSchema;

impl PartialSchema for CommentSchema {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .description(Some(
                "A review as stored. Fields this version does not know (such as the seed's `rowKey`) are passed through.",
            ))
            .property("orderId", id("The order the product was bought on.", "ORDER00001"))
            .required("orderId")
            .property("productId", id("The reviewed product.", "PRODUCT001"))
            .required("productId")
            .property("userId", id("The author.", "USER000001"))
            .required("userId")
            .property(
                "content",
                ObjectBuilder::new()
                    .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                    .description(Some("The review text; `null` where the original Java service stored none (answered as stored).")),
            )
            .required("content")
            .property("timestamp", integer("When it was written, epoch milliseconds.", KnownFormat::Int64))
            .required("timestamp")
            .property(
                "edited",
                ObjectBuilder::new().schema_type(Type::Boolean).description(Some("Whether the text changed after posting.")),
            )
            .required("edited")
            .property("rating", integer("Star rating, 1 to 5, when collected.", KnownFormat::Int32))
            .property("helpful", integer("\"Helpful\" votes.", KnownFormat::Int64))
            .property("unhelpful", integer("\"Not helpful\" votes.", KnownFormat::Int64))
            .property("photos", integer("Attached photos.", KnownFormat::Int32))
            .additional_properties(Some(AdditionalProperties::FreeForm(true)))
            .into()
    }
}

impl ToSchema for CommentSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Comment")
    }
}

/// A comment as the seed's routes show it: the stored JSON plus `rowKey`.
#[derive(Debug)]
pub struct SeedCommentSchema;

impl PartialSchema for SeedCommentSchema {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(CommentSchema::name())))
            .item(ObjectBuilder::new().property("rowKey", string("Standard base64 of the comment's row key.")))
            .into()
    }
}

impl ToSchema for SeedCommentSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SeedComment")
    }
}

/// A comment with its rank and score (`/v1` ranked reads).
#[derive(Debug)]
pub struct RankedCommentSchema;

impl PartialSchema for RankedCommentSchema {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(CommentSchema::name())))
            .item(
                ObjectBuilder::new()
                    .property("rank", integer("The slot, 1 (best) to 10.", KnownFormat::Int32))
                    .required("rank")
                    .property(
                        "score",
                        ObjectBuilder::new()
                            .schema_type(Type::Number)
                            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Double)))
                            .description(Some("The ranker's score, when the slot records one.")),
                    ),
            )
            .into()
    }
}

impl ToSchema for RankedCommentSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RankedComment")
    }
}
