//! Pacing of a run, so that the nightly ranking leaves online reads their latency.
//!
//! Every product task acquires comments from one shared [`Pacer`] before it
//! fetches a page of them, and reports how long each of its HBase calls took.
//! The pacer is a token bucket (comments per second, with a small burst) whose
//! rate a [`Controller`] moves at run time:
//!
//! - The run's first window (at its starting rate), a window three windows
//!   later, then one window after every fifteen (put off past a window that
//!   slowed down), and the window after one whose calls were mostly of sizes no
//!   probe measured (the sizes of a run's calls drift as it goes) are probes:
//!   the rate drops to a quarter for the window, and what the calls take then
//!   becomes their baseline, per kind of call and per call size (the median of
//!   the last two probes' calls). A probe measures HBase with little of the run
//!   on it, as BBR's ProbeRTT drains its own queue to measure the round trip:
//!   slowness the run causes goes away in a probe and is never learnt as
//!   normal, and slowness that stays (a busier machine) is learnt within two
//!   probes, so the run does not crawl all night for it.
//! - After the first probe the rate doubles every window while the calls stay
//!   fast (slow start, as TCP does), up to a threshold, or until the first
//!   window whose calls are noticeably slower than their baseline.
//! - After that the rate grows by a fixed step per window while the calls stay
//!   near their baseline (additive increase), holds while they are a little
//!   slower, and is cut by a factor, at most once per window, when the
//!   window's typical call is more than `tolerance` times slower than its
//!   baseline (multiplicative decrease). A window waits for a dozen calls
//!   before it is judged; one still too sparse after five window lengths means
//!   a rate too low to congest anything, and grows by the step.
//! - After a series of cuts, calm windows regrow the rate quickly to three
//!   quarters of where the cuts began (half the way left per window, at most
//!   doubling it, as BIC does after a loss), and by the step past that: a
//!   series of cuts took a run down in seconds, and the step alone took up
//!   to half a minute to win it back.
//! - A window still slow after the cuts took the rate to a sixteenth of where
//!   they started (or to the floor) is taken as a probe: the run is as quiet
//!   as in one, so the slowness is not its doing, and its calls become the
//!   baseline instead of cutting on (probes are put off while windows are
//!   slow, so the run otherwise crawled at its floor for as long). At such a
//!   rate one window may not hold the calls a baseline takes, so the calls of
//!   the slow windows are gathered, the rate held, until they do.
//!
//! Why latency, and why AIMD: the ranker cannot see the readers, but readers
//! and ranker queue for the same gateway threads, region-server handlers and
//! CPU, so the ranker's own calls slowing down is the earliest sign that the
//! readers are queueing too. HBase throttles its own background work the same
//! way: `PressureAwareThroughputController` (compactions and flushes) moves a
//! bytes-per-second limit between a lower and an upper bound according to a
//! pressure signal, so background work takes what the foreground leaves. Our
//! pressure signal is the ranker's call latency over its idle baseline; the
//! additive increase and multiplicative decrease make concurrent runs (shards)
//! converge to a fair share instead of oscillating together.
//!
//! Calls differ in size: a product has from one to 100,000 comments, so a
//! multi-get carries from one to a page of rows. Each call is compared with the
//! baseline of its own size class (powers of two of its rows), so a big
//! multi-get is not mistaken for congestion.
//!
//! The control law ([`Controller`]) is pure: it is fed observations with their
//! time and answers with rate changes, which the unit tests drive on a simulated
//! latency signal. [`Pacer`] wraps it with the token bucket, metrics and logs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Gauge: comments per second the running run may read now.
pub const PACE_RATE: &str = "reviews_ranker_pace_rate";
/// Counter: times the adaptive pacing cut the rate.
pub const PACE_SLOWDOWNS: &str = "reviews_ranker_pace_slowdowns_total";

/// Most rate samples kept in a run's report; older ones are thinned out.
const MAX_RATE_SAMPLES: usize = 240;
/// Seconds of the current rate the bucket may hold: a small burst, so a pause
/// between products does not turn into a spike of calls afterwards.
const BURST_SECONDS: f64 = 0.1;
/// Longest single sleep of a waiter, so a rate change reaches waiters soon.
const LONGEST_WAIT_STEP: Duration = Duration::from_millis(100);
/// Windows between two probes. Every this many windows the run drops to
/// [`PROBE_SHARE`] of its rate for one window and takes what its calls take
/// then as their baseline, as BBR drains its queue every ten seconds to measure
/// the round-trip time without its own traffic in it (ProbeRTT). A baseline
/// learnt from the run's own windows drifts: held at a slightly slow latency,
/// the slow latency became the baseline and the rate crept on without bound,
/// and the lowest of thirty noisy medians read every window as slow and held a
/// run at its floor for nine minutes under the contention benchmark's readers.
/// A probe is also how slowness that is not the run's doing is learnt: it
/// stays when the run goes quiet, so it becomes the baseline.
const PROBE_EVERY_WINDOWS: u32 = 15;
/// Windows after the first probe that the second one comes. The first probe
/// is the run's first window, whose calls also open the pool's connections and
/// meet gateway threads and caches that are still cold: in the integration
/// test they took three times what calls took a second later, so a baseline
/// from them let the run go three times over for fifteen windows (every
/// contention round had its worst reader window in the run's first seconds).
/// The second probe comes early and replaces the first one's calls.
const SECOND_PROBE_AFTER_WINDOWS: u32 = 3;
/// The share of its rate a run keeps during a probe.
const PROBE_SHARE: f64 = 0.25;
/// How many probes a size class's baseline is the median of: two, so that one
/// probe's handful of calls does not decide alone, and slowness that stays is
/// learnt within two probes.
const PROBES_KEPT: u64 = 2;
/// Calls of one size class, over the kept probes, that make its baseline; a
/// probe stretches until one class has this many calls in it alone. Single
/// calls on a loaded machine vary tenfold, so fewer calls make a baseline
/// that is off by a third for the next fifteen windows.
const MIN_BASELINE_CALLS: usize = 8;
/// Calls with a baseline a window needs before it is judged; a window with
/// fewer stretches until it has them (or until [`LONGEST_WINDOW_STRETCH`]
/// windows have passed). A median of a few calls is noise: on a loaded
/// machine single calls vary tenfold.
const MIN_WINDOW_CALLS: usize = 12;
/// A window with few calls is closed anyway after this many window lengths,
/// so a run at a low rate still speeds up.
const LONGEST_WINDOW_STRETCH: u32 = 5;
/// A window with fewer than [`MIN_WINDOW_CALLS`] calls is still judged slow
/// when at least this many of them took over [`UNMISTAKABLE_FACTOR`] times
/// the tolerance (in the median): calls that slow are few *because* they are
/// slow (a run has only `max_in_flight` calls out at once), and noise never
/// makes a median of several calls six times its baseline.
const MIN_UNMISTAKABLE_CALLS: usize = 3;
/// See [`MIN_UNMISTAKABLE_CALLS`]: with the default tolerance of 1.5, a
/// median over four and a half times the baseline.
const UNMISTAKABLE_FACTOR: f64 = 3.0;
/// How deep a series of cuts goes, as a share of the rate it started from,
/// before the windows that are still slow are taken as a probe instead of cut
/// again. Cutting to a sixteenth (four halvings) and finding the calls as
/// slow as before means the slowness is not the run's doing: a probe (a
/// quarter of the rate) would learn it as the new baseline, but probes are
/// put off while windows are slow, so without this the run cut on to its
/// floor and crawled there (contention rounds 12 and 18: nine cuts from
/// 23,500 comments/s to 529 and 50 s of crawl; six cuts from 9,606 to the
/// floor of 200, three more "cuts" from 200 to 200, and 10 s or more there).
const UNRELIEVED_CUT_SHARE: f64 = 1.0 / 16.0;
/// A series of cuts ends at a calm window that leaves the rate at this share
/// of where the series began or more (see `Controller::cut_series_from`).
const CUT_SERIES_WON_BACK_SHARE: f64 = 0.5;
/// After a series of cuts, calm windows grow the rate quickly back up to this
/// share of where the series began (see `Controller::regrow_toward`), and by
/// the step past it. The rate where calls got slow is the one rate known to
/// be too much, so the last quarter is climbed carefully, where the hold band
/// can stop the climb: regrowing quickly all the way cut a run whose load
/// tracks its rate three times in a minute near the knee instead of once.
const REGROWTH_TARGET_SHARE: f64 = 0.75;
/// Regrowth covers this share of the way left to its target per calm window
/// (at least the step, at most doubling the rate).
const REGROWTH_SHARE_OF_GAP: f64 = 0.5;
/// A window whose comment throughput was below this share of the allowed rate
/// does not raise the rate: raising a limit nobody reaches would only allow a
/// burst later (TCP's congestion-window validation, RFC 7661).
const USED_SHARE_TO_GROW: f64 = 0.5;

