//! Who a request is from: its API key when it sends a configured one,
//! otherwise its address, read through the trusted proxies' forwarding header.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderName};
use ipnet::IpNet;

use super::ClientPolicy;

/// The class of requests identified by their address, in metric labels.
pub const ADDRESS_CLASS: &str = "address";
/// The class of requests whose client is not known (no peer address: a test
/// calling the router in process), in metric labels.
pub const OTHER_CLASS: &str = "other";
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
    /// to 256 visible ASCII characters but `,` (which separates keys). No
    /// error repeats the secret.
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
        if !(16..=256).contains(&secret.len()) || !secret.bytes().all(|byte| byte.is_ascii_graphic() && byte != b',') {
            return Err(format!("the secret of API key {name:?} must be 16 to 256 visible ASCII characters but ','"));
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

/// The header trusted proxies say whom they forwarded for in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    #[value(name = "x-forwarded-for")]
    XForwardedFor,
    /// RFC 7239: `Forwarded: for=client, for=proxy1`.
    Forwarded,
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

/// Who a request from `peer` carrying `headers` is from under `policy`
/// (`keys`: each configured secret and its key's name).
pub(super) fn identify(
    policy: &ClientPolicy,
    keys: &HashMap<String, Arc<str>>,
    peer: Option<IpAddr>,
    headers: &HeaderMap,
) -> ClientId {
    let key = headers.get(&policy.api_key_header).and_then(|value| value.to_str().ok());
    if let Some(name) = key.and_then(|secret| keys.get(secret.trim())) {
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
    let hops = forwarded_hops(headers, policy.forwarded_header);
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

/// The addresses the trusted proxies' header (`which`: the one they write;
/// the other is never read, or a client could write it) says the request was
/// forwarded for, farthest first; `None` for a hop that is not an address
/// (`unknown`, an obfuscated name, bytes that are not text).
fn forwarded_hops(headers: &HeaderMap, which: ForwardedHeader) -> Vec<Option<IpAddr>> {
    let name = match which {
        ForwardedHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
        ForwardedHeader::Forwarded => header::FORWARDED,
    };
    let mut hops = Vec::new();
    for value in &headers.get_all(name) {
        // A value that is not text is a hop nobody can read, never skipped:
        // skipping it would let a client's own hops stand in for it.
        let Ok(text) = value.to_str() else {
            hops.push(None);
            continue;
        };
        for element in text.split(',') {
            hops.push(match which {
                ForwardedHeader::XForwardedFor => parse_hop(element.trim()),
                ForwardedHeader::Forwarded => forwarded_for(element).and_then(parse_hop),
            });
        }
    }
    hops
}

/// The `for=` of one element of a `Forwarded` header.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then(|| value.trim().trim_matches('"'))
    })
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
