//! Least-privilege RBAC derived from a validated `CacheConfig`: the rules `informant rbac`
//! prints and the Helm chart's RBAC template renders, so a permission the manager needs is a
//! test failure, not a 403 at run time.
//!
//! # What is derived, and from what
//!
//! - **Every kind the config caches** (`byObject`, and the `kinds` passed in, see below):
//!   `list` and `watch` (an informer's two verbs; reads are served from the cache, so no
//!   `get`). In a `Role` in each namespace the kind is cached in, or in the `ClusterRole`
//!   when it is cached cluster-wide: a cluster-scoped kind, `namespaces: {}`, a `""` key, or
//!   an inherited default scope that is cluster-wide.
//! - **Namespaces chosen by label** (`namespaceSelector`, at the spec or a `byObject` entry):
//!   the namespaces are not known until the manager runs and change while it does, so every
//!   kind cached by a selector is read from the `ClusterRole` (a `Role` per namespace cannot
//!   be written in advance), and `list`/`watch` on `namespaces` is added to it (the manager's
//!   one Namespace informer).
//! - **Custom kinds in `byObject`** (not built in: a `CustomResourceDefinition` serves them):
//!   `list`/`watch` on `apiextensions.k8s.io` `customresourcedefinitions`, cluster-wide: the
//!   manager watches the CRDs to start such a kind's informers when its CRD is established
//!   and stop them when it is deleted.
//! - **The default scope's kinds cannot be derived from the config**: the default cache starts
//!   an informer for any kind a controller reads, at run time. List those kinds in
//!   [`Options::kinds`] (`informant rbac --kind apps/v1/Deployment`, the chart's
//!   `rbac.extraKinds`): each gets `list`/`watch` in the default scope (`defaultNamespaces`, or
//!   cluster-wide when it is empty or has a `""` key; cluster-scoped kinds always cluster-wide).
//! - **Events**: `create` and `patch` on core `events` (the recorder's sink writes core v1
//!   Events, see [`crate::recorder::KubeSink`]; on `events` in `events.k8s.io` when
//!   `spec.recorder.api` is `events.k8s.io/v1`), wherever events may be recorded: about the
//!   `CacheConfig` (the manager's namespace) and about the objects the cache serves. That is
//!   cluster-wide when any namespaced kind is cached cluster-wide (the default scope included);
//!   otherwise each cached namespace, plus `default` when a cluster-scoped kind is cached
//!   (Events about cluster-scoped objects go there).
//! - **The `CacheConfig` itself**, in the manager's namespace: `get`, `list`, `watch` on
//!   `cacheconfigs` and `patch` on `cacheconfigs/status`, restricted to its name (the watch
//!   uses a `metadata.name` field selector, which is what RBAC requires of a `list`/`watch`
//!   restricted by `resourceNames`).
//! - **Hook `Controller`s** of the manager's namespace: `get`, `list`, `watch` and `patch` on
//!   `controllers` (`patch` adds and removes the finalizer
//!   `informant.dev/release-hook-finalizers` on a `Controller` with `finalize: true`) and
//!   `patch` on `controllers/status`. What their hooks write (children applied, the
//!   parent's status, finalizers) depends on the Controllers, not the `CacheConfig`: grant it
//!   with extra rules.
//! - **The Lease**, when leader election is on: `create` on `leases` (creation cannot be
//!   restricted by name) and `get`/`update` on the Lease by name
//!   (the manager's `LeaderElector`).
//! - **Sharding** (`spec.sharding`): the member Leases, in the manager's namespace: `get`,
//!   `list`, `create`, `update` and `delete` on `leases`, not restricted by name (each
//!   replica creates, renews and at shutdown deletes a Lease named after its identity, known
//!   only at run time, and lists the ring's Leases every retry period: it never watches them).
//!   The rule covers leader election's Lease too, so a sharded manager gets it instead of the
//!   two leader election rules. With `key: namespace`, also
//!   `list`/`watch` on `namespaces` in the `ClusterRole`: a member caches the namespaces it
//!   owns, which change as members come and go, so it follows the cluster's namespaces; the
//!   kinds it caches in all namespaces are read from the `ClusterRole` as without sharding
//!   (by a binding to the `ClusterRole`, which covers each namespace's informer). With
//!   `key: uid` the informers keep their verbs (`list` and `watch`, with a
//!   `shardSelector`).
//! - **Extra rules** ([`Options::extra_rules`], the chart's `rbac.extraRules`), appended in
//!   the default scope: to the `ClusterRole` when the default scope is cluster-wide, else to
//!   the `Role` of each default namespace.
//! - **Secure metrics** ([`Options::metrics_secure`], `informant run --metrics-secure`, the
//!   chart's `metrics.secure`): `create` on `tokenreviews` (`authentication.k8s.io`) and
//!   `subjectaccessreviews` (`authorization.k8s.io`) in the `ClusterRole` (reviews are
//!   cluster-scoped), which authenticate and authorize each request to `/metrics` and
//!   `/debug/*` ([`crate::serving::auth`]); and, bound to no one, the `ClusterRole`
//!   `<name>-metrics-reader` ([`Rules::metrics_reader`]: `get` on `/metrics`, kubebuilder's
//!   `metrics-reader`) to bind Prometheus's account to. `/debug/*` is left out of it on
//!   purpose: the cache tree and the config's status are for the people who run the
//!   operator, granted `get` on `/debug/*` by a role of their own.
//! - **The webhook endpoint** ([`Options::webhook`], `informant run --webhook-service`, the
//!   chart's `webhook.enabled`), in the `ClusterRole` (webhook configurations and CRDs are
//!   cluster-scoped): `create` on `validatingwebhookconfigurations` and
//!   `mutatingwebhookconfigurations` (`admissionregistration.k8s.io`; creation cannot be
//!   restricted by name), `get`, `update` and `delete` on the two the manager owns, by name.
//!   With managed certificates ([`Certificates::Managed`]), also `get`/`update` on the other
//!   configurations and `get`/`patch` on the CRDs whose `caBundle` it writes
//!   (`--webhook-inject`), by name, and in a `Role` of the Service's namespace `create` on
//!   `secrets` and `get`, `list`, `watch`, `update` on the certificates' Secret, by name
//!   (every replica watches it with a `metadata.name` field selector). A mounted certificate
//!   (cert-manager's) needs no Secret rights: the kubelet mounts it and cert-manager's
//!   cainjector writes the bundles.
//!
//! Kinds are resolved offline: plural and scope from the built-in table ([`crate::kinds`]);
//! other kinds (custom resources) are taken as namespaced with kube's guessed plural, as
//! [`crate::cache::BuiltinKinds`] does. A cluster-scoped custom resource therefore needs an
//! extra rule.
//!
//! ```
//! use informant::config::{load_str, rbac};
//!
//! let config = load_str(
//!     "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\n\
//!      spec: {defaultNamespaces: {shop: {}}, byObject: [{apiVersion: v1, kind: Pod}]}\n",
//! )?;
//! let rules = rbac::Rules::derive(&config, &rbac::Options::new("informant-system"));
//! assert!(rules.cluster.is_empty());
//! assert_eq!(rules.namespaces["shop"][0].resources, Some(vec!["pods".to_owned()]));
//! # Ok::<(), informant::config::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;
use serde::Serialize;

