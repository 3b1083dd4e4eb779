//! Authentication and authorization of every request, as kube-apiserver runs them with
//! `--authorization-mode=RBAC` and its default `--anonymous-auth=true`, when the server is
//! started with [`Authorization::Rbac`]; off ([`Authorization::AlwaysAllow`]) by default.
//!
//! - **Who**: `Authorization: Bearer <token>` with the administrator's token (user `admin` in
//!   `system:masters`, the token of the server's own kubeconfig) or one issued by `TokenRequest`
//!   (`POST .../serviceaccounts/<name>/token`, `kubectl create token`) to a `ServiceAccount`
//!   that still exists (user `system:serviceaccount:<ns>:<name>`, groups
//!   `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`). An
//!   unknown or expired token is refused with 401; a request without a token is
//!   `system:anonymous` in `system:unauthenticated`, which RBAC then refuses with 403 but for
//!   `/healthz`, `/livez`, `/readyz` and `/version` (`system:public-info-viewer`).
//!   `Impersonate-*` headers act as another user when the acting one may `impersonate` it.
//! - **What**: [`attributes`] reads the request as kube-apiserver's request info does, and
//!   [`rbac`] decides from the stored `Role`s, `ClusterRole`s and their bindings, with the
//!   bootstrap roles of [`bootstrap`] created at start. A refusal is kube-apiserver's 403
//!   `Status`, and is kept in [`Refusal`]s (`Handle::refusals`) and logged.
//!
//! With [`Authorization::AlwaysAllow`] every request is allowed (as before authorization
//! existed): a request with a token the server issued is that `ServiceAccount`'s (so
//! `SelfSubjectAccessReview` and `kubectl auth whoami` answer for it), any other is the
//! administrator's.

pub(crate) mod attributes;
mod authn;
mod bootstrap;
pub(crate) mod rbac;
pub(crate) mod reviews;
mod token_review;
pub(crate) mod user;

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use axum::http::{HeaderMap, Method};
use serde::Serialize;

pub use attributes::RequestInfo;
pub use rbac::Decision;
pub use user::User;

pub(crate) use authn::Tokens;

use super::status::ApiError;
use super::store::Store;

/// How the server authorizes requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authorization {
    /// Every request is allowed (kube-apiserver's `AlwaysAllow`); the default.
    #[default]
    AlwaysAllow,
    /// Bearer tokens and kube-apiserver's RBAC authorizer.
    Rbac,
}

impl Authorization {
    /// The mode's name, as kube-apiserver's `--authorization-mode` spells it in lowercase.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlwaysAllow => "always-allow",
            Self::Rbac => "rbac",
        }
    }
}

impl std::fmt::Display for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no authorization mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown authorization mode {0:?}: expected rbac or always-allow")]
pub struct UnknownAuthorization(pub String);

impl std::str::FromStr for Authorization {
    type Err = UnknownAuthorization;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "rbac" => Ok(Self::Rbac),
            "always-allow" | "alwaysallow" => Ok(Self::AlwaysAllow),
            _ => Err(UnknownAuthorization(s.to_string())),
        }
    }
}

/// kube-apiserver's 403 for a request the authorizer refused (`responsewriters.Forbidden`
/// and its `forbiddenMessage`): `configmaps is forbidden: User "system:serviceaccount:ops:inf"
/// cannot list resource "configmaps" in API group "" in the namespace "ops"`, the cluster-scope
/// variant (`at the cluster scope`), the subresource variant (`resource "cacheconfigs/status"`),
/// and the non-resource one (`forbidden: User "x" cannot get path "/foo"`); the authorizer's
/// reason, when it has one, follows after a colon.
#[must_use]
pub fn forbidden(user: &str, info: &RequestInfo, reason: &str) -> ApiError {
    let what = if info.resource_request {
        let mut resource = info.resource.clone();
        if !info.subresource.is_empty() {
            resource = format!("{resource}/{}", info.subresource);
        }
        let scope = if info.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", info.namespace)
        };
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            info.verb, info.api_group
        )
    } else {
        format!("User {user:?} cannot {} path {:?}", info.verb, info.path)
    };
    let why = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    if info.resource_request {
        ApiError::new_forbidden(&info.api_group, &info.resource, &info.name, &why)
    } else {
        ApiError::new_forbidden("", "", "", &why)
    }
}

/// A request the server refused (401 or 403), as the request log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// 401 or 403.
    pub code: u16,
    /// The user ("" for a 401: the token named no one).
    pub user: String,
    /// The verb (`list`, `patch`, `get` for a non-resource URL).
    pub verb: String,
    /// The API group, "" for the core group.
    pub api_group: String,
    /// The resource, "" for a non-resource URL.
    pub resource: String,
    /// The subresource, "" when none.
    pub subresource: String,
    /// The namespace, "" when cluster-wide.
    pub namespace: String,
    /// The name, "" when none.
    pub name: String,
    /// The request path.
    pub path: String,
    /// The `Status` message answered.
    pub message: String,
}

