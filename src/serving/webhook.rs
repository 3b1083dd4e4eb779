//! The webhook HTTPS endpoint: a [`WebhookRouter`] the admission and conversion handlers
//! register their paths on, served by a [`WebhookServer`] with the managed or mounted
//! certificate ([`WebhookCertificates`](super::WebhookCertificates)).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::cert::CertificateCell;
use super::connections::ConnectionLimits;
use super::error::Result;
use super::tls::{ClientCa, TlsListener, server_config, server_config_verifying_clients};

/// The webhook server's port: controller-runtime's `DefaultPort` (9443,
/// `pkg/webhook/server.go`), which kubebuilder's Service and the chart target.
pub const DEFAULT_WEBHOOK_PORT: u16 = 9443;

/// cert-manager's cainjector annotation: `<namespace>/<certificate>` whose CA it writes into
/// the `caBundle` of the object annotated.
pub const INJECT_CA_FROM_ANNOTATION: &str = "cert-manager.io/inject-ca-from";

/// The largest admission review read, in bytes: 7 MiB, controller-runtime's `maxRequestSize`
/// (`pkg/webhook/admission/http.go`): an UPDATE carries `object` and `oldObject`, each at most
/// 3 MB, and the rest of the review is under 1 MB. A larger body is answered 413 and counted
/// ([`Refusal::TooLarge`]).
pub const DEFAULT_MAX_ADMISSION_BYTES: usize = 7 << 20;

/// The largest conversion review read, in bytes: 64 MiB. A `ConversionReview` carries every
/// object of a list the API server converts at once, so it is larger than an admission review
/// (controller-runtime reads conversion bodies without a limit).
pub const DEFAULT_MAX_CONVERSION_BYTES: usize = 64 << 20;

/// How many answers each hook makes at once, by default: past them a review is answered 429
/// (the API server's failure policy decides) and counted as `busy`. An exec hook's answer is
/// a process; 16 per hook keeps a flood from forking the manager out of its PIDs and memory
/// while leaving room for a busy API server (which calls each webhook once per request).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;

/// How long a request's body may take to arrive once its headers have: the API server sends a
/// review in one go; a client trickling one holds a connection, not a hook.
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The path every webhook server answers `200 ok` on, for a readiness probe or a test (a
/// webhook's own path may not take it).
pub const HEALTH_PATH: &str = "/healthz";

/// Why a path cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The path does not start with `/`.
    #[error("webhook path {0:?} does not start with '/'")]
    NotAbsolute(String),
    /// The path is registered already (or is [`HEALTH_PATH`]).
    #[error("webhook path {0:?} is registered twice")]
    Duplicate(String),
}

/// The paths a webhook server serves: one handler each, as controller-runtime's
/// `Server.Register(path, handler)`.
#[derive(Debug)]
pub struct WebhookRouter {
    router: Router,
    paths: BTreeSet<String>,
}

impl Default for WebhookRouter {
    fn default() -> Self {
        Self::new()
    }
}

impl WebhookRouter {
    /// A router serving [`HEALTH_PATH`] only.
    #[must_use]
    pub fn new() -> Self {
        Self {
            router: Router::new().route(HEALTH_PATH, get(|| async { "ok" })),
            paths: BTreeSet::from([HEALTH_PATH.to_owned()]),
        }
    }

    /// Serves `handler` at `path`.
    ///
    /// # Errors
    ///
    /// [`RouteError::NotAbsolute`] for a path without a leading `/`,
    /// [`RouteError::Duplicate`] for a path already served.
    pub fn register(
        mut self,
        path: &str,
        handler: MethodRouter,
    ) -> std::result::Result<Self, RouteError> {
        if !path.starts_with('/') {
            return Err(RouteError::NotAbsolute(path.to_owned()));
        }
        if !self.paths.insert(path.to_owned()) {
            return Err(RouteError::Duplicate(path.to_owned()));
        }
        self.router = self.router.route(path, handler);
        Ok(self)
    }

    /// Also serves the paths of `routes`, as they change (a registered path takes precedence).
    #[must_use]
    pub fn with_routes(mut self, routes: WebhookRoutes) -> Self {
        self.router =
            self.router
                .fallback(move |method: Method, uri: Uri, body: axum::body::Body| {
                    routes.clone().answer(method, uri, body)
                });
        self
    }

    /// The axum router serving the paths (the hooks' tests call it without a listener).
    #[cfg(all(test, feature = "hooks"))]
    pub(crate) fn into_router(self) -> Router {
        self.router
    }

    /// The registered paths, [`HEALTH_PATH`] among them.
    #[must_use]
    pub fn paths(&self) -> Vec<&str> {
        self.paths.iter().map(String::as_str).collect()
    }
}

