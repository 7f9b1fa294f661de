//! The `ranker` command's subcommands, a file each: each takes its flags,
//! turns them into this library's options, runs, and prints what came of it.
//! `run` and `bench-read` share `pass`.

pub mod bench_read;
pub mod explain;
mod pass;
pub mod run;
pub mod runs;
pub mod shards;

/// Now, in milliseconds since the epoch: the default as-of time.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
