//! [`ManagedCertificates`]: the leader's side of the managed certificates, creating and
//! rotating the Secret and injecting its CA bundle.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::material::Certificates;
use super::plan::{Step, plan};
use super::{Clock, RESYNC_INTERVAL, Settings, SystemClock};
use crate::serving::error::{Error, Result};
use crate::serving::inject::CaInjector;

/// The Secret's type: a TLS Secret, as the kubelet and cert-manager know it.
const SECRET_TYPE: &str = "kubernetes.io/tls";

/// How long the leader waits after a failed request before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The leader's side of the managed certificates: creates the Secret when absent and rotates
/// it ([module docs](super)).
///
/// ```no_run
/// # async fn demo(client: kube::Client, manager: &informant::manager::Manager) -> Result<(), informant::serving::Error> {
/// use informant::serving::managed::{ManagedCertificates, SecretWatcher, Settings};
/// use informant::serving::{CaInjector, InjectTargets};
/// use tokio_util::sync::CancellationToken;
///
/// let settings = Settings::new("my-operator-webhook", "my-operator");
/// let shutdown = CancellationToken::new();
/// // Every replica serves what the Secret holds ...
/// let watcher = SecretWatcher::new(client.clone(), &settings)?;
/// let cell = watcher.cell(); // for the webhook listener
/// tokio::spawn(watcher.run(shutdown.child_token()));
/// // ... and the leader writes it, and injects its CA bundle.
/// let targets = InjectTargets {
///     validating: vec!["my-operator".to_owned()],
///     ..InjectTargets::default()
/// };
/// let certificates = ManagedCertificates::new(client.clone(), settings)?;
/// let injector = CaInjector::new(client, targets);
/// certificates.run(Some(injector), manager.is_leader(), shutdown).await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ManagedCertificates {
    secrets: Api<Secret>,
    settings: Settings,
    clock: Arc<dyn Clock>,
    resync: Duration,
}

/// What one [`ManagedCertificates::reconcile`] did.
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// The step taken ([`Step::Keep`] when none was due).
    pub step: Step,
    /// The certificates the Secret holds now.
    pub certificates: Certificates,
}

impl ManagedCertificates {
    /// The managed certificates of `settings`, on the system clock.
    ///
    /// # Errors
    ///
    /// [`Error::Settings`] with every invalid setting.
    pub fn new(client: Client, settings: Settings) -> Result<Self> {
        settings.validate()?;
        Ok(Self {
            secrets: Api::namespaced(client, &settings.namespace),
            settings,
            clock: Arc::new(SystemClock),
            resync: RESYNC_INTERVAL,
        })
    }

    /// Checks the Secret and injects the bundle every `interval` instead of
    /// [`RESYNC_INTERVAL`] (at least every millisecond).
    #[must_use]
    pub fn with_resync(mut self, interval: Duration) -> Self {
        self.resync = interval.max(Duration::from_millis(1));
        self
    }

