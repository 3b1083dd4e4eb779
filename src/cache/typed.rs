//! Typed reads: `get::<Pod>` and `list::<Pod>` through any [`Cache`], converting the cached
//! dynamic object into the k8s-openapi type.

use kube::core::{DynamicObject, GroupVersionKind, Resource};
use serde::de::DeserializeOwned;

use super::api::{Cache, ListOptions};
use super::error::{Error, Result};

/// The GVK of a statically typed kind.
#[must_use]
pub fn gvk_of<K: Resource<DynamicType = ()>>() -> GroupVersionKind {
    GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// Converts an object read through a [`Cache`] into `K` (what [`get`] and [`list`] do).
///
/// # Errors
/// [`Error::Convert`] when the object does not fit `K`.
pub fn convert<K: DeserializeOwned>(gvk: &GroupVersionKind, obj: &DynamicObject) -> Result<K> {
    serde_json::to_value(obj)
        .and_then(serde_json::from_value)
        .map_err(|source| Error::Convert {
            gvk: gvk.clone(),
            source,
        })
}

/// Reads one `K` through `cache`.
///
/// # Errors
/// As [`Cache::get`], or [`Error::Convert`].
pub async fn get<K>(cache: &dyn Cache, namespace: Option<&str>, name: &str) -> Result<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let gvk = gvk_of::<K>();
    let obj = cache.get(&gvk, namespace, name).await?;
    convert(&gvk, &obj)
}

/// Lists `K` through `cache`.
///
/// # Errors
/// As [`Cache::list`], or [`Error::Convert`].
pub async fn list<K>(cache: &dyn Cache, options: &ListOptions) -> Result<Vec<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let gvk = gvk_of::<K>();
    cache
        .list(&gvk, options)
        .await?
        .iter()
        .map(|obj| convert(&gvk, obj))
        .collect()
}
