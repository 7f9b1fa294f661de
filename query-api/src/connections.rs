//! Accepting and keeping connections: HTTP/1.1 with a header read timeout, an
//! idle keep-alive timeout and a cap on open connections, and the graceful
//! drain at shutdown.
//!
//! `axum::serve` keeps every connection it accepts for as long as the client
//! likes: a client that sent half a request header, or held thousands of idle
//! connections, kept them until the process ran out of file descriptors and
//! could accept no one. Here each connection is hyper's HTTP/1.1 connection,
//! watched by its own task:
//!
//! - **Header read timeout**: a request head must be complete within it,
//!   counted from the connection's first byte (from its acceptance, for the
//!   first request); a connection that misses it is closed.
//! - **Keep-alive timeout**: a connection that has not started another
//!   request this long after its last answer is closed. Load balancers keep
//!   idle connections to reuse them, and one the service closes just as the
//!   balancer reuses it fails that request, so this is long (75 s, above the
//!   60 s idle timeout of the common balancers) and independent of the header
//!   timeout. hyper's own header read timeout would not do: it starts when a
//!   connection is ready for a request, so it would close idle keep-alive
//!   connections too.
//! - **Connection cap**: at most `max_connections` are open at once; one
//!   more is answered a canned `503 overloaded` and closed at once, counted in
//!   `reviews_api_connections_refused_total`, so ordinary clients get a fast
//!   answer and the process never reaches its file limit.
//!
//! No deadline runs while a request is in flight, and draining at shutdown
//! lets requests in flight be answered first. HTTP/2 is not served: the API's answers are small, and
//! its clients and load balancers speak HTTP/1.1 to it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::error::{ErrorBody, ErrorCode, ErrorDetail};
use crate::telemetry;

/// How long the accept loop pauses after an accept error (the process or the
/// system out of file descriptors, say), so that it neither spins nor floods the log.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// What is answered to a connection beyond the cap, before it is closed: the
/// API's `overloaded` error with the headers of its 503s, as bytes written
/// straight to the socket (the connection never reaches hyper or the router).
fn refusal() -> &'static [u8] {
    static REFUSAL: OnceLock<Vec<u8>> = OnceLock::new();
    REFUSAL.get_or_init(|| {
        let error = ErrorDetail {
            code: ErrorCode::Overloaded.as_str().to_owned(),
            message: "the service has too many open connections; try again shortly".to_owned(),
        };
        let body = serde_json::to_string(&ErrorBody { error })
            .unwrap_or_else(|_| unreachable!("an error body is two strings"));
        format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
             cache-control: no-store\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    })
}

