//! The HBase storage layer: the only module that speaks Thrift.
//!
//! [`Hbase`] owns a bounded pool of `Connection`s to the Thrift1 gateways, and
//! one of `Thrift2Connection`s to the Thrift2 gateways (`thrift2`: time-range
//! scans, existence checks and pre-split tables, which Thrift1 cannot express;
//! `gateways.rs` spreads each pool over its gateways and takes a dead one
//! out), and runs operations on them with retries for transient failures.
//! The Thrift clients
//! are synchronous, so `Hbase::run` (and `Hbase::run_thrift2`) moves each whole
//! operation (checkout, every round trip, return) onto tokio's blocking pool
//! behind a semaphore sized to the pool, and bounds it with a deadline so a
//! dead gateway costs callers a timeout, never a hang. Both pools open their
//! connections lazily: a binary that never uses Thrift2 never connects to it.
//!
//! `gateway.rs` is the connection both clients share (socket, deadlines,
//! metrics, the gateway it was opened to); `connection.rs` holds the Thrift1
//! operations, `thrift2/` the Thrift2 ones and the generated Thrift2 client.
//!
//! Outside `common` only the pool handle, its configuration,
//! [`with_deadline`] and the read-only range scan ([`Hbase::range_scanner`])
//! are public: other crates read and write through
//! [`crate::store`], so the services cannot issue a raw Thrift call, and
//! query-api's routes, which hold a [`crate::store::ReadStore`], have no write
//! to call. The integration tests, which write rows as the Java service wrote
//! them and scan whole tables, get `Hbase::run`, the connection and its row
//! types through the `test-support` feature.
//!
//! The deadline is the caller's: an operation's own `operation_timeout`, or an
//! earlier deadline the caller set with [`with_deadline`] (query-api sets its
//! request's). The wait for a pool slot counts against it, the blocking work
//! does not start (or retry) once it has passed or its caller has gone, so
//! during an outage abandoned requests do not keep holding the pool. A service
//! can also bound the wait for a slot ([`HbaseConfig::queue_timeout`]) and the
//! number of waiters ([`HbaseConfig::max_queued`]): beyond them an operation
//! fails at once with [`Error::Overloaded`] instead of queueing. Work run
//! [`with_shelter`] waits past the second bound, and has connections of its
//! own ([`HbaseConfig::sheltered_connections`]) that the rest never takes,
//! so while one of them is free it does not wait behind the rest's queue.

mod connection;
mod gateway;
mod gateways;
mod latency;
mod thrift2;
mod timeline;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use connection::Region;
use connection::Thrift1Client;
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) use connection::{Connection, Row, RowMutation, ScanSpec};
use gateway::{GatewayClient, GatewayConnection};
pub use gateways::{GatewayList, InvalidGatewayList};
use gateways::{GatewayManager, Gateways};
use thrift2::Thrift2Client;
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) use thrift2::Thrift2Connection;
pub(crate) use thrift2::ROW_INDEX_NAME;
pub use thrift2::{FamilyEncodings, RangeScan, RangeScanner, ScanCells, TimedCell, TimedRow};
pub use timeline::{note_replica_read, noting_replica_reads, ReadConsistency};

use crate::error::{Error, Result};
use crate::retry::Backoff;

/// The column family of every table.
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) const FAMILY: &str = "cf";
/// The column holding each row's value (a record's JSON, or an index row's comment key).
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) const COLUMN_VALUE: &[u8] = b"cf:q";
/// The column holding a rank slot's score (8-byte big-endian f64).
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) const COLUMN_SCORE: &[u8] = b"cf:s";
/// The column of a `product-comment` row holding the star mark of the comment
/// it lists (one ASCII byte, see `store::stars`): what lets HBase filter a
/// product's index by rating without reading the comments.
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) const COLUMN_STARS: &[u8] = b"cf:r";