/// A handler of [`WebhookRoutes`]: the body of a `POST` in, the response out.
pub type RouteHandler = Arc<dyn Fn(Bytes) -> BoxFuture<'static, Response> + Send + Sync>;

/// Why a path's request was answered without its handler: each is counted by the route's
/// [`Route::on_refused`] as a fate of the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The body is larger than the route's [`Route::max_body`]: 413.
    TooLarge,
    /// The route's [`Route::max_in_flight`] answers are being made: 429.
    Busy,
}

/// Told of each request a route refused.
pub type RefusalCounter = Arc<dyn Fn(Refusal) + Send + Sync>;

/// One path of [`WebhookRoutes`]: its handler, the largest body it reads, and how many of
/// its answers are made at once.
#[derive(Clone)]
pub struct Route {
    handler: RouteHandler,
    max_body: usize,
    in_flight: Option<Arc<tokio::sync::Semaphore>>,
    refused: Option<RefusalCounter>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

impl Route {
    /// `handler`, reading bodies up to [`DEFAULT_MAX_ADMISSION_BYTES`].
    #[must_use]
    pub fn new(handler: RouteHandler) -> Self {
        Self {
            handler,
            max_body: DEFAULT_MAX_ADMISSION_BYTES,
            in_flight: None,
            refused: None,
        }
    }

    /// Makes at most `answers` answers at once: a request past them is answered 429 (Too Many
    /// Requests) unread. An answer counts until its work ends, even after its caller went
    /// (a [`json_route`] finishes what it started), so the work a path does is bounded
    /// whoever calls it and however often they give up.
    #[must_use]
    pub fn max_in_flight(mut self, answers: usize) -> Self {
        self.in_flight = Some(Arc::new(tokio::sync::Semaphore::new(answers.max(1))));
        self
    }

    /// Reads bodies up to `bytes`; a larger one is answered 413 (Payload Too Large).
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Tells `counter` of each request refused before the handler.
    #[must_use]
    pub fn on_refused(mut self, counter: RefusalCounter) -> Self {
        self.refused = Some(counter);
        self
    }

    fn refuse(&self, refusal: Refusal) {
        if let Some(counter) = &self.refused {
            counter(refusal);
        }
    }

    /// Reads `body` within the route's limit and time, then answers it on a task of its own
    /// holding one of the route's answers in flight until the answer is made.
    async fn answer(&self, body: axum::body::Body) -> Response {
        let read =
            tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, self.max_body));
        let body = match read.await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) if too_large(&e) => {
                self.refuse(Refusal::TooLarge);
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body over this path's limit of {} bytes (the manager's \
                         --webhook-max-admission-bytes or --webhook-max-conversion-bytes)",
                        self.max_body
                    ),
                )
                    .into_response();
            }
            Ok(Err(e)) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {e}"),
                )
                    .into_response();
            }
            Err(_) => {
                return (
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the request body took over {BODY_READ_TIMEOUT:?} to arrive"),
                )
                    .into_response();
            }
        };
        let permit = match &self.in_flight {
            None => None,
            Some(answers) => {
                if let Ok(permit) = Arc::clone(answers).try_acquire_owned() {
                    Some(permit)
                } else {
                    self.refuse(Refusal::Busy);
                    return (
                        StatusCode::TOO_MANY_REQUESTS,
                        "this hook is making as many answers as it may at once (the \
                         manager's --webhook-max-in-flight); the failure policy decides",
                    )
                        .into_response();
                }
            }
        };
        let answer = (self.handler)(body);
        // The permit is held until the answer is made, not until the caller stops waiting.
        let answered = tokio::spawn(async move {
            let response = answer.await;
            drop(permit);
            response
        });
        match answered.await {
            Ok(response) => response,
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
}

/// Whether reading a body failed on its length limit.
fn too_large(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// A [`RouteHandler`] answering each body with what `answer` makes of it: the JSON value, or
/// a 400 with the error (a body that is not the review the path takes). `answer` runs on a task
/// of its own, so that it finishes (and counts what it decided) even when the caller goes away
/// before the answer (the API server's own timeout, a dropped connection drops the request's
/// future); a task that panicked is a 500.
pub fn json_route<F, Fut, E>(answer: F) -> RouteHandler
where
    F: Fn(Bytes) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<serde_json::Value, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    Arc::new(move |body: Bytes| {
        let answered = tokio::spawn(answer(body));
        Box::pin(async move {
            match answered.await {
                Ok(Ok(value)) => axum::Json(value).into_response(),
                Ok(Err(e)) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
            }
        })
    })
}