/// Whether a run paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PaceMode {
    /// Follow the latency of the ranker's own HBase calls (the default).
    Adaptive,
    /// No adaptive pacing: for a maintenance window with no readers. A
    /// `max_rate`, if set, still caps the rate.
    Off,
}

impl PaceMode {
    /// The mode as flags and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PaceMode::Adaptive => "adaptive",
            PaceMode::Off => "off",
        }
    }
}

/// How a run is paced (`[pacing]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacingSettings {
    /// `adaptive` (default) or `off`.
    pub mode: PaceMode,
    /// Hard ceiling in comments per second, in both modes; `None`: no ceiling.
    pub max_rate: Option<f64>,
    /// Rate of the first window, comments per second (slow start doubles it).
    pub initial_rate: f64,
    /// Slow start doubles the rate only up to this, comments per second; past
    /// it the rate grows by `increase_step` (TCP's ssthresh). Size classes met
    /// for the first time teach their baseline before they can signal anything,
    /// so with eight calls in flight and no threshold slow start doubled to
    /// 32,000 comments/s within six windows, before the first slow-down, and
    /// the readers answered 503 (contention round 1). With one call in flight
    /// (`max_in_flight`) a rate above what that call can carry changes nothing
    /// HBase sees, so the threshold sits above it: at 8,000 the benchmark's
    /// run crept from there by `increase_step` for its whole minute, its
    /// calls never slow, and took 3.3 and 3.4 times its unpaced time; at
    /// 32,000, 2.4 and 2.7 times, the readers' p99 still within the
    /// benchmark's targets (git show 53d5a2e:BENCHMARKS.md, "Rounds 58 to 61").
    pub slow_start_threshold: f64,
    /// The rate never drops below this, so a run always finishes.
    pub min_rate: f64,
    /// Comments per second added after each calm window (additive increase).
    pub increase_step: f64,
    /// Factor the rate is multiplied by after a slow window (multiplicative
    /// decrease); of the rate the run used in it, when that was lower.
    pub decrease_factor: f64,
    /// A window whose median call is more than this many times its baseline,
    /// though within `tolerance`, ends slow start and holds the rate where it
    /// is: rising latency means queues are forming, and growing further would
    /// overshoot into the readers' waits before the next window could cut it
    /// back (the "delay increase" exit of TCP's HyStart, RFC 9406, and TCP
    /// Vegas's band between growing and cutting). Probing on up to the
    /// tolerance every time gave the readers a 200-ms p99 window at each
    /// overshoot (bench/contention.sh, BENCHMARKS.md).
    pub hold_above: f64,
    /// A window is slow when its median call takes more than this many times its
    /// baseline (the median of its size class's calls in the last two probes).
    pub tolerance: f64,
    /// Length of one control window, in milliseconds.
    pub window_ms: u64,
    /// Index rows (and comments) per page while paced adaptively, instead of
    /// `run.page_rows`: a smaller multi-get holds a gateway thread and a
    /// region-server handler for less time, so readers queue behind it less.
    pub page_rows: usize,
    /// Most HBase calls (index pages, multi-gets, slot writes) a run paced
    /// adaptively has in flight at once, whatever its product concurrency. A
    /// rate says how much work the run asks for per second, not how much of
    /// it lands at the same moment: eight products' multi-gets arriving
    /// together held every region-server handler and CPU a reader needed for
    /// milliseconds, which is what the readers' p99 shows. With one call in
    /// flight the run never has more than one index page, multi-get, slot
    /// write or existence check out at once (only its product listing, a
    /// step per few hundred index rows, goes around the turns), so readers
    /// find the rest of the handlers and gateway threads free. A call is timed
    /// from when it gets its turn, so the wait for one is not read as congestion.
    pub max_in_flight: usize,
}

impl Default for PacingSettings {
    fn default() -> Self {
        PacingSettings {
            mode: PaceMode::Adaptive,
            max_rate: None,
            initial_rate: 2_000.0,
            slow_start_threshold: 32_000.0,
            min_rate: 200.0,
            increase_step: 500.0,
            decrease_factor: 0.5,
            hold_above: 1.25,
            tolerance: 1.5,
            window_ms: 1_000,
            page_rows: 250,
            max_in_flight: 1,
        }
    }
}

impl PacingSettings {
    /// Refuses values that would stop a run or make the control law meaningless.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(format!("pacing.{name} must be a finite number > 0, got {value}"))
            }
        };
        if let Some(max_rate) = self.max_rate {
            positive("max_rate", max_rate)?;
        }
        positive("initial_rate", self.initial_rate)?;
        positive("slow_start_threshold", self.slow_start_threshold)?;
        positive("min_rate", self.min_rate)?;
        positive("increase_step", self.increase_step)?;
        if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            return Err(format!("pacing.decrease_factor must be between 0 and 1, got {}", self.decrease_factor));
        }
        if !(self.tolerance.is_finite() && self.tolerance > 1.0) {
            return Err(format!("pacing.tolerance must be a finite number > 1, got {}", self.tolerance));
        }
        if !(self.hold_above > 1.0 && self.hold_above <= self.tolerance) {
            return Err(format!(
                "pacing.hold_above must be > 1 and at most pacing.tolerance ({}), got {}",
                self.tolerance, self.hold_above
            ));
        }
        if self.window_ms == 0 {
            return Err("pacing.window_ms must be at least 1".to_owned());
        }
        if !(1..=crate::config::MAX_PAGE_ROWS).contains(&self.page_rows) {
            return Err(format!(
                "pacing.page_rows must be from 1 to {}, got {}",
                crate::config::MAX_PAGE_ROWS,
                self.page_rows
            ));
        }
        if self.max_in_flight == 0 {
            return Err("pacing.max_in_flight must be at least 1".to_owned());
        }
        Ok(())
    }

    fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The ceiling as a number (infinite when there is none).
    fn ceiling(&self) -> f64 {
        self.max_rate.unwrap_or(f64::INFINITY)
    }
}

/// The kinds of call the controller keeps baselines for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CallKind {
    /// A page of a product's comment index (a scan).
    IndexPage,
    /// A multi-get of a page of comments.
    CommentFetch,
}

/// The calls compared with one another: one kind of call, of one size class.
type CallClass = (CallKind, u32);

/// One call's size class: the power of two at or above its row count.
fn size_class(rows: usize) -> u32 {
    usize::BITS - rows.max(1).saturating_sub(1).leading_zeros()
}

/// A rate change the controller decided at the end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Change {
    /// Calls stayed near their baseline; the rate went up.
    SpeedUp { from: f64, to: f64 },
    /// The window's median call was `slowness` times its baseline; the rate went down.
    SlowDown { from: f64, to: f64, slowness: f64 },
    /// A probe started (the rate went down to a share of itself for one
    /// window) or ended (the rate went back).
    Probe { from: f64, to: f64 },
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    kind: CallKind,
    class: u32,
    seconds: f64,
}

