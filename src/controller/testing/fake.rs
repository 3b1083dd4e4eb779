//! [`FakeApi`]: the embedded API server in process, behind a `kube::Client`, recording every
//! request.
//!
//! A reconcile's writes go to the embedded server's own handlers (no socket, no port): create,
//! replace, merge and JSON patches, and server-side apply with its field ownership and
//! conflicts, exactly as `informant apiserver` answers them. Every request is kept, in order,
//! as a [`Recorded`] (verb, path, query, body, answer) for the test to assert on; a write's
//! answer updates the objects [`super::TestContext`]'s cache reads, so the next read sees it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};

use http_body_util::{BodyExt as _, Full};
use kube::core::DynamicObject;
use serde_json::Value;
use tower::ServiceExt as _;

use crate::apiserver::{self, ApiError, Config, Handle, TestServerError};

use super::Objects;

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: http::Method,
    /// The URL path (`/api/v1/namespaces/default/configmaps/site`).
    pub path: String,
    /// The query string, empty when none (`fieldManager=website&force=true`).
    pub query: String,
    /// The request's `Content-Type` (server-side apply sends `application/apply-patch+yaml`).
    pub content_type: Option<String>,
    /// The request body, when it is JSON (kube-rs sends every body, apply's too, as JSON).
    pub body: Option<Value>,
    /// The answer's status code.
    pub status: http::StatusCode,
    /// The answer's body for a write (the object as stored, or a `Status`); `None` for reads,
    /// whose answers (watches among them) stream through unrecorded.
    pub answer: Option<Value>,
}

impl Recorded {
    /// Whether the request changes something (any method but `GET` and `HEAD`).
    #[must_use]
    pub fn is_write(&self) -> bool {
        self.method != http::Method::GET && self.method != http::Method::HEAD
    }

    /// Whether the request is a server-side apply.
    #[must_use]
    pub fn is_apply(&self) -> bool {
        self.method == http::Method::PATCH
            && self
                .content_type
                .as_deref()
                .is_some_and(|c| c.starts_with("application/apply-patch"))
    }

    /// The `fieldManager` the request names, if any.
    #[must_use]
    pub fn field_manager(&self) -> Option<String> {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&self.query)
            .ok()?
            .into_iter()
            .find_map(|(k, v)| (k == "fieldManager").then_some(v))
    }

    /// The `status` subresource is the target (`…/{name}/status`).
    #[must_use]
    pub fn is_status(&self) -> bool {
        target(&self.path).is_some_and(|t| t.subresource == Some("status"))
    }
}

/// The embedded API server in process, with the requests it answered.
#[derive(Clone)]
pub struct FakeApi {
    handle: Handle,
    router: axum::Router,
    log: Arc<Mutex<Vec<Recorded>>>,
    objects: Objects,
}

impl std::fmt::Debug for FakeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeApi")
            .field("requests", &self.requests().len())
            .finish_non_exhaustive()
    }
}

impl FakeApi {
    /// An empty server (a `default` namespace), nothing recorded yet.
    ///
    /// # Errors
    /// When the embedded server does not start (its built-in seed refused).
    pub fn new() -> Result<Self, TestServerError> {
        Self::with_objects(Objects::default())
    }

    pub(super) fn with_objects(objects: Objects) -> Result<Self, TestServerError> {
        let (handle, router) = apiserver::in_process(Config::default())?;
        Ok(Self {
            handle,
            router,
            log: Arc::default(),
            objects,
        })
    }

    /// Creates `object` (`apiVersion` and `kind` set) as a client would, unrecorded: a
    /// custom resource's kind is served once its `CustomResourceDefinition` is created.
    /// Returns it as stored (uid, `resourceVersion`, `generation` set).
    ///
    /// # Errors
    /// The server's refusal (an unknown kind, an invalid object, one that exists).
    pub fn create(&self, object: Value) -> Result<Value, ApiError> {
        self.handle.create(object)
    }

    /// The server's handle: fault injection (`fail_next`) and request counters.
    #[must_use]
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// A kube client of the fake (default namespace `default`).
    ///
    /// # Panics
    /// Outside a Tokio runtime (kube's client starts its request buffer on it).
    #[must_use]
    pub fn client(&self) -> kube::Client {
        let service = Recording {
            router: self.router.clone(),
            log: Arc::clone(&self.log),
            objects: Arc::clone(&self.objects),
        };
        kube::Client::new(service, "default")
    }

