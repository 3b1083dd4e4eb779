//! Every way a `CacheConfig` can be wrong that validation catches, as data: each case is a
//! document and the EXACT errors (path and message) it must produce, no more, no fewer.

use informant::config::{Error, load_str};

/// A document under test: a spec body (wrapped in a valid envelope) or a whole document.
enum Doc {
    /// The line(s) under `spec:`, indented by two spaces.
    Spec(&'static str),
    /// The whole document.
    Full(&'static str),
}

struct Case {
    name: &'static str,
    doc: Doc,
    errors: &'static [(&'static str, &'static str)],
}

fn document(doc: &Doc) -> String {
    match doc {
        Doc::Spec(body) => format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec:\n  {body}\n"
        ),
        Doc::Full(text) => (*text).to_owned(),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "one table of data, one entry per invalid config"
)]
fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "unknown field with a close name gets a did-you-mean",
            doc: Doc::Spec("byObjects: []"),
            errors: &[(
                "spec.byObjects",
                "unknown field; did you mean \"byObject\"?",
            )],
        },
        Case {
            name: "unknown field without a close name lists the known fields",
            doc: Doc::Spec("cacheEverything: true"),
            errors: &[(
                "spec.cacheEverything",
                "unknown field; remove it (known fields: byObject, defaultEnableWatchBookmarks, defaultFieldSelector, defaultLabelSelector, defaultNamespaces, defaultTransform, defaultUnsafeDisableDeepCopy, namespaceSelector, readerFailOnMissingInformer, recorder, sharding, syncPeriod)",
            )],
        },
        Case {
            name: "sharding without a ring names what is missing",
            doc: Doc::Spec("sharding: {key: namespace}"),
            errors: &[(
                "spec.sharding.ring",
                "Required value: name the ring, e.g. `ring: shop`; the replicas whose Leases carry informant.dev/ring=<ring> share the objects",
            )],
        },
        Case {
            name: "a ring that is not a label value and an unknown key, both at once",
            doc: Doc::Spec("sharding: {ring: \"shop/eu\", key: uuid}"),
            errors: &[
                (
                    "spec.sharding.ring",
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'); the ring is the value of the label informant.dev/ring, e.g. `shop`",
                ),
                (
                    "spec.sharding.key",
                    "unknown key \"uuid\"; did you mean \"uid\"? use one of: namespace (every object of a namespace on one replica), uid (objects spread one by one)",
                ),
            ],
        },
        Case {
            name: "a ring that is a label value but cannot name the members' Leases",
            doc: Doc::Spec("sharding: {ring: Shop_EU}"),
            errors: &[(
                "spec.sharding.ring",
                "must consist of lowercase letters, digits and '-' (the ring names the members' Leases, <ring>-<16 hex digits>); e.g. `shop` or `shop-eu`",
            )],
        },
        Case {
            name: "unknown field in sharding",
            doc: Doc::Spec("sharding: {ring: shop, members: 3}"),
            errors: &[(
                "spec.sharding.members",
                "unknown field; remove it (known fields: key, ring)",
            )],
        },
        Case {
            name: "unknown nested field in a namespace config",
            doc: Doc::Spec("defaultNamespaces: {team-a: {labelSelecter: \"x\"}}"),
            errors: &[(
                "spec.defaultNamespaces[\"team-a\"].labelSelecter",
                "unknown field; did you mean \"labelSelector\"?",
            )],
        },
        Case {
            name: "unknown field in a by-object entry",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Pod, namespace: {a: {}}}]"),
            errors: &[(
                "spec.byObject[0].namespace",
                "unknown field; did you mean \"namespaces\"?",
            )],
        },
        Case {
            name: "unknown field in the recorder",
            doc: Doc::Spec("recorder: {correlator: {spamKeys: [reason]}}"),
            errors: &[(
                "spec.recorder.correlator.spamKeys",
                "unknown field; remove it (known fields: burst, lruCacheSize, maxEvents, maxIntervalSeconds, qps, spamKeyFields)",
            )],
        },
        Case {
            name: "a number where a duration string is expected",
            doc: Doc::Spec("syncPeriod: 10"),
            errors: &[(
                "spec.syncPeriod",
                "must be a string, found the number 10; quote the value",
            )],
        },
        Case {
            name: "a quoted number where an integer is expected",
            doc: Doc::Spec("recorder: {correlator: {burst: \"25\"}}"),
            errors: &[(
                "spec.recorder.correlator.burst",
                "must be a whole number, found the string \"25\"; write the number without quotes",
            )],
        },
        Case {
            name: "a string where a boolean is expected",
            doc: Doc::Spec("readerFailOnMissingInformer: \"yes\""),
            errors: &[(
                "spec.readerFailOnMissingInformer",
                "must be true or false, found the string \"yes\"; write true or false without quotes",
            )],
        },
        Case {
            name: "a mapping where a list is expected",
            doc: Doc::Spec("byObject: {apiVersion: v1, kind: Pod}"),
            errors: &[(
                "spec.byObject",
                "must be a list, found a mapping; write a list such as [a, b] or one `- item` per line",
            )],
        },
        Case {
            name: "a fraction where an integer is expected",
            doc: Doc::Spec("recorder: {sink: {maxRetries: 1.5}}"),
            errors: &[(
                "spec.recorder.sink.maxRetries",
                "must be a whole number, found the number 1.5; write a whole number such as 25",
            )],
        },
        Case {
            name: "a list item of the wrong type",
            doc: Doc::Spec("byObject: [\"Pod\"]"),
            errors: &[(
                "spec.byObject[0]",
                "must be a mapping, found the string \"Pod\"; write `key: value` pairs, or {} for the defaults",
            )],
        },
        Case {
            name: "a duration without a unit",
            doc: Doc::Spec("syncPeriod: \"10\""),
            errors: &[(
                "spec.syncPeriod",
                "missing unit in duration \"10\"; write a Go duration such as 10h, 30m, 90s or 1h30m",
            )],
        },
        Case {
            name: "a duration with an unknown unit",
            doc: Doc::Spec("syncPeriod: 10d"),
            errors: &[(
                "spec.syncPeriod",
                "unknown unit \"d\" in duration \"10d\"; write a Go duration such as 10h, 30m, 90s or 1h30m",
            )],
        },
        Case {
            name: "a negative duration",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Pod, syncPeriod: -1h}]"),
            errors: &[(
                "spec.byObject[0].syncPeriod",
                "negative or signed duration \"-1h\"; write a Go duration such as 10h, 30m, 90s or 1h30m",
            )],
        },
        Case {
            name: "an invalid namespace name",
            doc: Doc::Spec("defaultNamespaces: {Team_A: {}}"),
            errors: &[(
                "spec.defaultNamespaces[\"Team_A\"]",
                "invalid namespace name \"Team_A\": must consist of lowercase letters, digits and '-'; use the namespace's name as `kubectl get namespaces` shows it, or \"\" for all other namespaces",
            )],
        },
        Case {
            name: "a namespace name that is too long",
            doc: Doc::Spec(
                "defaultNamespaces: {aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: {}}",
            ),
            errors: &[(
                "spec.defaultNamespaces[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]",
                "invalid namespace name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": must be 63 characters or less; use the namespace's name as `kubectl get namespaces` shows it, or \"\" for all other namespaces",
            )],
        },
        Case {
            name: "an invalid namespace name in a by-object entry",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Pod, namespaces: {-team: {}}}]"),
            errors: &[(
                "spec.byObject[0].namespaces[\"-team\"]",
                "invalid namespace name \"-team\": must start and end with a letter or digit; use the namespace's name as `kubectl get namespaces` shows it, or \"\" for all other namespaces",
            )],
        },
        Case {
            name: "a bad label selector",
            doc: Doc::Spec("defaultLabelSelector: \"tier=web,=x\""),
            errors: &[(
                "spec.defaultLabelSelector",
                "unexpected \"=\" at position 9, expected a label key or \"!\" after \",\"; write requirements such as app=web, tier!=db, env in (a,b), !legacy, separated by commas",
            )],
        },
        Case {
            name: "a bad label selector, pointing at the offending character",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: ConfigMap, labelSelector: \"app in =x\"}]",
            ),
            errors: &[(
                "spec.byObject[2].labelSelector",
                "unexpected \"=\" at position 7, expected \"(\"; write requirements such as app=web, tier!=db, env in (a,b), !legacy, separated by commas",
            )],
        },
        Case {
            name: "a bad field selector",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod, fieldSelector: \"spec.nodeName\"}]",
            ),
            errors: &[(
                "spec.byObject[0].fieldSelector",
                "invalid field selector term \"spec.nodeName\" at position 0: it has no operator (\"=\", \"==\" or \"!=\"); write terms such as status.phase=Running or metadata.name!=x, separated by commas",
            )],
        },
        Case {
            name: "a bad field selector in a namespace config",
            doc: Doc::Spec("defaultNamespaces: {team-a: {fieldSelector: 'a=b\\x'}}"),
            errors: &[(
                "spec.defaultNamespaces[\"team-a\"].fieldSelector",
                "invalid escape sequence \"\\x\" at position 3: a field value may only escape \"\\\", \",\" and \"=\" with a backslash; write terms such as status.phase=Running or metadata.name!=x, separated by commas",
            )],
        },
        Case {
            name: "a by-object entry without apiVersion",
            doc: Doc::Spec("byObject: [{kind: Pod}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "required; set the kind's API version, e.g. v1 or apps/v1",
            )],
        },
        Case {
            name: "a by-object entry without kind",
            doc: Doc::Spec("byObject: [{apiVersion: v1}]"),
            errors: &[("spec.byObject[0].kind", "required; set the kind, e.g. Pod")],
        },
        Case {
            name: "an apiVersion with two slashes",
            doc: Doc::Spec("byObject: [{apiVersion: apps/v1/beta, kind: Deployment}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "invalid API version \"apps/v1/beta\": it has more than one \"/\"; write <version> for the core group (v1) or <group>/<version> (apps/v1)",
            )],
        },
        Case {
            name: "an apiVersion with an invalid group",
            doc: Doc::Spec("byObject: [{apiVersion: Apps/v1, kind: Deployment}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "invalid API version \"Apps/v1\": the group \"Apps\" must consist of lowercase letters, digits and '-'; write <version> for the core group (v1) or <group>/<version> (apps/v1)",
            )],
        },
        Case {
            name: "an apiVersion with an invalid version",
            doc: Doc::Spec("byObject: [{apiVersion: apps/1, kind: Deployment}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "invalid API version \"apps/1\": the version \"1\" must start with \"v\", as v1 or v1beta1; write <version> for the core group (v1) or <group>/<version> (apps/v1)",
            )],
        },
        Case {
            name: "an unknown built-in kind",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Pods}]"),
            errors: &[(
                "spec.byObject[0].kind",
                "unknown kind \"Pods\" in API version v1; did you mean \"Pod\"?",
            )],
        },
        Case {
            name: "a lowercase kind",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: pod}]"),
            errors: &[(
                "spec.byObject[0].kind",
                "invalid kind \"pod\": a kind is a CamelCase name of letters and digits; did you mean \"Pod\"?",
            )],
        },
        Case {
            name: "a built-in kind at a version that is not served",
            doc: Doc::Spec("byObject: [{apiVersion: apps/v1beta1, kind: Deployment}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "Deployment is not served as apps/v1beta1; set apiVersion to apps/v1",
            )],
        },
        Case {
            name: "a built-in kind in the wrong group",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Deployment}]"),
            errors: &[(
                "spec.byObject[0].apiVersion",
                "Deployment is not served as v1; set apiVersion to apps/v1",
            )],
        },
        Case {
            name: "a duplicate by-object kind",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Secret}, {apiVersion: v1, kind: Pod, labelSelector: \"a=b\"}]",
            ),
            errors: &[(
                "spec.byObject[2]",
                "duplicate entry for v1 Pod (first at spec.byObject[0]); merge the two entries",
            )],
        },
        Case {
            name: "namespaces on a cluster-scoped kind",
            doc: Doc::Spec("byObject: [{apiVersion: v1, kind: Node, namespaces: {team-a: {}}}]"),
            errors: &[(
                "spec.byObject[0].namespaces",
                "type \"Node\" is not namespaced, but its namespaces setting is not nil; remove spec.byObject[0].namespaces",
            )],
        },
        Case {
            name: "an empty namespaces map on a cluster-scoped kind",
            doc: Doc::Spec(
                "byObject: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, namespaces: {}}]",
            ),
            errors: &[(
                "spec.byObject[0].namespaces",
                "type \"ClusterRole\" is not namespaced, but its namespaces setting is not nil; remove spec.byObject[0].namespaces",
            )],
        },
        Case {
            name: "qps of zero",
            doc: Doc::Spec("recorder: {correlator: {qps: 0}}"),
            errors: &[(
                "spec.recorder.correlator.qps",
                "must be greater than 0, found 0; set a positive rate such as 0.01 (one event per 100 s), or remove it to use the default 1/300",
            )],
        },
        Case {
            name: "negative qps",
            doc: Doc::Spec("recorder: {correlator: {qps: -0.5}}"),
            errors: &[(
                "spec.recorder.correlator.qps",
                "must be greater than 0, found -0.5; set a positive rate such as 0.01 (one event per 100 s), or remove it to use the default 1/300",
            )],
        },
        Case {
            name: "burst of zero",
            doc: Doc::Spec("recorder: {correlator: {burst: 0}}"),
            errors: &[(
                "spec.recorder.correlator.burst",
                "must be at least 1, found 0; set it to 1 or more, or remove it to use the default",
            )],
        },
        Case {
            name: "lruCacheSize of zero",
            doc: Doc::Spec("recorder: {correlator: {lruCacheSize: 0}}"),
            errors: &[(
                "spec.recorder.correlator.lruCacheSize",
                "must be at least 1, found 0; set it to 1 or more, or remove it to use the default",
            )],
        },
        Case {
            name: "maxEvents of zero",
            doc: Doc::Spec("recorder: {correlator: {maxEvents: 0}}"),
            errors: &[(
                "spec.recorder.correlator.maxEvents",
                "must be at least 1, found 0; set it to 1 or more, or remove it to use the default",
            )],
        },
        Case {
            name: "a negative queue length",
            doc: Doc::Spec("recorder: {incomingQueueLength: -1}"),
            errors: &[(
                "spec.recorder.incomingQueueLength",
                "must be at least 1, found -1; set it to 1 or more, or remove it to use the default",
            )],
        },
        Case {
            name: "a burst beyond 32 bits",
            doc: Doc::Spec("recorder: {correlator: {burst: 5000000000}}"),
            errors: &[(
                "spec.recorder.correlator.burst",
                "must be at most 4294967295, found 5000000000; use a smaller value",
            )],
        },
        Case {
            name: "an unknown spam key field",
            doc: Doc::Spec("recorder: {correlator: {spamKeyFields: [source, involvedobject]}}"),
            errors: &[(
                "spec.recorder.correlator.spamKeyFields[1]",
                "unknown spam key field \"involvedobject\"; did you mean \"involvedObject\"? use one of: source, involvedObject, type, reason, message",
            )],
        },
        Case {
            name: "a spam key field listed twice",
            doc: Doc::Spec("recorder: {correlator: {spamKeyFields: [source, reason, reason]}}"),
            errors: &[(
                "spec.recorder.correlator.spamKeyFields[2]",
                "\"reason\" is listed twice; remove the duplicate",
            )],
        },
        Case {
            name: "an empty spam key",
            doc: Doc::Spec("recorder: {correlator: {spamKeyFields: []}}"),
            errors: &[(
                "spec.recorder.correlator.spamKeyFields",
                "must list at least one field (an empty key makes every event share one bucket); remove it to use the default [source, involvedObject, type]",
            )],
        },
        Case {
            name: "an empty component",
            doc: Doc::Spec("recorder: {component: \"\"}"),
            errors: &[(
                "spec.recorder.component",
                "must not be empty; name the controller that records events, or remove it to use the default \"informant\"",
            )],
        },
        Case {
            name: "a bad retry interval",
            doc: Doc::Spec("recorder: {sink: {retryInterval: soon}}"),
            errors: &[(
                "spec.recorder.sink.retryInterval",
                "invalid number in duration \"soon\"; write a Go duration such as 10h, 30m, 90s or 1h30m",
            )],
        },
        Case {
            name: "an invalid label key to drop",
            doc: Doc::Spec("defaultTransform: {dropLabels: [\"-bad\"]}"),
            errors: &[(
                "spec.defaultTransform.dropLabels[0]",
                "invalid label key \"-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character; write the label key exactly as in metadata.labels",
            )],
        },
        Case {
            name: "an invalid annotation key to drop",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod, transform: {dropAnnotations: [\"a/b/c\"]}}]",
            ),
            errors: &[(
                "spec.byObject[0].transform.dropAnnotations[0]",
                "invalid annotation key \"a/b/c\": a label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName'); write the annotation key exactly as in metadata.annotations",
            )],
        },
        Case {
            name: "bad field projections, every one at once",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod, transform: {keepFields: [\"spec.containers[0]\", \"metadata.nope\", \"status.phase\"], dropFields: [\"metadata.labels\", \"spec.\", \"kind\"]}}]",
            ),
            errors: &[
                (
                    "spec.byObject[0].transform.keepFields[0]",
                    "\"spec.containers[0]\": at character 17: expected '*' or '\"key\"' after '['",
                ),
                (
                    "spec.byObject[0].transform.keepFields[1]",
                    "\"metadata.nope\": metadata has no field \"nope\" (its fields: annotations, creationTimestamp, deletionGracePeriodSeconds, deletionTimestamp, finalizers, generateName, generation, labels, managedFields, name, namespace, ownerReferences, resourceVersion, selfLink, uid)",
                ),
                (
                    "spec.byObject[0].transform.dropFields[0]",
                    "\"metadata.labels\": metadata.labels is always kept (the cache needs name, namespace, uid, resourceVersion, labels, ownerReferences, deletionTimestamp, finalizers, generation)",
                ),
                (
                    "spec.byObject[0].transform.dropFields[1]",
                    "\"spec.\": at character 6: expected a field name after '.'",
                ),
                (
                    "spec.byObject[0].transform.dropFields[2]",
                    "\"kind\": kind is always kept",
                ),
            ],
        },
        Case {
            name: "a misspelled metadata field",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c, namepsace: ops}\nspec: {}",
            ),
            errors: &[(
                "metadata.namepsace",
                "unknown field; did you mean \"namespace\"?",
            )],
        },
        Case {
            name: "numbers in a list of keys",
            doc: Doc::Spec("defaultTransform: {dropLabels: [1, \"-x\"]}"),
            errors: &[
                (
                    "spec.defaultTransform.dropLabels[0]",
                    "must be a string, found the number 1; quote the value",
                ),
                (
                    "spec.defaultTransform.dropLabels[1]",
                    "invalid label key \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character; write the label key exactly as in metadata.labels",
                ),
            ],
        },
        Case {
            name: "a wrong apiVersion",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}",
            ),
            errors: &[(
                "apiVersion",
                "unsupported \"informant.dev/v1\"; set it to informant.dev/v1alpha1",
            )],
        },
        Case {
            name: "a wrong kind",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfigs\nmetadata: {name: c}\nspec: {}",
            ),
            errors: &[(
                "kind",
                "unsupported \"CacheConfigs\"; set it to CacheConfig",
            )],
        },
        Case {
            name: "a missing apiVersion and kind",
            doc: Doc::Full("metadata: {name: c}\nspec: {}"),
            errors: &[
                ("apiVersion", "required; set it to informant.dev/v1alpha1"),
                ("kind", "required; set it to CacheConfig"),
            ],
        },
        Case {
            name: "a missing spec",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}",
            ),
            errors: &[("spec", "required; add `spec: {}` to use every default")],
        },
        Case {
            name: "a missing name",
            doc: Doc::Full("apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nspec: {}"),
            errors: &[(
                "metadata.name",
                "required; name the CacheConfig, e.g. `name: default`",
            )],
        },
        Case {
            name: "an invalid name",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: My Config}\nspec: {}",
            ),
            errors: &[(
                "metadata.name",
                "invalid name \"My Config\": must consist of lowercase letters, digits and '-'; use lowercase letters, digits, '-' and '.'",
            )],
        },
        Case {
            name: "a misspelled top-level field",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nsepc: {}",
            ),
            errors: &[
                ("sepc", "unknown field; did you mean \"spec\"?"),
                ("spec", "required; add `spec: {}` to use every default"),
            ],
        },
        Case {
            name: "an empty document",
            doc: Doc::Full(""),
            errors: &[(
                "<document>",
                "empty document; write a CacheConfig with apiVersion, kind, metadata and spec",
            )],
        },
        Case {
            name: "a document that is a list",
            doc: Doc::Full("- a\n- b"),
            errors: &[(
                "<document>",
                "must be a mapping; write a CacheConfig with apiVersion, kind, metadata and spec",
            )],
        },
        Case {
            name: "a metadata field of the wrong type",
            doc: Doc::Full(
                "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c, labels: [a]}\nspec: {}",
            ),
            errors: &[(
                "metadata",
                "invalid type: sequence, expected a map; fix the metadata",
            )],
        },
        Case {
            name: "an unknown events API names both",
            doc: Doc::Spec("recorder: {api: events/v1}"),
            errors: &[(
                "spec.recorder.api",
                "unknown events API \"events/v1\"; use \"v1\" (core/v1 Events, the default) or \"events.k8s.io/v1\"",
            )],
        },
        Case {
            name: "correlator knobs with events.k8s.io/v1 are refused with the fix",
            doc: Doc::Spec("recorder: {api: events.k8s.io/v1, correlator: {burst: 50}}"),
            errors: &[(
                "spec.recorder.correlator",
                "has no meaning with api events.k8s.io/v1 (client-go tools/events neither aggregates nor spam-filters; its series fold repeats instead); remove it and tune series instead, or set api: v1",
            )],
        },
        Case {
            name: "series with the default core/v1 API is refused with the fix",
            doc: Doc::Spec("recorder: {series: {refresh: 10m}}"),
            errors: &[(
                "spec.recorder.series",
                "has no meaning with the default api v1 (core/v1 Events are deduplicated by the correlator); set api: events.k8s.io/v1, or remove it",
            )],
        },
        Case {
            name: "series with api v1 is refused with the fix",
            doc: Doc::Spec("recorder: {api: v1, series: {finish: 2m}}"),
            errors: &[(
                "spec.recorder.series",
                "has no meaning with api v1 (core/v1 Events are deduplicated by the correlator); remove it, or set api: events.k8s.io/v1",
            )],
        },
        Case {
            name: "every series mistake at once: unknown and duplicate key fields, zero and bad periods",
            doc: Doc::Spec(
                "recorder: {api: events.k8s.io/v1, series: {keyFields: [reason, Note, reason], refresh: 0s, finish: six minutes}}",
            ),
            errors: &[
                (
                    "spec.recorder.series.refresh",
                    "must be longer than 0; use a duration such as \"30m\", or remove it to use the default",
                ),
                (
                    "spec.recorder.series.finish",
                    "invalid number in duration \"six minutes\"; write a Go duration such as 10h, 30m, 90s or 1h30m",
                ),
                (
                    "spec.recorder.series.keyFields[1]",
                    "unknown series key field \"Note\"; did you mean \"note\"? use one of: type, action, reason, reportingController, reportingInstance, regarding, related, note",
                ),
                (
                    "spec.recorder.series.keyFields[2]",
                    "\"reason\" is listed twice; remove the duplicate",
                ),
            ],
        },
        Case {
            name: "an empty series key",
            doc: Doc::Spec("recorder: {api: events.k8s.io/v1, series: {keyFields: []}}"),
            errors: &[(
                "spec.recorder.series.keyFields",
                "must list at least one field (an empty key folds every event into one series); remove it to use client-go's key",
            )],
        },
        Case {
            name: "a namespace selector that does not parse",
            doc: Doc::Spec("namespaceSelector: \"team in (shop\""),
            errors: &[(
                "spec.namespaceSelector",
                "unexpected end of input at position 13, expected \",\" or \")\"; write requirements such as app=web, tier!=db, env in (a,b), !legacy, separated by commas",
            )],
        },
        Case {
            name: "a namespace selector that selects every namespace",
            doc: Doc::Spec("namespaceSelector: \"\""),
            errors: &[(
                "spec.namespaceSelector",
                "selects every namespace; write requirements such as team=shop to choose namespaces by label, or remove it to cache every namespace",
            )],
        },
        Case {
            name: "a namespace selector beside the \"\" entry is ambiguous",
            doc: Doc::Spec("namespaceSelector: team=shop\n  defaultNamespaces: {\"\": {}, a: {}}"),
            errors: &[(
                "spec.defaultNamespaces[\"\"]",
                "the \"\" entry (every namespace not listed) contradicts spec.namespaceSelector, which chooses the namespaces not listed by label; remove this entry to cache only the namespaces the selector matches, or remove spec.namespaceSelector to cache every namespace",
            )],
        },
        Case {
            name: "a namespace selector on a cluster-scoped kind",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Node, namespaceSelector: team=shop}]",
            ),
            errors: &[(
                "spec.byObject[0].namespaceSelector",
                "type \"Node\" is not namespaced, so it cannot be cached by namespace; remove spec.byObject[0].namespaceSelector",
            )],
        },
        Case {
            name: "a by-object namespace selector beside namespaces: {} is ambiguous",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod, namespaces: {}, namespaceSelector: team=shop}]",
            ),
            errors: &[(
                "spec.byObject[0].namespaces",
                "{} means every namespace, which contradicts spec.byObject[0].namespaceSelector; remove spec.byObject[0].namespaces to cache only the namespaces the selector matches, or remove spec.byObject[0].namespaceSelector to cache every namespace",
            )],
        },
        Case {
            name: "a by-object namespace selector beside its \"\" key is ambiguous",
            doc: Doc::Spec(
                "byObject: [{apiVersion: v1, kind: Pod, namespaces: {\"\": {}}, namespaceSelector: \"team notin (a\"}]",
            ),
            errors: &[
                (
                    "spec.byObject[0].namespaceSelector",
                    "unexpected end of input at position 13, expected \",\" or \")\"; write requirements such as app=web, tier!=db, env in (a,b), !legacy, separated by commas",
                ),
                (
                    "spec.byObject[0].namespaces[\"\"]",
                    "the \"\" entry (every namespace not listed) contradicts spec.byObject[0].namespaceSelector, which chooses the namespaces not listed by label; remove this entry to cache only the namespaces the selector matches, or remove spec.byObject[0].namespaceSelector to cache every namespace",
                ),
            ],
        },
    ]
}

#[test]
fn every_invalid_config_reports_exactly_its_errors() {
    let mut failures = Vec::new();
    for case in cases() {
        let got: Vec<(String, String)> = match load_str(&document(&case.doc)) {
            Ok(_) => vec![("<valid>".to_owned(), String::new())],
            Err(Error::Invalid { errors, .. }) => errors
                .iter()
                .map(|e| (e.path.to_string(), e.message.clone()))
                .collect(),
            Err(other) => vec![("<other error>".to_owned(), other.to_string())],
        };
        let want: Vec<(String, String)> = case
            .errors
            .iter()
            .map(|(p, m)| ((*p).to_owned(), (*m).to_owned()))
            .collect();
        if got != want {
            failures.push(format!("{}:\n  want {want:#?}\n  got  {got:#?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_table_has_at_least_twenty_five_distinct_invalid_configs() {
    let cases = cases();
    let mut docs: Vec<String> = cases.iter().map(|c| document(&c.doc)).collect();
    docs.sort();
    docs.dedup();
    assert!(
        docs.len() >= 25 && docs.len() == cases.len(),
        "{} distinct documents",
        docs.len()
    );
}
