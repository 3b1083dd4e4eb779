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
use crate::apiserver::registry::ResourceKey;
use crate::apiserver::request::{Ctx, parse_body};
use crate::apiserver::respond::json_value;
use crate::apiserver::status::{ApiError, ApiResult, FieldError, go_value};
use crate::apiserver::store::ObjKey;

/// The lifetime of a token when the request does not say: one hour
/// (`k8s.io/api/authentication/v1` `TokenRequestSpec.ExpirationSeconds` default).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The longest lifetime a token may be asked for: 2^32 seconds
/// (`pkg/apis/authentication/validation`, `ValidateTokenRequest`). The shortest is the server's
/// `Config::token_min_expiration`, ten minutes as kube-apiserver's unless a test lowers it.
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
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

/// The `spec` of a review or token request: an object, or `{}` when absent or null; anything
/// else is the 400 kube-apiserver's decoder answers (`cannot unmarshal string into Go struct
/// field SelfSubjectAccessReview.spec of type v1.SelfSubjectAccessReviewSpec`).
fn spec_of(request: &Value, kind: &str) -> ApiResult<Value> {
    match request.get("spec") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(spec @ Value::Object(_)) => Ok(spec.clone()),
        Some(other) => Err(ApiError::cannot_decode(
            kind,
            "v1",
            kind,
            "spec",
            &format!("v1.{kind}Spec"),
            &go_value(other, false),
        )),
    }
}

/// `POST` of a review resource (`rt.review`).
pub(crate) fn review(ctx: &Ctx, body: &[u8]) -> ApiResult<Response> {
    let review = parse_body(ctx, body)?;
    let spec = spec_of(&review, &ctx.rt.kind)?;
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
    let request = if body.is_empty() {
        json!({})
    } else {
        parse_body(ctx, body)?
    };
    let mut spec = spec_of(&request, "TokenRequest")?;
    let seconds = expiration_seconds(&spec, name, ctx.app.config.token_min_expiration)?;
    let audiences = match spec.get("audiences") {
        None | Some(Value::Null) => json!([DEFAULT_AUDIENCE]),
        Some(Value::Array(a)) if a.is_empty() => json!([DEFAULT_AUDIENCE]),
        Some(Value::Array(a)) => match a.iter().find(|v| !v.is_string()) {
            Some(bad) => return Err(token_decode("spec.audiences", "string", bad)),
            None => Value::Array(a.clone()),
        },
        Some(other) => return Err(token_decode("spec.audiences", "[]string", other)),
    };
    let bound = match spec.get("boundObjectRef") {
        None => Value::Null,
        Some(v) if v.is_object() || v.is_null() => v.clone(),
        Some(other) => {
            return Err(token_decode(
                "spec.boundObjectRef",
                "v1.BoundObjectReference",
                other,
            ));
        }
    };
    let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    // Cannot fail once the lifetime is at most 2^32 s (a century is 2^31.6 s), but a client's
    // number never reaches a panicking `+`.
    let expires = now
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .map_err(|e| ApiError::internal(format!("token expiration out of range: {e}")))?;
    let wanted = serde_json::from_value(audiences.clone()).unwrap_or_default();
    let token = ctx
        .app
        .auth
        .tokens
        .issue(namespace, name, &uid, expires, wanted, now);
    spec["audiences"] = audiences;
    spec["expirationSeconds"] = json!(seconds);
    spec["boundObjectRef"] = bound;
    let answer = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": now.to_string(),
        },
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": expires.to_string()},
    });
    Ok(json_value(StatusCode::CREATED, &answer))
}

/// A 400 for a `TokenRequest` field of the wrong JSON type, as kube-apiserver's decoder words it.
fn token_decode(path: &str, go_type: &str, found: &Value) -> ApiError {
    let integer = go_type.starts_with("int");
    ApiError::cannot_decode(
        "TokenRequest",
        "v1",
        "TokenRequestSpec",
        path,
        go_type,
        &go_value(found, integer),
    )
}

/// `spec.expirationSeconds` of a token request (an hour when absent), validated as
/// kube-apiserver does: an integer (else 400, as its decoder answers), at least `min` and at
/// most 2^32 seconds (else 422 with a `FieldValueInvalid` cause per bound broken).
fn expiration_seconds(spec: &Value, name: &str, min: std::time::Duration) -> ApiResult<i64> {
    let seconds = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => return Ok(DEFAULT_EXPIRATION_SECONDS),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| token_decode("spec.expirationSeconds", "int64", v))?,
    };
    let min_seconds = i64::try_from(min.as_secs()).unwrap_or(i64::MAX);
    let mut errors = Vec::new();
    let field = "spec.expirationSeconds";
    if seconds < min_seconds {
        let detail = format!(
            "may not specify a duration less than {}",
            describe_duration(min_seconds)
        );
        errors.push(FieldError::invalid(field, &seconds.to_string(), &detail));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            field,
            &seconds.to_string(),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if errors.is_empty() {
        Ok(seconds)
    } else {
        Err(ApiError::invalid_fields(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            &errors,
        ))
    }
}

