//! Parsing request paths into what they address: discovery documents or a resource path
//! (`/api/v1/namespaces/{ns}/{plural}/{name}/{subresource}`).

/// A resource path, before the resource is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group ("" for `/api`).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace segment, if the path has one.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub plural: String,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource (`status`), if any.
    pub subresource: Option<String>,
}

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: every group.
    Groups,
    /// `/apis/{group}`: one group.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`: the `APIResourceList`.
    Resources {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// A resource or object.
    Resource(ResourcePath),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`: the index.
    OpenApiV3,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    OpenApiV3Group {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/debug/requests`.
    DebugRequests,
    /// `/debug/faults`.
    DebugFaults,
    /// Anything else.
    Unknown,
}

fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// Parse a request path (already stripped of its query).
#[must_use]
pub fn parse(path: &str) -> Route {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["debug", "requests"] => Route::DebugRequests,
        ["debug", "faults"] => Route::DebugFaults,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3,
        ["openapi", "v3", "api", v] => Route::OpenApiV3Group {
            group: String::new(),
            version: (*v).to_string(),
        },
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3Group {
            group: (*g).to_string(),
            version: (*v).to_string(),
        },
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group((*g).to_string()),
        ["api", v] => Route::Resources {
            group: String::new(),
            version: (*v).to_string(),
        },
        ["apis", g, v] => Route::Resources {
            group: (*g).to_string(),
            version: (*v).to_string(),
        },
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let mk = |ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace: ns.map(ToString::to_string),
            plural: plural.to_string(),
            name: name.map(ToString::to_string),
            subresource: sub.map(ToString::to_string),
        })
    };
    match rest {
        [plural] => mk(None, plural, None, None),
        // `/namespaces/{name}/status|finalize` is a namespace's subresource.
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            mk(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", ns, plural] => mk(Some(ns), plural, None, None),
        ["namespaces", ns, plural, name] => mk(Some(ns), plural, Some(name), None),
        ["namespaces", ns, plural, name, sub] => mk(Some(ns), plural, Some(name), Some(sub)),
        [plural, name] => mk(None, plural, Some(name), None),
        [plural, name, sub] => mk(None, plural, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_object_paths_split_into_parts() {
        let r = res("/apis/apps/v1/namespaces/ns1/deployments/web/status");
        assert_eq!(r.group, "apps");
        assert_eq!(r.namespace.as_deref(), Some("ns1"));
        assert_eq!(r.plural, "deployments");
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn a_namespace_itself_is_a_cluster_scoped_object() {
        let r = res("/api/v1/namespaces/ns1");
        assert_eq!(r.namespace, None);
        assert_eq!(r.plural, "namespaces");
        assert_eq!(r.name.as_deref(), Some("ns1"));
        let s = res("/api/v1/namespaces/ns1/status");
        assert_eq!(s.subresource.as_deref(), Some("status"));
        let l = res("/api/v1/namespaces/ns1/pods");
        assert_eq!(l.namespace.as_deref(), Some("ns1"));
        assert_eq!(l.plural, "pods");
    }

    #[test]
    fn discovery_paths_are_recognised() {
        assert_eq!(parse("/api"), Route::CoreVersions);
        assert_eq!(parse("/apis/"), Route::Groups);
        assert_eq!(
            parse("/apis/batch/v1"),
            Route::Resources {
                group: "batch".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/nope/x"), Route::Unknown);
    }
}
