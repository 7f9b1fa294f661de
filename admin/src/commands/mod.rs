//! The `reviews-admin` subcommands, a file each: each takes its flags,
//! calls `common` or [`crate::demo`], and prints what came of it.

pub mod index;
pub mod load;
mod progress;
pub mod schema;
