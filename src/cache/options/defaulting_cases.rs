//! The cases of controller-runtime's `pkg/cache/defaulting_test.go` (`TestDefaultOpts`,
//! v0.24), ported as data: each names the input and the expected result, and selectors say
//! where their value came from (`from=by-object`, `from=default-namespaces`, ...).

use std::collections::BTreeMap;
use std::time::Duration;

use kube::core::GroupVersionKind;

use super::super::{ByObject, Config, NamespaceKey, Namespaces, Options, Scope};
use super::OptionsError;
use crate::selector::{FieldSelector, LabelSelector};

#[allow(clippy::unnecessary_wraps, reason = "options hold selectors as Option")]
fn label(s: &str) -> Option<LabelSelector> {
    Some(LabelSelector::parse(s).unwrap())
}

#[allow(clippy::unnecessary_wraps, reason = "options hold selectors as Option")]
fn field(s: &str) -> Option<FieldSelector> {
    Some(FieldSelector::parse(s).unwrap())
}

fn labelled(s: &str) -> Config {
    Config {
        label_selector: label(s),
        ..Config::default()
    }
}

fn fielded(s: &str) -> Config {
    Config {
        field_selector: field(s),
        ..Config::default()
    }
}

fn key(ns: &str) -> NamespaceKey {
    if ns.is_empty() {
        NamespaceKey::AllOthers
    } else {
        NamespaceKey::named(ns)
    }
}

fn ns(entries: Vec<(&str, Config)>) -> BTreeMap<NamespaceKey, Config> {
    entries.into_iter().map(|(k, c)| (key(k), c)).collect()
}

fn pod(namespaces: Namespaces, config: Config) -> ByObject {
    ByObject {
        namespaces,
        config,
        ..ByObject::new(GroupVersionKind::gvk("", "v1", "Pod"))
    }
}

fn node(namespaces: Namespaces) -> ByObject {
    ByObject {
        namespaces,
        ..ByObject::new(GroupVersionKind::gvk("", "v1", "Node"))
    }
}

/// What a case checks in the defaulted options.
enum Expect {
    /// The namespaces of the first by-object entry.
    PodNamespaces(Namespaces),
    /// The settings of the first by-object entry.
    PodConfig(Config),
    /// `default_namespaces`.
    DefaultNamespaces(BTreeMap<NamespaceKey, Config>),
    /// The whole options.
    Whole(Options),
    /// Defaulting fails.
    Fails(OptionsError),
}

struct Case {
    name: &'static str,
    input: Options,
    expect: Expect,
}

