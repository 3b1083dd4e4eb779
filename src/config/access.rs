//! Whether the cluster grants what a `CacheConfig` needs: every permission the derived
//! [`Rules`] hold, asked of the API server one `SelfSubjectAccessReview`
//! at a time as the client's own user (`kubectl auth can-i` for each), and what is missing,
//! back as rules to apply. `informant rbac --check` prints it; the manager runs it before each
//! config's informers start, so that a missing permission is named up front rather than found
//! as an informer that never syncs.
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use informant::config::{access, load_str, rbac};
//!
//! let config = load_str(
//!     "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n",
//! )?;
//! let rules = rbac::Rules::derive(&config, &rbac::Options::new("informant-system"));
//! for permission in access::missing(&client, &rules).await? {
//!     println!("missing: {permission}");
//! }
//! # Ok(()) }
//! ```
//!
//! ## RBAC
//!
//! `create` on `selfsubjectaccessreviews` (`authorization.k8s.io`), which every authenticated
//! user has (the `system:basic-user` `ClusterRole`).

use std::collections::BTreeMap;
use std::fmt;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, PostParams};

use super::rbac::Rules;

/// How many reviews are in flight at once.
const CONCURRENT_REVIEWS: usize = 8;

/// One permission a rule grants: a verb on a resource (or a non-resource URL) in one place.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    /// Where: a namespace, or `None` for cluster-wide (every namespace of a namespaced
    /// resource).
    pub namespace: Option<String>,
    /// The API group, "" for the core group.
    pub group: String,
    /// The resource, with its subresource (`cacheconfigs/status`); "" for a non-resource URL.
    pub resource: String,
    /// The object's name, when the rule is restricted to names.
    pub name: Option<String>,
    /// The non-resource URL, when it is one.
    pub url: Option<String>,
    /// The verb.
    pub verb: String,
}

impl fmt::Display for Permission {
    /// `list pods in namespace shop`, `patch cacheconfigs.informant.dev/status "c" in
    /// namespace ops`, `create events cluster-wide`, `get /healthz`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(url) = &self.url {
            return write!(f, "{} {url}", self.verb);
        }
        let (resource, subresource) = self
            .resource
            .split_once('/')
            .map_or((self.resource.as_str(), None), |(r, s)| (r, Some(s)));
        write!(f, "{} {resource}", self.verb)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(subresource) = subresource {
            write!(f, "/{subresource}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.namespace {
            Some(namespace) => write!(f, " in namespace {namespace}"),
            None => f.write_str(" cluster-wide"),
        }
    }
}

/// Every permission of `rule` in `namespace`: one per verb, group, resource and name (or URL).
fn expand(rule: &PolicyRule, namespace: Option<&str>) -> Vec<Permission> {
    let mut out = Vec::new();
    let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
        None | Some([]) => vec![None],
        Some(names) => names.iter().cloned().map(Some).collect(),
    };
    for verb in &rule.verbs {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for name in &names {
                    out.push(Permission {
                        namespace: namespace.map(str::to_owned),
                        group: group.clone(),
                        resource: resource.clone(),
                        name: name.clone(),
                        url: None,
                        verb: verb.clone(),
                    });
                }
            }
        }
        for url in rule.non_resource_urls.iter().flatten() {
            out.push(Permission {
                namespace: None,
                group: String::new(),
                resource: String::new(),
                name: None,
                url: Some(url.clone()),
                verb: verb.clone(),
            });
        }
    }
    out
}

/// Every permission the rules hold, cluster-wide ones first, each once.
#[must_use]
pub fn permissions(rules: &Rules) -> Vec<Permission> {
    let mut out: Vec<Permission> = Vec::new();
    let scoped =
        rules
            .cluster
            .iter()
            .map(|rule| (rule, None))
            .chain(rules.namespaces.iter().flat_map(|(namespace, rules)| {
                rules
                    .iter()
                    .map(move |rule| (rule, Some(namespace.as_str())))
            }));
    for (rule, namespace) in scoped {
        for permission in expand(rule, namespace) {
            if !out.contains(&permission) {
                out.push(permission);
            }
        }
    }
    out
}

/// The review asking whether the client's user has `permission`.
fn review(permission: &Permission) -> SelfSubjectAccessReview {
    let spec = if let Some(url) = &permission.url {
        SelfSubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(url.clone()),
                verb: Some(permission.verb.clone()),
            }),
            resource_attributes: None,
        }
    } else {
        let (resource, subresource) = match permission.resource.split_once('/') {
            Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
            None => (permission.resource.as_str(), None),
        };
        SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: permission.namespace.clone(),
                verb: Some(permission.verb.clone()),
                group: Some(permission.group.clone()),
                resource: Some(resource.to_owned()),
                subresource,
                name: permission.name.clone(),
                ..ResourceAttributes::default()
            }),
            non_resource_attributes: None,
        }
    };
    SelfSubjectAccessReview {
        spec,
        ..SelfSubjectAccessReview::default()
    }
}

