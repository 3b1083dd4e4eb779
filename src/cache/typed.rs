//! Typed reads: `get::<Pod>` and `list::<Pod>` through any [`Cache`], decoded straight into
//! the k8s-openapi type.
//!
//! A read names its type with an [`As`] decoder, which the cache tree hands down to the
//! informer holding the object ([`Cache::get_as`]). With deep-copying reads (the default) the
//! informer decodes its compact stored bytes once, straight into `K`. With
//! `unsafeDisableDeepCopy` it converts its parsed object into `K` on the first typed read and
//! keeps that `Arc<K>` beside it, so later reads share it until the object changes.
//!
//! ## Memory usage
//! Only with `unsafeDisableDeepCopy`, and only for objects read typed: each keeps one typed
//! copy until it changes or is deleted (`benches/cache.rs`: about 6 KiB for a 1.2 KiB
//! `ConfigMap`, beside its 7 KiB parsed `DynamicObject`). A store of a kind never read typed
//! pays an empty slot per object (48 bytes with its wrapper). Reading one kind as two Rust
//! types shares the copy of the first type read; the other is converted on each read.

use std::any::{Any, TypeId};
use std::marker::PhantomData;
use std::sync::Arc;

use kube::api::TypeMeta;
use kube::core::{DynamicObject, GroupVersionKind, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::api::{Cache, ListOptions};
use super::compact::{self, CompactObject};
use super::error::{Error, Result};

/// An object of the type a [`Decoder`] produces, type-erased so that the [`Cache`] trait stays
/// object safe; [`get_arc`] and `list_arc` downcast it.
pub type AnyObject = Arc<dyn Any + Send + Sync>;

/// Decodes cached objects into one type (implemented by [`As`]); what a typed read passes down
/// the cache tree. A [`Cache`] implementation only forwards it, to [`Cache::get_as`] of the
/// cache below or to [`super::Informer::get_as`].
pub trait Decoder: Send + Sync {
    /// The type produced (`TypeId::of::<K>()`).
    fn output(&self) -> TypeId;

    /// A fresh object decoded from its compact stored form, with `types` as its `apiVersion`
    /// and `kind`.
    ///
    /// # Errors
    /// The object does not fit the type.
    fn decode(
        &self,
        stored: &CompactObject,
        types: &TypeMeta,
    ) -> std::result::Result<AnyObject, serde_json::Error>;

    /// A fresh object converted from a parsed one, with `types` as its `apiVersion` and
    /// `kind` (`obj.types` when `None`).
    ///
    /// # Errors
    /// The object does not fit the type.
    fn convert(
        &self,
        obj: &DynamicObject,
        types: Option<&TypeMeta>,
    ) -> std::result::Result<AnyObject, serde_json::Error>;

    /// Whether a store sharing its objects (`unsafeDisableDeepCopy`) keeps what
    /// [`Decoder::convert`] made as the object's typed copy, for later reads of the type to
    /// share. Default `true`; a decoder of something else than the object itself (a
    /// controller's stubs) says `false`, so it never takes the slot of the type reconciles
    /// read.
    fn keep(&self) -> bool {
        true
    }
}

/// The [`Decoder`] into `K`.
pub struct As<K>(PhantomData<fn() -> K>);

impl<K> As<K> {
    /// The decoder into `K`.
    #[must_use]
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<K> Default for As<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> Clone for As<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for As<K> {}

impl<K> std::fmt::Debug for As<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "As<{}>", std::any::type_name::<K>())
    }
}

impl<K: DeserializeOwned + Send + Sync + 'static> Decoder for As<K> {
    fn output(&self) -> TypeId {
        TypeId::of::<K>()
    }

    fn decode(
        &self,
        stored: &CompactObject,
        types: &TypeMeta,
    ) -> std::result::Result<AnyObject, serde_json::Error> {
        Ok(Arc::new(stored.decode_as::<K>(types)?))
    }

    fn convert(
        &self,
        obj: &DynamicObject,
        types: Option<&TypeMeta>,
    ) -> std::result::Result<AnyObject, serde_json::Error> {
        Ok(Arc::new(compact::convert_as::<K>(obj, types)?))
    }
}