use super::load::Validated;
use crate::cache::{self, BuiltinKinds, NamespaceKey, Namespaces};
use crate::recorder::Api;
use crate::selector::ShardKey;

mod webhook;
pub use webhook::{Certificates, InjectNames, NOTE_WEBHOOK, Webhook};

/// The API group of `cacheconfigs`.
const GROUP: &str = "informant.dev";
/// The API group of `customresourcedefinitions`.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The API group of `leases`.
const LEASE_GROUP: &str = "coordination.k8s.io";
/// The namespace Events about cluster-scoped objects are recorded in (client-go
/// `tools/record/event.go` `makeEvent`: `metav1.NamespaceDefault` when the object has none).
const EVENTS_NAMESPACE_OF_CLUSTER_OBJECTS: &str = "default";
/// The API group of RBAC objects.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// How the manager is deployed: what the config alone does not say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// The manager's namespace: the `CacheConfig`'s and the Lease's.
    pub namespace: String,
    /// The Lease's name when leader election is on; `None`: no Lease rights.
    pub lease: Option<String>,
    /// Kinds the default cache serves at run time (read lazily by controllers), which the
    /// config does not list.
    pub kinds: Vec<GroupVersionKind>,
    /// Rules added as they are, in the default scope.
    pub extra_rules: Vec<PolicyRule>,
    /// The manager serves metrics securely: it reviews tokens and access, and scrapers need
    /// `get` on `/metrics`.
    pub metrics_secure: bool,
    /// The manager serves admission webhooks (`informant run --webhook-service`); `None`: no
    /// webhook endpoint.
    pub webhook: Option<Webhook>,
}

