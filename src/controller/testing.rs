//! The test kit of a reconcile: [`TestContext`], a [`Context`] over objects given in the test,
//! with no API server, whose recorded Events the test reads back.
//!
//! A reconcile reads through the context ([`Context::get`], [`Context::list`]), so a unit test
//! hands it the objects it should see and checks what it answered and recorded. Its writes
//! ([`Context::client`], `apply_owned`, `apply_status`) go where the test says:
//! `TestContext::recording` gives a recording `FakeApi` (the `testing` feature: the embedded
//! API server in process, writes applied to the given objects with server-side apply's field
//! ownership, each one listed by `TestContext::writes`), [`TestContext::with_client`] any
//! `kube::Client` (one over the test's own tower service, or an `apiserver::TestServer`'s),
//! and by default a client of no server, where every write fails.
//!
//! ```
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informant::controller::testing::TestContext;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::ObjectMeta;
//!
//! let configmap = ConfigMap {
//!     metadata: ObjectMeta {
//!         name: Some("db".into()),
//!         namespace: Some("default".into()),
//!         ..ObjectMeta::default()
//!     },
//!     ..ConfigMap::default()
//! };
//! let kit = TestContext::new().with(&configmap)?;
//! // The operator's state, as `Controller::add_to_with` gives it: here a reason to record.
//! let ctx = kit.context().with_data("Seen");
//! let read: ConfigMap = ctx.get(Some("default"), "db").await?;
//! ctx.record(&read, informant::recorder::EventType::Normal, ctx.data(), "read from the kit");
//! assert_eq!(kit.reasons(), ["Seen"]);
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::Client;
use kube::core::{DynamicObject, GroupVersionKind, Resource};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[cfg(feature = "testing")]
mod fake;

#[cfg(feature = "testing")]
pub use fake::{FakeApi, Recorded};

/// The objects a [`TestContext`]'s cache reads, shared with the recording fake that updates
/// them.
type Objects = Arc<Mutex<Vec<Arc<DynamicObject>>>>;

use super::context::Context;
use crate::cache::{
    self, Cache, InformerPool, InformerStatus, ListOptions, SharedCache, SyncPeriods, typed,
};
use crate::recorder;

/// A reconcile's world in a unit test: the objects the cache holds, the Events recorded, and
/// the client writes go to (none, one of the test's choice, or a recording `FakeApi`).
pub struct TestContext {
    objects: Objects,
    recorded: Arc<Mutex<Vec<recorder::Event>>>,
    client: Option<Client>,
    #[cfg(feature = "testing")]
    fake: Option<FakeApi>,
}

impl std::fmt::Debug for TestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("TestContext");
        debug
            .field("objects", &self.objects.lock().map_or(0, |o| o.len()))
            .field("client", &self.client.is_some());
        #[cfg(feature = "testing")]
        debug.field("fake", &self.fake);
        debug.finish_non_exhaustive()
    }
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

/// Why an object can not be put in a [`TestContext`].
#[derive(Debug, thiserror::Error)]
#[error("cannot hold {kind} {name:?} in the test kit")]
pub struct TestObjectError {
    /// The object's kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Why.
    #[source]
    pub source: TestObjectCause,
}

/// Why [`TestContext::with`] refused an object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestObjectCause {
    /// It does not encode as a Kubernetes object.
    #[error("it does not encode as a Kubernetes object")]
    Codec(#[from] serde_json::Error),
    /// The recording fake refused to create it (a kind it does not serve: create the
    /// `CustomResourceDefinition` first; an invalid object).
    #[error("the recording fake refused it")]
    #[cfg(feature = "testing")]
    Refused(Box<crate::apiserver::ApiError>),
}

impl TestContext {
    /// An empty cache, no Event recorded, a client of no server (every write fails).
    #[must_use]
    pub fn new() -> Self {
        Self {
            objects: Objects::default(),
            recorded: Arc::default(),
            client: None,
            #[cfg(feature = "testing")]
            fake: None,
        }
    }

    /// An empty kit whose client is a recording [`FakeApi`]: the objects given with
    /// [`TestContext::with`] are created in it (and read back as stored, uid and
    /// `generation` set), the reconcile's writes are applied to them as the embedded API
    /// server applies them (server-side apply's field ownership included), the cache then
    /// reads what the writes stored, and [`TestContext::writes`] lists every write.
    ///
    /// # Errors
    /// When the embedded server does not start in process.
    #[cfg(feature = "testing")]
    pub fn recording() -> Result<Self, crate::apiserver::TestServerError> {
        let mut kit = Self::new();
        kit.fake = Some(FakeApi::with_objects(Arc::clone(&kit.objects))?);
        Ok(kit)
    }

