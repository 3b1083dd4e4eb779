//! The server: configuration, shared state, the axum router and the `run(self, shutdown)` loop,
//! plus a [`Handle`] for fault injection and request counters.

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

use super::auth::{Auth, Authorization, Refusal};
use super::faults::{CorruptRule, Corruption, Counters, FailRule, Faults, RequestCount, Verb};
use super::lists::{ListAnswer, ListLog};
use super::registry::Registry;
use super::status::ApiError;
use super::store::{Limits, Store};
use super::{handlers, seed, tls};

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// How often an idle watch that asked for bookmarks gets one. kube-apiserver's cacher sends
    /// them about once a minute (`k8s.io/apiserver/pkg/storage/cacher/cacher.go`,
    /// `bookmarkFrequency`).
    pub bookmark_interval: Duration,
    /// History and broadcast sizes.
    pub limits: Limits,
    /// The largest accepted request body: 3 MiB, kube-apiserver's `MaxRequestBodyBytes`
    /// (`k8s.io/apiserver/pkg/server/config.go`).
    pub max_body: usize,
    /// Objects created at start (namespaces first is not required: missing namespaces are
    /// created for seeded objects).
    pub seeds: Vec<Value>,
    /// How requests are authorized: every one allowed (the default), or bearer tokens and
    /// RBAC as kube-apiserver does ([`Authorization::Rbac`]).
    pub authorization: Authorization,
    /// Feature gates, as kube-apiserver's `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// The shortest lifetime a `TokenRequest` may ask for: ten minutes, kube-apiserver's
    /// (`pkg/apis/authentication/validation`, `MinTokenAgeSec`). Tests that watch a token
    /// expire lower it (`informant apiserver --token-min-expiration 20s`).
    pub token_min_expiration: Duration,
}

/// The kube-apiserver feature gates the embedded server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `ShardedListAndWatch` (Kubernetes v1.36, alpha, KEP-5866): the `shardSelector` list and
    /// watch parameter and `ListMeta.shardInfo`. kube-apiserver leaves alpha gates off; the
    /// embedded server, a test server, turns it on so sharded clients can be tested, and
    /// `--feature-gates ShardedListAndWatch=false` gives the server a sharded client meets on
    /// a cluster without the feature.
    pub sharded_list_and_watch: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            sharded_list_and_watch: true,
        }
    }
}

impl FeatureGates {
    /// Applies kube-apiserver's `--feature-gates` syntax, `Name=bool[,Name=bool…]`, to `self`.
    ///
    /// # Errors
    ///
    /// kube's messages: `unrecognized feature gate: NAME` for a gate the server does not know,
    /// `missing bool value for NAME` and `invalid value of NAME=VALUE, err: …` for a bad value.
    pub fn set(&mut self, spec: &str) -> Result<(), String> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("missing bool value for {item}"))?;
            let (name, value) = (name.trim(), value.trim());
            let enabled = match value {
                "true" | "True" | "TRUE" | "1" | "t" | "T" => true,
                "false" | "False" | "FALSE" | "0" | "f" | "F" => false,
                other => {
                    return Err(format!(
                        "invalid value of {name}={other}, err: strconv.ParseBool: parsing {other:?}: invalid syntax"
                    ));
                }
            };
            match name {
                "ShardedListAndWatch" => self.sharded_list_and_watch = enabled,
                other => return Err(format!("unrecognized feature gate: {other}")),
            }
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bookmark_interval: Duration::from_mins(1),
            limits: Limits::default(),
            max_body: 3 * 1024 * 1024,
            seeds: Vec::new(),
            authorization: Authorization::AlwaysAllow,
            feature_gates: FeatureGates::default(),
            token_min_expiration: Duration::from_mins(10),
        }
    }
}

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

/// State shared by every request.
#[derive(Debug)]
pub struct App {
    /// Served resources.
    pub registry: Registry,
    /// Objects.
    pub store: Store,
    /// Injected faults.
    pub faults: Faults,
    /// Request counters.
    pub counters: Counters,
    /// The last LIST answers.
    pub lists: ListLog,
    /// Settings.
    pub config: Config,
    /// Tokens, the authorizer and the refusals.
    pub auth: Auth,
    /// The certificates served with authorization on (clients send tokens over TLS only).
    pub tls: Option<tls::Identity>,
    /// Cancelled when the server shuts down, ending open watches.
    pub shutdown: CancellationToken,
    /// The bound address.
    pub addr: SocketAddr,
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
            Authorization::AlwaysAllow => super::kubeconfig(self.0.addr),
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
        super::test_server::build_kubeconfig(url, token, ca)
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

impl App {
    /// Fresh state for `config`, answering as `addr`.
    #[must_use]
    pub fn new(config: Config, addr: SocketAddr) -> Self {
        Self {
            registry: Registry::new(),
            store: Store::new(config.limits.clone()),
            faults: Faults::default(),
            counters: Counters::default(),
            lists: ListLog::default(),
            auth: Auth::new(config.authorization),
            tls: None,
            config,
            shutdown: CancellationToken::new(),
            addr,
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
