//! What the demo prints about itself: its phases, the fate table, the closing lines and the
//! endpoints to poke with `--keep-running`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use informant::hooks::HookMetrics;

use super::{Api, Args};
use crate::cli::exit;
use crate::cli::out::outln;

/// The `Controller` of the `--hooks` demo (`namespace/name`, as its metrics label it).
pub(super) const HOOK_CONTROLLER: &str = "team-a/cronjob-watch";

/// One line per reason: where its events ended before and after the edit, one column per fate,
/// named as the metric labels it: `api`'s [`Api::table_fates`], then any other that occurred.
pub(super) fn fate_table(
    api: Api,
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
) -> String {
    let since: BTreeMap<(String, String), u64> = after
        .iter()
        .map(|(k, n)| {
            (
                k.clone(),
                n.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .collect();
    let mut fates: Vec<&str> = api.table_fates().iter().map(|f| f.as_str()).collect();
    for (_, fate) in after.keys() {
        if !fates.contains(&fate.as_str()) {
            fates.push(fate);
        }
    }
    let mut reasons: Vec<&str> = after.keys().map(|(r, _)| r.as_str()).collect();
    reasons.dedup();
    let width = |fate: &str| fate.len().max(7);
    let group: usize = fates.iter().map(|f| width(f) + 1).sum::<usize>() - 1;
    let mut out = String::new();
    let groups = format!(
        "  {:<18} {:^group$}   {:^group$}",
        "", "before the edit", "after the edit"
    );
    let _ = writeln!(out, "{}", groups.trim_end());
    let mut header = format!("  {:<18}", "reason");
    for _ in 0..2 {
        for fate in &fates {
            let _ = write!(header, " {fate:>w$}", w = width(fate));
        }
        header.push_str("  ");
    }
    let _ = writeln!(out, "{}", header.trim_end());
    for reason in reasons {
        let mut line = format!("  {reason:<18}");
        for phase in [before, &since] {
            for fate in &fates {
                let n = phase
                    .get(&(reason.to_owned(), (*fate).to_owned()))
                    .copied()
                    .unwrap_or(0);
                let _ = write!(line, " {n:>w$}", w = width(fate));
            }
            line.push_str("  ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// Where the user can poke the running demo.
pub(super) fn print_endpoints(
    kubeconfig: &Path,
    metrics: Option<SocketAddr>,
    health: Option<SocketAddr>,
) -> exit::Result {
    outln!("\nStill running (Ctrl-C to stop):")?;
    outln!("  export KUBECONFIG={}", kubeconfig.display())?;
    outln!("  kubectl get events -A")?;
    if let Some(addr) = metrics {
        outln!("  curl http://{addr}/metrics")?;
        outln!("  curl http://{addr}/debug/status")?;
        outln!("  curl http://{addr}/debug/cache")?;
    }
    if let Some(addr) = health {
        outln!("  curl http://{addr}/readyz?verbose")?;
    }
    Ok(())
}

pub(super) fn humanize(d: Duration) -> String {
    informant::config::format_duration(d)
}

/// Hook calls of the demo's controller that failed, whatever the failure (the reasons of
/// `ReconcileError::reason`).
pub(super) fn hook_failures(metrics: &HookMetrics) -> u64 {
    [
        "timeout",
        "exit",
        "malformed",
        "http",
        "start",
        "cache",
        "child",
        "write",
    ]
    .iter()
    .map(|failure| metrics.calls(HOOK_CONTROLLER, failure))
    .sum()
}

/// What the first phase shows, by who records `SawCompletedJob`.
pub(super) fn print_first_phase(args: &Args, hook: Option<&Path>) -> exit::Result {
    if let Some(hook) = hook {
        outln!(
            "3. CronJob team-a/hello runs every {}; the schedule records SuccessfulCreate on \
             it, and the Controller {HOOK_CONTROLLER}, the Python exec hook {} (a copy of \
             examples/hooks/cronjob.py), records SawCompletedJob.",
            humanize(args.every),
            hook.display()
        )?;
    } else {
        outln!(
            "3. CronJob team-a/hello runs every {}; the controller records SuccessfulCreate, \
             SawCompletedJob and SuccessfulDelete on it.",
            humanize(args.every)
        )?;
    }
    Ok(())
}

/// The closing lines under the fate table.
pub(super) fn print_closing(api: Api, hooks: bool, hook_metrics: &HookMetrics) -> exit::Result {
    if hooks {
        outln!(
            "\n   The Python hook answered {} calls ({} failed); its SawCompletedJob events went \
             through the same recorder, {} and fate counters as the Rust controller's.",
            hook_metrics.calls(HOOK_CONTROLLER, "none"),
            hook_failures(hook_metrics),
            match api {
                Api::V1 => "spam filter",
                Api::EventsV1 => "series",
            }
        )?;
    }
    let reasons = if hooks {
        "SuccessfulCreate and SawCompletedJob"
    } else {
        "the three reasons"
    };
    match api {
        Api::V1 if hooks => outln!(
            "\n   Before the edit {reasons} drained one bucket of 25 tokens (refilled one per 5 \
             minutes). After it, each reason has a bucket of its own."
        )?,
        Api::V1 => outln!(
            "\n   Before the edit {reasons} drained one bucket of 25 tokens (refilled one per 5 \
             minutes): SawCompletedJob stopped reaching the API server after about nine runs. \
             After it, each reason has a bucket of its own."
        )?,
        Api::EventsV1 => outln!(
            "\n   Before the edit each of {reasons} was one series on the CronJob, whatever its \
             note (\"Created job hello-1\", \"Created job hello-2\", ...): the first run's event \
             was created, the second patched the series (count 2), every later one was only \
             counted (series_counted): it reached the API server as a count, at a refresh or \
             the series' finish, its note never written. After it, note is in the key: each run's event \
             is created as an Event of its own."
        )?,
    }
    Ok(())
}
