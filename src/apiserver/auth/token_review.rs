//! `TokenReview` (`POST /apis/authentication.k8s.io/v1/tokenreviews`): who a bearer token
//! authenticates, as kube-apiserver answers it (`pkg/registry/authentication/tokenreview`
//! `storage.go`), so a manager that reviews the tokens of its own clients (secure metrics,
//! controller-runtime's `WithAuthenticationAndAuthorization`) is tested against this server.
//!
//! Cluster-scoped and create-only, nothing stored; the answer is the request with its
//! `status`:
//!
//! - a token the server issued (`TokenRequest`), unexpired, whose `ServiceAccount` still exists
//!   with the uid it had, and the administrator's token: `authenticated: true`, the `user`
//!   (`system:serviceaccount:<ns>:<name>`, its uid, groups `system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>`, `system:authenticated`) and the `audiences` the token and
//!   the review share (the review's `spec.audiences`, or the server's own audience
//!   [`API_AUDIENCE`] when it names none);
//! - a token whose audiences the review does not ask for: `authenticated: false` and
//!   kube-apiserver's `token audiences [...] is invalid for the target audiences [...]`;
//! - any other token: `authenticated: false`, `error: invalid bearer token`;
//! - no token: 400 `token is required for TokenReview in authentication`.
//!
//! Under RBAC the requester needs `create` on `tokenreviews` (`system:auth-delegator` grants
//! it).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::user::User;
use crate::apiserver::request::Ctx;
use crate::apiserver::respond::json_value;
use crate::apiserver::status::{ApiError, ApiResult};

/// The audience of the server's tokens when a `TokenRequest` names none, and of a review
/// that names none: kube-apiserver's default `--api-audiences` (its service account issuer,
/// as kind and kubeadm set it).
pub(crate) const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Go's `%q` of a string list: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// The `status` of a review of `token` asking for `requested` audiences.
fn status(ctx: &Ctx, token: &str, requested: &[String]) -> Value {
    let tokens = &ctx.app.auth.tokens;
    let user = tokens.user(token, &ctx.app.store, jiff::Timestamp::now());
    let (Some(user), Some(audiences)) = (user, tokens.audiences(token)) else {
        return json!({"authenticated": false, "user": {}, "error": "invalid bearer token"});
    };
    let shared: Vec<String> = audiences
        .iter()
        .filter(|a| requested.contains(a))
        .cloned()
        .collect();
    if shared.is_empty() {
        return json!({
            "authenticated": false,
            "user": {},
            "error": format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&audiences),
                go_quoted(requested)
            ),
        });
    }
    json!({"authenticated": true, "user": user_info(&user), "audiences": shared})
}

/// A `UserInfo`: username, uid (when any), groups, extra (when any).
fn user_info(user: &User) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// `POST` of a `TokenReview`: `review` answered with its `status`, 201.
pub(crate) fn review(ctx: &Ctx, mut review: Value) -> ApiResult<Response> {
    if let Some(namespace) = ctx.path.namespace.as_deref().filter(|n| !n.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "namespace is not allowed on this type: {namespace}"
        )));
    }
    let token = review["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let requested: Vec<String> = match review["spec"]["audiences"].as_array() {
        Some(list) if !list.is_empty() => list
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
        _ => vec![API_AUDIENCE.to_owned()],
    };
    let status = status(ctx, &token, &requested);
    review["apiVersion"] = json!("authentication.k8s.io/v1");
    review["kind"] = json!("TokenReview");
    review["metadata"] = json!({"creationTimestamp": null});
    review["status"] = status;
    Ok(json_value(StatusCode::CREATED, &review))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audience_lists_are_quoted_as_go_quotes_them() {
        assert_eq!(
            go_quoted(&["a".to_owned(), "b c".to_owned()]),
            "[\"a\" \"b c\"]"
        );
        assert_eq!(go_quoted(&[]), "[]");
    }
}
