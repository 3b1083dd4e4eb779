//! Runs a series [`Engine`] inside the pipeline's sink worker with tokio: its calls go to the
//! [`Sink`] concurrently (eight workers, and the refresh and finish loops, as in client-go),
//! its wakes become timers, and each occurrence's envelope ends in the fate the engine gives
//! it. The engine's time is the recorder clock's instant when the driver starts plus the tokio
//! time elapsed since, so a paused tokio clock drives it in tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use super::engine::{Call, CallId, Engine};
use super::write::Verb;
use crate::recorder::clock::{Clock, Time};
use crate::recorder::correlator::EventNaming;
use crate::recorder::envelope::Envelope;
use crate::recorder::fate::Fate;
use crate::recorder::metrics::SinkLatency;
use crate::recorder::options::{SeriesOptions, SinkOptions};
use crate::recorder::sink::{Sink, SinkError};

type Answered = (CallId, Result<(), SinkError>);
type InFlight = FuturesUnordered<Pin<Box<dyn Future<Output = Answered> + Send>>>;

/// The series path of a sink worker; its engine starts at the first use.
pub(crate) struct Driver<S> {
    sink: Arc<S>,
    clock: Arc<dyn Clock>,
    latency: SinkLatency,
    options: (SeriesOptions, SinkOptions),
    started: Option<Started>,
    in_flight: InFlight,
}

struct Started {
    engine: Engine<Envelope>,
    instant: Instant,
    time: Time,
}

impl<S> std::fmt::Debug for Driver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("engine", &self.started.as_ref().map(|s| &s.engine))
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl<S: Sink> Driver<S> {
    pub(crate) fn new(
        sink: Arc<S>,
        clock: Arc<dyn Clock>,
        series: &SeriesOptions,
        options: &SinkOptions,
    ) -> Self {
        Self {
            sink,
            clock,
            latency: SinkLatency::default(),
            options: (series.clone(), options.clone()),
            started: None,
            in_flight: FuturesUnordered::new(),
        }
    }

    pub(crate) fn with_latency(mut self, latency: SinkLatency) -> Self {
        self.latency = latency;
        self
    }

    /// Starts the engine (its ticks count from now), if it is not running yet.
    pub(crate) fn start(&mut self) {
        if self.started.is_none() {
            let time = self.clock.now();
            self.started = Some(Started {
                engine: Engine::new(
                    &self.options.0,
                    &self.options.1,
                    EventNaming::Unique,
                    time,
                    Box::new(rand::random::<f64>),
                ),
                instant: Instant::now(),
                time,
            });
        }
    }

    pub(crate) fn reconfigure(&mut self, series: &SeriesOptions, options: &SinkOptions) {
        self.options = (series.clone(), options.clone());
        if let Some(s) = self.started.as_mut() {
            s.engine.reconfigure(series, options);
        }
    }

    /// Keys cached by the engine.
    pub(crate) fn cached(&self) -> usize {
        self.started.as_ref().map_or(0, |s| s.engine.cached())
    }

    /// An occurrence. `events.k8s.io/v1` requires an `action`; an event recorded without one
    /// ([`Recorder::record`](crate::recorder::Recorder::record), which has none) takes its
    /// reason as its action.
    pub(crate) fn record(&mut self, envelope: Envelope) {
        let mut event = envelope.event().clone();
        if event.action.as_deref().is_none_or(str::is_empty) {
            Arc::make_mut(&mut event).action = Some(event.reason.clone());
        }
        self.start();
        let Some(s) = self.started.as_mut() else {
            return;
        };
        let now = s.now();
        s.engine.record(now, event, envelope);
        self.pump(now);
    }

    /// Waits for an answer or a wake and handles it; pending forever if there is nothing to
    /// wait for. Cancel-safe.
    pub(crate) async fn step(&mut self) {
        let wake = self
            .started
            .as_ref()
            .and_then(|s| Some(s.instant_of(s.engine.next_wake()?)));
        tokio::select! {
            Some((id, result)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                if let Some(s) = self.started.as_mut() {
                    let now = s.now();
                    s.engine.answer(now, id, &result);
                    self.pump(now);
                }
            }
            () = sleep_until(wake), if wake.is_some() => {
                if let Some(s) = self.started.as_ref() {
                    let now = s.now();
                    self.pump(now);
                }
            }
            else => std::future::pending::<()>().await,
        }
    }

    /// At the end: writes every series' uncounted occurrences once and lets what is queued
    /// or retrying finish, until `stop`; what is left then ends `dropped_shutdown`.
    pub(crate) async fn finish(mut self, stop: impl Future<Output = ()>) {
        let Some(s) = self.started.as_mut() else {
            return;
        };
        s.engine.flush();
        let now = s.now();
        self.pump(now);
        let mut stop = std::pin::pin!(stop);
        while self.started.as_ref().is_some_and(|s| !s.engine.is_idle()) {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = self.step() => {}
            }
        }
        if let Some(s) = self.started.as_mut() {
            for envelope in s.engine.drain() {
                envelope.finish(Fate::DroppedShutdown);
            }
        }
    }

    fn pump(&mut self, now: Time) {
        let Some(s) = self.started.as_mut() else {
            return;
        };
        for call in s.engine.poll(now) {
            self.in_flight.push(Box::pin(send(
                self.sink.clone(),
                self.latency.clone(),
                call,
            )));
        }
        for f in s.engine.take_finished() {
            f.token.span().record("event.count", f.count);
            if f.tries > 0 {
                f.token.span().record("event.tries", f.tries);
            }
            f.token.finish(f.fate);
        }
    }
}

