//! Fair shedding per client: who a request is from ([`ClientId`]), and
//! refusing the clients that ask more than their fair share first when the
//! service must shed ([`Clients::admit`], applied to every request by
//! [`Shedding`]).
//!
//! HBase connections are what the service runs short of: when every one is
//! busy, a request queues, and past the queue's bound it is refused
//! (`503 overloaded`). Without a notion of clients that refuses whoever comes
//! next, so one client flooding the service takes every other client's
//! product pages down with it. So while HBase is busy (as many operations
//! running as the pool has connections, or one waiting, within the last
//! second: `common::hbase::Hbase::busy`), the service works out each client's
//! **fair rate**: the max-min fair share (`shares::water_level`) of what it
//! can serve: the most it served in a second of the last ten, scaled to the
//! whole pool by the part of it that second used (two to four times); a
//! second that left admitted requests unserved (HBase's queue overflowed)
//! counts what it served, and caps the seconds before it at that. A client
//! asking no more than its fair rate (counted in requests a second, so
//! however slow answers get and however many of its requests are in flight)
//! is admitted as before. The clients asking more share a room of requests in
//! flight, evenly, at least one each; beyond it they are refused with `429`
//! and `Retry-After`, at once and at no cost to HBase, before HBase's own
//! queue overflows onto everyone. The room is a limit less what the others
//! have in flight, and at least a quarter of the pool. The limit starts at
//! the pool's connections and adapts to how HBase keeps up: down by a fifth
//! every tenth of a second while HBase is busy or its operations take one and
//! a half times their usual time or more
//! (`common::hbase::Hbase::latency_ratio`), up by one otherwise, because on a
//! small machine a flood slows every operation long before it fills the pool.
//! A client that came less than a second ago has asked too little to tell its
//! rate by: until it can be, its first request is let in and a second takes a
//! place in the room. Without that pressure, or without another client,
//! nobody is refused for volume, so a lone client (a benchmark, a backfill)
//! keeps the whole service. Fixed limits per client (requests per second,
//! with `governor`'s keyed GCRA; requests in flight) are there for operators
//! who want them, and a named API key can be exempted from all of it. The
//! rule and its reasons are in docs/pacing.md.
//!
//! A client is its API key when it sends a configured one, otherwise its
//! address: the peer's or, when the peer is a proxy the operator trusts, the
//! address the proxies say they forwarded for (in the one header they write,
//! `X-Forwarded-For` or `Forwarded`), read from the nearest proxy outwards.
//! The other header, and any from another peer, is ignored, so a client
//! cannot choose whom it counts as. An IPv6 address counts by its /64, the
//! block one host is given.
//!
//! Here the [`Clients`] and their limits; in [`identity`] who a request is
//! from, in [`shares`] how the fair shares adapt to HBase, and in
//! [`shedding`] the middleware that applies them.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName};
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ipnet::IpNet;

mod identity;
mod shares;
mod shedding;
mod tallies;

pub use identity::{parse_trusted_proxy, ApiKey, ClientId, ForwardedHeader, ADDRESS_CLASS, OTHER_CLASS};
pub use shares::Load;
use shares::{Counts, Share, Totals, BUSY_FOR};
pub(crate) use shedding::Shedding;
pub use tallies::ADMISSION_KINDS;
use tallies::{Admitted, ClassCounters, Tallies};

use crate::telemetry;

/// The most requests a client that came less than a second ago may have in
/// flight while the service sheds: a page asks in pairs.
const NEWCOMER_IN_FLIGHT: usize = 2;
/// The most requests a client within an even share may have in flight
/// beside the one it asks for, for that one to be sheltered: a page's pair
/// on an HBase slow enough to hold the next pair behind it. A client asks
/// at a low rate also when every answer is slow and it has many requests
/// waiting (a crowd of fifty held by its own in-flight cap asked 20
/// requests a second each, a reader's rate), and sheltering those put
/// the whole crowd before the readers, past the queue's bound.
const SHELTERED_IN_FLIGHT: usize = 3;
/// The clients over their fair rates together may always have the pool's
/// connections over this in flight, however low the limit falls: on a small
/// machine the refusals and the flood's own load keep HBase's operations
/// slow while the flood is held to one request, and a quarter of the pool
/// doubled what it was served without slowing the others' answers further
/// (bench/fairness.sh), where half the pool slowed them.
const OVER_SHARE_ROOM_DIVISOR: usize = 4;
/// Why a request was refused, as metric labels.
pub const REFUSAL_REASONS: [&str; 3] = ["fair_share", "in_flight", "rate"];
/// How clients are told apart and limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPolicy {
    /// Peers whose forwarding header is believed.
    pub trusted_proxies: Vec<IpNet>,
    /// The forwarding header the trusted proxies write.
    pub forwarded_header: ForwardedHeader,
    /// The header a client's API key comes in.
    pub api_key_header: HeaderName,
    /// The configured API keys.
    pub api_keys: Vec<ApiKey>,
    /// Names of keys never refused.
    pub exempt_keys: Vec<String>,
    /// Most requests one client may have in flight at once, whatever the load.
    pub max_in_flight: Option<usize>,
    /// Most requests one client may make per second (a burst of as many), whatever the load.
    pub rate_per_second: Option<NonZeroU32>,
    /// Refuse the clients over their fair share while HBase is busy.
    pub fair_shedding: bool,
}

impl Default for ClientPolicy {
    fn default() -> Self {
        ClientPolicy {
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::XForwardedFor,
            api_key_header: HeaderName::from_static("x-api-key"),
            api_keys: Vec::new(),
            exempt_keys: Vec::new(),
            max_in_flight: None,
            rate_per_second: None,
            fair_shedding: true,
        }
    }
}

impl ClientPolicy {
    /// The classes requests are counted in: every key's name, `address` and `other`.
    pub fn classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self.api_keys.iter().map(|key| key.name.clone()).collect();
        classes.extend([ADDRESS_CLASS.to_owned(), OTHER_CLASS.to_owned()]);
        classes
    }
}

/// Why a client was refused, and when it may try again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refusal {
    pub why: Why,
    /// Whole seconds to wait (`Retry-After`), at least one.
    pub retry_after_secs: u64,
}

/// Why a client was refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// The service sheds, the client asks more than its fair rate, and the
    /// room left for such clients is taken: `rate` and `fair_rate` in
    /// requests a second.
    FairShare { rate: f64, fair_rate: f64 },
    /// The service sheds, and the client, which came less than a second
    /// ago, has `in_flight` requests in flight ([`NEWCOMER_IN_FLIGHT`]), or
    /// the room is taken.
    Newcomer { in_flight: usize },
    /// The client has its fixed most of requests in flight.
    InFlight { in_flight: usize, most: usize },
    /// The client is over its fixed request rate.
    Rate,
}

