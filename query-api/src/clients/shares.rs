//! The fair shares: how HBase is doing ([`Load`]), the limit of requests in
//! flight the service adapts to it ([`Counts::adapt`]), each client's
//! request rate, and the fair rate ([`Counts::fair_rate`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize};
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
}

/// How much slower than usual HBase operations must be for HBase to count as
/// congested: while a flood is shed, the other clients' answers should take
/// at most about twice their usual time, and their operations are only part
/// of an answer's time.
pub(super) const CONGESTED_LATENCY: f64 = 1.5;
/// How often the limit may move.
pub(super) const ADAPT_EVERY: Duration = Duration::from_millis(100);
/// How long the service counts as busy after HBase was last seen busy. A
/// flood keeps HBase busy only while it is admitted: held to its share, it
/// may leave connections free for a moment, and were the shares lifted then,
/// the requests let in would queue again before anyone noticed.
pub(super) const BUSY_FOR: Duration = Duration::from_secs(1);
/// The shortest time a new client's requests are spread over in its rate:
/// a page's first requests come at once, and would otherwise count as a
/// flood.
const NEW_CLIENT_SPAN_MS: u64 = 100;
/// How long what the service could serve in a second counts
/// ([`Counts::fair_rate`]).
const CAPACITY_MEMORY_SECS: u64 = 10;
/// The share of its connections' time the pool is taken to serve requests
/// in ([`capacity`]): on a machine of few cores its connections do not all
/// run at once at their usual speed.
const POOL_UTILIZATION: f64 = 0.5;

/// The service's requests in flight, by whether their client was within its
/// fair rate when they were admitted, and the requests it has served (those
/// that finished without a 5xx) and the time they took: atomics, since
/// every answer changes them and must not wait for the lock.
#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) within: AtomicUsize,
    pub(super) over: AtomicUsize,
    pub(super) served: AtomicU64,
    /// Microseconds, summed over the requests served.
    pub(super) took_us: AtomicU64,
}

/// Requests served, and the time they took together.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Served {
    pub(super) count: u64,
    pub(super) took_us: u64,
}

impl Served {
    /// What was served since `mark`.
    fn since(self, mark: Served) -> Served {
        Served { count: self.count.saturating_sub(mark.count), took_us: self.took_us.saturating_sub(mark.took_us) }
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
    /// Requests a second at `now_ms`. A client seen for a second or more:
    /// all of the current second's and the part of the one before it that
    /// is still within a second (`before`, the weight of that part), as if
    /// they had been spread evenly over it. A newer one: its requests over
    /// the time since it came, at least [`NEW_CLIENT_SPAN_MS`], so a flood
    /// counts as one from its first tenth of a second on.
    fn rate(self, now_ms: u64, before: f64) -> f64 {
        let since_ms = now_ms.saturating_sub(self.first_ms);
        if since_ms < 1_000 {
            let requests = f64::from(self.before) + f64::from(self.now);
            requests * 1_000.0 / since_ms.max(NEW_CLIENT_SPAN_MS) as f64
        } else {
            f64::from(self.before) * before + f64::from(self.now)
        }
    }
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
    /// What was served when the current second began, and in the second
    /// before.
    served_mark: Served,
    served_before: Served,
    /// What the service could serve in each of the last
    /// [`CAPACITY_MEMORY_SECS`] seconds it was asked anything ([`capacity`]),
    /// by second.
    capacities: VecDeque<(u64, f64)>,
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
    /// The fair rate, in requests a second, and how many clients ask more.
    fair_rate: f64,
    pub(super) over_clients: usize,
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

    /// Counts a request of `client` at `now_ms`, when `served` were served;
    /// moves the window to a new second first, keeping what the pool's
    /// `connections` could serve in the second that ended.
    pub(super) fn see(&mut self, client: &ClientId, now_ms: u64, served: Served, connections: usize) {
        let second = now_ms / 1_000;
        if second != self.second {
            let next = second == self.second + 1;
            let then = served.since(self.served_mark);
            self.capacities.push_back((self.second, capacity(connections, then.count as f64, then.took_us as f64)));
            while self.capacities.front().is_some_and(|(at, _)| at + CAPACITY_MEMORY_SECS < second) {
                self.capacities.pop_front();
            }
            self.requests.retain(|_, window| {
                (window.before, window.now) = (if next { window.now } else { 0 }, 0);
                window.before > 0
            });
            self.served_before = if next { then } else { Served::default() };
            self.served_mark = served;
            self.second = second;
        }
        // `get_mut` first: a client already counted is not cloned.
        match self.requests.get_mut(client) {
            Some(window) => window.now = window.now.saturating_add(1),
            None => {
                self.requests.insert(client.clone(), Window { now: 1, before: 0, first_ms: now_ms });
            }
        }
    }

    /// The clients seen in the current second or the one before.
    pub(super) fn clients(&self) -> usize {
        self.requests.len()
    }

    /// `client`'s requests in the last second at `now_ms`, and whether it
    /// came less than a second before.
    pub(super) fn rate_of(&self, client: &ClientId, now_ms: u64) -> (f64, bool) {
        self.requests.get(client).map_or((0.0, true), |window| {
            (window.rate(now_ms, before_weight(now_ms)), now_ms < window.first_ms.saturating_add(1_000))
        })
    }

    /// The fair rate at `now_ms`, in requests a second (`served`: what was
    /// served so far; `connections`: the pool's): the max-min fair
    /// share ([`water_level`]) of what the service can serve among the
    /// clients' request rates. A client asking less than an even share gets
    /// what it asks and leaves the rest to the others. What the service can
    /// serve is the most it could in a second of the last
    /// [`CAPACITY_MEMORY_SECS`], or in the last second ([`capacity`]): the
    /// most of a few seconds is not lowered by a flood's first requests,
    /// let in before anyone could tell it from the others, slowing every
    /// answer for a moment. Worked out again every 10 ms, or every 100 ms
    /// with a thousand clients (the work grows with them).
    pub(super) fn fair_rate(&mut self, now_ms: u64, served: Served, connections: usize) -> f64 {
        let every = (10 + self.clients() as u64 / 10).min(ADAPT_EVERY.as_millis() as u64);
        if self.leveled_ms.is_none_or(|at| now_ms >= at.saturating_add(every)) {
            self.leveled_ms = Some(now_ms);
            let before = before_weight(now_ms);
            let now = served.since(self.served_mark);
            let count = self.served_before.count as f64 * before + now.count as f64;
            let took_us = self.served_before.took_us as f64 * before + now.took_us as f64;
            let lately = capacity(connections, count, took_us);
            let most = self.capacities.iter().map(|(_, capacity)| *capacity).fold(lately, f64::max);
            let mut rates: Vec<f64> = self.requests.values().map(|window| window.rate(now_ms, before)).collect();
            (self.fair_rate, self.over_clients) = water_level(&mut rates, most);
        }
        self.fair_rate
    }

    /// Forgets the fair rate, when the service stops shedding.
    pub(super) fn stop_shedding(&mut self) {
        self.leveled_ms = None;
    }
}

/// What the service could serve a second, given that it `served` so many
/// requests a second, which took `took_us` together: at least that, and at
/// least what its pool's `connections` serve at [`POOL_UTILIZATION`] with
/// each request taking as long as those did. The second is what the service
/// can serve when a flood begins: until then it served only what it was
/// asked. The first is what it serves once it sheds, whatever the machine.
fn capacity(connections: usize, served: f64, took_us: f64) -> f64 {
    let pool = connections.max(1) as f64 * POOL_UTILIZATION * 1e6 * served / took_us.max(1.0);
    served.max(pool)
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
