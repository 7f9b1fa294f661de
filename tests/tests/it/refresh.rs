//! The rolling refresh's bound as pure logic, no HBase: every product is
//! ranked by a completed run at most `D - 1` nights before the latest
//! completed run (docs/incremental-runs.md), whatever the nights bring:
//! nights the daemon did not run or whose run failed, made up by the next
//! run that completes; and cuts that move, because the products changed and
//! a later listing of the whole range (a full run, an incremental run after
//! `D` missed nights, a full run of a shard) cut it again.
//!
//! Each night is planned as `ranker run --changed-since last` plans it, from
//! a run history of [`RunRecord`]s: the watermark's as-of time from the
//! newest completed runs covering the range (`ranker::history`), the nights
//! due from it ([`nights_due`]) and their slices under the cuts of the newest
//! completed runs that recorded cuts ([`refresh_ranges`]), or the whole range
//! when none did (`ranker::run`). The storage side, that the history says so
//! and the run ranks what the plan says, is in `incremental.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use common::keys::KeyRange;
use common::store::runs::{completed_cover, RunRecord, RunStatus};
use ranker::refresh::{night_of, nights_due, refresh_ranges, RefreshCuts, CUT_PARTS, DAY_MS};

/// Night 0 of every history: a UTC midnight.
const FIRST_NIGHT_MS: i64 = 20_000 * DAY_MS;
/// Product keys the histories draw from.
const UNIVERSE: usize = 300;
/// Histories tried per test, each from its own seed.
const HISTORIES: u64 = 150;

/// A deterministic source of choices (splitmix64): the same histories on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Product `number`'s key.
fn key(number: usize) -> &'static [u8] {
    static KEYS: LazyLock<Vec<Vec<u8>>> =
        LazyLock::new(|| (0..UNIVERSE).map(|number| format!("k{number:04}").into_bytes()).collect());
    &KEYS[number]
}

/// What a night's run over a range does with its refresh.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// No completed run covers the range: a full run, which ranks every product.
    Full,
    /// These key ranges, listed whole.
    Refresh(Vec<KeyRange>),
}

/// A run history, newest first, and what it ranked: the model of the run
/// records `ranker run` and `ranker-cron` keep.
struct History {
    days: u32,
    runs: Vec<RunRecord>,
    /// The completed runs that recorded cuts, newest first.
    cut_runs: Vec<RunRecord>,
    /// The products now.
    products: BTreeSet<usize>,
    /// Products written since the last completed run of everything: the
    /// next one finds them by cell time and ranks them.
    written: BTreeSet<usize>,
    /// The night each product was last ranked by a completed run.
    ranked: BTreeMap<usize, i64>,
}

impl History {
    fn new(days: u32, products: BTreeSet<usize>) -> History {
        History {
            days,
            runs: Vec::new(),
            cut_runs: Vec::new(),
            written: products.clone(),
            products,
            ranked: BTreeMap::new(),
        }
    }

    /// Tonight's plan for an incremental run over `range` as of `as_of_ms`.
    fn plan(&self, range: &KeyRange, as_of_ms: i64) -> Plan {
        let Some(cover) = completed_cover(&self.runs, range) else { return Plan::Full };
        let refreshed_until = cover.iter().map(|run| run.as_of_ms).min();
        let nights = nights_due(refreshed_until, as_of_ms);
        if nights.is_empty() {
            return Plan::Refresh(Vec::new());
        }
        let Some(cover) = completed_cover(&self.cut_runs, range) else { return Plan::Refresh(vec![range.clone()]) };
        let cuts: Vec<RefreshCuts> = cover
            .iter()
            .map(|run| RefreshCuts {
                range: run.key_range().expect("a range"),
                cuts: run.refresh_cuts.iter().flatten().map(|cut| hex::decode(cut).expect("hex")).collect(),
            })
            .collect();
        Plan::Refresh(refresh_ranges(&cuts, range, self.days, nights))
    }

