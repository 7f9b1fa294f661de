//! Fair shedding per client: who a request is from ([`ClientId`]), and
//! refusing the clients over their share first when the service must shed
//! ([`Clients::admit`], applied to every request by [`shed_fairly`]).
//!
//! HBase connections are what the service runs short of: when every one is
//! busy, a request queues, and past the queue's bound it is refused
//! (`503 overloaded`). Without a notion of clients that refuses whoever comes
//! next, so one client flooding the service takes every other client's
//! product pages down with it. So each request is counted against its client
//! while it runs, and while some HBase call waits for a connection a client
//! that already has its **fair share** of requests in flight (the pool's
//! connections over the clients with requests in flight, at least one) is
//! refused with `429` and `Retry-After`, at once and at no cost to HBase. A
//! client within its share is served as before. Without that pressure nobody
//! is refused for volume, so a lone client (a benchmark, a backfill) keeps
//! the whole service. Fixed limits per client (requests per second, with
//! `governor`'s keyed GCRA; requests in flight) are there for operators who
//! want them, and a named API key can be exempted from all of it.
//!
//! A client is its API key when it sends a configured one, otherwise its
//! address: the peer's or, when the peer is a proxy the operator trusts, the
//! address the proxies say they forwarded for (`X-Forwarded-For`, else
//! `Forwarded`), read from the nearest proxy outwards. A forwarding header
//! from any other peer is ignored, so a client cannot choose whom it counts
//! as. An IPv6 address counts by its /64, the block one host is given.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ipnet::IpNet;

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::telemetry;

/// The class of requests identified by their address, in metric labels.
pub const ADDRESS_CLASS: &str = "address";
/// The class of requests whose client is not known (no peer address: a test
/// calling the router in process), in metric labels.
pub const OTHER_CLASS: &str = "other";
/// Why a request was refused, as metric labels.
pub const REFUSAL_REASONS: [&str; 3] = ["fair_share", "in_flight", "rate"];
/// Paths never limited: the load balancer's and Prometheus' probes must see
/// the service as it is, not as one of its clients.
const UNLIMITED_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// A configured API key: the name it is known by (in metrics and
/// `--exempt-keys`) and the secret a client sends.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub name: String,
    pub secret: String,
}

impl std::fmt::Debug for ApiKey {
    // The secret never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey").field("name", &self.name).field("secret", &"<redacted>").finish()
    }
}

impl std::str::FromStr for ApiKey {
    type Err = String;

    /// `NAME=SECRET`: a name of 1 to 32 lower-case letters, digits, `-` or
    /// `_` (not `address` or `other`, the other classes), and a secret of 16
    /// to 256 visible ASCII characters.
    fn from_str(text: &str) -> Result<ApiKey, String> {
        let (name, secret) = text
            .split_once('=')
            .ok_or_else(|| "an API key is written NAME=SECRET, for example shop-web=…".to_owned())?;
        let name_ok = (1..=32).contains(&name.len())
            && name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-_".contains(&byte));
        if !name_ok || name == ADDRESS_CLASS || name == OTHER_CLASS {
            return Err(format!(
                "an API key's name is 1 to 32 of a-z, 0-9, - and _, and not {ADDRESS_CLASS:?} or {OTHER_CLASS:?}; got {name:?}"
            ));
        }
        if !(16..=256).contains(&secret.len()) || !secret.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(format!("the secret of API key {name:?} must be 16 to 256 visible ASCII characters"));
        }
        Ok(ApiKey { name: name.to_owned(), secret: secret.to_owned() })
    }
}

/// Parses a trusted proxy: a network (`10.0.0.0/8`) or one address.
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("a trusted proxy is an address or a network (10.0.0.0/8), got {text:?}"))
}

/// How clients are told apart and limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPolicy {
    /// Peers whose forwarding headers are believed.
    pub trusted_proxies: Vec<IpNet>,
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
    /// Refuse the clients over their fair share while HBase calls queue.
    pub fair_shedding: bool,
}

