//! What `ranker run` and `ranker bench-read` share: which products a pass
//! covers, how it is tuned, and how it runs with a progress line and ends
//! with a printed report.

use std::sync::Arc;

use crate::cli::TuningArgs;
use crate::console::{self, ProgressDisplay};
use crate::lease::RunStop;
use crate::recorded::{run_by_hand, ByHand, ByHandEnd};
use crate::{shard_plan, PaceMode, RankerConfig, RankerError, RunOptions, RunProgress, Scope, Shard};
use anyhow::{Context, Result};
use clap::Args;
use common::config::HbaseArgs;
use common::store::lease::SystemClock;
use common::store::runs::RunStatus;
use common::store::Store;
use common::Id;

#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// Rank only this product (a manual rerun).
    #[arg(long, value_name = "ID", conflicts_with = "shard")]
    pub product: Option<Id>,

    /// Rank only shard INDEX of COUNT (0 <= INDEX < COUNT, COUNT <= 1024),
    /// e.g. 3/8. The shards are contiguous key ranges cut along the regions of
    /// product-comment (inside a region at counted products where that
    /// balances better); the first shard of a run stores the plan in HBase and
    /// every other shard of the run uses it, so the COUNT shards of one run
    /// cover every product exactly once, including products added meanwhile.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub shard: Option<Shard>,

    /// The run whose shard plan to use or store [default: asof-<ms> with an
    /// explicit --as-of, else day-<UTC date>]. Give every shard of one run the
    /// same value.
    #[arg(long, value_name = "ID", env = "RANKER_SHARD_PLAN", requires = "shard")]
    pub plan_id: Option<String>,
}

impl ScopeArgs {
    /// Narrows `options` to the `--shard`'s key range in the run's plan,
    /// agreed through HBase (stored there when `may_store`); `explicit_as_of_ms`
    /// names the plan unless `--plan-id` does.
    pub async fn narrow_to_shard(
        &self,
        store: &Store,
        options: &mut RunOptions,
        explicit_as_of_ms: Option<i64>,
        may_store: bool,
    ) -> Result<(), RankerError> {
        let Some(shard) = self.shard else { return Ok(()) };
        let plan_id =
            self.plan_id.clone().unwrap_or_else(|| shard_plan::default_plan_id(explicit_as_of_ms, super::now_ms()));
        options.scope = shard_plan::shard_scope(store, shard, &plan_id, may_store).await?;
        Ok(())
    }

    /// The Pushgateway group of a run: `all`, or `shard-I-of-N`.
    pub fn push_group(&self) -> String {
        match self.shard {
            Some(shard) => format!("shard-{}-of-{}", shard.index, shard.count),
            None => "all".to_owned(),
        }
    }
}

#[derive(Debug, Args)]
pub struct PassArgs {
    #[command(flatten)]
    pub scope: ScopeArgs,

    /// Index rows read per round trip, and most comments per multi-get, 1 to
    /// 5000, paced or not [default: run.page_rows, 1000; when paced,
    /// pacing.page_rows, 250].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=crate::MAX_PAGE_ROWS as i64))]
    pub page_rows: Option<u16>,

    /// Attempts per product before it counts as failed [default: run.product_attempts, 3].
    #[arg(long, value_name = "N")]
    pub attempts: Option<u32>,

    /// Print the final report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub tuning: TuningArgs,

    #[command(flatten)]
    pub hbase: HbaseArgs,
}

impl PassArgs {
    /// The options of this pass under `config`, as of `as_of_ms`
    /// (`default_pace`: see [`TuningArgs::options`]).
    pub fn options(&self, config: &RankerConfig, as_of_ms: i64, default_pace: Option<PaceMode>) -> RunOptions {
        let scope = match self.scope.product {
            Some(product) => Scope::Product(product),
            // A `--shard` pass gets its range once HBase has been asked for the plan.
            None => Scope::All,
        };
        let mut options = self.tuning.options(config, scope, as_of_ms, default_pace);
        // The flag sets the page of whichever mode the run uses; the file keeps
        // one size per mode, since a paced run's smaller pages hold a gateway
        // thread for less time (ranker/ranker.example.toml).
        if let Some(page_rows) = self.page_rows {
            options.page_rows = usize::from(page_rows);
            options.pacing.page_rows = usize::from(page_rows);
        }
        if let Some(attempts) = self.attempts {
            options.product_attempts = attempts;
        }
        options
    }
}

/// Runs a pass as `by_hand` says with a progress line, prints its report,
/// and returns how it ended: `None` when another run holds the lease (and
/// nothing ran). The first SIGINT or SIGTERM finishes the products in
/// flight; a second exits at once.
pub async fn run_pass(
    store: &Store,
    pass: &PassArgs,
    mut options: RunOptions,
    by_hand: ByHand,
    prepare: impl AsyncFnOnce(&mut RunOptions) -> Result<(), RankerError>,
) -> Result<Option<RunStatus>> {
    let read_only = by_hand.read_only;
    let lease_name = by_hand.lease.as_ref().map(|lease| lease.name.clone()).unwrap_or_default();
    let progress = Arc::new(RunProgress::default());
    options.progress = Some(progress.clone());
    let stop = RunStop::new();
    common::shutdown::stop_on_signals({
        let stop = stop.clone();
        move |_| {
            eprintln!("stopping: finishing the products in flight (signal again to quit at once)");
            stop.shut_down();
        }
    });
    let display = ProgressDisplay::start(progress, if read_only { "read" } else { "ranked" });
    let ended = run_by_hand(store, options, by_hand, Arc::new(SystemClock), prepare, &stop).await;
    display.finish().await;
    let (result, status) = match ended.context("the run could not proceed")? {
        ByHandEnd::LeaseBusy(state) => {
            eprintln!("ranker: {}", console::lease_busy(&lease_name, &state));
            return Ok(None);
        }
        ByHandEnd::Ran { result, status, lease_lost } => {
            match lease_lost {
                Some(reason) if status == RunStatus::Lost => eprintln!("ranker: the run stopped because {reason}"),
                // Lost as the run ended, or after a signal had stopped it: the
                // status says how the run went; the lease was not released.
                Some(reason) => eprintln!("ranker: the lease was lost before it could be released: {reason}"),
                None => {}
            }
            (*result, status)
        }
    };
    let report = result.context("the run could not proceed")?;
    if pass.json {
        println!("{}", serde_json::to_string_pretty(&report).context("encoding the report")?);
    } else {
        print!("{}", console::summary(&report, read_only));
    }
    Ok(Some(status))
}
