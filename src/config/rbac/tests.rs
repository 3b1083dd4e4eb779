use super::*;
use crate::config::load_str;

fn derive(spec: &str, options: &Options) -> Rules {
    let text = format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {spec}\n"
    );
    Rules::derive(&load_str(&text).unwrap(), options)
}

fn resources(rules: &[PolicyRule]) -> Vec<String> {
    rules
        .iter()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect()
}

#[test]
fn an_empty_spec_reads_nothing_up_front_and_records_events_everywhere() {
    let rules = derive("{}", &Options::new("sys"));
    assert_eq!(rules.cluster, vec![events_rule(Api::CoreV1)]);
    assert_eq!(rules.namespaces.keys().collect::<Vec<_>>(), ["sys"]);
    assert_eq!(
        resources(&rules.namespaces["sys"]),
        [
            "cacheconfigs",
            "cacheconfigs/status",
            "controllers",
            "controllers/status"
        ]
    );
    assert_eq!(
        rules.namespaces["sys"][0].resource_names,
        Some(vec!["c".to_owned()])
    );
    // The release finalizer of a `Controller` is a patch of its metadata.
    assert_eq!(
        rules.namespaces["sys"][2].verbs,
        ["get", "list", "watch", "patch"]
    );
    assert_eq!(rules.namespaces["sys"][2].resource_names, None);
}

#[test]
fn the_events_k8s_io_api_gets_its_own_events_rule() {
    let spec = "{recorder: {api: events.k8s.io/v1}}";
    let doc = format!(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec: {spec}\n"
    );
    let config = crate::config::load_str(&doc).unwrap();
    let rules = Rules::derive(&config, &Options::new("informant-system"));
    assert_eq!(rules.cluster, vec![events_rule(Api::EventsV1)]);
    assert_eq!(
        rules.cluster[0].api_groups.as_deref(),
        Some(&["events.k8s.io".to_owned()][..])
    );
}

#[test]
fn namespace_scoped_configs_get_roles_and_cluster_scoped_kinds_a_cluster_role() {
    let rules = derive(
        "{defaultNamespaces: {a: {}, b: {}}, byObject: [{apiVersion: v1, kind: Pod}, \
             {apiVersion: apps/v1, kind: Deployment, namespaces: {b: {}}}, \
             {apiVersion: v1, kind: Node}]}",
        &Options::new("sys"),
    );
    assert_eq!(resources(&rules.cluster), ["nodes"]);
    assert_eq!(
        rules.namespaces.keys().collect::<Vec<_>>(),
        ["a", "b", "default", "sys"]
    );
    assert_eq!(resources(&rules.namespaces["a"]), ["pods", "events"]);
    assert_eq!(
        resources(&rules.namespaces["b"]),
        ["pods", "deployments", "events"]
    );
    assert_eq!(resources(&rules.namespaces["default"]), ["events"]);
    assert_eq!(
        rules.namespaces["b"][1].api_groups,
        Some(vec!["apps".into()])
    );
    assert_eq!(rules.namespaces["b"][0].verbs, ["list", "watch"]);
}

#[test]
fn a_namespaced_kind_cached_everywhere_makes_events_cluster_wide() {
    let rules = derive(
        "{defaultNamespaces: {a: {}}, byObject: [{apiVersion: v1, kind: Secret, namespaces: {}}]}",
        &Options::new("sys"),
    );
    assert_eq!(resources(&rules.cluster), ["secrets", "events"]);
    assert_eq!(rules.namespaces.keys().collect::<Vec<_>>(), ["sys"]);
    let all_others = derive(
        "{defaultNamespaces: {a: {}, \"\": {}}}",
        &Options::new("sys"),
    );
    assert_eq!(resources(&all_others.cluster), ["events"]);
    assert_eq!(all_others.namespaces.keys().collect::<Vec<_>>(), ["sys"]);
}