/// `10 minutes` (kube-apiserver's words for its minimum), or `20 seconds`.
fn describe_duration(seconds: i64) -> String {
    if seconds % 60 == 0 {
        let minutes = seconds / 60;
        format!("{minutes} minute{}", if minutes == 1 { "" } else { "s" })
    } else {
        format!("{seconds} second{}", if seconds == 1 { "" } else { "s" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TEN_MINUTES: Duration = Duration::from_mins(10);

    fn seconds_of(spec: &Value) -> ApiResult<i64> {
        expiration_seconds(spec, "inf", TEN_MINUTES)
    }

    #[test]
    fn expiration_defaults_to_an_hour_and_accepts_the_bounds() {
        assert_eq!(seconds_of(&json!({})), Ok(3600));
        assert_eq!(seconds_of(&json!({"expirationSeconds": null})), Ok(3600));
        assert_eq!(seconds_of(&json!({"expirationSeconds": 600})), Ok(600));
        assert_eq!(
            seconds_of(&json!({"expirationSeconds": 1_i64 << 32})),
            Ok(1 << 32)
        );
    }

    #[test]
    fn expiration_out_of_bounds_is_kube_apiservers_422() {
        let error = seconds_of(&json!({"expirationSeconds": (1_i64 << 32) + 1})).unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "TokenRequest.authentication.k8s.io \"inf\" is invalid: spec.expirationSeconds: \
             Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"
        );
        assert_eq!(error.causes[0].reason, "FieldValueInvalid");
        assert_eq!(error.causes[0].field, "spec.expirationSeconds");
        let error = seconds_of(&json!({"expirationSeconds": i64::MAX})).unwrap_err();
        assert_eq!(error.code, 422);
        let error = seconds_of(&json!({"expirationSeconds": -5})).unwrap_err();
        assert_eq!(
            error.message,
            "TokenRequest.authentication.k8s.io \"inf\" is invalid: spec.expirationSeconds: \
             Invalid value: -5: may not specify a duration less than 10 minutes"
        );
        let error = seconds_of(&json!({"expirationSeconds": i64::MIN})).unwrap_err();
        assert_eq!(error.code, 422);
    }

    #[test]
    fn an_expiration_that_is_no_int64_is_kube_apiservers_400() {
        for (value, found) in [
            (json!(u64::MAX), "number 18446744073709551615"),
            (json!(1e30), "number 1e+30"),
            (json!(600.5), "number 600.5"),
            (json!("600"), "string"),
            (json!([600]), "array"),
            (json!({"s": 600}), "object"),
            (json!(true), "bool"),
        ] {
            let error = seconds_of(&json!({"expirationSeconds": value})).unwrap_err();
            assert_eq!(error.code, 400, "{value}");
            assert_eq!(
                error.message,
                format!(
                    "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: \
                     cannot unmarshal {found} into Go struct field \
                     TokenRequestSpec.spec.expirationSeconds of type int64"
                )
            );
        }
    }

    #[test]
    fn a_lowered_minimum_is_named_in_the_refusal() {
        let error = expiration_seconds(
            &json!({"expirationSeconds": 5}),
            "inf",
            Duration::from_secs(20),
        )
        .unwrap_err();
        assert!(
            error
                .message
                .ends_with("Invalid value: 5: may not specify a duration less than 20 seconds"),
            "{}",
            error.message
        );
        assert_eq!(
            expiration_seconds(
                &json!({"expirationSeconds": 20}),
                "inf",
                Duration::from_secs(20)
            ),
            Ok(20)
        );
    }

    #[test]
    fn a_spec_that_is_no_object_is_kube_apiservers_400() {
        for (spec, found) in [
            (json!("x"), "string"),
            (json!(7), "number"),
            (json!([1]), "array"),
            (json!(false), "bool"),
        ] {
            let error = spec_of(&json!({"spec": spec}), "SelfSubjectAccessReview").unwrap_err();
            assert_eq!(error.code, 400);
            assert_eq!(
                error.message,
                format!(
                    "SelfSubjectAccessReview in version \"v1\" cannot be handled as a \
                     SelfSubjectAccessReview: json: cannot unmarshal {found} into Go struct \
                     field SelfSubjectAccessReview.spec of type v1.SelfSubjectAccessReviewSpec"
                )
            );
        }
        assert_eq!(
            spec_of(&json!({"spec": null}), "TokenRequest"),
            Ok(json!({}))
        );
        assert_eq!(spec_of(&json!({}), "TokenRequest"), Ok(json!({})));
    }
}