impl Options {
    /// A manager in `namespace`, without leader election, extra kinds or extra rules.
    #[must_use]
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            ..Self::default()
        }
    }
}

/// Where a set of rights applies: one `Role` per namespace, or the `ClusterRole`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Scope {
    Cluster,
    Namespaces(BTreeSet<String>),
}

impl Scope {
    /// The scope of a namespace map (`defaultNamespaces`, `byObject[].namespaces`): cluster-wide
    /// when it is empty or has the `""` key.
    fn of_map<V>(map: &BTreeMap<NamespaceKey, V>) -> Scope {
        let mut names = BTreeSet::new();
        for key in map.keys() {
            match key {
                NamespaceKey::AllOthers => return Scope::Cluster,
                NamespaceKey::Named(ns) => {
                    names.insert(ns.clone());
                }
            }
        }
        if names.is_empty() {
            Scope::Cluster
        } else {
            Scope::Namespaces(names)
        }
    }
}

/// A kind's API group, plural and scope, resolved offline.
fn resolve(gvk: &GroupVersionKind) -> (String, String, bool) {
    if let Some(kind) = crate::kinds::builtin(&gvk.group, &gvk.version, &gvk.kind) {
        (
            kind.group.to_owned(),
            kind.plural.to_owned(),
            kind.namespaced,
        )
    } else {
        let info = BuiltinKinds::resolve_now(gvk);
        (gvk.group.clone(), info.resource.plural, info.namespaced)
    }
}

/// The rules a manager needs, by where they apply.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rules {
    /// The `ClusterRole`'s rules; empty: no `ClusterRole` is needed.
    pub cluster: Vec<PolicyRule>,
    /// Each namespace's `Role` rules (the manager's namespace always has one; a namespace
    /// without rules has no `Role`).
    pub namespaces: BTreeMap<String, Vec<PolicyRule>>,
    /// Why the `ClusterRole` holds what a reader might not expect (a namespace selector, CRD
    /// watching), one sentence each: `informant rbac` and the chart print them as comments.
    pub notes: Vec<String>,
    /// With secure metrics, the rules of the `<name>-metrics-reader` `ClusterRole`, bound to
    /// no one: what a scraper of `/metrics` needs (not the manager's, so not among the
    /// permissions [`crate::config::access`] checks).
    pub metrics_reader: Vec<PolicyRule>,
}

/// The note of a config that chooses namespaces by label.
pub const NOTE_NAMESPACE_SELECTOR: &str = "namespaceSelector: the namespaces are chosen by label while the manager runs, so the kinds it caches are read cluster-wide (a ClusterRole: no Role can be written for namespaces not known in advance), and namespaces are listed and watched to follow their labels";

/// The note of a sharded config.
pub const NOTE_SHARDING: &str = "sharding: each replica creates, renews and at shutdown deletes a member Lease of its own in the manager's namespace, named after its identity at run time (so the rule names no Lease; it covers leader election's Lease too), and lists the ring's Leases to know the members";

