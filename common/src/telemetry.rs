//! The metrics every binary shares: their names (all in the `reviews_`
//! namespace), their HELP text, and the Prometheus exporter's settings, so
//! `reviews_hbase_call_seconds` is a histogram with the same buckets in every
//! process that exports it.

use metrics_exporter_prometheus::PrometheusBuilder;

/// Latency of one Thrift call, by operation (`op`): a histogram.
pub const HBASE_CALL_SECONDS: &str = "reviews_hbase_call_seconds";
/// Thrift calls that failed, by operation and kind (`unavailable`, `not_found`, `failed`).
pub const HBASE_CALL_ERRORS: &str = "reviews_hbase_call_errors_total";
/// Thrift connections that could not be opened.
pub const HBASE_CONNECT_ERRORS: &str = "reviews_hbase_connect_errors_total";
/// Gateways taken out of a pool at a sign of their death, by kind (`Thrift1`, `Thrift2`).
pub const HBASE_GATEWAYS_TAKEN_OUT: &str = "reviews_hbase_gateways_taken_out_total";
/// Gateways of a pool live now, by kind: a gauge.
pub const HBASE_GATEWAYS_LIVE: &str = "reviews_hbase_gateways_live";
/// Retries after a transient HBase failure.
pub const HBASE_RETRIES: &str = "reviews_hbase_retries_total";
/// Timeline reads answered (in part) by a secondary region replica.
pub const HBASE_REPLICA_READS: &str = "reviews_hbase_replica_reads_total";
/// Rows skipped because they do not decode, by table (without prefix) and reason.
pub const SKIPPED_ROWS: &str = "reviews_skipped_rows_total";
/// Operations refused at once because HBase was saturated, by reason (`queue_full`, `queue_timeout`).
pub const HBASE_OVERLOADED: &str = "reviews_hbase_overloaded_total";
/// Time an operation waited for a free HBase connection, when it had to,
/// by whether it was sheltered, its queue bound lifted (`queue_bound`:
/// `lifted`, `held`; `hbase::with_shelter`): a histogram.
pub const HBASE_POOL_WAIT_SECONDS: &str = "reviews_hbase_pool_wait_seconds";
/// Operations not started (or not retried) because their caller's deadline had passed.
pub const HBASE_ABANDONED: &str = "reviews_hbase_abandoned_total";
/// Records whose JSON held a lone UTF-16 surrogate escape and was read with U+FFFD in its place, by kind.
pub const LOSSY_JSON_ROWS: &str = "reviews_lossy_json_rows_total";

/// Histogram buckets in seconds, for request and HBase call latency alike:
/// from sub-millisecond cache hits to a request deadline of seconds and past it.
pub const LATENCY_BUCKETS_SECONDS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0];

/// A Prometheus exporter builder with the shared latency buckets, so every
/// histogram renders as buckets (aggregatable across processes), not as a summary.
pub fn prometheus_builder() -> PrometheusBuilder {
    match PrometheusBuilder::new().set_buckets(LATENCY_BUCKETS_SECONDS) {
        Ok(builder) => builder,
        Err(error) => {
            // Only an empty bucket list is refused; the constant is not empty.
            tracing::warn!(%error, "latency buckets refused; histograms render as summaries");
            PrometheusBuilder::new()
        }
    }
}

/// Registers the HELP text of the shared metrics with the installed recorder,
/// and makes the counters without open-ended labels exist at 0 (Prometheus'
/// `increase()` cannot see a counter's first value, so an alert would miss
/// the first connect error of a process). Call it once the recorder is installed.
pub fn describe_shared_metrics() {
    for counter in [HBASE_CONNECT_ERRORS, HBASE_RETRIES, HBASE_ABANDONED, HBASE_REPLICA_READS] {
        metrics::counter!(counter).absolute(0);
    }
    for reason in ["queue_full", "queue_timeout"] {
        metrics::counter!(HBASE_OVERLOADED, "reason" => reason).absolute(0);
    }
    for gateway in ["Thrift1", "Thrift2"] {
        metrics::counter!(HBASE_GATEWAYS_TAKEN_OUT, "gateway" => gateway).absolute(0);
    }
    metrics::describe_histogram!(
        HBASE_CALL_SECONDS,
        metrics::Unit::Seconds,
        "Latency of one HBase Thrift call, by operation"
    );
    metrics::describe_counter!(HBASE_CALL_ERRORS, "HBase Thrift calls that failed, by operation and kind");
    metrics::describe_counter!(
        HBASE_CONNECT_ERRORS,
        "Thrift connections to the HBase gateway that could not be opened"
    );
    metrics::describe_counter!(HBASE_RETRIES, "Retries after a transient HBase failure");
    metrics::describe_counter!(
        HBASE_GATEWAYS_TAKEN_OUT,
        "Thrift gateways taken out of a pool at a sign of their death (refused, reset or closed connection), by kind"
    );
    metrics::describe_gauge!(
        HBASE_GATEWAYS_LIVE,
        "Thrift gateways of a pool live now (not taken out, or answering their probe again), by kind"
    );
    metrics::describe_counter!(
        HBASE_REPLICA_READS,
        "Timeline-consistent HBase reads answered, in part or whole, by a secondary region replica (its primary was slow or down)"
    );
    metrics::describe_counter!(
        HBASE_OVERLOADED,
        "HBase operations refused at once because too many waited or the wait ran out, by reason"
    );
    metrics::describe_histogram!(
        HBASE_POOL_WAIT_SECONDS,
        metrics::Unit::Seconds,
        "Time an HBase operation waited for a free connection, when none was free, by whether its queue bound was lifted (a client within its fair share while the service sheds)"
    );
    metrics::describe_counter!(
        HBASE_ABANDONED,
        "HBase operations not started or not retried because their caller's deadline had passed"
    );
    metrics::describe_counter!(
        LOSSY_JSON_ROWS,
        "Records read with a lone UTF-16 surrogate replaced by U+FFFD (Java-written JSON), by kind"
    );
    metrics::describe_counter!(
        SKIPPED_ROWS,
        "Rows skipped because they do not decode, by table (without prefix) and reason"
    );
}
