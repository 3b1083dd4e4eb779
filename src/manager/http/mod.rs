//! The manager's HTTP endpoints: health probes, Prometheus metrics and debug JSON, served as
//! controller-runtime's manager serves them.
//!
//! Two listeners, each optional:
//!
//! | listener | paths | default |
//! |---|---|---|
//! | metrics | `/metrics`, `/debug/cache`, `/debug/status` | `:8080` |
//! | health probes | `/healthz`, `/healthz/<check>`, `/readyz`, `/readyz/<check>` | `:8081` |
//!
//! When both addresses are equal, one listener serves every path (not with secure metrics:
//! the kubelet probes plain HTTP). With secure metrics ([`SecureMetrics`], `informant run
//! --metrics-secure`), the metrics listener serves HTTPS ([`crate::serving`]) and every request
//! to it, unknown paths included, must carry a bearer token the API server authenticates
//! (`TokenReview`) and authorizes for `get` on the path (`SubjectAccessReview`); the health
//! listener stays plain HTTP. The probe bodies and status codes are controller-runtime's (pkg/healthz/healthz.go), so kubelet probes, dashboards and
//! people reading `curl` output see what they know:
//!
//! ```text
//! $ curl -s localhost:8081/readyz            # all checks pass: 200
//! ok
//! $ curl -s localhost:8081/readyz?verbose    # 200
//! [+]config ok
//! [+]informers ok
//! healthz check passed
//! $ curl -s localhost:8081/readyz            # a check fails: 500, always verbose
//! [+]config ok
//! [-]informers failed: reason withheld
//! healthz check failed
//! $ curl -s localhost:8081/readyz/informers  # one check, with its reason: 500
//! internal server error: 2 of 5 informers not synced
//! $ curl -s 'localhost:8081/readyz?exclude=informers'
//! ok
//! ```
//!
//! The aggregate withholds failure reasons as controller-runtime does (the probe port is
//! often reachable from the whole cluster); `/readyz/<check>` gives the reason.

mod address;
mod checks;
mod webhooks;

pub use address::{BindAddressError, parse_bind_address};
pub use checks::{Check, Probes};
use checks::{healthz, healthz_one, readyz, readyz_one};
pub(super) use webhooks::{ServingRunnable, start_webhooks};

use std::fmt;
use std::future::IntoFuture;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::metrics::MetricsRegistry;
use crate::serving::{self, Authenticator, CertSource, CertWatcher, TlsListener};

/// The content type of `/metrics`: the `OpenMetrics` text format prometheus-client encodes.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
const APPLICATION_JSON: &str = "application/json";

/// The metrics listener's routes: `/metrics`, `/debug/cache`, `/debug/status`.
pub(crate) fn metrics_router(registry: MetricsRegistry, probes: Arc<dyn Probes>) -> Router {
    let metrics = Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(registry);
    let debug = Router::new()
        .route("/debug/cache", get(debug_cache))
        .route("/debug/status", get(debug_status))
        .with_state(probes);
    metrics.merge(debug)
}

/// The health listener's routes: `/healthz`, `/readyz`, and `/healthz/<check>`,
/// `/readyz/<check>` for one check (controller-runtime pkg/manager/internal.go
/// `addHealthProbeServer`).
pub(crate) fn health_router(probes: Arc<dyn Probes>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/healthz/", get(healthz))
        .route("/healthz/{*check}", get(healthz_one))
        .route("/readyz", get(readyz))
        .route("/readyz/", get(readyz))
        .route("/readyz/{*check}", get(readyz_one))
        .with_state(probes)
}

/// The bound listeners of the manager's endpoints, ready to [`HttpServer::run`].
///
/// ```no_run
/// # async fn demo(probes: std::sync::Arc<dyn informant::manager::Probes>) -> std::io::Result<()> {
/// use informant::manager::{HttpServer, MetricsRegistry};
/// use tokio_util::sync::CancellationToken;
///
/// let registry = MetricsRegistry::default();
/// // Binding now reports "address in use" before anything else starts.
/// let (metrics, health) = ("0.0.0.0:8080".parse().ok(), "0.0.0.0:8081".parse().ok());
/// let server = HttpServer::bind(metrics, health, registry, probes).await?;
/// let shutdown = CancellationToken::new();
/// server.run(shutdown.child_token()).await
/// # }
/// ```
pub struct HttpServer {
    listeners: Vec<(Listening, Router, Serves)>,
    metrics_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
    /// The watcher of the metrics listener's certificate files, when it has some.
    cert_watcher: Option<CertWatcher>,
}

/// How `/metrics` and `/debug/*` are served securely: over HTTPS with the certificate of
/// `cert`, each request authenticated and authorized by the API server `client` talks to
/// ([`crate::serving::auth`]).
#[derive(Clone)]
pub struct SecureMetrics {
    /// Where the serving certificate comes from.
    pub cert: CertSource,
    /// The client the reviews are made with (the manager's).
    pub client: kube::Client,
}

