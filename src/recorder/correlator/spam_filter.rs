//! The spam filter: one token bucket per spam key over an LRU of `lruCacheSize` buckets
//! (client-go `tools/record/events_cache.go`, `EventSourceObjectSpamFilter.Filter`, with
//! golang.org/x/time/rate's `Limiter.AllowN` semantics).

use super::keys::{EventHashes, EventView, FingerprintHasher, SpamKey, SpamKeySelection};
use crate::recorder::clock::Time;
use crate::recorder::lru::Lru;
use crate::recorder::options::SpamKeyField;

/// A token bucket as golang.org/x/time/rate keeps it: a balance and the time it was taken.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Time,
}

/// The spam filter's verdict on one event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// True if the event passes (a token was taken).
    pub allowed: bool,
    /// The key of the bucket used.
    pub key: SpamKey,
    /// Tokens left in the bucket: after taking one if allowed, else the balance that fell
    /// short of one.
    pub tokens_left: f64,
}

/// Rate-limits events per spam key.
#[derive(Debug)]
pub struct SpamFilter {
    cache: Lru<SpamKey, Bucket, FingerprintHasher>,
    qps: f64,
    burst: f64,
    selection: SpamKeySelection,
}

impl SpamFilter {
    /// A filter whose buckets hold `burst` tokens and refill `qps` tokens per second, keyed
    /// by `fields`, remembering `lru_cache_size` buckets.
    #[must_use]
    pub fn new(qps: f64, burst: u32, fields: &[SpamKeyField], lru_cache_size: usize) -> Self {
        Self {
            cache: Lru::new(lru_cache_size),
            qps,
            burst: f64::from(burst),
            selection: SpamKeySelection::new(fields),
        }
    }

    /// Buckets remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Applies new options at `now`, keeping what still means the same thing:
    ///
    /// - a new qps or burst keeps every bucket: each is first refilled at the old rate up to
    ///   `now` (x/time/rate `SetLimitAt` / `SetBurstAt`), then a higher burst adds its extra
    ///   tokens to every bucket (tokens spent stay spent: raising 25 to 100 lets a drained
    ///   object through 75 more times at once, where x/time/rate would make it wait for the
    ///   refill), and a lower burst caps every bucket at the new burst;
    /// - new spam key fields empty the filter: a bucket keyed by the old fields cannot be
    ///   split or merged into the new keys (which events of a source + object bucket had the
    ///   reason now in the key?), so every key starts full under the new fields;
    /// - a new cache size keeps the most recently used buckets that fit.
    pub fn reconfigure(
        &mut self,
        qps: f64,
        burst: u32,
        fields: &[SpamKeyField],
        lru_cache_size: usize,
        now: Time,
    ) {
        let burst = f64::from(burst);
        let selection = SpamKeySelection::new(fields);
        if selection != self.selection {
            self.selection = selection;
            self.cache.clear();
        } else if qps.to_bits() != self.qps.to_bits() || burst.to_bits() != self.burst.to_bits() {
            let (old_qps, old_burst) = (self.qps, self.burst);
            let raise = (burst - old_burst).max(0.0);
            for bucket in self.cache.values_mut() {
                let last = if now < bucket.last { now } else { bucket.last };
                let settled = (bucket.tokens + now.seconds_since(last) * old_qps).min(old_burst);
                bucket.tokens = (settled + raise).min(burst);
                bucket.last = now;
            }
        }
        self.qps = qps;
        self.burst = burst;
        self.cache.set_capacity(lru_cache_size);
    }

