//! A finalizer on a Rust controller: `Context::finalizer` (kube-runtime's `finalizer`
//! semantics and types) in a reconcile, with the controller's `Context` (its client, field
//! manager and state), against the embedded API server. The finalizer is added, the cleanup runs on deletion (it deletes
//! what no owner reference would: a Secret the `ConfigMap` does not own), and the `ConfigMap`
//! is then actually removed.
//!
//! Each controller here watches only what its test labels (`app=demo`, `app=web`): on a real
//! cluster (`e2e/cluster/rust-suites.sh`) a controller over every `ConfigMap` would put its
//! finalizer on the cluster's own (`kube-system`'s, every namespace's `kube-root-ca.crt`) and
//! leave mirrors in namespaces no reset empties, as an unscoped operator would in production.

use crate::support;

use std::sync::Arc;

use informant::controller::{Action, Context, Controller, default_error_policy};
use informant::recorder::{NullSink, Options, Pipeline, SystemClock};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::finalizer::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The finalizer the controller puts on every `ConfigMap` it reconciles.
const FINALIZER: &str = "demo.informant.dev/mirror";

/// The controller's state: where its cleanups report the `ConfigMap` they cleaned up.
struct State {
    cleaned: mpsc::UnboundedSender<String>,
}

/// The mirror of `configmap`: a `Secret` beside it, not owned (the cleanup, not the garbage
/// collector, must delete it).
fn mirror_name(configmap: &ConfigMap) -> String {
    format!("mirror-{}", configmap.name_any())
}

