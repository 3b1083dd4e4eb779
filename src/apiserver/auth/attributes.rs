//! What a request asks to do, in the authorizer's terms: kube-apiserver's request info
//! (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`, `NewRequestInfo`) read from the
//! method, path and query alone, before any routing.
//!
//! A path under `/api/{version}/` or `/apis/{group}/{version}/` is a resource request: its verb
//! comes from the method (`get` without a name becomes `list`, or `watch` with `watch=true`;
//! `delete` without a name becomes `deletecollection`), and a list or watch whose field selector
//! requires `metadata.name` to equal one value is named by it, so that a rule restricted by
//! `resourceNames` can allow it. Every other path is a non-resource request whose verb is the
//! lowercase method.

use axum::http::Method;

use crate::selector::FieldSelector;

/// What a request asks to do (kube-apiserver's `RequestInfo`, without the user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path addresses a resource (else a non-resource URL such as `/healthz`).
    pub resource_request: bool,
    /// The request path, as sent.
    pub path: String,
    /// The RBAC verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; the lowercase method for a non-resource request.
    pub verb: String,
    /// The API group, "" for the core group.
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace, "" for a cluster-scoped request (a namespace itself is in its own
    /// namespace: `GET /api/v1/namespaces/a` is in namespace `a`).
    pub namespace: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`status`, `token`), "" when none.
    pub subresource: String,
    /// The object's name, "" when none (or the `metadata.name` a list or watch selects).
    pub name: String,
}

