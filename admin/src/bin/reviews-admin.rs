//! `reviews-admin`: parses the command line and hands each subcommand to
//! its module in the `admin` library (`admin::commands`).

use std::process::ExitCode;

use admin::commands::index::{self, IndexArgs, IndexMode};
use admin::commands::load::{self, LoadArgs};
use admin::commands::schema::SchemaCommand;
use admin::demo::DemoError;
use clap::{Parser, Subcommand};
use common::exit::ExitStatus;

/// Operator commands for the product-review tables in HBase.
#[derive(Debug, Parser)]
#[command(name = "reviews-admin", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create or drop the tables.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Generate demo and benchmark data.
    #[command(subcommand)]
    Demo(DemoCommand),
    /// Find (and repair) comments that no index row points at.
    #[command(subcommand)]
    Index(IndexCommand),
}

#[derive(Debug, Subcommand)]
enum DemoCommand {
    /// Write a seeded, reproducible data set through the write path (creating missing tables first).
    Load(LoadArgs),
}

#[derive(Debug, Subcommand)]
enum IndexCommand {
    /// Report every comment missing from `user-comment` or `product-comment`;
    /// never writes. Exits 1 when any is missing.
    Check(IndexArgs),
    /// Write the missing index rows (with this project's tie suffix) and report them.
    Repair {
        #[command(flatten)]
        args: IndexArgs,
        /// Report what would be written, and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

fn main() -> ExitCode {
    common::shutdown::run_main("reviews-admin", run(Cli::parse()))
}

async fn run(cli: Cli) -> ExitStatus {
    let outcome = match cli.command {
        Command::Schema(command) => command.run().await,
        Command::Demo(DemoCommand::Load(args)) => load::load_demo(&args).await,
        Command::Index(IndexCommand::Check(args)) => index::check_indexes(&args, IndexMode::Check).await,
        Command::Index(IndexCommand::Repair { args, dry_run }) => {
            index::check_indexes(&args, if dry_run { IndexMode::DryRun } else { IndexMode::Repair }).await
        }
    };
    match outcome {
        Ok(()) => ExitStatus::Success,
        // Sizes or options that cannot work are usage errors, like a bad flag.
        Err(error) => common::exit::report_failure(&error, |cause| {
            matches!(cause.downcast_ref::<DemoError>(), Some(DemoError::InvalidSpec(_) | DemoError::InvalidOptions(_)))
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
