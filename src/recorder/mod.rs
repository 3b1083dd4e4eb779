//! The event recorder: client-go's `tools/record` pipeline (broadcaster → correlator → sink),
//! with every knob declared and every event's fate counted and traced.
//!
//! ```text
//! Recorder::record() ─▶ Broadcaster ─▶ SinkWorker: Correlator ─▶ Sink (create / patch, retries)
//!   (never blocks)      (bounded queues)  (aggregator → logger → spam filter)
//! ```
//!
//! Every recorded event ends in exactly one [`Fate`] — `invalid`, `dropped_incoming_full`,
//! `dropped_watcher_full`, `dropped_shutdown`, `spam_filtered`, `created`, `patched`,
//! `rejected` or `failed`, and on `events.k8s.io/v1` `series_patched`, `series_counted`,
//! `abandoned` or `dropped_series_queue_full` — counted by a [`FateCounter`]
//! (`informant_events_total{fate}`) and recorded on the event's `event` span, which runs from
//! `record()` to the fate.
//!
//! With [`Options::api`] set to [`Api::EventsV1`] the sink worker sends events down the
//! [`series`] path instead of the correlator: client-go's `tools/events`, `EventSeries` and
//! all, on `events.k8s.io/v1` (`docs/events-v1.md`).
//!
//! Where to start: [`Pipeline`] wires everything and hands out [`Recorder`]s; [`Correlator`]
//! is client-go's `EventCorrelator`, synchronous and driven by an injected [`Clock`];
//! [`simulate`] replays an event stream through it (`informant simulate`).
//!
//! Unlike client-go, the options can change while the pipeline runs: a [`Reloader`]
//! applies them to the events recorded after the reload, in band, without losing or
//! reordering what is queued, and says what changed ([`Changes`]: `burst 25→50`). New Events
//! get unique names ([`EventNaming`]), so two events about one object in the same instant
//! are not refused with 409. [`Pipeline::register`] exposes the fates, the sink's request
//! latency, the correlator's cache sizes and each queue's length and depth.
//!
//! ```
//! use std::sync::Arc;
//! use informant::recorder::{EventType, Fate, NullSink, ObjectRef, Options, Pipeline, SystemClock};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let pipeline = Pipeline::new(&Options::default(), NullSink, Arc::new(SystemClock));
//! let recorder = pipeline.recorder();
//! let fates = pipeline.fates();
//! let pod = Arc::new(ObjectRef::new("v1", "Pod", "default", "web-0", "uid-1"));
//! for _ in 0..30 {
//!     recorder.record(&pod, EventType::Warning, "BackOff", "back-off restarting container");
//! }
//! drop(recorder); // the pipeline ends once every recorder is gone and all is written
//! pipeline.run(tokio_util::sync::CancellationToken::new()).await;
//! // One Event created, 24 repeats patched into it, 5 eaten by the token bucket of 25.
//! assert_eq!(fates.get(Fate::Created), 1);
//! assert_eq!(fates.get(Fate::Patched), 24);
//! assert_eq!(fates.get(Fate::SpamFiltered), 5);
//! # }
//! ```

mod broadcaster;
mod changes;
mod clock;
mod correlator;
mod envelope;
mod event;
mod fate;
mod handle;
mod kube_sink;
mod lru;
mod metrics;
mod options;
mod pipeline;
mod queue;
mod reloader;
pub mod series;
pub mod simulate;
mod sink;
mod worker;

pub use broadcaster::Broadcaster;
pub use changes::{Change, Changes};
pub use clock::{Clock, ManualClock, SystemClock, Time};
pub use correlator::{Action, CacheEntries, Correlation, Correlator, EventNaming};
pub use envelope::Envelope;
pub use event::{Event, EventName, EventType, Invalid, ObjectRef, Source};
pub use fate::{Fate, FateCounter};
pub use handle::Recorder;
pub use kube_sink::KubeSink;
pub use metrics::SINK_LATENCY_BUCKETS;
pub use options::{
    Api, CorrelatorOptions, DEFAULT_SERIES_FINISH, DEFAULT_SERIES_REFRESH, Options, SeriesOptions,
    SinkOptions, SpamKeyField,
};
pub use pipeline::Pipeline;
pub use reloader::Reloader;
pub use series::key::SeriesKeyField;
pub use sink::{NullSink, Sink, SinkError};
pub use worker::SinkWorker;