/// The parts of a path, empty segments removed (`splitPath` upstream).
fn split(path: &str) -> Vec<String> {
    path.trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

/// The values of `key` in a raw query string.
fn query_values<'a>(pairs: &'a [(String, String)], key: &str) -> impl Iterator<Item = &'a str> {
    pairs
        .iter()
        .filter(move |(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether `name` can be a path segment (apimachinery `path.IsValidPathSegmentName`).
fn valid_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

impl RequestInfo {
    /// The request info of `method` on `path` with the raw `query`.
    #[must_use]
    pub fn new(method: &Method, path: &str, query: Option<&str>) -> Self {
        let mut info = Self {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..Self::default()
        };
        let parts = split(path);
        let rest: &[String] = match parts.first().map(String::as_str) {
            Some("api") if parts.len() >= 3 => {
                info.api_version.clone_from(&parts[1]);
                &parts[2..]
            }
            Some("apis") if parts.len() >= 4 => {
                info.api_group.clone_from(&parts[1]);
                info.api_version.clone_from(&parts[2]);
                &parts[3..]
            }
            _ => return info,
        };
        info.resource_request = true;
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
        let mut rest = rest;
        if rest[0] == "namespaces"
            && let Some(namespace) = rest.get(1)
        {
            info.namespace.clone_from(namespace);
            // `/namespaces/{ns}/status|finalize` is the namespace's own subresource.
            if rest.len() > 2 && !matches!(rest[2].as_str(), "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        if let Some(resource) = rest.first() {
            info.resource.clone_from(resource);
        }
        if let Some(name) = rest.get(1) {
            info.name.clone_from(name);
        }
        if let Some(subresource) = rest.get(2) {
            info.subresource.clone_from(subresource);
        }
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
        if info.name.is_empty() && info.verb == "get" {
            // Any value but false or 0 is true (apimachinery `Convert_Slice_string_To_bool`).
            let watch = query_values(&pairs, "watch")
                .next()
                .is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"));
            info.verb = if watch { "watch" } else { "list" }.to_string();
            if let Some(name) = query_values(&pairs, "fieldSelector")
                .next()
                .and_then(|s| FieldSelector::parse(s).ok())
                .and_then(|s| s.requires_exact_match("metadata.name").map(str::to_string))
                .filter(|name| valid_segment(name))
            {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_string();
        }
        info
    }

    /// A resource request, as `SelfSubjectAccessReview`'s `resourceAttributes` describe one.
    #[must_use]
    pub fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self {
            resource_request: true,
            verb: verb.to_string(),
            api_group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            ..Self::default()
        }
    }

    /// A non-resource request, as `nonResourceAttributes` describe one.
    #[must_use]
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.to_string(),
            path: path.to_string(),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &Method, target: &str) -> RequestInfo {
        let (path, query) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        RequestInfo::new(method, path, query)
    }

    /// (method, target, verb, group, namespace, resource, subresource, name).
    type Case = (
        Method,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    );

    /// (method, target, verb, group, namespace, resource, subresource, name), as upstream's
    /// `TestGetAPIRequestInfo` lists them.
    #[test]
    fn resource_requests_are_read_like_kube_apiserver_reads_them() {
        #[rustfmt::skip]
        let cases: &[Case] = &[
            (Method::GET, "/api/v1/namespaces", "list", "", "", "namespaces", "", ""),
            (Method::GET, "/api/v1/namespaces/other", "get", "", "other", "namespaces", "", "other"),
            (Method::GET, "/api/v1/namespaces/other/pods", "list", "", "other", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/other/pods/foo", "get", "", "other", "pods", "", "foo"),
            (Method::HEAD, "/api/v1/namespaces/other/pods/foo", "get", "", "other", "pods", "", "foo"),
            (Method::GET, "/api/v1/pods", "list", "", "", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/other/pods?watch=true", "watch", "", "other", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/other/pods?watch=false", "list", "", "other", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/other/pods?watch=1", "watch", "", "other", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/other/pods/foo?watch=true", "get", "", "other", "pods", "", "foo"),
            (Method::POST, "/api/v1/namespaces/other/pods", "create", "", "other", "pods", "", ""),
            (Method::PUT, "/api/v1/namespaces/other/pods/foo", "update", "", "other", "pods", "", "foo"),
            (Method::PATCH, "/api/v1/namespaces/other/pods/foo/status", "patch", "", "other", "pods", "status", "foo"),
            (Method::DELETE, "/api/v1/namespaces/other/pods/foo", "delete", "", "other", "pods", "", "foo"),
            (Method::DELETE, "/api/v1/namespaces/other/pods", "deletecollection", "", "other", "pods", "", ""),
            (Method::PUT, "/api/v1/namespaces/other/finalize", "update", "", "other", "namespaces", "finalize", "other"),
            (Method::GET, "/api/v1/namespaces/other/status", "get", "", "other", "namespaces", "status", "other"),
            (Method::POST, "/api/v1/namespaces/ops/serviceaccounts/inf/token", "create", "", "ops", "serviceaccounts", "token", "inf"),
            (Method::GET, "/apis/apps/v1/namespaces/other/deployments", "list", "apps", "other", "deployments", "", ""),
            (Method::GET, "/apis/informant.dev/v1alpha1/namespaces/ops/cacheconfigs?fieldSelector=metadata.name%3Dc&watch=true", "watch", "informant.dev", "ops", "cacheconfigs", "", "c"),
            (Method::GET, "/apis/informant.dev/v1alpha1/namespaces/ops/cacheconfigs?fieldSelector=metadata.name%3D%3Dc", "list", "informant.dev", "ops", "cacheconfigs", "", "c"),
            (Method::GET, "/api/v1/namespaces/ops/pods?fieldSelector=metadata.name!%3Dc", "list", "", "ops", "pods", "", ""),
            (Method::GET, "/api/v1/namespaces/ops/pods?fieldSelector=spec.nodeName%3Dn", "list", "", "ops", "pods", "", ""),
            (Method::DELETE, "/api/v1/namespaces/ops/pods?fieldSelector=metadata.name%3Dc", "deletecollection", "", "ops", "pods", "", ""),
            (Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create", "authorization.k8s.io", "", "selfsubjectaccessreviews", "", ""),
        ];
        for (method, target, verb, group, namespace, resource, subresource, name) in cases {
            let got = info(method, target);
            assert!(got.resource_request, "{target}");
            assert_eq!(
                (
                    got.verb.as_str(),
                    got.api_group.as_str(),
                    got.namespace.as_str(),
                    got.resource.as_str(),
                    got.subresource.as_str(),
                    got.name.as_str()
                ),
                (*verb, *group, *namespace, *resource, *subresource, *name),
                "{method} {target}"
            );
        }
    }

    #[test]
    fn everything_else_is_a_non_resource_request_with_the_method_as_verb() {
        for (method, path, verb) in [
            (Method::GET, "/healthz", "get"),
            (Method::GET, "/api", "get"),
            (Method::GET, "/api/v1", "get"),
            (Method::GET, "/apis/apps/v1", "get"),
            (Method::GET, "/apis/apps", "get"),
            (Method::POST, "/debug/faults", "post"),
            (Method::GET, "/openapi/v3/apis/apps/v1", "get"),
            (Method::HEAD, "/version", "head"),
        ] {
            let got = info(&method, path);
            assert!(!got.resource_request, "{path}");
            assert_eq!((got.verb.as_str(), got.path.as_str()), (verb, path));
        }
    }
}
