//! The first view of `<product-reviews>`, rendered here for
//! `/v1/products/{id}/reviews.html`: the markup `widget/reviews.js` renders
//! for a product's ranked reviews and summary (`widgetHtml` there), in a
//! declarative shadow root with the answer it shows embedded, then the
//! product's schema.org JSON-LD. The markup is written with `maud`, which
//! escapes every value it is given: what users wrote (reviews, nicknames,
//! a product's id and name) cannot become markup, and no call can be
//! forgotten. The two renderers are kept equal by the browser tests
//! (`widget/test/`), which compare them.

use axum::body::Bytes;
use common::Id;
use maud::{html, Markup, PreEscaped};

use super::messages::{iso_date, rounded, say, Lang};
use super::script::STYLE;
use crate::views::{RankedComment, RankedPage, ReviewSummaryView};

/// Stars drawn by the style sheet (`--rating`), named by `label`.
fn stars_image(label: &str, rating: &str, part: Option<&str>) -> Markup {
    html! { span class="stars" part=[part] role="img" aria-label=(label) style={ "--rating:" (rating) } {} }
}

/// A review's author as shown: the nickname, or "a customer" when the user's
/// record has none.
fn author_name(lang: Lang, review: &RankedComment) -> String {
    match &review.author {
        Some(Some(author)) if !author.nickname.is_empty() => author.nickname.clone(),
        _ => say(lang, "anonymous", 1, &[]),
    }
}

fn review_html(lang: Lang, review: &RankedComment) -> Markup {
    let comment = &review.comment;
    let stars = comment.rating.as_ref().and_then(|rating| rating.stars());
    let photos = comment.photos.filter(|&photos| photos > 0).map(u64::from);
    html! {
        li class="review" part="review" id={ "review-" (review.id) } {
            p class="meta" {
                @if let Some(stars) = stars {
                    (stars_image(&say(lang, "rated", u64::from(stars), &[('v', &lang.number(u64::from(stars)))]), &stars.to_string(), None))
                }
                span class="author" part="author" { (author_name(lang, review)) }
                time datetime=(iso_date(comment.timestamp)) { (lang.date(comment.timestamp)) }
                @if comment.edited {
                    span class="edited" { (say(lang, "edited", 1, &[])) }
                }
                @if let Some(photos) = photos {
                    span class="photo-count" { (say(lang, "photos", photos, &[('n', &lang.number(photos))])) }
                }
            }
            p class="body" part="body" { (comment.content.as_deref().unwrap_or("")) }
        }
    }
}

fn summary_html(lang: Lang, summary: &ReviewSummaryView) -> Markup {
    let average = summary.average.map(rounded);
    html! {
        div class="summary" part="summary" {
            p class="average" {
                @if let Some(average) = average {
                    @let shown = format!("{average:.1}");
                    (stars_image(&say(lang, "rated", 1, &[('v', &shown)]), &average.to_string(), Some("average")))
                    span class="value" aria-hidden="true" { (shown) }
                }
                span class="count" { (say(lang, "reviews", summary.count, &[('n', &lang.number(summary.count))])) }
            }
            ul class="histogram" aria-label=(say(lang, "filters", 1, &[])) {
                @for star in (1..=5u8).rev() {
                    @let n = summary.reviews_of(star);
                    @let width = if summary.count > 0 { (n as f64 * 100.0 / summary.count as f64).round() } else { 0.0 };
                    li {
                        button type="button" part="bar" data-star=(star) aria-pressed="false" {
                            span { (say(lang, "stars", u64::from(star), &[('k', &lang.number(u64::from(star)))])) span class="comma" { "," } }
                            span class="track" aria-hidden="true" { span class="fill" style={ "width:" (width) "%" } {} }
                            span class="n" { (say(lang, "reviews", n, &[('n', &lang.number(n))])) }
                        }
                    }
                }
            }
            p class="photos-count" { (say(lang, "withPhotos", summary.with_photos, &[('n', &lang.number(summary.with_photos))])) }
        }
    }
}

fn sorts_html(lang: Lang) -> Markup {
    html! {
        div class="sorts" role="group" aria-label=(say(lang, "sorts", 1, &[])) {
            @for sort in ["helpful", "newest", "rating_desc", "rating_asc"] {
                button type="button" data-sort=(sort) aria-pressed=(sort == "helpful") { (say(lang, sort, 1, &[])) }
            }
        }
    }
}

