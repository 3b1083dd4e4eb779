//! Webhook hooks: the request posted as JSON over HTTP/1.1 (hyper's client, the one kube's
//! client is built on), over TLS for `https://` (rustls, trusting the `caBundle` only); the
//! answer is the body of a 2xx response, read up to the policy's limit.
//!
//! Every connection goes through [`Connector`], which resolves the host itself and connects
//! only to addresses the hook policy allows (no link-local address, not the API server's,
//! unless named), so a name cannot lead a webhook where its URL could not.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::Connect;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::call::{CallError, excerpt};
use super::policy::Policy;

/// How much of a failing webhook's body is read for the log (the status gets an excerpt).
const ERROR_BODY_LIMIT: usize = 8 << 10;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A webhook client: plain HTTP, or HTTPS with the controller's trust and identity. Both keep
/// connections alive (hyper's pool).
#[derive(Clone, Debug)]
pub(super) enum WebClient {
    /// `http://`.
    Plain(Client<Connector, Full<Bytes>>),
    /// `https://`.
    Secure(Client<HttpsConnector<Connector>, Full<Bytes>>),
}

impl WebClient {
    /// A plain HTTP client connecting where `policy` allows.
    pub(super) fn plain(policy: Arc<Policy>) -> Self {
        WebClient::Plain(Client::builder(TokioExecutor::new()).build(Connector { policy }))
    }

    /// An HTTPS client trusting only the CA certificates of `ca_pem`, presenting
    /// `identity` (a PEM certificate chain and key) if any.
    ///
    /// # Errors
    /// What is wrong with the certificates or the key.
    pub(super) fn secure(
        policy: Arc<Policy>,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("caBundle: a certificate rustls refuses: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => {
                let chain = CertificateDer::pem_slice_iter(chain)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("tls.crt: {e}"))?;
                if chain.is_empty() {
                    return Err("tls.crt holds no PEM certificate".to_owned());
                }
                let key =
                    PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("tls.key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("tls.crt and tls.key: {e}"))?
            }
        };
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .wrap_connector(Connector { policy });
        Ok(WebClient::Secure(
            Client::builder(TokioExecutor::new()).build(connector),
        ))
    }
}

/// POSTs `body` to `url` and returns the body of a 2xx answer, refusing one over `limit`
/// bytes.
pub(super) async fn post(
    client: &WebClient,
    url: &str,
    body: Vec<u8>,
    limit: usize,
) -> Result<Vec<u8>, CallError> {
    match client {
        WebClient::Plain(c) => send(c, url, body, limit).await,
        WebClient::Secure(c) => send(c, url, body, limit).await,
    }
}

async fn send<C>(
    client: &Client<C, Full<Bytes>>,
    url: &str,
    body: Vec<u8>,
    limit: usize,
) -> Result<Vec<u8>, CallError>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let http = |source: BoxError| CallError::from_http(url, source);
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| http(e.into()))?;
    let response = client.request(request).await.map_err(|e| http(e.into()))?;
    let status = response.status();
    if !status.is_success() {
        let bytes = start_of(response.into_body(), ERROR_BODY_LIMIT).await;
        let text = String::from_utf8_lossy(&bytes);
        tracing::debug!(url, status = status.as_u16(), body = %text, "webhook answered an error");
        return Err(CallError::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body: excerpt(&text),
        });
    }
    let too_large = CallError::TooLarge { limit };
    if response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > limit as u64)
    {
        return Err(too_large);
    }
    match Limited::new(response.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large),
        Err(e) => Err(http(e)),
    }
}

/// The first `limit` bytes of `body` (fewer if it ends, or fails, first); the rest is not
/// read.
async fn start_of(mut body: hyper::body::Incoming, limit: usize) -> Vec<u8> {
    let mut start = Vec::new();
    while start.len() < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    start.extend_from_slice(data);
                }
            }
            Some(Err(_)) | None => break,
        }
    }
    start.truncate(limit);
    start
}

/// Why the hook policy refuses every address a webhook's host resolved to.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct Refused(pub(super) String);

/// Connects a webhook: resolves its host and connects to the first address the hook policy
/// allows ([`Policy::check_address`]), over TCP with `TCP_NODELAY`.
#[derive(Clone, Debug)]
pub(super) struct Connector {
    policy: Arc<Policy>,
}

impl tower::Service<http::Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri
                .port_u16()
                .unwrap_or(if uri.scheme_str() == Some("https") {
                    443
                } else {
                    80
                });
            let api_server: Vec<SocketAddr> = match policy.api_server_address() {
                Some((h, p)) => tokio::net::lookup_host((h, p))
                    .await
                    .map(Iterator::collect)
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            let mut refused = None;
            let mut failed = None;
            for address in tokio::net::lookup_host((host.as_str(), port)).await? {
                if let Err(reason) = policy.check_resolved(&host, address, &api_server) {
                    refused = Some(reason);
                    continue;
                }
                match TcpStream::connect(address).await {
                    Ok(stream) => {
                        stream.set_nodelay(true)?;
                        return Ok(TokioIo::new(stream));
                    }
                    Err(e) => failed = Some(e),
                }
            }
            // A refusal says more than a failed connection to another address of the name.
            Err(match (refused, failed) {
                (Some(reason), _) => Refused(reason).into(),
                (None, Some(e)) => e.into(),
                (None, None) => format!("{host} resolved to no address").into(),
            })
        })
    }
}
