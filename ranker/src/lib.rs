//! `ranker`: picks each product's ten best comments and writes them to
//! `product-comment-rank`, with the product's review summary (the contract
//! is in docs/contract.md §5 and §6).
//!
//! Read from the bottom up:
//!
//! - The vocabulary: `config` is the TOML configuration file (scoring,
//!   pacing, retries); `options` what one run is asked to do ([`Scope`],
//!   [`RunOptions`]); `report` what it did ([`RunReport`], [`RunProgress`]);
//!   `error` why a run as a whole could not proceed ([`RankerError`]).
//! - The scoring core, which does no I/O: [`score`] computes one comment's
//!   score and its terms, and [`select`] picks the best ten under the
//!   duplicate and one-per-user rules in bounded memory.
//! - One product: `product` streams its index in pages, fetches comments
//!   with multi-gets (`fetch`), scores on rayon and writes the slots
//!   (`writer`); `pace` bounds the HBase calls a run has out at once.
//! - One run: [`run()`] finds the products (`discovery`, or [`changes`]
//!   for an incremental run) and ranks them concurrently, retrying and
//!   reporting failures; `shard` and [`shard_plan`] cut the key space into
//!   the shards of one run; [`explain()`] and [`read_pass()`] are its
//!   read-only relatives.
//! - Around a run: [`history`] is its record in the run history, [`lease`]
//!   the nightly lease it holds, and [`recorded`] the one orchestration both
//!   binaries use (take, keep, record, release). [`cli`] holds the flags
//!   `ranker run` and `ranker-cron` share; [`commands`] the `ranker`
//!   command's subcommands, a file each; [`console`] what they print;
//!   [`telemetry`] the run's metrics and their push to a Pushgateway.

pub mod changes;
pub mod cli;
pub mod commands;
mod config;
pub mod console;
mod discovery;
mod error;
mod explain;
mod fetch;
pub mod history;
pub mod lease;
mod options;
mod pace;
mod product;
pub mod recorded;
pub mod refresh;
mod report;
mod run;
mod run_products;
pub mod score;
pub mod select;
mod shard;
pub mod shard_plan;
pub mod telemetry;
mod trace_budget;
mod worker;
mod writer;

pub use changes::{ChangeReport, Incremental};
pub use config::{
    IncrementalSettings, PaceMode, PacingSettings, RankerConfig, RunSettings, ScoringConfig, Weights, MAX_PAGE_ROWS,
};
pub use error::RankerError;
pub use explain::{explain, ExplainedComment, Explanation, LeftOut, LeftOutReason};
pub use options::{RunOptions, Scope};
pub use pace::PaceReport;
pub use report::{ProductFailure, ProgressSnapshot, RunProgress, RunReport};
pub use run::{read_pass, run};
pub use shard::{InvalidShard, KeyRange, RangeEstimate, Shard, MAX_SHARDS};
