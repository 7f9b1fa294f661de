//! What the daemon tells Prometheus, so an operator can alert when the nightly
//! ranking stops succeeding (`deploy/monitoring/rules/alerts.yml`,
//! `RankingDaemonNoRecentSuccess`).
//!
//! The last-success gauge is read from the run history in HBase (at start,
//! after every tick and every few minutes), so a standby daemon that never
//! runs reports the same time as the one that did.

use std::net::SocketAddr;
use std::time::Duration;

use common::store::runs::{RunKind, RunStatus};

/// Unix time (s) of the latest run that succeeded, from the shared history.
pub const LAST_SUCCESS: &str = "reviews_ranker_cron_last_success_timestamp_seconds";
/// How long this daemon's latest run attempt took.
pub const LAST_DURATION: &str = "reviews_ranker_cron_last_run_duration_seconds";
/// Run attempts of this daemon by outcome (`succeeded`, `failed`, `interrupted`, `lost`).
pub const RUNS: &str = "reviews_ranker_cron_runs_total";
/// Ticks by what came of them (`ran`, `overlap`, `lease_held`, `completed`, `error`).
pub const TICKS: &str = "reviews_ranker_cron_ticks_total";
/// 1 while this daemon is running the ranker.
pub const RUN_IN_PROGRESS: &str = "reviews_ranker_cron_run_in_progress";
/// Leases this daemon lost mid-run (it stopped the run each time).
pub const LEASES_LOST: &str = "reviews_ranker_cron_leases_lost_total";
/// Products this daemon's latest incremental run ranked (written since its watermark, with a deleted comment, or refreshed).
pub const LAST_PRODUCTS_CHANGED: &str = "reviews_ranker_cron_last_products_changed";
/// How long this daemon's latest incremental run took to find them.
pub const LAST_DETECTION: &str = "reviews_ranker_cron_last_change_detection_seconds";
/// Rank slots this daemon's latest incremental run checked for deleted comments
/// (0 unless it walked every slot: what changed is found by time alone).
pub const LAST_SLOTS_CHECKED: &str = "reviews_ranker_cron_last_slots_checked";

/// Serves `/metrics` on `address` and registers every metric's description.
pub fn install_exporter(address: SocketAddr) -> Result<(), metrics_exporter_prometheus::BuildError> {
    // The shared builder gives `reviews_hbase_call_seconds` the same buckets as in query-api.
    common::telemetry::prometheus_builder().with_http_listener(address).install()?;
    common::telemetry::describe_shared_metrics();
    metrics::describe_gauge!(LAST_SUCCESS, metrics::Unit::Seconds, "Unix time of the latest successful ranking run");
    metrics::describe_gauge!(LAST_DURATION, metrics::Unit::Seconds, "Duration of this daemon's latest run attempt");
    metrics::describe_counter!(RUNS, "Run attempts of this daemon, by outcome");
    metrics::describe_counter!(TICKS, "Schedule ticks, by what came of them");
    metrics::describe_gauge!(RUN_IN_PROGRESS, "1 while this daemon runs the ranker");
    metrics::describe_counter!(LEASES_LOST, "Leases lost mid-run");
    metrics::describe_gauge!(
        LAST_PRODUCTS_CHANGED,
        "Products the latest incremental run found to rank, by why (written, deleted_comment, refresh, total)"
    );
    metrics::describe_gauge!(
        LAST_DETECTION,
        metrics::Unit::Seconds,
        "Time the latest incremental run took to find the products to rank"
    );
    metrics::describe_gauge!(
        LAST_SLOTS_CHECKED,
        "Rank slots the latest incremental run checked for deleted comments (0 unless it walked every slot)"
    );
    // Set by the ranker library as it runs: products (reviews_ranker_products_total) and comments.
    ranker::telemetry::describe_metrics();
    ranker::telemetry::initialize_counters();
    // Every outcome's counter exists from the start at 0: Prometheus' increase()
    // cannot see a counter's first value, so a first failure would go unseen.
    for status in RunStatus::ENDED {
        for kind in [RunKind::Full, RunKind::Incremental] {
            metrics::counter!(RUNS, "outcome" => status.as_str(), "kind" => kind.as_str()).absolute(0);
        }
    }
    metrics::counter!(LEASES_LOST).absolute(0);
    Ok(())
}

/// Counts a finished run attempt, by outcome and kind (`full`, `incremental`).
pub(crate) fn attempt_finished(status: RunStatus, kind: RunKind, duration: Duration) {
    metrics::counter!(RUNS, "outcome" => status.as_str(), "kind" => kind.as_str()).increment(1);
    metrics::gauge!(LAST_DURATION).set(duration.as_secs_f64());
}

/// Counts a tick by what came of it.
pub(crate) fn tick(result: &'static str) {
    metrics::counter!(TICKS, "result" => result).increment(1);
}

/// Sets the last-success gauge from a run's end time.
pub(crate) fn last_success(ended_ms: i64) {
    // Milliseconds to fractional seconds: exact enough for an alert threshold in hours.
    metrics::gauge!(LAST_SUCCESS).set(ended_ms as f64 / 1_000.0);
}

/// Marks whether a run is going.
pub(crate) fn run_in_progress(running: bool) {
    metrics::gauge!(RUN_IN_PROGRESS).set(if running { 1.0 } else { 0.0 });
}

/// Counts a lease lost mid-run.
pub(crate) fn lease_lost() {
    metrics::counter!(LEASES_LOST).increment(1);
}

/// Sets what the latest incremental run found to rank, and how long finding it took.
pub(crate) fn changes_found(changes: &ranker::ChangeReport) {
    for (why, count) in [
        ("written", changes.products_written),
        ("deleted_comment", changes.products_with_deleted_comments),
        ("refresh", changes.products_refreshed),
        ("total", changes.products_to_rank),
    ] {
        metrics::gauge!(LAST_PRODUCTS_CHANGED, "why" => why).set(count as f64);
    }
    metrics::gauge!(LAST_DETECTION).set(changes.detection_ms as f64 / 1_000.0);
    metrics::gauge!(LAST_SLOTS_CHECKED).set(changes.slots_checked as f64);
}