/// How to reach HBase and how patient to be with it.
#[derive(Debug, Clone)]
pub struct HbaseConfig {
    /// The Thrift1 gateways (`gateways.rs` spreads the pool over them).
    pub thrift1_gateways: GatewayList,
    /// The Thrift2 gateways (time-range scans, existence checks, pre-split
    /// tables). Connected to only when such an operation runs.
    pub thrift2_gateways: GatewayList,
    /// Most connections open at once to the gateways of each kind together
    /// (and most operations in flight on each kind).
    pub pool_size: u32,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Timeout of one socket read or write.
    pub io_timeout: Duration,
    /// Deadline of one whole operation, retries included.
    pub operation_timeout: Duration,
    /// Retries after a transient failure.
    pub retries: u32,
    /// First backoff between retries; doubles each time, less jitter (`crate::retry`).
    pub retry_backoff: Duration,
    /// How long an operation may wait for a pool slot before it is refused
    /// with [`Error::Overloaded`]; `None` waits up to the operation deadline
    /// (what batch tools want: they wait their turn).
    pub queue_timeout: Option<Duration>,
    /// Most operations waiting for a pool slot at once; one more is refused
    /// with [`Error::Overloaded`] at once, so a backlog cannot grow memory.
    /// `None`: no bound.
    pub max_queued: Option<usize>,
    /// Connections of each pool that only work run [`with_shelter`] may
    /// take: the rest runs on the others (`pool_size` less these, at least
    /// one), so sheltered work finds a connection free however long the
    /// rest's queue, until it holds all these itself. 0: none kept.
    pub sheltered_connections: u32,
    /// How the page reads of this pool ask for their rows: strong (from each
    /// region's primary, through Thrift1) or timeline (from a secondary
    /// replica when the primary does not answer in time, through Thrift2; see
    /// `hbase::timeline`). Batch work keeps the default, strong.
    pub read_consistency: ReadConsistency,
}

impl Default for HbaseConfig {
    fn default() -> Self {
        HbaseConfig {
            thrift1_gateways: GatewayList::single("127.0.0.1:9090"),
            thrift2_gateways: GatewayList::single("127.0.0.1:9091"),
            pool_size: 16,
            connect_timeout: Duration::from_secs(1),
            io_timeout: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(60),
            retries: 3,
            retry_backoff: Duration::from_millis(100),
            queue_timeout: None,
            max_queued: None,
            sheltered_connections: 0,
            read_consistency: ReadConsistency::Strong,
        }
    }
}

impl HbaseConfig {
    /// The connections of each pool that work not run [`with_shelter`] may
    /// take: the pool less those kept for sheltered work, at least one, so
    /// the rest is never shut out.
    pub fn unsheltered_connections(&self) -> u32 {
        let size = self.pool_size.max(1);
        size - self.sheltered_connections.min(size - 1)
    }
}

/// Whether an operation may run again after a failure whose effect is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "test-support", visibility::make(pub))]
pub(crate) enum Retry {
    /// Reads, puts of fixed values, deletes: running twice equals running once.
    Idempotent,
    /// Increments and compare-and-set: a lost reply may hide a success.
    Once,
}

/// A handle on the HBase pool; cheap to clone and share.
#[derive(Clone)]
pub struct Hbase {
    inner: Arc<Inner>,
}

struct Inner {
    thrift1: Lane<Thrift1Client>,
    thrift2: Lane<Thrift2Client>,
    /// Operations waiting for a permit now (on either gateway).
    queued: AtomicUsize,
    /// Operations whose blocking work is running now (never more than the pools).
    in_flight: AtomicUsize,
    /// How long operations hold their connection lately, against their usual time.
    latency: latency::CallLatency,
    config: HbaseConfig,
}

