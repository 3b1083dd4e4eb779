//! `spec.recorder`: the event recorder's queues, correlator, series and sink, into
//! [`recorder::Options`], every error with its path.

use std::time::Duration;

use super::{FieldPath, Validator};
use crate::config::types::{CorrelatorSpec, RecorderSpec, SeriesSpec, SinkSpec};
use crate::recorder::{
    self, Api, CorrelatorOptions, SeriesKeyField, SeriesOptions, SinkOptions, SpamKeyField,
};
use crate::suggest::closest;

impl Validator {
    pub(super) fn recorder(
        &mut self,
        spec: Option<&RecorderSpec>,
        path: &FieldPath,
    ) -> recorder::Options {
        let mut out = recorder::Options::default();
        let Some(spec) = spec else { return out };
        if let Some(component) = &spec.component {
            if component.trim().is_empty() {
                self.error(
                    &path.field("component"),
                    format!(
                        "must not be empty; name the controller that records events, or remove \
                         it to use the default {:?}",
                        out.component
                    ),
                );
            } else {
                out.component.clone_from(component);
            }
        }
        if let Some(n) = spec.incoming_queue_length {
            out.incoming_queue_length = n as usize;
        }
        if let Some(n) = spec.watcher_queue_length {
            out.watcher_queue_length = n as usize;
        }
        if let Some(api) = &spec.api {
            match Api::parse(api) {
                Some(api) => out.api = api,
                None => self.error(
                    &path.field("api"),
                    format!(
                        "unknown events API {api:?}; use \"v1\" (core/v1 Events, the default) or \
                         \"events.k8s.io/v1\""
                    ),
                ),
            }
        }
        if let Some(c) = &spec.correlator {
            out.correlator = self.correlator(c, &path.field("correlator"));
            if out.api == Api::EventsV1 {
                self.error(
                    &path.field("correlator"),
                    "has no meaning with api events.k8s.io/v1 (client-go tools/events neither \
                     aggregates nor spam-filters; its series fold repeats instead); remove it \
                     and tune series instead, or set api: v1",
                );
            }
        }
        if let Some(s) = &spec.series {
            out.series = self.series(s, &path.field("series"));
            if out.api == Api::CoreV1 && spec.api.is_some() {
                self.error(
                    &path.field("series"),
                    "has no meaning with api v1 (core/v1 Events are deduplicated by the \
                     correlator); remove it, or set api: events.k8s.io/v1",
                );
            } else if out.api == Api::CoreV1 {
                self.error(
                    &path.field("series"),
                    "has no meaning with the default api v1 (core/v1 Events are deduplicated \
                     by the correlator); set api: events.k8s.io/v1, or remove it",
                );
            }
        }
        if let Some(s) = &spec.sink {
            out.sink = self.sink(s, &path.field("sink"));
        }
        out
    }

    fn series(&mut self, spec: &SeriesSpec, path: &FieldPath) -> SeriesOptions {
        let mut out = SeriesOptions::default();
        for (field, text, slot) in [
            ("refresh", spec.refresh.as_deref(), &mut out.refresh),
            ("finish", spec.finish.as_deref(), &mut out.finish),
        ] {
            match self.duration(text, &path.field(field)) {
                Some(d) if d.is_zero() => self.error(
                    &path.field(field),
                    format!(
                        "must be longer than 0; use a duration such as \"{}\", or remove it to \
                         use the default",
                        if field == "refresh" { "30m" } else { "6m" }
                    ),
                ),
                Some(d) => *slot = d,
                None => {}
            }
        }
        if let Some(fields) = &spec.key_fields {
            let list_path = path.field("keyFields");
            if fields.is_empty() {
                self.error(
                    &list_path,
                    "must list at least one field (an empty key folds every event into one \
                     series); remove it to use client-go's key",
                );
            }
            out.key_fields = self.key_fields(
                fields,
                &list_path,
                "series key field",
                SeriesKeyField::parse,
                SeriesKeyField::ALL.iter().map(|f| f.as_str()),
            );
        }
        out
    }

    /// The key fields `names` lists (the spam filter's or the series'), sorted; an unknown
    /// name (with did-you-mean among `known`) or one listed twice is an error at its index.
    fn key_fields<F: Ord>(
        &mut self,
        names: &[String],
        list_path: &FieldPath,
        what: &str,
        parse: fn(&str) -> Option<F>,
        known: impl Iterator<Item = &'static str>,
    ) -> Vec<F> {
        let known: Vec<String> = known.map(str::to_owned).collect();
        let mut parsed: Vec<F> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            match parse(name) {
                Some(f) if parsed.contains(&f) => self.error(
                    &list_path.index(i),
                    format!("{name:?} is listed twice; remove the duplicate"),
                ),
                Some(f) => parsed.push(f),
                None => {
                    let hint = closest(name, known.iter())
                        .map(|k| format!("did you mean {k:?}? "))
                        .unwrap_or_default();
                    self.error(
                        &list_path.index(i),
                        format!(
                            "unknown {what} {name:?}; {hint}use one of: {}",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
        parsed.sort();
        parsed
    }

    fn correlator(&mut self, spec: &CorrelatorSpec, path: &FieldPath) -> CorrelatorOptions {
        let mut out = CorrelatorOptions::default();
        if let Some(qps) = spec.qps {
            if qps > 0.0 && qps.is_finite() {
                out.qps = qps;
            } else {
                self.error(
                    &path.field("qps"),
                    format!(
                        "must be greater than 0, found {qps}; set a positive rate such as 0.01 \
                         (one event per 100 s), or remove it to use the default 1/300"
                    ),
                );
            }
        }
        if let Some(n) = spec.burst {
            out.burst = n;
        }
        if let Some(n) = spec.max_events {
            out.max_events = n as usize;
        }
        if let Some(n) = spec.max_interval_seconds {
            out.max_interval = Duration::from_secs(u64::from(n));
        }
        if let Some(n) = spec.lru_cache_size {
            out.lru_cache_size = n as usize;
        }
        if let Some(fields) = &spec.spam_key_fields {
            let list_path = path.field("spamKeyFields");
            if fields.is_empty() {
                self.error(
                    &list_path,
                    "must list at least one field (an empty key makes every event share one \
                     bucket); remove it to use the default [source, involvedObject, type]",
                );
            }
            out.spam_key_fields = self.key_fields(
                fields,
                &list_path,
                "spam key field",
                SpamKeyField::parse,
                SpamKeyField::ALL.iter().map(|f| f.as_str()),
            );
        }
        out
    }

    fn sink(&mut self, spec: &SinkSpec, path: &FieldPath) -> SinkOptions {
        let mut out = SinkOptions::default();
        if let Some(n) = spec.max_retries {
            out.max_retries = n;
        }
        if let Some(d) = self.duration(spec.retry_interval.as_deref(), &path.field("retryInterval"))
        {
            out.retry_interval = d;
        }
        out
    }
}
