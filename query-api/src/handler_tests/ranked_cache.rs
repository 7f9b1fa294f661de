//! The ranked-read cache seen through the routes.

use super::*;

#[tokio::test]
async fn the_seed_ranked_route_has_the_cache_weigh_the_answer_it_keeps() {
    // A ranking already cached and fresh: the route reads no HBase.
    let state = offline_state(Duration::from_millis(200));
    let product = common::Id::parse("productId", "PRODUCT001").expect("id");
    let ranking = std::sync::Arc::new(crate::prepared_ranking::Ranking::new(Vec::new(), None, Instant::now(), true));
    let loaded = std::sync::Arc::clone(&ranking);
    let cache = state.ranked_cache().clone();
    cache.get_or_load(product, || async move { Ok(loaded) }).await.expect("cached");
    let (before, _) = cache.size();

    let answer = get(&crate::app(state), "/product/PRODUCT001/comments/ranked").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    let kept = ranking.seed_body().expect("the request kept the answer");
    assert_eq!(answer.body, kept.body().to_vec());
    // The request had the cache weigh the ranking again before it answered.
    let (after, _) = cache.size();
    assert_eq!(after - before, kept.weight_bytes() as u64);
}
