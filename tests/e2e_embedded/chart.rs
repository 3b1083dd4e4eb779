//! The chart as the RBAC scenario ([`crate::chart_rbac`]) deploys it: rendered by Helm's own
//! engine (helm-python-sdk, as `charts/informant/tests/test_chart.py` renders it) for four
//! [`Case`]s of values, the permissions its `Role`s and `ClusterRole` grant ([`grants`]), the
//! objects without one of them ([`without`]), and which refusal that one would have prevented.

use std::path::{Path, PathBuf};

use informant::apiserver::Refusal;
use informant::config::access::Permission;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

pub const RELEASE: &str = "informant";
pub const NAMESPACE: &str = "informant-system";
pub const SHOP: &str = "shop";
/// A cluster-scoped parent of the namespaced case's second Controller.
pub const PARENT_NAMESPACE: &str = "parent-ns";
pub const ACCOUNT: &str = "system:serviceaccount:informant-system:informant";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python that has helm-python-sdk: `INFORMANT_PYTHON`, else `target/tools`' (where
/// `scripts/test` installs it). Fails the test, saying how to get it, when there is none.
pub fn python() -> PathBuf {
    let python = std::env::var_os("INFORMANT_PYTHON").map_or_else(
        || root().join("target/tools/venv/bin/python"),
        PathBuf::from,
    );
    let found = std::process::Command::new(&python)
        .args(["-c", "import helm_python, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{} cannot import helm_python: run scripts/test (it installs helm-python-sdk into \
         target/tools), or set INFORMANT_PYTHON to a Python that has it",
        python.display()
    );
    python
}

/// The chart rendered with `values` by Helm's engine: every manifest, `NOTES.txt` apart.
pub fn render(python: &Path, values: &Value) -> Vec<Value> {
    let script = "import json, sys, yaml, helm_python as helm\n\
        with helm.Chart.load(sys.argv[1]) as chart:\n\
        \x20   files = chart.render(json.loads(sys.argv[2]), name=sys.argv[3], namespace=sys.argv[4])\n\
        docs = [d for p, t in sorted(files.items()) if not p.endswith('NOTES.txt') for d in yaml.safe_load_all(t) if d]\n\
        json.dump(docs, sys.stdout)\n";
    let out = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &root().join("charts/informant").display().to_string(),
            &values.to_string(),
            RELEASE,
            NAMESPACE,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rendering the chart failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Four deployments of the chart that together render every kind of rule it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Secrets cached in every namespace: the `ClusterRole` reads them and records core Events
    /// everywhere; `ConfigMap`s read in `shop` by a `Role`; the hook's writes as extra rules.
    ClusterWide,
    /// Everything namespaced but `Namespace`s (a `ClusterRole` for them alone), Events of
    /// `events.k8s.io` in each namespace's `Role` and in `default` (Events about cluster-scoped
    /// objects go there), Secrets read by the default cache at run time (`rbac.extraKinds`).
    Namespaced,
    /// [`Case::Namespaced`] with core Events, sharded by namespace (`sharding.enabled`): the
    /// member Leases in the release's `Role`, `Namespace`s watched through the `ClusterRole`,
    /// the replica's identity from its pod's name.
    Sharded,
    /// `ConfigMap`s and Secrets read in `shop` by a `Role`, serving admission hooks
    /// (`webhook.enabled`, managed certificates, a CRD in `injectCRDs`): the webhook configurations the manager owns in the
    /// `ClusterRole` (by name but `create`), the CRD it injects, the certificates' Secret in
    /// the release's `Role`; the `parents` Controller declares a validating and a mutating
    /// hook.
    Webhook,
}

/// The webhook Service the chart renders (`<release>-webhook`): the name of the webhook
/// configurations the manager owns, and the stem of its certificates' Secret.
pub const WEBHOOK_SERVICE: &str = "informant-webhook";

/// The CRD whose conversion webhook's `caBundle` the manager writes in [`Case::Webhook`].
pub const INJECTED_CRD: &str = "carts.shop.example.com";

/// What the validating hook answers a Secret labelled `deny: "true"`.
pub const DENIAL: &str = "denied by the chart's admission hook";

/// The pod name the Deployment's downward API would give the manager (its shard identity).
pub const POD_NAME: &str = "informant-6d4cf9b7c8-x2v9q";

impl Case {
    /// The chart's values, metrics, health and the webhook endpoint on `ports`, with `extra`
    /// rules added to `rbac.extraRules`.
    pub fn values(self, ports: (u16, u16, u16), extra: &[Value], python: &Path) -> Value {
        let writes = [
            // The hook's children, applied with server-side apply.
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}),
            // The Controller's finalizer on its objects (finalize: true).
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"]}),
        ];
        let mut values = match self {
            // Secrets read in `shop` alone: cached cluster-wide, the ClusterRole's `list` and
            // `watch` on every Secret would cover the watch of the certificates' Secret.
            Self::Webhook => json!({
                "cacheConfig": {"spec": {
                    "defaultNamespaces": {SHOP: {}},
                    "byObject": [
                        {"apiVersion": "v1", "kind": "ConfigMap"},
                        {"apiVersion": "v1", "kind": "Secret"},
                    ],
                }},
                "rbac": {"extraRules": writes},
            }),
            Self::ClusterWide => json!({
                "cacheConfig": {"spec": {
                    "defaultNamespaces": {SHOP: {}},
                    "byObject": [
                        {"apiVersion": "v1", "kind": "ConfigMap"},
                        {"apiVersion": "v1", "kind": "Secret", "namespaces": {}},
                    ],
                }},
                "rbac": {"extraRules": writes},
            }),
            Self::Namespaced => json!({
                "cacheConfig": {"spec": {
                    "defaultNamespaces": {SHOP: {}},
                    "byObject": [
                        {"apiVersion": "v1", "kind": "ConfigMap"},
                        {"apiVersion": "v1", "kind": "Namespace", "labelSelector": "app=parent"},
                    ],
                    // A shorter retry than client-go's 10 s: the series engine's first
                    // write of a key can race its own create and retry.
                    "recorder": {"api": "events.k8s.io/v1", "sink": {"retryInterval": "1s"}},
                }},
                "rbac": {
                    "extraKinds": [{"apiVersion": "v1", "kind": "Secret"}],
                    "extraRules": writes,
                },
            }),
            Self::Sharded => json!({
                "replicaCount": 2,
                "sharding": {"enabled": true},
                "cacheConfig": {"spec": {
                    "defaultNamespaces": {SHOP: {}},
                    "byObject": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                }},
                "rbac": {
                    "extraKinds": [{"apiVersion": "v1", "kind": "Secret"}],
                    "extraRules": writes,
                },
            }),
        };
        // The chart's hook policy is restricted: the hooks run `python hook` and the
        // `parents` Controller is for Secrets, so the values allow both, as a user's would.
        values["hooks"] =
            json!({"allowExec": [python.display().to_string()], "allowSecrets": true});
        values["metrics"] = json!({"port": ports.0});
        values["health"] = json!({"port": ports.1});
        if self == Self::Webhook {
            values["webhook"] =
                json!({"enabled": true, "port": ports.2, "injectCRDs": [INJECTED_CRD]});
        }
        if let Some(rules) = values["rbac"]["extraRules"].as_array_mut() {
            rules.extend(extra.iter().cloned());
        }
        values
    }

    /// The namespaces to create.
    pub fn namespaces(self) -> Vec<Value> {
        let mut names = vec![json!({"name": NAMESPACE}), json!({"name": SHOP})];
        if self == Self::Namespaced {
            names.push(json!({"name": PARENT_NAMESPACE, "labels": {"app": "parent"}}));
        }
        names
            .into_iter()
            .map(|metadata| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}))
            .collect()
    }

    /// The hook `Controller`s (running `python hook`) and the parent they reconcile.
    pub fn objects(self, python: &Path, hook: &Path) -> Vec<Value> {
        let exec = json!({"command": [python.display().to_string(), hook.display().to_string()],
                          "timeout": "10s"});
        let mut parents = json!({
            "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
            "metadata": {"name": "parents", "namespace": NAMESPACE},
            "spec": {
                "for": {"apiVersion": "v1", "kind": "Secret", "labelSelector": "app=parent"},
                "owns": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                "hook": {"exec": exec},
                "finalize": true,
            },
        });
        let mut crds = Vec::new();
        if self == Self::Webhook {
            // Both kinds of hook, so that both configurations exist: every Secret of the scope
            // is defaulted a label, one labelled deny=true refused.
            parents["spec"]["admission"] = json!([
                {"name": "deny-labelled", "type": "Validating", "timeoutSeconds": 10},
                {"name": "default-label", "type": "Mutating", "timeoutSeconds": 10},
            ]);
            crds.push(injected_crd());
        }
        let mut objects = vec![
            parents,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "p", "namespace": SHOP, "labels": {"app": "parent"}}}),
        ];
        if self == Self::Namespaced {
            objects.push(json!({
                "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
                "metadata": {"name": "namespaces", "namespace": NAMESPACE},
                "spec": {
                    "for": {"apiVersion": "v1", "kind": "Namespace", "labelSelector": "app=parent"},
                    "hook": {"exec": exec},
                },
            }));
        }
        objects.extend(crds);
        objects
    }
}

