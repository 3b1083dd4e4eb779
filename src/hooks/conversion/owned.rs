//! The CRD conversions the leader owns: for each conversion hook served
//! ([`ServedConversion`]), the CRD of its `for` kind (`<plural>.<group>`, the plural found by
//! discovery) gets `spec.conversion` `strategy: Webhook`, naming the manager's Service with the
//! hook's path, `conversionReviewVersions: [v1]` and the managed CA bundle (or, with mounted
//! certificates, the bundle cert-manager's cainjector wrote, kept, and its annotation). An
//! edit by hand is put back at the next pass. When a `Controller`'s conversion goes (edited
//! out, or the `Controller` removed), its CRD is put back to `strategy: None`, but only while
//! the CRD still names the manager's Service and that `Controller`'s path (another writer's
//! conversion is left alone).
//!
//! Written as JSON merge patches of `spec.conversion` alone, so the rest of the CRD (its
//! versions and schemas, which its installer owns) is never touched.
//!
//! ## RBAC
//!
//! `get` and `patch` on the named `customresourcedefinitions` (`apiextensions.k8s.io`), and
//! `get` on the managed certificates' Secret. Discovery (`get` on `/apis`, granted to every
//! authenticated user by `system:discovery`).

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::served::{ServedConversion, conversion_path};
use crate::hooks::resource::ControllerKey;
use crate::hooks::supervisor::Desired;
use crate::manager::WebhookOptions;
use crate::serving::{INJECT_CA_FROM_ANNOTATION, WebhookCertificates};

/// What a pass over the owned CRD conversions did, for a test or a log line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConversionPass {
    /// CRDs written (`<name> webhook`, `<name> none`).
    pub written: Vec<String>,
    /// Hooks left out this pass, with why (their kind is not served yet, no CA bundle yet).
    pub left_out: Vec<String>,
}

/// The leader's writer of the CRD conversions it owns.
pub struct OwnedCrds {
    client: kube::Client,
    options: WebhookOptions,
    /// CRD names by kind (group and kind), found by discovery.
    names: HashMap<(String, String), String>,
    /// The CRDs this replica set to call a hook, with the path: put back when the hook goes.
    set: BTreeMap<String, String>,
    /// The `Controller`s without conversion whose CRD was checked since this replica leads.
    checked: HashSet<(ControllerKey, GroupVersionKind)>,
}

impl std::fmt::Debug for OwnedCrds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedCrds")
            .field("set", &self.set)
            .finish_non_exhaustive()
    }
}

impl OwnedCrds {
    /// The CRD conversions of `options`' Service, written through `client`.
    #[must_use]
    pub fn new(client: kube::Client, options: WebhookOptions) -> Self {
        Self {
            client,
            options,
            names: HashMap::new(),
            set: BTreeMap::new(),
            checked: HashSet::new(),
        }
    }

    /// Forgets what was checked: a replica that leads again checks every CRD again.
    pub fn lost_leadership(&mut self) {
        self.checked.clear();
    }

