//! [`TestServer`]: an API server on a free loopback port for tests, with a ready `kube::Client`
//! and kubeconfig.

use std::net::SocketAddr;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::auth::Authorization;
use super::config::Config;
use super::seed;
use super::server::{self, Error, Handle, Server};
use super::state::App;

/// Errors of [`TestServer`].
#[derive(Debug, thiserror::Error)]
pub enum TestServerError {
    /// The server did not start.
    #[error("the embedded api server did not start")]
    Start(#[source] Error),
    /// The kubeconfig could not be turned into a client.
    #[error("cannot build a client for the embedded api server")]
    Client(#[source] kube::config::KubeconfigError),
    /// kube-rs refused the client configuration.
    #[error("cannot build a client for the embedded api server")]
    Kube(#[source] kube::Error),
}

/// An embedded API server running on a free loopback port until dropped or shut down.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    handle: Handle,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl TestServer {
    /// Start a server with default settings (a `default` namespace exists).
    ///
    /// # Errors
    ///
    /// When the server cannot bind.
    pub async fn start() -> Result<Self, TestServerError> {
        Self::start_with(Config::default()).await
    }

    /// Start a server with RBAC on ([`Authorization::Rbac`]): its client and kubeconfig are
    /// the administrator's; [`TestServer::token`] gives a `ServiceAccount`'s token.
    ///
    /// # Errors
    ///
    /// When the server cannot bind.
    pub async fn start_with_rbac() -> Result<Self, TestServerError> {
        Self::start_with(Config {
            authorization: Authorization::Rbac,
            ..Config::default()
        })
        .await
    }

    /// Start a server with `config` (its `listen` is usually `127.0.0.1:0`).
    ///
    /// # Errors
    ///
    /// When the server cannot bind or a seed is rejected.
    pub async fn start_with(mut config: Config) -> Result<Self, TestServerError> {
        config.seeds.insert(
            0,
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        );
        let server = Server::bind(config).await.map_err(TestServerError::Start)?;
        let addr = server.local_addr();
        let handle = server.handle();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server.run(shutdown.clone()));
        Ok(Self {
            addr,
            handle,
            shutdown,
            task: Some(task),
        })
    }

    /// The server's address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Fault injection and request counters.
    #[must_use]
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// A kubeconfig pointing at this server, as the administrator.
    #[must_use]
    pub fn kubeconfig(&self) -> Kubeconfig {
        self.handle.kubeconfig()
    }

    /// A kube client for this server as the administrator (default namespace `default`).
    ///
    /// # Errors
    ///
    /// When kube-rs rejects the generated configuration.
    pub async fn client(&self) -> Result<kube::Client, TestServerError> {
        client_of(self.kubeconfig()).await
    }

    /// A kube client that authenticates with the bearer `token`.
    ///
    /// # Errors
    ///
    /// When kube-rs rejects the generated configuration.
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client, TestServerError> {
        client_of(self.handle.kubeconfig_with_token(Some(token))).await
    }

    /// A token for `ServiceAccount` `namespace/name`, asked for through the API as
    /// `kubectl create token` does (`TokenRequest`); the account must exist.
    ///
    /// # Errors
    ///
    /// [`TestServerError::Kube`] when the server refuses the request.
    pub async fn token(&self, namespace: &str, name: &str) -> Result<String, TestServerError> {
        let client = self.client().await?;
        let request = http::Request::builder()
            .method(http::Method::POST)
            .uri(format!(
                "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
            ))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(
                serde_json::to_vec(&serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {},
                }))
                .unwrap_or_default(),
            )
            .map_err(|e| TestServerError::Kube(kube::Error::HttpError(e)))?;
        let answer: serde_json::Value = client
            .request(request)
            .await
            .map_err(TestServerError::Kube)?;
        Ok(answer["status"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }
}

/// The embedded API server with no socket: its state's [`Handle`] and its router, to serve
/// requests in process (the recording fake of `controller::testing` puts a `kube::Client` in
/// front of it). A `default` namespace exists, then `config.seeds`; `config.listen` is only the
/// address the server answers as. No TLS: authorization stays as configured, but in process
/// there is no transport to secure.
///
/// # Errors
///
/// [`TestServerError::Start`] when a seed is rejected.
pub fn in_process(mut config: Config) -> Result<(Handle, axum::Router), TestServerError> {
    config.seeds.insert(
        0,
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
    );
    let app = std::sync::Arc::new(App::new(config, SocketAddr::from(([127, 0, 0, 1], 0))));
    let failed = |index, source| TestServerError::Start(Error::Seed { index, source });
    for obj in app.auth.seeds() {
        seed::create(&app, obj).map_err(|source| failed(0, source))?;
    }
    let seeds = app.config.seeds.clone();
    for (index, obj) in seeds.into_iter().enumerate() {
        seed::create(&app, obj).map_err(|source| failed(index, source))?;
    }
    Ok((Handle(app.clone()), server::router(app)))
}

/// A kube client of `kubeconfig`.
async fn client_of(kubeconfig: Kubeconfig) -> Result<kube::Client, TestServerError> {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(TestServerError::Client)?;
    kube::Client::try_from(config).map_err(TestServerError::Kube)
}

impl TestServer {
    /// Stop the server and wait until it has stopped.
    ///
    /// # Errors
    ///
    /// When serving had failed.
    pub async fn shutdown(mut self) -> Result<(), TestServerError> {
        self.shutdown.cancel();
        if let Some(task) = self.task.take()
            && let Ok(result) = task.await
        {
            result.map_err(TestServerError::Start)?;
        }
        Ok(())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
