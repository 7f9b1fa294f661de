//! The service's own middleware as tower services: [`Around`] is what a
//! middleware does around the service beneath it, and [`AroundLayer`] puts
//! it in the router.
//!
//! Not `axum::middleware::from_fn`: on every request it clones the service
//! beneath, boxes the clone once more as the `Next` it hands the middleware,
//! runs an extractor step and boxes its future, which shows in the CPU time
//! of a cached read. Here the service beneath is called in place, as tower's
//! own middleware does once `poll_ready` has said it is ready, and a
//! request's future is boxed once per layer.
//!
//! A middleware logs in its answer's future, not while it takes the
//! request: the front door calls the layers beneath outside the request's
//! span and polls their answer's future in it (`crate::front_door`), so only
//! a line logged in the future carries the request's id.
//!
//! A middleware builds its answer's future with combinators (`map`, `then`,
//! `Either`), not an `async` block or fn around the future beneath: a block
//! keeps what it captured apart from the future it awaits, so each layer
//! would hold the bytes beneath it twice, and every box copies them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt as _;
use tower::{Layer, Service};

/// The future of an answer as the layers hand it on: it can move between
/// threads and owns all it needs.
pub(crate) trait AnswerFuture: Future<Output = Response> + Send + 'static {}

impl<F: Future<Output = Response> + Send + 'static> AnswerFuture for F {}

/// A middleware: what happens to a request on its way in and to its answer
/// on its way out.
pub(crate) trait Around: Clone + Send + Sync + 'static {
    /// Answers `request`. `beneath` hands a request to the service beneath
    /// and returns its answer's future; it is called at most once, and
    /// before this method returns, since the service beneath is borrowed
    /// only for the call. So the middleware reads and changes the request
    /// before it calls `beneath`.
    ///
    /// The service beneath only starts its work when its future is polled:
    /// each is an axum `Route`, whose `call` makes a future and does nothing
    /// else. So the scopes a middleware polls that future in (the front
    /// door's span, deadline and task-locals) hold for all the work beneath
    /// it. An `Around` put directly over a service whose `call` did work
    /// would see that work done outside them.
    fn around<Beneath: AnswerFuture>(
        &self,
        request: Request,
        beneath: impl FnOnce(Request) -> Beneath,
    ) -> impl AnswerFuture;
}

/// The layer that wraps a router's services in an [`Around`].
#[derive(Clone)]
pub(crate) struct AroundLayer<M>(pub(crate) M);

impl<M: Around, S> Layer<S> for AroundLayer<M> {
    type Service = AroundService<M, S>;

    fn layer(&self, beneath: S) -> Self::Service {
        AroundService { middleware: self.0.clone(), beneath }
    }
}

/// A service wrapped in an [`Around`].
#[derive(Clone)]
pub(crate) struct AroundService<M, S> {
    middleware: M,
    beneath: S,
}

impl<M, S> Service<Request> for AroundService<M, S>
where
    M: Around,
    S: Service<Request, Error = Infallible>,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.beneath.poll_ready(context)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let beneath = &mut self.beneath;
        let answer =
            self.middleware.around(request, |request| beneath.call(request).map(|Ok(answer)| answer.into_response()));
        Box::pin(answer.map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{HeaderValue, StatusCode};
    use axum::routing::get;
    use axum::Router;
    use futures_util::future::{ready, Either, Ready};
    use tower::ServiceExt as _;

    use super::*;

    /// Tags the request on its way in and the answer on its way out, and
    /// answers a request that asks to be refused itself.
    #[derive(Clone)]
    struct Tagging;

    impl Around for Tagging {
        fn around<Beneath: AnswerFuture>(
            &self,
            mut request: Request,
            beneath: impl FnOnce(Request) -> Beneath,
        ) -> impl AnswerFuture {
            if request.uri().query() == Some("refuse") {
                return Either::Left(ready(StatusCode::TOO_MANY_REQUESTS.into_response()));
            }
            request.headers_mut().insert("x-in", HeaderValue::from_static("tagged"));
            let answer = beneath(request);
            Either::Right(async move {
                let mut answer = answer.await;
                answer.headers_mut().insert("x-out", HeaderValue::from_static("tagged"));
                answer
            })
        }
    }

    /// A route that counts the requests it answers and echoes their `x-in`.
    fn router(answered: Arc<AtomicUsize>) -> Router {
        Router::new()
            .route(
                "/echo",
                get(move |request: Request| async move {
                    answered.fetch_add(1, Ordering::Relaxed);
                    request.headers().get("x-in").map(|value| value.as_bytes().to_vec()).unwrap_or_default()
                }),
            )
            .layer(AroundLayer(Tagging))
    }

    /// The router's answer to a GET of `uri`, and how many requests its route answered.
    async fn answer_to_get(uri: &str) -> (Response, usize) {
        let answered = Arc::new(AtomicUsize::new(0));
        let answer = router(answered.clone())
            .oneshot(Request::get(uri).body(Body::empty()).expect("a request"))
            .await
            .expect("infallible");
        (answer, answered.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn the_request_reaches_the_route_changed_and_the_answer_comes_back_changed() {
        let (answer, answered) = answer_to_get("/echo").await;
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.headers().get("x-out").expect("tagged on the way out"), "tagged");
        let body = axum::body::to_bytes(answer.into_body(), 1024).await.expect("a body");
        assert_eq!(&body[..], b"tagged");
        assert_eq!(answered, 1);
    }

    #[tokio::test]
    async fn a_request_the_middleware_answers_itself_never_reaches_the_route() {
        let (answer, answered) = answer_to_get("/echo?refuse").await;
        assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(answer.headers().get("x-out").is_none());
        assert_eq!(answered, 0);
    }

    /// A service that is not ready until it has been asked once, and fails
    /// a test that calls it before.
    #[derive(Clone, Default)]
    struct ReadyWhenAskedTwice {
        asked: usize,
    }

    impl Service<Request> for ReadyWhenAskedTwice {
        type Response = Response;
        type Error = Infallible;
        type Future = Ready<Result<Response, Infallible>>;

        fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            self.asked += 1;
            if self.asked < 2 {
                context.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: Request) -> Self::Future {
            assert!(self.asked >= 2, "called before it was ready");
            ready(Ok(StatusCode::OK.into_response()))
        }
    }

    #[tokio::test]
    async fn the_service_beneath_is_ready_before_it_is_called() {
        let mut wrapped = AroundLayer(Tagging).layer(ReadyWhenAskedTwice::default());
        let waker = futures_util::task::noop_waker();
        let mut context = Context::from_waker(&waker);
        assert!(wrapped.poll_ready(&mut context).is_pending(), "ready while the service beneath is not");
        let answer = wrapped
            .ready()
            .await
            .expect("infallible")
            .call(Request::get("/").body(Body::empty()).expect("a request"))
            .await
            .expect("infallible");
        assert_eq!(answer.headers().get("x-out").expect("tagged on the way out"), "tagged");
    }
}
