//! The fair shares: how HBase is doing ([`Load`]), the limit of requests in
//! flight the service adapts to it ([`Counts::adapt`]), each client's
//! request rate, and the fair rate ([`Counts::fair_rate`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::identity::ClientId;

/// How HBase is doing when a request arrives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// As many operations run as the pool has connections, or one waits.
    pub busy: bool,
    /// How long operations take lately over their usual time.
    pub latency_ratio: f64,
    /// The connections of a gateway's pool.
    pub connections: usize,
    /// HBase operations running now.
    pub operations: usize,
}

/// How much slower than usual HBase operations must be for HBase to count as
/// congested: while a flood is shed, the other clients' answers should take
/// at most about twice their usual time, and their operations are only part
/// of an answer's time.
const CONGESTED_LATENCY: f64 = 1.5;
/// How often the limit may move.
const ADAPT_EVERY: Duration = Duration::from_millis(100);
/// How long the service counts as busy after HBase was last seen busy. A
/// flood keeps HBase busy only while it is admitted: held to its share, it
/// may leave connections free for a moment, and were the shares lifted then,
/// the requests let in would queue again before anyone noticed.
pub(super) const BUSY_FOR: Duration = Duration::from_secs(1);
/// How long the most requests the service served in a second counts as what
/// it can serve ([`Counts::fair_rate`]).
const SERVED_MEMORY_SECS: u64 = 10;
/// What the service can serve, over what it served in a second, at least:
/// before a flood came it served what the readers asked, and their rates
/// wander above that, so a headroom near 1 gives each reader a fair rate
/// just above its own and refuses it when it rises a little (the crowd
/// mixes of bench/fairness.sh show it).
const SERVED_HEADROOM_LEAST: f64 = 2.0;
/// What the service can serve, over what it served in a second, at most.
/// While it sheds, what it serves is what it lets in, which the limit holds
/// below what it could serve: it uses a part of the pool only, so what it
/// served is scaled to the whole pool ([`Counts::could_serve`]). Unbounded,
/// the scale would count a flood as polite on a machine short of CPU before
/// connections (its operations are quick and few run, so the part of the
/// pool used looks small) and let it in until its queue overflowed onto the
/// readers. Four is about what the service serves with shedding off over
/// what it serves with shedding on under a flood (bench/fairness.sh).
const SERVED_HEADROOM_MOST: f64 = 4.0;

/// The share of a second's finished requests that, ended unserved, shows it
/// past what the service can serve ([`Finished::overflowed`]), and the fewest
/// such requests that do: a client that hangs up now and then is no sign.
const OVERFLOWED_SHARE: f64 = 0.01;
const OVERFLOWED_LEAST: u64 = 10;

/// The service's requests in flight, by whether they were admitted within
/// their client's fair rate or in the room (over it, or a newcomer's), and
/// the admitted requests it has finished, served (answered without a 5xx)
/// or not (a 5xx, or dropped unanswered; a newcomer's not counted:
/// `Admission`'s drop): atomics, since every answer changes them and must
/// not wait for the lock.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) within: AtomicUsize,
    pub(super) in_room: AtomicUsize,
    pub(super) served: AtomicU64,
    pub(super) unserved: AtomicU64,
}

impl Totals {
    /// The count of requests in flight admitted in the room, or within
    /// their client's fair rate.
    pub(super) fn of(&self, in_room: bool) -> &AtomicUsize {
        if in_room {
            &self.in_room
        } else {
            &self.within
        }
    }

    /// The admitted requests finished so far.
    pub(super) fn finished(&self) -> Finished {
        Finished { served: self.served.load(Ordering::Relaxed), unserved: self.unserved.load(Ordering::Relaxed) }
    }
}

/// Admitted requests finished, served or not ([`Totals`]): counted since the
/// service started, or, as the difference of two such counts, in a while.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Finished {
    pub(super) served: u64,
    pub(super) unserved: u64,
}

