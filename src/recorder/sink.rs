//! Where events are written: the [`Sink`] trait (create, strategic-merge patch), its errors,
//! and client-go's delivery loop (`tools/record/event.go`, `recordToSink` / `recordEvent`):
//! a patch that gets 404 falls back to create; a status error from the server is not
//! retried; transport errors are retried up to `maxRetries` tries, `retryInterval` apart,
//! the first wait jittered.
//!
//! The `events.k8s.io/v1` path writes through [`Sink::create_events_v1`] and
//! [`Sink::patch_events_v1`] and sorts the answers as client-go's `tools/events` does
//! ([`crate::recorder::series::Write::sort`]).
//!
//! ## RBAC
//!
//! A kube-rs sink needs `create` and `patch` on `events` (core group) in the namespaces of
//! the involved objects (`default` for cluster-scoped ones); with `events.k8s.io/v1`, the same
//! on `events` in the `events.k8s.io` group.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::events::v1 as eventsv1;
use std::future::Future;

use super::correlator::Correlation;
use super::event::Event;
use super::fate::Fate;
use super::metrics::SinkLatency;
use super::options::SinkOptions;

/// Why a write failed. [`SinkError::Transport`] and [`SinkError::Unavailable`] are retried; the
/// rest are final.
///
/// client-go's `recordEvent` retries transport errors and treats every status error as final;
/// its REST client, though, retries a 429 or 5xx answer that carries `Retry-After` before
/// `recordEvent` sees it. kube-rs has no such layer, so the sink retries 429 and 5xx itself:
/// an overloaded or restarting API server does not cost events, while a 4xx (the server refused
/// this event) is never retried.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The Event to patch does not exist (404); the sink falls back to create.
    #[error("event not found")]
    NotFound,
    /// The server answered with an error status; retrying would get the same answer.
    #[error("server rejected the event with status {code}: {message}")]
    Rejected {
        /// HTTP status code.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// The server is overloaded or failing (429 or 5xx); a later try may succeed.
    #[error("api server unavailable, status {code}: {message}")]
    Unavailable {
        /// HTTP status code.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// The request could not be built or encoded; it would fail the same way again.
    #[error("cannot build the request")]
    Request(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The server could not be reached or the connection broke.
    #[error("cannot reach the api server")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// This sink does not write `events.k8s.io/v1` Events (it implements only the core/v1
    /// methods); final.
    #[error("this sink does not write events.k8s.io/v1 events")]
    Unsupported,
}

impl SinkError {
    /// True if trying again may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            SinkError::Transport(_) | SinkError::Unavailable { .. }
        )
    }
}

/// Writes Events to the API server (or anywhere else: tests use fakes, benches a null sink).
pub trait Sink: Send + Sync + 'static {
    /// Creates `event`.
    fn create(&self, event: &corev1::Event) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Applies the strategic-merge patch `body` to the Event `namespace`/`name`.
    fn patch(
        &self,
        namespace: &str,
        name: &str,
        body: &serde_json::Value,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Creates the `events.k8s.io/v1` Event `event`. The default refuses with
    /// [`SinkError::Unsupported`] (the event is then `abandoned`), so a sink written for
    /// core/v1 only still compiles and loses nothing silently.
    fn create_events_v1(
        &self,
        event: &eventsv1::Event,
    ) -> impl Future<Output = Result<(), SinkError>> + Send {
        let _ = event;
        std::future::ready(Err(SinkError::Unsupported))
    }

    /// Applies the strategic-merge patch `body` to the `events.k8s.io/v1` Event
    /// `namespace`/`name`. The default refuses, as [`Sink::create_events_v1`]'s.
    fn patch_events_v1(
        &self,
        namespace: &str,
        name: &str,
        body: &serde_json::Value,
    ) -> impl Future<Output = Result<(), SinkError>> + Send {
        let _ = (namespace, name, body);
        std::future::ready(Err(SinkError::Unsupported))
    }
}