/// The widget's first view: the summary and the most helpful (ranked)
/// reviews, as `widgetHtml` in `widget/reviews.js` renders that state.
fn first_view(lang: Lang, summary: Option<&ReviewSummaryView>, reviews: &[RankedComment]) -> Markup {
    let counted = summary.filter(|summary| summary.count > 0);
    let status = match counted {
        None => say(lang, "empty", 1, &[]),
        Some(_) => say(lang, "statusHelpful", reviews.len() as u64, &[('n', &lang.number(reviews.len() as u64))]),
    };
    let more = counted.filter(|summary| summary.count > reviews.len() as u64);
    html! {
        section class="widget" part="container" aria-labelledby="heading" aria-busy="false" {
            div class="top" {
                h2 id="heading" part="heading" { (say(lang, "heading", 1, &[])) }
                @if let Some(summary) = counted {
                    (summary_html(lang, summary))
                    (sorts_html(lang))
                }
                // Hidden while fresh: a kept copy served stale shows it (`shown_stale`).
                p class="notice" part="notice" hidden { (say(lang, "stale", 1, &[])) }
            }
            p class="status" role="status" { (status) }
            div class="bottom" {
                ol class="list" part="list" {
                    @for review in reviews {
                        (review_html(lang, review))
                    }
                }
                @if let Some(summary) = more {
                    button type="button" class="more" data-sort="newest" {
                        (say(lang, "all", summary.count, &[('n', &lang.number(summary.count))]))
                    }
                }
            }
        }
    }
}

/// The stale notice as a fresh view renders it: hidden.
const HIDDEN_NOTICE: &str = r#"<p class="notice" part="notice" hidden>"#;

