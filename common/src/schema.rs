//! Creating the tables, bringing existing ones to the settings new ones get,
//! and (for tests) dropping them.
//!
//! The tables whose keys start with a random id (`comment`, `user-comment`,
//! `product-comment`, `product-comment-rank`) can be created pre-split into
//! [`Regions`] of equal shares of the ids ([`keys::region_split_keys`]), so
//! a large load or a sharded ranking spreads over the region servers from
//! the start instead of waiting for HBase to split hot regions.
//!
//! Every family is created with a row index in each data block (HBase's
//! `ROW_INDEX_V1` encoding). Every read of these tables starts with a seek
//! to one row: a multi-get of comments is a seek per comment, an index page
//! a seek to its first row. Without an index HBase finds a row in its 64-KiB
//! block by reading the block's cells from the start, about 160 of them in a
//! block of comments; with one it does a binary search, and that walk is a
//! large part of a region server's CPU in a ranking run. Tables created
//! before keep their layout until [`upgrade_tables`] gives them the index.
//!
//! The tables a product page reads ([`read_tables`]) can be created with
//! [`RegionReplication`]: each of their regions then has secondary replicas
//! on other region servers, which serve timeline-consistent reads while the
//! primary's server is down (`docs/what-it-survives.md` measures it).
//!
//! Only the Thrift2 gateway can set (or read) a family's block encoding,
//! split keys and region replication, so every table is created through it.

use crate::error::{Error, Result};
use crate::hbase::{FamilyEncodings, Hbase, Retry, FAMILY, ROW_INDEX_NAME};
use crate::keys::{self, MAX_SPLIT_REGIONS};
use crate::tables::Tables;

/// How many regions each table keyed by a random id is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regions(u32);

impl Regions {
    /// One region per table: HBase's default, and what `schema create` did before `--regions`.
    pub const ONE: Regions = Regions(1);

    /// `count` regions, refused unless it lies in `1..=1000`.
    pub fn new(count: u32) -> Result<Regions> {
        if (1..=MAX_SPLIT_REGIONS).contains(&count) {
            Ok(Regions(count))
        } else {
            Err(Error::InvalidInput(format!(
                "a table can be pre-split into 1 to {MAX_SPLIT_REGIONS} regions, not {count}"
            )))
        }
    }

    /// The number of regions.
    pub fn count(self) -> u32 {
        self.0
    }
}

/// How many replicas each region of the [`read_tables`] has: 1 is the
/// primary alone, 2 adds one secondary replica on another region server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionReplication(u32);

impl RegionReplication {
    /// The most replicas a region may be given: each needs a region server
    /// of its own to be of use, and every write is shipped to each.
    pub const MAX: u32 = 5;
    /// The primary alone: HBase's default.
    pub const PRIMARY_ONLY: RegionReplication = RegionReplication(1);

    /// `count` replicas, refused unless it lies in `1..=MAX`.
    pub fn new(count: u32) -> Result<RegionReplication> {
        if (1..=Self::MAX).contains(&count) {
            Ok(RegionReplication(count))
        } else {
            Err(Error::InvalidInput(format!(
                "a region can have 1 to {} replicas (1: the primary alone), not {count}",
                Self::MAX
            )))
        }
    }

    /// The number of replicas, the primary included.
    pub fn count(self) -> u32 {
        self.0
    }
}

/// What [`create_tables`] did to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOutcome {
    /// The table's full name.
    pub name: String,
    /// `true` if this call created it, `false` if it already existed.
    pub created: bool,
    /// How many regions the table has now (an existing table keeps its own).
    pub regions: usize,
    /// How many replicas each of its regions has (an existing table keeps its own).
    pub region_replication: u32,
    /// Each column family with its data-block encoding (`ROW_INDEX_V1` for a
    /// table created here; an existing table's may differ until
    /// [`upgrade_tables`]).
    pub block_encodings: FamilyEncodings,
}

impl TableOutcome {
    /// Whether a family of the table has no row index in its data blocks
    /// (an existing table [`upgrade_tables`] has not reached yet).
    pub fn lacks_row_index(&self) -> bool {
        self.block_encodings.iter().any(|(_, encoding)| encoding != ROW_INDEX_NAME)
    }
}

/// The tables whose keys start with a random id, which [`create_tables`] pre-splits.
pub fn split_tables(tables: &Tables) -> [&str; 4] {
    [&tables.comment, &tables.user_comment, &tables.product_comment, &tables.product_comment_rank]
}

/// The tables a product page reads (users, comments and the three indexes
/// of them), which [`create_tables`] gives their [`RegionReplication`]. The
/// others are written and read by batch work, which waits for a region to
/// come back instead.
pub fn read_tables(tables: &Tables) -> [&str; 5] {
    [&tables.user, &tables.comment, &tables.user_comment, &tables.product_comment, &tables.product_comment_rank]
}

/// The most replicas any region of the [`read_tables`] has (1: none has a
/// secondary). Asks the master (the tables' descriptors).
pub async fn most_read_replicas(hbase: &Hbase, tables: &Tables) -> Result<u32> {
    let names: Vec<String> = read_tables(tables).iter().map(|name| (*name).to_owned()).collect();
    hbase
        .run_thrift2(Retry::Idempotent, move |connection| {
            names.iter().try_fold(1, |most, table| Ok(most.max(connection.region_replication(table)?)))
        })
        .await
}

