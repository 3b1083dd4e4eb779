//! The series engine: client-go's `tools/events` broadcaster (`event_broadcaster.go`) as a
//! synchronous state machine on an injected time, so that `informant simulate` replays it on
//! a virtual clock and the pipeline drives it with tokio, through the same code.
//!
//! client-go runs `recordToSink` per event (cache update, then the write queued for one of
//! eight workers, each retrying up to 12 times 10–12.5 s apart), and two loops: the refresh of
//! every open series every 30 minutes and the finish of quiet ones every 6 minutes, each
//! writing its snapshot one Event at a time. Here the driver asks [`Engine::poll`] for the
//! calls to make now, hands each answer to [`Engine::answer`], and sleeps until
//! [`Engine::next_wake`]. Every occurrence's token comes back in exactly one
//! [`Finished`] with its fate.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

pub use super::call::{Call, CallId, Finished, Purpose};
use super::key::SeriesKey;
use super::write::{Answer, SeriesState, Verb, Write};
use crate::recorder::clock::Time;
use crate::recorder::correlator::{EventNaming, Names};
use crate::recorder::event::Event;
use crate::recorder::fate::Fate;
use crate::recorder::options::{SeriesOptions, SinkOptions};
use crate::recorder::sink::SinkError;

use std::sync::Arc;

/// Workers writing occurrences at once.
///
/// client-go `tools/events/event_broadcaster.go`: `recordWorkers = 8`.
pub const SERIES_WORKERS: usize = 8;

/// Writes waiting for a worker; one more is dropped (`dropped_series_queue_full`).
///
/// client-go `tools/events/event_broadcaster.go`: `maxQueuedEvents = 1000` (`eventQueue`).
pub const SERIES_QUEUE_LENGTH: usize = 1000;

/// The jitter of every wait between two tries: up to this fraction of the interval is added.
///
/// client-go `tools/events/event_broadcaster.go`: `wait.Jitter(e.sleepDuration, 0.25)`.
pub const RETRY_JITTER: f64 = 0.25;

#[derive(Debug)]
struct Entry<T> {
    epoch: u64,
    version: u64,
    write: Write,
    /// Occurrences folded into the count, with the count they made, not yet written.
    folded: VecDeque<(u32, T)>,
}

#[derive(Debug)]
struct Job<T> {
    key: SeriesKey,
    epoch: u64,
    write: Write,
    token: T,
    tries: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Job(u64),
    Sweep(usize),
}

#[derive(Clone, Debug)]
struct SweepItem {
    key: SeriesKey,
    epoch: u64,
    version: u64,
    write: Write,
    record: bool,
}

#[derive(Debug, Default)]
struct Sweep {
    next: Time,
    items: VecDeque<SweepItem>,
    in_flight: Option<SweepItem>,
}

impl Sweep {
    fn idle(&self) -> bool {
        self.items.is_empty() && self.in_flight.is_none()
    }
}

const REFRESH: usize = 0;
const FINISH: usize = 1;
const FLUSH: usize = 2;
const PURPOSES: [Purpose; 3] = [Purpose::Refresh, Purpose::Finish, Purpose::Flush];

/// client-go's `tools/events` broadcaster as a state machine (see the module documentation).
/// `T` is what an occurrence carries to its fate (the pipeline's envelope, the simulator's
/// line number).
pub struct Engine<T> {
    options: SeriesOptions,
    sink: SinkOptions,
    names: Names,
    jitter: Box<dyn FnMut() -> f64 + Send>,
    cache: HashMap<SeriesKey, Entry<T>>,
    next_epoch: u64,
    queue: VecDeque<u64>,
    jobs: HashMap<u64, Job<T>>,
    next_job: u64,
    busy: usize,
    waking: BTreeSet<(Time, u64)>,
    calls: HashMap<CallId, (Owner, Verb)>,
    next_call: CallId,
    ready: Vec<Call>,
    sweeps: [Sweep; 3],
    ticking: bool,
    finished: Vec<Finished<T>>,
}

impl<T> std::fmt::Debug for Engine<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("options", &self.options)
            .field("cached", &self.cache.len())
            .field("jobs", &self.jobs.len())
            .finish_non_exhaustive()
    }
}

