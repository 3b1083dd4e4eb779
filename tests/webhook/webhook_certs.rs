//! Webhook certificates over real sockets against the embedded API server: the managed Secret
//! made once and served by every replica, its CA bundle injected into webhook configurations
//! and a CRD, a whole rotation (serving renewals, then a new CA) under a loop of requests from
//! a client that trusts only the injected bundle with zero failures, and a mounted
//! certificate replaced on disk served without a restart.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use informant::serving::managed::{Certificates, Clock, ManagedCertificates, Reconciled, Step};
use informant::serving::{
    CaInjector, CertificateCell, InjectTargets, Injection, Target, WebhookCertificates,
    WebhookRouter, WebhookServer, cert,
};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::harness::{
    FakeClock, NAMESPACE, Replica, crd, der, replica, serve_webhook_configurations, serves,
    settings, trusted_get, webhook_configuration,
};
use crate::support::{self, https};

#[tokio::test(flavor = "multi_thread")]
async fn the_secret_is_made_once_and_every_replica_serves_it() {
    let (_server, client) = support::server().await;
    let leader = ManagedCertificates::new(client.clone(), settings()).unwrap();
    let made = leader.reconcile().await.unwrap();
    assert_eq!(made.step, Step::Create);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret = secrets.get("hooks-cert").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let mut keys: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);

    // A second replica (or a new leader) reads the same certificates and writes nothing.
    let second = ManagedCertificates::new(client.clone(), settings()).unwrap();
    let again = second.reconcile().await.unwrap();
    assert!(matches!(again.step, Step::Keep { .. }), "{:?}", again.step);
    assert_eq!(
        second.current().await.unwrap().unwrap().serving_pem(),
        made.certificates.serving_pem()
    );
    let unchanged = secrets.get("hooks-cert").await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        secret.metadata.resource_version
    );

    let shutdown = CancellationToken::new();
    let a = replica(client.clone(), &settings(), &shutdown).await;
    let b = replica(client.clone(), &settings(), &shutdown).await;
    let bundle = made.certificates.bundle_pem();
    let clock = FakeClock::at(SystemTime::now());
    for r in [&a, &b] {
        assert!(serves(r, made.certificates.serving_pem()));
        assert_eq!(
            trusted_get(r.addr, bundle.as_bytes(), Arc::clone(&clock)).await,
            Ok(200)
        );
    }
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bundle_is_injected_into_the_webhook_configurations_and_the_crd() {
    let (_server, client) = support::server().await;
    serve_webhook_configurations(&client).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PostParams::default();
    validating
        .create(
            &pp,
            &serde_json::from_value(webhook_configuration("guard")).unwrap(),
        )
        .await
        .unwrap();
    mutating
        .create(
            &pp,
            &serde_json::from_value(webhook_configuration("defaults")).unwrap(),
        )
        .await
        .unwrap();
    crds.create(&pp, &crd("widgets", "Webhook")).await.unwrap();
    crds.create(&pp, &crd("gadgets", "None")).await.unwrap();

    let leader = ManagedCertificates::new(client.clone(), settings()).unwrap();
    let bundle = leader.reconcile().await.unwrap().certificates.bundle_pem();
    let injector = CaInjector::new(
        client.clone(),
        InjectTargets {
            validating: vec!["guard".to_owned(), "not-yet".to_owned()],
            mutating: vec!["defaults".to_owned()],
            crds: vec![
                "widgets.example.com".to_owned(),
                "gadgets.example.com".to_owned(),
            ],
        },
    );
    let done = injector.inject(&bundle).await.unwrap();
    assert_eq!(
        done,
        [
            (Target::Validating("guard".to_owned()), Injection::Written),
            (Target::Validating("not-yet".to_owned()), Injection::Missing),
            (Target::Mutating("defaults".to_owned()), Injection::Written),
            (
                Target::Crd("widgets.example.com".to_owned()),
                Injection::Written
            ),
            (
                Target::Crd("gadgets.example.com".to_owned()),
                Injection::NoConversionWebhook
            ),
        ]
    );
    let stored = validating.get("guard").await.unwrap();
    for webhook in stored.webhooks.unwrap() {
        assert_eq!(
            webhook.client_config.ca_bundle.unwrap().0,
            bundle.as_bytes(),
            "{}",
            webhook.name
        );
    }
    for webhook in mutating.get("defaults").await.unwrap().webhooks.unwrap() {
        assert_eq!(
            webhook.client_config.ca_bundle.unwrap().0,
            bundle.as_bytes()
        );
    }
    let widgets = crds.get("widgets.example.com").await.unwrap();
    let conversion = widgets.spec.conversion.unwrap().webhook.unwrap();
    assert_eq!(
        conversion.client_config.unwrap().ca_bundle.unwrap().0,
        bundle.as_bytes()
    );
    assert_eq!(
        conversion.conversion_review_versions,
        ["v1"],
        "the rest is kept"
    );
    let gadgets = crds.get("gadgets.example.com").await.unwrap();
    assert!(gadgets.spec.conversion.unwrap().webhook.is_none());

    // Injecting the same bundle again writes nothing.
    let again = injector.inject(&bundle).await.unwrap();
    assert!(
        again.iter().all(|(_, i)| matches!(
            i,
            Injection::Unchanged | Injection::Missing | Injection::NoConversionWebhook
        )),
        "{again:?}"
    );
    assert_eq!(
        validating
            .get("guard")
            .await
            .unwrap()
            .metadata
            .resource_version,
        stored.metadata.resource_version
    );
}

