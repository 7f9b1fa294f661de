//! What the `ranker` command shows a person: live progress while a run goes
//! (a progress line with rates on a terminal, periodic log lines otherwise),
//! and the final summary, explanation, run history and shard plans as text.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::store::lease::LeaseState;
use common::summary::{ReviewSummary, STARS};
use tokio_util::sync::CancellationToken;

use crate::{Explanation, LeftOutReason, PaceReport, ProgressSnapshot, RunProgress, RunReport};

mod runs;
mod shards;

pub use runs::format_runs_table;
pub use shards::{format_plan_table, plan_view, PlanView, ShardView};

/// How often the terminal progress line is redrawn.
const TERMINAL_REFRESH: Duration = Duration::from_millis(250);
/// How often a progress log line is written when stderr is not a terminal.
const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A running progress display; [`ProgressDisplay::finish`] removes it.
#[derive(Debug)]
pub struct ProgressDisplay {
    done: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressDisplay {
    /// Starts showing `progress`: a live line on stderr when it is a terminal,
    /// a `tracing` line every ten seconds otherwise. `verb` names the work
    /// ("ranked", "read").
    pub fn start(progress: Arc<RunProgress>, verb: &'static str) -> ProgressDisplay {
        let done = CancellationToken::new();
        let task = if std::io::stderr().is_terminal() {
            tokio::spawn(show_on_terminal(progress, verb, done.clone()))
        } else {
            tokio::spawn(log_periodically(progress, verb, done.clone()))
        };
        ProgressDisplay { done, task }
    }

    /// Stops the display and clears the live line.
    pub async fn finish(self) {
        self.done.cancel();
        // The task only draws; if it failed there is nothing left to clean up.
        let _ = self.task.await;
    }
}

fn rates(snapshot: &ProgressSnapshot, elapsed: Duration) -> (f64, f64) {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    (snapshot.products_done as f64 / seconds, snapshot.comments_scored as f64 / seconds)
}

async fn show_on_terminal(progress: Arc<RunProgress>, verb: &'static str, done: CancellationToken) {
    let bar = indicatif::ProgressBar::new_spinner();
    let style = indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
    bar.set_style(style);
    let started = Instant::now();
    let mut ticker = tokio::time::interval(TERMINAL_REFRESH);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = done.cancelled() => break,
        }
        let snapshot = progress.snapshot();
        let (products_per_second, comments_per_second) = rates(&snapshot, started.elapsed());
        let mut message = format!(
            "{} products {verb} ({products_per_second:.0}/s) · {} comments ({comments_per_second:.0}/s)",
            snapshot.products_done, snapshot.comments_scored
        );
        if snapshot.products_failed > 0 {
            let _ = write!(message, " · {} failed", snapshot.products_failed);
        }
        bar.set_message(message);
        bar.tick();
    }
    bar.finish_and_clear();
}

async fn log_periodically(progress: Arc<RunProgress>, verb: &'static str, done: CancellationToken) {
    let started = Instant::now();
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + LOG_INTERVAL, LOG_INTERVAL);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = done.cancelled() => return,
        }
        let snapshot = progress.snapshot();
        let (products_per_second, comments_per_second) = rates(&snapshot, started.elapsed());
        tracing::info!(
            products = snapshot.products_done,
            comments = snapshot.comments_scored,
            failed = snapshot.products_failed,
            products_per_second = products_per_second.round() as u64,
            comments_per_second = comments_per_second.round() as u64,
            "progress: products {verb}"
        );
    }
}

/// Why a run by hand did not start: who holds the lease `name`, until when,
/// and what the operator can do instead.
pub fn lease_busy(name: &str, state: &LeaseState) -> String {
    let holder =
        state.holder.clone().or_else(|| state.completed_by.clone()).unwrap_or_else(|| "an unknown holder".to_owned());
    let expires = chrono::DateTime::from_timestamp_millis(state.expires_ms)
        .map_or_else(|| state.expires_ms.to_string(), |time| time.to_rfc3339());
    format!(
        "the lease {name:?} is held by {holder} until {expires}; another run has the night. Try again later, rerun \
         single products with --product, or (emergencies only) pass --ignore-lease"
    )
}

