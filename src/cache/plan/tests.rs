//! Unit tests of `plan`.

use super::*;
use crate::cache::ByObject;
use crate::selector::LabelSelector;

fn gvk(group: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk(group, "v1", kind)
}

#[test]
fn empty_options_plan_one_informer_cache_over_all_namespaces() {
    let plan = Plan::new(&Options::default()).unwrap();
    let tree = plan.describe();
    assert_eq!(tree.cache, "InformerCache");
    assert_eq!(tree.scope.unwrap().namespace, "");
    assert_eq!(
        plan.informer_specs(),
        [InformerSpec {
            kinds: Kinds::Any,
            scope: InformerScope {
                namespace: None,
                settings: InformerSettings::default()
            }
        }]
    );
}

#[test]
fn default_namespaces_plan_a_multi_namespace_cache_with_a_cluster_cache() {
    let options = Options {
        default_label_selector: Some(LabelSelector::parse("app=shop").unwrap()),
        ..Options::default()
    }
    .with_default_namespace(NamespaceKey::named("a"), Config::default())
    .with_default_namespace(NamespaceKey::AllOthers, Config::default());
    let tree = Plan::new(&options).unwrap().describe();
    assert_eq!(tree.cache, "MultiNamespaceCache");
    let roles: Vec<&str> = tree.children.iter().map(|c| c.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "namespace \"\" (every namespace not listed)",
            "namespace a",
            "cluster-scoped kinds"
        ]
    );
    let scopes: Vec<_> = tree
        .children
        .iter()
        .map(|c| c.scope.clone().unwrap())
        .collect();
    assert_eq!(scopes[0].field_selector, "metadata.namespace!=a");
    assert_eq!(scopes[2].label_selector, "app=shop");
}

#[tokio::test]
async fn by_object_wraps_the_default_cache_and_routes_unlisted_kinds_to_it() {
    let mut pods = ByObject::new(gvk("", "Pod")).with_namespaces(Namespaces::All);
    pods.metadata_only = true;
    let options = Options::default()
        .with_default_namespace(NamespaceKey::named("a"), Config::default())
        .with_by_object(ByObject::new(gvk("apps", "Deployment")))
        .with_by_object(pods);
    let plan = Plan::new(&options).unwrap();
    let tree = plan.describe();
    assert_eq!(tree.cache, "ByKindCache");
    let kinds: Vec<(&str, &str)> = tree
        .children
        .iter()
        .map(|c| (c.role.as_str(), c.cache))
        .collect();
    assert_eq!(
        kinds,
        [
            ("byObject v1/Pod", "InformerCache"),
            ("byObject apps/v1/Deployment", "MultiNamespaceCache"),
            ("default: every kind not in byObject", "MultiNamespaceCache"),
        ]
    );
    assert!(tree.children[0].scope.as_ref().unwrap().metadata_only);
    // The inherited namespaces of a byObject entry get no cluster cache.
    assert_eq!(tree.children[1].children.len(), 1);
    let route = plan
        .route(&gvk("", "Secret"), true, Some("zzz"), Some("s"))
        .unwrap_err();
    assert_eq!(
        route.to_string(),
        "unable to get: zzz/s because of unknown namespace for the cache"
    );
    let served = plan
        .route(&gvk("", "Secret"), true, Some("a"), Some("s"))
        .unwrap();
    assert_eq!(served.len(), 3, "{served:?}");
    // A list across namespaces (no namespace, no name) merges every namespace's cache, as
    // the multi-namespace cache's List does; it is not an unknown namespace "".
    let merged = plan
        .route(&gvk("apps", "Deployment"), true, None, None)
        .unwrap();
    assert_eq!(
        merged[1],
        "MultiNamespaceCache: a list across namespaces, merged from 1 caches"
    );
    assert_eq!(merged[2], "  namespace a:");
    assert!(merged[3].starts_with("InformerCache"), "{merged:?}");
    // The byObject kinds are their own specs; the default cache serves any other kind.
    let specs = plan.informer_specs();
    assert_eq!(specs[0].kinds, Kinds::Only(gvk("", "Pod")));
    assert_eq!(specs[1].kinds, Kinds::Only(gvk("apps", "Deployment")));
    assert!(specs[2..].iter().all(|s| s.kinds == Kinds::Any));
    // Instantiating builds the same shape of caches.
    let cache = plan.instantiate(&Context::offline(false));
    assert!(cache.informers().is_empty(), "nothing starts before a read");
}

