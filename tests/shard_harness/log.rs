//! The reconcile log of a ring's members and the checks made on it: no two members' reconciles
//! of one object overlap in time, every object is reconciled, each by which member, how many
//! objects each member holds, and how many moved between two moments. Its sources: the hook
//! every member's hook `Controller` calls, the Rust controller of a Rust member, and the
//! runtime's own log of each reconcile (`--reconcile-log`).
//!
//! A line is `<member> <object> <start> <end>`, times in microseconds since the Unix epoch (one
//! clock for every process of the machine), `<end>` being `-` on the line written when the
//! reconcile starts. Each reconcile writes both lines, so one that never ended (its process
//! killed, its call abandoned) is still in the log: it counts as the instant it started, the
//! least it certainly covered.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One reconcile of `object` by `member`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reconcile {
    /// When it started, µs since the epoch.
    pub start: u64,
    /// When it ended; `None` while it runs, or when it never ended.
    pub end: Option<u64>,
    /// The member's identity.
    pub member: String,
    /// The object (its uid).
    pub object: String,
    /// Who logged it: the hook, a Rust controller, the runtime's log of one controller. Two
    /// reconciles overlap only when the same source logged both.
    pub source: String,
}

impl Reconcile {
    /// The end, or the start for a reconcile that has not ended: the interval it certainly
    /// covered.
    pub fn until(&self) -> u64 {
        self.end.unwrap_or(self.start)
    }

    /// Whether `self` and `other` ran at a common instant (an interval shorter than a
    /// microsecond counts as one microsecond; touching intervals do not overlap).
    fn overlaps(&self, other: &Self) -> bool {
        let end = |r: &Self| r.until().max(r.start + 1);
        self.start < end(other) && other.start < end(self)
    }
}

impl fmt::Display for Reconcile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            Some(end) => write!(
                f,
                "{} {} [{}, {}] ({} µs)",
                self.source,
                self.member,
                self.start,
                end,
                end.saturating_sub(self.start)
            ),
            None => write!(
                f,
                "{} {} [{}, not ended]",
                self.source, self.member, self.start
            ),
        }
    }
}

/// Two members' reconciles of one object that ran at a common instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The one that started first.
    pub first: Reconcile,
    /// The other.
    pub second: Reconcile,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} and {}",
            self.first.object, self.first, self.second
        )
    }
}

/// Every reconcile read from the members' logs.
#[derive(Debug, Clone, Default)]
pub struct Log {
    reconciles: Vec<Reconcile>,
}

