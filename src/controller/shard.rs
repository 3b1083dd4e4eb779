//! Reconciles asked for again when this member of a shard ring starts acting on a part of
//! the ring: objects there were refused while their previous owner still claimed them (their
//! reconcile was dropped, the owner doing it), so each object of the controller's store that
//! may lie in the gained part is asked for once more, at the runner's pace (as a list pass:
//! only while fewer than [`super::LIST_PASS_QUEUE`] wait). By namespace, the stub's namespace
//! says whether it lies there; by uid a stub has no uid, so every object of the store is asked
//! for (the gate refuses the others again, at the cost of one read from the cache each).

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;

use super::context::Context;
use super::series::Series;
use crate::manager::{Gain, ShardGate};
use crate::selector::RangeSet;

struct Pass<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    gate: ShardGate,
    store: Store<K>,
    dyntype: K::DynamicType,
    series: Series,
    gains: watch::Receiver<Gain>,
    /// The gain count this pass started at.
    seen: u64,
    part: RangeSet,
    left: std::vec::IntoIter<Arc<K>>,
}

impl<K: Resource + Clone + 'static> Pass<K>
where
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    /// Starts a pass over the store for the gain now in `gains`: with what was left of an
    /// interrupted pass's part, or the whole ring when a gain was missed.
    fn restart(&mut self, interrupted: bool) {
        let gain = self.gains.borrow_and_update().clone();
        self.part = if gain.count > self.seen + 1 {
            RangeSet::all()
        } else if interrupted {
            self.part.union(&gain.part)
        } else {
            gain.part
        };
        self.seen = gain.count;
        self.left = self.store.state().into_iter();
    }
}

/// Every object of `store` that may lie in the part `ctx`'s shard gate gains, once each time
/// it gains one (never without sharding).
pub(crate) fn gained<K>(
    ctx: &Context,
    store: Store<K>,
    dyntype: K::DynamicType,
    series: Series,
) -> impl Stream<Item = ObjectRef<K>> + Send + use<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    let gate = ctx.shard_gate().clone();
    let Some(mut gains) = gate.gained() else {
        return futures::stream::pending().right_stream();
    };
    let seen = gains.borrow_and_update().count;
    let pass = Pass {
        gate,
        store,
        dyntype,
        series,
        gains,
        seen,
        part: RangeSet::empty(),
        left: Vec::new().into_iter(),
    };
    futures::stream::unfold(pass, |mut pass| async move {
        loop {
            let Some(obj) = pass.left.next() else {
                pass.gains.changed().await.ok()?;
                pass.restart(false);
                continue;
            };
            if !pass.gate.may_lie_in(obj.meta(), &pass.part) {
                continue;
            }
            let object = ObjectRef::from_obj_with(obj.as_ref(), pass.dyntype.clone());
            tokio::select! {
                biased;
                changed = pass.gains.changed() => {
                    changed.ok()?;
                    pass.restart(true);
                }
                () = pass.series.admit(&object) => return Some((object, pass)),
            }
        }
    })
    .left_stream()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::{reflector, watcher};

    use super::*;
    use crate::manager::Fence;
    use crate::selector::{ShardKey, ShardRange};

    fn context(gate: ShardGate) -> Context {
        Context::offline().with_shard_gate(gate)
    }

    fn configmap(namespace: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    /// The half of the ring holding `ns`'s point, and a namespace in the other half.
    fn halves(ns: &str) -> (RangeSet, String) {
        let lower = RangeSet::from_ranges([ShardRange::new(0, 1 << 63).unwrap()]);
        let here = crate::selector::namespace_point(ns);
        let mine = if lower.contains(here) {
            lower
        } else {
            RangeSet::all().subtract(&lower)
        };
        let other = (0..100)
            .map(|i| format!("ns-{i}"))
            .find(|n| !mine.contains(crate::selector::namespace_point(n)))
            .unwrap();
        (mine, other)
    }

    /// A gained part asks for the objects of the namespaces in it, once, and nothing else.
    /// Sharded by uid, a controller that owns another kind does not start and says why and
    /// what to change; one that owns nothing, or sharded by namespace, is not refused.
    #[tokio::test]
    async fn by_uid_a_controller_that_owns_a_kind_does_not_start_and_names_the_fix() {
        use crate::controller::{Action, Controller, Error};
        async fn reconcile(
            _: Arc<ConfigMap>,
            _: Arc<Context>,
        ) -> Result<Action, std::convert::Infallible> {
            Ok(Action::await_change())
        }
        let gate = |key| {
            let fence = Fence::holding_for_tests(Duration::from_mins(1));
            ShardGate::sharded("m", key, fence, None).unwrap()
        };
        let shutdown = tokio_util::sync::CancellationToken::new();
        let refused = Controller::<ConfigMap>::new("owner")
            .owns::<k8s_openapi::api::core::v1::Secret>()
            .run(
                context(gate(ShardKey::Uid)),
                reconcile,
                |_, _, _| Action::await_change(),
                shutdown.clone(),
            )
            .await;
        let Err(error @ Error::NeedsShardKeyNamespace { .. }) = refused else {
            panic!("expected NeedsShardKeyNamespace, got {refused:?}");
        };
        let message = error.to_string();
        assert!(
            message.contains("owns or watches /v1, Kind=Secret"),
            "{message}"
        );
        assert!(message.contains("shard by key: namespace"), "{message}");

        // Not refused: the same controller sharded by namespace, stopped before it starts.
        shutdown.cancel();
        let by_namespace = Controller::<ConfigMap>::new("owner")
            .owns::<k8s_openapi::api::core::v1::Secret>()
            .run(
                context(gate(ShardKey::Namespace)),
                reconcile,
                |_, _, _| Action::await_change(),
                shutdown,
            )
            .await;
        assert!(
            !matches!(by_namespace, Err(Error::NeedsShardKeyNamespace { .. })),
            "{by_namespace:?}"
        );
    }

    #[tokio::test]
    async fn a_gain_asks_for_the_objects_in_the_gained_namespaces_once() {
        let fence = Fence::holding_for_tests(Duration::from_mins(1));
        let gate = ShardGate::sharded("m", ShardKey::Namespace, fence.clone(), None).unwrap();
        let ctx = context(gate.clone());
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let (part, other) = halves("shop");
        writer.apply_watcher_event(&watcher::Event::Init);
        for (ns, name) in [("shop", "a"), ("shop", "b"), (other.as_str(), "c")] {
            writer.apply_watcher_event(&watcher::Event::InitApply(configmap(ns, name)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let series = Series::default();
        let mut asked = Box::pin(gained(&ctx, store, (), series.clone()));
        let soon = Duration::from_millis(50);
        assert!(
            tokio::time::timeout(soon, asked.next()).await.is_err(),
            "nothing before a gain"
        );
        gate.set_acting(part, fence.term(), true);
        let mut names = Vec::new();
        for _ in 0..2 {
            let object = tokio::time::timeout(Duration::from_secs(5), asked.next())
                .await
                .unwrap()
                .unwrap();
            series.taken(&object);
            names.push(object.name);
        }
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert!(
            tokio::time::timeout(soon, asked.next()).await.is_err(),
            "{other}/c lies outside the gained part"
        );
        // No sharding, no pass.
        let open = context(ShardGate::open());
        let (store, _writer) = reflector::store::<ConfigMap>();
        let mut none = Box::pin(gained(&open, store, (), Series::default()));
        assert!(tokio::time::timeout(soon, none.next()).await.is_err());
    }
}
