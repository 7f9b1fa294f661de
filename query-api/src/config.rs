//! The service's settings: flags and environment variables (clap), and the
//! plain settings struct the library takes, so tests build a service without a
//! command line.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use axum::http::HeaderName;
use ipnet::IpNet;

use clap::{ArgMatches, CommandFactory, FromArgMatches};
use common::config::HbaseArgs;
use common::hbase::{HbaseConfig, ReadConsistency};

use crate::clients::{parse_trusted_proxy, ApiKey, ClientPolicy, ForwardedHeader};
use crate::connections::ConnectionLimits;

/// The HBase deadline this service uses unless told otherwise: inside the
/// request's ([`DEFAULT_REQUEST_TIMEOUT_MS`]), so that a request still
/// answers, or fails, within the 3 s a page may take. A dead gateway is routed
/// around at its first refused connection (only with every gateway of a kind
/// dead does a read wait out the deadline), so this bounds the reads a live but
/// slow HBase holds, as while a dead region server's work moves to the others:
/// long enough that such reads are served rather than failed
/// (docs/what-it-survives.md, note 27). The batch tools that share
/// `--hbase-timeout-ms` default to a patient 30 s instead.
pub const DEFAULT_HBASE_TIMEOUT_MS: &str = "2500";
/// The deadline of one request unless told otherwise: under the 3 s a page
/// may take, with room for the proxy in front.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 2_900;
/// Retries of a failed HBase call for this service: one, so a connection the
/// gateway closed is replaced once, without stretching an outage into a hang.
pub const DEFAULT_HBASE_RETRIES: &str = "1";
/// HBase connections (and calls in flight) for this service: 32, not the
/// batch tools' 16. A page read holds its connection until HBase answers, and
/// while a dead region server's regions are reopened its reads take hundreds
/// of milliseconds: with 16, `scripts/fault-any-one.sh` refused hundreds of
/// reads `overloaded` at that server's death (docs/what-it-survives.md, note 15).
pub const DEFAULT_POOL_SIZE: &str = "32";

/// What `--read-consistency` asks for: a [`ReadConsistency`], or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConsistencyChoice {
    /// Timeline when the tables the pages read have region replicas.
    #[default]
    Auto,
    /// Always strong.
    Strong,
    /// Always timeline.
    Timeline,
}