/// Creates every missing table with family `cf` (one version, block cache on,
/// row bloom filter, a row index in each data block), the [`split_tables`]
/// split into `regions` regions, the [`read_tables`] in `replication`
/// replicas. Idempotent: existing tables are left as they are (whatever
/// their regions and settings), and losing a creation race to another
/// process counts as existing.
pub async fn create_tables(
    hbase: &Hbase,
    tables: &Tables,
    regions: Regions,
    replication: RegionReplication,
) -> Result<Vec<TableOutcome>> {
    let existing = table_names(hbase).await?;
    let mut outcomes = Vec::with_capacity(tables.all().len());
    for name in tables.all() {
        let created = if existing.iter().any(|table| table == name) {
            false
        } else {
            let split_keys = if split_tables(tables).contains(&name) {
                keys::region_split_keys(regions.count())
            } else {
                Vec::new()
            };
            let replicas = if read_tables(tables).contains(&name) { replication.count() } else { 1 };
            match hbase.create_table_with_splits(name, FAMILY, split_keys, replicas).await {
                Ok(()) => true,
                Err(Error::Conflict(_)) => false,
                Err(error) => return Err(error),
            }
        };
        let table = name.to_owned();
        let (block_encodings, region_replication) = hbase
            .run_thrift2(Retry::Idempotent, move |connection| {
                Ok((connection.family_encodings(&table)?, connection.region_replication(&table)?))
            })
            .await?;
        let table = name.to_owned();
        let regions = hbase.run(Retry::Idempotent, move |connection| connection.table_regions(&table)).await?.len();
        outcomes.push(TableOutcome { name: name.to_owned(), created, regions, region_replication, block_encodings });
    }
    Ok(outcomes)
}

/// What [`upgrade_tables`] did to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeOutcome {
    /// The table's full name.
    pub name: String,
    /// Whether the table exists (a missing one is left to `create_tables`).
    pub exists: bool,
    /// Each column family with its data-block encoding before the upgrade.
    pub encodings_before: FamilyEncodings,
    /// The families given a row index in each data block.
    pub families_changed: Vec<String>,
    /// The table's region replication before and after, when this call changed it.
    pub replication_changed: Option<(u32, u32)>,
}

/// Gives the existing tables of `tables` the settings [`create_tables`] gives
/// new ones, keeping everything else a family has: today, a row index in each
/// data block (see the module's docs). HBase applies the change to the blocks
/// it writes from then on, in flushes and compactions; the files written
/// before keep their layout until a compaction rewrites them, which an
/// operator can force with the HBase shell's `major_compact` (no Thrift
/// gateway can: HBase 2.6's Thrift1 `majorCompact` runs a minor compaction,
/// which leaves a region's single file alone, and Thrift2 has no such call).
/// With `replication`, the [`read_tables`] are given that many replicas
/// each; HBase changes it only on a disabled table, so each such table
/// refuses reads and writes for the seconds of its change. Idempotent: a
/// table that has the settings is left alone.
pub async fn upgrade_tables(
    hbase: &Hbase,
    tables: &Tables,
    replication: Option<RegionReplication>,
) -> Result<Vec<UpgradeOutcome>> {
    let existing = table_names(hbase).await?;
    let mut outcomes = Vec::with_capacity(tables.all().len());
    for name in tables.all() {
        if !existing.iter().any(|table| table == name) {
            outcomes.push(UpgradeOutcome {
                name: name.to_owned(),
                exists: false,
                encodings_before: Vec::new(),
                families_changed: Vec::new(),
                replication_changed: None,
            });
            continue;
        }
        let table = name.to_owned();
        let (encodings_before, families_changed) =
            hbase.run_thrift2(Retry::Idempotent, move |connection| connection.index_rows_in_blocks(&table)).await?;
        let replication_changed = match replication {
            Some(wanted) if read_tables(tables).contains(&name) => {
                let table = name.to_owned();
                // Once: a lost reply may hide a change made, and the retry
                // would then find it made and report nothing changed.
                let before = hbase
                    .run_thrift2(Retry::Once, move |connection| {
                        connection.set_region_replication(&table, wanted.count())
                    })
                    .await?;
                (before != wanted.count()).then_some((before, wanted.count()))
            }
            _ => None,
        };
        outcomes.push(UpgradeOutcome {
            name: name.to_owned(),
            exists: true,
            encodings_before,
            families_changed,
            replication_changed,
        });
    }
    Ok(outcomes)
}

/// The names of every table in HBase (any prefix), for an operator's report.
pub async fn table_names(hbase: &Hbase) -> Result<Vec<String>> {
    hbase.run(Retry::Idempotent, |connection| connection.table_names()).await
}

/// Drops every table of `tables` that exists. For tests, which each own a prefix.
pub async fn drop_tables(hbase: &Hbase, tables: &Tables) -> Result<()> {
    let names: Vec<String> = tables.all().iter().map(|name| (*name).to_owned()).collect();
    hbase
        .run(Retry::Idempotent, move |connection| {
            let existing = connection.table_names()?;
            for name in names.iter().filter(|name| existing.contains(name)) {
                connection.drop_table(name)?;
            }
            Ok(())
        })
        .await
}
