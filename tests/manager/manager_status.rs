//! A `CacheConfig`'s status through `manager::status` against the embedded API server: built by
//! `desired`, written by `StatusWriter` with server-side apply to the status subresource, shown
//! by `kubectl get` (the CRD's printer columns).

use crate::support;

use informant::apiserver::{TestServer, Verb};
use informant::cache::InformerStatus;
use informant::config::{CacheConfig, CacheConfigSpec, CacheConfigStatus};
use informant::manager::{
    DEFAULT_FIELD_MANAGER, Readiness, StatusInput, StatusWriter, Validity, desired_status,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "default";
const NAME: &str = "config";

/// A server with the `CacheConfig` CRD installed and `default/config` created by a user.
async fn server() -> (support::Server, Client) {
    let (server, client) = support::server_with_cacheconfig_crd().await;
    let spec = CacheConfigSpec {
        sync_period: Some("1h".into()),
        ..CacheConfigSpec::default()
    };
    cacheconfigs(&client)
        .create(&PostParams::default(), &CacheConfig::new(NAME, spec))
        .await
        .unwrap();
    (server, client)
}

fn cacheconfigs(client: &Client) -> Api<CacheConfig> {
    Api::namespaced(client.clone(), NS)
}

fn informer(kind: &str, synced: bool) -> InformerStatus {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": kind, "synced": synced, "objects": 4}),
    )
    .unwrap()
}

fn at(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(second).unwrap()
}

/// Two informers, `Pod` still syncing, at generation `generation` and time `now`.
fn syncing(generation: i64, now: i64) -> StatusInput {
    let informers = vec![informer("Pod", false), informer("ConfigMap", true)];
    StatusInput {
        generation: Some(generation),
        validity: Validity::Valid,
        readiness: Readiness::of(&informers),
        informers,
        namespace_selectors: Vec::new(),
        controllers: Vec::new(),
        sharding: None,
        last_reload_time: Some(Time(at(now))),
        now: at(now),
    }
}

/// The same informers, all synced.
fn synced(generation: i64, now: i64) -> StatusInput {
    let informers = vec![informer("Pod", true), informer("ConfigMap", true)];
    StatusInput {
        readiness: Readiness::of(&informers),
        informers,
        ..syncing(generation, now)
    }
}

fn condition<'a>(
    status: &'a CacheConfigStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

/// Requests of every kind the server has received.
fn requests(server: &TestServer) -> u64 {
    server.handle().requests().iter().map(|r| r.count).sum()
}

#[tokio::test]
async fn status_is_applied_by_informant_on_the_status_subresource_and_keeps_the_users_spec() {
    let (_server, client) = server().await;
    let mut writer = StatusWriter::new(client.clone(), NS, NAME, DEFAULT_FIELD_MANAGER);
    let first = desired_status(None, &syncing(1, 1000));
    assert!(writer.write(&first).await.unwrap());

    let stored = cacheconfigs(&client).get(NAME).await.unwrap();
    assert_eq!(stored.status.as_ref(), Some(&first));
    let managers: Vec<(String, String, String)> = stored
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
                m.subresource.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("informant".into(), "Apply".into(), "status".into())),
        "{managers:?}"
    );

    // A user edits the spec between two writes.
    cacheconfigs(&client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncPeriod": "2h"}})),
        )
        .await
        .unwrap();
    let second = desired_status(writer.last_written(), &synced(2, 2000));
    assert!(writer.write(&second).await.unwrap());
    let stored = cacheconfigs(&client).get(NAME).await.unwrap();
    assert_eq!(stored.spec.sync_period.as_deref(), Some("2h"));
    assert_eq!(stored.metadata.generation, Some(2));
    let status = stored.status.unwrap();
    assert_eq!(status, second);
    assert_eq!(status.observed_generation, Some(2));
    // Valid did not flip, Ready did.
    let valid = condition(&status, "Valid");
    assert_eq!(valid.last_transition_time, Time(at(1000)));
    assert_eq!(valid.observed_generation, Some(2));
    let ready = condition(&status, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "InformersSynced")
    );
    assert_eq!(ready.last_transition_time, Time(at(2000)));
}