/// Paths served while the server runs, added, replaced and removed at any time: the admission
/// and conversion hooks a reload declares ([`WebhookRouter::with_routes`]). Each answers
/// `POST` only (405 otherwise); a path not (or no longer) served is a 404, which the API
/// server treats as a failed call, so the hook's `failurePolicy` decides.
#[derive(Clone, Default)]
pub struct WebhookRoutes {
    handlers: Arc<RwLock<BTreeMap<String, Route>>>,
}

impl std::fmt::Debug for WebhookRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRoutes")
            .field("paths", &self.paths())
            .finish()
    }
}

impl WebhookRoutes {
    /// No path served.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `handler` at `path` from now on, in place of what served it before, reading
    /// bodies up to [`DEFAULT_MAX_ADMISSION_BYTES`].
    ///
    /// # Errors
    ///
    /// [`RouteError::NotAbsolute`] for a path without a leading `/`,
    /// [`RouteError::Duplicate`] for [`HEALTH_PATH`].
    pub fn set(&self, path: &str, handler: RouteHandler) -> std::result::Result<(), RouteError> {
        self.set_route(path, Route::new(handler))
    }

    /// Serves `route` at `path` from now on, in place of what served it before.
    ///
    /// # Errors
    ///
    /// As [`WebhookRoutes::set`].
    pub fn set_route(&self, path: &str, route: Route) -> std::result::Result<(), RouteError> {
        if !path.starts_with('/') {
            return Err(RouteError::NotAbsolute(path.to_owned()));
        }
        if path == HEALTH_PATH {
            return Err(RouteError::Duplicate(path.to_owned()));
        }
        self.write().insert(path.to_owned(), route);
        Ok(())
    }

