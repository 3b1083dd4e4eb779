//! Which admission hooks of the file's `Controller`s the API server would call for the object
//! of `informant explain --object`: those of the Controllers whose `for` kind is the object's
//! (group and kind), each said to be called, not called (and why), or called depending on what
//! `explain` cannot know offline: the namespace's labels (a `namespaceSelector`, the hook's or
//! the `CacheConfig`'s default namespaces it defaults to, as the manager registers it; known
//! with `--kubeconfig`), the object's labels (an
//! `objectSelector`; given with `--object-labels`), its CEL `matchConditions`. Mutating hooks
//! come first, as the API server calls them before the validating ones.

use std::collections::BTreeMap;

use informant::cache::{NamespaceKey, Options};
use informant::hooks::{AdmissionHook, AdmissionType, ControllerError, ValidatedController};
use informant::selector::{LabelSelector, Operator};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as WireSelector;
use kube::core::GroupVersionKind;

use super::super::exit::{self, Failure};

/// Labels by key.
pub(super) type Labels = BTreeMap<String, String>;

/// The object asked about, and what is known of it and its namespace.
pub(super) struct Object<'a> {
    /// Its kind.
    pub gvk: &'a GroupVersionKind,
    /// Whether its kind is namespaced.
    pub namespaced: bool,
    /// Its namespace (`None` for a cluster-scoped kind).
    pub namespace: Option<&'a str>,
    /// Its labels, when given (`--object-labels`).
    pub labels: Option<&'a Labels>,
    /// Every namespace's labels, when the cluster was asked (`--kubeconfig`).
    pub namespaces: Option<&'a BTreeMap<String, Labels>>,
}

/// Whether the API server would call a hook for the object.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Called {
    /// It would.
    Yes,
    /// It would not, and why.
    No(String),
    /// It would if each of these holds.
    Depends(Vec<String>),
}

/// One admission hook whose Controller is for the object's kind.
#[derive(Debug)]
pub(super) struct Applied {
    /// `<namespace>/<controller>`.
    pub controller: String,
    /// The hook.
    pub hook: AdmissionHook,
    /// Whether it is called.
    pub called: Called,
}

/// Parses `--object-labels KEY=VALUE,...`.
pub(super) fn parse_labels(text: &str) -> exit::Result<Labels> {
    let mut labels = Labels::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => {
                labels.insert(key.to_owned(), value.to_owned());
            }
            _ => {
                return Err(Failure::message(
                    exit::USAGE,
                    format!("--object-labels {text:?}: {pair:?} is not KEY=VALUE"),
                ));
            }
        }
    }
    Ok(labels)
}

/// The admission hooks of `controllers` for `object`, mutating first, in file order otherwise;
/// `options` is the `CacheConfig`'s scope, which bounds every hook's namespaces.
pub(super) fn for_object(
    controllers: &[Result<ValidatedController, ControllerError>],
    options: &Options,
    object: &Object<'_>,
) -> Vec<Applied> {
    let mut applied: Vec<Applied> = controllers
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .filter(|c| {
            let kind = &c.settings.for_kind;
            kind.group == object.gvk.group && kind.kind == object.gvk.kind
        })
        .flat_map(|c| {
            c.settings.admission.iter().map(|hook| Applied {
                controller: c.settings.key.to_string(),
                hook: hook.clone(),
                called: called(hook, options, object),
            })
        })
        .collect();
    applied.sort_by_key(|a| a.hook.type_ != AdmissionType::Mutating);
    applied
}