impl<T> Engine<T> {
    /// An engine started at `start` (its refresh and finish tick at multiples of their
    /// periods from it), naming Events as `naming` says, drawing each retry's jitter from
    /// `jitter` (a number in `[0, 1)`).
    #[must_use]
    pub fn new(
        options: &SeriesOptions,
        sink: &SinkOptions,
        naming: EventNaming,
        start: Time,
        jitter: Box<dyn FnMut() -> f64 + Send>,
    ) -> Self {
        let mut sweeps: [Sweep; 3] = Default::default();
        sweeps[REFRESH].next = start;
        sweeps[FINISH].next = start;
        Self {
            options: options.clone(),
            sink: sink.clone(),
            names: Names::new(naming),
            jitter,
            cache: HashMap::new(),
            next_epoch: 0,
            queue: VecDeque::new(),
            jobs: HashMap::new(),
            next_job: 0,
            busy: 0,
            waking: BTreeSet::new(),
            calls: HashMap::new(),
            next_call: 0,
            ready: Vec::new(),
            sweeps,
            ticking: true,
            finished: Vec::new(),
        }
    }

    /// Applies new options: the key to occurrences recorded from now on (cached series keep
    /// their key and finish as usual), the periods from the next tick, the tries and interval
    /// to writes queued from now on.
    pub fn reconfigure(&mut self, options: &SeriesOptions, sink: &SinkOptions) {
        self.options.clone_from(options);
        self.sink.clone_from(sink);
    }

    /// Keys cached (open series and recent singletons).
    #[must_use]
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// An occurrence at `now` (client-go `recordToSink`): a new key is cached and its Event
    /// created; the second occurrence opens the series and patches it; later ones are folded
    /// into the count and wait for a refresh, the finish or the flush.
    ///
    /// Ticks due at or before `now` take their snapshot first, so an occurrence is never
    /// part of a tick that was due before it.
    pub fn record(&mut self, now: Time, event: Arc<Event>, token: T) {
        self.ticks(now);
        let key = SeriesKey::of(&event, &self.options.key_fields);
        let (write, epoch) = if let Some(entry) = self.cache.get_mut(&key) {
            entry.version += 1;
            if let Some(series) = entry.write.series.as_mut() {
                series.count = series.count.saturating_add(1);
                series.last_observed = now;
                entry.folded.push_back((series.count, token));
                return;
            }
            entry.write.series = Some(SeriesState {
                count: 2,
                last_observed: now,
            });
            (entry.write.clone(), entry.epoch)
        } else {
            let name = self.names.claim(event.namespace(), event.name());
            let write = Write {
                event,
                name,
                series: None,
            };
            self.next_epoch += 1;
            self.cache.insert(
                key.clone(),
                Entry {
                    epoch: self.next_epoch,
                    version: 0,
                    write: write.clone(),
                    folded: VecDeque::new(),
                },
            );
            (write, self.next_epoch)
        };
        if self.queue.len() >= SERIES_QUEUE_LENGTH {
            let count = write.series.map_or(1, |s| s.count);
            self.done(token, Fate::DroppedSeriesQueueFull, 0, count);
            return;
        }
        self.next_job += 1;
        self.jobs.insert(
            self.next_job,
            Job {
                key,
                epoch,
                write,
                token,
                tries: 0,
            },
        );
        self.queue.push_back(self.next_job);
    }

    /// The calls to make at `now`: due ticks take their snapshot, retries due wake, idle
    /// workers take queued writes, each sweep makes its next write.
    pub fn poll(&mut self, now: Time) -> Vec<Call> {
        self.ticks(now);
        while let Some(&(at, job)) = self.waking.first()
            && at <= now
        {
            self.waking.pop_first();
            self.job_call(job);
        }
        while self.busy < SERIES_WORKERS
            && let Some(job) = self.queue.pop_front()
        {
            self.busy += 1;
            self.job_call(job);
        }
        for sweep in [REFRESH, FINISH, FLUSH] {
            self.sweep_next(sweep);
        }
        std::mem::take(&mut self.ready)
    }