    /// The same kit whose contexts write through `client` (a `kube::Client::new` over the
    /// test's own tower service, as kube-rs users mock with `tower-test`; or an
    /// `apiserver::TestServer`'s client). The cache still reads the kit's objects.
    #[must_use]
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The same kit whose cache also holds `object` (a later object of the same kind,
    /// namespace and name replaces it). In a `TestContext::recording` kit the object is
    /// created in the fake first and held as stored; a custom resource needs its
    /// `CustomResourceDefinition` given first (`.with(&Website::crd())?`).
    ///
    /// # Errors
    /// [`TestObjectError`] when `object` does not encode as JSON, or the fake refuses it.
    pub fn with<T>(self, object: &T) -> Result<Self, TestObjectError>
    where
        T: Resource<DynamicType = ()> + serde::Serialize,
    {
        let failed = |source: TestObjectCause| TestObjectError {
            kind: T::kind(&()).into_owned(),
            name: object.meta().name.clone().unwrap_or_default(),
            source,
        };
        let mut value = serde_json::to_value(object).map_err(|e| failed(e.into()))?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), T::api_version(&()).into_owned().into());
            map.insert("kind".into(), T::kind(&()).into_owned().into());
        }
        #[cfg(feature = "testing")]
        if let Some(fake) = &self.fake {
            value = fake
                .create(value)
                .map_err(|e| failed(TestObjectCause::Refused(Box::new(e))))?;
        }
        let dynamic: DynamicObject = serde_json::from_value(value).map_err(|e| failed(e.into()))?;
        let gvk = typed::gvk_of::<T>();
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects.retain(|held| {
            !(gvk_of(held).as_ref() == Some(&gvk)
                && held.metadata.namespace == dynamic.metadata.namespace
                && held.metadata.name == dynamic.metadata.name)
        });
        objects.push(Arc::new(dynamic));
        drop(objects);
        Ok(self)
    }

    /// The `T` `namespace/name` as the kit's cache holds it now: as given, as the recording
    /// fake stored it (with its uid, which an owner needs), or as the last write left it.
    #[must_use]
    pub fn stored<T>(&self, namespace: Option<&str>, name: &str) -> Option<T>
    where
        T: Resource<DynamicType = ()> + serde::de::DeserializeOwned,
    {
        let gvk = typed::gvk_of::<T>();
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        let held = objects.iter().find(|o| {
            gvk_of(o).as_ref() == Some(&gvk)
                && o.metadata.name.as_deref() == Some(name)
                && o.metadata.namespace.as_deref() == namespace
        })?;
        serde_json::to_value(held.as_ref())
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
    }

    /// The recording fake of a [`TestContext::recording`] kit.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn fake(&self) -> Option<&FakeApi> {
        self.fake.as_ref()
    }

    /// Every request the recording fake answered, in order (none without one).
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn requests(&self) -> Vec<Recorded> {
        self.fake
            .as_ref()
            .map(FakeApi::requests)
            .unwrap_or_default()
    }

    /// The writes among [`TestContext::requests`], in order.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn writes(&self) -> Vec<Recorded> {
        self.fake.as_ref().map(FakeApi::writes).unwrap_or_default()
    }

    /// A context reading the kit's objects, recording into the kit (and into a recorder
    /// nothing drains), writing through the kit's client: the recording fake, the client
    /// given, or else one of no server. A reconcile that reads the operator's state gets it
    /// with `kit.context().with_data(state)` ([`Context::with_data`]).
    ///
    /// # Panics
    /// Outside a Tokio runtime (kube's client starts its request buffer on it): call it in
    /// a `#[tokio::test]`.
    #[must_use]
    pub fn context(&self) -> Context {
        let client = self.client();
        let tree: Arc<dyn Cache> = Arc::new(Fixed {
            objects: Arc::clone(&self.objects),
        });
        let pipeline = recorder::Pipeline::new(
            &recorder::Options::default(),
            recorder::NullSink,
            Arc::new(recorder::SystemClock),
        );
        Context::new(
            Arc::new(SharedCache::new(tree)),
            InformerPool::new(client.clone()),
            client,
            pipeline.recorder(),
        )
        .recording_into(Arc::clone(&self.recorded))
    }

    /// The Events recorded through the kit's contexts, in order.
    #[must_use]
    pub fn events(&self) -> Vec<recorder::Event> {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The reasons of [`TestContext::events`], in order.
    #[must_use]
    pub fn reasons(&self) -> Vec<String> {
        self.events().iter().map(|e| e.reason.to_string()).collect()
    }
}

