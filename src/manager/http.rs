//! The manager's HTTP endpoints: health probes, Prometheus metrics and debug JSON, served as
//! controller-runtime's manager serves them.
//!
//! Two listeners, each optional:
//!
//! | listener | paths | default |
//! |---|---|---|
//! | metrics | `/metrics`, `/debug/cache`, `/debug/status` | [`DEFAULT_METRICS_ADDR`] |
//! | health probes | `/healthz`, `/healthz/<check>`, `/readyz`, `/readyz/<check>` | [`DEFAULT_HEALTH_ADDR`] |
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

use std::fmt;
use std::future::IntoFuture;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::metrics::MetricsRegistry;
use crate::serving::{self, Authenticator, CertSource, CertWatcher, TlsListener};

/// The metrics listener's default address, every interface, port 8080.
///
/// controller-runtime pkg/metrics/server/server.go `DefaultBindAddress` (":8080", used when
/// `BindAddress` is empty). kubebuilder's v4 scaffold (`cmd/main.go`) defaults
/// `--metrics-bind-address` to "0" (off) and names ":8080" for plain HTTP and ":8443" for its
/// authenticated HTTPS server. `informant run` keeps metrics on and plain by default (a laptop
/// has no API server to review tokens for it), so ":8080"; with `--metrics-secure` the address
/// is still the one `--metrics-addr` gives, and the chart, secure by default, passes ":8443".
pub const DEFAULT_METRICS_ADDR: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080));

/// The health probe listener's default address, every interface, port 8081.
///
/// kubebuilder's scaffold `cmd/main.go`, `--health-probe-bind-address=:8081`
/// (controller-runtime itself leaves probes off unless `HealthProbeBindAddress` is set).
pub const DEFAULT_HEALTH_ADDR: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8081));

/// The content type of `/metrics`: the `OpenMetrics` text format prometheus-client encodes.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
const APPLICATION_JSON: &str = "application/json";

/// The check every `/healthz` has, always passing: the process answers HTTP (controller-runtime
/// pkg/healthz/healthz.go `Ping`).
pub const PING: &str = "ping";

/// A bind address the flags could not parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid bind address {input:?}: expected \":port\", \"ip:port\", \"[ipv6]:port\", or \"0\" to disable"
)]
pub struct BindAddressError {
    /// The text given.
    pub input: String,
}

/// Parses a bind address in controller-runtime's flag syntax: `"0"` or `""` disables the
/// listener (`None`), `":8080"` is every interface, `"127.0.0.1:8080"` and `"[::1]:8080"` one
/// address. Host names are not resolved.
///
/// # Errors
///
/// [`BindAddressError`] for anything else.
///
/// ```
/// use informant::manager::{parse_bind_address, DEFAULT_METRICS_ADDR};
///
/// assert_eq!(parse_bind_address(":8080").unwrap(), Some(DEFAULT_METRICS_ADDR));
/// assert_eq!(parse_bind_address("0").unwrap(), None);
/// assert!(parse_bind_address("localhost:8080").is_err());
/// ```
pub fn parse_bind_address(input: &str) -> Result<Option<SocketAddr>, BindAddressError> {
    let error = || BindAddressError {
        input: input.to_owned(),
    };
    match input.trim() {
        "" | "0" => Ok(None),
        s => {
            if let Some(port) = s.strip_prefix(':') {
                let port = port.parse::<u16>().map_err(|_| error())?;
                Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::UNSPECIFIED,
                    port,
                ))))
            } else {
                s.parse::<SocketAddr>().map(Some).map_err(|_| error())
            }
        }
    }
}

/// One named health or readiness check and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// The check's name: its line in the aggregate (`[+]config ok`) and its path
    /// (`/readyz/config`).
    pub name: String,
    /// `Err(reason)` when it fails; the reason is shown only on the check's own path.
    pub result: Result<(), String>,
}

impl Check {
    /// A passing check.
    #[must_use]
    pub fn ok(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            result: Ok(()),
        }
    }

    /// A failing check.
    #[must_use]
    pub fn failed(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            result: Err(reason.into()),
        }
    }
}

/// What the endpoints report, asked at each request (so answers are always current). The
/// manager implements it over its state; each method should be cheap and must not block.
pub trait Probes: Send + Sync + 'static {
    /// The liveness checks of `/healthz`. A [`PING`] check is added when none is named so.
    fn health_checks(&self) -> Vec<Check>;

    /// The readiness checks of `/readyz` (for instance `config`: a valid config was loaded;
    /// `informers`: the current tree's informers have synced). With none, `/readyz` has a
    /// [`PING`] check, as controller-runtime's.
    fn ready_checks(&self) -> Vec<Check>;

    /// The JSON of `/debug/cache`: the cache tree and its informers.
    fn debug_cache(&self) -> serde_json::Value;

    /// The JSON of `/debug/status`, or `None` when status is written to a `CacheConfig`
    /// resource (then the path answers 404 and says where to look).
    fn debug_status(&self) -> Option<serde_json::Value>;
}