/// A CRD converted by the manager's webhook endpoint (`strategy: Webhook` through the chart's
/// webhook Service), whose `caBundle` the manager writes ([`INJECTED_CRD`]).
fn injected_crd() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": true}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": INJECTED_CRD},
        "spec": {
            "group": "shop.example.com",
            "names": {"kind": "Cart", "plural": "carts", "singular": "cart", "listKind": "CartList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": NAMESPACE, "name": WEBHOOK_SERVICE,
                                             "path": "/convert", "port": 443}},
            }},
        },
    })
}

/// The hook: for a Secret, one child `ConfigMap` and the Event `ChildApplied`; for a Namespace
/// the Event `NamespaceSeen`; each Event twice (the second is a deduplicated patch). Asked to
/// admit a Secret: the mutating hook labels it `defaulted: "true"`, the validating one denies
/// it when it is labelled `deny: "true"`.
pub const HOOK: &str = r#"import json, sys
request = json.load(sys.stdin)
if "admission" in request:
    obj = request["request"].get("object") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if request["admission"]["type"] == "Mutating":
        if labels.get("defaulted") == "true":
            print(json.dumps({"allowed": True}))
        else:
            obj["metadata"]["labels"] = dict(labels, defaulted="true")
            print(json.dumps({"allowed": True, "object": obj}))
    elif labels.get("deny") == "true":
        print(json.dumps({"allowed": False, "message": "denied by the chart's admission hook"}))
    else:
        print(json.dumps({"allowed": True}))
    sys.exit(0)