impl Finished {
    /// What was finished since `mark`, an earlier count.
    fn since(self, mark: Finished) -> Finished {
        Finished {
            served: self.served.saturating_sub(mark.served),
            unserved: self.unserved.saturating_sub(mark.unserved),
        }
    }

    /// Whether so many of these ended unserved (HBase's queue full, the
    /// deadline passed) that the service was past what it can serve.
    fn overflowed(self) -> bool {
        let finished = self.served.saturating_add(self.unserved);
        self.unserved >= OVERFLOWED_LEAST && self.unserved as f64 >= finished as f64 * OVERFLOWED_SHARE
    }
}

/// One client's requests (admitted or not) in the current second and the
/// one before, and when it was first seen (ms since `Inner::started`) since
/// it was last away for a second.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    now: u32,
    before: u32,
    first_ms: u64,
}

impl Window {
    /// Requests a second: all of the current second's and the part of the
    /// one before it that is still within a second (`before`, the weight of
    /// that part), as if they had been spread evenly over it.
    fn rate(self, before: f64) -> f64 {
        f64::from(self.before) * before + f64::from(self.now)
    }

    /// Whether its client came less than a second before `now_ms`.
    fn is_new(self, now_ms: u64) -> bool {
        now_ms < self.first_ms.saturating_add(1_000)
    }
}

/// The fair rate ([`Counts::fair_rate`]), and the even share of what the
/// service can serve among all the clients seen, newcomers included, in
/// requests a second.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Share {
    pub(super) fair_rate: f64,
    pub(super) even_rate: f64,
}

/// Who is in flight, who asked how much lately, what the service served,
/// and the limit, under one lock.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Requests in flight per client. A finished request lowers its
    /// client's count without the lock; [`super::Clients::forget_idle`] drops
    /// the clients at zero.
    pub(super) in_flight: HashMap<ClientId, Arc<AtomicUsize>>,
    /// The requests of each client seen in the current second or the one
    /// before: who the service is kept for (a shopper between two pages, a
    /// polite reader at 20 a second still counts) and how much each asks.
    requests: HashMap<ClientId, Window>,
    /// The current second, since `Inner::started`.
    second: u64,
    /// [`Totals::finished`] when the current second began, and what the
    /// service could have served in the second before ([`Counts::could_serve`]).
    finished_mark: Finished,
    could_before: f64,
    /// The HBase operations running, summed over the requests seen in the
    /// current second, and how many requests that is: their mean is how
    /// much of the pool the second used.
    operations_seen: u64,
    requests_seen: u64,
    /// What the service could have served in each of the last
    /// [`SERVED_MEMORY_SECS`] seconds it was asked anything, by second.
    served_by_second: VecDeque<(u64, f64)>,
    /// Until when (ms since `Inner::started`) the service counts as busy:
    /// [`BUSY_FOR`] after HBase was last seen busy.
    pub(super) busy_until_ms: u64,
    /// The requests in flight the service lets in while it sheds, adapted to
    /// how HBase keeps up ([`Counts::adapt`]); zero until the first request.
    pub(super) limit: f64,
    /// When (ms since `Inner::started`) the limit last moved.
    adapted_ms: u64,
    /// Whether HBase was seen busy and the limit has not yet grown back to
    /// the pool's size since: the shares hold until it has.
    pub(super) recovering: bool,
    /// The fair rate and the even share, in requests a second, and how many
    /// clients ask more than the fair rate.
    share: Share,
    pub(super) over_clients: usize,
    /// How many clients came less than a second ago: they take their places
    /// in the room beside those over the fair rate.
    pub(super) newcomers: usize,
    /// When the fair rate was last worked out; `None` since the service last
    /// stopped shedding, so the first request it sheds for works it out.
    leveled_ms: Option<u64>,
}

