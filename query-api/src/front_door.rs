//! What every request (but a CORS preflight) gets on its way in and its
//! answer on its way out, in one middleware: its request id, the context its
//! log lines name it by (a span when its trace is exported), its deadline,
//! its metrics and access line, the per-request compression of its answer,
//! a generic 500 should its handler panic, and its route's [`ByRoute`]
//! handling (its client's limits, the conditional GET).
//!
//! One middleware, not a layer for each: every layer boxes its future on
//! each request, and on a cached read, whose own work is a cache lookup,
//! that bookkeeping is a good part of the cost.
//!
//! The log context is set around the polls of the answer's future, not
//! while the layers beneath take the request (they only decide and build
//! futures, and log in those: `crate::around`) nor around each frame of the
//! body; a request id comes from the thread's random generator, not from a
//! system call.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use common::traces::RequestContext;
use futures_util::future::Either;
use futures_util::FutureExt as _;
use pin_project_lite::pin_project;
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

use crate::around::{AnswerFuture, Around};
use crate::encoding::{self, AcceptedCodings};
use crate::error::{ApiError, ErrorCode};
use crate::route_handling::ByRoute;
use crate::telemetry;

/// The header naming a request, taken from the client or made here, and sent back.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The middleware, outermost of the service's but CORS: every answer, an
/// error, a refusal or a panic's 500 included, carries the request's id and
/// is counted by route; none takes longer than its `deadline`
/// ([`within_deadline`]). A CORS preflight, answered by the CORS layer
/// before it, is the one exception.
#[derive(Clone)]
pub(crate) struct FrontDoor {
    /// How long a request may take, the service's `--request-timeout`.
    pub(crate) deadline: Duration,
    /// What each route's requests get beyond the front door. Behind one
    /// `Arc`: axum clones the layered route on every request, and each
    /// reference count it raises is a write both workers make to one line.
    pub(crate) by_route: Arc<ByRoute>,
}

impl Around for FrontDoor {
    fn around<Beneath: AnswerFuture>(
        &self,
        request: Request,
        beneath: impl FnOnce(Request) -> Beneath,
    ) -> impl AnswerFuture {
        // A request id made here is not added to the request: nothing
        // beneath reads it (the log context and the answer carry it).
        let request_id = match request.headers().get(&REQUEST_ID_HEADER) {
            Some(chosen_by_the_client) => chosen_by_the_client.clone(),
            None => new_request_id(),
        };
        let route = telemetry::route_of(&request);
        let method = telemetry::method_label(request.method());
        let accepted = AcceptedCodings::of(request.headers());
        let span = telemetry::request_span(&request, &request_id, &route);
        // An exported request's lines name its span; any other's, a log context.
        let naming = if span.is_none() {
            Naming::Context(RequestContext::new(request_id, request.method().clone(), request.uri().clone()))
        } else {
            Naming::Span(request_id)
        };
        let started = Instant::now();
        let deadline = self.deadline;
        // Outside the request's log context and span: what the layers
        // beneath log, they log in the answer's future, which is polled in
        // them.
        let by_route = &self.by_route;
        let answer = catching_panics(|| by_route.around(request, beneath));
        // Combinators, not an `async` block (see `crate::around`).
        let answer = within_deadline(started, deadline, answer)
            .then(move |response| encoding::compress_per_request(accepted, response));
        InRequestScope {
            answer,
            span,
            naming: Some(naming),
            record: Some(move |span: &tracing::Span, response: &Response| {
                telemetry::record_answer(span, route.as_str(), &method, started.elapsed(), response);
            }),
        }
    }
}

/// The answer `make` makes, with a panic in making it or in polling its
/// future answered by [`panic_response`]: what `tower_http`'s
/// `CatchPanicLayer` does, inside the front door rather than as a layer of
/// its own, so a panic's 500 is logged, counted and tagged with the
/// request's id like any other answer.
fn catching_panics<Answer: AnswerFuture>(make: impl FnOnce() -> Answer) -> impl AnswerFuture {
    match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(answer) => {
            Either::Left(AssertUnwindSafe(answer).catch_unwind().map(|outcome| outcome.unwrap_or_else(panic_response)))
        }
        Err(panic) => Either::Right(std::future::ready(panic_response(panic))),
    }
}

/// The answer when a handler panicked: a generic 500; the panic goes to the log.
fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a non-string panic payload");
    ApiError::new(ErrorCode::Internal, format!("handler panicked: {message}")).into_response()
}

pin_project! {
    /// The answer's future polled in the request's log context (or its
    /// exported span), its answer recorded by `record` there, with the span
    /// at hand, and given the request's id: what [`tracing::Instrument`]
    /// and a `map` reading `Span::current()` would do, for less.
    /// `Instrument` enters the span once more to drop the future, which
    /// completes in its last poll, and the current span is a lookup and a
    /// reference count: on every request, for nothing. A future dropped
    /// unfinished (its client went away) drops outside both; nothing beneath
    /// logs when dropped.
    struct InRequestScope<Answer, Record> {
        #[pin]
        answer: Answer,
        span: tracing::Span,
        // Both taken when the answer is ready.
        naming: Option<Naming>,
        record: Option<Record>,
    }
}

/// What names a request's log lines, holding its id until its answer takes
/// it: the id is never cloned, since a generated id's first clone allocates.
enum Naming {
    /// Its lines name it by this context.
    Context(RequestContext),
    /// Its exported span names its lines; its id waits here.
    Span(HeaderValue),
}

