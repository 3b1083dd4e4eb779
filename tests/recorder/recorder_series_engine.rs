//! The `events.k8s.io/v1` series engine (`recorder::series::Engine`) through its public API,
//! on an injected time, without tokio: every token comes back exactly once (recorded = Σ fates
//! plus what a stop leaves), whatever the answers and the order of time; the flush, the drain
//! and a finish that is abandoned.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use informant::recorder::series::{Engine, Purpose, Verb};
use informant::recorder::{
    Event, EventNaming, EventType, Fate, ObjectRef, SeriesKeyField, SeriesOptions, SinkError,
    SinkOptions, Source, Time,
};

const BASE: Time = Time::from_unix_nanos(1_700_000_000_000_000_000);

fn at(seconds: u64) -> Time {
    BASE.saturating_add(Duration::from_secs(seconds))
}

fn engine(options: &SeriesOptions) -> Engine<u64> {
    Engine::new(
        options,
        &SinkOptions::default(),
        EventNaming::Unique,
        BASE,
        Box::new(|| 0.5),
    )
}

fn event(pod: &str, reason: &str, note: &str, t: Time) -> Arc<Event> {
    let mut e = Event::new(
        Arc::new(ObjectRef::new("v1", "Pod", "ns", pod, "u")),
        Arc::new(Source::new("ctrl", "")),
        EventType::Warning,
        reason,
        note,
        t,
    );
    e.action = Some("Act".into());
    Arc::new(e)
}

/// Answers every call due at `now` with `answer(call)` until none is left; returns the
/// calls as `purpose verb count`.
fn settle(
    e: &mut Engine<u64>,
    now: Time,
    mut answer: impl FnMut(Verb) -> Result<(), SinkError>,
) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let calls = e.poll(now);
        if calls.is_empty() {
            return seen;
        }
        for c in calls {
            seen.push(format!(
                "{} {} {}",
                c.purpose.as_str(),
                c.verb.as_str(),
                c.write.series.map_or(0, |s| s.count)
            ));
            e.answer(now, c.id, &answer(c.verb));
        }
    }
}

fn fates(e: &mut Engine<u64>, into: &mut HashMap<Fate, u64>) {
    for f in e.take_finished() {
        *into.entry(f.fate).or_default() += 1;
    }
}

#[test]
fn the_flush_writes_each_series_with_uncounted_occurrences_once() {
    let mut e = engine(&SeriesOptions::default());
    let mut got = HashMap::new();
    for (i, t) in [0, 1, 2, 3].into_iter().enumerate() {
        e.record(at(t), event("p", "R", "m", at(t)), i as u64);
        settle(&mut e, at(t), |_| Ok(()));
    }
    e.flush();
    assert_eq!(settle(&mut e, at(4), |_| Ok(())), ["flush patch 4"]);
    fates(&mut e, &mut got);
    assert!(e.is_idle());
    assert_eq!(got[&Fate::Created], 1);
    assert_eq!(got[&Fate::SeriesPatched], 1);
    assert_eq!(got[&Fate::SeriesCounted], 2);
    assert_eq!(e.next_wake(), None, "no ticks after the flush");
}

#[test]
fn an_abandoned_finish_ends_the_folded_occurrences_abandoned() {
    let mut e = engine(&SeriesOptions::default());
    let mut got = HashMap::new();
    for t in 0..5 {
        e.record(at(t), event("p", "R", "m", at(t)), t);
        settle(&mut e, at(t), |_| Ok(()));
    }
    assert_eq!(e.next_wake(), Some(at(360)));
    // 4 + 6 min is not before 360 s: nothing at the first tick; the second finishes it.
    assert!(settle(&mut e, at(360), |_| Ok(())).is_empty());
    let forbidden = || {
        Err(SinkError::Rejected {
            code: 403,
            message: "forbidden".into(),
        })
    };
    assert_eq!(settle(&mut e, at(720), |_| forbidden()), ["finish patch 5"]);
    fates(&mut e, &mut got);
    assert_eq!(got[&Fate::Abandoned], 3);
    assert_eq!(e.cached(), 0, "client-go forgets the key");
}

