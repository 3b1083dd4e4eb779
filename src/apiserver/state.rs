//! The state every request shares ([`App`]): what is served, the objects, faults, counters,
//! settings and authorization. A leaf: the server builds it and the handlers read it, and it
//! imports neither.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

use super::admission::Resolver;
use super::auth::Auth;
use super::config::Config;
use super::faults::{Counters, Faults};
use super::lists::ListLog;
use super::registry::Registry;
use super::store::Store;
use super::tls;

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
    /// Where admission webhooks named by a service are reached (no cluster network here).
    pub admission: Resolver,
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
            admission: Resolver::default(),
        }
    }
}