impl TestContext {
    /// The client of the kit's contexts: the one given, else the recording fake's, else one of
    /// no server.
    fn client(&self) -> Client {
        if let Some(client) = &self.client {
            return client.clone();
        }
        #[cfg(feature = "testing")]
        if let Some(fake) = &self.fake {
            return fake.client();
        }
        offline_client()
    }
}

/// A client of a closed loopback port: every request fails, none reaches a cluster.
fn offline_client() -> Client {
    let uri = http::Uri::from_static("http://127.0.0.1:9");
    let config = kube::Config::new(uri);
    // A plain-HTTP config with no TLS, proxy or exec plugin: nothing in it can fail to build.
    Client::try_from(config).expect("a plain HTTP client of a constant URL")
}

fn gvk_of(object: &DynamicObject) -> Option<GroupVersionKind> {
    let types = object.types.as_ref()?;
    GroupVersionKind::try_from(types).ok()
}

/// The test kit's cache: the objects given, read and listed as the cache tree answers
/// (`NotFound`, namespace and selector filters), nothing to start or sync.
struct Fixed {
    objects: Objects,
}

impl Fixed {
    /// The objects of `gvk` held now.
    fn of_kind(&self, gvk: &GroupVersionKind) -> Vec<Arc<DynamicObject>> {
        self.objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|o| gvk_of(o).as_ref() == Some(gvk))
            .cloned()
            .collect()
    }
}

impl Cache for Fixed {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, cache::Result<Arc<DynamicObject>>> {
        let found = self.of_kind(gvk).into_iter().find(|o| {
            o.metadata.name.as_deref() == Some(name)
                && (o.metadata.namespace.is_none() || o.metadata.namespace.as_deref() == namespace)
        });
        async move {
            found.ok_or_else(|| cache::Error::NotFound {
                gvk: gvk.clone(),
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            })
        }
        .boxed()
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        options: &'a ListOptions,
    ) -> BoxFuture<'a, cache::Result<Vec<Arc<DynamicObject>>>> {
        let listed = self
            .of_kind(gvk)
            .into_iter()
            .filter(|o| options.namespace.is_none() || o.metadata.namespace == options.namespace)
            .filter(|o| {
                let labels = o.metadata.labels.as_ref();
                options.label_selector.as_ref().is_none_or(|s| {
                    s.matches_with(|key| labels.and_then(|l| l.get(key)).map(String::as_str))
                })
            })
            .filter(|o| {
                options.field_selector.as_ref().is_none_or(|s| {
                    serde_json::to_value(o.as_ref()).is_ok_and(|v| s.matches_object(&v))
                })
            })
            .take(options.limit.filter(|l| *l > 0).unwrap_or(usize::MAX))
            .collect();
        async move { Ok(listed) }.boxed()
    }

    fn ensure_informer<'a>(
        &'a self,
        _gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, cache::Result<()>> {
        async { Ok(()) }.boxed()
    }

    fn start(&self, _tracker: &TaskTracker, _shutdown: &CancellationToken) {}

    fn wait_for_sync<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, cache::Result<()>> {
        async { Ok(()) }.boxed()
    }

    /// One synced informer per kind held: the kit's cache watches what it holds.
    fn informers(&self) -> Vec<InformerStatus> {
        let mut kinds: Vec<(String, String)> = self
            .objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|o| o.types.as_ref())
            .map(|t| (t.api_version.clone(), t.kind.clone()))
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
            .into_iter()
            .map(|(api_version, kind)| InformerStatus {
                api_version,
                kind,
                synced: true,
                ..InformerStatus::default()
            })
            .collect()
    }

    fn sync_periods(&self, _gvk: &GroupVersionKind) -> SyncPeriods {
        SyncPeriods::default()
    }
}

#[cfg(test)]
mod tests;