/// The pool of one gateway's connections, and the permits that bound the
/// operations running on it to its size.
struct Lane<C: GatewayClient> {
    pool: r2d2::Pool<GatewayManager<C>>,
    gateways: Arc<Gateways<C>>,
    permits: Arc<tokio::sync::Semaphore>,
    /// The permits of work not run [`with_shelter`], fewer than `permits`
    /// by [`HbaseConfig::sheltered_connections`]: such work takes one of
    /// these first, and waits here, so it never holds the connections kept
    /// for sheltered work. `None` when none are kept.
    unsheltered: Option<Arc<tokio::sync::Semaphore>>,
}

impl<C: GatewayClient> Lane<C> {
    /// A lazy pool: no connection opens before an operation needs one, so
    /// this succeeds while the gateways are down (or not deployed at all).
    fn new(list: &GatewayList, config: &HbaseConfig) -> Lane<C> {
        let gateways = Gateways::new(list, config.connect_timeout, config.io_timeout);
        let manager = GatewayManager::new(gateways.clone());
        let pool = r2d2::Pool::builder()
            .max_size(config.pool_size.max(1))
            .min_idle(Some(0))
            // Idle connections are retired before the gateway's 60 s idle close
            // would break them under us.
            .idle_timeout(Some(Duration::from_secs(45)))
            // A connection is replaced every two minutes, so that one
            // opened through a load balancer (a list of one) moves to the
            // backends it added since; a list of several is spread again
            // as soon as a gateway comes back (`GatewayManager::has_broken`).
            .max_lifetime(Some(Duration::from_secs(120)))
            .test_on_check_out(true)
            .connection_timeout(config.operation_timeout)
            .error_handler(Box::new(CountErrors))
            .build_unchecked(manager);
        let size = config.pool_size.max(1);
        let permits = Arc::new(tokio::sync::Semaphore::new(size as usize));
        let unsheltered = config.unsheltered_connections();
        let unsheltered = (unsheltered < size).then(|| Arc::new(tokio::sync::Semaphore::new(unsheltered as usize)));
        Lane { pool, gateways, permits, unsheltered }
    }
}

/// A gateway client whose pool the handle holds.
trait Pooled: GatewayClient + Sized {
    fn lane(inner: &Inner) -> &Lane<Self>;
}

impl Pooled for Thrift1Client {
    fn lane(inner: &Inner) -> &Lane<Self> {
        &inner.thrift1
    }
}

impl Pooled for Thrift2Client {
    fn lane(inner: &Inner) -> &Lane<Self> {
        &inner.thrift2
    }
}

tokio::task_local! {
    /// The deadline of the caller's whole piece of work (an HTTP request), set by [`with_deadline`].
    static CALLER_DEADLINE: Instant;
    /// Set by [`with_shelter`].
    static SHELTERED: ();
}

/// Runs `work` with `deadline` as the deadline of every HBase operation it
/// starts (when earlier than the operation's own): an operation never outlives
/// the request it serves, and a permit wait counts against the request's time.
///
/// Not an `async fn`, nor is [`with_shelter`]: one would hold
/// `work` twice, as its argument and inside the scope it awaits, and a
/// request's future is that much larger at every layer it passes.
pub fn with_deadline<F: Future>(deadline: Instant, work: F) -> impl Future<Output = F::Output> {
    CALLER_DEADLINE.scope(deadline, work)
}

/// Runs `work` sheltered: its operations take a connection kept for
/// sheltered work ([`HbaseConfig::sheltered_connections`]) when the others
/// are busy, without queueing behind the rest's operations, and when they
/// must wait (every kept connection taken too) they wait however many wait
/// already, exempt from [`HbaseConfig::max_queued`] (still within the
/// queue timeout and the deadline). query-api shelters the requests of
/// clients within their fair share while it sheds a flood, whose own
/// requests may have filled the queue a moment before.
pub fn with_shelter<F: Future>(work: F) -> impl Future<Output = F::Output> {
    SHELTERED.scope((), work)
}

/// The pool slot an operation holds while it runs: a permit of its lane,
/// and one of the unsheltered permits for work not run [`with_shelter`].
struct Slot {
    _permit: tokio::sync::OwnedSemaphorePermit,
    _unsheltered: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Decrements a counter when dropped.
struct CountWhileAlive<'a>(&'a AtomicUsize);