    /// The answer to call `id` at `now`. Unknown ids are ignored. Call [`Engine::poll`]
    /// afterwards: the answer may free a worker or ask for a create.
    pub fn answer(&mut self, now: Time, id: CallId, result: &Result<(), SinkError>) {
        let Some((owner, verb)) = self.calls.remove(&id) else {
            return;
        };
        match owner {
            Owner::Job(job_id) => self.job_answer(now, job_id, verb, result),
            Owner::Sweep(sweep) => self.sweep_answer(sweep, verb, result),
        }
    }

    /// The next instant [`Engine::poll`] has something to do without an answer: a tick or a
    /// retry.
    #[must_use]
    pub fn next_wake(&self) -> Option<Time> {
        let retry = self.waking.first().map(|&(at, _)| at);
        let ticks = self
            .ticking
            .then(|| self.sweeps[REFRESH].next.min(self.sweeps[FINISH].next));
        match (retry, ticks) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Stops the ticks and writes, once each, every series with occurrences folded since its
    /// last write (informant's addition for shutdown: client-go loses them).
    pub fn flush(&mut self) {
        self.ticking = false;
        let mut items: Vec<SweepItem> = self
            .cache
            .iter()
            .filter(|(_, e)| !e.folded.is_empty())
            .map(|(key, e)| item(key, e, true))
            .collect();
        items.sort_by_key(|i| i.epoch);
        self.sweeps[FLUSH].items.extend(items);
    }

    /// True once nothing is queued, retrying, in flight or left to sweep.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty() && self.sweeps.iter().all(Sweep::idle) && self.ready.is_empty()
    }

    /// The occurrences that reached their fate since the last call.
    pub fn take_finished(&mut self) -> Vec<Finished<T>> {
        std::mem::take(&mut self.finished)
    }

    /// Every token still held (queued, retrying or folded), emptying the engine: what a
    /// stop leaves undelivered.
    pub fn drain(&mut self) -> Vec<T> {
        let mut left: Vec<T> = self.jobs.drain().map(|(_, j)| j.token).collect();
        for (_, entry) in self.cache.drain() {
            left.extend(entry.folded.into_iter().map(|(_, t)| t));
        }
        self.queue.clear();
        self.waking.clear();
        self.calls.clear();
        self.busy = 0;
        left
    }

    fn done(&mut self, token: T, fate: Fate, tries: u32, count: u32) {
        self.finished.push(Finished {
            token,
            fate,
            tries,
            count,
        });
    }

    fn call(&mut self, owner: Owner, verb: Verb, write: Write, purpose: Purpose) {
        self.next_call += 1;
        self.calls.insert(self.next_call, (owner, verb));
        self.ready.push(Call {
            id: self.next_call,
            verb,
            write,
            purpose,
        });
    }

    fn job_call(&mut self, job_id: u64) {
        if let Some(job) = self.jobs.get(&job_id) {
            let write = job.write.clone();
            self.call(
                Owner::Job(job_id),
                write.first_verb(),
                write,
                Purpose::Occurrence,
            );
        }
    }

