//! The sample `CacheConfig`s in `config/samples/` load, validate and mean what their comments
//! say.

use std::path::PathBuf;

use informant::cache::{NamespaceKey, Namespaces, Scope};
use informant::config::{Validated, load};
use informant::recorder::SpamKeyField;

fn sample(name: &str) -> Validated {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("config/samples")
        .join(name);
    match load(&path) {
        Ok(v) => v,
        Err(e) => panic!("{name} must be valid, got: {e}"),
    }
}

#[test]
fn every_sample_in_the_directory_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/samples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "by-object.yaml",
            "cronjob-events.yaml",
            "metadata-only.yaml",
            "minimal.yaml",
            "multi-namespace.yaml",
            "namespace-selector.yaml",
            "sharded.yaml"
        ]
    );
    for name in names {
        sample(&name);
    }
}

#[test]
fn minimal_sample_has_every_upstream_default() {
    let v = sample("minimal.yaml");
    assert_eq!(v.cache, informant::cache::Options::default());
    assert_eq!(v.recorder, informant::recorder::Options::default());
}

#[test]
fn multi_namespace_sample_excludes_listed_namespaces_from_the_fallback() {
    let opts = sample("multi-namespace.yaml").cache.defaulted().unwrap();
    let keys: Vec<&NamespaceKey> = opts.default_namespaces.keys().collect();
    assert_eq!(
        keys,
        [
            &NamespaceKey::AllOthers,
            &NamespaceKey::named("team-a"),
            &NamespaceKey::named("team-b")
        ]
    );
    let fallback = &opts.default_namespaces[&NamespaceKey::AllOthers];
    assert_eq!(
        fallback.effective_field_selector().to_string(),
        "metadata.namespace!=team-a,metadata.namespace!=team-b"
    );
    assert_eq!(
        fallback.effective_label_selector().to_string(),
        "app.kubernetes.io/part-of=shop"
    );
    let team_b = &opts.default_namespaces[&NamespaceKey::named("team-b")];
    assert_eq!(team_b.effective_label_selector().to_string(), "tier=web");
    assert!(
        team_b.transform.as_ref().unwrap().strip_managed_fields,
        "from defaultTransform"
    );
}

#[test]
fn by_object_sample_parses_label_and_field_selectors_per_kind() {
    let v = sample("by-object.yaml");
    let opts = v.cache.defaulted().unwrap();
    let pod = &opts.by_object[0];
    assert_eq!(pod.gvk.kind, "Pod");
    assert_eq!(pod.namespaces, Namespaces::All);
    assert_eq!(
        pod.config.effective_field_selector().to_string(),
        "spec.nodeName=node01,status.phase!=Succeeded"
    );
    assert_eq!(
        pod.config.effective_label_selector().to_string(),
        "app in (cart,checkout),!legacy"
    );
    let node = &opts.by_object[2];
    assert_eq!(node.scope, Scope::Cluster);
    assert!(
        node.config.effective_label_selector().is_empty(),
        "an explicit empty selector stops defaulting"
    );
    let Namespaces::Only(deploy_ns) = &opts.by_object[1].namespaces else {
        panic!("deployments are cached in two namespaces")
    };
    assert_eq!(
        deploy_ns[&NamespaceKey::named("shop")]
            .effective_label_selector()
            .to_string(),
        "app.kubernetes.io/part-of=shop"
    );
    assert_eq!(
        opts.by_object[0].config.effective_sync_period(),
        std::time::Duration::from_mins(90)
    );
}

#[test]
fn metadata_only_sample_marks_secrets_and_configmaps() {
    let v = sample("metadata-only.yaml");
    assert!(v.cache.reader_fail_on_missing_informer);
    assert!(v.cache.by_object.iter().all(|b| b.metadata_only));
    assert_eq!(v.cache.by_object.len(), 2);
}

#[test]
fn cronjob_sample_keys_the_spam_filter_on_reason_too() {
    let v = sample("cronjob-events.yaml");
    assert_eq!(
        v.recorder.correlator.spam_key_fields,
        [
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Type,
            SpamKeyField::Reason
        ]
    );
    assert_eq!(v.recorder.component, "cronjob-controller");
    assert_eq!(
        v.recorder.correlator.qps.to_bits(),
        informant::recorder::CorrelatorOptions::default()
            .qps
            .to_bits(),
        "the sample spells out client-go's float32 default exactly"
    );
}

#[test]
fn namespace_selector_sample_chooses_namespaces_by_label_and_secrets_by_their_own() {
    let opts = sample("namespace-selector.yaml").cache.defaulted().unwrap();
    let selector = |s: Option<&informant::selector::LabelSelector>| s.map(ToString::to_string);
    assert_eq!(
        selector(opts.default_namespace_selector.as_ref()).as_deref(),
        Some("team=shop")
    );
    let configmaps = &opts.by_object[0];
    assert_eq!(
        selector(configmaps.namespace_selector.as_ref()).as_deref(),
        Some("team=shop"),
        "inherited"
    );
    let secrets = &opts.by_object[1];
    assert_eq!(
        selector(secrets.namespace_selector.as_ref()).as_deref(),
        Some("secrets=cached,team=shop")
    );
    assert_eq!(
        secrets.namespaces,
        Namespaces::Only(std::collections::BTreeMap::new()),
        "its own selector replaces the listed namespaces"
    );
}

#[test]
fn sharded_sample_shards_by_namespace_on_ring_shop() {
    let v = sample("sharded.yaml");
    assert_eq!(
        v.cache.sharding,
        Some(informant::selector::Sharding {
            ring: "shop".to_owned(),
            key: informant::selector::ShardKey::Namespace,
        })
    );
    let node = v
        .cache
        .by_object
        .iter()
        .find(|b| b.gvk.kind == "Node")
        .unwrap();
    assert_eq!(node.scope, Scope::Cluster, "cached whole on every replica");
    assert!(
        v.summary()
            .contains("\n  sharding: ring shop, key namespace (each replica caches"),
        "{}",
        v.summary()
    );
}
