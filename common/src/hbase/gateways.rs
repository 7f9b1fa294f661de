//! Several gateways of one kind (Thrift1 or Thrift2) behind one pool: which
//! of them are live, which one a new connection goes to, and when a dead one
//! is tried again.
//!
//! A shop runs two or more gateways of each kind, so that losing one JVM
//! costs its connections and nothing else. The pool's connections are
//! spread over the live gateways: a new one goes to the live gateway with
//! the fewest open, and a connection handed back to the pool while its
//! gateway holds more than one connection beyond the emptiest live one is
//! closed, so that a gateway that comes back takes its share of the calls
//! within a few of them. Otherwise it would take none until the others'
//! connections reached their lifetime, and when one of those died every
//! call would move at once to a gateway whose own HBase client had not yet
//! looked up a region (its first calls are slow).
//!
//! A gateway is taken out at its first sign of death (a refused
//! connection, a reset or closed socket), never for being slow: a slow
//! answer is usually HBase's, and every gateway would be as slow. Taking a
//! gateway out bumps its epoch, which retires every pooled connection
//! opened to it before (they would fail the same way), and starts a probe
//! thread that opens a connection and sends it warm-up reads, backing off
//! from [`FIRST_PROBE_DELAY`] to [`LAST_PROBE_DELAY`], until the gateway
//! answers them and is put back. The warm-up reads (a row of `hbase:meta`
//! and of each table the pool has called, see
//! [`GatewayConnection::warm_up`]) make a restarted gateway's HBase client
//! locate those tables' regions and connect to their servers before
//! callers are sent to it: a ping would prove the process listens, and
//! leave its first callers to wait while its client does all that, seconds
//! on a loaded host.
//!
//! A single address behind a TCP load balancer (a Kubernetes Service) is a
//! list of one: its death sign retires the pooled connections, and the next
//! connection the balancer hands to a live backend. When every gateway of
//! the list is out, a new connection still tries each of them, so the
//! caller's deadline, not a closed list, ends the wait.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::gateway::{GatewayClient, GatewayConnection, GatewayHealth, Origin, TablesCalled};
use crate::error::{Error, Result};

/// The wait before a dead gateway is first probed.
const FIRST_PROBE_DELAY: Duration = Duration::from_millis(250);
/// The longest wait between two probes of a gateway that stays dead.
const LAST_PROBE_DELAY: Duration = Duration::from_secs(5);

/// The addresses (`host:port`) of the gateways of one kind, as an operator
/// lists them: comma-separated, in no particular order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayList {
    addresses: Vec<String>,
}

/// A gateway list that does not parse, naming the address at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed gateway address {address:?}: {reason} (expected host:port, comma-separated for several)")]
pub struct InvalidGatewayList {
    /// The address as given.
    pub address: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl GatewayList {
    /// A list of one address, taken as given: a malformed one fails at its
    /// first connection. For addresses a program made (a test's proxy);
    /// an operator's list is parsed with [`str::parse`].
    pub fn single(address: impl Into<String>) -> GatewayList {
        GatewayList { addresses: vec![address.into()] }
    }

    /// The addresses, in the order given.
    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }
}

impl FromStr for GatewayList {
    type Err = InvalidGatewayList;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let addresses: Vec<String> = list.split(',').map(|address| address.trim().to_owned()).collect();
        for address in &addresses {
            let malformed = |reason| InvalidGatewayList { address: address.clone(), reason };
            let (host, port) = address.rsplit_once(':').ok_or_else(|| malformed("no port"))?;
            if host.is_empty() || host == "[]" {
                return Err(malformed("no host"));
            }
            if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
                return Err(malformed("an IPv6 host must be in brackets"));
            }
            if host.chars().any(char::is_whitespace) {
                return Err(malformed("a space in the host"));
            }
            match port.parse::<u16>() {
                Ok(0) => return Err(malformed("port 0")),
                Ok(_) => {}
                Err(_) => return Err(malformed("the port is not a number from 1 to 65535")),
            }
        }
        Ok(GatewayList { addresses })
    }
}

impl fmt::Display for GatewayList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addresses.join(","))
    }
}

