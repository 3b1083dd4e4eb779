//! A member's share of a sharded cache on the embedded API server: by namespace it caches
//! namespaced kinds only in the namespaces it owns; by uid each namespaced kind's informers
//! hold only the member's objects, selected by the server (`shardSelector`) where it has
//! KEP-5866 and in the process where it does not, with the same result; cluster-scoped kinds
//! are cached whole; a new share relists the sharded kinds and nothing else.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use informant::apiserver::{Config, FeatureGates, Verb};
use informant::cache::{self, CacheChange, CacheReloader, ShardScope};
use informant::selector::{ShardKey, ShardRange, uid_point};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use serde_json::json;
use tokio::sync::watch;

const GUARD: Duration = Duration::from_secs(20);

fn options(spec: &str) -> cache::Options {
    informant::config::load_str(&support::cache_config(spec))
        .unwrap()
        .cache
}

fn half(key: ShardKey, upper: bool) -> ShardScope {
    let range = if upper {
        ShardRange::new(1 << 63, 1 << 64)
    } else {
        ShardRange::new(0, 1 << 63)
    };
    ShardScope {
        key,
        ranges: vec![range.unwrap()],
        server_side: true,
    }
}

struct Env {
    base: support::Env,
    reloader: CacheReloader,
    share: watch::Sender<Option<ShardScope>>,
    /// Every `ConfigMap` as `namespace/name`, with its uid.
    configmaps: BTreeMap<String, String>,
}

support::wraps_env!(Env);

impl Env {
    /// Ten namespaces of ten `ConfigMap`s each, and a reloader following `share`.
    async fn new(gates: FeatureGates, share: Option<ShardScope>) -> Self {
        let (server, client) = support::server_with(Config {
            feature_gates: gates,
            ..Config::default()
        })
        .await;
        let base = support::Env {
            server,
            client,
            tracker: tokio_util::task::TaskTracker::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
        };
        let mut configmaps = BTreeMap::new();
        for n in 0..10 {
            let ns = format!("ns-{n}");
            base.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
            for i in 0..10 {
                let created = base.configmap(&ns, &format!("cm-{i}"), &json!({}));
                configmaps.insert(
                    format!("{ns}/cm-{i}"),
                    created["metadata"]["uid"].as_str().unwrap().to_owned(),
                );
            }
        }
        let (share, receiver) = watch::channel(share);
        let reloader = base.reloader(GUARD).with_shard(receiver);
        Self {
            base,
            reloader,
            share,
            configmaps,
        }
    }

    /// The `ConfigMap`s the cache holds, as `namespace/name`.
    async fn cached(&self) -> BTreeSet<String> {
        let all: Vec<ConfigMap> = cache::typed::list(
            self.reloader.cache().as_ref(),
            &cache::ListOptions::default(),
        )
        .await
        .unwrap();
        all.iter()
            .map(|cm| {
                format!(
                    "{}/{}",
                    cm.metadata.namespace.as_deref().unwrap(),
                    cm.metadata.name.as_deref().unwrap()
                )
            })
            .collect()
    }

    /// The `ConfigMap`s whose point `share` holds.
    fn expected(&self, share: &ShardScope) -> BTreeSet<String> {
        self.configmaps
            .iter()
            .filter(|(key, uid)| match share.key {
                ShardKey::Uid => share.contains(uid_point(uid)),
                ShardKey::Namespace => share.owns_namespace(key.split('/').next().unwrap()),
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    async fn rescoped(&mut self) -> CacheChange {
        tokio::time::timeout(GUARD, async {
            loop {
                self.reloader.scope_changed().await;
                let change = self.reloader.rescope().await.unwrap();
                if change.changed {
                    return change;
                }
            }
        })
        .await
        .expect("the new share replans the cache within the guard")
    }

    fn lists(&self, resource: &str) -> u64 {
        self.server.handle().request_count(Verb::List, resource)
    }
}

#[tokio::test]
async fn by_namespace_a_member_caches_only_its_namespaces_and_a_new_share_relists_only_them() {
    let lower = half(ShardKey::Namespace, false);
    let mut env = Env::new(FeatureGates::default(), Some(lower.clone())).await;
    let spec = "  sharding: {ring: shop}\n  byObject:\n  - {apiVersion: v1, kind: ConfigMap}\n  - {apiVersion: v1, kind: Namespace}\n";
    env.reloader.apply(&options(spec)).await.unwrap();
    let expected = env.expected(&lower);
    assert!(
        !expected.is_empty() && expected.len() < env.configmaps.len(),
        "{expected:?}"
    );
    assert_eq!(env.cached().await, expected);
    let namespaces = support::cached_names::<Namespace>(env.reloader.cache().as_ref()).await;
    assert_eq!(
        namespaces.len(),
        10 + 1,
        "cluster-scoped kinds whole: {namespaces:?}"
    );

    // The other half: the ConfigMaps of the other namespaces are listed, Namespaces are not.
    let (configmaps, namespaces) = (env.lists("configmaps"), env.lists("namespaces"));
    let upper = half(ShardKey::Namespace, true);
    env.share.send_replace(Some(upper.clone()));
    let change = env.rescoped().await;
    assert!(change.share_changed);
    assert_eq!(
        change.scope_summary().as_deref(),
        Some("shard share changed")
    );
    assert!(
        change.started.iter().all(|k| k.gvk.kind == "ConfigMap"),
        "{:?}",
        change.started
    );
    assert_eq!(env.cached().await, env.expected(&upper));
    let relisted = env.lists("configmaps") - configmaps;
    let all = support::cached_names::<Namespace>(env.reloader.cache().as_ref()).await;
    let owned = all.iter().filter(|ns| upper.owns_namespace(ns)).count();
    assert_eq!(relisted, owned as u64, "one LIST per owned namespace");
    assert_eq!(
        env.lists("namespaces"),
        namespaces,
        "nothing else is listed"
    );
    env.base.stop().await;
}

/// The same share, selected by the server or in the process: the same objects.
#[tokio::test]
async fn by_uid_the_share_is_the_same_with_and_without_the_servers_shard_selector() {
    for sharded_list_and_watch in [true, false] {
        let gates = FeatureGates {
            sharded_list_and_watch,
        };
        let share = ShardScope {
            server_side: sharded_list_and_watch,
            ..half(ShardKey::Uid, false)
        };
        let mut env = Env::new(gates, Some(share.clone())).await;
        let spec = "  sharding: {ring: shop, key: uid}\n  byObject:\n  - {apiVersion: v1, kind: ConfigMap}\n  - {apiVersion: v1, kind: Namespace}\n";
        env.reloader.apply(&options(spec)).await.unwrap();
        let expected = env.expected(&share);
        assert!(
            expected.len() > 20 && expected.len() < 80,
            "about half: {}",
            expected.len()
        );
        assert_eq!(
            env.cached().await,
            expected,
            "server-side: {sharded_list_and_watch}"
        );
        let namespaces = support::cached_names::<Namespace>(env.reloader.cache().as_ref()).await;
        assert_eq!(namespaces.len(), 10 + 1, "cluster-scoped kinds whole");

        let other = ShardScope {
            server_side: sharded_list_and_watch,
            ..half(ShardKey::Uid, true)
        };
        env.share.send_replace(Some(other.clone()));
        let change = env.rescoped().await;
        let kinds: BTreeSet<&str> = change.started.iter().map(|k| k.gvk.kind.as_str()).collect();
        assert_eq!(
            kinds,
            BTreeSet::from(["ConfigMap"]),
            "only the sharded kind relists"
        );
        assert_eq!(env.cached().await, env.expected(&other));
        env.base.stop().await;
    }
}
