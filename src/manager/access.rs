//! The permission check the manager runs before each config's informers start (at start and
//! at every applied reload): the permissions `informant rbac` derives for the config and this
//! manager's deployment (its `CacheConfig` and `Controller`s when it reads them from the
//! cluster, its Lease when it elects a leader), each asked of the API server with a
//! `SelfSubjectAccessReview` ([`crate::config::access`]).
//!
//! A missing permission is said where a user looks before any informer has had the time to
//! fail: a warn log line naming each, the `Ready` condition (`False`, reason
//! [`REASON_PERMISSION_MISSING`](super::REASON_PERMISSION_MISSING)), `/readyz/permissions`, and a
//! `PermissionMissing` Warning Event on the leader. While something is missing the check runs
//! again every [`PERMISSIONS_RECHECK_INTERVAL`] (`Options::permissions_recheck`), so a grant clears it
//! without a reload. A server that cannot answer (no authorization API, the review itself
//! refused) leaves the check silent: the informers' own errors still say what failed.

use std::time::Duration;

use kube::Client;

use super::options::{ConfigSource, Options};
use crate::config::{Validated, access, rbac};

/// How often a check that found something missing runs again, unless
/// [`Options::permissions_recheck`] says otherwise.
pub const PERMISSIONS_RECHECK_INTERVAL: Duration = Duration::from_secs(30);

/// The Warning Event's reason when the check finds a missing permission.
pub(crate) const EVENT_REASON: &str = "PermissionMissing";

/// What the manager is, for the rules it needs beyond the config's.
#[derive(Clone)]
pub(super) struct AccessCheck {
    client: Client,
    /// The `CacheConfig`'s namespace and name, when read from the cluster.
    resource: Option<(String, String)>,
    /// The Lease's namespace and name, when electing a leader.
    lease: Option<(String, String)>,
    /// The namespace of the shard ring's member Leases (used when the config shards).
    member_lease_namespace: String,
    /// How often a check that found something missing runs again.
    pub(super) recheck: Duration,
    /// What the webhook endpoint needs, when it is on.
    webhook: Option<rbac::Webhook>,
}

impl AccessCheck {
    /// The check of a manager with `options`, asking with `client`.
    pub(super) fn new(client: Client, options: &Options) -> Self {
        let resource = match &options.source {
            ConfigSource::Resource { namespace, name } => Some((namespace.clone(), name.clone())),
            ConfigSource::File(_) => None,
        };
        let lease = options
            .leader_election
            .as_ref()
            .map(|l| (l.lease_namespace.clone(), l.lease_name.clone()));
        Self {
            client,
            resource,
            lease,
            member_lease_namespace: options.shard.lease_namespace.clone(),
            recheck: options.permissions_recheck,
            webhook: options.webhook.as_ref().map(webhook_rights),
        }
    }

    /// The rules this manager needs with `config`.
    fn rules(&self, config: &Validated) -> rbac::Rules {
        let metadata = &config.resource.metadata;
        let namespace = self.resource.as_ref().map_or_else(
            || {
                metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_owned())
            },
            |(ns, _)| ns.clone(),
        );
        let options = rbac::Options {
            webhook: self.webhook.clone(),
            ..rbac::Options::new(&namespace)
        };
        let mut rules = rbac::Rules::derive(config, &options);
        if self.resource.is_none() {
            // A file: no CacheConfig or Controller is read from the cluster.
            for namespaced in rules.namespaces.values_mut() {
                namespaced.retain(|rule| {
                    rule.api_groups.as_deref() != Some(&["informant.dev".to_owned()][..])
                });
            }
            rules.namespaces.retain(|_, rules| !rules.is_empty());
        }
        // Following CRDs is better with their watch, but works without it (discovery is asked
        // every `cache::DISCOVERY_REFRESH` instead): its absence is said by the reloader's
        // warning, not counted as a missing permission.
        // The CRDs of the webhook endpoint, named, are written: those are checked.
        rules.cluster.retain(|rule| {
            rule.api_groups.as_deref() != Some(&[rbac::CRD_GROUP.to_owned()][..])
                || rule.resource_names.is_some()
        });
        if config.cache.sharding.is_some() {
            // The member Leases live in the lease namespace (`--lease-namespace`), which need
            // not be the config's.
            let member = rbac::member_lease_rule();
            for rules in rules.namespaces.values_mut() {
                rules.retain(|rule| *rule != member);
            }
            rules.namespaces.retain(|_, rules| !rules.is_empty());
            rules
                .namespaces
                .entry(self.member_lease_namespace.clone())
                .or_default()
                .push(member);
        }
        if let Some((lease_namespace, lease_name)) = &self.lease {
            let lease = rbac::lease_rules(lease_name);
            rules
                .namespaces
                .entry(lease_namespace.clone())
                .or_default()
                .extend(lease);
        }
        rules
    }

    /// The permissions `config` needs that the cluster does not grant, each as
    /// `verb resource ... in namespace ...`; empty when all are granted or the server cannot
    /// say.
    pub(super) async fn missing(&self, config: &Validated) -> Vec<String> {
        match access::missing(&self.client, &self.rules(config)).await {
            Ok(missing) => {
                let missing: Vec<String> = missing.iter().map(ToString::to_string).collect();
                if !missing.is_empty() {
                    tracing::warn!(
                        missing = %missing.join("; "),
                        "the cluster does not grant permissions the config needs; \
                         `informant rbac --check` prints the objects granting them"
                    );
                }
                missing
            }
            Err(error) => {
                tracing::debug!(
                    error = %crate::telemetry::error_chain(&error),
                    "cannot check the permissions the config needs"
                );
                Vec::new()
            }
        }
    }
}

