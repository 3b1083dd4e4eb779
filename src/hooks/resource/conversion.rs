//! `spec.conversion`: the conversion hook of a `Controller` whose `for` kind is a custom
//! resource served at several versions (controller-runtime's hub-and-spoke converter,
//! shell-operator's `kubernetesCustomResourceConversion`), declared on the `Controller`
//! because the kind, the hook and the hook policy are already there.
//!
//! The wire form ([`ConversionSpec`]) and what a valid one becomes ([`ConversionHook`]); the
//! conversion itself is `crate::hooks::conversion`.

use std::collections::HashSet;

use kube::core::GroupVersionKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::types::{Hook, HookSpec};
use crate::config::{FieldError, FieldPath};

/// The conversion hook of a `Controller`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversionSpec {
    /// The versions of the `for` kind the hook converts between (at least two, the `for`
    /// version among them), as the CRD's `spec.versions[].name`.
    pub versions: Vec<String>,
    /// Hub-and-spoke: the hook converts only between this version (one of `versions`) and
    /// each other one; informant converts spoke to spoke through the hub, in two calls.
    /// Default: none, the hook converts between any two of `versions` (pairwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// The hook to call: exactly one of `exec` or `webhook`. Default: the `Controller`'s
    /// `spec.hook`, which then tells the calls apart by their `conversion` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookSpec>,
}

/// A valid conversion hook.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversionHook {
    /// The versions converted between, each once.
    pub versions: Vec<String>,
    /// The hub, if hub-and-spoke.
    pub hub: Option<String>,
    /// The hook called.
    pub hook: Hook,
}

impl ConversionHook {
    /// The calls that take an object at version `from` to version `to`, each `(from, to)`:
    /// none when they are equal, one pairwise or to or from the hub, two spoke to spoke (to
    /// the hub, then from it). `None` when either version is not one the hook converts.
    #[must_use]
    pub fn steps(&self, from: &str, to: &str) -> Option<Vec<(String, String)>> {
        if !self.versions.iter().any(|v| v == from) || !self.versions.iter().any(|v| v == to) {
            return None;
        }
        if from == to {
            return Some(Vec::new());
        }
        let step = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        Some(match self.hub.as_deref() {
            Some(hub) if from != hub && to != hub => vec![step(from, hub), step(hub, to)],
            _ => vec![step(from, to)],
        })
    }
}

/// Why `group` is not the group of a custom resource, or `None`: a CRD's group has a dot
/// (apiextensions' validation) and is not one of Kubernetes' own (`*.k8s.io`,
/// `*.kubernetes.io`), so the core group and `apps`, `batch`, ... are built-in.
fn builtin_group_problem(group: &str) -> Option<String> {
    if group.is_empty() {
        return Some("the core group (v1) is built in".to_owned());
    }
    if !group.contains('.') {
        return Some(format!(
            "group {group:?} is built in (a CRD's group has a dot)"
        ));
    }
    if group.ends_with(".k8s.io") || group.ends_with(".kubernetes.io") {
        return Some(format!("group {group:?} is Kubernetes' own"));
    }
    None
}

/// Why `version` cannot name a CRD version (a DNS label starting with a letter), or `None`.
fn version_problem(version: &str) -> Option<&'static str> {
    let ok = !version.is_empty()
        && version.len() <= 63
        && version.starts_with(|c: char| c.is_ascii_lowercase())
        && version.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!ok).then_some("a version is a DNS label starting with a letter, e.g. v1, v1alpha1 or v2beta3")
}

