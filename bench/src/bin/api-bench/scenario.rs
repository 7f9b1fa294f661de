//! The scenarios: what each request of each reads, and the clients that
//! send them with or without a browser's `Accept-Encoding`.

use std::sync::Arc;
use std::time::Duration;

use bench::load::{closed_loop, http_client};
use common::store::Store;
use common::Id;
use rand::Rng;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING};

use crate::report::Outcome;

/// The page size of the measured reads, as the issue specifies.
pub const PAGE_SIZE: usize = 20;

/// What a browser sends (Chrome's, Firefox's and Safari's differ only in
/// `zstd` and its order).
pub const BROWSER_ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// The `Accept-Encoding` a run's requests carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Encoding {
    /// No `Accept-Encoding`, as curl and the other benchmarks send.
    Identity,
    /// [`BROWSER_ACCEPT_ENCODING`].
    Browser,
}

impl Encoding {
    /// What a scenario's name gains in this encoding: nothing, or `+browser`.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Identity => "",
            Encoding::Browser => "+browser",
        }
    }
}

/// One HTTP client per [`Encoding`], each with its connection pool.
pub struct Clients {
    identity: reqwest::Client,
    browser: reqwest::Client,
}

impl Clients {
    pub fn new(connections: usize) -> anyhow::Result<Clients> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(BROWSER_ACCEPT_ENCODING));
        // The client decodes nothing (reqwest without its compression
        // features): it reads the bytes as a browser receives them.
        let browser = bench::load::http_client_with(connections, None, headers)?;
        Ok(Clients { identity: http_client(connections, None)?, browser })
    }

    /// The client sending `encoding`'s header.
    pub fn of(&self, encoding: Encoding) -> &reqwest::Client {
        match encoding {
            Encoding::Identity => &self.identity,
            Encoding::Browser => &self.browser,
        }
    }
}

/// One measured workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// One 21-row index scan plus one 20-row multi-get, through `common`.
    Raw,
    /// The service's latest-comments page.
    Http,
    /// Ranked reads with the service's cache off.
    RankedUncached,
    /// Ranked reads with the service's cache warm.
    RankedCached,
    /// Review summaries with the service's cache off.
    SummaryUncached,
    /// Review summaries with the service's cache warm.
    SummaryCached,
    /// The hottest product's first page, unfiltered.
    HotLatest,
    /// The hottest product's first page of its rarest star.
    HotRarest,
    /// The hottest product's first page, worst star first.
    HotRatingAsc,
    /// The summaries of 48 ranked products in one call.
    #[value(name = "summaries-48")]
    Summaries48,
    /// A product's first page of a star it has no review of, its ranking cached.
    AbsentStar,
    /// A product's server-rendered widget, its ranking cached.
    ReviewsHtmlCached,
    /// The widgets' script.
    Script,
    /// A ranked answer's bytes from a bare axum server: the floor.
    Anchor,
}

/// Products a `summaries-48` request names: a listing page of 48.
pub const LISTING_PAGE_PRODUCTS: usize = 48;

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Raw => "raw",
            Scenario::Http => "http",
            Scenario::RankedUncached => "ranked-uncached",
            Scenario::RankedCached => "ranked-cached",
            Scenario::SummaryUncached => "summary-uncached",
            Scenario::SummaryCached => "summary-cached",
            Scenario::HotLatest => "hot-latest",
            Scenario::HotRarest => "hot-rarest",
            Scenario::HotRatingAsc => "hot-rating-asc",
            Scenario::Summaries48 => "summaries-48",
            Scenario::AbsentStar => "absent-star",
            Scenario::ReviewsHtmlCached => "reviews-html-cached",
            Scenario::Script => "script",
            Scenario::Anchor => "anchor",
        }
    }

    /// Whether the scenario reads from the service whose ranked-read cache is on.
    pub fn uses_cache(self) -> bool {
        matches!(
            self,
            Scenario::Http
                | Scenario::RankedCached
                | Scenario::SummaryCached
                | Scenario::AbsentStar
                | Scenario::ReviewsHtmlCached
                | Scenario::Script
                | Scenario::Anchor
        )
    }

    /// Whether the scenario reads ranked products (their rankings or summaries).
    fn reads_rankings(self) -> bool {
        !matches!(self, Scenario::Raw | Scenario::Http)
    }
}

