//! The test kit of a reconcile: [`TestContext`], a [`Context`] over objects given in the test,
//! with no API server, whose recorded Events the test reads back.
//!
//! A reconcile reads through the context ([`Context::get`], [`Context::list`]), so a unit test
//! hands it the objects it should see and checks what it answered and recorded. Writes go to
//! [`Context::client`], which here reaches no server (a closed loopback port): a reconcile
//! that writes is tested against the embedded API server instead
//! ([`crate::apiserver::TestServer`], as `tests/manager/example_configmap_secret.rs` runs
//! `examples/configmap_secret.rs`), or splits its decision from its writes and unit-tests the
//! decision (as `samples::cronjob`'s `plan`).
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

use super::context::Context;
use crate::cache::{
    self, Cache, InformerPool, InformerStatus, ListOptions, SharedCache, SyncPeriods, typed,
};
use crate::recorder;

/// A reconcile's world in a unit test: the objects the cache holds, and the Events recorded.
#[derive(Debug)]
pub struct TestContext {
    objects: Vec<Arc<DynamicObject>>,
    recorded: Arc<Mutex<Vec<recorder::Event>>>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

/// Why an object can not be put in a [`TestContext`].
#[derive(Debug, thiserror::Error)]
#[error("cannot hold {kind} {name:?} in the test cache")]
pub struct TestObjectError {
    /// The object's kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Why it does not encode as a Kubernetes object.
    #[source]
    pub source: serde_json::Error,
}

impl TestContext {
    /// An empty cache, no Event recorded.
    #[must_use]
    pub fn new() -> Self {
        Self {
            objects: Vec::new(),
            recorded: Arc::default(),
        }
    }

    /// The same kit whose cache also holds `object` (a later object of the same kind,
    /// namespace and name replaces it).
    ///
    /// # Errors
    /// [`TestObjectError`] when `object` does not encode as JSON.
    pub fn with<T>(mut self, object: &T) -> Result<Self, TestObjectError>
    where
        T: Resource<DynamicType = ()> + serde::Serialize,
    {
        let failed = |source| TestObjectError {
            kind: T::kind(&()).into_owned(),
            name: object.meta().name.clone().unwrap_or_default(),
            source,
        };
        let mut value = serde_json::to_value(object).map_err(failed)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), T::api_version(&()).into_owned().into());
            map.insert("kind".into(), T::kind(&()).into_owned().into());
        }
        let dynamic: DynamicObject = serde_json::from_value(value).map_err(failed)?;
        let gvk = typed::gvk_of::<T>();
        self.objects.retain(|held| {
            !(gvk_of(held).as_ref() == Some(&gvk)
                && held.metadata.namespace == dynamic.metadata.namespace
                && held.metadata.name == dynamic.metadata.name)
        });
        self.objects.push(Arc::new(dynamic));
        Ok(self)
    }

    /// A context reading the kit's objects, recording into the kit (and into a recorder
    /// nothing drains), with a client of no server. A reconcile that reads the operator's
    /// state gets it with `kit.context().with_data(state)` ([`Context::with_data`]).
    ///
    /// # Panics
    /// Outside a Tokio runtime (kube's client starts its request buffer on it): call it in
    /// a `#[tokio::test]`.
    #[must_use]
    pub fn context(&self) -> Context {
        let client = offline_client();
        let tree: Arc<dyn Cache> = Arc::new(Fixed {
            objects: self.objects.clone(),
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
    objects: Vec<Arc<DynamicObject>>,
}

impl Fixed {
    fn of_kind<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
    ) -> impl Iterator<Item = &'a Arc<DynamicObject>> + 'a {
        self.objects
            .iter()
            .filter(move |o| gvk_of(o).as_ref() == Some(gvk))
    }
}

impl Cache for Fixed {
    fn get<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, cache::Result<Arc<DynamicObject>>> {
        let found = self
            .of_kind(gvk)
            .find(|o| {
                o.metadata.name.as_deref() == Some(name)
                    && (o.metadata.namespace.is_none()
                        || o.metadata.namespace.as_deref() == namespace)
            })
            .cloned();
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
            .cloned()
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

    fn informers(&self) -> Vec<InformerStatus> {
        Vec::new()
    }

    fn sync_periods(&self, _gvk: &GroupVersionKind) -> SyncPeriods {
        SyncPeriods::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::controller::Action;

    use super::*;

    /// A reconcile that reads its object through the cache and requeues after the state's
    /// period.
    async fn reconcile(
        configmap: Arc<ConfigMap>,
        ctx: Arc<Context<Duration>>,
    ) -> Result<Action, cache::Error> {
        let name = configmap.meta().name.as_deref().unwrap_or_default();
        let _: ConfigMap = ctx.get(Some("default"), name).await?;
        Ok(Action::requeue(*ctx.data()))
    }

    #[tokio::test]
    async fn a_reconcile_sees_the_state_the_kit_context_carries() {
        let configmap = ConfigMap {
            metadata: ObjectMeta {
                name: Some("db".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let kit = TestContext::new().with(&configmap).unwrap();
        for period in [Duration::from_secs(42), Duration::from_secs(7)] {
            let ctx = Arc::new(kit.context().with_data(period));
            let action = reconcile(Arc::new(configmap.clone()), ctx).await.unwrap();
            assert_eq!(action, Action::requeue(period));
        }
    }
}
