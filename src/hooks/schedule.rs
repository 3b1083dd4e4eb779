//! Hook `Controller`s on a clock (`spec.schedule`, `spec.timeZone`, `spec.scheduleMode`): the
//! cron expression or `@every` interval, parsed with its faults located; the next tick after an
//! instant, in a time zone from the bundled tz database; and the ticker that waits for it.
//!
//! shell-operator's `schedule` bindings take five fields or six with seconds first (robfig/cron
//! with optional seconds), and `@every`; a Kubernetes `CronJob` takes `spec.timeZone` as an IANA
//! name. informant takes both, and computes ticks with `croner` on `jiff`'s zones, whose tz
//! database is compiled in (a distroless image has no `/usr/share/zoneinfo`).
//!
//! Ticks are never replayed: the ticker always waits for the first tick after *now*, so ticks
//! that fell while no replica led, or while the previous tick ran, are gone. `@every D` ticks
//! at the multiples of `D` since the Unix epoch, so every replica agrees on the instants.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::config::{FieldError, FieldPath, parse_duration};

mod batch;
mod ticks;

pub(super) use batch::run_batches;
pub(super) use ticks::{Outstanding, with_ticks};

/// What a tick calls (`spec.scheduleMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScheduleMode {
    /// One call per object, through the controller's queue: a tick's call for an object
    /// already queued merges with it (`perObject`, the default).
    #[default]
    PerObject,
    /// One call with every object in the request's `objects` (`batch`, shell-operator's
    /// `group`).
    Batch,
}

impl ScheduleMode {
    /// The mode spelt `text` in a `Controller`.
    ///
    /// # Errors
    /// The message for an unknown mode.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "perObject" => Ok(Self::PerObject),
            "batch" => Ok(Self::Batch),
            other => Err(format!(
                "unknown mode {other:?}; write perObject (one call per object, the default) or \
                 batch (one call with every object)"
            )),
        }
    }

    /// How a `Controller` spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerObject => "perObject",
            Self::Batch => "batch",
        }
    }
}

/// When ticks fall, without a time zone.
#[derive(Clone, Debug)]
enum Cadence {
    /// A cron expression, normalised to six fields (seconds first).
    Cron(Box<croner::Cron>),
    /// Every multiple of this since the Unix epoch.
    Every(Duration),
}

/// A valid `spec.schedule` with its time zone and mode.
///
/// ```
/// use informant::hooks::{Schedule, ScheduleMode};
///
/// let nightly = Schedule::parse("0 2 * * *", Some("Europe/Paris"), ScheduleMode::Batch).unwrap();
/// let now: jiff::Timestamp = "2026-03-28T12:00:00Z".parse().unwrap();
/// // 02:00 in Paris is 01:00 UTC in winter.
/// assert_eq!(nightly.next_after(now).unwrap().to_string(), "2026-03-29T01:00:00Z");
/// ```
#[derive(Clone, Debug)]
pub struct Schedule {
    text: String,
    cadence: Cadence,
    zone_name: String,
    zone: TimeZone,
    mode: ScheduleMode,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        (&self.text, &self.zone_name, self.mode) == (&other.text, &other.zone_name, other.mode)
    }
}

/// Why a `spec.schedule` or `spec.timeZone` is invalid: each field's message, to be
/// reported with its path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleErrors {
    /// What is wrong with `spec.schedule`.
    pub schedule: Option<String>,
    /// What is wrong with `spec.timeZone`.
    pub time_zone: Option<String>,
}

impl Schedule {
    /// `text` in `zone` (UTC when `None`), calling in `mode`.
    ///
    /// # Errors
    /// Every field's problem: a cron field with its position, an unknown time zone.
    pub fn parse(
        text: &str,
        zone: Option<&str>,
        mode: ScheduleMode,
    ) -> Result<Self, ScheduleErrors> {
        let cadence = parse_cadence(text);
        let zone_name = zone.unwrap_or("UTC");
        let tz = time_zone(zone_name);
        match (cadence, tz) {
            (Ok(cadence), Ok(zone)) => Ok(Self {
                text: text.trim().to_owned(),
                cadence,
                zone_name: zone_name.to_owned(),
                zone,
                mode,
            }),
            (cadence, tz) => Err(ScheduleErrors {
                schedule: cadence.err(),
                time_zone: tz.err(),
            }),
        }
    }

    /// The expression as written.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The time zone's IANA name.
    #[must_use]
    pub fn time_zone(&self) -> &str {
        &self.zone_name
    }

    /// What a tick calls.
    #[must_use]
    pub fn mode(&self) -> ScheduleMode {
        self.mode
    }

    /// The first tick strictly after `after`, or `None` if none comes before the year 9999.
    #[must_use]
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.cadence {
            Cadence::Every(every) => {
                let every = i128::try_from(every.as_nanos()).ok()?;
                let at = after.as_nanosecond();
                let next = (at.div_euclid(every) + 1).checked_mul(every)?;
                Timestamp::from_nanosecond(next).ok()
            }
            Cadence::Cron(cron) => {
                let zoned = after.to_zoned(self.zone.clone());
                cron.find_next_occurrence(&zoned, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {})",
            self.text,
            self.zone_name,
            self.mode.as_str()
        )
    }
}

