//! The `events.k8s.io/v1` path of the recorder (`spec.recorder.api: events.k8s.io/v1`):
//! client-go's `tools/events`, isomorphic events folded into an `EventSeries`, every
//! occurrence's fate counted.
//!
//! - [`SeriesKey`]: the isomorphic key, its fields declared ([`SeriesKeyField`](super::SeriesKeyField)).
//! - [`Write`]: one write as client-go's `recordEvent` makes it, and how its answer is sorted.
//! - [`Engine`]: the broadcaster (cache, eight workers with retries, refresh and finish
//!   loops) as a synchronous state machine on an injected time.
//! - the driver runs an [`Engine`] in the pipeline with tokio; `informant simulate --api
//!   events.k8s.io/v1` runs one on a virtual clock.
//!
//! ## RBAC
//!
//! `create` and `patch` on `events` in the `events.k8s.io` group, in every namespace events
//! are recorded in (`default` for cluster-scoped objects).

mod call;
pub(crate) mod driver;
mod engine;
pub(crate) mod key;
mod write;

pub use engine::{
    Call, CallId, Engine, Finished, Purpose, RETRY_JITTER, SERIES_QUEUE_LENGTH, SERIES_WORKERS,
};
pub use key::SeriesKey;
pub use write::{Answer, SeriesState, Verb, Write, reporting_instance};
