//! The event recorder: client-go's `tools/record` pipeline (broadcaster → correlator → sink),
//! with every knob declared and every event's fate counted and traced.

pub mod clock;
pub mod correlator;
pub mod event;
mod fate;
pub mod lru;
mod options;
pub mod simulate;

pub use clock::{Clock, ManualClock, SystemClock, Time};
pub use correlator::{Action, Correlation, Correlator};
pub use event::{Event, EventName, EventType, Invalid, ObjectRef, Source};
pub use fate::Fate;
pub use options::{CorrelatorOptions, Options, SinkOptions, SpamKeyField};
