//! The serving certificate: where it comes from ([`CertSource`]), how a PEM pair becomes what
//! rustls presents, and the [`CertificateCell`] every handshake reads the current one from.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use tokio_rustls::rustls::crypto::ring::sign::any_supported_type;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

use super::error::{Error, Result};

/// The certificate file's name in a certificate directory: a `kubernetes.io/tls` Secret's key,
/// and kubebuilder's `--metrics-cert-name` default.
pub const DEFAULT_CERT_NAME: &str = "tls.crt";

/// The key file's name in a certificate directory: a `kubernetes.io/tls` Secret's key, and
/// kubebuilder's `--metrics-cert-key` default.
pub const DEFAULT_KEY_NAME: &str = "tls.key";

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// Generated at start, self-signed, for these names (DNS names, or IP addresses when they
    /// parse as one), kept in memory only: controller-runtime's default when no certificate
    /// directory is given. Clients cannot verify it (Prometheus scrapes it with
    /// `insecureSkipVerify`); the bearer token still authenticates every request.
    SelfSigned {
        /// The subject alternative names.
        names: Vec<String>,
    },
    /// Read from a directory (a mounted Secret, as cert-manager writes it) and re-read when it
    /// changes ([`CertWatcher`](super::CertWatcher)).
    Files {
        /// The directory.
        dir: PathBuf,
        /// The certificate's file name in it ([`DEFAULT_CERT_NAME`]); the chain when it holds
        /// several certificates, the server's first.
        cert_name: String,
        /// The key's file name in it ([`DEFAULT_KEY_NAME`]).
        key_name: String,
    },
}

impl CertSource {
    /// A self-signed certificate for `localhost`, `127.0.0.1`, `::1` and `extra` names (the
    /// pod's host name, its Service's DNS names).
    #[must_use]
    pub fn self_signed(extra: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        for name in extra {
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
        CertSource::SelfSigned { names }
    }

    /// `tls.crt` and `tls.key` in `dir`.
    #[must_use]
    pub fn files(dir: impl Into<PathBuf>) -> Self {
        CertSource::Files {
            dir: dir.into(),
            cert_name: DEFAULT_CERT_NAME.to_owned(),
            key_name: DEFAULT_KEY_NAME.to_owned(),
        }
    }
}

/// A certificate rustls can present, with the private key it signs with.
///
/// # Errors
///
/// [`Error::NoCertificate`], [`Error::NoKey`] or [`Error::Pair`], naming `cert_path` or
/// `key_path`.
pub fn from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<Arc<CertifiedKey>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::NoCertificate {
            path: cert_path.to_owned(),
        })?;
    if chain.is_empty() {
        return Err(Error::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| Error::NoKey {
        path: key_path.to_owned(),
    })?;
    certified(chain, &key, cert_path, key_path)
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: &PrivateKeyDer<'_>,
    cert_path: &Path,
    key_path: &Path,
) -> Result<Arc<CertifiedKey>> {
    let pair_error = |reason: String| Error::Pair {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        reason,
    };
    let signing = any_supported_type(key).map_err(|e| pair_error(e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing);
    // A key that is not the certificate's would fail every handshake: refuse it here, so a
    // reload keeps the pair that works.
    certified
        .keys_match()
        .map_err(|e| pair_error(e.to_string()))?;
    Ok(Arc::new(certified))
}

/// A self-signed certificate (ECDSA P-256) for `names`, and its key as PEM (certificate,
/// key), for the tests and tools that want to trust it.
///
/// # Errors
///
/// [`Error::Generate`] when a name is not a valid DNS name or IP address.
pub fn generate(names: &[String]) -> Result<(String, String)> {
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(Error::Generate)?;
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(
        rcgen::DnType::CommonName,
        names.first().map_or("informant", String::as_str),
    );
    params.distinguished_name = subject;
    let key = rcgen::KeyPair::generate().map_err(Error::Generate)?;
    let cert = params.self_signed(&key).map_err(Error::Generate)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The self-signed certificate of [`CertSource::SelfSigned`], ready for rustls.
///
/// # Errors
///
/// [`Error::Generate`] when a name is not a valid DNS name or IP address.
pub fn self_signed(names: &[String]) -> Result<Arc<CertifiedKey>> {
    let (cert, key) = generate(names)?;
    let here = Path::new("(self-signed)");
    from_pem(cert.as_bytes(), key.as_bytes(), here, here)
}

/// The certificate presented at each handshake: rustls asks it
/// ([`ResolvesServerCert`], Go's `tls.Config.GetCertificate`), the
/// [`CertWatcher`](super::CertWatcher) replaces it. Connections already open keep the
/// certificate they were made with.
pub struct CertificateCell {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for CertificateCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateCell").finish_non_exhaustive()
    }
}

impl CertificateCell {
    /// A cell presenting `certificate`.
    #[must_use]
    pub fn new(certificate: Arc<CertifiedKey>) -> Self {
        Self {
            current: RwLock::new(certificate),
        }
    }

    /// The certificate presented now.
    #[must_use]
    pub fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Presents `certificate` from the next handshake on.
    pub fn replace(&self, certificate: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = certificate;
    }
}

impl ResolvesServerCert for CertificateCell {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> (PathBuf, PathBuf) {
        (PathBuf::from("dir/tls.crt"), PathBuf::from("dir/tls.key"))
    }

    #[test]
    fn a_generated_pair_loads_and_a_mismatched_or_garbled_one_names_its_file() {
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let (cert, key) = generate(&names).unwrap();
        let (other_cert, other_key) = generate(&names).unwrap();
        let (c, k) = paths();
        let loaded = from_pem(cert.as_bytes(), key.as_bytes(), &c, &k).unwrap();
        assert_eq!(loaded.cert.len(), 1);
        let mismatch = from_pem(cert.as_bytes(), other_key.as_bytes(), &c, &k).unwrap_err();
        assert!(
            mismatch
                .to_string()
                .starts_with("the key dir/tls.key does not go with the certificate dir/tls.crt"),
            "{mismatch}"
        );
        let no_cert = from_pem(b"not pem", other_key.as_bytes(), &c, &k).unwrap_err();
        assert_eq!(no_cert.to_string(), "dir/tls.crt holds no PEM certificate");
        let no_key = from_pem(other_cert.as_bytes(), b"", &c, &k).unwrap_err();
        assert_eq!(no_key.to_string(), "dir/tls.key holds no PEM private key");
    }

    #[test]
    fn the_cell_presents_the_latest_certificate() {
        let names = CertSource::self_signed(["pod-1".to_owned(), "localhost".to_owned()]);
        let CertSource::SelfSigned { names } = names else {
            panic!("not self-signed");
        };
        assert_eq!(names, ["localhost", "127.0.0.1", "::1", "pod-1"]);
        let first = self_signed(&names).unwrap();
        let cell = CertificateCell::new(Arc::clone(&first));
        assert!(Arc::ptr_eq(&cell.current(), &first));
        let second = self_signed(&names).unwrap();
        cell.replace(Arc::clone(&second));
        assert!(Arc::ptr_eq(&cell.current(), &second));
        assert_ne!(first.cert[0], second.cert[0]);
    }
}