impl<Answer, Record> Future for InRequestScope<Answer, Record>
where
    Answer: Future<Output = Response>,
    Record: FnOnce(&tracing::Span, &Response),
{
    type Output = Response;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Response> {
        let this = self.project();
        let _entered = this.span.enter();
        let (answer, record, span) = (this.answer, this.record, &*this.span);
        let poll_and_record = || {
            let response = std::task::ready!(answer.poll(context));
            let record =
                record.take().unwrap_or_else(|| unreachable!("the front door's future polled after its answer"));
            record(span, &response);
            Poll::Ready(response)
        };
        let polled = match this.naming {
            Some(Naming::Context(log_context)) => log_context.in_scope(poll_and_record),
            Some(Naming::Span(_)) | None => poll_and_record(),
        };
        let mut response = std::task::ready!(polled);
        let request_id = match this.naming.take() {
            Some(Naming::Context(log_context)) => log_context.into_request_id(),
            Some(Naming::Span(request_id)) => request_id,
            None => unreachable!("the front door's future polled after its answer"),
        };
        response.headers_mut().insert(REQUEST_ID_HEADER, request_id);
        Poll::Ready(response)
    }
}

/// Answers 503 when a request that came at `started` outlives the service's
/// `deadline` (counted from its work's first wait, microseconds after
/// `started`: [`crate::deadline`]), and hands the deadline down to every HBase operation the request starts ([`common::hbase::with_deadline`]): the
/// second read of a request gets what is left of it, not a fresh operation
/// timeout, and once the request has given up its HBase work is not started.
///
/// A fresh answer (2xx or 304, not a last good copy) any part of which a
/// secondary region replica served (a timeline read, `--read-consistency
/// timeline`) says so in [`REPLICA_READ_HEADER`], and is counted by route
/// ([`telemetry::ServedFromReplica`]). An error or a kept copy says nothing
/// of the reads that did not make it.
///
/// Part of the front door rather than a layer of its own: every layer boxes
/// its future on each request.
fn within_deadline(
    started: Instant,
    deadline: Duration,
    answer: impl Future<Output = Response>,
) -> impl Future<Output = Response> {
    let work = common::hbase::with_deadline(started + deadline, common::hbase::noting_replica_reads(answer));
    // Relative, on tokio's clock: under tokio's paused time (tests) it is not
    // the std clock. Set at the work's first wait: a cached read never waits.
    crate::deadline::within(deadline, work).map(move |outcome| match outcome {
        Ok((mut response, from_replica)) => {
            let fresh = (response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED)
                && response.extensions().get::<telemetry::ServedStale>().is_none();
            if from_replica && fresh {
                response.headers_mut().insert(REPLICA_READ_HEADER, HeaderValue::from_static("stale"));
                response.extensions_mut().insert(telemetry::ServedFromReplica);
            }
            response
        }
        Err(_) => ApiError::timeout(deadline).into_response(),
    })
}

/// The header of an answer read (in part) from a secondary region replica,
/// whose rows may lag the primary's by about a second: `X-Replica-Read: stale`.
pub const REPLICA_READ_HEADER: &str = "x-replica-read";

thread_local! {
    /// Each thread's generator of request ids, seeded from the thread's
    /// cryptographic generator. A request id must be unique, not
    /// unpredictable: 122 random bits from a small fast generator are a few
    /// nanoseconds, where ChaCha12's were a sixtieth of a cached read.
    static REQUEST_IDS: RefCell<SmallRng> = RefCell::new(SmallRng::from_rng(&mut rand::rng()));
}

/// A new request id: a random (version 4) UUID, from the thread's
/// generator of request ids.
fn new_request_id() -> HeaderValue {
    // One 128-bit number, two of the generator's 64-bit steps: `random()`
    // into `[u8; 16]` would draw each byte alone, sixteen steps.
    let random = REQUEST_IDS.with(|generator| generator.borrow_mut().random::<u128>());
    let uuid = uuid::Builder::from_random_bytes(random.to_le_bytes()).into_uuid();
    let mut text = uuid::Uuid::encode_buffer();
    HeaderValue::from_str(uuid.hyphenated().encode_lower(&mut text))
        .unwrap_or_else(|_| unreachable!("a UUID's text is a valid header value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_making_the_answer_or_in_polling_it_is_answered_500() {
        let in_making = catching_panics(|| -> std::future::Ready<Response> { panic!("in making it") });
        assert_eq!(in_making.await.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let in_polling = catching_panics(|| futures_util::future::lazy(|_| -> Response { panic!("in polling it") }));
        assert_eq!(in_polling.await.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let answered = catching_panics(|| std::future::ready(StatusCode::OK.into_response()));
        assert_eq!(answered.await.status(), StatusCode::OK);
    }

    #[test]
    fn request_ids_are_version_4_uuids_and_differ() {
        let first = new_request_id();
        let second = new_request_id();
        assert_ne!(first, second);
        let parsed = uuid::Uuid::parse_str(first.to_str().expect("ascii")).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(first.len(), 36);
    }

    #[test]
    fn request_ids_made_on_two_threads_differ() {
        let elsewhere = std::thread::spawn(new_request_id).join().expect("a request id");
        assert_ne!(new_request_id(), elsewhere, "each thread's generator is seeded apart");
    }
}