/// The control law: observations in, rate changes out. No I/O, no clock of its own.
#[derive(Debug)]
pub(crate) struct Controller {
    settings: PacingSettings,
    rate: f64,
    slow_start: bool,
    /// Set while the current window is a probe: the rate to go back to after it.
    probing: Option<f64>,
    /// The rate in use when the current series of cuts began (the first
    /// cut's starting point); `None` when no series is under way. A series
    /// ends at a calm window that leaves the rate at half of that or more
    /// (a sparse window's step does not end it), or when calls teach new
    /// baselines; not at its first calm window: an HBase slow for
    /// reasons of its own is not slow in every window, so a calm window
    /// between cuts began a new series from the few hundred comments/s the
    /// run was cut to, a sixteenth of which is below the floor, and only the
    /// floor counted as cut deep.
    cut_series_from: Option<f64>,
    /// Three quarters of the rate the latest series of cuts began from
    /// ([`REGROWTH_TARGET_SHARE`]), while the run has not grown back to it. A
    /// calm window grows the rate by half the way there (at least the step,
    /// at most doubling it), not by the step alone: a series of cuts took
    /// the run from 25,000 comments/s to 692 within 3 s in contention round
    /// 28, and 500 per window took 20 s to win back what was lost in 3
    /// (round 30: 32 s). Halving the distance to a rate just under where
    /// calls last got slow is BIC's binary search increase (Xu, Harfoush and
    /// Rhee, 2004; CUBIC's concave region is its successor): fast while far
    /// from that rate, careful near it, and a window whose calls slow down on
    /// the way holds or cuts the rate as any other. At most doubling, as
    /// TCP's slow start up to its threshold after a timeout, so that each
    /// window can still judge the step it took.
    regrow_toward: Option<f64>,
    /// The calls of the windows still slow with the run cut deep (see
    /// [`UNRELIEVED_CUT_SHARE`]), gathered until one size class has
    /// [`MIN_BASELINE_CALLS`] of them and they become the baselines. Bounded:
    /// with a few dozen size classes, one of them has its calls before the
    /// gathered calls number a thousand.
    deep_cut_calls: Vec<Sample>,
    /// Windows closed since the last probe ended.
    windows_since_probe: u32,
    /// Per size class: its calls in each of the last [`PROBES_KEPT`] probes, by
    /// probe number. Their median is the class's baseline once there are
    /// [`MIN_BASELINE_CALLS`] of them.
    probe_calls: HashMap<CallClass, VecDeque<(u64, Vec<f64>)>>,
    /// Per size class: the median of its `probe_calls`.
    baselines: HashMap<CallClass, f64>,
    probes: u64,
    window_started: Instant,
    samples: Vec<Sample>,
    /// This window's calls per size class, and the most of any one class.
    calls_by_class: HashMap<CallClass, usize>,
    most_calls_of_a_class: usize,
    /// This window's calls of a size class that has a baseline.
    judgeable_calls: usize,
    /// This window's most calls of one size class that has no baseline.
    most_unmeasured_calls: usize,
    comments_in_window: u64,
    slowdowns: u64,
}

impl Controller {
    /// A controller starting its first window at `now`, at the initial rate
    /// (under the ceiling). The first window is a probe: it teaches the
    /// baselines before the rate grows.
    pub(crate) fn new(settings: PacingSettings, now: Instant) -> Controller {
        let rate = settings.initial_rate.min(settings.ceiling()).max(settings.min_rate.min(settings.ceiling()));
        Controller {
            settings,
            rate,
            slow_start: true,
            probing: Some(rate),
            cut_series_from: None,
            regrow_toward: None,
            deep_cut_calls: Vec::new(),
            windows_since_probe: 0,
            probe_calls: HashMap::new(),
            baselines: HashMap::new(),
            probes: 0,
            window_started: now,
            samples: Vec::new(),
            calls_by_class: HashMap::new(),
            most_calls_of_a_class: 0,
            judgeable_calls: 0,
            most_unmeasured_calls: 0,
            comments_in_window: 0,
            slowdowns: 0,
        }
    }

    /// The rate allowed now, comments per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// How many times the rate was cut.
    pub(crate) fn slowdowns(&self) -> u64 {
        self.slowdowns
    }

    /// How many times the baselines were learnt: in probes (the first window
    /// of the run included) and from windows still slow after deep cuts.
    pub(crate) fn probes(&self) -> u64 {
        self.probes
    }

    /// Records one call of `kind` over `rows` rows that took `latency`, ending
    /// at `now`; when that closes a window, returns the window's rate change.
    pub(crate) fn observe(&mut self, kind: CallKind, rows: usize, latency: Duration, now: Instant) -> Option<Change> {
        let class = size_class(rows);
        self.samples.push(Sample { kind, class, seconds: latency.as_secs_f64() });
        let calls = self.calls_by_class.entry((kind, class)).or_default();
        *calls += 1;
        self.most_calls_of_a_class = self.most_calls_of_a_class.max(*calls);
        if self.baselines.contains_key(&(kind, class)) {
            self.judgeable_calls += 1;
        } else {
            self.most_unmeasured_calls = self.most_unmeasured_calls.max(*calls);
        }
        if kind == CallKind::CommentFetch {
            self.comments_in_window += rows as u64;
        }
        let elapsed = now.saturating_duration_since(self.window_started);
        let window = self.settings.window();
        // A window stretches until it has enough calls to say something: a
        // probe until one size class can be learnt, any other until the calls
        // with a baseline make a median, or until it is plain that its calls
        // are of sizes no probe measured; at most LONGEST_WINDOW_STRETCH window lengths.
        let enough = if self.probing.is_some() {
            self.most_calls_of_a_class >= MIN_BASELINE_CALLS
        } else {
            self.judgeable_calls >= MIN_WINDOW_CALLS || self.sizes_unmeasured()
        };
        if elapsed < window || (!enough && elapsed < window * LONGEST_WINDOW_STRETCH) {
            return None;
        }
        let change = match self.probing.take() {
            Some(resume_rate) => self.end_probe(resume_rate),
            None => self.close_window(elapsed),
        };
        self.window_started = now;
        self.samples.clear();
        self.calls_by_class.clear();
        self.most_calls_of_a_class = 0;
        self.judgeable_calls = 0;
        self.most_unmeasured_calls = 0;
        self.comments_in_window = 0;
        change
    }

    /// Whether this window's calls are mostly of sizes no probe measured: too
    /// few with a baseline to judge the window, and enough of one size
    /// without one for a probe to learn it. The size of a run's calls
    /// drifts as it goes: the benchmark's products come largest first, so
    /// its index pages cross from 129-256 rows to 65-128 and then to 33-64,
    /// and in contention round 25 windows of 143 to 388 calls held 0 to 10
    /// with a baseline, each stretched to five seconds and grew the rate by
    /// one step until the next scheduled probe: 65 s of a 182-s run.
    fn sizes_unmeasured(&self) -> bool {
        self.judgeable_calls < MIN_WINDOW_CALLS && self.most_unmeasured_calls >= MIN_BASELINE_CALLS
    }

    /// Ends a probe: its calls become the baselines of their size classes, and
    /// the rate goes back to where it was before the probe.
    fn end_probe(&mut self, resume_rate: f64) -> Option<Change> {
        self.windows_since_probe = 0;
        let calls = std::mem::take(&mut self.samples);
        self.learn_baselines(&calls);
        tracing::debug!(calls = calls.len(), classes = self.probe_calls.len(), "pacing probe ended");
        let from = self.rate;
        self.rate = resume_rate;
        (self.rate != from).then_some(Change::Probe { from, to: self.rate })
    }

    /// Takes `calls` as a probe's (a probe window's, or those gathered at a
    /// deep cut): they become the newest probe's calls of their size classes,
    /// and the baselines are the median of the kept probes' calls again.
    fn learn_baselines(&mut self, calls: &[Sample]) {
        self.probes += 1;
        self.end_cut_series();
        let mut by_class: HashMap<CallClass, Vec<f64>> = HashMap::new();
        for sample in calls {
            by_class.entry((sample.kind, sample.class)).or_default().push(sample.seconds);
        }
        for (class, seconds) in by_class {
            self.probe_calls.entry(class).or_default().push_back((self.probes, seconds));
        }
        // The second probe replaces the first, warm-up one (see SECOND_PROBE_AFTER_WINDOWS).
        let oldest_kept = if self.probes == 2 { 1 } else { self.probes.saturating_sub(PROBES_KEPT) };
        for probes in self.probe_calls.values_mut() {
            while probes.front().is_some_and(|(number, _)| *number <= oldest_kept) {
                probes.pop_front();
            }
        }
        self.probe_calls.retain(|_, probes| !probes.is_empty());
        // A median of many calls, not the lowest of many medians: the lowest
        // of thirty noisy window medians sits far below the typical one even
        // when nothing changes.
        self.baselines = self
            .probe_calls
            .iter()
            .filter_map(|(class, probes)| {
                let mut calls: Vec<f64> = probes.iter().flat_map(|(_, seconds)| seconds.iter().copied()).collect();
                calls.sort_by(f64::total_cmp);
                (calls.len() >= MIN_BASELINE_CALLS).then(|| (*class, calls[calls.len() / 2]))
            })
            .collect();
    }

