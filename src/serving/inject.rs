//! [`CaInjector`]: writes the managed CA bundle into the `caBundle` of the webhook
//! configurations and CRD conversion webhooks the manager owns (cert-manager's cainjector,
//! for the certificates informant makes itself).
//!
//! ## RBAC
//!
//! `get` and `update` on the named `validatingwebhookconfigurations` and
//! `mutatingwebhookconfigurations` (`admissionregistration.k8s.io`); `get` and `patch` on
//! the named `customresourcedefinitions` (`apiextensions.k8s.io`).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::certificates::InjectTargets;
use super::error::{Error, Result};

/// One object [`CaInjector::inject`] looked at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A `ValidatingWebhookConfiguration`.
    Validating(String),
    /// A `MutatingWebhookConfiguration`.
    Mutating(String),
    /// A `CustomResourceDefinition`.
    Crd(String),
}

/// What [`CaInjector::inject`] did to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injection {
    /// Its bundle was written.
    Written,
    /// It already held the bundle: no request.
    Unchanged,
    /// It does not exist (yet): the next injection writes it.
    Missing,
    /// A CRD whose conversion strategy is not `Webhook`: it has no client config to trust.
    NoConversionWebhook,
}

/// Writes a CA bundle into the objects of its [`InjectTargets`].
#[derive(Clone)]
pub struct CaInjector {
    client: Client,
    targets: InjectTargets,
}

impl std::fmt::Debug for CaInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaInjector")
            .field("targets", &self.targets)
            .finish_non_exhaustive()
    }
}

fn api_error(action: String) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Api { action, source }
}

/// Sets `bundle` on every client config of `configs`; whether one changed.
fn set_bundle<'a>(
    configs: impl Iterator<Item = &'a mut WebhookClientConfig>,
    bundle: &[u8],
) -> bool {
    let mut changed = false;
    for config in configs {
        if config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(bundle) {
            config.ca_bundle = Some(ByteString(bundle.to_vec()));
            changed = true;
        }
    }
    changed
}

impl CaInjector {
    /// An injector writing into `targets` with `client`.
    #[must_use]
    pub fn new(client: Client, targets: InjectTargets) -> Self {
        Self { client, targets }
    }

    /// Writes `bundle` into every client config of the webhook configuration `name` of kind
    /// `K` (`configs` reaches them) unless each holds it already.
    async fn inject_configuration<K>(
        &self,
        name: &str,
        bundle: &[u8],
        configs: impl FnOnce(&mut K) -> Vec<&mut WebhookClientConfig>,
    ) -> Result<Injection>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let action = format!("write the caBundle of {} {name}", K::kind(&()));
        let Some(mut live) = api.get_opt(name).await.map_err(api_error(action.clone()))? else {
            return Ok(Injection::Missing);
        };
        if !set_bundle(configs(&mut live).into_iter(), bundle) {
            return Ok(Injection::Unchanged);
        }
        api.replace(name, &PostParams::default(), &live)
            .await
            .map_err(api_error(action))?;
        Ok(Injection::Written)
    }

    /// Writes `bundle` (PEM) into every target that does not hold it yet. A webhook
    /// configuration is replaced at the resourceVersion read (a concurrent change makes this
    /// fail, and the next call retries); a CRD gets a JSON merge patch of its conversion's
    /// `caBundle` only.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] naming the first object that could not be read or written; the targets
    /// before it are written.
    pub async fn inject(&self, bundle: &str) -> Result<Vec<(Target, Injection)>> {
        let bundle = bundle.as_bytes();
        let mut out = Vec::new();
        for name in &self.targets.validating {
            let done = self
                .inject_configuration::<ValidatingWebhookConfiguration>(name, bundle, |live| {
                    live.webhooks
                        .iter_mut()
                        .flatten()
                        .map(|w| &mut w.client_config)
                        .collect()
                })
                .await?;
            out.push((Target::Validating(name.clone()), done));
        }
        for name in &self.targets.mutating {
            let done = self
                .inject_configuration::<MutatingWebhookConfiguration>(name, bundle, |live| {
                    live.webhooks
                        .iter_mut()
                        .flatten()
                        .map(|w| &mut w.client_config)
                        .collect()
                })
                .await?;
            out.push((Target::Mutating(name.clone()), done));
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for name in &self.targets.crds {
            let action =
                format!("write the conversion caBundle of CustomResourceDefinition {name}");
            let done = match crds
                .get_opt(name)
                .await
                .map_err(api_error(action.clone()))?
            {
                None => Injection::Missing,
                Some(live) => {
                    let conversion = live.spec.conversion.as_ref();
                    let current = conversion
                        .and_then(|c| c.webhook.as_ref())
                        .and_then(|w| w.client_config.as_ref())
                        .and_then(|c| c.ca_bundle.as_ref());
                    if conversion.is_none_or(|c| c.strategy != "Webhook") {
                        Injection::NoConversionWebhook
                    } else if current.map(|b| b.0.as_slice()) == Some(bundle) {
                        Injection::Unchanged
                    } else {
                        let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {
                            "caBundle": ByteString(bundle.to_vec())
                        }}}}});
                        crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map_err(api_error(action))?;
                        Injection::Written
                    }
                }
            };
            out.push((Target::Crd(name.clone()), done));
        }
        Ok(out)
    }
}
