//! The cache tree's eleven behaviours (tests `b1_` to `b11_`), each against the embedded API
//! server, with controller-runtime's messages: config → build → start → read.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use informant::apiserver::Verb;
use informant::cache::{Cache, Context, Error, ListOptions, Plan};
use informant::selector::{FieldSelector, LabelSelector};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A broken test fails after this long instead of hanging.
const GUARD: Duration = Duration::from_mins(1);

fn gvk(kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", kind)
}

/// The cache options of a `CacheConfig` whose spec is `spec` (YAML, indented by 2).
fn options(spec: &str) -> informant::cache::Options {
    let doc = format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: t}}\nspec:\n{spec}"
    );
    informant::config::load_str(&doc).unwrap().cache
}

/// The shared [`support::Env`] with a cache tree built from one spec.
struct Env {
    base: support::Env,
    tree: Arc<dyn Cache>,
}

support::wraps_env!(Env);

impl Env {
    async fn new(spec: &str) -> Self {
        Self::with_timeout(spec, Some(Duration::from_secs(30))).await
    }

    /// A server and a tree built (not started) from `spec`.
    async fn unstarted(spec: &str, sync_timeout: Option<Duration>) -> Self {
        let base = support::Env::new().await;
        let opts = options(spec);
        let context = Context {
            reader_fail_on_missing_informer: opts.reader_fail_on_missing_informer,
            ..base.cache_context(sync_timeout)
        };
        let tree = Plan::new(&opts).unwrap().instantiate(&context);
        Self { base, tree }
    }

    async fn with_timeout(spec: &str, sync_timeout: Option<Duration>) -> Self {
        let env = Self::unstarted(spec, sync_timeout).await;
        env.tree.start(&env.tracker, &env.shutdown);
        env
    }

    fn cm(&self, ns: &str, name: &str, labels: &serde_json::Value) {
        self.configmap(ns, name, labels);
    }

    async fn list(&self, kind: &str, options: ListOptions) -> Result<Vec<String>, Error> {
        let objects = self.tree.list(&gvk(kind), &options).await?;
        Ok(objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap_or(""),
                    o.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect())
    }

    async fn stop(self) {
        self.base.stop().await;
    }
}

fn in_ns(ns: &str) -> ListOptions {
    ListOptions {
        namespace: Some(ns.into()),
        ..ListOptions::default()
    }
}

async fn guarded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(GUARD, test)
        .await
        .expect("test finished in time");
}

