//! The webhook configurations the leader owns: one `ValidatingWebhookConfiguration` and one
//! `MutatingWebhookConfiguration`, named by [`WebhookOptions::configuration`], holding one
//! webhook per admission hook served ([`ServedHook`]), created, kept as declared (an edit by
//! hand is put back at the next pass) and deleted when no hook of their type is declared.
//!
//! Each webhook is named `<hook>.<controller>.<namespace>.admission.informant.dev`, names the
//! manager's Service with the hook's path, and has the hook's operations on its `for` kind
//! (the resource found by discovery), failure policy, timeout, selectors and conditions. A
//! hook without a `namespaceSelector` gets the `CacheConfig`'s scope: its namespaces by
//! `kubernetes.io/metadata.name`, or its `defaultNamespaceSelector`. The `caBundle` is the
//! managed certificates' bundle, or (mounted, cert-manager's) what cainjector wrote, kept.
//!
//! ## RBAC
//!
//! `get`, `create`, `update` and `delete` on the named `validatingwebhookconfigurations`
//! and `mutatingwebhookconfigurations` (`admissionregistration.k8s.io`), and `get` on the
//! managed certificates' Secret.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::GroupVersionKind;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::refused::{Failure, REFUSAL_ROUNDS, refused_entries, refused_hooks, registered};
use super::served::ServedHook;
use crate::cache::{NamespaceKey, Options as CacheOptions};
use crate::hooks::resource::{AdmissionHookStatus, AdmissionType, ControllerKey};
use crate::manager::WebhookOptions;
use crate::selector::Operator;
use crate::serving::{INJECT_CA_FROM_ANNOTATION, WebhookCertificates};

/// The label on the configurations the manager owns.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "informant");
/// The label kube-apiserver puts on every namespace, naming it (Kubernetes 1.22+).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What a pass over the owned configurations did, for a test or a log line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnedPass {
    /// Configurations created, updated or deleted (`Validating/<name>`, ...).
    pub written: Vec<String>,
    /// Hooks left out this pass, with why (their kind is not served yet).
    pub left_out: Vec<String>,
    /// Hooks whose webhook the API server refused (422), each with its `Controller`, its
    /// name and the API server's words about it; the others were registered without them.
    pub refused: Vec<(ControllerKey, String, String)>,
    /// Each `Controller`'s admission hooks as registered this pass (those whose kind is not
    /// served are not in it), by `Controller`.
    pub statuses: BTreeMap<ControllerKey, Vec<AdmissionHookStatus>>,
}

/// The leader's writer of the webhook configurations it owns.
pub struct OwnedConfigurations {
    client: kube::Client,
    options: WebhookOptions,
    resources: HashMap<GroupVersionKind, String>,
}

