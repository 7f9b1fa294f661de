//! What a ranking run tells Prometheus: the metrics the run records as it
//! goes (products and comments), the outcome gauges of a finished run,
//! and the push of both to a Prometheus Pushgateway.
//!
//! `ranker-cron` serves these from its own `/metrics`. A `ranker run` started
//! by a scheduler (a Kubernetes CronJob, a systemd timer) ends before any
//! scrape could find it, so with `--pushgateway` it pushes them instead: every
//! [`PUSH_INTERVAL`] while it runs (progress), and once at the end (outcome).
//! A Pushgateway is what Prometheus recommends for the outcome of a
//! service-level batch job, and it keeps the last push of each shard until the
//! next one replaces it, so "no success for 26 hours" can be alerted on.

use std::time::Duration;

use common::store::runs::RunStatus;
use metrics_exporter_prometheus::{PrometheusHandle, PrometheusRecorder};

/// Counter: products a run finished, by `result` (`ranked`, `failed`).
pub const PRODUCTS: &str = "reviews_ranker_products_total";
/// Counter: comments a run scored.
pub const COMMENTS_SCORED: &str = "reviews_ranker_comments_scored_total";
/// Gauge, pushed by `ranker run`: Unix time (s) the latest successful run of this scope ended.
pub const RUN_LAST_SUCCESS: &str = "reviews_ranker_run_last_success_timestamp_seconds";
/// Gauge, pushed by `ranker run`: Unix time (s) the latest run of this scope ended, whatever its outcome.
pub const RUN_LAST_END: &str = "reviews_ranker_run_last_end_timestamp_seconds";
/// Gauge, pushed by `ranker run`: how long the latest run of this scope took.
pub const RUN_LAST_DURATION: &str = "reviews_ranker_run_last_duration_seconds";
/// Gauge, pushed by `ranker run`: 1 for the latest run's `outcome`, 0 for the others.
pub const RUN_LAST_OUTCOME: &str = "reviews_ranker_run_last_outcome";
/// Gauge, pushed by `ranker run`: 1 while the run of this scope goes, 0 once it ended.
pub const RUN_IN_PROGRESS: &str = "reviews_ranker_run_in_progress";

/// How often a running `ranker run --pushgateway` pushes its progress.
pub const PUSH_INTERVAL: Duration = Duration::from_secs(15);

/// The `job` label of every push: the group Prometheus keeps per scope.
pub const PUSH_JOB: &str = "reviews_ranker";

/// Registers the HELP text of the ranker's metrics with the installed recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(PRODUCTS, "Products a ranking run finished, by result: ranked or failed");
    metrics::describe_counter!(COMMENTS_SCORED, "Comments a ranking run scored");
}

/// Makes the run counters exist at 0 before anything counts. Prometheus'
/// `increase()` cannot see a counter's first value, so a product failing in a
/// counter created by that failure would go unseen by the alerts.
pub fn initialize_counters() {
    for result in ["ranked", "failed"] {
        metrics::counter!(PRODUCTS, "result" => result).absolute(0);
    }
    metrics::counter!(COMMENTS_SCORED).absolute(0);
}

/// Registers the HELP text of the outcome gauges a `ranker run` pushes.
fn describe_run_gauges() {
    metrics::describe_gauge!(RUN_LAST_SUCCESS, metrics::Unit::Seconds, "Unix time the latest successful run ended");
    metrics::describe_gauge!(
        RUN_LAST_END,
        metrics::Unit::Seconds,
        "Unix time the latest run ended, whatever its outcome"
    );
    metrics::describe_gauge!(RUN_LAST_DURATION, metrics::Unit::Seconds, "Duration of the latest run");
    metrics::describe_gauge!(
        RUN_LAST_OUTCOME,
        "1 for the latest run's outcome (succeeded, failed, interrupted, lost), 0 for the others"
    );
    metrics::describe_gauge!(RUN_IN_PROGRESS, "1 while the run goes, 0 once it ended");
}

/// Counts a finished product.
pub(crate) fn product_finished(failed: bool) {
    let result = if failed { "failed" } else { "ranked" };
    metrics::counter!(PRODUCTS, "result" => result).increment(1);
}

/// Counts scored comments.
pub(crate) fn comments_scored(count: u64) {
    metrics::counter!(COMMENTS_SCORED).increment(count);
}

/// Sets the gauges of a run that ended at `ended_unix_seconds` after `duration`.
/// The success time is set only on success: the Pushgateway (pushed with
/// POST) then keeps the previous success time through failed runs.
fn run_ended(outcome: RunStatus, ended_unix_seconds: f64, duration: Duration) {
    for each in RunStatus::ENDED {
        metrics::gauge!(RUN_LAST_OUTCOME, "outcome" => each.as_str()).set(if each == outcome { 1.0 } else { 0.0 });
    }
    metrics::gauge!(RUN_LAST_END).set(ended_unix_seconds);
    metrics::gauge!(RUN_LAST_DURATION).set(duration.as_secs_f64());
    metrics::gauge!(RUN_IN_PROGRESS).set(0.0);
    if outcome == RunStatus::Succeeded {
        metrics::gauge!(RUN_LAST_SUCCESS).set(ended_unix_seconds);
    }
}

