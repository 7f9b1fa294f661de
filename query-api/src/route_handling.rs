//! Which routes the clients' limits hold ([`Shedding`]) and which answer
//! conditional GETs ([`ConditionalGet`]), recorded as the routes are
//! registered ([`HandledRoutes`]), and the middleware that applies them by
//! the route a request matched ([`ByRoute`]).
//!
//! One middleware on every route, beside the front door in the router's one
//! layer, rather than a `route_layer` on each group of routes: axum makes each
//! layer a boxed route of its own, which it clones, with every route beneath
//! it, and calls through a `oneshot` on every request, and on a cached read
//! that showed in the CPU time.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::routing::MethodRouter;
use futures_util::future::Either;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::around::{AnswerFuture, Around};
use crate::clients::Shedding;
use crate::conditional::ConditionalGet;
use crate::state::AppState;

/// What the service does to a route's requests beyond what every request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handling {
    /// Limited per client ([`Shedding`]).
    Limited,
    /// Limited per client, then answered in the variant the request accepts
    /// and 304 when it holds that variant's tag ([`ConditionalGet`]).
    LimitedAndConditional,
}

/// Route template -> its [`Handling`]. Hashed with `foldhash`: the keys are
/// the router's templates, none chosen by a client.
type HandlingByRoute = foldhash::HashMap<Box<str>, Handling>;

/// The [`Handling`] of each route template that has one; any other route's
/// requests get the front door's only.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouteHandling(Arc<HandlingByRoute>);

impl RouteHandling {
    /// The handling of a request: its route's, whatever its method (a
    /// method the route does not have is answered 405, limited like the
    /// route's other requests: they are all its client's).
    fn of(&self, request: &Request) -> Option<Handling> {
        let route = request.extensions().get::<MatchedPath>()?;
        self.0.get(route.as_str()).copied()
    }
}

/// A router whose routes are registered with their [`Handling`], which it
/// records as it registers them, so a route's handling is written where the
/// route is.
pub(crate) struct HandledRoutes {
    router: OpenApiRouter<AppState>,
    handling: HandlingByRoute,
}

impl HandledRoutes {
    pub(crate) fn new(router: OpenApiRouter<AppState>) -> HandledRoutes {
        HandledRoutes { router, handling: HandlingByRoute::default() }
    }

    /// Registers a documented route (its paths from its handler's `utoipa::path`).
    pub(crate) fn routes(mut self, route: UtoipaMethodRouter<AppState>, handling: Handling) -> HandledRoutes {
        for path in route.1.paths.keys() {
            self.handling.insert(path.as_str().into(), handling);
        }
        self.router = self.router.routes(route);
        self
    }

    /// Registers a route the API's document does not list.
    pub(crate) fn route(
        mut self,
        path: &str,
        method_router: MethodRouter<AppState>,
        handling: Handling,
    ) -> HandledRoutes {
        self.handling.insert(path.into(), handling);
        self.router = self.router.route(path, method_router);
        self
    }

    /// The router, and the handling of its routes for [`ByRoute`].
    pub(crate) fn into_parts(self) -> (OpenApiRouter<AppState>, RouteHandling) {
        (self.router, RouteHandling(Arc::new(self.handling)))
    }
}

/// The middleware that gives each request its route's [`Handling`].
#[derive(Clone)]
pub(crate) struct ByRoute {
    pub(crate) handling: RouteHandling,
    pub(crate) shedding: Shedding,
}

impl Around for ByRoute {
    fn around<Beneath: AnswerFuture>(
        &self,
        request: Request,
        beneath: impl FnOnce(Request) -> Beneath,
    ) -> impl AnswerFuture {
        match self.handling.of(&request) {
            None => Either::Left(beneath(request)),
            Some(Handling::Limited) => Either::Right(Either::Left(self.shedding.around(request, beneath))),
            Some(Handling::LimitedAndConditional) => Either::Right(Either::Right(
                self.shedding.around(request, |request| ConditionalGet.around(request, beneath)),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::extract::Path;
    use axum::http::{header, StatusCode};
    use axum::response::Response;
    use axum::routing::{get, post};
    use axum::Router;
    use tower::ServiceExt as _;

    use super::*;
    use crate::around::AroundLayer;
    use crate::clients::{ClientPolicy, Clients};
    use crate::config::Settings;
    use crate::handler_tests::offline_store;

    /// Routes of each handling, and one of none, under clients that may each
    /// have one request in flight. `/limited/held` never answers, so it holds
    /// its client's place. No route reads HBase.
    fn router() -> Router {
        let store = offline_store(Duration::from_millis(200));
        let clients = Clients::new(ClientPolicy { max_in_flight: Some(1), ..ClientPolicy::default() });
        let shedding = Shedding::new(clients, store.clone());
        let answer = |Path(id): Path<String>| async move {
            if id == "held" {
                std::future::pending::<()>().await;
            }
            "limited"
        };
        let (routes, handling) = HandledRoutes::new(OpenApiRouter::new())
            .route("/limited/{id}", get(answer).post(|| async { "posted" }), Handling::Limited)
            .route("/tagged", get(|| async { "tagged" }), Handling::LimitedAndConditional)
            .into_parts();
        Router::from(routes)
            .route("/free", get(|| async { "free" }))
            .route("/free-post", post(|| async { "posted" }))
            .layer(AroundLayer(ByRoute { handling, shedding }))
            .with_state(AppState::new(store, Settings::default()))
    }

    async fn send(router: &Router, method: &str, uri: &str, if_none_match: Option<&str>) -> Response {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(tag) = if_none_match {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        router.clone().oneshot(request.body(Body::empty()).expect("a request")).await.expect("infallible")
    }

    #[tokio::test]
    async fn a_limited_routes_requests_are_held_to_the_clients_limits_and_no_other_request_is() {
        let router = router();
        assert_eq!(send(&router, "GET", "/limited/1", None).await.status(), StatusCode::OK);
        // Its one place taken by a read that never answers.
        let held = tokio::spawn({
            let router = router.clone();
            async move { send(&router, "GET", "/limited/held", None).await }
        });
        tokio::task::yield_now().await;
        for (method, uri) in
            [("GET", "/limited/2"), ("POST", "/limited/2"), ("DELETE", "/limited/2"), ("GET", "/tagged")]
        {
            let status = send(&router, method, uri, None).await.status();
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{method} {uri}");
        }
        assert_eq!(send(&router, "GET", "/free", None).await.status(), StatusCode::OK);
        assert_eq!(send(&router, "POST", "/free-post", None).await.status(), StatusCode::OK);
        held.abort();
        let _ = held.await;
        assert_eq!(send(&router, "POST", "/limited/2", None).await.status(), StatusCode::OK, "its place is free again");
        assert_eq!(send(&router, "DELETE", "/limited/2", None).await.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn only_a_conditional_route_tags_its_answers_and_answers_304_to_a_client_holding_the_tag() {
        let router = router();
        let tagged = send(&router, "GET", "/tagged", None).await;
        let tag = tagged.headers().get(header::ETAG).expect("tagged").to_str().expect("ascii").to_owned();
        assert_eq!(send(&router, "GET", "/tagged", Some(&tag)).await.status(), StatusCode::NOT_MODIFIED);
        assert!(send(&router, "GET", "/limited/1", None).await.headers().get(header::ETAG).is_none());
        assert!(send(&router, "GET", "/free", None).await.headers().get(header::ETAG).is_none());
    }
}
