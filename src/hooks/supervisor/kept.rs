//! Why a valid hook controller is kept back from running: the manager's hook policy refuses
//! it, the cache's sharding by uid refuses a controller with related kinds, or one of its
//! kinds is not served yet (the cache tree's [`WantedKinds`]); and the supervisor's pass that
//! records it and stops a running controller whose kind went.

use std::collections::HashMap;
use std::sync::Arc;

use kube::core::GroupVersionKind;

use super::super::policy::{REASON_HOOK_NOT_ALLOWED, secret_ref};
use super::super::resource::{ControllerKey, ControllerSettings};
use super::{Desired, Running, Supervisor, controller_ref, deleting};
use crate::cache::{SharedCache, WantedKinds};
use crate::controller::Context;
use crate::recorder::EventType;
use crate::selector::ShardKey;
use crate::selector::Sharding;

/// The `Ready` reason of a controller whose kinds are not served yet.
pub(super) const REASON_WAITING_FOR_KIND: &str = crate::manager::REASON_WAITING_FOR_KIND;

/// How the `Ready` message of a controller whose kinds are not served starts.
pub(super) const WAITING_MESSAGE: &str = "not started until its kinds are served: ";

/// The `Ready` reason of a controller that owns or watches other kinds while the cache is
/// sharded by uid: the fix is the key `namespace`.
pub const REASON_NEEDS_SHARD_KEY_NAMESPACE: &str = "NeedsShardKeyNamespace";

/// The `Ready` reason of a controller with admission hooks (`spec.admission`) on a manager
/// without a webhook endpoint (`--webhook-service`).
pub const REASON_ADMISSION_NOT_SERVED: &str = "AdmissionNotServed";

/// The `Ready` reason of a controller with a conversion hook (`spec.conversion`) on a manager
/// without a webhook endpoint (`--webhook-service`).
pub const REASON_CONVERSION_NOT_SERVED: &str = "ConversionNotServed";

/// Why a valid controller does not run: its `Ready` reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Kept {
    /// The `Ready` reason.
    pub(super) reason: &'static str,
    /// The `Ready` message.
    pub(super) message: String,
}

/// Why each controller that does not run waits (a kind not served yet) or is refused (the
/// cache's sharding).
pub(super) type Waiting = HashMap<ControllerKey, Kept>;

/// The kinds each controller wants from the cache tree.
pub(super) type Wants = HashMap<ControllerKey, WantedKinds>;

/// The kinds of a controller of `settings`: `for`, `owns`, `watches`.
pub(super) fn kinds_of(settings: &ControllerSettings) -> Vec<GroupVersionKind> {
    let mut kinds: Vec<GroupVersionKind> = Vec::new();
    for gvk in std::iter::once(&settings.for_kind)
        .chain(&settings.owns)
        .chain(&settings.watches)
    {
        if !kinds.contains(gvk) {
            kinds.push(gvk.clone());
        }
    }
    kinds
}

/// Wants the kinds of every valid controller in `desired` that is not being deleted (an
/// invalid one keeps what its last valid spec wanted, since that spec keeps running), and
/// lets go of the rest.
pub(super) fn want_kinds(desired: &Desired, wants: &mut Wants, cache: &Arc<SharedCache>) {
    wants.retain(|name, wanted| match desired.get(name) {
        None => false,
        Some(Err(_)) => true,
        Some(Ok(valid)) => !deleting(valid) && wanted.kinds() == kinds_of(&valid.settings),
    });
    for (name, wanted) in desired {
        let Ok(valid) = wanted else { continue };
        if !deleting(valid) && !wants.contains_key(name) {
            wants.insert(name.clone(), cache.want(&kinds_of(&valid.settings)));
        }
    }
}

/// Why a controller of `settings` may not run on a cache sharded as `sharding`: it owns or
/// watches other kinds while objects are spread by uid, so an object's children and related
/// objects are cached (and reconciled) on other members than the object itself.
pub(super) fn sharding_refusal(
    sharding: Option<&Sharding>,
    settings: &ControllerSettings,
) -> Option<String> {
    if sharding?.key != ShardKey::Uid {
        return None;
    }
    let related: Vec<String> = settings
        .owns
        .iter()
        .chain(&settings.watches)
        .map(|gvk| format!("{} {}", gvk.api_version(), gvk.kind))
        .collect();
    if related.is_empty() {
        return None;
    }
    Some(format!(
        "not started: the CacheConfig shards by uid (spec.sharding.key: uid), so the objects \
         of the kinds this controller owns or watches ({}) are cached on other members than \
         the objects they relate to; set spec.sharding.key: namespace in the CacheConfig \
         (every object of a namespace on one member; a restart of every replica applies it), \
         or remove spec.owns and spec.watches",
        related.join(", ")
    ))
}

