//! The one error type of the data layer, shaped so callers can tell apart the
//! cases they must treat differently: the caller's mistake, HBase being away,
//! a missing record, and data in a table that does not decode.

use crate::cursor::CursorError;
use crate::ids::InvalidId;

/// A result of the data layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `common`. Clone, so that one failed call
/// can be reported to every caller it served (the ranker's shared multi-gets).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// An id failed validation; nothing was sent to HBase.
    #[error(transparent)]
    InvalidId(#[from] InvalidId),
    /// A cursor was malformed or outside the requested list.
    #[error(transparent)]
    InvalidCursor(#[from] CursorError),
    /// Some other input was refused before any I/O.
    #[error("{0}")]
    InvalidInput(String),
    /// A record the operation depends on does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The operation conflicts with what is stored (an order of another user,
    /// a comment that already exists).
    #[error("{0}")]
    Conflict(String),
    /// HBase or its Thrift gateway could not be reached in time. Transient: retry later.
    #[error("HBase is unavailable: {0}")]
    Unavailable(String),
    /// The caller's own deadline ([`crate::hbase::with_deadline`]) passed
    /// before HBase answered: the caller ran out of time. Transient.
    #[error("no HBase answer before the caller's deadline: {0}")]
    DeadlineExceeded(String),
    /// Every connection to HBase was busy and the operation was refused
    /// instead of queueing (its wait for a pool slot was bounded, see
    /// [`crate::hbase::HbaseConfig::queue_timeout`]). Transient: retry later.
    #[error("HBase is overloaded: {0}")]
    Overloaded(String),
    /// HBase answered, but refused or failed the request (a missing table, a server-side exception).
    #[error("HBase failed the request: {0}")]
    Hbase(String),
    /// A stored row does not decode.
    #[error("bad data in table {table}: {reason}")]
    BadData {
        /// The table holding the row.
        table: String,
        /// What was wrong with it.
        reason: String,
    },
}

impl Error {
    /// Whether trying again later may succeed (HBase was unreachable, slow or busy).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::DeadlineExceeded(_) | Error::Overloaded(_))
    }

    /// Whether the caller's input, not the system, is at fault.
    pub fn is_client_error(&self) -> bool {
        matches!(self, Error::InvalidId(_) | Error::InvalidCursor(_) | Error::InvalidInput(_))
    }
}
