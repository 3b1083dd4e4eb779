//! kube-rs `Api` against the embedded API server: CRUD with Status errors, namespaces,
//! metadata, patches, server-side apply, status subresource, finalizers, CRDs, discovery.

use std::collections::BTreeMap;

use informant::apiserver::TestServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use kube::{Client, Error};
use serde_json::json;

async fn server() -> (TestServer, Client) {
    let server = TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    (server, client)
}

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
