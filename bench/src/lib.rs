//! `bench`: load generators for the query service, and the floor its
//! cached reads are measured against.
//!
//! - `api-bench` (the figures of BENCHMARKS.md) compares the service with a
//!   raw Rust client at a fixed concurrency, scenario by scenario.
//! - `soak` holds the service at a fixed request rate with mixed routes and
//!   reports each window's latency and the service's resident memory.
//! - `anchor` serves [`anchor_router`], an axum router answering fixed
//!   bytes, over HTTP; `app-cost` calls it and query-api's router in
//!   process, without sockets, and compares their CPU time per request.
//!
//! The load generators drive HTTP through [`load`]: the client, the
//! closed-loop connection loop, latency recording with an HDR histogram, and
//! its percentile summary.

pub mod load;

use axum::body::Bytes;
use axum::http::header;
use axum::routing::get;
use axum::Router;

/// The anchor: `GET /anchor` answers `body` as JSON, with no middleware, no
/// cache lookup and no HBase. What query-api's cached read costs beyond it
/// is the service's own work.
pub fn anchor_router(body: Bytes) -> Router {
    Router::new().route(
        "/anchor",
        get(move || {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    )
}
