//! The review widgets' routes, for shops' pages: the script defining
//! `<product-reviews>` and `<review-stars>`, a product's first view rendered
//! here for a shop's server to include, and (with `--demo-pages`) a demo
//! product page and listing page that show them on the data loaded.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

use super::{answer_kept, prepared_answer, Unavailable};
use crate::encoding::AcceptedCodings;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ProductId, RawWidgetQuery, SummariesQuery, WidgetQuery};
use crate::last_good::{self, Answer, PageRead};
use crate::pages;
use crate::ranking_reads;
use crate::state::AppState;
use crate::views::render_error;
use crate::widget::{FirstView, Lang, Rendered, ViewKey, SCRIPT, SCRIPT_CACHE_CONTROL};

/// Where the script is served.
pub const SCRIPT_PATH: &str = "/widget/v1/reviews.js";

/// The widgets' script: long-cached, revalidated by its `ETag`, sent in the
/// variant the browser accepts.
pub async fn widget_script(accepted: AcceptedCodings) -> Response {
    let mut response = SCRIPT.response(accepted, HeaderValue::from_static("text/javascript; charset=utf-8"));
    response.headers_mut().insert(header::CACHE_CONTROL, SCRIPT_CACHE_CONTROL);
    response
}

/// A product's reviews as `<product-reviews>` first shows them, rendered as
/// an HTML fragment for a shop's server (or edge) to include in its page.
#[utoipa::path(
    get,
    path = "/v1/products/{productId}/reviews.html",
    tag = "widget",
    params(ProductId, RawWidgetQuery),
    responses(
        (status = 200, description = "`<product-reviews>` with its first view (the summary and the most helpful \
                                      reviews) in a declarative shadow root, which `/widget/v1/reviews.js` adopts \
                                      without fetching again; then, given `name` and a rated review, the \
                                      product's schema.org `Product` JSON-LD with `aggregateRating` and the \
                                      rated reviews shown.",
         content_type = "text/html", body = String),
        (status = 400, description = "Bad id, lang, limit or name.", body = ErrorBody),
        Unavailable,
    )
)]
pub async fn product_reviews_html(
    State(state): State<AppState>,
    accepted: AcceptedCodings,
    ProductId(product): ProductId,
    query: WidgetQuery,
) -> Result<Response, ApiError> {
    let key = ViewKey::new(product, Lang::from_tag(query.lang.as_deref()), query.limit.get(), query.name.as_deref());
    answer_kept(&state, PageRead::Widget(key.clone()), accepted, async {
        let (view, read_at) = first_view(&state, key).await?;
        // As old as the ranking it shows, like the ranked read.
        let answer = prepared_answer(&state, Arc::clone(&view.prepared), read_at);
        Ok(Answer { content_type: last_good::HTML, ..answer })
    })
    .await
}

/// The first view of `key`, and when the read of the ranking it shows began.
/// A product page is served again and again from one cached ranking: its
/// view is rendered (and hashed) once.
async fn first_view(state: &AppState, key: ViewKey) -> Result<(Arc<Rendered>, Instant), ApiError> {
    let ranking = ranking_reads::ranking(state, key.product).await?;
    let read_at = ranking.read_at();
    if let Some(view) = state.rendered_views().get(&key, read_at) {
        return Ok((view, read_at));
    }
    let reviews = pages::ranked_comments_with_authors(state, &ranking, key.limit).await?;
    let view = FirstView {
        product: &key.product,
        lang: key.lang,
        name: key.name.as_deref(),
        summary: ranking.summary(),
        reviews: &reviews,
    };
    let body = view.render().map_err(render_error)?;
    Ok((state.rendered_views().keep(key, body, read_at), read_at))
}

/// `/demo/products/{productId}`: a product page as a shop would build it,
/// with the widget's first view included on the server.
pub async fn demo_product_page(
    State(state): State<AppState>,
    product: ProductId,
    query: WidgetQuery,
) -> Result<Response, ApiError> {
    let lang = Lang::from_tag(query.lang.as_deref());
    let ProductId(id) = product;
    let name = format!("Demo product {id}");
    let key = ViewKey::new(id, lang, query.limit.get(), Some(&name));
    let (view, _) = first_view(&state, key).await?;
    // The fragment is this service's own rendering, escaped where it was made.
    let fragment = PreEscaped(String::from_utf8_lossy(view.prepared.body()).into_owned());
    let main = html! {
        header { p { a href=(demo_listing_link(lang.tag())) { "All products" } } }
        main { h1 { (name) } p class="price" { "₩ 19,900" } (fragment) }
        footer { p { "Demo page served by query-api (--demo-pages)." } }
    };
    Ok(Html(demo_page(lang.tag(), &name, main).into_string()).into_response())
}

/// `/demo/listing?productIds=…`: a listing page of up to 100 products, each
/// with its `<review-stars>`.
pub async fn demo_listing_page(products: SummariesQuery, Query(query): Query<DemoListingQuery>) -> Response {
    let lang = Lang::from_tag(query.lang.as_deref()).tag();
    let SummariesQuery(products) = products;
    let main = html! {
        main {
            h1 { "Demo listing" }
            ul class="listing" {
                @for product in products.iter().map(ToString::to_string) {
                    li {
                        a href={ "/demo/products/" (utf8_percent_encode(&product, NON_ALPHANUMERIC)) "?lang=" (lang) } {
                            "Demo product " (product)
                        }
                        " "
                        review-stars product-id=(product) {}
                    }
                }
            }
        }
    };
    Html(demo_page(lang, "Demo listing", main).into_string()).into_response()
}

/// A demo page: the widgets' script, the demo style and `body`.
fn demo_page(lang: &str, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(lang) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                script src=(SCRIPT_PATH) defer {}
                style { (PreEscaped(DEMO_STYLE)) }
            }
            body { (body) }
        }
    }
}

/// The language of a demo listing page.
#[derive(Debug, serde::Deserialize)]
pub struct DemoListingQuery {
    lang: Option<String>,
}

/// The demo listing a demo product page links to: the demo data's 48 hottest
/// products (`reviews-admin demo load` numbers them from `P000000001`, with
/// `common::keys::numbered_product_id`).
fn demo_listing_link(lang: &str) -> String {
    let products: Vec<String> =
        (1..=48).filter_map(|number| common::keys::numbered_product_id(number).ok()).map(|id| id.to_string()).collect();
    format!("/demo/listing?lang={lang}&productIds={}", products.join(","))
}

/// The demo pages' own look: a plain shop page around the widgets.
const DEMO_STYLE: &str = "body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1f2328}main,header,footer{max-width:48rem;margin:0 auto;padding:0 1rem}\
h1{font-size:1.5rem}a{color:#0b57d0}.listing{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(14rem,1fr));gap:.75rem}\
.listing li{border:1px solid #d0d7de;border-radius:.5rem;padding:.75rem;display:flex;flex-direction:column;gap:.25rem}footer{color:#57606a;margin-top:2rem}";