#[test]
fn a_cluster_scoped_kind_in_a_tree_without_cluster_cache_is_an_error_route() {
    let options = Options::default().with_by_object(
        ByObject::new(gvk("", "ConfigMap")).with_namespaces(Namespaces::Only(BTreeMap::from([(
            NamespaceKey::named("a"),
            Config::default(),
        )]))),
    );
    let plan = Plan::new(&options).unwrap();
    let error = plan
        .route(&gvk("", "ConfigMap"), false, None, Some("x"))
        .unwrap_err();
    assert!(
        matches!(error, Error::ClusterScopedNotCached { .. }),
        "{error}"
    );
}

#[test]
fn the_all_others_entry_excludes_every_listed_namespace_once() {
    let map = BTreeMap::from([
        (NamespaceKey::named("a"), Config::default()),
        (NamespaceKey::named("b"), Config::default()),
        (
            NamespaceKey::AllOthers,
            Config::default().with_field_selector(
                crate::selector::FieldSelector::parse("metadata.namespace!=a").unwrap(),
            ),
        ),
    ]);
    let scopes = namespace_scopes(&map, false, None);
    let others = &scopes[&NamespaceKey::AllOthers];
    assert_eq!(others.namespace, None);
    assert_eq!(
        others.settings.field_selector.as_ref().unwrap().to_string(),
        "metadata.namespace!=a,metadata.namespace!=b"
    );
    assert_eq!(
        scopes[&NamespaceKey::named("a")].namespace.as_deref(),
        Some("a")
    );
}

#[test]
fn equal_options_plan_equal_specs_and_a_changed_selector_changes_only_its_kind() {
    let spec = |selector: &str| {
        Options::default()
            .with_by_object(ByObject::new(gvk("", "Pod")).with_config(
                Config::default().with_label_selector(LabelSelector::parse(selector).unwrap()),
            ))
            .with_by_object(ByObject::new(gvk("", "Secret")))
    };
    let a = Plan::new(&spec("app=a")).unwrap().informer_specs();
    assert_eq!(a, Plan::new(&spec("app=a")).unwrap().informer_specs());
    let b = Plan::new(&spec("app=b")).unwrap().informer_specs();
    let changed: Vec<_> = a.iter().filter(|s| !b.contains(s)).collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].kinds, Kinds::Only(gvk("", "Pod")));
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Namespaces `a` (team=shop), `b` (team=web), `c` (team=shop).
fn three_namespaces() -> ClusterScope {
    ClusterScope::default().with_namespaces(BTreeMap::from([
        ("a".to_owned(), labels(&[("team", "shop")])),
        ("b".to_owned(), labels(&[("team", "web")])),
        ("c".to_owned(), labels(&[("team", "shop")])),
    ]))
}

fn shop() -> Options {
    Options::default()
        .with_default_namespace(
            NamespaceKey::named("c"),
            Config::default().with_label_selector(LabelSelector::parse("tier=db").unwrap()),
        )
        .with_default_namespace_selector(LabelSelector::parse("team=shop").unwrap())
}

