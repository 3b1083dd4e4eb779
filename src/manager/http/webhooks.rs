//! The webhook endpoints a manager serves beside its probes ([`Manager::add_webhook_endpoint`](crate::manager::Manager::add_webhook_endpoint)).

use tokio::sync::{mpsc, watch};

use crate::manager::group::RunnableGroup;
use crate::manager::leader::LeaderElector;
use crate::manager::options::Error;
use crate::serving::WebhookEndpoint;

/// Starts the webhook endpoints in `group` (the probes'), each with this replica's leadership
/// (always leading without an elector).
pub(in crate::manager) fn start_webhooks(
    group: &RunnableGroup,
    failures: &mpsc::UnboundedSender<Error>,
    webhooks: Vec<WebhookEndpoint>,
    elector: Option<&LeaderElector>,
) {
    let leads = elector.map_or_else(|| watch::channel(true).1, LeaderElector::is_leader);
    for endpoint in webhooks {
        let (token, leads) = (group.token().clone(), leads.clone());
        group.add("webhooks", failures, async move {
            endpoint.run(leads, token).await.map_err(Error::Http)
        });
    }
}