#[test]
fn a_transport_error_on_the_finish_keeps_the_key_for_the_next_tick() {
    let mut e = engine(&SeriesOptions::default());
    let mut got = HashMap::new();
    for t in 0..3 {
        e.record(at(t), event("p", "R", "m", at(t)), t);
        settle(&mut e, at(t), |_| Ok(()));
    }
    let calls = settle(&mut e, at(720), |_| {
        Err(SinkError::Transport("down".into()))
    });
    assert_eq!(calls, ["finish patch 3"]);
    assert_eq!(e.cached(), 1);
    assert_eq!(settle(&mut e, at(1080), |_| Ok(())), ["finish patch 3"]);
    fates(&mut e, &mut got);
    assert_eq!(got[&Fate::SeriesCounted], 1);
    assert_eq!(e.cached(), 0);
}

#[test]
fn the_drain_hands_back_every_token_still_held() {
    let mut e = engine(&SeriesOptions::default());
    for t in 0..4 {
        e.record(at(t), event("p", "R", "m", at(t)), t);
    }
    // Nothing polled: two writes queued, two occurrences folded.
    let mut left = e.drain();
    left.sort_unstable();
    assert_eq!(left, [0, 1, 2, 3]);
    assert!(e.take_finished().is_empty());
    assert!(e.is_idle());
}

#[test]
fn a_reconfigured_key_applies_to_occurrences_recorded_after_it() {
    let mut e = engine(&SeriesOptions::default());
    e.record(at(0), event("p", "R", "first", at(0)), 0);
    e.record(at(1), event("p", "R", "second", at(1)), 1);
    assert_eq!(
        settle(&mut e, at(1), |_| Ok(())),
        ["occurrence create 0", "occurrence patch 2"]
    );
    let mut with_note = SeriesKeyField::DEFAULT.to_vec();
    with_note.push(SeriesKeyField::Note);
    e.reconfigure(
        &SeriesOptions {
            key_fields: with_note,
            ..SeriesOptions::default()
        },
        &SinkOptions::default(),
    );
    e.record(at(2), event("p", "R", "third", at(2)), 2);
    assert_eq!(settle(&mut e, at(2), |_| Ok(())), ["occurrence create 0"]);
    assert_eq!(e.cached(), 2);
}

/// Conservation on many random runs: objects, reasons, answers of every class and time
/// jumps over the refresh and finish ticks; every token comes back exactly once.
#[test]
fn every_token_comes_back_exactly_once_whatever_the_answers() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    for run in 0..50u64 {
        let mut e = engine(&SeriesOptions {
            refresh: Duration::from_secs(100 + run * 7),
            ..SeriesOptions::default()
        });
        let mut back: Vec<u64> = Vec::new();
        let mut now = 0u64;
        let recorded = 300u64;
        for token in 0..recorded {
            now += next(40);
            while let Some(w) = e.next_wake()
                && w <= at(now)
            {
                settle(&mut e, w, |_| answer(next(8)));
            }
            let ev = event(
                &format!("p{}", next(4)),
                &format!("R{}", next(3)),
                "m",
                at(now),
            );
            e.record(at(now), ev, token);
            settle(&mut e, at(now), |_| answer(next(8)));
            back.extend(e.take_finished().into_iter().map(|f| f.token));
        }
        e.flush();
        let mut t = at(now);
        while !e.is_idle() {
            settle(&mut e, t, |_| answer(next(8)));
            match e.next_wake() {
                Some(w) => t = t.max(w),
                None => break,
            }
        }
        back.extend(e.take_finished().into_iter().map(|f| f.token));
        back.extend(e.drain());
        back.sort_unstable();
        assert_eq!(
            back,
            (0..recorded).collect::<Vec<_>>(),
            "run {run}: every token exactly once"
        );
    }
}

fn answer(class: u64) -> Result<(), SinkError> {
    let status = |code| {
        Err(SinkError::Rejected {
            code,
            message: String::new(),
        })
    };
    match class {
        0 => Err(SinkError::Transport("reset".into())),
        1 => Err(SinkError::NotFound),
        2 => status(409),
        3 => status(403),
        4 => Err(SinkError::Unavailable {
            code: 504,
            message: String::new(),
        }),
        _ => Ok(()),
    }
}

#[test]
fn purposes_name_themselves() {
    for (p, s) in [
        (Purpose::Occurrence, "occurrence"),
        (Purpose::Refresh, "refresh"),
        (Purpose::Finish, "finish"),
        (Purpose::Flush, "flush"),
    ] {
        assert_eq!(p.as_str(), s);
    }
}
