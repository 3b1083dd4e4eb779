//! The event recorder: client-go's `tools/record` pipeline (broadcaster → correlator → sink),
//! with every knob declared and every event's fate counted and traced.

pub mod broadcaster;
pub mod clock;
pub mod correlator;
mod envelope;
pub mod event;
mod fate;
mod handle;
mod kube_sink;
pub mod lru;
mod options;
pub mod pipeline;
pub mod simulate;
pub mod sink;
mod worker;

pub use broadcaster::Broadcaster;
pub use clock::{Clock, ManualClock, SystemClock, Time};
pub use correlator::{Action, Correlation, Correlator};
pub use envelope::Envelope;
pub use event::{Event, EventName, EventType, Invalid, ObjectRef, Source};
pub use fate::{Fate, FateCounter};
pub use handle::Recorder;
pub use kube_sink::KubeSink;
pub use options::{CorrelatorOptions, Options, SinkOptions, SpamKeyField};
pub use pipeline::Pipeline;
pub use sink::{NullSink, Sink, SinkError};
pub use worker::SinkWorker;
