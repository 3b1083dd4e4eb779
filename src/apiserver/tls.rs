//! HTTPS for a server that authenticates: client-go (kubectl) sends credentials only over TLS
//! (`clientcmd`'s `ClientConfig` reads a user's token only when the server URL is `https`), so
//! with authorization on the server generates, at start, a certificate authority and a serving
//! certificate for its address, `127.0.0.1` and `localhost` (ECDSA P-256, from `ring`), serves
//! TLS with them (HTTP/1.1 by ALPN), and puts the authority in the kubeconfig it writes.
//!
//! The certificates are written in DER by hand (RFC 5280, only what clients check: subject and
//! issuer names, validity, key, basic constraints, key usage, extended key usage, subject
//! alternative names), so that no certificate library is needed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Why the certificates or the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `ring` could not make or use a key.
    #[error("cannot generate the server's key")]
    Key,
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

// DER, as much of it as certificates need.

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(u8::try_from(len).unwrap_or(0));
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .iter()
            .copied()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | u8::try_from(bytes.len()).unwrap_or(0));
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut body = vec![u8::try_from(arcs[0] * 40 + arcs[1]).unwrap_or(0)];
    for &arc in &arcs[2..] {
        let mut chunk = vec![u8::try_from(arc & 0x7f).unwrap_or(0)];
        let mut rest = arc >> 7;
        while rest > 0 {
            chunk.insert(0, 0x80 | u8::try_from(rest & 0x7f).unwrap_or(0));
            rest >>= 7;
        }
        body.extend(chunk);
    }
    tlv(0x06, &body)
}

/// A non-negative INTEGER from big-endian bytes.
fn integer(bytes: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut body = if trimmed.is_empty() { vec![0] } else { trimmed };
    if body[0] & 0x80 != 0 {
        body.insert(0, 0);
    }
    tlv(0x02, &body)
}

fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(bytes);
    tlv(0x03, &body)
}

/// `UTCTime` before 2050, `GeneralizedTime` from then on (RFC 5280 4.1.2.5).
fn time(at: jiff::Timestamp) -> Vec<u8> {
    let utc = at.to_zoned(jiff::tz::TimeZone::UTC);
    if utc.year() < 2050 {
        tlv(0x17, utc.strftime("%y%m%d%H%M%SZ").to_string().as_bytes())
    } else {
        tlv(0x18, utc.strftime("%Y%m%d%H%M%SZ").to_string().as_bytes())
    }
}

/// A name with one common name.
fn name(common_name: &str) -> Vec<u8> {
    seq(&[tlv(
        0x31,
        &seq(&[oid(&[2, 5, 4, 3]), tlv(0x0c, common_name.as_bytes())]),
    )])
}

fn extension(id: &[u64], critical: bool, value: &[u8]) -> Vec<u8> {
    let mut parts = vec![oid(id)];
    if critical {
        parts.push(tlv(0x01, &[0xff]));
    }
    parts.push(tlv(0x04, value));
    seq(&parts)
}

const ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];

struct Key {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
}

impl Key {
    fn generate(rng: &SystemRandom) -> Result<Self, TlsError> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
            .map_err(|_| TlsError::Key)?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), rng)
            .map_err(|_| TlsError::Key)?;
        Ok(Self {
            pair,
            pkcs8: pkcs8.as_ref().to_vec(),
        })
    }

    fn public_key_info(&self) -> Vec<u8> {
        seq(&[
            seq(&[
                oid(&[1, 2, 840, 10045, 2, 1]),
                oid(&[1, 2, 840, 10045, 3, 1, 7]),
            ]),
            bit_string(self.pair.public_key().as_ref()),
        ])
    }
}

/// A certificate for `subject`'s key, signed by `issuer` (itself when self-signed).
fn certificate(
    rng: &SystemRandom,
    subject: (&str, &Key),
    issuer: (&str, &Key),
    extensions: &[Vec<u8>],
) -> Result<Vec<u8>, TlsError> {
    let now = jiff::Timestamp::now();
    let serial: [u8; 16] = rand::random();
    let algorithm = seq(&[oid(ECDSA_WITH_SHA256)]);
    let tbs = seq(&[
        tlv(0xa0, &integer(&[2])),
        integer(&serial),
        algorithm.clone(),
        name(issuer.0),
        seq(&[
            time(now - jiff::SignedDuration::from_hours(24)),
            time(now + jiff::SignedDuration::from_hours(24 * 3650)),
        ]),
        name(subject.0),
        subject.1.public_key_info(),
        tlv(0xa3, &seq(extensions)),
    ]);
    let signature = issuer.1.pair.sign(rng, &tbs).map_err(|_| TlsError::Key)?;
    Ok(seq(&[tbs, algorithm, bit_string(signature.as_ref())]))
}

