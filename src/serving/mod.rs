//! Serving over TLS: the one HTTPS module shared by secure metrics and (later) admission
//! webhooks, as controller-runtime shares `pkg/certwatcher` between its metrics and webhook
//! servers.
//!
//! - [`cert`]: the serving certificate as an input that changes while the process runs: a
//!   [`CertificateCell`] that rustls asks at every handshake, filled from files
//!   ([`CertSource::Files`], `tls.crt`/`tls.key` as a Kubernetes TLS Secret mounts them) or
//!   generated self-signed ([`CertSource::SelfSigned`]).
//! - [`watch`]: the [`CertWatcher`] that re-reads the files when they change (notify on their
//!   directory, which also sees a Secret volume's `..data` symlink swap, plus a poll every
//!   [`POLL_INTERVAL`] as controller-runtime's certwatcher polls) and swaps the new pair in; a
//!   bad new pair keeps the old one.
//! - [`tls`]: the rustls [`ServerConfig`](tokio_rustls::rustls::ServerConfig) (HTTP/1.1 only)
//!   and the [`TlsListener`] that axum serves from: handshakes run side by side, a plain HTTP
//!   request gets Go's `400 Client sent an HTTP request to an HTTPS server`.
//! - `managed` (the `webhook-certificates` feature): webhook certificates without cert-manager:
//!   a CA and a serving certificate in a Secret every replica serves (`SecretWatcher`), made and
//!   rotated before expiry by the leader (`ManagedCertificates`).
//! - `inject` (the `webhook-certificates` feature): the `CaInjector` writing the managed CA bundle into the webhook
//!   configurations and CRDs the manager owns.
//! - [`webhook`]: the webhook HTTPS endpoint (port [`DEFAULT_WEBHOOK_PORT`]): a
//!   [`WebhookRouter`] of paths, served by a [`WebhookServer`] with the managed or a mounted
//!   certificate ([`WebhookCertificates`]); [`WebhookEndpoint`] runs it with its certificate
//!   and, for managed certificates, the leader's rotation and injection. Whoever reaches the
//!   port gets bounded work: [`connections`] caps the connections and the time to send a
//!   request's headers, each path reads a bounded body ([`DEFAULT_MAX_ADMISSION_BYTES`]) and
//!   makes a bounded number of answers at once ([`DEFAULT_MAX_IN_FLIGHT`]).
//! - [`auth`]: every request authenticated by the API server with a `TokenReview` and
//!   authorized with a `SubjectAccessReview` on its non-resource URL, the answers cached
//!   briefly (controller-runtime's `pkg/metrics/filters` `WithAuthenticationAndAuthorization`).
//!
//! # HTTP/2
//!
//! Off: the TLS config offers ALPN `http/1.1` only, as kubebuilder's scaffold disables HTTP/2
//! by default for its metrics and webhook servers (the HTTP/2 rapid reset and stream
//! cancellation attacks, CVE-2023-44487 and CVE-2023-39325). Prometheus and the API server
//! speak HTTP/1.1.

pub mod auth;
pub mod cert;
mod certificates;
pub mod connections;
mod endpoint;
mod error;
#[cfg(feature = "webhook-certificates")]
pub mod inject;
#[cfg(feature = "webhook-certificates")]
pub mod managed;
pub mod tls;
pub mod watch;
pub mod webhook;

pub use auth::{Authenticator, Decision};
pub use cert::{CertSource, CertificateCell, DEFAULT_CERT_NAME, DEFAULT_KEY_NAME};
pub use certificates::{CertificateFeed, InjectTargets, WebhookCertificates};
pub use connections::ConnectionLimits;
pub use endpoint::WebhookEndpoint;
pub use error::{Error, Result};
#[cfg(feature = "webhook-certificates")]
pub use inject::{CaInjector, Injection, Target};
pub use tls::{ClientCa, TlsListener, server_config, server_config_verifying_clients};
pub use watch::{CertWatcher, POLL_INTERVAL};
pub use webhook::{
    DEFAULT_MAX_ADMISSION_BYTES, DEFAULT_MAX_CONVERSION_BYTES, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_WEBHOOK_PORT, HEALTH_PATH, INJECT_CA_FROM_ANNOTATION, Refusal, RefusalCounter, Route,
    RouteError, RouteHandler, WebhookRouter, WebhookRoutes, WebhookServer, json_route,
};
