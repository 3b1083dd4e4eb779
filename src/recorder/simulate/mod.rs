//! `informant simulate`: replays an event stream (JSON lines) through the correlator on a
//! virtual clock, with a sink that never fails, and prints one fate per event or a summary
//! per reason. The formats are those of `tests/data/scenarios/README.md`. With
//! `--api events.k8s.io/v1`, [`run_series`] replays occurrences and sink faults through the
//! series path instead, one line per API call.

mod input;
mod output;
mod series;
mod series_input;
mod summary;

use std::io::{BufRead, Write};
use std::path::PathBuf;

pub use series::{
    Fates, SUMMARY_FATES, SeriesRun, SeriesSummary, run_series, write_series_summary,
};
pub use series_input::FaultResult;
pub use summary::{CORRELATOR_FATES, ReasonSummary, Summary, write_summary};

use self::input::{InEvent, build};
use self::output::OutLine;
use super::clock::{ManualClock, Time};
use super::correlator::{Action, Correlator, EventNaming};
use super::options::CorrelatorOptions;

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

/// Replays `input` through a correlator with `options`, writing one JSON line per event to
/// `out` (unless `lines` is false), and returns the per-reason summary.
///
/// Invalid events (no kind, name or reason; a type other than Normal or Warning) get the
/// fate `invalid` and never reach the correlator, as client-go's recorder drops them.
///
/// Events are named exactly as client-go names them ([`EventNaming::ClientGo`]), so the
/// output compares field for field with client-go's; two events about one object in one
/// instant then share a name, which a real API server refuses the second time. The
/// recorder pipeline names them apart ([`run_with`] with [`EventNaming::Unique`] shows
/// its names).
///
/// # Errors
///
/// A line that cannot be read or parsed, a bad `t`, or output that cannot be written.
pub fn run(
    input: impl BufRead,
    options: &CorrelatorOptions,
    out: impl Write,
    lines: bool,
) -> Result<Summary, Error> {
    run_with(input, options, EventNaming::ClientGo, out, lines)
}

/// [`run`], naming new Events as `naming` says.
///
/// # Errors
///
/// As [`run`].
pub fn run_with(
    input: impl BufRead,
    options: &CorrelatorOptions,
    naming: EventNaming,
    mut out: impl Write,
    lines: bool,
) -> Result<Summary, Error> {
    let clock = ManualClock::new(BASE);
    let mut correlator = Correlator::new(options, clock.clone()).with_naming(naming);
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
                OutLine::correlated(i, &ev, &event, &c, clock.reads() - reads_before)
            }
            None => OutLine::invalid(i, &ev),
        };
        stats.count(record.fate);
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

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
        assert_eq!(summary["R"].invalid, 1);
        assert_eq!(summary["R"].spam_filtered, 0);
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

    /// Scenario a (client-go's `CronJob` story) with the pipeline's unique names: every field
    /// matches client-go's answer except the name of the second of two Events created about
    /// `hello` in one instant (six times: `SawCompletedJob` and `SuccessfulDelete` at t=187,
    /// 247, …), which is one nanosecond later, so the API server does not refuse it with
    /// 409 `AlreadyExists` as it would client-go's.
    #[test]
    fn unique_names_differ_from_client_go_only_for_same_instant_creates() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenarios");
        let input = std::fs::read(dir.join("in/a_cronjob_default.in.jsonl")).unwrap();
        let reference =
            std::fs::read_to_string(dir.join("out/a_cronjob_default.out.jsonl")).unwrap();
        let reference: Vec<Value> = reference
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut out = Vec::new();
        run_with(
            &input[..],
            &CorrelatorOptions::default(),
            EventNaming::Unique,
            &mut out,
            true,
        )
        .unwrap();
        let got: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), reference.len());

        let mut created = std::collections::HashSet::new();
        let mut bumped = Vec::new();
        for (g, r) in got.iter().zip(&reference) {
            for field in [
                "i",
                "t",
                "action",
                "count",
                "message",
                "firstT",
                "lastT",
                "patchBody",
            ] {
                assert_eq!(g[field], r[field], "i={} field {field}", r["i"]);
            }
            let (got_name, want) = (g["name"].as_str().unwrap(), r["name"].as_str().unwrap());
            if g["action"] == "create" {
                assert!(
                    created.insert(got_name.to_owned()),
                    "{got_name} created twice"
                );
            }
            if got_name != want {
                let (object, hex) = want.rsplit_once('.').unwrap();
                let next = i64::from_str_radix(hex, 16).unwrap() + 1;
                assert_eq!(got_name, format!("{object}.{next:x}"), "i={}", r["i"]);
                assert_eq!(
                    r["action"], "create",
                    "i={}: only creates are renamed",
                    r["i"]
                );
                bumped.push(r["t"].as_f64().unwrap());
            }
        }
        // client-go created these six names twice; the second create would get 409.
        assert_eq!(bumped, [187.0, 247.0, 307.0, 367.0, 427.0, 487.0]);
    }
}