impl Supervisor {
    /// Why a valid controller of `settings` does not run now, or `None`: the sharding refuses
    /// it, or one of its kinds (`wanted`) is not served yet (or not looked up yet).
    pub(super) fn kept_back(
        &self,
        wanted: Option<&WantedKinds>,
        settings: &ControllerSettings,
    ) -> Option<Kept> {
        if let Some(rules) = self.policy.refusal(settings) {
            return Some(Kept {
                reason: REASON_HOOK_NOT_ALLOWED,
                message: format!("not started: the manager's hook policy refuses it: {rules}"),
            });
        }
        if self.secret_refs == super::SecretRefs::Refused
            && let Some((field, secret)) = secret_ref(settings)
        {
            return Some(Kept {
                reason: REASON_HOOK_NOT_ALLOWED,
                message: format!(
                    "not started: {field}.tls.clientCertSecretRef names Secret {secret:?}, which \
                     the manager reads only with --hook-allow-secrets"
                ),
            });
        }
        if settings.concurrency > self.max_concurrency {
            return Some(Kept {
                reason: REASON_HOOK_NOT_ALLOWED,
                message: format!(
                    "not started: spec.concurrency {} is over the manager's \
                     --hook-max-concurrency of {}; lower it",
                    settings.concurrency, self.max_concurrency
                ),
            });
        }
        if !settings.admission.is_empty() && !self.endpoint.served {
            // An admission hook nothing calls must not look active.
            return Some(Kept {
                reason: REASON_ADMISSION_NOT_SERVED,
                message: "not started: spec.admission needs the manager's webhook endpoint, \
                          which this manager does not serve (run it with --webhook-service, \
                          docs/webhooks.md), or remove spec.admission"
                    .to_owned(),
            });
        }
        if settings.conversion.is_some() && !self.endpoint.served {
            // A conversion hook nothing calls must not look active either.
            return Some(Kept {
                reason: REASON_CONVERSION_NOT_SERVED,
                message: "not started: spec.conversion needs the manager's webhook endpoint, \
                          which this manager does not serve (run it with --webhook-service, \
                          docs/webhooks.md), or remove spec.conversion"
                    .to_owned(),
            });
        }
        if settings.conversion.is_some() && self.endpoint.client_ca {
            // Every conversion would be refused at the TLS handshake: the CRD's reads fail.
            return Some(Kept {
                reason: REASON_CONVERSION_NOT_SERVED,
                message: "not started: spec.conversion cannot be served by a manager run with \
                          --webhook-client-ca: kube-apiserver calls conversion webhooks without \
                          a client certificate (its AdmissionConfiguration kubeconfig is for \
                          admission only), so every conversion would be refused; serve it from \
                          a manager without --webhook-client-ca, or remove spec.conversion"
                    .to_owned(),
            });
        }
        if let Some(message) = sharding_refusal(self.sharding.as_ref(), settings) {
            return Some(Kept {
                reason: REASON_NEEDS_SHARD_KEY_NAMESPACE,
                message,
            });
        }
        let reason = match wanted {
            Some(wanted) => wanted.waiting()?,
            None => "its kinds are not wanted from the cache yet".to_owned(),
        };
        Some(Kept {
            reason: REASON_WAITING_FOR_KIND,
            message: format!("{WAITING_MESSAGE}{reason}"),
        })
    }

    /// Records which valid controllers are kept back (saying so once each time one starts
    /// being kept back), and stops the running ones whose kind waits now (their CRD was
    /// deleted): they are started again by the pass after their kinds are served. Nothing is
    /// released: the controller comes back with its CRD.
    pub(super) async fn keep_back(
        &self,
        ctx: &Context,
        desired: &Desired,
        running: &mut HashMap<ControllerKey, Running>,
        waiting: &mut Waiting,
        wants: &Wants,
    ) {
        let before = std::mem::take(waiting);
        for (name, wanted) in desired {
            let Ok(valid) = wanted else { continue };
            let Some(kept) = self.kept_back(wants.get(name), &valid.settings) else {
                continue;
            };
            if let Some(r) = running.remove(name) {
                tracing::info!(controller = %name, reason = %kept.message, "a kind of the controller is not served any more, stopping it until it is");
                r.stop.cancel();
                let _ = r.task.await;
            }
            let told = before.get(name) == Some(&kept);
            if kept.reason == REASON_NEEDS_SHARD_KEY_NAMESPACE && !told {
                // A person must change the CacheConfig or the Controller.
                tracing::warn!(controller = %name, reason = kept.reason, "{}", kept.message);
            }
            if kept.reason == REASON_HOOK_NOT_ALLOWED && !told {
                // A person must change the Controller, or the manager's policy.
                tracing::warn!(controller = %name, reason = kept.reason, "{}", kept.message);
                if self.write_status && self.leads() {
                    ctx.recorder().record(
                        &controller_ref(valid),
                        EventType::Warning,
                        REASON_HOOK_NOT_ALLOWED,
                        &kept.message,
                    );
                }
            }
            waiting.insert(name.clone(), kept);
        }
    }
}
