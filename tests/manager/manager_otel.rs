//! A running manager's `config_reload`, `reconcile` and `event` spans reach an OpenTelemetry
//! exporter. The subscriber is the test thread's default (`support::capture_spans`, which keeps
//! the other tests of the binary from hiding callsites from it); the runtime is current-thread
//! so every task sees it.

use std::net::SocketAddr;
use std::time::Duration;

use informant::apiserver::TestServer;
use informant::controller::{Action, Controller, default_error_policy};
use informant::manager::{ConfigSource, Manager, Options, Reload};
use k8s_openapi::api::core::v1::ConfigMap;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt as _;

const CONFIG: &str = "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec:
  byObject: [{apiVersion: v1, kind: ConfigMap}]
";

#[tokio::test(flavor = "current_thread")]
async fn config_reload_reconcile_and_event_spans_are_exported() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("informant")));
    let _guard = crate::support::capture_spans(subscriber);

    let server = TestServer::start().await.unwrap();
    server
        .handle()
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "one"}}))
        .unwrap();
    let client = server.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let options = Options {
        metrics_addr: None,
        health_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        debounce: Duration::ZERO,
        ..Options::new(ConfigSource::File(path.clone()))
    };
    let mut manager = Manager::new(client, options).await.unwrap();
    let (sender, mut reconciles) = tokio::sync::mpsc::unbounded_channel();
    Controller::<ConfigMap>::new("configmaps").add_to(
        &mut manager,
        move |cm, _ctx| {
            let sender = sender.clone();
            async move {
                let _ = sender.send(cm.metadata.name.clone());
                Ok::<_, std::io::Error>(Action::await_change())
            }
        },
        default_error_policy,
    );
    let mut reloads = manager.reloads();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let wait = Duration::from_secs(20);
    let first = tokio::time::timeout(wait, reconciles.recv()).await.unwrap();
    assert_eq!(first, Some(Some("one".to_string())));

    std::fs::write(
        &path,
        CONFIG.replace("kind: ConfigMap}", "kind: ConfigMap, labelSelector: a=b}"),
    )
    .unwrap();
    let reload = tokio::time::timeout(wait, reloads.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(reload, Reload::Applied { .. }), "{reload:?}");
    shutdown.cancel();
    tokio::time::timeout(wait, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let named = |name: &str| spans.iter().filter(|s| s.name == name).count();
    assert!(
        named("config_reload") >= 1,
        "config_reload span: {spans:#?}"
    );
    assert!(named("reconcile") >= 1, "reconcile span");
    let fates: Vec<String> = spans
        .iter()
        .filter(|s| s.name == "event")
        .filter_map(|s| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == "event.fate")
                .map(|kv| kv.value.to_string())
        })
        .collect();
    assert_eq!(
        fates.len(),
        1,
        "the ConfigReloaded event's span, with its fate: {fates:?}"
    );
}
