//! The controller's own scope: label and field selectors that narrow, in code, what the
//! cache's scope (a `CacheConfig` operations may edit) hands the reconcile.

use std::fmt::Debug;
use std::sync::Arc;

use kube::core::Resource;
use serde::de::DeserializeOwned;

use super::builder::Controller;
use super::predicate::Filter;
use crate::selector::{FieldSelector, LabelSelector};

/// Whether an object of `K` is in the controller's own scope (its label and field selectors).
pub(super) type InScope<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Reconciles only the objects whose labels `selector` matches, on top of the cache's
    /// scope (the `CacheConfig` may be edited to hold more; the controller stays to its own):
    /// an object outside it is never handed to the reconcile, whatever triggered it
    /// (controller-runtime's `WithEventFilter` on a label selector, kube-rs's
    /// `watcher::Config::labels`). Several selectors must all match.
    ///
    /// ```
    /// # fn demo() -> Result<(), informant::selector::ParseError> {
    /// use informant::controller::Controller;
    /// use informant::selector::LabelSelector;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let controller = Controller::<ConfigMap>::new("demo")
    ///     .labels(LabelSelector::parse("app=demo")?);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn labels(mut self, selector: LabelSelector) -> Self {
        self.scope.push(Arc::new(move |object: &K| {
            let labels = object.meta().labels.as_ref();
            selector.matches_with(|key| labels.and_then(|l| l.get(key)).map(String::as_str))
        }));
        self
    }

    /// Reconciles only the objects `selector` matches (the fields of the object as the API
    /// server's field selectors name them: `metadata.name`, `metadata.namespace`,
    /// `spec.nodeName`, ...), on top of the cache's scope, as [`Controller::labels`].
    #[must_use]
    pub fn fields(mut self, selector: FieldSelector) -> Self
    where
        K: serde::Serialize,
    {
        self.scope.push(Arc::new(move |object: &K| {
            serde_json::to_value(object).is_ok_and(|value| selector.matches_object(&value))
        }));
        self
    }
}

/// Whether `object` is in the controller's own selectors; the predicates' memory (`seen`)
/// notes what a reconcile read either way.
pub(super) fn narrowed<K>(scope: &[InScope<K>], seen: Option<&Filter<K>>, object: &K) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    if let Some(filter) = seen {
        filter.saw(object.meta());
    }
    scope.iter().all(|in_scope| in_scope(object))
}