/// `query-api`: serve the review tables over HTTP.
/// Index rows a star-filtered page examines at most by default: a full page
/// of 100 reviews of a star that one review in a hundred has, in a few
/// milliseconds of a region server's time.
pub const DEFAULT_STAR_BUDGET_ROWS: u64 = 10_000;

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "query-api", version, about = "Read-only HTTP service over the product review tables.")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, env = "REVIEWS_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Deadline of one request, in milliseconds; slower requests answer 503.
    #[arg(long, env = "REVIEWS_API_REQUEST_TIMEOUT_MS", default_value_t = DEFAULT_REQUEST_TIMEOUT_MS)]
    pub request_timeout_ms: u64,

    /// How long ranked reads stay in the in-process cache, in milliseconds (0 turns the cache off).
    #[arg(long, env = "REVIEWS_API_RANKED_CACHE_TTL_MS", default_value_t = 10_000)]
    pub ranked_cache_ttl_ms: u64,

    /// Most bytes the ranked-read cache holds (comments and their rendered
    /// answers); the least used rankings are evicted past it.
    #[arg(long, env = "REVIEWS_API_RANKED_CACHE_MAX_BYTES", default_value_t = DEFAULT_RANKED_CACHE_MAX_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub ranked_cache_max_bytes: u64,

    /// How long the last good answer of each page read (`crate::last_good`)
    /// is kept to answer with, marked stale, when HBase fails; 0 answers 503
    /// instead.
    #[arg(long, env = "REVIEWS_API_STALE_IF_ERROR_SECS", default_value_t = 3_600)]
    pub stale_if_error_secs: u64,

    /// Most bytes the last good answers hold; the least used are evicted past it.
    #[arg(long, env = "REVIEWS_API_STALE_CACHE_MAX_BYTES", default_value_t = DEFAULT_STALE_CACHE_MAX_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stale_cache_max_bytes: u64,

    /// Most index rows one star-filtered or rating-ordered page examines:
    /// every row the region server passes over counts, matching or not. The
    /// page comes back short, with a cursor, when they run out.
    #[arg(long, env = "REVIEWS_API_STAR_BUDGET_ROWS", default_value_t = DEFAULT_STAR_BUDGET_ROWS,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub star_budget_rows: u64,

    /// Serve the demo pages (`/demo/products/{productId}`, `/demo/listing`)
    /// that show the review widgets on the data loaded. Off in production.
    #[arg(long, env = "REVIEWS_API_DEMO_PAGES")]
    pub demo_pages: bool,

    /// Origins allowed to call the API from a browser (CORS), comma-separated; `*` allows any; empty allows none.
    #[arg(long, env = "REVIEWS_API_CORS_ORIGINS", value_delimiter = ',', default_value = "")]
    pub cors_origins: Vec<String>,

    /// Longest wait for a free HBase connection, in milliseconds; a request that
    /// waits longer answers 503 `overloaded` with `Retry-After` instead of
    /// queueing behind a slow HBase. Well under the request deadline.
    #[arg(long, env = "REVIEWS_API_HBASE_QUEUE_TIMEOUT_MS", default_value_t = 500)]
    pub hbase_queue_timeout_ms: u64,

    /// Most requests waiting for a free HBase connection at once; one more
    /// answers 503 `overloaded` at once, so a backlog cannot grow memory.
    #[arg(long, env = "REVIEWS_API_HBASE_MAX_QUEUED", default_value_t = 64)]
    pub hbase_max_queued: usize,

    /// HBase connections of each pool kept for the requests of clients
    /// within their fair share while the service sheds (docs/pacing.md):
    /// the other requests use the rest (at least one), so a flood's queue
    /// never stands before a polite reader's read.
    #[arg(long, env = "REVIEWS_API_HBASE_SHELTERED_CONNECTIONS", default_value_t = 4)]
    pub hbase_sheltered_connections: u32,

    /// After SIGTERM or Ctrl-C, how long in-flight requests may finish before the service exits, in milliseconds.
    #[arg(long, env = "REVIEWS_API_DRAIN_DEADLINE_MS", default_value_t = 10_000)]
    pub drain_deadline_ms: u64,

    /// After SIGTERM, how long the service keeps serving with `/readyz`
    /// answering 503 before it stops accepting connections, in
    /// milliseconds: the time a load balancer's health checks take to see
    /// it leave (HAProxy's reference configuration: two failed checks a
    /// second apart). 0 stops accepting at once; Ctrl-C always does.
    #[arg(long, env = "REVIEWS_API_UNREADY_BEFORE_DRAIN_MS", default_value_t = 0)]
    pub unready_before_drain_ms: u64,

    /// How long a request head may take to arrive, in milliseconds, counted
    /// from its first byte (from the connection's acceptance, for its first
    /// request); a connection that misses it is closed.
    #[arg(long, env = "REVIEWS_API_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,

    /// How long a connection may stay open after its last answer without
    /// starting another request, in milliseconds, before the service closes
    /// it. Keep it above the idle timeout of any load balancer in front (60 s
    /// is common), or the balancer may reuse a connection as it closes.
    #[arg(long, env = "REVIEWS_API_KEEP_ALIVE_TIMEOUT_MS", default_value_t = 75_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub keep_alive_timeout_ms: u64,

    /// Most connections open at once; one more is answered 503 `overloaded`
    /// and closed at once. Lowered at start to what the process's file limit
    /// allows.
    #[arg(long, env = "REVIEWS_API_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,

    /// Serve `/metrics` on this address instead of `--listen` (for example a
    /// port only Prometheus can reach); the main listener then answers 404 there.
    #[arg(long, env = "REVIEWS_API_METRICS_LISTEN", value_name = "ADDRESS")]
    pub metrics_listen: Option<SocketAddr>,

    /// How page reads ask HBase for rows: `strong` reads each region's
    /// primary through the Thrift1 gateway; `timeline` reads through the
    /// Thrift2 gateway, and a secondary region replica answers when the
    /// primary has not within HBase's primary call timeout (a dead region
    /// server's regions stay readable), the answer then carrying
    /// `X-Replica-Read: stale`. `auto` decides at start: `timeline` when
    /// a table the pages read has region replicas (`reviews-admin schema
    /// create --region-replication 2` or `schema upgrade`), or when the
    /// tables cannot be asked (timeline reads answer on either kind of
    /// table); `strong` otherwise. A table given replicas later takes a
    /// restart to be read from them.
    #[arg(long, env = "REVIEWS_API_READ_CONSISTENCY", value_enum, default_value_t = ConsistencyChoice::Auto)]
    pub read_consistency: ConsistencyChoice,

    /// While HBase is busy (as many operations running as the pool has
    /// connections, or one waiting), refuse (429, `Retry-After`) first the
    /// clients asking more requests a second than their max-min fair share
    /// of what the service can serve, once they fill the room left for them
    /// (docs/pacing.md), so one client or a crowd cannot take the service
    /// from the others. `false` sheds whoever comes next (503 `overloaded`
    /// past the queue).
    #[arg(long, env = "REVIEWS_API_FAIR_SHEDDING", default_value_t = true, action = clap::ArgAction::Set)]
    pub fair_shedding: bool,

    /// Most requests one client may have in flight at once, however idle the
    /// service; one more answers 429 (0: no such limit).
    #[arg(long, env = "REVIEWS_API_CLIENT_MAX_IN_FLIGHT", default_value_t = 0)]
    pub client_max_in_flight: usize,

    /// Most requests one client may make per second, in bursts of as many,
    /// however idle the service; one more answers 429 (0: no such limit).
    #[arg(long, env = "REVIEWS_API_CLIENT_RATE", default_value_t = 0)]
    pub client_rate: u32,

    /// Proxies (addresses or networks, comma-separated) whose
    /// `X-Forwarded-For` or `Forwarded` header says which client a request
    /// is from; from any other peer these headers are ignored and the client
    /// is the peer's address.
    #[arg(long, env = "REVIEWS_API_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_trusted_proxy)]
    pub trusted_proxies: Vec<IpNet>,

    /// The one forwarding header the trusted proxies write (the other is
    /// never read: a client could write it).
    #[arg(long, env = "REVIEWS_API_FORWARDED_HEADER", value_enum, default_value_t = ForwardedHeader::XForwardedFor)]
    pub forwarded_header: ForwardedHeader,

    /// API keys, NAME=SECRET comma-separated (better in the environment): a
    /// request carrying one in --api-key-header counts as the client NAME,
    /// in the limits and the metrics, instead of by its address. A request
    /// without a known key is still served. Checked after parsing, so an
    /// error names the key, never its secret.
    #[arg(long, env = "REVIEWS_API_KEYS", value_delimiter = ',', hide_env_values = true)]
    pub api_keys: Vec<String>,

    /// The header an API key comes in.
    #[arg(long, env = "REVIEWS_API_KEY_HEADER", default_value = "x-api-key", value_parser = parse_header_name)]
    pub api_key_header: HeaderName,

    /// Names of API keys never refused (comma-separated): a shop's own
    /// server, say, whose load the operator answers for.
    #[arg(long, env = "REVIEWS_API_EXEMPT_KEYS", value_delimiter = ',')]
    pub exempt_keys: Vec<String>,

    /// Where HBase is and which tables to read.
    #[command(flatten)]
    pub hbase: HbaseArgs,
}

