//! Page reads that ride through a region server's crash: HBase's
//! timeline-consistent reads of region replicas, and how a caller learns
//! that part of what it read came from a secondary replica.
//!
//! A table created with region replicas (`schema::RegionReplication`) keeps
//! each region open on two or more region servers: the primary, which takes
//! every write, and secondaries, which follow its edits about a second
//! behind. A strong read (HBase's default, and the only read Thrift1 can
//! ask for) goes to the primary alone, so while the primary's server is dead
//! (until its death is noticed and the region reopened elsewhere, some
//! seconds) every read of its regions waits or fails. A timeline read goes to
//! the primary first and, when the primary has not answered within HBase's
//! primary call timeout (which `hbasectl` sets for its gateways in
//! `hbase/conf/cluster-site.xml.in`), to the secondaries too, and takes the first
//! answer: a row so read is marked stale. Only the Thrift2 gateway can ask
//! for it, so with [`ReadConsistency::Timeline`] the page reads
//! ([`Hbase::read_rows`], [`Hbase::read_row`], [`Hbase::read_scan`], and
//! the Thrift2 scans of summaries and walks) go through Thrift2.
//!
//! The staleness travels out of band, like the request deadline: a caller
//! that wants to know wraps its work in [`noting_replica_reads`], and every
//! read inside it that was answered (partly) by a secondary sets the flag.

use std::cell::Cell;
use std::future::Future;

use futures_util::FutureExt as _;

use super::connection::{Column, Row, ScanSpec};
use super::{Hbase, Retry};
use crate::error::Result;

/// How page reads ask HBase for their rows (a service's
/// `--read-consistency strong|timeline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReadConsistency {
    /// From each region's primary alone, through the Thrift1 gateway:
    /// HBase's default, always current, and what a table without replicas
    /// can only give.
    #[default]
    Strong,
    /// HBase's timeline consistency, through the Thrift2 gateway: from the
    /// primary, or from a secondary replica when the primary does not answer
    /// in time. Such a row may lag the primary by about a second.
    Timeline,
}

tokio::task_local! {
    /// Whether a read of the caller's piece of work was answered by a
    /// secondary replica, set inside [`noting_replica_reads`].
    static READ_FROM_REPLICA: Cell<bool>;
}

/// Runs `work`, and says whether any HBase read in it was answered (in part)
/// by a secondary region replica, or served something that had been
/// ([`note_replica_read`]).
///
/// Not an `async fn`: it would hold `work` twice (its argument, and inside
/// the scope it awaits). The flag is read as `work` completes, in the scope.
pub fn noting_replica_reads<F: Future>(work: F) -> impl Future<Output = (F::Output, bool)> {
    READ_FROM_REPLICA.scope(Cell::new(false), work.map(|output| (output, READ_FROM_REPLICA.with(Cell::get))))
}

/// Marks the current piece of work as having served something read from a
/// secondary replica; outside [`noting_replica_reads`] it does nothing. The
/// reads here call it themselves; a cache that hands out an answer read from
/// a replica earlier calls it too.
pub fn note_replica_read() {
    // Outside a scope there is no one to tell; that is not an error.
    let _ = READ_FROM_REPLICA.try_with(|flag| flag.set(true));
}

/// Notes a read's answer, when a secondary replica gave it, and hands the rows on.
pub(super) fn noted<T>((rows, from_replica): (T, bool)) -> T {
    if from_replica {
        metrics::counter!(crate::telemetry::HBASE_REPLICA_READS).increment(1);
        note_replica_read();
    }
    rows
}

impl Hbase {
    /// The consistency page reads ask for.
    pub fn read_consistency(&self) -> ReadConsistency {
        self.config().read_consistency
    }

    /// The rows of `keys` in `table` that exist, with the `columns` asked for,
    /// in one multi-get: a page read, with the pool's [`ReadConsistency`].
    pub(crate) async fn read_rows(&self, table: &str, keys: Vec<Vec<u8>>, columns: Vec<Column>) -> Result<Vec<Row>> {
        let table = table.to_owned();
        match self.read_consistency() {
            ReadConsistency::Strong => {
                self.run(Retry::Idempotent, move |connection| connection.get_rows(&table, &keys, &columns)).await
            }
            ReadConsistency::Timeline => self.read_rows_timeline(table, keys, columns).await.map(noted),
        }
    }

    /// The rows of `keys` in `table` that exist, in one timeline-consistent
    /// multi-get through Thrift2, and whether a secondary answered (not yet noted).
    async fn read_rows_timeline(
        &self,
        table: String,
        keys: Vec<Vec<u8>>,
        columns: Vec<Column>,
    ) -> Result<(Vec<Row>, bool)> {
        self.run_thrift2(Retry::Idempotent, move |connection| connection.get_rows_timeline(&table, &keys, &columns))
            .await
    }

    /// The row `key` of `table` with the `columns` asked for, read like
    /// [`Hbase::read_rows`]; `None` only when the row is known not to exist.
    /// A secondary replica's "no such row" may only mean that it is behind
    /// its primary (a secondary reopened after a crash has what was flushed
    /// until it catches up), and a 404 is taken as final by browsers, caches
    /// and crawlers: so the absence is asked of the primary, through Thrift1,
    /// and when the primary cannot answer in time the read fails unavailable
    /// rather than call a stored row absent.
    pub(crate) async fn read_row(&self, table: &str, key: Vec<u8>, columns: Vec<Column>) -> Result<Option<Row>> {
        if self.read_consistency() == ReadConsistency::Timeline {
            let answer = self.read_rows_timeline(table.to_owned(), vec![key.clone()], columns.clone()).await?;
            let (rows, from_replica) = &answer;
            if !rows.is_empty() || !from_replica {
                return Ok(noted(answer).into_iter().next());
            }
            tracing::debug!("a secondary replica has no such row; asking the primary");
        }
        let table = table.to_owned();
        let rows = self
            .run(Retry::Idempotent, move |connection| connection.get_rows(&table, std::slice::from_ref(&key), &columns))
            .await?;
        Ok(rows.into_iter().next())
    }

    /// The rows of `spec` in `table` (those passing `filter`, a filter in
    /// HBase's filter language, when given): a page read, with the pool's
    /// [`ReadConsistency`].
    pub(crate) async fn read_scan(&self, table: &str, spec: ScanSpec, filter: Option<String>) -> Result<Vec<Row>> {
        let table = table.to_owned();
        match self.read_consistency() {
            ReadConsistency::Strong => {
                self.run(Retry::Idempotent, move |connection| match &filter {
                    Some(filter) => connection.scan_with_filter(&table, &spec, filter),
                    None => connection.scan(&table, &spec),
                })
                .await
            }
            ReadConsistency::Timeline => self
                .run_thrift2(Retry::Idempotent, move |connection| {
                    connection.scan_timeline(&table, &spec, filter.as_deref())
                })
                .await
                .map(noted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_scope_reports_a_replica_read_noted_anywhere_inside_it_and_only_inside_it() {
        let ((), nothing) = noting_replica_reads(async {}).await;
        assert!(!nothing, "no read, no mark");
        let ((), marked) = noting_replica_reads(async {
            tokio::task::yield_now().await;
            note_replica_read();
        })
        .await;
        assert!(marked, "a read noted after an await is reported");
        // Outside any scope it is a no-op, not a panic.
        note_replica_read();
        let (rows, marked) = noting_replica_reads(async { noted((vec![1, 2], false)) }).await;
        assert_eq!((rows, marked), (vec![1, 2], false), "a primary's answer leaves the flag alone");
    }
}