/// The schedule of `spec` (`schedule`, `timeZone`, `scheduleMode` under `path`), if it has
/// one; every problem pushed on `errors` with its field path.
pub(super) fn validate(
    spec: &crate::hooks::ControllerSpec,
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<Schedule> {
    let mode = spec.schedule_mode.as_deref().map(ScheduleMode::parse);
    if let Some(Err(why)) = &mode {
        errors.push(FieldError::new(&path.field("scheduleMode"), why.clone()));
    }
    let Some(text) = spec.schedule.as_deref() else {
        for (field, set) in [
            ("timeZone", spec.time_zone.is_some()),
            ("scheduleMode", spec.schedule_mode.is_some()),
        ] {
            if set {
                errors.push(FieldError::new(
                    &path.field(field),
                    "set without spec.schedule; add a schedule or remove it",
                ));
            }
        }
        return None;
    };
    let mode = match mode {
        Some(Ok(mode)) => mode,
        Some(Err(_)) | None => ScheduleMode::default(),
    };
    match Schedule::parse(text, spec.time_zone.as_deref(), mode) {
        Ok(schedule) => Some(schedule),
        Err(problems) => {
            for (field, problem) in [
                ("schedule", problems.schedule),
                ("timeZone", problems.time_zone),
            ] {
                if let Some(problem) = problem {
                    errors.push(FieldError::new(&path.field(field), problem));
                }
            }
            None
        }
    }
}

/// The time zone named `name`: from the system's tz database when it has one, else from the
/// copy compiled into informant (a distroless image has no `/usr/share/zoneinfo`).
fn time_zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name)
        .or_else(|_| jiff::tz::TimeZoneDatabase::bundled().get(name))
        .map_err(|_| {
            format!(
                "unknown time zone {name:?}; write an IANA name such as UTC, Europe/Paris or \
             America/New_York"
            )
        })
}

/// The @-macros and the six fields each stands for.
const MACROS: [(&str, &str); 8] = [
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@monthly", "0 0 0 1 * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@daily", "0 0 0 * * *"),
    ("@midnight", "0 0 0 * * *"),
    ("@hourly", "0 0 * * * *"),
    ("@every", ""),
];

/// The names of the six fields, seconds first.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
];

/// A field that matches any time, to try one field at a time.
const ANY: [&str; 6] = ["0", "0", "0", "*", "*", "*"];

fn parse_cadence(text: &str) -> Result<Cadence, String> {
    let trimmed = text.trim();
    let invalid = |why: String| format!("invalid schedule {trimmed:?}: {why}");
    if trimmed.is_empty() {
        return Err(invalid(
            "empty; write a cron expression such as `*/5 * * * *` or `@every 5m`".into(),
        ));
    }
    if let Some(rest) = trimmed.strip_prefix("@every") {
        let rest = rest.trim();
        return match parse_duration(rest) {
            Ok(every) if every >= Duration::from_secs(1) => Ok(Cadence::Every(every)),
            Ok(_) => Err(invalid(format!(
                "@every {rest} is shorter than a second; write at least 1s"
            ))),
            Err(e) => Err(invalid(format!(
                "{e} after @every; write a Go duration such as @every 5m"
            ))),
        };
    }
    let six = if trimmed.starts_with('@') {
        let word = trimmed.split_whitespace().next().unwrap_or(trimmed);
        let Some((_, fields)) = MACROS
            .iter()
            .find(|(name, fields)| !fields.is_empty() && name.eq_ignore_ascii_case(word))
        else {
            let known: Vec<&str> = MACROS.iter().map(|(name, _)| *name).collect();
            return Err(invalid(format!(
                "unknown macro {word} at character 1; write one of {}",
                known.join(", ")
            )));
        };
        if word.len() != trimmed.len() {
            return Err(invalid(format!(
                "{word} takes nothing after it (at character {})",
                word.len() + 2
            )));
        }
        (*fields).to_owned()
    } else {
        let fields = located_fields(trimmed);
        let offset = usize::from(fields.len() == 5);
        match fields.len() {
            5 | 6 => {}
            n => {
                return Err(invalid(format!(
                    "{n} fields; write 5 (minute hour day-of-month month day-of-week) or 6 \
                     (second first)"
                )));
            }
        }
        let mut problems = Vec::new();
        for (i, (at, field)) in fields.iter().enumerate() {
            let position = i + offset;
            if let Some(why) = field_problem(position, field) {
                problems.push(format!(
                    "field {} ({}) {field:?} at character {}: {why}",
                    i + 1,
                    FIELDS[position],
                    at + 1
                ));
            }
        }
        if !problems.is_empty() {
            return Err(invalid(problems.join("; ")));
        }
        let mut six: Vec<&str> = fields.iter().map(|(_, f)| *f).collect();
        if offset == 1 {
            six.insert(0, "0");
        }
        six.join(" ")
    };
    let cron = parser().parse(&six).map_err(|e| invalid(format!("{e}")))?;
    // A valid expression that never matches (the 30th of February) would never tick.
    let probe = Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC);
    if cron.find_next_occurrence(&probe, false).is_err() {
        return Err(invalid(
            "it matches no date (a day the month never has?)".into(),
        ));
    }
    Ok(Cadence::Cron(Box::new(cron)))
}