/// The note of a config sharded by namespace.
pub const NOTE_SHARDING_NAMESPACE: &str = "sharding by namespace: each replica caches the namespaces it owns, which change as replicas come and go, so namespaces are listed and watched";

/// The note of secure metrics.
pub const NOTE_SECURE_METRICS: &str = "metrics.secure: each request to /metrics and /debug/* is authenticated with a TokenReview and authorized with a SubjectAccessReview (controller-runtime's WithAuthenticationAndAuthorization), so both reviews are created; bind Prometheus's account to the metrics-reader ClusterRole";

/// The API group of `tokenreviews`.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
/// The API group of `subjectaccessreviews`.
const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";

/// The note of a config whose `byObject` lists custom kinds.
pub const NOTE_CRD_WATCH: &str = "byObject lists custom kinds: customresourcedefinitions are listed and watched, so a kind's informers start when its CRD is established and stop when it is deleted (without this grant the manager asks discovery every 30 s instead)";

/// The resources read in one place, by API group.
type Reads = BTreeMap<String, BTreeSet<String>>;

impl Rules {
    /// The least-privilege rules of `config` deployed as `options` say (see the module docs).
    #[must_use]
    pub fn derive(config: &Validated, options: &Options) -> Rules {
        Self::derive_for_api(
            &config.cache,
            &config_name(config),
            options,
            config.recorder.api,
        )
    }

    /// [`Rules::derive`] from the cache options of the `CacheConfig` named `name`, with the
    /// recorder writing core/v1 Events.
    #[must_use]
    pub fn derive_options(cache: &cache::Options, name: &str, options: &Options) -> Rules {
        Self::derive_for_api(cache, name, options, Api::CoreV1)
    }

    /// [`Rules::derive_options`] with the recorder writing the Events of `api`: `create` and
    /// `patch` on `events` in that API's group (`""` or `events.k8s.io`).
    #[must_use]
    pub fn derive_for_api(
        cache: &cache::Options,
        name: &str,
        options: &Options,
        api: Api,
    ) -> Rules {
        let events_rule = || events_rule(api);
        let default_scope = if cache.default_namespace_selector.is_some() {
            Scope::Cluster
        } else {
            Scope::of_map(&cache.default_namespaces)
        };
        let mut cluster_reads = Reads::new();
        let mut namespace_reads: BTreeMap<String, Reads> = BTreeMap::new();
        let mut events_cluster = default_scope == Scope::Cluster;
        let mut cluster_kind_cached = false;
        let kinds = cache
            .by_object
            .iter()
            .map(|by| (&by.gvk, &by.namespaces, by.namespace_selector.is_some()))
            .chain(
                options
                    .kinds
                    .iter()
                    .map(|gvk| (gvk, &Namespaces::Inherit, false)),
            );
        for (gvk, namespaces, selected) in kinds {
            let (group, plural, namespaced) = resolve(gvk);
            let scope = if namespaced {
                match namespaces {
                    _ if selected => Scope::Cluster,
                    Namespaces::Inherit => default_scope.clone(),
                    Namespaces::All => Scope::Cluster,
                    Namespaces::Only(map) => Scope::of_map(map),
                }
            } else {
                cluster_kind_cached = true;
                Scope::Cluster
            };
            match scope {
                Scope::Cluster => {
                    events_cluster |= namespaced;
                    cluster_reads.entry(group).or_default().insert(plural);
                }
                Scope::Namespaces(names) => {
                    for ns in names {
                        namespace_reads
                            .entry(ns)
                            .or_default()
                            .entry(group.clone())
                            .or_default()
                            .insert(plural.clone());
                    }
                }
            }
        }

        let notes = follow_reads(cache, &mut cluster_reads);
        let mut rules = Rules {
            cluster: read_rules(&cluster_reads),
            namespaces: BTreeMap::new(),
            notes,
            metrics_reader: Vec::new(),
        };
        // Every namespace with a Role: the cached ones, the manager's, and `default` for
        // Events about cluster-scoped objects when events are not granted cluster-wide.
        let mut role_namespaces: BTreeSet<String> = namespace_reads.keys().cloned().collect();
        if let Scope::Namespaces(names) = &default_scope {
            role_namespaces.extend(names.iter().cloned());
        }
        role_namespaces.insert(options.namespace.clone());
        if cluster_kind_cached && !events_cluster {
            role_namespaces.insert(EVENTS_NAMESPACE_OF_CLUSTER_OBJECTS.to_owned());
        }
        for ns in role_namespaces {
            let mut role = namespace_reads.get(&ns).map(read_rules).unwrap_or_default();
            if !events_cluster {
                role.push(events_rule());
            }
            if ns == options.namespace {
                if cache.sharding.is_some() {
                    // The member Lease rule covers leader election's Lease as well.
                    role.extend(manager_rules(name, None));
                    role.push(member_lease_rule());
                } else {
                    role.extend(manager_rules(name, options.lease.as_deref()));
                }
            }
            if let Scope::Namespaces(names) = &default_scope
                && names.contains(&ns)
            {
                role.extend(options.extra_rules.iter().cloned());
            }
            if !role.is_empty() {
                rules.namespaces.insert(ns, role);
            }
        }
        if events_cluster {
            rules.cluster.push(events_rule());
        }
        if default_scope == Scope::Cluster {
            rules.cluster.extend(options.extra_rules.iter().cloned());
        }
        if options.metrics_secure {
            rules.secure_metrics();
        }
        if let Some(webhook) = &options.webhook {
            rules.webhook(webhook);
        }
        rules
    }