impl Args {
    /// The command line definition, with this service's own defaults for the
    /// shared HBase flags (see [`DEFAULT_HBASE_TIMEOUT_MS`] and [`DEFAULT_POOL_SIZE`]).
    pub fn command() -> clap::Command {
        <Args as CommandFactory>::command()
            .mut_arg("hbase_timeout_ms", |arg| arg.default_value(DEFAULT_HBASE_TIMEOUT_MS))
            .mut_arg("hbase_retries", |arg| arg.default_value(DEFAULT_HBASE_RETRIES))
            .mut_arg("pool_size", |arg| arg.default_value(DEFAULT_POOL_SIZE))
    }

    /// Parses the process's arguments and environment, exiting with clap's usage message on error.
    pub fn parse() -> Args {
        let matches = Args::command().get_matches();
        Args::from_matches(&matches).unwrap_or_else(|error| error.exit())
    }

    /// Parses `arguments` (the first is the program name); for tests and embedding.
    pub fn try_parse_from<I, T>(arguments: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Args::command().try_get_matches_from(arguments)?;
        Args::from_matches(&matches)
    }

    fn from_matches(matches: &ArgMatches) -> Result<Args, clap::Error> {
        let args = <Args as FromArgMatches>::from_arg_matches(matches)?;
        args.check_keys().map_err(|message| Args::command().error(clap::error::ErrorKind::ValueValidation, message))?;
        Ok(args)
    }

