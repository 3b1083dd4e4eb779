//! The create-only APIs that answer about the requester or a `ServiceAccount`, as
//! kube-apiserver serves them: `SelfSubjectAccessReview` and `SubjectAccessReview` (may this
//! user do that?), `SelfSubjectRulesReview` (what may I do in this namespace?),
//! `SelfSubjectReview` (who am I?) and `TokenRequest` (a token for a `ServiceAccount`). Nothing
//! is stored; each answer is the request with its `status` filled in, `201 Created`.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::Authorization;
use super::attributes::RequestInfo;
use super::rbac::{self, StoredRoles};
use super::user::User;
use crate::apiserver::handlers::{Ctx, json_value, parse_body};
use crate::apiserver::registry::ResourceKey;
use crate::apiserver::status::{ApiError, ApiResult};
use crate::apiserver::store::ObjKey;

/// The lifetime of a token when the request does not say: one hour
/// (`k8s.io/api/authentication/v1` `TokenRequestSpec.ExpirationSeconds` default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a token may be asked for: ten minutes
/// (`pkg/apis/authentication/validation`, `MinTokenAgeSec`).
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The audience of tokens when the request names none: kube-apiserver's default
/// `--api-audiences` (its service account issuer, as kind and kubeadm set it).
const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The request described by a review's `resourceAttributes` or `nonResourceAttributes`.
fn attributes(kind: &str, spec: &Value) -> ApiResult<RequestInfo> {
    match (
        spec.get("resourceAttributes").filter(|v| v.is_object()),
        spec.get("nonResourceAttributes").filter(|v| v.is_object()),
    ) {
        (Some(r), None) => Ok(RequestInfo::resource(
            str_at(r, "verb"),
            str_at(r, "group"),
            str_at(r, "resource"),
            str_at(r, "subresource"),
            str_at(r, "namespace"),
            str_at(r, "name"),
        )),
        (None, Some(n)) => Ok(RequestInfo::non_resource(
            str_at(n, "verb"),
            str_at(n, "path"),
        )),
        _ => Err(ApiError::invalid(
            kind,
            "authorization.k8s.io",
            "",
            "spec.resourceAttributes: Invalid value: \"null\": exactly one of \
             nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// The review with its `status`, as the answer.
fn answer(mut review: Value, status: Value) -> Response {
    review["metadata"] = json!({});
    review["status"] = status;
    json_value(StatusCode::CREATED, &review)
}

/// The access decision of `user` on `info`, as a `SubjectAccessReviewStatus`.
fn access_status(ctx: &Ctx, user: &User, info: &RequestInfo) -> Value {
    let decision = ctx.app.auth.authorize(&ctx.app.store, user, info);
    let mut status = json!({"allowed": decision.allowed()});
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    status
}

/// `POST` of a review resource (`rt.review`).
pub(crate) fn review(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let review = parse_body(ctx, body)?;
    let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
    match ctx.rt.plural.as_str() {
        "selfsubjectaccessreviews" => {
            let info = attributes(&ctx.rt.kind, &spec)?;
            let status = access_status(ctx, &ctx.user, &info);
            Ok(answer(review, status))
        }
        "subjectaccessreviews" => {
            let user = User {
                name: str_at(&spec, "user").to_string(),
                uid: str_at(&spec, "uid").to_string(),
                groups: serde_json::from_value(spec["groups"].clone()).unwrap_or_default(),
                extra: serde_json::from_value::<BTreeMap<String, Vec<String>>>(
                    spec["extra"].clone(),
                )
                .unwrap_or_default(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(ApiError::invalid(
                    &ctx.rt.kind,
                    "authorization.k8s.io",
                    "",
                    "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                ));
            }
            let info = attributes(&ctx.rt.kind, &spec)?;
            let status = access_status(ctx, &user, &info);
            Ok(answer(review, status))
        }
        "selfsubjectrulesreviews" => {
            let namespace = str_at(&spec, "namespace");
            if namespace.is_empty() {
                return Err(ApiError::bad_request("no namespace on request"));
            }
            Ok(answer(review, rules_status(ctx, namespace)))
        }
        "selfsubjectreviews" => {
            let user = &ctx.user;
            let mut info = json!({"username": user.name, "groups": user.groups});
            if !user.uid.is_empty() {
                info["uid"] = json!(user.uid);
            }
            if !user.extra.is_empty() {
                info["extra"] = json!(user.extra);
            }
            Ok(answer(review, json!({"userInfo": info})))
        }
        "tokenreviews" => super::token_review::review(ctx, review),
        other => Err(ApiError::internal(format!("no review named {other}"))),
    }
}

/// A `SubjectRulesReviewStatus`: the rules of the requester in `namespace`.
fn rules_status(ctx: &Ctx, namespace: &str) -> Value {
    let (rules, error) = match ctx.app.auth.mode {
        Authorization::AlwaysAllow => (
            vec![k8s_openapi::api::rbac::v1::PolicyRule {
                verbs: vec!["*".into()],
                api_groups: Some(vec!["*".into()]),
                resources: Some(vec!["*".into()]),
                non_resource_urls: Some(vec!["*".into()]),
                resource_names: None,
            }],
            None,
        ),
        Authorization::Rbac => rbac::rules_for(&StoredRoles(&ctx.app.store), &ctx.user, namespace),
    };
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in rules {
        if rule.resources.as_ref().is_some_and(|r| !r.is_empty()) {
            let mut r = json!({
                "verbs": rule.verbs,
                "apiGroups": rule.api_groups.clone().unwrap_or_default(),
                "resources": rule.resources.clone().unwrap_or_default(),
            });
            if let Some(names) = rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
                r["resourceNames"] = json!(names);
            }
            resource_rules.push(r);
        }
        if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
            non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": urls}));
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": error.is_some(),
    });
    if let Some(error) = error {
        status["evaluationError"] = json!(error);
    }
    status
}

/// `POST .../serviceaccounts/{name}/token`: a token for the `ServiceAccount`, valid for
/// `spec.expirationSeconds` (an hour when absent, ten minutes at least) while the account
/// exists.
pub(crate) fn token_request(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let namespace = ctx.path.namespace.as_deref().unwrap_or_default();
    let name = ctx.path.name.as_deref().unwrap_or_default();
    let account = ctx
        .app
        .store
        .get(
            &ResourceKey::new("", "serviceaccounts"),
            &ObjKey::new(namespace, name),
        )
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = account.value["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut request = if body.is_empty() {
        json!({})
    } else {
        parse_body(ctx, body)?
    };
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            format!(
                "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    let audiences = match request["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([DEFAULT_AUDIENCE]),
    };
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let expires = now + jiff::SignedDuration::from_secs(seconds);
    let wanted = serde_json::from_value(audiences.clone()).unwrap_or_default();
    let token = ctx
        .app
        .auth
        .tokens
        .issue(namespace, name, &uid, expires, wanted);
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({
        "name": name,
        "namespace": namespace,
        "creationTimestamp": now.to_string(),
    });
    request["spec"]["audiences"] = audiences;
    request["spec"]["expirationSeconds"] = json!(seconds);
    request["spec"]["boundObjectRef"] = request["spec"]
        .get("boundObjectRef")
        .cloned()
        .unwrap_or(Value::Null);
    request["status"] = json!({"token": token, "expirationTimestamp": expires.to_string()});
    Ok(json_value(StatusCode::CREATED, &request))
}