    /// What the webhook endpoint adds: its rules in the `ClusterRole` (with the note saying
    /// why `create` names nothing), and the managed certificates' Secret at the end of the
    /// `Role` of the Service's namespace (its `list` and `watch` left out when Secrets are
    /// listed and watched there already: cached, or granted by extra rules).
    fn webhook(&mut self, webhook: &Webhook) {
        self.cluster.extend(webhook.cluster_rules());
        self.notes.push(NOTE_WEBHOOK.to_owned());
        let watched = webhook::watch_secrets(&self.cluster)
            || self
                .namespaces
                .get(&webhook.namespace)
                .is_some_and(|role| webhook::watch_secrets(role));
        let secret_rules = webhook.namespace_rules(watched);
        if !secret_rules.is_empty() {
            self.namespaces
                .entry(webhook.namespace.clone())
                .or_default()
                .extend(secret_rules);
        }
    }

    /// What secure metrics add: the reviews in the `ClusterRole` (with the note saying why),
    /// and the metrics reader.
    fn secure_metrics(&mut self) {
        self.cluster.extend(review_rules());
        self.notes.push(NOTE_SECURE_METRICS.to_owned());
        self.metrics_reader = vec![metrics_reader_rule()];
    }

    /// The `ClusterRole` (when any rule is cluster-wide), the `Role`s, and their bindings to
    /// the service account `service_account` in `namespace`, all named `name`.
    #[must_use]
    pub fn objects(&self, name: &str, service_account: &str, namespace: &str) -> Objects {
        let subject = Subject {
            kind: "ServiceAccount".to_owned(),
            name: service_account.to_owned(),
            namespace: Some(namespace.to_owned()),
            api_group: None,
        };
        let role_ref = |kind: &str| RoleRef {
            api_group: RBAC_GROUP.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        };
        let meta = |ns: Option<&str>| ObjectMeta {
            name: Some(name.to_owned()),
            namespace: ns.map(str::to_owned),
            ..ObjectMeta::default()
        };
        let mut objects = Objects::default();
        if !self.metrics_reader.is_empty() {
            objects.metrics_reader = Some(ClusterRole {
                metadata: ObjectMeta {
                    name: Some(format!("{name}-metrics-reader")),
                    ..ObjectMeta::default()
                },
                rules: Some(self.metrics_reader.clone()),
                aggregation_rule: None,
            });
        }
        if !self.cluster.is_empty() {
            objects.cluster_role = Some(ClusterRole {
                metadata: meta(None),
                rules: Some(self.cluster.clone()),
                aggregation_rule: None,
            });
            objects.cluster_role_binding = Some(ClusterRoleBinding {
                metadata: meta(None),
                role_ref: role_ref("ClusterRole"),
                subjects: Some(vec![subject.clone()]),
            });
        }
        for (ns, rules) in &self.namespaces {
            objects.roles.push(Role {
                metadata: meta(Some(ns)),
                rules: Some(rules.clone()),
            });
            objects.role_bindings.push(RoleBinding {
                metadata: meta(Some(ns)),
                role_ref: role_ref("Role"),
                subjects: Some(vec![subject.clone()]),
            });
        }
        objects
    }
}

