//! `reviews-admin index check|repair`: find the comments no index row points
//! at (`common::store::Store::check_indexes`), and write the missing rows.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use common::config::HbaseArgs;
use common::store::{IndexCheckOptions, MissingIndex};
use indicatif::{HumanCount, ProgressBar};

#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    hbase: HbaseArgs,
    /// Comment rows read per round trip (memory holds one page).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    page_rows: u64,
    /// Also print the report as JSON on the last line.
    #[arg(long)]
    json: bool,
}

/// What `index` does with the missing rows it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMode {
    /// Report them; exit 1 when any is missing.
    Check,
    /// Report what would be written.
    DryRun,
    /// Write them.
    Repair,
}

/// Walks every comment and reports (or writes) the index rows missing, with
/// progress on stderr; an error when checking finds any missing.
pub async fn check_indexes(args: &IndexArgs, mode: IndexMode) -> anyhow::Result<()> {
    let store = args.hbase.store()?;
    let options = IndexCheckOptions {
        page_rows: usize::try_from(args.page_rows).unwrap_or(usize::MAX),
        repair: mode == IndexMode::Repair,
    };
    // A long walk shows how far it is: a spinner on a terminal, a log line every
    // ten seconds otherwise (cron, CI, kubectl logs).
    let spinner = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut last_log = Instant::now();
    let report = store
        .check_indexes(options, |so_far| {
            let line = format!(
                "{} comments scanned, {} missing index rows, {} written",
                HumanCount(so_far.comments_scanned),
                HumanCount(so_far.missing()),
                HumanCount(so_far.index_rows_written)
            );
            match &spinner {
                Some(bar) => bar.set_message(line),
                None if last_log.elapsed() >= Duration::from_secs(10) => {
                    tracing::info!("{line}");
                    last_log = Instant::now();
                }
                None => {}
            }
        })
        .await
        .with_context(|| format!("checking the comment indexes of tables {:?}*", args.hbase.table_prefix))?;
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    println!("comments scanned:             {}", report.comments_scanned);
    println!("comments that do not decode:  {}", report.comments_skipped);
    println!("missing user-comment rows:    {}", report.missing_user_index);
    println!("missing product-comment rows: {}", report.missing_product_index);
    let written = match mode {
        IndexMode::Repair => format!("{} index rows written", report.index_rows_written),
        IndexMode::DryRun => format!("dry run: {} index rows would be written, none was", report.missing()),
        IndexMode::Check => "check: nothing written".to_owned(),
    };
    println!("{written}");
    for missing in &report.first_missing {
        let index = match missing.index {
            MissingIndex::UserComment => "user-comment",
            MissingIndex::ProductComment => "product-comment",
        };
        println!("  {} has no {index} row", missing.comment);
    }
    if report.missing() > report.first_missing.len() as u64 {
        println!("  ... and {} more", report.missing() - report.first_missing.len() as u64);
    }
    if args.json {
        println!("{}", serde_json::to_string(&report).context("rendering the report as JSON")?);
    }
    if mode == IndexMode::Check && report.missing() > 0 {
        bail!("{} index rows are missing; `reviews-admin index repair` writes them", report.missing());
    }
    Ok(())
}
