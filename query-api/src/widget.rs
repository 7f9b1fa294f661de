//! The review widgets' server half: the script `/widget/v1/reviews.js` as
//! served (its source, messages and style from the repository's `widget/`
//! folder, put together once at start), and the first view of
//! `<product-reviews>` rendered here for `/v1/products/{id}/reviews.html`,
//! with the product's schema.org JSON-LD.
//!
//! The first view is the markup `widget/reviews.js` renders for a product's
//! ranked reviews and summary (`widgetHtml` there, [`first_view`] here), in a
//! declarative shadow root, with the answer it shows embedded: the script
//! adopts it as it is, so nothing moves when it takes over. The two renderers
//! are kept equal by the browser tests (`widget/test/`), which compare them.
//!
//! A rendered first view is kept beside the ranking it shows
//! ([`RenderedViews`]), so a product page served again costs a lookup, not a
//! rendering and a hash. This module does no I/O: [`crate::routes::widget`]
//! reads the ranking.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderValue;
use chrono::DateTime;
use common::keys::MAX_RANK;
use common::Id;
use html_escape::{encode_double_quoted_attribute as attribute, encode_text as text};
use serde::Deserialize;

use crate::etag::entity_tag;
use crate::views::{RankedComment, RankedPage, ReviewSummaryView};

/// The script's source, with placeholders for the messages and the style.
const SCRIPT_SOURCE: &str = include_str!("../../widget/reviews.js");
/// The widgets' style sheet, inside each shadow root.
const STYLE: &str = include_str!("../../widget/reviews.css");
/// Every message the widgets show, by language.
const MESSAGES_JSON: &str = include_str!("../../widget/messages.json");

/// The script as served: the source with its messages and style filled in.
pub static SCRIPT: LazyLock<Bytes> = LazyLock::new(|| {
    let style = serde_json::to_string(STYLE).unwrap_or_else(|_| "''".to_owned());
    let script = SCRIPT_SOURCE.replacen("/*MESSAGES*/ {}", MESSAGES_JSON.trim(), 1).replacen("/*STYLE*/ ''", &style, 1);
    Bytes::from(script)
});

/// The `Cache-Control` of the script: a day; a new release changes its `ETag`,
/// and a page that revalidates after a day gets it.
pub const SCRIPT_CACHE_CONTROL: HeaderValue = HeaderValue::from_static("public, max-age=86400");

/// A language the widgets speak. Any other tag is shown in English, by the
/// script and here alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English.
    En,
    /// Korean.
    Ko,
}

impl Lang {
    /// The language a `lang` tag asks for: Korean for `ko` and its regions, English otherwise.
    pub fn from_tag(tag: Option<&str>) -> Lang {
        match tag {
            Some(tag) if tag.to_ascii_lowercase().starts_with("ko") => Lang::Ko,
            _ => Lang::En,
        }
    }

    /// The language's tag.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ko => "ko",
        }
    }

    /// Whether `count` takes the singular (`Intl.PluralRules`' `one`).
    fn is_one(self, count: u64) -> bool {
        self == Lang::En && count == 1
    }

    /// `n` with its thousands grouped, as `Intl.NumberFormat` writes it in both languages.
    fn number(self, n: u64) -> String {
        let digits = n.to_string();
        let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        grouped
    }

    /// A date as `Intl.DateTimeFormat`'s `dateStyle: "medium"` writes it, in
    /// UTC; none outside 1970 to 9999, as the script.
    fn date(self, epoch_ms: i64) -> String {
        let Some(moment) = dated(epoch_ms) else {
            return String::new();
        };
        match self {
            Lang::En => moment.format("%b %-d, %Y").to_string(),
            Lang::Ko => moment.format("%Y. %-m. %-d.").to_string(),
        }
    }
}

/// One message: the same text for every count, or a singular and a plural.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Message {
    Plain(String),
    Plural { one: Option<String>, other: String },
}

static MESSAGES: LazyLock<HashMap<String, HashMap<String, Message>>> =
    LazyLock::new(|| serde_json::from_str(MESSAGES_JSON).unwrap_or_default());

/// The message `key` in `lang` for `count`, with `{name}` placeholders filled
/// from `values`; the key itself when the message is missing (a unit test
/// renders every one).
fn say(lang: Lang, key: &str, count: u64, values: &[(char, &str)]) -> String {
    let message = MESSAGES.get(lang.tag()).and_then(|messages| messages.get(key));
    let template = match message {
        Some(Message::Plain(text)) => text.as_str(),
        Some(Message::Plural { one: Some(one), .. }) if lang.is_one(count) => one.as_str(),
        Some(Message::Plural { other, .. }) => other.as_str(),
        None => key,
    };
    let mut said = template.to_owned();
    for (name, value) in values {
        said = said.replace(&format!("{{{name}}}"), value);
    }
    said
}

