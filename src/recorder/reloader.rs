//! Changing a running pipeline's options ([`Reloader`]): new options apply to the events
//! recorded after [`Reloader::reload`] returns, and every event recorded before it finishes
//! under the options it was recorded with.
//!
//! How: what a [`Recorder`](super::Recorder) decides at `record()` — the `source.component`
//! stamped on the event and whether the incoming queue has room — changes before `reload`
//! returns (the handles share it). Everything decided later travels in band: `reload` puts
//! the new options in the incoming queue, behind every event already queued; the
//! broadcaster applies the watcher queue length from that point and passes the options on,
//! behind the events it already handed to the sink's watcher; the sink worker applies the
//! correlator and sink options when it reaches them, after it has written (retries
//! included) every event before them. So no queue is swapped, no queued event is lost or
//! reordered, and the conservation law holds across any number of reloads.

use std::sync::{Arc, Mutex, PoisonError};

use super::changes::Changes;
use super::event::Source;
use super::handle::SourceCell;
use super::options::Options;
use super::queue::{Item, WeakSender};

/// Reloads the options of a running [`Pipeline`](super::Pipeline). Cheap to clone;
/// `Send + Sync`. Holding one does not keep the pipeline running (it ends when every
/// [`Recorder`](super::Recorder) is gone, as before).
///
/// What each option does on reload (every one applies without a restart):
///
/// | option | applies to | state kept |
/// |---|---|---|
/// | `component` | events recorded after `reload` returns | — |
/// | `incomingQueueLength` | `record()` calls after `reload` returns | queued events stay, even beyond a shorter length |
/// | `watcherQueueLength` | events recorded after the reload | likewise |
/// | `qps`, `burst` | events recorded after the reload | every token bucket: refilled at the old rate up to the reload; a higher burst adds its extra tokens at once, a lower one caps the bucket |
/// | `spamKeyFields` | events recorded after the reload | none of the spam filter: buckets start full under the new key (old keys cannot be mapped to new ones) |
/// | `maxEvents`, `maxIntervalSeconds` | events recorded after the reload | aggregation records, counts of Events written |
/// | `lruCacheSize` | events recorded after the reload | the most recently used entries that fit |
/// | `maxRetries`, `retryInterval` | events recorded after the reload (an event being retried keeps its options) | — |
/// | `api` | events recorded after the reload take the other path | the series already cached keep their refresh and finish |
/// | `series.keyFields` | occurrences recorded after the reload | cached series keep their key and finish as usual |
/// | `series.refresh`, `series.finish` | from the next tick | every cached series |
///
/// An [`Event`](super::Event) built with [`Recorder::event`](super::Recorder::event) before a
/// reload keeps the component it was built with.
///
/// ```
/// use std::sync::Arc;
/// use informant::recorder::{CorrelatorOptions, NullSink, Options, Pipeline, SystemClock};
/// let old = Options::default();
/// let pipeline = Pipeline::new(&old, NullSink, Arc::new(SystemClock));
/// let reloader = pipeline.reloader();
/// let new = Options {
///     correlator: CorrelatorOptions { burst: 50, ..CorrelatorOptions::default() },
///     ..old
/// };
/// assert_eq!(reloader.reload(&new).to_string(), "burst 25→50");
/// assert!(reloader.reload(&new).is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Reloader {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    incoming: WeakSender,
    source: Arc<SourceCell>,
    /// The options in force for events recorded now; its lock also keeps reloads in order.
    current: Mutex<Options>,
}

impl Reloader {
    pub(crate) fn new(incoming: WeakSender, source: Arc<SourceCell>, options: Options) -> Self {
        Self {
            inner: Arc::new(Inner {
                incoming,
                source,
                current: Mutex::new(options),
            }),
        }
    }

    /// Applies `new` to every event recorded after this returns and says which fields
    /// changed (empty: nothing to do, nothing was done). Events recorded before finish under
    /// the options they were recorded with; none is lost. Never blocks on the pipeline:
    /// the correlator and sink take the new options when they reach them in the queue.
    ///
    /// After the pipeline has stopped, a reload only records the options.
    pub fn reload(&self, new: &Options) -> Changes {
        let mut current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let changes = current.changes(new);
        if changes.is_empty() {
            return changes;
        }
        self.inner
            .incoming
            .bound()
            .set_length(new.incoming_queue_length);
        if current.component != new.component {
            self.inner.source.set(Source::new(&new.component, ""));
        }
        if let Some(incoming) = self.inner.incoming.upgrade() {
            // Refused only once the pipeline has shut down: nothing is left to apply it to.
            incoming.send_control(Item::Reload(Arc::new(new.clone())));
        }
        current.clone_from(new);
        changes
    }

    /// The options in force for events recorded now.
    #[must_use]
    pub fn options(&self) -> Options {
        self.inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
