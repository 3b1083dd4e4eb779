//! The conversion hooks a manager serves: one [`Converter`] per `Controller` with
//! `spec.conversion` it would run, at `/conversion/<namespace>/<controller>` on its webhook
//! endpoint ([`WebhookRoutes`]), on every replica. Each set of `Controller`s ([`Desired`]) is
//! followed as the admission hooks are: a new hook is served, a changed one is served anew
//! (its persistent process stopped), a removed one is no longer served, and an invalid
//! `Controller` keeps what its last valid spec served. Two `Controller`s converting the same
//! kind: the first (by namespace and name) is served, the other said in the log.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use kube::core::GroupVersionKind;

use super::Converter;
use crate::hooks::metrics::HookMetrics;
use crate::hooks::policy::Policy;
use crate::hooks::resource::{ControllerKey, ConversionHook};
use crate::hooks::supervisor::Desired;
use crate::serving::{RouteHandler, WebhookRoutes};

/// The path of `controller`'s conversion hook on the webhook endpoint.
#[must_use]
pub fn conversion_path(controller: &ControllerKey) -> String {
    format!("/conversion/{}/{}", controller.namespace, controller.name)
}

/// One conversion hook served.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedConversion {
    /// The `Controller`.
    pub controller: ControllerKey,
    /// Its `for` kind: the custom resource converted.
    pub for_kind: GroupVersionKind,
    /// The hook.
    pub hook: ConversionHook,
    /// Where it is served.
    pub path: String,
}

/// The conversion hooks served on one replica's webhook endpoint.
pub struct ConversionRoutes {
    routes: WebhookRoutes,
    policy: Arc<Policy>,
    client: Option<kube::Client>,
    metrics: Option<HookMetrics>,
    served: BTreeMap<String, (ServedConversion, Arc<Converter>)>,
}

impl std::fmt::Debug for ConversionRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversionRoutes")
            .field("paths", &self.served.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ConversionRoutes {
    /// Serves on `routes`, each hook called under `policy` (a webhook hook's client
    /// certificate read through `client`), its reviews counted in `metrics`.
    #[must_use]
    pub fn new(
        routes: WebhookRoutes,
        policy: Arc<Policy>,
        client: Option<kube::Client>,
        metrics: Option<HookMetrics>,
    ) -> Self {
        Self {
            routes,
            policy,
            client,
            metrics,
            served: BTreeMap::new(),
        }
    }

    /// The hooks served now, by path.
    pub fn served(&self) -> impl Iterator<Item = &ServedConversion> {
        self.served.values().map(|(hook, _)| hook)
    }

    /// Serves the conversion hooks of `desired`: that of every valid `Controller` the hook
    /// policy allows and that is not being deleted; an invalid one keeps what it served.
    /// Stops the persistent processes of the hooks no longer served.
    pub async fn follow(&mut self, desired: &Desired) {
        let mut wanted: BTreeMap<String, ServedConversion> = BTreeMap::new();
        for (key, entry) in desired {
            let want = match entry {
                Ok(valid) => {
                    let settings = &valid.settings;
                    let Some(hook) = &settings.conversion else {
                        continue;
                    };
                    if valid.resource.metadata.deletion_timestamp.is_some()
                        || self.policy.refusal(settings).is_some()
                    {
                        continue;
                    }
                    ServedConversion {
                        controller: key.clone(),
                        for_kind: settings.for_kind.clone(),
                        hook: hook.clone(),
                        path: conversion_path(key),
                    }
                }
                Err(_) => match self.served.get(&conversion_path(key)) {
                    Some((served, _)) => served.clone(),
                    None => continue,
                },
            };
            if let Some(first) = wanted.values().find(|w| {
                w.for_kind.group == want.for_kind.group && w.for_kind.kind == want.for_kind.kind
            }) {
                tracing::warn!(controller = %key, first = %first.controller, kind = %want.for_kind.kind,
                    "two controllers declare the conversion of one kind: only the first is served");
                continue;
            }
            wanted.insert(want.path.clone(), want);
        }
        let mut stopped = Vec::new();
        let gone: Vec<String> = self
            .served
            .iter()
            .filter(|(path, (served, _))| wanted.get(*path).is_none_or(|want| want != served))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            if let Some((served, converter)) = self.served.remove(&path) {
                self.routes.remove(&path);
                tracing::info!(hook = %converter.label(), kind = %served.for_kind.kind, "conversion hook no longer served as it was");
                stopped.push(converter);
            }
        }
        for (path, want) in wanted {
            if self.served.contains_key(&path) {
                continue;
            }
            let converter = Arc::new(Converter::new(
                want.controller.clone(),
                &want.for_kind.group,
                want.hook.clone(),
                Arc::clone(&self.policy),
                self.client.as_ref(),
                self.metrics.clone(),
            ));
            if let Err(e) = self.routes.set(&path, handler(Arc::clone(&converter))) {
                // The path is built from names validation keeps DNS-safe.
                tracing::warn!(%path, error = %e, "cannot serve the conversion hook");
                continue;
            }
            tracing::info!(hook = %converter.label(), kind = %want.for_kind.kind, %path, "serving conversion hook");
            self.served.insert(path, (want, converter));
        }
        for converter in stopped {
            converter.stop().await;
        }
    }

    /// Stops serving every hook and stops their persistent processes.
    pub async fn stop(&mut self) {
        for (path, (_, converter)) in std::mem::take(&mut self.served) {
            self.routes.remove(&path);
            converter.stop().await;
        }
    }
}

/// The route handler of `converter`: the review's answer, or a 400 for a body that is not a
/// review (no conversion was asked for: no fate).
fn handler(converter: Arc<Converter>) -> RouteHandler {
    Arc::new(move |body: Bytes| {
        let converter = Arc::clone(&converter);
        Box::pin(async move {
            match converter.convert(&body).await {
                Ok(conversion) => axum::Json(conversion.review).into_response(),
                Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
            }
        })
    })
}