/// The GVK of a statically typed kind.
#[must_use]
pub fn gvk_of<K: Resource<DynamicType = ()>>() -> GroupVersionKind {
    GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// `obj` as the `K` it is. A cache answering another type than its decoder's breaks the
/// [`Cache::get_as`] contract; that is reported as [`Error::Convert`] rather than a panic.
///
/// # Errors
/// [`Error::Convert`] when `obj` is not a `K`.
pub fn downcast<K: Send + Sync + 'static>(
    gvk: &GroupVersionKind,
    obj: AnyObject,
) -> Result<Arc<K>> {
    obj.downcast::<K>().map_err(|_| Error::Convert {
        gvk: gvk.clone(),
        source: <serde_json::Error as serde::de::Error>::custom(format!(
            "the cache answered another type than {}",
            std::any::type_name::<K>()
        )),
    })
}

/// Converts an object already read through [`Cache::get`] into `K`. A deep copy (the only
/// reference to its object) is taken apart instead of copied again; a shared object
/// (`unsafeDisableDeepCopy`) is copied. Reading with [`get`] instead decodes once, straight
/// into `K`.
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

/// Reads one `K` through `cache`, shared: a fresh object with deep-copying reads (the only
/// reference: `Arc::make_mut` and `Arc::unwrap_or_clone` do not copy it), or, with
/// `unsafeDisableDeepCopy`, the typed copy the cache keeps for the object (every read of the
/// unchanged object returns the same `Arc`; `Arc::make_mut` copies on write).
///
/// ```no_run
/// # async fn demo(tree: &dyn informant::cache::Cache) -> informant::cache::Result<()> {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let mut settings =
///     informant::cache::typed::get_arc::<ConfigMap>(tree, Some("team-a"), "settings").await?;
/// // Copies only when the cache shares the object (`unsafeDisableDeepCopy`).
/// Arc::make_mut(&mut settings).data = None;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`Cache::get`] (e.g. [`Error::NotFound`]), or [`Error::Convert`] when the object does
/// not fit `K`.
pub async fn get_arc<K>(cache: &dyn Cache, namespace: Option<&str>, name: &str) -> Result<Arc<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    let gvk = gvk_of::<K>();
    let obj = cache.get_as(&gvk, namespace, name, &As::<K>::new()).await?;
    downcast(&gvk, obj)
}

/// Reads one `K` through `cache`, owned: [`get_arc`] unwrapped (a copy only with
/// `unsafeDisableDeepCopy`).
///
/// # Errors
/// As [`get_arc`].
pub async fn get<K>(cache: &dyn Cache, namespace: Option<&str>, name: &str) -> Result<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
{
    get_arc(cache, namespace, name)
        .await
        .map(Arc::unwrap_or_clone)
}

/// Lists `K` through `cache`, shared as [`get_arc`] shares; same selection and order as
/// [`Cache::list`].
///
/// # Errors
/// As [`Cache::list`], or [`Error::Convert`] when an object does not fit `K`.
pub(crate) async fn list_arc<K>(cache: &dyn Cache, options: &ListOptions) -> Result<Vec<Arc<K>>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
{
    let gvk = gvk_of::<K>();
    cache
        .list_as(&gvk, options, &As::<K>::new())
        .await?
        .into_iter()
        .map(|obj| downcast(&gvk, obj))
        .collect()
}

