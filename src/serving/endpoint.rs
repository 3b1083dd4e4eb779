//! [`WebhookEndpoint`]: the webhook server, the certificate it serves and, for managed
//! certificates, the leader's rotation and CA bundle injection, run as one.

use std::net::SocketAddr;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::certificates::{CertificateFeed, InjectTargets, WebhookCertificates};
use super::error::{Error, Result};
#[cfg(feature = "webhook-certificates")]
use super::inject::CaInjector;
#[cfg(feature = "webhook-certificates")]
use super::managed::ManagedCertificates;
use super::webhook::{WebhookRouter, WebhookServer};

/// Everything a manager runs for its webhooks: the [`WebhookServer`] on every replica, fed by
/// the managed Secret or the mounted files ([`WebhookCertificates`]), and with managed
/// certificates the leader's `ManagedCertificates` (the `webhook-certificates` feature) writing the Secret and injecting the CA
/// bundle into `targets`.
///
/// ```no_run
/// # async fn demo(client: kube::Client, manager: &informant::manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
/// use informant::serving::managed::Settings;
/// use informant::serving::{InjectTargets, WebhookCertificates, WebhookEndpoint, WebhookRouter, DEFAULT_WEBHOOK_PORT};
/// use tokio_util::sync::CancellationToken;
///
/// let certificates = WebhookCertificates::Managed(Settings::new("my-operator-webhook", "my-operator"));
/// let targets = InjectTargets { validating: vec!["my-operator".to_owned()], ..InjectTargets::default() };
/// let addr = ([0, 0, 0, 0], DEFAULT_WEBHOOK_PORT).into();
/// let endpoint = WebhookEndpoint::bind(client, addr, &certificates, targets, WebhookRouter::new()).await?;
/// endpoint.run(manager.is_leader(), CancellationToken::new()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct WebhookEndpoint {
    server: WebhookServer,
    feed: CertificateFeed,
    ready: watch::Receiver<bool>,
    #[cfg(feature = "webhook-certificates")]
    leader: Option<(ManagedCertificates, CaInjector)>,
}

impl WebhookEndpoint {
    /// Binds `addr` and prepares the certificate: the managed Secret's watcher (and the
    /// leader's side), or the mounted files, read once here.
    ///
    /// # Errors
    ///
    /// [`Error::Settings`] for invalid managed settings, or for `targets` named with mounted
    /// certificates (cert-manager's cainjector writes their `caBundle`; informant would fight
    /// it); what [`WebhookCertificates::feed`] says; [`Error::Bind`].
    pub async fn bind(
        client: Client,
        addr: SocketAddr,
        certificates: &WebhookCertificates,
        targets: InjectTargets,
        router: WebhookRouter,
    ) -> Result<Self> {
        if !certificates.injects_ca_bundle() && targets != InjectTargets::default() {
            return Err(Error::Settings {
                problems: vec![
                    "injectTargets: a mounted certificate's caBundle is written by cert-manager's cainjector (the cert-manager.io/inject-ca-from annotation); name no targets".to_owned(),
                ],
            });
        }
        #[cfg(feature = "webhook-certificates")]
        let leader = match certificates {
            WebhookCertificates::Managed(settings) => Some((
                ManagedCertificates::new(client.clone(), settings.clone())?,
                CaInjector::new(client.clone(), targets),
            )),
            WebhookCertificates::Mounted { .. } => None,
        };
        let feed = certificates.feed(client)?;
        let ready = match &feed {
            #[cfg(feature = "webhook-certificates")]
            CertificateFeed::Secret(watcher) => watcher.ready(),
            CertificateFeed::Files(_) => watch::channel(true).1,
        };
        let server = WebhookServer::bind(addr, feed.cell(), router)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(Self {
            server,
            feed,
            ready,
            #[cfg(feature = "webhook-certificates")]
            leader,
        })
    }

    /// Serves connections under `limits` ([`WebhookServer::limits`]).
    #[must_use]
    pub fn limits(mut self, limits: super::ConnectionLimits) -> Self {
        self.server = self.server.limits(limits);
        self
    }

    /// Requires the API server's client certificate, signed by `client_ca`
    /// ([`WebhookServer::verify_clients`]).
    ///
    /// # Errors
    ///
    /// What [`WebhookServer::verify_clients`] says.
    pub fn verify_clients(mut self, client_ca: super::ClientCa) -> Result<Self> {
        self.server = self.server.verify_clients(client_ca)?;
        Ok(self)
    }

    /// The address bound.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Whether the certificate served is the real one (a managed Secret's is read; mounted
    /// files are read at [`WebhookEndpoint::bind`]): for a readiness check.
    #[must_use]
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.clone()
    }

    /// Serves until `shutdown` is cancelled, keeping the certificate current; with managed
    /// certificates, writes and rotates the Secret and injects the bundle while `is_leader`
    /// says this replica leads.
    ///
    /// # Errors
    ///
    /// What [`WebhookServer::run`] returns.
    pub async fn run(
        self,
        is_leader: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let leader = async {
            #[cfg(not(feature = "webhook-certificates"))]
            drop(is_leader);
            #[cfg(feature = "webhook-certificates")]
            if let Some((certificates, injector)) = self.leader {
                certificates
                    .run(Some(injector), is_leader, shutdown.clone())
                    .await;
            }
        };
        let ((), (), served) = tokio::join!(
            self.feed.run(shutdown.clone()),
            leader,
            self.server.run(shutdown.clone()),
        );
        served
    }
}
