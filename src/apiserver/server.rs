//! The server: the axum router and the `run(self, shutdown)` loop, plus a [`Handle`] for fault
//! injection and request counters. Its settings are in `config`, the state every request shares
//! in `state`; the handlers read both and never this module.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::auth::{Authorization, Refusal};
use super::client_config::{build_kubeconfig, kubeconfig};
use super::config::Config;
use super::faults::{CorruptRule, Corruption, FailRule, RequestCount, Verb};
use super::lists::ListAnswer;
use super::state::App;
use super::status::ApiError;
use super::{handlers, seed, tls};

/// Errors starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving the api failed")]
    Serve(#[source] std::io::Error),
    /// The server's certificates could not be made.
    #[error("cannot set up tls")]
    Tls(#[source] tls::TlsError),
    /// A seed object was rejected.
    #[error("seed object {index} was rejected")]
    Seed {
        /// Its position among the seeds.
        index: usize,
        /// The rejection.
        #[source]
        source: ApiError,
    },
}

/// A handle on a running server: fault injection and counters.
#[derive(Debug, Clone)]
pub struct Handle(pub(crate) Arc<App>);

impl Handle {
    /// End every open watch now.
    pub fn drop_watches(&self) {
        self.0.store.drop_watches();
    }

    /// Forget the watch history: resuming from any older resourceVersion gets 410 Gone.
    pub fn expire_history(&self) {
        self.0.store.expire_history();
    }

    /// Fail the next `count` requests of `verb` on `resource` (any when `None`) with `code`.
    pub fn fail_next(&self, verb: Option<Verb>, resource: Option<&str>, count: u32, code: u16) {
        self.0.faults.fail_next(FailRule {
            verb,
            resource: resource.map(ToString::to_string),
            count,
            code,
        });
    }

    /// Corrupt the next `count` successful `get`/`list` answers on `resource` (any when
    /// `None`) with `corruption` (truncated JSON, wrong kind, huge object).
    pub fn corrupt_next(&self, resource: Option<&str>, count: u32, corruption: Corruption) {
        self.0.faults.corrupt_next(CorruptRule {
            verb: None,
            resource: resource.map(ToString::to_string),
            count,
            corruption,
        });
    }

    /// Delay every resource request.
    pub fn set_latency(&self, latency: Duration) {
        self.0.faults.set_latency(latency);
    }

    /// Answer the next `count` resource requests with 429 Too Many Requests and `Retry-After`.
    pub fn throttle_next(&self, count: u32, retry_after_secs: u32) {
        self.0.faults.throttle_next(count, retry_after_secs);
    }

    /// Remove injected failures, corruptions, latency and throttling.
    pub fn clear_faults(&self) {
        self.0.faults.clear();
    }

    /// How many requests were answered with an injected failure, throttling or corruption
    /// since start.
    #[must_use]
    pub fn injected_faults(&self) -> u64 {
        self.0.faults.injected()
    }

    /// How many `verb` requests `resource` (plural) has received.
    #[must_use]
    pub fn request_count(&self, verb: Verb, resource: &str) -> u64 {
        self.0.counters.get(verb, resource)
    }

    /// How many discovery requests (`/api`, `/apis`, a group, a group version's resources)
    /// the server has received: not in [`Handle::requests`], which counts requests on
    /// resources.
    #[must_use]
    pub fn discovery_requests(&self) -> u64 {
        self.0.counters.discovery()
    }

    /// Every request counter.
    #[must_use]
    pub fn requests(&self) -> Vec<RequestCount> {
        self.0.counters.snapshot()
    }

    /// The last LIST answers (at most 10,000), oldest first: each one's collection, the shard
    /// selector it applied, and how many objects and bytes it held.
    #[must_use]
    pub fn lists(&self) -> Vec<ListAnswer> {
        self.0.lists.snapshot()
    }

    /// Create an object directly (as if `POST`ed), creating its namespace when missing.
    ///
    /// # Errors
    ///
    /// The rejection the API would answer (unknown kind, invalid object, already exists).
    pub fn create(&self, object: Value) -> Result<Value, ApiError> {
        seed::create(&self.0, object)
    }

    /// Number of stored objects.
    #[must_use]
    pub fn object_count(&self) -> usize {
        self.0.store.len()
    }

    /// How requests are authorized.
    #[must_use]
    pub fn authorization(&self) -> Authorization {
        self.0.auth.mode
    }

    /// The administrator's bearer token (user `admin` in `system:masters`): what the
    /// server's kubeconfig carries when authorization is on.
    #[must_use]
    pub fn admin_token(&self) -> &str {
        self.0.auth.tokens.admin()
    }

    /// A kubeconfig for this server as the administrator: HTTPS with the administrator's
    /// token when authorization is on, plain HTTP without credentials when every request is
    /// allowed.
    #[must_use]
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        match self.0.auth.mode {
            Authorization::Rbac => self.kubeconfig_with_token(Some(self.admin_token())),
            Authorization::AlwaysAllow => kubeconfig(self.0.addr),
        }
    }

    /// A kubeconfig for this server that authenticates with the bearer `token` (a
    /// `ServiceAccount`'s from `TokenRequest`; none: anonymous), over HTTPS when
    /// authorization is on.
    #[must_use]
    pub fn kubeconfig_with_token(&self, token: Option<&str>) -> kube::config::Kubeconfig {
        let url = match &self.0.tls {
            Some(_) => format!("https://{}", self.0.addr),
            None => format!("http://{}", self.0.addr),
        };
        let ca = self.0.tls.as_ref().map(tls::Identity::ca_data);
        build_kubeconfig(url, token, ca)
    }

    /// Reach the admission or conversion webhooks that name service `namespace/name` and
    /// `port` (443 when they name none) at `addr`: the embedded server has no cluster network,
    /// so a webhook naming a service it was not told about fails to be called. Its TLS is
    /// still verified for the name `NAME.NAMESPACE.svc`, as kube-apiserver verifies it.
    pub fn resolve_service(&self, namespace: &str, name: &str, port: u16, addr: SocketAddr) {
        self.0.admission.insert(namespace, name, port, addr);
    }

    /// Every request refused with 401 or 403 so far, oldest first (the last 10 000).
    #[must_use]
    pub fn refusals(&self) -> Vec<Refusal> {
        self.0.auth.refusals()
    }
}