/// Lists `K` through `cache`, owned: `list_arc` unwrapped.
///
/// # Errors
/// As `list_arc`.
pub async fn list<K>(cache: &dyn Cache, options: &ListOptions) -> Result<Vec<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Send + Sync + 'static,
{
    Ok(list_arc(cache, options)
        .await?
        .into_iter()
        .map(Arc::unwrap_or_clone)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{ByKindCache, informer_cache::Context};
    use crate::cache::{Informer, InformerCache, InformerSettings, Transform};
    use crate::selector::{FieldSelector, LabelSelector};
    use futures::stream;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::core::ApiResource;
    use kube::runtime::watcher;
    use serde::de::DeserializeOwned;
    use tokio_util::{sync::CancellationToken, task::TaskTracker};

    fn object<K: Resource<DynamicType = ()>>(ns: &str, name: &str, body: &Value) -> DynamicObject {
        let mut obj = DynamicObject::new(name, &ApiResource::erase::<K>(&())).within(ns);
        obj.metadata.labels = body["labels"].as_object().map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect()
        });
        obj.metadata.resource_version = Some("7".into());
        obj.data = body["data"].clone();
        obj
    }

    fn config_maps() -> Vec<DynamicObject> {
        vec![
            object::<ConfigMap>(
                "a",
                "one",
                &serde_json::json!({"labels": {"app": "web", "secret": "x"}, "data": {"data": {"k": "v"}}}),
            ),
            object::<ConfigMap>(
                "a",
                "two",
                &serde_json::json!({"labels": {"app": "db"}, "data": {"data": {"k": "w"}, "immutable": true}}),
            ),
            object::<ConfigMap>("b", "one", &serde_json::json!({"data": {}})),
        ]
    }

    fn pods() -> Vec<DynamicObject> {
        let pod = |ns, name, node, app| {
            object::<Pod>(
                ns,
                name,
                &serde_json::json!({
                    "labels": {"app": app},
                    "data": {
                        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1"}]},
                        "status": {"phase": "Running", "podIP": "10.0.0.1"},
                    },
                }),
            )
        };
        vec![
            pod("a", "p1", "n1", "web"),
            pod("a", "p2", "n2", "web"),
            pod("b", "p1", "n1", "db"),
        ]
    }

    /// A started cache over all namespaces whose `K` informer holds `objects`.
    async fn cache_of<K: Resource<DynamicType = ()>>(
        settings: &InformerSettings,
        objects: Vec<DynamicObject>,
    ) -> (InformerCache, Arc<Informer>) {
        let cache = InformerCache::new(Context::offline(true), None, settings.clone());
        cache.start(&TaskTracker::new(), &CancellationToken::new());
        let informer = Arc::new(Informer::new(
            gvk_of::<K>(),
            ApiResource::erase::<K>(&()),
            true,
            None,
            settings.clone(),
        ));
        let mut events = vec![Ok(watcher::Event::Init)];
        events.extend(
            objects
                .into_iter()
                .map(|o| Ok(watcher::Event::InitApply(o))),
        );
        events.push(Ok(watcher::Event::InitDone));
        apply(&informer, events).await;
        cache.insert_informer(Arc::clone(&informer));
        (cache, informer)
    }

    async fn apply(
        informer: &Informer,
        events: Vec<std::result::Result<watcher::Event<DynamicObject>, watcher::Error>>,
    ) {
        let writer = informer.take_writer().unwrap();
        informer
            .run_events(stream::iter(events), writer, CancellationToken::new())
            .await;
    }

    fn settings(shared: bool) -> InformerSettings {
        InformerSettings {
            unsafe_disable_deep_copy: shared,
            ..InformerSettings::default()
        }
    }

    /// Every typed read of `K` through `cache` equals the dynamic read converted.
    async fn assert_typed_reads_equal_dynamic<K>(cache: &dyn Cache, lists: &[ListOptions])
    where
        K: Resource<DynamicType = ()>
            + DeserializeOwned
            + Clone
            + PartialEq
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let gvk = gvk_of::<K>();
        for options in lists {
            let dynamic = cache.list(&gvk, options).await.unwrap();
            let converted: Vec<K> = dynamic
                .iter()
                .map(|o| from_cached(&gvk, Arc::clone(o)).unwrap())
                .collect();
            let typed: Vec<K> = list(cache, options).await.unwrap();
            assert_eq!(typed, converted, "{options:?}");
            for obj in &dynamic {
                let (ns, name) = (
                    obj.metadata.namespace.as_deref(),
                    obj.metadata.name.as_deref(),
                );
                let one: K = get(cache, ns, name.unwrap()).await.unwrap();
                let dynamic_one = cache.get(&gvk, ns, name.unwrap()).await.unwrap();
                assert_eq!(one, from_cached::<K>(&gvk, dynamic_one).unwrap());
            }
        }
    }

    fn list_options(
        labels: Option<&str>,
        fields: Option<&str>,
        namespace: Option<&str>,
    ) -> ListOptions {
        ListOptions {
            namespace: namespace.map(str::to_string),
            label_selector: labels.map(|l| LabelSelector::parse(l).unwrap()),
            field_selector: fields.map(|f| FieldSelector::parse(f).unwrap()),
            ..ListOptions::default()
        }
    }

    #[tokio::test]
    async fn typed_reads_equal_the_dynamic_reads_converted_for_config_maps_and_pods() {
        for shared in [false, true] {
            let (cache, _) = cache_of::<ConfigMap>(&settings(shared), config_maps()).await;
            let lists = [
                ListOptions::default(),
                list_options(Some("app=web"), None, None),
                list_options(None, Some("metadata.name=one"), None),
                list_options(None, None, Some("a")),
                ListOptions {
                    limit: Some(2),
                    ..ListOptions::default()
                },
            ];
            assert_typed_reads_equal_dynamic::<ConfigMap>(&cache, &lists).await;
            let listed: Vec<ConfigMap> = list(&cache, &ListOptions::default()).await.unwrap();
            assert_eq!(listed.len(), 3, "shared={shared}");

            let (cache, _) = cache_of::<Pod>(&settings(shared), pods()).await;
            let lists = [
                ListOptions::default(),
                list_options(None, Some("spec.nodeName=n1"), None),
                list_options(
                    Some("app=web"),
                    Some("spec.nodeName=n1,status.phase=Running"),
                    None,
                ),
                list_options(None, Some("spec.nodeName=n3"), None),
                list_options(None, Some("metadata.namespace=b"), None),
            ];
            assert_typed_reads_equal_dynamic::<Pod>(&cache, &lists).await;
            let on_n1: Vec<Pod> = list(&cache, &lists[1]).await.unwrap();
            assert_eq!(on_n1.len(), 2, "shared={shared}");
            let pod: Pod = get(&cache, Some("a"), "p1").await.unwrap();
            assert_eq!(
                pod.spec.unwrap().containers[0].image.as_deref(),
                Some("nginx:1")
            );
            assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
        }
    }

    #[tokio::test]
    async fn a_routing_layer_forwards_typed_reads_to_the_informer() {
        for shared in [false, true] {
            let (cache, _) = cache_of::<Pod>(&settings(shared), pods()).await;
            let cache: Arc<dyn Cache> = Arc::new(cache);
            let by_kind = ByKindCache::new(vec![(gvk_of::<Pod>(), Arc::clone(&cache))], cache);
            assert_typed_reads_equal_dynamic::<Pod>(&by_kind, &[ListOptions::default()]).await;
            if shared {
                let a = get_arc::<Pod>(&by_kind, Some("a"), "p1").await.unwrap();
                let b = get_arc::<Pod>(&by_kind, Some("a"), "p1").await.unwrap();
                assert!(
                    Arc::ptr_eq(&a, &b),
                    "forwarded to the informer's shared copy"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_mutated_deep_copy_leaves_the_cache_unchanged() {
        for shared in [false, true] {
            let (cache, _) = cache_of::<ConfigMap>(&settings(shared), config_maps()).await;
            let mut copy = get_arc::<ConfigMap>(&cache, Some("a"), "one")
                .await
                .unwrap();
            let cm = Arc::make_mut(&mut copy);
            cm.data = None;
            cm.metadata.labels = None;
            let mut listed = list_arc::<ConfigMap>(&cache, &ListOptions::default())
                .await
                .unwrap();
            Arc::make_mut(&mut listed[0]).data = None;
            let mut owned: ConfigMap = get(&cache, Some("a"), "one").await.unwrap();
            owned.metadata.name = None;
            let again: ConfigMap = get(&cache, Some("a"), "one").await.unwrap();
            assert_eq!(again.data.unwrap()["k"], "v", "shared={shared}");
            assert_eq!(
                again.metadata.labels.unwrap()["app"],
                "web",
                "shared={shared}"
            );
            assert_eq!(
                again.metadata.name.as_deref(),
                Some("one"),
                "shared={shared}"
            );
        }
    }

    #[tokio::test]
    async fn deep_copies_are_fresh_and_unique_on_every_read() {
        let (cache, _) = cache_of::<ConfigMap>(&settings(false), config_maps()).await;
        let a = get_arc::<ConfigMap>(&cache, Some("a"), "one")
            .await
            .unwrap();
        let b = get_arc::<ConfigMap>(&cache, Some("a"), "one")
            .await
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(
            Arc::strong_count(&a),
            1,
            "make_mut and unwrap_or_clone do not copy"
        );
    }

    #[tokio::test]
    async fn without_deep_copy_gets_and_lists_share_one_typed_copy() {
        let (cache, informer) = cache_of::<ConfigMap>(&settings(true), config_maps()).await;
        let a = get_arc::<ConfigMap>(&cache, Some("a"), "one")
            .await
            .unwrap();
        let b = get_arc::<ConfigMap>(&cache, Some("a"), "one")
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let listed = list_arc::<ConfigMap>(&cache, &list_options(None, None, Some("a")))
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&a, &listed[0]), "list shares the copy get made");
        assert!(!Arc::ptr_eq(&a, &listed[1]));
        let typed = informer
            .get_as(Some("a"), "one", &As::<ConfigMap>::new())
            .unwrap();
        let typed = downcast::<ConfigMap>(&gvk_of::<ConfigMap>(), typed).unwrap();
        assert!(Arc::ptr_eq(&typed, &a));
    }

    #[tokio::test]
    async fn not_found_and_misfits_are_the_cache_errors_of_dynamic_reads() {
        for shared in [false, true] {
            let mut objects = config_maps();
            objects.push(object::<ConfigMap>(
                "a",
                "bad",
                &serde_json::json!({"data": {"data": "not a map"}}),
            ));
            let (cache, _) = cache_of::<ConfigMap>(&settings(shared), objects).await;
            let missing = get::<ConfigMap>(&cache, Some("a"), "none")
                .await
                .unwrap_err();
            assert!(missing.is_not_found(), "{missing}");
            let bad = get::<ConfigMap>(&cache, Some("a"), "bad")
                .await
                .unwrap_err();
            assert!(matches!(bad, Error::Convert { .. }), "{bad}");
            let listed = list::<ConfigMap>(&cache, &ListOptions::default())
                .await
                .unwrap_err();
            assert!(matches!(listed, Error::Convert { .. }), "{listed}");
            // The stored object's kind is handed to the type: a ConfigMap is no Pod.
            let informer = cache.informer_of(&gvk_of::<ConfigMap>()).unwrap();
            let err = informer
                .get_as(Some("a"), "one", &As::<Pod>::new())
                .unwrap_err();
            let Error::Convert { source, .. } = err else {
                panic!("{err}");
            };
            assert!(source.to_string().contains("ConfigMap"), "{source}");
        }
    }

    #[tokio::test]
    async fn typed_reads_see_the_transformed_object() {
        for shared in [false, true] {
            let settings = InformerSettings {
                transform: Transform {
                    drop_labels: vec!["secret".into()],
                    ..Transform::default()
                },
                ..settings(shared)
            };
            let (cache, _) = cache_of::<ConfigMap>(&settings, config_maps()).await;
            let cm: ConfigMap = get(&cache, Some("a"), "one").await.unwrap();
            let labels = cm.metadata.labels.unwrap();
            assert_eq!(
                labels.keys().collect::<Vec<_>>(),
                vec!["app"],
                "shared={shared}"
            );
            let dropped = list_options(Some("secret=x"), None, None);
            assert!(
                list::<ConfigMap>(&cache, &dropped)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
    }

    #[tokio::test]
    async fn projected_objects_read_typed_with_absent_fields_defaulted() {
        use crate::cache::projection::{ObjectPath, Projection};
        let path = |p: &str| ObjectPath::parse(p).unwrap();
        let pods = vec![object::<Pod>(
            "a",
            "web-1",
            &serde_json::json!({"labels": {"app": "web"}, "data": {
                "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "web:1"}]},
                "status": {"phase": "Running", "podIP": "10.0.0.1"}}}),
        )];
        for shared in [false, true] {
            let settings = InformerSettings {
                transform: Transform {
                    projection: Projection::new(
                        Some(vec![path("spec.containers[*].image"), path("status.phase")]),
                        vec![],
                    ),
                    ..Transform::default()
                },
                ..settings(shared)
            };
            let (cache, _) = cache_of::<Pod>(&settings, pods.clone()).await;
            let by_label = list::<Pod>(&cache, &list_options(Some("app=web"), None, None))
                .await
                .unwrap();
            assert_eq!(by_label.len(), 1, "labels are always kept: selectors match");
            let pod = &by_label[0];
            let spec = pod.spec.as_ref().unwrap();
            assert_eq!(spec.containers[0].image.as_deref(), Some("web:1"));
            assert_eq!(
                spec.containers[0].name, "",
                "a required field projected away defaults"
            );
            assert_eq!(spec.node_name, None);
            let status = pod.status.as_ref().unwrap();
            assert_eq!(status.phase.as_deref(), Some("Running"));
            assert_eq!(status.pod_ip, None);
        }
    }

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
