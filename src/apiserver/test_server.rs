//! [`TestServer`]: an API server on a free loopback port for tests, with a ready `kube::Client`
//! and kubeconfig.

use std::net::SocketAddr;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::server::{Config, Error, Handle, Server};

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

/// A kubeconfig for plain HTTP on `addr` (no TLS, no credentials: loopback only).
#[must_use]
pub fn kubeconfig(addr: SocketAddr) -> Kubeconfig {
    let name = "informant".to_string();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                // Plain HTTP on loopback: the embedded server has no TLS and no authentication.
                server: Some(format!("http://{addr}")),
                ..Cluster::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo::default()),
            other: std::collections::BTreeMap::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                namespace: Some("default".to_string()),
                ..Context::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
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

    /// A kubeconfig pointing at this server.
    #[must_use]
    pub fn kubeconfig(&self) -> Kubeconfig {
        kubeconfig(self.addr)
    }

    /// A kube client for this server (default namespace `default`).
    ///
    /// # Errors
    ///
    /// When kube-rs rejects the generated configuration.
    pub async fn client(&self) -> Result<kube::Client, TestServerError> {
        let config =
            kube::Config::from_custom_kubeconfig(self.kubeconfig(), &KubeConfigOptions::default())
                .await
                .map_err(TestServerError::Client)?;
        kube::Client::try_from(config).map_err(TestServerError::Kube)
    }

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