async fn reconcile(
    configmap: Arc<ConfigMap>,
    ctx: Arc<Context<State>>,
) -> Result<Action, finalizer::Error<kube::Error>> {
    let namespace = configmap.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client().clone(), &namespace);
    ctx.finalizer(FINALIZER, configmap, |event| async {
        match event {
            Event::Apply(configmap) => {
                let mirror = json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": mirror_name(&configmap), "namespace": namespace},
                    "stringData": {"from": configmap.name_any()},
                });
                let params = PatchParams::apply(ctx.field_manager()).force();
                secrets
                    .patch(&mirror_name(&configmap), &params, &Patch::Apply(mirror))
                    .await?;
                Ok(Action::await_change())
            }
            Event::Cleanup(configmap) => {
                match secrets
                    .delete(&mirror_name(&configmap), &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => return Err(error),
                }
                let _ = ctx.data().cleaned.send(configmap.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
}

/// A cache reloader over `env` that holds only the objects labelled `selector`.
async fn labelled_reloader(env: &support::Env, selector: &str) -> informant::cache::CacheReloader {
    let mut reloader = env.reloader(support::WAIT);
    let options = informant::cache::Options {
        default_label_selector: Some(informant::selector::LabelSelector::parse(selector).unwrap()),
        ..informant::cache::Options::default()
    };
    reloader.apply(&options).await.unwrap();
    reloader
}

#[tokio::test]
async fn a_finalizer_runs_the_cleanup_on_deletion_and_then_lets_the_object_go() {
    let env = support::Env::new().await;
    let reloader = labelled_reloader(&env, "app=demo").await;
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let (cleaned, mut cleanups) = mpsc::unbounded_channel();
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        env.client.clone(),
        pipeline.recorder(),
    )
    .with_data(State { cleaned });
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(Controller::<ConfigMap>::new("mirrors").run(
        ctx,
        reconcile,
        default_error_policy,
        shutdown.clone(),
    ));

    env.configmap("default", "db", &json!({"app": "demo"}));
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    support::eventually("the finalizer on db and its mirror Secret", || async {
        let finalized = configmaps
            .get_opt("db")
            .await
            .unwrap()
            .is_some_and(|c| c.finalizers().iter().any(|f| f == FINALIZER));
        finalized && secrets.get_opt("mirror-db").await.unwrap().is_some()
    })
    .await;
    assert!(
        cleanups.try_recv().is_err(),
        "no cleanup before the deletion"
    );

    configmaps
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    let cleaned = tokio::time::timeout(support::WAIT, cleanups.recv()).await;
    assert_eq!(cleaned.unwrap().as_deref(), Some("db"), "the cleanup ran");
    support::eventually(
        "the ConfigMap db removed once its finalizer went",
        || async { configmaps.get_opt("db").await.unwrap().is_none() },
    )
    .await;
    assert!(
        secrets.get_opt("mirror-db").await.unwrap().is_none(),
        "the cleanup deleted the mirror, which nothing else would"
    );
    shutdown.cancel();
    tokio::time::timeout(support::WAIT, task)
        .await
        .expect("the controller stops on shutdown")
        .unwrap()
        .unwrap();
    env.stop().await;
}

/// The finalizer's patch carries the `resourceVersion` the reconcile read: a list someone
/// changed since is a conflict (retried by the error policy), never their finalizer lost.
#[tokio::test]
async fn a_finalizer_list_changed_since_the_read_is_a_conflict_and_keeps_the_other_finalizer() {
    let env = support::Env::new().await;
    let reloader = env.default_reloader(support::WAIT).await;
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        env.client.clone(),
        pipeline.recorder(),
    );
    let read: ConfigMap =
        serde_json::from_value(env.configmap("default", "db", &json!({"app": "demo"}))).unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    let theirs = json!({"metadata": {"finalizers": ["someone.else/keep"]}});
    configmaps
        .patch("db", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();

    let answer = ctx
        .finalizer(FINALIZER, Arc::new(read), |_| async {
            Ok::<_, kube::Error>(Action::await_change())
        })
        .await;
    assert!(
        matches!(
            &answer,
            Err(finalizer::Error::AddFinalizer(kube::Error::Api(status))) if status.code == 409
        ),
        "{answer:?}"
    );
    let now = configmaps.get("db").await.unwrap();
    assert_eq!(now.finalizers(), ["someone.else/keep"]);

    // Read again, the finalizer is added beside theirs.
    let answer = ctx
        .finalizer(FINALIZER, Arc::new(now), |_| async {
            Ok::<_, kube::Error>(Action::await_change())
        })
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    let now = configmaps.get("db").await.unwrap();
    assert_eq!(now.finalizers(), ["someone.else/keep", FINALIZER]);
    env.stop().await;
}

/// The finalizer helper with `Predicate::GenerationChanged`, as a kube-rs developer writes a
/// Website operator: adding the finalizer does not bump the generation, so the reconcile must
/// go on in the pass that added it (else the predicate filters the change out and the object
/// waits for a resync), and the deletion must reach the reconcile whatever the predicate.
#[tokio::test]
async fn a_finalizer_with_the_generation_predicate_applies_at_once_and_cleans_up_on_deletion() {
    use informant::controller::Predicate;
    use k8s_openapi::api::apps::v1::Deployment;

    let env = support::Env::new().await;
    let reloader = labelled_reloader(&env, "app=web").await;
    let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
    let (events, mut seen) = mpsc::unbounded_channel::<String>();
    let ctx = Context::new(
        reloader.cache(),
        Arc::clone(reloader.pool()),
        env.client.clone(),
        pipeline.recorder(),
    )
    .with_data(events);
    let reconcile = |deployment: Arc<Deployment>,
                     ctx: Arc<Context<mpsc::UnboundedSender<String>>>| async move {
        let sink = ctx.data().clone();
        ctx.finalizer(FINALIZER, deployment, |event| async move {
            let said = match event {
                Event::Apply(d) => format!("apply {}", d.name_any()),
                Event::Cleanup(d) => format!("cleanup {}", d.name_any()),
            };
            let _ = sink.send(said);
            Ok::<_, kube::Error>(Action::await_change())
        })
        .await
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(
        Controller::<Deployment>::new("websites")
            .predicate(Predicate::GenerationChanged)
            .run(ctx, reconcile, default_error_policy, shutdown.clone()),
    );

    env.create(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }));
    let first = tokio::time::timeout(support::WAIT, seen.recv()).await;
    assert_eq!(
        first.ok().flatten().as_deref(),
        Some("apply web"),
        "the reconcile went on in the pass that added the finalizer"
    );

    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), "default");
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let cleaned = tokio::time::timeout(support::WAIT, async {
        while let Some(said) = seen.recv().await {
            if said == "cleanup web" {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        cleaned,
        Ok(true),
        "the deletion reached the reconcile under the predicate"
    );
    support::eventually(
        "the Deployment web removed once its finalizer went",
        || async { deployments.get_opt("web").await.unwrap().is_none() },
    )
    .await;
    shutdown.cancel();
    tokio::time::timeout(support::WAIT, task)
        .await
        .expect("the controller stops on shutdown")
        .unwrap()
        .unwrap();
    env.stop().await;
}