    /// Makes the CRDs of `served` call their hooks, and puts back `strategy: None` on the CRDs
    /// whose hook went: those this replica set, and (once per leadership) those of the
    /// `Controller`s of `desired` without a conversion that still name their path.
    ///
    /// # Errors
    /// The API server's refusal of a read or a write, said with the CRD.
    pub async fn keep<'a>(
        &mut self,
        served: impl IntoIterator<Item = &'a ServedConversion>,
        desired: &Desired,
    ) -> Result<ConversionPass, String> {
        let mut pass = ConversionPass::default();
        let bundle = self.bundle().await?;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut now = BTreeMap::new();
        for hook in served {
            let Some(name) = self.crd_name(&hook.for_kind).await else {
                pass.left_out.push(format!(
                    "{}: kind {} is not served",
                    hook.controller, hook.for_kind.kind
                ));
                continue;
            };
            if bundle.is_none() && self.options.certificates.injects_ca_bundle() {
                pass.left_out.push(format!(
                    "{}: the managed CA bundle is not made yet",
                    hook.controller
                ));
                // Keep it: the CRD may have been set before.
                now.insert(name, hook.path.clone());
                continue;
            }
            if self
                .set_webhook(&api, &name, &hook.path, bundle.as_deref())
                .await?
            {
                pass.written.push(format!("{name} webhook"));
            }
            now.insert(name, hook.path.clone());
        }
        // Hooks gone since the last pass.
        let gone: Vec<(String, String)> = self
            .set
            .iter()
            .filter(|(name, _)| !now.contains_key(*name))
            .map(|(name, path)| (name.clone(), path.clone()))
            .collect();
        for (name, path) in gone {
            if self.put_back(&api, &name, &path).await? {
                pass.written.push(format!("{name} none"));
            }
        }
        // A conversion removed while another replica (or none) led: once per leadership.
        for (key, entry) in desired {
            let Ok(valid) = entry else { continue };
            let settings = &valid.settings;
            if settings.conversion.is_some()
                || !self
                    .checked
                    .insert((key.clone(), settings.for_kind.clone()))
                || !settings.for_kind.group.contains('.')
            {
                continue;
            }
            let Some(name) = self.crd_name(&settings.for_kind).await else {
                continue;
            };
            if !now.contains_key(&name) && self.put_back(&api, &name, &conversion_path(key)).await?
            {
                pass.written.push(format!("{name} none"));
            }
        }
        self.set = now;
        Ok(pass)
    }

    /// Sets `spec.conversion` of CRD `name` to call `path`, unless it already does; whether
    /// it wrote.
    async fn set_webhook(
        &self,
        api: &Api<CustomResourceDefinition>,
        name: &str,
        path: &str,
        bundle: Option<&str>,
    ) -> Result<bool, String> {
        let live = read(api, name).await?;
        let Some(live) = live else {
            return Ok(false);
        };
        let mut service = serde_json::to_value(&self.options.service)
            .map_err(|e| format!("cannot write the Service of CRD {name}: {e}"))?;
        service["path"] = json!(path);
        let ca_bundle = match bundle {
            Some(pem) => json!(base64_encode(pem.as_bytes())),
            // Mounted: what cainjector wrote.
            None => live["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"].clone(),
        };
        let mut client_config = json!({"service": service});
        if !ca_bundle.is_null() {
            client_config["caBundle"] = ca_bundle;
        }
        let desired = json!({
            "strategy": "Webhook",
            "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]},
        });
        let annotation = match &self.options.certificates {
            WebhookCertificates::Mounted { .. } => self.options.inject_ca_from.as_deref(),
            WebhookCertificates::Managed(_) => None,
        };
        let annotated = annotation.is_none_or(|from| {
            live["metadata"]["annotations"][INJECT_CA_FROM_ANNOTATION].as_str() == Some(from)
        });
        if live["spec"]["conversion"] == desired && annotated {
            return Ok(false);
        }
        let mut conversion = desired;
        // Merge patch: drop a `url` someone else set.
        conversion["webhook"]["clientConfig"]["url"] = Value::Null;
        let mut merge = json!({"spec": {"conversion": conversion}});
        if let Some(from) = annotation {
            merge["metadata"] = json!({"annotations": {INJECT_CA_FROM_ANNOTATION: from}});
        }
        api.patch(name, &PatchParams::default(), &Patch::Merge(&merge))
            .await
            .map_err(|e| format!("cannot set the conversion of CRD {name}: {e}"))?;
        tracing::info!(crd = %name, %path, "CRD conversion set to the manager's conversion hook");
        Ok(true)
    }

    /// Puts CRD `name` back to `strategy: None` when it still calls the manager's Service at
    /// `path`; whether it wrote.
    async fn put_back(
        &self,
        api: &Api<CustomResourceDefinition>,
        name: &str,
        path: &str,
    ) -> Result<bool, String> {
        let Some(live) = read(api, name).await? else {
            return Ok(false);
        };
        let conversion = &live["spec"]["conversion"];
        let service = &conversion["webhook"]["clientConfig"]["service"];
        let ours = conversion["strategy"] == "Webhook"
            && service["namespace"] == self.options.service.namespace.as_str()
            && service["name"] == self.options.service.name.as_str()
            && service["path"] == path;
        if !ours {
            return Ok(false);
        }
        let merge = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&merge))
            .await
            .map_err(|e| format!("cannot put back the conversion of CRD {name}: {e}"))?;
        tracing::info!(crd = %name, "CRD conversion put back to strategy None: its hook is no longer declared");
        Ok(true)
    }

    /// The managed certificates' CA bundle (PEM), `None` while the Secret is not made yet or
    /// with mounted certificates.
    async fn bundle(&self) -> Result<Option<String>, String> {
        self.options
            .certificates
            .current_bundle(&self.client)
            .await
            .map_err(|e| crate::telemetry::error_chain(&e))
    }

    /// The name of the CRD of `gvk` (`<plural>.<group>`), found by discovery once; `None`
    /// while the kind is not served.
    async fn crd_name(&mut self, gvk: &GroupVersionKind) -> Option<String> {
        let key = (gvk.group.clone(), gvk.kind.clone());
        if let Some(name) = self.names.get(&key) {
            return Some(name.clone());
        }
        match kube::discovery::pinned_kind(&self.client, gvk).await {
            Ok((resource, _)) => {
                let name = format!("{}.{}", resource.plural, gvk.group);
                self.names.insert(key, name.clone());
                Some(name)
            }
            Err(e) => {
                tracing::debug!(kind = %gvk.kind, error = %e, "the kind of a conversion hook is not served");
                None
            }
        }
    }
}

/// CRD `name` as JSON, `None` when it does not exist.
async fn read(api: &Api<CustomResourceDefinition>, name: &str) -> Result<Option<Value>, String> {
    let live = api
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read CRD {name}: {e}"))?;
    Ok(live.and_then(|l| serde_json::to_value(l).ok()))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
