//! Why a run as a whole could not proceed.

/// Why a run (as a whole) could not proceed. A failing product is not one of
/// these: it is retried, then listed in the report's failures
/// ([`crate::RunReport::failures`]).
#[derive(Debug, thiserror::Error)]
pub enum RankerError {
    /// The configuration file is unreadable or holds a meaningless value.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The run options are inconsistent.
    #[error("invalid run options: {0}")]
    InvalidOptions(String),
    /// HBase failed an operation the whole run depends on.
    #[error(transparent)]
    Storage(#[from] common::Error),
    /// HBase failed while the lease was being taken.
    #[error("taking the lease {name:?}: {source}")]
    TakeLease {
        /// The lease's name.
        name: String,
        /// What HBase said.
        source: common::Error,
    },
    /// The run's shard plan could not be made, stored or read back.
    #[error("shard plan: {0}")]
    ShardPlan(String),
    /// Scoring on the rayon pool panicked; a bug, reported instead of aborting.
    #[error("scoring failed: {0}")]
    Scoring(String),
}
