//! [`WebhookEndpoint`] as a manager runs it on each replica: with managed certificates only
//! the leader makes the Secret and injects the bundle, and every replica then serves it; a
//! mounted certificate with injection targets is refused; without leader election the leader's
//! loop keeps injecting; a manager serves the endpoint added to it.

use std::net::SocketAddr;
use std::time::SystemTime;

use informant::apiserver::Verb;
use informant::manager::{ConfigSource, Manager};
use informant::serving::managed::ManagedCertificates;
use informant::serving::{
    CaInjector, InjectTargets, WebhookCertificates, WebhookEndpoint, WebhookRouter, cert,
};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::harness::{
    FakeClock, serve_webhook_configurations, settings, trusted_get, webhook_configuration,
};
use crate::support;

fn targets() -> InjectTargets {
    InjectTargets {
        validating: vec!["guard".to_owned()],
        ..InjectTargets::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_leader_makes_the_secret_and_injects_the_bundle_and_every_replica_serves_it() {
    let (server, client) = support::server().await;
    serve_webhook_configurations(&client).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating
        .create(
            &PostParams::default(),
            &serde_json::from_value(webhook_configuration("guard")).unwrap(),
        )
        .await
        .unwrap();
    let certificates = WebhookCertificates::Managed(settings());
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let shutdown = CancellationToken::new();
    let (lead, leads) = watch::channel(false);
    let mut replicas = Vec::new();
    for is_leader in [leads, watch::channel(false).1] {
        let endpoint = WebhookEndpoint::bind(
            client.clone(),
            loopback,
            &certificates,
            targets(),
            WebhookRouter::new(),
        )
        .await
        .unwrap();
        let (addr, ready) = (endpoint.local_addr(), endpoint.ready());
        assert!(
            !*ready.borrow(),
            "no Secret yet: the placeholder is not ready"
        );
        let run = tokio::spawn(endpoint.run(is_leader, shutdown.child_token()));
        replicas.push((addr, ready, run));
    }
    // Both watch; neither leads: no Secret is made.
    support::eventually("both replicas watching the Secret", || async {
        server.handle().request_count(Verb::Watch, "secrets") >= 2
    })
    .await;
    assert_eq!(server.handle().request_count(Verb::Create, "secrets"), 0);

    lead.send_replace(true);
    for (_, ready, _) in &mut replicas {
        tokio::time::timeout(support::WAIT, ready.wait_for(|r| *r))
            .await
            .expect("every replica serves the leader's Secret")
            .unwrap();
    }
    let bundle = support::holds_within(support::WAIT, || async {
        let config = validating.get("guard").await.unwrap();
        config.webhooks.unwrap()[0]
            .client_config
            .ca_bundle
            .is_some()
    })
    .await;
    assert!(bundle, "the leader injects the bundle");
    let config = validating.get("guard").await.unwrap();
    let bundle = config.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap()
        .0;
    let clock = FakeClock::at(SystemTime::now());
    for (addr, _, _) in &replicas {
        assert_eq!(trusted_get(*addr, &bundle, clock.clone()).await, Ok(200));
    }
    assert_eq!(server.handle().request_count(Verb::Create, "secrets"), 1);

    shutdown.cancel();
    for (_, _, run) in replicas {
        run.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mounted_certificate_with_injection_targets_is_refused() {
    let (_server, client) = support::server().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert_pem, key_pem) = cert::generate(&["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), key_pem).unwrap();
    let refused = WebhookEndpoint::bind(
        client.clone(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &WebhookCertificates::mounted(dir.path()),
        targets(),
        WebhookRouter::new(),
    )
    .await
    .unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("invalid webhook certificate settings: injectTargets: a mounted certificate's caBundle is written by cert-manager's cainjector"),
        "{refused}"
    );
    let endpoint = WebhookEndpoint::bind(
        client,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &WebhookCertificates::mounted(dir.path()),
        InjectTargets::default(),
        WebhookRouter::new(),
    )
    .await
    .unwrap();
    assert!(*endpoint.ready().borrow(), "mounted files are read at bind");
}

/// Whether every webhook of `guard` holds a `caBundle`.
async fn injected(validating: &Api<ValidatingWebhookConfiguration>) -> bool {
    let config = validating.get("guard").await.unwrap();
    config
        .webhooks
        .unwrap()
        .iter()
        .all(|w| w.client_config.ca_bundle.is_some())
}

#[tokio::test(flavor = "multi_thread")]
async fn without_leader_election_the_leader_keeps_injecting_at_every_resync() {
    let (_server, client) = support::server().await;
    serve_webhook_configurations(&client).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating
        .create(
            &PostParams::default(),
            &serde_json::from_value(webhook_configuration("guard")).unwrap(),
        )
        .await
        .unwrap();
    let leader = ManagedCertificates::new(client.clone(), settings())
        .unwrap()
        .with_resync(std::time::Duration::from_millis(50));
    let injector = CaInjector::new(client.clone(), targets());
    let shutdown = CancellationToken::new();
    // No leader election: always leading, and the sender gone at once.
    let run = tokio::spawn(leader.run(
        Some(injector),
        watch::channel(true).1,
        shutdown.child_token(),
    ));
    support::eventually("the bundle injected", || injected(&validating)).await;

    // Someone recreates the configuration without its bundle: the next pass puts it back.
    let mut config = validating.get("guard").await.unwrap();
    for webhook in config.webhooks.iter_mut().flatten() {
        webhook.client_config.ca_bundle = None;
    }
    validating
        .replace("guard", &PostParams::default(), &config)
        .await
        .unwrap();
    support::eventually("the bundle injected again", || injected(&validating)).await;

    shutdown.cancel();
    tokio::time::timeout(support::WAIT, run)
        .await
        .expect("the leader's loop stops when shut down")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manager_serves_its_webhook_endpoint_and_as_leader_makes_the_certificates() {
    let (_server, client) = support::server().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        support::cache_config("  byObject:\n    - {apiVersion: v1, kind: ConfigMap}\n"),
    )
    .unwrap();
    let mut manager = Manager::new(
        client.clone(),
        support::manager_options(ConfigSource::File(path)),
    )
    .await
    .unwrap();
    let endpoint = WebhookEndpoint::bind(
        client.clone(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &WebhookCertificates::Managed(settings()),
        InjectTargets::default(),
        WebhookRouter::new(),
    )
    .await
    .unwrap();
    let (addr, mut ready) = (endpoint.local_addr(), endpoint.ready());
    manager.add_webhook_endpoint(endpoint);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    // No leader election: this manager leads, makes the Secret and serves it.
    tokio::time::timeout(support::WAIT, ready.wait_for(|r| *r))
        .await
        .expect("the manager's endpoint serves the Secret it made")
        .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let secret = secrets.get("hooks-cert").await.unwrap();
    let bundle = secret.data.unwrap()["ca.crt"].0.clone();
    let clock = FakeClock::at(SystemTime::now());
    assert_eq!(trusted_get(addr, &bundle, clock).await, Ok(200));
    shutdown.cancel();
    support::stopped(run).await;
}