impl fmt::Debug for SecureMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecureMetrics")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// A bound listener: plain TCP, or TLS over it.
enum Listening {
    Plain(TcpListener),
    Tls(TlsListener),
}

impl Listening {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listening::Plain(l) => l.local_addr(),
            Listening::Tls(l) => axum::serve::Listener::local_addr(l),
        }
    }
}

/// What one listener serves, for its log line.
#[derive(Clone, Copy, Debug)]
enum Serves {
    Metrics,
    SecureMetrics,
    Health,
    Both,
}

impl Serves {
    /// Says at info where this listener serves what: a user who curls the wrong port learns
    /// which one to use from the log.
    fn log(self, addr: SocketAddr) {
        match self {
            Serves::Metrics => tracing::info!(
                listen.addr = %addr,
                "serving metrics: /metrics, /debug/cache, /debug/status"
            ),
            Serves::SecureMetrics => tracing::info!(
                listen.addr = %addr,
                "serving metrics over HTTPS to bearer tokens the API server authorizes: /metrics, /debug/cache, /debug/status"
            ),
            Serves::Health => tracing::info!(
                listen.addr = %addr,
                "serving health probes: /healthz, /readyz"
            ),
            Serves::Both => tracing::info!(
                listen.addr = %addr,
                "serving metrics and health probes: /metrics, /debug/cache, /debug/status, /healthz, /readyz"
            ),
        }
    }
}

impl fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServer")
            .field("metrics_addr", &self.metrics_addr)
            .field("health_addr", &self.health_addr)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds the listeners now, so port 0 gets its port and a taken address fails before the
    /// manager starts anything. `None` disables a listener (controller-runtime's `"0"`); equal
    /// addresses share one listener serving every path.
    ///
    /// # Errors
    ///
    /// The bind error, its kind kept (`AddrInUse`, `PermissionDenied`), its message naming
    /// the listener and the address.
    pub async fn bind(
        metrics_addr: Option<SocketAddr>,
        health_addr: Option<SocketAddr>,
        registry: MetricsRegistry,
        probes: Arc<dyn Probes>,
    ) -> io::Result<Self> {
        Self::bind_secure(metrics_addr, health_addr, registry, probes, None)
            .await
            .map_err(|e| match e {
                BindError::Io(e) => e,
                BindError::Certificate(e) => io::Error::other(e),
            })
    }

    /// [`HttpServer::bind`], the metrics listener serving HTTPS to authorized requests when
    /// `secure` says how. The certificate is loaded (or generated) now, so a missing or bad
    /// one fails before the manager starts anything.
    ///
    /// # Errors
    ///
    /// [`BindError::Io`] as [`HttpServer::bind`], and for secure metrics sharing the health
    /// probes' address (`InvalidInput`); [`BindError::Certificate`] when the certificate cannot
    /// be read, loaded, generated or watched.
    pub async fn bind_secure(
        metrics_addr: Option<SocketAddr>,
        health_addr: Option<SocketAddr>,
        registry: MetricsRegistry,
        probes: Arc<dyn Probes>,
        secure: Option<SecureMetrics>,
    ) -> Result<Self, BindError> {
        let mut server = HttpServer {
            listeners: Vec::new(),
            metrics_addr: None,
            health_addr: None,
            cert_watcher: None,
        };
        if let (Some(secure), Some(metrics_addr)) = (secure, metrics_addr) {
            // Port 0 asks for two free ports, not one shared listener.
            if Some(metrics_addr) == health_addr && metrics_addr.port() != 0 {
                return Err(BindError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "secure metrics cannot share the health probes' address {metrics_addr}: \
                         the kubelet probes plain HTTP; give --metrics-addr and --health-addr \
                         different ports"
                    ),
                )));
            }
            let cell = match &secure.cert {
                CertSource::SelfSigned { names } => Arc::new(serving::CertificateCell::new(
                    serving::cert::self_signed(names)?,
                )),
                CertSource::Files {
                    dir,
                    cert_name,
                    key_name,
                } => {
                    let watcher = CertWatcher::new(dir, cert_name, key_name)?;
                    let cell = watcher.cell();
                    server.cert_watcher = Some(watcher);
                    cell
                }
            };
            let router = Authenticator::new(secure.client)
                .protect(metrics_router(registry, Arc::clone(&probes)));
            let tcp = listen("metrics", metrics_addr).await?;
            server.metrics_addr = Some(tcp.local_addr()?);
            let tls = TlsListener::new(tcp, serving::server_config(cell));
            server
                .listeners
                .push((Listening::Tls(tls), router, Serves::SecureMetrics));
            if let Some(addr) = health_addr {
                let listener = listen("health probe", addr).await?;
                server.health_addr = Some(listener.local_addr()?);
                server.listeners.push((
                    Listening::Plain(listener),
                    health_router(probes),
                    Serves::Health,
                ));
            }
            return Ok(server);
        }
        let metrics =
            metrics_addr.map(|addr| (addr, metrics_router(registry, Arc::clone(&probes))));
        let health = health_addr.map(|addr| (addr, health_router(probes)));
        match (metrics, health) {
            (Some((m, metrics)), Some((h, health))) if m == h => {
                let listener = listen("metrics and health probe", m).await?;
                let bound = listener.local_addr()?;
                server.metrics_addr = Some(bound);
                server.health_addr = Some(bound);
                server.listeners.push((
                    Listening::Plain(listener),
                    metrics.merge(health),
                    Serves::Both,
                ));
            }
            (metrics, health) => {
                if let Some((addr, router)) = metrics {
                    let listener = listen("metrics", addr).await?;
                    server.metrics_addr = Some(listener.local_addr()?);
                    server
                        .listeners
                        .push((Listening::Plain(listener), router, Serves::Metrics));
                }
                if let Some((addr, router)) = health {
                    let listener = listen("health probe", addr).await?;
                    server.health_addr = Some(listener.local_addr()?);
                    server
                        .listeners
                        .push((Listening::Plain(listener), router, Serves::Health));
                }
            }
        }
        Ok(server)
    }

    /// The metrics listener's bound address (with the real port when bound on port 0), or
    /// `None` when disabled.
    #[must_use]
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The health probe listener's bound address, or `None` when disabled.
    #[must_use]
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_addr
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets requests in flight
    /// finish, closes idle connections and returns once every connection is closed. A client
    /// that never finishes its request holds this open: bound it with the manager's grace
    /// period. With both listeners disabled, waits for `shutdown`.
    ///
    /// # Errors
    ///
    /// An I/O error of a listener, naming its address.
    pub async fn run(self, shutdown: CancellationToken) -> io::Result<()> {
        for (listener, _, serves) in &self.listeners {
            if let Ok(addr) = listener.local_addr() {
                serves.log(addr);
            }
        }
        let serving = self.listeners.into_iter().map(|(listener, router, _)| {
            let shutdown = shutdown.clone();
            async move {
                let addr = listener.local_addr()?;
                let served = match listener {
                    Listening::Plain(listener) => {
                        axum::serve(listener, router)
                            .with_graceful_shutdown(shutdown.cancelled_owned())
                            .into_future()
                            .await
                    }
                    Listening::Tls(listener) => {
                        axum::serve(listener, router)
                            .with_graceful_shutdown(shutdown.cancelled_owned())
                            .into_future()
                            .await
                    }
                };
                served.map_err(|e| io::Error::new(e.kind(), format!("serving on {addr}: {e}")))
            }
        });
        let serving: Vec<_> = serving.collect();
        if serving.is_empty() {
            shutdown.cancelled().await;
            return Ok(());
        }
        let watching = async {
            if let Some(watcher) = self.cert_watcher {
                watcher.run(shutdown.clone()).await;
            }
        };
        let (served, ()) =
            futures::future::join(futures::future::try_join_all(serving), watching).await;
        served?;
        Ok(())
    }
}