/// A bound, not yet running API server.
#[derive(Debug)]
pub struct Server {
    app: Arc<App>,
    listener: TcpListener,
}

impl Server {
    /// Bind the listen address and load the seed objects.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when the address is taken, [`Error::Seed`] when a seed is rejected.
    pub async fn bind(config: Config) -> Result<Self, Error> {
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
        let mut app = App::new(config, addr);
        if app.auth.mode == Authorization::Rbac {
            app.tls = Some(tls::Identity::generate(addr).map_err(Error::Tls)?);
        }
        let app = Arc::new(app);
        for obj in app.auth.seeds() {
            seed::create(&app, obj).map_err(|source| Error::Seed { index: 0, source })?;
        }
        let seeds = app.config.seeds.clone();
        for (index, obj) in seeds.into_iter().enumerate() {
            seed::create(&app, obj).map_err(|source| Error::Seed { index, source })?;
        }
        Ok(Self { app, listener })
    }

    /// The bound address.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.app.addr
    }

    /// A handle for fault injection and counters.
    #[must_use]
    pub fn handle(&self) -> Handle {
        Handle(self.app.clone())
    }

    /// The HTTP router, for in-process requests (`tower::ServiceExt::oneshot`).
    pub fn router(&self) -> Router {
        router(self.app.clone())
    }

    /// Serve until `shutdown` is cancelled; open watches end at once, then connections drain.
    ///
    /// # Errors
    ///
    /// [`Error::Serve`] when accepting connections fails.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let app_token = self.app.shutdown.clone();
        let router = router(self.app.clone());
        let stop = async move {
            shutdown.cancelled().await;
            app_token.cancel();
        };
        match &self.app.tls {
            None => axum::serve(self.listener, router)
                .with_graceful_shutdown(stop)
                .await
                .map_err(Error::Serve),
            Some(identity) => {
                let acceptor = identity.acceptor().map_err(Error::Tls)?;
                let listener =
                    tls::TlsListener::new(self.listener, acceptor, self.app.shutdown.clone());
                axum::serve(listener, router)
                    .with_graceful_shutdown(stop)
                    .await
                    .map_err(Error::Serve)
            }
        }
    }
}

