//! `common`: the data layer every binary shares. Its one job is the review
//! tables as typed data: ids, row keys and records, and reading and writing
//! them in HBase (the only crate that speaks Thrift).
//!
//! - [`ids`] validates entity ids, [`keys`] is the only place that knows the
//!   byte layout of row keys, [`cursor`] encodes page cursors, and [`model`] is
//!   the JSON of every stored record, read leniently where Jackson wrote
//!   what strict JSON refuses ([`jackson`]).
//! - [`hbase`] is the storage layer over HBase's Thrift1 gateway (pool, retries,
//!   async bridge); no other crate sees Thrift.
//! - [`store`] maps tables to models, skips rows that do not decode, and holds
//!   the write path; [`schema`] creates the tables; [`summary`] counts a
//!   product's reviews.
//! - [`config`] holds the flags and logging setup every binary shares;
//!   [`telemetry`] the shared metric names and exporter settings; [`exit`] the
//!   exit statuses of every binary.
//! - [`retry`] is the one backoff policy (capped, jittered) of every retry
//!   loop; [`shutdown`] is how every binary hears SIGTERM and SIGINT.
//!
//! # Features
//!
//! - `test-support`: makes the raw HBase access public (`Store::hbase`,
//!   `Hbase::run`, `hbase::Connection` with its test-only operations, `Row`,
//!   `RowMutation`, `ScanSpec`, `Retry` and the column names), which is
//!   otherwise `pub(crate)`. Only the integration tests enable it: they write
//!   rows as the Java service wrote them, scan whole tables and drop their
//!   tables. The services build without it, so outside this crate every read
//!   and write goes through [`store`], and query-api's routes, which hold a
//!   [`store::ReadStore`], have no write to call.

pub mod config;
pub mod cursor;
pub mod error;
pub mod exit;
pub mod hbase;
pub mod ids;
pub mod jackson;
pub mod keys;
pub mod model;
pub mod retry;
pub mod schema;
pub mod shutdown;
pub mod store;
pub mod summary;
pub mod tables;
pub mod telemetry;
pub mod traces;

pub use error::{Error, Result};
pub use ids::Id;
