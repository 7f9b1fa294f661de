//! `ranker runs`: the run history, newest first.

use crate::console;
use anyhow::{Context, Result};
use clap::Args;
use common::config::HbaseArgs;
use common::exit::ExitStatus;

#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(flatten)]
    hbase: HbaseArgs,

    /// How many runs to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

pub async fn execute(args: RunsArgs) -> Result<ExitStatus> {
    let store = args.hbase.store().context("configuring HBase access")?;
    let runs = store.recent_runs(args.limit).await.context("reading the run history")?;
    print!("{}", console::format_runs_table(&runs));
    Ok(ExitStatus::Success)
}