obj = request["object"]
name = obj["metadata"]["name"]
if request.get("finalizing"):
    print(json.dumps({"finalized": True}))
    sys.exit(0)
if obj["kind"] == "Namespace":
    event = {"type": "Normal", "reason": "NamespaceSeen", "message": "saw " + name}
    print(json.dumps({"events": [event, event]}))
    sys.exit(0)
event = {"type": "Normal", "reason": "ChildApplied", "message": "applied " + name + "-child"}
child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-child"},
         "data": {"parent": name}}
print(json.dumps({"children": [child], "events": [event, event]}))
"#;

/// One permission of a rendered `Role` or `ClusterRole` (namespace ""), with the object's name.
#[derive(Clone, Debug)]
pub struct Grant {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub permission: Permission,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} {}/{})",
            self.permission, self.kind, self.namespace, self.name
        )
    }
}

/// The account the scenario scrapes the secure `/metrics` with, as Prometheus would: bound to
/// the chart's `metrics-reader` `ClusterRole`.
pub const SCRAPER: &str = "prometheus";

/// The scraper's `ServiceAccount` and its binding to `<release>-metrics-reader`: what a user
/// adds for Prometheus (the chart binds the reader to no one).
pub fn scraper_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": SCRAPER, "namespace": NAMESPACE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": format!("{RELEASE}-metrics-reader-{SCRAPER}")},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": format!("{RELEASE}-metrics-reader")},
               "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": NAMESPACE}]}),
    ]
}