/// The shared inputs of every worker.
pub struct Workload {
    pub store: Store,
    pub clients: Clients,
    pub products: Vec<Id>,
    pub ranked_products: Vec<Id>,
    pub hot_product: Id,
    /// The hottest product's rarest star, by its summary.
    pub rarest_star: u8,
    /// Ranked products with a star each has no review of, by its summary
    /// (read only when `absent-star` runs).
    pub absent_stars: Vec<(Id, u8)>,
}

/// Runs `connections` workers for `duration` and merges what they measured.
pub async fn run_scenario(
    workload: &Arc<Workload>,
    scenario: Scenario,
    encoding: Encoding,
    base: &str,
    connections: usize,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    let workload = Arc::clone(workload);
    let base: Arc<str> = Arc::from(base);
    let measured = closed_loop(connections, duration, seed, move |random| {
        let count = if scenario == Scenario::Summaries48 { LISTING_PAGE_PRODUCTS } else { 1 };
        let products: Vec<Id> = match scenario {
            Scenario::AbsentStar => {
                vec![workload.absent_stars[random.random_range(0..workload.absent_stars.len())].0]
            }
            _ if scenario.reads_rankings() => (0..count)
                .map(|_| workload.ranked_products[random.random_range(0..workload.ranked_products.len())])
                .collect(),
            _ => (0..count).map(|_| workload.products[random.random_range(0..workload.products.len())]).collect(),
        };
        let (workload, base) = (Arc::clone(&workload), Arc::clone(&base));
        async move { one_request(&workload, scenario, encoding, &base, &products).await }
    })
    .await?;
    Ok(Outcome { scenario, encoding, measured })
}

/// One operation of `scenario` on `products` (one, or a listing page's);
/// whether it succeeded.
async fn one_request(workload: &Workload, scenario: Scenario, encoding: Encoding, base: &str, products: &[Id]) -> bool {
    let product = &products[0];
    let hot = workload.hot_product;
    let http_ok = |url: String| http_ok(workload.clients.of(encoding), url);
    match scenario {
        Scenario::Raw => {
            // Exactly the HBase work of one service page: the scan, then the
            // multi-get (skipped for an empty page, as the service skips it).
            let Ok(page) = workload.store.product_comment_page(product, None, PAGE_SIZE).await else {
                return false;
            };
            page.entries.is_empty() || workload.store.comments_of(&page).await.is_ok()
        }
        Scenario::Http => http_ok(format!("{base}/v1/products/{product}/comments?limit={PAGE_SIZE}")).await,
        Scenario::RankedUncached | Scenario::RankedCached => {
            http_ok(format!("{base}/v1/products/{product}/comments/ranked")).await
        }
        Scenario::SummaryUncached | Scenario::SummaryCached => {
            http_ok(format!("{base}/v1/products/{product}/comments/summary")).await
        }
        Scenario::ReviewsHtmlCached => {
            http_ok(format!("{base}/v1/products/{product}/reviews.html?name=Bench%20product")).await
        }
        Scenario::HotLatest => http_ok(format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}")).await,
        Scenario::HotRarest => {
            let star = workload.rarest_star;
            http_ok(format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}&rating={star}")).await
        }
        Scenario::HotRatingAsc => {
            http_ok(format!("{base}/v1/products/{hot}/comments?limit={PAGE_SIZE}&sort=rating_asc")).await
        }
        Scenario::Summaries48 => {
            let ids: Vec<&str> = products.iter().map(Id::as_str).collect();
            http_ok(format!("{base}/v1/summaries?productIds={}", ids.join(","))).await
        }
        Scenario::Script => http_ok(format!("{base}/widget/v1/reviews.js")).await,
        Scenario::Anchor => http_ok(format!("{base}/anchor")).await,
        Scenario::AbsentStar => {
            let star = workload.absent_stars.iter().find(|(absent, _)| absent == product).map_or(1, |(_, star)| *star);
            http_ok(format!("{base}/v1/products/{product}/comments?limit={PAGE_SIZE}&rating={star}")).await
        }
    }
}

/// GETs `url` and reads the whole body (as sent: compressed when it is);
/// whether it answered 200.
async fn http_ok(client: &reqwest::Client, url: String) -> bool {
    match client.get(url).send().await {
        Ok(response) => response.status().is_success() && response.bytes().await.is_ok(),
        Err(_) => false,
    }
}
