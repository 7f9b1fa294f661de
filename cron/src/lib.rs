//! `cron`: the nightly ranking daemon, `ranker-cron`. Its one job is to run the
//! ranker (in-process) on a schedule so that every night is ranked exactly
//! once, however many daemons are running.
//!
//! - [`schedule`] validates the cron expression and time zone and names the
//!   slot (scheduled time) each tick stands for.
//! - [`daemon`] turns ticks into runs: one at a time per daemon, one at a time
//!   across daemons through the HBase lease (`common::store::lease`), each
//!   attempt recorded in the run history (`common::store::runs`), failed runs
//!   retried per [`retry`], a shutdown finishing the products in flight.
//! - `ranker::lease` keeps the lease renewed during a slot and stops the run
//!   if it is lost, and `ranker::recorded` records each attempt: the ranker
//!   library holds both, since `ranker run` takes the same lease by hand.
//! - [`metrics`] is what Prometheus scrapes; [`config`] is the command line.
//!   (`ranker::console::format_runs_table` prints the history for `ranker runs`.)

pub mod config;
pub mod daemon;
pub mod metrics;
pub mod retry;
pub mod schedule;

pub use config::{ConfigError, CronArgs};
pub use daemon::{Daemon, DaemonError, DaemonSettings, IncrementalNights, SlotOutcome, StartMode};
pub use retry::RetryPolicy;
pub use schedule::{Schedule, ScheduleError};
