//! The HBase storage layer: the only module that speaks Thrift.
//!
//! [`Hbase`] owns a bounded pool of [`Connection`]s to the Thrift1 gateway and
//! runs operations on them with retries for transient failures. The Thrift
//! client is synchronous, so [`Hbase::run`] moves each whole operation (checkout,
//! every round trip, return) onto tokio's blocking pool behind a semaphore sized
//! to the pool, and bounds it with a deadline so a dead gateway costs callers a
//! timeout, never a hang. Synchronous callers use [`Hbase::blocking`].

mod connection;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use connection::{Column, Connection, ConnectionManager, Row, RowMutation, ScanSpec};

use crate::error::{Error, Result};

/// The column family of every table.
pub const FAMILY: &str = "cf";
/// The column holding each row's value (a record's JSON, or an index row's comment key).
pub const COLUMN_VALUE: &[u8] = b"cf:q";
/// The column holding a rank slot's score (8-byte big-endian f64).
pub const COLUMN_SCORE: &[u8] = b"cf:s";

/// How to reach HBase and how patient to be with it.
#[derive(Debug, Clone)]
pub struct HbaseConfig {
    /// `host:port` of the Thrift1 gateway.
    pub address: String,
    /// Most connections open at once (and most operations in flight).
    pub pool_size: u32,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Timeout of one socket read or write.
    pub io_timeout: Duration,
    /// Deadline of one whole operation, retries included.
    pub operation_timeout: Duration,
    /// Retries after a transient failure.
    pub retries: u32,
    /// First backoff between retries; doubles each time.
    pub retry_backoff: Duration,
}

impl Default for HbaseConfig {
    fn default() -> Self {
        HbaseConfig {
            address: "127.0.0.1:9090".to_owned(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(1),
            io_timeout: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(60),
            retries: 3,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

/// Whether an operation may run again after a failure whose effect is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Reads, puts of fixed values, deletes: running twice equals running once.
    Idempotent,
    /// Increments and compare-and-set: a lost reply may hide a success.
    Once,
}

/// A handle on the HBase pool; cheap to clone and share.
#[derive(Clone)]
pub struct Hbase {
    inner: Arc<Inner>,
}

struct Inner {
    pool: r2d2::Pool<ConnectionManager>,
    permits: Arc<tokio::sync::Semaphore>,
    config: HbaseConfig,
}

impl std::fmt::Debug for Hbase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hbase").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// r2d2 logs connection failures through this; we count them and leave the
/// reporting to the operation that failed, which knows the context.
#[derive(Debug)]
struct CountErrors;

impl r2d2::HandleError<Error> for CountErrors {
    fn handle_error(&self, error: Error) {
        metrics::counter!(crate::telemetry::HBASE_CONNECT_ERRORS).increment(1);
        tracing::debug!(%error, "opening a Thrift connection failed");
    }
}

impl Hbase {
    /// Builds the pool. Connections open lazily, so this succeeds while HBase is
    /// down and the first operation reports it.
    pub fn new(config: HbaseConfig) -> Hbase {
        let manager = ConnectionManager {
            address: config.address.clone(),
            connect_timeout: config.connect_timeout,
            io_timeout: config.io_timeout,
        };
        let pool = r2d2::Pool::builder()
            .max_size(config.pool_size.max(1))
            .min_idle(Some(0))
            // Idle connections are retired before the gateway's 60 s idle close
            // would break them under us.
            .idle_timeout(Some(Duration::from_secs(45)))
            .test_on_check_out(true)
            .connection_timeout(config.operation_timeout)
            .error_handler(Box::new(CountErrors))
            .build_unchecked(manager);
        let permits = Arc::new(tokio::sync::Semaphore::new(config.pool_size.max(1) as usize));
        Hbase { inner: Arc::new(Inner { pool, permits, config }) }
    }

    /// The configuration the pool was built with.
    pub fn config(&self) -> &HbaseConfig {
        &self.inner.config
    }

    /// Runs `operation` on a pooled connection on the current thread, retrying
    /// transient failures (for [`Retry::Idempotent`] operations) until the
    /// operation deadline.
    pub fn blocking<T>(&self, retry: Retry, mut operation: impl FnMut(&mut Connection) -> Result<T>) -> Result<T> {
        let config = &self.inner.config;
        let deadline = Instant::now() + config.operation_timeout;
        let mut backoff = config.retry_backoff;
        let mut attempt = 0;
        loop {
            let outcome = self.checkout(deadline).and_then(|mut connection| operation(&mut connection));
            match outcome {
                Err(error) if error.is_transient() && retry == Retry::Idempotent && attempt < config.retries => {
                    let now = Instant::now();
                    if now + backoff >= deadline {
                        return Err(error);
                    }
                    attempt += 1;
                    metrics::counter!(crate::telemetry::HBASE_RETRIES).increment(1);
                    tracing::debug!(%error, attempt, "retrying a transient HBase failure");
                    std::thread::sleep(backoff);
                    backoff = backoff.saturating_mul(2);
                }
                outcome => return outcome,
            }
        }
    }

    fn checkout(&self, deadline: Instant) -> Result<r2d2::PooledConnection<ConnectionManager>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.inner
            .pool
            .get_timeout(wait)
            .map_err(|error| Error::Unavailable(format!("no HBase connection within {wait:?}: {error}")))
    }

    /// Runs `operation` off the async runtime, bounded by the pool's size and by
    /// the operation deadline. When the deadline passes the caller gets
    /// [`Error::Unavailable`] at once; the blocking work, bounded by socket
    /// timeouts, finishes in the background and its connection is dropped if broken.
    pub async fn run<T, F>(&self, retry: Retry, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Connection) -> Result<T> + Send + 'static,
    {
        let timeout = self.inner.config.operation_timeout;
        let hbase = self.clone();
        let work = async move {
            let permit = hbase.inner.permits.clone().acquire_owned().await;
            let permit = permit.map_err(|_| Error::Unavailable("the HBase pool is shut down".to_owned()))?;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                hbase.blocking(retry, operation)
            })
            .await
            .map_err(|error| Error::Hbase(format!("HBase task failed: {error}")))?
        };
        tokio::time::timeout(timeout, work)
            .await
            .unwrap_or_else(|_| Err(Error::Unavailable(format!("no answer from HBase within {timeout:?}"))))
    }

    /// Whether HBase answers: lists tables (which reaches the master) once, without retries.
    pub async fn check_ready(&self) -> Result<()> {
        self.run(Retry::Once, |connection| connection.table_names().map(drop)).await
    }
}
