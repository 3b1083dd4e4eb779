//! Server-side apply with `--force-conflicts` over HTTP: the forcing manager takes the
//! conflicting fields over, as kube-apiserver does, so its next apply (or the dry-run apply of
//! `kubectl diff --server-side`) does not conflict, and the previous owner's does.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The fields `manager` owns in `cm`'s `managedFields`, if it has an entry.
fn owned_by(cm: &ConfigMap, manager: &str) -> Option<serde_json::Value> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(manager))
        .map(|e| {
            e.fields_v1
                .as_ref()
                .map(|f| f.0.clone())
                .unwrap_or_default()
        })
}

#[tokio::test]
async fn a_forced_apply_moves_the_fields_ownership_to_the_forcing_manager() {
    let server = informant::apiserver::TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client().await.unwrap(), "default");
    let doc = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
    api.patch(
        "c",
        &PatchParams::apply("first"),
        &Patch::Apply(doc(json!({"a": "1", "b": "1"}))),
    )
    .await
    .unwrap();
    let second = PatchParams::apply("second");
    let conflict = api
        .patch("c", &second, &Patch::Apply(doc(json!({"a": "2"}))))
        .await
        .unwrap_err();
    assert!(
        matches!(&conflict, kube::Error::Api(s) if s.code == 409),
        "{conflict}"
    );

    let forced = api
        .patch(
            "c",
            &PatchParams::apply("second").force(),
            &Patch::Apply(doc(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        owned_by(&forced, "first"),
        Some(json!({"f:data": {"f:b": {}}})),
        "first keeps b and no longer owns a"
    );
    assert_eq!(
        owned_by(&forced, "second"),
        Some(json!({"f:data": {"f:a": {}}}))
    );

    // `kubectl diff --server-side` by the second manager: a dry-run apply, not forced.
    let diff = PatchParams::apply("second").dry_run();
    let dry = api
        .patch("c", &diff, &Patch::Apply(doc(json!({"a": "3"}))))
        .await
        .unwrap();
    assert_eq!(dry.data.unwrap()["a"], "3");
    api.patch("c", &second, &Patch::Apply(doc(json!({"a": "3"}))))
        .await
        .unwrap();

    // A manager whose every field was taken has no entry left, as in kube-apiserver.
    let all = api
        .patch(
            "c",
            &PatchParams::apply("second").force(),
            &Patch::Apply(doc(json!({"a": "3", "b": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(owned_by(&all, "first"), None);

    // The first manager is now the one that conflicts.
    let stale = api
        .patch(
            "c",
            &PatchParams::apply("first"),
            &Patch::Apply(doc(json!({"a": "1", "b": "1"}))),
        )
        .await
        .unwrap_err();
    match stale {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            // kube-apiserver's words for several conflicts (apimachinery's
            // `managedfields/internal/conflict.go`): grouped by manager, a path per line.
            assert_eq!(
                s.message,
                "Apply failed with 2 conflicts: conflicts with \"second\":\n- .data.a\n- .data.b"
            );
        }
        other => panic!("{other}"),
    }
}
