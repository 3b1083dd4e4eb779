//! The kubeconfig a client reaches this server with: plain HTTP without credentials when every
//! request is allowed, HTTPS trusting the server's own authority with a bearer token when
//! authorization is on. A leaf: the server's [`Handle`](super::Handle) and the test server both
//! build theirs here.

use std::net::SocketAddr;

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

/// A kubeconfig for plain HTTP on `addr` (no TLS, no credentials: loopback only), for a
/// server that allows every request.
#[must_use]
pub fn kubeconfig(addr: SocketAddr) -> Kubeconfig {
    build_kubeconfig(format!("http://{addr}"), None, None)
}

/// A kubeconfig for the server at `url`, trusting the authority `ca_data` (base64 PEM) and
/// authenticating with the bearer `token`, when given.
pub(crate) fn build_kubeconfig(
    url: String,
    token: Option<&str>,
    ca_data: Option<String>,
) -> Kubeconfig {
    let name = "informant".to_string();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(Cluster {
                server: Some(url),
                certificate_authority_data: ca_data,
                ..Cluster::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(AuthInfo {
                token: token.map(|t| t.to_string().into()),
                ..AuthInfo::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(Context {
                cluster: name.clone(),
                user: Some(name.clone()),
                namespace: Some("default".to_string()),
                ..Context::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
}