impl Refusal {
    /// The reason as a metric label ([`REFUSAL_REASONS`]).
    pub fn reason(&self) -> &'static str {
        match self.why {
            Why::FairShare { .. } | Why::Newcomer { .. } => "fair_share",
            Why::InFlight { .. } => "in_flight",
            Why::Rate => "rate",
        }
    }
}

/// The clients' requests in flight and their rate limits; cheap to clone.
#[derive(Clone)]
pub struct Clients {
    inner: Arc<Inner>,
}

struct Inner {
    policy: ClientPolicy,
    /// Secret → key name.
    keys: HashMap<String, Arc<str>>,
    exempt: HashSet<Arc<str>>,
    /// The admission's lock.
    locked: Mutex<Locked>,
    totals: Arc<Totals>,
    limiter: Option<DefaultKeyedRateLimiter<ClientId>>,
    /// Each class's counters, registered once, in the order of the policy's classes.
    counters: Vec<ClassCounters>,
    /// Class → its index in `counters`. Hashed with `foldhash`: the classes
    /// are the configured keys' names and two fixed ones, none chosen by a
    /// client, and std's SipHash of the class showed in a cached read's profile.
    class_index: foldhash::HashMap<Arc<str>, usize>,
    /// The seconds whose admitted requests overflowed ([`Counts::see`]).
    overflowed_seconds: metrics::Counter,
    /// Seconds of [`Counts::second`] and [`Counts::busy_until_ms`] are counted from here.
    started: Instant,
}

/// What the admission lock guards: the counts the shares are worked out
/// from, and the admissions' tallies, counted there because the admission
/// holds the lock anyway.
#[derive(Debug, Default)]
struct Locked {
    counts: Counts,
    tallies: Tallies,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients").field("policy", &self.inner.policy).finish_non_exhaustive()
    }
}

impl Clients {
    /// The clients of a service under `policy`.
    pub fn new(policy: ClientPolicy) -> Clients {
        let keys =
            policy.api_keys.iter().map(|key| (key.secret.clone(), Arc::<str>::from(key.name.as_str()))).collect();
        let exempt = policy.exempt_keys.iter().map(|name| Arc::<str>::from(name.as_str())).collect();
        let limiter = policy.rate_per_second.map(|rate| RateLimiter::keyed(Quota::per_second(rate)));
        let locked = Mutex::default();
        let totals = Arc::default();
        // Every class's counters exist from zero, so a rate over them exists
        // before the first refusal.
        let classes = policy.classes();
        let class_index = classes.iter().enumerate().map(|(index, class)| (Arc::from(class.as_str()), index)).collect();
        let counters = classes
            .into_iter()
            .map(|class| {
                let requests = metrics::counter!(telemetry::CLIENT_REQUESTS, "class" => class.clone());
                let refusals = REFUSAL_REASONS.map(|reason| {
                    metrics::counter!(telemetry::CLIENT_REFUSALS, "class" => class.clone(), "reason" => reason)
                });
                let admissions = ADMISSION_KINDS.map(
                    |kind| metrics::counter!(telemetry::CLIENT_ADMISSIONS, "class" => class.clone(), "kind" => kind),
                );
                requests.increment(0);
                refusals.iter().chain(&admissions).for_each(|counter| counter.increment(0));
                ClassCounters { requests, refusals, admissions }
            })
            .collect();
        let overflowed_seconds = metrics::counter!(telemetry::OVERFLOWED_SECONDS);
        overflowed_seconds.increment(0);
        let started = Instant::now();
        let inner =
            Inner { policy, keys, exempt, locked, totals, limiter, counters, class_index, overflowed_seconds, started };
        Clients { inner: Arc::new(inner) }
    }