impl Debug for OwnedConfigurations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedConfigurations")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl OwnedConfigurations {
    /// The configurations of `options`, written through `client`.
    #[must_use]
    pub fn new(client: kube::Client, options: WebhookOptions) -> Self {
        Self {
            client,
            options,
            resources: HashMap::new(),
        }
    }

    /// Makes the owned configurations hold exactly the webhooks of `served`, with `scope`
    /// (the running `CacheConfig`'s cache) as the default namespace selector.
    ///
    /// # Errors
    /// The API server's refusal of a read or a write, said with what was being done.
    pub async fn keep<'a>(
        &mut self,
        served: impl IntoIterator<Item = &'a ServedHook>,
        scope: &CacheOptions,
    ) -> Result<OwnedPass, String> {
        let mut kept = OwnedPass::default();
        let bundle = self.bundle().await?;
        let default_namespaces = namespace_selector_of(scope);
        let mut validating = Vec::new();
        let mut mutating = Vec::new();
        let mut by_webhook = HashMap::new();
        for hook in served {
            let Some(resource) = self.resource(&hook.for_kind).await else {
                kept.left_out.push(format!(
                    "{}/{}/{}: kind {} is not served",
                    hook.controller.namespace,
                    hook.controller.name,
                    hook.hook.name,
                    hook.for_kind.kind
                ));
                continue;
            };
            let webhook = webhook(hook, &resource, &self.options, default_namespaces.as_ref());
            kept.statuses
                .entry(hook.controller.clone())
                .or_default()
                .push(registered(hook, &webhook));
            if let Some(name) = webhook["name"].as_str() {
                by_webhook.insert(
                    name.to_owned(),
                    (hook.controller.clone(), hook.hook.name.clone()),
                );
            }
            match hook.hook.type_ {
                AdmissionType::Validating => validating.push(webhook),
                AdmissionType::Mutating => mutating.push(webhook),
            }
        }
        let validating_api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let mutating_api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let name = self.options.configuration.clone();
        let (done, refused) = keep_one(
            &validating_api,
            &name,
            validating,
            bundle.as_ref(),
            self.annotation(),
        )
        .await?;
        kept.refused.extend(refused_hooks(refused, &by_webhook));
        if let Some(done) = done {
            kept.written
                .push(format!("ValidatingWebhookConfiguration/{name} {done}"));
        }
        let (done, refused) = keep_one(
            &mutating_api,
            &name,
            mutating,
            bundle.as_ref(),
            self.annotation(),
        )
        .await?;
        kept.refused.extend(refused_hooks(refused, &by_webhook));
        if let Some(done) = done {
            kept.written
                .push(format!("MutatingWebhookConfiguration/{name} {done}"));
        }
        for (controller, hook, why) in &kept.refused {
            let hooks = kept.statuses.entry(controller.clone()).or_default();
            for status in hooks.iter_mut().filter(|s| &s.name == hook) {
                status.registered = false;
                status.message = Some(format!("refused by the API server: {why}"));
            }
        }
        Ok(kept)
    }

    /// The cert-manager annotation to set, if any.
    fn annotation(&self) -> Option<&str> {
        match self.options.certificates {
            WebhookCertificates::Mounted { .. } => self.options.inject_ca_from.as_deref(),
            WebhookCertificates::Managed(_) => None,
        }
    }

    /// The managed certificates' CA bundle (PEM), `None` while the Secret is not made yet or
    /// with mounted certificates (then each webhook keeps the bundle it has).
    async fn bundle(&self) -> Result<Option<String>, String> {
        self.options
            .certificates
            .current_bundle(&self.client)
            .await
            .map_err(|e| crate::telemetry::error_chain(&e))
    }

    /// The resource (plural) of `gvk`, found by discovery once; `None` while it is not served.
    async fn resource(&mut self, gvk: &GroupVersionKind) -> Option<String> {
        if let Some(plural) = self.resources.get(gvk) {
            return Some(plural.clone());
        }
        match kube::discovery::pinned_kind(&self.client, gvk).await {
            Ok((resource, _)) => {
                self.resources.insert(gvk.clone(), resource.plural.clone());
                Some(resource.plural)
            }
            Err(e) => {
                tracing::debug!(kind = %gvk.kind, error = %e, "the kind of an admission hook is not served");
                None
            }
        }
    }
}

/// The namespaces a hook is called in: those of its `Controller`'s cache scope (`scope`;
/// `None`: every namespace) that the hook's own `namespaceSelector` (`declared`) selects too.
/// A `LabelSelector` is the AND of its requirements, so the two are joined: `scope`'s, then
/// `declared`'s `matchLabels` as `In` requirements and its `matchExpressions`. Whoever may
/// write a `Controller` cannot make the manager register a webhook on namespaces it does not
/// cache (a hook on `kube-system`'s Pods from a `Controller` caching `default`).
pub(crate) fn effective_namespaces(
    declared: Option<&LabelSelector>,
    scope: Option<&LabelSelector>,
) -> LabelSelector {
    let (Some(declared), Some(scope)) = (declared, scope) else {
        return declared.or(scope).cloned().unwrap_or_default();
    };
    let mut effective = scope.clone();
    let mut expressions = effective.match_expressions.take().unwrap_or_default();
    for (key, value) in declared.match_labels.iter().flatten() {
        expressions.push(LabelSelectorRequirement {
            key: key.clone(),
            operator: "In".to_owned(),
            values: Some(vec![value.clone()]),
        });
    }
    expressions.extend(declared.match_expressions.iter().flatten().cloned());
    effective.match_expressions = (!expressions.is_empty()).then_some(expressions);
    effective
}

