//! `common`: everything the ranker and the query service share about the data.
//!
//! - [`ids`] validates entity ids, [`keys`] is the only place that knows the
//!   byte layout of row keys, [`cursor`] encodes page cursors, and [`model`] is
//!   the JSON of every stored record, read leniently where Jackson wrote
//!   what strict JSON refuses ([`jackson`]).
//! - [`hbase`] is the storage layer over HBase's Thrift1 gateway (pool, retries,
//!   async bridge); no other crate sees Thrift.
//! - [`store`] maps tables to models, skips rows that do not decode, and holds
//!   the write path; [`schema`] creates the tables.
//! - [`config`] holds the flags and logging setup every binary shares;
//!   [`telemetry`] the shared metric names and exporter settings; [`exit`] the
//!   exit statuses of every binary.

pub mod config;
pub mod cursor;
pub mod error;
pub mod exit;
pub mod hbase;
pub mod ids;
pub mod jackson;
pub mod keys;
pub mod model;
pub mod schema;
pub mod store;
pub mod tables;
pub mod telemetry;

pub use error::{Error, Result};
pub use ids::Id;
