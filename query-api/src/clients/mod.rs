//! Fair shedding per client: who a request is from ([`ClientId`]), and
//! refusing the clients over their share first when the service must shed
//! ([`Clients::admit`], applied to every request by [`shed_fairly`]).
//!
//! HBase connections are what the service runs short of: when every one is
//! busy, a request queues, and past the queue's bound it is refused
//! (`503 overloaded`). Without a notion of clients that refuses whoever comes
//! next, so one client flooding the service takes every other client's
//! product pages down with it. So each request is counted against its client
//! while it runs, and while HBase is busy (as many operations running as the
//! pool has connections, or one waiting, within the last second:
//! `common::hbase::Hbase::busy`) a client that already has its
//! **fair share** of requests in flight is refused with `429` and
//! `Retry-After`, at once and at no cost to HBase. The share is a limit over
//! the clients seen in the last second or two, at least two requests. The
//! limit starts at the pool's connections and adapts to how HBase keeps up:
//! down by a fifth every tenth of a second while HBase is busy or its
//! operations take one and a half times their usual time or more
//! (`common::hbase::Hbase::latency_ratio`), up by one otherwise,
//! because on a small machine a flood slows every operation long before it
//! fills the pool. A client within its share is served as before. Without
//! that pressure, or without another client, nobody is refused for volume,
//! so a lone client (a benchmark, a backfill) keeps the whole service. Fixed
//! limits per client (requests per second, with `governor`'s keyed GCRA;
//! requests in flight) are there for operators who want them, and a named
//! API key can be exempted from all of it.
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
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ipnet::IpNet;

mod identity;
mod shares;
mod shedding;

pub use identity::{parse_trusted_proxy, ApiKey, ClientId, ForwardedHeader, ADDRESS_CLASS, OTHER_CLASS};
use shares::Counts;
pub use shares::Load;
use shares::{BUSY_FOR, MIN_SHARE};
pub(crate) use shedding::{shed_fairly, Shedding};

use crate::telemetry;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// `fair_share`, `in_flight` or `rate` ([`REFUSAL_REASONS`]).
    pub reason: &'static str,
    /// Whole seconds to wait (`Retry-After`), at least one.
    pub retry_after_secs: u64,
    /// Requests the client had in flight.
    pub in_flight: usize,
    /// The most it may have at once now (for `fair_share` and `in_flight`).
    pub allowed: usize,
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
    counts: Mutex<Counts>,
    limiter: Option<DefaultKeyedRateLimiter<ClientId>>,
    /// Each class's counters, registered once: a request only increments.
    counters: HashMap<String, ClassCounters>,
    /// Seconds of [`Counts::second`] and [`Counts::busy_until_ms`] are counted from here.
    started: Instant,
}