    /// Tries to take a token for `view` at `now`.
    ///
    /// A new bucket starts full. The balance grows by elapsed seconds × qps, capped at burst.
    /// An accepted event takes one token and moves the bucket's time to `now`; a rejected one
    /// changes nothing (x/time/rate `reserveN` with zero wait allowed). A clock that went
    /// backwards counts as no time elapsed.
    pub fn filter(&mut self, view: EventView<'_>, hashes: &EventHashes, now: Time) -> Verdict {
        let key = self.selection.key(view, hashes);
        let burst = self.burst;
        let qps = self.qps;
        let (bucket, _) = self.cache.get_or_insert_with(key, || Bucket {
            tokens: burst,
            last: now,
        });
        let last = if now < bucket.last { now } else { bucket.last };
        let mut tokens = bucket.tokens + now.seconds_since(last) * qps;
        if tokens > burst {
            tokens = burst;
        }
        tokens -= 1.0;
        // x/time/rate: a shortfall is allowed only if the wait it implies truncates to 0 ns.
        #[allow(clippy::cast_possible_truncation)] // Reason: Go's Duration(float64) truncates.
        let wait_nanos = if tokens < 0.0 {
            (1e9 * (-tokens / qps)) as i64
        } else {
            0
        };
        if wait_nanos > 0 || burst < 1.0 {
            return Verdict {
                allowed: false,
                key,
                tokens_left: tokens + 1.0,
            };
        }
        bucket.tokens = tokens;
        bucket.last = now;
        Verdict {
            allowed: true,
            key,
            tokens_left: tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::recorder::event::{Event, EventType, ObjectRef, Source};
    use crate::recorder::options::DEFAULT_QPS;

    const S: i64 = 1_000_000_000;

    fn ev(reason: &str) -> Event {
        ev_on("p", reason)
    }

    fn ev_on(object: &str, reason: &str) -> Event {
        Event::new(
            Arc::new(ObjectRef::new("v1", "Pod", "ns", object, "u")),
            Arc::new(Source::new("c", "")),
            EventType::Normal,
            reason,
            "m",
            Time::EPOCH,
        )
    }

    fn v(e: &Event) -> EventView<'_> {
        EventView {
            event: e,
            combined: false,
        }
    }

    #[test]
    fn a_full_bucket_passes_burst_events_then_refuses() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 25, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        for i in 0..25 {
            let r = f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(0));
            assert!(r.allowed, "event {i}");
            assert!((r.tokens_left - f64::from(24 - i)).abs() < 1e-9);
        }
        assert!(
            !f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(0))
                .allowed
        );
    }

    #[test]
    fn float32_qps_refills_one_token_in_exactly_300_seconds() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        let base = 1_700_000_000 * S;
        assert!(
            f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(base))
                .allowed
        );
        let r = f.filter(
            v(&e),
            &EventHashes::of(&e),
            Time::from_unix_nanos(base + 300 * S),
        );
        assert!(r.allowed, "1/300 as float32 is slightly more than 1/300");
        // With an exact 1/300 the same instant falls short.
        let mut exact = SpamFilter::new(1.0 / 300.0, 1, &SpamKeyField::DEFAULT, 10);
        assert!(
            exact
                .filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(base))
                .allowed
        );
        let r = exact.filter(
            v(&e),
            &EventHashes::of(&e),
            Time::from_unix_nanos(base + 299 * S),
        );
        assert!(!r.allowed);
    }

    #[test]
    fn a_shortfall_under_one_nanosecond_of_refill_still_passes_as_in_x_time_rate() {
        // x/time/rate turns a shortfall into a wait truncated to whole nanoseconds, and a
        // zero wait is allowed. At 3 tokens/s, 333_333_333 ns refill 0.999999999 tokens: the
        // 1e-9 shortfall is a 0.33 ns wait, so the event passes.
        let e = ev("R");
        let mut f = SpamFilter::new(3.0, 1, &SpamKeyField::DEFAULT, 10);
        assert!(
            f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(0))
                .allowed
        );
        let r = f.filter(
            v(&e),
            &EventHashes::of(&e),
            Time::from_unix_nanos(333_333_333),
        );
        assert!(r.allowed, "tokens left {}", r.tokens_left);
        assert!(r.tokens_left < 0.0);
        // 1 ns earlier the shortfall is a 1.3 ns wait: refused.
        let mut f = SpamFilter::new(3.0, 1, &SpamKeyField::DEFAULT, 10);
        assert!(
            f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(0))
                .allowed
        );
        assert!(
            !f.filter(
                v(&e),
                &EventHashes::of(&e),
                Time::from_unix_nanos(333_333_332)
            )
            .allowed
        );
    }

    #[test]
    fn a_refused_event_does_not_move_the_bucket() {
        let mut f = SpamFilter::new(1.0, 1, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        assert!(
            f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(0))
                .allowed
        );
        let r = f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(S / 2));
        assert!(!r.allowed);
        assert!((r.tokens_left - 0.5).abs() < 1e-9);
        // Had the refusal reset the time, 0.5 s more would not be enough.
        assert!(
            f.filter(v(&e), &EventHashes::of(&e), Time::from_unix_nanos(S))
                .allowed
        );
    }

    #[test]
    fn default_key_shares_one_bucket_across_reasons_but_reason_key_does_not() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &SpamKeyField::DEFAULT, 10);
        assert!(
            f.filter(v(&ev("A")), &EventHashes::of(&ev("A")), Time::EPOCH)
                .allowed
        );
        assert!(
            !f.filter(v(&ev("B")), &EventHashes::of(&ev("B")), Time::EPOCH)
                .allowed
        );
        let fields = [
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Reason,
        ];
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &fields, 10);
        assert!(
            f.filter(v(&ev("A")), &EventHashes::of(&ev("A")), Time::EPOCH)
                .allowed
        );
        assert!(
            f.filter(v(&ev("B")), &EventHashes::of(&ev("B")), Time::EPOCH)
                .allowed
        );
    }

    #[test]
    fn an_evicted_bucket_starts_full_again() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &[SpamKeyField::Reason], 1);
        assert!(
            f.filter(v(&ev("A")), &EventHashes::of(&ev("A")), Time::EPOCH)
                .allowed
        );
        assert!(
            f.filter(v(&ev("B")), &EventHashes::of(&ev("B")), Time::EPOCH)
                .allowed
        );
        assert!(
            f.filter(v(&ev("A")), &EventHashes::of(&ev("A")), Time::EPOCH)
                .allowed
        );
    }

    fn take(f: &mut SpamFilter, e: &Event, now: Time) -> bool {
        f.filter(v(e), &EventHashes::of(e), now).allowed
    }

    #[test]
    fn raising_the_burst_adds_the_extra_tokens_to_a_drained_bucket() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        assert!(take(&mut f, &e, Time::EPOCH));
        assert!(!take(&mut f, &e, Time::EPOCH));
        f.reconfigure(DEFAULT_QPS, 100, &SpamKeyField::DEFAULT, 10, Time::EPOCH);
        let passed = (0..200).filter(|_| take(&mut f, &e, Time::EPOCH)).count();
        assert_eq!(passed, 99);
        // A key first seen after the reload starts full at the new burst.
        let other = ev_on("other", "R");
        let passed = (0..200)
            .filter(|_| take(&mut f, &other, Time::EPOCH))
            .count();
        assert_eq!(passed, 100);
    }

    #[test]
    fn lowering_the_burst_caps_every_bucket() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 25, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        for _ in 0..5 {
            assert!(take(&mut f, &e, Time::EPOCH));
        }
        f.reconfigure(DEFAULT_QPS, 2, &SpamKeyField::DEFAULT, 10, Time::EPOCH);
        let passed = (0..10).filter(|_| take(&mut f, &e, Time::EPOCH)).count();
        assert_eq!(passed, 2);
    }

    #[test]
    fn a_new_qps_applies_from_the_reload_on_after_settling_at_the_old_rate() {
        // 1 token/s until the reload at 10 s, then 0.1 token/s.
        let mut f = SpamFilter::new(1.0, 20, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        for _ in 0..20 {
            assert!(take(&mut f, &e, Time::EPOCH));
        }
        f.reconfigure(
            0.1,
            20,
            &SpamKeyField::DEFAULT,
            10,
            Time::from_unix_nanos(10 * S),
        );
        // 10 tokens from the old rate, plus 1 from 10 s at the new one.
        let passed = (0..50)
            .filter(|_| take(&mut f, &e, Time::from_unix_nanos(20 * S)))
            .count();
        assert_eq!(passed, 11);
    }

    #[test]
    fn new_spam_key_fields_start_every_bucket_afresh() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 1, &SpamKeyField::DEFAULT, 10);
        assert!(take(&mut f, &ev("A"), Time::EPOCH));
        assert!(!take(&mut f, &ev("B"), Time::EPOCH));
        let with_reason = [
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Reason,
        ];
        f.reconfigure(DEFAULT_QPS, 1, &with_reason, 10, Time::EPOCH);
        assert_eq!(f.len(), 0);
        assert!(take(&mut f, &ev("A"), Time::EPOCH));
        assert!(take(&mut f, &ev("B"), Time::EPOCH));
        assert!(!take(&mut f, &ev("A"), Time::EPOCH));
    }

    #[test]
    fn unchanged_options_leave_the_buckets_alone() {
        let mut f = SpamFilter::new(DEFAULT_QPS, 2, &SpamKeyField::DEFAULT, 10);
        let e = ev("R");
        assert!(take(&mut f, &e, Time::EPOCH));
        f.reconfigure(DEFAULT_QPS, 2, &SpamKeyField::DEFAULT, 10, Time::EPOCH);
        assert!(take(&mut f, &e, Time::EPOCH));
        assert!(!take(&mut f, &e, Time::EPOCH));
    }
}