/// Whether `hook` is called for `object`: not called when one of its selectors says no;
/// otherwise called when nothing is left to know.
fn called(hook: &AdmissionHook, options: &Options, object: &Object<'_>) -> Called {
    let mut depends = Vec::new();
    // The manager registers a hook on its Controller's cache scope AND its own
    // namespaceSelector (hooks::admission::owned::effective_namespaces).
    let declared = hook
        .namespace_selector
        .as_ref()
        .map_or(Called::Yes, |selector| namespace_selector(selector, object));
    let checks = [
        cache_scope(options, object),
        declared,
        object_selector(hook.object_selector.as_ref(), object),
    ];
    for check in checks {
        match check {
            Called::No(why) => return Called::No(why),
            Called::Depends(more) => depends.extend(more),
            Called::Yes => {}
        }
    }
    if !hook.match_conditions.is_empty() {
        let names: Vec<&str> = hook
            .match_conditions
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        depends.push(format!(
            "its matchConditions hold (CEL, checked by the API server: {})",
            names.join(", ")
        ));
    }
    if depends.is_empty() {
        Called::Yes
    } else {
        Called::Depends(depends)
    }
}

/// `selector` as a label selector (validation checked its operators; a selector that still
/// does not convert is said as a condition).
fn convert(selector: &WireSelector) -> Result<LabelSelector, String> {
    LabelSelector::try_from(selector).map_err(|e| e.to_string())
}

/// Whether `labels` (when known) match `selector`, said of `whose` by `field`.
fn labels_match(
    selector: &LabelSelector,
    labels: Option<&Labels>,
    whose: &str,
    field: &str,
) -> Called {
    match labels {
        _ if selector.is_empty() => Called::Yes,
        Some(labels) if selector.matches(labels) => Called::Yes,
        Some(_) => Called::No(format!("{whose} labels do not match {field} {selector}")),
        None => Called::Depends(vec![format!("{whose} labels match {field} {selector}")]),
    }
}

/// The hook's own `namespaceSelector`, as the API server applies it: on the namespace's
/// labels; on a Namespace's own labels; not at all to other cluster-scoped objects.
fn namespace_selector(selector: &WireSelector, object: &Object<'_>) -> Called {
    let selector = match convert(selector) {
        Ok(selector) => selector,
        Err(e) => return Called::Depends(vec![format!("namespaceSelector ({e})")]),
    };
    if !object.namespaced {
        let is_namespace = object.gvk.group.is_empty() && object.gvk.kind == "Namespace";
        return if is_namespace {
            labels_match(
                &selector,
                object.labels,
                "the Namespace's",
                "namespaceSelector",
            )
        } else {
            Called::Yes
        };
    }
    let namespace = object.namespace.unwrap_or_default();
    match object.namespaces {
        None => labels_match(&selector, None, "the namespace's", "namespaceSelector"),
        Some(all) => match all.get(namespace) {
            None => Called::No(format!(
                "namespace {namespace} does not exist in the cluster"
            )),
            Some(labels) => labels_match(
                &selector,
                Some(labels),
                &format!("namespace {namespace}'s"),
                "namespaceSelector",
            ),
        },
    }
}

/// What a reason says of the `CacheConfig`'s scope.
const DEFAULT: &str = "which bounds every hook of its Controllers";

/// The namespaces every hook is bounded by, as the manager registers it: the
/// `CacheConfig`'s `defaultNamespaceSelector` when it has one (every namespace when it uses `>`
/// or `<`, which a webhook's selector cannot say), else its `defaultNamespaces` by name (every
/// namespace when empty or with the `""` key). Its `byObject` entries do not change it.
fn cache_scope(options: &Options, object: &Object<'_>) -> Called {
    let Some(namespace) = object.namespace.filter(|_| object.namespaced) else {
        return Called::Yes;
    };
    if let Some(selector) = &options.default_namespace_selector {
        let unsayable = selector
            .requirements()
            .iter()
            .any(|r| matches!(r.operator(), Operator::GreaterThan | Operator::LessThan));
        if unsayable {
            return Called::Yes;
        }
        return match object.namespaces.map(|all| all.get(namespace)) {
            Some(None) => Called::No(format!(
                "namespace {namespace} does not exist in the cluster"
            )),
            Some(Some(labels)) if selector.matches(labels) => Called::Yes,
            Some(Some(_)) => Called::No(format!(
                "namespace {namespace}'s labels do not match the CacheConfig's \
                 defaultNamespaceSelector {selector}, {DEFAULT}"
            )),
            None => Called::Depends(vec![format!(
                "the namespace's labels match the CacheConfig's defaultNamespaceSelector \
                 {selector} ({DEFAULT})"
            )]),
        };
    }
    let named = &options.default_namespaces;
    if named.is_empty()
        || named.contains_key(&NamespaceKey::AllOthers)
        || named.contains_key(&NamespaceKey::named(namespace))
    {
        Called::Yes
    } else {
        Called::No(format!(
            "namespace {namespace} is not among the CacheConfig's defaultNamespaces, {DEFAULT}"
        ))
    }
}

