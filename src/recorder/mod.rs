//! The event recorder: client-go's `tools/record` pipeline (broadcaster → correlator → sink),
//! with every knob declared and every event's fate counted and traced.

mod options;

pub use options::{CorrelatorOptions, Options, SinkOptions, SpamKeyField};
