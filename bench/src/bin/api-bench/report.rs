//! What a run prints and writes: each scenario's figures, the ratios the
//! targets are stated in, `summary.csv` and `latency.csv`.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use bench::load::ClosedLoopOutcome;

use crate::scenario::{Encoding, Scenario};

/// What one scenario measured.
pub struct Outcome {
    pub scenario: Scenario,
    pub encoding: Encoding,
    pub measured: ClosedLoopOutcome,
}

impl Outcome {
    /// The scenario's name, with `+browser` when it ran with a browser's headers.
    fn label(&self) -> String {
        format!("{}{}", self.scenario.name(), self.encoding.suffix())
    }
}

pub fn print_outcome(outcome: &Outcome) {
    let latency = outcome.measured.latency.summary();
    println!(
        "{:<16} {:>9} ok {:>6} err {:>10.0} req/s   p50 {:>7.2} ms   p99 {:>7.2} ms   p99.9 {:>7.2} ms   max {:>8.2} ms",
        outcome.label(),
        outcome.measured.succeeded,
        outcome.measured.failed,
        outcome.measured.throughput(),
        latency.p50,
        latency.p99,
        latency.p999,
        latency.max,
    );
}

/// The mean of `figure` over the runs of `scenario` in `encoding` (a run
/// may repeat a scenario, `--encodings identity,browser,browser,identity`,
/// so drift falls on both alike).
fn mean_of(
    outcomes: &[Outcome],
    scenario: Scenario,
    encoding: Encoding,
    figure: impl Fn(&Outcome) -> f64,
) -> Option<f64> {
    let runs: Vec<f64> = outcomes
        .iter()
        .filter(|outcome| outcome.scenario == scenario && outcome.encoding == encoding)
        .map(figure)
        .collect();
    (!runs.is_empty()).then(|| runs.iter().sum::<f64>() / runs.len() as f64)
}

fn throughput_of(outcomes: &[Outcome], scenario: Scenario) -> Option<f64> {
    mean_of(outcomes, scenario, Encoding::Identity, |outcome| outcome.measured.throughput())
}

fn p99_of(outcomes: &[Outcome], scenario: Scenario) -> Option<f64> {
    mean_of(outcomes, scenario, Encoding::Identity, |outcome| outcome.measured.latency.summary().p99)
}

/// Each scenario's throughput with a browser's headers over without, and the
/// cached reads' over the anchor's.
fn print_encoding_ratios(outcomes: &[Outcome]) {
    let mut scenarios: Vec<Scenario> = Vec::new();
    for outcome in outcomes.iter().filter(|outcome| outcome.encoding == Encoding::Browser) {
        if !scenarios.contains(&outcome.scenario) {
            scenarios.push(outcome.scenario);
        }
    }
    for scenario in scenarios.into_iter().filter(|scenario| *scenario != Scenario::Anchor) {
        let browser = mean_of(outcomes, scenario, Encoding::Browser, |outcome| outcome.measured.throughput());
        if let (Some(browser), Some(identity)) = (browser, throughput_of(outcomes, scenario)) {
            let target = if scenario.uses_cache() { 0.8 } else { 0.9 };
            println!(
                "{}+browser / {} throughput: {:.2} (target >= {target})",
                scenario.name(),
                scenario.name(),
                browser / identity
            );
        }
    }
    if let Some(anchor) = throughput_of(outcomes, Scenario::Anchor) {
        for cached in [Scenario::RankedCached, Scenario::SummaryCached, Scenario::ReviewsHtmlCached] {
            if let Some(rps) = throughput_of(outcomes, cached) {
                println!(
                    "{} / anchor throughput: {:.2} (target >= 0.8 for ranked-cached)",
                    cached.name(),
                    rps / anchor
                );
            }
        }
    }
}

