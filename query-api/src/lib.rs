//! `query-api`: the read-only HTTP service frontends call to show product reviews.
//!
//! It answers the routes of docs/contract.md §7 from the tables through
//! [`common::store::ReadStore`]: a product's and a user's comments newest first in
//! cursor pages, and a product's ranked comments (from a short-lived in-process
//! cache, since they change only when the ranker runs). It never writes: the
//! store it holds has no write methods.
//!
//! - [`server`] builds the router ([`app`]) with its middleware and serves it
//!   with a bounded graceful shutdown ([`serve`]); [`front_door`] gives every
//!   request its id, span and metrics; `route_handling` holds the reads to
//!   the clients' limits and answers their conditional GETs; [`connections`] accepts and
//!   keeps connections within their timeouts and cap; [`clients`] tells
//!   clients apart and, when the service must shed, refuses the ones over
//!   their fair share first.
//! - [`routes`] holds the handlers, by audience (`/v1`, seed, operations);
//!   [`extract`] validates ids, limits and bodies at the edge; [`views`] is
//!   the JSON they answer; [`error`] is the one error shape every failure
//!   answers with; [`etag`] tags comment reads and answers 304 to a client
//!   that holds the answer; [`widget`] renders the review widgets' first
//!   view for a shop's server and puts their script together.
//! - [`pages`] reads pages of comments (plain, star-filtered, by rating,
//!   with authors); [`ranking_reads`] loads a product's ranking with its
//!   summary as of now, and a listing page's summaries; [`ranking_batches`]
//!   shares the reads of concurrent ranking loads.
//! - [`state`] is what requests share (fields and accessors only);
//!   [`ranked_cache`] the ranked-read cache, its refresh protocol and the
//!   prepared rankings it holds; [`last_good`] the last good answers a
//!   product page is served from, marked stale, when HBase fails; [`config`]
//!   the flags; [`telemetry`] the metrics and request spans; [`openapi`] the
//!   generated document and `/docs`.

mod around;
pub mod clients;
pub mod conditional;
pub mod config;
pub mod connections;
mod deadline;
pub mod encoding;
pub mod error;
pub mod etag;
pub mod extract;
pub mod front_door;
pub mod last_good;
pub mod openapi;
pub mod pages;
pub mod prepared_ranking;
pub mod ranked_cache;
pub mod ranking_batches;
pub mod ranking_reads;
mod route_handling;
pub mod routes;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod views;
pub mod widget;

pub use config::{Args, Settings};
pub use error::{ApiError, ErrorCode};
pub use server::{app, serve};
pub use state::AppState;

#[cfg(test)]
mod handler_tests;