/// The bounds on connections (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a request head may take to arrive.
    pub header_read_timeout: Duration,
    /// How long a connection may stay idle between requests.
    pub keep_alive_timeout: Duration,
    /// The most connections open at once.
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` completes, then stops
/// accepting, closes idle connections, lets requests in flight finish for at
/// most `drain_deadline`, and closes what is left.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    drain_deadline: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (draining_sender, draining) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut last_accept_error: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            // Finished connections are reaped as they end, so the set holds the open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        connections.spawn(serve_one(stream, router.clone(), limits, draining.clone(), permit));
                    }
                    Err(_) => refuse(stream, limits.max_connections),
                },
                Err(error) => {
                    // Logged at most once a second: under a flood this is every accept.
                    if last_accept_error.is_none_or(|last| last.elapsed() >= Duration::from_secs(1)) {
                        tracing::warn!(%error, "accepting a connection failed; pausing the accept loop briefly");
                        last_accept_error = Some(Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    }
    drop(listener);
    tracing::info!(
        ?drain_deadline,
        open = connections.len(),
        "shutting down: no new connections; draining requests in flight"
    );
    // Every connection closes once its request in flight (if any) is answered.
    let _ = draining_sender.send(true);
    let drained =
        tokio::time::timeout(drain_deadline, async { while connections.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            ?drain_deadline,
            open = connections.len(),
            "drain deadline passed; closing the connections still open"
        );
        connections.abort_all();
    }
}

/// Answers a connection beyond the cap and closes it at once. The canned 503
/// is written without waiting (a full socket buffer drops it: the close is the
/// refusal then), so a flood of connections costs no task each.
fn refuse(stream: TcpStream, max_connections: usize) {
    metrics::counter!(telemetry::CONNECTIONS_REFUSED).increment(1);
    tracing::debug!(max_connections, "refused a connection at the cap");
    let _ = stream.try_write(refusal());
}

/// Where a connection stands between requests, which decides its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A request head is arriving (or, on a new connection, awaited) since then.
    ReadingHead(Instant),
    /// Requests are being answered.
    Answering { in_flight: usize },
    /// Answered everything at this moment; nothing has arrived since.
    Idle(Instant),
}

/// Why a connection was closed by the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    HeaderTimeout,
    Idle,
}

/// A connection's [`Phase`], updated by its reads and its service, read by
/// its watcher ([`Activity::expired`]).
///
/// A phase change wakes nobody: the watcher looks again at the deadline it
/// computed, or at the latest the shorter of the two timeouts from when it
/// last looked. Waking it on every change would cost three wake-ups and two
/// timer registrations per request: 0.5 to 1 µs of a cached read's 14.
#[derive(Debug)]
struct Activity {
    phase: Mutex<Phase>,
}

impl Activity {
    fn new() -> Activity {
        Activity { phase: Mutex::new(Phase::ReadingHead(Instant::now())) }
    }

    fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        if let Ok(mut phase) = self.phase.lock() {
            *phase = change(*phase);
        }
    }

    fn phase(&self) -> Phase {
        self.phase.lock().map_or(Phase::Answering { in_flight: 0 }, |phase| *phase)
    }

    /// Bytes arrived: on an idle connection, the next request head has begun.
    fn bytes_arrived(&self) {
        self.update(|phase| match phase {
            Phase::Idle(_) => Phase::ReadingHead(Instant::now()),
            other => other,
        });
    }

    /// A request head was read whole: its request is in flight.
    fn request_started(&self) {
        self.update(|phase| match phase {
            Phase::Answering { in_flight } => Phase::Answering { in_flight: in_flight + 1 },
            _ => Phase::Answering { in_flight: 1 },
        });
    }

    /// A request was answered.
    fn request_answered(&self) {
        self.update(|phase| match phase {
            Phase::Answering { in_flight } if in_flight > 1 => Phase::Answering { in_flight: in_flight - 1 },
            _ => Phase::Idle(Instant::now()),
        });
    }

    fn is_answering(&self) -> bool {
        matches!(self.phase(), Phase::Answering { .. })
    }

    /// Completes when the connection has outlived the deadline of its phase,
    /// which is never while a request is in flight.
    ///
    /// Since no change wakes it, it looks again at least every header read
    /// or keep-alive timeout, whichever is shorter: a phase that begins after
    /// a look has its deadline no earlier than that, so no deadline is
    /// missed (a request answered, or a head begun on an idle connection,
    /// moves the deadline earlier than the one being slept on).
    async fn expired(&self, limits: ConnectionLimits) -> Expiry {
        let longest_sleep = limits.header_read_timeout.min(limits.keep_alive_timeout);
        loop {
            let looked_at = Instant::now();
            let next_look = looked_at + longest_sleep;
            let (deadline, expiry) = match self.phase() {
                Phase::ReadingHead(since) => (since + limits.header_read_timeout, Some(Expiry::HeaderTimeout)),
                Phase::Idle(since) => (since + limits.keep_alive_timeout, Some(Expiry::Idle)),
                Phase::Answering { .. } => (next_look, None),
            };
            if let Some(expiry) = expiry.filter(|_| deadline <= looked_at) {
                return expiry;
            }
            tokio::time::sleep_until(deadline.min(next_look)).await;
        }
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive.
struct WatchedStream {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for WatchedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(context, buffer);
        if matches!(polled, Poll::Ready(Ok(()))) && buffer.filled().len() > before {
            self.activity.bytes_arrived();
        }
        polled
    }
}

impl AsyncWrite for WatchedStream {
    fn poll_write(mut self: Pin<&mut Self>, context: &mut Context<'_>, bytes: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, bytes)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

/// Serves one connection until the client closes it, it times out, or the
/// service drains. Holds `_permit` (its place under the cap) while it lives.
async fn serve_one(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    mut draining: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    // Answers are small and written whole: do not hold them back for Nagle.
    let _ = stream.set_nodelay(true);
    // Who is at the other end, for every request of the connection: the
    // fair shedding tells clients apart by it (`crate::clients`).
    let peer = stream.peer_addr().ok().map(axum::extract::ConnectInfo);
    let open = metrics::gauge!(telemetry::CONNECTIONS_OPEN);
    open.increment(1.0);
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            activity.request_started();
            let (router, activity) = (router.clone(), Arc::clone(&activity));
            let mut request = request.map(axum::body::Body::new);
            if let Some(peer) = peer {
                request.extensions_mut().insert(peer);
            }
            async move {
                let response = router.oneshot(request).await;
                activity.request_answered();
                response
            }
        })
    };
    let stream = WatchedStream { stream, activity: Arc::clone(&activity) };
    // The watcher below bounds the head's arrival (see the module docs).
    let connection = http1::Builder::new().header_read_timeout(None).serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let expired = activity.expired(limits);
    tokio::pin!(expired);
    let mut closing = false;
    loop {
        tokio::select! {
            outcome = connection.as_mut() => {
                if let Err(error) = outcome {
                    tracing::debug!(%error, "a connection ended with an error");
                }
                break;
            }
            // Nothing is in flight when a deadline passes: the connection is
            // dropped, which closes it (hyper's graceful shutdown would wait
            // for the first request of a new connection).
            expiry = &mut expired => {
                let reason = match expiry {
                    Expiry::HeaderTimeout => "header_timeout",
                    Expiry::Idle => "idle",
                };
                metrics::counter!(telemetry::CONNECTIONS_CLOSED, "reason" => reason).increment(1);
                break;
            }
            changed = draining.changed(), if !closing => {
                // A closed channel means the server is gone: close as when draining.
                if changed.is_err() || *draining.borrow() {
                    if !activity.is_answering() {
                        break;
                    }
                    // Answer what is in flight, then close.
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
    open.decrement(1.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keep-alive timeout shorter than the header read timeout, as a test
    /// of idle connections sets them.
    const LIMITS: ConnectionLimits = ConnectionLimits {
        header_read_timeout: Duration::from_secs(60),
        keep_alive_timeout: Duration::from_millis(400),
        max_connections: 1,
    };

    #[tokio::test(start_paused = true)]
    async fn a_request_answered_while_the_watcher_sleeps_keeps_its_keep_alive_deadline() {
        let activity = Activity::new();
        activity.request_started();
        let started = Instant::now();
        let expired = activity.expired(LIMITS);
        tokio::pin!(expired);
        // The watcher looks while the request is in flight, and sleeps.
        assert!(futures_util::poll!(&mut expired).is_pending());
        tokio::time::advance(Duration::from_millis(100)).await;
        activity.request_answered();
        assert_eq!(expired.await, Expiry::Idle);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(500) && waited < Duration::from_secs(1), "closed after {waited:?}");
    }
}
