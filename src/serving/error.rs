//! Why a serving certificate cannot be loaded, generated or watched.

use std::path::PathBuf;

/// Why a serving certificate cannot be loaded, generated or watched. At start each is fatal
/// (the listener would have nothing to present); while running, a reload that fails keeps the
/// certificate already served and logs the error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A certificate or key file cannot be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no PEM `CERTIFICATE`, or one that does not parse.
    #[error("{} holds no PEM certificate", .path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no PEM private key (PKCS#8, PKCS#1 or SEC1), or one that does not
    /// parse.
    #[error("{} holds no PEM private key", .path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// rustls refuses the pair: a key type it cannot sign with, or a key that is not the
    /// certificate's.
    #[error("the key {} does not go with the certificate {}: {reason}", .key.display(), .cert.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// A certificate (self-signed, or a managed CA or serving certificate) could not be
    /// generated.
    #[error("cannot generate a certificate")]
    Generate(#[source] rcgen::Error),
    /// The file-system watcher could not be created or cannot watch the directory.
    #[error("cannot watch {} for certificate changes", .path.display())]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What notify said.
        #[source]
        source: notify::Error,
    },
    /// A listener cannot be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The managed certificates' settings are invalid: every problem, each starting with its
    /// field.
    #[error("invalid webhook certificate settings: {}", .problems.join("; "))]
    Settings {
        /// The problems.
        problems: Vec<String>,
    },
    /// A date of a certificate to make is outside what a certificate can hold (the clock
    /// before 1970, or a validity past the year 9999).
    #[error("the clock or a validity is out of a certificate's range")]
    Clock,
    /// A key of the managed certificates' Secret is missing or does not parse.
    #[error("the Secret {secret}'s {key} is unusable: {reason}")]
    SecretContents {
        /// The Secret's name.
        secret: String,
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The API server refused or failed a request about the managed certificates (the Secret)
    /// or the objects their CA bundle goes into.
    #[error("cannot {action}")]
    Api {
        /// What was tried: `create the Secret ops/hooks-cert`.
        action: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },
}

/// A [`Result`](std::result::Result) with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