#[tokio::test]
async fn b1_a_read_of_an_uncached_kind_starts_an_informer_and_waits_for_its_sync() {
    guarded(async {
        let env = Env::new("  {}\n").await;
        env.cm("a", "x", &json!({}));
        assert!(env.tree.informers().is_empty());
        let x = env
            .tree
            .get(&gvk("ConfigMap"), Some("a"), "x")
            .await
            .unwrap();
        assert_eq!(x.metadata.name.as_deref(), Some("x"));
        let informers = env.tree.informers();
        assert_eq!(informers.len(), 1);
        assert!(
            informers[0].synced && informers[0].objects == 1 && informers[0].kind == "ConfigMap"
        );
        assert_eq!(
            env.list("ConfigMap", ListOptions::default()).await.unwrap(),
            ["a/x"]
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b1_concurrent_first_reads_of_a_kind_share_one_informer_and_one_list() {
    guarded(async {
        let env = Env::new("  {}\n").await;
        env.cm("a", "x", &json!({}));
        let kind = gvk("ConfigMap");
        let (one, two) = futures::join!(
            env.tree.get(&kind, Some("a"), "x"),
            env.list("ConfigMap", ListOptions::default()),
        );
        assert!(one.is_ok());
        assert_eq!(two.unwrap(), ["a/x"]);
        assert_eq!(env.tree.informers().len(), 1);
        assert_eq!(
            env.server.handle().request_count(Verb::List, "configmaps"),
            1
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b2_reader_fail_on_missing_informer_fails_reads_until_ensure_informer() {
    guarded(async {
        let env = Env::new("  readerFailOnMissingInformer: true\n").await;
        env.cm("a", "x", &json!({}));
        let get = env
            .tree
            .get(&gvk("ConfigMap"), Some("a"), "x")
            .await
            .unwrap_err();
        assert_eq!(get.to_string(), "/v1, Kind=ConfigMap is not cached");
        assert!(get.is_kind_not_cached() && !get.is_not_found());
        let list = env
            .list("ConfigMap", ListOptions::default())
            .await
            .unwrap_err();
        assert_eq!(list.to_string(), "/v1, Kind=ConfigMap is not cached");
        env.tree.ensure_informer(&gvk("ConfigMap")).await.unwrap();
        assert!(
            env.tree
                .get(&gvk("ConfigMap"), Some("a"), "x")
                .await
                .is_ok()
        );
        assert_eq!(
            env.list("ConfigMap", ListOptions::default()).await.unwrap(),
            ["a/x"]
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b3_a_namespace_outside_default_namespaces_is_an_unknown_namespace_error() {
    guarded(async {
        let env = Env::new("  defaultNamespaces: {a: {}, b: {}}\n").await;
        env.cm("c", "x", &json!({}));
        let get = env
            .tree
            .get(&gvk("ConfigMap"), Some("c"), "x")
            .await
            .unwrap_err();
        assert_eq!(
            get.to_string(),
            "unable to get: c/x because of unknown namespace for the cache"
        );
        let list = env.list("ConfigMap", in_ns("c")).await.unwrap_err();
        assert_eq!(
            list.to_string(),
            "unable to list: c because of unknown namespace for the cache"
        );
        assert!(!get.is_not_found() && !list.is_not_found());
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b4_the_empty_entry_serves_other_namespaces_and_nothing_is_served_twice() {
    guarded(async {
        let env = Env::new("  defaultNamespaces: {a: {}, \"\": {}}\n").await;
        env.cm("a", "x", &json!({}));
        env.cm("c", "y", &json!({}));
        assert!(
            env.tree
                .get(&gvk("ConfigMap"), Some("c"), "y")
                .await
                .is_ok()
        );
        assert!(
            env.tree
                .get(&gvk("ConfigMap"), Some("a"), "x")
                .await
                .is_ok()
        );
        assert_eq!(
            env.list("ConfigMap", ListOptions::default()).await.unwrap(),
            ["c/y", "a/x"]
        );
        let mut counts: Vec<(Option<String>, i64)> = env
            .tree
            .informers()
            .into_iter()
            .map(|i| (i.namespace, i.objects))
            .collect();
        counts.sort();
        assert_eq!(
            counts,
            [(None, 1), (Some("a".into()), 1)],
            "the \"\" informer excludes namespace a"
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b5_cluster_scoped_kinds_are_served_by_the_cluster_cache_ignoring_the_namespace() {
    guarded(async {
        let env = Env::new("  defaultNamespaces: {a: {}}\n").await;
        env.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
        let node = env
            .tree
            .get(&gvk("Node"), Some("not-listed"), "n1")
            .await
            .unwrap();
        assert_eq!(node.metadata.name.as_deref(), Some("n1"));
        assert_eq!(
            env.list("Node", in_ns("not-listed")).await.unwrap(),
            ["/n1"]
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b6_by_object_namespaces_inherit_or_cover_all_and_other_kinds_use_the_default_cache() {
    guarded(async {
        let spec = "  defaultNamespaces: {a: {}}\n  byObject:\n  - {apiVersion: v1, kind: ConfigMap}\n  - {apiVersion: v1, kind: Secret, namespaces: {}}\n";
        let env = Env::new(spec).await;
        env.cm("c", "x", &json!({}));
        env.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "c"}}));
        env.create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}));
        // Absent namespaces: inherit defaultNamespaces {a}.
        let inherited = env.tree.get(&gvk("ConfigMap"), Some("c"), "x").await.unwrap_err();
        assert!(inherited.is_unknown_namespace(), "{inherited}");
        // Empty map: every namespace.
        assert!(env.tree.get(&gvk("Secret"), Some("c"), "s").await.is_ok());
        // Not in byObject: the default cache serves it, no error.
        assert!(env.tree.get(&gvk("Pod"), Some("a"), "p").await.is_ok());
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b7_missing_objects_are_not_found_and_unstarted_or_unsynced_reads_are_typed() {
    guarded(async {
        let env = Env::new("  {}\n").await;
        let missing = env.tree.get(&gvk("Pod"), Some("a"), "x").await.unwrap_err();
        assert_eq!(missing.to_string(), "Pod \"x\" not found");
        assert!(missing.is_not_found());
        env.stop().await;

        let unstarted = Env::unstarted("  {}\n", None).await;
        let err = unstarted
            .tree
            .get(&gvk("Pod"), Some("a"), "x")
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the cache is not started, can not read objects"
        );

        let slow = Env::with_timeout("  {}\n", Some(Duration::from_millis(200))).await;
        slow.server.handle().set_latency(Duration::from_hours(1));
        let timeout = slow
            .tree
            .get(&gvk("Pod"), Some("a"), "x")
            .await
            .unwrap_err();
        assert!(timeout.is_timeout(), "{timeout}");
        assert_eq!(
            timeout.to_string(),
            "Timeout: failed waiting for /v1, Kind=Pod informer to sync"
        );
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert!(
            slow.tree
                .wait_for_sync(&cancelled)
                .await
                .unwrap_err()
                .is_timeout()
        );
        slow.server.handle().clear_faults();
        slow.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b8_lists_across_namespaces_merge_honour_the_limit_and_reject_continue() {
    guarded(async {
        let env = Env::new("  defaultNamespaces: {a: {}, b: {}}\n").await;
        for (ns, name) in [
            ("a", "x1"),
            ("a", "x2"),
            ("a", "x3"),
            ("b", "y1"),
            ("b", "y2"),
        ] {
            env.cm(ns, name, &json!({}));
        }
        assert_eq!(
            env.list("ConfigMap", ListOptions::default()).await.unwrap(),
            ["a/x1", "a/x2", "a/x3", "b/y1", "b/y2"]
        );
        let limited = ListOptions {
            limit: Some(4),
            ..ListOptions::default()
        };
        assert_eq!(env.list("ConfigMap", limited).await.unwrap().len(), 4);
        let cont = ListOptions {
            continue_token: Some("abc".into()),
            ..ListOptions::default()
        };
        assert_eq!(
            env.list("ConfigMap", cont).await.unwrap_err().to_string(),
            "continue list option is not supported by the cache"
        );
        let exact = ListOptions {
            field_selector: Some(FieldSelector::parse("metadata.name=y2").unwrap()),
            ..ListOptions::default()
        };
        assert_eq!(env.list("ConfigMap", exact).await.unwrap(), ["b/y2"]);
        let inexact = ListOptions {
            field_selector: Some(FieldSelector::parse("metadata.name!=y2").unwrap()),
            ..ListOptions::default()
        };
        assert_eq!(
            env.list("ConfigMap", inexact)
                .await
                .unwrap_err()
                .to_string(),
            "non-exact field matches are not supported by the cache"
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b9_by_object_selectors_replace_the_default_selector_and_non_matching_nodes_are_not_found()
{
    guarded(async {
        let spec = "  defaultLabelSelector: app=shop\n  byObject:\n  - {apiVersion: v1, kind: Node, labelSelector: role=worker}\n";
        let env = Env::new(spec).await;
        env.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker", "labels": {"role": "worker"}}}));
        env.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "shop", "labels": {"app": "shop"}}}));
        env.cm("a", "shop", &json!({"app": "shop"}));
        env.cm("a", "other", &json!({"role": "worker"}));
        // Replacement, never AND: the worker node has no app=shop label and is cached.
        assert!(env.tree.get(&gvk("Node"), None, "worker").await.is_ok());
        let shop = env.tree.get(&gvk("Node"), None, "shop").await.unwrap_err();
        assert_eq!(shop.to_string(), "Node \"shop\" not found");
        // The default selector applies to kinds without their own.
        assert!(env.tree.get(&gvk("ConfigMap"), Some("a"), "shop").await.is_ok());
        assert!(env.tree.get(&gvk("ConfigMap"), Some("a"), "other").await.unwrap_err().is_not_found());
        let by_label = ListOptions { label_selector: Some(LabelSelector::parse("app=shop").unwrap()), ..ListOptions::default() };
        assert_eq!(env.list("ConfigMap", by_label).await.unwrap(), ["a/shop"]);
        env.stop().await;
    })
    .await;
}

fn json_size(obj: &kube::core::DynamicObject) -> usize {
    serde_json::to_vec(obj).unwrap().len()
}

#[tokio::test]
async fn b10_transforms_and_metadata_only_shrink_stored_objects_and_deep_copy_is_optional() {
    guarded(async {
        let spec = "  byObject:\n  - apiVersion: v1\n    kind: ConfigMap\n    transform: {stripManagedFields: true, dropAnnotations: [big]}\n  - {apiVersion: v1, kind: Secret, metadataOnly: true}\n";
        let env = Env::new(spec).await;
        let plain = Env::new("  defaultUnsafeDisableDeepCopy: true\n").await;
        let managed = json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a",
            "annotations": {"big": "x".repeat(2000), "small": "y"}, "managedFields": managed}, "data": {"k": "v"}});
        env.create(cm.clone());
        plain.create(cm);
        env.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"password": "c2VjcmV0".repeat(100)}}));
        plain.create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"password": "c2VjcmV0".repeat(100)}}));

        let small = env.tree.get(&gvk("ConfigMap"), Some("a"), "x").await.unwrap();
        let full = plain.tree.get(&gvk("ConfigMap"), Some("a"), "x").await.unwrap();
        assert!(full.metadata.managed_fields.is_some(), "the server keeps managedFields");
        assert!(small.metadata.managed_fields.is_none());
        assert_eq!(small.metadata.annotations.as_ref().unwrap().keys().collect::<Vec<_>>(), ["small"]);
        assert!(json_size(&small) + 2000 < json_size(&full), "{} vs {}", json_size(&small), json_size(&full));

        let meta = env.tree.get(&gvk("Secret"), Some("a"), "s").await.unwrap();
        assert!(meta.data.get("data").is_none(), "metadataOnly caches no data");
        assert_eq!(meta.metadata.name.as_deref(), Some("s"));
        let secret = plain.tree.get(&gvk("Secret"), Some("a"), "s").await.unwrap();
        assert!(json_size(&meta) + 800 < json_size(&secret));

        // Deep copy by default: each read is a distinct object; unsafeDisableDeepCopy: shared.
        let again = env.tree.get(&gvk("ConfigMap"), Some("a"), "x").await.unwrap();
        assert!(!Arc::ptr_eq(&small, &again));
        let shared = plain.tree.get(&gvk("ConfigMap"), Some("a"), "x").await.unwrap();
        assert!(Arc::ptr_eq(&full, &shared));
        env.stop().await;
        plain.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b11_a_forbidden_kind_fails_reads_with_the_reason_and_shows_an_unsynced_informer() {
    guarded(async {
        let env = Env::with_timeout("  {}\n", None).await;
        env.server
            .handle()
            .fail_next(Some(Verb::List), Some("secrets"), u32::MAX, 403);
        let err = env
            .tree
            .get(&gvk("Secret"), Some("a"), "s")
            .await
            .unwrap_err();
        let Error::InformerFailed {
            gvk: failed,
            reason,
            ..
        } = &err
        else {
            panic!("expected InformerFailed, got {err}")
        };
        assert_eq!(failed.kind, "Secret");
        assert!(
            reason.contains("403") || reason.to_lowercase().contains("forbidden"),
            "{reason}"
        );
        let informers = env.tree.informers();
        assert_eq!(informers.len(), 1);
        assert!(!informers[0].synced);
        assert!(informers[0].error.is_some());
        assert!(
            err.to_string()
                .starts_with("informer for /v1, Kind=Secret in all namespaces can not sync: "),
            "{err}"
        );
        env.server.handle().clear_faults();
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn b11_a_transient_list_failure_is_retried_and_the_read_waits_for_the_sync() {
    guarded(async {
        let env = Env::new("  {}\n").await;
        env.cm("a", "x", &json!({}));
        env.server
            .handle()
            .fail_next(Some(Verb::List), Some("configmaps"), 1, 500);
        let x = env
            .tree
            .get(&gvk("ConfigMap"), Some("a"), "x")
            .await
            .unwrap();
        assert_eq!(x.metadata.name.as_deref(), Some("x"));
        assert_eq!(
            env.server.handle().request_count(Verb::List, "configmaps"),
            2
        );
        assert_eq!(
            env.tree.informers()[0].error,
            None,
            "cleared by the successful list"
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn run_serves_reads_until_shutdown_then_returns_once_every_informer_stopped() {
    guarded(async {
        let env = Env::unstarted(
            "  byObject:\n    - {apiVersion: v1, kind: ConfigMap}\n",
            None,
        )
        .await;
        env.cm("a", "x", &json!({}));
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(env.tree.clone().run(shutdown.clone()));
        let x = env
            .tree
            .get(&gvk("ConfigMap"), Some("a"), "x")
            .await
            .unwrap();
        assert_eq!(x.metadata.name.as_deref(), Some("x"));
        assert!(!running.is_finished(), "runs until shutdown");
        shutdown.cancel();
        // Returns only once the informer's task has stopped (a hang fails the guard).
        running.await.unwrap().unwrap();
    })
    .await;
}
