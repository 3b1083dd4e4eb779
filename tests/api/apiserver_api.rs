//! kube-rs `Api` against the embedded API server: CRUD with Status errors, namespaces,
//! metadata, patches, server-side apply, status subresource, finalizers, CRDs, discovery.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use kube::{Client, Error};
use serde_json::json;

use crate::support::server;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "data": {"k": "v"}
    }))
    .unwrap()
}

fn status_of(err: Error) -> kube::core::Status {
    match err {
        Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn create_ns(client: &Client, name: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn create_get_update_delete_round_trip_with_metadata() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let mut got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");
    got.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let updated = api
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resourceVersion must grow: {rv1} -> {rv2}");
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let err = status_of(api.get("a").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    assert_eq!(err.message, "configmaps \"a\" not found");
    assert_eq!(err.details.unwrap().name, "a");
}

#[tokio::test]
async fn duplicate_create_is_already_exists_and_stale_update_is_conflict() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let err = status_of(
        api.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));

    let mut newer = first.clone();
    newer.data = Some(BTreeMap::from([("k".into(), "1".into())]));
    api.replace("a", &PostParams::default(), &newer)
        .await
        .unwrap();
    let mut stale = first;
    stale.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let err = status_of(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains("the object has been modified"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_namespaced_object_in_a_missing_namespace_is_not_found() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let err = status_of(
        api.create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "namespaces \"nowhere\" not found");
}

#[tokio::test]
async fn cross_namespace_list_and_namespace_deletion_removes_contents() {
    let (_s, client) = server().await;
    create_ns(&client, "a").await;
    create_ns(&client, "b").await;
    for ns in ["a", "b"] {
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &cm("x"))
            .await
            .unwrap();
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    Api::<Namespace>::all(client.clone())
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let left = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0].metadata.namespace.as_deref(), Some("b"));
}

#[tokio::test]
async fn generation_bumps_on_spec_changes_but_not_on_status_or_labels() {
    let (_s, client) = server().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let pp = PatchParams::default();
    let labelled = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let status = api
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(1));
    assert_eq!(status.status.unwrap().replicas, Some(1));
    let scaled = api
        .patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    // Status written through the main resource is ignored.
    let ignored = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(ignored.status.unwrap().replicas, Some(1));
    let got = api.get_status("web").await.unwrap();
    assert_eq!(got.status.unwrap().replicas, Some(1));
}

#[tokio::test]
async fn json_patch_merge_patch_and_strategic_merge_patch_apply() {
    let (_s, client) = server().await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
        "spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let pp = PatchParams::default();
    let jp: json_patch_v4::Patch = serde_json::from_value(
        json!([{"op": "replace", "path": "/metadata/labels/a", "value": "9"}]),
    )
    .unwrap();
    let p = api.patch("p", &pp, &Patch::<()>::Json(jp)).await.unwrap();
    assert_eq!(p.metadata.labels.as_ref().unwrap()["a"], "9");
    let p = api
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"b": null}}})),
        )
        .await
        .unwrap();
    assert!(!p.metadata.labels.as_ref().unwrap().contains_key("b"));
    let p = api
        .patch(
            "p",
            &pp,
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "c2", "image": "new"}]}})),
        )
        .await
        .unwrap();
    let containers = p.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "strategic merge keeps c1");
    assert_eq!(containers[1].image.as_deref(), Some("new"));
    // A failing JSON patch test op is rejected and changes nothing.
    let bad: json_patch_v4::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "q"}]))
            .unwrap();
    let err = status_of(
        api.patch("p", &pp, &Patch::<()>::Json(bad))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn server_side_apply_creates_merges_and_records_managed_fields() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PatchParams::apply("tester");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let created = api
        .patch("ssa", &pp, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["a"], "1");
    let mf = created.metadata.managed_fields.unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("tester"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let more = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"b": "2"}});
    let merged = api
        .patch("ssa", &PatchParams::apply("other"), &Patch::Apply(&more))
        .await
        .unwrap();
    let data = merged.data.unwrap();
    assert_eq!((data["a"].as_str(), data["b"].as_str()), ("1", "2"));
    assert_eq!(merged.metadata.managed_fields.unwrap().len(), 2);
    // Re-applying without a field this manager alone applied removes it.
    let fewer =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {}});
    let pruned = api.patch("ssa", &pp, &Patch::Apply(&fewer)).await.unwrap();
    let data = pruned.data.unwrap_or_default();
    assert_eq!(data.get("a"), None, "a was applied only by tester");
    assert_eq!(
        data.get("b").map(String::as_str),
        Some("2"),
        "b belongs to other"
    );
    // Changing a field another apply manager owns conflicts, unless forced.
    let steal = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"b": "3"}});
    let err = status_of(
        api.patch("ssa", &pp, &Patch::Apply(&steal))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(
        err.message.contains("conflict with \"other\": .data.b"),
        "{}",
        err.message
    );
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("tester").force(),
            &Patch::Apply(&steal),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["b"], "3");
}

