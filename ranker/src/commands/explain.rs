//! `ranker explain`: how one product's ranking comes about.

use crate::console;
use crate::history::parse_time;
use crate::RankerConfig;
use anyhow::{Context, Result};
use clap::Args;
use common::config::HbaseArgs;
use common::exit::ExitStatus;
use common::Id;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The product to explain.
    #[arg(long, value_name = "ID")]
    product: Id,

    /// The as-of time: RFC 3339, epoch milliseconds or today@HH:MM[:SS]OFFSET [default: now].
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    as_of: Option<i64>,

    /// Configuration file (TOML; see ranker.example.toml).
    #[arg(long, value_name = "PATH", env = "RANKER_CONFIG")]
    config: Option<std::path::PathBuf>,

    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    hbase: HbaseArgs,
}

pub async fn execute(args: ExplainArgs) -> Result<ExitStatus> {
    let config = RankerConfig::load_or_default(args.config.as_deref()).context("loading the configuration")?;
    let store = args.hbase.store().context("configuring HBase access")?;
    let as_of_ms = args.as_of.unwrap_or_else(super::now_ms);
    let explanation = crate::explain(&store, &args.product, as_of_ms, &config.scoring, config.run.page_rows)
        .await
        .with_context(|| format!("explaining product {}", args.product))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&explanation).context("encoding the explanation")?);
    } else {
        print!("{}", console::explanation(&explanation));
    }
    Ok(ExitStatus::Success)
}
