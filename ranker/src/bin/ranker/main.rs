//! The `ranker` command: parses the command line and hands each subcommand
//! to its module in the `ranker` library (`ranker::commands`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use common::exit::ExitStatus;
use ranker::commands::{bench_read, explain, run, runs, shards};
use ranker::RankerError;
use tracing::Instrument as _;

/// Picks each product's ten best reviews and writes them to product-comment-rank.
///
/// Scores follow docs/contract.md §6 (substance, Wilson helpfulness, recency,
/// photos); see ranker.example.toml for every parameter. The same data and
/// the same --as-of always give the same slots.
#[derive(Debug, Parser)]
#[command(name = "ranker", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Rank every product (or one, or one shard) and write the slots.
    ///
    /// A full or shard run takes the nightly lease that `ranker-cron` takes, so
    /// it never interleaves with the nightly run; `--product` reruns do not.
    ///
    /// Exits 0 when every product was ranked, 1 when any failed (after its
    /// retries) or the lease was taken over, 2 for a usage error, 75 when
    /// another run holds the lease (try later), 130 when stopped by
    /// SIGINT/SIGTERM (products in flight are finished first).
    Run(run::RunArgs),
    /// Show how one product's ranking comes about (writes nothing).
    ///
    /// Prints every term of each pick's score, and the notable comments left
    /// out: too short, duplicate content, or a second comment by a picked user.
    Explain(explain::ExplainArgs),
    /// Read what `run` reads, without scoring or writing (benchmark baseline).
    ///
    /// Lists the same products and reads the same index rows and comments,
    /// through the same pool at the same concurrency, and reports comments/s.
    /// `run`'s comments/s divided by this is the ranking overhead ratio.
    /// Unpaced unless `--pace on` says otherwise, whatever the configuration
    /// file's pacing.mode.
    BenchRead(bench_read::BenchReadArgs),
    /// List recent runs (the nightly daemon's and recorded manual ones), newest first.
    ///
    /// Reads the run history in the `ranker-run` table: each attempt's as-of
    /// time, start and end, outcome and counts.
    Runs(runs::RunsArgs),
    /// Show how `run --shard i/COUNT` cuts the products into COUNT shards.
    ///
    /// Prints each shard's key range and its estimated share of products and
    /// of comments. With --plan-id, the plan stored for that run if there is
    /// one; otherwise a plan computed now from product-comment's regions and a
    /// keys-only count of its rows (stored nowhere).
    Shards(shards::ShardsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::shutdown::run_main("ranker", command(cli))
}

async fn command(cli: Cli) -> ExitStatus {
    // When its trace is kept, the whole command is one trace: its lease,
    // its run record and its pass over the products.
    let span = common::traces::root_span(None, || {
        let name = match &cli.command {
            Command::Run(_) => "run",
            Command::Explain(_) => "explain",
            Command::BenchRead(_) => "bench-read",
            Command::Runs(_) => "runs",
            Command::Shards(_) => "shards",
        };
        tracing::info_span!("command", otel.name = %format_args!("ranker {name}"))
    });
    let outcome = async {
        match cli.command {
            Command::Run(args) => run::execute(args).await,
            Command::Explain(args) => explain::execute(args).await,
            Command::BenchRead(args) => bench_read::execute(args).await,
            Command::Runs(args) => runs::execute(args).await,
            Command::Shards(args) => shards::execute(args).await,
        }
    }
    .instrument(span)
    .await;
    match outcome {
        Ok(status) => status,
        // A configuration that does not validate is a usage error, like a bad flag.
        Err(error) => common::exit::report_failure(&error, |cause| {
            matches!(
                cause.downcast_ref::<RankerError>(),
                Some(RankerError::InvalidConfig(_) | RankerError::InvalidOptions(_))
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