#[test]
fn a_namespace_selector_adds_the_matching_namespaces_and_listed_ones_keep_their_settings() {
    let plan = Plan::for_cluster(&shop(), &three_namespaces()).unwrap();
    let Layer::MultiNamespace {
        namespaces,
        selection: Some(selection),
        cluster: Some(_),
    } = plan.root()
    else {
        panic!("{:?}", plan.root());
    };
    let keys: Vec<&NamespaceKey> = namespaces.keys().collect();
    assert_eq!(keys, [&NamespaceKey::named("a"), &NamespaceKey::named("c")]);
    assert_eq!(
        namespaces[&NamespaceKey::named("c")]
            .settings
            .label_selector
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("tier=db"),
        "the listed namespace keeps its own settings"
    );
    assert_eq!(
        namespaces[&NamespaceKey::named("a")].settings,
        selection.settings
    );
    assert_eq!(selection.added, BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        plan.namespace_selections(),
        BTreeMap::from([(
            "team=shop".to_owned(),
            Some(BTreeSet::from(["a".to_owned(), "c".to_owned()]))
        )])
    );
    let text = plan.describe().to_text();
    assert!(
        text.starts_with(
            "MultiNamespaceCache (root) namespaceSelector=\"team=shop\" matching 2: [a, c]\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("InformerCache (namespace a (matches namespaceSelector \"team=shop\"))"),
        "{text}"
    );
    let error = plan
        .route(&gvk("", "Pod"), true, Some("b"), Some("x"))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unable to get: b/x because of unknown namespace for the cache; namespace b is not listed \
         and does not match the namespaceSelector \"team=shop\""
    );
    let route = plan
        .route(&gvk("", "Pod"), true, Some("a"), Some("x"))
        .unwrap();
    assert_eq!(
        route[0],
        "MultiNamespaceCache: namespace \"a\" matches namespaceSelector \"team=shop\""
    );
}

#[test]
fn without_the_cluster_a_selector_is_explained_as_known_at_run_time() {
    let plan = Plan::new(&shop()).unwrap();
    let text = plan.describe().to_text();
    assert!(
        text.contains("namespaceSelector=\"team=shop\" matching: known at run time"),
        "{text}"
    );
    assert!(
        text.contains("every namespace namespaceSelector \"team=shop\" matches, known at run time) namespace=<each matching>"),
        "{text}"
    );
    let route = plan
        .route(&gvk("", "Pod"), true, Some("b"), Some("x"))
        .unwrap();
    assert!(
        route[0].contains("served only while its labels match"),
        "{route:?}"
    );
}

#[test]
fn a_label_change_replans_only_when_it_changes_what_a_selector_matches() {
    let before = Plan::for_cluster(&shop(), &three_namespaces()).unwrap();
    let mut scope = three_namespaces();
    let namespaces = scope.namespaces.as_mut().unwrap();
    namespaces.insert("d".to_owned(), labels(&[("team", "web")]));
    namespaces.insert("b".to_owned(), labels(&[("team", "web"), ("x", "y")]));
    assert_eq!(Plan::for_cluster(&shop(), &scope).unwrap(), before);
    scope
        .namespaces
        .as_mut()
        .unwrap()
        .insert("b".to_owned(), labels(&[("team", "shop")]));
    let after = Plan::for_cluster(&shop(), &scope).unwrap();
    let old = before.informer_specs();
    let new: Vec<_> = after
        .informer_specs()
        .into_iter()
        .filter(|s| !old.contains(s))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(new[0].scope.namespace.as_deref(), Some("b"));
}

#[test]
fn a_by_object_kind_that_is_not_served_waits_and_reads_say_why() {
    let widget = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let options = Options::default()
        .with_by_object(ByObject::new(widget.clone()))
        .with_by_object(ByObject::new(gvk("", "Pod")));
    let scope = ClusterScope::default().with_waiting(widget.clone(), "no CRD yet");
    let plan = Plan::for_cluster(&options, &scope).unwrap();
    assert_eq!(plan.by_object_kinds(), vec![gvk("", "Pod")]);
    assert_eq!(
        plan.waiting_kinds(),
        vec![(widget.clone(), "no CRD yet".to_owned())]
    );
    let error = plan.route(&widget, true, Some("a"), Some("x")).unwrap_err();
    assert!(matches!(error, Error::WaitingForKind { .. }), "{error}");
    assert!(
        plan.informer_specs()
            .iter()
            .all(|s| s.kinds != Kinds::Only(widget.clone()))
    );
    let text = plan.describe().to_text();
    assert!(
        text.contains("WaitingForKind (byObject example.com/v1/Widget): no CRD yet"),
        "{text}"
    );
    let served = Plan::for_cluster(&options, &ClusterScope::default()).unwrap();
    assert_ne!(served, plan);
    assert_eq!(served.by_object_kinds().len(), 2);
}

/// `n` namespaces `ns-000`…, the first `matching` labelled team=shop.
fn many_namespaces(n: usize, matching: usize) -> ClusterScope {
    ClusterScope::default().with_namespaces(
        (0..n)
            .map(|i| {
                let team = if i < matching { "shop" } else { "web" };
                (format!("ns-{i:03}"), labels(&[("team", team)]))
            })
            .collect(),
    )
}

fn selected_only() -> Options {
    Options::default()
        .with_default_namespace_selector(LabelSelector::parse("team=shop").unwrap())
        .with_by_object(ByObject::new(gvk("", "ConfigMap")))
}

#[test]
fn a_selector_matching_nearly_every_namespace_is_served_by_one_cluster_wide_informer() {
    let plan = Plan::for_cluster(&selected_only(), &many_namespaces(200, 190)).unwrap();
    let configmaps: Vec<InformerSpec> = plan
        .informer_specs()
        .into_iter()
        .filter(|s| s.kinds == Kinds::Only(gvk("", "ConfigMap")))
        .collect();
    assert_eq!(configmaps.len(), 1, "{configmaps:?}");
    assert_eq!(configmaps[0].scope.namespace, None);
    assert_eq!(
        plan.wide_selections(),
        BTreeSet::from(["team=shop".to_owned()])
    );
    let text = plan.describe().to_text();
    assert!(
        text.contains("(the 190 namespaces namespaceSelector \"team=shop\" adds: one cluster-wide informer, reads filtered in the process (chosen because it matches at least 90% of the namespaces: one watch instead of 190)) namespace=<all, filtered to the matching>"),
        "{text}"
    );
    let route = plan
        .route(&gvk("", "ConfigMap"), true, Some("ns-005"), Some("x"))
        .unwrap();
    assert!(
        route[1].contains("served by its cluster-wide informer"),
        "{route:?}"
    );
    let outside = plan
        .route(&gvk("", "ConfigMap"), true, Some("ns-195"), Some("x"))
        .unwrap_err();
    assert!(outside.is_unknown_namespace(), "{outside}");

    // 85% is not enough to choose it, but enough to keep it (the layouts do not flap).
    let fresh = Plan::for_cluster(&selected_only(), &many_namespaces(200, 170)).unwrap();
    assert!(fresh.wide_selections().is_empty());
    let mut kept_scope = many_namespaces(200, 170);
    kept_scope.wide = plan.wide_selections();
    let kept = Plan::for_cluster(&selected_only(), &kept_scope).unwrap();
    assert_eq!(kept.wide_selections(), plan.wide_selections());
    let mut left_scope = many_namespaces(200, 150);
    left_scope.wide = plan.wide_selections();
    let left = Plan::for_cluster(&selected_only(), &left_scope).unwrap();
    assert!(left.wide_selections().is_empty(), "below 80% it goes back");
    // Few namespaces never go wide, whatever the share.
    let small = Plan::for_cluster(&selected_only(), &many_namespaces(50, 50)).unwrap();
    assert!(small.wide_selections().is_empty());
}

/// The half of the hash space below 2^63, by `key`.
fn lower_half(key: crate::selector::ShardKey) -> crate::cache::ShardScope {
    crate::cache::ShardScope {
        key,
        ranges: vec![crate::selector::ShardRange::new(0, 1 << 63).unwrap()],
        server_side: true,
    }
}

/// The namespaced informer scopes of `plan`, by namespace (`None`: every namespace).
fn namespaced_scopes(plan: &Plan, kinds: &Kinds) -> BTreeSet<Option<String>> {
    plan.informer_specs()
        .into_iter()
        .filter(|s| &s.kinds == kinds)
        .map(|s| s.scope.namespace)
        .collect()
}

#[test]
fn sharded_by_namespace_a_member_caches_namespaced_kinds_only_in_the_namespaces_it_owns() {
    let scope =
        many_namespaces(40, 20).with_shard(lower_half(crate::selector::ShardKey::Namespace));
    let shard = scope.shard.clone().unwrap();
    let owned = |names: &mut dyn Iterator<Item = String>| -> BTreeSet<Option<String>> {
        names
            .filter(|ns| shard.owns_namespace(ns))
            .map(Some)
            .collect()
    };
    // Every namespace: the owned ones, each with its informer, and the cluster cache whole.
    let plan = Plan::for_cluster(&Options::default(), &scope).unwrap();
    let mut expected = owned(&mut (0..40).map(|i| format!("ns-{i:03}")));
    assert!(expected.len() > 8 && expected.len() < 32, "{expected:?}");
    expected.insert(None);
    assert_eq!(namespaced_scopes(&plan, &Kinds::Any), expected);
    let unowned = (0..40)
        .map(|i| format!("ns-{i:03}"))
        .find(|ns| !shard.owns_namespace(ns))
        .unwrap();
    let refused = plan
        .route(&gvk("", "ConfigMap"), true, Some(&unowned), Some("x"))
        .unwrap_err();
    assert!(refused.is_unknown_namespace(), "{refused}");
    let node = plan
        .route(&gvk("", "Node"), false, None, Some("n"))
        .unwrap();
    assert!(node[0].contains("cluster-scoped kind"), "{node:?}");

    // A selector's namespaces, wide or not: the owned ones it matches.
    for (n, matching) in [(40, 20), (200, 190)] {
        let scope = many_namespaces(n, matching)
            .with_shard(lower_half(crate::selector::ShardKey::Namespace));
        let plan = Plan::for_cluster(&selected_only(), &scope).unwrap();
        assert!(
            plan.wide_selections().is_empty(),
            "one informer per owned namespace"
        );
        assert_eq!(
            namespaced_scopes(&plan, &Kinds::Only(gvk("", "ConfigMap"))),
            owned(&mut (0..matching).map(|i| format!("ns-{i:03}")))
        );
    }

    // Listed namespaces and the "" entry: the owned ones of each.
    let options = Options::default()
        .with_default_namespace(NamespaceKey::named("ns-000"), Config::default())
        .with_default_namespace(NamespaceKey::named("ns-001"), Config::default())
        .with_default_namespace(NamespaceKey::AllOthers, Config::default());
    let plan = Plan::for_cluster(&options, &scope).unwrap();
    let mut expected = owned(&mut (0..40).map(|i| format!("ns-{i:03}")));
    expected.insert(None);
    assert_eq!(namespaced_scopes(&plan, &Kinds::Any), expected);
}

#[test]
fn sharded_by_uid_every_namespaced_informer_carries_the_members_selector() {
    let pods = ByObject::new(gvk("", "Pod"));
    let nodes = ByObject::new(gvk("", "Node"));
    let options = Options::default()
        .with_by_object(pods)
        .with_by_object(nodes);
    let scope = ClusterScope::default().with_shard(lower_half(crate::selector::ShardKey::Uid));
    let plan = Plan::for_cluster(&options, &scope).unwrap();
    let shard_of = |kinds: Kinds| {
        plan.informer_specs()
            .into_iter()
            .find(|s| s.kinds == kinds)
            .unwrap()
            .scope
            .settings
            .shard
    };
    let pod_shard = shard_of(Kinds::Only(gvk("", "Pod"))).unwrap();
    assert_eq!(pod_shard.mode(), "server-side");
    assert_eq!(
        pod_shard.selector.unwrap().to_string(),
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    );
    assert_eq!(shard_of(Kinds::Only(gvk("", "Node"))), None, "cached whole");
    assert!(
        shard_of(Kinds::Any).is_some(),
        "namespaced kinds read lazily too"
    );
    // Another share is another plan: only the sharded informers differ.
    let other = ClusterScope::default().with_shard(crate::cache::ShardScope {
        ranges: vec![crate::selector::ShardRange::new(1 << 63, 1 << 64).unwrap()],
        ..lower_half(crate::selector::ShardKey::Uid)
    });
    let moved = Plan::for_cluster(&options, &other).unwrap();
    let unchanged: Vec<InformerSpec> = moved
        .informer_specs()
        .into_iter()
        .filter(|s| plan.informer_specs().contains(s))
        .collect();
    assert_eq!(unchanged.len(), 1, "{unchanged:?}");
    assert_eq!(unchanged[0].kinds, Kinds::Only(gvk("", "Node")));
}