#[allow(
    clippy::too_many_lines,
    reason = "one table of data, one entry per upstream case"
)]
fn cases() -> Vec<Case> {
    let five_min = Duration::from_mins(5);
    vec![
        Case {
            name: "ByObject.Namespaces gets defaulted from ByObject",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", Config::default())])),
                    labelled("from=by-object"),
                )],
                default_namespaces: ns(vec![("default", labelled("from=default-namespaces"))]),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![(
                "default",
                labelled("from=by-object"),
            )]))),
        },
        Case {
            name: "ByObject.Namespaces gets defaulted from DefaultNamespaces",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", Config::default())])),
                    Config::default(),
                )],
                default_namespaces: ns(vec![("default", labelled("from=default-namespaces"))]),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![(
                "default",
                labelled("from=default-namespaces"),
            )]))),
        },
        Case {
            name: "ByObject.Namespaces gets defaulted from DefaultLabelSelector",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", Config::default())])),
                    Config::default(),
                )],
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![(
                "default",
                labelled("from=default-label-selector"),
            )]))),
        },
        Case {
            name: "ByObject.Namespaces gets defaulted from DefaultNamespaces when unset",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_namespaces: ns(vec![("default", labelled("from=default-namespaces"))]),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![(
                "default",
                labelled("from=default-namespaces"),
            )]))),
        },
        Case {
            name: "ByObject.Namespaces doesn't get defaulted when its empty",
            input: Options {
                by_object: vec![pod(Namespaces::All, Config::default())],
                default_namespaces: ns(vec![("default", labelled("from=default-namespaces"))]),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::All),
        },
        Case {
            name: "ByObject.Labels gets defaulted from DefautLabelSelector",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(labelled("from=default-label-selector")),
        },
        Case {
            name: "ByObject.Labels doesn't get defaulted when set",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, labelled("from=by-object"))],
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(labelled("from=by-object")),
        },
        Case {
            name: "ByObject.Fields gets defaulted from DefaultFieldSelector",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_field_selector: field("from=default-field-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(fielded("from=default-field-selector")),
        },
        Case {
            name: "ByObject.Fields doesn't get defaulted when set",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, fielded("from=by-object"))],
                default_field_selector: field("from=default-field-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(fielded("from=by-object")),
        },
        Case {
            name: "ByObject.UnsafeDisableDeepCopy gets defaulted from DefaultUnsafeDisableDeepCopy",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_unsafe_disable_deep_copy: Some(true),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                unsafe_disable_deep_copy: Some(true),
                ..Config::default()
            }),
        },
        Case {
            name: "ByObject.UnsafeDisableDeepCopy doesn't get defaulted when set",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Inherit,
                    Config {
                        unsafe_disable_deep_copy: Some(false),
                        ..Config::default()
                    },
                )],
                default_unsafe_disable_deep_copy: Some(true),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                unsafe_disable_deep_copy: Some(false),
                ..Config::default()
            }),
        },
        Case {
            name: "ByObject.EnableWatchBookmarks gets defaulted from DefaultEnableWatchBookmarks",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_enable_watch_bookmarks: Some(true),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                enable_watch_bookmarks: Some(true),
                ..Config::default()
            }),
        },
        Case {
            name: "ByObject.EnableWatchBookmarks doesn't get defaulted when set",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Inherit,
                    Config {
                        enable_watch_bookmarks: Some(false),
                        ..Config::default()
                    },
                )],
                default_enable_watch_bookmarks: Some(true),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                enable_watch_bookmarks: Some(false),
                ..Config::default()
            }),
        },
        Case {
            name: "ByObject.SyncPeriod gets defaulted from SyncPeriod",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                sync_period: Some(five_min),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                sync_period: Some(five_min),
                ..Config::default()
            }),
        },
        Case {
            name: "ByObject.SyncPeriod doesn't get defaulted when set",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Inherit,
                    Config {
                        sync_period: Some(Duration::from_mins(1)),
                        ..Config::default()
                    },
                )],
                sync_period: Some(five_min),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                sync_period: Some(Duration::from_mins(1)),
                ..Config::default()
            }),
        },
        Case {
            name: "DefaultNamespace label selector gets defaulted from DefaultLabelSelector",
            input: Options {
                default_namespaces: ns(vec![("default", Config::default())]),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::DefaultNamespaces(ns(vec![(
                "default",
                labelled("from=default-label-selector"),
            )])),
        },
        Case {
            name: "ByObject.Namespaces get selector from DefaultNamespaces before DefaultSelector",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", Config::default())])),
                    Config::default(),
                )],
                default_namespaces: ns(vec![("default", labelled("from=namespace"))]),
                default_label_selector: label("from=default"),
                ..Options::default()
            },
            expect: Expect::Whole(Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", labelled("from=namespace"))])),
                    Config::default(),
                )],
                default_namespaces: ns(vec![("default", labelled("from=namespace"))]),
                default_label_selector: label("from=default"),
                ..Options::default()
            }),
        },
        Case {
            name: "Two namespaces in DefaultNamespaces with custom selection logic",
            input: Options {
                default_namespaces: ns(vec![
                    ("kube-public", labelled("from=kube-public")),
                    ("kube-system", labelled("from=kube-system")),
                    ("", Config::default()),
                ]),
                ..Options::default()
            },
            expect: Expect::DefaultNamespaces(ns(vec![
                ("kube-public", labelled("from=kube-public")),
                ("kube-system", labelled("from=kube-system")),
                (
                    "",
                    fielded("metadata.namespace!=kube-public,metadata.namespace!=kube-system"),
                ),
            ])),
        },
        Case {
            name: "Two namespaces in DefaultNamespaces with custom selection logic and namespace default has its own field selector",
            input: Options {
                default_namespaces: ns(vec![
                    ("kube-public", labelled("from=kube-public")),
                    ("kube-system", labelled("from=kube-system")),
                    ("", fielded("spec.nodeName=foo")),
                ]),
                ..Options::default()
            },
            expect: Expect::DefaultNamespaces(ns(vec![
                ("kube-public", labelled("from=kube-public")),
                ("kube-system", labelled("from=kube-system")),
                (
                    "",
                    fielded(
                        "metadata.namespace!=kube-public,metadata.namespace!=kube-system,spec.nodeName=foo",
                    ),
                ),
            ])),
        },
        Case {
            name: "Two namespaces in ByObject.Namespaces with custom selection logic",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![
                        ("kube-public", labelled("from=kube-public")),
                        ("kube-system", labelled("from=kube-system")),
                        ("", Config::default()),
                    ])),
                    Config::default(),
                )],
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![
                ("kube-public", labelled("from=kube-public")),
                ("kube-system", labelled("from=kube-system")),
                (
                    "",
                    fielded("metadata.namespace!=kube-public,metadata.namespace!=kube-system"),
                ),
            ]))),
        },
        Case {
            name: "Two namespaces in ByObject.Namespaces with custom selection logic and namespace default has its own field selector",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![
                        ("kube-public", labelled("from=kube-public")),
                        ("kube-system", labelled("from=kube-system")),
                        ("", fielded("spec.nodeName=foo")),
                    ])),
                    Config::default(),
                )],
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(ns(vec![
                ("kube-public", labelled("from=kube-public")),
                ("kube-system", labelled("from=kube-system")),
                (
                    "",
                    fielded(
                        "metadata.namespace!=kube-public,metadata.namespace!=kube-system,spec.nodeName=foo",
                    ),
                ),
            ]))),
        },
        Case {
            name: "DefaultNamespace label selector doesn't get defaulted when set",
            input: Options {
                default_namespaces: ns(vec![(
                    "default",
                    Config {
                        label_selector: Some(LabelSelector::everything()),
                        ..Config::default()
                    },
                )]),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::DefaultNamespaces(ns(vec![(
                "default",
                Config {
                    label_selector: Some(LabelSelector::everything()),
                    ..Config::default()
                },
            )])),
        },
        Case {
            name: "Defaulted namespaces in ByObject contain ByObject's selector",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, labelled("from=pod"))],
                default_namespaces: ns(vec![("default", Config::default())]),
                ..Options::default()
            },
            expect: Expect::Whole(Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("default", labelled("from=pod"))])),
                    labelled("from=pod"),
                )],
                default_namespaces: ns(vec![("default", Config::default())]),
                ..Options::default()
            }),
        },
        // Not upstream table cases: behaviour of defaultOpts the table does not cover.
        Case {
            name: "A cluster-scoped kind with namespaces set is an error",
            input: Options {
                by_object: vec![node(Namespaces::All)],
                ..Options::default()
            },
            expect: Expect::Fails(OptionsError::NotNamespaced {
                gvk: GroupVersionKind::gvk("", "v1", "Node"),
            }),
        },
        Case {
            name: "A cluster-scoped kind ignores DefaultNamespaces and takes the global defaults",
            input: Options {
                by_object: vec![node(Namespaces::Inherit)],
                default_namespaces: ns(vec![("default", labelled("from=default-namespaces"))]),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(labelled("from=default-label-selector")),
        },
        Case {
            name: "A lone all-other-namespaces entry gets an everything field selector",
            input: Options {
                default_namespaces: ns(vec![("", Config::default())]),
                ..Options::default()
            },
            expect: Expect::DefaultNamespaces(ns(vec![(
                "",
                Config {
                    field_selector: Some(FieldSelector::everything()),
                    ..Config::default()
                },
            )])),
        },
        // Namespaces chosen by label (not upstream: controller-runtime has no selector).
        Case {
            name: "A by-object entry that inherits its namespaces inherits the selector",
            input: Options {
                by_object: vec![pod(Namespaces::Inherit, Config::default())],
                default_namespaces: ns(vec![("a", labelled("from=default-namespaces"))]),
                default_namespace_selector: label("team=shop"),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::Whole(Options {
                by_object: vec![ByObject {
                    namespace_selector: label("team=shop"),
                    ..pod(
                        Namespaces::Only(ns(vec![("a", labelled("from=default-namespaces"))])),
                        labelled("from=default-label-selector"),
                    )
                }],
                default_namespaces: ns(vec![("a", labelled("from=default-namespaces"))]),
                default_namespace_selector: label("team=shop"),
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            }),
        },
        Case {
            name: "A by-object selector replaces the default namespaces and selector",
            input: Options {
                by_object: vec![ByObject {
                    namespace_selector: label("team=web"),
                    ..pod(Namespaces::Inherit, labelled("from=by-object"))
                }],
                default_namespaces: ns(vec![("a", Config::default())]),
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            },
            expect: Expect::PodNamespaces(Namespaces::Only(BTreeMap::new())),
        },
        Case {
            name: "By-object namespaces without a selector do not inherit the default selector",
            input: Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("b", Config::default())])),
                    Config::default(),
                )],
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            },
            expect: Expect::Whole(Options {
                by_object: vec![pod(
                    Namespaces::Only(ns(vec![("b", Config::default())])),
                    Config::default(),
                )],
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            }),
        },
        Case {
            name: "The selected namespaces' settings are the entry's, defaulted from default_*",
            input: Options {
                by_object: vec![ByObject {
                    namespace_selector: label("team=web"),
                    ..pod(Namespaces::Inherit, fielded("from=by-object"))
                }],
                default_label_selector: label("from=default-label-selector"),
                ..Options::default()
            },
            expect: Expect::PodConfig(Config {
                label_selector: label("from=default-label-selector"),
                field_selector: field("from=by-object"),
                ..Config::default()
            }),
        },
        Case {
            name: "A default selector with the \"\" key is ambiguous",
            input: Options {
                default_namespaces: ns(vec![("", Config::default())]),
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            },
            expect: Expect::Fails(OptionsError::SelectorWithAllNamespaces { gvk: None }),
        },
        Case {
            name: "A by-object selector with namespaces: {} is ambiguous",
            input: Options {
                by_object: vec![ByObject {
                    namespace_selector: label("team=web"),
                    ..pod(Namespaces::All, Config::default())
                }],
                ..Options::default()
            },
            expect: Expect::Fails(OptionsError::SelectorWithAllNamespaces {
                gvk: Some(GroupVersionKind::gvk("", "v1", "Pod")),
            }),
        },
        Case {
            name: "A cluster-scoped kind with a namespace selector is an error",
            input: Options {
                by_object: vec![ByObject {
                    namespace_selector: label("team=web"),
                    ..node(Namespaces::Inherit)
                }],
                ..Options::default()
            },
            expect: Expect::Fails(OptionsError::NotNamespaced {
                gvk: GroupVersionKind::gvk("", "v1", "Node"),
            }),
        },
        Case {
            name: "A cluster-scoped kind does not inherit the default selector",
            input: Options {
                by_object: vec![node(Namespaces::Inherit)],
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            },
            expect: Expect::Whole(Options {
                by_object: vec![node(Namespaces::All)],
                default_namespace_selector: label("team=shop"),
                ..Options::default()
            }),
        },
    ]
}

#[test]
fn defaulting_matches_controller_runtime_for_every_case() {
    let mut failures = Vec::new();
    for case in cases() {
        let got = case.input.defaulted();
        let ok = match (&case.expect, &got) {
            (Expect::PodNamespaces(want), Ok(o)) => &o.by_object[0].namespaces == want,
            (Expect::PodConfig(want), Ok(o)) => &o.by_object[0].config == want,
            (Expect::DefaultNamespaces(want), Ok(o)) => &o.default_namespaces == want,
            (Expect::Whole(want), Ok(o)) => o == want,
            (Expect::Fails(want), Err(e)) => e == want,
            _ => false,
        };
        if !ok {
            failures.push(format!("{}: got {got:#?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_table_has_every_upstream_case() {
    assert!(cases().len() >= 22);
}

#[test]
fn cluster_scoped_kinds_are_known_from_k8s_openapi() {
    assert_eq!(node(Namespaces::Inherit).scope, Scope::Cluster);
    assert_eq!(
        pod(Namespaces::Inherit, Config::default()).scope,
        Scope::Namespaced
    );
}