impl Default for ClientPolicy {
    fn default() -> Self {
        ClientPolicy {
            trusted_proxies: Vec::new(),
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

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientId {
    /// A configured API key, by name.
    Key(Arc<str>),
    /// An address (an IPv6 address with its last 64 bits cleared).
    Address(IpAddr),
    /// No address known.
    Unknown,
}

impl ClientId {
    /// The client's class in metric labels: its key's name, `address` or `other`.
    pub fn class(&self) -> &str {
        match self {
            ClientId::Key(name) => name,
            ClientId::Address(_) => ADDRESS_CLASS,
            ClientId::Unknown => OTHER_CLASS,
        }
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientId::Key(name) => write!(f, "key {name}"),
            ClientId::Address(address) => write!(f, "{address}"),
            ClientId::Unknown => f.write_str("unknown"),
        }
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
    /// The most it may have at once now.
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
    /// Requests in flight per client; a client leaves the map with its last one.
    in_flight: Mutex<HashMap<ClientId, usize>>,
    limiter: Option<DefaultKeyedRateLimiter<ClientId>>,
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
        Clients { inner: Arc::new(Inner { policy, keys, exempt, in_flight: Mutex::new(HashMap::new()), limiter }) }
    }

    /// The policy the clients are held to.
    pub fn policy(&self) -> &ClientPolicy {
        &self.inner.policy
    }

    /// Who a request from `peer` carrying `headers` is from.
    pub fn identify(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> ClientId {
        let policy = &self.inner.policy;
        let key = headers.get(&policy.api_key_header).and_then(|value| value.to_str().ok());
        if let Some(name) = key.and_then(|secret| self.inner.keys.get(secret.trim())) {
            return ClientId::Key(Arc::clone(name));
        }
        let Some(peer) = peer.map(canonical) else { return ClientId::Unknown };
        let trusted = |address: &IpAddr| policy.trusted_proxies.iter().any(|proxy| proxy.contains(address));
        if !trusted(&peer) {
            return ClientId::Address(per_host(peer));
        }
        // From the nearest proxy outwards: the first address no trusted proxy
        // has; the farthest when every one is trusted; the peer itself when a
        // hop before the client's is not an address (nothing beyond it is believed).
        let hops = forwarded_hops(headers);
        let mut client = peer;
        for hop in hops.iter().rev() {
            match hop {
                Some(address) if trusted(address) => client = *address,
                Some(address) => return ClientId::Address(per_host(*address)),
                None => return ClientId::Address(per_host(peer)),
            }
        }
        ClientId::Address(per_host(client))
    }

    /// Admits a request of `client`, or says why not: over its rate, over
    /// its fixed in-flight limit, or (`hbase_waiting` calls waiting for one
    /// of `connections`) at or over its fair share. An exempt key is always
    /// admitted. The admission counts the request until it is dropped.
    pub fn admit(&self, client: &ClientId, hbase_waiting: bool, connections: usize) -> Result<Admission, Refusal> {
        let exempt = matches!(client, ClientId::Key(name) if self.inner.exempt.contains(name));
        if !exempt {
            if let Some(limiter) = &self.inner.limiter {
                if let Err(not_until) = limiter.check_key(client) {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    return Err(Refusal {
                        reason: "rate",
                        retry_after_secs: whole_seconds(wait),
                        in_flight: self.in_flight_of(client),
                        allowed: self.in_flight_of(client),
                    });
                }
            }
        }
        let mut in_flight = self.inner.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = in_flight.get(client).copied().unwrap_or(0);
        if !exempt {
            let policy = &self.inner.policy;
            if let Some(max) = policy.max_in_flight.filter(|max| mine >= *max) {
                return Err(Refusal { reason: "in_flight", retry_after_secs: 1, in_flight: mine, allowed: max });
            }
            if policy.fair_shedding && hbase_waiting {
                let clients = in_flight.len() + usize::from(mine == 0);
                let share = (connections / clients.max(1)).max(1);
                if mine >= share {
                    return Err(Refusal { reason: "fair_share", retry_after_secs: 1, in_flight: mine, allowed: share });
                }
            }
        }
        *in_flight.entry(client.clone()).or_insert(0) += 1;
        Ok(Admission { clients: self.clone(), client: client.clone() })
    }

    /// Forgets the rate-limit state of clients idle long enough that it no
    /// longer limits them, so memory follows the clients of the last seconds.
    pub fn forget_idle(&self) {
        if let Some(limiter) = &self.inner.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    fn in_flight_of(&self, client: &ClientId) -> usize {
        self.inner.in_flight.lock().unwrap_or_else(PoisonError::into_inner).get(client).copied().unwrap_or(0)
    }

    fn release(&self, client: &ClientId) {
        let mut in_flight = self.inner.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = in_flight.get_mut(client) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(client);
            }
        }
    }
}

/// A request counted against its client while it lives.
#[derive(Debug)]
pub struct Admission {
    clients: Clients,
    client: ClientId,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.clients.release(&self.client);
    }
}

/// The middleware: counts every request by its client's class, refuses the
/// one [`Clients::admit`] refuses with `429 too_many_requests` and
/// `Retry-After`, and holds the admission of the others until their answer
/// is ready. Probes and `/metrics` pass untouched.
pub(crate) async fn shed_fairly(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if UNLIMITED_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| address.ip());
    let client = state.clients().identify(peer, request.headers());
    metrics::counter!(telemetry::CLIENT_REQUESTS, "class" => client.class().to_owned()).increment(1);
    let store = state.store();
    match state.clients().admit(&client, store.hbase_waiting() > 0, store.hbase_connections()) {
        Ok(_admission) => next.run(request).await,
        Err(refusal) => {
            metrics::counter!(telemetry::CLIENT_REFUSALS, "class" => client.class().to_owned(), "reason" => refusal.reason)
                .increment(1);
            tracing::debug!(%client, reason = refusal.reason, in_flight = refusal.in_flight, "client refused");
            let detail = match refusal.reason {
                "rate" => "this client is over its request rate".to_owned(),
                "in_flight" => format!("this client already has {} requests in flight, its most", refusal.in_flight),
                _ => format!(
                    "the service is busy and this client already has {} requests in flight, its share now is {}",
                    refusal.in_flight, refusal.allowed
                ),
            };
            let mut response = ApiError::new(
                ErrorCode::TooManyRequests,
                format!("{detail}; retry after {} s", refusal.retry_after_secs),
            )
            .into_response();
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(refusal.retry_after_secs));
            response
        }
    }
}

