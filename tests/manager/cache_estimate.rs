//! `informant explain --estimate`'s figures against what the cache holds once synced: with every
//! object sampled the estimate is the measured bytes exactly (the same encoding of the same
//! objects); with the default sample (a third of the objects here) it is within 10% on objects
//! of varied sizes; a config's projection
//! lowers both alike.

use crate::support;

use std::time::Duration;

use informant::cache::estimate::estimate;
use informant::cache::{Cache, Plan};
use serde_json::json;

fn options(keep: Option<&str>) -> informant::cache::Options {
    let transform = keep.map_or(String::new(), |k| {
        format!(", transform: {{keepFields: ['{k}']}}")
    });
    informant::config::load_str(&format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec:
  byObject:
    - {{apiVersion: v1, kind: ConfigMap, namespaces: {{team-a: {{}}, team-b: {{}}}}{transform}}}
    - {{apiVersion: v1, kind: Secret, labelSelector: 'app=web'}}
"
    ))
    .unwrap()
    .cache
}

/// Objects of deterministic, varied sizes: `i` of `n` in a namespace holds `(i * 37) % 3000`
/// bytes of data and a label.
fn seed(env: &support::Env) {
    let h = env.server.handle();
    for (ns, n) in [("team-a", 600), ("team-b", 60)] {
        for i in 0..n {
            let size = (i * 37) % 3000;
            h.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": format!("cm-{i}"), "labels": {"app": "web"},
                    "annotations": {"note": "x".repeat(i % 200)}},
                "data": {"payload": "p".repeat(size), "small": "s"}}))
                .unwrap();
        }
    }
    for i in 0..20 {
        h.create(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"namespace": "team-c", "name": format!("s-{i}"),
                "labels": {"app": if i % 2 == 0 { "web" } else { "db" }}},
            "data": {"k": "dmFsdWU="}}))
            .unwrap();
    }
}

/// `(kind, namespace) -> bytes` the synced cache holds.
async fn measured(
    env: &support::Env,
    options: &informant::cache::Options,
) -> Vec<(String, Option<String>, i64)> {
    let mut reloader = env.reloader(Duration::from_secs(30));
    let change = reloader.apply(options).await.unwrap();
    assert!(change.unsynced.is_empty(), "{change:?}");
    let mut rows: Vec<_> = reloader
        .cache()
        .informers()
        .into_iter()
        .map(|i| (i.kind, i.namespace, i.bytes.unwrap()))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn the_estimate_is_the_synced_cache_s_bytes_exact_with_every_object_and_close_with_a_sample()
{
    let env = support::Env::new().await;
    seed(&env);
    let mut totals = Vec::new();
    for keep in [None, Some("data[\"small\"]")] {
        let options = options(keep);
        let plan = Plan::new(&options).unwrap();
        let measured = measured(&env, &options).await;
        assert_eq!(measured.len(), 3, "{measured:?}");

        let full = estimate(&plan, &env.client, 1000).await.unwrap();
        let mut rows: Vec<_> = full
            .informers
            .iter()
            .map(|r| {
                (
                    r.kind.clone(),
                    r.namespace.clone(),
                    i64::try_from(r.bytes).unwrap(),
                )
            })
            .collect();
        rows.sort();
        assert_eq!(rows, measured, "keep={keep:?}");
        totals.push(full.bytes);
        let objects: Vec<u64> = full.informers.iter().map(|r| r.objects).collect();
        assert_eq!(objects.iter().sum::<u64>(), 600 + 60 + 10, "{objects:?}");

        // The default sample (200): a third of team-a's objects, the first page in name order.
        let sampled = estimate(&plan, &env.client, 200).await.unwrap();
        for row in &sampled.informers {
            let (_, _, bytes) = measured
                .iter()
                .find(|(k, ns, _)| *k == row.kind && *ns == row.namespace)
                .unwrap();
            #[allow(clippy::cast_precision_loss, reason = "a ratio")]
            let off = (row.bytes as f64 - *bytes as f64).abs() / *bytes as f64;
            assert!(
                off <= 0.10,
                "keep={keep:?} {row:?} measured {bytes}: {:.1}% off",
                off * 100.0
            );
            assert!(row.sampled <= 200);
            assert!(row.client_go_bytes > row.bytes, "{row:?}");
        }
    }
    assert!(
        totals[1] * 3 < totals[0],
        "keeping one small key costs less than a third: {totals:?}"
    );
    env.stop().await;
}

/// A seeded cluster of three kinds in four namespaces, sizes drawn per object (not following
/// names): `ConfigMap`s of 0–4 KB of data, `Secret`s of 0–2 KB, `Pod`s with 1–4 containers, a
/// few conditions, managed fields, and a node each.
fn seed_cluster(env: &support::Env, seed: u64) -> usize {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let h = env.server.handle();
    let mut created = 0;
    let managed = |manager: &str| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}}}})
    };
    for ns in ["alpha", "beta", "gamma", "delta"] {
        for i in 0..rng.random_range(150..300) {
            let tier = ["web", "db", "cache"][rng.random_range(0..3)];
            let size = rng.random_range(0..4000);
            h.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": format!("cm-{i}"),
                    "labels": {"app": format!("app-{}", i % 7), "tier": tier},
                    "managedFields": [managed("kubectl")]},
                "data": {"payload": "p".repeat(size), "small": "s"}}))
                .unwrap();
            created += 1;
        }
        for i in 0..rng.random_range(50..150) {
            let tier = ["web", "db"][rng.random_range(0..2)];
            h.create(
                json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"namespace": ns, "name": format!("s-{i}"), "labels": {"tier": tier}},
                "data": {"k": "dmFsdWU=".repeat(rng.random_range(0..256))}}),
            )
            .unwrap();
            created += 1;
        }
        for i in 0..rng.random_range(100..250) {
            let containers: Vec<_> = (0..rng.random_range(1..5))
                .map(|c| {
                    json!({"name": format!("c{c}"), "image": format!("registry.example/app-{i}:v{c}"),
                        "args": (0..rng.random_range(0..12)).map(|a| format!("--flag-{a}=value")).collect::<Vec<_>>(),
                        "env": (0..rng.random_range(0..10)).map(|e| json!({"name": format!("E{e}"), "value": "v".repeat(e * 5)})).collect::<Vec<_>>()})
                })
                .collect();
            let phase = ["Running", "Pending", "Succeeded"][rng.random_range(0..3)];
            let conditions: Vec<_> = ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
                .iter()
                .take(rng.random_range(1..5))
                .map(|t| {
                    json!({"type": t, "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"})
                })
                .collect();
            h.create(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": ns, "name": format!("pod-{i}"),
                    "labels": {"app": format!("app-{}", i % 5)},
                    "managedFields": [managed("kube-controller-manager"), managed("kubelet")]},
                "spec": {"nodeName": format!("node-{}", rng.random_range(0..3)), "containers": containers},
                "status": {"phase": phase, "conditions": conditions}}))
                .unwrap();
            created += 1;
        }
    }
    created
}

