//! The connections of the webhook endpoint, served under limits: how many are open at once,
//! and how long a client may take to send a request's headers (or, between requests of a
//! kept-alive connection, to send the next).

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::tls::TlsListener;

/// How many connections the webhook endpoint holds open at once, by default (TLS handshakes
/// in progress among them): past them it accepts no more until one closes, so a flood queues
/// in the kernel's backlog instead of in the manager's memory. The API server keeps a few
/// kept-alive connections per replica.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How long a client may take to send a request's headers, by default; hyper starts the same
/// timer while a kept-alive connection waits for its next request, so it is also how long an
/// idle connection stays open. Go's `net/http` has no default; the API server sends a review
/// at once and reconnects when a kept-alive connection was closed.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The limits a webhook endpoint serves connections under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once (handshakes included). Default [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// How long a request's headers (or an idle connection's next request) may take. Default
    /// [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

/// Serves `router` on the connections of `listener` under `limits` until `shutdown` is
/// cancelled, then lets the requests in flight finish (each connection closes after its
/// current answer).
pub(super) async fn serve(
    mut listener: TlsListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept_limited() => accepted,
        };
        let (stream, permit) = accepted;
        let router = router.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let router = router.clone();
                async move {
                    Ok::<_, Infallible>(
                        router
                            .oneshot(request.map(axum::body::Body::new))
                            .await
                            .unwrap_or_else(|never| match never {}),
                    )
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .keep_alive(true);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(error = %error, "webhook connection ended");
            }
            drop(permit);
        });
    }
    connections.close();
    connections.wait().await;
}
