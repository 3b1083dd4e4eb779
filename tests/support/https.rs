//! HTTPS requests to the manager's secure endpoints, as a scraper with `insecureSkipVerify`
//! makes them (the manager's certificate is self-signed, or one the test wrote): any
//! certificate is accepted, and the one presented is kept so a test can see which it was.
#![allow(dead_code, reason = "not every test binary scrapes a secure endpoint")]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{self, CryptoProvider};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, SignatureScheme};

/// Accepts any certificate (signatures still checked), keeping the presented one.
#[derive(Debug)]
struct AcceptAny {
    provider: Arc<CryptoProvider>,
    presented: Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self
            .presented
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What an HTTPS request got.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub code: u16,
    /// The head (status line and headers).
    pub head: String,
    /// The body.
    pub body: String,
    /// The DER of the certificate the server presented.
    pub certificate: Vec<u8>,
    /// The protocol ALPN settled on (the client offers `h2` and `http/1.1`).
    pub alpn: Option<Vec<u8>>,
}

/// `GET path` on `addr` over TLS, with `Authorization: Bearer token` when given; `Err` with
/// the reason when the connection or the handshake fails.
pub async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Result<Reply, String> {
    let provider = Arc::new(crypto::ring::default_provider());
    let verifier = Arc::new(AcceptAny {
        provider: Arc::clone(&provider),
        presented: Mutex::new(None),
    });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // A server that closes without close_notify still sent its whole answer.
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let certificate = verifier
        .presented
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default();
    Ok(Reply {
        code,
        head: head.to_owned(),
        body: body.to_owned(),
        certificate,
        alpn,
    })
}

/// What a plain-HTTP `GET path` on `addr` got back: the raw answer, possibly empty.
pub async fn plain_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    String::from_utf8_lossy(&raw).into_owned()
}
