//! What a member shows of its ring: the `sharding` part of the `CacheConfig` status and of
//! `/debug/status`, and the source of the `informant_shard_*` metrics.

use std::sync::Arc;

use super::runtime::ShardRuntime;
use crate::cache::{InformerPool, namespace_informer_key};
use crate::config::{MAX_LISTED_NAMESPACES, ShardObjects, ShardingStatus};
use crate::manager::metrics::ShardSource;
use crate::selector::{ShardKey, namespace_point};

/// The member's view of its ring, read from `shard`'s view and the informers of `pool` each
/// time it is asked.
pub(crate) fn status_source(shard: &ShardRuntime, pool: Arc<InformerPool>) -> ShardSource {
    let (ring, key) = (shard.sharding().ring.clone(), shard.sharding().key);
    let identity = shard.identity().to_owned();
    let view = shard.view();
    Arc::new(move || {
        let v = view.borrow().clone();
        let (selection, namespaces) = match key {
            ShardKey::Namespace => {
                let owned: Vec<String> = pool
                    .informer(&namespace_informer_key())
                    .and_then(|namespaces| namespaces.list(None, None, &[], None).ok())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|ns| ns.metadata.name.clone())
                    .filter(|ns| v.share.contains(namespace_point(ns)))
                    .collect();
                ("namespaces", Some(owned))
            }
            ShardKey::Uid if v.server_side => ("server-side", None),
            ShardKey::Uid => ("in-process", None),
        };
        let ranges = v.share.to_string();
        ShardingStatus {
            ring: ring.clone(),
            key: match key {
                ShardKey::Namespace => "namespace",
                ShardKey::Uid => "uid",
            }
            .to_owned(),
            identity: identity.clone(),
            members: v.members.iter().cloned().collect(),
            active: v.active,
            selection: selection.to_owned(),
            ranges: ranges
                .split(',')
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect(),
            namespace_count: namespaces
                .as_ref()
                .map(|n| i32::try_from(n.len()).unwrap_or(i32::MAX)),
            namespaces: namespaces
                .unwrap_or_default()
                .into_iter()
                .take(MAX_LISTED_NAMESPACES)
                .collect(),
            objects: pool
                .namespaced_objects()
                .into_iter()
                .map(|(gvk, n)| ShardObjects {
                    api_version: gvk.api_version(),
                    kind: gvk.kind,
                    objects: i64::try_from(n).unwrap_or(i64::MAX),
                })
                .collect(),
            handovers: i64::try_from(v.handovers).unwrap_or(i64::MAX),
        }
    })
}