#[test]
fn extra_kinds_and_rules_follow_the_default_scope_and_leases_the_manager() {
    let extra = rule("example.com", &["widgets"], None, &["get"]);
    let options = Options {
        namespace: "sys".into(),
        lease: Some("informant".into()),
        kinds: vec![
            GroupVersionKind::gvk("apps", "v1", "Deployment"),
            GroupVersionKind::gvk("", "v1", "Namespace"),
        ],
        extra_rules: vec![extra.clone()],
        metrics_secure: false,
        webhook: None,
    };
    let rules = derive("{defaultNamespaces: {a: {}}}", &options);
    assert_eq!(resources(&rules.cluster), ["namespaces"]);
    assert_eq!(
        resources(&rules.namespaces["a"]),
        ["deployments", "events", "widgets"]
    );
    let sys = &rules.namespaces["sys"];
    assert_eq!(
        resources(sys),
        [
            "events",
            "cacheconfigs",
            "cacheconfigs/status",
            "controllers",
            "controllers/status",
            "leases",
            "leases"
        ]
    );
    assert_eq!(sys[6].resource_names, Some(vec!["informant".to_owned()]));
    assert_eq!(sys[5].resource_names, None);
    let cluster = derive("{}", &options);
    assert_eq!(cluster.cluster.last(), Some(&extra));
}

#[test]
fn custom_kinds_are_namespaced_with_the_guessed_plural() {
    let rules = derive(
        "{byObject: [{apiVersion: example.com/v1, kind: Policy}]}",
        &Options::new("sys"),
    );
    let policies = rules
        .cluster
        .iter()
        .find(|r| r.api_groups == Some(vec!["example.com".into()]))
        .unwrap();
    assert_eq!(policies.resources, Some(vec!["policies".into()]));
    // Its CRD is watched, so its informers follow the CRD.
    assert!(rules.cluster.contains(&rule(
        "apiextensions.k8s.io",
        &["customresourcedefinitions"],
        None,
        &["list", "watch"]
    )));
    assert_eq!(rules.notes, [NOTE_CRD_WATCH]);
}

#[test]
fn a_namespace_selector_reads_its_kinds_cluster_wide_and_lists_namespaces() {
    let rules = derive(
        "{namespaceSelector: team=shop, defaultNamespaces: {a: {}}, byObject: [{apiVersion: v1, kind: Pod}, {apiVersion: apps/v1, kind: Deployment, namespaces: {b: {}}}]}",
        &Options::new("sys"),
    );
    assert_eq!(
        rules.cluster[0],
        rule("", &["namespaces", "pods"], None, &["list", "watch"])
    );
    assert!(rules.namespaces["b"].contains(&rule(
        "apps",
        &["deployments"],
        None,
        &["list", "watch"]
    )));
    assert!(
        !rules.namespaces.contains_key("a"),
        "a is read cluster-wide"
    );
    assert_eq!(rules.notes, [NOTE_NAMESPACE_SELECTOR]);
}

#[test]
fn sharding_adds_the_member_leases_and_by_namespace_follows_the_namespaces() {
    let uid = derive(
        "{defaultNamespaces: {a: {}}, sharding: {ring: shop, key: uid}}",
        &Options::new("sys"),
    );
    assert!(uid.cluster.is_empty(), "{:?}", uid.cluster);
    let sys = &uid.namespaces["sys"];
    assert_eq!(sys.last(), Some(&member_lease_rule()));
    assert_eq!(
        sys.last().unwrap().verbs,
        ["get", "list", "create", "update", "delete"]
    );
    assert_eq!(sys.last().unwrap().resource_names, None);
    assert!(
        !uid.namespaces["a"].contains(&member_lease_rule()),
        "only in the manager's namespace"
    );
    assert_eq!(uid.notes, [NOTE_SHARDING]);

    let by_namespace = derive(
        "{sharding: {ring: shop}, byObject: [{apiVersion: v1, kind: ConfigMap}]}",
        &Options::new("sys"),
    );
    assert_eq!(
        by_namespace.cluster[0],
        rule("", &["configmaps", "namespaces"], None, &["list", "watch"])
    );
    assert_eq!(
        by_namespace.namespaces["sys"].last(),
        Some(&member_lease_rule())
    );
    assert_eq!(by_namespace.notes, [NOTE_SHARDING_NAMESPACE, NOTE_SHARDING]);
    let elected = Options {
        lease: Some("informant".into()),
        ..Options::new("sys")
    };
    let leases: Vec<PolicyRule> = derive("{sharding: {ring: shop}}", &elected).namespaces["sys"]
        .iter()
        .filter(|r| r.resources == Some(vec!["leases".to_owned()]))
        .cloned()
        .collect();
    assert_eq!(
        leases,
        [member_lease_rule()],
        "leader election's two rules are within the member rule"
    );
    let unsharded = derive(
        "{byObject: [{apiVersion: v1, kind: ConfigMap}]}",
        &Options::new("sys"),
    );
    assert!(!resources(&unsharded.cluster).contains(&"namespaces".to_owned()));
    assert!(!resources(&unsharded.namespaces["sys"]).contains(&"leases".to_owned()));
}

