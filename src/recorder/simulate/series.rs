//! `informant simulate --api events.k8s.io/v1`: replays occurrences and sink faults through
//! the series [`Engine`] on a virtual clock, answering every call from the faults given (`ok`
//! otherwise), and prints one JSON line per API call or, with `--summary`, the fates per
//! reason.
//!
//! The simulated server holds the Events created: a patch of one it does not hold answers
//! `notfound`, a second create of a name `alreadyexists`, as a real server answers; sink
//! faults come first.
//!
//! The refresh and finish loops tick at multiples of their periods from `t = 0`, the
//! recorder's start; retries wait 10–12.5 s of virtual time, the jitter drawn from a seeded
//! generator. At `{"op": "end"}` (or the end of the input) the recorder stops as informant's
//! pipeline stops: every series with uncounted occurrences is written once, what is queued or
//! retrying finishes, and whatever is left ends `dropped_shutdown`.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::{BufRead, Write};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::output::go_number;
use super::series_input::{FaultResult, InEvent, InLine, InOp, build};
use super::{BASE, Error};
use crate::recorder::clock::Time;
use crate::recorder::correlator::EventNaming;
use crate::recorder::fate::Fate;
use crate::recorder::options::{SeriesOptions, SinkOptions};
use crate::recorder::series::{Call, Engine, Verb};

/// The fates of one reason's occurrences, in [`Fate::ALL`] order.
pub type Fates = [u64; Fate::COUNT];

/// Fates per reason (sorted by reason).
pub type SeriesSummary = BTreeMap<String, Fates>;

/// The options of a series simulation.
#[derive(Clone, Debug)]
pub struct SeriesRun {
    /// Key fields and periods.
    pub series: SeriesOptions,
    /// Tries and retry interval.
    pub sink: SinkOptions,
    /// The reporting controller of occurrences that name none.
    pub component: String,
    /// Seed of the retry jitter.
    pub seed: u64,
}

impl Default for SeriesRun {
    fn default() -> Self {
        Self {
            series: SeriesOptions::default(),
            sink: SinkOptions::default(),
            component: "informant".to_owned(),
            seed: 1,
        }
    }
}

#[derive(Debug)]
struct Rule {
    verb: Verb,
    reason: Option<String>,
    results: VecDeque<FaultResult>,
    always: bool,
}

/// The sink faults given so far: for each call, the first rule of its verb (and reason)
/// with a result left answers it; `always` rules repeat their results forever.
#[derive(Debug, Default)]
struct Faults(Vec<Rule>);

impl Faults {
    fn answer(&mut self, verb: Verb, reason: &str) -> Option<FaultResult> {
        let i = self.0.iter().position(|r| {
            r.verb == verb
                && r.reason.as_deref().is_none_or(|m| m == reason)
                && !r.results.is_empty()
        })?;
        let rule = &mut self.0[i];
        let result = rule.results.pop_front()?;
        if rule.always {
            rule.results.push_back(result);
        } else if rule.results.is_empty() {
            self.0.remove(i);
        }
        Some(result)
    }
}

/// One output line: an API call.
#[derive(Serialize)]
struct CallLine<'a> {
    t: Value,
    verb: &'static str,
    result: &'static str,
    reason: &'a str,
    regarding: Value,
    series: Option<SeriesCount>,
}

#[derive(Serialize)]
struct SeriesCount {
    count: u32,
}

/// A deterministic `[0, 1)` generator for the retry jitter (`SplitMix64`).
fn jitter(seed: u64) -> Box<dyn FnMut() -> f64 + Send> {
    let mut state = seed;
    Box::new(move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        #[allow(clippy::cast_precision_loss)] // Reason: 53 random bits make the fraction.
        let x = (z >> 11) as f64 / (1u64 << 53) as f64;
        x
    })
}

struct Sim<W> {
    engine: Engine<String>,
    faults: Faults,
    /// The Events the simulated server holds (namespace, name): a patch of another is
    /// `notfound`, a second create of one `alreadyexists`, as a real server answers.
    server: HashSet<(String, String)>,
    summary: SeriesSummary,
    out: W,
    lines: bool,
}

impl<W: Write> Sim<W> {
    /// Makes every call due at `now`, answering each from the faults, until none is left.
    fn settle(&mut self, now: Time) -> Result<(), Error> {
        loop {
            let calls = self.engine.poll(now);
            if calls.is_empty() {
                break;
            }
            for call in calls {
                self.call(now, &call)?;
            }
        }
        for f in self.engine.take_finished() {
            self.count(&f.token, f.fate);
        }
        Ok(())
    }

    fn call(&mut self, now: Time, call: &Call) -> Result<(), Error> {
        let reason = call.write.event.reason.clone();
        let stored = (
            call.write.namespace().to_owned(),
            call.write.name.to_string(),
        );
        let fault = self
            .faults
            .answer(call.verb, &reason)
            .or_else(|| match call.verb {
                Verb::Create if self.server.contains(&stored) => Some(FaultResult::Alreadyexists),
                Verb::Patch if !self.server.contains(&stored) => Some(FaultResult::Notfound),
                _ => None,
            });
        if fault.is_none() && call.verb == Verb::Create {
            self.server.insert(stored);
        }
        let result = fault.map_or(Ok(()), |f| Err(f.to_error()));
        self.engine.answer(now, call.id, &result);
        if self.lines {
            let regarding = call.write.to_k8s().regarding;
            let line = CallLine {
                t: go_number(now.seconds_since(BASE)),
                verb: call.verb.as_str(),
                result: fault.map_or("ok", FaultResult::as_str),
                reason: &reason,
                regarding: serde_json::to_value(regarding).unwrap_or(Value::Null),
                series: call.write.series.map(|s| SeriesCount { count: s.count }),
            };
            serde_json::to_writer(&mut self.out, &line).map_err(|e| Error::Write(e.into()))?;
            self.out.write_all(b"\n").map_err(Error::Write)?;
        }
        Ok(())
    }

