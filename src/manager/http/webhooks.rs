//! The webhook endpoints a manager serves beside its probes ([`Manager::add_webhook_endpoint`](crate::manager::Manager::add_webhook_endpoint)),
//! and the runnables of every replica that serve with them.

use tokio::sync::{mpsc, watch};

use crate::manager::group::RunnableGroup;
use crate::manager::leader::LeaderElector;
use crate::manager::options::Error;
use crate::serving::WebhookEndpoint;

/// A runnable of every replica ([`Manager::add_serving`](crate::manager::Manager::add_serving)).
pub(in crate::manager) type ServingRunnable = Box<
    dyn FnOnce(
            watch::Receiver<bool>,
            tokio_util::sync::CancellationToken,
        )
            -> futures::future::BoxFuture<'static, Result<(), crate::manager::options::BoxError>>
        + Send,
>;

/// Starts the webhook endpoints in `group` (the probes'), each with this replica's leadership
/// (always leading without an elector).
pub(in crate::manager) fn start_webhooks(
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    webhooks: Vec<WebhookEndpoint>,
    serving: Vec<(String, ServingRunnable)>,
    elector: Option<&LeaderElector>,
) {
    let leads = elector.map_or_else(|| watch::channel(true).1, LeaderElector::is_leader);
    for (name, run) in serving {
        let (token, leads, failures) = (group.token().clone(), leads.clone(), failures.clone());
        group.add_quiet(async move {
            if let Err(source) = run(leads, token).await {
                let _ = failures.send(Error::Runnable { name, source });
            }
        });
    }
    for endpoint in webhooks {
        let (token, leads) = (group.token().clone(), leads.clone());
        group.add("webhooks", failures, async move {
            endpoint.run(leads, token).await.map_err(Error::Http)
        });
    }
}