impl Counts {
    /// Moves the limit, at most every [`ADAPT_EVERY`]: down by a fifth while
    /// HBase is congested (busy, or operations taking [`CONGESTED_LATENCY`]
    /// times their usual time or more), up by one request, to at most the
    /// pool's `connections`, while it keeps up. A flood thus gets less room
    /// until the operations of the others are as quick as before it.
    pub(super) fn adapt(&mut self, now_ms: u64, load: &Load) {
        let connections = load.connections.max(1) as f64;
        if self.limit == 0.0 {
            self.limit = connections;
        }
        if now_ms < self.adapted_ms.saturating_add(ADAPT_EVERY.as_millis() as u64) {
            return;
        }
        self.adapted_ms = now_ms;
        self.limit = if load.busy || load.latency_ratio >= CONGESTED_LATENCY {
            (self.limit * 0.8).max(1.0)
        } else {
            (self.limit + 1.0).min(connections)
        };
        if self.limit >= connections {
            self.recovering = false;
        }
    }

    /// Counts a request of `client` at `now_ms`, when the admitted requests
    /// `finished` so far and HBase runs as `load` says; moves the window to
    /// a new second first, keeping what the service could have served in the
    /// second that ended. A second that overflowed ([`Finished::overflowed`])
    /// served the most the service can: no second remembered counts more.
    /// Without that, a crowd let in under a capacity set above the truth
    /// slows every answer; its clients, each holding only so many requests
    /// in flight, ask less as their answers slow, stay within an even share
    /// of twice what is served, and keep HBase's queue overflowing onto the
    /// readers. Returns what the second that ended finished when it
    /// overflowed, for the service to say so.
    pub(super) fn see(&mut self, client: &ClientId, now_ms: u64, finished: Finished, load: &Load) -> Option<Finished> {
        // Never back: a request that read the clock just before the second
        // turned may take the lock just after one that read it after, and
        // would otherwise look like a gap that forgets every client.
        let second = (now_ms / 1_000).max(self.second);
        let mut overflowed = None;
        if second != self.second {
            let next = second == self.second + 1;
            let ended = finished.since(self.finished_mark);
            let then = self.could_serve(ended, load.connections);
            if ended.overflowed() {
                self.served_by_second.iter_mut().for_each(|(_, could)| *could = could.min(then));
                overflowed = Some(ended);
            }
            self.served_by_second.push_back((self.second, then));
            while self.served_by_second.front().is_some_and(|(at, _)| at + SERVED_MEMORY_SECS < second) {
                self.served_by_second.pop_front();
            }
            self.requests.retain(|_, window| {
                (window.before, window.now) = (if next { window.now } else { 0 }, 0);
                window.before > 0
            });
            self.could_before = if next { then } else { 0.0 };
            self.finished_mark = finished;
            (self.operations_seen, self.requests_seen) = (0, 0);
            self.second = second;
        }
        self.operations_seen = self.operations_seen.saturating_add(load.operations as u64);
        self.requests_seen += 1;
        // `get_mut` first: a client already counted is not cloned.
        match self.requests.get_mut(client) {
            Some(window) => window.now = window.now.saturating_add(1),
            None => {
                self.requests.insert(client.clone(), Window { now: 1, before: 0, first_ms: now_ms });
            }
        }
        overflowed
    }

    /// What the service could have served in the current second so far,
    /// when it has finished `lately` of the requests it admitted (since the
    /// second began) and a gateway's pool has `connections`: what it served,
    /// scaled to the whole pool by how much of it the second used on average
    /// (Little's law: at the same operation time, a pool used in full serves
    /// that many times more), between
    /// [`SERVED_HEADROOM_LEAST`] and [`SERVED_HEADROOM_MOST`] times; what it
    /// served, no more, once the second has overflowed.
    fn could_serve(&self, lately: Finished, connections: usize) -> f64 {
        if lately.overflowed() {
            return lately.served as f64;
        }
        let used = self.operations_seen as f64 / self.requests_seen.max(1) as f64;
        let scale = (connections.max(1) as f64 / used.max(1.0)).clamp(SERVED_HEADROOM_LEAST, SERVED_HEADROOM_MOST);
        lately.served as f64 * scale
    }