#[tokio::test]
async fn an_unchanged_status_sends_no_request_and_keeps_its_transition_times() {
    let (server, client) = server().await;
    let mut writer = StatusWriter::new(client.clone(), NS, NAME, DEFAULT_FIELD_MANAGER);
    let first = desired_status(None, &synced(1, 1000));
    assert!(writer.write(&first).await.unwrap());

    // Later, nothing changed: the same status, transition times included, and no request.
    let unchanged = |now| StatusInput {
        last_reload_time: None,
        ..synced(1, now)
    };
    let later = desired_status(writer.last_written(), &unchanged(5000));
    assert_eq!(later, first);
    let before = requests(&server);
    assert!(!writer.write(&later).await.unwrap());
    assert_eq!(
        requests(&server),
        before,
        "{:?}",
        server.handle().requests()
    );

    // After a restart the previous status is the resource's own: still nothing flips.
    let stored = cacheconfigs(&client).get(NAME).await.unwrap().status;
    assert_eq!(desired_status(stored.as_ref(), &unchanged(9000)), first);

    // A status somebody else changed is rewritten once forgotten.
    cacheconfigs(&client)
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"informerCount": 7}})),
        )
        .await
        .unwrap();
    writer.forget();
    assert!(writer.write(&first).await.unwrap());
    let stored = cacheconfigs(&client).get(NAME).await.unwrap().status;
    assert_eq!(stored.as_ref(), Some(&first));
}

#[tokio::test]
async fn writing_the_status_of_a_deleted_cacheconfig_is_not_an_error_and_creates_nothing() {
    let (_server, client) = server().await;
    cacheconfigs(&client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let mut writer = StatusWriter::new(client.clone(), NS, NAME, DEFAULT_FIELD_MANAGER);
    assert!(
        !writer
            .write(&desired_status(None, &synced(1, 0)))
            .await
            .unwrap()
    );
    assert!(writer.last_written().is_none());
    assert!(cacheconfigs(&client).get_opt(NAME).await.unwrap().is_none());
}

#[tokio::test]
async fn kubectl_get_shows_the_valid_ready_informers_and_memory_columns() {
    let (_server, client) = server().await;
    let mut writer = StatusWriter::new(client.clone(), NS, NAME, DEFAULT_FIELD_MANAGER);
    let mut input = syncing(1, 0);
    input.validity = Validity::Invalid {
        errors: vec!["spec.syncPeriod: bad; fix it".into()],
    };
    input.informers[0].bytes = Some(1024);
    input.informers[1].bytes = Some(2 * 1024 * 1024 + 512);
    assert!(writer.write(&desired_status(None, &input)).await.unwrap());

    let request = http::Request::get(format!(
        "/apis/informant.dev/v1alpha1/namespaces/{NS}/cacheconfigs/{NAME}"
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .body(Vec::new())
    .unwrap();
    let table: Value = serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table", "{table}");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["Name", "Valid", "Ready", "Informers", "Memory", "Age"]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], NAME);
    assert_eq!(cells[1], "False");
    assert_eq!(cells[2], "False");
    assert_eq!(cells[3], 2);
    assert_eq!(
        cells[4], "2.0MiB",
        "the bytes of every informer, for people"
    );
    assert!(
        cells[5].as_str().is_some_and(|age| age.ends_with('s')),
        "{cells}"
    );
}

#[tokio::test]
async fn a_failed_write_is_sent_again_and_keeps_the_transition_times() {
    let (server, client) = server().await;
    let mut writer = StatusWriter::new(client.clone(), NS, NAME, DEFAULT_FIELD_MANAGER);
    let first = desired_status(None, &syncing(1, 1000));
    assert!(writer.write(&first).await.unwrap());

    let second = desired_status(writer.last_written(), &synced(1, 2000));
    server
        .handle()
        .fail_next(Some(Verb::Patch), Some("cacheconfigs"), 1, 500);
    let error = writer.write(&second).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot write the status of cacheconfig default/config"
    );
    // The failed status was never accepted: transition times still come from the first.
    assert_eq!(writer.last_written(), Some(&first));

    // The server may or may not hold it: the same status is sent again.
    let patches = server.handle().request_count(Verb::Patch, "cacheconfigs");
    assert!(writer.write(&second).await.unwrap());
    assert_eq!(
        server.handle().request_count(Verb::Patch, "cacheconfigs"),
        patches + 1
    );
    let stored = cacheconfigs(&client).get(NAME).await.unwrap().status;
    assert_eq!(stored.as_ref(), Some(&second));
    assert_eq!(
        condition(&second, "Valid").last_transition_time,
        Time(at(1000))
    );
}
