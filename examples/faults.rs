//! Fault injection in the embedded API server: a kube-rs `watcher` + `reflector` keeps its store
//! right when every watch is dropped (it re-watches from its last resourceVersion) and when the
//! watch history expires (the resume gets 410 Gone and it relists). Prints the watcher's events
//! and the server's request counters after each step. A reflector that missed a change would
//! never converge, and the example would fail after its timeout.
//!
//! Run it with `cargo run --example faults` (no cluster needed).

use std::error::Error;
use std::time::Duration;

use futures::StreamExt;
use informant::apiserver::{Handle, TestServer, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, reflector::Store, watcher};
use serde_json::json;
use tokio::sync::mpsc;

/// The store must converge within this long after each step.
const GUARD: Duration = Duration::from_secs(30);

// One thread: the reflector task writes its store and sends the event in one poll, so the
// printed events always match the store `until` looks at.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = TestServer::start().await?;
    let handle = server.handle().clone();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await?, "default");
    create(&api, "a").await?;

    // The reflector runs on its own task, as in a controller; its events come here as text.
    let (store, writer) = reflector::store();
    let mut stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .boxed();
    let (tx, mut events) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            let line = match item {
                Ok(event) => describe(&event),
                // kube-rs appends the whole Status object; its message says enough here.
                Err(err) => {
                    let text = err.to_string();
                    let short = text.split(" (Status").next().unwrap_or(&text);
                    format!("error (it retries): {short}")
                }
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    println!("1. start: the watcher lists, then watches; b arrives through the watch");
    until(&mut events, || names(&store) == ["a"]).await?;
    create(&api, "b").await?;
    until(&mut events, || names(&store) == ["a", "b"]).await?;
    counters(&handle, &store);

    println!("\n2. drop_watches(), create c: the watcher re-watches from its resourceVersion");
    handle.drop_watches();
    create(&api, "c").await?;
    until(&mut events, || {
        names(&store) == ["a", "b", "c"] && handle.request_count(Verb::Watch, "configmaps") >= 2
    })
    .await?;
    counters(&handle, &store);

    println!("\n3. re-watches fail (500), watches dropped; delete a, create d; expire_history()");
    handle.fail_next(Some(Verb::Watch), Some("configmaps"), u32::MAX, 500);
    handle.drop_watches();
    until(&mut events, || {
        handle.request_count(Verb::Watch, "configmaps") >= 3
    })
    .await?;
    // The watcher backs off and keeps its resourceVersion while the history changes and
    // expires, so its next resume is older than the history: 410 Gone, and it must relist.
    api.delete("a", &DeleteParams::default()).await?;
    create(&api, "d").await?;
    handle.expire_history();
    handle.clear_faults();
    until(&mut events, || {
        names(&store) == ["b", "c", "d"] && handle.request_count(Verb::List, "configmaps") >= 2
    })
    .await?;
    counters(&handle, &store);

    driver.abort();
    server.shutdown().await?;
    Ok(())
}

/// Creates `ConfigMap` `name` in `default`.
async fn create(api: &Api<ConfigMap>, name: &str) -> Result<(), Box<dyn Error>> {
    let cm = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}}))?;
    api.create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Prints the watcher's events as they come until `done` holds after one of them, then the
/// events already queued; fails after [`GUARD`] or when the reflector stops.
async fn until(
    events: &mut mpsc::UnboundedReceiver<String>,
    mut done: impl FnMut() -> bool,
) -> Result<(), Box<dyn Error>> {
    tokio::time::timeout(GUARD, async {
        loop {
            let Some(line) = events.recv().await else {
                return Err("the reflector stopped".into());
            };
            println!("   watcher: {line}");
            if done() {
                while let Ok(line) = events.try_recv() {
                    println!("   watcher: {line}");
                }
                return Ok(());
            }
        }
    })
    .await?
}

/// The sorted names in the store.
fn names(store: &Store<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = store
        .state()
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// One watcher event as text.
fn describe(event: &watcher::Event<ConfigMap>) -> String {
    let name = |cm: &ConfigMap| cm.metadata.name.clone().unwrap_or_default();
    match event {
        watcher::Event::Init => "Init (a list starts)".into(),
        watcher::Event::InitApply(cm) => format!("InitApply {}", name(cm)),
        watcher::Event::InitDone => "InitDone (the store is replaced)".into(),
        watcher::Event::Apply(cm) => format!("Apply {}", name(cm)),
        watcher::Event::Delete(cm) => format!("Delete {}", name(cm)),
    }
}

/// Prints the store and the server's request counters for `ConfigMaps`.
fn counters(handle: &Handle, store: &Store<ConfigMap>) {
    let line: Vec<String> = handle
        .requests()
        .iter()
        .filter(|r| r.resource == "configmaps")
        .map(|r| format!("{} {}", r.verb, r.count))
        .collect();
    println!("   store: {:?}", names(store));
    println!("   requests on configmaps: {}", line.join(", "));
}
