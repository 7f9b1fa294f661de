//! A whole run: discover the products in scope, rank them concurrently with
//! retries, and report. Also the read-only pass the benchmark compares against.

use std::collections::{HashMap, VecDeque};
use std::iter::Peekable;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::retry::Backoff;
use common::store::products::CountedIndexPage;
use common::store::Store;
use common::Id;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::changes::{find_products, ChangeReport, ChosenProduct, Incremental};
use crate::config::PaceMode;
use crate::discovery::{DiscoveredProduct, Discovery, ListingRetry};
use crate::fetch::CommentFetcher;
use crate::pace::Pacer;
use crate::product::{
    existing_slot_mask, rank_product, stream_comments, IndexReader, ProductJob, ProductOutcome, StreamOptions,
};
use crate::refresh::{nights_due, refresh_ranges, CutSampler};
use crate::shard::KeyRange;
use crate::writer::SlotWriter;
use crate::{ProductFailure, RankerError, RunOptions, RunProgress, RunReport, Scope};

/// What each product goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Score, select and write slots.
    Rank,
    /// Read the same index rows and comments, and nothing else.
    ReadOnly,
}

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
/// the first calls of its listing and slot writer (`crate::call_spans`):
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

/// The most products of one pass that get a span of their own (with their
/// HBase calls under it): a nightly run ranks millions of products, and a
/// trace of millions of spans is one no trace store shows. The first ones a
/// pass starts are traced; the pass's span counts the rest.
const MAX_TRACED_PRODUCTS: u64 = 1_000;

/// The spans of a pass's products: one for each of the first
/// [`MAX_TRACED_PRODUCTS`] under a kept trace, none for the others.
#[derive(Debug, Default)]
struct ProductSpans {
    traced: u64,
    untraced: u64,
}

impl ProductSpans {
    /// The span of `product`'s ranking, every attempt of it, under the pass's.
    fn next(&mut self, product: &Id) -> tracing::Span {
        if !common::traces::in_kept_trace() {
            return tracing::Span::none();
        }
        if !self.take_one() {
            return tracing::Span::none();
        }
        tracing::info_span!("product", otel.name = "rank product", product = %product)
    }

    /// Whether the next product of the pass is traced, counting it either way.
    fn take_one(&mut self) -> bool {
        if self.traced < MAX_TRACED_PRODUCTS {
            self.traced += 1;
            true
        } else {
            self.untraced += 1;
            false
        }
    }