/// The router: every path goes through one dispatcher (route, verb, faults, handler).
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(serve).with_state(app)
}

async fn serve(State(app): State<Arc<App>>, req: Request<Body>) -> Response {
    handlers::dispatch(app, req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::config::Config;
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use tower::ServiceExt as _;

    /// Issue 45, item 11: with the default `AlwaysAllow` on loopback, a browser page created
    /// objects (a `text/plain` POST with a foreign `Origin` and `Host` got 201). The `Host` is
    /// the server's here: a foreign one is refused for itself (the next test).
    #[tokio::test]
    async fn a_request_from_a_browser_page_is_refused_unless_its_origin_is_allowed() {
        let serve = |allowed: Vec<String>| {
            let config = Config {
                allowed_origins: allowed,
                ..Config::default()
            };
            let app = Arc::new(App::new(
                config,
                std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ));
            router(app)
        };
        let post = |origin: Option<&str>| {
            let mut request = Request::builder()
                .method("POST")
                .uri("/api/v1/namespaces/default/configmaps")
                .header(header::HOST, "127.0.0.1:8080")
                .header(header::CONTENT_TYPE, "text/plain");
            if let Some(origin) = origin {
                request = request.header(header::ORIGIN, origin);
            }
            request
                .body(Body::from(
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pwned"}}"#,
                ))
                .unwrap()
        };
        let refused = serve(Vec::new())
            .oneshot(post(Some("http://evil.example:8080")))
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(refused.into_body(), 1 << 16)
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.contains("--allow-origin http://evil.example:8080"),
            "{text}"
        );
        // Allowed, the same page reaches the server (which then judges the body as usual).
        let allowed = serve(vec!["http://evil.example:8080".to_owned()])
            .oneshot(post(Some("http://evil.example:8080")))
            .await
            .unwrap();
        assert_ne!(allowed.status(), StatusCode::FORBIDDEN);
        // A client sends no Origin: not refused for it.
        let client = serve(Vec::new()).oneshot(post(None)).await.unwrap();
        assert_ne!(client.status(), StatusCode::FORBIDDEN);
    }

    /// Issue 45, item 11: a page whose name was made to resolve to the server's loopback
    /// address (DNS rebinding) posts as its own origin, with no `Origin` header; its `Host`
    /// names it. A raw request over TCP, as the browser sends it.
    #[tokio::test]
    async fn a_request_for_a_foreign_host_is_refused_unless_the_host_is_allowed() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        async fn raw(config: Config, host: &str) -> (String, String) {
            let server = crate::apiserver::TestServer::start_with(config)
                .await
                .unwrap();
            let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
            let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pwned"}}"#;
            let request = format!(
                "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {host}\r\n\
                 Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            tcp.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            tcp.read_to_string(&mut answer).await.unwrap();
            let status = answer.lines().next().unwrap_or_default().to_owned();
            server.shutdown().await.unwrap();
            (status, answer)
        }
        let (status, answer) = raw(Config::default(), "evil.example").await;
        assert!(status.contains(" 403 "), "{answer}");
        assert!(answer.contains(r#""kind":"Status""#), "{answer}");
        assert!(answer.contains("--allow-host evil.example"), "{answer}");
        for host in ["127.0.0.1", "localhost:6443"] {
            let (status, answer) = raw(Config::default(), host).await;
            assert!(status.contains(" 201 "), "{host}: {answer}");
        }
        let allowed = Config {
            allowed_hosts: vec!["evil.example".to_owned()],
            ..Config::default()
        };
        let (status, answer) = raw(allowed, "evil.example").await;
        assert!(status.contains(" 201 "), "{answer}");
    }
}