impl Drop for CountWhileAlive<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Marks an operation abandoned when its caller stops waiting (the future is
/// dropped or finishes), so blocking work not yet started is skipped.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Hbase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hbase").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// r2d2 logs connection failures through this; we count them and leave the
/// reporting to the operation that failed, which knows the context.
#[derive(Debug)]
struct CountErrors;

impl r2d2::HandleError<Error> for CountErrors {
    fn handle_error(&self, error: Error) {
        metrics::counter!(crate::telemetry::HBASE_CONNECT_ERRORS).increment(1);
        tracing::debug!(%error, "opening a Thrift connection failed");
    }
}

impl Hbase {
    /// Builds the pool. Connections open lazily, so this succeeds while HBase is
    /// down and the first operation reports it.
    pub fn new(config: HbaseConfig) -> Hbase {
        Hbase {
            inner: Arc::new(Inner {
                thrift1: Lane::new(&config.thrift1_gateways, &config),
                thrift2: Lane::new(&config.thrift2_gateways, &config),
                queued: AtomicUsize::new(0),
                in_flight: AtomicUsize::new(0),
                latency: latency::CallLatency::new(),
                config,
            }),
        }
    }

    /// The configuration the pool was built with.
    pub fn config(&self) -> &HbaseConfig {
        &self.inner.config
    }

    /// Runs `operation` on a pooled connection on the current thread, retrying
    /// transient failures (for [`Retry::Idempotent`] operations) until the
    /// caller's `deadline`; stops retrying once `abandoned` is set.
    fn blocking_until<C: Pooled, T>(
        &self,
        deadline: Instant,
        retry: Retry,
        abandoned: &AtomicBool,
        mut operation: impl FnMut(&mut GatewayConnection<C>) -> Result<T>,
    ) -> Result<T> {
        let config = &self.inner.config;
        // Uncapped: the operation's deadline ends the pauses first.
        let backoff = Backoff::uncapped(config.retry_backoff);
        let mut attempt = 0;
        loop {
            let mut gateway_died = false;
            let outcome = self.checkout::<C>(deadline).and_then(|mut connection| {
                // Every round trip of the operation ends by the caller's deadline.
                connection.set_deadline(Some(deadline));
                let outcome = operation(&mut connection);
                if let (Err(error), Some(origin)) = (&outcome, connection.origin()) {
                    if connection.gateway_gone() {
                        gateway_died = C::lane(&self.inner).gateways.report_death(origin, error);
                    }
                }
                outcome
            });
            match outcome {
                Err(error) if error.is_transient() && retry == Retry::Idempotent && attempt < config.retries => {
                    // A gateway that has just died says nothing of HBase:
                    // the read goes to another gateway (or, behind a load
                    // balancer, a new connection) at once, not after a pause.
                    let delay = if gateway_died {
                        Some(Duration::ZERO).filter(|_| Instant::now() < deadline)
                    } else {
                        backoff.delay_within(attempt + 1, deadline)
                    };
                    let Some(delay) = delay else {
                        return Err(error);
                    };
                    if abandoned.load(Ordering::Relaxed) {
                        return Err(error);
                    }
                    attempt += 1;
                    metrics::counter!(crate::telemetry::HBASE_RETRIES).increment(1);
                    tracing::debug!(%error, attempt, ?delay, "retrying a transient HBase failure");
                    if !delay.is_zero() {
                        std::thread::sleep(delay);
                    }
                }
                outcome => return outcome,
            }
        }
    }

    fn checkout<C: Pooled>(&self, deadline: Instant) -> Result<r2d2::PooledConnection<GatewayManager<C>>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        C::lane(&self.inner)
            .pool
            .get_timeout(wait)
            .map_err(|error| Error::Unavailable(format!("no {} HBase connection within {wait:?}: {error}", C::GATEWAY)))
    }

    /// Runs `operation` off the async runtime, bounded by the pool's size and by
    /// the caller's deadline (the operation deadline, or an earlier one set with
    /// [`with_deadline`]). The wait for a pool slot counts against it, and is
    /// bounded further by [`HbaseConfig::queue_timeout`] and
    /// [`HbaseConfig::max_queued`] when set. When the deadline passes the caller
    /// gets [`Error::Unavailable`] at once; the blocking work, bounded by socket
    /// timeouts, finishes in the background and its connection is dropped if
    /// broken. Work whose caller has gone before it started is never started.
    #[cfg_attr(feature = "test-support", visibility::make(pub))]
    pub(crate) async fn run<T, F>(&self, retry: Retry, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.run_on::<Thrift1Client, T, F>(retry, operation).await
    }

    /// [`Hbase::run`] on a connection to the Thrift2 gateway, from its own
    /// pool (of the same size) with the same deadlines and retries.
    #[cfg_attr(feature = "test-support", visibility::make(pub))]
    pub(crate) async fn run_thrift2<T, F>(&self, retry: Retry, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Thrift2Connection) -> Result<T> + Send + 'static,
    {
        self.run_on::<Thrift2Client, T, F>(retry, operation).await
    }

    async fn run_on<C: Pooled, T, F>(&self, retry: Retry, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut GatewayConnection<C>) -> Result<T> + Send + 'static,
    {
        let own_deadline = Instant::now() + self.inner.config.operation_timeout;
        let caller_deadline = CALLER_DEADLINE.try_with(|caller| *caller).ok().filter(|caller| *caller < own_deadline);
        match self.run_until::<C, T, F>(caller_deadline.unwrap_or(own_deadline), retry, operation).await {
            // Everything that waits (the slot, each round trip's socket, the
            // task) is cut to the caller's deadline when it is the sooner one,
            // so an operation that failed unavailable once it passed was cut
            // short by it: the caller ran out of time, HBase is not known down.
            Err(Error::Unavailable(reason)) if caller_deadline.is_some_and(|caller| Instant::now() >= caller) => {
                Err(Error::DeadlineExceeded(reason))
            }
            outcome => outcome,
        }
    }

    /// Runs `operation` on the blocking pool behind a slot of `C`'s pool, all
    /// of it bounded by `deadline`.
    async fn run_until<C: Pooled, T, F>(&self, deadline: Instant, retry: Retry, operation: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut GatewayConnection<C>) -> Result<T> + Send + 'static,
    {
        let allowed = deadline.saturating_duration_since(Instant::now());
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = AbandonOnDrop(abandoned.clone());
        let slot = self.wait_for_slot(C::lane(&self.inner), deadline).await?;
        let hbase = self.clone();
        // The blocking thread works for the caller: its log lines and its
        // calls' spans belong under the caller's span (a request, a product),
        // and its lines name the caller's request.
        let caller_span = tracing::Span::current();
        let caller_request = crate::traces::RequestContext::current();
        let work = tokio::task::spawn_blocking(move || {
            let _in_caller_span = caller_span.enter();
            let work = move || {
                let _slot = slot;
                // The blocking pool may start this late; whoever asked may be gone by then.
                if abandoned.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    metrics::counter!(crate::telemetry::HBASE_ABANDONED).increment(1);
                    return Err(Error::Unavailable(
                        "the caller's deadline passed before the operation started".to_owned(),
                    ));
                }
                hbase.inner.in_flight.fetch_add(1, Ordering::Relaxed);
                let _running = CountWhileAlive(&hbase.inner.in_flight);
                let started = Instant::now();
                let outcome = hbase.blocking_until(deadline, retry, &abandoned, operation);
                // Only answers: a failure is often quick, and its time (or the
                // pauses of its retries) says nothing of how long answers take.
                if outcome.is_ok() {
                    hbase.inner.latency.record(started.elapsed());
                }
                outcome
            };
            match &caller_request {
                Some(request) => request.in_scope(work),
                None => work(),
            }
        });
        // Relative to now on tokio's clock, not `timeout_at` a std instant:
        // under tokio's paused time (the daemon's tests) the two clocks differ.
        match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), work).await {
            Ok(joined) => joined.map_err(|error| Error::Hbase(format!("HBase task failed: {error}")))?,
            Err(_) => Err(Error::Unavailable(format!("no answer from HBase within {allowed:?}"))),
        }
    }

    /// A slot of `lane`, waited for at most until `deadline` (and the queue
    /// timeout), or an overload error when too many operations wait already.
    async fn wait_for_slot<C: GatewayClient>(&self, lane: &Lane<C>, deadline: Instant) -> Result<Slot> {
        let inner = &self.inner;
        let sheltered = SHELTERED.try_with(|()| ()).is_ok();
        let unsheltered = lane.unsheltered.as_ref().filter(|_| !sheltered);
        if let Some(slot) = Self::free_slot(lane, unsheltered) {
            return Ok(slot);
        }
        let queued = inner.queued.fetch_add(1, Ordering::Relaxed);
        let _queued = CountWhileAlive(&inner.queued);
        if !sheltered && inner.config.max_queued.is_some_and(|max_queued| queued >= max_queued) {
            metrics::counter!(crate::telemetry::HBASE_OVERLOADED, "reason" => "queue_full").increment(1);
            return Err(Error::Overloaded(format!("{queued} operations already wait for an HBase connection")));
        }
        let began = Instant::now();
        let queue_deadline = inner.config.queue_timeout.map_or(deadline, |wait| deadline.min(began + wait));
        let wait = queue_deadline.saturating_duration_since(began);
        // Unsheltered work queues for its own permits first: only then does
        // it wait beside sheltered work, and only while the kept
        // connections are taken too.
        let slot = async {
            let unsheltered = match unsheltered {
                Some(permits) => Some(permits.clone().acquire_owned().await?),
                None => None,
            };
            let permit = lane.permits.clone().acquire_owned().await?;
            Ok::<_, tokio::sync::AcquireError>(Slot { _permit: permit, _unsheltered: unsheltered })
        };
        let waited = tokio::time::timeout(wait, slot).await;
        let queue_bound = if sheltered { "lifted" } else { "held" };
        metrics::histogram!(crate::telemetry::HBASE_POOL_WAIT_SECONDS, "queue_bound" => queue_bound)
            .record(began.elapsed().as_secs_f64());
        match waited {
            Ok(slot) => slot.map_err(|_| Error::Unavailable("the HBase pool is shut down".to_owned())),
            Err(_) if queue_deadline < deadline => {
                metrics::counter!(crate::telemetry::HBASE_OVERLOADED, "reason" => "queue_timeout").increment(1);
                Err(Error::Overloaded(format!(
                    "no HBase connection free within the queue timeout of {:?}",
                    inner.config.queue_timeout.unwrap_or_default()
                )))
            }
            Err(_) => Err(Error::Unavailable("no HBase connection free before the deadline".to_owned())),
        }
    }

    /// A slot of `lane` free now, taking one of `unsheltered` too when given.
    fn free_slot<C: GatewayClient>(lane: &Lane<C>, unsheltered: Option<&Arc<tokio::sync::Semaphore>>) -> Option<Slot> {
        let unsheltered = match unsheltered {
            Some(permits) => Some(permits.clone().try_acquire_owned().ok()?),
            None => None,
        };
        let permit = lane.permits.clone().try_acquire_owned().ok()?;
        Some(Slot { _permit: permit, _unsheltered: unsheltered })
    }

    /// Operations whose blocking work runs now (at most the two pools' sizes together).
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// The Thrift1 and Thrift2 gateways live now (not taken out, or
    /// answering their probe again), of the pool's lists.
    pub fn live_gateways(&self) -> (usize, usize) {
        (self.inner.thrift1.gateways.live(), self.inner.thrift2.gateways.live())
    }

    /// Operations waiting for a pool slot now.
    pub fn queued(&self) -> usize {
        self.inner.queued.load(Ordering::Relaxed)
    }

    /// Whether HBase is busy: an operation waits for a connection, or as
    /// many run (on both gateways together) as one gateway's pool lets
    /// unsheltered work have. The second is an early sign, before either
    /// pool is full, so a service that sheds on it sheds before its readers
    /// queue.
    pub fn busy(&self) -> bool {
        let unsheltered = usize::try_from(self.inner.config.unsheltered_connections()).unwrap_or(usize::MAX);
        self.queued() > 0 || self.in_flight() >= unsheltered
    }

    /// How long operations hold their connection lately over their usual
    /// time (`latency.rs`): near 1 when HBase and the machine keep up, 2 when
    /// every operation takes twice as long.
    pub fn latency_ratio(&self) -> f64 {
        self.inner.latency.ratio()
    }

    /// Whether HBase answers: lists tables (which reaches the master). Retried
    /// like a read, because after a gateway restart the pool may still hold
    /// connections to the old process, and one of them failing says nothing
    /// about whether HBase answers now.
    pub async fn check_ready(&self) -> Result<()> {
        self.run(Retry::Idempotent, |connection| connection.table_names().map(drop)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool configured as `config` says, on a "gateway" that accepts
    /// connections and never answers (a hung process): every call on it
    /// blocks until a socket timeout. The gateway lives as long as the
    /// listener returned with it.
    fn on_silent_gateway(config: HbaseConfig) -> (std::net::TcpListener, Hbase) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        (listener, Hbase::new(HbaseConfig { thrift1_gateways: GatewayList::single(address), ..config }))
    }

    /// One connection, patient for five seconds, three tries.
    fn patient_pool_on_silent_gateway() -> (std::net::TcpListener, Hbase) {
        on_silent_gateway(HbaseConfig {
            pool_size: 1,
            io_timeout: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(5),
            retries: 3,
            ..HbaseConfig::default()
        })
    }

    /// A ping through `hbase`, as a task's future.
    fn ping(hbase: &Hbase) -> impl Future<Output = Result<()>> + Send + 'static {
        let hbase = hbase.clone();
        async move { hbase.run(Retry::Once, |connection| connection.ping()).await }
    }

    /// Waits until `condition` holds, for at most two seconds.
    async fn until(what: &str, condition: impl Fn() -> bool) {
        let began = Instant::now();
        while !condition() {
            assert!(began.elapsed() < Duration::from_secs(2), "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_ends_by_the_callers_deadline_not_a_fresh_timeout_of_its_own() {
        let (_gateway, hbase) = patient_pool_on_silent_gateway();
        let asked = Instant::now();
        let deadline = asked + Duration::from_millis(300);
        let outcome = with_deadline(deadline, hbase.run(Retry::Idempotent, |connection| connection.ping())).await;
        assert!(matches!(outcome, Err(Error::DeadlineExceeded(_))), "the caller's deadline cut it: {outcome:?}");
        assert!(asked.elapsed() < Duration::from_secs(1), "the caller got its answer at its deadline");
        // The blocking call, too, gives up by the caller's deadline (its socket
        // timeout is cut to it) instead of holding the connection for its own
        // five seconds, and it does not retry for a caller that has gone.
        let released = Instant::now();
        while hbase.in_flight() > 0 {
            assert!(released.elapsed() < Duration::from_millis(500), "abandoned work still holds the pool");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_whose_caller_has_gone_is_not_started() {
        let (_gateway, hbase) = patient_pool_on_silent_gateway();
        // The one connection is busy for a second.
        let busy = tokio::spawn(with_deadline(Instant::now() + Duration::from_secs(1), ping(&hbase)));
        until("the busy operation runs", || hbase.in_flight() == 1).await;
        // A caller with 200 ms to spare waits for it, and gives up.
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        let waited = Instant::now();
        let outcome = with_deadline(
            Instant::now() + Duration::from_millis(200),
            hbase.run(Retry::Idempotent, move |_| {
                flag.store(true, Ordering::Relaxed);
                Ok(())
            }),
        )
        .await;
        assert!(matches!(outcome, Err(Error::DeadlineExceeded(_))), "{outcome:?}");
        assert!(waited.elapsed() < Duration::from_millis(700), "the wait counted against the deadline");
        assert!(busy.await.expect("busy task").is_err());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!started.load(Ordering::Relaxed), "work for a caller that had gone was started");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bounded_queue_refuses_at_once_unless_lifted_and_a_queue_timeout_refuses_in_time() {
        let (_gateway, hbase) = on_silent_gateway(HbaseConfig {
            pool_size: 1,
            io_timeout: Duration::from_secs(3),
            operation_timeout: Duration::from_secs(3),
            queue_timeout: Some(Duration::from_millis(400)),
            max_queued: Some(1),
            ..HbaseConfig::default()
        });
        let busy = tokio::spawn(ping(&hbase));
        until("the busy operation runs", || hbase.in_flight() == 1).await;
        let waiter = {
            let waiting = ping(&hbase);
            tokio::spawn(async move {
                let asked = Instant::now();
                (waiting.await, asked.elapsed())
            })
        };
        until("the waiter queues", || hbase.queued() == 1).await;
        let asked = Instant::now();
        let refused = hbase.run(Retry::Once, |connection| connection.ping()).await;
        assert!(matches!(refused, Err(Error::Overloaded(_))), "{refused:?}");
        assert!(asked.elapsed() < Duration::from_millis(100), "refused at once: {:?}", asked.elapsed());
        // With the bound lifted the same operation waits for a slot, here
        // until the queue timeout.
        let asked = Instant::now();
        let lifted = with_shelter(hbase.run(Retry::Once, |connection| connection.ping())).await;
        assert!(matches!(lifted, Err(Error::Overloaded(_))), "{lifted:?}");
        assert!(asked.elapsed() >= Duration::from_millis(400), "waited: {:?}", asked.elapsed());
        let (outcome, waited) = waiter.await.expect("waiter");
        assert!(matches!(outcome, Err(Error::Overloaded(_))), "{outcome:?}");
        assert!(waited >= Duration::from_millis(400) && waited < Duration::from_millis(900), "{waited:?}");
        assert!(outcome.is_err_and(|error| error.is_transient()));
        busy.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sheltered_work_takes_a_kept_connection_while_the_rests_work_queues() {
        let (_gateway, hbase) = on_silent_gateway(HbaseConfig {
            pool_size: 2,
            sheltered_connections: 1,
            io_timeout: Duration::from_secs(3),
            operation_timeout: Duration::from_secs(3),
            ..HbaseConfig::default()
        });
        // The rest's work takes its one connection, and more of it queues.
        let running = tokio::spawn(ping(&hbase));
        until("the rest's first operation runs", || hbase.in_flight() == 1).await;
        let queueing = tokio::spawn(ping(&hbase));
        until("the rest's second operation waits", || hbase.queued() == 1).await;
        assert!(hbase.busy(), "the rest's connections are all taken and its work waits");
        // Sheltered work does not wait behind it: the kept connection is free.
        let sheltered = tokio::spawn(with_shelter(ping(&hbase)));
        until("the sheltered operation runs", || hbase.in_flight() == 2).await;
        assert_eq!(hbase.queued(), 1, "only the rest's second operation waits");
        // A second sheltered operation finds the kept connection taken and
        // waits beside the rest's, past the queue's bound (none here).
        let second_sheltered = tokio::spawn(with_shelter(ping(&hbase)));
        until("the second sheltered operation waits", || hbase.queued() == 2).await;
        for task in [running, queueing, sheltered, second_sheltered] {
            task.abort();
        }
    }
}