/// The figure: `--estimate` with the default sample (200 objects per informer) against
/// the bytes measured once the cache synced, for ten configurations (kinds, namespaces, label
/// and field selectors, projections, `stripManagedFields`, metadata only) on seeded clusters.
/// Prints the table; every configuration within ±10%.
#[tokio::test]
async fn ten_configurations_on_seeded_clusters_are_estimated_within_ten_percent() {
    const CONFIGS: [(&str, &str); 10] = [
        ("every ConfigMap", "{apiVersion: v1, kind: ConfigMap}"),
        (
            "ConfigMaps of two namespaces, tier=web",
            "{apiVersion: v1, kind: ConfigMap, labelSelector: tier=web, namespaces: {alpha: {}, gamma: {}}}",
        ),
        (
            "ConfigMaps keeping one key",
            "{apiVersion: v1, kind: ConfigMap, transform: {keepFields: ['data[\"small\"]']}}",
        ),
        (
            "ConfigMaps without managedFields",
            "{apiVersion: v1, kind: ConfigMap, transform: {stripManagedFields: true}}",
        ),
        ("every Secret", "{apiVersion: v1, kind: Secret}"),
        (
            "Secrets tier=db, metadata only",
            "{apiVersion: v1, kind: Secret, labelSelector: tier=db, metadataOnly: true}",
        ),
        ("every Pod", "{apiVersion: v1, kind: Pod}"),
        (
            "Pods on node-1 (field selector)",
            "{apiVersion: v1, kind: Pod, fieldSelector: spec.nodeName=node-1}",
        ),
        (
            "Pods, KEDA-like projection",
            "{apiVersion: v1, kind: Pod, transform: {keepFields: [spec.nodeName, 'spec.containers[*].name', status.phase, status.conditions]}}",
        ),
        (
            "Pods dropping args and env, one namespace",
            "{apiVersion: v1, kind: Pod, namespaces: {beta: {}}, transform: {dropFields: ['spec.containers[*].args', 'spec.containers[*].env'], stripManagedFields: true}}",
        ),
    ];
    let mut worst = 0.0_f64;
    let mut table = vec![format!(
        "{:<44} {:>8} {:>12} {:>12} {:>7}",
        "configuration", "objects", "estimate", "measured", "off"
    )];
    for (seed, (title, entry)) in CONFIGS.iter().enumerate() {
        let env = support::Env::new().await;
        seed_cluster(&env, seed as u64);
        let options = informant::config::load_str(&format!(
            "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: test, namespace: default}}
spec:
  byObject:
    - {entry}
"
        ))
        .unwrap()
        .cache;
        let plan = Plan::new(&options).unwrap();
        let measured: i64 = measured(&env, &options)
            .await
            .iter()
            .map(|(_, _, b)| b)
            .sum();
        let estimate = estimate(&plan, &env.client, 200).await.unwrap();
        let objects: u64 = estimate.informers.iter().map(|r| r.objects).sum();
        #[allow(clippy::cast_precision_loss, reason = "a ratio")]
        let off = (estimate.bytes as f64 - measured as f64) / measured as f64;
        worst = worst.max(off.abs());
        table.push(format!(
            "{title:<44} {objects:>8} {:>12} {measured:>12} {:>+6.1}%",
            estimate.bytes,
            off * 100.0
        ));
        assert!(measured > 0, "{title}: the cache holds something");
        env.stop().await;
    }
    println!("{}\nworst: {:.1}%", table.join("\n"), worst * 100.0);
    assert!(
        worst <= 0.10,
        "every configuration within 10%:\n{}",
        table.join("\n")
    );
}