    /// The API keys given, parsed; an error says which key is wrong without
    /// its secret.
    fn parsed_api_keys(&self) -> Result<Vec<ApiKey>, String> {
        self.api_keys
            .iter()
            .map(|text| text.parse::<ApiKey>().map_err(|error| format!("--api-keys: {error}")))
            .collect()
    }

    /// Refuses a key that does not parse, two keys of one name or secret,
    /// and an exempt name no key has.
    fn check_keys(&self) -> Result<(), String> {
        let mut names = std::collections::HashSet::new();
        let mut secrets = std::collections::HashSet::new();
        let keys = self.parsed_api_keys()?;
        for key in &keys {
            if !names.insert(key.name.as_str()) || !secrets.insert(key.secret.as_str()) {
                return Err(format!("--api-keys: two keys share the name or the secret of {:?}", key.name));
            }
        }
        match self.exempt_keys.iter().find(|name| !names.contains(name.as_str())) {
            Some(name) => Err(format!("--exempt-keys: no API key is named {name:?}")),
            None => Ok(()),
        }
    }

    /// The service settings these arguments describe.
    pub fn settings(&self) -> Settings {
        Settings {
            request_timeout: Duration::from_millis(self.request_timeout_ms.max(1)),
            ranked_cache_ttl: Duration::from_millis(self.ranked_cache_ttl_ms),
            ranked_cache_max_bytes: self.ranked_cache_max_bytes,
            stale_if_error: Duration::from_secs(self.stale_if_error_secs),
            stale_cache_max_bytes: self.stale_cache_max_bytes,
            star_budget_rows: usize::try_from(self.star_budget_rows).unwrap_or(usize::MAX),
            cors_origins: self
                .cors_origins
                .iter()
                .map(|origin| origin.trim().to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
            drain_deadline: Duration::from_millis(self.drain_deadline_ms),
            unready_before_drain: Duration::from_millis(self.unready_before_drain_ms),
            metrics_on_main_listener: self.metrics_listen.is_none(),
            demo_pages: self.demo_pages,
            connections: ConnectionLimits {
                header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
                keep_alive_timeout: Duration::from_millis(self.keep_alive_timeout_ms),
                max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            },
            clients: ClientPolicy {
                trusted_proxies: self.trusted_proxies.clone(),
                forwarded_header: self.forwarded_header,
                api_key_header: self.api_key_header.clone(),
                // Checked when the arguments were parsed.
                api_keys: self.parsed_api_keys().unwrap_or_default(),
                exempt_keys: self.exempt_keys.clone(),
                max_in_flight: (self.client_max_in_flight > 0).then_some(self.client_max_in_flight),
                rate_per_second: NonZeroU32::new(self.client_rate),
                fair_shedding: self.fair_shedding,
            },
        }
    }

    /// The HBase pool configuration for this service: the shared flags, with
    /// the HBase deadline never longer than a request may take. `auto`
    /// reads strong here; [`Args::resolved_hbase_config`] decides it.
    pub fn hbase_config(&self) -> HbaseConfig {
        let read_consistency = match self.read_consistency {
            ConsistencyChoice::Timeline => ReadConsistency::Timeline,
            ConsistencyChoice::Strong | ConsistencyChoice::Auto => ReadConsistency::Strong,
        };
        let config = HbaseConfig {
            queue_timeout: Some(Duration::from_millis(self.hbase_queue_timeout_ms)),
            max_queued: Some(self.hbase_max_queued),
            sheltered_connections: self.hbase_sheltered_connections,
            read_consistency,
            ..self.hbase.hbase_config()
        };
        service_hbase_config(config, self.settings().request_timeout)
    }

    /// [`Args::hbase_config`] with `auto` decided: timeline when a table
    /// the pages read has more than one region replica, or when HBase
    /// cannot say (timeline reads answer from tables of either kind, and a
    /// replicated deployment must not fall back to reads that stall while
    /// a region server is dead just because the master was away at start).
    pub async fn resolved_hbase_config(&self, tables: &common::tables::Tables) -> HbaseConfig {
        let config = self.hbase_config();
        if self.read_consistency != ConsistencyChoice::Auto {
            return config;
        }
        let asked = common::hbase::Hbase::new(config.clone());
        let read_consistency = match common::schema::most_read_replicas(&asked, tables).await {
            Ok(replicas) if replicas > 1 => {
                tracing::info!(replicas, "the tables have region replicas: page reads are timeline");
                ReadConsistency::Timeline
            }
            Ok(_) => {
                tracing::info!("the tables have no region replicas: page reads are strong");
                ReadConsistency::Strong
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the tables' region replication: page reads are timeline");
                ReadConsistency::Timeline
            }
        };
        HbaseConfig { read_consistency, ..config }
    }
}

/// Caps `config`'s deadlines at `request_timeout`: an HBase call that may run
/// longer than its request would only hold a pool slot for an answer nobody
/// waits for.
pub fn service_hbase_config(config: HbaseConfig, request_timeout: Duration) -> HbaseConfig {
    let operation_timeout = config.operation_timeout.min(request_timeout);
    HbaseConfig {
        connect_timeout: config.connect_timeout.min(operation_timeout),
        io_timeout: config.io_timeout.min(operation_timeout),
        operation_timeout,
        ..config
    }
}

/// The ranked-read cache's default bound: 256 MiB holds some 25,000 rankings of
/// ten typical (300-byte) comments, or 130 of the worst case (ten 64 KiB comments).
pub const DEFAULT_RANKED_CACHE_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// The last good answers' default bound: 128 MiB holds the first reads of
/// some 40,000 product pages (a ranked answer of ten typical comments and a
/// first page of twenty weigh about 3 KiB and 6 KiB).
pub const DEFAULT_STALE_CACHE_MAX_BYTES: u64 = 128 * 1024 * 1024;

/// Everything about the service that is not HBase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Deadline of one request.
    pub request_timeout: Duration,
    /// How long a ranked read is served from the cache; zero turns the cache off.
    pub ranked_cache_ttl: Duration,
    /// Most bytes held in the ranked-read cache (see `Ranking::weight_bytes`).
    pub ranked_cache_max_bytes: u64,
    /// How long the last good answer of each page read is kept to answer
    /// with when HBase fails; zero turns stale answers off.
    pub stale_if_error: Duration,
    /// Most bytes the last good answers hold.
    pub stale_cache_max_bytes: u64,
    /// Most index rows one star-filtered or rating-ordered page reads.
    pub star_budget_rows: usize,
    /// Origins allowed by CORS; `*` allows any.
    pub cors_origins: Vec<String>,
    /// How long in-flight requests may run after a shutdown signal.
    pub drain_deadline: Duration,
    /// How long the service serves, unready, between SIGTERM and the drain.
    pub unready_before_drain: Duration,
    /// Whether the main router serves `/metrics` (not when `--metrics-listen` moves it).
    pub metrics_on_main_listener: bool,
    /// Whether the demo pages are served (`--demo-pages`).
    pub demo_pages: bool,
    /// The bounds on connections: header read and keep-alive timeouts, and the cap.
    pub connections: ConnectionLimits,
    /// How clients are told apart and limited.
    pub clients: ClientPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            request_timeout: Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            ranked_cache_ttl: Duration::from_secs(10),
            ranked_cache_max_bytes: DEFAULT_RANKED_CACHE_MAX_BYTES,
            stale_if_error: Duration::from_secs(3_600),
            stale_cache_max_bytes: DEFAULT_STALE_CACHE_MAX_BYTES,
            star_budget_rows: DEFAULT_STAR_BUDGET_ROWS as usize,
            cors_origins: Vec::new(),
            drain_deadline: Duration::from_secs(10),
            unready_before_drain: Duration::ZERO,
            metrics_on_main_listener: true,
            demo_pages: false,
            connections: ConnectionLimits {
                header_read_timeout: Duration::from_secs(10),
                keep_alive_timeout: Duration::from_secs(75),
                max_connections: 10_000,
            },
            clients: ClientPolicy::default(),
        }
    }
}

