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
