//! Typed reads: `get::<Pod>` and `list::<Pod>` through any [`Cache`], converting the cached
//! dynamic object into the k8s-openapi type.

use std::sync::Arc;

use kube::core::{DynamicObject, GroupVersionKind, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::api::{Cache, ListOptions};
use super::error::{Error, Result};

/// The GVK of a statically typed kind.
#[must_use]
pub fn gvk_of<K: Resource<DynamicType = ()>>() -> GroupVersionKind {
    GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// Converts an object read through a [`Cache`] into `K` (what [`get`] and [`list`] do). A
/// deep copy (the only reference to its object) is taken apart instead of copied again; a
/// shared object (`unsafeDisableDeepCopy`) is copied.
///
/// # Errors
/// [`Error::Convert`] when the object does not fit `K`.
pub fn from_cached<K: DeserializeOwned>(
    gvk: &GroupVersionKind,
    obj: Arc<DynamicObject>,
) -> Result<K> {
    let convert_error = |source| Error::Convert {
        gvk: gvk.clone(),
        source,
    };
    let owned = match Arc::try_unwrap(obj) {
        Ok(owned) => owned,
        Err(shared) => {
            return serde_json::to_value(&*shared)
                .and_then(serde_json::from_value)
                .map_err(convert_error);
        }
    };
    let DynamicObject {
        types,
        metadata,
        data,
    } = owned;
    // The JSON `DynamicObject` serializes to: its `data` fields, `metadata`, `apiVersion`, `kind`.
    let mut fields = match data {
        Value::Object(fields) => fields,
        Value::Null => serde_json::Map::new(),
        other => {
            let obj = DynamicObject {
                types,
                metadata,
                data: other,
            };
            return serde_json::to_value(&obj)
                .and_then(serde_json::from_value)
                .map_err(convert_error);
        }
    };
    fields.insert(
        "metadata".to_string(),
        serde_json::to_value(metadata).map_err(convert_error)?,
    );
    if let Some(types) = types {
        fields.insert("apiVersion".to_string(), Value::String(types.api_version));
        fields.insert("kind".to_string(), Value::String(types.kind));
    }
    serde_json::from_value(Value::Object(fields)).map_err(convert_error)
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
    from_cached(&gvk, obj)
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
        .into_iter()
        .map(|obj| from_cached(&gvk, obj))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ApiResource;

    #[test]
    fn owned_and_shared_objects_convert_to_the_same_typed_object() {
        let mut obj = DynamicObject::new("one", &ApiResource::erase::<ConfigMap>(&())).within("a");
        obj.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        obj.data = serde_json::json!({"data": {"k": "v"}});
        let gvk = gvk_of::<ConfigMap>();
        let shared = Arc::new(obj.clone());
        let _keep = Arc::clone(&shared);
        let from_shared: ConfigMap = from_cached(&gvk, shared).unwrap();
        let from_owned: ConfigMap = from_cached(&gvk, Arc::new(obj)).unwrap();
        assert_eq!(from_shared, from_owned);
        assert_eq!(from_owned.metadata.namespace.as_deref(), Some("a"));
        assert_eq!(from_owned.data.unwrap()["k"], "v");
    }

    #[test]
    fn an_object_that_does_not_fit_the_type_is_a_convert_error() {
        let mut obj = DynamicObject::new("one", &ApiResource::erase::<ConfigMap>(&()));
        obj.data = serde_json::json!({"data": "not a map"});
        let err = from_cached::<ConfigMap>(&gvk_of::<ConfigMap>(), Arc::new(obj)).unwrap_err();
        assert!(matches!(err, Error::Convert { .. }), "{err}");
    }
}