/// The webhook of `hook` on `resource`, as JSON (the two configuration kinds share it; a
/// mutating one adds its reinvocation policy). Every field kube-apiserver defaults is set,
/// so that what is read back compares equal to what was written.
fn webhook(
    hook: &ServedHook,
    resource: &str,
    options: &WebhookOptions,
    default_namespaces: Option<&LabelSelector>,
) -> Value {
    let spec = &hook.hook;
    let gvk = &hook.for_kind;
    let mut service = options.service.clone();
    service.path = Some(hook.path.clone());
    let namespace_selector =
        effective_namespaces(spec.namespace_selector.as_ref(), default_namespaces);
    let mut webhook = json!({
        "name": crate::hooks::resource::webhook_name(
            &spec.name,
            (&hook.controller.namespace, &hook.controller.name),
        ),
        "clientConfig": {"service": service},
        "rules": [{
            "apiGroups": [gvk.group],
            "apiVersions": [gvk.version],
            "resources": [resource],
            "operations": spec.operations,
            "scope": "*",
        }],
        "failurePolicy": spec.failure_policy.as_str(),
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespace_selector,
        "objectSelector": spec.object_selector.clone().unwrap_or_default(),
        "sideEffects": "None",
        "timeoutSeconds": spec.timeout.as_secs(),
        "admissionReviewVersions": ["v1"],
    });
    if !spec.match_conditions.is_empty() {
        webhook["matchConditions"] = spec
            .match_conditions
            .iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect();
    }
    if spec.type_ == AdmissionType::Mutating {
        webhook["reinvocationPolicy"] = json!("Never");
    }
    webhook
}

/// The namespace selector of the cache's scope: its named namespaces, or its
/// `defaultNamespaceSelector`; `None` for every namespace (or a selector a `LabelSelector`
/// cannot say, `>` and `<`, said in the log).
fn namespace_selector_of(scope: &CacheOptions) -> Option<LabelSelector> {
    if let Some(selector) = &scope.default_namespace_selector {
        let mut expressions = Vec::new();
        for requirement in selector.requirements() {
            let (operator, values) = match requirement.operator() {
                Operator::In | Operator::Equals | Operator::DoubleEquals => {
                    ("In", Some(requirement.values().to_vec()))
                }
                Operator::NotIn | Operator::NotEquals => {
                    ("NotIn", Some(requirement.values().to_vec()))
                }
                Operator::Exists => ("Exists", None),
                Operator::DoesNotExist => ("DoesNotExist", None),
                Operator::GreaterThan | Operator::LessThan => {
                    tracing::warn!(requirement = %requirement.key(), "the CacheConfig's defaultNamespaceSelector uses > or <, which a webhook's namespaceSelector cannot say: admission hooks without their own namespaceSelector are called in every namespace");
                    return None;
                }
            };
            expressions.push(LabelSelectorRequirement {
                key: requirement.key().to_owned(),
                operator: operator.to_owned(),
                values,
            });
        }
        return Some(LabelSelector {
            match_expressions: Some(expressions),
            match_labels: None,
        });
    }
    let names: Vec<String> = scope
        .default_namespaces
        .keys()
        .map(|key| match key {
            NamespaceKey::Named(name) => Some(name.clone()),
            NamespaceKey::AllOthers => None,
        })
        .collect::<Option<Vec<_>>>()?;
    if names.is_empty() {
        return None;
    }
    Some(LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_owned(),
            operator: "In".to_owned(),
            values: Some(names),
        }]),
        match_labels: None,
    })
}