/// The RBAC objects of [`Rules::objects`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Objects {
    /// The `ClusterRole`, when any rule is cluster-wide.
    pub cluster_role: Option<ClusterRole>,
    /// Its binding to the service account.
    pub cluster_role_binding: Option<ClusterRoleBinding>,
    /// One `Role` per namespace, sorted by namespace.
    pub roles: Vec<Role>,
    /// One `RoleBinding` per `Role`, in the same order.
    pub role_bindings: Vec<RoleBinding>,
    /// With secure metrics, the `<name>-metrics-reader` `ClusterRole` (bound to no one).
    pub metrics_reader: Option<ClusterRole>,
}

impl Objects {
    /// Every object as JSON, with `apiVersion` and `kind`: the `ClusterRole` and its binding
    /// first, then each `Role` followed by its binding, then the metrics reader.
    ///
    /// # Errors
    ///
    /// A serialization error (none for these types).
    pub fn to_values(&self) -> serde_json::Result<Vec<serde_json::Value>> {
        use k8s_openapi::Resource;
        fn typed<T: Serialize + Resource>(object: &T) -> serde_json::Result<serde_json::Value> {
            let mut value = serde_json::to_value(object)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("apiVersion".into(), T::API_VERSION.into());
                map.insert("kind".into(), T::KIND.into());
            }
            Ok(value)
        }
        let mut values = Vec::new();
        if let Some(role) = &self.cluster_role {
            values.push(typed(role)?);
        }
        if let Some(binding) = &self.cluster_role_binding {
            values.push(typed(binding)?);
        }
        for (role, binding) in self.roles.iter().zip(&self.role_bindings) {
            values.push(typed(role)?);
            values.push(typed(binding)?);
        }
        if let Some(reader) = &self.metrics_reader {
            values.push(typed(reader)?);
        }
        Ok(values)
    }
}

/// The name of the `CacheConfig`, as its `metadata.name` says.
fn config_name(config: &Validated) -> String {
    config.resource.metadata.name.clone().unwrap_or_default()
}

/// What following the cluster needs, added to `cluster_reads`: namespaces for a namespace
/// selector or sharding by namespace, CRDs for custom `byObject` kinds. Returns the note of
/// each.
fn follow_reads(cache: &cache::Options, cluster_reads: &mut Reads) -> Vec<String> {
    let mut notes = Vec::new();
    let mut namespaces = || {
        cluster_reads
            .entry(String::new())
            .or_default()
            .insert("namespaces".to_owned());
    };
    if cache.uses_namespace_selector() {
        namespaces();
        notes.push(NOTE_NAMESPACE_SELECTOR.to_owned());
    }
    if let Some(sharding) = &cache.sharding {
        if sharding.key == ShardKey::Namespace {
            namespaces();
            notes.push(NOTE_SHARDING_NAMESPACE.to_owned());
        }
        notes.push(NOTE_SHARDING.to_owned());
    }
    let custom = |by: &&cache::ByObject| {
        crate::kinds::builtin(&by.gvk.group, &by.gvk.version, &by.gvk.kind).is_none()
    };
    if cache.by_object.iter().any(|by| custom(&by)) {
        cluster_reads
            .entry(CRD_GROUP.to_owned())
            .or_default()
            .insert("customresourcedefinitions".to_owned());
        notes.push(NOTE_CRD_WATCH.to_owned());
    }
    notes
}

