//! Progress of a long load on stderr.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::demo::{Phase, Progress};

/// Shows progress: a bar per phase on a terminal, otherwise a log line at each
/// phase's start and end and every few seconds in between.
pub(crate) struct ProgressReporter {
    bar: Option<ProgressBar>,
    phase: Option<Phase>,
    phase_started: Instant,
    last_line: Instant,
    interactive: bool,
}

impl ProgressReporter {
    /// How often a non-interactive load logs its progress.
    const LOG_EVERY: Duration = Duration::from_secs(5);

    pub(crate) fn new() -> ProgressReporter {
        ProgressReporter {
            bar: None,
            phase: None,
            phase_started: Instant::now(),
            last_line: Instant::now(),
            interactive: std::io::stderr().is_terminal(),
        }
    }

    pub(crate) fn update(&mut self, progress: Progress) {
        if self.phase != Some(progress.phase) {
            self.finish();
            self.start(progress);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(progress.done);
        } else if progress.done == progress.total || self.last_line.elapsed() >= Self::LOG_EVERY {
            self.log_line(progress);
        }
    }

    fn start(&mut self, progress: Progress) {
        self.phase = Some(progress.phase);
        self.phase_started = Instant::now();
        self.last_line = Instant::now();
        if self.interactive {
            let bar = ProgressBar::with_draw_target(Some(progress.total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix:>9} [{bar:40.cyan/blue}] {human_pos}/{human_len} {per_sec} elapsed {elapsed} ETA {eta}",
            )
            .map(|style| style.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(progress.phase.to_string());
            self.bar = Some(bar);
        } else {
            tracing::info!(phase = %progress.phase, total = progress.total, "writing");
        }
    }

    fn log_line(&mut self, progress: Progress) {
        self.last_line = Instant::now();
        let seconds = self.phase_started.elapsed().as_secs_f64();
        let rate = if seconds > 0.0 { progress.done as f64 / seconds } else { 0.0 };
        let percent = if progress.total == 0 { 100.0 } else { 100.0 * progress.done as f64 / progress.total as f64 };
        tracing::info!(
            phase = %progress.phase,
            done = progress.done,
            total = progress.total,
            "{:.1} % written, {rate:.0} {}/s",
            percent,
            progress.phase
        );
    }

    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}
