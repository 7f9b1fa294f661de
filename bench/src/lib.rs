//! `bench`: load generators for the query service. Its one job is to put a
//! measured load on the service and report what it saw.
//!
//! - `api-bench` (the figures of BENCHMARKS.md) compares the service with a
//!   raw Rust client at a fixed concurrency, scenario by scenario.
//! - `soak` holds the service at a fixed request rate with mixed routes and
//!   reports each window's latency and the service's resident memory.
//!
//! Both drive HTTP through [`load`]: the client, the closed-loop connection
//! loop, latency recording with an HDR histogram, and its percentile summary.

pub mod load;
