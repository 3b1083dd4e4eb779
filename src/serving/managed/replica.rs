//! [`SecretWatcher`]: every replica's side of the managed certificates, serving what the
//! Secret holds.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Settings;
use super::material::Certificates;
use crate::serving::cert::{self, CertificateCell};
use crate::serving::error::Result;

/// Watches the managed certificates' Secret and swaps its serving pair into a
/// [`CertificateCell`], as [`CertWatcher`](crate::serving::CertWatcher) does for files: a new
/// pair is presented from the next handshake on; a Secret that does not parse keeps the last
/// good pair (logged at warn).
///
/// Until the Secret is first read (the leader may not have created it yet) the cell presents
/// a self-signed placeholder no client trusts, and [`SecretWatcher::ready`] says `false`: a
/// webhook server's readiness waits on it.
#[derive(Debug)]
pub struct SecretWatcher {
    secrets: Api<Secret>,
    name: String,
    cell: Arc<CertificateCell>,
    ready: watch::Sender<bool>,
    /// The last certificates served, so an unchanged Secret is not swapped again.
    last: Option<Certificates>,
}

impl SecretWatcher {
    /// A watcher of `settings`' Secret; nothing is read until [`SecretWatcher::run`].
    ///
    /// # Errors
    ///
    /// [`Error::Settings`](crate::serving::Error::Settings) when `settings` are invalid,
    /// [`Error::Generate`](crate::serving::Error::Generate) when the placeholder cannot be
    /// made.
    pub fn new(client: Client, settings: &Settings) -> Result<Self> {
        settings.validate()?;
        let placeholder = cert::self_signed(&settings.dns_names())?;
        Ok(Self {
            secrets: Api::namespaced(client, &settings.namespace),
            name: settings.secret.clone(),
            cell: Arc::new(CertificateCell::new(placeholder)),
            ready: watch::channel(false).0,
            last: None,
        })
    }

    /// The cell the watcher keeps current.
    #[must_use]
    pub fn cell(&self) -> Arc<CertificateCell> {
        Arc::clone(&self.cell)
    }

    /// Whether the Secret's certificate is served (not the placeholder).
    #[must_use]
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Watches the Secret until `shutdown` is cancelled, swapping in each new pair. Never
    /// fails: a watch error is retried with kube-runtime's default backoff.
    #[tracing::instrument(name = "webhook_certificate_watch", skip_all, fields(object.ref = %self.name))]
    pub async fn run(mut self, shutdown: CancellationToken) {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut events = watcher(self.secrets.clone(), config)
            .default_backoff()
            .boxed();
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret))) => {
                    self.serve(&secret);
                }
                Some(Ok(_)) => {}
                // At warn: a refusal (a missing list or watch on the Secret) keeps this
                // replica serving the placeholder, and a person must grant it. kube-runtime's
                // backoff spaces the lines out.
                Some(Err(error)) => tracing::warn!(
                    error = %crate::telemetry::error_chain(&error),
                    "watching the webhook certificate Secret failed; retrying"
                ),
                None => return,
            }
        }
    }

    /// Serves `secret`'s pair when it parses and differs from the last one.
    fn serve(&mut self, secret: &Secret) {
        let data = secret.data.clone().unwrap_or_default();
        let loaded =
            Certificates::from_data(&self.name, &data).and_then(|c| Ok((c.certified_key()?, c)));
        match loaded {
            Ok((_, certificates)) if self.last.as_ref() == Some(&certificates) => {}
            Ok((key, certificates)) => {
                self.cell.replace(key);
                self.last = Some(certificates);
                self.ready.send_replace(true);
                tracing::info!("serving the webhook certificate from the Secret");
            }
            Err(error) => tracing::warn!(
                error = %crate::telemetry::error_chain(&error),
                "the webhook certificate Secret does not load; the current certificate stays served"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(data: BTreeMap<String, ByteString>) -> Secret {
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    #[tokio::test]
    async fn a_secret_that_does_not_load_keeps_the_pair_served() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let settings = Settings::new("hooks", "ops");
        let mut watcher = SecretWatcher::new(client, &settings).unwrap();
        let ready = watcher.ready();
        let cell = watcher.cell();
        let names = settings.dns_names();
        let (ca, serving) = (settings.ca_validity, settings.serving_validity);
        let first = Certificates::create(SystemTime::now(), ca, serving, &names).unwrap();
        watcher.serve(&secret(first.to_data()));
        assert!(*ready.borrow());
        let first_der = first.certified_key().unwrap().cert[0].clone();
        assert_eq!(cell.current().cert[0], first_der);

        let mut garbled = first.to_data();
        garbled.insert("tls.key".to_owned(), ByteString(b"not a key".to_vec()));
        watcher.serve(&secret(garbled));
        assert_eq!(
            cell.current().cert[0],
            first_der,
            "the last good pair stays"
        );

        let second = Certificates::create(SystemTime::now(), ca, serving, &names).unwrap();
        watcher.serve(&secret(second.to_data()));
        assert_eq!(
            cell.current().cert[0],
            second.certified_key().unwrap().cert[0]
        );
    }
}