    /// Records the counts on the pass's span (the current one).
    fn record_on_pass(&self) {
        let pass = tracing::Span::current();
        pass.record("products_traced", self.traced);
        pass.record("products_untraced", self.untraced);
    }
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
    let worker = Worker::new(store, options, pass, &pacer, &stop);
    let products = choose_products(store, options, &pacer, &stop, &mut report).await?;
    report.refresh_cuts = rank_each(products, &worker, options.concurrency, &stop, &mut report).await;
    report.interrupted |= stop.is_cancelled();
    // Each ranked product's summary is written with its ranking, in the same call.
    report.summaries_written = if report.dry_run { 0 } else { report.products_ranked };
    report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report.pacing = pacer.report(report.comments_scored, started.elapsed());
    report.comment_fetches = worker.job.fetcher.calls();
    log_finished(&report);
    Ok(report)
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

/// The products in `options.scope`, one at a time: the one product, the
/// listing of a key range, or for an incremental run those it finds changed
/// with the listing of the refresh slices due (what it found goes in the
/// report).
async fn choose_products(
    store: &Store,
    options: &RunOptions,
    pacer: &Pacer,
    stop: &CancellationToken,
    report: &mut RunReport,
) -> Result<Products, RankerError> {
    let range = match &options.scope {
        Scope::Product(product) => return Ok(Products::One(Some(*product))),
        // A shard left without keys (fewer places to cut than shards) has nothing to rank.
        Scope::Shard { range, .. } if range.is_empty() => return Ok(Products::One(None)),
        scope => scope.key_range().unwrap_or_else(KeyRange::everything),
    };
    let lister =
        RangeLister { store: store.clone(), pacer: pacer.clone(), retry: listing_retry(options), stop: stop.clone() };
    let Some(incremental) = options.incremental else {
        let discovery = lister.start(&range);
        return Ok(Products::Listed { discovery: Box::new(discovery), cuts: CutSampler::new() });
    };
    let started = Instant::now();
    let mut changes = ChangeReport {
        since_ms: incremental.since_ms,
        refresh_days: incremental.refresh_days,
        ..ChangeReport::default()
    };
    let found = find_products(store, &range, incremental, pacer, options.concurrency, stop, &mut changes).await?;
    // Stopped while searching: nothing ranked, reported as interrupted.
    let Some(chosen) = found else { return Ok(Products::One(None)) };
    let refresh = refresh_plan(store, &range, incremental, options.as_of_ms).await?;
    changes.refresh_ranges = refresh.len() as u64;
    changes.refreshed_whole_range = refresh.first() == Some(&range);
    changes.detection_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        since_ms = changes.since_ms,
        refresh_days = changes.refresh_days,
        products_written = changes.products_written,
        products_with_deleted_comments = changes.products_with_deleted_comments,
        slots_checked = changes.slots_checked,
        refresh_ranges = changes.refresh_ranges,
        refreshed_whole_range = changes.refreshed_whole_range,
        detection_ms = changes.detection_ms,
        "found what changed; ranking it with the refresh slices due"
    );
    // A refresh of the whole range lists every product of it, as a full run does, and records cuts.
    let cuts = changes.refreshed_whole_range.then(CutSampler::new);
    report.changes = Some(changes);
    Ok(Products::Incremental(Box::new(IncrementalProducts {
        chosen: chosen.into_iter().peekable(),
        refresh: RefreshListing { lister, ranges: refresh.into(), current: None, head: None },
        cuts,
    })))
}