    /// Ends the current series of cuts, and forgets the calls gathered in it.
    fn end_cut_series(&mut self) {
        self.cut_series_from = None;
        self.deep_cut_calls.clear();
    }

    /// Judges a window against the baselines and moves the rate; starts a
    /// probe when one is due, or when the window's calls were of sizes no
    /// probe measured.
    fn close_window(&mut self, elapsed: Duration) -> Option<Change> {
        let change = self.judge(elapsed);
        self.windows_since_probe += 1;
        let probe_every = if self.probes == 1 { SECOND_PROBE_AFTER_WINDOWS } else { PROBE_EVERY_WINDOWS };
        let due = self.windows_since_probe >= probe_every || self.sizes_unmeasured();
        if !due || matches!(change, Some(Change::SlowDown { .. })) {
            return change;
        }
        // Probe: go down to a share of the rate for one window, so that what
        // the calls take then is what HBase gives with little of this run on it.
        let from = self.rate;
        let floor = self.settings.min_rate.min(self.settings.ceiling());
        self.probing = Some(from);
        self.rate = (from * PROBE_SHARE).max(floor);
        Some(Change::Probe { from, to: self.rate })
    }

    fn judge(&mut self, elapsed: Duration) -> Option<Change> {
        // Each call of a size class that has a baseline, against it. Calls of
        // other classes wait for a probe to teach theirs.
        let mut slowness: Vec<f64> = self
            .samples
            .iter()
            .filter_map(|sample| {
                let baseline = self.baselines.get(&(sample.kind, sample.class))?;
                Some(sample.seconds / baseline.max(1e-6))
            })
            .collect();
        let used = self.comments_in_window as f64 / elapsed.as_secs_f64().max(1e-3);
        let from = self.rate;
        slowness.sort_by(f64::total_cmp);
        let median = slowness.get(slowness.len() / 2).copied();
        tracing::debug!(
            calls = self.samples.len(),
            judged = slowness.len(),
            slowness = median.map(|median| format!("{median:.2}")),
            used = used.round() as u64,
            rate = from.round() as u64,
            "pacing window"
        );
        let unmistakable = |median: f64| {
            slowness.len() >= MIN_UNMISTAKABLE_CALLS && median > self.settings.tolerance * UNMISTAKABLE_FACTOR
        };
        let median = match median {
            Some(median) if slowness.len() >= MIN_WINDOW_CALLS || unmistakable(median) => median,
            // Calls of sizes no probe measured: the probe that starts at the
            // end of this window will measure them. The step below is safe
            // for a window sparse because the rate is low, not for one whose
            // many calls simply cannot be judged, so the rate stays.
            _ if self.sizes_unmeasured() => return None,
            // Too few calls to judge: a rate too low to congest anything, so
            // it grows by the step; otherwise a run cut to its floor could
            // never collect the calls that would show HBase recovered.
            _ => {
                if used < self.rate * USED_SHARE_TO_GROW {
                    return None;
                }
                self.rate = (self.rate + self.settings.increase_step).min(self.settings.ceiling());
                return (self.rate > from).then_some(Change::SpeedUp { from, to: self.rate });
            }
        };
        if median > self.settings.tolerance {
            self.slow_start = false;
            let floor = self.settings.min_rate.min(self.settings.ceiling());
            let series_from = *self.cut_series_from.get_or_insert(self.rate.min(used));
            let cut_deep = self.rate <= floor || self.rate <= series_from * UNRELIEVED_CUT_SHARE;
            if cut_deep {
                // Cut deep (or to the floor) and still as slow: the run is
                // as quiet as in a probe, so this window is one. At a rate
                // this low a window may not hold MIN_BASELINE_CALLS calls of
                // one size class (in contention round 24, when one window
                // had to, the rule never fired), so its calls are
                // gathered with those of the slow windows before it, and the
                // rate held meanwhile: cutting further would not relieve
                // HBase and would only make the gathering slower.
                self.deep_cut_calls.extend_from_slice(&self.samples);
                if most_calls_of_one_class(&self.deep_cut_calls) < MIN_BASELINE_CALLS {
                    return None;
                }
                // The gathered calls alone become the baselines (the older
                // probes measured an HBase that is gone, and a median over
                // both stays near them). The rate stays and grows from here,
                // judged window by window, so a wrong guess costs the readers
                // little, and the next probe measures again (a due one, put
                // off by the slow windows, starts at the end of this one).
                let gathered = std::mem::take(&mut self.deep_cut_calls);
                self.probe_calls.clear();
                self.learn_baselines(&gathered);
                tracing::info!(
                    slowness = format!("{median:.1}"),
                    rate = self.rate.round() as u64,
                    calls = gathered.len(),
                    "HBase calls stayed slow with the run cut deep; taking their latency as the new baseline"
                );
                return None;
            }
            // Cut from what the run used, when it used less than it was
            // allowed (its calls in flight, not the rate, held it back): half
            // of a rate nobody reached cuts nothing, and the windows it takes
            // to come down to the rate in use are windows of readers waiting
            // (TCP's congestion-window validation, RFC 7661, cuts from the
            // data actually in flight the same way).
            self.rate = (self.rate.min(used) * self.settings.decrease_factor).max(floor);
            self.regrow_toward = Some(series_from * REGROWTH_TARGET_SHARE);
            self.slowdowns += 1;
            return Some(Change::SlowDown { from, to: self.rate, slowness: median });
        }
        if median > self.settings.hold_above {
            self.slow_start = false;
            return None;
        }
        if used < self.rate * USED_SHARE_TO_GROW {
            return None;
        }
        let grown = if self.slow_start {
            let doubled = self.rate * 2.0;
            if doubled >= self.settings.slow_start_threshold {
                self.slow_start = false;
            }
            doubled.min(self.settings.slow_start_threshold.max(self.rate + self.settings.increase_step))
        } else {
            let step = match self.regrow_toward {
                Some(target) => ((target - self.rate) * REGROWTH_SHARE_OF_GAP).min(self.rate),
                None => 0.0,
            };
            self.rate + step.max(self.settings.increase_step)
        };
        self.rate = grown.min(self.settings.ceiling());
        if self.regrow_toward.is_some_and(|target| self.rate >= target) {
            self.regrow_toward = None;
        }
        if self.cut_series_from.is_some_and(|series_from| self.rate >= series_from * CUT_SERIES_WON_BACK_SHARE) {
            self.end_cut_series();
        }
        (self.rate > from).then_some(Change::SpeedUp { from, to: self.rate })
    }
}

/// The most calls of any one size class among `samples`.
fn most_calls_of_one_class(samples: &[Sample]) -> usize {
    let mut calls_by_class: HashMap<CallClass, usize> = HashMap::new();
    samples
        .iter()
        .map(|sample| {
            let calls = calls_by_class.entry((sample.kind, sample.class)).or_default();
            *calls += 1;
            *calls
        })
        .max()
        .unwrap_or(0)
}

/// The allowed rate at one moment of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateSample {
    /// Milliseconds since the run started.
    pub at_ms: u64,
    /// Comments per second allowed from then on.
    pub rate: f64,
}

/// What pacing did during a run (part of [`crate::RunReport`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaceReport {
    /// `adaptive` or `off`.
    pub mode: PaceMode,
    /// The hard ceiling, comments per second, if one was set.
    pub max_rate: Option<f64>,
    /// Comments scored per second over the whole run.
    pub mean_rate: f64,
    /// Times the adaptive pacing cut the rate.
    pub slowdowns: u64,
    /// Times the baselines were learnt: in probes (windows at a quarter of
    /// the rate; the run's first window is one) and from the calls of windows
    /// still slow after the rate was cut deep.
    pub probes: u64,
    /// The allowed rate over time (adaptive mode; at most 240 samples, evenly thinned).
    pub rate_samples: Vec<RateSample>,
}

/// The allowed rate over time, in bounded memory: when the series is full,
/// every other sample is dropped and samples are taken half as often.
#[derive(Debug)]
struct RateHistory {
    samples: Vec<RateSample>,
    every: Duration,
    last: Option<Instant>,
}