#[test]
fn objects_bind_each_role_to_the_service_account() {
    let rules = derive(
        "{byObject: [{apiVersion: v1, kind: Pod}]}",
        &Options::new("sys"),
    );
    let objects = rules.objects("informant", "sa", "sys");
    let values = objects.to_values().unwrap();
    let kinds: Vec<&str> = values.iter().map(|v| v["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    );
    assert_eq!(values[1]["subjects"][0]["namespace"], "sys");
    assert_eq!(values[3]["roleRef"]["kind"], "Role");
    assert_eq!(values[2]["metadata"]["namespace"], "sys");
}

#[test]
fn secure_metrics_add_the_reviews_to_the_cluster_role_and_an_unbound_metrics_reader() {
    let namespaced = "{defaultNamespaces: {shop: {}}}";
    let plain = derive(namespaced, &Options::new("sys"));
    assert!(plain.cluster.is_empty() && plain.metrics_reader.is_empty());
    let secure = derive(
        namespaced,
        &Options {
            metrics_secure: true,
            ..Options::new("sys")
        },
    );
    assert_eq!(
        secure.cluster,
        [
            rule(AUTHENTICATION_GROUP, &["tokenreviews"], None, &["create"]),
            rule(
                AUTHORIZATION_GROUP,
                &["subjectaccessreviews"],
                None,
                &["create"]
            ),
        ],
        "reviews are cluster-scoped: a namespaced config gets a ClusterRole for them alone"
    );
    assert_eq!(secure.namespaces, plain.namespaces);
    assert_eq!(secure.notes, [NOTE_SECURE_METRICS]);
    let objects = secure.objects("informant", "informant", "sys");
    let reader = objects.metrics_reader.unwrap();
    assert_eq!(
        reader.metadata.name.as_deref(),
        Some("informant-metrics-reader")
    );
    assert_eq!(
        reader.rules.unwrap()[0].non_resource_urls,
        Some(vec!["/metrics".to_owned()])
    );
    assert!(objects.cluster_role_binding.is_some());
    // The reader is the scrapers', not a permission the manager needs.
    assert!(
        crate::config::access::permissions(&secure)
            .iter()
            .all(|p| p.url.is_none())
    );
}

fn managed(inject: InjectNames) -> Webhook {
    Webhook {
        namespace: "web".to_owned(),
        configuration: "informant-webhook".to_owned(),
        certificates: Certificates::Managed {
            secret: "informant-webhook-cert".to_owned(),
            inject,
        },
    }
}

#[test]
fn a_webhook_with_managed_certificates_owns_its_configurations_and_its_secret() {
    let namespaced = "{defaultNamespaces: {shop: {}}}";
    let plain = derive(namespaced, &Options::new("sys"));
    let rules = derive(
        namespaced,
        &Options {
            webhook: Some(managed(InjectNames::default())),
            ..Options::new("sys")
        },
    );
    let configurations = [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ];
    let mut owned = rule(
        "admissionregistration.k8s.io",
        &configurations,
        Some("informant-webhook"),
        &["get", "update", "delete"],
    );
    assert_eq!(
        rules.cluster,
        [
            rule(
                "admissionregistration.k8s.io",
                &configurations,
                None,
                &["create"]
            ),
            owned.clone(),
        ],
        "a namespaced config gets a ClusterRole for the configurations alone"
    );
    assert_eq!(rules.notes, [NOTE_WEBHOOK]);
    // The Secret's rules go to the Service's namespace, not the manager's.
    assert_eq!(rules.namespaces["sys"], plain.namespaces["sys"]);
    assert_eq!(
        rules.namespaces["web"],
        [
            rule("", &["secrets"], None, &["create"]),
            rule(
                "",
                &["secrets"],
                Some("informant-webhook-cert"),
                &["get", "list", "watch", "update"]
            ),
        ]
    );
    // The check can fail: another configuration name is another rule.
    owned.resource_names = Some(vec!["other".to_owned()]);
    assert!(!rules.cluster.contains(&owned));
}

#[test]
fn a_webhook_in_the_managers_namespace_adds_the_secret_to_its_role() {
    let mut webhook = managed(InjectNames::default());
    webhook.namespace = "sys".to_owned();
    let plain = derive("{}", &Options::new("sys"));
    let rules = derive(
        "{}",
        &Options {
            webhook: Some(webhook),
            ..Options::new("sys")
        },
    );
    let role = &rules.namespaces["sys"];
    assert_eq!(
        role[..plain.namespaces["sys"].len()],
        plain.namespaces["sys"]
    );
    assert_eq!(
        resources(&role[plain.namespaces["sys"].len()..]),
        ["secrets", "secrets"]
    );
    assert_eq!(rules.namespaces.len(), 1);
}

#[test]
fn injected_objects_are_granted_by_name_and_a_mounted_certificate_reads_no_secret() {
    let inject = InjectNames {
        validating: vec![
            "b".to_owned(),
            "a".to_owned(),
            "informant-webhook".to_owned(),
        ],
        mutating: vec![],
        crds: vec![
            "carts.shop.example.com".to_owned(),
            "carts.shop.example.com".to_owned(),
        ],
    };
    let options = |webhook| Options {
        webhook: Some(webhook),
        ..Options::new("sys")
    };
    let rules = derive("{}", &options(managed(inject.clone())));
    let named = |rule: &PolicyRule| {
        (
            rule.resources.clone().unwrap_or_default(),
            rule.resource_names.clone(),
            rule.verbs.clone(),
        )
    };
    let webhook_rules: Vec<_> = rules.cluster.iter().skip(1).map(named).collect();
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // The events rule of the cluster-wide default scope comes first.
    assert_eq!(
        webhook_rules[2..],
        [
            (
                strings(&["validatingwebhookconfigurations"]),
                Some(strings(&["a", "b"])),
                strings(&["get", "update"])
            ),
            (
                strings(&["customresourcedefinitions"]),
                Some(strings(&["carts.shop.example.com"])),
                strings(&["get", "patch"])
            ),
        ],
        "the owned configuration is not named twice, no mutating rule without names"
    );
    let mounted = Webhook {
        certificates: Certificates::Mounted,
        ..managed(inject)
    };
    let rules = derive("{}", &options(mounted));
    assert!(!resources(&rules.cluster).contains(&"customresourcedefinitions".to_owned()));
    assert!(
        rules
            .namespaces
            .values()
            .all(|role| !resources(role).contains(&"secrets".to_owned()))
    );
    assert_eq!(rules.cluster.len(), 3, "events, create, the owned two");
}

#[test]
fn the_secrets_watch_is_not_granted_twice() {
    let options = |namespace: &str| Options {
        webhook: Some(Webhook {
            namespace: namespace.to_owned(),
            ..managed(InjectNames::default())
        }),
        ..Options::new("sys")
    };
    let named_verbs = |rules: &Rules, namespace: &str| {
        rules.namespaces[namespace]
            .iter()
            .find(|r| r.resource_names == Some(vec!["informant-webhook-cert".to_owned()]))
            .map(|r| r.verbs.clone())
            .unwrap()
    };
    // Secrets cached everywhere: the ClusterRole lists and watches them.
    let everywhere = "{byObject: [{apiVersion: v1, kind: Secret, namespaces: {}}]}";
    let rules = derive(everywhere, &options("sys"));
    assert_eq!(named_verbs(&rules, "sys"), ["get", "update"]);
    // Cached in the Service's namespace by its Role; not in another one.
    let in_web = "{defaultNamespaces: {web: {}}, byObject: [{apiVersion: v1, kind: Secret}]}";
    assert_eq!(
        named_verbs(&derive(in_web, &options("web")), "web"),
        ["get", "update"]
    );
    assert_eq!(
        named_verbs(&derive(in_web, &options("sys")), "sys"),
        ["get", "list", "watch", "update"]
    );
}