/// The conversion hook of `spec`, every error at once in `errors`; `for_kind` is the
/// `Controller`'s (`None` when it is invalid: its own error is already said), `default_hook`
/// its hook (`None` when invalid).
pub(super) fn validate(
    spec: Option<&ConversionSpec>,
    for_kind: Option<&GroupVersionKind>,
    default_hook: Option<&Hook>,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
    hook: impl Fn(&HookSpec, &FieldPath, &mut Vec<FieldError>) -> Option<Hook>,
) -> Option<ConversionHook> {
    let spec = spec?;
    let before = errors.len();
    if let Some(for_kind) = for_kind
        && let Some(problem) = builtin_group_problem(&for_kind.group)
    {
        errors.push(FieldError::new(
            &FieldPath::root("spec").field("for").field("apiVersion"),
            format!(
                "conversion is for custom resources: {problem}; a conversion hook converts \
                 the versions of a CRD"
            ),
        ));
    }
    let versions_path = path.field("versions");
    let mut seen = HashSet::new();
    let mut versions = Vec::new();
    for (i, version) in spec.versions.iter().enumerate() {
        if let Some(problem) = version_problem(version) {
            errors.push(FieldError::new(
                &versions_path.index(i),
                format!("invalid version {version:?}: {problem}"),
            ));
        } else if !seen.insert(version.as_str()) {
            errors.push(FieldError::new(
                &versions_path.index(i),
                format!("{version} is listed twice"),
            ));
        } else {
            versions.push(version.clone());
        }
    }
    if spec.versions.len() < 2 {
        errors.push(FieldError::new(
            &versions_path,
            "list at least two versions: a conversion converts between versions",
        ));
    }
    if let Some(for_kind) = for_kind
        && !spec.versions.is_empty()
        && !spec.versions.contains(&for_kind.version)
    {
        errors.push(FieldError::new(
            &versions_path,
            format!(
                "does not list {}, the version of spec.for; list it",
                for_kind.version
            ),
        ));
    }
    if let Some(hub) = &spec.hub
        && !spec.versions.contains(hub)
    {
        errors.push(FieldError::new(
            &path.field("hub"),
            format!(
                "{hub:?} is not one of versions ({}); the hub is one of the versions",
                spec.versions.join(", ")
            ),
        ));
    }
    let called = match &spec.hook {
        Some(own) => hook(own, &path.field("hook"), errors),
        None => default_hook.cloned(),
    };
    let called = called?;
    (errors.len() == before).then(|| ConversionHook {
        versions,
        hub: spec.hub.clone(),
        hook: called,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(versions: &[&str], hub: Option<&str>) -> ConversionHook {
        ConversionHook {
            versions: versions.iter().map(|v| (*v).to_owned()).collect(),
            hub: hub.map(str::to_owned),
            hook: Hook::Exec {
                env: Vec::new(),
                command: vec!["/bin/true".to_owned()],
                timeout: std::time::Duration::from_secs(1),
            },
        }
    }

    fn step(a: &str, b: &str) -> (String, String) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn hub_and_spoke_goes_through_the_hub_and_pairwise_goes_straight() {
        let hub = hook(&["v1alpha1", "v1beta1", "v1"], Some("v1"));
        assert_eq!(hub.steps("v1", "v1"), Some(vec![]));
        assert_eq!(
            hub.steps("v1alpha1", "v1"),
            Some(vec![step("v1alpha1", "v1")])
        );
        assert_eq!(
            hub.steps("v1", "v1beta1"),
            Some(vec![step("v1", "v1beta1")])
        );
        assert_eq!(
            hub.steps("v1alpha1", "v1beta1"),
            Some(vec![step("v1alpha1", "v1"), step("v1", "v1beta1")])
        );
        assert_eq!(hub.steps("v2", "v1"), None);
        let pairwise = hook(&["v1alpha1", "v1beta1", "v1"], None);
        assert_eq!(
            pairwise.steps("v1alpha1", "v1beta1"),
            Some(vec![step("v1alpha1", "v1beta1")])
        );
    }

    fn errors_of(api_version: &str, conversion: &serde_json::Value) -> Vec<String> {
        let controller: super::super::Controller = serde_json::from_value(serde_json::json!({
            "apiVersion": "informant.dev/v1alpha1", "kind": "Controller",
            "metadata": {"name": "widgets", "namespace": "default"},
            "spec": {
                "for": {"apiVersion": api_version, "kind": "Widget"},
                "hook": {"exec": {"command": ["/hooks/widgets"]}},
                "conversion": conversion,
            },
        }))
        .unwrap();
        match super::super::validate_controller(&controller, None) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn every_conversion_error_is_said_at_once_with_its_path() {
        let errors = errors_of(
            "apps/v1",
            &serde_json::json!({"versions": ["v1", "V2", "v1"], "hub": "v3",
                                "hook": {"exec": {"command": []}}}),
        );
        let starts = [
            "spec.for.apiVersion: conversion is for custom resources: group \"apps\" is built in",
            "spec.conversion.versions[1]: invalid version \"V2\"",
            "spec.conversion.versions[2]: v1 is listed twice",
            "spec.conversion.hub: \"v3\" is not one of versions",
            "spec.conversion.hook.exec.command: required",
        ];
        assert_eq!(errors.len(), starts.len(), "{errors:#?}");
        for (error, start) in errors.iter().zip(starts) {
            assert!(
                error.starts_with(start),
                "{error} does not start with {start}"
            );
        }
        let errors = errors_of(
            "conv.test.informant.dev/v1",
            &serde_json::json!({"versions": ["v1alpha1"]}),
        );
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].starts_with("spec.conversion.versions: list at least two versions"));
        assert!(errors[1].starts_with("spec.conversion.versions: does not list v1"));
        assert!(
            errors_of(
                "conv.test.informant.dev/v1",
                &serde_json::json!({"versions": ["v1alpha1", "v1"], "hub": "v1"})
            )
            .is_empty()
        );
    }

    #[test]
    fn builtin_groups_are_told_apart_from_custom_ones() {
        for builtin in ["", "apps", "batch", "networking.k8s.io", "x.kubernetes.io"] {
            assert!(builtin_group_problem(builtin).is_some(), "{builtin}");
        }
        assert_eq!(builtin_group_problem("conv.test.informant.dev"), None);
    }
}