    /// Runs every wake (tick, retry) up to and including `until`.
    fn advance(&mut self, until: Time) -> Result<(), Error> {
        while let Some(wake) = self.engine.next_wake()
            && wake <= until
        {
            self.settle(wake)?;
        }
        self.settle(until)
    }

    /// Stops the recorder at `now`: flush, let writes finish, drop the rest.
    fn stop(&mut self, mut now: Time) -> Result<(), Error> {
        self.engine.flush();
        self.settle(now)?;
        while !self.engine.is_idle() {
            let Some(wake) = self.engine.next_wake() else {
                break;
            };
            now = now.max(wake);
            self.settle(now)?;
        }
        for reason in self.engine.drain() {
            self.count(&reason, Fate::DroppedShutdown);
        }
        Ok(())
    }

    fn count(&mut self, reason: &str, fate: Fate) {
        self.summary
            .entry(reason.to_owned())
            .or_insert([0; Fate::COUNT])[fate.index()] += 1;
    }
}

fn at(t: f64, line: usize) -> Result<Time, Error> {
    if !t.is_finite() || t.abs() > 9.0e9 {
        return Err(Error::BadTime { line, t });
    }
    #[allow(clippy::cast_possible_truncation)] // Reason: |t| ≤ 9e9 s fits in i64 ns.
    Ok(Time::from_unix_nanos(
        BASE.unix_nanos() + (t * 1e9).round() as i64,
    ))
}

/// Replays `input` (see the module documentation) and returns the fates per reason; one JSON
/// line per API call goes to `out` if `lines`.
///
/// # Errors
///
/// A line that cannot be read or parsed, a bad or decreasing `t`, or output that cannot be
/// written.
pub fn run_series(
    input: impl BufRead,
    options: &SeriesRun,
    out: impl Write,
    lines: bool,
) -> Result<SeriesSummary, Error> {
    let mut sim = Sim {
        engine: Engine::new(
            &options.series,
            &options.sink,
            EventNaming::ClientGo,
            BASE,
            jitter(options.seed),
        ),
        faults: Faults::default(),
        server: HashSet::new(),
        summary: SeriesSummary::new(),
        out,
        lines,
    };
    let mut now = BASE;
    for (n, line) in input.lines().enumerate() {
        let number = n + 1;
        let line = line.map_err(|source| Error::Read {
            line: number,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed = parse(&line, number)?;
        let t = at(parsed.t(), number)?;
        if t < now {
            return Err(Error::BadOption {
                flag: "events",
                reason: format!("line {number}: t goes back in time"),
            });
        }
        sim.advance(t)?;
        now = t;
        match parsed {
            InLine::Event(ev) => record(&mut sim, &ev, t, &options.component),
            InLine::Op(InOp::Sink {
                verb,
                match_reason,
                results,
                always,
                ..
            }) => sim.faults.0.push(Rule {
                verb: verb.into(),
                reason: match_reason,
                results: results.into(),
                always,
            }),
            InLine::Op(InOp::End { .. }) => break,
        }
        sim.settle(t)?;
    }
    sim.stop(now)?;
    sim.out.flush().map_err(Error::Write)?;
    Ok(sim.summary)
}

fn parse(line: &str, number: usize) -> Result<InLine, Error> {
    let value: Value = serde_json::from_str(line).map_err(|source| Error::Parse {
        line: number,
        source,
    })?;
    let parsed = if value.get("op").is_some() {
        serde_json::from_value(value).map(InLine::Op)
    } else {
        serde_json::from_value(value).map(|e| InLine::Event(Box::new(e)))
    };
    parsed.map_err(|source| Error::Parse {
        line: number,
        source,
    })
}

fn record<W: Write>(sim: &mut Sim<W>, ev: &InEvent, now: Time, component: &str) {
    match build(ev, now, component) {
        Some(event) => sim.engine.record(now, Arc::new(event), ev.reason.clone()),
        None => sim.count(&ev.reason, Fate::Invalid),
    }
}

/// The fates `--summary` shows, in this order.
pub const SUMMARY_FATES: [Fate; 8] = [
    Fate::Created,
    Fate::SeriesPatched,
    Fate::SeriesCounted,
    Fate::Abandoned,
    Fate::Failed,
    Fate::DroppedSeriesQueueFull,
    Fate::DroppedShutdown,
    Fate::Invalid,
];

/// Writes `summary` as an aligned table: per reason, the occurrences recorded and each fate.
///
/// # Errors
///
/// The output cannot be written.
pub fn write_series_summary(summary: &SeriesSummary, mut out: impl Write) -> Result<(), Error> {
    let width = summary.keys().map(String::len).max().unwrap_or(0).max(6);
    let mut header = format!("{:<width$}  {:>8}", "reason", "recorded");
    for f in SUMMARY_FATES {
        header.push_str("  ");
        header.push_str(f.as_str());
    }
    header.push('\n');
    out.write_all(header.as_bytes()).map_err(Error::Write)?;
    for (reason, fates) in summary {
        let recorded: u64 = fates.iter().sum();
        let mut row = format!("{reason:<width$}  {recorded:>8}");
        for f in SUMMARY_FATES {
            let w = f.as_str().len();
            let cell = fates[f.index()].to_string();
            row.push_str(&" ".repeat(2 + w.saturating_sub(cell.len())));
            row.push_str(&cell);
        }
        row.push('\n');
        out.write_all(row.as_bytes()).map_err(Error::Write)?;
    }
    Ok(())
}