/// Parses a header name (`--api-key-header`).
fn parse_header_name(text: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(text.trim().as_bytes()).map_err(|_| format!("not a header name: {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_answer_a_stalled_hbase_within_three_seconds() {
        let args = Args::try_parse_from(["query-api"]).expect("defaults parse");
        assert_eq!(args.listen, "127.0.0.1:8080".parse().expect("address"));
        assert_eq!(args.settings(), Settings::default());
        let config = args.hbase_config();
        let request_timeout = args.settings().request_timeout;
        assert_eq!(config.operation_timeout, Duration::from_millis(2_500));
        assert_eq!(request_timeout, Duration::from_millis(2_900));
        assert_eq!(config.retries, 1);
        assert_eq!(config.pool_size, 32);
        assert!(config.operation_timeout < request_timeout);
        assert!(request_timeout < Duration::from_secs(3));
        // Readers fail fast instead of queueing: a bounded wait, a bounded queue.
        assert_eq!(config.queue_timeout, Some(Duration::from_millis(500)));
        assert_eq!(config.max_queued, Some(64));
        assert_eq!((config.sheltered_connections, config.unsheltered_connections()), (4, 28));
    }

    #[test]
    fn the_hbase_deadline_never_exceeds_the_request_deadline() {
        let args = Args::try_parse_from([
            "query-api",
            "--hbase-timeout-ms",
            "30000",
            "--request-timeout-ms",
            "700",
            "--cors-origins",
            "https://shop.example, https://m.shop.example",
            "--table-prefix",
            "dev_",
        ])
        .expect("flags parse");
        let config = args.hbase_config();
        assert_eq!(config.operation_timeout, Duration::from_millis(700));
        assert!(config.io_timeout <= config.operation_timeout);
        assert!(config.connect_timeout <= config.operation_timeout);
        assert_eq!(args.settings().cors_origins, ["https://shop.example", "https://m.shop.example"]);
        assert_eq!(args.hbase.tables().expect("tables").comment, "dev_comment");
    }

    #[test]
    fn gateway_lists_parse_and_a_malformed_address_is_named() {
        let args = Args::try_parse_from(["query-api", "--thrift-addr", "10.0.0.1:9090,10.0.0.2:9090"]).expect("a list");
        assert_eq!(args.hbase_config().thrift1_gateways.addresses(), ["10.0.0.1:9090", "10.0.0.2:9090"]);
        let error =
            Args::try_parse_from(["query-api", "--thrift2-addr", "10.0.0.1:9091,10.0.0.2"]).expect_err("no port");
        assert!(error.to_string().contains("\"10.0.0.2\""), "{error}");
        // Decided at start from the tables: strong until then.
        assert_eq!(Args::try_parse_from(["query-api"]).expect("defaults").read_consistency, ConsistencyChoice::Auto);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(Args::try_parse_from(["query-api", "--listen", "not-an-address"]).is_err());
        assert!(Args::try_parse_from(["query-api", "--request-timeout-ms", "soon"]).is_err());
        assert!(Args::try_parse_from(["query-api", "--max-connections", "0"]).is_err());
        assert!(Args::try_parse_from(["query-api", "--header-read-timeout-ms", "0"]).is_err());
        assert!(Args::try_parse_from(["query-api", "--trusted-proxies", "10.0.0.0/8,proxy.example"]).is_err());
        assert!(Args::try_parse_from(["query-api", "--api-keys", "web=0123456789abcdef", "--exempt-keys", "batch"])
            .is_err());
        let twice = ["query-api", "--api-keys", "web=0123456789abcdef,web=fedcba9876543210"];
        assert!(Args::try_parse_from(twice).is_err());
        // A key that does not parse is named, its secret never shown.
        let error = Args::try_parse_from(["query-api", "--api-keys", "web=short-secret"]).expect_err("too short");
        assert!(error.to_string().contains("\"web\"") && !error.to_string().contains("short-secret"), "{error}");
        let forwarded = Args::try_parse_from(["query-api", "--forwarded-header", "forwarded"]).expect("parses");
        assert_eq!(forwarded.settings().clients.forwarded_header, ForwardedHeader::Forwarded);
    }

    #[test]
    fn client_limits_are_off_but_fair_shedding_is_on_by_default() {
        let defaults = Args::try_parse_from(["query-api"]).expect("defaults").settings().clients;
        assert_eq!(defaults, ClientPolicy::default());
        assert!(defaults.fair_shedding && defaults.max_in_flight.is_none() && defaults.rate_per_second.is_none());
        let args = Args::try_parse_from([
            "query-api",
            "--trusted-proxies",
            "10.0.0.0/8, 192.0.2.1",
            "--api-keys",
            "shop-web=0123456789abcdef,batch=fedcba9876543210",
            "--exempt-keys",
            "batch",
            "--client-max-in-flight",
            "8",
            "--client-rate",
            "50",
            "--fair-shedding",
            "false",
        ])
        .expect("flags parse");
        let clients = args.settings().clients;
        assert_eq!(clients.trusted_proxies.len(), 2);
        assert_eq!(clients.classes(), ["shop-web", "batch", "address", "other"]);
        assert_eq!((clients.max_in_flight, clients.rate_per_second), (Some(8), NonZeroU32::new(50)));
        assert!(!clients.fair_shedding);
    }
}