    /// The clients seen in the current second or the one before.
    pub(super) fn clients(&self) -> usize {
        self.requests.len()
    }

    /// `client`'s requests in the last second at `now_ms` (meaningful once
    /// it is known), and whether it came less than a second before.
    pub(super) fn rate_of(&self, client: &ClientId, now_ms: u64) -> (f64, bool) {
        self.requests
            .get(client)
            .map_or((0.0, true), |window| (window.rate(before_weight(now_ms)), window.is_new(now_ms)))
    }

    /// The fair rate at `now_ms`, in requests a second (`finished`: the
    /// admitted requests finished so far; `connections`: a gateway's pool): the max-min
    /// fair share ([`water_level`]) of what the service can serve among the
    /// rates of the clients known for a second or more. A client asking less
    /// than an even share gets what it asks and leaves the rest to the
    /// others. What the service can serve is the most it could have served
    /// ([`Counts::could_serve`]) in a second of the last
    /// [`SERVED_MEMORY_SECS`], or in the last second: the most of a few
    /// seconds is not lowered by a flood's first requests slowing every
    /// answer for a moment. A newcomer
    /// has asked too little to tell its rate by, and would otherwise take
    /// an even share from the readers known before it came. Worked out again
    /// every 10 ms, less often with many clients (the work grows with them):
    /// every 100 ms from 900 on.
    pub(super) fn fair_rate(&mut self, now_ms: u64, finished: Finished, connections: usize) -> Share {
        let every = (10 + self.clients() as u64 / 10).min(ADAPT_EVERY.as_millis() as u64);
        if self.leveled_ms.is_none_or(|at| now_ms >= at.saturating_add(every)) {
            self.leveled_ms = Some(now_ms);
            let before = before_weight(now_ms);
            let lately = self.could_before * before + self.could_serve(finished.since(self.finished_mark), connections);
            let capacity = self.served_by_second.iter().map(|(_, could)| *could).fold(lately, f64::max);
            let mut rates: Vec<f64> = self
                .requests
                .values()
                .filter(|window| !window.is_new(now_ms))
                .map(|window| window.rate(before))
                .collect();
            self.newcomers = self.requests.len() - rates.len();
            // Newcomers count here: a crowd arriving at once turns known
            // within a few milliseconds, and a share worked out while it was
            // new (among the readers alone) would shelter its first known
            // clients, whose admitted reads then made the service look able
            // to serve them all, and the whole crowd stayed sheltered.
            let even_rate = capacity / self.requests.len().max(1) as f64;
            let fair_rate;
            (fair_rate, self.over_clients) = water_level(&mut rates, capacity);
            self.share = Share { fair_rate, even_rate };
        }
        self.share
    }

    /// Forgets the fair rate, when the service stops shedding.
    pub(super) fn stop_shedding(&mut self) {
        self.leveled_ms = None;
    }
}

/// The weight of the second before the current one in a rate at `now_ms`:
/// the part of it still within the last second.
fn before_weight(now_ms: u64) -> f64 {
    1.0 - (now_ms % 1_000) as f64 / 1_000.0
}

/// The max-min fair share of `capacity` among clients asking `rates`: the
/// level no client gets more than, where the clients asking less get what
/// they ask and the others split the rest evenly; and how many ask more.
/// Infinite, with nobody over it, when `capacity` covers every rate.
pub(super) fn water_level(rates: &mut [f64], capacity: f64) -> (f64, usize) {
    rates.sort_by(f64::total_cmp);
    let mut left = capacity;
    for (index, rate) in rates.iter().enumerate() {
        let sharing = (rates.len() - index) as f64;
        if rate * sharing > left {
            return (left / sharing, rates.len() - index);
        }
        left -= rate;
    }
    (f64::INFINITY, 0)
}
