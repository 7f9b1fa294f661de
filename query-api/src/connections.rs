//! Accepting and keeping connections: HTTP/1.1 with a header read timeout, an
//! idle keep-alive timeout and a cap on open connections, and the graceful
//! drain at shutdown.
//!
//! `axum::serve` gives hyper no timer, so hyper's header read timeout never
//! fires there, and it keeps every connection it accepts: a client that sent
//! half a request header, or held thousands of idle connections, kept them
//! until the process ran out of file descriptors and could accept no one.
//! Here each connection is hyper's HTTP/1.1 connection with a timer:
//!
//! - **Header read timeout**: a request head must be complete within it,
//!   counted from the moment the connection is ready for a request (accepted,
//!   or its previous answer sent); a connection that misses it is closed.
//! - **Keep-alive timeout**: a connection with no request in flight for this
//!   long after its last answer is closed (gracefully: nothing in flight is
//!   cut). The shorter of the two bounds an idle connection.
//! - **Connection cap**: at most `max_connections` are open at once; one
//!   more is answered a canned `503 overloaded` and closed at once, counted in
//!   `reviews_api_connections_refused_total`, so ordinary clients get a fast
//!   answer and the process never reaches its file limit.
//!
//! HTTP/2 is not served: the API's answers are small and clients and load
//! balancers speak HTTP/1.1 to it, and hyper's header read timeout is HTTP/1's.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::error::ErrorCode;
use crate::telemetry;

/// How long the accept loop pauses after an accept error (the process or the
/// system out of file descriptors, say), so that it neither spins nor floods the log.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// What is answered to a connection beyond the cap, before it is closed: the
/// API's `overloaded` error, as a whole HTTP/1.1 answer.
fn refusal() -> &'static [u8] {
    static REFUSAL: OnceLock<Vec<u8>> = OnceLock::new();
    REFUSAL.get_or_init(|| {
        let body = serde_json::json!({"error": {
            "code": ErrorCode::Overloaded.as_str(),
            "message": "the service has too many open connections; try again shortly",
        }})
        .to_string();
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

/// When a connection last started or finished a request, and how many it has in flight.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    last_change: Mutex<Instant>,
}

impl Activity {
    fn new() -> Activity {
        Activity { in_flight: AtomicUsize::new(0), last_change: Mutex::new(Instant::now()) }
    }

    fn touch(&self) {
        if let Ok(mut last_change) = self.last_change.lock() {
            *last_change = Instant::now();
        }
    }

    fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
    }

    fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.touch();
    }

    fn last_change(&self) -> Instant {
        self.last_change.lock().map_or_else(|_| Instant::now(), |last_change| *last_change)
    }

    /// Completes once nothing has been in flight for `keep_alive`.
    async fn idle_for(&self, keep_alive: Duration) {
        loop {
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(keep_alive).await;
                continue;
            }
            let deadline = self.last_change() + keep_alive;
            if deadline <= Instant::now() {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
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
    let open = metrics::gauge!(telemetry::CONNECTIONS_OPEN);
    open.increment(1.0);
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            activity.begin();
            let (router, activity) = (router.clone(), Arc::clone(&activity));
            async move {
                let response = router.oneshot(request.map(axum::body::Body::new)).await;
                activity.end();
                response
            }
        })
    };
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let idle = activity.idle_for(limits.keep_alive_timeout);
    tokio::pin!(idle);
    let mut closing = false;
    loop {
        tokio::select! {
            outcome = connection.as_mut() => {
                if let Err(error) = outcome {
                    if error.is_timeout() {
                        metrics::counter!(telemetry::CONNECTIONS_CLOSED, "reason" => "header_timeout").increment(1);
                    } else {
                        tracing::debug!(%error, "a connection ended with an error");
                    }
                }
                break;
            }
            () = &mut idle, if !closing => {
                metrics::counter!(telemetry::CONNECTIONS_CLOSED, "reason" => "idle").increment(1);
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            changed = draining.changed(), if !closing => {
                // A closed channel means the server is gone: close as when draining.
                if changed.is_err() || *draining.borrow() {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
    open.decrement(1.0);
}