/// A connection idle longer than this is pinged before use: both gateways
/// close connections idle for 60 s (`hbase.thrift.server.socket.read.timeout`).
const VALIDATE_AFTER_IDLE: Duration = Duration::from_secs(20);

/// The live state of a pool's gateways of kind `C`.
pub(crate) struct Gateways<C> {
    members: Vec<Arc<GatewayHealth>>,
    /// Where the search for the least loaded gateway starts next, so that
    /// ties rotate instead of always going to the first gateway listed.
    turn: AtomicUsize,
    connect_timeout: Duration,
    io_timeout: Duration,
    /// Handed to probe threads, which must not keep a dropped pool alive.
    this: Weak<Gateways<C>>,
    client: PhantomData<fn() -> C>,
}

impl<C> fmt::Debug for Gateways<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateways").field("members", &self.members).finish_non_exhaustive()
    }
}

impl<C: GatewayClient> Gateways<C> {
    /// Every gateway of `list`, all taken as live until one fails.
    pub(crate) fn new(list: &GatewayList, connect_timeout: Duration, io_timeout: Duration) -> Arc<Gateways<C>> {
        let tables_called = Arc::new(TablesCalled::default());
        let gateways = Arc::new_cyclic(|this| Gateways {
            members: list
                .addresses()
                .iter()
                .map(|address| {
                    Arc::new(GatewayHealth {
                        address: address.clone(),
                        epoch: AtomicU64::new(0),
                        down: AtomicBool::new(false),
                        probing: AtomicBool::new(false),
                        open_connections: AtomicUsize::new(0),
                        tables_called: tables_called.clone(),
                    })
                })
                .collect(),
            turn: AtomicUsize::new(0),
            connect_timeout,
            io_timeout,
            this: this.clone(),
            client: PhantomData,
        });
        gateways.publish_live();
        gateways
    }

    /// Sets the gauge of live gateways of this kind.
    fn publish_live(&self) {
        metrics::gauge!(crate::telemetry::HBASE_GATEWAYS_LIVE, "gateway" => C::GATEWAY).set(self.live() as f64);
    }

    /// The gateways live now.
    pub(crate) fn live(&self) -> usize {
        self.members.iter().filter(|member| !member.down.load(Ordering::Relaxed)).count()
    }

    /// The order a new connection tries the gateways in: the live ones,
    /// fewest open connections first, then those taken out (the last resort
    /// when none is live: one may have come back before its probe saw it).
    fn connect_order(&self) -> Vec<usize> {
        let count = self.members.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut order: Vec<usize> = (0..count).map(|offset| (start + offset) % count).collect();
        // A stable sort keeps the rotation among equals.
        order.sort_by_key(|&index| {
            let member = &self.members[index];
            (member.down.load(Ordering::Relaxed), member.open_connections.load(Ordering::Relaxed))
        });
        order
    }

    /// Opens a connection to a gateway, trying each in [`Self::connect_order`]
    /// and taking out every one that refuses.
    pub(crate) fn connect(&self) -> Result<GatewayConnection<C>> {
        let mut refusals = Vec::new();
        for index in self.connect_order() {
            let member = &self.members[index];
            let epoch = member.epoch.load(Ordering::Acquire);
            match GatewayConnection::<C>::open(&member.address, self.connect_timeout, self.io_timeout) {
                Ok(mut connection) => {
                    if member.down.swap(false, Ordering::AcqRel) {
                        self.publish_live();
                        tracing::info!(gateway = C::GATEWAY, address = %member.address, "gateway accepts connections again");
                    }
                    member.open_connections.fetch_add(1, Ordering::Relaxed);
                    connection.set_origin(Origin { gateway: member.clone(), epoch });
                    return Ok(connection);
                }
                Err(error) => {
                    // One already out is being probed: trying it as a last
                    // resort and failing is no news, and not logged again.
                    if !member.down.load(Ordering::Acquire) {
                        self.take_out(member, epoch, &error);
                    }
                    refusals.push(error.to_string());
                }
            }
        }
        Err(Error::Unavailable(format!(
            "no {} gateway of {} accepts connections: {}",
            C::GATEWAY,
            self.members.len(),
            refusals.join("; ")
        )))
    }