/// The hook's `objectSelector`, on the object's labels (`--object-labels`).
fn object_selector(selector: Option<&WireSelector>, object: &Object<'_>) -> Called {
    let Some(selector) = selector else {
        return Called::Yes;
    };
    match convert(selector) {
        Ok(selector) => labels_match(&selector, object.labels, "the object's", "objectSelector"),
        Err(e) => Called::Depends(vec![format!("objectSelector ({e})")]),
    }
}

/// The text of one hook: `  <ns>/<controller>/<hook>: <type> on <ops>, failurePolicy <p>: …`.
pub(super) fn line(applied: &Applied, failure_policy: &str) -> String {
    let hook = &applied.hook;
    let head = format!(
        "    {}/{}: {} on {}, failurePolicy {failure_policy}",
        applied.controller,
        hook.name,
        hook.type_.as_str(),
        hook.operations.join(",")
    );
    match &applied.called {
        Called::Yes => format!("{head}: called"),
        Called::No(why) => format!("{head}: not called: {why}"),
        Called::Depends(conditions) => {
            format!("{head}: called if {}", conditions.join("; and if "))
        }
    }
}

/// One hook as JSON: `called` is `yes`, `no` (with `reason`) or `depends` (with `dependsOn`).
pub(super) fn json(applied: &Applied, failure_policy: &str) -> serde_json::Value {
    let hook = &applied.hook;
    let mut value = serde_json::json!({
        "hook": format!("{}/{}", applied.controller, hook.name),
        "controller": applied.controller,
        "name": hook.name,
        "type": hook.type_.as_str(),
        "operations": hook.operations,
        "failurePolicy": failure_policy,
    });
    match &applied.called {
        Called::Yes => value["called"] = serde_json::json!("yes"),
        Called::No(why) => {
            value["called"] = serde_json::json!("no");
            value["reason"] = serde_json::json!(why);
        }
        Called::Depends(conditions) => {
            value["called"] = serde_json::json!("depends");
            value["dependsOn"] = serde_json::json!(conditions);
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use informant::cache::{ByObject, Config, Namespaces};
    use informant::hooks::{FailurePolicy, Hook};

    use super::*;

    fn hook() -> AdmissionHook {
        AdmissionHook {
            name: "h".to_owned(),
            type_: AdmissionType::Validating,
            operations: vec!["CREATE".to_owned()],
            hook: Hook::Exec {
                env: Vec::new(),
                command: vec!["true".to_owned()],
                timeout: Duration::from_secs(1),
            },
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            namespace_selector: None,
            object_selector: None,
            match_conditions: Vec::new(),
        }
    }

    fn wire(labels: &[(&str, &str)]) -> WireSelector {
        WireSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            match_expressions: None,
        }
    }

    #[test]
    fn the_default_scope_is_the_cache_configs_default_namespaces() {
        let pods = GroupVersionKind::gvk("", "v1", "Pod");
        let object = |namespace| Object {
            gvk: &pods,
            namespaced: true,
            namespace: Some(namespace),
            labels: None,
            namespaces: None,
        };
        // Every namespace by default.
        assert_eq!(
            called(&hook(), &Options::default(), &object("a")),
            Called::Yes
        );
        // Only the named ones; a byObject entry does not change what the manager registers.
        let options = Options::default()
            .with_default_namespace(NamespaceKey::named("a"), Config::default())
            .with_by_object(ByObject::new(pods.clone()).with_namespaces(Namespaces::All));
        assert_eq!(called(&hook(), &options, &object("a")), Called::Yes);
        assert!(
            matches!(called(&hook(), &options, &object("b")), Called::No(why) if why.starts_with("namespace b is not among the CacheConfig's defaultNamespaces"))
        );
        let others = options.with_default_namespace(NamespaceKey::AllOthers, Config::default());
        assert_eq!(called(&hook(), &others, &object("b")), Called::Yes);
        // A namespace selector needs the namespace's labels, unless the cluster gave them.
        let options = Options::default()
            .with_default_namespace_selector(LabelSelector::parse("team=shop").unwrap());
        assert!(
            matches!(called(&hook(), &options, &object("a")), Called::Depends(d) if d[0].contains("team=shop"))
        );
        let cluster = BTreeMap::from([
            (
                "a".to_owned(),
                Labels::from([("team".to_owned(), "shop".to_owned())]),
            ),
            ("b".to_owned(), Labels::new()),
        ]);
        let known = |namespace| Object {
            namespaces: Some(&cluster),
            ..object(namespace)
        };
        assert_eq!(called(&hook(), &options, &known("a")), Called::Yes);
        assert!(matches!(
            called(&hook(), &options, &known("b")),
            Called::No(_)
        ));
        assert!(
            matches!(called(&hook(), &options, &known("c")), Called::No(why) if why.contains("does not exist"))
        );
        // `>` cannot be registered: every namespace.
        let options = Options::default()
            .with_default_namespace_selector(LabelSelector::parse("rank>3").unwrap());
        assert_eq!(called(&hook(), &options, &known("b")), Called::Yes);
    }

    #[test]
    fn selectors_decide_on_the_labels_given_and_else_are_conditions() {
        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let labels = Labels::from([("app".to_owned(), "web".to_owned())]);
        let object = Object {
            gvk: &gvk,
            namespaced: true,
            namespace: Some("a"),
            labels: None,
            namespaces: None,
        };
        let mut selective = hook();
        selective.namespace_selector = Some(wire(&[("team", "shop")]));
        selective.object_selector = Some(wire(&[("app", "web")]));
        selective.match_conditions = vec![("not-system".to_owned(), "true".to_owned())];
        let Called::Depends(conditions) = called(&selective, &Options::default(), &object) else {
            panic!("three conditions")
        };
        assert_eq!(
            conditions,
            [
                "the namespace's labels match namespaceSelector team=shop",
                "the object's labels match objectSelector app=web",
                "its matchConditions hold (CEL, checked by the API server: not-system)",
            ]
        );
        let labelled = Object {
            labels: Some(&labels),
            ..object
        };
        selective.match_conditions.clear();
        selective.namespace_selector = Some(wire(&[]));
        assert_eq!(
            called(&selective, &Options::default(), &labelled),
            Called::Yes
        );
        selective.object_selector = Some(wire(&[("app", "db")]));
        assert_eq!(
            called(&selective, &Options::default(), &labelled),
            Called::No("the object's labels do not match objectSelector app=db".to_owned())
        );
        // A cluster-scoped object other than a Namespace is never skipped by a namespaceSelector.
        let nodes = GroupVersionKind::gvk("", "v1", "Node");
        let node = Object {
            gvk: &nodes,
            namespaced: false,
            namespace: None,
            labels: None,
            namespaces: None,
        };
        selective.object_selector = None;
        selective.namespace_selector = Some(wire(&[("team", "shop")]));
        assert_eq!(called(&selective, &Options::default(), &node), Called::Yes);
        assert!(parse_labels("a=1,b=").is_ok());
        assert_eq!(parse_labels("a").unwrap_err().code, exit::USAGE);
    }
}