/// A kept view served stale while HBase fails, its notice shown ("shown from
/// an earlier copy"), as the script shows it for a stale answer.
pub fn shown_stale(view: &Bytes) -> Bytes {
    match std::str::from_utf8(view) {
        Ok(html) => Bytes::from(html.replacen(HIDDEN_NOTICE, r#"<p class="notice" part="notice">"#, 1)),
        Err(_) => view.clone(),
    }
}

/// JSON safe inside a `<script>` element: no `<` that could close it.
fn script_json(value: &serde_json::Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

/// The product's schema.org `Product` with its `aggregateRating` and the
/// rated reviews shown, as the page shows them (the average rounded as
/// shown, each author as named); `None` without a product name (schema.org's
/// `Product` needs one) or without a rated review.
fn product_json_ld(
    lang: Lang,
    product: &Id,
    name: &str,
    summary: &ReviewSummaryView,
    reviews: &[RankedComment],
) -> Option<serde_json::Value> {
    let average = rounded(summary.average?);
    let rated: u64 = (1..=5).map(|star| summary.reviews_of(star)).sum();
    let shown_reviews: Vec<serde_json::Value> = reviews
        .iter()
        .filter_map(|review| {
            let stars = review.comment.rating.as_ref()?.stars()?;
            Some(serde_json::json!({
                "@type": "Review",
                "author": {"@type": "Person", "name": author_name(lang, review)},
                "datePublished": iso_date(review.comment.timestamp),
                "reviewBody": review.comment.content.as_deref().unwrap_or(""),
                "reviewRating": {"@type": "Rating", "ratingValue": stars, "bestRating": 5, "worstRating": 1},
            }))
        })
        .collect();
    Some(serde_json::json!({
        "@context": "https://schema.org",
        "@type": "Product",
        "name": name,
        "productID": product.to_string(),
        "aggregateRating": {
            "@type": "AggregateRating",
            "ratingValue": average,
            "bestRating": 5,
            "worstRating": 1,
            "ratingCount": rated,
            "reviewCount": summary.count,
        },
        "review": shown_reviews,
    }))
}

/// What `/v1/products/{id}/reviews.html` shows.
#[derive(Debug)]
pub struct FirstView<'a> {
    /// The product.
    pub product: &'a Id,
    /// The language shown.
    pub lang: Lang,
    /// The product's name, for its JSON-LD; none, no JSON-LD.
    pub name: Option<&'a str>,
    /// The product's review summary.
    pub summary: Option<&'a ReviewSummaryView>,
    /// The ranked reviews shown, with their authors.
    pub reviews: &'a [RankedComment],
}

impl FirstView<'_> {
    /// The HTML fragment a shop includes: `<product-reviews>` with its first
    /// view in a declarative shadow root and the answer it shows embedded,
    /// then the product's JSON-LD.
    pub fn render(&self) -> Result<Bytes, serde_json::Error> {
        let page = serde_json::to_value(RankedPage::of(self.reviews, self.summary))?;
        let json_ld = self
            .name
            .zip(self.summary)
            .and_then(|(name, summary)| product_json_ld(self.lang, self.product, name, summary, self.reviews));
        // The style sheet is the project's own file, and the JSON is made
        // safe inside a script element by `script_json`: both go in as they are.
        let markup = html! {
            product-reviews product-id=(self.product.to_string()) lang=(self.lang.tag()) {
                template shadowrootmode="open" {
                    style { (PreEscaped(STYLE)) }
                    (first_view(self.lang, self.summary, self.reviews))
                    script type="application/json" { (PreEscaped(script_json(&page))) }
                }
            }
            @if let Some(json_ld) = json_ld {
                script type="application/ld+json" { (PreEscaped(script_json(&json_ld))) }
            }
        };
        Ok(Bytes::from(markup.into_string()))
    }
}

#[cfg(test)]
mod tests {
    use common::model::Comment;
    use common::summary::ReviewSummary;

    use super::*;
    use crate::views::Author;

    fn review(order: &str, rating: serde_json::Value, nickname: Option<&str>) -> RankedComment {
        let comment: Comment = serde_json::from_value(serde_json::json!({
            "orderId": order, "productId": "PRODUCT001", "userId": "USER000001",
            "content": "<b>fine</b> & good", "timestamp": 1_700_000_000_000_i64, "edited": true,
            "rating": rating, "photos": 2
        }))
        .expect("comment");
        let mut ranked = RankedComment::new(comment, 1, Some(0.5));
        ranked.author = Some(nickname.map(|nickname| Author { nickname: nickname.to_owned() }));
        ranked
    }

    fn summary() -> ReviewSummaryView {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let counted = ReviewSummary { rated: [1, 0, 0, 1, 2], unrated: 1, with_photos: 2 };
        ReviewSummaryView::new(&product, &counted, 1, true)
    }

    #[test]
    fn the_first_view_escapes_what_users_wrote_and_embeds_what_it_shows() {
        let product = Id::parse("productId", "PRODUCT001").expect("id");
        let (summary, reviews) =
            (summary(), [review("ORDER00001", 5.into(), Some("<kim>")), review("ORDER00002", "x".into(), None)]);
        let view = FirstView {
            product: &product,
            lang: Lang::En,
            name: Some("Kettle </script>"),
            summary: Some(&summary),
            reviews: &reviews,
        };
        let html = String::from_utf8(view.render().expect("render").to_vec()).expect("utf-8");
        assert!(html.contains("&lt;b&gt;fine&lt;/b&gt; &amp; good"), "{html}");
        assert!(html.contains("&lt;kim&gt;") && html.contains("A customer"), "{html}");
        assert!(html.contains(r#"aria-label="3.8 out of 5 stars""#), "{html}");
        for (stars, reviews) in [("5 stars", "2 reviews"), ("1 star", "1 review"), ("3 stars", "0 reviews")] {
            let bar = format!(r#"<span>{stars}<span class="comma">,</span></span>"#);
            assert!(
                html.contains(&bar) && html.contains(&format!(r#"<span class="n">{reviews}</span>"#)),
                "{bar}: {html}"
            );
        }
        assert!(html.contains("Show all 5 reviews"), "{html}");
        assert_eq!(html.matches("</script>").count(), 2, "nothing the users wrote closes a script: {html}");
        let json_ld_start = html.find(r#"<script type="application/ld+json">"#).expect("json-ld") + 35;
        let json_ld: serde_json::Value =
            serde_json::from_str(&html[json_ld_start..html.len() - "</script>".len()]).expect("json-ld parses");
        assert_eq!(json_ld["aggregateRating"]["ratingValue"], 3.8, "as shown, rounded half up from 3.75");
        assert_eq!(
            (&json_ld["aggregateRating"]["reviewCount"], &json_ld["aggregateRating"]["ratingCount"]),
            (&5.into(), &4.into())
        );
        assert_eq!(json_ld["name"], "Kettle </script>");
        assert_eq!(json_ld["review"].as_array().map(Vec::len), Some(1), "only rated reviews: {json_ld}");
        let stale = String::from_utf8(shown_stale(&view.render().expect("render")).to_vec()).expect("utf-8");
        assert!(stale.contains(r#"<p class="notice" part="notice">"#) && !stale.contains(HIDDEN_NOTICE), "{stale}");
        let unnamed = FirstView { name: None, ..view };
        assert!(!String::from_utf8_lossy(&unnamed.render().expect("render")).contains("ld+json"));
    }

    #[test]
    fn an_id_a_name_a_nickname_and_a_review_full_of_markup_and_quotes_render_inert() {
        // Ten printable characters: a product id may hold quotes and angle brackets.
        let product = Id::parse("productId", "\"><script>").expect("id");
        let hostile = "</p><script>alert(1)</script><img src=x onerror=\"alert(2)\"> ' \" &amp;";
        let mut shown = review("ORDER00001", 4.into(), Some(hostile));
        shown.comment.content = Some(hostile.to_owned());
        let summary = summary();
        let view = FirstView {
            product: &product,
            lang: Lang::En,
            name: Some(hostile),
            summary: Some(&summary),
            reviews: &[shown],
        };
        let html = String::from_utf8(view.render().expect("render").to_vec()).expect("utf-8");
        // Only the renderer's own elements: the embedded answer and the JSON-LD.
        assert_eq!(html.matches("<script").count(), 2, "{html}");
        assert_eq!(html.matches("</script>").count(), 2, "{html}");
        assert!(!html.contains("<img") && !html.contains("<p><script") && !html.contains("\" onerror"), "{html}");
        assert!(html.contains(r#"product-id="&quot;&gt;&lt;script&gt;""#), "the id stays in its attribute: {html}");
        let escaped_text = "&lt;/p&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt; ' &quot; &amp;amp;";
        assert_eq!(html.matches(escaped_text).count(), 2, "the nickname and the review, as text: {html}");
    }
}