/// Whether a rendered binding binds the `Role` or `ClusterRole` `doc` to the manager's account
/// (the `metrics-reader` `ClusterRole` is bound to no one: it is the scrapers', not the
/// manager's).
fn bound_to_manager(docs: &[Value], doc: &Value) -> bool {
    let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
    docs.iter()
        .filter(|b| b["kind"] == "RoleBinding" || b["kind"] == "ClusterRoleBinding")
        .filter(|b| b["metadata"]["namespace"].as_str().unwrap_or_default() == namespace)
        .filter(|b| {
            b["roleRef"]["kind"] == doc["kind"] && b["roleRef"]["name"] == doc["metadata"]["name"]
        })
        .any(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                ACCOUNT
                    == format!(
                        "system:serviceaccount:{}:{}",
                        s["namespace"].as_str().unwrap_or_default(),
                        s["name"].as_str().unwrap_or_default()
                    )
            })
        })
}

/// Every permission of the rendered `Role`s and `ClusterRole`s bound to the manager's account,
/// one verb of one resource each.
pub fn grants(docs: &[Value]) -> Vec<Grant> {
    let mut out = Vec::new();
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
        .filter(|d| bound_to_manager(docs, d))
    {
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
        let rules: Vec<PolicyRule> = serde_json::from_value(doc["rules"].clone()).unwrap();
        let mut place = informant::config::rbac::Rules::default();
        if namespace.is_empty() {
            place.cluster = rules;
        } else {
            place.namespaces.insert(namespace.to_owned(), rules);
        }
        for permission in informant::config::access::permissions(&place) {
            out.push(Grant {
                kind: doc["kind"].as_str().unwrap().to_owned(),
                namespace: namespace.to_owned(),
                name: doc["metadata"]["name"].as_str().unwrap().to_owned(),
                permission,
            });
        }
    }
    out
}

/// The rendered documents with `removed` taken out of its `Role` or `ClusterRole` (whose
/// rules become one rule per remaining permission).
pub fn without(docs: &[Value], removed: &Grant) -> Vec<Value> {
    let all = grants(docs);
    docs.iter()
        .map(|doc| {
            let same = doc["kind"] == removed.kind.as_str()
                && doc["metadata"]["name"] == removed.name.as_str()
                && doc["metadata"]["namespace"].as_str().unwrap_or_default() == removed.namespace;
            if !same {
                return doc.clone();
            }
            let rules: Vec<Value> = all
                .iter()
                .filter(|g| {
                    g.kind == removed.kind
                        && g.namespace == removed.namespace
                        && g.permission != removed.permission
                })
                .map(|g| rule_of(&g.permission))
                .collect();
            let mut doc = doc.clone();
            doc["rules"] = Value::Array(rules);
            doc
        })
        .collect()
}

fn rule_of(p: &Permission) -> Value {
    let mut rule = match &p.url {
        Some(url) => json!({"nonResourceURLs": [url], "verbs": [p.verb]}),
        None => json!({"apiGroups": [p.group], "resources": [p.resource], "verbs": [p.verb]}),
    };
    if let Some(name) = &p.name {
        rule["resourceNames"] = json!([name]);
    }
    rule
}

/// Whether `refusal` is a request of the manager that `grant` would have allowed.
pub fn refused_by_absence_of(refusal: &Refusal, grant: &Grant) -> bool {
    let p = &grant.permission;
    let resource = if refusal.subresource.is_empty() {
        refusal.resource.clone()
    } else {
        format!("{}/{}", refusal.resource, refusal.subresource)
    };
    refusal.user == ACCOUNT
        && refusal.verb == p.verb
        && refusal.api_group == p.group
        && resource == p.resource
        && p.name.as_ref().is_none_or(|n| *n == refusal.name)
        && (grant.namespace.is_empty() || refusal.namespace == grant.namespace)
}
