//! Webhook certificates the manager manages itself, without cert-manager: a CA and a serving
//! certificate for the webhook Service's DNS names, kept in one `kubernetes.io/tls` Secret so
//! every replica serves the same pair, rotated before expiry with no failed request.
//!
//! - [`ManagedCertificates`]: the leader's side. It creates the Secret when absent and moves
//!   it one [`Step`] at a time through the rotation ([`plan`], a pure function of the Secret's
//!   certificates and the [`Clock`]'s time); [`ManagedCertificates::run`] does that while this
//!   replica leads, and hands each new CA bundle to a [`CaInjector`](super::CaInjector).
//! - [`SecretWatcher`]: every replica's side. It watches the Secret and swaps its serving pair
//!   into the [`CertificateCell`](super::CertificateCell) the webhook listener presents.
//!
//! # The Secret
//!
//! | key       | holds                                                                    |
//! |-----------|--------------------------------------------------------------------------|
//! | `tls.crt` | the serving certificate (PEM), for [`Settings::dns_names`]               |
//! | `tls.key` | its private key (PEM, PKCS#8, ECDSA P-256)                               |
//! | `ca.crt`  | the CA bundle: every CA clients must trust now, oldest first (PEM)       |
//! | `ca.key`  | the key of the newest CA in `ca.crt`, the one that signs (PEM)           |
//!
//! # Rotation
//!
//! Validity by default: the CA [`DEFAULT_CA_VALIDITY`] (1 year), the serving certificate
//! [`DEFAULT_SERVING_VALIDITY`] (90 days, capped at its CA's end), each renewed once
//! [`RENEW_FRACTION`] (2/3) of its life has passed, cert-manager's default `renewBefore`. A
//! serving certificate signed by the same CA needs no overlap: clients already trust it. A new
//! CA does, in three steps, each written to the Secret and injected before the next:
//!
//! 1. [`Step::AddCa`]: the new CA joins the bundle (old + new); the old CA's serving
//!    certificate stays served.
//! 2. [`Step::SwitchServing`], [`Settings::overlap`] later (every API server has the new
//!    bundle): the serving certificate is re-issued by the new CA.
//! 3. [`Step::DropOldCas`], [`Settings::overlap`] after that (every replica serves the new
//!    certificate): the old CA leaves the bundle.
//!
//! The state is the certificates themselves (their dates and issuers), so a new leader takes
//! the rotation over where the last one left it. Certificates are valid from [`CLOCK_SKEW`]
//! before they are made, so a client whose clock is a little behind accepts them.
//!
//! ## RBAC
//!
//! Every replica: `get`, `list`, `watch` on the Secret (in its namespace). The leader also:
//! `create`, `update` on Secrets.

mod material;
mod plan;
mod replica;
mod secret;

use std::fmt;
use std::time::{Duration, SystemTime};

pub use material::Certificates;
pub use plan::{Step, plan};
pub use replica::SecretWatcher;
pub use secret::{ManagedCertificates, Reconciled};

/// How long a generated CA is valid: one year.
pub const DEFAULT_CA_VALIDITY: Duration = Duration::from_hours(365 * 24);

/// How long a serving certificate is valid: 90 days (cert-manager's default `duration` is
/// also 90 days), never past its CA's end.
pub const DEFAULT_SERVING_VALIDITY: Duration = Duration::from_hours(90 * 24);

/// How long each step of a CA rotation waits for the previous one to reach every API server
/// and replica: one hour. The Secret is watched and the bundle injected within seconds; the
/// hour covers an API server or replica slow to catch up.
pub const DEFAULT_OVERLAP: Duration = Duration::from_hours(1);

/// The part of a certificate's life after which it is renewed: 2/3, cert-manager's default
/// (`renewBefore` a third of the `duration`).
pub const RENEW_FRACTION: (u32, u32) = (2, 3);

/// How far before its making a certificate is valid from: five minutes, for clients whose
/// clock is behind the leader's.
pub const CLOCK_SKEW: Duration = Duration::from_mins(5);

/// How often the leader checks the Secret and injects the bundle again even when no
/// rotation is due (a webhook configuration recreated without its `caBundle` gets it back).
pub const RESYNC_INTERVAL: Duration = Duration::from_mins(1);

/// The Secret key of the CA bundle (`ca.crt`, as cert-manager names it).
pub const CA_BUNDLE_KEY: &str = "ca.crt";

/// The Secret key of the signing CA's private key.
pub const CA_KEY_KEY: &str = "ca.key";

/// The time certificates are made and judged by: the system's, or a test's.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// What the managed certificates are for, and how long they live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The webhook Service's name.
    pub service: String,
    /// The webhook Service's namespace, also the Secret's.
    pub namespace: String,
    /// The Secret's name (default `<service>-cert`).
    pub secret: String,
    /// The CA's validity ([`DEFAULT_CA_VALIDITY`]).
    pub ca_validity: Duration,
    /// The serving certificate's validity ([`DEFAULT_SERVING_VALIDITY`]).
    pub serving_validity: Duration,
    /// The wait between the steps of a CA rotation ([`DEFAULT_OVERLAP`]).
    pub overlap: Duration,
    /// More names for the serving certificate (DNS names, or IP addresses when they parse as
    /// one): a test's `localhost`, a webhook reached by URL.
    pub extra_names: Vec<String>,
}

