//! Reconciles asked for again when this member of a shard ring starts acting on a part of
//! the ring: objects there were refused while their previous owner still claimed them (their
//! reconcile was dropped, the owner doing it), so each is reconciled once more, at the
//! runner's pace ([`super::pass`]). A reconcile outside the member's part is refused again
//! by the gate, at the cost of one read from the cache.

use std::hash::Hash;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::Context;
use super::series::Series;

/// Every object of `store` once each time `ctx`'s shard gate gains a part (never without
/// sharding).
pub(crate) fn gained<K>(
    ctx: &Context,
    store: Store<K>,
    dyntype: K::DynamicType,
    series: Series,
) -> impl Stream<Item = ObjectRef<K>> + Send + use<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    match ctx.shard_gate().gained() {
        Some(gains) => super::pass::list_pass(store, dyntype, series, gains).left_stream(),
        None => futures::stream::pending().right_stream(),
    }
}