/// `list` and `watch` on every resource of `reads`, one rule per API group.
fn read_rules(reads: &Reads) -> Vec<PolicyRule> {
    reads
        .iter()
        .map(|(group, resources)| {
            rule(
                group,
                &resources.iter().map(String::as_str).collect::<Vec<_>>(),
                None,
                &["list", "watch"],
            )
        })
        .collect()
}

/// What secure metrics make the manager create: a `TokenReview` and a `SubjectAccessReview`
/// per request not answered from their cache.
fn review_rules() -> [PolicyRule; 2] {
    [
        rule(AUTHENTICATION_GROUP, &["tokenreviews"], None, &["create"]),
        rule(
            AUTHORIZATION_GROUP,
            &["subjectaccessreviews"],
            None,
            &["create"],
        ),
    ]
}

/// `get` on `/metrics`: what Prometheus needs of a secure metrics endpoint.
fn metrics_reader_rule() -> PolicyRule {
    PolicyRule {
        non_resource_urls: Some(vec!["/metrics".to_owned()]),
        verbs: vec!["get".to_owned()],
        ..PolicyRule::default()
    }
}

/// `create` and `patch` on core Events.
fn events_rule(api: Api) -> PolicyRule {
    let group = match api {
        Api::CoreV1 => "",
        Api::EventsV1 => "events.k8s.io",
    };
    rule(group, &["events"], None, &["create", "patch"])
}

/// The `CacheConfig` named `name` and, with leader election, the Lease named `lease`.
fn manager_rules(name: &str, lease: Option<&str>) -> Vec<PolicyRule> {
    let mut rules = vec![
        rule(
            GROUP,
            &["cacheconfigs"],
            Some(name),
            &["get", "list", "watch"],
        ),
        rule(GROUP, &["cacheconfigs/status"], Some(name), &["patch"]),
        // The hook Controllers of the manager's namespace (`--cache-config` watches them,
        // and patches their metadata to add and remove the release finalizer) and their
        // status. What their hooks write (children, the parent's status) is the Controllers'
        // business: `extraRules`.
        rule(
            GROUP,
            &["controllers"],
            None,
            &["get", "list", "watch", "patch"],
        ),
        rule(GROUP, &["controllers/status"], None, &["patch"]),
    ];
    if let Some(lease) = lease {
        rules.extend(lease_rules(lease));
    }
    rules
}

/// The rule of a shard ring's member Leases, in their namespace: each replica creates its
/// own (named after its identity, known only at run time: no `resourceNames`), renews it
/// (`update` after `get`), deletes it at shutdown, and lists the ring's Leases every retry
/// period (the manager's `shard::Member`). It covers leader election's Lease as well.
#[must_use]
pub fn member_lease_rule() -> PolicyRule {
    rule(
        LEASE_GROUP,
        &["leases"],
        None,
        &["get", "list", "create", "update", "delete"],
    )
}

/// The rules of leader election on the Lease named `lease`, in its namespace: `create` on
/// `leases` (creation cannot be restricted by name) and `get`/`update` on the Lease.
#[must_use]
pub fn lease_rules(lease: &str) -> Vec<PolicyRule> {
    vec![
        rule(LEASE_GROUP, &["leases"], None, &["create"]),
        rule(LEASE_GROUP, &["leases"], Some(lease), &["get", "update"]),
    ]
}

fn rule(group: &str, resources: &[&str], name: Option<&str>, verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(strings(resources)),
        resource_names: name.map(|n| vec![n.to_owned()]),
        verbs: strings(verbs),
        non_resource_urls: None,
    }
}

#[cfg(test)]
mod tests;