    /// Whether the gateway `origin` was opened to holds more than one
    /// connection beyond another live gateway: then the connection is closed
    /// when it is handed back, and its replacement goes to the emptier one.
    /// Concurrent returns may close a few more than needed; their
    /// replacements spread over the gateways all the same.
    pub(crate) fn crowded(&self, origin: &Origin) -> bool {
        let open = origin.gateway.open_connections.load(Ordering::Relaxed);
        self.members.iter().any(|member| {
            !Arc::ptr_eq(member, &origin.gateway)
                && !member.down.load(Ordering::Acquire)
                && member.open_connections.load(Ordering::Relaxed) + 1 < open
        })
    }

    /// Whether a pooled connection may still be used: its gateway has not
    /// been taken out since it was opened.
    pub(crate) fn still_current(&self, origin: &Origin) -> bool {
        origin.gateway.epoch.load(Ordering::Acquire) == origin.epoch
    }

    /// Takes out the gateway `origin` was opened to, after a sign of its
    /// death on that connection: every connection opened to it before now is
    /// retired at its next checkout. Returns whether the gateway was taken
    /// out by this call or already was (as opposed to having been put
    /// back since the connection opened: then the sign is old news).
    pub(crate) fn report_death(&self, origin: &Origin, cause: &Error) -> bool {
        self.take_out(&origin.gateway, origin.epoch, cause)
    }

    fn take_out(&self, member: &Arc<GatewayHealth>, seen_epoch: u64, cause: &Error) -> bool {
        // Only the first to see this death bumps the epoch: a hundred
        // connections failing at once take the gateway out once.
        if member.epoch.compare_exchange(seen_epoch, seen_epoch + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return member.down.load(Ordering::Acquire);
        }
        member.down.store(true, Ordering::Release);
        self.publish_live();
        metrics::counter!(crate::telemetry::HBASE_GATEWAYS_TAKEN_OUT, "gateway" => C::GATEWAY).increment(1);
        tracing::warn!(
            gateway = C::GATEWAY,
            address = %member.address,
            live = self.live(),
            of = self.members.len(),
            %cause,
            "gateway taken out of the pool"
        );
        self.probe(member);
        true
    }

    /// Starts a thread that probes `member` until it answers its warm-up
    /// reads, unless one watches it already.
    fn probe(&self, member: &Arc<GatewayHealth>) {
        if member.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let watched = member.clone();
        let gateways = self.this.clone();
        let spawned = std::thread::Builder::new().name("gateway-probe".to_owned()).spawn(move || {
            let member = watched;
            let mut delay = FIRST_PROBE_DELAY;
            loop {
                std::thread::sleep(delay);
                // The pool has gone, or a connection found the gateway back.
                let Some(gateways) = gateways.upgrade() else { break };
                if !member.down.load(Ordering::Acquire) {
                    break;
                }
                let started = std::time::Instant::now();
                let answered =
                    GatewayConnection::<C>::open(&member.address, gateways.connect_timeout, gateways.io_timeout)
                        .and_then(|mut connection| connection.warm_up(&member.tables_called));
                if answered.is_ok() {
                    member.down.store(false, Ordering::Release);
                    gateways.publish_live();
                    tracing::info!(
                        gateway = C::GATEWAY,
                        address = %member.address,
                        warm_up_ms = started.elapsed().as_millis(),
                        "gateway answers again and has reached HBase: back in the pool"
                    );
                    break;
                }
                delay = (delay * 2).min(LAST_PROBE_DELAY);
            }
            member.probing.store(false, Ordering::Release);
        });
        if let Err(error) = spawned {
            // Without a probe the gateway comes back when a connection
            // tries it as a last resort.
            member.probing.store(false, Ordering::Release);
            tracing::warn!(%error, "cannot start a gateway probe thread");
        }
    }
}

/// Opens, validates and retires pooled connections to the gateways of one
/// kind for r2d2 ([`Gateways`] chooses among them).
pub struct GatewayManager<C> {
    gateways: Arc<Gateways<C>>,
}