    fn job_answer(&mut self, now: Time, job_id: u64, verb: Verb, result: &Result<(), SinkError>) {
        let Some(job) = self.jobs.get_mut(&job_id) else {
            return;
        };
        let fate = match job.write.sort(verb, result) {
            Answer::CreateInstead => {
                let write = job.write.clone();
                self.call(Owner::Job(job_id), Verb::Create, write, Purpose::Occurrence);
                return;
            }
            Answer::Delivered(Verb::Patch) => Fate::SeriesPatched,
            Answer::Delivered(Verb::Create) => Fate::Created,
            Answer::Abandon if raced_by_its_series(job, result) => {
                // The second occurrence's series create won the race against this first
                // create (eight workers write at once): the Event exists and its count
                // includes this occurrence. client-go gives up on it silently; here it waits,
                // folded, for the next write of the series to deliver it.
                if let Some(job) = self.jobs.remove(&job_id) {
                    self.busy = self.busy.saturating_sub(1);
                    match self.cache.get_mut(&job.key) {
                        Some(entry) if entry.epoch == job.epoch && entry.write.series.is_some() => {
                            entry.folded.push_front((1, job.token));
                        }
                        _ => self.done(job.token, Fate::Abandoned, job.tries + 1, 1),
                    }
                }
                return;
            }
            Answer::Abandon => Fate::Abandoned,
            Answer::Retry => {
                job.tries += 1;
                if job.tries < self.sink.max_retries.max(1) {
                    let wait = self
                        .sink
                        .retry_interval
                        .mul_f64(1.0 + RETRY_JITTER * (self.jitter)().clamp(0.0, 1.0));
                    self.waking.insert((now.saturating_add(wait), job_id));
                    return;
                }
                tracing::warn!(tries = job.tries, "cannot write event, retry limit reached");
                Fate::Failed
            }
        };
        if let Some(job) = self.jobs.remove(&job_id) {
            self.busy = self.busy.saturating_sub(1);
            let tries = if fate == Fate::Failed {
                job.tries
            } else {
                job.tries + 1
            };
            let count = job.write.series.map_or(1, |s| s.count);
            self.done(job.token, fate, tries, count);
        }
    }

    fn ticks(&mut self, now: Time) {
        if self.ticking {
            self.tick(REFRESH, self.options.refresh, now);
            self.tick(FINISH, self.options.finish, now);
        }
    }

    fn tick(&mut self, sweep: usize, period: Duration, now: Time) {
        if self.sweeps[sweep].next > now {
            return;
        }
        let period = period.max(Duration::from_millis(1));
        while self.sweeps[sweep].next <= now {
            self.sweeps[sweep].next = self.sweeps[sweep].next.saturating_add(period);
        }
        if !self.sweeps[sweep].idle() {
            // client-go's `wait.Until` starts the next run only after this one returns.
            return;
        }
        let finish = self.options.finish;
        let mut items: Vec<SweepItem> = self
            .cache
            .iter()
            .filter_map(|(key, e)| match (sweep, e.write.series) {
                (REFRESH, Some(_)) => Some(item(key, e, true)),
                (FINISH, Some(s)) if s.last_observed.saturating_add(finish) < now => {
                    Some(item(key, e, true))
                }
                (FINISH, None) if e.write.event.time.saturating_add(finish) < now => {
                    Some(item(key, e, false))
                }
                _ => None,
            })
            .collect();
        items.sort_by_key(|i| i.epoch);
        self.sweeps[sweep].items.extend(items);
    }

    fn sweep_next(&mut self, sweep: usize) {
        while self.sweeps[sweep].in_flight.is_none() {
            // A series write waits for the occurrence writes of its key still queued, in
            // flight or retrying: sent beside them, the count it carries could be overwritten
            // by an older one (the second occurrence's count 2 landing after a flush's 9).
            let Some(at) = self.sweeps[sweep].items.iter().position(|item| {
                !self
                    .jobs
                    .values()
                    .any(|job| job.key == item.key && job.epoch == item.epoch)
            }) else {
                return;
            };
            let Some(item) = self.sweeps[sweep].items.remove(at) else {
                return;
            };
            if item.record {
                let write = item.write.clone();
                let verb = write.first_verb();
                self.sweeps[sweep].in_flight = Some(item);
                self.call(Owner::Sweep(sweep), verb, write, PURPOSES[sweep]);
            } else {
                self.forget_if_unchanged(&item, Fate::Abandoned);
            }
        }
    }

    fn sweep_answer(&mut self, sweep: usize, verb: Verb, result: &Result<(), SinkError>) {
        let Some(item) = self.sweeps[sweep].in_flight.take() else {
            return;
        };
        match item.write.sort(verb, result) {
            Answer::CreateInstead => {
                let write = item.write.clone();
                self.sweeps[sweep].in_flight = Some(item);
                self.call(Owner::Sweep(sweep), Verb::Create, write, PURPOSES[sweep]);
            }
            Answer::Delivered(_) => {
                self.counted(&item);
                if sweep != REFRESH {
                    self.forget_if_unchanged(&item, Fate::Abandoned);
                }
            }
            // Finish: the key stays and the next tick tries again; refresh: nothing changes.
            Answer::Retry => {}
            Answer::Abandon => {
                if sweep != REFRESH {
                    self.forget_if_unchanged(&item, Fate::Abandoned);
                }
            }
        }
    }

