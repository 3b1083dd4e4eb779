//! The recorder on the embedded API server: fates, the kube sink, scenarios, reload, spans and
//! `OpenTelemetry`, the `CronJob` story.
//!
//! One test binary for the area (one link of the whole dependency graph, not one per
//! file); each module is one file of tests.

#[path = "../support/mod.rs"]
mod support;

mod recorder_cronjob_story;
mod recorder_events_v1;
mod recorder_events_v1_kubectl;
mod recorder_fates;
mod recorder_kube_sink;
mod recorder_otel;
mod recorder_reload;
mod recorder_scenarios;
mod recorder_series_engine;
mod recorder_series_scenarios;
mod recorder_series_spans;
mod recorder_spans;
