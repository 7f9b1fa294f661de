//! The HTTP load core both load generators share: the client, the closed-loop
//! connection loop (a fixed number of connections, each sending its next
//! request when the last one answered), latency recording in an HDR histogram
//! and the percentile summary printed and written from it.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// The slowest latency tracked, in microseconds (one minute); slower requests
/// are recorded as one minute.
const MAX_TRACKED_MICROS: u64 = 60_000_000;
/// A safety cap on the requests of one closed loop, whatever its duration.
const MAX_REQUESTS_PER_LOOP: u64 = 50_000_000;
/// How long one request may take before the client gives up on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP client that keeps up to `connections` idle connections to one
/// service, so a loop of that many connections never reconnects; its
/// connections leave from `local_address` when given (the service tells
/// clients apart by address: two load generators on one machine bind
/// different loopback addresses, 127.0.0.1 and 127.0.0.2, to count as two).
pub fn http_client(connections: usize, local_address: Option<std::net::IpAddr>) -> anyhow::Result<reqwest::Client> {
    http_client_with(connections, local_address, reqwest::header::HeaderMap::new())
}

/// [`http_client`], sending `headers` with every request.
pub fn http_client_with(
    connections: usize,
    local_address: Option<std::net::IpAddr>,
    headers: reqwest::header::HeaderMap,
) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(connections)
        .local_address(local_address)
        .default_headers(headers)
        .build()
        .context("building the HTTP client")
}

/// Latencies of many requests, in microseconds, three significant digits.
#[derive(Debug, Clone)]
pub struct Latency {
    micros: Histogram<u64>,
}

/// The percentiles of a [`Latency`], in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// The median.
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p999: f64,
    /// The slowest request.
    pub max: f64,
}

impl Latency {
    /// An empty record.
    pub fn new() -> anyhow::Result<Latency> {
        let micros = Histogram::new_with_bounds(1, MAX_TRACKED_MICROS, 3).context("histogram bounds")?;
        Ok(Latency { micros })
    }

    /// Records one request's latency, clamped into the tracked range.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).clamp(1, MAX_TRACKED_MICROS);
        self.micros.saturating_record(micros);
    }

    /// Adds every latency of `other`.
    pub fn merge(&mut self, other: &Latency) -> anyhow::Result<()> {
        self.micros.add(&other.micros).context("merging latency histograms")
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.micros.len()
    }

    /// The latency at `quantile` (0 to 1), in milliseconds.
    pub fn millis_at(&self, quantile: f64) -> f64 {
        self.micros.value_at_quantile(quantile) as f64 / 1_000.0
    }

    /// The usual percentiles and the maximum, in milliseconds.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            p50: self.millis_at(0.50),
            p90: self.millis_at(0.90),
            p99: self.millis_at(0.99),
            p999: self.millis_at(0.999),
            max: self.micros.max() as f64 / 1_000.0,
        }
    }
}

/// What a closed loop measured: successful requests (whose latencies are
/// recorded) and failed ones (which are only counted).
#[derive(Debug)]
pub struct ClosedLoopOutcome {
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Wall time of the loop.
    pub elapsed: Duration,
    /// Latencies of the requests that succeeded.
    pub latency: Latency,
}

impl ClosedLoopOutcome {
    /// Successful requests per second.
    pub fn throughput(&self) -> f64 {
        self.succeeded as f64 / self.elapsed.as_secs_f64()
    }
}

/// Runs `connections` concurrent loops for `duration`, each sending one
/// request at a time: `request` is given the loop's own random stream (seeded
/// from `seed` and the loop's number, so a run is reproducible) and returns
/// the request to await, which answers whether it succeeded.
pub async fn closed_loop<Request, Answer>(
    connections: usize,
    duration: Duration,
    seed: u64,
    request: Request,
) -> anyhow::Result<ClosedLoopOutcome>
where
    Request: Fn(&mut StdRng) -> Answer + Clone + Send + 'static,
    Answer: Future<Output = bool> + Send,
{
    let started = Instant::now();
    let deadline = started + duration;
    let per_loop_cap = MAX_REQUESTS_PER_LOOP / connections.max(1) as u64;
    let mut loops = Vec::with_capacity(connections);
    for connection in 0..connections {
        let request = request.clone();
        let mut random = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(connection as u64));
        loops.push(tokio::spawn(async move {
            let mut latency = Latency::new()?;
            let (mut succeeded, mut failed) = (0_u64, 0_u64);
            while Instant::now() < deadline && succeeded + failed < per_loop_cap {
                let answer = request(&mut random);
                let began = Instant::now();
                if answer.await {
                    succeeded += 1;
                    latency.record(began.elapsed());
                } else {
                    failed += 1;
                }
            }
            Ok::<_, anyhow::Error>((latency, succeeded, failed))
        }));
    }
    let mut outcome = ClosedLoopOutcome { succeeded: 0, failed: 0, elapsed: Duration::ZERO, latency: Latency::new()? };
    for one_loop in loops {
        let (latency, succeeded, failed) = one_loop.await.context("a connection loop failed")??;
        outcome.latency.merge(&latency)?;
        outcome.succeeded += succeeded;
        outcome.failed += failed;
    }
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_are_clamped_into_the_tracked_range_and_summarised_in_milliseconds() {
        let mut latency = Latency::new().expect("histogram");
        latency.record(Duration::ZERO);
        latency.record(Duration::from_millis(10));
        latency.record(Duration::from_secs(3_600));
        assert_eq!(latency.count(), 3);
        let summary = latency.summary();
        assert!((summary.p50 - 10.0).abs() < 0.01, "{summary:?}");
        assert!((summary.max - 60_000.0).abs() < 60.0, "an hour is recorded as the one-minute ceiling: {summary:?}");
        assert!(latency.millis_at(0.0) <= 0.001, "zero is recorded as one microsecond");
    }

    #[test]
    fn merging_adds_every_latency() {
        let mut first = Latency::new().expect("histogram");
        let mut second = Latency::new().expect("histogram");
        first.record(Duration::from_millis(1));
        second.record(Duration::from_millis(5));
        second.record(Duration::from_millis(5));
        first.merge(&second).expect("merge");
        assert_eq!(first.count(), 3);
        assert!((first.summary().p50 - 5.0).abs() < 0.01);
    }

    #[tokio::test]
    async fn a_closed_loop_counts_successes_and_failures_and_records_only_successes() {
        let outcome = closed_loop(2, Duration::from_millis(50), 1, |random: &mut StdRng| {
            let succeeds = rand::Rng::random_bool(random, 0.5);
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                succeeds
            }
        })
        .await
        .expect("loop");
        assert!(outcome.succeeded > 0 && outcome.failed > 0, "{outcome:?}");
        assert_eq!(outcome.latency.count(), outcome.succeeded);
        assert!(outcome.elapsed >= Duration::from_millis(50));
        assert!(outcome.latency.summary().p50 >= 1.0, "each request slept a millisecond");
    }
}
