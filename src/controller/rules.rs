//! The RBAC rules a Rust controller needs ([`super::Controller::rules`]): read verbs on the
//! kinds it reconciles, owns and watches, and the writes it declares.

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::core::Resource;

/// The verbs the cache's informers use on a kind.
const READ: [&str; 3] = ["get", "list", "watch"];

/// A rule for `verbs` on `K` (on its `subresource`, e.g. `status`, when given).
pub(super) fn rule<K: Resource<DynamicType = ()>>(
    subresource: Option<&str>,
    verbs: &[&str],
) -> PolicyRule {
    let plural = K::plural(&());
    let resource = match subresource {
        Some(sub) => format!("{plural}/{sub}"),
        None => plural.into_owned(),
    };
    PolicyRule {
        api_groups: Some(vec![K::group(&()).into_owned()]),
        resources: Some(vec![resource]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The read rule of `K`: what its informers list and watch.
pub(super) fn read<K: Resource<DynamicType = ()>>() -> PolicyRule {
    rule::<K>(None, &READ)
}

/// `rules` with the rules of one group and resource merged (verbs in first-seen order), in
/// first-seen order.
pub(super) fn merged(rules: impl IntoIterator<Item = PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        match out
            .iter_mut()
            .find(|r| r.api_groups == rule.api_groups && r.resources == rule.resources)
        {
            Some(held) => {
                for verb in rule.verbs {
                    if !held.verbs.contains(&verb) {
                        held.verbs.push(verb);
                    }
                }
            }
            None => out.push(rule),
        }
    }
    out
}