/// Keeps one configuration holding `webhooks`: created, replaced when it differs, deleted when
/// there are none. What was done, or `None`; and the webhooks the API server refused (by
/// name, with its words), which are left out so that the others are registered: a 422 names
/// each bad entry by its index (`webhooks[3].matchConditions[0].expression: …`), and the
/// write is made again without them, at most [`REFUSAL_ROUNDS`] times.
async fn keep_one<K>(
    api: &Api<K>,
    name: &str,
    mut webhooks: Vec<Value>,
    bundle: Option<&String>,
    inject_ca_from: Option<&str>,
) -> Result<(Option<&'static str>, Vec<(String, String)>), String>
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let mut refused = Vec::new();
    for _ in 0..REFUSAL_ROUNDS {
        match keep_once(api, name, webhooks.clone(), bundle, inject_ca_from).await {
            Ok(done) => return Ok((done, refused)),
            Err(Failure::Refused { text, message }) => {
                let bad = refused_entries(&message, webhooks.len());
                if bad.is_empty() {
                    return Err(text);
                }
                for (index, why) in bad.into_iter().rev() {
                    let entry = webhooks.remove(index);
                    let webhook = entry["name"].as_str().unwrap_or_default().to_owned();
                    refused.push((webhook, why));
                }
            }
            Err(Failure::Other(text)) => return Err(text),
        }
    }
    Err(format!(
        "the API server refused {} {name} {REFUSAL_ROUNDS} times, each time for other entries",
        K::kind(&())
    ))
}

/// One write of [`keep_one`].
async fn keep_once<K>(
    api: &Api<K>,
    name: &str,
    mut webhooks: Vec<Value>,
    bundle: Option<&String>,
    inject_ca_from: Option<&str>,
) -> Result<Option<&'static str>, Failure>
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let kind = K::kind(&());
    let failed =
        |verb: &str, e: kube::Error| Failure::of(format!("cannot {verb} {kind} {name}: {e}"), e);
    let live = api.get_opt(name).await.map_err(|e| failed("read", e))?;
    let live_value = live
        .as_ref()
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or(Value::Null);
    if webhooks.is_empty() {
        let Some(live) = live else { return Ok(None) };
        if !owned(&live_value) {
            return Ok(None);
        }
        let _ = live;
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(|e| failed("delete", e))?;
        return Ok(Some("deleted"));
    }
    // The bundle: the managed one, else what each webhook (or any) already has.
    let bundles: BTreeMap<String, Value> = live_value["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| {
            Some((
                w["name"].as_str()?.to_owned(),
                w["clientConfig"]["caBundle"].clone(),
            ))
        })
        .filter(|(_, b)| b.is_string())
        .collect();
    let any = bundles.values().next().cloned();
    for webhook in &mut webhooks {
        let ca = match bundle {
            Some(pem) => Some(json!(base64_encode(pem.as_bytes()))),
            None => webhook["name"]
                .as_str()
                .and_then(|n| bundles.get(n).cloned())
                .or_else(|| any.clone()),
        };
        if let Some(ca) = ca {
            webhook["clientConfig"]["caBundle"] = ca;
        }
    }
    let mut labels = live_value["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[MANAGED_BY.0] = json!(MANAGED_BY.1);
    let mut annotations = live_value["metadata"]["annotations"].clone();
    if !annotations.is_object() {
        annotations = json!({});
    }
    if let (Some(from), Some(map)) = (inject_ca_from, annotations.as_object_mut()) {
        map.insert(INJECT_CA_FROM_ANNOTATION.to_owned(), json!(from));
    }
    let annotations = absent_if_empty(annotations);
    let mut desired = json!({
        "apiVersion": K::api_version(&()),
        "kind": kind,
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "webhooks": webhooks,
    });
    // Through the typed object, as what is read back is.
    let built = |e: serde_json::Error| Failure::Other(format!("cannot build {kind} {name}: {e}"));
    let typed: K = serde_json::from_value(desired.clone()).map_err(built)?;
    desired = serde_json::to_value(&typed).map_err(built)?;
    match live {
        None => {
            api.create(&PostParams::default(), &typed)
                .await
                .map_err(|e| failed("create", e))?;
            Ok(Some("created"))
        }
        Some(live) => {
            let same = desired["webhooks"] == live_value["webhooks"]
                && desired["metadata"]["labels"] == live_value["metadata"]["labels"]
                && desired["metadata"]["annotations"] == live_value["metadata"]["annotations"];
            if same {
                return Ok(None);
            }
            let mut replacement = typed;
            *replacement.meta_mut() = live.meta().clone();
            let meta = replacement.meta_mut();
            meta.labels = serde_json::from_value(desired["metadata"]["labels"].clone()).ok();
            meta.annotations =
                serde_json::from_value(desired["metadata"]["annotations"].clone()).ok();
            api.replace(name, &PostParams::default(), &replacement)
                .await
                .map_err(|e| failed("update", e))?;
            Ok(Some("updated"))
        }
    }
}

