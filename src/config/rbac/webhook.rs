//! The rules of the manager's webhook endpoint (`informant run --webhook-service`): the
//! webhook configurations it owns, the objects whose `caBundle` it writes, and the Secret of
//! its managed certificates.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::{CRD_GROUP, rule};

/// The API group of webhook configurations.
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
/// The two kinds of webhook configuration the manager owns, by resource.
const CONFIGURATIONS: [&str; 2] = [
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
];

/// The note of a manager serving admission webhooks.
pub const NOTE_WEBHOOK: &str = "webhook: the leader creates the ValidatingWebhookConfiguration and MutatingWebhookConfiguration it owns (creation cannot be restricted by name, so create is granted on every name), keeps their webhooks and caBundle current, and deletes them when no admission hook is declared";

/// How the manager serves its webhook endpoint, as far as its requests go: what
/// `informant run --webhook-*` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Webhook {
    /// The webhook Service's namespace (`--webhook-service-namespace`): where the managed
    /// certificates' Secret is.
    pub namespace: String,
    /// The name of the `ValidatingWebhookConfiguration` and of the
    /// `MutatingWebhookConfiguration` the manager owns (`--webhook-configuration`).
    pub configuration: String,
    /// Who makes the serving certificate.
    pub certificates: Certificates,
}

/// Who makes the webhook endpoint's serving certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Certificates {
    /// A mounted certificate (`--webhook-cert-dir`, cert-manager's): read from files, its
    /// bundle injected by cert-manager's cainjector. The manager reads no Secret.
    #[default]
    Mounted,
    /// Managed certificates: the manager keeps them in a Secret and writes their bundle.
    Managed {
        /// The Secret (`--webhook-cert-secret`), in the Service's namespace.
        secret: String,
        /// More objects whose `caBundle` the manager writes (`--webhook-inject`).
        inject: InjectNames,
    },
}

/// The objects besides its own configurations whose `caBundle` the manager writes, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InjectNames {
    /// `ValidatingWebhookConfiguration`s.
    pub validating: Vec<String>,
    /// `MutatingWebhookConfiguration`s.
    pub mutating: Vec<String>,
    /// `CustomResourceDefinition`s (their conversion webhook's client config).
    pub crds: Vec<String>,
}

impl Webhook {
    /// The `ClusterRole`'s rules: `create` on both kinds of webhook configuration (creation
    /// cannot be restricted by name), `get`, `update` and `delete` on the two the manager owns
    /// (the leader reads them, writes their webhooks and bundle at the resourceVersion read,
    /// and deletes them when no hook is declared); with managed certificates, `get` and
    /// `update` on the other configurations it injects (the `CaInjector`'s read and replace)
    /// and `get` and `patch` on the CRDs (a merge patch of the conversion's `caBundle`).
    #[must_use]
    pub(super) fn cluster_rules(&self) -> Vec<PolicyRule> {
        let mut rules = vec![
            rule(ADMISSION_GROUP, &CONFIGURATIONS, None, &["create"]),
            named(
                ADMISSION_GROUP,
                &CONFIGURATIONS,
                &[self.configuration.as_str()],
                &["get", "update", "delete"],
            ),
        ];
        if let Certificates::Managed { inject, .. } = &self.certificates {
            let others = |names: &[String]| -> Vec<String> {
                let mut names: Vec<String> = names
                    .iter()
                    .filter(|n| **n != self.configuration)
                    .cloned()
                    .collect();
                names.sort();
                names.dedup();
                names
            };
            for (resource, names) in CONFIGURATIONS
                .iter()
                .zip([others(&inject.validating), others(&inject.mutating)])
            {
                if !names.is_empty() {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    rules.push(named(
                        ADMISSION_GROUP,
                        &[*resource],
                        &names,
                        &["get", "update"],
                    ));
                }
            }
            let mut crds: Vec<&str> = inject.crds.iter().map(String::as_str).collect();
            crds.sort_unstable();
            crds.dedup();
            if !crds.is_empty() {
                rules.push(named(
                    CRD_GROUP,
                    &["customresourcedefinitions"],
                    &crds,
                    &["get", "patch"],
                ));
            }
        }
        rules
    }

    /// The rules of the Role in the Service's namespace: with managed certificates, `create`
    /// on Secrets (not restrictable by name) and `get`, `list`, `watch`, `update` on the
    /// certificates' Secret (every replica watches it with a `metadata.name` field selector;
    /// the leader reads and replaces it), without `list` and `watch` when `watched` (the
    /// Service's namespace's Secrets are listed and watched already); mounted, none.
    #[must_use]
    pub(super) fn namespace_rules(&self, watched: bool) -> Vec<PolicyRule> {
        match &self.certificates {
            Certificates::Mounted => Vec::new(),
            Certificates::Managed { secret, .. } => {
                let verbs: &[&str] = if watched {
                    &["get", "update"]
                } else {
                    &["get", "list", "watch", "update"]
                };
                vec![
                    rule("", &["secrets"], None, &["create"]),
                    rule("", &["secrets"], Some(secret), verbs),
                ]
            }
        }
    }
}

/// Whether `rules` list and watch every Secret of their place (a rule naming no object).
pub(super) fn watch_secrets(rules: &[PolicyRule]) -> bool {
    let has = |items: Option<&Vec<String>>, item: &str| {
        items.is_some_and(|i| i.iter().any(|x| x == item))
    };
    rules.iter().any(|r| {
        r.resource_names.as_ref().is_none_or(Vec::is_empty)
            && has(r.api_groups.as_ref(), "")
            && has(r.resources.as_ref(), "secrets")
            && r.verbs.iter().any(|v| v == "list")
            && r.verbs.iter().any(|v| v == "watch")
    })
}

/// A rule on `resources` restricted to `names`.
fn named(group: &str, resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        ..rule(group, resources, None, verbs)
    }
}