/// An average rounded to one decimal, as the script rounds it (`Math.round(x * 10) / 10`).
fn rounded(average: f64) -> f64 {
    (average * 10.0).round() / 10.0
}

fn stars_image(label: &str, rating: &str, part: Option<&str>) -> String {
    let part = part.map(|part| format!(" part=\"{part}\"")).unwrap_or_default();
    format!(
        r#"<span class="stars"{part} role="img" aria-label="{}" style="--rating:{rating}"></span>"#,
        attribute(label)
    )
}

/// A review's author as shown: the nickname, or "a customer" when the user's
/// record has none.
fn author_name(lang: Lang, review: &RankedComment) -> String {
    match &review.author {
        Some(Some(author)) if !author.nickname.is_empty() => author.nickname.clone(),
        _ => say(lang, "anonymous", 1, &[]),
    }
}

/// The last millisecond of the year 9999: later timestamps (seconds taken
/// for microseconds, say) show no date, here and in the script.
const LAST_MS: i64 = 253_402_300_799_999;

fn dated(epoch_ms: i64) -> Option<DateTime<chrono::Utc>> {
    (0..=LAST_MS).contains(&epoch_ms).then(|| DateTime::from_timestamp_millis(epoch_ms)).flatten()
}

fn iso_date(epoch_ms: i64) -> String {
    dated(epoch_ms).map(|moment| moment.format("%Y-%m-%d").to_string()).unwrap_or_default()
}