    /// Every request answered so far, in order.
    #[must_use]
    pub fn requests(&self) -> Vec<Recorded> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The writes among [`FakeApi::requests`], in order.
    #[must_use]
    pub fn writes(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(Recorded::is_write)
            .collect()
    }
}

/// The tower service in front of the router: records, forwards, and keeps the cache's
/// objects in step with the writes' answers.
#[derive(Clone)]
struct Recording {
    router: axum::Router,
    log: Arc<Mutex<Vec<Recorded>>>,
    objects: Objects,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<http::Request<kube::client::Body>> for Recording {
    type Response = http::Response<axum::body::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.answer(request).await })
    }
}

impl Recording {
    async fn answer(
        self,
        request: http::Request<kube::client::Body>,
    ) -> Result<http::Response<axum::body::Body>, BoxError> {
        let (parts, body) = request.into_parts();
        let bytes = body.collect().await?.to_bytes();
        let mut recorded = Recorded {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: serde_json::from_slice(&bytes).ok(),
            status: http::StatusCode::OK,
            answer: None,
        };
        let forwarded = http::Request::from_parts(parts, axum::body::Body::from(bytes));
        let response = match self.router.clone().oneshot(forwarded).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        recorded.status = response.status();
        if !recorded.is_write() {
            self.push(recorded);
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await?.to_bytes();
        recorded.answer = serde_json::from_slice(&bytes).ok();
        self.follow(&recorded);
        self.push(recorded);
        let body = Full::new(bytes).map_err(|never: Infallible| match never {});
        Ok(http::Response::from_parts(
            parts,
            axum::body::Body::new(body),
        ))
    }

    fn push(&self, recorded: Recorded) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(recorded);
    }

    /// Keeps the cache's objects as the write left the server: the stored object replaces
    /// the held one; a deleted one (no finalizer left) goes.
    fn follow(&self, recorded: &Recorded) {
        if !recorded.status.is_success() {
            return;
        }
        let Some(target) = target(&recorded.path) else {
            return;
        };
        if !matches!(target.subresource, None | Some("status")) {
            return;
        }
        let Some(answer) = recorded.answer.as_ref() else {
            return;
        };
        let Ok(stored) = serde_json::from_value::<DynamicObject>(answer.clone()) else {
            return;
        };
        let Some(types) = stored.types.clone() else {
            return;
        };
        if types.kind == "Status" || types.kind.ends_with("List") {
            return;
        }
        let gone = recorded.method == http::Method::DELETE
            && stored
                .metadata
                .finalizers
                .as_ref()
                .is_none_or(Vec::is_empty);
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects.retain(|held| {
            !(held.types.as_ref() == Some(&types)
                && held.metadata.namespace == stored.metadata.namespace
                && held.metadata.name == stored.metadata.name)
        });
        if !gone {
            objects.push(Arc::new(stored));
        }
    }
}

/// What a request path names, past `/api/v1` or `/apis/{group}/{version}` and a namespace.
#[derive(Debug, PartialEq, Eq)]
struct Target<'a> {
    resource: &'a str,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

fn target(path: &str) -> Option<Target<'_>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match *segments.first()? {
        "api" => segments.get(2..)?,
        "apis" => segments.get(3..)?,
        _ => return None,
    };
    // `namespaces/{ns}/…` scopes what follows; `namespaces/{name}` alone is a Namespace.
    let rest = match rest {
        ["namespaces", _, resource, more @ ..]
            if !(more.is_empty() && matches!(*resource, "status" | "finalize")) =>
        {
            let mut all = vec![*resource];
            all.extend_from_slice(more);
            all
        }
        other => other.to_vec(),
    };
    Some(Target {
        resource: rest.first()?,
        name: rest.get(1).copied(),
        subresource: rest.get(2).copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_resource_object_and_subresource() {
        let t = |resource, name, subresource| {
            Some(Target {
                resource,
                name,
                subresource,
            })
        };
        assert_eq!(
            target("/api/v1/namespaces/default/configmaps/site"),
            t("configmaps", Some("site"), None)
        );
        assert_eq!(
            target("/apis/example.com/v1/namespaces/ns/websites/site/status"),
            t("websites", Some("site"), Some("status"))
        );
        assert_eq!(
            target("/api/v1/namespaces/default"),
            t("namespaces", Some("default"), None)
        );
        assert_eq!(
            target("/api/v1/namespaces/default/status"),
            t("namespaces", Some("default"), Some("status"))
        );
        assert_eq!(
            target("/apis/apps/v1/deployments"),
            t("deployments", None, None)
        );
        assert_eq!(target("/version"), None);
    }
}
