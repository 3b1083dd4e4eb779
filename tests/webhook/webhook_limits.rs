//! What whoever reaches the webhook port can make the endpoint do, with real TLS clients on
//! loopback: without the API server's client certificate nothing (`--webhook-client-ca`),
//! and however many idle or trickling connections it opens, a bounded number held for a
//! bounded time, after which the endpoint answers again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informant::serving::cert::from_pem;
use informant::serving::{ClientCa, ConnectionLimits, WebhookRouter, WebhookServer};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_util::sync::CancellationToken;

use crate::harness::SERVER_NAME;
use crate::support;

/// A CA made for the test, and what it signs.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `name` (a server's DNS name, or a client's common name), as PEM
    /// (certificate, key).
    fn sign(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A webhook server for [`SERVER_NAME`] with a certificate `server_ca` signed, serving
/// `/healthz` only, under `limits`, verifying clients against `client_ca` when given.
async fn serve(
    server_ca: &Ca,
    limits: ConnectionLimits,
    client_ca: Option<ClientCa>,
    shutdown: &CancellationToken,
) -> SocketAddr {
    let (cert, key) = server_ca.sign(SERVER_NAME, ExtendedKeyUsagePurpose::ServerAuth);
    let here = std::path::Path::new("(test)");
    let certified = from_pem(cert.as_bytes(), key.as_bytes(), here, here).unwrap();
    let cell = Arc::new(informant::serving::CertificateCell::new(certified));
    let mut server = WebhookServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        cell,
        WebhookRouter::new(),
    )
    .await
    .unwrap()
    .limits(limits);
    if let Some(ca) = client_ca {
        server = server.verify_clients(ca).unwrap();
    }
    let addr = server.local_addr();
    tokio::spawn(server.run(shutdown.child_token()));
    addr
}

/// A TLS connection to `addr` trusting `server_ca`, presenting `client` (certificate, key)
/// when given.
async fn connect(
    addr: SocketAddr,
    server_ca: &Ca,
    client: Option<&(String, String)>,
) -> Result<TlsStream<TcpStream>, String> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server_ca.pem.as_bytes()).unwrap())
        .unwrap();
    let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(SERVER_NAME).unwrap(), tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))
}

/// `GET /healthz` on `tls`; the status code, or what went wrong (a TLS 1.3 server refuses a
/// client's certificate after the client's side of the handshake finished: the refusal
/// arrives as an alert on the first read).
async fn healthz(mut tls: TlsStream<TcpStream>) -> Result<u16, String> {
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: hooks\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tls.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    text.get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))
}

async fn get(
    addr: SocketAddr,
    server_ca: &Ca,
    client: Option<&(String, String)>,
) -> Result<u16, String> {
    healthz(connect(addr, server_ca, client).await?).await
}

#[tokio::test]
async fn with_a_client_ca_only_a_certificate_it_signed_reaches_the_endpoint() {
    let (server_ca, api_server_ca, other_ca) =
        (Ca::new("serving"), Ca::new("api-server"), Ca::new("other"));
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("client-ca.crt");
    std::fs::write(&bundle, &api_server_ca.pem).unwrap();
    let shutdown = CancellationToken::new();
    let addr = serve(
        &server_ca,
        ConnectionLimits::default(),
        Some(ClientCa::read(&bundle).unwrap()),
        &shutdown,
    )
    .await;

    let none = get(addr, &server_ca, None).await;
    assert!(
        none.is_err(),
        "a client without a certificate was answered: {none:?}"
    );
    let foreign = other_ca.sign("kube-apiserver", ExtendedKeyUsagePurpose::ClientAuth);
    let other = get(addr, &server_ca, Some(&foreign)).await;
    assert!(
        other.is_err(),
        "a certificate of another CA was answered: {other:?}"
    );
    let apiserver = api_server_ca.sign("kube-apiserver", ExtendedKeyUsagePurpose::ClientAuth);
    assert_eq!(get(addr, &server_ca, Some(&apiserver)).await, Ok(200));
    shutdown.cancel();
}

#[test]
fn a_client_ca_file_without_a_certificate_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "not a PEM bundle\n").unwrap();
    let error = ClientCa::read(&empty).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{} holds no PEM certificate", empty.display())
    );
    let missing = ClientCa::read(dir.path().join("missing.crt")).unwrap_err();
    assert!(missing.to_string().starts_with("cannot read "), "{missing}");
}

/// How long a test endpoint waits for a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether the server closed `tls` (end of stream, or an error), read within `within`.
async fn closed_within(tls: &mut TlsStream<TcpStream>, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(within, tls.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn past_the_connection_cap_a_client_waits_until_the_idle_ones_are_closed() {
    let server_ca = Ca::new("serving");
    let shutdown = CancellationToken::new();
    let limits = ConnectionLimits {
        max_connections: 2,
        header_read_timeout: HEADER_READ_TIMEOUT,
    };
    let addr = serve(&server_ca, limits, None, &shutdown).await;
    // Two connections that finish their handshake and send nothing: the cap.
    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..2 {
        idle.push(connect(addr, &server_ca, None).await.unwrap());
    }
    // A third is not even handshaken while they are held.
    let third = tokio::spawn(async move {
        let tls = connect(addr, &server_ca, None).await?;
        Ok::<_, String>((Instant::now(), healthz(tls).await))
    });
    for tls in &mut idle {
        assert!(
            closed_within(tls, support::WAIT).await,
            "an idle connection was kept open"
        );
    }
    let closed = Instant::now();
    assert!(
        closed.duration_since(started) >= HEADER_READ_TIMEOUT,
        "the idle connections were closed before the header-read timeout"
    );
    let (handshaken, answer) = tokio::time::timeout(support::WAIT, third)
        .await
        .expect("the third connection was served once the idle ones closed")
        .unwrap()
        .unwrap();
    assert!(
        handshaken + Duration::from_millis(50) >= closed,
        "the third connection was handshaken while the cap was full"
    );
    assert_eq!(answer, Ok(200));
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_closed_at_the_header_read_timeout() {
    let server_ca = Ca::new("serving");
    let shutdown = CancellationToken::new();
    let limits = ConnectionLimits {
        max_connections: 1,
        header_read_timeout: HEADER_READ_TIMEOUT,
    };
    let addr = serve(&server_ca, limits, None, &shutdown).await;
    let mut tls = connect(addr, &server_ca, None).await.unwrap();
    let started = Instant::now();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: hooks\r\n")
        .await
        .unwrap();
    // One header line every 100 ms, as a slowloris client sends them, until the server
    // closes (a write fails, or the read sees the end).
    let mut refused = false;
    while started.elapsed() < support::WAIT {
        if tls.write_all(b"X-Trickle: 1\r\n").await.is_err()
            || closed_within(&mut tls, Duration::from_millis(100)).await
        {
            refused = true;
            break;
        }
    }
    assert!(
        refused,
        "a trickling client was kept past {:?}",
        support::WAIT
    );
    assert!(
        started.elapsed() >= HEADER_READ_TIMEOUT,
        "closed before the header-read timeout"
    );
    // The only place is free again: the endpoint answers.
    assert_eq!(get(addr, &server_ca, None).await, Ok(200));
    shutdown.cancel();
}
