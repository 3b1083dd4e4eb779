//! `cache::Error`: every way a read through the cache tree can fail, with controller-runtime's
//! messages.

use kube::core::GroupVersionKind;

/// Prints a GVK the way apimachinery's `schema.GroupVersionKind.String()` does:
/// `<group>/<version>, Kind=<Kind>` (the core group prints as `/v1, Kind=Pod`).
#[must_use]
pub fn gvk_string(gvk: &GroupVersionKind) -> String {
    format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
}

/// Prints the qualified resource of a `NotFound` error the way controller-runtime's cache reader
/// builds it: `schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}.String()`, so the Kind
/// (not the plural) and `Kind.group` outside the core group.
#[must_use]
pub(crate) fn group_kind_string(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        gvk.kind.clone()
    } else {
        format!("{}.{}", gvk.kind, gvk.group)
    }
}

/// An error returned by a read (`get`, `list`), by `ensure_informer` or by `wait_for_sync`.
///
/// The caller-visible cases have their own variants so callers can branch on them; none of them
/// is `NotFound` except [`Error::NotFound`]. Retrying helps only for [`Error::Timeout`] and
/// [`Error::InformerFailed`] (once RBAC or the API server is fixed); the others need a change of
/// the config or of the request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cache tree was read before it was started
    /// (controller-runtime `ErrCacheNotStarted`, `pkg/cache/informer_cache.go`).
    #[error("the cache is not started, can not read objects")]
    NotStarted,

    /// `readerFailOnMissingInformer` is set and no informer exists for this kind; call
    /// `ensure_informer` first (controller-runtime `ErrResourceNotCached`,
    /// `pkg/cache/internal/informers.go`).
    #[error("{} is not cached", gvk_string(.gvk))]
    KindNotCached {
        /// The kind that was read.
        gvk: GroupVersionKind,
    },

    /// A get in a namespace that `defaultNamespaces` (or `byObject[].namespaces`) does not list,
    /// that no namespace selector matches, and there is no `""` entry to fall back to
    /// (`pkg/cache/multi_namespace_cache.go`).
    #[error(
        "unable to get: {namespace}/{name} because of unknown namespace for the cache{}",
        not_selected(namespace, selector.as_deref())
    )]
    UnknownNamespaceGet {
        /// The namespace of the request.
        namespace: String,
        /// The name of the request.
        name: String,
        /// The namespace selector of the cache, which the namespace does not match (now).
        selector: Option<String>,
    },

    /// A list in a namespace that the multi-namespace cache does not know, and there is no `""`
    /// entry to fall back to (`pkg/cache/multi_namespace_cache.go`).
    #[error(
        "unable to list: {namespace} because of unknown namespace for the cache{}",
        not_selected(namespace, selector.as_deref())
    )]
    UnknownNamespaceList {
        /// The namespace of the request.
        namespace: String,
        /// The namespace selector of the cache, which the namespace does not match (now).
        selector: Option<String>,
    },

    /// A `byObject` kind the API server does not serve (yet): no informer runs for it until
    /// its `CustomResourceDefinition` is established, then it starts.
    #[error("{} is waiting for its kind: {reason}", gvk_string(.gvk))]
    WaitingForKind {
        /// The kind that was read.
        gvk: GroupVersionKind,
        /// Why it is not served.
        reason: String,
    },

    /// A list carried a continue token; the cache returns everything at once
    /// (`pkg/cache/internal/cache_reader.go`).
    #[error("continue list option is not supported by the cache")]
    ContinueNotSupported,

    /// A list carried a field selector that is not a conjunction of exact matches (`=`, `==`)
    /// (`pkg/cache/internal/cache_reader.go`).
    #[error("non-exact field matches are not supported by the cache")]
    NonExactFieldSelector,

    /// The object is not in the cache. The message is apimachinery's `NotFound` message built the
    /// way controller-runtime's cache reader builds it: the Kind, not the plural, qualified by
    /// the group outside the core group (`Pod "x" not found`, `Deployment.apps "x" not found`).
    #[error("{} \"{name}\" not found", group_kind_string(.gvk))]
    NotFound {
        /// The kind that was read.
        gvk: GroupVersionKind,
        /// The namespace of the request (`None` for cluster-scoped kinds).
        namespace: Option<String>,
        /// The name of the request.
        name: String,
    },

    /// Waiting for an informer to sync was cancelled or timed out (controller-runtime returns
    /// `apierrors.NewTimeoutError("failed waiting for *v1.Pod Informer to sync")`).
    #[error("Timeout: failed waiting for {} informer to sync", gvk_string(.gvk))]
    Timeout {
        /// The kind whose informer did not sync.
        gvk: GroupVersionKind,
    },

    /// The informer cannot list or watch its kind, e.g. the API server answered 403 Forbidden.
    /// The informer keeps retrying with backoff in the background; a read fails at once instead
    /// of waiting forever (controller-runtime#1653).
    #[error(
        "informer for {} in {} can not sync: {reason}",
        gvk_string(.gvk),
        namespace.as_deref().map_or_else(|| "all namespaces".to_string(), |ns| format!("namespace {ns}"))
    )]
    InformerFailed {
        /// The kind of the informer.
        gvk: GroupVersionKind,
        /// The namespace the informer watches (`None`: all namespaces).
        namespace: Option<String>,
        /// The watcher's last error, as text.
        reason: String,
    },

    /// The API server does not serve the kind: its group version serves other kinds (listed,
    /// with the closest one suggested), or the group version is not served at all.
    #[error("{}", unknown_kind(.gvk, .known))]
    UnknownKind {
        /// The kind that was asked for.
        gvk: GroupVersionKind,
        /// The kinds the group version serves; empty when it serves none (not served at all).
        known: Vec<String>,
    },

    /// Discovery could not be asked about the kind (the API server is unreachable, refused the
    /// request, ...). Retrying may succeed.
    #[error("cannot discover kind {}", gvk_string(.gvk))]
    Discovery {
        /// The kind that was asked for.
        gvk: GroupVersionKind,
        /// The discovery error.
        #[source]
        source: Box<kube::Error>,
    },

    /// A cluster-scoped kind was routed to a multi-namespace cache that has no cluster cache
    /// (a `byObject` entry with namespaces for a cluster-scoped kind).
    #[error("{} is cluster-scoped but its cache only watches namespaces", gvk_string(.gvk))]
    ClusterScopedNotCached {
        /// The kind that was read.
        gvk: GroupVersionKind,
    },

    /// An object in the compact store could not be decoded (the cache wrote the bytes itself,
    /// so this is a bug in the cache, not in the object).
    #[error("cached {} {object} can not be decoded", gvk_string(.gvk))]
    Decode {
        /// The kind that was read.
        gvk: GroupVersionKind,
        /// The object, as `namespace/name` (or `name` when cluster-scoped).
        object: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },

    /// The object read from the cache could not be converted to the requested Rust type.
    #[error("cached {} can not be converted to the requested type", gvk_string(.gvk))]
    Convert {
        /// The kind that was read.
        gvk: GroupVersionKind,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// `; namespace c is not listed and does not match the namespaceSelector "team=shop"` when a
/// selector chose the cache's namespaces.
fn not_selected(namespace: &str, selector: Option<&str>) -> String {
    selector.map_or_else(String::new, |selector| {
        format!(
            "; namespace {namespace} is not listed and does not match the namespaceSelector {selector:?}"
        )
    })
}

/// `no kind "Widgit" in example.com/v1 (did you mean "Widget"?); known kinds in
/// example.com/v1: Gadget, Widget`, or that the group version is not served.
fn unknown_kind(gvk: &GroupVersionKind, known: &[String]) -> String {
    let api_version = gvk.api_version();
    if known.is_empty() {
        return format!(
            "no kind {:?} in {api_version}: the API server does not serve {api_version}",
            gvk.kind
        );
    }
    let hint = crate::suggest::closest(&gvk.kind, known.iter())
        .map(|best| format!(" (did you mean {best:?}?)"))
        .unwrap_or_default();
    format!(
        "no kind {:?} in {api_version}{hint}; known kinds in {api_version}: {}",
        gvk.kind,
        known.join(", ")
    )
}

impl Error {
    /// Whether this is the object-level `NotFound` (and not "kind not cached" or "unknown
    /// namespace", which controller-runtime deliberately keeps apart).
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether the kind is not cached because `readerFailOnMissingInformer` is set.
    #[must_use]
    pub fn is_kind_not_cached(&self) -> bool {
        matches!(self, Self::KindNotCached { .. })
    }

    /// Whether the namespace of the request is not served by the cache tree.
    #[must_use]
    pub fn is_unknown_namespace(&self) -> bool {
        matches!(
            self,
            Self::UnknownNamespaceGet { .. } | Self::UnknownNamespaceList { .. }
        )
    }

    /// Whether waiting for an informer timed out or was cancelled.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// Whether retrying later may succeed without changing the config or the request.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. }
                | Self::InformerFailed { .. }
                | Self::NotStarted
                | Self::Discovery { .. }
                | Self::WaitingForKind { .. }
        )
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn an_unknown_kind_is_one_line_naming_the_known_kinds_and_the_closest() {
        let error = Error::UnknownKind {
            gvk: GroupVersionKind::gvk("", "v1", "ConfigMaps"),
            known: vec!["ConfigMap".into(), "Pod".into()],
        };
        assert_eq!(
            error.to_string(),
            "no kind \"ConfigMaps\" in v1 (did you mean \"ConfigMap\"?); known kinds in v1: ConfigMap, Pod"
        );
        let error = Error::UnknownKind {
            gvk: GroupVersionKind::gvk("example.com", "v1", "Widget"),
            known: Vec::new(),
        };
        assert_eq!(
            error.to_string(),
            "no kind \"Widget\" in example.com/v1: the API server does not serve example.com/v1"
        );
        assert!(
            std::error::Error::source(&error).is_none(),
            "no Debug text in the chain"
        );
    }

    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(group, version, kind)
    }

    #[test]
    fn kind_not_cached_prints_the_gvk_like_apimachinery() {
        let core = Error::KindNotCached {
            gvk: gvk("", "v1", "Pod"),
        };
        assert_eq!(core.to_string(), "/v1, Kind=Pod is not cached");
        let apps = Error::KindNotCached {
            gvk: gvk("apps", "v1", "Deployment"),
        };
        assert_eq!(apps.to_string(), "apps/v1, Kind=Deployment is not cached");
    }

    #[test]
    fn not_found_names_the_kind_qualified_by_its_group() {
        let core = Error::NotFound {
            gvk: gvk("", "v1", "Pod"),
            namespace: Some("a".into()),
            name: "x".into(),
        };
        assert_eq!(core.to_string(), "Pod \"x\" not found");
        let apps = Error::NotFound {
            gvk: gvk("apps", "v1", "Deployment"),
            namespace: None,
            name: "x".into(),
        };
        assert_eq!(apps.to_string(), "Deployment.apps \"x\" not found");
        assert!(core.is_not_found());
    }

    #[test]
    fn namespace_errors_match_controller_runtime_and_are_not_not_found() {
        let get = Error::UnknownNamespaceGet {
            namespace: "c".into(),
            name: "x".into(),
            selector: None,
        };
        assert_eq!(
            get.to_string(),
            "unable to get: c/x because of unknown namespace for the cache"
        );
        let list = Error::UnknownNamespaceList {
            namespace: "c".into(),
            selector: None,
        };
        assert_eq!(
            list.to_string(),
            "unable to list: c because of unknown namespace for the cache"
        );
        assert!(!get.is_not_found() && get.is_unknown_namespace() && list.is_unknown_namespace());
        let selected = Error::UnknownNamespaceList {
            namespace: "c".into(),
            selector: Some("team=shop".into()),
        };
        assert_eq!(
            selected.to_string(),
            "unable to list: c because of unknown namespace for the cache; namespace c is not \
             listed and does not match the namespaceSelector \"team=shop\""
        );
    }

    #[test]
    fn fixed_messages_match_controller_runtime() {
        assert_eq!(
            Error::NotStarted.to_string(),
            "the cache is not started, can not read objects"
        );
        assert_eq!(
            Error::ContinueNotSupported.to_string(),
            "continue list option is not supported by the cache"
        );
        assert_eq!(
            Error::NonExactFieldSelector.to_string(),
            "non-exact field matches are not supported by the cache"
        );
    }
}
