//! The middleware that applies the clients' limits to every request it wraps.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use common::hbase::with_shelter;
use common::store::ReadStore;
use futures_util::future::{self, Either};
use futures_util::FutureExt as _;

use super::shares::Load;
use super::{Admission, ClientId, Clients, Refusal, Why, NEWCOMER_IN_FLIGHT};
use crate::around::{AnswerFuture, Around};
use crate::error::{ApiError, ErrorCode};

/// The fair-shedding middleware ([`Around`]): it counts every request by
/// its client's class, refuses the one [`Clients::admit`] refuses with
/// `429 too_many_requests` and `Retry-After`, and holds the admission of the
/// others until their answer is ready. It holds the reads only
/// (`crate::route_handling`): the probes and `/metrics` must show the
/// service as it is, not as one of its clients.
///
/// It holds the clients and HBase's load behind one `Arc`, since axum
/// clones the layered route on every request.
#[derive(Clone)]
pub(crate) struct Shedding(Arc<SheddingParts>);

struct SheddingParts {
    clients: Clients,
    store: ReadStore,
}

impl Shedding {
    pub(crate) fn new(clients: Clients, store: ReadStore) -> Shedding {
        Shedding(Arc::new(SheddingParts { clients, store }))
    }

    /// The admission of `request` by its client's limits, or its refusal
    /// and whose it is; either counted by the client's class.
    fn admit(&self, request: &Request) -> Result<Admission, (ClientId, Refusal)> {
        let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| address.ip());
        let SheddingParts { clients, store } = &*self.0;
        let client = clients.identify(peer, request.headers());
        let load = Load {
            busy: store.hbase_busy(),
            latency_ratio: store.hbase_latency_ratio(),
            connections: store.hbase_connections(),
            operations: store.hbase_operations(),
        };
        clients.admit(&client, &load).map_err(|refusal| {
            clients.count_refusal(&client, &refusal);
            (client, refusal)
        })
    }
}

impl Around for Shedding {
    fn around<Beneath: AnswerFuture>(
        &self,
        request: Request,
        beneath: impl FnOnce(Request) -> Beneath,
    ) -> impl AnswerFuture {
        match self.admit(&request) {
            Ok(mut admission) => {
                let answer = beneath(request);
                // Combinators, not an `async` block (see `crate::around`).
                let answer =
                    if admission.sheltered() { Either::Left(with_shelter(answer)) } else { Either::Right(answer) };
                Either::Left(answer.map(move |response| {
                    if !response.status().is_server_error() {
                        admission.served();
                    }
                    response
                }))
            }
            // Logged in the answer's future: the front door polls it in the
            // request's span, and calls this outside it.
            Err((client, refusal)) => Either::Right(future::lazy(move |_| {
                tracing::debug!(%client, reason = refusal.reason(), "client refused");
                too_many_requests(&refusal)
            })),
        }
    }
}

/// The answer to a refused request: `429 too_many_requests`, saying why,
/// with `Retry-After`.
fn too_many_requests(refusal: &Refusal) -> Response {
    let detail = match refusal.why {
        Why::Rate => "this client is over its request rate".to_owned(),
        Why::InFlight { in_flight, .. } => {
            format!("this client already has {in_flight} requests in flight, its most")
        }
        Why::Newcomer { in_flight } => format!(
            "the service is busy and this client, new to it, has {in_flight} requests in flight: \
             until its rate is known it may have {NEWCOMER_IN_FLIGHT}, while room for them is left"
        ),
        Why::FairShare { rate, fair_rate } => format!(
            "the service is busy and this client asks more than its fair share: \
             about {rate:.0} requests a second, its share now {fair_rate:.0}"
        ),
    };
    let mut response =
        ApiError::new(ErrorCode::TooManyRequests, format!("{detail}; retry after {} s", refusal.retry_after_secs))
            .into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(refusal.retry_after_secs));
    response
}

#[cfg(test)]
mod tests {
    use std::future::{pending, ready, Future as _};
    use std::task::Context;
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::StatusCode;
    use futures_util::task::noop_waker_ref;

    use super::*;
    use crate::clients::ClientPolicy;
    use crate::handler_tests::offline_store;

    /// Shedding over clients that may each have one request in flight. No
    /// request here reaches HBase: admission only reads the store's load.
    fn one_in_flight_each() -> Shedding {
        let clients = Clients::new(ClientPolicy { max_in_flight: Some(1), ..ClientPolicy::default() });
        Shedding::new(clients, offline_store(Duration::from_millis(200)))
    }

    fn request() -> Request {
        Request::get("/v1/products/P000000001/comments/ranked").body(Body::empty()).expect("request")
    }

    /// The status of a request whose answer is ready as soon as it is let through.
    async fn status_of_a_quick_request(shedding: &Shedding) -> StatusCode {
        shedding.around(request(), |_| ready(StatusCode::OK.into_response())).await.status()
    }

    #[tokio::test]
    async fn a_request_dropped_while_pending_frees_its_clients_in_flight_place() {
        let shedding = one_in_flight_each();
        // Polled once and left pending, as when its client disconnects mid-request.
        let mut abandoned = Box::pin(shedding.around(request(), |_| pending::<Response>()));
        assert!(abandoned.as_mut().poll(&mut Context::from_waker(noop_waker_ref())).is_pending());
        assert_eq!(status_of_a_quick_request(&shedding).await, StatusCode::TOO_MANY_REQUESTS, "the place is held");
        drop(abandoned);
        assert_eq!(status_of_a_quick_request(&shedding).await, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_request_dropped_before_it_was_polled_frees_its_clients_in_flight_place() {
        let shedding = one_in_flight_each();
        // Admitted, then dropped before the runtime polled it (its connection closed first).
        let never_polled = shedding.around(request(), |_| pending::<Response>());
        assert_eq!(status_of_a_quick_request(&shedding).await, StatusCode::TOO_MANY_REQUESTS, "the place is held");
        drop(never_polled);
        assert_eq!(status_of_a_quick_request(&shedding).await, StatusCode::OK);
    }
}