/// The permissions of `rules` the client's user does not have, in the order of
/// [`permissions`].
///
/// # Errors
///
/// The first review the API server refused or could not answer.
pub async fn missing(client: &kube::Client, rules: &Rules) -> Result<Vec<Permission>, kube::Error> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let all = permissions(rules);
    let reviews: Vec<SelfSubjectAccessReview> = all.iter().map(review).collect();
    let answers: Vec<bool> = futures::stream::iter(reviews.into_iter().map(move |asked| {
        let api = api.clone();
        async move {
            let answer = api.create(&PostParams::default(), &asked).await?;
            Ok::<_, kube::Error>(answer.status.is_some_and(|s| s.allowed))
        }
    }))
    .buffered(CONCURRENT_REVIEWS)
    .try_collect()
    .await?;
    Ok(all
        .into_iter()
        .zip(answers)
        .filter_map(|(permission, allowed)| (!allowed).then_some(permission))
        .collect())
}

/// The missing permissions as rules: in the `ClusterRole` or each namespace's `Role`, one
/// rule per group, resource and name with its verbs, ready for [`Rules::objects`].
#[must_use]
pub fn rules_of(missing: &[Permission]) -> Rules {
    type Key = (String, String, Option<String>, Option<String>);
    let mut grouped: BTreeMap<Option<String>, Vec<(Key, Vec<String>)>> = BTreeMap::new();
    for permission in missing {
        let key = (
            permission.group.clone(),
            permission.resource.clone(),
            permission.name.clone(),
            permission.url.clone(),
        );
        let rules = grouped.entry(permission.namespace.clone()).or_default();
        match rules.iter_mut().find(|(k, _)| *k == key) {
            Some((_, verbs)) => verbs.push(permission.verb.clone()),
            None => rules.push((key, vec![permission.verb.clone()])),
        }
    }
    let to_rule = |((group, resource, name, url), verbs): (Key, Vec<String>)| match url {
        Some(url) => PolicyRule {
            non_resource_urls: Some(vec![url]),
            verbs,
            ..PolicyRule::default()
        },
        None => PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(vec![resource]),
            resource_names: name.map(|n| vec![n]),
            verbs,
            non_resource_urls: None,
        },
    };
    let mut rules = Rules::default();
    for (namespace, grouped) in grouped {
        let converted: Vec<PolicyRule> = grouped.into_iter().map(to_rule).collect();
        match namespace {
            None => rules.cluster = converted,
            Some(namespace) => {
                rules.namespaces.insert(namespace, converted);
            }
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load_str, rbac};

    fn derived() -> Rules {
        let config = load_str(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\n\
             spec: {defaultNamespaces: {shop: {}}, byObject: [{apiVersion: v1, kind: Pod}]}\n",
        )
        .unwrap();
        rbac::Rules::derive(
            &config,
            &rbac::Options {
                lease: Some("informant".into()),
                ..rbac::Options::new("sys")
            },
        )
    }

    #[test]
    fn every_verb_resource_and_name_is_one_permission() {
        let all = permissions(&derived());
        let text: Vec<String> = all.iter().map(ToString::to_string).collect();
        for wanted in [
            "list pods in namespace shop",
            "watch pods in namespace shop",
            "create events in namespace shop",
            "get cacheconfigs.informant.dev \"c\" in namespace sys",
            "watch cacheconfigs.informant.dev \"c\" in namespace sys",
            "patch cacheconfigs.informant.dev/status \"c\" in namespace sys",
            "create leases.coordination.k8s.io in namespace sys",
            "update leases.coordination.k8s.io \"informant\" in namespace sys",
        ] {
            assert!(
                text.iter().any(|t| t == wanted),
                "{wanted} not in {text:#?}"
            );
        }
        let review = review(&all[0]);
        let attributes = review.spec.resource_attributes.unwrap();
        assert_eq!(attributes.namespace.as_deref(), Some("shop"));
        assert_eq!(
            (attributes.verb.as_deref(), attributes.resource.as_deref()),
            (Some("list"), Some("pods"))
        );
    }

    #[test]
    fn subresources_and_urls_become_review_attributes() {
        let status = Permission {
            namespace: Some("sys".into()),
            group: "informant.dev".into(),
            resource: "cacheconfigs/status".into(),
            name: Some("c".into()),
            url: None,
            verb: "patch".into(),
        };
        let attributes = review(&status).spec.resource_attributes.unwrap();
        assert_eq!(
            (
                attributes.resource.as_deref(),
                attributes.subresource.as_deref()
            ),
            (Some("cacheconfigs"), Some("status"))
        );
        let url = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz".into()]),
            ..PolicyRule::default()
        };
        let permission = &expand(&url, Some("ignored"))[0];
        assert_eq!(permission.to_string(), "get /healthz");
        assert_eq!(
            review(permission)
                .spec
                .non_resource_attributes
                .unwrap()
                .path
                .as_deref(),
            Some("/healthz")
        );
    }

    #[test]
    fn missing_permissions_fold_back_into_rules_by_place_and_resource() {
        let all = permissions(&derived());
        let missing: Vec<Permission> = all
            .into_iter()
            .filter(|p| p.resource == "pods" || p.resource == "cacheconfigs")
            .collect();
        let rules = rules_of(&missing);
        assert!(rules.cluster.is_empty());
        assert_eq!(rules.namespaces["shop"].len(), 1);
        assert_eq!(rules.namespaces["shop"][0].verbs, ["list", "watch"]);
        let sys = &rules.namespaces["sys"];
        assert_eq!(sys.len(), 1);
        assert_eq!(sys[0].verbs, ["get", "list", "watch"]);
        assert_eq!(sys[0].resource_names, Some(vec!["c".to_owned()]));
        assert_eq!(permissions(&rules), missing);
    }
}
