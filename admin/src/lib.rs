//! `admin`: operating the review tables. Its one job is what an operator does
//! to the tables rather than to the reviews in them: create or drop the schema,
//! load seeded demo and benchmark data, and check or repair the comment
//! indexes, through the `reviews-admin` binary.
//!
//! - [`demo`] generates a reproducible shop and writes it through the write
//!   path (`common::store`), so every row is one the service could have written.
//! - [`commands`] holds a module per subcommand of `reviews-admin` (its flags,
//!   the call, what it prints); the binary only parses and dispatches.
//! - The schema (`common::schema`) and the index check
//!   (`common::store::IndexCheckOptions`) stay in `common`: they are
//!   repository operations that know the table and row-key layout, which lives
//!   only there; [`commands`] is their command line.

pub mod commands;
pub mod demo;
