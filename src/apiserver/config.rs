//! The server's settings ([`Config`]) and the kube-apiserver feature gates it knows
//! ([`FeatureGates`]): plain data the state, the handlers and the CLI read, importing neither
//! the server nor its handlers.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::auth::Authorization;
use super::store::Limits;

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
    /// The browser origins (`Origin` header, as `http://localhost:3000`) whose requests are
    /// served. A request carrying any other `Origin` comes from a web page the browser is
    /// showing, not from a Kubernetes client (which sends none), and is refused with 403:
    /// with the default `AlwaysAllow`, any page could otherwise create objects on a server on
    /// the user's loopback. Empty by default.
    pub allowed_origins: Vec<String>,
    /// The host names (the `Host` header, without its port; case-insensitive) served beside
    /// IP addresses, `localhost` and the names under it; `*` serves every name. A request
    /// for any other name is refused with 403: a web page can make its own name resolve to
    /// the server's loopback address (DNS rebinding) and reach it as its own origin, without
    /// an `Origin` header. Empty by default.
    pub allowed_hosts: Vec<String>,
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
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}
