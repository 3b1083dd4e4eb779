//! Benchmark of the embedded API server: stores 100k ConfigMaps of ~1 KiB, lists them in pages
//! of 500, syncs a kube-rs reflector, fans 1,000 updates out to 10 watchers, and reports memory
//! per stored object. Run: `cargo run --release --bin bench_apiserver [-- OBJECTS]`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use informant::apiserver::{Config, TestServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

const PAGE: u32 = 500;
const WATCHERS: usize = 10;
const UPDATES: usize = 1_000;

/// Resident memory of this process in bytes (Linux `/proc/self/statm`), 0 elsewhere.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

#[allow(
    clippy::cast_precision_loss,
    reason = "object counts and byte sizes are far below 2^52"
)]
fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let objects: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let server = TestServer::start_with(Config {
        limits: informant::apiserver::store::Limits {
            history: 20_000,
            broadcast: 65_536,
        },
        ..Config::default()
    })
    .await?;
    let client = server.client().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let payload = "x".repeat(900);

    let rss_before = rss_bytes();
    let t = Instant::now();
    for i in 0..objects {
        server.handle().create(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:06}"), "namespace": "default", "labels": {"bench": "true", "shard": format!("{}", i % 10)}},
            "data": {"payload": payload},
        }))?;
    }
    let store_time = t.elapsed();
    let rss_after = rss_bytes();
    let one = api.get("cm-000000").await?;
    let object_json = serde_json::to_vec(&one)?.len();
    println!("objects: {objects} ConfigMaps of {object_json} bytes of JSON each");
    println!(
        "store (in-process create): {:.0} objects/s ({:.2} s)",
        rate(objects, store_time),
        store_time.as_secs_f64()
    );
    println!(
        "memory: {:.0} bytes per stored object (RSS growth {:.1} MiB)",
        (rss_after.saturating_sub(rss_before)) as f64 / objects as f64,
        rss_after.saturating_sub(rss_before) as f64 / 1_048_576.0
    );

    // Paginated list over HTTP, body only (the server's throughput, no client-side decoding).
    let t = Instant::now();
    let mut token: Option<String> = None;
    let mut listed = 0usize;
    loop {
        let mut uri = format!("/api/v1/namespaces/default/configmaps?limit={PAGE}");
        if let Some(c) = &token {
            uri.push_str("&continue=");
            uri.push_str(&percent_encode(c));
        }
        let text = client
            .request_text(http::Request::get(uri).body(Vec::new())?)
            .await?;
        let page: serde_json::Value = serde_json::from_str(&text)?;
        listed += page["items"].as_array().map_or(0, Vec::len);
        token = page["metadata"]["continue"].as_str().map(String::from);
        if token.is_none() {
            break;
        }
    }
    let raw_list = t.elapsed();
    println!(
        "list, pages of {PAGE}, raw HTTP + serde_json::Value: {:.0} objects/s ({listed} in {:.2} s)",
        rate(listed, raw_list),
        raw_list.as_secs_f64()
    );

    // The same through kube-rs typed Api<ConfigMap>.
    let t = Instant::now();
    let mut lp = ListParams::default().limit(PAGE);
    let mut typed = 0usize;
    loop {
        let page = api.list(&lp).await?;
        typed += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let typed_list = t.elapsed();
    println!(
        "list, pages of {PAGE}, kube-rs Api<ConfigMap>: {:.0} objects/s ({typed} in {:.2} s)",
        rate(typed, typed_list),
        typed_list.as_secs_f64()
    );

    // Reflector initial sync.
    let t = Instant::now();
    let (reader, writer) = reflector::store();
    let mut stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let sync = tokio::spawn(async move { while stream.next().await.is_some() {} });
    reader.wait_until_ready().await?;
    let sync_time = t.elapsed();
    println!(
        "reflector sync: {:.2} s for {} objects",
        sync_time.as_secs_f64(),
        reader.state().len()
    );
    sync.abort();

    // Watch fan-out: 10 watchers, 1,000 updates.
    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let w = api
            .watch(
                &WatchParams::default().fields("metadata.name=cm-000001"),
                &rv,
            )
            .await?
            .boxed();
        watchers.push(w);
    }
    let t = Instant::now();
    let counting: Vec<_> = watchers
        .into_iter()
        .map(|mut w| {
            tokio::spawn(async move {
                let mut n = 0usize;
                while n < UPDATES {
                    match w.next().await {
                        Some(Ok(WatchEvent::Modified(_))) => n += 1,
                        Some(_) => {}
                        None => break,
                    }
                }
                n
            })
        })
        .collect();
    for i in 0..UPDATES {
        api.patch(
            "cm-000001",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": i.to_string()}})),
        )
        .await?;
    }
    let mut delivered = 0;
    for c in counting {
        delivered += c.await?;
    }
    let fanout = t.elapsed();
    println!(
        "watch fan-out: {UPDATES} updates x {WATCHERS} watchers = {delivered} events in {:.2} s: {:.0} events/s",
        fanout.as_secs_f64(),
        rate(delivered, fanout)
    );
    server.shutdown().await?;
    Ok(())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