impl<C> GatewayManager<C> {
    /// A manager of connections to `gateways`.
    pub(super) fn new(gateways: Arc<Gateways<C>>) -> Self {
        GatewayManager { gateways }
    }
}

impl<C: GatewayClient> std::fmt::Debug for GatewayManager<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayManager").field("gateway", &C::GATEWAY).field("gateways", &self.gateways).finish()
    }
}

impl<C: GatewayClient> r2d2::ManageConnection for GatewayManager<C> {
    type Connection = GatewayConnection<C>;
    type Error = Error;

    fn connect(&self) -> Result<GatewayConnection<C>> {
        self.gateways.connect()
    }

    /// Retires a connection to a gateway taken out since it opened, and
    /// pings only connections idle long enough for the gateway to have
    /// closed them; a busy connection is used without an extra round trip.
    fn is_valid(&self, connection: &mut GatewayConnection<C>) -> Result<()> {
        if connection.origin().is_some_and(|origin| !self.gateways.still_current(origin)) {
            return Err(Error::Unavailable(format!(
                "the {} gateway was taken out since this connection opened",
                C::GATEWAY
            )));
        }
        // The previous user's deadline does not bind the validation ping.
        connection.set_deadline(None);
        if connection.idle() >= VALIDATE_AFTER_IDLE {
            connection.ping()?;
        }
        Ok(())
    }

    /// Closes a connection a transport error left out of step, and one
    /// whose gateway is [crowded](Gateways::crowded).
    fn has_broken(&self, connection: &mut GatewayConnection<C>) -> bool {
        connection.is_broken() || connection.origin().is_some_and(|origin| self.gateways.crowded(origin))
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::hbase::connection::Thrift1Client;

    /// A port nothing listens on (bound, then released).
    fn closed_address() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        drop(listener);
        address
    }

