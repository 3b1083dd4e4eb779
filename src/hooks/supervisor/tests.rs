use std::time::Duration;

use kube::core::GroupVersionKind;

use super::kept::sharding_refusal;
use super::*;
use crate::hooks::Hook;
use crate::selector::ShardKey;

fn settings(owns: &[&str], watches: &[&str]) -> ControllerSettings {
    let gvk = |kind: &&str| GroupVersionKind::gvk("", "v1", kind);
    ControllerSettings {
        key: ControllerKey::new("default", "c"),
        for_kind: GroupVersionKind::gvk("", "v1", "Secret"),
        label_selector: None,
        field_selector: None,
        owns: owns.iter().map(gvk).collect(),
        watches: watches.iter().map(gvk).collect(),
        map_to: watches
            .iter()
            .map(|_| super::super::MapTo::Namespace)
            .collect(),
        hook: Hook::Exec {
            env: Vec::new(),
            command: vec!["true".into()],
            timeout: Duration::from_secs(1),
        },
        concurrency: 1,
        resync_period: None,
        timeout: None,
        schedule: None,
        admission: Vec::new(),
        conversion: None,
        finalizer: None,
    }
}

#[test]
fn only_uid_sharding_refuses_and_only_controllers_with_related_kinds() {
    let by = |key| {
        Some(Sharding {
            ring: "shop".into(),
            key,
        })
    };
    let related = settings(&["ConfigMap"], &["Pod"]);
    let lonely = settings(&[], &[]);
    assert_eq!(sharding_refusal(None, &related), None);
    assert_eq!(
        sharding_refusal(by(ShardKey::Namespace).as_ref(), &related),
        None
    );
    assert_eq!(sharding_refusal(by(ShardKey::Uid).as_ref(), &lonely), None);
    let said = sharding_refusal(by(ShardKey::Uid).as_ref(), &related).unwrap();
    assert!(
        said.contains(
            "the kinds this controller owns or watches (v1 ConfigMap, v1 Pod) are cached"
        ),
        "{said}"
    );
    assert!(
        said.contains("set spec.sharding.key: namespace in the CacheConfig"),
        "{said}"
    );
    let watching = settings(&[], &["Pod"]);
    assert!(sharding_refusal(by(ShardKey::Uid).as_ref(), &watching).is_some());
}

// Issue 45, item 8: --hook-max-concurrency lowers the most a Controller may ask for.
#[test]
fn a_controller_over_the_managers_max_concurrency_is_kept_back_by_name() {
    let (_send, receive) = tokio::sync::watch::channel(Desired::new());
    let supervisor = Supervisor::new(receive).max_concurrency(4);
    let mut asks = settings(&[], &[]);
    asks.concurrency = 5;
    let kept = supervisor.kept_back(None, &asks).unwrap();
    assert_eq!(kept.reason, crate::hooks::REASON_HOOK_NOT_ALLOWED);
    assert_eq!(
        kept.message,
        "not started: spec.concurrency 5 is over the manager's --hook-max-concurrency of 4; \
         lower it"
    );
    asks.concurrency = 4;
    let kept = supervisor.kept_back(None, &asks).unwrap();
    assert_ne!(
        kept.reason,
        crate::hooks::REASON_HOOK_NOT_ALLOWED,
        "{}",
        kept.message
    );
}

// Issue 45, item 12: clientCertSecretRef could name any Secret of the Controller's namespace
// (the chart's release namespace holds the manager's own certificates) without
// --hook-allow-secrets.
#[test]
fn a_client_certificate_secret_is_read_only_with_allow_secrets() {
    let (_send, receive) = tokio::sync::watch::channel(Desired::new());
    let mut asks = settings(&[], &[]);
    asks.hook = Hook::Webhook {
        url: "https://hook.ops.svc/sync".into(),
        timeout: Duration::from_secs(1),
        tls: Some(crate::hooks::WebhookTls {
            ca_bundle: Vec::new(),
            client_cert_secret: Some("informant-cert".into()),
        }),
    };
    let refused = Supervisor::new(receive.clone()).secret_refs(false);
    let kept = refused.kept_back(None, &asks).unwrap();
    assert_eq!(kept.reason, crate::hooks::REASON_HOOK_NOT_ALLOWED);
    assert_eq!(
        kept.message,
        "not started: spec.hook.webhook.tls.clientCertSecretRef names Secret \
         \"informant-cert\", which the manager reads only with --hook-allow-secrets"
    );
    let allowed = Supervisor::new(receive).secret_refs(true);
    let kept = allowed.kept_back(None, &asks).unwrap();
    assert_ne!(
        kept.reason,
        crate::hooks::REASON_HOOK_NOT_ALLOWED,
        "{}",
        kept.message
    );
}

/// Issue 45: kube-apiserver calls conversion webhooks without the client certificate its
/// `AdmissionConfiguration` gives admission calls, so under `--webhook-client-ca` a conversion
/// hook would be refused at every call: its Controller is kept back, saying why.
#[test]
fn a_conversion_hook_is_kept_back_when_the_endpoint_requires_a_client_certificate() {
    let (_send, receive) = tokio::sync::watch::channel(Desired::new());
    let mut converting = settings(&[], &[]);
    converting.conversion = Some(crate::hooks::ConversionHook {
        versions: vec!["v1alpha1".into(), "v1".into()],
        hub: Some("v1".into()),
        hook: converting.hook.clone(),
    });
    let with_ca = Supervisor::new(receive.clone())
        .admission_served(true)
        .client_ca(true);
    let kept = with_ca.kept_back(None, &converting).unwrap();
    assert_eq!(kept.reason, crate::hooks::REASON_CONVERSION_NOT_SERVED);
    assert!(
        kept.message.contains("--webhook-client-ca"),
        "{}",
        kept.message
    );
    // Without the conversion hook, or without the client CA, it is not kept back for it.
    let plain = settings(&[], &[]);
    assert!(
        with_ca
            .kept_back(None, &plain)
            .is_none_or(|k| k.reason != crate::hooks::REASON_CONVERSION_NOT_SERVED)
    );
    let without_ca = Supervisor::new(receive).admission_served(true);
    assert!(
        without_ca
            .kept_back(None, &converting)
            .is_none_or(|k| k.reason != crate::hooks::REASON_CONVERSION_NOT_SERVED)
    );
}