#[tokio::test]
async fn delete_with_finalizers_waits_until_the_last_finalizer_is_removed() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("f");
    obj.metadata.finalizers = Some(vec!["x/one".into(), "x/two".into()]);
    api.create(&PostParams::default(), &obj).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let pending = api.get("f").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    let pp = PatchParams::default();
    api.patch(
        "f",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": ["x/two"]}})),
    )
    .await
    .unwrap();
    assert!(api.get("f").await.is_ok());
    api.patch(
        "f",
        &pp,
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(status_of(api.get("f").await.unwrap_err()).code, 404);
}

fn crd(scope: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
                "subresources": {"status": {}}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_crd_is_served_at_once_with_status_and_deleting_it_removes_it() {
    let (_s, client) = server().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds
        .create(&PostParams::default(), &crd("Namespaced"))
        .await
        .unwrap();
    let conditions = created.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let (ar, caps) = discovery.resolve_gvk(&gvk).expect("widget is discovered");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}
    }))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ok": true}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ok"], true);
    assert_eq!(st.metadata.generation, Some(1));
    // Strategic merge patch is not supported for custom resources, as on a real server.
    let err = status_of(
        widgets
            .patch(
                "w1",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"size": 2}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 415);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let err = status_of(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
    let discovery = Discovery::new(client).run().await.unwrap();
    assert!(discovery.resolve_gvk(&gvk).is_none());
}

#[tokio::test]
async fn cluster_scoped_crd_objects_live_outside_namespaces() {
    let (_s, client) = server().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd("Cluster"))
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::all_with(client, &ar);
    let w: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "c1"}}),
    )
    .unwrap();
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
}

#[tokio::test]
async fn discovery_lists_every_built_in_resource() {
    let (_s, client) = server().await;
    let discovery = Discovery::new(client).run().await.unwrap();
    for (g, v, k) in [
        ("", "v1", "Pod"),
        ("", "v1", "Namespace"),
        ("", "v1", "Event"),
        ("events.k8s.io", "v1", "Event"),
        ("apps", "v1", "Deployment"),
        ("batch", "v1", "CronJob"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ] {
        assert!(
            discovery
                .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
                .is_some(),
            "{g}/{v} {k}"
        );
    }
}

#[tokio::test]
async fn replace_status_changes_only_status_and_delete_collection_honours_selectors() {
    let (_s, client) = server().await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
    }))
    .unwrap();
    let mut created = api.create(&PostParams::default(), &d).await.unwrap();
    created.status = Some(serde_json::from_value(json!({"readyReplicas": 2})).unwrap());
    created.metadata.labels = Some(BTreeMap::from([("ignored".into(), "yes".into())]));
    let replaced = api
        .replace_status("web", &PostParams::default(), &created)
        .await
        .unwrap();
    assert_eq!(replaced.status.unwrap().ready_replicas, Some(2));
    assert_eq!(
        replaced.metadata.labels, None,
        "status updates ignore metadata changes"
    );

    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for (n, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let mut c = cm(n);
        c.metadata.labels = Some(BTreeMap::from([("app".into(), app.into())]));
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=web"),
    )
    .await
    .unwrap();
    let left = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0].metadata.name.as_deref(), Some("b"));
}

