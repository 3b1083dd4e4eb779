//! `informant simulate`: replays an event stream (JSON lines) through the correlator on a
//! virtual clock, with a sink that never fails, and prints one fate per event or a summary
//! per reason. The formats are those of `shared/scenarios/README.md`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::clock::{ManualClock, Time};
use super::correlator::{Action, Correlator};
use super::event::{Event, EventType, ObjectRef, Source};
use super::fate::Fate;
use super::options::{CorrelatorOptions, SpamKeyField};
use crate::exit_code;

/// Unix time of `t = 0` in the scenarios, in nanoseconds (`1700000000 s`).
pub const BASE: Time = Time::from_unix_nanos(1_700_000_000_000_000_000);

/// Errors of a simulation. All are the input's fault (exit 64) except writing the output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A line of the event stream could not be read.
    #[error("cannot read event stream at line {line}")]
    Read {
        /// 1-based line number.
        line: usize,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not an event in the input format.
    #[error("line {line} is not an event")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// A line's `t` is not a finite number of seconds.
    #[error("line {line}: t must be a finite number of seconds, got {t}")]
    BadTime {
        /// 1-based line number.
        line: usize,
        /// The value given.
        t: f64,
    },
    /// The output could not be written.
    #[error("cannot write simulation output")]
    Write(#[source] std::io::Error),
    /// The event stream file could not be opened.
    #[error("cannot open event stream {}", path.display())]
    Open {
        /// The file given with `--events`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An option value is out of range or unknown.
    #[error("bad option --{flag}: {reason}")]
    BadOption {
        /// The flag, without dashes.
        flag: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
}

impl Error {
    /// The process exit code for this error ([`crate::exit_code`]).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Open { .. } | Error::Read { .. } => exit_code::NO_INPUT,
            Error::Write(_) => exit_code::FAILURE,
            Error::Parse { .. } | Error::BadTime { .. } | Error::BadOption { .. } => {
                exit_code::USAGE
            }
        }
    }
}

/// Arguments of `informant simulate`. Flags override the config file (loaded by the CLI, so
/// the recorder does not depend on the config module), which overrides client-go's defaults.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Args {
    /// The event stream: one JSON event per line (format: shared/scenarios/README.md).
    #[arg(long, value_name = "FILE.jsonl")]
    pub events: PathBuf,
    /// A `CacheConfig` YAML whose `spec.recorder.correlator` gives the options.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Refill rate of each spam-filter bucket, tokens per second (default: float32 1/300).
    #[arg(long)]
    pub qps: Option<f64>,
    /// Capacity of each spam-filter bucket (default 25).
    #[arg(long)]
    pub burst: Option<u32>,
    /// Distinct messages of similar events before aggregation (default 10).
    #[arg(long)]
    pub max_events: Option<usize>,
    /// Aggregation window in seconds (default 600).
    #[arg(long)]
    pub max_interval_seconds: Option<u64>,
    /// Entries of each correlator LRU (default 4096).
    #[arg(long)]
    pub lru_cache_size: Option<usize>,
    /// Fields of the spam key, comma-separated: source, involvedObject, type, reason, message
    /// (default source,involvedObject,type).
    #[arg(long, value_delimiter = ',')]
    pub spam_key_fields: Option<Vec<String>>,
    /// Print per-reason totals and the time after which each reason is never delivered
    /// again, instead of one line per event.
    #[arg(long)]
    pub summary: bool,
}

impl Args {
    /// The correlator options these arguments select, starting from `base` (the config
    /// file's, or the defaults).
    ///
    /// # Errors
    ///
    /// [`Error::BadOption`] for a value out of range or an unknown spam key field.
    pub fn options(&self, base: CorrelatorOptions) -> Result<CorrelatorOptions, Error> {
        let mut o = base;
        if let Some(qps) = self.qps {
            if !(qps.is_finite() && qps > 0.0) {
                return Err(bad("qps", format!("must be a positive number, got {qps}")));
            }
            o.qps = qps;
        }
        if let Some(burst) = self.burst {
            if burst == 0 {
                return Err(bad("burst", "must be at least 1".to_owned()));
            }
            o.burst = burst;
        }
        if let Some(n) = self.max_events {
            if n == 0 {
                return Err(bad("max-events", "must be at least 1".to_owned()));
            }
            o.max_events = n;
        }
        if let Some(s) = self.max_interval_seconds {
            o.max_interval = Duration::from_secs(s);
        }
        if let Some(n) = self.lru_cache_size {
            if n == 0 {
                return Err(bad("lru-cache-size", "must be at least 1".to_owned()));
            }
            o.lru_cache_size = n;
        }
        if let Some(names) = &self.spam_key_fields {
            let mut fields = Vec::new();
            for name in names {
                let field = SpamKeyField::parse(name.trim()).ok_or_else(|| {
                    let known: Vec<_> = SpamKeyField::ALL.iter().map(|f| f.as_str()).collect();
                    bad(
                        "spam-key-fields",
                        format!(
                            "unknown field {name:?}, expected one of {}",
                            known.join(", ")
                        ),
                    )
                })?;
                fields.push(field);
            }
            if fields.is_empty() {
                return Err(bad(
                    "spam-key-fields",
                    "needs at least one field".to_owned(),
                ));
            }
            fields.sort();
            fields.dedup();
            o.spam_key_fields = fields;
        }
        Ok(o)
    }
}

