//! [`HookRoutes`]: the paths of one kind of webhook hook (admission or conversion) a replica
//! serves on the manager's [`WebhookRoutes`], kept equal to what the `Controller`s declare: a
//! new one is served, a changed one is served anew (the old one's persistent process
//! stopped), and one no longer wanted is no longer served.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::serving::{Route, WebhookRoutes};

/// What answers at a path: an `Admitter` or a `Converter`.
pub(crate) trait RouteHook: Send + Sync + 'static {
    /// Its label in logs: `<namespace>/<controller>[/<hook>]`.
    fn label(&self) -> String;
    /// Stops its persistent process, if any.
    fn stop(&self) -> impl Future<Output = ()> + Send;
}

/// The paths served, each with what was declared for it (`W`) and what answers it (`H`).
pub(crate) struct HookRoutes<W, H> {
    routes: WebhookRoutes,
    /// `admission` or `conversion`, for the log.
    what: &'static str,
    served: BTreeMap<String, (W, Arc<H>)>,
}

impl<W: Clone + PartialEq, H: RouteHook> HookRoutes<W, H> {
    /// Nothing served yet on `routes`.
    pub(crate) fn new(routes: WebhookRoutes, what: &'static str) -> Self {
        Self {
            routes,
            what,
            served: BTreeMap::new(),
        }
    }

    /// What is served, by path.
    pub(crate) fn served(&self) -> impl Iterator<Item = (&String, &W)> {
        self.served.iter().map(|(path, (want, _))| (path, want))
    }

    /// Serves exactly `wanted` (by path): what is served as wanted stays, the rest is made
    /// with `make` and answered by `handler`; what is no longer wanted (or wanted otherwise)
    /// stops being served, and its persistent process is stopped once no path names it.
    pub(crate) async fn serve(
        &mut self,
        wanted: BTreeMap<String, W>,
        make: impl Fn(&W) -> H,
        handler: impl Fn(Arc<H>) -> Route,
    ) {
        let gone: Vec<String> = self
            .served
            .iter()
            .filter(|(path, (served, _))| wanted.get(*path) != Some(served))
            .map(|(path, _)| path.clone())
            .collect();
        let mut stopped = Vec::new();
        for path in gone {
            if let Some((_, hook)) = self.served.remove(&path) {
                self.routes.remove(&path);
                tracing::info!(hook = %hook.label(), %path, "{} hook no longer served as it was", self.what);
                stopped.push(hook);
            }
        }
        for (path, want) in wanted {
            if self.served.contains_key(&path) {
                continue;
            }
            let hook = Arc::new(make(&want));
            if let Err(e) = self.routes.set_route(&path, handler(Arc::clone(&hook))) {
                // The path is built from names validation keeps DNS-safe.
                tracing::warn!(%path, error = %e, "cannot serve the {} hook", self.what);
                continue;
            }
            tracing::info!(hook = %hook.label(), %path, "serving {} hook", self.what);
            self.served.insert(path, (want, hook));
        }
        for hook in stopped {
            hook.stop().await;
        }
    }

    /// Stops serving every path and stops their persistent processes.
    pub(crate) async fn stop(&mut self) {
        for (path, (_, hook)) in std::mem::take(&mut self.served) {
            self.routes.remove(&path);
            hook.stop().await;
        }
    }
}