/// What the client loop saw.
#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    failed: Mutex<Vec<String>>,
    /// The bundle of the last successful request.
    last_bundle: Mutex<Vec<u8>>,
}

/// The client: as the API server, it trusts the caBundle of the webhook configuration
/// `guard`, read again before each request, and calls the `addrs` in turn until `stop`.
fn spawn_client(
    validating: Api<ValidatingWebhookConfiguration>,
    addrs: Vec<SocketAddr>,
    clock: Arc<FakeClock>,
    tally: Arc<Tally>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 0usize;
        while !stop.is_cancelled() {
            let config = validating.get("guard").await.unwrap();
            let bundle = config.webhooks.unwrap()[0]
                .client_config
                .ca_bundle
                .clone()
                .unwrap()
                .0;
            let addr = addrs[n % addrs.len()];
            n += 1;
            match trusted_get(addr, &bundle, clock.clone()).await {
                Ok(200) => {
                    tally.ok.fetch_add(1, Ordering::SeqCst);
                    *tally.last_bundle.lock().unwrap() = bundle;
                }
                other => tally
                    .failed
                    .lock()
                    .unwrap()
                    .push(format!("request {n} to {addr}: {other:?}")),
            }
        }
    })
}

/// A replica that has not swapped yet: a server whose cell the test sets to the certificate
/// of the step before.
async fn lagging_replica(first: &Certificates, shutdown: &CancellationToken) -> Replica {
    let cell = Arc::new(CertificateCell::new(first.certified_key().unwrap()));
    let server = WebhookServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::clone(&cell),
        WebhookRouter::new(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(shutdown.child_token()));
    Replica { addr, cell }
}

/// The `ValidatingWebhookConfiguration` `guard` (two webhooks, no `caBundle` yet), created.
async fn guard_configuration(client: &Client) -> Api<ValidatingWebhookConfiguration> {
    serve_webhook_configurations(client).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating
        .create(
            &PostParams::default(),
            &serde_json::from_value(webhook_configuration("guard")).unwrap(),
        )
        .await
        .unwrap();
    validating
}