impl Started {
    fn now(&self) -> Time {
        self.time.saturating_add(self.instant.elapsed())
    }

    fn instant_of(&self, t: Time) -> Instant {
        let ahead = u64::try_from(t.nanos_since(self.time)).unwrap_or(0);
        self.instant + Duration::from_nanos(ahead)
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

async fn send<S: Sink>(sink: Arc<S>, latency: SinkLatency, call: Call) -> Answered {
    let start = std::time::Instant::now();
    let result = match call.verb {
        Verb::Create => sink.create_events_v1(&call.write.to_k8s()).await,
        Verb::Patch => match call.write.patch_body() {
            Some(body) => {
                sink.patch_events_v1(call.write.namespace(), &call.write.name.to_string(), &body)
                    .await
            }
            None => Err(SinkError::Request("a series patch without a series".into())),
        },
    };
    match call.verb {
        Verb::Create => latency.create(start.elapsed()),
        Verb::Patch => latency.patch(start.elapsed()),
    }
    match &result {
        // Retried, or answered by a create: nobody has to act.
        Err(e @ SinkError::Transport(_)) => {
            tracing::debug!(error = %crate::telemetry::error_chain(e), verb = call.verb.as_str(), purpose = call.purpose.as_str(), "cannot write event, will retry");
        }
        Err(e @ SinkError::NotFound) if call.verb == Verb::Patch => {
            tracing::debug!(error = %crate::telemetry::error_chain(e), purpose = call.purpose.as_str(), "series patch found no event, creating it");
        }
        Err(e @ SinkError::Rejected { code: 409, .. }) if call.write.series.is_some() => {
            tracing::debug!(error = %crate::telemetry::error_chain(e), purpose = call.purpose.as_str(), "series create raced, will retry");
        }
        // A 403 wants RBAC fixed, a 4xx or 5xx a look at the server (kube-rs logs them so).
        Err(e) => {
            tracing::warn!(error = %crate::telemetry::error_chain(e), verb = call.verb.as_str(), purpose = call.purpose.as_str(), "server rejected event");
        }
        Ok(()) => {}
    }
    (call.id, result)
}