    /// Judges and dates certificates by `clock` instead of the system's.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn action(&self, verb: &str) -> String {
        format!(
            "{verb} the Secret {}/{}",
            self.settings.namespace, self.settings.secret
        )
    }

    /// What the Secret holds now, `None` when it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] when it cannot be read, [`Error::SecretContents`] when it does not
    /// parse.
    pub async fn current(&self) -> Result<Option<Certificates>> {
        let Some(secret) = self.read().await? else {
            return Ok(None);
        };
        Certificates::from_data(&self.settings.secret, &secret.data.unwrap_or_default()).map(Some)
    }

    async fn read(&self) -> Result<Option<Secret>> {
        self.secrets
            .get_opt(&self.settings.secret)
            .await
            .map_err(|source| Error::Api {
                action: self.action("read"),
                source,
            })
    }

    /// The certificates after `step`.
    fn make(
        &self,
        step: Step,
        current: Option<&Certificates>,
        now: SystemTime,
    ) -> Result<Certificates> {
        let s = &self.settings;
        let names = s.dns_names();
        match (step, current) {
            (Step::Create, _) | (_, None) => {
                Certificates::create(now, s.ca_validity, s.serving_validity, &names)
            }
            (Step::RenewServing | Step::SwitchServing, Some(c)) => {
                c.renew_serving(now, s.serving_validity, &names)
            }
            (Step::AddCa, Some(c)) => c.add_ca(now, s.ca_validity),
            (Step::DropOldCas, Some(c)) => Ok(c.drop_old_cas()),
            (Step::Keep { .. }, Some(c)) => Ok(c.clone()),
        }
    }

    /// Takes the next step due (at most one): creates the Secret when absent, otherwise
    /// rotates what is due. For the leader only; a replica that writes too races the leader
    /// (one of them then gets a conflict and reads again).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] when the Secret cannot be read or written (a conflict with another
    /// writer among them: call again), [`Error::Generate`] or [`Error::Clock`] when a
    /// certificate cannot be made.
    pub async fn reconcile(&self) -> Result<Reconciled> {
        let secret = self.read().await?;
        let now = self.clock.now();
        let current = match &secret {
            None => None,
            Some(live) => {
                let data = live.data.clone().unwrap_or_default();
                match Certificates::from_data(&self.settings.secret, &data) {
                    Ok(certificates) => Some(certificates),
                    // A Secret that does not parse would keep every replica on its last
                    // certificate until it expires: start over with a new CA.
                    Err(error) => {
                        tracing::warn!(
                            error = %crate::telemetry::error_chain(&error),
                            "the webhook certificate Secret does not parse; making new certificates"
                        );
                        None
                    }
                }
            }
        };
        let step = plan(current.as_ref(), &self.settings, now);
        if let (Step::Keep { .. }, Some(current)) = (step, &current) {
            return Ok(Reconciled {
                step,
                certificates: current.clone(),
            });
        }
        let certificates = self.make(step, current.as_ref(), now)?;
        self.write(&certificates, secret).await?;
        tracing::info!(step = ?step, cas = certificates.ca_count(), "webhook certificates written");
        Ok(Reconciled { step, certificates })
    }

    /// Creates the Secret (when `live` is `None`) or replaces `live` (at its
    /// resourceVersion, so a concurrent writer makes this fail rather than be overwritten).
    async fn write(&self, certificates: &Certificates, live: Option<Secret>) -> Result<Secret> {
        let data = certificates.to_data();
        match live {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.settings.secret.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "informant".to_owned(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    type_: Some(SECRET_TYPE.to_owned()),
                    data: Some(data),
                    ..Secret::default()
                };
                self.secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .map_err(|source| Error::Api {
                        action: self.action("create"),
                        source,
                    })
            }
            Some(mut secret) => {
                secret.data = Some(data);
                secret.string_data = None;
                self.secrets
                    .replace(&self.settings.secret, &PostParams::default(), &secret)
                    .await
                    .map_err(|source| Error::Api {
                        action: self.action("update"),
                        source,
                    })
            }
        }
    }

    /// While this replica leads (`is_leader`), keeps the Secret current: takes every step
    /// due, injects the CA bundle with `injector` after each change and every resync
    /// ([`RESYNC_INTERVAL`] unless [`ManagedCertificates::with_resync`]), and sleeps until the
    /// next step is due. Failures are logged at warn and retried after 5 seconds; it never
    /// fails. Returns when `shutdown` is cancelled, or when `is_leader` says `false` and its
    /// sender is gone (this replica can never lead); a sender gone after `true` (no leader
    /// election: `watch::channel(true).1`) leaves it leading for good.
    #[tracing::instrument(name = "webhook_certificates", skip_all, fields(k8s.namespace = %self.settings.namespace, object.ref = %self.settings.secret))]
    pub async fn run(
        self,
        injector: Option<CaInjector>,
        mut is_leader: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        let mut settled = false;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                led = is_leader.wait_for(|leader| *leader) => if led.is_err() { return },
            }
            let wait = match self.catch_up(injector.as_ref()).await {
                Ok(until) => until
                    .duration_since(self.clock.now())
                    .unwrap_or(Duration::ZERO)
                    .clamp(Duration::from_millis(1), self.resync),
                Err(error) => {
                    tracing::warn!(
                        error = %crate::telemetry::error_chain(&error),
                        "cannot keep the webhook certificates current; retrying"
                    );
                    RETRY_AFTER.min(self.resync)
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
                // A sender gone means leadership never changes again: only the sleep wakes.
                changed = is_leader.changed(), if !settled => settled = changed.is_err(),
            }
        }
    }

    /// Takes every step due now, then injects the bundle; when the next step is due.
    async fn catch_up(&self, injector: Option<&CaInjector>) -> Result<SystemTime> {
        // A step is at most five in a row (create, then nothing due); the bound guards a
        // clock that never lets a step settle.
        for _ in 0..8 {
            let done = self.reconcile().await?;
            if let Step::Keep { until } = done.step {
                if let Some(injector) = injector {
                    injector.inject(&done.certificates.bundle_pem()).await?;
                }
                return Ok(until);
            }
            if let Some(injector) = injector {
                injector.inject(&done.certificates.bundle_pem()).await?;
            }
        }
        Ok(self.clock.now())
    }
}