impl Settings {
    /// The defaults for Service `service` in `namespace`.
    #[must_use]
    pub fn new(service: &str, namespace: &str) -> Self {
        Self {
            service: service.to_owned(),
            namespace: namespace.to_owned(),
            secret: format!("{service}-cert"),
            ca_validity: DEFAULT_CA_VALIDITY,
            serving_validity: DEFAULT_SERVING_VALIDITY,
            overlap: DEFAULT_OVERLAP,
            extra_names: Vec::new(),
        }
    }

    /// The serving certificate's names: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`,
    /// `<svc>.<ns>.svc.cluster.local` (how the API server and pods reach a Service), then
    /// [`Settings::extra_names`].
    #[must_use]
    pub fn dns_names(&self) -> Vec<String> {
        let (svc, ns) = (&self.service, &self.namespace);
        let mut names = vec![
            svc.clone(),
            format!("{svc}.{ns}"),
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}.svc.cluster.local"),
        ];
        for name in &self.extra_names {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// Every problem of the settings at once, each with its field.
    ///
    /// # Errors
    ///
    /// [`Error::Settings`](super::Error::Settings) listing them.
    pub fn validate(&self) -> super::Result<()> {
        let mut problems = Vec::new();
        for (field, value, max) in [
            ("service", &self.service, 63),
            ("namespace", &self.namespace, 63),
            ("secret", &self.secret, 253),
        ] {
            if !is_dns_name(value, max) {
                problems.push(format!(
                    "{field}: {value:?} is not a DNS name of at most {max} characters (lowercase letters, digits, '-' and '.')"
                ));
            }
        }
        let zero = Duration::ZERO;
        if self.ca_validity == zero {
            problems.push("caValidity: must be more than zero".to_owned());
        }
        if self.serving_validity == zero {
            problems.push("servingValidity: must be more than zero".to_owned());
        }
        if self.serving_validity > self.ca_validity {
            problems.push(format!(
                "servingValidity: {}s is longer than caValidity ({}s); a serving certificate cannot outlive its CA",
                self.serving_validity.as_secs(),
                self.ca_validity.as_secs()
            ));
        }
        // The rotation's two overlaps must end before the old CA does, and a serving
        // certificate must outlive one overlap after its renewal is due.
        if self.overlap.saturating_mul(2) >= self.ca_validity / 3 {
            problems.push(format!(
                "overlap: {}s twice is not shorter than a third of caValidity ({}s); the old CA would expire mid-rotation",
                self.overlap.as_secs(),
                self.ca_validity.as_secs() / 3
            ));
        }
        if self.overlap >= self.serving_validity / 3 {
            problems.push(format!(
                "overlap: {}s is not shorter than a third of servingValidity ({}s)",
                self.overlap.as_secs(),
                self.serving_validity.as_secs() / 3
            ));
        }
        for (i, name) in self.extra_names.iter().enumerate() {
            if name.parse::<std::net::IpAddr>().is_err() && !is_dns_name(name, 253) {
                problems.push(format!(
                    "extraNames[{i}]: {name:?} is neither a DNS name nor an IP address"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(super::Error::Settings { problems })
        }
    }
}

/// Whether `value` is a lowercase DNS name (RFC 1123 labels joined by dots) of at most `max`
/// characters.
fn is_dns_name(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && value.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_services_four_then_the_extra_ones() {
        let mut settings = Settings::new("hooks", "ops");
        settings.extra_names = vec!["hooks".to_owned(), "localhost".to_owned()];
        assert_eq!(
            settings.dns_names(),
            [
                "hooks",
                "hooks.ops",
                "hooks.ops.svc",
                "hooks.ops.svc.cluster.local",
                "localhost"
            ]
        );
        assert_eq!(settings.secret, "hooks-cert");
        settings.validate().unwrap();
    }

    #[test]
    fn every_bad_setting_is_reported_at_once_with_its_field() {
        let mut settings = Settings::new("Hooks", "");
        settings.secret = "a_b".to_owned();
        settings.serving_validity = settings.ca_validity * 2;
        settings.overlap = settings.ca_validity;
        settings.extra_names = vec!["not a name".to_owned()];
        let super::super::Error::Settings { problems } = settings.validate().unwrap_err() else {
            panic!("not a settings error");
        };
        let fields: Vec<&str> = problems
            .iter()
            .map(|p| p.split(':').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "service",
                "namespace",
                "secret",
                "servingValidity",
                "overlap",
                "overlap",
                "extraNames[0]"
            ],
            "{problems:#?}"
        );
    }
}