fn bad(flag: &'static str, reason: String) -> Error {
    Error::BadOption { flag, reason }
}

/// Runs `informant simulate` with `args` over `base` options (from `--config`, or the
/// defaults), writing to stdout; returns the exit code.
#[must_use]
pub fn cli(args: &Args, base: CorrelatorOptions) -> u8 {
    match cli_inner(args, base) {
        Ok(()) => exit_code::OK,
        Err(e) => {
            let mut msg = format!("informant simulate: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                msg.push_str(": ");
                msg.push_str(&cause.to_string());
                source = cause.source();
            }
            eprintln!("{msg}");
            e.exit_code()
        }
    }
}

fn cli_inner(args: &Args, base: CorrelatorOptions) -> Result<(), Error> {
    let options = args.options(base)?;
    let file = File::open(&args.events).map_err(|source| Error::Open {
        path: args.events.clone(),
        source,
    })?;
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::new(stdout);
    let summary = run(BufReader::new(file), &options, &mut out, !args.summary)?;
    if args.summary {
        write_summary(&summary, &mut out)?;
    }
    out.flush().map_err(Error::Write)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InSource {
    #[serde(default)]
    component: String,
    #[serde(default)]
    host: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InObject {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    field_path: String,
}

impl InObject {
    fn to_ref(&self) -> ObjectRef {
        ObjectRef {
            kind: self.kind.as_str().into(),
            namespace: self.namespace.as_str().into(),
            name: self.name.as_str().into(),
            uid: self.uid.as_str().into(),
            api_version: self.api_version.as_str().into(),
            resource_version: self.resource_version.as_str().into(),
            field_path: self.field_path.as_str().into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct InEvent {
    t: f64,
    source: InSource,
    involved_object: InObject,
    #[serde(rename = "type", default)]
    event_type: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    reporting_controller: Option<String>,
    reporting_instance: Option<String>,
    action: Option<String>,
    related: Option<InObject>,
}

/// A number as Go's `encoding/json` prints a float64: integral values without a fraction.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // Reason: guarded by the range check.
fn go_number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// Seconds from [`BASE`] to `t`.
fn rel(t: Time) -> Value {
    go_number(t.seconds_since(BASE))
}

/// One output line: the scenario README's fields in its order, then informant's own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutLine<'a> {
    i: usize,
    t: Value,
    skip: bool,
    action: &'static str,
    count: u32,
    message: String,
    name: String,
    patch: bool,
    reason: &'a str,
    #[serde(rename = "firstT")]
    first_t: Value,
    #[serde(rename = "lastT")]
    last_t: Value,
    patch_body: Option<Value>,
    clock_reads: i64,
    #[serde(serialize_with = "fate_name")]
    fate: Fate,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
}

/// What the correlator knew of an event that reached it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Details {
    /// The count the logger reached, also for a skipped event.
    observed_count: u32,
    combined: bool,
    aggregate_key: String,
    spam_key: String,
    tokens_left: f64,
}

fn fate_name<S: serde::Serializer>(fate: &Fate, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fate.as_str())
}

/// Per-reason tallies for `--summary`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReasonSummary {
    /// Events created.
    pub created: u64,
    /// Events patched.
    pub patched: u64,
    /// Events skipped (spam filtered) or invalid.
    pub skipped: u64,
    /// `t` of the last delivered event of this reason.
    pub last_delivered: Option<f64>,
    /// `t` of the last event of this reason.
    pub last_seen: f64,
}

impl ReasonSummary {
    /// The time after which this reason is never delivered again: the last delivery, if a
    /// later event of the reason was not delivered (`None` if its last event was delivered).
    #[must_use]
    pub fn never_delivered_after(&self) -> Option<f64> {
        match self.last_delivered {
            Some(t) if t < self.last_seen => Some(t),
            Some(_) => None,
            None => Some(f64::NEG_INFINITY),
        }
    }
}

/// The outcome of a whole simulation, per reason (sorted by reason).
pub type Summary = BTreeMap<String, ReasonSummary>;

/// Replays `input` through a correlator with `options`, writing one JSON line per event to
/// `out` (unless `lines` is false), and returns the per-reason summary.
///
/// Invalid events (no kind, name or reason; a type other than Normal or Warning) get the
/// fate `invalid` and never reach the correlator, as client-go's recorder drops them.
///
/// # Errors
///
/// A line that cannot be read or parsed, a bad `t`, or output that cannot be written.
pub fn run(
    input: impl BufRead,
    options: &CorrelatorOptions,
    mut out: impl Write,
    lines: bool,
) -> Result<Summary, Error> {
    let clock = ManualClock::new(BASE);
    let mut correlator = Correlator::new(options, clock.clone());
    let mut summary = Summary::new();
    let mut i = 0usize;
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|source| Error::Read {
            line: n + 1,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let ev: InEvent = serde_json::from_str(&line).map_err(|source| Error::Parse {
            line: n + 1,
            source,
        })?;
        if !ev.t.is_finite() || ev.t.abs() > 9.0e9 {
            return Err(Error::BadTime {
                line: n + 1,
                t: ev.t,
            });
        }
        #[allow(clippy::cast_possible_truncation)] // Reason: |t| ≤ 9e9 s fits in i64 ns.
        let now = Time::from_unix_nanos(BASE.unix_nanos() + (ev.t * 1e9).round() as i64);
        clock.set(now);
        let reads_before = clock.reads();
        let stats = summary.entry(ev.reason.clone()).or_default();
        stats.last_seen = ev.t;
        let record = match build(&ev, now) {
            Some(event) => {
                let c = correlator.correlate(&event);
                if c.action != Action::Skip {
                    // The reference sink never fails: tell the correlator what was written.
                    correlator.update_state(&event, &c);
                }
                let fate = match c.action {
                    Action::Create => Fate::Created,
                    Action::Patch => Fate::Patched,
                    Action::Skip => Fate::SpamFiltered,
                };
                let skip = c.action == Action::Skip;
                OutLine {
                    i,
                    t: go_number(ev.t),
                    skip,
                    action: c.action.as_str(),
                    count: if skip { 0 } else { c.count },
                    message: if skip {
                        String::new()
                    } else {
                        c.message(&event).to_string()
                    },
                    name: if skip {
                        String::new()
                    } else {
                        c.name.to_string()
                    },
                    patch: c.action == Action::Patch,
                    reason: &ev.reason,
                    first_t: if skip {
                        Value::Null
                    } else {
                        rel(c.first_timestamp)
                    },
                    last_t: if skip {
                        Value::Null
                    } else {
                        rel(c.last_timestamp)
                    },
                    patch_body: c.patch_body(&event),
                    clock_reads: clock.reads() - reads_before,
                    fate,
                    details: Some(Details {
                        observed_count: c.count,
                        combined: c.combined,
                        aggregate_key: c.aggregate_key.0.to_string(),
                        spam_key: c.spam_key.0.to_string(),
                        tokens_left: c.tokens_left,
                    }),
                }
            }
            None => OutLine {
                i,
                t: go_number(ev.t),
                skip: true,
                action: Action::Skip.as_str(),
                count: 0,
                message: String::new(),
                name: String::new(),
                patch: false,
                reason: &ev.reason,
                first_t: Value::Null,
                last_t: Value::Null,
                patch_body: None,
                clock_reads: 0,
                fate: Fate::Invalid,
                details: None,
            },
        };
        match record.fate {
            Fate::Created => stats.created += 1,
            Fate::Patched => stats.patched += 1,
            _ => stats.skipped += 1,
        }
        if record.fate.is_delivered() {
            stats.last_delivered = Some(ev.t);
        }
        if lines {
            serde_json::to_writer(&mut out, &record).map_err(|e| Error::Write(e.into()))?;
            out.write_all(b"\n").map_err(Error::Write)?;
        }
        i += 1;
    }
    out.flush().map_err(Error::Write)?;
    Ok(summary)
}

/// The event client-go's recorder would build for `ev` at `now`, or `None` if it drops it.
fn build(ev: &InEvent, now: Time) -> Option<Event> {
    let event_type = EventType::parse(&ev.event_type)?;
    let mut event = Event::new(
        Arc::new(ev.involved_object.to_ref()),
        Arc::new(Source::new(&ev.source.component, &ev.source.host)),
        event_type,
        &ev.reason,
        &ev.message,
        now,
    );
    if let Some(rc) = &ev.reporting_controller {
        event.reporting_controller = rc.as_str().into();
    }
    if let Some(ri) = &ev.reporting_instance {
        event.reporting_instance = ri.as_str().into();
    }
    event.action = ev.action.as_deref().map(Into::into);
    event.related = ev.related.as_ref().map(|o| Arc::new(o.to_ref()));
    event.validate().ok()?;
    Some(event)
}

/// Writes `summary` as an aligned table: per reason, created / patched / skipped, and the
/// time after which the reason is never delivered again.
///
/// # Errors
///
/// The output cannot be written.
pub fn write_summary(summary: &Summary, mut out: impl Write) -> Result<(), Error> {
    let width = summary.keys().map(String::len).max().unwrap_or(0).max(6);
    let mut w = |s: String| out.write_all(s.as_bytes()).map_err(Error::Write);
    w(format!(
        "{:<width$}  {:>7}  {:>7}  {:>7}  never delivered after\n",
        "reason", "created", "patched", "skipped"
    ))?;
    for (reason, s) in summary {
        let after = match s.never_delivered_after() {
            None => "-".to_owned(),
            Some(t) if t == f64::NEG_INFINITY => "never delivered".to_owned(),
            Some(t) => format!("t={} s (minute {:.0})", go_number(t), (t / 60.0).floor()),
        };
        w(format!(
            "{reason:<width$}  {:>7}  {:>7}  {:>7}  {after}\n",
            s.created, s.patched, s.skipped
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"t":1.5,"source":{"component":"c","host":""},"involvedObject":{"kind":"Pod","namespace":"","name":"p","uid":"u","apiVersion":"v1"},"type":"Normal","reason":"R","message":"m"}"#;

    fn sim(input: &str) -> (Vec<Value>, Summary) {
        let mut out = Vec::new();
        let s = run(
            input.as_bytes(),
            &CorrelatorOptions::default(),
            &mut out,
            true,
        )
        .unwrap();
        let lines = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (lines, s)
    }

    #[test]
    fn one_event_is_created_at_base_plus_t() {
        let (lines, summary) = sim(LINE);
        assert_eq!(lines[0]["action"], "create");
        assert_eq!(lines[0]["t"], json!(1.5));
        assert_eq!(lines[0]["firstT"], json!(1.5));
        assert_eq!(lines[0]["clockReads"], 2);
        assert_eq!(summary["R"].created, 1);
        assert_eq!(summary["R"].never_delivered_after(), None);
    }

    #[test]
    fn an_unknown_type_is_invalid_not_an_error() {
        let (lines, summary) = sim(&LINE.replace("Normal", "normal"));
        assert_eq!(lines[0]["fate"], "invalid");
        assert_eq!(summary["R"].skipped, 1);
    }

    #[test]
    fn flags_override_defaults_and_bad_values_are_usage_errors() {
        let args = Args {
            qps: Some(1.0),
            spam_key_fields: Some(vec!["reason".into(), "source".into(), "reason".into()]),
            ..Args::default()
        };
        let o = args.options(CorrelatorOptions::default()).unwrap();
        assert!((o.qps - 1.0).abs() < f64::EPSILON);
        assert_eq!(
            o.spam_key_fields,
            vec![SpamKeyField::Source, SpamKeyField::Reason]
        );
        let bad = Args {
            spam_key_fields: Some(vec!["Reason".into()]),
            ..Args::default()
        };
        assert_eq!(
            bad.options(CorrelatorOptions::default())
                .unwrap_err()
                .exit_code(),
            exit_code::USAGE
        );
        let bad = Args {
            qps: Some(0.0),
            ..Args::default()
        };
        assert_eq!(
            bad.options(CorrelatorOptions::default())
                .unwrap_err()
                .exit_code(),
            exit_code::USAGE
        );
    }

    #[test]
    fn a_bad_line_is_reported_with_its_number() {
        let input = format!("{LINE}\n{{\"t\": 2}}\n");
        let err = run(
            input.as_bytes(),
            &CorrelatorOptions::default(),
            Vec::new(),
            true,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Parse { line: 2, .. }), "{err}");
    }
}