/// Why [`HttpServer::bind_secure`] failed.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A listener could not be bound, or the addresses do not go together.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The serving certificate could not be read, loaded, generated or watched.
    #[error("cannot serve metrics securely")]
    Certificate(#[from] serving::Error),
}

async fn listen(what: &str, addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("binding the {what} listener on {addr}: {e}"),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Handlers.

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut response = (status, body.into()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    response
}

/// A text response with `X-Content-Type-Options: nosniff`, as Go's `http.Error` and
/// controller-runtime's `writeStatusesAsText` send.
fn text_nosniff(status: StatusCode, body: impl Into<String>) -> Response {
    let mut response = text(status, body);
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Go's `http.NotFoundHandler`.
fn not_found() -> Response {
    text_nosniff(StatusCode::NOT_FOUND, "404 page not found\n")
}

fn json(value: &serde_json::Value) -> Response {
    let mut body = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned());
    body.push('\n');
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(APPLICATION_JSON),
    );
    response
}

async fn serve_metrics(State(registry): State<MetricsRegistry>) -> Response {
    let Ok(body) = registry.encode() else {
        tracing::error!("encoding metrics failed");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding metrics failed\n",
        );
    };
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    response
}

async fn debug_cache(State(probes): State<Arc<dyn Probes>>) -> Response {
    json(&probes.debug_cache())
}

async fn debug_status(State(probes): State<Arc<dyn Probes>>) -> Response {
    match probes.debug_status() {
        Some(status) => json(&status),
        None => text(
            StatusCode::NOT_FOUND,
            "status is not served here: the manager writes it to the status of its CacheConfig \
             resource (kubectl get cacheconfig <name> -o yaml)\n",
        ),
    }
}
