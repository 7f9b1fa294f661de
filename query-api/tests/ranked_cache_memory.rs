//! The ranked-read cache is bounded by bytes: filled with rankings of large
//! comments, their answers compressed in every coding as requests would have
//! them, far more than the bound, the process's resident memory grows by
//! about the bound, not by what was inserted. A test binary of its own, so no
//! other test shares (and disturbs) the process's memory.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue};
use common::model::{Comment, Record};
use common::Id;
use query_api::encoding::AcceptedCodings;
use query_api::prepared_ranking::Ranking;
use query_api::ranked_cache::RankedCache;
use query_api::views::RankedComment;
use query_api::Settings;

/// The allocator of the service (`query-api`'s main.rs), so freed memory
/// behaves here as it does there.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const BOUND_BYTES: u64 = 16 * 1024 * 1024;
const RANKINGS: usize = 100;
const COMMENT_BYTES: usize = 60 * 1024;

/// The process's resident set, in bytes (Linux).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

fn id(prefix: char, number: usize) -> Id {
    Id::parse("id", &format!("{prefix}{number:09}")).expect("id")
}

/// `COMMENT_BYTES` letters of a seeded walk over sixteen of them, made once:
/// text that compresses to about half, as reviews do.
static LETTERS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let mut state = 1_442_695_040_888_963_407_u64;
    (0..COMMENT_BYTES)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            char::from(b'a' + u8::try_from(state >> 60).expect("four bits"))
        })
        .collect()
});

/// A text of its own for each `seed`: [`LETTERS`] turned by a seeded offset.
fn text(seed: usize) -> String {
    let turn = seed * 7_919 % COMMENT_BYTES;
    format!("{}{}", &LETTERS[turn..], &LETTERS[..turn])
}

/// A ranking of ten comments of `COMMENT_BYTES` each, every text its own,
/// with every compressed variant its answers keep made, as requests in
/// each coding would have made them.
fn large_ranking(product: usize) -> Ranking {
    let comments = (0..10)
        .map(|rank| {
            let content = format!("{product}-{rank} {}", text(product * 10 + rank));
            let json = serde_json::json!({
                "orderId": id('O', product * 10 + rank).to_string(),
                "productId": id('P', product).to_string(),
                "userId": id('U', rank).to_string(),
                "content": content,
                "timestamp": 1_700_000_000_000i64,
                "edited": false,
            });
            let comment = Comment::from_json(json.to_string().as_bytes()).expect("comment");
            RankedComment::new(comment, u16::try_from(rank + 1).expect("small"), Some(0.5))
        })
        .collect();
    let ranking = Ranking::new(comments, None, std::time::Instant::now(), true);
    // The seed's answer too, as a ranking that both ranked routes read holds it.
    let seed = ranking.keep_seed_body().expect("rendered");
    let ranked = ranking.v1_body(10).expect("rendered");
    for coding in ["br", "gzip"] {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(coding));
        for answer in [&seed, &ranked] {
            let served = answer.response(AcceptedCodings::of(&headers), HeaderValue::from_static("application/json"));
            // Brotli's variant is always kept here; gzip's, as long again,
            // fits beside it only in text that compresses better than this.
            if coding == "br" {
                assert_eq!(served.headers().get(header::CONTENT_ENCODING).expect("a variant kept"), coding);
            }
        }
    }
    ranking
}

#[tokio::test]
async fn a_cache_filled_far_past_its_bound_keeps_resident_memory_near_the_bound() {
    let settings = Settings {
        ranked_cache_ttl: Duration::from_secs(600),
        ranked_cache_max_bytes: BOUND_BYTES,
        ..Settings::default()
    };
    let cache = RankedCache::new(&settings);
    let one = large_ranking(0).weight_bytes();
    // The comments (weighed by their JSON), both bodies, and both bodies'
    // room for their variants (brotli's, about half a body, kept in it).
    assert!(one > 4 * 10 * COMMENT_BYTES as u64, "a ranking weighs its comments, bodies and variants: {one}");

    let before = resident_bytes();
    let mut peak = before;
    for product in 0..RANKINGS {
        let loaded = cache.get_or_load(id('P', product), || async move { Ok(Arc::new(large_ranking(product))) }).await;
        assert!(loaded.is_ok(), "a load that cannot fail");
        if product % 5 == 4 {
            peak = peak.max(resident_bytes());
        }
    }
    let (weighted, entries) = cache.size();
    peak = peak.max(resident_bytes());

    let inserted = one * RANKINGS as u64;
    let growth = peak.saturating_sub(before);
    println!(
        "inserted {} MiB of rankings into a {} MiB cache: holds {} entries weighing {} MiB; resident memory grew {} MiB at peak",
        inserted >> 20,
        BOUND_BYTES >> 20,
        entries,
        weighted >> 20,
        growth >> 20
    );
    assert!(inserted > 8 * BOUND_BYTES, "the test must insert far more than the bound");
    assert!(weighted <= BOUND_BYTES, "the cache holds {weighted} bytes");
    // The bound plus a few rankings in flight (built, or evicted and not yet
    // given back) and the allocator's slack: freed pages go
    // back to the system on jemalloc's decay timer, so how many are still
    // resident at the peak depends on the machine's load. Thirty-two MiB of
    // slack still tells a bounded cache from the 250 MiB inserted.
    let allowed = BOUND_BYTES + 5 * one + 32 * 1024 * 1024;
    assert!(
        growth <= allowed,
        "resident memory grew {} MiB, more than the {} MiB allowed",
        growth >> 20,
        allowed >> 20
    );
}
