//! One integration-test binary (compiled once) against the real HBase that the
//! README's test command starts. Every test creates its own tables under a
//! unique prefix, so tests run in parallel without seeing each other's rows.

mod api;
mod cron;
mod demo;
mod foundation;
mod hbasectl;
mod incremental;
mod java_rows;
mod meta_holder;
mod monitoring;
mod ranker;
mod refresh;
mod reliability;
mod replicas;
mod rows;
mod shards;
mod stars;
mod summaries;
mod thrift2;
mod traces;
mod whole_rankings;
mod widget;