pub fn print_ratios(outcomes: &[Outcome]) {
    print_encoding_ratios(outcomes);
    for (filtered, target) in
        [(Scenario::HotRarest, Scenario::HotLatest), (Scenario::HotRatingAsc, Scenario::HotLatest)]
    {
        if let (Some(p99), Some(base_p99), Some(rps), Some(base_rps)) = (
            p99_of(outcomes, filtered),
            p99_of(outcomes, target),
            throughput_of(outcomes, filtered),
            throughput_of(outcomes, target),
        ) {
            println!(
                "{} / {}: p99 {:.2}x (target <= 2), throughput {:.2}x (target >= 0.5)",
                filtered.name(),
                target.name(),
                p99 / base_p99,
                rps / base_rps
            );
        }
    }
    if let (Some(absent), Some(page)) = (p99_of(outcomes, Scenario::AbsentStar), p99_of(outcomes, Scenario::Http)) {
        println!("absent-star / http p99: {:.2}x (target <= 1)", absent / page);
    }
    if let (Some(batch), Some(single)) =
        (p99_of(outcomes, Scenario::Summaries48), p99_of(outcomes, Scenario::SummaryUncached))
    {
        println!("summaries-48 / summary-uncached p99: {:.2}x (target <= 2)", batch / single);
    }
    if let (Some(http), Some(raw)) = (throughput_of(outcomes, Scenario::Http), throughput_of(outcomes, Scenario::Raw)) {
        println!("http / raw throughput: {:.2} (target >= 0.80)", http / raw);
    }
    if let (Some(cached), Some(uncached)) =
        (throughput_of(outcomes, Scenario::RankedCached), throughput_of(outcomes, Scenario::RankedUncached))
    {
        println!("ranked cached / uncached throughput: {:.1}x (target >= 10x)", cached / uncached);
    }
    if let (Some(html), Some(json)) =
        (throughput_of(outcomes, Scenario::ReviewsHtmlCached), throughput_of(outcomes, Scenario::RankedCached))
    {
        println!("reviews-html-cached / ranked-cached throughput: {:.2} (target >= 0.5)", html / json);
    }
    for (summary, ranked) in
        [(Scenario::SummaryUncached, Scenario::RankedUncached), (Scenario::SummaryCached, Scenario::RankedCached)]
    {
        if let (Some(summary_rps), Some(ranked_rps)) =
            (throughput_of(outcomes, summary), throughput_of(outcomes, ranked))
        {
            println!("{} / {} throughput: {:.2}", summary.name(), ranked.name(), summary_rps / ranked_rps);
        }
    }
}

pub fn write_summary(path: &Path, outcomes: &[Outcome], connections: usize) -> anyhow::Result<()> {
    let mut file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(file, "scenario,connections,seconds,requests,errors,throughput_rps,p50_ms,p90_ms,p99_ms,p999_ms,max_ms")?;
    for outcome in outcomes {
        let latency = outcome.measured.latency.summary();
        writeln!(
            file,
            "{},{},{:.3},{},{},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3}",
            outcome.label(),
            connections,
            outcome.measured.elapsed.as_secs_f64(),
            outcome.measured.succeeded,
            outcome.measured.failed,
            outcome.measured.throughput(),
            latency.p50,
            latency.p90,
            latency.p99,
            latency.p999,
            latency.max,
        )?;
    }
    Ok(())
}

/// Each scenario's latency at percentiles from 0 to 99.999, for a percentile plot.
pub fn write_latency_curves(path: &Path, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let mut file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(file, "scenario,percentile,latency_ms")?;
    // Denser towards the tail, where the interesting differences are.
    let mut percentiles: Vec<f64> = (0..90).map(f64::from).collect();
    percentiles.extend((0..90).map(|step| 90.0 + f64::from(step) * 0.1));
    percentiles.extend((0..90).map(|step| 99.0 + f64::from(step) * 0.01));
    percentiles.extend((0..10).map(|step| 99.9 + f64::from(step) * 0.01));
    percentiles.extend([99.995, 99.999]);
    for outcome in outcomes {
        for percentile in &percentiles {
            writeln!(
                file,
                "{},{percentile:.3},{:.3}",
                outcome.label(),
                outcome.measured.latency.millis_at(percentile / 100.0)
            )?;
        }
    }
    Ok(())
}
