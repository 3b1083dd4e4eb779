//! Builds the cache tree of `config/samples/multi-namespace.yaml` against the embedded API
//! server, reads Pods through it and shows which ones it serves and the typed errors it returns.
//!
//! Run it with `cargo run --example cache_tree` (no cluster needed).

use std::error::Error;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::cache::NamespaceKey;
use informant::cache::{self, Cache, ListOptions};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// Every read, and the shutdown, fails after this long instead of hanging.
const GUARD: Duration = Duration::from_secs(30);

/// One Pod of the demo.
struct DemoPod {
    namespace: &'static str,
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    phase: &'static str,
}

/// The Pods of the demo: which ones each namespace entry serves depends on its selectors.
const PODS: &[DemoPod] = &[
    DemoPod {
        namespace: "team-a",
        name: "web-1",
        labels: &[],
        phase: "Pending",
    },
    DemoPod {
        namespace: "team-b",
        name: "web-2",
        labels: &[("tier", "web")],
        phase: "Running",
    },
    DemoPod {
        namespace: "team-b",
        name: "web-3",
        labels: &[("tier", "web")],
        phase: "Pending",
    },
    DemoPod {
        namespace: "team-b",
        name: "batch-1",
        labels: &[("tier", "batch")],
        phase: "Running",
    },
    DemoPod {
        namespace: "team-c",
        name: "cart-1",
        labels: &[("app.kubernetes.io/part-of", "shop")],
        phase: "Running",
    },
    DemoPod {
        namespace: "team-c",
        name: "debug",
        labels: &[],
        phase: "Running",
    },
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/samples/multi-namespace.yaml"
    );
    let options = informant::config::load(path)?.cache;

    let server = TestServer::start().await?;
    let client = server.client().await?;
    create_pods(&client).await?;

    // The plan is the tree as data: it needs no client, and describes itself.
    println!("The tree of multi-namespace.yaml:");
    print!("{}", cache::Plan::new(&options)?.describe().to_text());
    let tree = cache::build(&options, client.clone())?;

    // The cache API requires a tracker for the informer tasks and a token that stops them.
    let (tracker, shutdown) = (TaskTracker::new(), CancellationToken::new());
    tree.start(&tracker, &shutdown);

    // The first read starts the Pod informers of every namespace entry and waits for their sync.
    let pods: Vec<Pod> = tokio::time::timeout(
        GUARD,
        cache::typed::list(tree.as_ref(), &ListOptions::default()),
    )
    .await??;
    println!(
        "\nPods served ({} of {} in the server):",
        pods.len(),
        PODS.len()
    );
    for pod in &pods {
        println!("  {}", key(pod));
    }
    let in_cache: Vec<(&str, &str)> = pods
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.namespace.as_deref()?,
                p.metadata.name.as_deref()?,
            ))
        })
        .collect();
    let filtered: Vec<String> = PODS
        .iter()
        .filter(|p| !in_cache.contains(&(p.namespace, p.name)))
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    println!(
        "Filtered out by the entries' selectors: {}",
        filtered.join(", ")
    );
    println!("Informers started: {}", tree.informers().len());

    let pod: Pod = cache::typed::get(tree.as_ref(), Some("team-c"), "cart-1").await?;
    println!(
        "\nget team-c/cart-1: served by the \"\" entry: {}",
        key(&pod)
    );
    match cache::typed::get::<Pod>(tree.as_ref(), Some("team-b"), "batch-1").await {
        Err(err @ cache::Error::NotFound { .. }) => {
            println!("get team-b/batch-1: {err} (team-b caches only tier=web)");
        }
        other => println!("get team-b/batch-1: unexpected {other:?}"),
    }

    // Without the "" fallback, a namespace the config does not list is an error, not an empty
    // answer.
    let mut listed_only = options.clone();
    listed_only
        .default_namespaces
        .remove(&NamespaceKey::AllOthers);
    let strict = cache::build(&listed_only, client)?;
    strict.start(&tracker, &shutdown);
    println!("\nThe same config without the \"\" entry:");
    report(strict.as_ref(), "team-c").await;

    shutdown.cancel();
    tracker.close();
    tokio::time::timeout(GUARD, tracker.wait()).await?;
    server.shutdown().await?;
    println!("\nInformers stopped, server shut down.");
    Ok(())
}

/// Prints the typed errors of a get and a list in a namespace the cache does not know.
async fn report(tree: &dyn Cache, namespace: &str) {
    match cache::typed::get::<Pod>(tree, Some(namespace), "cart-1").await {
        Err(err @ cache::Error::UnknownNamespaceGet { .. }) => {
            println!("  get {namespace}/cart-1: Error::UnknownNamespaceGet: {err}");
        }
        other => println!("  get {namespace}/cart-1: unexpected {other:?}"),
    }
    let in_namespace = ListOptions {
        namespace: Some(namespace.into()),
        ..ListOptions::default()
    };
    match cache::typed::list::<Pod>(tree, &in_namespace).await {
        Err(err @ cache::Error::UnknownNamespaceList { .. }) => {
            println!("  list {namespace}: Error::UnknownNamespaceList: {err}");
        }
        other => println!("  list {namespace}: unexpected {other:?}"),
    }
}

/// Creates the namespaces and Pods of [`PODS`] as a client would, phases through `/status`.
async fn create_pods(client: &kube::Client) -> Result<(), Box<dyn Error>> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["team-a", "team-b", "team-c"] {
        let ns = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    for DemoPod {
        namespace,
        name,
        labels,
        phase,
    } in PODS
    {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect();
        let pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]},
        }))?;
        api.create(&PostParams::default(), &pod).await?;
        let status = json!({"status": {"phase": phase}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    Ok(())
}

/// `namespace/name labels phase` of a Pod.
fn key(pod: &Pod) -> String {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    format!(
        "{}/{} labels={:?} phase={}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or(""),
        labels,
        phase.unwrap_or("-"),
    )
}
