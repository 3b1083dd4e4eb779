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
    /// The self-signed certificate could not be generated.
    #[error("cannot generate a self-signed serving certificate")]
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
}

/// A [`Result`](std::result::Result) with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