/// The parser of six fields, seconds first, no year; day-of-month or day-of-week (as cron).
fn parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Disallowed)
        .build()
}

/// Each whitespace-separated field of `text` with its byte offset.
fn located_fields(text: &str) -> Vec<(usize, &str)> {
    let mut fields = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                fields.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        fields.push((s, &text[s..]));
    }
    fields
}

/// What is wrong with `field` as field `position` (0 = seconds) of six, if anything: the
/// first character no such field may hold, else the parser's word on it alone.
fn field_problem(position: usize, field: &str) -> Option<String> {
    let names = match position {
        4 => "JANFEBMRPYULGSOCTNVDjanfebmrpyulgsoctnvd",
        5 => "SUNMOTEWDHFRIAsunmotewdhfria#L?",
        3 => "LW?",
        _ => "",
    };
    if let Some((i, c)) = field
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || "*/,-".contains(*c) || names.contains(*c)))
    {
        return Some(format!(
            "{c:?} (its character {}) is not allowed in the {} field",
            i + 1,
            FIELDS[position]
        ));
    }
    let mut probe = ANY;
    probe[position] = field;
    parser().parse(&probe.join(" ")).err().map(|e| {
        format!(
            "{}; the {} field takes {}",
            e.to_string().trim_end_matches('.'),
            FIELDS[position],
            RANGES[position]
        )
    })
}

/// What each of the six fields takes.
const RANGES: [&str; 6] = [
    "0-59",
    "0-59",
    "0-23",
    "1-31 (or L, W)",
    "1-12 or JAN-DEC",
    "0-7 or SUN-SAT (0 and 7 are Sunday; or L, #)",
];

/// A source of wall-clock time for the ticker.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A wall clock that moves with tokio's clock (paused and advanced in tests): `start` when
/// it was made, and `start` plus tokio's elapsed time after.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    start: Timestamp,
    at: tokio::time::Instant,
}

impl TokioClock {
    /// A clock that reads `start` now.
    #[must_use]
    pub fn starting_at(start: Timestamp) -> Self {
        Self {
            start,
            at: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = jiff::SignedDuration::try_from(self.at.elapsed()).unwrap_or_default();
        self.start.saturating_add(elapsed).unwrap_or(self.start)
    }
}

/// The tickers of `schedule` on `clock`, publishing the next tick in `next`: for `perObject`
/// (with the record of its ticks' outstanding calls), or for `batch`.
pub(super) type Tickers = (Option<(Ticker, Arc<Outstanding>)>, Option<Ticker>);

/// See [`Tickers`].
pub(super) fn tickers(
    schedule: Option<&Schedule>,
    clock: Arc<dyn Clock>,
    next: &Arc<std::sync::Mutex<Option<Timestamp>>>,
) -> Tickers {
    let Some(schedule) = schedule else {
        return (None, None);
    };
    let ticker = Ticker::new(schedule.clone(), clock, Arc::clone(next));
    match schedule.mode() {
        ScheduleMode::PerObject => (Some((ticker, Arc::default())), None),
        ScheduleMode::Batch => (None, Some(ticker)),
    }
}

/// Waits for the ticks of a [`Schedule`], publishing each next tick where the `Controller`'s
/// status reads it.
pub(super) struct Ticker {
    schedule: Schedule,
    clock: Arc<dyn Clock>,
    next: Arc<std::sync::Mutex<Option<Timestamp>>>,
}

impl Ticker {
    /// A ticker of `schedule` reading `clock`, publishing the next tick in `next`.
    pub(super) fn new(
        schedule: Schedule,
        clock: Arc<dyn Clock>,
        next: Arc<std::sync::Mutex<Option<Timestamp>>>,
    ) -> Self {
        Self {
            schedule,
            clock,
            next,
        }
    }

    fn publish(&self, next: Option<Timestamp>) {
        *self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
    }

    /// Waits for the first tick after now and returns its instant; never returns when no
    /// tick will come. Ticks that fell before now are not replayed. Should the wall clock be
    /// behind the tick on waking (it was set back), it waits again.
    pub(super) async fn tick(&mut self) -> Timestamp {
        loop {
            let now = self.clock.now();
            let Some(next) = self.schedule.next_after(now) else {
                self.publish(None);
                return std::future::pending().await;
            };
            self.publish(Some(next));
            let wait = Duration::try_from(now.duration_until(next)).unwrap_or_default();
            tokio::time::sleep(wait).await;
            if self.clock.now() >= next {
                return next;
            }
        }
    }
}

#[cfg(test)]
mod tests;
