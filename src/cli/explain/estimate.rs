//! `informant explain --estimate`: a config's cost on a cluster before it runs.

use std::fmt::Write as _;

use informant::cache::Plan;
use informant::cache::estimate::{CLIENT_GO_JSON_RATIO, Estimate, estimate};

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

/// `bytes` for people: `512 B`, `1.5 KiB`, `12.4 MiB`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    #[allow(clippy::cast_precision_loss, reason = "a figure for people")]
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5 * 1024 * 1024), "5.0 MiB");
    }
}