/// An empty map as absent: kube-apiserver stores no `annotations: {}` (it reads back without
/// the field), so a desired `{}` would differ from every read and be written again each pass.
fn absent_if_empty(map: Value) -> Value {
    if map.as_object().is_some_and(serde_json::Map::is_empty) {
        Value::Null
    } else {
        map
    }
}

/// Whether a configuration carries the manager's label (one it did not make is not deleted).
fn owned(live: &Value) -> bool {
    live["metadata"]["labels"][MANAGED_BY.0] == MANAGED_BY.1
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cache::Config;
    use crate::hooks::resource::{ControllerKey, FailurePolicy, Hook};
    use crate::selector::LabelSelector as Selector;

    fn scope(namespaces: &[&str]) -> CacheOptions {
        let mut scope = CacheOptions::default();
        for name in namespaces {
            scope
                .default_namespaces
                .insert(NamespaceKey::named(name), Config::default());
        }
        scope
    }

    #[test]
    fn no_annotations_are_written_as_none_as_kube_apiserver_reads_them_back() {
        use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
        let desired = |annotations: Value| {
            let typed: MutatingWebhookConfiguration = serde_json::from_value(json!({
                "metadata": {"name": "w", "labels": {"a": "b"}, "annotations": absent_if_empty(annotations)},
            }))
            .unwrap();
            serde_json::to_value(&typed).unwrap()["metadata"]["annotations"].clone()
        };
        // kube-apiserver 1.37 returns a configuration written with `annotations: {}` without
        // the field: a desired `{}` differed from every read, and was replaced every 10 s.
        assert_eq!(desired(json!({})), Value::Null);
        assert_eq!(desired(json!({"k": "v"})), json!({"k": "v"}));
    }

    #[test]
    fn the_default_namespace_selector_is_the_cacheconfigs_scope() {
        assert_eq!(namespace_selector_of(&scope(&[])), None, "every namespace");
        let named = namespace_selector_of(&scope(&["shop", "ops"])).unwrap();
        assert_eq!(
            serde_json::to_value(&named).unwrap(),
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ops", "shop"]}]})
        );
        let mut others = scope(&["shop"]);
        others
            .default_namespaces
            .insert(NamespaceKey::AllOthers, Config::default());
        assert_eq!(
            namespace_selector_of(&others),
            None,
            "\"\" is every other namespace"
        );
        let mut selected = CacheOptions {
            default_namespace_selector: Some(
                Selector::parse("team in (shop,web),!legacy,tier!=batch").unwrap(),
            ),
            ..CacheOptions::default()
        };
        assert_eq!(
            serde_json::to_value(namespace_selector_of(&selected).unwrap()).unwrap(),
            // In the parsed selector's order: by key, as apimachinery sorts them.
            json!({"matchExpressions": [
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "team", "operator": "In", "values": ["shop", "web"]},
                {"key": "tier", "operator": "NotIn", "values": ["batch"]},
            ]})
        );
        selected.default_namespace_selector = Some(Selector::parse("rank>3").unwrap());
        assert_eq!(namespace_selector_of(&selected), None, "> cannot be said");
    }

    /// Issue 45, item 1: a `Controller` caching `default` declared a hook on `v1 Pod` with a
    /// `namespaceSelector` naming `kube-system`, and the manager registered it as written: the
    /// hook could mutate or deny every Pod of `kube-system`.
    #[test]
    fn a_hooks_namespaces_are_its_controllers_cache_scope_and_what_it_declares() {
        let kube_system: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kube-system"]}]}))
        .unwrap();
        let scope = namespace_selector_of(&scope(&["default"]));
        let effective = effective_namespaces(Some(&kube_system), scope.as_ref());
        assert_eq!(
            serde_json::to_value(&effective).unwrap(),
            json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]},
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kube-system"]},
            ]}),
            "both must hold: no namespace is both default and kube-system"
        );
        let matches = |namespace: &str| {
            let selector = crate::selector::LabelSelector::try_from(&effective).unwrap();
            let labels = BTreeMap::from([(
                "kubernetes.io/metadata.name".to_owned(),
                namespace.to_owned(),
            )]);
            selector.matches(&labels)
        };
        assert!(!matches("kube-system") && !matches("default"));
        // Labels declared narrow the scope as requirements.
        let team: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"team": "shop"}})).unwrap();
        assert_eq!(
            serde_json::to_value(effective_namespaces(Some(&team), scope.as_ref())).unwrap(),
            json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]},
                {"key": "team", "operator": "In", "values": ["shop"]},
            ]})
        );
        // A cluster-wide cache leaves what the hook declares; nothing declared, the scope.
        assert_eq!(effective_namespaces(Some(&team), None), team);
        assert_eq!(
            effective_namespaces(None, scope.as_ref()),
            scope.clone().unwrap()
        );
        assert_eq!(effective_namespaces(None, None), LabelSelector::default());
    }

    #[test]
    fn a_webhook_names_the_service_path_kind_and_what_the_hook_declares() {
        let served = ServedHook {
            controller: ControllerKey {
                namespace: "shop".to_owned(),
                name: "guard".to_owned(),
            },
            for_kind: GroupVersionKind::gvk("apps", "v1", "Deployment"),
            hook: crate::hooks::resource::AdmissionHook {
                name: "defaults".to_owned(),
                type_: AdmissionType::Mutating,
                operations: vec!["CREATE".to_owned()],
                hook: Hook::Exec {
                    env: Vec::new(),
                    command: vec!["/hooks/d".to_owned()],
                    timeout: Duration::from_secs(5),
                },
                failure_policy: FailurePolicy::Ignore,
                timeout: Duration::from_secs(5),
                namespace_selector: None,
                object_selector: None,
                match_conditions: vec![("a".to_owned(), "true".to_owned())],
            },
            path: "/admission/shop/guard/defaults".to_owned(),
        };
        let options = WebhookOptions::managed(([0, 0, 0, 0], 9443).into(), "ops", "hooks");
        let scope = namespace_selector_of(&scope(&["shop"]));
        let webhook = webhook(&served, "deployments", &options, scope.as_ref());
        assert_eq!(
            webhook,
            json!({
                "name": "defaults.guard.shop.admission.informant.dev",
                "clientConfig": {"service": {"namespace": "ops", "name": "hooks", "path": "/admission/shop/guard/defaults", "port": 443}},
                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["CREATE"], "scope": "*"}],
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]},
                "objectSelector": {},
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
                "matchConditions": [{"name": "a", "expression": "true"}],
                "reinvocationPolicy": "Never",
            })
        );
    }
}
