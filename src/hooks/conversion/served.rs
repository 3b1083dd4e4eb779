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
use kube::core::GroupVersionKind;

use super::Converter;
use crate::hooks::metrics::HookMetrics;
use crate::hooks::policy::Policy;
use crate::hooks::resource::{ControllerKey, ConversionHook};
use crate::hooks::routes::{HookRoutes, RouteHook};
use crate::hooks::supervisor::Desired;
use crate::serving::{
    DEFAULT_MAX_CONVERSION_BYTES, DEFAULT_MAX_IN_FLIGHT, Refusal, Route, WebhookRoutes, json_route,
};

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
    table: HookRoutes<ServedConversion, Converter>,
    policy: Arc<Policy>,
    client: Option<kube::Client>,
    metrics: Option<HookMetrics>,
    max_body: usize,
    max_in_flight: usize,
}

impl std::fmt::Debug for ConversionRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversionRoutes")
            .field(
                "paths",
                &self.table.served().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RouteHook for Converter {
    fn label(&self) -> String {
        Converter::label(self)
    }

    async fn stop(&self) {
        Converter::stop(self).await;
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
            table: HookRoutes::new(routes, "conversion"),
            policy,
            client,
            metrics,
            max_body: DEFAULT_MAX_CONVERSION_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// Reads reviews up to `bytes` (default [`DEFAULT_MAX_CONVERSION_BYTES`]); a larger one is answered
    /// 413 unread and counted as `too_large` (`--webhook-max-conversion-bytes`).
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Makes at most `answers` answers of each hook at once (default
    /// [`DEFAULT_MAX_IN_FLIGHT`]); a review past them is answered 429 unread and counted as
    /// `busy` (`--webhook-max-in-flight`).
    #[must_use]
    pub fn max_in_flight(mut self, answers: usize) -> Self {
        self.max_in_flight = answers;
        self
    }

    /// The hooks served now, by path.
    pub fn served(&self) -> impl Iterator<Item = &ServedConversion> {
        self.table.served().map(|(_, hook)| hook)
    }

    /// Serves the conversion hooks of `desired`: that of every valid `Controller` the hook
    /// policy allows and that is not being deleted; an invalid one keeps what it served.
    /// Stops the persistent processes of the hooks no longer served.
    pub async fn follow(&mut self, desired: &Desired) {
        let mut wanted: BTreeMap<String, ServedConversion> = BTreeMap::new();
        for (key, entry) in desired {
            let want = if let Ok(valid) = entry {
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
            } else {
                let path = conversion_path(key);
                let Some((_, served)) = self.table.served().find(|(served, _)| **served == path)
                else {
                    continue;
                };
                served.clone()
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
        let (policy, client, metrics) = (&self.policy, &self.client, &self.metrics);
        let make = |want: &ServedConversion| {
            Converter::new(
                want.controller.clone(),
                &want.for_kind.group,
                want.hook.clone(),
                Arc::clone(policy),
                client.as_ref(),
                metrics.clone(),
            )
        };
        let (max_body, max_in_flight) = (self.max_body, self.max_in_flight);
        self.table
            .serve(wanted, make, |hook| {
                handler(hook, max_body).max_in_flight(max_in_flight)
            })
            .await;
    }

    /// Stops serving every hook and stops their persistent processes.
    pub async fn stop(&mut self) {
        self.table.stop().await;
    }
}

/// The route handler of `converter` ([`json_route`]: the conversion finishes, and its fate is
/// counted, even when the API server stops waiting).
/// A review over `max_body` is refused unread, its fate counted.
fn handler(converter: Arc<Converter>, max_body: usize) -> Route {
    let counted = Arc::clone(&converter);
    let answer = json_route(move |body: Bytes| {
        let converter = Arc::clone(&converter);
        async move {
            converter
                .convert(&body)
                .await
                .map(|conversion| conversion.review)
        }
    });
    Route::new(answer)
        .max_body(max_body)
        .on_refused(Arc::new(move |refusal: Refusal| counted.refused(refusal)))
}