    /// A listener that accepts connections (into its backlog) and never answers.
    fn listening() -> (TcpListener, String) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        (listener, address)
    }

    fn gateways(addresses: &[&str]) -> Arc<Gateways<Thrift1Client>> {
        let list: GatewayList = addresses.join(",").parse().expect("valid list");
        Gateways::new(&list, Duration::from_millis(500), Duration::from_millis(500))
    }

    #[test]
    fn a_gateway_that_refuses_is_taken_out_and_connections_go_to_the_others() {
        let dead = closed_address();
        let (_live_listener, live) = listening();
        let set = gateways(&[&dead, &live]);
        let connections: Vec<_> = (0..4).map(|_| set.connect().expect("the live gateway accepts")).collect();
        assert_eq!(set.live(), 1, "the refusing gateway is out");
        for connection in &connections {
            let origin = connection.origin().expect("pooled connections know their gateway");
            assert_eq!(origin.gateway.address, live);
        }
        assert_eq!(set.members[1].open_connections.load(Ordering::Relaxed), 4);
        drop(connections);
        assert_eq!(set.members[1].open_connections.load(Ordering::Relaxed), 0, "closed connections are counted out");
    }

    #[test]
    fn connections_are_spread_over_live_gateways() {
        let (_first_listener, first) = listening();
        let (_second_listener, second) = listening();
        let set = gateways(&[&first, &second]);
        let connections: Vec<_> = (0..6).map(|_| set.connect().expect("accepts")).collect();
        let on_first = connections
            .iter()
            .filter(|connection| connection.origin().expect("origin").gateway.address == first)
            .count();
        assert_eq!(on_first, 3, "three of six on each gateway");
    }

    #[test]
    fn a_gateway_back_in_the_pool_takes_its_share_as_connections_are_handed_back() {
        let (_first_listener, first) = listening();
        let (_second_listener, second) = listening();
        let set = gateways(&[&first, &second]);
        // While the second is out, every connection goes to the first.
        set.members[1].down.store(true, Ordering::Release);
        let mut connections: Vec<_> = (0..6).map(|_| set.connect().expect("accepts")).collect();
        for connection in &connections {
            let origin = connection.origin().expect("origin");
            assert!(!set.crowded(origin), "no live gateway to move to");
        }
        // Its probe puts it back: each connection handed back to a crowded
        // gateway is closed, and its replacement goes to the emptier one.
        set.members[1].down.store(false, Ordering::Release);
        let mut replaced = 0;
        for _ in 0..2 {
            for slot in &mut connections {
                if set.crowded(slot.origin().expect("origin")) {
                    *slot = set.connect().expect("accepts");
                    replaced += 1;
                }
            }
        }
        let open = |index: usize| set.members[index].open_connections.load(Ordering::Relaxed);
        assert_eq!((open(0), open(1)), (3, 3), "three of six on each gateway");
        assert_eq!(replaced, 3, "only the connections beyond an even spread are closed");
        for connection in &connections {
            assert!(!set.crowded(connection.origin().expect("origin")), "balanced: nothing more to move");
        }
    }

    #[test]
    fn a_death_retires_every_connection_opened_before_it_and_is_counted_once() {
        let (_first_listener, first) = listening();
        let (_second_listener, second) = listening();
        let set = gateways(&[&first, &second]);
        let connections: Vec<_> = (0..4).map(|_| set.connect().expect("accepts")).collect();
        let on_first: Vec<_> = connections
            .iter()
            .filter(|connection| connection.origin().expect("origin").gateway.address == first)
            .collect();
        let cause = Error::Unavailable("Thrift1 transport: end of file".to_owned());
        assert!(set.report_death(on_first[0].origin().expect("origin"), &cause));
        // The second connection to fail the same way finds it out already.
        assert!(set.report_death(on_first[1].origin().expect("origin"), &cause));
        assert_eq!(set.members[0].epoch.load(Ordering::Relaxed), 1, "one death, one epoch");
        for connection in &connections {
            let origin = connection.origin().expect("origin");
            assert_eq!(set.still_current(origin), origin.gateway.address == second, "{}", origin.gateway.address);
        }
        // New connections go to the live gateway while the other is out
        // (its probe finds no Thrift answer on the silent listener).
        let fresh = set.connect().expect("accepts");
        assert_eq!(fresh.origin().expect("origin").gateway.address, second);
    }

    #[test]
    fn with_every_gateway_dead_a_connection_still_tries_each_and_says_why() {
        let (first, second) = (closed_address(), closed_address());
        let set = gateways(&[&first, &second]);
        let error = set.connect().expect_err("nothing listens");
        assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
        assert!(error.to_string().contains("no Thrift1 gateway of 2 accepts connections"), "{error}");
        assert_eq!(set.live(), 0);
        // A gateway back before its probe saw it is found by the next connection.
        let listener = TcpListener::bind(&second).expect("bind the second gateway's port again");
        let connection = set.connect().expect("the gateway that came back accepts");
        assert_eq!(connection.origin().expect("origin").gateway.address, second);
        assert_eq!(set.live(), 1, "and it is back in");
        drop(listener);
    }

    #[test]
    fn a_list_parses_every_address_and_prints_as_given() {
        let list: GatewayList = "10.0.0.1:9090, gw-2.example:9090,[::1]:9090".parse().expect("valid");
        assert_eq!(list.addresses(), ["10.0.0.1:9090", "gw-2.example:9090", "[::1]:9090"]);
        assert_eq!(list.to_string(), "10.0.0.1:9090,gw-2.example:9090,[::1]:9090");
    }

    #[test]
    fn a_malformed_address_is_named() {
        for (list, address) in [
            ("127.0.0.1:9090,127.0.0.1", "127.0.0.1"),
            ("127.0.0.1:9090,", ""),
            ("gw:port", "gw:port"),
            ("gw:0", "gw:0"),
            ("gw:70000", "gw:70000"),
            (":9090", ":9090"),
            ("::1:9090", "::1:9090"),
            ("g w:9090", "g w:9090"),
        ] {
            let error = list.parse::<GatewayList>().expect_err(list);
            assert_eq!(error.address, address, "{list}");
            assert!(error.to_string().contains(&format!("{address:?}")), "{error}");
        }
    }
}