/// A sink that accepts everything and writes nothing (benches, dry runs).
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl Sink for NullSink {
    async fn create(&self, _event: &corev1::Event) -> Result<(), SinkError> {
        Ok(())
    }

    async fn patch(
        &self,
        _namespace: &str,
        _name: &str,
        _body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        Ok(())
    }

    async fn create_events_v1(&self, _event: &eventsv1::Event) -> Result<(), SinkError> {
        Ok(())
    }

    async fn patch_events_v1(
        &self,
        _namespace: &str,
        _name: &str,
        _body: &serde_json::Value,
    ) -> Result<(), SinkError> {
        Ok(())
    }
}

/// One try (client-go `recordEvent`): patch if the Event exists (count > 1), falling back to
/// create on 404; else create. Each request's latency goes to `latency`.
async fn write_once<S: Sink>(
    sink: &S,
    latency: &SinkLatency,
    event: &Event,
    correlation: &Correlation,
) -> Result<Fate, SinkError> {
    if correlation.count > 1
        && let Some(body) = correlation.patch_body(event)
    {
        let name = correlation.name.to_string();
        let start = std::time::Instant::now();
        let patched = sink.patch(event.namespace(), &name, &body).await;
        latency.patch(start.elapsed());
        match patched {
            Ok(()) => return Ok(Fate::Patched),
            Err(SinkError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    let message = correlation.message(event);
    let k8s = event.to_k8s(&correlation.written(event, &message));
    let start = std::time::Instant::now();
    let created = sink.create(&k8s).await;
    latency.create(start.elapsed());
    created.map(|()| Fate::Created)
}

/// The outcome of delivering one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// `created`, `patched`, `rejected`, `failed`, or `dropped_shutdown` if `stop` fired
    /// while waiting to retry.
    pub fate: Fate,
    /// Tries made.
    pub tries: u32,
}

/// Writes the event `correlation` decided, retrying transport errors as client-go does;
/// every request's latency goes to `latency`.
pub(crate) async fn deliver<S: Sink>(
    sink: &S,
    options: &SinkOptions,
    latency: &SinkLatency,
    event: &Event,
    correlation: &Correlation,
    stop: impl Future<Output = ()>,
) -> Delivery {
    let max_tries = options.max_retries.max(1);
    let mut stop = std::pin::pin!(stop);
    let mut tries = 0;
    loop {
        tries += 1;
        match write_once(sink, latency, event, correlation).await {
            Ok(fate) => return Delivery { fate, tries },
            Err(e) if !e.is_retryable() => {
                tracing::warn!(error = %crate::telemetry::error_chain(&e), tries, "server rejected event, not retrying");
                return Delivery {
                    fate: Fate::Rejected,
                    tries,
                };
            }
            Err(e) => {
                if tries >= max_tries {
                    tracing::warn!(error = %crate::telemetry::error_chain(&e), tries, "cannot write event, retry limit reached");
                    return Delivery {
                        fate: Fate::Failed,
                        tries,
                    };
                }
                tracing::debug!(error = %crate::telemetry::error_chain(&e), tries, "cannot write event, will retry");
                // client-go randomizes the first sleep so clients don't retry in lockstep.
                let wait = if tries == 1 {
                    options.retry_interval.mul_f64(rand::random::<f64>())
                } else {
                    options.retry_interval
                };
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = &mut stop => return Delivery { fate: Fate::DroppedShutdown, tries },
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use std::time::Duration;

    use super::*;
    use crate::recorder::clock::{Clock, ManualClock, Time};
    use crate::recorder::correlator::Correlator;
    use crate::recorder::event::{EventType, ObjectRef, Source};
    use crate::recorder::metrics::SinkLatency;
    use crate::recorder::options::CorrelatorOptions;

    /// A sink answering from a script, recording every call.
    #[derive(Clone, Default)]
    pub struct FakeSink {
        /// Answers to give, in order; `Ok` once exhausted.
        pub script: Arc<Mutex<VecDeque<Result<(), SinkError>>>>,
        /// `create <name>` or `patch <name>` per call.
        pub calls: Arc<Mutex<Vec<String>>>,
    }

    impl FakeSink {
        pub fn answering(answers: Vec<Result<(), SinkError>>) -> Self {
            Self {
                script: Arc::new(Mutex::new(answers.into())),
                calls: Arc::default(),
            }
        }
        fn next(&self, call: String) -> Result<(), SinkError> {
            self.calls.lock().unwrap().push(call);
            self.script.lock().unwrap().pop_front().unwrap_or(Ok(()))
        }
    }

    impl Sink for FakeSink {
        async fn create(&self, event: &corev1::Event) -> Result<(), SinkError> {
            self.next(format!(
                "create {}",
                event.metadata.name.clone().unwrap_or_default()
            ))
        }
        async fn patch(
            &self,
            _namespace: &str,
            name: &str,
            _body: &serde_json::Value,
        ) -> Result<(), SinkError> {
            self.next(format!("patch {name}"))
        }
    }

    pub fn transport() -> SinkError {
        SinkError::Transport("connection reset".into())
    }

    fn correlated(repeat: bool) -> (Event, Correlation) {
        let clock = ManualClock::new(Time::from_unix_nanos(1_700_000_000_000_000_000));
        let mut c = Correlator::new(&CorrelatorOptions::default(), clock.clone());
        let e = Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "", "p", "u")),
            Arc::new(Source::new("c", "")),
            EventType::Normal,
            "R",
            "m",
            clock.now(),
        );
        let first = c.correlate(&e);
        if !repeat {
            return (e, first);
        }
        c.update_state(&e, &first);
        let again = c.correlate(&e);
        (e, again)
    }

    /// [`deliver`] with the default options and a latency histogram nobody reads.
    async fn deliver_with_defaults<S: Sink>(
        sink: &S,
        event: &Event,
        correlation: &Correlation,
        stop: impl Future<Output = ()>,
    ) -> Delivery {
        let options = SinkOptions::default();
        deliver(
            sink,
            &options,
            &SinkLatency::default(),
            event,
            correlation,
            stop,
        )
        .await
    }

    fn never() -> impl Future<Output = ()> {
        std::future::pending()
    }

    #[tokio::test(start_paused = true)]
    async fn transport_errors_are_retried_until_success() {
        let sink = FakeSink::answering(vec![Err(transport()), Err(transport())]);
        let (e, c) = correlated(false);
        let d = deliver_with_defaults(&sink, &e, &c, never()).await;
        assert_eq!(
            d,
            Delivery {
                fate: Fate::Created,
                tries: 3
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_max_retries_as_failed() {
        let sink = FakeSink::answering((0..20).map(|_| Err(transport())).collect());
        let (e, c) = correlated(false);
        let start = tokio::time::Instant::now();
        let d = deliver_with_defaults(&sink, &e, &c, never()).await;
        assert_eq!(
            d,
            Delivery {
                fate: Fate::Failed,
                tries: 12
            }
        );
        // 10 full waits of 10 s plus one jittered first wait below 10 s.
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(100) && waited < Duration::from_secs(110));
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_error_is_rejected_without_retry() {
        let sink = FakeSink::answering(vec![Err(SinkError::Rejected {
            code: 422,
            message: "invalid".into(),
        })]);
        let (e, c) = correlated(false);
        let d = deliver_with_defaults(&sink, &e, &c, never()).await;
        assert_eq!(
            d,
            Delivery {
                fate: Fate::Rejected,
                tries: 1
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_patch_that_gets_404_falls_back_to_create() {
        let sink = FakeSink::answering(vec![Err(SinkError::NotFound)]);
        let (e, c) = correlated(true);
        let d = deliver_with_defaults(&sink, &e, &c, never()).await;
        assert_eq!(
            d,
            Delivery {
                fate: Fate::Created,
                tries: 1
            }
        );
        let calls = sink.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 2);
        assert!(calls[0].starts_with("patch p.") && calls[1].starts_with("create p."));
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_while_waiting_to_retry_is_dropped_shutdown() {
        let sink = FakeSink::answering((0..20).map(|_| Err(transport())).collect());
        let (e, c) = correlated(false);
        let stop = tokio::time::sleep(Duration::from_secs(15));
        let d = deliver_with_defaults(&sink, &e, &c, stop).await;
        assert_eq!(d.fate, Fate::DroppedShutdown);
        assert!(d.tries >= 1 && d.tries <= 3);
    }
}