/// The key ranges an incremental run over `range` refreshes whole: the
/// slices of the nights due ([`nights_due`]) under the cuts recorded by the
/// newest runs covering the range, or the whole range when no recorded cuts
/// cover it.
async fn refresh_plan(
    store: &Store,
    range: &KeyRange,
    incremental: Incremental,
    as_of_ms: i64,
) -> Result<Vec<KeyRange>, RankerError> {
    let Some(days) = incremental.refresh_days else { return Ok(Vec::new()) };
    let nights = nights_due(incremental.refreshed_until_ms, as_of_ms);
    if nights.is_empty() {
        return Ok(Vec::new());
    }
    match crate::history::recorded_cuts(store, range).await? {
        Some(cover) => Ok(refresh_ranges(&cover, range, days, nights)),
        None => {
            tracing::warn!("no completed run covering these products recorded refresh cuts: refreshing every product");
            Ok(vec![range.clone()])
        }
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

fn listing_retry(options: &RunOptions) -> ListingRetry {
    ListingRetry { backoff: options.retry_backoff, patience: options.listing_patience }
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

/// The products of a run, one at a time.
enum Products {
    One(Option<Id>),
    /// A range's listing, sampled for the refresh cuts.
    Listed {
        discovery: Box<Discovery>,
        cuts: CutSampler,
    },
    /// Boxed: it holds a listing and more.
    Incremental(Box<IncrementalProducts>),
}

impl Products {
    async fn next(&mut self) -> Option<Result<ProductToRank, ProductFailure>> {
        match self {
            // A single product's slots are read by its worker, inside its retries.
            Products::One(product) => product.take().map(|product| Ok(ProductToRank::read_slots(product))),
            Products::Listed { discovery, cuts } => {
                let found = discovery.next().await?;
                if let Ok(found) = &found {
                    cuts.add(found.product);
                }
                Some(found.map(|found| ProductToRank::discovered(found, false)))
            }
            Products::Incremental(products) => products.next().await,
        }
    }

    /// The cuts of the listing so far, when it is of the run's whole range.
    fn cuts(&self) -> Option<Vec<Id>> {
        match self {
            Products::One(_) => None,
            Products::Listed { cuts, .. } => Some(cuts.cuts()),
            Products::Incremental(products) => products.cuts.as_ref().map(CutSampler::cuts),
        }
    }
}

/// An incremental run's products: those it found changed merged in key order
/// with the listing of its refresh ranges, each product once.
struct IncrementalProducts {
    chosen: Peekable<std::vec::IntoIter<ChosenProduct>>,
    refresh: RefreshListing,
    /// Samples the refresh listing when it is of the run's whole range.
    cuts: Option<CutSampler>,
}

impl IncrementalProducts {
    async fn next(&mut self) -> Option<Result<ProductToRank, ProductFailure>> {
        let listed = self.refresh.peek().await;
        let take_listed = match (self.chosen.peek(), listed) {
            (None, None) => return None,
            // A listing failure goes first: it is reported, and that listing has stopped.
            (_, Some(Err(_))) | (None, Some(Ok(_))) => true,
            (Some(_), None) => false,
            (Some(chosen), Some(Ok(listed))) => listed.product <= chosen.product,
        };
        if !take_listed {
            return self.chosen.next().map(|chosen| Ok(ProductToRank::chosen(chosen)));
        }
        let listed = match self.refresh.head.take()? {
            Ok(listed) => listed,
            Err(failure) => return Some(Err(failure)),
        };
        // A changed product inside a refresh range is ranked once, with the slots the listing saw.
        self.chosen.next_if(|chosen| chosen.product == listed.product);
        if let Some(cuts) = self.cuts.as_mut() {
            cuts.add(listed.product);
        }
        Some(Ok(ProductToRank::discovered(listed, true)))
    }
}
/// The listing of an incremental run's refresh ranges, one range after the
/// other (they are ascending and disjoint, so the products come in key order).
struct RefreshListing {
    lister: RangeLister,
    ranges: VecDeque<KeyRange>,
    current: Option<Discovery>,
    /// The next product or listing failure, once peeked.
    head: Option<Result<DiscoveredProduct, ProductFailure>>,
}

impl RefreshListing {
    async fn peek(&mut self) -> Option<&Result<DiscoveredProduct, ProductFailure>> {
        while self.head.is_none() {
            match self.current.as_mut() {
                Some(discovery) => {
                    self.head = discovery.next().await;
                    if self.head.is_none() {
                        self.current = None;
                    }
                }
                None => {
                    let range = self.ranges.pop_front()?;
                    self.current = Some(self.lister.start(&range));
                }
            }
        }
        self.head.as_ref()
    }
}

/// What starting the listing of a key range needs.
struct RangeLister {
    store: Store,
    pacer: Pacer,
    retry: ListingRetry,
    stop: CancellationToken,
}

impl RangeLister {
    fn start(&self, range: &KeyRange) -> Discovery {
        Discovery::start(&self.store, &self.pacer, range, self.retry, &self.stop)
    }
}

/// A product to rank and, when a listing saw them, the slots it has now and
/// its whole comment index.
#[derive(Debug, Clone)]
struct ProductToRank {
    product: Id,
    slot_mask: Option<u16>,
    whole_index: Option<CountedIndexPage>,
    /// Listed by an incremental run's refresh.
    refreshed: bool,
}

impl ProductToRank {
    /// A product whose worker reads its slots.
    fn read_slots(product: Id) -> ProductToRank {
        ProductToRank { product, slot_mask: None, whole_index: None, refreshed: false }
    }

    /// A product an incremental run found changed.
    fn chosen(chosen: ChosenProduct) -> ProductToRank {
        ProductToRank { product: chosen.product, slot_mask: chosen.slot_mask, whole_index: None, refreshed: false }
    }

    /// A product a listing found.
    fn discovered(found: DiscoveredProduct, refreshed: bool) -> ProductToRank {
        ProductToRank {
            product: found.product,
            slot_mask: Some(found.slot_mask),
            whole_index: found.whole_index,
            refreshed,
        }
    }
}

/// Everything a product task needs; cheap to clone.
#[derive(Clone)]
struct Worker {
    store: Store,
    job: Arc<ProductJob>,
    pass: Pass,
    attempts: u32,
    backoff: Backoff,
    stop: CancellationToken,
}

impl Worker {
    /// The workers of a run under `options`, sharing one pacer and fetcher;
    /// logs how the run is set up.
    fn new(store: &Store, options: &RunOptions, pass: Pass, pacer: &Pacer, stop: &CancellationToken) -> Worker {
        let dry_run = options.dry_run || pass == Pass::ReadOnly;
        // Smaller pages when paced: a reader queues behind a big multi-get for
        // as long as it holds a gateway thread and a handler.
        let page_rows = match options.pacing.mode {
            PaceMode::On => options.pacing.page_rows,
            PaceMode::Off => options.page_rows,
        };
        let job = Arc::new(ProductJob {
            scoring: Arc::new(options.scoring.clone()),
            as_of_ms: options.as_of_ms,
            writer: (!dry_run).then(|| SlotWriter::start(store.clone(), pacer.clone())),
            page_rows,
            pacer: pacer.clone(),
            fetcher: CommentFetcher::new(store.clone(), pacer.clone(), page_rows),
            // Counted whether or not anybody watches: the counts feed the metrics too.
            progress: options.progress.clone().unwrap_or_default(),
        });
        tracing::info!(
            scope = ?options.scope,
            as_of_ms = options.as_of_ms,
            dry_run,
            ?pass,
            concurrency = options.concurrency,
            pace = options.pacing.mode.as_str(),
            max_rate = options.pacing.max_rate,
            page_rows,
            "run started"
        );
        Worker {
            store: store.clone(),
            job,
            pass,
            attempts: options.product_attempts,
            // Uncapped: a product has few attempts, so its pauses stay short.
            backoff: Backoff::uncapped(options.retry_backoff),
            stop: stop.clone(),
        }
    }

    /// One product, with retries.
    async fn product(&self, found: ProductToRank) -> Result<ProductOutcome, String> {
        let mut attempt = 1;
        loop {
            match self.attempt(&found).await {
                Ok(outcome) => return Ok(outcome),
                Err(error) if attempt < self.attempts && !self.stop.is_cancelled() => {
                    let delay = self.backoff.delay(attempt);
                    tracing::warn!(product = %found.product, attempt, %error, ?delay, "ranking a product failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.stop.cancelled() => return Err(format!("{error} (not retried: the run was stopped)")),
                    }
                    attempt += 1;
                }
                Err(error) => {
                    tracing::error!(product = %found.product, attempts = attempt, %error, "ranking a product failed");
                    return Err(error.to_string());
                }
            }
        }
    }

    /// One try at the product. Every try uses the index discovery handed
    /// over, when it did (borrowed: each try splits it into its own pages): a
    /// retry follows a failed multi-get or slot write, and the listing's rows
    /// are as good as they were on the first try.
    async fn attempt(&self, found: &ProductToRank) -> Result<ProductOutcome, RankerError> {
        let product = found.product;
        match self.pass {
            Pass::Rank => {
                let slot_mask = match found.slot_mask {
                    Some(mask) => mask,
                    None => self.job.pacer.call(existing_slot_mask(&self.store, &product)).await?,
                };
                rank_product(&self.store, &product, slot_mask, found.whole_index.as_ref(), &self.job).await
            }
            Pass::ReadOnly => {
                let count = |_: &mut (), _: Vec<common::model::Comment>| {};
                let job = &self.job;
                let index = IndexReader::for_product(
                    &self.store,
                    &product,
                    found.whole_index.as_ref(),
                    job.page_rows,
                    &job.pacer,
                );
                let options =
                    StreamOptions { progress: Some(&job.progress), marker: None, summary_through_ms: job.as_of_ms };
                let ((), totals) = stream_comments(index, &job.fetcher, (), count, options).await?;
                Ok(ProductOutcome {
                    comments_scored: totals.listed,
                    skipped_rows: totals.skipped_rows,
                    ..ProductOutcome::default()
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_traces_its_first_products_only_and_counts_the_rest() {
        let mut spans = ProductSpans::default();
        let traced = (0..MAX_TRACED_PRODUCTS + 5).filter(|_| spans.take_one()).count();
        assert_eq!(u64::try_from(traced).expect("count"), MAX_TRACED_PRODUCTS);
        assert_eq!((spans.traced, spans.untraced), (MAX_TRACED_PRODUCTS, 5));
    }
}
