//! `reviews-admin schema create|upgrade|drop`: the tables, through
//! `common::schema`, and what became of each.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use common::config::HbaseArgs;
use common::hbase::Hbase;
use common::schema::{self, RegionReplication, Regions};

#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Create every missing table (family `cf`); tables that exist are left alone.
    Create {
        #[command(flatten)]
        hbase: HbaseArgs,
        #[command(flatten)]
        regions: RegionsArg,
        /// Give each region of the tables a product page reads (`user`,
        /// `comment`, `user-comment`, `product-comment`,
        /// `product-comment-rank`) this many replicas, the primary included:
        /// 2 adds a secondary on another region server, which serves
        /// query-api's timeline reads while the primary's server is down.
        /// Needs a cluster with at least as many region servers to be of use.
        /// Applies only to tables this command creates.
        #[arg(long, env = "REVIEWS_SCHEMA_REGION_REPLICATION", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(RegionReplication::MAX)))]
        region_replication: u32,
    },
    /// Give existing tables the settings `create` gives new ones (today: a
    /// row index in each data block, HBase's ROW_INDEX_V1), keeping every
    /// other setting of their families; tables that have them are left alone.
    Upgrade {
        #[command(flatten)]
        hbase: HbaseArgs,
        /// Also change the region replication of the tables a product page
        /// reads to this many replicas (as `create --region-replication`).
        /// HBase changes it only on a disabled table: each table changed
        /// refuses reads and writes for the few seconds of its change.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(RegionReplication::MAX)))]
        region_replication: Option<u32>,
    },
    /// Drop every table under a prefix (for test and benchmark prefixes).
    Drop {
        #[command(flatten)]
        hbase: HbaseArgs,
        /// Allow dropping the unprefixed tables, which hold production data.
        #[arg(long)]
        i_mean_the_production_tables: bool,
    },
}

/// How many regions the tables keyed by a random id are created with.
#[derive(Debug, Args)]
pub struct RegionsArg {
    /// Pre-split `comment`, `user-comment`, `product-comment` and
    /// `product-comment-rank` into this many regions, evenly over the id
    /// alphabet `[0-9A-Za-z]` (1 to 1000). Applies only to tables this
    /// command creates: existing tables keep their regions.
    #[arg(long = "regions", env = "REVIEWS_SCHEMA_REGIONS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(common::keys::MAX_SPLIT_REGIONS)))]
    count: u32,
}

impl RegionsArg {
    pub(crate) fn regions(&self) -> anyhow::Result<Regions> {
        Ok(Regions::new(self.count)?)
    }
}

impl SchemaCommand {
    /// Runs the command and prints what became of each table.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            SchemaCommand::Create { hbase, regions, region_replication } => {
                create_schema(&hbase, &regions, RegionReplication::new(region_replication)?).await
            }
            SchemaCommand::Upgrade { hbase, region_replication } => {
                upgrade_schema(&hbase, region_replication.map(RegionReplication::new).transpose()?).await
            }
            SchemaCommand::Drop { hbase, i_mean_the_production_tables } => {
                drop_schema(&hbase, i_mean_the_production_tables).await
            }
        }
    }
}

async fn create_schema(args: &HbaseArgs, regions: &RegionsArg, replication: RegionReplication) -> anyhow::Result<()> {
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let outcomes =
        schema::create_tables(&hbase, &tables, regions.regions()?, replication).await.with_context(|| {
            format!("creating tables through the Thrift gateways at {} and {}", args.thrift_addr, args.thrift2_addr)
        })?;
    for outcome in &outcomes {
        let what = if outcome.created { "created" } else { "already exists" };
        let plural = if outcome.regions == 1 { "" } else { "s" };
        let replicas = match outcome.region_replication {
            1 => String::new(),
            count => format!(", {count} replicas each"),
        };
        let encodings = family_list(&outcome.block_encodings);
        println!("{:<48} {what} ({} region{plural}{replicas}; {encodings})", outcome.name, outcome.regions);
    }
    let created = outcomes.iter().filter(|outcome| outcome.created).count();
    println!("{created} created, {} already existed", outcomes.len() - created);
    let unindexed = outcomes.iter().filter(|outcome| outcome.lacks_row_index()).count();
    if unindexed > 0 {
        println!(
            "{unindexed} existing tables lack a row index in their data blocks, which makes every get slower; \
             `reviews-admin schema upgrade` adds it"
        );
    }
    Ok(())
}

async fn upgrade_schema(args: &HbaseArgs, replication: Option<RegionReplication>) -> anyhow::Result<()> {
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let outcomes = schema::upgrade_tables(&hbase, &tables, replication).await.with_context(|| {
        format!("upgrading tables through the Thrift gateways at {} and {}", args.thrift_addr, args.thrift2_addr)
    })?;
    for outcome in &outcomes {
        let mut what = if !outcome.exists {
            "does not exist (`reviews-admin schema create` creates it)".to_owned()
        } else if outcome.families_changed.is_empty() {
            format!("up to date ({})", family_list(&outcome.encodings_before))
        } else {
            format!(
                "row index added to {} (was {})",
                outcome.families_changed.join(", "),
                family_list(&outcome.encodings_before)
            )
        };
        if let Some((before, after)) = outcome.replication_changed {
            what.push_str(&format!("; region replication {before} -> {after}"));
        }
        println!("{:<48} {what}", outcome.name);
    }
    let upgraded: Vec<&str> = outcomes
        .iter()
        .filter(|outcome| !outcome.families_changed.is_empty() || outcome.replication_changed.is_some())
        .map(|outcome| outcome.name.as_str())
        .collect();
    println!("{} upgraded", upgraded.len());
    let reindexed = outcomes.iter().find(|outcome| !outcome.families_changed.is_empty());
    if let Some(first) = reindexed.map(|outcome| outcome.name.as_str()) {
        // No Thrift gateway can ask for a major compaction (schema::upgrade_tables says why).
        println!(
            "files written before keep their layout until HBase compacts them; to rewrite them now, \
             run `major_compact '<table>'` in the HBase shell for each table upgraded (e.g. '{first}'), \
             in a quiet hour: it rewrites the whole table"
        );
    }
    Ok(())
}

/// Families and their block encodings, as `cf ROW_INDEX_V1, other NONE`.
fn family_list(encodings: &[(String, String)]) -> String {
    let families: Vec<String> = encodings.iter().map(|(family, encoding)| format!("{family} {encoding}")).collect();
    families.join(", ")
}

async fn drop_schema(args: &HbaseArgs, production_confirmed: bool) -> anyhow::Result<()> {
    if args.table_prefix.is_empty() && !production_confirmed {
        bail!(
            "refusing to drop the unprefixed tables, which hold production data: pass --table-prefix for test or \
             benchmark tables, or --i-mean-the-production-tables if you really mean it"
        );
    }
    let hbase = Hbase::new(args.hbase_config());
    let tables = args.tables()?;
    let existing = schema::table_names(&hbase)
        .await
        .with_context(|| format!("listing tables through the Thrift gateway at {}", args.thrift_addr))?;
    schema::drop_tables(&hbase, &tables).await.with_context(|| format!("dropping tables {}*", args.table_prefix))?;
    let mut dropped = 0;
    for name in tables.all() {
        let was_there = existing.iter().any(|table| table == name);
        dropped += usize::from(was_there);
        println!("{name:<48} {}", if was_there { "dropped" } else { "did not exist" });
    }
    println!("{dropped} dropped");
    Ok(())
}