fn review_html(lang: Lang, review: &RankedComment) -> String {
    let comment = &review.comment;
    let stars = comment.rating.as_ref().and_then(|rating| rating.stars());
    let mut html = format!(r#"<li class="review" part="review" id="review-{}"><p class="meta">"#, review.id);
    if let Some(stars) = stars {
        let label = say(lang, "rated", u64::from(stars), &[('v', &lang.number(u64::from(stars)))]);
        html += &stars_image(&label, &stars.to_string(), None);
    }
    html += &format!(r#"<span class="author" part="author">{}</span>"#, text(&author_name(lang, review)));
    html += &format!(r#"<time datetime="{}">{}</time>"#, iso_date(comment.timestamp), lang.date(comment.timestamp));
    if comment.edited {
        html += &format!(r#"<span class="edited">{}</span>"#, say(lang, "edited", 1, &[]));
    }
    if let Some(photos) = comment.photos.filter(|&photos| photos > 0) {
        let photos = u64::from(photos);
        html += &format!(
            r#"<span class="photo-count">{}</span>"#,
            say(lang, "photos", photos, &[('n', &lang.number(photos))])
        );
    }
    html += &format!(r#"</p><p class="body" part="body">{}</p></li>"#, text(comment.content.as_deref().unwrap_or("")));
    html
}

fn summary_html(lang: Lang, summary: &ReviewSummaryView) -> String {
    let (mut label, mut value) = (String::new(), String::new());
    if let Some(average) = summary.average.map(rounded) {
        let shown = format!("{average:.1}");
        label = stars_image(&say(lang, "rated", 1, &[('v', &shown)]), &average.to_string(), Some("average"));
        value = format!(r#"<span class="value" aria-hidden="true">{shown}</span>"#);
    }
    let mut bars = String::new();
    for star in (1..=5u8).rev() {
        let n = summary.reviews_of(star);
        let width = if summary.count > 0 { (n as f64 * 100.0 / summary.count as f64).round() } else { 0.0 };
        let stars = say(lang, "stars", u64::from(star), &[('k', &lang.number(u64::from(star)))]);
        let reviews = say(lang, "reviews", n, &[('n', &lang.number(n))]);
        bars += &format!(
            r#"<li><button type="button" part="bar" data-star="{star}" aria-pressed="false"><span>{stars}<span class="comma">,</span></span><span class="track" aria-hidden="true"><span class="fill" style="width:{width}%"></span></span><span class="n">{reviews}</span></button></li>"#,
        );
    }
    format!(
        r#"<div class="summary" part="summary"><p class="average">{label}{value}<span class="count">{}</span></p><ul class="histogram" aria-label="{}">{bars}</ul><p class="photos-count">{}</p></div>"#,
        say(lang, "reviews", summary.count, &[('n', &lang.number(summary.count))]),
        attribute(&say(lang, "filters", 1, &[])),
        say(lang, "withPhotos", summary.with_photos, &[('n', &lang.number(summary.with_photos))]),
    )
}

fn sorts_html(lang: Lang) -> String {
    let buttons: String = ["helpful", "newest", "rating_desc", "rating_asc"]
        .iter()
        .map(|sort| {
            let pressed = *sort == "helpful";
            format!(
                r#"<button type="button" data-sort="{sort}" aria-pressed="{pressed}">{}</button>"#,
                say(lang, sort, 1, &[])
            )
        })
        .collect();
    format!(
        r#"<div class="sorts" role="group" aria-label="{}">{buttons}</div>"#,
        attribute(&say(lang, "sorts", 1, &[]))
    )
}

/// The widget's first view: the summary and the most helpful (ranked)
/// reviews, as `widgetHtml` in `widget/reviews.js` renders that state.
fn first_view(lang: Lang, summary: Option<&ReviewSummaryView>, reviews: &[RankedComment]) -> String {
    let counted = summary.filter(|summary| summary.count > 0);
    let mut html = format!(
        r#"<section class="widget" part="container" aria-labelledby="heading" aria-busy="false"><div class="top"><h2 id="heading" part="heading">{}</h2>"#,
        say(lang, "heading", 1, &[])
    );
    if let Some(summary) = counted {
        html += &summary_html(lang, summary);
        html += &sorts_html(lang);
    }
    let status = match counted {
        None => say(lang, "empty", 1, &[]),
        Some(_) => say(lang, "statusHelpful", reviews.len() as u64, &[('n', &lang.number(reviews.len() as u64))]),
    };
    html += &format!(
        r#"{HIDDEN_NOTICE}{}</p></div><p class="status" role="status">{}</p><div class="bottom"><ol class="list" part="list">"#,
        say(lang, "stale", 1, &[]),
        text(&status)
    );
    for review in reviews {
        html += &review_html(lang, review);
    }
    html += "</ol>";
    if let Some(summary) = counted.filter(|summary| summary.count > reviews.len() as u64) {
        html += &format!(
            r#"<button type="button" class="more" data-sort="newest">{}</button>"#,
            say(lang, "all", summary.count, &[('n', &lang.number(summary.count))])
        );
    }
    html + "</div></section>"
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

/// What shapes a rendered first view besides the ranking: the product, the
/// language, the ranked reviews shown and the name its JSON-LD gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    /// The product.
    pub product: Id,
    /// The language shown.
    pub lang: Lang,
    /// The most ranked reviews shown.
    pub limit: usize,
    /// The product's name, for its JSON-LD.
    pub name: Option<Arc<str>>,
}

impl ViewKey {
    /// The view of `product` in `lang` with at most `limit` ranked reviews,
    /// named `name`. A ranking holds at most [`MAX_RANK`] reviews, so any
    /// larger limit is the same view, kept once.
    pub fn new(product: Id, lang: Lang, limit: usize, name: Option<&str>) -> ViewKey {
        ViewKey { product, lang, limit: limit.min(usize::from(MAX_RANK)), name: name.map(Arc::from) }
    }

    /// The bytes the key holds beyond its own size.
    pub fn heap_bytes(&self) -> usize {
        self.name.as_deref().map_or(0, str::len)
    }
}

/// A first view as rendered: its HTML and `ETag`, and the read of the
/// ranking it shows.
#[derive(Debug)]
pub struct Rendered {
    /// The HTML fragment.
    pub body: Bytes,
    /// Its entity tag, computed once.
    pub etag: HeaderValue,
    /// When the read of the ranking it shows began.
    pub ranking_read_at: Instant,
}

/// The first views rendered lately, each kept while the ranking it shows is
/// the one the ranked-read cache holds: bounded in bytes, and never older
/// than two of that cache's TTLs (how long it keeps a ranking).
#[derive(Debug, Clone)]
pub struct RenderedViews {
    views: Option<moka::sync::Cache<ViewKey, Arc<Rendered>>>,
}

impl RenderedViews {
    /// Views kept up to `max_bytes` in all, for `ranking_ttl`; none when
    /// rankings are not cached (`ranking_ttl` zero).
    pub fn new(ranking_ttl: Duration, max_bytes: u64) -> RenderedViews {
        let views = (!ranking_ttl.is_zero()).then(|| {
            moka::sync::Cache::builder()
                .name("rendered-views")
                .weigher(|key: &ViewKey, view: &Arc<Rendered>| {
                    u32::try_from(view.body.len() + key.heap_bytes() + 256).unwrap_or(u32::MAX)
                })
                .max_capacity(max_bytes.max(1))
                .time_to_live(ranking_ttl.saturating_mul(2))
                .build()
        });
        RenderedViews { views }
    }

    /// The view of `key` kept, if it was rendered from the ranking read at `ranking_read_at`.
    pub fn get(&self, key: &ViewKey, ranking_read_at: Instant) -> Option<Arc<Rendered>> {
        self.views.as_ref()?.get(key).filter(|view| view.ranking_read_at == ranking_read_at)
    }

    /// Keeps `body`, the view of `key` rendered from the ranking read at
    /// `ranking_read_at`, with its `ETag`.
    pub fn keep(&self, key: ViewKey, body: Bytes, ranking_read_at: Instant) -> Arc<Rendered> {
        let view = Arc::new(Rendered { etag: entity_tag(&body), body, ranking_read_at });
        if let Some(views) = &self.views {
            views.insert(key, Arc::clone(&view));
        }
        view
    }
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
        let mut html = format!(
            r#"<product-reviews product-id="{}" lang="{}"><template shadowrootmode="open"><style>{STYLE}</style>{}<script type="application/json">{}</script></template></product-reviews>"#,
            attribute(&self.product.to_string()),
            self.lang.tag(),
            first_view(self.lang, self.summary, self.reviews),
            script_json(&page),
        );
        let json_ld = self
            .name
            .zip(self.summary)
            .and_then(|(name, summary)| product_json_ld(self.lang, self.product, name, summary, self.reviews));
        if let Some(json_ld) = json_ld {
            html += &format!(r#"<script type="application/ld+json">{}</script>"#, script_json(&json_ld));
        }
        Ok(Bytes::from(html))
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
    fn numbers_dates_and_plurals_follow_intl_in_both_languages() {
        assert_eq!(Lang::En.number(1_234_567), "1,234,567");
        assert_eq!(Lang::Ko.number(999), "999");
        assert_eq!(Lang::En.date(1_700_000_000_000), "Nov 14, 2023");
        assert_eq!(Lang::Ko.date(1_700_000_000_000), "2023. 11. 14.");
        assert_eq!(say(Lang::En, "reviews", 1, &[('n', "1")]), "1 review");
        assert_eq!(say(Lang::En, "reviews", 2, &[('n', "2")]), "2 reviews");
        assert_eq!(say(Lang::Ko, "reviews", 1, &[('n', "1")]), "리뷰 1개");
        assert_eq!(Lang::from_tag(Some("ko-KR")), Lang::Ko);
        assert_eq!(Lang::from_tag(Some("de")), Lang::En);
        assert_eq!(rounded(4.25), 4.3, "half up, as Math.round");
        assert_eq!(Lang::En.date(LAST_MS), "Dec 31, 9999");
        for outside in [LAST_MS + 1, -1, i64::MAX] {
            assert_eq!((Lang::En.date(outside), iso_date(outside)), (String::new(), String::new()), "{outside}");
        }
    }

    #[test]
    fn every_message_is_there_in_every_language() {
        let english = &MESSAGES["en"];
        for (lang, messages) in MESSAGES.iter() {
            let mut missing: Vec<&String> = english.keys().filter(|key| !messages.contains_key(*key)).collect();
            missing.sort();
            assert!(missing.is_empty(), "{lang} lacks {missing:?}");
        }
        assert_eq!(MESSAGES.len(), 2);
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
    fn a_rendered_view_is_reused_only_for_the_ranking_it_was_rendered_from() {
        let key = ViewKey {
            product: Id::parse("productId", "PRODUCT001").expect("id"),
            lang: Lang::Ko,
            limit: 10,
            name: None,
        };
        let (read_at, reloaded_at) = (Instant::now(), Instant::now() + Duration::from_millis(1));
        let views = RenderedViews::new(Duration::from_secs(10), 1 << 20);
        let kept = views.keep(key.clone(), Bytes::from_static(b"<p>first</p>"), read_at);
        assert_eq!(kept.etag, entity_tag(b"<p>first</p>"));
        assert_eq!(views.get(&key, read_at).map(|view| view.body.clone()), Some(kept.body.clone()));
        assert!(views.get(&key, reloaded_at).is_none(), "a reloaded ranking is rendered again");
        assert!(views.get(&ViewKey { lang: Lang::En, ..key.clone() }, read_at).is_none());
        let uncached = RenderedViews::new(Duration::ZERO, 1 << 20);
        uncached.keep(key.clone(), Bytes::from_static(b"<p>first</p>"), read_at);
        assert!(uncached.get(&key, read_at).is_none(), "nothing is kept while rankings are not cached");
    }

    #[test]
    fn the_script_is_served_with_its_messages_and_style() {
        let script = String::from_utf8(SCRIPT.to_vec()).expect("utf-8");
        assert!(!script.contains("/*MESSAGES*/") && !script.contains("/*STYLE*/"));
        assert!(script.contains("\"heading\": \"Reviews\"") && script.contains(".histogram"), "filled in");
    }
}