/// The two promises of the overlap at a step from `previous` to `done`, checked outright: a
/// client still holding the bundle of the step before trusts the new certificate (served at
/// `new_addr`), and a client with the new bundle trusts a replica still serving the
/// certificate of the step before (`lagging`, set to it here). What broke, if anything.
async fn overlap_broken(
    previous: &Certificates,
    done: &Reconciled,
    new_addr: SocketAddr,
    lagging: &Replica,
    clock: Arc<FakeClock>,
) -> Option<String> {
    let old_bundle = previous.bundle_pem();
    let stale_client = trusted_get(new_addr, old_bundle.as_bytes(), clock.clone()).await;
    lagging.cell.replace(previous.certified_key().unwrap());
    let bundle = done.certificates.bundle_pem();
    let stale_replica = trusted_get(lagging.addr, bundle.as_bytes(), clock).await;
    (stale_client != Ok(200) || stale_replica != Ok(200)).then(|| {
        format!(
            "{:?}: old bundle to new certificate {stale_client:?}, new bundle to old certificate {stale_replica:?}",
            done.step
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_with_requests_in_flight_fails_none_of_them() {
    let (_server, client) = support::server().await;
    let validating = guard_configuration(&client).await;
    let start = SystemTime::now();
    let clock = FakeClock::at(start);
    let leader = ManagedCertificates::new(client.clone(), settings())
        .unwrap()
        .with_clock(clock.clone());
    let injector = CaInjector::new(
        client.clone(),
        InjectTargets {
            validating: vec!["guard".to_owned()],
            ..InjectTargets::default()
        },
    );
    let made = leader.reconcile().await.unwrap();
    injector
        .inject(&made.certificates.bundle_pem())
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let replicas = [
        replica(client.clone(), &settings(), &shutdown).await,
        replica(client.clone(), &settings(), &shutdown).await,
    ];
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();

    let tally = Arc::new(Tally::default());
    let stop = CancellationToken::new();
    let requests = spawn_client(
        validating.clone(),
        addrs,
        clock.clone(),
        tally.clone(),
        stop.clone(),
    );

    let lagging = lagging_replica(&made.certificates, &shutdown).await;

    // The leader's steps, the clock moved to each next one; after each write, the bundle
    // injected and the overlap stood in for by its purpose: every replica serves the new
    // certificate and the client has succeeded with the new bundle. At each step, the two
    // promises of the overlap are checked outright, not left to the loop's timing: a client
    // still holding the bundle of the step before trusts the new certificate, and a client
    // with the new bundle trusts a replica still serving the certificate of the step before.
    let mut steps = vec![made.step];
    let mut previous = made.certificates;
    let mut broken = Vec::new();
    while !steps.contains(&Step::DropOldCas) && steps.len() < 12 {
        let done = leader.reconcile().await.unwrap();
        if let Step::Keep { until } = done.step {
            clock.set(until);
            continue;
        }
        steps.push(done.step);
        let bundle = done.certificates.bundle_pem();
        injector.inject(&bundle).await.unwrap();
        let serving = done.certificates.serving_pem().to_owned();
        let ok_before = tally.ok.load(Ordering::SeqCst);
        support::eventually("every replica serving the new certificate", || {
            let all = replicas.iter().all(|r| serves(r, &serving));
            async move { all }
        })
        .await;
        if let Some(broke) =
            overlap_broken(&previous, &done, replicas[0].addr, &lagging, clock.clone()).await
        {
            broken.push(broke);
        }
        support::eventually("the client succeeding with the new bundle", || {
            let seen = *tally.last_bundle.lock().unwrap() == bundle.as_bytes()
                && tally.ok.load(Ordering::SeqCst) > ok_before + 2;
            async move { seen }
        })
        .await;
        previous = done.certificates;
    }
    stop.cancel();
    requests.await.unwrap();
    shutdown.cancel();

    let failed = tally.failed.lock().unwrap().clone();
    let ok = tally.ok.load(Ordering::SeqCst);
    println!("rotation: {ok} requests succeeded, {} failed", failed.len());
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(ok >= 16, "only {ok} requests");
    assert_eq!(
        steps,
        [
            Step::Create,
            Step::RenewServing,
            Step::RenewServing,
            Step::RenewServing,
            Step::RenewServing,
            Step::AddCa,
            Step::SwitchServing,
            Step::DropOldCas,
        ]
    );
    let days = clock.now().duration_since(start).unwrap().as_secs() / 86_400;
    assert_eq!(days, 243, "the CA rotated at 2/3 of its year");
    let last = leader.current().await.unwrap().unwrap();
    assert_eq!(last.ca_count(), 1);
    assert!(last.serving_from_newest_ca());
}

/// Writes `text` to `dir/name` as a new file renamed over the old one.
fn replace(dir: &std::path::Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mounted_certificate_replaced_on_disk_is_served_by_the_webhook_endpoint() {
    let (_server, client) = support::server().await;
    let dir = tempfile::tempdir().unwrap();
    let names = ["localhost".to_owned()];
    let (first_cert, first_key) = cert::generate(&names).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &first_cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), &first_key).unwrap();
    let certificates = WebhookCertificates::mounted(dir.path());
    assert!(
        !certificates.injects_ca_bundle(),
        "cert-manager's cainjector does"
    );
    let feed = certificates.feed(client).unwrap();
    let server = WebhookServer::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        feed.cell(),
        WebhookRouter::new(),
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let shutdown = CancellationToken::new();
    tokio::spawn(feed.run(shutdown.child_token()));
    tokio::spawn(server.run(shutdown.child_token()));
    let first = https::get(addr, "/healthz", None).await.unwrap();
    assert_eq!((first.code, first.body.as_str()), (200, "ok"));
    assert_eq!(first.certificate, der(&first_cert));

    let (second_cert, second_key) = cert::generate(&names).unwrap();
    replace(dir.path(), "tls.key", &second_key);
    replace(dir.path(), "tls.crt", &second_cert);
    let second = der(&second_cert);
    support::eventually("the replaced certificate served", || async {
        https::get(addr, "/healthz", None)
            .await
            .is_ok_and(|r| r.certificate == second)
    })
    .await;
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_that_does_not_parse_keeps_the_served_certificate_until_the_leader_replaces_it() {
    let (_server, client) = support::server().await;
    let leader = ManagedCertificates::new(client.clone(), settings()).unwrap();
    let first = leader.reconcile().await.unwrap().certificates;
    let shutdown = CancellationToken::new();
    let serving = replica(client.clone(), &settings(), &shutdown).await;
    assert!(serves(&serving, first.serving_pem()));

    // Someone overwrites the key: the replica keeps the pair it has (that it does not swap
    // a bad pair in is the unit test of `SecretWatcher`; here it could not have yet).
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let mut secret = secrets.get("hooks-cert").await.unwrap();
    secret.data.as_mut().unwrap().insert(
        "tls.key".to_owned(),
        k8s_openapi::ByteString(b"not a key".to_vec()),
    );
    let garbled = secrets
        .replace("hooks-cert", &PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(
        leader.current().await.unwrap_err().to_string(),
        "the Secret hooks-cert's tls.key is unusable: tls.key holds no PEM private key"
    );
    assert!(serves(&serving, first.serving_pem()));

    // The leader starts over with a new CA, at the garbled Secret's resourceVersion.
    let replaced = leader.reconcile().await.unwrap();
    assert_eq!(replaced.step, Step::Create);
    assert_ne!(replaced.certificates.bundle_pem(), first.bundle_pem());
    let stored = secrets.get("hooks-cert").await.unwrap();
    assert_ne!(
        stored.metadata.resource_version,
        garbled.metadata.resource_version
    );
    let new_serving = replaced.certificates.serving_pem().to_owned();
    support::eventually("the replica serving the new certificate", || {
        let now = serves(&serving, &new_serving);
        async move { now }
    })
    .await;
    shutdown.cancel();
}
