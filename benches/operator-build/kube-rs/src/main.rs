//! examples/configmap_secret.rs of informant on plain kube-rs: every ConfigMap labelled app=demo
//! gets a Secret with the same keys, server-side applied and owned; a requeue after 5 minutes.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

#[derive(Parser)]
struct Cli {
    #[arg(long, default_value_t = 300)]
    requeue_secs: u64,
}

struct Settings {
    client: Client,
    requeue: Duration,
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Settings>) -> Result<Action, kube::Error> {
    let ns = cm.namespace().unwrap_or_default();
    let mut data = BTreeMap::new();
    for (k, v) in cm.data.iter().flatten() {
        data.insert(k.clone(), ByteString(v.clone().into_bytes()));
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(cm.name_any()),
            namespace: Some(ns.clone()),
            owner_references: cm.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .patch(&cm.name_any(), &PatchParams::apply("demo-secrets").force(), &Patch::Apply(&secret))
        .await?;
    Ok(Action::requeue(ctx.requeue))
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Settings>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let cli = Cli::parse();
    let client = Client::try_default().await?;
    let settings = Arc::new(Settings { client: client.clone(), requeue: Duration::from_secs(cli.requeue_secs) });
    Controller::new(Api::<ConfigMap>::all(client.clone()), watcher::Config::default().labels("app=demo"))
        .owns(Api::<Secret>::all(client), watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, settings)
        .for_each(|r| async move { if let Err(e) = r { tracing::warn!(%e, "reconcile failed") } })
        .await;
    Ok(())
}