impl RateHistory {
    fn new(every: Duration) -> RateHistory {
        RateHistory { samples: Vec::new(), every, last: None }
    }

    fn record(&mut self, started: Instant, now: Instant, rate: f64) {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < self.every) {
            return;
        }
        if self.samples.len() >= MAX_RATE_SAMPLES {
            let mut index = 0;
            self.samples.retain(|_| {
                index += 1;
                index % 2 == 1
            });
            self.every = self.every.saturating_mul(2);
        }
        self.last = Some(now);
        let at_ms = u64::try_from(now.saturating_duration_since(started).as_millis()).unwrap_or(u64::MAX);
        self.samples.push(RateSample { at_ms, rate });
    }
}

struct Bucket {
    tokens: f64,
    updated: Instant,
}

struct Adaptive {
    controller: Controller,
    history: RateHistory,
}

/// The rate every product task of a run acquires comments from; cheap to clone.
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<PacerInner>,
}

struct PacerInner {
    mode: PaceMode,
    max_rate: Option<f64>,
    started: Instant,
    /// The allowed rate as f64 bits; infinite when unlimited.
    rate_bits: AtomicU64,
    /// Waiters queue on this lock in arrival order (tokio's mutex is fair), so
    /// one product cannot starve the others.
    bucket: tokio::sync::Mutex<Bucket>,
    adaptive: Option<Mutex<Adaptive>>,
    /// Turns for HBase calls when paced adaptively (`max_in_flight` of them).
    turns: Option<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("mode", &self.inner.mode)
            .field("max_rate", &self.inner.max_rate)
            .field("rate", &self.rate())
            .finish_non_exhaustive()
    }
}

impl Pacer {
    /// A pacer following `settings`, starting now.
    pub fn new(settings: &PacingSettings) -> Pacer {
        let now = Instant::now();
        let (rate, adaptive) = match settings.mode {
            PaceMode::Adaptive => {
                let controller = Controller::new(settings.clone(), now);
                let rate = controller.rate();
                let mut history = RateHistory::new(settings.window());
                history.record(now, now, rate);
                (rate, Some(Mutex::new(Adaptive { controller, history })))
            }
            PaceMode::Off => (settings.ceiling(), None),
        };
        metrics::gauge!(PACE_RATE).set(if rate.is_finite() { rate } else { 0.0 });
        Pacer {
            inner: Arc::new(PacerInner {
                mode: settings.mode,
                max_rate: settings.max_rate,
                started: now,
                rate_bits: AtomicU64::new(rate.to_bits()),
                bucket: tokio::sync::Mutex::new(Bucket { tokens: rate_burst(rate), updated: now }),
                turns: adaptive.is_some().then(|| tokio::sync::Semaphore::new(settings.max_in_flight)),
                adaptive,
            }),
        }
    }

    /// A pacer that never waits (explanations, and `--pace off` without a ceiling).
    pub fn unlimited() -> Pacer {
        Pacer::new(&PacingSettings { mode: PaceMode::Off, max_rate: None, ..PacingSettings::default() })
    }

    /// The rate allowed now, comments per second (infinite when unlimited).
    pub fn rate(&self) -> f64 {
        f64::from_bits(self.inner.rate_bits.load(Ordering::Relaxed))
    }

