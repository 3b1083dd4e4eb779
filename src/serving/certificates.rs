//! Where a webhook server's certificate comes from ([`WebhookCertificates`]: made by the
//! manager or mounted), what keeps it current ([`CertificateFeed`]), and whose CA bundle the
//! manager writes ([`InjectTargets`]).

use std::path::PathBuf;
use std::sync::Arc;

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::cert::{CertificateCell, DEFAULT_CERT_NAME, DEFAULT_KEY_NAME};
use super::error::Result;
#[cfg(feature = "webhook-certificates")]
use super::managed::{SecretWatcher, Settings};
use super::watch::CertWatcher;

/// Where the webhook server's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookCertificates {
    /// Made and rotated by the manager in a Secret ([`super::managed`]); the leader injects
    /// the CA bundle into the webhook configurations and CRDs it owns.
    #[cfg(feature = "webhook-certificates")]
    Managed(Settings),
    /// Read from a mounted directory (cert-manager's Certificate Secret) and re-read when it
    /// changes ([`CertWatcher`]). informant writes no `caBundle` then:
    /// cert-manager's cainjector does, from the `cert-manager.io/inject-ca-from` annotation.
    Mounted {
        /// The directory.
        dir: PathBuf,
        /// The certificate's file name in it ([`DEFAULT_CERT_NAME`]).
        cert_name: String,
        /// The key's file name in it ([`DEFAULT_KEY_NAME`]).
        key_name: String,
    },
}

impl WebhookCertificates {
    /// `tls.crt` and `tls.key` mounted in `dir`.
    #[must_use]
    pub fn mounted(dir: impl Into<PathBuf>) -> Self {
        Self::Mounted {
            dir: dir.into(),
            cert_name: DEFAULT_CERT_NAME.to_owned(),
            key_name: DEFAULT_KEY_NAME.to_owned(),
        }
    }

    /// The CA bundle (PEM) of managed certificates as their Secret holds it now, read through
    /// `client`; `None` while the Secret is not made yet, or with mounted certificates (whose
    /// bundle cert-manager's cainjector writes).
    ///
    /// # Errors
    ///
    /// What reading or parsing the Secret says.
    #[cfg(feature = "webhook-certificates")]
    pub async fn current_bundle(&self, client: &Client) -> Result<Option<String>> {
        let Self::Managed(settings) = self else {
            return Ok(None);
        };
        let managed = super::managed::ManagedCertificates::new(client.clone(), settings.clone())?;
        Ok(managed.current().await?.map(|c| c.bundle_pem()))
    }

    /// Whether informant injects the CA bundle (only for certificates it makes).
    #[must_use]
    pub fn injects_ca_bundle(&self) -> bool {
        #[cfg(feature = "webhook-certificates")]
        return matches!(self, Self::Managed(_));
        #[cfg(not(feature = "webhook-certificates"))]
        false
    }

    /// What keeps the served certificate current: a `SecretWatcher` of the managed Secret,
    /// or a [`CertWatcher`] of the mounted files (read once here, so a missing file fails
    /// at start).
    ///
    /// # Errors
    ///
    /// What `SecretWatcher::new` or [`CertWatcher::new`] says.
    pub fn feed(&self, client: Client) -> Result<CertificateFeed> {
        #[cfg(not(feature = "webhook-certificates"))]
        drop(client);
        match self {
            #[cfg(feature = "webhook-certificates")]
            Self::Managed(settings) => Ok(CertificateFeed::Secret(Box::new(SecretWatcher::new(
                client, settings,
            )?))),
            Self::Mounted {
                dir,
                cert_name,
                key_name,
            } => Ok(CertificateFeed::Files(CertWatcher::new(
                dir, cert_name, key_name,
            )?)),
        }
    }
}

/// The objects whose CA bundle the manager writes, by name (those it owns).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InjectTargets {
    /// `ValidatingWebhookConfiguration`s: every webhook's `clientConfig.caBundle`.
    pub validating: Vec<String>,
    /// `MutatingWebhookConfiguration`s: every webhook's `clientConfig.caBundle`.
    pub mutating: Vec<String>,
    /// CRDs: `spec.conversion.webhook.clientConfig.caBundle`, when their conversion strategy
    /// is `Webhook`.
    pub crds: Vec<String>,
}

/// What keeps a webhook server's certificate current ([`WebhookCertificates::feed`]).
#[derive(Debug)]
pub enum CertificateFeed {
    /// The managed Secret, watched.
    #[cfg(feature = "webhook-certificates")]
    Secret(Box<SecretWatcher>),
    /// The mounted files, watched.
    Files(CertWatcher),
}

impl CertificateFeed {
    /// The cell to serve from ([`WebhookServer::bind`](super::WebhookServer::bind)).
    #[must_use]
    pub fn cell(&self) -> Arc<CertificateCell> {
        match self {
            #[cfg(feature = "webhook-certificates")]
            Self::Secret(watcher) => watcher.cell(),
            Self::Files(watcher) => watcher.cell(),
        }
    }

    /// Keeps the cell current until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        match self {
            #[cfg(feature = "webhook-certificates")]
            Self::Secret(watcher) => (*watcher).run(shutdown).await,
            Self::Files(watcher) => watcher.run(shutdown).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WebhookCertificates;

    #[test]
    fn only_certificates_the_manager_makes_have_their_ca_injected() {
        assert!(!WebhookCertificates::mounted("/certs").injects_ca_bundle());
        #[cfg(feature = "webhook-certificates")]
        assert!(WebhookCertificates::Managed(super::Settings::new("s", "n")).injects_ca_bundle());
    }
}
