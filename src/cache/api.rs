//! The `Cache` trait every layer of the tree implements, with its list options and its
//! self-description for `informant explain`.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::{DynamicObject, GroupVersionKind};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::error::Result;
use super::informer::InformerInfo;
use super::selector::{FieldSelector, LabelSelector};

/// Options of a list through the cache (controller-runtime's `client.ListOptions` as far as the
/// cache honours them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Only this namespace; `None` lists every namespace the cache holds.
    pub namespace: Option<String>,
    /// Only objects whose labels match.
    pub label_selector: Option<LabelSelector>,
    /// Only objects whose fields match; only exact matches (`=`, `==`) are supported.
    pub field_selector: Option<FieldSelector>,
    /// At most this many objects (0 or `None`: no limit).
    pub limit: Option<usize>,
    /// A continue token; always rejected by the cache.
    pub continue_token: Option<String>,
}

/// How one layer of the tree describes itself for `informant explain`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// `InformerCache`, `MultiNamespaceCache` or `ByKindCache`.
    pub cache: &'static str,
    /// Why this layer exists in its parent (`byObject v1/Pod`, `namespace team-a`, `default`).
    pub role: String,
    /// The namespace an `InformerCache` watches (`None`: all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Effective label selector of the informers this layer starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// Effective field selector of the informers this layer starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
    /// Effective transform (`none`, `stripManagedFields dropAnnotations[...]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// Reads hand out shared objects.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unsafe_disable_deep_copy: bool,
    /// Only metadata is cached.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub metadata_only: bool,
    /// Reads of a kind without informer fail instead of starting one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reader_fail_on_missing_informer: bool,
    /// Layers below this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Description>,
}

impl Description {
    /// A routing layer (`MultiNamespaceCache`, `ByKindCache`): it starts no informer of its
    /// own, so only its children carry selectors and settings.
    #[must_use]
    pub fn routing(cache: &'static str, role: &str, children: Vec<Description>) -> Self {
        Self {
            cache,
            role: role.to_string(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            transform: None,
            unsafe_disable_deep_copy: false,
            metadata_only: false,
            reader_fail_on_missing_informer: false,
            children,
        }
    }

    /// Renders the tree as indented text, one layer per line.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_text(0, &mut out);
        out
    }

    fn write_text(&self, depth: usize, out: &mut String) {
        use std::fmt::Write as _;
        let indent = "  ".repeat(depth);
        let _ = write!(out, "{indent}{} ({})", self.cache, self.role);
        if self.cache == "InformerCache" {
            let _ = write!(
                out,
                " namespace={}",
                self.namespace.as_deref().unwrap_or("<all>")
            );
            let _ = write!(
                out,
                " labelSelector={:?}",
                self.label_selector.as_deref().unwrap_or("")
            );
            let _ = write!(
                out,
                " fieldSelector={:?}",
                self.field_selector.as_deref().unwrap_or("")
            );
            let _ = write!(
                out,
                " transform={}",
                self.transform.as_deref().unwrap_or("none")
            );
            if self.unsafe_disable_deep_copy {
                out.push_str(" unsafeDisableDeepCopy");
            }
            if self.metadata_only {
                out.push_str(" metadataOnly");
            }
            if self.reader_fail_on_missing_informer {
                out.push_str(" readerFailOnMissingInformer");
            }
        }
        out.push('\n');
        for child in &self.children {
            child.write_text(depth + 1, out);
        }
    }
}

/// A read-through cache of Kubernetes objects (controller-runtime's `cache.Cache`), served from
/// informers. Implemented by [`super::InformerCache`], [`super::MultiNamespaceCache`] and
/// [`super::ByKindCache`]; [`super::build`] composes them from the options.
///
/// Reads hand out `Arc`s: a fresh copy per read, decoded from the compact stored form
/// (mutate it with `Arc::make_mut` at no extra cost), or, with `unsafeDisableDeepCopy`, the
/// cached parsed object itself (then `Arc::make_mut` copies on write, so the cache can never
/// be corrupted). `docs/cache-bench.md` has the memory and latency of both.
pub trait Cache: Send + Sync {
    /// Reads one object. `namespace` is ignored for cluster-scoped kinds.
    ///
    /// # Errors
    /// `NotFound`, or why the cache can not answer (see [`super::Error`]).
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Arc<DynamicObject>>>;

    /// Lists objects.
    ///
    /// # Errors
    /// Why the cache can not answer (see [`super::Error`]); an empty result is not an error.
    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Arc<DynamicObject>>>>;

    /// Makes sure informers for `gvk` exist (controller-runtime's `GetInformer`), and once the
    /// cache is started, waits for them to sync.
    ///
    /// # Errors
    /// The kind is unknown, the informer failed, or waiting timed out.
    #[doc(alias = "GetInformer")]
    fn ensure_informer<'a>(&'a self, gvk: &'a GroupVersionKind) -> BoxFuture<'a, Result<()>>;

    /// Starts every informer created so far, and every later one as it is created, on
    /// `tracker`; they stop when `shutdown` is cancelled.
    fn start(&self, tracker: &TaskTracker, shutdown: &CancellationToken);

    /// Waits until every informer started so far has synced.
    ///
    /// # Errors
    /// [`super::Error::Timeout`] when `cancel` fires first; [`super::Error::InformerFailed`]
    /// when an informer can not list its kind.
    #[doc(alias = "WaitForCacheSync")]
    fn wait_for_sync<'a>(&'a self, cancel: &'a CancellationToken) -> BoxFuture<'a, Result<()>>;

    /// The informers of this cache (and of the caches below it).
    fn informers(&self) -> Vec<InformerInfo>;

    /// This layer and the layers below it, for `informant explain`.
    fn describe(&self, role: &str) -> Description;

    /// Which layers would serve a read of `gvk` in `namespace`, outermost first, or the error a
    /// read would fail with before reaching an informer. Only resolves the kind's scope.
    ///
    /// # Errors
    /// The error the read would return (unknown namespace, kind not cached, ...).
    fn route<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<String>>>;
}
