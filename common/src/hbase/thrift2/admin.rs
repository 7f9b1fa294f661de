//! Thrift2's `Admin`: creating tables split at given keys with a row index
//! in each data block, reading and changing their families' encodings, and
//! their region replication: what Thrift1 can neither set nor read.

use std::collections::BTreeMap;

use super::generated::{
    TBloomFilterType, TColumnFamilyDescriptor, TCompressionAlgorithm, TDataBlockEncoding, TTHBaseServiceSyncClient,
    TTableDescriptor, TTableName,
};
use super::{FamilyEncodings, Thrift2Connection};
use crate::error::Result;

impl Thrift2Connection {
    /// Whether `table` exists.
    pub fn table_exists(&mut self, table: &str) -> Result<bool> {
        self.call("thrift2_table_exists", table, |client| client.table_exists(table_name(table)))
    }

    /// Creates `table` with one column family `family` (one version, block
    /// cache on, row bloom filter, no compression, a row index in each data
    /// block), split into regions at `split_keys` (none: one region), each
    /// region in `region_replication` replicas (1: the primary alone).
    pub fn create_table(
        &mut self,
        table: &str,
        family: &str,
        split_keys: &[Vec<u8>],
        region_replication: u32,
    ) -> Result<()> {
        let family = TColumnFamilyDescriptor {
            name: family.as_bytes().to_vec(),
            attributes: None,
            configuration: None,
            block_size: None,
            bloomn_filter_type: Some(TBloomFilterType::ROW),
            compression_type: Some(TCompressionAlgorithm::NONE),
            dfs_replication: None,
            data_block_encoding: Some(ROW_INDEX),
            keep_deleted_cells: None,
            max_versions: Some(1),
            min_versions: None,
            scope: None,
            time_to_live: None,
            block_cache_enabled: Some(true),
            cache_blooms_on_write: None,
            cache_data_on_write: None,
            cache_indexes_on_write: None,
            compress_tags: None,
            evict_blocks_on_close: None,
            in_memory: Some(false),
        };
        // Left out when 1 (HBase's default), so a table created without
        // replicas is described exactly as before.
        let attributes = (region_replication > 1)
            .then(|| BTreeMap::from([(REGION_REPLICATION_KEY.to_vec(), region_replication.to_string().into_bytes())]));
        let descriptor = TTableDescriptor {
            table_name: table_name(table),
            columns: Some(vec![family]),
            attributes,
            durability: None,
        };
        self.call("thrift2_create_table", table, |client| client.create_table(descriptor, split_keys.to_vec()))
    }

    /// Each column family of `table`, with the name of its data-block encoding
    /// as HBase's shell prints it (`NONE`, `FAST_DIFF`, `ROW_INDEX_V1`, ...).
    pub fn family_encodings(&mut self, table: &str) -> Result<FamilyEncodings> {
        Ok(self.families(table)?.iter().map(family_encoding).collect())
    }

    /// Gives every column family of `table` that lacks it a row index in each
    /// data block. Returns each family with the name of its encoding before
    /// (as [`Thrift2Connection::family_encodings`] does), and the families it
    /// changed, from one read of the table's descriptor. Each family goes back
    /// with every other setting as HBase holds it (a TTL, compression or
    /// versions an operator set stay), since the gateway builds the family
    /// anew from what it is sent. Blocks written from then on (by flushes and
    /// compactions) carry the index; blocks already written keep their layout
    /// until a compaction rewrites them.
    pub fn index_rows_in_blocks(&mut self, table: &str) -> Result<(FamilyEncodings, Vec<String>)> {
        let (mut before, mut changed) = (Vec::new(), Vec::new());
        for mut family in self.families(table)? {
            let (name, encoding) = family_encoding(&family);
            before.push((name.clone(), encoding));
            if family.data_block_encoding == Some(ROW_INDEX) {
                continue;
            }
            family.data_block_encoding = Some(ROW_INDEX);
            self.modify_family(table, family, &[DATA_BLOCK_ENCODING_KEY])?;
            changed.push(name);
        }
        Ok((before, changed))
    }

    /// Makes `table`'s families look as a tool without these settings left
    /// them: no block encoding, and entries expiring after `time_to_live`
    /// seconds (a setting [`Thrift2Connection::index_rows_in_blocks`] must keep).
    #[cfg(feature = "test-support")]
    pub fn unindex_with_time_to_live(&mut self, table: &str, time_to_live: i32) -> Result<()> {
        for mut family in self.families(table)? {
            family.data_block_encoding = Some(TDataBlockEncoding::NONE);
            family.time_to_live = Some(time_to_live);
            self.modify_family(table, family, &[DATA_BLOCK_ENCODING_KEY, b"TTL"])?;
        }
        Ok(())
    }

