//! `benches/projection.rs`: what a field projection is worth on a realistic Pod: the bytes the
//! cache holds per Pod with no transform, with `stripManagedFields`, and with a KEDA-like
//! `keepFields` projection (name, namespace, labels, owners, `spec.nodeName`,
//! `spec.containers[*].name`, `status.phase`, `status.conditions`), beside client-go's informer
//! for the full Pod (2.53× its JSON, measured on `ConfigMap`s); and what the projection costs on
//! the watch path (ns per object) beside the JSON decode every watched object costs anyway.
//!
//! Usage: `cargo bench --bench projection -- [--objects N]` (default 10000). The Pods are made
//! deterministically (about 8 KiB of JSON each, a third of it managedFields). Bytes are counted
//! twice: by the cache's own count (`informant_cache_bytes`, `CompactObject::held_bytes`, which
//! adds each object's store key) and by a counting allocator over the stored objects alone.

use std::sync::Arc;
use std::time::Instant;

use kube::core::DynamicObject;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use informant::cache::estimate::CLIENT_GO_JSON_RATIO;
use informant::cache::projection::{ObjectPath, Projection};
use informant::cache::{CompactObject, Transform};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn live_bytes() -> i64 {
    let s = GLOBAL.stats();
    i64::try_from(s.bytes_allocated).unwrap_or(i64::MAX)
        - i64::try_from(s.bytes_deallocated).unwrap_or(i64::MAX)
}

/// Pod `i`: three containers with env, ports, probes and mounts; five conditions; three
/// container statuses; managedFields of three managers.
fn pod(i: usize) -> Value {
    let fields = |manager: &str, n: usize| {
        let keys: serde_json::Map<String, Value> = (0..n)
            .map(|k| {
                (
                    format!("f:field-{manager}-{k}"),
                    json!({".": {}, "f:value": {}}),
                )
            })
            .collect();
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": keys}})
    };
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-01T10:00:05Z"}))
    .collect();
    let statuses: Vec<Value> = (0..3)
        .map(|c| {
            json!({"name": format!("container-{c}"), "ready": true, "restartCount": 0, "started": true,
                "image": format!("registry.example.com/team/app-{c}:v1.{i}"),
                "imageID": format!("registry.example.com/team/app-{c}@sha256:{:064x}", i * 7 + c),
                "containerID": format!("containerd://{:064x}", i * 13 + c),
                "state": {"running": {"startedAt": "2026-11-01T10:00:03Z"}}})
        })
        .collect();
    let env = |c: usize| -> Vec<Value> {
        (0..10)
            .map(|e| json!({"name": format!("ENV_{c}_{e}"), "value": format!("value-{i}-{e}")}))
            .collect()
    };
    let container = |c: usize| {
        json!({
            "name": format!("container-{c}"),
            "image": format!("registry.example.com/team/app-{c}:v1.{i}"),
            "ports": [{"containerPort": 8080 + c, "protocol": "TCP", "name": format!("http-{c}")}],
            "env": env(c),
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}, {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080 + c}, "periodSeconds": 10},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080 + c}, "periodSeconds": 10},
            "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
        })
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{i}-7f9c6b5d4-x{i:05}"), "namespace": "shop", "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i), "generateName": "web-7f9c6b5d4-",
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7f9c6b5d4", "tier": "frontend", "version": "v1", "team": "shop"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T09:59:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7f9c6b5d4", "uid": "11111111-2222-4333-8444-555555555555", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [fields("kube-controller-manager", 12), fields("kubelet", 10), fields("kubectl", 4)]
        },
        "spec": {
            "nodeName": format!("node-{}", i % 50), "serviceAccountName": "web", "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
            "containers": [container(0), container(1), container(2)],
            "volumes": [{"name": "config", "configMap": {"name": "web-config"}}, {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "podIP": format!("10.0.{}.{}", i / 250 % 250, i % 250), "hostIP": "192.168.0.10", "qosClass": "Burstable",
            "startTime": "2026-11-01T10:00:01Z",
            "conditions": conditions,
            "containerStatuses": statuses
        }
    })
}

fn keda_like() -> Transform {
    let paths = [
        "spec.nodeName",
        "spec.containers[*].name",
        "status.phase",
        "status.conditions",
    ];
    Transform {
        projection: Projection::new(
            Some(
                paths
                    .iter()
                    .filter_map(|p| ObjectPath::parse(p).ok())
                    .collect(),
            ),
            Vec::new(),
        ),
        ..Transform::default()
    }
}

#[allow(clippy::cast_precision_loss, reason = "figures for people")]
fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut objects = 10_000_usize;
    while let Some(arg) = args.next() {
        if arg == "--objects" {
            objects = args.next().and_then(|n| n.parse().ok()).unwrap_or(objects);
        }
    }
    let jsons: Vec<Vec<u8>> = (0..objects)
        .map(|i| serde_json::to_vec(&pod(i)).unwrap_or_default())
        .collect();
    let json_mean = jsons.iter().map(Vec::len).sum::<usize>() as f64 / objects as f64;
    println!("{objects} Pods of {json_mean:.0} bytes of JSON (mean)");

    let started = Instant::now();
    let decoded: Vec<DynamicObject> = jsons
        .iter()
        .filter_map(|j| serde_json::from_slice(j).ok())
        .collect();
    let decode_ns = started.elapsed().as_nanos() as f64 / objects as f64;

    println!();
    println!(
        "| variant | bytes/Pod (cache's count) | bytes/Pod (allocator) | x JSON | % of client-go |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    let client_go = json_mean * CLIENT_GO_JSON_RATIO;
    println!(
        "| client-go informer, full Pod (2.53× JSON) | {client_go:.0} | | {CLIENT_GO_JSON_RATIO:.2} | 100% |"
    );
    let variants = [
        ("no transform", Transform::default()),
        (
            "stripManagedFields",
            Transform {
                strip_managed_fields: true,
                ..Transform::default()
            },
        ),
        ("KEDA-like keepFields", keda_like()),
    ];
    for (name, transform) in &variants {
        let mut objs = decoded.clone();
        let started = Instant::now();
        for obj in &mut objs {
            transform.apply_to(obj);
        }
        let apply_ns = started.elapsed().as_nanos() as f64 / objects as f64;
        let before = live_bytes();
        let stored: Vec<Arc<CompactObject>> = objs
            .iter()
            .filter_map(|o| CompactObject::encode(o).ok().map(Arc::new))
            .collect();
        let allocated = (live_bytes() - before) as f64 / objects as f64;
        let counted = stored.iter().map(|o| o.held_bytes()).sum::<usize>() as f64 / objects as f64;
        println!(
            "| {name} | {counted:.0} | {allocated:.0} | {:.2} | {:.1}% |",
            counted / json_mean,
            counted / client_go * 100.0
        );
        if !transform.is_identity() {
            println!("|   its cost on the watch path | {apply_ns:.0} ns/Pod | | | |");
        }
        drop(stored);
    }
    println!();
    println!("decoding a Pod's JSON (the watch path's own cost): {decode_ns:.0} ns/Pod");
}