/// The addresses `headers` say the request was forwarded for, farthest
/// first: `X-Forwarded-For` when present, else `Forwarded`'s `for=`; `None`
/// for a hop that is not an address (`unknown`, an obfuscated name).
fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let joined = |name: &HeaderName| -> Option<String> {
        let values: Vec<&str> = headers.get_all(name).iter().filter_map(|value| value.to_str().ok()).collect();
        (!values.is_empty()).then(|| values.join(","))
    };
    if let Some(list) = joined(&HeaderName::from_static("x-forwarded-for")) {
        return list.split(',').map(|hop| parse_hop(hop.trim())).collect();
    }
    let Some(forwarded) = joined(&header::FORWARDED) else { return Vec::new() };
    let hops = forwarded.split(',').filter_map(|element| {
        element.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            name.trim().eq_ignore_ascii_case("for").then(|| value.trim().trim_matches('"'))
        })
    });
    hops.map(parse_hop).collect()
}

/// One hop of a forwarding header: an address, with or without a port
/// (`192.0.2.1:4711`, `[2001:db8::1]:4711`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(address) = hop.parse::<IpAddr>() {
        return Some(canonical(address));
    }
    if let Ok(socket) = hop.parse::<SocketAddr>() {
        return Some(canonical(socket.ip()));
    }
    hop.strip_prefix('[')?.strip_suffix(']')?.parse::<IpAddr>().ok().map(canonical)
}

/// An IPv4 address written as IPv6 (`::ffff:192.0.2.1`) as the IPv4 address it is.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The address a client counts as: an IPv6 address's /64 (one host is given
/// a whole /64, and could otherwise count as many clients).
fn per_host(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// `wait` rounded up to whole seconds, at least one.
fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_millis().div_ceil(1_000) as u64).max(1)
}

#[cfg(test)]
mod tests {
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
        let forwarded = headers(&[("forwarded", r#"for="[2001:db8:cafe::17]:4711";proto=https, for=192.0.2.1"#)]);
        assert_eq!(clients.identify(proxy, &forwarded), address("2001:db8:cafe::"));
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
            format!("{:?}", clients.policy().api_keys),
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
    fn only_while_hbase_calls_wait_is_a_client_at_its_fair_share_refused() {
        let clients = clients(ClientPolicy::default());
        let (greedy, polite) = (address("192.0.2.1"), address("192.0.2.2"));
        // No pressure: a lone client may have any number in flight.
        let held: Vec<Admission> = (0..10).map(|_| clients.admit(&greedy, false, 4).expect("admitted")).collect();
        // Pressure: four connections, one client: its share is four, and it has ten.
        let refused = clients.admit(&greedy, true, 4).expect_err("over its share");
        assert_eq!(
            (refused.reason, refused.in_flight, refused.allowed, refused.retry_after_secs),
            ("fair_share", 10, 4, 1)
        );
        // Another client, with nothing in flight, is within its share (two of four).
        let first = clients.admit(&polite, true, 4).expect("within its share");
        let _second = clients.admit(&polite, true, 4).expect("still within");
        assert_eq!(clients.admit(&polite, true, 4).expect_err("at its share").allowed, 2);
        drop(first);
        assert!(clients.admit(&polite, true, 4).is_ok(), "a finished request frees its place");
        drop(held);
        assert!(clients.admit(&greedy, true, 4).is_ok(), "below its share again");
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
        let held = [clients.admit(&client, true, 1).expect("1"), clients.admit(&client, true, 1).expect("2")];
        assert_eq!(clients.admit(&client, false, 100).expect_err("in flight").reason, "in_flight");
        drop(held);
        // The third request of the second used the last of the burst of three.
        let rate = clients.admit(&client, false, 100).expect_err("rate");
        assert_eq!((rate.reason, rate.retry_after_secs), ("rate", 1));
        let exempt = ClientId::Key("batch".into());
        let many: Vec<Admission> = (0..20).map(|_| clients.admit(&exempt, true, 1).expect("exempt")).collect();
        assert_eq!(many.len(), 20);
    }

    #[test]
    fn a_client_leaves_the_count_with_its_last_request() {
        let clients = clients(ClientPolicy::default());
        let admissions: Vec<Admission> =
            (0..50).map(|n| clients.admit(&address(&format!("192.0.2.{n}")), false, 4).expect("ok")).collect();
        assert_eq!(clients.inner.in_flight.lock().expect("lock").len(), 50);
        drop(admissions);
        assert!(clients.inner.in_flight.lock().expect("lock").is_empty());
    }
}
