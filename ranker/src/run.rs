//! A whole run: discover the products in scope, rank them concurrently with
//! retries, and report. Also the read-only pass the benchmark compares against.
//! Which products ([`crate::run_products`]) and one product's work
//! ([`crate::worker`]) are modules of their own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::store::Store;
use common::Id;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::pace::Pacer;
use crate::product::ProductOutcome;
use crate::run_products::{choose_products, Products};
use crate::trace_budget::ProductSpans;
use crate::worker::{Pass, Worker};
use crate::writer::SlotWriter;
use crate::{ProductFailure, RankerError, RunOptions, RunProgress, RunReport};

/// Ranks every product in `options.scope` and reports what it did.
///
/// Products are ranked `options.concurrency` at a time while discovery lists
/// the next ones, so HBase reads of some products overlap the scoring of
/// others. A product that fails is retried `options.product_attempts` times in
/// all (with doubling, jittered backoff: `common::retry`) and then listed in [`RunReport::failures`]; the
/// run goes on. When `stop` is cancelled the run takes no new product,
/// finishes the ones in flight (each ends with its old slots or its new ones,
/// never a mix) and returns a report with `interrupted: true`.
pub async fn run(store: &Store, options: &RunOptions, stop: CancellationToken) -> Result<RunReport, RankerError> {
    drive(store, options, stop, Pass::Rank).instrument(run_span(options, Pass::Rank)).await
}

/// The span of a run's pass over its products, with a child for each of its
/// first products ([`ProductSpans`]) and their HBase calls under those, and
/// the first calls of its listing and slot writer (`crate::trace_budget`):
/// made only under a kept trace (a command's or a scheduled attempt's root),
/// so the log lines of a run read the same either way.
fn run_span(options: &RunOptions, pass: Pass) -> tracing::Span {
    if !common::traces::in_kept_trace() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        "pass",
        otel.name = if pass == Pass::Rank { "ranking pass" } else { "read pass" },
        scope = ?options.scope,
        as_of_ms = options.as_of_ms,
        concurrency = options.concurrency,
        products_traced = tracing::field::Empty,
        products_untraced = tracing::field::Empty,
    )
}

/// Reads exactly what [`run`] reads (the same discovery, index pages and
/// comment multi-gets, through the same pool at the same concurrency) without
/// scoring or writing: the baseline of the throughput benchmark. The report
/// counts products and comments read; nothing is written.
pub async fn read_pass(store: &Store, options: &RunOptions, stop: CancellationToken) -> Result<RunReport, RankerError> {
    drive(store, options, stop, Pass::ReadOnly).instrument(run_span(options, Pass::ReadOnly)).await
}

/// A run in named steps: set up the workers, choose the products, rank each,
/// and complete the report.
async fn drive(
    store: &Store,
    options: &RunOptions,
    stop: CancellationToken,
    pass: Pass,
) -> Result<RunReport, RankerError> {
    options.validate()?;
    let started = Instant::now();
    let pacer = Pacer::new(&options.pacing);
    let mut report = empty_report(options, pass, &pacer);
    let (writer, writes) = (!report.dry_run).then(|| SlotWriter::start(store.clone(), pacer.clone())).unzip();
    let worker = Worker::new(store, options, pass, &pacer, writer, &stop);
    let products = match choose_products(store, options, &pacer, &stop, &mut report).await {
        Ok(products) => products,
        Err(error) => {
            end_writes(worker, writes).await;
            return Err(error);
        }
    };
    report.refresh_cuts = rank_each(products, &worker, options.concurrency, &stop, &mut report).await;
    report.comment_fetches = worker.job.fetcher.calls();
    end_writes(worker, writes).await;
    report.interrupted |= stop.is_cancelled();
    // Each ranked product's summary is written with its ranking, in the same call.
    report.summaries_written = if report.dry_run { 0 } else { report.products_ranked };
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report.pacing = pacer.report(report.comments_scored, started.elapsed());
    log_finished(&report);
    Ok(report)
}

/// Drops the run's last handle on its slot writer, the worker's, and waits
/// for the writer to end. Every product has had its answer from it already;
/// waited for all the same, because until it ends it holds the span the run
/// started it under, and a span is exported only once closed. (A writer that
/// panicked has failed its products already: "the slot writer stopped".)
async fn end_writes(worker: Worker, writes: Option<JoinHandle<()>>) {
    drop(worker);
    if let Some(writes) = writes {
        let _ = writes.await;
    }
}

