//! The recorder's injected clock: instants as Unix nanoseconds, a real clock and a manual one.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;

/// An instant, in nanoseconds since the Unix epoch (what client-go's event names encode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(i64);

impl Time {
    /// The Unix epoch.
    pub const EPOCH: Time = Time(0);

    /// The instant `nanos` nanoseconds after the Unix epoch.
    #[must_use]
    pub const fn from_unix_nanos(nanos: i64) -> Self {
        Time(nanos)
    }

    /// Nanoseconds since the Unix epoch.
    #[must_use]
    pub const fn unix_nanos(self) -> i64 {
        self.0
    }

    /// This instant plus `d`, saturating at the end of time.
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Self {
        Time(
            self.0
                .saturating_add(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        )
    }

    /// `self - earlier` in nanoseconds (negative if `earlier` is later), saturating.
    #[must_use]
    pub const fn nanos_since(self, earlier: Time) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self - earlier` in seconds, as Go's `Duration.Seconds()` computes it (whole seconds
    /// plus the nanosecond remainder divided by 1e9).
    #[must_use]
    #[allow(clippy::cast_precision_loss)] // Reason: Go does exactly this conversion.
    pub fn seconds_since(self, earlier: Time) -> f64 {
        let d = self.nanos_since(earlier);
        (d / 1_000_000_000) as f64 + (d % 1_000_000_000) as f64 / 1e9
    }

    /// RFC 3339 at second precision in UTC, as `metav1.Time` serializes (`2023-11-14T22:23:20Z`).
    #[must_use]
    pub fn to_rfc3339_seconds(self) -> String {
        match Timestamp::from_nanosecond(i128::from(self.0)) {
            Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            Err(_) => String::new(),
        }
    }

    /// The same instant as a `jiff` timestamp (for k8s-openapi), truncated to microseconds
    /// as `metav1.MicroTime` would be; the epoch if out of range.
    #[must_use]
    pub fn to_timestamp(self) -> Timestamp {
        Timestamp::from_nanosecond(i128::from(self.0)).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339_seconds())
    }
}

/// A source of the current time. The correlator reads it once per stage, like client-go's
/// `clock.PassiveClock`; tests and `informant simulate` inject a [`ManualClock`].
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Time;
}

impl<T: Clock + ?Sized> Clock for Arc<T> {
    fn now(&self) -> Time {
        (**self).now()
    }
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        let nanos = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
        };
        Time(nanos)
    }
}

/// A clock that only moves when told to; cheap to clone (clones share the instant).
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
    reads: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `now`.
    #[must_use]
    pub fn new(now: Time) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(now.0)),
            reads: Arc::new(AtomicI64::new(0)),
        }
    }

    /// Moves the clock to `now` (backwards too, as a fake clock may).
    pub fn set(&self, now: Time) {
        self.now.store(now.0, Ordering::SeqCst);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let next = Time(self.now.load(Ordering::SeqCst)).saturating_add(d);
        self.now.store(next.0, Ordering::SeqCst);
    }

    /// How many times [`Clock::now`] has been called on this clock or its clones.
    #[must_use]
    pub fn reads(&self) -> i64 {
        self.reads.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Time {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Time(self.now.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_has_second_precision_in_utc() {
        let t = Time::from_unix_nanos(1_700_000_600_999_999_999);
        assert_eq!(t.to_rfc3339_seconds(), "2023-11-14T22:23:20Z");
    }

    #[test]
    fn manual_clock_moves_only_when_told_and_counts_reads() {
        let c = ManualClock::new(Time::from_unix_nanos(5));
        assert_eq!(c.now(), Time::from_unix_nanos(5));
        c.advance(Duration::from_nanos(10));
        let clone = c.clone();
        assert_eq!(clone.now(), Time::from_unix_nanos(15));
        assert_eq!(c.reads(), 2);
    }

    #[test]
    fn seconds_since_splits_whole_seconds_and_remainder_like_go() {
        let a = Time::from_unix_nanos(1_500_000_000);
        let b = Time::from_unix_nanos(0);
        assert!((a.seconds_since(b) - 1.5).abs() < 1e-12);
        assert!((b.seconds_since(a) + 1.5).abs() < 1e-12);
    }
}
