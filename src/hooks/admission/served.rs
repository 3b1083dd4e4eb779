//! The admission hooks a manager serves: one [`Admitter`] per hook of each `Controller` it
//! would run, at `/admission/<namespace>/<controller>/<hook>` on its webhook endpoint
//! ([`WebhookRoutes`]), on every replica. Each set of `Controller`s ([`Desired`]) is followed
//! as the supervisor follows it: a new hook is served, a changed one is served anew (its
//! persistent process stopped), a removed one is no longer served, and an invalid
//! `Controller` keeps what its last valid spec served.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use kube::core::GroupVersionKind;

use super::Admitter;
use crate::hooks::metrics::HookMetrics;
use crate::hooks::policy::Policy;
use crate::hooks::resource::{AdmissionHook, ControllerKey};
use crate::hooks::supervisor::Desired;
use crate::serving::{RouteHandler, WebhookRoutes};

/// The path of `controller`'s admission hook `hook` on the webhook endpoint.
#[must_use]
pub fn admission_path(controller: &ControllerKey, hook: &str) -> String {
    format!(
        "/admission/{}/{}/{hook}",
        controller.namespace, controller.name
    )
}

/// One admission hook served.
#[derive(Clone, Debug)]
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
    routes: WebhookRoutes,
    policy: Arc<Policy>,
    client: Option<kube::Client>,
    metrics: Option<HookMetrics>,
    served: BTreeMap<String, (ServedHook, Arc<Admitter>)>,
}

impl std::fmt::Debug for AdmissionRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionRoutes")
            .field("paths", &self.served.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
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
            routes,
            policy,
            client,
            metrics,
            served: BTreeMap::new(),
        }
    }

    /// The hooks served now, by path.
    pub fn served(&self) -> impl Iterator<Item = &ServedHook> {
        self.served.values().map(|(hook, _)| hook)
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
                    for (path, (served, _)) in &self.served {
                        if &served.controller == key {
                            wanted.insert(path.clone(), served.clone());
                        }
                    }
                }
            }
        }
        let mut stopped = Vec::new();
        let gone: Vec<String> = self
            .served
            .iter()
            .filter(|(path, (served, _))| {
                wanted
                    .get(*path)
                    .is_none_or(|want| want.hook != served.hook || want.for_kind != served.for_kind)
            })
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            if let Some((served, admitter)) = self.served.remove(&path) {
                self.routes.remove(&path);
                tracing::info!(hook = %admitter.label(), kind = %served.for_kind.kind, "admission hook no longer served as it was");
                stopped.push(admitter);
            }
        }
        for (path, want) in wanted {
            if self.served.contains_key(&path) {
                continue;
            }
            let admitter = Arc::new(Admitter::new(
                want.controller.clone(),
                want.hook.clone(),
                Arc::clone(&self.policy),
                self.client.as_ref(),
                self.metrics.clone(),
            ));
            if let Err(e) = self.routes.set(&path, handler(Arc::clone(&admitter))) {
                // The path is built from names validation keeps DNS-safe.
                tracing::warn!(%path, error = %e, "cannot serve the admission hook");
                continue;
            }
            tracing::info!(hook = %admitter.label(), kind = %want.for_kind.kind, %path, "serving admission hook");
            self.served.insert(path, (want, admitter));
        }
        for admitter in stopped {
            admitter.stop().await;
        }
    }

    /// Stops serving every hook and stops their persistent processes.
    pub async fn stop(&mut self) {
        for (path, (_, admitter)) in std::mem::take(&mut self.served) {
            self.routes.remove(&path);
            admitter.stop().await;
        }
    }
}

/// The route handler of `admitter`: the review's answer, or a 400 for a body that is not a
/// review (no decision was asked for: no fate).
fn handler(admitter: Arc<Admitter>) -> RouteHandler {
    Arc::new(move |body: Bytes| {
        let admitter = Arc::clone(&admitter);
        Box::pin(async move {
            match admitter.decide(&body).await {
                Ok(decision) => axum::Json(decision.review).into_response(),
                Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
            }
        })
    })
}