impl Log {
    /// The reconciles of `text` (lines as the module says), logged by `source`; a line that is
    /// not one (a partial last line) is skipped.
    pub fn parse(text: &str, source: &str) -> Self {
        let mut by_key: BTreeMap<(String, String, u64), Option<u64>> = BTreeMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [member, object, start, end] = fields[..] else {
                continue;
            };
            let Ok(start) = start.parse::<u64>() else {
                continue;
            };
            let end = end.parse::<u64>().ok();
            let slot = by_key
                .entry((member.to_owned(), object.to_owned(), start))
                .or_default();
            *slot = (*slot).or(end);
        }
        let mut reconciles: Vec<Reconcile> = by_key
            .into_iter()
            .map(|((member, object, start), end)| Reconcile {
                start,
                end,
                member,
                object,
                source: source.to_owned(),
            })
            .collect();
        reconciles.sort();
        Self { reconciles }
    }

    /// The reconciles of the runtime's reconcile log (`--reconcile-log`: one JSON line per
    /// reconcile, written when it ends, times in nanoseconds), each logged by `runtime
    /// <controller>`. A reconcile the fence dropped ended when the fence fell (`fenced_at_ns`):
    /// it made no progress after, though a paused process only drops it once resumed.
    pub fn parse_runtime(text: &str) -> Self {
        let mut reconciles: Vec<Reconcile> = text
            .lines()
            .filter_map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).ok()?;
                let mut end = v["end_ns"].as_u64()?;
                if let Some(fenced_at) = v["fenced_at_ns"].as_u64() {
                    end = end.min(fenced_at);
                }
                Some(Reconcile {
                    start: v["start_ns"].as_u64()? / 1_000,
                    end: Some(end / 1_000),
                    member: v["member"].as_str()?.to_owned(),
                    object: v["uid"].as_str()?.to_owned(),
                    source: format!("runtime {}", v["controller"].as_str()?),
                })
            })
            .collect();
        reconciles.sort();
        Self { reconciles }
    }

    /// This log and `reconciles` (those the hook noted).
    pub fn with(mut self, reconciles: impl IntoIterator<Item = Reconcile>) -> Self {
        self.reconciles.extend(reconciles);
        self.reconciles.sort();
        self
    }

    /// Every reconcile, by start.
    pub fn reconciles(&self) -> &[Reconcile] {
        &self.reconciles
    }

    /// The reconciles that started at or after `t`.
    #[must_use]
    pub fn since(&self, t: u64) -> Self {
        Self {
            reconciles: self
                .reconciles
                .iter()
                .filter(|r| r.start >= t)
                .cloned()
                .collect(),
        }
    }

    /// The reconciles that started before `t`.
    #[must_use]
    pub fn before(&self, t: u64) -> Self {
        Self {
            reconciles: self
                .reconciles
                .iter()
                .filter(|r| r.start < t)
                .cloned()
                .collect(),
        }
    }

    /// The reconciles by `member`.
    #[must_use]
    pub fn by(&self, member: &str) -> Self {
        Self {
            reconciles: self
                .reconciles
                .iter()
                .filter(|r| r.member == member)
                .cloned()
                .collect(),
        }
    }

    /// Every pair of reconciles of one object by two members, logged by one source, that ran
    /// at a common instant: empty when at most one member acted on each object at any time.
    pub fn overlaps(&self) -> Vec<Overlap> {
        let mut per_object: BTreeMap<(&str, &str), Vec<&Reconcile>> = BTreeMap::new();
        for r in &self.reconciles {
            per_object
                .entry((&r.object, &r.source))
                .or_default()
                .push(r);
        }
        let mut found = Vec::new();
        for runs in per_object.values() {
            // Sorted by start (the log is): a later run can only overlap while it starts
            // before the earlier one's end.
            for (i, first) in runs.iter().enumerate() {
                for second in &runs[i + 1..] {
                    if second.start >= first.until().max(first.start + 1) {
                        break;
                    }
                    if second.member != first.member && first.overlaps(second) {
                        found.push(Overlap {
                            first: (*first).clone(),
                            second: (*second).clone(),
                        });
                    }
                }
            }
        }
        found
    }

    /// Each object reconciled, with the members that reconciled it.
    pub fn reconcilers(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in &self.reconciles {
            out.entry(r.object.clone())
                .or_default()
                .insert(r.member.clone());
        }
        out
    }

    /// Each object with the member that last started a reconcile of it.
    pub fn last_reconciler(&self) -> BTreeMap<String, String> {
        self.reconciles
            .iter()
            .map(|r| (r.object.clone(), r.member.clone()))
            .collect()
    }

    /// Each object with the instant a member other than `previous[object]` first started it
    /// (objects `previous` does not name count any member).
    pub fn first_taken(&self, previous: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for r in &self.reconciles {
            if previous.get(&r.object) != Some(&r.member) {
                out.entry(r.object.clone()).or_insert(r.start);
            }
        }
        out
    }
}

/// How many distinct objects each member reconciled, for a ring whose `owners` are given
/// (object → member).
pub fn shares(owners: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for member in owners.values() {
        *out.entry(member.clone()).or_default() += 1;
    }
    out
}

/// The objects that `after` saw reconciled by a member other than their owner in `before`.
pub fn moved(before: &BTreeMap<String, String>, after: &Log) -> BTreeSet<String> {
    after
        .reconciles
        .iter()
        .filter(|r| before.get(&r.object).is_some_and(|m| *m != r.member))
        .map(|r| r.object.clone())
        .collect()
}
