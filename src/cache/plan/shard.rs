//! A plan's layers cut to one member's share of a shard ring ([`ShardScope`]): by namespace,
//! namespaced kinds are cached only in the namespaces the member owns (of those the config
//! caches: all, listed, or matched by a selector), each with an informer of its own; by uid,
//! every informer of a namespaced kind carries the member's selector. Cluster-scoped kinds
//! keep their layers: every member caches them whole.

use std::collections::{BTreeMap, BTreeSet};

use super::{ClusterScope, InformerScope, Layer, NamespaceKey};
use crate::cache::shard::{InformerShard, ShardScope};
use crate::selector::ShardKey;

/// Which kinds a layer serves, for what sharding does to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Serves {
    /// Every kind not in `byObject` (the default layer): namespaced ones are sharded,
    /// cluster-scoped ones read from its cluster cache.
    Any,
    /// One namespaced `byObject` kind.
    Namespaced,
    /// One cluster-scoped `byObject` kind: never sharded.
    ClusterScoped,
}

/// `layer` cut to the member's share `scope.shard` (unchanged without one).
pub(super) fn shard(layer: Layer, scope: &ClusterScope, serves: Serves) -> Layer {
    let Some(shard) = &scope.shard else {
        return layer;
    };
    if serves == Serves::ClusterScoped {
        return layer;
    }
    match shard.key {
        ShardKey::Namespace => {
            let all: BTreeSet<String> = scope
                .namespaces
                .iter()
                .flat_map(BTreeMap::keys)
                .cloned()
                .collect();
            by_namespace(layer, shard, &all, serves)
        }
        ShardKey::Uid => {
            let mut layer = layer;
            if let Some(informer_shard) = shard.informer_shard() {
                by_uid(&mut layer, &informer_shard);
            }
            layer
        }
    }
}

/// The scope of one owned namespace, with `settings` of the scope it replaces.
fn in_namespace(ns: &str, from: &InformerScope) -> InformerScope {
    InformerScope {
        namespace: Some(ns.to_owned()),
        settings: from.settings.clone(),
    }
}

fn by_namespace(layer: Layer, shard: &ShardScope, all: &BTreeSet<String>, serves: Serves) -> Layer {
    let owned = |ns: &&String| shard.owns_namespace(ns);
    match layer {
        Layer::Informers(scope) if scope.namespace.is_none() => Layer::MultiNamespace {
            namespaces: all
                .iter()
                .filter(owned)
                .map(|ns| (NamespaceKey::named(ns), in_namespace(ns, &scope)))
                .collect(),
            cluster: (serves == Serves::Any).then_some(scope),
            selection: None,
        },
        Layer::MultiNamespace {
            namespaces,
            cluster,
            mut selection,
        } => {
            let listed: BTreeSet<String> = namespaces
                .keys()
                .filter_map(|key| match key {
                    NamespaceKey::Named(ns) => Some(ns.clone()),
                    NamespaceKey::AllOthers => None,
                })
                .collect();
            let mut kept: BTreeMap<NamespaceKey, InformerScope> = BTreeMap::new();
            for (key, scope) in namespaces {
                match &key {
                    NamespaceKey::Named(ns) if shard.owns_namespace(ns) => {
                        kept.insert(key, scope);
                    }
                    NamespaceKey::Named(_) => {}
                    // Every other namespace: each owned one on its own.
                    NamespaceKey::AllOthers => {
                        for ns in all.iter().filter(owned).filter(|ns| !listed.contains(*ns)) {
                            kept.insert(NamespaceKey::named(ns), in_namespace(ns, &scope));
                        }
                    }
                }
            }
            if let Some(selection) = selection.as_mut() {
                selection.added.retain(|ns| shard.owns_namespace(ns));
                if selection.wide {
                    // One informer per owned namespace instead of one over all of them.
                    selection.wide = false;
                    let scope = InformerScope {
                        namespace: None,
                        settings: selection.settings.clone(),
                    };
                    for ns in &selection.added {
                        kept.insert(NamespaceKey::named(ns), in_namespace(ns, &scope));
                    }
                }
            }
            Layer::MultiNamespace {
                namespaces: kept,
                cluster,
                selection,
            }
        }
        other => other,
    }
}

fn by_uid(layer: &mut Layer, shard: &InformerShard) {
    let set = |scope: &mut InformerScope| scope.settings.shard = Some(shard.clone());
    match layer {
        Layer::Informers(scope) => set(scope),
        Layer::MultiNamespace {
            namespaces,
            cluster,
            selection,
        } => {
            namespaces.values_mut().for_each(set);
            // The cluster cache serves cluster-scoped kinds only; informers ignore the shard of
            // a cluster-scoped kind, so setting it keeps the scope's settings one.
            if let Some(cluster) = cluster {
                set(cluster);
            }
            if let Some(selection) = selection {
                selection.settings.shard = Some(shard.clone());
            }
        }
        Layer::ByKind { kinds, default } => {
            for (_, layer) in kinds {
                by_uid(layer, shard);
            }
            by_uid(default, shard);
        }
        Layer::Waiting { .. } => {}
    }
}
