//! The fair shares: how HBase is doing ([`Load`]), the limit of requests in
//! flight the shares divide and how it adapts, and which clients count as
//! the ones the service is kept for.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicUsize;
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
/// How often the limit the fair shares divide may move.
pub(super) const ADAPT_EVERY: Duration = Duration::from_millis(100);
/// The smallest fair share, in requests in flight: a product page asks for
/// its reads in pairs, and a reader's next request may be due while one is
/// slow, so a client within reason holds two at once. A client refused for
/// its share in the last [`BUSY_FOR`] (a flood) may be held to one.
pub(super) const MIN_SHARE: usize = 2;
/// How long the service counts as busy after HBase was last seen busy. A
/// flood keeps HBase busy only while it is admitted: held to its share, it
/// may leave connections free for a moment, and were its share lifted then,
/// the requests let in would queue again before anyone noticed.
pub(super) const BUSY_FOR: Duration = Duration::from_secs(1);
/// Who is in flight and who was seen lately, under one lock.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Requests in flight per client. A finished request lowers its
    /// client's count without the lock; [`Clients::forget_idle`] drops the
    /// clients at zero.
    pub(super) in_flight: HashMap<ClientId, Arc<AtomicUsize>>,
    /// When (ms since [`Inner::started`]) each client was last refused for
    /// its share: for [`BUSY_FOR`] after, its share may fall to one request.
    pub(super) refused_ms: HashMap<ClientId, u64>,
    /// Clients seen in the current second and the one before: a client
    /// between two requests (a shopper's page, a polite reader at 20 a
    /// second) still counts as one the service is kept for.
    pub(super) seen_now: HashSet<ClientId>,
    pub(super) seen_before: HashSet<ClientId>,
    /// The size of the union of the two.
    pub(super) seen: usize,
    /// The current second, since [`Inner::started`].
    pub(super) second: u64,
    /// Until when (ms since [`Inner::started`]) the service counts as busy:
    /// [`BUSY_FOR`] after HBase was last seen busy.
    pub(super) busy_until_ms: u64,
    /// The requests in flight the fair shares divide, adapted to how HBase
    /// keeps up ([`Counts::adapt`]); zero until the first request.
    pub(super) limit: f64,
    /// When (ms since [`Inner::started`]) the limit last moved.
    pub(super) adapted_ms: u64,
    /// Whether HBase was seen busy and the limit has not yet grown back to
    /// the pool's size since: the shares hold until it has.
    pub(super) recovering: bool,
}

impl Counts {
    /// Moves the limit the fair shares divide, at most every [`ADAPT_EVERY`]:
    /// down by a fifth while HBase is congested (busy, or operations taking
    /// [`CONGESTED_LATENCY`] times their usual time or more), up by one
    /// request, to at most the pool's `connections`, while it keeps up. A
    /// flood thus gets a smaller share until the operations of the others are
    /// as quick as before it.
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

    /// Marks `client` seen in `second`, moving the window on first.
    pub(super) fn see(&mut self, client: &ClientId, second: u64) {
        if second != self.second {
            self.seen_before =
                if second == self.second + 1 { std::mem::take(&mut self.seen_now) } else { HashSet::new() };
            self.seen_now.clear();
            self.seen = self.seen_before.len();
            self.second = second;
        }
        if !self.seen_now.contains(client) {
            self.seen_now.insert(client.clone());
            self.seen += usize::from(!self.seen_before.contains(client));
        }
    }
}
