//! [`WebhookOptions`]: the manager's own webhook endpoint (`informant run --webhook-service`),
//! which serves the admission hooks the `Controller`s declare on every replica, behind one
//! Service, with the certificate the manager makes or the one mounted.

use std::net::SocketAddr;

use k8s_openapi::api::admissionregistration::v1::ServiceReference;

use crate::serving::{InjectTargets, WebhookCertificates};

/// The Service port a webhook configuration names when none is given: kube-apiserver's
/// default for `clientConfig.service.port` (`k8s.io/api/admissionregistration/v1`
/// `ServiceReference.Port`: "Defaults to 443 for backward compatibility").
pub(crate) const DEFAULT_WEBHOOK_SERVICE_PORT: i32 = 443;

/// The manager's webhook endpoint: where it listens, the certificate it serves, and the
/// webhook configurations it owns.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookOptions {
    /// Where the HTTPS server listens on each replica (`:9443`,
    /// [`DEFAULT_WEBHOOK_PORT`](crate::serving::DEFAULT_WEBHOOK_PORT)).
    pub addr: SocketAddr,
    /// The certificate served: made and rotated by the leader in a Secret, or mounted.
    pub certificates: WebhookCertificates,
    /// The Service in front of the replicas, which the webhook configurations name (its
    /// `path` is set per hook).
    pub service: ServiceReference,
    /// The name of the `ValidatingWebhookConfiguration` and of the
    /// `MutatingWebhookConfiguration` the leader creates, keeps and deletes.
    pub configuration: String,
    /// With mounted certificates: `namespace/name` of cert-manager's `Certificate`, put in
    /// the `cert-manager.io/inject-ca-from` annotation of the configurations the manager
    /// owns, so cert-manager's cainjector writes their `caBundle`.
    pub inject_ca_from: Option<String>,
    /// With managed certificates: other objects whose `caBundle` the leader writes (the
    /// configurations it owns are written anyway).
    pub inject: InjectTargets,
    /// The largest `AdmissionReview` read, in bytes
    /// ([`DEFAULT_MAX_ADMISSION_BYTES`](crate::serving::DEFAULT_MAX_ADMISSION_BYTES)).
    pub max_admission_bytes: usize,
    /// The largest `ConversionReview` read, in bytes
    /// ([`DEFAULT_MAX_CONVERSION_BYTES`](crate::serving::DEFAULT_MAX_CONVERSION_BYTES)).
    pub max_conversion_bytes: usize,
    /// How many answers each hook makes at once
    /// ([`DEFAULT_MAX_IN_FLIGHT`](crate::serving::DEFAULT_MAX_IN_FLIGHT)); past them a review
    /// is answered 429 and counted as `busy`.
    pub max_in_flight: usize,
    /// The connections the endpoint holds and how long a request's headers may take.
    pub connections: crate::serving::ConnectionLimits,
    /// A PEM bundle of CAs: with it, every client must present a certificate one of them
    /// signed (the API server's, `--webhook-client-ca`), else it is refused at the TLS
    /// handshake. Read when the endpoint is bound.
    pub client_ca: Option<std::path::PathBuf>,
}

impl WebhookOptions {
    /// Serves on `addr` behind Service `namespace/name` (port 443), with managed
    /// certificates in the Secret `<name>-cert`, owning the configurations named `name`.
    #[cfg(feature = "webhook-certificates")]
    #[must_use]
    pub fn managed(addr: SocketAddr, namespace: &str, name: &str) -> Self {
        Self::new(
            addr,
            namespace,
            name,
            WebhookCertificates::Managed(crate::serving::managed::Settings::new(name, namespace)),
        )
    }

    /// Serves on `addr` behind Service `namespace/name` (port 443) the given certificates
    /// (a mounted one: [`WebhookCertificates::mounted`]), owning the configurations named
    /// `name`.
    #[must_use]
    pub fn new(
        addr: SocketAddr,
        namespace: &str,
        name: &str,
        certificates: WebhookCertificates,
    ) -> Self {
        Self {
            addr,
            certificates,
            service: ServiceReference {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                path: None,
                port: Some(DEFAULT_WEBHOOK_SERVICE_PORT),
            },
            configuration: name.to_owned(),
            inject_ca_from: None,
            inject: InjectTargets::default(),
            max_admission_bytes: crate::serving::DEFAULT_MAX_ADMISSION_BYTES,
            max_conversion_bytes: crate::serving::DEFAULT_MAX_CONVERSION_BYTES,
            max_in_flight: crate::serving::DEFAULT_MAX_IN_FLIGHT,
            connections: crate::serving::ConnectionLimits::default(),
            client_ca: None,
        }
    }

    /// What the leader's CA injector writes: [`WebhookOptions::inject`] and, with managed
    /// certificates, the configurations it owns.
    #[must_use]
    pub fn inject_targets(&self) -> InjectTargets {
        let mut targets = self.inject.clone();
        if self.certificates.injects_ca_bundle() {
            for names in [&mut targets.validating, &mut targets.mutating] {
                if !names.contains(&self.configuration) {
                    names.push(self.configuration.clone());
                }
            }
        }
        targets
    }
}