/// The counters of one client class.
struct ClassCounters {
    requests: metrics::Counter,
    /// By reason, in the order of [`REFUSAL_REASONS`].
    refusals: [metrics::Counter; 3],
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
        let counts = Mutex::new(Counts::default());
        // Every class's counters exist from zero, so a rate over them exists
        // before the first refusal.
        let counters = policy
            .classes()
            .into_iter()
            .map(|class| {
                let requests = metrics::counter!(telemetry::CLIENT_REQUESTS, "class" => class.clone());
                let refusals = REFUSAL_REASONS.map(|reason| {
                    metrics::counter!(telemetry::CLIENT_REFUSALS, "class" => class.clone(), "reason" => reason)
                });
                requests.increment(0);
                refusals.iter().for_each(|counter| counter.increment(0));
                (class, ClassCounters { requests, refusals })
            })
            .collect();
        let started = Instant::now();
        Clients { inner: Arc::new(Inner { policy, keys, exempt, counts, limiter, counters, started }) }
    }

    /// Who a request from `peer` carrying `headers` is from.
    pub fn identify(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> ClientId {
        identity::identify(&self.inner.policy, &self.inner.keys, peer, headers)
    }

    /// Admits a request of `client`, or says why not: over its rate, over
    /// its fixed in-flight limit, or (HBase busy now or within [`BUSY_FOR`],
    /// or the adapted limit ([`Counts::adapt`]) still below the pool's size
    /// after it was busy, and other clients seen in the last second or two)
    /// at or over its fair share: that limit over the clients seen, at least
    /// [`MIN_SHARE`]. The shares thus grow back a request at a time once
    /// HBase keeps up, rather than all at once, which let a flood in whole
    /// and had it shed again a second later. A slow HBase that was not busy
    /// lowers the limit but refuses nobody. An exempt key is always
    /// admitted. The admission counts the request until it is dropped.
    pub fn admit(&self, client: &ClientId, load: &Load) -> Result<Admission, Refusal> {
        self.admit_at(client, load, self.inner.started.elapsed())
    }

    /// [`Clients::admit`] at `now`, the time since [`Inner::started`].
    fn admit_at(&self, client: &ClientId, load: &Load, now: Duration) -> Result<Admission, Refusal> {
        let exempt = matches!(client, ClientId::Key(name) if self.inner.exempt.contains(name));
        let mut counts = self.inner.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.see(client, now.as_secs());
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        if load.busy {
            counts.busy_until_ms = now_ms.saturating_add(BUSY_FOR.as_millis() as u64);
            counts.recovering = true;
        }
        counts.adapt(now_ms, load);
        let shedding = now_ms < counts.busy_until_ms || counts.recovering;
        let mine = counts.in_flight.get(client).map_or(0, |count| count.load(Ordering::Relaxed));
        if !exempt {
            let policy = &self.inner.policy;
            if let Some(max) = policy.max_in_flight.filter(|max| mine >= *max) {
                return Err(Refusal { reason: "in_flight", retry_after_secs: 1, in_flight: mine, allowed: max });
            }
            // A lone client is never refused for its share: there is nobody to
            // keep the service for, and its excess waits in HBase's queue as
            // before (a load balancer whose address is not a trusted proxy is
            // one client, the whole shop).
            let clients = counts.seen;
            if policy.fair_shedding && shedding && clients > 1 {
                // A client refused for its share a moment ago is flooding: it
                // may be held to one request, half of what a page needs, so
                // what it still gets in costs the others less.
                let refused_lately = counts
                    .refused_ms
                    .get(client)
                    .is_some_and(|&at| now_ms < at.saturating_add(BUSY_FOR.as_millis() as u64));
                let floor = if refused_lately { 1 } else { MIN_SHARE };
                let share = ((counts.limit / clients as f64) as usize).max(floor);
                if mine >= share {
                    counts.refused_ms.insert(client.clone(), now_ms);
                    return Err(Refusal { reason: "fair_share", retry_after_secs: 1, in_flight: mine, allowed: share });
                }
            }
            // Last, so a request refused for the above spends none of its
            // client's rate.
            if let Some(limiter) = &self.inner.limiter {
                if let Err(not_until) = limiter.check_key(client) {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    let retry_after_secs = whole_seconds(wait);
                    return Err(Refusal { reason: "rate", retry_after_secs, in_flight: mine, allowed: 0 });
                }
            }
        }
        let count = Arc::clone(counts.in_flight.entry(client.clone()).or_default());
        count.fetch_add(1, Ordering::Relaxed);
        Ok(Admission { count })
    }

    /// Forgets the clients with nothing in flight, and the rate-limit state
    /// of clients idle long enough that it no longer limits them, so memory
    /// follows the clients of the last seconds.
    pub fn forget_idle(&self) {
        let mut counts = self.inner.counts.lock().unwrap_or_else(PoisonError::into_inner);
        // A count that is zero can only rise again under the lock (in `admit`).
        counts.in_flight.retain(|_, count| count.load(Ordering::Relaxed) > 0);
        let now_ms = u64::try_from(self.inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        counts.refused_ms.retain(|_, at| now_ms < at.saturating_add(BUSY_FOR.as_millis() as u64));
        drop(counts);
        if let Some(limiter) = &self.inner.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Counts a request of `client`, and its refusal when there is one.
    fn count(&self, client: &ClientId, refusal: Option<&Refusal>) {
        let Some(counters) = self.inner.counters.get(client.class()) else { return };
        counters.requests.increment(1);
        if let Some(index) =
            refusal.and_then(|refusal| REFUSAL_REASONS.iter().position(|reason| *reason == refusal.reason))
        {
            counters.refusals[index].increment(1);
        }
    }

    #[cfg(test)]
    fn in_flight_of(&self, client: &ClientId) -> usize {
        let counts = self.inner.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.in_flight.get(client).map_or(0, |count| count.load(Ordering::Relaxed))
    }
}

/// A request counted against its client while it lives.
#[derive(Debug)]
pub struct Admission {
    /// Its client's count of requests in flight.
    count: Arc<AtomicUsize>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `wait` rounded up to whole seconds, at least one.
fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_millis().div_ceil(1_000) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

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
        Load { busy, latency_ratio: 1.0, connections }
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
    fn while_hbase_is_busy_a_client_at_its_fair_share_is_refused() {
        let clients = clients(ClientPolicy::default());
        let (greedy, polite) = (address("192.0.2.1"), address("192.0.2.2"));
        // HBase not busy: a client may have any number in flight.
        let mut held: Vec<Admission> =
            (0..10).map(|_| clients.admit(&greedy, &load(false, 4)).expect("admitted")).collect();
        // Busy, but a lone client: nobody to keep the service for.
        held.push(clients.admit(&greedy, &load(true, 4)).expect("alone"));
        // Another client, with nothing in flight, is within its share (two of four connections)...
        let first = clients.admit(&polite, &load(true, 4)).expect("within its share");
        // ...and now the greedy client, with eleven in flight, is over its share.
        let refused = clients.admit(&greedy, &load(true, 4)).expect_err("over its share");
        assert_eq!(
            (refused.reason, refused.in_flight, refused.allowed, refused.retry_after_secs),
            ("fair_share", 11, 2, 1)
        );
        // HBase was busy less than a second ago: the share still holds.
        assert!(clients.admit(&greedy, &load(false, 4)).is_err(), "busy a moment ago");
        let _second = clients.admit(&polite, &load(true, 4)).expect("still within");
        assert_eq!(clients.admit(&polite, &load(true, 4)).expect_err("at its share").allowed, 2);
        drop(first);
        assert!(clients.admit(&polite, &load(true, 4)).is_ok(), "a finished request frees its place");
        drop(held);
        assert!(clients.admit(&greedy, &load(true, 4)).is_ok(), "below its share again");
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
        assert_eq!(clients.admit(&client, &load(false, 100)).expect_err("in flight").reason, "in_flight");
        drop(held);
        // The refusal spent none of the rate: the third of the burst of three is left.
        let third = clients.admit(&client, &load(false, 100)).expect("the third");
        drop(third);
        let rate = clients.admit(&client, &load(false, 100)).expect_err("rate");
        assert_eq!((rate.reason, rate.retry_after_secs), ("rate", 1));
        let exempt = ClientId::Key("batch".into());
        let many: Vec<Admission> = (0..20).map(|_| clients.admit(&exempt, &load(true, 1)).expect("exempt")).collect();
        assert_eq!(many.len(), 20);
    }

    #[test]
    fn the_shares_shrink_while_hbase_is_slow_and_grow_back_when_it_keeps_up() {
        let mut counts = Counts::default();
        let slow = Load { busy: false, latency_ratio: 3.0, connections: 16 };
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

    #[test]
    fn a_client_between_requests_counts_for_a_second_or_two() {
        let clients = clients(ClientPolicy::default());
        let (greedy, polite) = (address("192.0.2.1"), address("192.0.2.2"));
        let _held: Vec<Admission> =
            (0..3).map(|_| clients.admit(&greedy, &load(false, 4)).expect("admitted")).collect();
        // The polite client's request came and went: it is not in flight, yet
        // the greedy client is held to half the connections.
        drop(clients.admit(&polite, &load(false, 4)).expect("admitted"));
        assert_eq!(clients.admit(&greedy, &load(true, 4)).expect_err("over its share").allowed, 2);

        let mut counts = Counts::default();
        let (a, b) = (address("192.0.2.1"), address("192.0.2.2"));
        counts.see(&a, 0);
        counts.see(&b, 0);
        counts.see(&a, 0);
        assert_eq!(counts.seen, 2);
        counts.see(&a, 1);
        assert_eq!(counts.seen, 2, "b was seen in the second before");
        counts.see(&a, 2);
        assert_eq!(counts.seen, 1, "b is forgotten two seconds on");
        counts.see(&b, 9);
        assert_eq!(counts.seen, 1, "after a gap, only what is seen now");
    }

    #[test]
    fn a_client_refused_a_moment_ago_may_be_held_to_one_request() {
        let clients = clients(ClientPolicy::default());
        let (greedy, polite) = (address("192.0.2.1"), address("192.0.2.2"));
        let at = Duration::from_millis;
        let held: Vec<Admission> =
            (0..3).map(|_| clients.admit_at(&greedy, &load(false, 2), at(0)).expect("admitted")).collect();
        // Busy: the polite client gets a page's pair in, the greedy one is over its share of two.
        let _pair = [
            clients.admit_at(&polite, &load(true, 2), at(10)).expect("within its share"),
            clients.admit_at(&polite, &load(true, 2), at(20)).expect("a page's pair"),
        ];
        assert_eq!(clients.admit_at(&greedy, &load(true, 2), at(30)).expect_err("over its share").allowed, 2);
        drop(held);
        // Refused a moment ago: one request at a time.
        let _one = clients.admit_at(&greedy, &load(true, 2), at(40)).expect("one");
        assert_eq!(clients.admit_at(&greedy, &load(true, 2), at(50)).expect_err("one at a time").allowed, 1);
        // A second on, two again.
        assert!(clients.admit_at(&greedy, &load(true, 2), at(1_100)).is_ok(), "not refused for a second");
    }

    #[test]
    fn after_hbase_was_busy_the_shares_grow_back_a_request_at_a_time() {
        let clients = clients(ClientPolicy::default());
        let (greedy, polite) = (address("192.0.2.1"), address("192.0.2.2"));
        let at = Duration::from_millis;
        let _held: Vec<Admission> =
            (0..20).map(|_| clients.admit_at(&greedy, &load(false, 16), at(0)).expect("admitted")).collect();
        // Slow but never busy: the limit falls, yet nobody is held to a share.
        let slow = Load { busy: false, latency_ratio: 3.0, connections: 16 };
        for step in 1..=3 {
            drop(clients.admit_at(&polite, &slow, at(step * 100)).expect("slow is not busy"));
        }
        assert!(clients.admit_at(&greedy, &slow, at(400)).is_ok(), "a slow HBase alone refuses nobody");
        // Busy now: the limit keeps falling, and the greedy client is over its share.
        let _polite = clients.admit_at(&polite, &load(true, 16), at(500)).expect("within its share");
        assert!(clients.admit_at(&greedy, &load(true, 16), at(600)).is_err(), "busy");
        // A second and more after HBase was last busy, the limit has grown back by one a step only.
        let refused = clients.admit_at(&greedy, &load(false, 16), at(1_700)).expect_err("still held to its share");
        assert_eq!(refused.reason, "fair_share");
        let mut step = 17;
        loop {
            // The polite client keeps coming, so there are two clients to share among.
            drop(clients.admit_at(&polite, &load(false, 16), at(step * 100)).expect("within its share"));
            if clients.admit_at(&greedy, &load(false, 16), at(step * 100)).is_ok() {
                break;
            }
            step += 1;
            assert!(step < 40, "the limit grows back to the pool");
        }
        assert_eq!(step, 28, "a request a step, from about 5 back to 16");
        // Grown back: while HBase keeps up, nobody is held to a share.
        let _more: Vec<Admission> =
            (0..5).map(|_| clients.admit_at(&greedy, &load(false, 16), at(step * 100)).expect("admitted")).collect();
    }

    #[test]
    fn a_client_with_nothing_in_flight_is_forgotten() {
        let clients = clients(ClientPolicy::default());
        let admissions: Vec<Admission> =
            (0..50).map(|n| clients.admit(&address(&format!("192.0.2.{n}")), &load(false, 4)).expect("ok")).collect();
        let still = clients.admit(&address("192.0.2.7"), &load(false, 4)).expect("ok");
        drop(admissions);
        clients.forget_idle();
        assert_eq!(clients.inner.counts.lock().expect("lock").in_flight.len(), 1, "192.0.2.7 has one in flight");
        assert_eq!(clients.in_flight_of(&address("192.0.2.7")), 1);
        drop(still);
        clients.forget_idle();
        assert!(clients.inner.counts.lock().expect("lock").in_flight.is_empty());
    }
}