/// The most refusals kept; older ones are forgotten first.
const REFUSALS_KEPT: usize = 10_000;

/// The authentication and authorization state of a server.
#[derive(Debug)]
pub struct Auth {
    /// The mode.
    pub mode: Authorization,
    /// Accepted tokens.
    pub tokens: Tokens,
    refusals: Mutex<VecDeque<Refusal>>,
}

impl Auth {
    /// A server's auth state in `mode`, with a fresh administrator token.
    #[must_use]
    pub fn new(mode: Authorization) -> Self {
        Self {
            mode,
            tokens: Tokens::new(),
            refusals: Mutex::new(VecDeque::new()),
        }
    }

    /// The objects created at start: the bootstrap roles and bindings with RBAC on, none off.
    #[must_use]
    pub fn seeds(&self) -> Vec<serde_json::Value> {
        match self.mode {
            Authorization::Rbac => bootstrap::objects(),
            Authorization::AlwaysAllow => Vec::new(),
        }
    }

    /// Every refusal so far, oldest first.
    #[must_use]
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn refuse(&self, user: &str, info: &RequestInfo, error: ApiError) -> ApiError {
        tracing::info!(
            user = %user,
            code = error.code,
            verb = %info.verb,
            path = %info.path,
            error = %error.message,
            "request refused"
        );
        let mut refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        if refusals.len() == REFUSALS_KEPT {
            refusals.pop_front();
        }
        refusals.push_back(Refusal {
            code: error.code,
            user: user.to_string(),
            verb: info.verb.clone(),
            api_group: info.api_group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            path: info.path.clone(),
            message: error.message.clone(),
        });
        error
    }

    /// Whether `user` may do `info`.
    #[must_use]
    pub fn authorize(&self, store: &Store, user: &User, info: &RequestInfo) -> Decision {
        match self.mode {
            Authorization::AlwaysAllow => Decision::Allow(String::new()),
            Authorization::Rbac => rbac::authorize(&rbac::StoredRoles(store), user, info),
        }
    }

