//! The admission hooks a manager serves: one [`Admitter`] per hook of each `Controller` it
//! would run, at `/admission/<namespace>/<controller>/<hook>` on its webhook endpoint
//! ([`WebhookRoutes`]), on every replica. Each set of `Controller`s ([`Desired`]) is followed
//! as the supervisor follows it: a new hook is served, a changed one is served anew (its
//! persistent process stopped), a removed one is no longer served, and an invalid
//! `Controller` keeps what its last valid spec served.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use kube::core::GroupVersionKind;

use super::Admitter;
use crate::hooks::metrics::HookMetrics;
use crate::hooks::policy::Policy;
use crate::hooks::resource::{AdmissionHook, ControllerKey};
use crate::hooks::routes::{HookRoutes, RouteHook};
use crate::hooks::supervisor::Desired;
use crate::serving::{
    DEFAULT_MAX_ADMISSION_BYTES, DEFAULT_MAX_IN_FLIGHT, Refusal, Route, WebhookRoutes, json_route,
};

/// The path of `controller`'s admission hook `hook` on the webhook endpoint.
#[must_use]
pub fn admission_path(controller: &ControllerKey, hook: &str) -> String {
    format!(
        "/admission/{}/{}/{hook}",
        controller.namespace, controller.name
    )
}

/// One admission hook served.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedHook {
    /// The `Controller`.
    pub controller: ControllerKey,
    /// Its `for` kind: what the hook is called for.
    pub for_kind: GroupVersionKind,
    /// The hook.
    pub hook: AdmissionHook,
    /// Where it is served.
    pub path: String,
}

/// The admission hooks served on one replica's webhook endpoint.
pub struct AdmissionRoutes {
    table: HookRoutes<ServedHook, Admitter>,
    policy: Arc<Policy>,
    client: Option<kube::Client>,
    metrics: Option<HookMetrics>,
    max_body: usize,
    max_in_flight: usize,
}

impl std::fmt::Debug for AdmissionRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionRoutes")
            .field(
                "paths",
                &self.table.served().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RouteHook for Admitter {
    fn label(&self) -> String {
        Admitter::label(self)
    }

    async fn stop(&self) {
        Admitter::stop(self).await;
    }
}

impl AdmissionRoutes {
    /// Serves on `routes`, each hook called under `policy` (a webhook hook's client
    /// certificate read through `client`), its decisions counted in `metrics`.
    #[must_use]
    pub fn new(
        routes: WebhookRoutes,
        policy: Arc<Policy>,
        client: Option<kube::Client>,
        metrics: Option<HookMetrics>,
    ) -> Self {
        Self {
            table: HookRoutes::new(routes, "admission"),
            policy,
            client,
            metrics,
            max_body: DEFAULT_MAX_ADMISSION_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// Reads reviews up to `bytes` (default [`DEFAULT_MAX_ADMISSION_BYTES`]); a larger one is answered
    /// 413 unread and counted as `too_large` (`--webhook-max-admission-bytes`).
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
    pub fn served(&self) -> impl Iterator<Item = &ServedHook> {
        self.table.served().map(|(_, hook)| hook)
    }

    /// Serves the admission hooks of `desired`: those of every valid `Controller` the hook
    /// policy allows and that is not being deleted; an invalid one keeps what it served.
    /// Stops the persistent processes of the hooks no longer served.
    pub async fn follow(&mut self, desired: &Desired) {
        let mut wanted: BTreeMap<String, ServedHook> = BTreeMap::new();
        for (key, entry) in desired {
            match entry {
                Ok(valid) => {
                    let settings = &valid.settings;
                    if valid.resource.metadata.deletion_timestamp.is_some()
                        || self.policy.refusal(settings).is_some()
                    {
                        continue;
                    }
                    for hook in &settings.admission {
                        let path = admission_path(key, &hook.name);
                        wanted.insert(
                            path.clone(),
                            ServedHook {
                                controller: key.clone(),
                                for_kind: settings.for_kind.clone(),
                                hook: hook.clone(),
                                path,
                            },
                        );
                    }
                }
                Err(_) => {
                    for (path, served) in self.table.served() {
                        if &served.controller == key {
                            wanted.insert(path.clone(), served.clone());
                        }
                    }
                }
            }
        }
        let (policy, client, metrics) = (&self.policy, &self.client, &self.metrics);
        let make = |want: &ServedHook| {
            Admitter::new(
                want.controller.clone(),
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

/// The route handler of `admitter` ([`json_route`]: the decision finishes, and its fate is
/// counted, even when the API server stops waiting).
/// A review over `max_body` is refused unread, its fate counted.
pub(super) fn handler(admitter: Arc<Admitter>, max_body: usize) -> Route {
    let counted = Arc::clone(&admitter);
    let answer = json_route(move |body: Bytes| {
        let admitter = Arc::clone(&admitter);
        async move { admitter.decide(&body).await.map(|decision| decision.review) }
    });
    Route::new(answer)
        .max_body(max_body)
        .on_refused(Arc::new(move |refusal: Refusal| counted.refused(refusal)))
}