fn pem(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

impl Identity {
    /// A new authority and a serving certificate for `addr`'s IP (unless unspecified),
    /// `127.0.0.1`, `::1` and `localhost`.
    ///
    /// # Errors
    ///
    /// [`TlsError::Key`] when `ring` fails.
    pub fn generate(addr: SocketAddr) -> Result<Self, TlsError> {
        let rng = SystemRandom::new();
        let ca_key = Key::generate(&rng)?;
        let server_key = Key::generate(&rng)?;
        let ca_name = "informant-apiserver-ca";
        let ca_der = certificate(
            &rng,
            (ca_name, &ca_key),
            (ca_name, &ca_key),
            &[
                // basicConstraints CA:TRUE, keyUsage keyCertSign + cRLSign.
                extension(&[2, 5, 29, 19], true, &seq(&[tlv(0x01, &[0xff])])),
                extension(&[2, 5, 29, 15], true, &tlv(0x03, &[0x01, 0x06])),
            ],
        )?;
        let mut ips = vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            "::1".parse().unwrap_or(addr.ip()),
        ];
        if !addr.ip().is_unspecified() && !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
        let mut names: Vec<u8> = ips
            .iter()
            .flat_map(|ip| match ip {
                IpAddr::V4(v4) => tlv(0x87, &v4.octets()),
                IpAddr::V6(v6) => tlv(0x87, &v6.octets()),
            })
            .collect();
        names.extend(tlv(0x82, b"localhost"));
        let cert_der = certificate(
            &rng,
            ("informant-apiserver", &server_key),
            (ca_name, &ca_key),
            &[
                // basicConstraints CA:FALSE, keyUsage digitalSignature, serverAuth, the names.
                extension(&[2, 5, 29, 19], true, &seq(&[])),
                extension(&[2, 5, 29, 15], true, &tlv(0x03, &[0x07, 0x80])),
                extension(
                    &[2, 5, 29, 37],
                    false,
                    &seq(&[oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1])]),
                ),
                extension(&[2, 5, 29, 17], false, &tlv(0x30, &names)),
            ],
        )?;
        Ok(Self {
            ca_pem: pem(&ca_der),
            ca_der,
            cert_der,
            key_pkcs8: server_key.pkcs8,
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

    #[test]
    fn der_lengths_integers_and_oids_are_encoded_as_x690_says() {
        assert_eq!(tlv(0x04, &[1, 2]), [0x04, 2, 1, 2]);
        assert_eq!(&tlv(0x04, &[0; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(&tlv(0x04, &[0; 300])[..4], [0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(integer(&[0, 0, 5]), [0x02, 1, 5]);
        assert_eq!(integer(&[0x80]), [0x02, 2, 0, 0x80]);
        assert_eq!(integer(&[]), [0x02, 1, 0]);
        // 1.2.840.10045.2.1 (id-ecPublicKey).
        assert_eq!(
            oid(&[1, 2, 840, 10045, 2, 1]),
            [0x06, 7, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
        );
    }

    #[test]
    fn rustls_accepts_the_generated_identity_and_a_client_trusts_its_authority() {
        use rustls::client::danger::ServerCertVerifier;
        let identity = Identity::generate(SocketAddr::from(([127, 0, 0, 1], 6443))).unwrap();
        assert!(identity.ca_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        identity.acceptor().unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(
                identity.ca_der.clone(),
            ))
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        for name in ["127.0.0.1", "localhost", "::1"] {
            let server_name = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(
                    &rustls::pki_types::CertificateDer::from(identity.cert_der.clone()),
                    &[],
                    &server_name,
                    &[],
                    now,
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("example.com").unwrap();
        assert!(
            verifier
                .verify_server_cert(
                    &rustls::pki_types::CertificateDer::from(identity.cert_der.clone()),
                    &[],
                    &other,
                    &[],
                    now,
                )
                .is_err()
        );
    }
}