    /// Sends `family` back to `table` as its new settings. `changed` names
    /// the raw values (keys of the family's `attributes`) of the typed fields
    /// the caller set: the family as read holds the old ones there too, and
    /// with both sent, whichever the gateway applies last would decide.
    fn modify_family(&mut self, table: &str, mut family: TColumnFamilyDescriptor, changed: &[&[u8]]) -> Result<()> {
        if let Some(values) = family.attributes.as_mut() {
            for key in changed {
                values.remove(*key);
            }
        }
        self.call("thrift2_modify_column_family", table, |client| {
            client.modify_column_family(table_name(table), family)
        })
    }

    /// How many replicas each region of `table` has (1: the primary alone).
    pub fn region_replication(&mut self, table: &str) -> Result<u32> {
        let descriptor =
            self.call("thrift2_get_table_descriptor", table, |client| client.get_table_descriptor(table_name(table)))?;
        Ok(replication_of(&descriptor))
    }

    /// Gives each region of `table` `replicas` replicas, keeping every other
    /// setting of the table (the gateway builds the descriptor anew from what
    /// it is sent, so the one HBase holds goes back with the count changed).
    /// HBase 2 changes the count only of a disabled table, so the table is
    /// disabled for the change and enabled again: for those seconds its reads
    /// and writes fail. Returns the count before; a table that has `replicas`
    /// already is left alone.
    pub fn set_region_replication(&mut self, table: &str, replicas: u32) -> Result<u32> {
        let mut descriptor =
            self.call("thrift2_get_table_descriptor", table, |client| client.get_table_descriptor(table_name(table)))?;
        let before = replication_of(&descriptor);
        if before == replicas {
            return Ok(before);
        }
        descriptor
            .attributes
            .get_or_insert_with(BTreeMap::new)
            .insert(REGION_REPLICATION_KEY.to_vec(), replicas.to_string().into_bytes());
        let enabled =
            self.call("thrift2_is_table_enabled", table, |client| client.is_table_enabled(table_name(table)))?;
        if enabled {
            self.call("thrift2_disable_table", table, |client| client.disable_table(table_name(table)))?;
        }
        let modified = self.call("thrift2_modify_table", table, |client| client.modify_table(descriptor));
        // Enabled again even when the change failed: a table left disabled
        // would refuse every read.
        if enabled {
            self.call("thrift2_enable_table", table, |client| client.enable_table(table_name(table)))?;
        }
        modified.map(|()| before)
    }

    /// The column families of `table` as HBase holds them.
    fn families(&mut self, table: &str) -> Result<Vec<TColumnFamilyDescriptor>> {
        let descriptor =
            self.call("thrift2_get_table_descriptor", table, |client| client.get_table_descriptor(table_name(table)))?;
        Ok(descriptor.columns.unwrap_or_default())
    }
}

/// The data-block encoding of every family this project creates: a row index
/// at the end of each data block, so that a get finds its row in a block by a
/// binary search instead of reading the block's cells from the start
/// (`common::schema` says what that was worth).
const ROW_INDEX: TDataBlockEncoding = TDataBlockEncoding::ROW_INDEX_V1;
/// [`ROW_INDEX`]'s name, as [`encoding_name`] gives it.
pub(crate) const ROW_INDEX_NAME: &str = "ROW_INDEX_V1";

/// The key under which a family's raw values hold its encoding.
const DATA_BLOCK_ENCODING_KEY: &[u8] = b"DATA_BLOCK_ENCODING";

/// The key under which a table's raw values hold its region replication.
const REGION_REPLICATION_KEY: &[u8] = b"REGION_REPLICATION";

/// A table's region replication as its descriptor holds it: 1 when unset
/// (HBase's default) or unreadable.
fn replication_of(descriptor: &TTableDescriptor) -> u32 {
    descriptor
        .attributes
        .as_ref()
        .and_then(|values| values.get(REGION_REPLICATION_KEY))
        .and_then(|value| std::str::from_utf8(value).ok()?.parse().ok())
        .unwrap_or(1)
}

fn table_name(table: &str) -> TTableName {
    TTableName { ns: None, qualifier: table.as_bytes().to_vec() }
}

/// A family's name and its encoding's name.
fn family_encoding(family: &TColumnFamilyDescriptor) -> (String, String) {
    (String::from_utf8_lossy(&family.name).into_owned(), encoding_name(family.data_block_encoding))
}

/// An encoding's name as HBase's shell prints it; unset is HBase's default, `NONE`.
fn encoding_name(encoding: Option<TDataBlockEncoding>) -> String {
    match encoding.unwrap_or(TDataBlockEncoding::NONE) {
        TDataBlockEncoding::NONE => "NONE".to_owned(),
        TDataBlockEncoding::PREFIX => "PREFIX".to_owned(),
        TDataBlockEncoding::DIFF => "DIFF".to_owned(),
        TDataBlockEncoding::FAST_DIFF => "FAST_DIFF".to_owned(),
        TDataBlockEncoding::ROW_INDEX_V1 => ROW_INDEX_NAME.to_owned(),
        TDataBlockEncoding(other) => format!("unknown encoding {other}"),
    }
}
