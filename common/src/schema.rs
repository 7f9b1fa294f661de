//! Creating (and, for tests, dropping) the tables.

use crate::error::{Error, Result};
use crate::hbase::{Hbase, Retry, FAMILY};
use crate::tables::Tables;

/// What [`create_tables`] did to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOutcome {
    /// The table's full name.
    pub name: String,
    /// `true` if this call created it, `false` if it already existed.
    pub created: bool,
}

/// Creates every missing table with family `cf` (one version, block cache on,
/// row bloom filter). Idempotent: existing tables are left alone, and losing a
/// creation race to another process counts as existing.
pub async fn create_tables(hbase: &Hbase, tables: &Tables) -> Result<Vec<TableOutcome>> {
    let names: Vec<String> = tables.all().iter().map(|name| (*name).to_owned()).collect();
    hbase
        .run(Retry::Idempotent, move |connection| {
            let existing = connection.table_names()?;
            let mut outcomes = Vec::with_capacity(names.len());
            for name in &names {
                let created = if existing.contains(name) {
                    false
                } else {
                    match connection.create_table(name, FAMILY) {
                        Ok(()) => true,
                        Err(Error::Conflict(_)) => false,
                        Err(error) => return Err(error),
                    }
                };
                outcomes.push(TableOutcome { name: name.clone(), created });
            }
            Ok(outcomes)
        })
        .await
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