    /// Waits until `comments` may be fetched. A request larger than the burst
    /// is let through when the bucket is not in debt and leaves it in debt, so
    /// the next caller waits for it: the average rate holds for any page size.
    pub async fn acquire(&self, comments: usize) {
        if self.rate().is_infinite() || comments == 0 {
            return;
        }
        let mut bucket = self.inner.bucket.lock().await;
        loop {
            let rate = self.rate();
            let now = Instant::now();
            let refill = rate * now.saturating_duration_since(bucket.updated).as_secs_f64();
            bucket.tokens = (bucket.tokens + refill).min(rate_burst(rate));
            bucket.updated = now;
            if bucket.tokens >= 0.0 {
                bucket.tokens -= comments as f64;
                return;
            }
            let wait = Duration::from_secs_f64(-bucket.tokens / rate).min(LONGEST_WAIT_STEP);
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    /// Makes one HBase call of the run: waits for a turn when paced
    /// adaptively (at most `max_in_flight` calls at once), then returns what
    /// `call` returned and how long it took from when it had its turn.
    pub(crate) async fn call<T>(&self, call: impl std::future::Future<Output = T>) -> (T, Duration) {
        // The semaphore is never closed, so a turn always comes.
        let _turn = match &self.inner.turns {
            Some(turns) => turns.acquire().await.ok(),
            None => None,
        };
        let asked = Instant::now();
        let answer = call.await;
        (answer, asked.elapsed())
    }

    /// Reports one HBase call of the run; in adaptive mode it may move the rate.
    pub(crate) fn observe(&self, kind: CallKind, rows: usize, latency: Duration) {
        let Some(adaptive) = &self.inner.adaptive else {
            return;
        };
        let now = Instant::now();
        // A poisoned lock means a panic while pacing; keep going with its state.
        let mut adaptive = adaptive.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(change) = adaptive.controller.observe(kind, rows, latency, now) else {
            return;
        };
        let rate = adaptive.controller.rate();
        self.inner.rate_bits.store(rate.to_bits(), Ordering::Relaxed);
        adaptive.history.record(self.inner.started, now, rate);
        metrics::gauge!(PACE_RATE).set(rate);
        if let Change::SlowDown { from, to, slowness } = change {
            metrics::counter!(PACE_SLOWDOWNS).increment(1);
            tracing::info!(
                from = from.round() as u64,
                to = to.round() as u64,
                slowness = format!("{slowness:.1}"),
                "HBase calls slowed down; pacing the run down (comments/s)"
            );
        }
    }

    /// What the pacing did, for a run that scored `comments` in `duration`.
    pub fn report(&self, comments: u64, duration: Duration) -> PaceReport {
        let (slowdowns, probes, rate_samples) = match &self.inner.adaptive {
            Some(adaptive) => {
                let adaptive = adaptive.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let controller = &adaptive.controller;
                (controller.slowdowns(), controller.probes(), adaptive.history.samples.clone())
            }
            None => (0, 0, Vec::new()),
        };
        PaceReport {
            mode: self.inner.mode,
            max_rate: self.inner.max_rate,
            mean_rate: comments as f64 / duration.as_secs_f64().max(1e-3),
            slowdowns,
            probes,
            rate_samples,
        }
    }
}

fn rate_burst(rate: f64) -> f64 {
    if rate.is_finite() {
        (rate * BURST_SECONDS).max(1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_millis(5);

    /// The rate `pacer` runs at outside probes (during one, the rate it goes back to).
    fn steady_rate(pacer: &Pacer) -> f64 {
        let adaptive = pacer.inner.adaptive.as_ref().expect("adaptive").lock().expect("lock");
        adaptive.controller.probing.unwrap_or(adaptive.controller.rate)
    }

    fn settings() -> PacingSettings {
        PacingSettings {
            initial_rate: 1_000.0,
            slow_start_threshold: 8_000.0,
            min_rate: 100.0,
            increase_step: 500.0,
            window_ms: 1_000,
            ..PacingSettings::default()
        }
    }

    /// A controller fed whole windows of comment fetches, one second each.
    struct Windows {
        controller: Controller,
        end: Instant,
    }

    impl Windows {
        fn new(settings: PacingSettings) -> Windows {
            let end = Instant::now();
            Windows { controller: Controller::new(settings, end), end }
        }

        /// Feeds the next window of comment fetches, `(rows, latency)` each:
        /// all but the last observed half a second before its end, the last
        /// at its end, where it closes the window. Returns what the
        /// controller decided.
        fn next(&mut self, calls: Vec<(usize, Duration)>) -> Option<Change> {
            let second = Duration::from_secs(1);
            self.end += second;
            let (last, earlier) = calls.split_last().expect("a window has calls");
            for &(rows, latency) in earlier {
                self.controller.observe(CallKind::CommentFetch, rows, latency, self.end - second / 2);
            }
            self.controller.observe(CallKind::CommentFetch, last.0, last.1, self.end)
        }
    }

    /// Drives `pacer` for `seconds`: each simulated product task acquires a
    /// page of 100 comments, "fetches" it in `latency(rate)`, reports the call,
    /// and goes again. Returns the comments fetched.
    async fn drive(pacer: &Pacer, seconds: u64, latency: impl Fn(f64) -> Duration + Send + Sync + 'static) -> u64 {
        let latency = Arc::new(latency);
        let end = Instant::now() + Duration::from_secs(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let (pacer, latency) = (pacer.clone(), latency.clone());
            tasks.spawn(async move {
                let mut fetched = 0;
                while Instant::now() < end {
                    pacer.acquire(100).await;
                    let took = latency(pacer.rate());
                    tokio::time::sleep(took).await;
                    pacer.observe(CallKind::CommentFetch, 100, took);
                    fetched += 100;
                }
                fetched
            });
        }
        let mut fetched = 0;
        while let Some(done) = tasks.join_next().await {
            fetched += done.expect("task");
        }
        fetched
    }

    #[tokio::test(start_paused = true)]
    async fn rising_latency_slows_the_run_down_and_recovery_speeds_it_up() {
        let pacer = Pacer::new(&settings());
        // Calm: slow start, then additive increase.
        drive(&pacer, 10, |_| IDLE).await;
        let calm_rate = steady_rate(&pacer);
        assert!(calm_rate > 8_000.0, "the rate grew while calls stayed fast: {calm_rate}");
        assert_eq!(pacer.report(0, Duration::from_secs(1)).slowdowns, 0);

        // HBase turns slow (four times the idle latency): the rate is cut.
        drive(&pacer, 5, |_| IDLE * 4).await;
        let slow_rate = steady_rate(&pacer);
        assert!(slow_rate <= calm_rate / 8.0, "the rate fell from {calm_rate} to {slow_rate}");
        assert!(slow_rate >= 100.0, "never below the floor: {slow_rate}");
        let slowdowns = pacer.report(0, Duration::from_secs(1)).slowdowns;
        assert!((3..=5).contains(&slowdowns), "at most one slow-down per window: {slowdowns}");

        // HBase recovers: the rate regrows quickly to three quarters of where
        // the cuts began, then by the step (at a low rate a window stretches
        // until it has a dozen calls to judge, and the window still under way
        // when HBase recovered may cut once more). By the step alone it was
        // about half the calm rate after these 12 s.
        drive(&pacer, 12, |_| IDLE).await;
        let recovered = steady_rate(&pacer);
        assert!(recovered >= calm_rate * 0.75, "the rate regrew from {slow_rate} to {recovered} (calm: {calm_rate})");
        assert!(recovered <= calm_rate, "not past where the cuts began: {recovered} (calm: {calm_rate})");
    }

    /// Drives `pacer` for `seconds` with calls whose latency does not depend on
    /// the rate at all but is noisy, from half to twice `IDLE` (single calls on
    /// a loaded machine vary that much), over pages of every size from 1 to 250
    /// rows, as products of every size give. Each page is an index scan and a
    /// multi-get. Returns the comments fetched.
    async fn drive_noisy(pacer: &Pacer, seconds: u64, seed: u64) -> u64 {
        use rand::{Rng, SeedableRng};
        let end = Instant::now() + Duration::from_secs(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..4 {
            let pacer = pacer.clone();
            tasks.spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed + task);
                let mut noisy = move || IDLE.mul_f64(rng.random_range(-0.7f64..0.7).exp());
                let mut sizes = rand::rngs::StdRng::seed_from_u64(seed + 100 + task);
                let mut fetched = 0;
                while Instant::now() < end {
                    let rows = if sizes.random_bool(0.6) { 250 } else { sizes.random_range(1..250) };
                    let scanned = noisy();
                    tokio::time::sleep(scanned).await;
                    pacer.observe(CallKind::IndexPage, rows, scanned);
                    pacer.acquire(rows).await;
                    let took = noisy();
                    tokio::time::sleep(took).await;
                    pacer.observe(CallKind::CommentFetch, rows, took);
                    fetched += rows as u64;
                }
                fetched
            });
        }
        let mut fetched = 0;
        while let Some(done) = tasks.join_next().await {
            fetched += done.expect("task");
        }
        fetched
    }

    #[tokio::test(start_paused = true)]
    async fn noise_that_the_rate_does_not_cause_leaves_the_run_its_speed() {
        for seed in [1, 2, 3] {
            let pacer = Pacer::new(&settings());
            drive_noisy(&pacer, 60, seed).await;
            let fetched = drive_noisy(&pacer, 60, seed + 10).await;
            let mean = fetched as f64 / 60.0;
            // Calls of a few milliseconds allow far more than this; the floor is 100.
            assert!(mean >= 5_000.0, "seed {seed}: {mean} comments/s, held down by noise");
            let slowdowns = pacer.report(0, Duration::from_secs(1)).slowdowns;
            assert!(slowdowns <= 12, "seed {seed}: {slowdowns} slow-downs in 120 windows of noise");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn slowness_the_run_cannot_relieve_becomes_the_new_baseline() {
        let pacer = Pacer::new(&settings());
        drive(&pacer, 5, |_| IDLE).await;
        let calm_rate = steady_rate(&pacer);
        // The machine turns three times slower for good, whatever the run
        // does. First the run backs off, a cut per window.
        drive(&pacer, 4, |_| IDLE * 3).await;
        let backed_off = steady_rate(&pacer);
        assert!(backed_off <= calm_rate / 8.0, "the run backs off from {calm_rate}: {backed_off}");
        let slowdowns = pacer.report(0, Duration::from_secs(1)).slowdowns;
        // Cut to a sixteenth and its calls no faster, it takes their latency
        // as the baseline: it cuts no more and speeds up again within
        // seconds, toward where the cuts began. (Before, a slow window put
        // the probe off, so the run halved on to its floor; this test then
        // allowed it 200 s.)
        drive(&pacer, 12, |_| IDLE * 3).await;
        let report = pacer.report(0, Duration::from_secs(1));
        assert_eq!(report.slowdowns, slowdowns, "no cut once the slowness was learnt");
        assert!(steady_rate(&pacer) >= 2_000.0, "the run speeds up again: {}", steady_rate(&pacer));
        assert!(steady_rate(&pacer) <= calm_rate, "not past where it was: {}", steady_rate(&pacer));
    }

    #[tokio::test(start_paused = true)]
    async fn a_load_that_tracks_the_rate_settles_near_the_knee() {
        // Latency stays idle up to 5,000 comments/s and grows with the rate
        // beyond it, as a saturating HBase does.
        let pacer = Pacer::new(&settings());
        let knee = |rate: f64| if rate <= 5_000.0 { IDLE } else { IDLE.mul_f64(1.0 + (rate - 5_000.0) / 1_000.0) };
        let fetched_first = drive(&pacer, 30, knee).await;
        let fetched = drive(&pacer, 30, knee).await;
        let mean = fetched as f64 / 30.0;
        assert!((2_000.0..=7_000.0).contains(&mean), "the rate hovers around the knee: {mean} comments/s");
        assert!(fetched_first > 0);
        // The hold band stops the growth as soon as calls slow down a little,
        // so the run neither overshoots far past the knee nor saws up and down.
        assert!(steady_rate(&pacer) <= 5_000.0 * 1.25, "held near the knee, not far past it: {}", steady_rate(&pacer));
        assert!(pacer.report(0, Duration::from_secs(1)).slowdowns <= 2);
        // And it stays there: the probes see the latency fall when the run
        // backs off, so the slowness the run causes never becomes its baseline
        // (a baseline learnt from the run's own windows crept to three times
        // the knee within five minutes).
        drive(&pacer, 300, knee).await;
        assert!(steady_rate(&pacer) <= 5_000.0 * 1.25, "still near the knee: {}", steady_rate(&pacer));
    }

    #[tokio::test(start_paused = true)]
    async fn the_ceiling_holds_in_both_modes() {
        for mode in [PaceMode::Adaptive, PaceMode::Off] {
            let pacer = Pacer::new(&PacingSettings { mode, max_rate: Some(3_000.0), ..settings() });
            let fetched = drive(&pacer, 20, |_| IDLE).await;
            let mean = fetched as f64 / 20.0;
            assert!(pacer.rate() <= 3_000.0, "{mode:?}: rate {}", pacer.rate());
            // The burst and the pages in flight allow a little over; never much.
            assert!(mean <= 3_000.0 * 1.05, "{mode:?}: {mean} comments/s over a 3,000 ceiling");
            assert!(mean >= 3_000.0 * 0.8, "{mode:?}: {mean} comments/s, well under the ceiling");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn off_without_a_ceiling_never_waits() {
        let pacer = Pacer::new(&PacingSettings { mode: PaceMode::Off, ..settings() });
        let started = Instant::now();
        for _ in 0..1_000 {
            pacer.acquire(1_000).await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert!(pacer.rate().is_infinite());
        let report = pacer.report(1_000_000, Duration::from_secs(2));
        assert_eq!((report.mode, report.slowdowns, report.mean_rate), (PaceMode::Off, 0, 500_000.0));
        assert!(report.rate_samples.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_paced_run_has_at_most_max_in_flight_calls_and_times_them_from_their_turn() {
        for (mode, max_in_flight, expected_peak) in
            [(PaceMode::Adaptive, 1, 1), (PaceMode::Adaptive, 2, 2), (PaceMode::Off, 1, 8)]
        {
            let pacer = Pacer::new(&PacingSettings { mode, max_in_flight, ..settings() });
            let in_flight = Arc::new(AtomicU64::new(0));
            let peak = Arc::new(AtomicU64::new(0));
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..8 {
                let (pacer, in_flight, peak) = (pacer.clone(), in_flight.clone(), peak.clone());
                calls.spawn(async move {
                    let ((), took) = pacer
                        .call(async {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await;
                    took
                });
            }
            while let Some(took) = calls.join_next().await {
                // Each call took its own 10 ms, however long it waited for its turn.
                assert_eq!(took.expect("call"), Duration::from_millis(10), "{mode:?}, {max_in_flight}");
            }
            assert_eq!(peak.load(Ordering::SeqCst), expected_peak, "{mode:?}, max_in_flight {max_in_flight}");
        }
    }

    #[test]
    fn a_big_call_is_compared_with_big_calls() {
        let mut windows = Windows::new(settings());
        // Eight calls of 10 rows taking `small` ms and eight of 1,000 rows
        // taking `big` ms.
        let mix = |small: u64, big: u64| -> Vec<(usize, Duration)> {
            (0..8).flat_map(|_| [(10, Duration::from_millis(small)), (1_000, Duration::from_millis(big))]).collect()
        };
        // Window 1, the first probe, teaches two size classes: 10 rows in 2 ms,
        // 1,000 rows in 40 ms.
        assert_eq!(windows.next(mix(2, 40)), None);
        // Window 2: the same mix at the same latencies is calm, though the big
        // calls are 20 times slower than the small ones.
        assert_eq!(windows.next(mix(2, 40)), Some(Change::SpeedUp { from: 1_000.0, to: 2_000.0 }));
        // Window 3: small calls three times slower than theirs are congestion.
        let change = windows.next(mix(6, 120));
        assert!(
            matches!(change, Some(Change::SlowDown { from, to, .. }) if from == 2_000.0 && to == 1_000.0),
            "{change:?}"
        );
    }

    #[test]
    fn a_slow_down_cuts_from_the_rate_the_run_used() {
        let mut windows = Windows::new(settings());
        // Windows of 40 calls of 100 rows: 4,000 comments/s, whatever the rate
        // allows (as when one call in flight is what holds a run back).
        for _ in 0..12 {
            windows.next(vec![(100, IDLE); 40]);
        }
        let allowed = windows.controller.probing.unwrap_or(windows.controller.rate());
        assert!(allowed >= 7_000.0, "the rate grew up to twice what the run used: {allowed}");
        // Past any probe, calls turn four times slower.
        while windows.controller.probing.is_some() {
            windows.next(vec![(100, IDLE); 40]);
        }
        let change = windows.next(vec![(100, IDLE * 4); 40]);
        assert!(
            matches!(change, Some(Change::SlowDown { to, .. }) if to == 2_000.0),
            "one cut halves the 4,000 comments/s in use, not the {allowed} allowed: {change:?}"
        );
    }

    /// A controller whose first window (a probe) learnt IDLE and whose next
    /// windows, at four times IDLE, cut it to its floor of 100; with the
    /// changes of those windows.
    fn cut_to_the_floor() -> (Windows, Vec<Option<Change>>) {
        let mut windows = Windows::new(settings());
        let changes = [IDLE, IDLE * 4, IDLE * 4, IDLE * 4, IDLE * 4]
            .into_iter()
            .map(|latency| windows.next(vec![(100, latency); 20]))
            .collect();
        (windows, changes)
    }

    #[test]
    fn a_run_at_its_floor_and_still_slow_learns_the_slowness_instead_of_cutting() {
        let (mut windows, changes) = cut_to_the_floor();
        let cut = |from, to| Some(Change::SlowDown { from, to, slowness: 4.0 });
        // The probe at the initial rate changes nothing; then a cut per window.
        assert_eq!(changes, [None, cut(1_000.0, 500.0), cut(500.0, 250.0), cut(250.0, 125.0), cut(125.0, 100.0)]);
        // At the floor (100) and as slow as ever: not a cut from 100 to 100,
        // but a new baseline, after which the same latency is calm.
        assert_eq!(windows.next(vec![(100, IDLE * 4); 20]), None);
        assert_eq!(windows.controller.slowdowns(), 4);
        assert_eq!(windows.next(vec![(100, IDLE * 4); 20]), Some(Change::SpeedUp { from: 100.0, to: 600.0 }));
    }

    #[test]
    fn a_few_unmistakably_slow_calls_at_the_floor_keep_the_old_baselines() {
        let (mut windows, _) = cut_to_the_floor();
        assert_eq!(windows.controller.rate(), 100.0, "cut to the floor");
        // Four calls ten times slower, over five window lengths: judged slow
        // (unmistakable), too few to become a baseline, so the idle one stays.
        windows.end += Duration::from_secs(4);
        windows.next(vec![(100, IDLE * 10); 4]);
        let baseline = windows.controller.baselines.get(&(CallKind::CommentFetch, size_class(100)));
        assert_eq!(baseline, Some(&IDLE.as_secs_f64()));
    }

    /// `per_class` comment fetches of each of four size classes (16, 32, 64
    /// and 128 rows), all taking `latency`: 960 comments when `per_class` is 4.
    fn four_sizes(per_class: usize, latency: Duration) -> Vec<(usize, Duration)> {
        (0..per_class).flat_map(|_| [16, 32, 64, 128].map(|rows| (rows, latency))).collect()
    }

    #[test]
    fn slow_windows_too_sparse_to_teach_a_baseline_alone_teach_one_together() {
        // As in contention round 24: a run cut to its floor by an HBase that
        // stays slow, whose windows hold calls of several sizes, too few of
        // any one size (4) to learn a baseline from (8).
        let mut windows = Windows::new(settings());
        // The first probe learns the four sizes at IDLE; three windows later
        // the second one does again, so no probe is due for a while.
        assert_eq!(windows.next(four_sizes(8, IDLE)), None);
        for _ in 0..3 {
            windows.next(four_sizes(4, IDLE));
        }
        assert_eq!(windows.next(four_sizes(8, IDLE)), Some(Change::Probe { from: 500.0, to: 2_000.0 }));
        // Twice as slow for good: cut after cut, down to the floor of 100.
        let slow = IDLE * 2;
        for _ in 0..4 {
            assert!(matches!(windows.next(four_sizes(4, slow)), Some(Change::SlowDown { .. })));
        }
        assert_eq!(windows.controller.rate(), 100.0);
        let (cuts, probes) = (windows.controller.slowdowns(), windows.controller.probes());
        // At the floor the slow windows' calls are gathered, the rate held;
        // two windows' calls make 8 of each size, and become the baselines.
        assert_eq!(windows.next(four_sizes(4, slow)), None);
        assert_eq!(windows.controller.probes(), probes, "one window's calls are too few");
        assert_eq!(windows.next(four_sizes(4, slow)), None);
        assert_eq!(windows.controller.probes(), probes + 1, "two windows' calls teach the baselines");
        assert_eq!(windows.controller.slowdowns(), cuts, "no cut at the floor");
        let baseline = windows.controller.baselines.get(&(CallKind::CommentFetch, size_class(16)));
        assert_eq!(baseline, Some(&slow.as_secs_f64()));
        // The slow latency is calm now: the run speeds up again by the step.
        assert_eq!(windows.next(four_sizes(4, slow)), Some(Change::SpeedUp { from: 100.0, to: 600.0 }));
    }

    #[test]
    fn a_calm_window_between_cuts_does_not_start_their_series_again() {
        // A floor far below, steep cuts (to an eighth) and a small step, so
        // that a series reaches a sixteenth of where it began (960
        // comments/s used: 60) above the floor.
        let settings = PacingSettings { min_rate: 10.0, decrease_factor: 0.125, increase_step: 50.0, ..settings() };
        let mut windows = Windows::new(settings);
        let (calm, slow) = (four_sizes(4, IDLE), four_sizes(4, IDLE * 2));
        assert_eq!(windows.next(four_sizes(8, IDLE)), None, "the first probe");
        let cut = |from, to| Some(Change::SlowDown { from, to, slowness: 2.0 });
        assert_eq!(windows.next(slow.clone()), cut(1_000.0, 120.0), "an eighth of the 960 comments/s used");
        // One calm window grows the rate (doubles it, on its way back to
        // where the cuts began); the series goes on.
        assert_eq!(windows.next(calm), Some(Change::SpeedUp { from: 120.0, to: 240.0 }));
        assert_eq!(windows.next(slow.clone()), cut(240.0, 30.0));
        // 30 comments/s is under a sixteenth of the 960 the series began
        // from: still as slow, the run holds there and gathers the window's
        // calls (and the second probe, put off by the cuts, starts), where a
        // series begun again at the calm window (from 240; a sixteenth: 15)
        // would cut on to the floor.
        let change = windows.next(slow);
        assert!(!matches!(change, Some(Change::SlowDown { .. })), "{change:?}");
        assert_eq!(windows.controller.slowdowns(), 2);
        assert_eq!(windows.controller.probing.unwrap_or(windows.controller.rate()), 30.0);
    }

    #[test]
    fn after_a_series_of_cuts_the_rate_regrows_quickly_to_three_quarters_of_its_start() {
        let mut windows = Windows::new(settings());
        // Windows of 100 calls of 100 rows: 10,000 comments/s, more than any
        // rate below reaches, so every window counts as using its rate.
        let window = |latency: Duration| vec![(100, latency); 100];
        let rates: Vec<f64> = std::iter::repeat_n(IDLE, 6)
            .chain(std::iter::repeat_n(IDLE * 4, 3))
            .chain(std::iter::repeat_n(IDLE, 7))
            .map(|latency| {
                windows.next(window(latency));
                windows.controller.rate()
            })
            .collect();
        // The first probe, slow start to its threshold (the second probe in
        // the fourth and fifth windows), a step: 8,500. Then three cuts.
        assert_eq!(rates[..9], [1_000.0, 2_000.0, 4_000.0, 2_000.0, 8_000.0, 8_500.0, 4_250.0, 2_125.0, 1_062.5]);
        // Calm again: the rate doubles, then goes half the way left to 6,375
        // (three quarters of the 8,500 the cuts began from) per window, at
        // least by the step; past 6,375 by the step alone. By the step alone
        // the seven windows would have taken it to 4,562.5.
        assert_eq!(rates[9..], [2_125.0, 4_250.0, 5_312.5, 5_843.75, 6_343.75, 6_843.75, 7_343.75]);
        assert_eq!(windows.controller.slowdowns(), 3);
    }

    #[test]
    fn calls_of_sizes_no_probe_measured_start_a_probe() {
        let mut windows = Windows::new(settings());
        // The first probe measures calls of 200 rows, and the next window of
        // them is calm.
        assert_eq!(windows.next(vec![(200, IDLE); 8]), None);
        assert_eq!(windows.next(vec![(200, IDLE); 12]), Some(Change::SpeedUp { from: 1_000.0, to: 2_000.0 }));
        // The products get smaller: calls of 100 rows, which no probe
        // measured. The window closes after one second, not five, and a probe
        // starts instead of the rate growing blind...
        assert_eq!(windows.next(vec![(100, IDLE); 20]), Some(Change::Probe { from: 2_000.0, to: 500.0 }));
        // ...which measures them, so the windows after it are judged again.
        assert_eq!(windows.next(vec![(100, IDLE); 8]), Some(Change::Probe { from: 500.0, to: 2_000.0 }));
        assert_eq!(windows.next(vec![(100, IDLE); 20]), Some(Change::SpeedUp { from: 2_000.0, to: 4_000.0 }));
    }

    #[test]
    fn slow_start_ends_when_calls_start_to_slow_down() {
        let mut windows = Windows::new(settings());
        // A window's calls, enough comments to count as using the rate.
        let full = |latency: Duration| vec![(100, latency); 100];
        windows.next(full(IDLE));
        // Calm: doubling.
        assert_eq!(windows.next(full(IDLE)), Some(Change::SpeedUp { from: 1_000.0, to: 2_000.0 }));
        // 30 % slower: within the tolerance, but above the hold band: slow
        // start is over and the rate holds; it grows by the step from now on.
        assert_eq!(windows.next(full(IDLE.mul_f64(1.3))), None);
        assert_eq!(windows.controller.rate(), 2_000.0);
        // Calm again: +500, not doubling. (That window is also the third
        // after the first probe, so the second probe starts from the new rate.)
        assert_eq!(windows.next(full(IDLE)), Some(Change::Probe { from: 2_500.0, to: 625.0 }));
    }

    #[test]
    fn slow_start_doubles_only_up_to_its_threshold() {
        let mut windows = Windows::new(PacingSettings { slow_start_threshold: 3_000.0, ..settings() });
        let full = || vec![(100, IDLE); 100];
        windows.next(full());
        assert_eq!(windows.next(full()), Some(Change::SpeedUp { from: 1_000.0, to: 2_000.0 }));
        // Doubling would pass the threshold: the rate stops at it...
        assert_eq!(windows.next(full()), Some(Change::SpeedUp { from: 2_000.0, to: 3_000.0 }));
        // ...and grows by the step after it, though every call stays idle
        // (then the second probe starts, from the grown rate).
        assert_eq!(windows.next(full()), Some(Change::Probe { from: 3_500.0, to: 875.0 }));
    }

    #[test]
    fn a_hold_band_above_the_tolerance_is_refused() {
        let settings = PacingSettings { hold_above: 2.0, tolerance: 1.5, ..settings() };
        let error = settings.validate().expect_err("hold_above over tolerance");
        assert!(error.contains("hold_above"), "{error}");
    }

    #[test]
    fn the_rate_series_stays_bounded_and_spans_the_run() {
        let start = Instant::now();
        let mut history = RateHistory::new(Duration::from_secs(1));
        for second in 0..10_000u64 {
            history.record(start, start + Duration::from_secs(second), second as f64);
        }
        assert!(history.samples.len() <= MAX_RATE_SAMPLES);
        assert!(history.samples.len() >= MAX_RATE_SAMPLES / 2);
        assert_eq!(history.samples[0].at_ms, 0);
        assert!(history.samples.last().expect("samples").at_ms >= 9_900_000 - 64_000);
    }

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!([1, 2, 3, 4, 5, 75, 128, 129, 1_000].map(size_class), [0, 1, 2, 2, 3, 7, 7, 8, 10]);
    }

    #[test]
    fn meaningless_settings_are_refused() {
        assert!(PacingSettings::default().validate().is_ok());
        for bad in [
            PacingSettings { max_rate: Some(0.0), ..PacingSettings::default() },
            PacingSettings { tolerance: 1.0, ..PacingSettings::default() },
            PacingSettings { decrease_factor: 1.0, ..PacingSettings::default() },
            PacingSettings { min_rate: f64::NAN, ..PacingSettings::default() },
            PacingSettings { window_ms: 0, ..PacingSettings::default() },
            PacingSettings { page_rows: 0, ..PacingSettings::default() },
            PacingSettings { page_rows: 5_001, ..PacingSettings::default() },
            PacingSettings { max_in_flight: 0, ..PacingSettings::default() },
        ] {
            assert!(bad.validate().is_err(), "accepted {bad:?}");
        }
    }
}
