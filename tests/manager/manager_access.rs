//! The manager's permission check with real authorization (the embedded API server with RBAC
//! on, the manager holding a `ServiceAccount`'s token), not injected faults: a permission the
//! config needs and the cluster does not grant is named in the `Ready` condition, on
//! `/readyz/permissions`, in a Warning Event and by the server's refusal of the informer's
//! list; granting it and editing the config clears it.

use crate::support;

use informant::config::CacheConfig;
use informant::manager::{ConfigSource, Manager, REASON_PERMISSION_MISSING};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "ops";
const NAME: &str = "informant";

/// The `Role`s the manager needs in `ops` (its `CacheConfig`, Controllers, Events) and, when
/// `pods`, the read of Pods in `shop`; bound to `ops/informant`.
fn grants(pods: bool) -> Vec<serde_json::Value> {
    let role = |namespace: &str, rules: serde_json::Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": format!("informant-{namespace}"), "namespace": namespace},
               "rules": rules})
    };
    let binding = |namespace: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("informant-{namespace}"), "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": format!("informant-{namespace}")},
               "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NS}]})
    };
    let events = json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]});
    let mut objects = vec![
        role(
            NS,
            json!([
                events,
                {"apiGroups": ["informant.dev"], "resources": ["cacheconfigs"],
                 "resourceNames": [NAME], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["informant.dev"], "resources": ["cacheconfigs/status"],
                 "resourceNames": [NAME], "verbs": ["patch"]},
                {"apiGroups": ["informant.dev"], "resources": ["controllers"],
                 "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["informant.dev"], "resources": ["controllers/status"],
                 "verbs": ["patch"]},
            ]),
        ),
        binding(NS),
    ];
    let mut shop = vec![events];
    if pods {
        shop.push(json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}));
    }
    objects.push(role("shop", json!(shop)));
    objects.push(binding("shop"));
    objects
}

/// Server-side applies `objects` (in `shop`) as the administrator.
async fn apply(admin: &kube::Client, objects: impl IntoIterator<Item = serde_json::Value>) {
    for object in objects {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let kind = object["kind"].as_str().unwrap().to_owned();
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            &kind,
        ));
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), "shop", &resource);
        api.patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap();
    }
}

/// Whether a `PermissionMissing` Warning Event in `ops` names `permission`.
async fn warned(admin: &kube::Client, permission: &str) -> bool {
    let events: Api<Event> = Api::namespaced(admin.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| {
            e.reason.as_deref() == Some("PermissionMissing")
                && e.type_.as_deref() == Some("Warning")
                && e.message.as_deref().is_some_and(|m| m.contains(permission))
        })
}

/// A server with RBAC on, the namespaces, the account, the `CacheConfig` (Pods in `shop`) and
/// every grant but the Pods'; and the account's client.
async fn setup() -> (informant::apiserver::TestServer, kube::Client, kube::Client) {
    let (server, admin) = support::server_with_informant_crds_rbac().await;
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": NAME, "namespace": NS}}),
        json!({"apiVersion": "informant.dev/v1alpha1", "kind": "CacheConfig",
               "metadata": {"name": NAME, "namespace": NS},
               "spec": {"defaultNamespaces": {"shop": {}},
                        "byObject": [{"apiVersion": "v1", "kind": "Pod"}]}}),
    ]
    .into_iter()
    .chain(grants(false))
    {
        server.handle().create(object).unwrap();
    }
    let token = server.token(NS, NAME).await.unwrap();
    let client = server.client_with_token(&token).await.unwrap();
    (server, admin, client)
}