    /// Cuts of `range` where its products are now, as a listing of the whole range samples them.
    fn cuts(&self, range: &KeyRange) -> Vec<String> {
        let listed: Vec<&[u8]> =
            self.products.iter().map(|number| key(*number)).filter(|key| range.contains(key)).collect();
        let mut cuts: Vec<String> = (1..CUT_PARTS.min(listed.len()))
            .map(|part| hex::encode(listed[part * listed.len() / CUT_PARTS.min(listed.len())]))
            .collect();
        cuts.dedup();
        cuts
    }

    /// One run over `range` as of `as_of_ms`, incremental (`--changed-since
    /// last`) or full; recorded as completed unless it `fails`, in which case
    /// nothing it did counts. Returns the products it ranked.
    fn run(&mut self, range: &KeyRange, as_of_ms: i64, incremental: bool, fails: bool) -> BTreeSet<usize> {
        let plan = if incremental { self.plan(range, as_of_ms) } else { Plan::Full };
        let (ranges, whole) = match plan {
            Plan::Full => (vec![range.clone()], true),
            Plan::Refresh(ranges) => {
                let whole = ranges.first() == Some(range);
                (ranges, whole)
            }
        };
        let everything = *range == KeyRange::everything();
        let mut ranked: BTreeSet<usize> = self
            .products
            .iter()
            .copied()
            .filter(|number| ranges.iter().any(|range| range.contains(key(*number))))
            .collect();
        if everything {
            ranked.extend(self.written.iter().copied().filter(|number| self.products.contains(number)));
        }
        let started = (self.runs.len() as i64) + 1;
        let mut record = RunRecord::started(format!("run-{started}"), "model".to_owned(), as_of_ms, 1, started)
            .with_range(&range.start, range.stop.as_deref());
        record.as_of_ms = as_of_ms;
        record.status = if fails { RunStatus::Failed } else { RunStatus::Succeeded };
        record.refresh_cuts = (whole && !fails).then(|| self.cuts(range));
        if record.refresh_cuts.is_some() {
            self.cut_runs.insert(0, record.clone());
        }
        self.runs.insert(0, record);
        if fails {
            return BTreeSet::new();
        }
        if everything {
            self.written.clear();
        }
        for number in &ranked {
            self.ranked.insert(*number, night_of(as_of_ms));
        }
        ranked
    }

    /// The bound after a completed run of everything as of `as_of_ms`: every
    /// product was ranked by a completed run less than `D` nights before.
    fn assert_bound(&self, as_of_ms: i64, seed: u64) {
        let tonight = night_of(as_of_ms);
        for number in &self.products {
            let last = self.ranked.get(number).copied();
            assert!(
                last.is_some_and(|last| tonight - last < i64::from(self.days)),
                "history {seed}, D = {}: product {number} last ranked on night {last:?}, tonight is {tonight}",
                self.days
            );
        }
    }
}

/// The time of a night's run: the daemon's slot, a few hours after midnight.
fn as_of(night: i64, dice: &mut Dice) -> i64 {
    FIRST_NIGHT_MS + night * DAY_MS + 3 * 3_600_000 + i64::try_from(dice.below(3_600_000)).expect("small")
}

