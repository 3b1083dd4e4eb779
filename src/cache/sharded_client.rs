//! A kube [`Client`] whose lists and watches carry a `shardSelector` (KEP-5866), so an
//! informer of a sharded kind lists, watches and holds only its member's share, and the probe
//! that tells whether the API server honours the parameter.
//!
//! kube-rs has no `shardSelector` in `ListParams` or `watcher::Config`; rather than fork the
//! watcher, the client an informer is built with is wrapped: a `tower` service in front of the
//! ordinary client adds `shardSelector=<selector>` to every GET it sends (an informer's client
//! only lists and watches its one resource). The watcher, its relists, its resumptions and its
//! bookmarks are kube-runtime's, unchanged. A member whose ranges change builds a new client
//! and so a new informer: the selector is part of the informer's identity.
//!
//! A server without the feature ignores the parameter and answers everything; it says so by
//! leaving `metadata.shardInfo` out of a list ([`server_shards`]), and the member then filters
//! in the process with the same hash ([`crate::selector::ShardSelector::matches_object`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response, Uri};
use kube::Client;
use kube::client::Body;

use crate::selector::ShardSelector;

/// A client that adds `shardSelector=<selector>` to every GET, sending through `client`.
#[must_use]
pub fn sharded_client(client: &Client, selector: &ShardSelector) -> Client {
    let default_namespace = client.default_namespace().to_string();
    Client::new(
        AddShardSelector {
            inner: client.clone(),
            selector: selector.to_string(),
        },
        default_namespace,
    )
}

/// Whether the server behind `client` filters lists by `shardSelector`: a one-object list of
/// `collection` (an API path such as `/api/v1/configmaps`) with `selector`, answered with
/// `metadata.shardInfo.selector` equal to the selector sent. A server without the feature
/// (before Kubernetes v1.36, or with the `ShardedListAndWatch` gate off) leaves it out.
///
/// # Errors
///
/// The request's error, or a response that is not a JSON list.
pub async fn server_shards(
    client: &Client,
    collection: &str,
    selector: &ShardSelector,
) -> Result<bool, kube::Error> {
    let sent = selector.to_string();
    let query = serde_urlencoded::to_string([("limit", "1"), ("shardSelector", sent.as_str())])
        .map_err(|e| kube::Error::Service(Box::new(InvalidQuery(e))))?;
    let request = Request::get(format!("{collection}?{query}"))
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let list: serde_json::Value = client.request(request).await?;
    Ok(list
        .pointer("/metadata/shardInfo/selector")
        .and_then(serde_json::Value::as_str)
        == Some(sent.as_str()))
}

/// A query that could not be encoded (never for a parsed selector).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the shard selector query: {0}")]
struct InvalidQuery(serde_urlencoded::ser::Error);

/// The service: the request's URI gains the parameter, then `inner` sends it.
#[derive(Clone)]
struct AddShardSelector {
    inner: Client,
    selector: String,
}

/// `uri` with `shardSelector=<selector>` appended to its query.
fn with_selector(uri: &Uri, selector: &str) -> Option<Uri> {
    let pair = serde_urlencoded::to_string([("shardSelector", selector)]).ok()?;
    let path = uri.path();
    let target = match uri.query() {
        Some(query) if !query.is_empty() => format!("{path}?{query}&{pair}"),
        _ => format!("{path}?{pair}"),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(target.parse().ok()?);
    Uri::from_parts(parts).ok()
}

impl tower::Service<Request<Body>> for AddShardSelector {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // `Client::send` waits for the inner stack's readiness itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        if request.method() == http::Method::GET
            && let Some(uri) = with_selector(request.uri(), &self.selector)
        {
            *request.uri_mut() = uri;
        }
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_is_appended_to_the_query_encoded() {
        let selector =
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        let uri: Uri = "/api/v1/configmaps?watch=true&resourceVersion=5"
            .parse()
            .unwrap();
        let out = with_selector(&uri, selector).unwrap();
        assert_eq!(out.path(), "/api/v1/configmaps");
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(out.query().unwrap()).unwrap();
        assert_eq!(
            pairs,
            [
                ("watch".to_string(), "true".to_string()),
                ("resourceVersion".to_string(), "5".to_string()),
                ("shardSelector".to_string(), selector.to_string()),
            ]
        );
        let bare = with_selector(&"/api/v1/pods".parse().unwrap(), selector).unwrap();
        assert!(
            bare.query()
                .unwrap()
                .starts_with("shardSelector=shardRange")
        );
    }
}
