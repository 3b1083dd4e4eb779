//! The HTTPS client that calls webhooks, trusting a webhook's `caBundle` (the system's roots
//! without one), and the [`Resolver`] that stands in for cluster DNS: the embedded server has
//! no cluster network, so a webhook named by `service` is reached at the address the resolver
//! maps `NAME.NAMESPACE.svc:PORT` to, and a service it does not know fails the call.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The addresses of the services webhooks name (`NAME.NAMESPACE.svc:PORT` → address).
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolver(Arc<RwLock<HashMap<String, SocketAddr>>>);

impl Resolver {
    /// Reach service `namespace/name` port `port` at `addr` from now on.
    pub(crate) fn insert(&self, namespace: &str, name: &str, port: u16, addr: SocketAddr) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(format!("{name}.{namespace}.svc:{port}"), addr);
    }

    fn get(&self, host: &str, port: u16) -> Option<SocketAddr> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&format!("{host}:{port}"))
            .copied()
    }
}

/// Connects to a webhook: a service through the [`Resolver`], a URL's host through DNS.
#[derive(Clone, Debug)]
pub(crate) struct Connector {
    resolver: Resolver,
}

impl tower::Service<http::Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let resolver = self.resolver.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or("the webhook URL has no host")?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let stream = match resolver.get(&host, port) {
                Some(addr) => TcpStream::connect(addr).await?,
                None if host.rsplit('.').next() == Some("svc") => {
                    return Err(format!(
                        "dial tcp: lookup {host}: the embedded API server has no cluster \
                         network and no address for this service"
                    )
                    .into());
                }
                None => TcpStream::connect((host.as_str(), port)).await?,
            };
            stream.set_nodelay(true)?;
            Ok(TokioIo::new(stream))
        })
    }
}

/// An HTTPS client for one webhook.
pub(crate) type WebhookClient = Client<HttpsConnector<Connector>, Full<Bytes>>;

/// A client trusting the PEM certificates of `ca_pem` (the system's roots when empty).
///
/// # Errors
///
/// What is wrong with the bundle.
pub(crate) fn client(resolver: &Resolver, ca_pem: &[u8]) -> Result<WebhookClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    if ca_pem.is_empty() {
        for cert in rustls_native_certs::load_native_certs().certs {
            // A system root rustls refuses is skipped, as Go skips one it cannot parse.
            let _ = roots.add(cert);
        }
    } else {
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("caBundle: a certificate rustls refuses: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(Connector {
            resolver: resolver.clone(),
        });
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}
