//! Creating (and, for tests, dropping) the tables.
//!
//! The tables whose keys start with a random id (`comment`, `user-comment`,
//! `product-comment`, `product-comment-rank`) can be created pre-split into
//! [`Regions`] of equal shares of the ids ([`keys::region_split_keys`]), so
//! a large load or a sharded ranking spreads over the region servers from
//! the start instead of waiting for HBase to split hot regions. HBase
//! creates pre-split tables only through the Thrift2 gateway; tables of one
//! region are created through Thrift1, as they always were.

use crate::error::{Error, Result};
use crate::hbase::{Hbase, Retry, FAMILY};
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

/// What [`create_tables`] did to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOutcome {
    /// The table's full name.
    pub name: String,
    /// `true` if this call created it, `false` if it already existed.
    pub created: bool,
    /// How many regions the table has now (an existing table keeps its own).
    pub regions: usize,
}

/// The tables whose keys start with a random id, which [`create_tables`] pre-splits.
pub fn split_tables(tables: &Tables) -> [&str; 4] {
    [&tables.comment, &tables.user_comment, &tables.product_comment, &tables.product_comment_rank]
}

/// Creates every missing table with family `cf` (one version, block cache on,
/// row bloom filter), the [`split_tables`] split into `regions` regions.
/// Idempotent: existing tables are left as they are (whatever their regions),
/// and losing a creation race to another process counts as existing.
pub async fn create_tables(hbase: &Hbase, tables: &Tables, regions: Regions) -> Result<Vec<TableOutcome>> {
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
            let creation = if split_keys.is_empty() {
                let table = name.to_owned();
                hbase.run(Retry::Idempotent, move |connection| connection.create_table(&table, FAMILY)).await
            } else {
                hbase.create_table_with_splits(name, FAMILY, split_keys).await
            };
            match creation {
                Ok(()) => true,
                Err(Error::Conflict(_)) => false,
                Err(error) => return Err(error),
            }
        };
        let table = name.to_owned();
        let regions = hbase.run(Retry::Idempotent, move |connection| connection.table_regions(&table)).await?.len();
        outcomes.push(TableOutcome { name: name.to_owned(), created, regions });
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
