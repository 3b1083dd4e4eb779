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

/// How often the spam filter's shared bucket gets a token back: the recorder's default qps,
/// client-go's one per 5 minutes (`tools/record/events_cache.go`).
const REFILL: Duration = Duration::from_mins(5);

/// The fates of the spam filter that let an event reach the API server.
const REACHED: [&str; 2] = ["created", "patched"];

/// What the tally `before` (`(reason, fate) → events` before the edit) says of `reason`'s
/// events on core/v1: how many reached the API server, how many the spam filter dropped, and,
/// when the phase took less than a refill of the bucket (`phase < REFILL`: once empty it stayed
/// empty, so the ones that got through were the first), after which event it stopped. A
/// sentence, without the leading spaces; true whatever the tally holds (issue #33 item 10).
pub(super) fn spam_sentence(
    reason: &str,
    before: &BTreeMap<(String, String), u64>,
    phase: Duration,
) -> String {
    let count = |fate: &str| {
        before
            .get(&(reason.to_owned(), fate.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    let reached: u64 = REACHED.iter().map(|f| count(f)).sum();
    let filtered = count("spam_filtered");
    let events = |n: u64| if n == 1 { "event" } else { "events" };
    match (reached, filtered) {
        (0, 0) => format!("{reason} recorded no event before the edit."),
        (_, 0) => format!(
            "{reason} was never spam-filtered: its {reached} {} all reached the API server.",
            events(reached)
        ),
        (0, _) => format!(
            "None of {reason}'s {filtered} {} reached the API server: the spam filter dropped \
             every one.",
            events(filtered)
        ),
        _ if phase < REFILL => format!(
            "{reason} stopped reaching the API server after its first {reached} {}: the spam \
             filter dropped the other {filtered}.",
            events(reached)
        ),
        _ => format!(
            "{reached} of {reason}'s {} events reached the API server and the spam filter \
             dropped {filtered} (the bucket got tokens back during the {}, so not only the \
             last ones).",
            reached + filtered,
            humanize(phase)
        ),
    }
}

/// The closing lines under the fate table; `before` is the tally before the edit and `phase`
/// how long that phase took.
pub(super) fn print_closing(
    api: Api,
    hooks: bool,
    hook_metrics: &HookMetrics,
    before: &BTreeMap<(String, String), u64>,
    phase: Duration,
) -> exit::Result {
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
        Api::V1 => outln!(
            "\n   Before the edit {reasons} drained one bucket of 25 tokens (refilled one per 5 \
             minutes). {} After it, each reason has a bucket of its own.",
            spam_sentence("SawCompletedJob", before, phase)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::spam_sentence;

    fn tally(entries: &[(&str, u64)]) -> BTreeMap<(String, String), u64> {
        entries
            .iter()
            .map(|(fate, n)| (("SawCompletedJob".to_owned(), (*fate).to_owned()), *n))
            .collect()
    }

    const SHORT: Duration = Duration::from_secs(25);

    /// Issue #33 item 10: the sentence said "after about nine runs" whatever the table showed.
    #[test]
    fn the_sentence_names_the_event_after_which_the_tally_says_it_stopped() {
        let before = tally(&[("created", 1), ("patched", 7), ("spam_filtered", 12)]);
        assert_eq!(
            spam_sentence("SawCompletedJob", &before, SHORT),
            "SawCompletedJob stopped reaching the API server after its first 8 events: the \
             spam filter dropped the other 12."
        );
        let before = tally(&[("created", 1), ("patched", 2), ("spam_filtered", 1)]);
        assert!(
            spam_sentence("SawCompletedJob", &before, SHORT).contains("after its first 3 events"),
        );
    }

    #[test]
    fn a_tally_without_spam_filtering_says_so_instead() {
        let before = tally(&[("created", 1), ("patched", 4)]);
        assert_eq!(
            spam_sentence("SawCompletedJob", &before, SHORT),
            "SawCompletedJob was never spam-filtered: its 5 events all reached the API server."
        );
        let before = tally(&[("spam_filtered", 3)]);
        assert_eq!(
            spam_sentence("SawCompletedJob", &before, SHORT),
            "None of SawCompletedJob's 3 events reached the API server: the spam filter \
             dropped every one."
        );
        assert_eq!(
            spam_sentence("SawCompletedJob", &BTreeMap::new(), SHORT),
            "SawCompletedJob recorded no event before the edit."
        );
    }

    #[test]
    fn a_phase_longer_than_a_refill_does_not_claim_the_dropped_ones_were_the_last() {
        let before = tally(&[("created", 1), ("patched", 9), ("spam_filtered", 40)]);
        let sentence = spam_sentence("SawCompletedJob", &before, Duration::from_mins(10));
        assert!(!sentence.contains("stopped"), "{sentence}");
        assert!(
            sentence.starts_with("10 of SawCompletedJob's 50 events reached the API server"),
            "{sentence}"
        );
    }
}