/// The final summary of a run (or, with `read_only`, of a read pass), as lines of text.
pub fn summary(report: &RunReport, read_only: bool) -> String {
    let mut text = String::new();
    let seconds = report.duration_ms as f64 / 1000.0;
    let verb = if read_only { "read" } else { "ranked" };
    let state = match (report.interrupted, read_only, report.dry_run) {
        (true, _, _) => " (interrupted: products in flight were finished, the rest not started)",
        (false, true, _) => " (read-only pass: nothing scored or written)",
        (false, false, true) => " (dry run: nothing written)",
        (false, false, false) => "",
    };
    let _ = writeln!(text, "{} products {verb} in {seconds:.1} s{state}", report.products_ranked);
    let _ = writeln!(
        text,
        "  comments:      {} ({:.0}/s; {:.1} products/s)",
        report.comments_scored,
        report.comments_per_second(),
        report.products_per_second()
    );
    let _ = writeln!(text, "  slots written: {}", report.slots_written);
    let _ = writeln!(text, "  slots deleted: {}", report.slots_deleted);
    let _ = writeln!(text, "  summaries:     {}", report.summaries_written);
    let _ = writeln!(text, "  skipped rows:  {}", report.skipped_rows);
    let _ = writeln!(text, "  multi-gets:    {}", report.comment_fetches);
    let _ = writeln!(text, "  as of:         {} ms", report.as_of_ms);
    let _ = writeln!(text, "  pacing:        {}", pacing_line(&report.pacing));
    if let Some(changes) = &report.changes {
        let _ = writeln!(
            text,
            "  changes:       {} products ranked, what changed found in {:.1} s (cells written since {} ms: {} \
             products; slots naming deleted comments: {} products; refresh of {}: {} products in {})",
            changes.products_to_rank,
            changes.detection_ms as f64 / 1000.0,
            changes.since_ms,
            changes.products_written,
            changes.products_with_deleted_comments,
            changes.refresh_days.map_or_else(|| "none".to_owned(), |days| format!("1/{days}")),
            changes.products_refreshed,
            if changes.refreshed_whole_range {
                "the whole range".to_owned()
            } else {
                format!("{} key ranges", changes.refresh_ranges)
            },
        );
        let _ = writeln!(
            text,
            "  searched:      {} comment rows and {} index rows written since, {} rank slots checked ({} dangling)",
            changes.comment_rows_written, changes.index_rows_written, changes.slots_checked, changes.slots_dangling,
        );
    }
    let _ = writeln!(text, "  failures:      {}", report.failures.len());
    for failure in &report.failures {
        let _ = writeln!(text, "    {}: {}", failure.product, failure.error);
    }
    text
}

/// One line on the pacing: mode, calls in flight, ceiling and mean rate.
fn pacing_line(pacing: &PaceReport) -> String {
    let in_flight = pacing.max_in_flight.map_or_else(String::new, |calls| format!(", at most {calls} calls at once"));
    let ceiling = pacing.max_rate.map_or_else(|| "no ceiling".to_owned(), |rate| format!("ceiling {rate:.0}/s"));
    format!("{}{in_flight}, {ceiling}, mean {:.0} comments/s", pacing.mode.as_str(), pacing.mean_rate)
}

/// An explanation as text: a table of the picks with every term, then the
/// comments left out and why.
pub fn explanation(explanation: &Explanation) -> String {
    let mut text = String::new();
    let weights = &explanation.scoring.weights;
    let _ = writeln!(
        text,
        "Product {} as of {} ms: {} comments scored, {} rows skipped",
        explanation.product, explanation.as_of_ms, explanation.comments_scored, explanation.skipped_rows
    );
    let _ = writeln!(text, "{}", review_summary_line(&explanation.reviews));
    let _ = writeln!(
        text,
        "score = {} substance + {} helpfulness + {} recency + {} photo",
        weights.substance, weights.helpfulness, weights.recency, weights.photo
    );
    let _ = writeln!(text);
    let header = "rank  score   substance helpful recency photo  chars votes(+/-) photos  comment              user        content";
    let _ = writeln!(text, "{header}");
    if explanation.ranked.is_empty() {
        let _ = writeln!(text, "   (no eligible comment: the product has no rank slots)");
    }
    for pick in &explanation.ranked {
        let summary = &pick.summary;
        let terms = &summary.terms;
        let _ = writeln!(
            text,
            "{:>4}  {:.4}  {:.4}    {:.4}  {:.4}  {:.3}  {:>5} {:>10} {:>6}  {}  {}  {}",
            pick.rank,
            terms.score,
            terms.substance,
            terms.helpfulness,
            terms.recency,
            terms.photo,
            terms.chars,
            format!("{}/{}", summary.helpful, summary.unhelpful),
            summary.photos,
            summary.comment,
            summary.user_id,
            shown_preview(summary)
        );
    }
    if !explanation.left_out.is_empty() {
        let _ = writeln!(text);
        let _ = writeln!(text, "Left out:");
    }
    for left in &explanation.left_out {
        let summary = &left.summary;
        let why = match left.reason {
            LeftOutReason::TooShort { chars, min_chars } => {
                format!("too short ({chars} < {min_chars} chars; would have scored {:.4})", summary.terms.score)
            }
            LeftOutReason::DuplicateContent { rank } => {
                format!("duplicate of rank {rank} (score {:.4})", summary.terms.score)
            }
            LeftOutReason::SameUser { rank } => {
                format!("same user as rank {rank} (score {:.4})", summary.terms.score)
            }
        };
        let _ = writeln!(text, "  {}  {}  {why}: {}", summary.comment, summary.user_id, shown_preview(summary));
    }
    text
}

/// A review summary on one line: `12 reviews: 5* 4, 4* 3, 3* 1, 2* 0, 1* 1,
/// unrated 3; average 4.11; 5 with photos`.
fn review_summary_line(summary: &ReviewSummary) -> String {
    let stars: Vec<String> = STARS.rev().map(|stars| format!("{stars}* {}", summary.rated_with(stars))).collect();
    let average = summary.average().map_or_else(|| "none".to_owned(), |average| format!("{average:.2}"));
    format!(
        "{} reviews: {}, unrated {}; average {average}; {} with photos",
        summary.count(),
        stars.join(", "),
        summary.unrated,
        summary.with_photos
    )
}

/// The content preview as the console shows it: a `null` content (written by
/// the Java service) is named, so it is not mistaken for an empty review.
fn shown_preview(summary: &crate::explain::CommentSummary) -> &str {
    summary.content_preview.as_deref().unwrap_or("(content is null)")
}