/// The metrics listener's routes: `/metrics`, `/debug/cache`, `/debug/status`.
pub fn metrics_router(registry: MetricsRegistry, probes: Arc<dyn Probes>) -> Router {
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
pub fn health_router(probes: Arc<dyn Probes>) -> Router {
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
/// use informant::manager::{HttpServer, MetricsRegistry, DEFAULT_HEALTH_ADDR, DEFAULT_METRICS_ADDR};
/// use tokio_util::sync::CancellationToken;
///
/// let registry = MetricsRegistry::default();
/// // Binding now reports "address in use" before anything else starts.
/// let server = HttpServer::bind(Some(DEFAULT_METRICS_ADDR), Some(DEFAULT_HEALTH_ADDR), registry, probes).await?;
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

/// The `/healthz` checks: the probes' own, plus [`PING`] unless one is named so.
fn health_checks(probes: &dyn Probes) -> Vec<Check> {
    let mut checks = probes.health_checks();
    if !checks.iter().any(|c| c.name == PING) {
        checks.push(Check::ok(PING));
    }
    checks
}

/// The `/readyz` checks: the probes' own, or [`PING`] when there are none.
fn ready_checks(probes: &dyn Probes) -> Vec<Check> {
    let checks = probes.ready_checks();
    if checks.is_empty() {
        vec![Check::ok(PING)]
    } else {
        checks
    }
}

async fn healthz(State(probes): State<Arc<dyn Probes>>, RawQuery(query): RawQuery) -> Response {
    aggregate(health_checks(probes.as_ref()), query.as_deref(), "healthz")
}

async fn readyz(State(probes): State<Arc<dyn Probes>>, RawQuery(query): RawQuery) -> Response {
    aggregate(ready_checks(probes.as_ref()), query.as_deref(), "readyz")
}

async fn healthz_one(State(probes): State<Arc<dyn Probes>>, Path(check): Path<String>) -> Response {
    one(health_checks(probes.as_ref()), &check)
}

async fn readyz_one(State(probes): State<Arc<dyn Probes>>, Path(check): Path<String>) -> Response {
    one(ready_checks(probes.as_ref()), &check)
}

/// One check at its own path (controller-runtime `CheckHandler`): `ok`, or 500 with the
/// reason; 404 for an unknown name. A trailing slash is ignored, as `path.Clean` does.
fn one(checks: Vec<Check>, name: &str) -> Response {
    let name = name.trim_end_matches('/');
    match checks.into_iter().find(|c| c.name == name) {
        None => not_found(),
        Some(Check { result: Ok(()), .. }) => text(StatusCode::OK, "ok"),
        Some(Check {
            result: Err(reason),
            ..
        }) => text_nosniff(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

/// What the query asks of an aggregate: `?verbose` and `?exclude=<check>` (repeatable).
#[derive(Debug, Default)]
struct AggregateQuery {
    verbose: bool,
    exclude: Vec<String>,
}

impl AggregateQuery {
    fn parse(query: Option<&str>) -> Self {
        let pairs: Vec<(String, String)> = query
            .and_then(|q| serde_urlencoded::from_str(q).ok())
            .unwrap_or_default();
        let mut parsed = AggregateQuery::default();
        for (key, value) in pairs {
            match key.as_str() {
                "verbose" => parsed.verbose = true,
                "exclude" if !parsed.exclude.contains(&value) => parsed.exclude.push(value),
                _ => {}
            }
        }
        parsed
    }
}

/// Every check on one page, in controller-runtime's format (pkg/healthz/healthz.go
/// `serveAggregated`, `writeStatusesAsText`): sorted by name; `ok` alone when all pass and
/// `?verbose` is absent; otherwise one line per check, a warning naming excludes that matched
/// nothing, and `healthz check passed` or `healthz check failed` (that wording on `/readyz`
/// too). 200 when every check not excluded passes, else 500.
fn aggregate(mut checks: Vec<Check>, query: Option<&str>, endpoint: &'static str) -> Response {
    let AggregateQuery { verbose, exclude } = AggregateQuery::parse(query);
    checks.sort_by(|a, b| a.name.cmp(&b.name));
    let mut unmatched = exclude.clone();
    unmatched.retain(|name| !checks.iter().any(|c| &c.name == name));
    let is_excluded = |c: &Check| exclude.contains(&c.name);
    let failed = checks.iter().any(|c| c.result.is_err() && !is_excluded(c));
    for check in &checks {
        if let (Err(reason), false) = (&check.result, is_excluded(check)) {
            tracing::debug!(endpoint, check = %check.name, error = %reason, "check failed");
        }
    }

    let status = if failed {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    if !failed && !verbose {
        return text_nosniff(status, "ok");
    }
    let mut body = String::new();
    for check in &checks {
        let line = if is_excluded(check) {
            format!("[+]{} excluded: ok\n", check.name)
        } else if check.result.is_ok() {
            format!("[+]{} ok\n", check.name)
        } else {
            format!("[-]{} failed: reason withheld\n", check.name)
        };
        body.push_str(&line);
    }
    if !unmatched.is_empty() {
        let quoted: Vec<String> = unmatched.iter().map(|n| format!("{n:?}")).collect();
        body.push_str("warn: some health checks cannot be excluded: no matches for ");
        body.push_str(&quoted.join(","));
        body.push('\n');
    }
    body.push_str(if failed {
        "healthz check failed\n"
    } else {
        "healthz check passed\n"
    });
    text_nosniff(status, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_follow_controller_runtime_flag_syntax() {
        assert_eq!(parse_bind_address("0").unwrap(), None);
        assert_eq!(parse_bind_address("").unwrap(), None);
        assert_eq!(
            parse_bind_address(":8081").unwrap(),
            Some(DEFAULT_HEALTH_ADDR)
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9000").unwrap(),
            Some("127.0.0.1:9000".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("[::1]:9000").unwrap(),
            Some("[::1]:9000".parse().unwrap())
        );
        for bad in [":http", ":70000", "8080", "localhost:8080"] {
            let err = parse_bind_address(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn query_takes_verbose_without_value_and_repeated_excludes() {
        let q = AggregateQuery::parse(Some("verbose&exclude=a&exclude=b%2Fc&exclude=a"));
        assert!(q.verbose);
        assert_eq!(q.exclude, ["a", "b/c"]);
        let q = AggregateQuery::parse(None);
        assert!(!q.verbose && q.exclude.is_empty());
    }
}