    /// Who a request from `peer` carrying `headers` is from.
    pub fn identify(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> ClientId {
        identity::identify(&self.inner.policy, &self.inner.keys, peer, headers)
    }

    /// Admits a request of `client`, or says why not: over its rate, over
    /// its fixed in-flight limit, or, while the service sheds, over its fair
    /// rate with no room left for it. The service sheds while HBase is busy
    /// or was within [`BUSY_FOR`], and after that until the adapted limit
    /// ([`Counts::adapt`]) has grown back to the pool's size, when another
    /// client was seen in the last second or two; the shares thus come back
    /// a request at a time rather than all at once, which let a flood in
    /// whole and had it shed again a second later. While it sheds, a client
    /// asking more than its fair rate ([`Counts::fair_rate`]) may have in
    /// flight its even part of the room: what the limit leaves after the
    /// requests of the clients within their rates, at least a quarter of the
    /// pool; a client that came less than a second ago its first request and
    /// a place in the room, [`NEWCOMER_IN_FLIGHT`] at most; and those
    /// clients together no more than the room (a newcomer's first aside). A
    /// slow HBase that was not busy lowers the limit but refuses nobody. An
    /// exempt key is always admitted. The admission counts the request until
    /// it is dropped.
    pub fn admit(&self, client: &ClientId, load: &Load) -> Result<Admission, Refusal> {
        self.admit_at(client, load, self.inner.started.elapsed())
    }

    /// [`Clients::admit`] at `now`, the time since [`Inner::started`].
    fn admit_at(&self, client: &ClientId, load: &Load, now: Duration) -> Result<Admission, Refusal> {
        let exempt = matches!(client, ClientId::Key(name) if self.inner.exempt.contains(name));
        let totals = &self.inner.totals;
        // Looked up before the lock: the classes never change.
        let class = self.inner.class_index.get(client.class()).copied();
        let mut locked = self.inner.locked.lock().unwrap_or_else(PoisonError::into_inner);
        let Locked { counts, tallies } = &mut *locked;
        // Read under the lock, and raised under it below, so two requests
        // admitted at once cannot both take the room's last place. (They are
        // lowered without it: a request finishing only frees room.)
        let (within, in_room_now) = (totals.within.load(Ordering::Relaxed), totals.in_room.load(Ordering::Relaxed));
        let finished = totals.finished();
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        if let Some(ended) = counts.see(client, now_ms, finished, load) {
            // Once a second at most: what the fair shares are worked out
            // from has just been lowered, and the clients asking most are
            // refused first from now on.
            self.inner.overflowed_seconds.increment(1);
            tracing::info!(
                served = ended.served,
                unserved = ended.unserved,
                "a second's admitted requests overflowed what the service could serve: no second it remembers counts \
                 as able to serve more than that one served"
            );
        }
        if load.busy {
            counts.busy_until_ms = now_ms.saturating_add(BUSY_FOR.as_millis() as u64);
            counts.recovering = true;
        }
        counts.adapt(now_ms, load);
        // A lone client is never refused for its share: there is nobody to
        // keep the service for, and its excess waits in HBase's queue as
        // before (a load balancer whose address is not a trusted proxy is
        // one client, the whole shop).
        let shedding = (now_ms < counts.busy_until_ms || counts.recovering) && counts.clients() > 1;
        if !shedding {
            counts.stop_shedding();
        }
        // Looked up once, and made here for a new client: one refused stays
        // at zero, which `forget_idle` drops (under the lock, as here).
        let count = match counts.in_flight.get(client) {
            Some(count) => Arc::clone(count),
            None => Arc::clone(counts.in_flight.entry(client.clone()).or_default()),
        };
        let mine = count.load(Ordering::Relaxed);
        let mut kind = if exempt { Admitted::Exempt } else { Admitted::Calm };
        if !exempt {
            let policy = &self.inner.policy;
            if let Some(most) = policy.max_in_flight.filter(|most| mine >= *most) {
                let why = Why::InFlight { in_flight: mine, most };
                return Err(Refusal { why, retry_after_secs: 1 });
            }
            if policy.fair_shedding && shedding {
                let (rate, new) = counts.rate_of(client, now_ms);
                let Share { fair_rate, even_rate } = counts.fair_rate(now_ms, finished, load.connections);
                let least = (load.connections / OVER_SHARE_ROOM_DIVISOR).max(1) as f64;
                let room = (counts.limit - within as f64).max(least);
                if new {
                    // A client that came less than a second ago has asked
                    // too little to tell its rate by: its first request is
                    // let in, and a second takes a place in the room, so a
                    // crowd arriving at once holds little more than one
                    // flood would.
                    if mine >= NEWCOMER_IN_FLIGHT || (mine > 0 && in_room_now as f64 >= room) {
                        return Err(Refusal { why: Why::Newcomer { in_flight: mine }, retry_after_secs: 1 });
                    }
                    kind = Admitted::Newcomer;
                } else if rate > fair_rate {
                    // Newcomers count too, so a known flood leaves them room.
                    let sharing = (counts.over_clients + counts.newcomers).max(1);
                    let each = (room / sharing as f64).max(1.0);
                    if in_room_now as f64 >= room || mine as f64 >= each {
                        return Err(Refusal { why: Why::FairShare { rate, fair_rate }, retry_after_secs: 1 });
                    }
                    kind = Admitted::Room;
                } else if rate <= even_rate && mine <= SHELTERED_IN_FLIGHT {
                    kind = Admitted::Sheltered;
                } else {
                    kind = Admitted::Within;
                }
            }
            // Last, so a request refused for the above spends none of its
            // client's rate.
            if let Some(limiter) = &self.inner.limiter {
                if let Err(not_until) = limiter.check_key(client) {
                    // The limiter's own clock: making a clock (quanta's)
                    // calibrates it, tens of microseconds, which a flood of
                    // refusals paid on every one.
                    let wait = not_until.wait_time_from(limiter.clock().now());
                    return Err(Refusal { why: Why::Rate, retry_after_secs: whole_seconds(wait) });
                }
            }
        }
        // Under the lock: `forget_idle` drops a count at zero only there.
        count.fetch_add(1, Ordering::Relaxed);
        totals.of(kind.in_room()).fetch_add(1, Ordering::Relaxed);
        if let Some(class) = class {
            tallies.admitted(class, kind);
        }
        drop(locked);
        Ok(Admission { count, totals: Arc::clone(totals), kind, served: false })
    }

    /// Forgets the clients with nothing in flight, and the rate-limit state
    /// of clients idle long enough that it no longer limits them, so memory
    /// follows the clients of the last seconds.
    pub fn forget_idle(&self) {
        let mut locked = self.inner.locked.lock().unwrap_or_else(PoisonError::into_inner);
        // A count that is zero can only rise again under the lock (in `admit`).
        locked.counts.in_flight.retain(|_, count| count.load(Ordering::Relaxed) > 0);
        drop(locked);
        if let Some(limiter) = &self.inner.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Counts a refused request of `client`, and why. (An admitted one is
    /// tallied under the admission's lock: [`Clients::publish_tallies`].)
    fn count_refusal(&self, client: &ClientId, refusal: &Refusal) {
        let Some(&class) = self.inner.class_index.get(client.class()) else { return };
        let counters = &self.inner.counters[class];
        counters.requests.increment(1);
        if let Some(index) = REFUSAL_REASONS.iter().position(|reason| *reason == refusal.reason()) {
            counters.refusals[index].increment(1);
        }
    }

    /// Adds the admissions tallied since the last call to the Prometheus
    /// counters (`reviews_api_client_requests_total` and
    /// `reviews_api_client_admissions_total`): called before the metrics
    /// are rendered, and by the service's upkeep.
    pub fn publish_tallies(&self) {
        let taken = self.inner.locked.lock().unwrap_or_else(PoisonError::into_inner).tallies.take();
        for (counters, tally) in self.inner.counters.iter().zip(&taken) {
            counters.publish(tally);
        }
    }

    #[cfg(test)]
    fn in_flight_of(&self, client: &ClientId) -> usize {
        let locked = self.inner.locked.lock().unwrap_or_else(PoisonError::into_inner);
        locked.counts.in_flight.get(client).map_or(0, |count| count.load(Ordering::Relaxed))
    }
}

/// A request counted against its client while it lives.
#[derive(Debug)]
pub struct Admission {
    /// Its client's count of requests in flight.
    count: Arc<AtomicUsize>,
    totals: Arc<Totals>,
    /// How it was let in: whether it holds a place in the room (its client
    /// asked more than its fair rate, or was a newcomer), whether it is
    /// sheltered ([`Admission::sheltered`]), and whether its failure counts
    /// towards an overflowed second (not a newcomer's).
    kind: Admitted,
    /// Whether it was answered without a 5xx. Only such answers say what
    /// the service can serve: a refusal of HBase's queue is quick, and would
    /// make the service look able to serve a flood.
    served: bool,
}

impl Admission {
    /// Whether the service sheds and this request's client asks no more than
    /// an even share of what the service can serve, is known for a second or
    /// more, has at most three other requests in flight (`SHELTERED_IN_FLIGHT`)
    /// and is not an exempt key: its HBase operations take the
    /// connections kept for sheltered work when the others are busy, and
    /// may wait past the queue's bound, which the others may have filled a
    /// moment before (`common::hbase::with_shelter`). Work the request hands
    /// to a task of its own (a batch of ranking loads) is not sheltered.
    pub fn sheltered(&self) -> bool {
        self.kind == Admitted::Sheltered
    }

    /// Marks the request answered without a 5xx: counted among those served.
    pub fn served(&mut self) {
        self.served = true;
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.totals.of(self.kind.in_room()).fetch_sub(1, Ordering::Relaxed);
        let finished = match (self.served, self.kind) {
            (true, _) => &self.totals.served,
            // A newcomer's first requests are let in whatever the room holds,
            // so a crowd arriving at once may overflow HBase's queue for a
            // moment: that says what its arrival cost, not what the service
            // can serve the clients it knows, and counted it would lower
            // their fair rate for a second (`Finished::overflowed`).
            (false, Admitted::Newcomer) => return,
            (false, _) => &self.totals.unserved,
        };
        finished.fetch_add(1, Ordering::Relaxed);
    }
}

/// `wait` rounded up to whole seconds, at least one.
fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_millis().div_ceil(1_000) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::shares::{water_level, Finished};
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(HeaderName::from_bytes(name.as_bytes()).expect("name"), value.parse().expect("value"));
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    fn clients(policy: ClientPolicy) -> Clients {
        Clients::new(policy)
    }

    fn address(text: &str) -> ClientId {
        ClientId::Address(ip(text))
    }

    /// HBase busy or not, operations at their usual speed, `connections` in the pool.
    fn load(busy: bool, connections: usize) -> Load {
        Load { busy, latency_ratio: 1.0, connections, operations: if busy { connections } else { 0 } }
    }

    #[test]
    fn a_client_is_its_peer_whatever_an_untrusted_peer_says_it_forwarded() {
        let clients = clients(ClientPolicy::default());
        let spoofed = headers(&[("x-forwarded-for", "203.0.113.9"), ("forwarded", "for=198.51.100.7")]);
        assert_eq!(clients.identify(Some(ip("192.0.2.10")), &spoofed), address("192.0.2.10"));
        assert_eq!(clients.identify(None, &spoofed), ClientId::Unknown);
    }

    #[test]
    fn behind_trusted_proxies_a_client_is_the_first_untrusted_hop_from_the_nearest() {
        let policy = ClientPolicy {
            trusted_proxies: vec![
                parse_trusted_proxy("10.0.0.0/8").expect("net"),
                parse_trusted_proxy("192.0.2.1").expect("ip"),
            ],
            ..ClientPolicy::default()
        };
        let clients = clients(policy);
        let proxy = Some(ip("10.1.2.3"));
        // The client's own claim (198.51.100.1) lies beyond the first untrusted hop.
        let chain = headers(&[("x-forwarded-for", "198.51.100.1, 203.0.113.5"), ("x-forwarded-for", "10.9.9.9")]);
        assert_eq!(clients.identify(proxy, &chain), address("203.0.113.5"));
        // The Forwarded header is not the one these proxies write: never read.
        let forwarded = headers(&[("forwarded", r#"for="[2001:db8:cafe::17]:4711";proto=https, for=192.0.2.1"#)]);
        assert_eq!(clients.identify(proxy, &forwarded), address("10.1.2.3"));
        // Every hop trusted: the farthest. A hop that is no address: the proxy itself.
        assert_eq!(
            clients.identify(proxy, &headers(&[("x-forwarded-for", "10.0.0.1, 10.0.0.2")])),
            address("10.0.0.1")
        );
        assert_eq!(
            clients.identify(proxy, &headers(&[("x-forwarded-for", "unknown, 203.0.113.5")])),
            address("203.0.113.5")
        );
        assert_eq!(
            clients.identify(proxy, &headers(&[("x-forwarded-for", "203.0.113.5, unknown")])),
            address("10.1.2.3")
        );
        assert_eq!(clients.identify(proxy, &HeaderMap::new()), address("10.1.2.3"));
        assert_eq!(clients.identify(Some(ip("::ffff:192.0.2.1")), &chain), address("203.0.113.5"), "mapped IPv4");
    }

    #[test]
    fn only_the_header_the_proxies_write_is_read_and_an_unreadable_hop_stops_the_walk() {
        let proxy = Some(ip("10.1.2.3"));
        let trusted = vec![parse_trusted_proxy("10.0.0.0/8").expect("net")];
        let rfc = clients(ClientPolicy {
            trusted_proxies: trusted.clone(),
            forwarded_header: ForwardedHeader::Forwarded,
            ..ClientPolicy::default()
        });
        let forwarded = headers(&[
            ("x-forwarded-for", "198.51.100.66"),
            ("forwarded", r#"for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.9"#),
        ]);
        assert_eq!(rfc.identify(proxy, &forwarded), address("2001:db8:cafe::"), "X-Forwarded-For is never read");
        // A value that is not text (nginx appends its hop to the client's in
        // one line) stops the walk at the proxy, whatever the other header says.
        let xff = clients(ClientPolicy { trusted_proxies: trusted, ..ClientPolicy::default() });
        let mut garbled = HeaderMap::new();
        garbled.append("x-forwarded-for", HeaderValue::from_bytes(b"\xff, 203.0.113.5").expect("value"));
        garbled.append("forwarded", "for=198.51.100.1".parse().expect("value"));
        assert_eq!(xff.identify(proxy, &garbled), address("10.1.2.3"));
        garbled.append("x-forwarded-for", "203.0.113.5".parse().expect("value"));
        assert_eq!(xff.identify(proxy, &garbled), address("203.0.113.5"), "the hop after it, nearer, counts");
    }

    #[test]
    fn a_configured_key_names_its_client_and_an_unknown_key_is_ignored() {
        let policy = ClientPolicy {
            api_keys: vec!["shop-web=0123456789abcdef".parse().expect("key")],
            ..ClientPolicy::default()
        };
        let clients = clients(policy);
        let keyed = headers(&[("x-api-key", "0123456789abcdef")]);
        assert_eq!(clients.identify(Some(ip("192.0.2.10")), &keyed), ClientId::Key("shop-web".into()));
        assert_eq!(clients.identify(Some(ip("192.0.2.10")), &keyed).class(), "shop-web");
        let wrong = headers(&[("x-api-key", "not-the-key-at-all")]);
        assert_eq!(clients.identify(Some(ip("192.0.2.10")), &wrong), address("192.0.2.10"));
        assert_eq!(
            format!("{:?}", ["shop-web=0123456789abcdef".parse::<ApiKey>().expect("key")]),
            r#"[ApiKey { name: "shop-web", secret: "<redacted>" }]"#
        );
    }

    #[test]
    fn ipv6_clients_count_by_their_64() {
        let clients = clients(ClientPolicy::default());
        let one = clients.identify(Some(ip("2001:db8:1:2:aaaa::1")), &HeaderMap::new());
        let other = clients.identify(Some(ip("2001:db8:1:2:bbbb::2")), &HeaderMap::new());
        assert_eq!(one, other);
        assert_eq!(one, address("2001:db8:1:2::"));
    }

    #[test]
    fn keys_and_proxies_parse_or_say_why_not() {
        assert!("shop-web=0123456789abcdef".parse::<ApiKey>().is_ok());
        for bad in
            ["noequals", "Shop=0123456789abcdef", "address=0123456789abcdef", "web=short", "web=has a space in it!!"]
        {
            assert!(bad.parse::<ApiKey>().is_err(), "{bad}");
        }
        assert_eq!(parse_trusted_proxy(" 10.0.0.1 ").expect("ip"), "10.0.0.1/32".parse::<IpNet>().expect("net"));
        assert!(parse_trusted_proxy("10.0.0.0/33").is_err());
    }

    #[test]
    fn fixed_limits_hold_whatever_the_load_and_an_exempt_key_passes_them() {
        let policy = ClientPolicy {
            api_keys: vec!["batch=0123456789abcdef".parse().expect("key")],
            exempt_keys: vec!["batch".to_owned()],
            max_in_flight: Some(2),
            rate_per_second: NonZeroU32::new(3),
            fair_shedding: false,
            ..ClientPolicy::default()
        };
        let clients = clients(policy);
        let client = address("192.0.2.1");
        let held =
            [clients.admit(&client, &load(true, 1)).expect("1"), clients.admit(&client, &load(true, 1)).expect("2")];
        let in_flight = clients.admit(&client, &load(false, 100)).expect_err("in flight");
        assert_eq!(in_flight.why, Why::InFlight { in_flight: 2, most: 2 });
        drop(held);
        // The refusal spent none of the rate: the third of the burst of three is left.
        let third = clients.admit(&client, &load(false, 100)).expect("the third");
        drop(third);
        let rate = clients.admit(&client, &load(false, 100)).expect_err("rate");
        assert_eq!((rate.reason(), rate.retry_after_secs), ("rate", 1));
        let exempt = ClientId::Key("batch".into());
        let many: Vec<Admission> = (0..20).map(|_| clients.admit(&exempt, &load(true, 1)).expect("exempt")).collect();
        assert_eq!(many.len(), 20);
    }

    #[test]
    fn the_shares_shrink_while_hbase_is_slow_and_grow_back_when_it_keeps_up() {
        let mut counts = Counts::default();
        let slow = Load { busy: false, latency_ratio: 3.0, connections: 16, operations: 8 };
        let quick = Load { latency_ratio: 1.2, ..slow };
        counts.adapt(0, &slow);
        assert_eq!(counts.limit, 16.0, "the pool to start with");
        counts.adapt(50, &slow);
        assert_eq!(counts.limit, 16.0, "at most every 100 ms");
        for step in 1..=20 {
            counts.adapt(step * 100, &slow);
        }
        assert_eq!(counts.limit, 1.0, "down to one request");
        counts.adapt(2_100, &Load { busy: true, ..quick });
        assert_eq!(counts.limit, 1.0, "busy is congested too, and one is the floor");
        for step in 22..=60 {
            counts.adapt(step * 100, &quick);
        }
        assert_eq!(counts.limit, 16.0, "back up by one a step, to the pool");
    }

    /// One client of a simulated run: it asks every `every_ms` for a
    /// request that takes `takes_ms` once admitted, times HBase's latency
    /// ratio then.
    struct Asking {
        client: ClientId,
        every_ms: u64,
        takes_ms: u64,
        /// When it starts asking.
        from_ms: u64,
    }

    /// What one client got in a simulated run.
    #[derive(Debug, Default)]
    struct Got {
        admitted: usize,
        /// Of those admitted, how many were sheltered.
        sheltered: usize,
        /// When (ms) its requests were refused.
        refused: Vec<u64>,
        last_refusal: Option<Refusal>,
    }

    /// Runs `asking` against `clients` a millisecond at a time over `span`,
    /// HBase as `load_at` says each millisecond given the requests in flight
    /// now and on average over the last twenty milliseconds or so; `watch`
    /// sees each client's requests in flight every millisecond.
    fn simulate(
        clients: &Clients,
        asking: &[Asking],
        span: std::ops::Range<u64>,
        load_at: impl Fn(u64, usize, f64) -> Load,
        mut watch: impl FnMut(u64, &[usize]),
    ) -> Vec<Got> {
        let mut got: Vec<Got> = asking.iter().map(|_| Got::default()).collect();
        let mut running: Vec<std::collections::VecDeque<(u64, Admission)>> =
            asking.iter().map(|_| std::collections::VecDeque::new()).collect();
        let mut recent = 0.0;
        for ms in span {
            let now: usize = running.iter().map(std::collections::VecDeque::len).sum();
            recent += 0.05 * (now as f64 - recent);
            for requests in &mut running {
                while requests.front().is_some_and(|(done, _)| *done <= ms) {
                    if let Some((_, mut admission)) = requests.pop_front() {
                        admission.served();
                    }
                }
            }
            for (index, one) in asking.iter().enumerate() {
                if ms < one.from_ms || ms % one.every_ms != index as u64 % one.every_ms {
                    continue;
                }
                let load = load_at(ms, running.iter().map(std::collections::VecDeque::len).sum(), recent);
                match clients.admit_at(&one.client, &load, Duration::from_millis(ms)) {
                    Ok(admission) => {
                        got[index].admitted += 1;
                        got[index].sheltered += usize::from(admission.sheltered());
                        let takes = (one.takes_ms as f64 * load.latency_ratio).round() as u64;
                        running[index].push_back((ms + takes, admission));
                    }
                    Err(refusal) => {
                        assert_eq!(refusal.reason(), "fair_share");
                        got[index].refused.push(ms);
                        got[index].last_refusal = Some(refusal);
                    }
                }
            }
            let in_flight: Vec<usize> = running.iter().map(std::collections::VecDeque::len).collect();
            watch(ms, &in_flight);
        }
        got
    }

    /// HBase busy and its operations four times their usual time.
    const SLOW_AND_BUSY: Load = Load { busy: true, latency_ratio: 4.0, connections: 16, operations: 16 };

    #[test]
    fn a_polite_client_with_three_requests_in_flight_on_a_slow_hbase_is_served_while_a_flood_is_refused() {
        let clients = clients(ClientPolicy::default());
        // The polite client reads ten pages a second, each 300 ms on the slow
        // HBase (four times 75): three in flight at once. A second on, the
        // greedy client comes, asking every millisecond.
        let polite = Asking { client: address("192.0.2.2"), every_ms: 100, takes_ms: 75, from_ms: 0 };
        let greedy = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 50, from_ms: 1_000 };
        let mut polite_most = 0;
        let got = simulate(
            &clients,
            &[polite, greedy],
            0..5_000,
            |_, _, _| SLOW_AND_BUSY,
            |_, in_flight| {
                polite_most = polite_most.max(in_flight[0]);
            },
        );
        assert_eq!(polite_most, 3);
        assert_eq!((got[0].admitted, got[0].refused.len()), (50, 0), "the polite client is never refused");
        assert!(got[1].refused.len() > 3_500, "the flood is refused: {:?}", (got[1].admitted, got[1].refused.len()));
        let refusal = got[1].last_refusal;
        let Some(Refusal { why: Why::FairShare { rate, fair_rate }, retry_after_secs: 1 }) = refusal else {
            panic!("{refusal:?}");
        };
        assert!(rate > 900.0 && fair_rate > 10.0 && fair_rate < rate, "{rate} {fair_rate}");
    }

    /// An HBase of 16 connections whose operations slow as more run at once:
    /// busy at 16, twice their usual time at 16 on average.
    fn crowded(_ms: u64, in_flight: usize, recent: f64) -> Load {
        Load { busy: in_flight >= 16, latency_ratio: 1.0 + recent / 16.0, connections: 16, operations: in_flight }
    }

    #[test]
    fn a_crowd_of_many_addresses_cannot_push_one_client_out() {
        for crowd in [12, 48] {
            let clients = clients(ClientPolicy::default());
            // One client reads twenty pages a second; each read takes 5 ms at
            // HBase's usual speed.
            let mut asking = vec![Asking { client: address("192.0.2.1"), every_ms: 50, takes_ms: 5, from_ms: 0 }];
            // A second on, the crowd comes, together asking 6,000 requests a
            // second (each every 2 or 8 ms).
            asking.extend((0..crowd).map(|n| Asking {
                client: address(&format!("198.51.100.{}", n + 1)),
                every_ms: crowd / 6,
                takes_ms: 5,
                from_ms: 1_000,
            }));
            let mut crowd_most = 0;
            let got = simulate(&clients, &asking, 0..5_000, crowded, |ms, in_flight| {
                if ms >= 2_100 {
                    crowd_most = crowd_most.max(in_flight[1..].iter().sum::<usize>());
                }
            });
            assert_eq!(got[0].refused, Vec::<u64>::new(), "a crowd of {crowd}: {:?}", got[0].last_refusal);
            // Once its members are known (a second after they came; until then
            // each may hold two requests), what the crowd holds at once is
            // bounded by the limit, not by the crowd's size.
            assert!(crowd_most < 16, "a crowd of {crowd} held {crowd_most} requests at once");
            let crowd_refused: usize = got[1..].iter().map(|got| got.refused.len()).sum();
            assert!(crowd_refused > 10_000, "a crowd of {crowd}: {crowd_refused} refused");
        }
    }

    #[test]
    fn a_crowd_is_not_sheltered_when_its_members_become_known() {
        let clients = clients(ClientPolicy::default());
        // A reader of twenty pages a second, and a second on a crowd of 48
        // asking 125 requests a second each, which come within a few
        // milliseconds and so become known within a few milliseconds.
        let mut asking = vec![Asking { client: address("192.0.2.1"), every_ms: 50, takes_ms: 5, from_ms: 0 }];
        asking.extend((0..48).map(|n| Asking {
            client: address(&format!("198.51.100.{}", n + 1)),
            every_ms: 8,
            takes_ms: 5,
            from_ms: 1_000,
        }));
        let got = simulate(&clients, &asking, 0..4_000, crowded, |_, _| {});
        let crowd_sheltered: usize = got[1..].iter().map(|got| got.sheltered).sum();
        assert_eq!(crowd_sheltered, 0, "the crowd's requests went before the reader's");
        assert!(got[0].sheltered > 0, "the reader, within an even share, is sheltered while the service sheds");
    }

    #[test]
    fn once_the_flood_asks_what_the_service_can_serve_its_shares_come_back() {
        let clients = clients(ClientPolicy::default());
        // On the crowded HBase a request of 30 ms takes longer the more run:
        // the service serves some 500 a second at most. For two seconds the
        // greedy client asks a thousand, then 200.
        let polite = Asking { client: address("192.0.2.2"), every_ms: 50, takes_ms: 5, from_ms: 0 };
        let flood = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 30, from_ms: 0 };
        let flood_got = simulate(&clients, &[polite, flood], 0..2_000, crowded, |_, _| {});
        let polite = Asking { client: address("192.0.2.2"), every_ms: 50, takes_ms: 5, from_ms: 0 };
        let calm = Asking { client: address("192.0.2.1"), every_ms: 5, takes_ms: 30, from_ms: 0 };
        let calm_got = simulate(&clients, &[polite, calm], 2_000..8_000, crowded, |_, _| {});
        assert!(flood_got[0].refused.is_empty() && calm_got[0].refused.is_empty(), "the polite client never is");
        let flood_refused = &flood_got[1].refused;
        assert!(flood_refused.len() > 1_000, "the flood is refused: {}", flood_refused.len());
        assert!(flood_refused.first().is_some_and(|&ms| ms < 1_100), "within its newcomer's second: {flood_refused:?}");
        // Calm, the greedy client is served all it asks within two seconds:
        // its share comes back as the limit grows and the service serves more.
        let last = calm_got[1].refused.last().copied().unwrap_or(2_000);
        assert!(last < 4_000, "last refused at {last} ms");
        assert!(calm_got[1].admitted > 1_100, "of 1,200 asked: {}", calm_got[1].admitted);
    }

    #[test]
    fn a_shopper_who_comes_during_a_flood_is_served_in_its_first_second() {
        let clients = clients(ClientPolicy::default());
        // A known flood beside a reader fills the room on the crowded HBase;
        // two seconds on, a shopper comes, a read every 100 ms.
        let reader = Asking { client: address("192.0.2.2"), every_ms: 100, takes_ms: 5, from_ms: 0 };
        let flood = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 30, from_ms: 0 };
        let shopper = Asking { client: address("192.0.2.9"), every_ms: 100, takes_ms: 5, from_ms: 2_000 };
        let got = simulate(&clients, &[reader, flood, shopper], 0..3_000, crowded, |_, _| {});
        assert!(got[1].refused.len() > 1_000, "the flood is held: {}", got[1].refused.len());
        assert_eq!((got[2].admitted, got[2].refused.len()), (10, 0), "the shopper is never refused");
    }

    #[test]
    fn while_it_sheds_the_clients_within_their_rate_are_sheltered_but_a_newcomer_is_not() {
        let at = Duration::from_millis;
        for fair_shedding in [true, false] {
            let clients = clients(ClientPolicy { fair_shedding, ..ClientPolicy::default() });
            // For two seconds a polite client reads beside a flood on the crowded HBase.
            let polite = Asking { client: address("192.0.2.2"), every_ms: 100, takes_ms: 5, from_ms: 0 };
            let greedy = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 30, from_ms: 0 };
            simulate(&clients, &[polite, greedy], 0..2_000, crowded, |_, _| {});
            // HBase is busy: the greedy client is over its rate, the polite
            // one within it, and a third one has just come.
            let busy = load(true, 16);
            let greedy = clients.admit_at(&address("192.0.2.1"), &busy, at(2_000));
            assert!(greedy.as_ref().map_or(true, |admission| !admission.sheltered()), "{greedy:?}");
            let newcomer = clients.admit_at(&address("192.0.2.3"), &busy, at(2_010)).expect("a newcomer's first");
            assert!(!newcomer.sheltered(), "a newcomer is not sheltered");
            let known = clients.admit_at(&address("192.0.2.2"), &busy, at(2_020)).expect("within its rate");
            assert_eq!(known.sheltered(), fair_shedding, "fair shedding {fair_shedding}");
            // Within its rate, with its three requests in flight and a
            // fourth asked: a reader whose answers are slow, still
            // sheltered. One more is admitted, no longer sheltered: a
            // client with that many waiting asks at a low rate only because
            // its answers are slow, as a crowd's clients do.
            let more: Vec<Admission> = (0..3)
                .map(|_| clients.admit_at(&address("192.0.2.2"), &busy, at(2_030)).expect("within its rate"))
                .collect();
            assert_eq!(more.last().map(Admission::sheltered), Some(fair_shedding), "fair shedding {fair_shedding}");
            let fifth = clients.admit_at(&address("192.0.2.2"), &busy, at(2_040)).expect("admitted, within its rate");
            assert!(!fifth.sheltered(), "fair shedding {fair_shedding}");
            drop((known, more));
        }
    }

    #[test]
    fn each_admission_is_tallied_by_its_class_and_kind_until_taken() {
        let at = Duration::from_millis;
        let shop_web = ApiKey { name: "shop-web".to_owned(), secret: "0123456789abcdef".to_owned() };
        let policy = ClientPolicy {
            api_keys: vec![shop_web],
            exempt_keys: vec!["shop-web".to_owned()],
            ..ClientPolicy::default()
        };
        let clients = clients(policy);
        // The tallies of `classes`, every class's taken at once.
        fn tallied<const N: usize>(clients: &Clients, classes: [&str; N]) -> [[u64; ADMISSION_KINDS.len()]; N] {
            let taken = clients.inner.locked.lock().expect("lock").tallies.take();
            classes.map(|class| taken.get(clients.inner.class_index[class]).copied().unwrap_or_default())
        }
        let kinds = |pairs: &[(&str, u64)]| {
            ADMISSION_KINDS.map(|kind| pairs.iter().find(|(named, _)| *named == kind).map_or(0, |(_, count)| *count))
        };
        // HBase keeps up: nobody's share is asked.
        drop(clients.admit_at(&address("192.0.2.2"), &load(false, 16), at(0)).expect("admitted"));
        assert_eq!(tallied(&clients, [ADDRESS_CLASS]), [kinds(&[("calm", 1)])]);
        // A flood beside a polite reader on the crowded HBase: the flood is
        // let in over its fair rate, in the room, and its first requests as a newcomer's.
        let polite = Asking { client: address("192.0.2.2"), every_ms: 100, takes_ms: 5, from_ms: 0 };
        let greedy = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 30, from_ms: 0 };
        let got = simulate(&clients, &[polite, greedy], 0..2_000, crowded, |_, _| {});
        let [during] = tallied(&clients, [ADDRESS_CLASS]);
        let admitted: usize = got.iter().map(|got| got.admitted).sum();
        assert_eq!(during.iter().sum::<u64>(), admitted as u64, "every admission tallied once: {during:?}");
        for kind in ["room", "newcomer"] {
            assert!(during[ADMISSION_KINDS.iter().position(|named| *named == kind).expect("a kind")] > 0, "{during:?}");
        }
        // HBase busy: the polite reader is sheltered, a third client a
        // newcomer, and the exempt key exempt, in its own class.
        let busy = load(true, 16);
        let held = [
            clients.admit_at(&address("192.0.2.2"), &busy, at(2_000)).expect("within its rate"),
            clients.admit_at(&address("192.0.2.3"), &busy, at(2_010)).expect("a newcomer's first"),
            clients.admit_at(&ClientId::Key("shop-web".into()), &busy, at(2_020)).expect("exempt"),
        ];
        assert_eq!(
            tallied(&clients, [ADDRESS_CLASS, "shop-web"]),
            [kinds(&[("sheltered", 1), ("newcomer", 1)]), kinds(&[("exempt", 1)])]
        );
        drop(held);
    }

    #[test]
    fn a_newcomers_unserved_request_is_no_sign_that_the_service_overflowed() {
        let at = Duration::from_millis;
        let clients = clients(ClientPolicy::default());
        let polite = Asking { client: address("192.0.2.2"), every_ms: 100, takes_ms: 5, from_ms: 0 };
        let greedy = Asking { client: address("192.0.2.1"), every_ms: 1, takes_ms: 30, from_ms: 0 };
        simulate(&clients, &[polite, greedy], 0..2_000, crowded, |_, _| {});
        let before = clients.inner.totals.finished();
        // While the service sheds, a client that has just come and the
        // known reader are let in, and neither is served (a 503, the
        // deadline, or dropped).
        let busy = load(true, 16);
        let newcomer = clients.admit_at(&address("192.0.2.3"), &busy, at(2_000)).expect("a newcomer's first");
        let known = clients.admit_at(&address("192.0.2.2"), &busy, at(2_010)).expect("within its rate");
        drop((newcomer, known));
        let after = clients.inner.totals.finished();
        let ended = (after.served - before.served, after.unserved - before.unserved);
        assert_eq!(ended, (0, 1), "the reader's request counts as unserved, the newcomer's not at all");
    }

    #[test]
    fn the_fair_rate_is_the_max_min_fair_share() {
        // The polite clients get what they ask, the others split the rest.
        let mut rates = [600.0, 20.0, 600.0, 5.0];
        assert_eq!(water_level(&mut rates, 1_025.0), (500.0, 2));
        // Enough for everyone: nobody is over it.
        let mut rates = [600.0, 20.0];
        assert_eq!(water_level(&mut rates, 620.0), (f64::INFINITY, 0));
        // Equal askers short of capacity are all over it.
        let mut rates = [100.0; 10];
        assert_eq!(water_level(&mut rates, 500.0), (50.0, 10));
        assert_eq!(water_level(&mut [], 0.0), (f64::INFINITY, 0));
    }

    /// Seven readers at 20 requests a second beside a crowd of fifty asking
    /// `crowd_rate` each, for three seconds, HBase running `operations`, and
    /// the requests admitted finishing as `finished_at` says: the share then.
    fn share_beside_a_crowd(crowd_rate: u64, operations: usize, finished_at: impl Fn(u64) -> Finished) -> Share {
        let mut counts = Counts::default();
        let readers: Vec<ClientId> = (1..=7).map(|n| address(&format!("192.0.2.{n}"))).collect();
        let crowd: Vec<ClientId> = (1..=50).map(|n| address(&format!("198.51.100.{n}"))).collect();
        let load = Load { busy: true, latency_ratio: 2.0, connections: 32, operations };
        let ticks = 3 * crowd_rate;
        for tick in 0..ticks {
            let ms = tick * 1_000 / crowd_rate;
            crowd.iter().for_each(|client| {
                counts.see(client, ms, finished_at(ms), &load);
            });
            if tick * 20 / crowd_rate != (tick + 1) * 20 / crowd_rate {
                readers.iter().for_each(|client| {
                    counts.see(client, ms, finished_at(ms), &load);
                });
            }
        }
        counts.fair_rate(2_995, finished_at(2_995), 32)
    }

    /// `served` requests a second served, and `unserved` not.
    fn finishing(served: u64, unserved: u64) -> impl Fn(u64) -> Finished {
        move |ms| Finished { served: ms * served / 1_000, unserved: ms * unserved / 1_000 }
    }

    #[test]
    fn what_the_service_could_serve_counts_the_part_of_the_pool_it_left_unused() {
        // The service serving 500 a second.
        let fair_rate_when = |operations: usize| share_beside_a_crowd(120, operations, finishing(500, 0)).fair_rate;
        // Held to a quarter of the pool, the service could serve four times
        // what it served: the readers are within their fair rate, the crowd
        // is not.
        let fair_rate = fair_rate_when(8);
        assert!(fair_rate > 21.0 && fair_rate < 120.0, "{fair_rate}");
        // With every connection in use, it serves what it can (twice what it
        // served, for the rates that wander), and the fifty-seven clients'
        // share is under the readers' 20.
        let fair_rate = fair_rate_when(32);
        assert!(fair_rate < 20.0, "{fair_rate}");
    }

    #[test]
    fn a_second_whose_requests_overflowed_served_the_most_the_service_can() {
        // A crowd let in slows every answer, and its members, each with only
        // so many requests in flight, ask 50 a second: served 2,300 a second
        // with the pool in full use, the service could serve twice that,
        // and the crowd would be within an even share.
        let crowd_rate = 50_u32;
        let calm = share_beside_a_crowd(crowd_rate.into(), 32, finishing(2_300, 0));
        assert!(calm.even_rate > f64::from(crowd_rate), "{calm:?}");
        // But it finished 2,900 a second unserved besides: what it served is
        // the most it can, and the crowd is over its share.
        let overflowing = share_beside_a_crowd(crowd_rate.into(), 32, finishing(2_300, 2_900));
        assert!(overflowing.even_rate < f64::from(crowd_rate), "{overflowing:?}");
        assert!(overflowing.fair_rate < f64::from(crowd_rate), "{overflowing:?}");
        // A few requests dropped by clients that hung up are no sign.
        assert_eq!(share_beside_a_crowd(crowd_rate.into(), 32, finishing(2_300, 5)), calm);
    }

    #[test]
    fn a_second_that_overflowed_is_told_once_when_it_ends() {
        let mut counts = Counts::default();
        let client = address("192.0.2.1");
        let busy = load(true, 32);
        let finished = |served, unserved| Finished { served, unserved };
        assert_eq!(counts.see(&client, 0, finished(0, 0), &busy), None);
        assert_eq!(counts.see(&client, 500, finished(100, 20), &busy), None, "the second has not ended");
        assert_eq!(counts.see(&client, 1_000, finished(200, 20), &busy), Some(finished(200, 20)));
        assert_eq!(counts.see(&client, 1_500, finished(300, 20), &busy), None, "told once");
        // Five unserved of 1,105 finished in the next second: no overflow.
        assert_eq!(counts.see(&client, 2_000, finished(1_300, 25), &busy), None);
    }

    #[test]
    fn a_client_between_requests_counts_for_a_second_or_two() {
        let mut counts = Counts::default();
        let (a, b) = (address("192.0.2.1"), address("192.0.2.2"));
        counts.see(&a, 0, Finished::default(), &load(false, 16));
        counts.see(&b, 10, Finished::default(), &load(false, 16));
        counts.see(&a, 20, Finished::default(), &load(false, 16));
        assert_eq!(counts.clients(), 2);
        assert!(counts.rate_of(&a, 500).1, "new for a second");
        counts.see(&a, 1_000, Finished::default(), &load(false, 16));
        assert_eq!(counts.clients(), 2, "b was seen in the second before");
        assert_eq!(counts.rate_of(&a, 1_500), (2.0, false), "half the second before, and one now");
        counts.see(&a, 2_000, Finished::default(), &load(false, 16));
        assert_eq!(counts.clients(), 1, "b is forgotten two seconds on");
        counts.see(&b, 9_000, Finished::default(), &load(false, 16));
        assert_eq!(counts.clients(), 1, "after a gap, only what is seen now");
        assert_eq!(counts.rate_of(&a, 9_000), (0.0, true));
    }

    #[test]
    fn a_client_with_nothing_in_flight_is_forgotten() {
        let clients = clients(ClientPolicy::default());
        let admissions: Vec<Admission> =
            (0..50).map(|n| clients.admit(&address(&format!("192.0.2.{n}")), &load(false, 4)).expect("ok")).collect();
        let still = clients.admit(&address("192.0.2.7"), &load(false, 4)).expect("ok");
        drop(admissions);
        clients.forget_idle();
        assert_eq!(clients.inner.locked.lock().expect("lock").counts.in_flight.len(), 1, "192.0.2.7 has one in flight");
        assert_eq!(clients.in_flight_of(&address("192.0.2.7")), 1);
        drop(still);
        clients.forget_idle();
        assert!(clients.inner.locked.lock().expect("lock").counts.in_flight.is_empty());
    }
}