#[tokio::test]
async fn leases_and_events_are_created_by_update_but_configmaps_are_not() {
    let (_s, client) = server().await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let lease = serde_json::from_value(
        json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}}),
    )
    .unwrap();
    let created = leases
        .replace("leader", &PostParams::default(), &lease)
        .await
        .unwrap();
    assert_eq!(created.spec.unwrap().holder_identity.as_deref(), Some("me"));
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let err = status_of(
        cms.replace("a", &PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
}

#[tokio::test]
async fn event_and_secret_field_selectors_match_like_kube_apiserver() {
    let (_s, client) = server().await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    for (n, kind, reason) in [
        ("e1", "Pod", "Started"),
        ("e2", "CronJob", "SawCompletedJob"),
    ] {
        let ev = serde_json::from_value(json!({
            "metadata": {"name": n},
            "involvedObject": {"kind": kind, "name": "x", "namespace": "default"},
            "reason": reason, "type": "Normal", "source": {"component": "kubelet"}
        }))
        .unwrap();
        events.create(&PostParams::default(), &ev).await.unwrap();
    }
    let got = events
        .list(
            &ListParams::default().fields("involvedObject.kind=CronJob,type=Normal,source=kubelet"),
        )
        .await
        .unwrap();
    assert_eq!(got.items.len(), 1);
    assert_eq!(got.items[0].reason.as_deref(), Some("SawCompletedJob"));

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let s =
        serde_json::from_value(json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls"}))
            .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let tls = secrets
        .list(&ListParams::default().fields("type=kubernetes.io/tls"))
        .await
        .unwrap();
    assert_eq!(tls.items.len(), 1);
}

#[tokio::test]
async fn events_written_through_events_k8s_io_are_read_as_core_events_and_back() {
    let (_s, client) = server().await;
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), "default");
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, "default");
    let ev = serde_json::from_value(json!({
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "pulled", "reason": "Pulled", "type": "Normal", "action": "Pull",
        "reportingController": "kubelet", "reportingInstance": "node-1"
    }))
    .unwrap();
    v1.create(&PostParams::default(), &ev).await.unwrap();
    let seen = core.get("e1").await.unwrap();
    assert_eq!(seen.message.as_deref(), Some("pulled"));
    assert_eq!(seen.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(seen.reporting_component.as_deref(), Some("kubelet"));
    let by_kind = core
        .list(&ListParams::default().fields("involvedObject.kind=Pod"))
        .await
        .unwrap();
    assert_eq!(by_kind.items.len(), 1);
    core.patch(
        "e1",
        &PatchParams::default(),
        &Patch::Merge(json!({"count": 2, "message": "again"})),
    )
    .await
    .unwrap();
    let back = v1.get("e1").await.unwrap();
    assert_eq!(back.note.as_deref(), Some("again"));
    assert_eq!(back.deprecated_count, Some(2));
    assert_eq!(back.regarding.unwrap().name.as_deref(), Some("p"));
}

#[tokio::test]
async fn dry_run_writes_answer_the_result_but_store_nothing() {
    let (_s, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &cm("ghost")).await.unwrap();
    assert_eq!(status_of(api.get("ghost").await.unwrap_err()).code, 404);
    api.create(&PostParams::default(), &cm("real"))
        .await
        .unwrap();
    let pp = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let previewed = api
        .patch("real", &pp, &Patch::Merge(json!({"data": {"k": "dry"}})))
        .await
        .unwrap();
    assert_eq!(previewed.data.unwrap()["k"], "dry");
    assert_eq!(api.get("real").await.unwrap().data.unwrap()["k"], "v");
    api.delete(
        "real",
        &DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    assert!(api.get("real").await.is_ok());
}