    /// Stops serving `path`; whether it was served.
    #[allow(
        clippy::must_use_candidate,
        reason = "removing is the point; the answer is for a caller that cares"
    )]
    pub fn remove(&self, path: &str) -> bool {
        self.write().remove(path).is_some()
    }

    /// The paths served now.
    #[must_use]
    pub fn paths(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Route>> {
        // A handler never panics while the lock is held (it is cloned out first), so a
        // poisoned lock still holds a whole map.
        self.handlers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Route>> {
        self.handlers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers a request the static routes did not take.
    async fn answer(self, method: Method, uri: Uri, body: axum::body::Body) -> Response {
        let route = self.read().get(uri.path()).cloned();
        match route {
            None => (StatusCode::NOT_FOUND, "no webhook is served at this path").into_response(),
            Some(_) if method != Method::POST => {
                (StatusCode::METHOD_NOT_ALLOWED, "webhooks take POST").into_response()
            }
            Some(route) => route.answer(body).await,
        }
    }
}

/// The webhook HTTPS listener: a [`WebhookRouter`]'s paths over TLS (HTTP/1.1, see the
/// [module docs](super)), presenting the cell's current certificate at each handshake.
#[derive(Debug)]
pub struct WebhookServer {
    listener: TlsListener,
    cell: Arc<CertificateCell>,
    addr: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
}

impl WebhookServer {
    /// Binds `addr` (port [`DEFAULT_WEBHOOK_PORT`] in a pod; port 0 in tests).
    ///
    /// # Errors
    ///
    /// The bind's error.
    pub async fn bind(
        addr: SocketAddr,
        cell: Arc<CertificateCell>,
        router: WebhookRouter,
    ) -> std::io::Result<Self> {
        let tcp = TcpListener::bind(addr).await?;
        let addr = tcp.local_addr()?;
        Ok(Self {
            listener: TlsListener::new(tcp, server_config(Arc::clone(&cell))),
            cell,
            addr,
            router: router.router,
            limits: ConnectionLimits::default(),
        })
    }

    /// Serves connections under `limits` (default [`ConnectionLimits::default`]).
    #[must_use]
    pub fn limits(mut self, limits: ConnectionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Requires every client to present a certificate signed by `client_ca`
    /// ([`server_config_verifying_clients`]): the API server's, configured in its
    /// `AdmissionConfiguration` kubeconfig (docs/webhooks.md). A client without one is
    /// refused at the TLS handshake and never reaches a hook.
    ///
    /// # Errors
    ///
    /// What [`server_config_verifying_clients`] says.
    pub fn verify_clients(mut self, client_ca: ClientCa) -> Result<Self> {
        let config = server_config_verifying_clients(Arc::clone(&self.cell), client_ca)?;
        self.listener = self.listener.with_config(config);
        Ok(self)
    }

    /// The address bound.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` is cancelled, then lets requests in flight finish: at most
    /// [`ConnectionLimits::max_connections`] connections at once, each closed when a request's
    /// headers (or an idle connection's next request) take longer than
    /// [`ConnectionLimits::header_read_timeout`].
    ///
    /// # Errors
    ///
    /// None yet: a connection's error ends that connection only (kept for the callers that
    /// join it with others).
    #[tracing::instrument(name = "webhook_server", skip_all, fields(listen.addr = %self.addr))]
    pub async fn run(self, shutdown: CancellationToken) -> std::io::Result<()> {
        tracing::info!("serving webhooks");
        let listener = self.listener.limit_connections(self.limits.max_connections);
        super::connections::serve(listener, self.router, self.limits, shutdown).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_registered_once_and_must_be_absolute() {
        let router = WebhookRouter::new()
            .register("/validate-v1-configmap", get(|| async { "" }))
            .unwrap();
        assert_eq!(router.paths(), ["/healthz", "/validate-v1-configmap"]);
        let twice = WebhookRouter::new()
            .register("/convert", get(|| async { "" }))
            .unwrap()
            .register("/convert", get(|| async { "" }))
            .unwrap_err();
        assert_eq!(
            twice.to_string(),
            "webhook path \"/convert\" is registered twice"
        );
        let health = WebhookRouter::new()
            .register(HEALTH_PATH, get(|| async { "" }))
            .unwrap_err();
        assert_eq!(health, RouteError::Duplicate(HEALTH_PATH.to_owned()));
        let relative = WebhookRouter::new()
            .register("convert", get(|| async { "" }))
            .unwrap_err();
        assert_eq!(relative, RouteError::NotAbsolute("convert".to_owned()));
    }

    #[tokio::test]
    async fn routes_are_served_as_they_change_and_take_post_only() {
        use tower::ServiceExt as _;
        let paths = WebhookRoutes::new();
        let app = WebhookRouter::new().with_routes(paths.clone()).router;
        let call = |method: &str, path: &str| {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(path)
                .body(axum::body::Body::from("in"))
                .unwrap();
            let app = app.clone();
            async move { app.oneshot(request).await.unwrap().status() }
        };
        assert_eq!(call("POST", "/admit/a").await, StatusCode::NOT_FOUND);
        let echo: RouteHandler = Arc::new(|body: Bytes| {
            Box::pin(async move {
                assert_eq!(&body[..], b"in");
                StatusCode::ACCEPTED.into_response()
            })
        });
        paths.set("/admit/a", echo).unwrap();
        assert_eq!(call("POST", "/admit/a").await, StatusCode::ACCEPTED);
        assert_eq!(
            call("GET", "/admit/a").await,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(call("GET", HEALTH_PATH).await, StatusCode::OK);
        assert!(paths.remove("/admit/a"));
        assert_eq!(call("POST", "/admit/a").await, StatusCode::NOT_FOUND);
        assert_eq!(paths.paths(), Vec::<String>::new());
        let nothing: RouteHandler =
            Arc::new(|_| Box::pin(async { StatusCode::OK.into_response() }));
        assert_eq!(
            paths.set(HEALTH_PATH, Arc::clone(&nothing)),
            Err(RouteError::Duplicate(HEALTH_PATH.to_owned()))
        );
        assert_eq!(
            paths.set("admit", nothing),
            Err(RouteError::NotAbsolute("admit".to_owned()))
        );
    }

    #[tokio::test]
    async fn a_json_route_finishes_its_answer_when_the_caller_goes_away() {
        let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
        let (release, release_rx) = tokio::sync::watch::channel(false);
        let (finished, finished_rx) = tokio::sync::oneshot::channel::<()>();
        let finished = Arc::new(std::sync::Mutex::new(Some(finished)));
        let handler = json_route(move |body: Bytes| {
            let (started, mut release, finished) =
                (started.clone(), release_rx.clone(), Arc::clone(&finished));
            async move {
                let _ = started.send(());
                let _ = release.wait_for(|r| *r).await;
                if let Some(done) = finished.lock().unwrap().take() {
                    let _ = done.send(());
                }
                if body.is_empty() {
                    Err("empty")
                } else {
                    Ok(serde_json::json!({"ok": true}))
                }
            }
        });
        // The caller goes away while the answer is being made: the answer still finishes.
        let call = handler(Bytes::from_static(b"x"));
        started_rx.recv().await.unwrap();
        drop(call);
        release.send_replace(true);
        finished_rx
            .await
            .expect("the answer finished after its caller went");
        // Answered: the JSON, or a 400 with the error.
        let ok = handler(Bytes::from_static(b"x")).await;
        assert_eq!(ok.status(), StatusCode::OK);
        let bad = handler(Bytes::new()).await;
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    }
}
