//! Command-line and environment settings every binary shares: where HBase is,
//! which tables to use, and how patient to be.

use std::time::Duration;

use crate::error::Result;
use crate::hbase::{GatewayList, Hbase, HbaseConfig};
use crate::store::Store;
use crate::tables::Tables;

/// How to reach HBase; flatten into a binary's clap arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct HbaseArgs {
    /// Addresses (host:port, comma-separated) of HBase's Thrift1 gateways.
    /// The connections are spread over them; one that dies is taken out
    /// and its reads go to another at once.
    #[arg(long, env = "REVIEWS_THRIFT_ADDR", default_value = "127.0.0.1:9090")]
    pub thrift_addr: GatewayList,

    /// Addresses (host:port, comma-separated) of HBase's Thrift2 gateways,
    /// for what Thrift1 cannot do (time-range scans, timeline reads,
    /// pre-split tables). Connected to only when such an operation runs.
    #[arg(long, env = "REVIEWS_THRIFT2_ADDR", default_value = "127.0.0.1:9091")]
    pub thrift2_addr: GatewayList,

    /// Prefix in front of every table name (empty: the seed's names).
    #[arg(long, env = "REVIEWS_TABLE_PREFIX", default_value = "")]
    pub table_prefix: String,

    /// Most Thrift connections (and HBase calls in flight) at once.
    #[arg(long, env = "REVIEWS_POOL_SIZE", default_value_t = 16)]
    pub pool_size: u32,

    /// Deadline of one HBase operation, retries included, in milliseconds.
    #[arg(long, env = "REVIEWS_HBASE_TIMEOUT_MS", default_value_t = 30_000)]
    pub hbase_timeout_ms: u64,

    /// Retries of an HBase operation after a transient failure.
    #[arg(long, env = "REVIEWS_HBASE_RETRIES", default_value_t = 3)]
    pub hbase_retries: u32,
}

impl HbaseArgs {
    /// The pool configuration these arguments describe.
    pub fn hbase_config(&self) -> HbaseConfig {
        let operation_timeout = Duration::from_millis(self.hbase_timeout_ms.max(1));
        HbaseConfig {
            thrift1_gateways: self.thrift_addr.clone(),
            thrift2_gateways: self.thrift2_addr.clone(),
            pool_size: self.pool_size.max(1),
            // A socket may not block longer than the whole operation may take.
            io_timeout: operation_timeout.min(HbaseConfig::default().io_timeout),
            connect_timeout: operation_timeout.min(HbaseConfig::default().connect_timeout),
            operation_timeout,
            retries: self.hbase_retries,
            ..HbaseConfig::default()
        }
    }

    /// The tables these arguments name.
    pub fn tables(&self) -> Result<Tables> {
        Tables::with_prefix(&self.table_prefix)
    }

    /// A store over these tables, with a fresh pool.
    pub fn store(&self) -> Result<Store> {
        Ok(Store::new(Hbase::new(self.hbase_config()), self.tables()?))
    }
}