#[test]
fn missed_and_failed_nights_are_made_up_by_the_next_completed_run() {
    // Runs that made up fewer than D nights, and runs after D or more.
    let (mut made_up, mut whole) = (0, 0);
    for seed in 0..HISTORIES {
        let mut dice = Dice(seed);
        let days = 1 + u32::try_from(dice.below(10)).expect("small");
        let products: BTreeSet<usize> = (0..UNIVERSE).filter(|_| dice.chance(50)).collect();
        let mut history = History::new(days, products);
        let everything = KeyRange::everything();
        // Night 0: a full run lists everything and records its cuts, which
        // stay put: the products do not change.
        history.run(&everything, as_of(0, &mut dice), false, false);
        let cuts = history.runs[0].refresh_cuts.clone().expect("a full run records cuts");
        let cuts = RefreshCuts {
            range: everything.clone(),
            cuts: cuts.iter().map(|cut| hex::decode(cut).expect("hex")).collect(),
        };
        let mut completed = 0;
        for night in 1..80 {
            // Down some nights, several in a row at times (up to D and more).
            if dice.chance(35) {
                continue;
            }
            let as_of_ms = as_of(night, &mut dice);
            let fails = dice.chance(15);
            let ranked = history.run(&everything, as_of_ms, true, fails);
            if fails {
                continue;
            }
            // Exactly the slices of the nights since the last completed run
            // up to tonight (the missed and failed ones made up), or
            // everything after `D` of them: nothing else.
            let since = (completed + 1)..=night;
            let slices: Vec<KeyRange> = if since.clone().count() >= days as usize {
                vec![everything.clone()]
            } else {
                since.clone().filter_map(|missed| cuts.slice(days, night_of(FIRST_NIGHT_MS) + missed)).collect()
            };
            let due: BTreeSet<usize> = history
                .products
                .iter()
                .copied()
                .filter(|number| slices.iter().any(|slice| slice.contains(key(*number))))
                .collect();
            assert_eq!(ranked, due, "history {seed}, D = {days}: night {night}, the last completed {completed}");
            history.assert_bound(as_of_ms, seed);
            // A second run the same night ranks nothing more.
            let again = history.plan(&everything, as_of_ms + 60_000);
            assert_eq!(again, Plan::Refresh(Vec::new()), "history {seed}: night {night} again");
            made_up += u64::from((2..days as usize).contains(&since.clone().count()));
            whole += u64::from(since.count() >= days as usize && days > 1);
            completed = night;
        }
    }
    assert!(
        made_up > HISTORIES && whole > HISTORIES / 4,
        "{made_up} runs made up nights, {whole} refreshed everything"
    );
}

#[test]
fn cuts_that_move_with_the_products_keep_every_product_within_d_nights() {
    let mut moved = 0;
    for seed in 0..HISTORIES {
        let mut dice = Dice(seed);
        let days = 1 + u32::try_from(dice.below(10)).expect("small");
        let products: BTreeSet<usize> = (0..UNIVERSE).filter(|_| dice.chance(40)).collect();
        let mut history = History::new(days, products);
        let everything = KeyRange::everything();
        for night in 0..80 {
            // Products come and go (a new product's first review is a change
            // tonight's run finds by time), so a new listing cuts elsewhere.
            if dice.chance(30) {
                for number in 0..UNIVERSE {
                    if dice.chance(4) {
                        if history.products.insert(number) {
                            history.written.insert(number);
                        } else {
                            history.products.remove(&number);
                        }
                    }
                }
            }
            if dice.chance(25) {
                continue;
            }
            let cuts_before = newest_cuts(&history);
            let as_of_ms = as_of(night, &mut dice);
            // Some nights an operator also runs a full run of everything, or
            // of a shard's range (its cuts then count inside that range,
            // the older ones outside it), before or after the nightly run.
            let extra = match dice.below(10) {
                0 => Some(everything.clone()),
                1 | 2 => {
                    let (mut start, mut stop) =
                        (dice.below(UNIVERSE as u64) as usize, dice.below(UNIVERSE as u64) as usize);
                    if start > stop {
                        (start, stop) = (stop, start);
                    }
                    Some(KeyRange {
                        start: key(start).to_vec(),
                        stop: (stop + 1 < UNIVERSE).then(|| key(stop + 1).to_vec()),
                    })
                }
                _ => None,
            };
            let extra_first = dice.chance(50);
            if let (Some(range), true) = (&extra, extra_first) {
                history.run(range, as_of_ms, false, false);
            }
            let fails = dice.chance(10);
            history.run(&everything, as_of_ms + 1, true, fails);
            if let (Some(range), false) = (&extra, extra_first) {
                history.run(range, as_of_ms + 2, false, false);
            }
            if !fails {
                history.assert_bound(as_of_ms, seed);
            }
            moved += u64::from(cuts_before.is_some() && cuts_before != newest_cuts(&history));
        }
    }
    assert!(moved > HISTORIES, "the cuts moved {moved} times in {HISTORIES} histories");
}

/// The newest recorded cuts and the range they cut.
fn newest_cuts(history: &History) -> Option<(String, Option<String>, Vec<String>)> {
    let run = history.runs.iter().find(|run| run.refresh_cuts.is_some())?;
    Some((run.range_start.clone(), run.range_stop.clone(), run.refresh_cuts.clone()?))
}
