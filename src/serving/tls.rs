//! The TLS side of a listener: the rustls config presenting a [`CertificateCell`]'s
//! certificate, and the [`TlsListener`] axum serves HTTPS from.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;

use super::cert::CertificateCell;
use super::error::Error;

/// How long a client may take to finish its TLS handshake before the connection is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The answer to plain HTTP on a TLS port, word for word Go's `net/http` server's (what a
/// controller-runtime metrics server answers), so a user who curls `http://` learns why.
pub const PLAIN_HTTP_ANSWER: &str =
    "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// A rustls server config that presents `cell`'s current certificate at each handshake,
/// offers ALPN `http/1.1` only (HTTP/2 off, see the [module docs](super)), asks no client
/// certificate, and uses ring (the provider kube's client already builds).
///
/// # Panics
///
/// Never: ring supports rustls's safe default protocol versions.
#[must_use]
pub fn server_config(cell: Arc<CertificateCell>) -> Arc<ServerConfig> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(cell);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// As [`server_config`], but every client must present a certificate that `client_ca`
/// signed (rustls's [`WebPkiClientVerifier`]): a client without one, or with one of another
/// CA, fails the handshake before it sends a byte of HTTP.
///
/// # Errors
///
/// [`Error::NoCertificate`] when `client_ca` holds no usable CA (rustls refuses an empty
/// set of roots), naming `path`, the file it was read from.
///
/// # Panics
///
/// Never: ring supports rustls's safe default protocol versions.
pub fn server_config_verifying_clients(
    cell: Arc<CertificateCell>,
    client_ca: ClientCa,
) -> Result<Arc<ServerConfig>, Error> {
    let verifier = WebPkiClientVerifier::builder_with_provider(client_ca.roots, provider())
        .build()
        .map_err(|_| Error::NoCertificate {
            path: client_ca.path.clone(),
        })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(cell);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn provider() -> Arc<tokio_rustls::rustls::crypto::CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// The CA bundle a listener verifies client certificates against
/// ([`server_config_verifying_clients`]): read once, from a PEM file.
#[derive(Clone, Debug)]
pub struct ClientCa {
    path: PathBuf,
    roots: Arc<RootCertStore>,
}

impl ClientCa {
    /// The `CERTIFICATE` blocks of the PEM file at `path` (a bundle may hold several CAs;
    /// anything else in it is skipped).
    ///
    /// # Errors
    ///
    /// [`Error::Read`] when the file cannot be read; [`Error::NoCertificate`] when it holds
    /// no certificate rustls accepts as a CA.
    pub fn read(path: impl Into<PathBuf>) -> Result<Self, Error> {
        let path = path.into();
        let pem = std::fs::read(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        let mut roots = RootCertStore::empty();
        let (added, _) = roots
            .add_parsable_certificates(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
        if added == 0 {
            return Err(Error::NoCertificate { path });
        }
        Ok(Self {
            path,
            roots: Arc::new(roots),
        })
    }

    /// The file the bundle was read from.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl PartialEq for ClientCa {
    /// Two bundles are the same when read from the same file.
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

/// A connection that finished its handshake, and its place among the connections a limited
/// listener holds ([`TlsListener::limit_connections`]).
type Accepted = (
    TlsStream<TcpStream>,
    SocketAddr,
    Option<OwnedSemaphorePermit>,
);

type Handshake = Pin<Box<dyn Future<Output = Option<Accepted>> + Send>>;

/// A TCP listener whose connections are TLS, for `axum::serve`: handshakes run side by side
/// (a slow or silent client delays no one; each has 10 seconds), and only finished
/// ones are handed to the server. A connection that fails its handshake is closed and logged
/// at debug; one that starts with plain HTTP gets [`PLAIN_HTTP_ANSWER`] first.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: FuturesUnordered<Handshake>,
    /// With a limit: the connections (handshakes included) that may be open.
    connections: Option<Arc<Semaphore>>,
    /// A place taken for the next connection accepted.
    spare: Option<OwnedSemaphorePermit>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("tcp", &self.tcp)
            .field("handshakes", &self.handshakes.len())
            .finish_non_exhaustive()
    }
}

impl TlsListener {
    /// Serves TLS with `config` on `tcp`.
    #[must_use]
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> Self {
        Self {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: FuturesUnordered::new(),
            connections: None,
            spare: None,
        }
    }

    /// Serves TLS with `config` from now on (e.g. one verifying client certificates).
    #[must_use]
    pub fn with_config(mut self, config: Arc<ServerConfig>) -> Self {
        self.acceptor = TlsAcceptor::from(config);
        self
    }

    /// Holds at most `max` connections open at once, handshakes included: past them no
    /// connection is accepted until one closes (its place is given back when the permit
    /// [`TlsListener::accept_limited`] returns with it is dropped).
    #[must_use]
    pub fn limit_connections(mut self, max: usize) -> Self {
        self.connections = Some(Arc::new(Semaphore::new(max.max(1))));
        self
    }

    /// The next connection that finished its handshake, with its place among the
    /// connections held (`None` without a limit): drop it when the connection closes.
    pub async fn accept_limited(&mut self) -> (TlsStream<TcpStream>, Option<OwnedSemaphorePermit>) {
        let (stream, _, permit) = self.next_connection().await;
        (stream, permit)
    }

    async fn next_connection(&mut self) -> Accepted {
        loop {
            let may_accept = self.connections.is_none() || self.spare.is_some();
            tokio::select! {
                permit = acquire(self.connections.clone()), if !may_accept => {
                    self.spare = permit;
                }
                accepted = self.tcp.accept(), if may_accept => match accepted {
                    Ok((stream, addr)) => {
                        // A small answer (an AdmissionReview, a scrape) would otherwise wait
                        // for the peer's delayed ACK, some 40 ms, before it is sent (Nagle),
                        // as Go's net/http avoids by setting TCP_NODELAY on every connection.
                        // Best effort: a socket that refuses it still serves.
                        let _ = stream.set_nodelay(true);
                        let permit = self.spare.take();
                        self.handshakes.push(Box::pin(handshake(self.acceptor.clone(), stream, addr, permit)));
                    }
                    Err(error) => accept_error(&error).await,
                },
                Some(done) = self.handshakes.next(), if !self.handshakes.is_empty() => {
                    if let Some(connection) = done {
                        return connection;
                    }
                }
            }
        }
    }
}

/// A place among the connections of `limit`, or `None` without one.
async fn acquire(limit: Option<Arc<Semaphore>>) -> Option<OwnedSemaphorePermit> {
    // The semaphore is never closed.
    limit?.acquire_owned().await.ok()
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr, _) = self.next_connection().await;
        (stream, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// axum's handling of a failed `accept`: connection errors are the client's; anything else
/// (out of file descriptors) is logged and waited out for a second.
async fn accept_error(error: &io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The TLS handshake of one connection, or `None` when it fails, times out or is plain HTTP.
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    addr: SocketAddr,
    permit: Option<OwnedSemaphorePermit>,
) -> Option<Accepted> {
    let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, async move {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await? == 0 {
            return Ok(None);
        }
        // A TLS record starts with its content type (22 for a handshake); an HTTP request
        // with its method in capitals.
        if first[0].is_ascii_uppercase() {
            refuse_plain_http(stream).await;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "plain HTTP sent to the HTTPS port",
            ));
        }
        acceptor.accept(stream).await.map(Some)
    })
    .await;
    match outcome {
        Ok(Ok(Some(tls))) => Some((tls, addr, permit)),
        Ok(Ok(None)) => None,
        Ok(Err(error)) => {
            tracing::debug!(client.addr = %addr, error = %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(client.addr = %addr, "TLS handshake timed out");
            None
        }
    }
}

/// Reads what the client sent (so closing does not reset the connection before it reads
/// the answer), answers [`PLAIN_HTTP_ANSWER`] and closes.
async fn refuse_plain_http(mut stream: TcpStream) {
    let mut request = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut request)).await;
    let _ = stream.write_all(PLAIN_HTTP_ANSWER.as_bytes()).await;
    let _ = stream.shutdown().await;
}
