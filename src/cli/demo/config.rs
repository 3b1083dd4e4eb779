//! The files the demo writes: its `CacheConfig` before and after the edit (per Events API),
//! with the hook's `Controller` document under `--hooks`, and the `CronJob`s it seeds.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::report::humanize;
use super::{Api, software};
use crate::cli::exit;

/// The Python hook the `--hooks` demo runs, written next to the config file.
pub(super) const CRONJOB_HOOK: &str = include_str!("../../../examples/hooks/cronjob.py");

/// The `Controller` document appended to the config in `--hooks` mode: `hook` is the path of
/// the Python hook.
pub(super) fn controller_document(hook: &Path) -> String {
    format!(
        "---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: cronjob-watch, namespace: team-a}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: batch/v1, kind: Job}}]
  hook: {{exec: {{command: [python3, {hook}], timeout: 10s}}}}
",
        hook = serde_json::Value::String(hook.display().to_string())
    )
}

/// The config file's text: the `CacheConfig`, and the hook's `Controller` when there is one.
pub(super) fn config_text(cache_config: &str, hook: Option<&Path>) -> String {
    match hook {
        None => cache_config.to_owned(),
        Some(hook) => format!("{cache_config}{}", controller_document(hook)),
    }
}

/// client-go's series key (`tools/events`), as `spec.recorder.series.keyFields` spells it.
pub(super) const SERIES_KEY: &str =
    "type, action, reason, reportingController, reportingInstance, regarding, related";

/// The demo's `CacheConfig` before the edit (one namespace, client-go's key) or after it
/// (`team-b` added; `reason` added to the spam key on v1, `note` to the series key on
/// events.k8s.io/v1). On events.k8s.io/v1 the series' periods are client-go's scaled as the
/// schedule is: a run every `every` stands for a run every minute, so the refresh is
/// 30 × `every` (client-go's 30 minutes) and the finish 6 × `every` (its 6 minutes).
pub(super) fn cache_config(api: Api, every: Duration, edited: bool) -> String {
    let namespaces = if edited {
        "{team-a: {}, team-b: {}}"
    } else {
        "{team-a: {}}"
    };
    let recorder = match api {
        Api::V1 => format!(
            "    correlator:\n      spamKeyFields: [source, involvedObject, type{}]\n",
            if edited { ", reason" } else { "" }
        ),
        Api::EventsV1 => {
            let (refresh, finish) = series_periods(every);
            format!(
                "    api: events.k8s.io/v1\n    series:\n      keyFields: [{SERIES_KEY}{}]\n      \
                 refresh: {}\n      finish: {}\n",
                if edited { ", note" } else { "" },
                humanize(refresh),
                humanize(finish)
            )
        }
    };
    format!(
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {{name: demo, namespace: team-a}}
spec:
  byObject:
    - {{apiVersion: batch/v1, kind: CronJob, namespaces: {namespaces}}}
    - {{apiVersion: batch/v1, kind: Job, namespaces: {namespaces}}}
  recorder:
    component: cronjob-controller
{recorder}"
    )
}

/// The series' refresh and finish of the events.k8s.io/v1 demo: client-go's 30 and 6 minutes,
/// with a run every `every` standing for a run every minute.
pub(super) fn series_periods(every: Duration) -> (Duration, Duration) {
    (every.saturating_mul(30), every.saturating_mul(6))
}

pub(super) fn cronjob(namespace: &str) -> serde_json::Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"namespace": namespace, "name": "hello"},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "hello", "image": "busybox:1.28",
                                "command": ["sh", "-c", "date; echo Hello"]}]
            }}}}
        }
    })
}

/// Writes `text` to `path` as editors and `kubectl` do: a new file renamed over the old one.
pub(super) fn write_atomically(path: &Path, text: &str) -> exit::Result<()> {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text).map_err(|e| software("cannot write the config", &e))?;
    std::fs::rename(&tmp, path).map_err(|e| software("cannot replace the config", &e))
}