/// The Warning Event's message for `missing` permissions.
pub(super) fn event_message(missing: &[String]) -> String {
    format!(
        "{} permission{} the config needs {} not granted (`informant rbac --check` prints the objects granting them): {}",
        missing.len(),
        if missing.len() == 1 { "" } else { "s" },
        if missing.len() == 1 { "is" } else { "are" },
        missing.join("; ")
    )
}

/// What `informant rbac --webhook-*` derives for the endpoint of `options`.
fn webhook_rights(options: &crate::manager::WebhookOptions) -> rbac::Webhook {
    let certificates = match &options.certificates {
        #[cfg(feature = "webhook-certificates")]
        crate::serving::WebhookCertificates::Managed(settings) => rbac::Certificates::Managed {
            secret: settings.secret.clone(),
            inject: rbac::InjectNames {
                validating: options.inject.validating.clone(),
                mutating: options.inject.mutating.clone(),
                crds: options.inject.crds.clone(),
            },
        },
        crate::serving::WebhookCertificates::Mounted { .. } => rbac::Certificates::Mounted,
    };
    rbac::Webhook {
        namespace: options.service.namespace.clone(),
        configuration: options.configuration.clone(),
        certificates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_member_leases_are_checked_in_the_lease_namespace() {
        let config = crate::config::load_str(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\n\
             spec: {sharding: {ring: shop}}\n",
        )
        .unwrap();
        let url: http::Uri = "http://127.0.0.1:1".parse().unwrap();
        let client = Client::try_from(kube::Config::new(url)).unwrap();
        let check = AccessCheck {
            client,
            resource: Some(("config-ns".to_owned(), "c".to_owned())),
            lease: None,
            member_lease_namespace: "lease-ns".to_owned(),
            recheck: PERMISSIONS_RECHECK_INTERVAL,
            webhook: None,
        };
        let rules = check.rules(&config);
        let member = rbac::member_lease_rule();
        assert!(rules.namespaces["lease-ns"].contains(&member), "{rules:?}");
        assert!(
            !rules.namespaces["config-ns"].contains(&member),
            "{rules:?}"
        );
    }

    #[tokio::test]
    async fn the_crd_watch_is_not_a_permission_the_manager_must_have() {
        let config = crate::config::load_str(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\n\
             spec: {byObject: [{apiVersion: example.com/v1, kind: Widget}]}\n",
        )
        .unwrap();
        // `informant rbac` grants it (following CRDs is better with their watch) ...
        let derived = rbac::Rules::derive(&config, &rbac::Options::new("config-ns"));
        let crds = |rules: &[k8s_openapi::api::rbac::v1::PolicyRule]| {
            rules
                .iter()
                .any(|r| r.api_groups.as_deref() == Some(&[rbac::CRD_GROUP.to_owned()][..]))
        };
        assert!(crds(&derived.cluster), "{derived:?}");
        // ... but the manager works without it (discovery every 30 s): not checked.
        let url: http::Uri = "http://127.0.0.1:1".parse().unwrap();
        let check = AccessCheck {
            client: Client::try_from(kube::Config::new(url)).unwrap(),
            resource: Some(("config-ns".to_owned(), "c".to_owned())),
            lease: None,
            member_lease_namespace: "config-ns".to_owned(),
            recheck: PERMISSIONS_RECHECK_INTERVAL,
            webhook: None,
        };
        let rules = check.rules(&config);
        assert!(!crds(&rules.cluster), "{rules:?}");
        assert!(
            rules.cluster.iter().any(|r| r
                .resources
                .as_ref()
                .is_some_and(|res| res.contains(&"widgets".to_owned()))),
            "the kind itself is still checked: {rules:?}"
        );
    }

    #[cfg(feature = "webhook-certificates")]
    #[tokio::test]
    async fn the_webhook_endpoints_rights_are_checked_when_it_is_on() {
        let config = crate::config::load_str(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n",
        )
        .unwrap();
        let url: http::Uri = "http://127.0.0.1:1".parse().unwrap();
        let mut webhook = crate::manager::WebhookOptions::managed(
            ([127, 0, 0, 1], 9443).into(),
            "hooks-ns",
            "hooks",
        );
        webhook.inject.crds.push("widgets.example.com".to_owned());
        let check = AccessCheck {
            client: Client::try_from(kube::Config::new(url)).unwrap(),
            resource: Some(("config-ns".to_owned(), "c".to_owned())),
            lease: None,
            member_lease_namespace: "config-ns".to_owned(),
            recheck: PERMISSIONS_RECHECK_INTERVAL,
            webhook: Some(webhook_rights(&webhook)),
        };
        let rules = check.rules(&config);
        let names = |rule: &k8s_openapi::api::rbac::v1::PolicyRule| {
            rule.resource_names.clone().unwrap_or_default()
        };
        let has = |rules: &[k8s_openapi::api::rbac::v1::PolicyRule], resource: &str, name: &str| {
            rules.iter().any(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|res| res.iter().any(|x| x == resource))
                    && names(r).iter().any(|n| n == name)
            })
        };
        assert!(
            has(&rules.cluster, "validatingwebhookconfigurations", "hooks"),
            "{rules:?}"
        );
        assert!(
            has(
                &rules.cluster,
                "customresourcedefinitions",
                "widgets.example.com"
            ),
            "{rules:?}"
        );
        assert!(
            has(&rules.namespaces["hooks-ns"], "secrets", "hooks-cert"),
            "{rules:?}"
        );
        let without = AccessCheck {
            webhook: None,
            ..check
        };
        let rules = without.rules(&config);
        assert!(
            !has(&rules.cluster, "validatingwebhookconfigurations", "hooks"),
            "{rules:?}"
        );
    }
}
