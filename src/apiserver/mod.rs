//! The embedded Kubernetes API server: in-memory, on loopback, for the demo, development and
//! tests.
//!
//! It speaks the real API well enough for kubectl and kube-rs's watcher: discovery, CRUD with
//! `Status` errors, list/watch with resourceVersion, selectors, pagination, bookmarks and 410
//! Gone, patches (JSON, merge, strategic, server-side apply), finalizers, CRDs and namespaces.
//! Start one in a test with [`TestServer::start`] (the `testing` feature); from the shell with
//! `informant apiserver`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informant::apiserver::{TestServer, Verb};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, ListParams};
//!
//! let server = TestServer::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(server.client().await?, "default");
//! cms.list(&ListParams::default()).await?;
//! assert_eq!(server.handle().request_count(Verb::List, "configmaps"), 1);
//! server.handle().expire_history(); // the next watch resume gets 410 Gone
//! server.handle().drop_watches(); // every open watch ends now
//! server.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! Layout (private modules): `registry` (what is served), `store` (objects, history, change
//! broadcast), `handlers` (the dispatcher, one file per verb family), `discovery` and `openapi`,
//! `faults` (fault injection and counters), `lists` (the LIST answers given, [`Handle::lists`]),
//! `admission` (the admission webhooks, called from the write handlers),
//! `server` (router, run loop). Below the handlers sit the leaves they share, which import
//! neither them nor `server`: `config` (settings), `state` (what every request shares),
//! `request` (one request's context) and `respond` (JSON responses); `client_config` (the
//! kubeconfigs clients use) serves `server` and `test_server` alike. The `layering` tests keep
//! it so.
//!
//! # Differences from kube-apiserver
//!
//! Authentication and authorization are off by default (plain HTTP, every request allowed);
//! with [`Authorization::Rbac`] the server serves HTTPS with its own authority, accepts the
//! administrator's token and `ServiceAccount` tokens from `TokenRequest`, and runs
//! kube-apiserver's RBAC authorizer (see the `auth` module: no escalation checks on writing
//! roles, no node authorizer, no webhook or OIDC authentication). JSON (and YAML for apply)
//! bodies, plus protobuf only for what kubectl's typed clients send (`kubectl create
//! namespace|configmap|secret|serviceaccount|role|rolebinding|clusterrole|clusterrolebinding|token`,
//! `kubectl auth can-i|whoami`) and `/openapi/v2`, which kubectl reads as protobuf; admission
//! by webhooks only (the `admission` module: CEL `matchConditions` without `authorizer`,
//! services reached through [`Handle::resolve_service`]), no per-type validation beyond names and metadata, no CRD schema validation,
//! defaulting or pruning (`fieldValidation` is ignored); no garbage collector (`ownerReferences`
//! and `propagationPolicy` have no effect) and no controllers but the namespace controller
//! (which runs synchronously in the request that lets a terminating namespace move on);
//! server-side apply
//! tracks only apply managers (no `Update` entries); no `/scale` or other subresources than
//! `/status` and `serviceaccounts/token`.

mod admission;
mod aggregated;
mod auth;
mod client_config;
mod config;
mod conversion;
mod crd;
mod crd_conversion;
mod debug;
mod discovery;
mod faults;
mod filter;
pub(crate) mod handlers;
mod kubeconfig_file;
#[cfg(test)]
mod layering;
mod lists;
mod meta;
mod namespaces;
mod openapi;
mod openapi_v2;
mod protobuf;
mod query;
mod registry;
mod request;
mod respond;
mod route;
mod seed;
mod server;
mod state;
mod status;
mod store;
mod table;
#[cfg(feature = "testing")]
mod test_server;
mod tls;

pub use auth::{Authorization, Refusal, UnknownAuthorization};
pub use client_config::kubeconfig;
pub use config::{Config, FeatureGates};
pub use faults::{CorruptRule, Corruption, FailRule, HUGE_ANNOTATION_BYTES, Verb};
pub use kubeconfig_file::{KubeconfigWriteError, write_kubeconfig};
pub use lists::ListAnswer;
pub use seed::parse_yaml;
pub use server::{Error, Handle, Server};
pub use status::{ApiError, Cause, FieldError, FieldErrorType};
pub use store::Limits;
#[cfg(feature = "testing")]
pub use test_server::{TestServer, TestServerError, in_process};