fn ready(config: &CacheConfig) -> Option<Condition> {
    config
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready").cloned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_permission_is_named_before_any_informer_times_out_and_a_grant_clears_it() {
    let (server, admin, client) = setup().await;
    let options = support::manager_options(ConfigSource::Resource {
        namespace: NS.into(),
        name: NAME.into(),
    });
    let manager = Manager::new(client, options).await.unwrap();
    let health = manager.health_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));

    let configs: Api<CacheConfig> = Api::namespaced(admin.clone(), NS);
    support::eventually("Ready=False PermissionMissing", || async {
        let config = configs.get(NAME).await.unwrap();
        ready(&config).is_some_and(|c| c.reason == REASON_PERMISSION_MISSING)
    })
    .await;
    let condition = ready(&configs.get(NAME).await.unwrap()).unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(
        condition.message,
        "2 permissions the config needs are not granted (`informant rbac --check` prints the \
         objects granting them): list pods in namespace shop; watch pods in namespace shop"
    );
    let (code, body) = support::http_get(health, "/readyz/permissions").await;
    assert_eq!(code, 500);
    assert!(body.contains("list pods in namespace shop"), "{body}");
    support::eventually("a PermissionMissing Warning Event", || {
        warned(&admin, "watch pods in namespace shop")
    })
    .await;
    // The server refused the informer's list: the check named what was really needed.
    let refused = server.handle().refusals();
    assert!(
        refused
            .iter()
            .any(|r| r.verb == "list" && r.resource == "pods" && r.namespace == "shop"),
        "{refused:#?}"
    );
    assert!(
        refused
            .iter()
            .all(|r| r.resource == "pods" && r.namespace == "shop"),
        "nothing else refused: {refused:#?}"
    );

    // Granted, then the config edited: the check runs again before the reload's informers.
    apply(&admin, grants(true).into_iter().skip(2)).await;
    configs
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncPeriod": "1h"}})),
        )
        .await
        .unwrap();
    // The informer's own retry (kube's backoff) decides when it syncs; the check is cleared
    // at the reload.
    support::eventually("no PermissionMissing once granted", || async {
        let config = configs.get(NAME).await.unwrap();
        ready(&config).is_some_and(|c| c.reason != REASON_PERMISSION_MISSING)
    })
    .await;
    let (code, _) = support::http_get(health, "/readyz/permissions").await;
    assert_eq!(code, 200);
    shutdown.cancel();
    support::stopped(run).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn while_a_permission_is_missing_the_check_runs_again_and_sees_a_grant() {
    let (_server, admin, client) = setup().await;
    let options = informant::manager::Options {
        permissions_recheck: std::time::Duration::from_millis(100),
        ..support::manager_options(ConfigSource::Resource {
            namespace: NS.into(),
            name: NAME.into(),
        })
    };
    let manager = Manager::new(client, options).await.unwrap();
    let health = manager.health_addr().unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    support::eventually("/readyz/permissions fails", || async {
        support::http_get(health, "/readyz/permissions").await.0 == 500
    })
    .await;
    // Granted, the config untouched: no reload, the recheck clears it.
    apply(&admin, grants(true).into_iter().skip(2)).await;
    support::eventually("/readyz/permissions passes", || async {
        support::http_get(health, "/readyz/permissions").await.0 == 200
    })
    .await;
    let configs: Api<CacheConfig> = Api::namespaced(admin.clone(), NS);
    support::eventually("no PermissionMissing in the status", || async {
        let config = configs.get(NAME).await.unwrap();
        ready(&config).is_some_and(|c| c.reason != REASON_PERMISSION_MISSING)
    })
    .await;
    shutdown.cancel();
    support::stopped(run).await;
}

/// Issue #33 item 9: a 403 at start printed the API server's message three times and a `Debug`
/// dump of its `Status` in one line. `informant run` holding a token without any grant prints
/// the refusal once, in words, with its code.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_the_server_refuses_prints_its_answer_once_in_words() {
    let (server, _admin) = support::server_with_informant_crds_rbac().await;
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": NAME, "namespace": NS}}),
    ] {
        server.handle().create(object).unwrap();
    }
    let token = server.token(NS, NAME).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let text = informant::yaml::to_string(&server.handle().kubeconfig_with_token(Some(&token)));
    std::fs::write(&kubeconfig, text.unwrap()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["run", "--cache-config", &format!("{NS}/{NAME}")])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--metrics-addr", "0", "--health-addr", "0"])
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let refusal = "cannot get resource \"cacheconfigs\"";
    assert_eq!(stderr.matches(refusal).count(), 1, "once:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "informant run: cannot read cacheconfig {NS}/{NAME} to start from it: "
        )),
        "{stderr}"
    );
    assert!(stderr.contains("(403 Forbidden)"), "{stderr}");
    for dump in ["Status {", "ApiError", "Some(Failure)"] {
        assert!(!stderr.contains(dump), "no {dump:?} dump:\n{stderr}");
    }
}
