//! `informant explain --estimate`: a config's cost on a cluster before it runs.

use std::fmt::Write as _;

use informant::cache::estimate::{CLIENT_GO_JSON_RATIO, Estimate, estimate};
use informant::cache::{Plan, human_bytes as human};

use super::super::exit::{self, Failure};

/// Lists what the informers of `plan` would hold on the cluster of `client`.
pub(super) async fn run(plan: &Plan, client: &kube::Client, sample: u32) -> exit::Result<Estimate> {
    estimate(plan, client, sample).await.map_err(|e| {
        Failure::message(
            exit::FAILURE,
            format!(
                "cannot estimate the cache (explain --estimate needs list on every byObject kind): {}",
                exit::error_chain(&e)
            ),
        )
    })
}

/// The estimate as a table, then its totals.
pub(super) fn to_text(estimate: &Estimate) -> String {
    let mut text = String::from(
        "\nestimate (objects counted by LIST, bytes from a sample encoded as the cache holds it):\n",
    );
    if estimate.informers.is_empty() {
        text.push_str("  no byObject informer to estimate (a default cache starts its informers when a kind is first read)\n");
        return text;
    }
    for row in &estimate.informers {
        let mut scope = row.namespace.clone().unwrap_or_else(|| "<all>".to_owned());
        if let Some(labels) = &row.label_selector {
            let _ = write!(scope, " labelSelector={labels:?}");
        }
        if let Some(fields) = &row.field_selector {
            let _ = write!(scope, " fieldSelector={fields:?}");
        }
        let _ = writeln!(
            text,
            "  {}/{} {scope}: {} objects × {} = {} (sampled {}; client-go: {})",
            row.api_version,
            row.kind,
            row.objects,
            human(row.bytes_per_object),
            human(row.bytes),
            row.sampled,
            human(row.client_go_bytes),
        );
    }
    let _ = writeln!(
        text,
        "  total: {} (client-go's informer for the same objects: {}, {CLIENT_GO_JSON_RATIO}× their JSON)",
        human(estimate.bytes),
        human(estimate.client_go_bytes),
    );
    text
}