/// A push failed; the run's outcome does not depend on it.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The Pushgateway could not be reached or did not answer.
    #[error("pushing to {url}: {source}")]
    Unreachable {
        /// The group's URL.
        url: String,
        /// What went wrong.
        source: reqwest::Error,
    },
    /// The Pushgateway answered, but refused the push.
    #[error("the Pushgateway at {url} answered {status}: {body}")]
    Refused {
        /// The group's URL.
        url: String,
        /// Its status.
        status: reqwest::StatusCode,
        /// Its explanation.
        body: String,
    },
}

/// One run's group on a Pushgateway: `job="reviews_ranker"` and `scope`.
#[derive(Debug, Clone)]
pub struct Pushgateway {
    client: reqwest::Client,
    group_url: String,
}

impl Pushgateway {
    /// The group `scope` (letters, digits and `-` only, so it needs no
    /// escaping in the path) on the Pushgateway at `base_url`.
    pub fn new(base_url: &str, scope: &str) -> Pushgateway {
        debug_assert!(scope.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-'), "{scope}");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let group_url = format!("{}/metrics/job/{PUSH_JOB}/scope/{scope}", base_url.trim_end_matches('/'));
        Pushgateway { client, group_url }
    }

    /// Pushes `exposition` (Prometheus text format) with POST, which replaces
    /// the group's metrics of the same names and keeps the others.
    pub async fn push(&self, exposition: String) -> Result<(), PushError> {
        let url = &self.group_url;
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "text/plain; version=0.0.4")
            .body(exposition)
            .send()
            .await
            .map_err(|source| PushError::Unreachable { url: url.clone(), source })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        Err(PushError::Refused { url: url.clone(), status, body: body.trim().to_owned() })
    }
}

/// A run's metrics on their way to a Pushgateway: the process's recorder, a
/// task pushing them every [`PUSH_INTERVAL`], and the last push at the end.
#[derive(Debug)]
pub struct RunPush {
    gateway: Pushgateway,
    handle: PrometheusHandle,
    periodic: tokio::task::JoinHandle<()>,
}

impl RunPush {
    /// Installs the process's metrics recorder and starts the periodic pushes
    /// to group `scope` at `url`, the first at once: the counters start at 0
    /// in the Pushgateway, so the alerts' `increase()` sees this run's first
    /// failed product.
    pub fn start(url: &str, scope: &str) -> Result<RunPush, metrics::SetRecorderError<PrometheusRecorder>> {
        let recorder = common::telemetry::prometheus_builder().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder)?;
        common::telemetry::describe_shared_metrics();
        describe_metrics();
        describe_run_gauges();
        initialize_counters();
        metrics::gauge!(RUN_IN_PROGRESS).set(1.0);
        let gateway = Pushgateway::new(url, scope);
        let periodic = tokio::spawn({
            let (gateway, handle) = (gateway.clone(), handle.clone());
            async move {
                let mut ticks = tokio::time::interval(PUSH_INTERVAL);
                loop {
                    ticks.tick().await;
                    if let Err(error) = gateway.push(handle.render()).await {
                        tracing::warn!(%error, "pushing the run's progress failed; the next push tries again");
                    }
                }
            }
        });
        Ok(RunPush { gateway, handle, periodic })
    }

    /// Sets the outcome gauges of a run that ended as `outcome` after
    /// `duration`, and pushes them; `None` pushes nothing more (the run never
    /// started: another run of this scope holds the lease and pushes its own
    /// outcome). A failed push is logged: the run's outcome does not depend on it.
    pub async fn finish(self, outcome: Option<RunStatus>, duration: Duration) {
        self.periodic.abort();
        let Some(outcome) = outcome else { return };
        let now_seconds = chrono::Utc::now().timestamp_millis() as f64 / 1_000.0;
        run_ended(outcome, now_seconds, duration);
        match self.gateway.push(self.handle.render()).await {
            Ok(()) => tracing::info!(outcome = outcome.as_str(), "pushed the run's metrics"),
            Err(error) => tracing::error!(%error, "pushing the run's outcome failed; alerts see the previous one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_url_names_the_job_and_the_scope_once_whatever_the_base_ends_with() {
        for base in ["http://pushgateway:9091", "http://pushgateway:9091/"] {
            let gateway = Pushgateway::new(base, "shard-3-of-8");
            assert_eq!(gateway.group_url, "http://pushgateway:9091/metrics/job/reviews_ranker/scope/shard-3-of-8");
        }
    }

    #[test]
    fn outcomes_are_named_as_the_alerts_expect() {
        let names: Vec<&str> = RunStatus::ENDED.into_iter().map(RunStatus::as_str).collect();
        assert_eq!(names, ["succeeded", "failed", "interrupted", "lost"]);
    }
}