/// The report of a run that has done nothing yet.
fn empty_report(options: &RunOptions, pass: Pass, pacer: &Pacer) -> RunReport {
    RunReport {
        as_of_ms: options.as_of_ms,
        dry_run: options.dry_run || pass == Pass::ReadOnly,
        interrupted: false,
        products_ranked: 0,
        comments_scored: 0,
        slots_written: 0,
        slots_deleted: 0,
        summaries_written: 0,
        skipped_rows: 0,
        comment_fetches: 0,
        failures: Vec::new(),
        duration_ms: 0,
        pacing: pacer.report(0, Duration::ZERO),
        changes: None,
        refresh_cuts: None,
    }
}

/// Ranks `products`, `concurrency` at a time, folding each outcome (and each
/// listing failure) into `report`. When `stop` is cancelled no new product
/// starts; those in flight finish.
///
/// Returns the refresh cuts of a listing of the whole range that reached its end.
async fn rank_each(
    mut products: Products,
    worker: &Worker,
    concurrency: usize,
    stop: &CancellationToken,
    report: &mut RunReport,
) -> Option<Vec<Id>> {
    let progress = &worker.job.progress;
    let mut in_flight: JoinSet<Result<ProductOutcome, String>> = JoinSet::new();
    // Which product each task ranks, so that even a task that panicked is reported by name.
    let mut task_products: HashMap<tokio::task::Id, Id> = HashMap::new();
    let mut listed_all = false;
    let mut spans = ProductSpans::default();
    loop {
        while in_flight.len() >= concurrency {
            if let Some(done) = in_flight.join_next_with_id().await {
                record(report, &mut task_products, done, progress);
            }
        }
        let next = tokio::select! {
            biased;
            () = stop.cancelled() => {
                report.interrupted = true;
                break;
            }
            next = products.next() => next,
        };
        match next {
            None => {
                listed_all = true;
                break;
            }
            Some(Ok(product)) => {
                if let Some(changes) = report.changes.as_mut() {
                    changes.products_to_rank += 1;
                    changes.products_refreshed += u64::from(product.refreshed);
                }
                let worker = worker.clone();
                let id = product.product;
                let span = spans.next(&id);
                let task = in_flight.spawn(async move { worker.product(product).await }.instrument(span));
                task_products.insert(task.id(), id);
            }
            Some(Err(failure)) => {
                tracing::error!(what = %failure.product, error = %failure.error, "listing products failed");
                report.failures.push(failure);
            }
        }
    }
    spans.record_on_pass();
    let cuts = products.cuts().filter(|_| listed_all && report.failures.is_empty());
    // Stop discovery before waiting on the products in flight.
    drop(products);
    while let Some(done) = in_flight.join_next_with_id().await {
        record(report, &mut task_products, done, progress);
    }
    cuts
}

fn log_finished(report: &RunReport) {
    tracing::info!(
        products = report.products_ranked,
        comments = report.comments_scored,
        slots_written = report.slots_written,
        slots_deleted = report.slots_deleted,
        summaries_written = report.summaries_written,
        skipped_rows = report.skipped_rows,
        failures = report.failures.len(),
        interrupted = report.interrupted,
        duration_ms = report.duration_ms,
        comments_per_second = report.comments_per_second() as u64,
        comment_fetches = report.comment_fetches,
        "run finished"
    );
}

/// Folds one finished product into the report.
fn record(
    report: &mut RunReport,
    task_products: &mut HashMap<tokio::task::Id, Id>,
    done: Result<(tokio::task::Id, Result<ProductOutcome, String>), tokio::task::JoinError>,
    progress: &RunProgress,
) {
    let (task, outcome) = match done {
        Ok(done) => done,
        // Product tasks do not panic on input; a panic is a bug, reported as the product's failure.
        Err(error) => (error.id(), Err(format!("the product's task failed: {error}"))),
    };
    let product = task_products.remove(&task).map_or_else(|| "(unknown)".to_owned(), |product| product.to_string());
    let failed = outcome.is_err();
    match outcome {
        Ok(outcome) => {
            report.products_ranked += 1;
            report.comments_scored += outcome.comments_scored;
            report.skipped_rows += outcome.skipped_rows;
            report.slots_written += outcome.slots_written;
            report.slots_deleted += outcome.slots_deleted;
        }
        Err(error) => report.failures.push(ProductFailure { product, error }),
    }
    progress.finish_product(failed);
}
