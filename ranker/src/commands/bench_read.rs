//! `ranker bench-read`: what `run` reads, without scoring or writing.

use crate::recorded::ByHand;
use crate::{PaceMode, RunOptions};
use anyhow::{Context, Result};
use clap::Args;
use common::exit::ExitStatus;

use super::pass::{self, PassArgs};

#[derive(Debug, Args)]
pub struct BenchReadArgs {
    #[command(flatten)]
    pub pass: PassArgs,
}

impl BenchReadArgs {
    /// The pass's options: the raw baseline, unpaced unless `--pace` says otherwise.
    pub fn options(&self, config: &crate::RankerConfig, as_of_ms: i64) -> RunOptions {
        self.pass.options(config, as_of_ms, Some(PaceMode::Off))
    }
}

pub async fn execute(args: BenchReadArgs) -> Result<ExitStatus> {
    let config = args.pass.tuning.load_config().context("loading the configuration")?;
    let options = args.options(&config, super::now_ms());
    let store = args.pass.hbase.store().context("configuring HBase access")?;
    // A read pass uses the run's stored shard plan if there is one, else a fresh one it does not store.
    let prepare = async |options: &mut RunOptions| args.pass.scope.narrow_to_shard(&store, options, None, false).await;
    let by_hand = ByHand { lease: None, recorded_as: None, read_only: true };
    let ended = pass::run_pass(&store, &args.pass, options, by_hand, prepare).await?;
    Ok(ended.map_or(ExitStatus::TryLater, ExitStatus::from))
}