    /// Who makes a request, and whether it may do what it asks: the user, or the 401/403 to
    /// answer (kept as a [`Refusal`]).
    ///
    /// # Errors
    ///
    /// 401 for a token the server does not know, 403 for a request no rule allows (or an
    /// impersonation that is not allowed), 500 for impersonation headers without a user.
    pub fn admit(
        &self,
        store: &Store,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Result<User, ApiError> {
        let token = authn::bearer(headers);
        let now = jiff::Timestamp::now();
        let mut user = match (
            token.and_then(|t| self.tokens.api_user(t, store, now)),
            self.mode,
        ) {
            (Some(user), _) => user,
            (None, Authorization::AlwaysAllow) => User::admin(),
            (None, Authorization::Rbac) if token.is_none() => User::anonymous(),
            (None, Authorization::Rbac) => {
                let info = RequestInfo::new(method, path, query);
                return Err(self.refuse("", &info, ApiError::unauthorized()));
            }
        };
        if let Some(impersonation) = authn::Impersonation::of(headers)? {
            let (checks, impersonated) = impersonation.checks_and_user();
            for check in &checks {
                if let Decision::Deny(reason) = self.authorize(store, &user, check) {
                    let error = forbidden(&user.name, check, &reason);
                    return Err(self.refuse(&user.name, check, error));
                }
            }
            user = impersonated;
        }
        if self.mode == Authorization::AlwaysAllow {
            return Ok(user);
        }
        let info = RequestInfo::new(method, path, query);
        match self.authorize(store, &user, &info) {
            Decision::Allow(_) => Ok(user),
            Decision::Deny(reason) => {
                let error = forbidden(&user.name, &info, &reason);
                Err(self.refuse(&user.name, &info, error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `Status` bodies kube-apiserver 1.37 answers, field by field.
    #[test]
    fn refusals_are_kube_apiserver_status_bodies() {
        let sa = "system:serviceaccount:ops:inf";
        let list = RequestInfo::resource("list", "", "configmaps", "", "ops", "");
        assert_eq!(
            forbidden(sa, &list, "").to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "configmaps is forbidden: User \"system:serviceaccount:ops:inf\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ops\"",
                "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403,
            })
        );
        let nodes = RequestInfo::resource("watch", "", "nodes", "", "", "");
        assert_eq!(
            forbidden(sa, &nodes, "").message,
            "nodes is forbidden: User \"system:serviceaccount:ops:inf\" cannot watch resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let status = RequestInfo::resource(
            "patch",
            "informant.dev",
            "cacheconfigs",
            "status",
            "ops",
            "c",
        );
        assert_eq!(
            forbidden(sa, &status, "").to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "cacheconfigs.informant.dev \"c\" is forbidden: User \"system:serviceaccount:ops:inf\" cannot patch resource \"cacheconfigs/status\" in API group \"informant.dev\" in the namespace \"ops\"",
                "reason": "Forbidden",
                "details": {"name": "c", "group": "informant.dev", "kind": "cacheconfigs"},
                "code": 403,
            })
        );
        let path = RequestInfo::non_resource("get", "/foo");
        assert_eq!(
            forbidden("x", &path, "").to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "forbidden: User \"x\" cannot get path \"/foo\"",
                "reason": "Forbidden", "details": {}, "code": 403,
            })
        );
        let reason = "RBAC: role.rbac.authorization.k8s.io \"r\" not found";
        assert!(
            forbidden(sa, &list, reason)
                .message
                .ends_with(&format!(": {reason}"))
        );
        assert_eq!(
            ApiError::unauthorized().to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
            })
        );
    }

    /// A `ServiceAccount`'s token authenticates it until it expires, then gets kube-apiserver's
    /// 401 (the expiry is set in the past here: no waiting).
    /// An embedded server with RBAC on, its seed roles, and the `ServiceAccount`
    /// `namespace/name`, whose uid comes with it.
    fn rbac_app_with_account(
        namespace: &str,
        name: &str,
    ) -> (crate::apiserver::state::App, String) {
        use crate::apiserver::config::Config;
        use crate::apiserver::state::App;
        let app = App::new(
            Config {
                authorization: Authorization::Rbac,
                ..Config::default()
            },
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        );
        for role in app.auth.seeds() {
            crate::apiserver::seed::create(&app, role).unwrap();
        }
        let account = crate::apiserver::seed::create(
            &app,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": name, "namespace": namespace}}),
        )
        .unwrap();
        let uid = account["metadata"]["uid"].as_str().unwrap().to_owned();
        (app, uid)
    }

    #[test]
    fn an_expired_service_account_token_is_refused_with_401() {
        use axum::http::{HeaderValue, header};
        let (app, uid) = rbac_app_with_account("ops", "inf");
        let uid = uid.as_str();
        let now = jiff::Timestamp::now();
        let hour = jiff::SignedDuration::from_hours(1);
        let live = app
            .auth
            .tokens
            .issue("ops", "inf", uid, now + hour, vec![], now);
        let expired = app
            .auth
            .tokens
            .issue("ops", "inf", uid, now - hour, vec![], now - hour * 2);
        let admit = |token: &str| {
            let mut headers = HeaderMap::new();
            let bearer = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
            headers.insert(header::AUTHORIZATION, bearer);
            app.auth
                .admit(&app.store, &Method::GET, "/version", None, &headers)
        };
        assert_eq!(admit(&live).unwrap().name, "system:serviceaccount:ops:inf");
        let refused = admit(&expired).unwrap_err();
        assert_eq!(refused.code, 401);
        assert_eq!(refused.message, "Unauthorized");
    }

    /// Issue 45, item 11: a token issued for another audience (`kubectl create token robot
    /// --audience vault`) authenticated as its `ServiceAccount` on resource requests, where
    /// kube-apiserver answers 401.
    #[test]
    fn a_token_for_another_audience_is_refused_with_401_as_kube_apiserver_refuses_it() {
        use axum::http::{HeaderValue, header};
        let (app, uid) = rbac_app_with_account("default", "robot");
        let uid = uid.as_str();
        let now = jiff::Timestamp::now();
        let expires = now + jiff::SignedDuration::from_hours(1);
        let issue = |audiences: &[&str]| {
            let audiences = audiences.iter().map(|a| (*a).to_owned()).collect();
            app.auth
                .tokens
                .issue("default", "robot", uid, expires, audiences, now)
        };
        let (vault, ours) = (
            issue(&["vault"]),
            issue(&["vault", token_review::API_AUDIENCE]),
        );
        let admit = |token: &str, path: &str| {
            let mut headers = HeaderMap::new();
            let bearer = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
            headers.insert(header::AUTHORIZATION, bearer);
            app.auth
                .admit(&app.store, &Method::GET, path, None, &headers)
        };
        for path in ["/api/v1/namespaces/default/configmaps", "/version"] {
            let refused = admit(&vault, path).unwrap_err();
            assert_eq!(
                (refused.code, refused.message.as_str()),
                (401, "Unauthorized"),
                "{path}"
            );
        }
        assert_eq!(
            admit(&ours, "/version").unwrap().name,
            "system:serviceaccount:default:robot"
        );
        // The vault token still passes a TokenReview for vault (its user is known).
        assert!(app.auth.tokens.user(&vault, &app.store, now).is_some());
    }

    #[test]
    fn modes_parse_from_their_names() {
        assert_eq!("rbac".parse(), Ok(Authorization::Rbac));
        assert_eq!("RBAC".parse(), Ok(Authorization::Rbac));
        assert_eq!("always-allow".parse(), Ok(Authorization::AlwaysAllow));
        assert!("abac".parse::<Authorization>().is_err());
    }
}
