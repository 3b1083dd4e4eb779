//! HTTPS for a server that authenticates: client-go (kubectl) sends credentials only over TLS
//! (`clientcmd`'s `ClientConfig` reads a user's token only when the server URL is `https`), so
//! with authorization on the server generates, at start, a certificate authority and a serving
//! certificate for its address, `127.0.0.1`, `::1` and `localhost` (ECDSA P-256, made by `rcgen`
//! with `ring`), serves TLS with them (HTTP/1.1 by ALPN), and puts the authority in the
//! kubeconfig it writes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Why the certificates or the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `rcgen` could not make a key or a certificate.
    #[error("cannot generate the server's certificates")]
    Certificate(#[source] rcgen::Error),
    /// The clock is outside the dates a certificate can hold.
    #[error("cannot date the server's certificates")]
    Clock,
    /// rustls refused the configuration.
    #[error("cannot configure tls")]
    Config(#[source] rustls::Error),
}

/// A certificate authority and the serving certificate and key it signed.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The authority's certificate, PEM: what clients trust (`certificate-authority-data`).
    pub ca_pem: String,
    ca_der: Vec<u8>,
    cert_der: Vec<u8>,
    key_pkcs8: Vec<u8>,
}

/// The name of the authority, the issuer of every serving certificate.
const CA_NAME: &str = "informant-apiserver-ca";
/// The name of the serving certificate.
const SERVER_NAME: &str = "informant-apiserver";
/// How long the certificates are valid from today: ten years (the server makes new ones at
/// every start); they are valid from yesterday, so a client whose clock is a little behind
/// accepts them.
const VALID_DAYS: i64 = 3650;

/// `params` with `common_name`, valid from yesterday to [`VALID_DAYS`] from today (whole days,
/// UTC).
fn named(mut params: CertificateParams, common_name: &str) -> Result<CertificateParams, TlsError> {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let day = |date: jiff::civil::Date| {
        Some(rcgen::date_time_ymd(
            i32::from(date.year()),
            u8::try_from(date.month()).ok()?,
            u8::try_from(date.day()).ok()?,
        ))
    };
    let from = today
        .yesterday()
        .ok()
        .and_then(day)
        .ok_or(TlsError::Clock)?;
    let until = today
        .checked_add(jiff::Span::new().days(VALID_DAYS))
        .ok()
        .and_then(day)
        .ok_or(TlsError::Clock)?;
    params.not_before = from;
    params.not_after = until;
    Ok(params)
}

fn key() -> Result<KeyPair, TlsError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(TlsError::Certificate)
}

impl Identity {
    /// A new authority and a serving certificate for `addr`'s IP (unless unspecified),
    /// `127.0.0.1`, `::1` and `localhost`.
    ///
    /// # Errors
    ///
    /// [`TlsError::Certificate`] when `rcgen` fails, [`TlsError::Clock`] when today is
    /// outside the dates a certificate holds.
    pub fn generate(addr: SocketAddr) -> Result<Self, TlsError> {
        let ca_key = key()?;
        let mut ca = named(CertificateParams::default(), CA_NAME)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(TlsError::Certificate)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut ips = vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        if !addr.ip().is_unspecified() && !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
        let localhost = "localhost"
            .to_string()
            .try_into()
            .map_err(TlsError::Certificate)?;
        let server_key = key()?;
        let mut server = named(CertificateParams::default(), SERVER_NAME)?;
        server.is_ca = IsCa::ExplicitNoCa;
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.subject_alt_names = ips
            .into_iter()
            .map(SanType::IpAddress)
            .chain([SanType::DnsName(localhost)])
            .collect();
        let cert = server
            .signed_by(&server_key, &issuer)
            .map_err(TlsError::Certificate)?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            cert_der: cert.der().to_vec(),
            key_pkcs8: server_key.serialize_der(),
        })
    }

    /// A TLS acceptor serving the certificate (with the authority's after it), HTTP/1.1.
    ///
    /// # Errors
    ///
    /// [`TlsError::Config`] when rustls refuses the key or certificate.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(
                vec![
                    CertificateDer::from(self.cert_der.clone()),
                    CertificateDer::from(self.ca_der.clone()),
                ],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8.clone())),
            )
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// The authority as a kubeconfig's `certificate-authority-data` (base64 of the PEM).
    #[must_use]
    pub fn ca_data(&self) -> String {
        STANDARD.encode(self.ca_pem.as_bytes())
    }
}

/// A listener of TLS connections: TCP connections are accepted and their handshakes run
/// concurrently in one task (so a slow client delays no one), and the finished ones are
/// handed to the server. A failed handshake is dropped.
pub struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Accepts on `listener` until `shutdown`, handshaking with `acceptor`.
    #[must_use]
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor, shutdown: CancellationToken) -> Self {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let (tx, ready) = mpsc::channel(64);
        // Reason: the accept loop lives as long as the server, and ends with `shutdown` or
        // when the server drops the receiver.
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = shutdown.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, peer)) = accepted else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Self { addr, ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept loop ended (shutdown): no more connections, ever.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a client trusting only `identity`'s authority accepts its serving certificate
    /// for `name`, `days` from now.
    fn verify(identity: &Identity, name: &str, days: u64) -> Result<(), rustls::Error> {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(identity.ca_der.clone()))
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        let at = UnixTime::now().as_secs() + days * 86_400;
        verifier
            .verify_server_cert(
                &CertificateDer::from(identity.cert_der.clone()),
                &[],
                &ServerName::try_from(name.to_string()).unwrap(),
                &[],
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(at)),
            )
            .map(|_| ())
    }

    #[test]
    fn rustls_accepts_the_generated_identity_and_a_client_trusts_its_authority() {
        let identity = Identity::generate(SocketAddr::from(([127, 0, 0, 1], 6443))).unwrap();
        assert!(identity.ca_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        identity.acceptor().unwrap();
        for name in ["127.0.0.1", "localhost", "::1"] {
            verify(&identity, name, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
            verify(&identity, name, 9 * 365).unwrap_or_else(|e| panic!("{name} in 9 years: {e}"));
        }
        assert!(verify(&identity, "example.com", 0).is_err());
        assert!(verify(&identity, "192.0.2.7", 0).is_err());
        assert!(
            verify(&identity, "localhost", 3651).is_err(),
            "ten years at most"
        );
    }

    #[test]
    fn the_serving_certificate_names_the_listen_address_unless_unspecified() {
        let elsewhere = Identity::generate(SocketAddr::from(([192, 0, 2, 7], 6443))).unwrap();
        verify(&elsewhere, "192.0.2.7", 0).unwrap();
        verify(&elsewhere, "127.0.0.1", 0).unwrap();
        let any = Identity::generate(SocketAddr::from(([0, 0, 0, 0], 6443))).unwrap();
        verify(&any, "localhost", 0).unwrap();
        assert!(verify(&any, "0.0.0.0", 0).is_err());
    }
}
