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
use crate::manager::{Gain, RangeSet, ShardGate};

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
