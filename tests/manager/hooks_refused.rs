//! Issue 45, items 4 and 1: one admission entry the API server refuses blocked every
//! Controller's webhooks (the manager retried the 422 on the whole configuration forever); a
//! hook's narrowed scope was not said anywhere. Against the embedded API server, which
//! refuses what kube-apiserver refuses.

use std::time::Duration;

use informant::cache::Options as CacheOptions;
use informant::hooks::{
    AdmissionHook, AdmissionType, ControllerKey, FailurePolicy, Hook, OwnedConfigurations,
    ServedHook,
};
use informant::manager::WebhookOptions;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use kube::core::GroupVersionKind;

fn served(controller: &str, hook: &str, conditions: &[(&str, &str)]) -> ServedHook {
    ServedHook {
        controller: ControllerKey {
            namespace: "ops".to_owned(),
            name: controller.to_owned(),
        },
        for_kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
        hook: AdmissionHook {
            name: hook.to_owned(),
            type_: AdmissionType::Validating,
            operations: vec!["CREATE".to_owned()],
            hook: Hook::Exec {
                command: vec!["/hooks/h".to_owned()],
                env: Vec::new(),
                timeout: Duration::from_secs(5),
            },
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(5),
            namespace_selector: None,
            object_selector: None,
            match_conditions: conditions
                .iter()
                .map(|(n, e)| ((*n).to_owned(), (*e).to_owned()))
                .collect(),
        },
        path: format!("/admission/ops/{controller}/{hook}"),
    }
}

#[tokio::test]
async fn an_entry_the_api_server_refuses_is_left_out_and_reported_on_its_own_controller() {
    let server = informant::apiserver::TestServer::start().await.unwrap();
    let client = server.client().await.unwrap();
    let options = WebhookOptions::managed(([127, 0, 0, 1], 9443).into(), "ops", "hooks");
    let mut owned = OwnedConfigurations::new(client.clone(), options);
    let scope: CacheOptions = informant::config::load_str(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: t}\nspec:\n  defaultNamespaces: {ops: {}}\n",
    )
    .unwrap()
    .cache;
    // A condition's name must be a qualified name: kube-apiserver refuses "has owner!".
    let bad = served("bad", "cond", &[("has owner!", "true")]);
    let good = served("good", "ok", &[("has-owner", "true")]);
    let also_good = served("zz", "ok", &[]);
    let mut declaring = served("team", "ok", &[]);
    declaring.hook.namespace_selector =
        Some(serde_json::from_value(serde_json::json!({"matchLabels": {"team": "shop"}})).unwrap());
    let pass = owned
        .keep([&good, &bad, &also_good, &declaring], &scope)
        .await
        .expect("the good entries are registered");
    let refused: Vec<(String, &str)> = pass
        .refused
        .iter()
        .map(|(c, h, _)| (c.to_string(), h.as_str()))
        .collect();
    assert_eq!(refused, [("ops/bad".to_owned(), "cond")], "{pass:#?}");
    assert!(
        pass.refused[0].2.contains("matchConditions[0].name"),
        "{pass:#?}"
    );
    let live = Api::<ValidatingWebhookConfiguration>::all(client)
        .get("hooks")
        .await
        .unwrap();
    let names: Vec<String> = live
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(
        names,
        [
            "ok.good.ops.admission.informant.dev",
            "ok.zz.ops.admission.informant.dev",
            "ok.team.ops.admission.informant.dev"
        ]
    );
    let status = |controller: &str| {
        let key = ControllerKey {
            namespace: "ops".to_owned(),
            name: controller.to_owned(),
        };
        pass.statuses.get(&key).cloned().unwrap_or_default()
    };
    let bad_status = status("bad");
    assert!(
        bad_status.len() == 1
            && !bad_status[0].registered
            && bad_status[0]
                .message
                .as_deref()
                .is_some_and(|m| m.contains("has owner!")),
        "{bad_status:#?}"
    );
    let good_status = status("good");
    assert!(
        good_status.len() == 1 && good_status[0].registered,
        "{good_status:#?}"
    );
    // Item 1: the hook declares no namespaces; it is called in its cache scope, and says so.
    assert_eq!(
        serde_json::to_value(&good_status[0].namespace_selector).unwrap(),
        serde_json::json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ops"]}]})
    );
    assert!(
        good_status[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("cache scope")),
        "{good_status:#?}"
    );
    // Item 1: a declared selector is ANDed with the scope, and the status says it was narrowed.
    let team = status("team");
    assert_eq!(
        serde_json::to_value(&team[0].namespace_selector).unwrap(),
        serde_json::json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ops"]},
            {"key": "team", "operator": "In", "values": ["shop"]}]})
    );
    assert!(
        team[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("narrowed to the Controller's cache scope")),
        "{team:#?}"
    );
    server.shutdown().await.unwrap();
}

/// The leader writes each `Controller`'s `status.admission` under its own field manager,
/// beside the conditions the supervisor writes (neither apply removes the other's fields):
/// the registered hook with the namespaces it is called in (the cache here is cluster-wide:
/// what the hook declares).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registered_hooks_are_written_in_their_controllers_status() {
    use informant::hooks::Controller;
    use informant::manager::{ConfigSource, Manager, Options};
    use kube::api::{Patch, PatchParams};
    use tokio_util::sync::CancellationToken;

    let (server, client) = crate::support::server_with_informant_crds().await;
    let options = Options {
        metrics_addr: None,
        health_addr: None,
        shutdown_grace: Duration::from_secs(10),
        webhook: Some(WebhookOptions::managed(
            crate::support::webhook_bind(),
            "default",
            "informant-webhook",
        )),
        ..Options::new(ConfigSource::Resource {
            namespace: "default".into(),
            name: "test".into(),
        })
    };
    let mut manager = Manager::new(client.clone(), options).await.unwrap();
    let addr = manager.webhook_addr().unwrap();
    server
        .publish_service("default", "informant-webhook", 443, addr)
        .await;
    informant::hooks::add_to_manager(&mut manager);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let controller: Controller = serde_json::from_value(serde_json::json!({
        "apiVersion": "informant.dev/v1alpha1",
        "kind": "Controller",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {
            "for": {"apiVersion": "v1", "kind": "ConfigMap"},
            "hook": {"exec": {"command": ["sh", "-c", "cat >/dev/null; echo {}"]}},
            "admission": [{"name": "team", "type": "Validating", "failurePolicy": "Ignore",
                           "namespaceSelector": {"matchLabels": {"team": "shop"}}}],
        },
    }))
    .unwrap();
    let controllers: Api<Controller> = Api::namespaced(client.clone(), "default");
    controllers
        .patch(
            "guard",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&controller),
        )
        .await
        .unwrap();
    crate::support::eventually(
        "status.admission says the hook is registered, beside the conditions",
        || async {
            let Some(status) = controllers.get("guard").await.unwrap().status else {
                return false;
            };
            let registered = status.admission.iter().any(|hook| {
                hook.name == "team"
                    && hook.registered
                    && serde_json::to_string(&hook.namespace_selector)
                        .unwrap_or_default()
                        .contains(r#""matchLabels":{"team":"shop"}"#)
            });
            registered && status.conditions.iter().any(|c| c.type_ == "Valid")
        },
    )
    .await;
    shutdown.cancel();
    let _ = run.await;
}