    /// The occurrences folded up to the count `item` wrote are delivered.
    fn counted(&mut self, item: &SweepItem) {
        let Some(written) = item.write.series.map(|s| s.count) else {
            return;
        };
        let Some(entry) = self.cache.get_mut(&item.key) else {
            return;
        };
        if entry.epoch != item.epoch {
            return;
        }
        let mut delivered = Vec::new();
        while entry.folded.front().is_some_and(|(n, _)| *n <= written) {
            if let Some(folded) = entry.folded.pop_front() {
                delivered.push(folded);
            }
        }
        for (count, token) in delivered {
            self.done(token, Fate::SeriesCounted, 0, count);
        }
    }

    /// client-go deletes the key only if the cached Event is still the snapshot written;
    /// what was folded and not written ends in `fate`.
    fn forget_if_unchanged(&mut self, item: &SweepItem, fate: Fate) {
        let unchanged = self
            .cache
            .get(&item.key)
            .is_some_and(|e| e.epoch == item.epoch && e.version == item.version);
        if !unchanged {
            return;
        }
        if let Some(entry) = self.cache.remove(&item.key) {
            for (count, token) in entry.folded {
                self.done(token, fate, 0, count);
            }
        }
    }
}

/// True if `job`, a first create, got `AlreadyExists` while its key's series is open: the
/// series' own create made the Event first.
fn raced_by_its_series<T>(job: &Job<T>, result: &Result<(), SinkError>) -> bool {
    job.write.series.is_none() && matches!(result, Err(SinkError::Rejected { code: 409, .. }))
}

fn item<T>(key: &SeriesKey, e: &Entry<T>, record: bool) -> SweepItem {
    SweepItem {
        key: key.clone(),
        epoch: e.epoch,
        version: e.version,
        write: e.write.clone(),
        record,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::event::{EventType, ObjectRef, Source};

    fn occurrence() -> Arc<Event> {
        let mut e = Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "ns", "p", "u")),
            Arc::new(Source::new("ctrl", "node")),
            EventType::Warning,
            "BackOff",
            "back-off",
            Time::EPOCH,
        );
        e.action = Some("Restarting".into());
        Arc::new(e)
    }

    fn counts(calls: &[Call]) -> Vec<Option<u32>> {
        calls
            .iter()
            .map(|c| c.write.series.map(|s| s.count))
            .collect()
    }

    #[test]
    fn a_flush_waits_for_the_occurrence_writes_of_its_key_so_the_last_count_lands_last() {
        let mut engine: Engine<u32> = Engine::new(
            &SeriesOptions::default(),
            &SinkOptions::default(),
            EventNaming::Unique,
            Time::EPOCH,
            Box::new(|| 0.0),
        );
        for token in 0..5 {
            engine.record(Time::EPOCH, occurrence(), token);
        }
        // The create (no series) and the second occurrence's patch (count 2) go at once.
        let first = engine.poll(Time::EPOCH);
        assert_eq!(counts(&first), [None, Some(2)]);
        engine.flush();
        assert!(
            engine.poll(Time::EPOCH).is_empty(),
            "the flush (count 5) must not race the patch of count 2"
        );
        for call in &first {
            engine.answer(Time::EPOCH, call.id, &Ok(()));
        }
        // Then the series writes (the flush, and the refresh of the tick at the start), each
        // with the whole count.
        let series = engine.poll(Time::EPOCH);
        assert!(!series.is_empty());
        assert!(
            counts(&series).iter().all(|c| *c == Some(5)),
            "{:?}",
            counts(&series)
        );
        for call in &series {
            engine.answer(Time::EPOCH, call.id, &Ok(()));
        }
        while !engine.poll(Time::EPOCH).is_empty() {}
        assert!(engine.is_idle());
        assert_eq!(
            engine.take_finished().len(),
            5,
            "every occurrence has its fate"
        );
    }
}
