//! The `events.k8s.io/v1` series path run through `informant simulate --api events.k8s.io/v1`,
//! scenario by scenario, written from client-go's `tools/events` tests and source
//! (`event_broadcaster.go`, `event_broadcaster_test.go`, `eventseries_test.go`): repeats within
//! and across the finish window, a long series refreshed, the key's fields one by one, retries
//! to exhaustion, each error class, the `NotFound` fallback, the `AlreadyExists` retry, the worker
//! queue, and recorded = Σ fates under sink faults.

use std::io::Write;
use std::process::Command;

use serde_json::{Value, json};

/// An occurrence at `t` about Pod `ns/web-0`: Warning `reason`, action `Restart`.
fn ev(t: f64, reason: &str) -> Value {
    json!({
        "t": t,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "u1"},
        "type": "Warning", "reason": reason, "action": "Restart", "note": "back-off restarting"
    })
}

fn fault(t: f64, verb: &str, results: &[&str]) -> Value {
    json!({"t": t, "op": "sink", "verb": verb, "results": results})
}

fn end(t: f64) -> Value {
    json!({"t": t, "op": "end"})
}

/// Runs `informant simulate --api events.k8s.io/v1 <args>` on `lines`; the calls (or the
/// summary's lines with `--summary`).
fn simulate(lines: &[Value], args: &[&str]) -> Vec<String> {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for l in lines {
        writeln!(file, "{l}").unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(["simulate", "--api", "events.k8s.io/v1", "--events"])
        .arg(file.path())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn calls(lines: &[Value]) -> Vec<Value> {
    simulate(lines, &[])
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `t verb result count` per call, e.g. `10 patch ok 2` (count `-` without a series).
fn brief(calls: &[Value]) -> Vec<String> {
    calls
        .iter()
        .map(|c| {
            let count = c["series"]["count"]
                .as_u64()
                .map_or("-".to_owned(), |n| n.to_string());
            format!(
                "{} {} {} {count}",
                c["t"],
                c["verb"].as_str().unwrap(),
                c["result"].as_str().unwrap()
            )
        })
        .collect()
}

/// The summary's fates for `reason`, by column name.
fn fates(lines: &[Value], args: &[&str], reason: &str) -> std::collections::HashMap<String, u64> {
    let mut with_summary = args.to_vec();
    with_summary.push("--summary");
    let out = simulate(lines, &with_summary);
    let header: Vec<String> = out[0].split_whitespace().map(str::to_owned).collect();
    let row = out
        .iter()
        .find(|l| l.split_whitespace().next() == Some(reason))
        .unwrap_or_else(|| panic!("no row for {reason} in {out:#?}"));
    header
        .iter()
        .skip(1)
        .zip(row.split_whitespace().skip(1))
        .map(|(h, v)| (h.clone(), v.parse().unwrap()))
        .collect()
}

/// `TestEventSeriesf`, `TestRecordEventToSink` ("record one Event followed by an isomorphic
/// one"): the first is created, the second patches `series.count: 2` at once, later ones are
/// only counted until the finish (checked every 6 min, so at 720 s for a last sighting at 30 s).
#[test]
fn repeats_within_the_finish_window_make_one_series_finished_6_to_12_minutes_later() {
    let input = [
        ev(0.0, "BackOff"),
        ev(10.0, "BackOff"),
        ev(20.0, "BackOff"),
        ev(30.0, "BackOff"),
        end(1000.0),
    ];
    assert_eq!(
        brief(&calls(&input)),
        ["0 create ok -", "10 patch ok 2", "720 patch ok 4"]
    );
    let f = fates(&input, &[], "BackOff");
    assert_eq!(
        (
            f["recorded"],
            f["created"],
            f["series_patched"],
            f["series_counted"]
        ),
        (4, 1, 1, 2)
    );
}

/// `finishSeries`: a singleton older than 6 min is forgotten on the tick (so a repeat after it
/// makes a new Event), a quiet series gets one last write of its count and is forgotten.
#[test]
fn repeats_across_the_finish_window_start_anew() {
    let input = [
        ev(0.0, "BackOff"),
        ev(400.0, "BackOff"),
        ev(1500.0, "BackOff"),
        ev(1560.0, "BackOff"),
        end(1600.0),
    ];
    assert_eq!(
        brief(&calls(&input)),
        [
            "0 create ok -",
            // Still cached at 360 s (0 + 6 min is not before 360 s): a repeat.
            "400 patch ok 2",
            // The finish at 1080 s writes the count once more and forgets the key.
            "1080 patch ok 2",
            // A new Event with a new name; the end flushes nothing (nothing uncounted).
            "1500 create ok -",
            "1560 patch ok 2",
        ]
    );
}

/// `refreshExistingEventSeries`: every 30 min each open series is written with its count so
/// far, whatever else happens.
#[test]
fn a_long_series_is_refreshed_every_30_minutes_and_finished_after() {
    let mut input: Vec<Value> = (0..=65)
        .map(|i| ev(f64::from(i) * 60.0, "BackOff"))
        .collect();
    input.push(end(5000.0));
    let got = brief(&calls(&input));
    assert_eq!(
        got,
        [
            "0 create ok -",
            "60 patch ok 2",
            // The tick at 1800 s runs before the occurrence at 1800 s: 30 counted.
            "1800 patch ok 30",
            "3600 patch ok 60",
            // Last sighting at 3900 s: finished on the tick at 4320 s.
            "4320 patch ok 66",
        ]
    );
    let f = fates(&input, &[], "BackOff");
    assert_eq!(
        (f["created"], f["series_patched"], f["series_counted"]),
        (1, 1, 64)
    );
}

/// `getKey`: each field of client-go's key, changed alone, makes a second Event; `note` does
/// not (the report of 35 lost events of 60), unless `keyFields` adds it.
#[test]
fn key_fields_one_by_one() {
    let base = ev(0.0, "BackOff");
    let changes: [(&str, Value); 7] = [
        ("type", json!({"type": "Normal"})),
        ("action", json!({"action": "Pull"})),
        ("reason", json!({"reason": "Other"})),
        (
            "reportingController",
            json!({"reportingController": "other"}),
        ),
        ("reportingInstance", json!({"reportingInstance": "other-1"})),
        (
            "regarding",
            json!({"regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "u1", "fieldPath": "spec.containers{app}"}}),
        ),
        (
            "related",
            json!({"related": {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u9"}}),
        ),
    ];
    for (field, change) in changes {
        let mut other = base.clone();
        other["t"] = json!(5);
        for (k, v) in change.as_object().unwrap() {
            other[k] = v.clone();
        }
        let got = brief(&calls(&[base.clone(), other, end(10.0)]));
        assert_eq!(
            got,
            ["0 create ok -", "5 create ok -"],
            "{field} is in the key"
        );
    }
    let mut other_note = base.clone();
    other_note["t"] = json!(5);
    other_note["note"] = json!("another message");
    let input = [base, other_note, end(10.0)];
    assert_eq!(
        brief(&calls(&input)),
        ["0 create ok -", "5 patch ok 2"],
        "note is not"
    );
    let mut config = tempfile::NamedTempFile::new().unwrap();
    write!(
        config,
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {{name: c}}\nspec:\n  recorder:\n    api: events.k8s.io/v1\n    series:\n      keyFields: [type, action, reason, reportingController, reportingInstance, regarding, related, note]\n"
    )
    .unwrap();
    let out = simulate(&input, &["--config", config.path().to_str().unwrap()]);
    let out: Vec<Value> = out
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        brief(&out),
        ["0 create ok -", "5 create ok -"],
        "with note in keyFields"
    );
}

/// `attemptRecording`: at most 12 tries (`maxTriesPerEvent`), each wait 10–12.5 s
/// (`wait.Jitter(10s, 0.25)`), then the event is given up: `failed`.
#[test]
fn retries_to_exhaustion_are_12_calls_10_to_12_5_s_apart_then_failed() {
    let mut always = fault(0.0, "create", &["transport"]);
    always["always"] = json!(true);
    let input = [always, ev(0.0, "BackOff"), end(1000.0)];
    let got = calls(&input);
    assert_eq!(got.len(), 12);
    let times: Vec<f64> = got.iter().map(|c| c["t"].as_f64().unwrap()).collect();
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((10.0..12.5).contains(&gap), "gap {gap} in {times:?}");
    }
    let f = fates(&input, &[], "BackOff");
    assert_eq!((f["failed"], f["recorded"]), (1, 1));
}

/// `recordEvent`: every status error is abandoned at once, whatever its code; a transport
/// error is retried; `AlreadyExists` on a first create is abandoned too.
#[test]
fn each_error_class_on_a_create() {
    for (result, abandoned) in [
        ("forbidden", true),
        ("servererror", true),
        ("timeout", true),
        ("notfound", true),
        ("alreadyexists", true),
        ("transport", false),
    ] {
        let input = [
            fault(0.0, "create", &[result]),
            ev(0.0, "BackOff"),
            end(100.0),
        ];
        let got = brief(&calls(&input));
        let f = fates(&input, &[], "BackOff");
        if abandoned {
            assert_eq!(got, [format!("0 create {result} -")], "{result}");
            assert_eq!(f["abandoned"], 1, "{result}");
        } else {
            assert_eq!(got.len(), 2, "{result}: {got:?}");
            assert!(got[1].ends_with("create ok -"), "{result}: {got:?}");
            assert_eq!(f["created"], 1, "{result}");
        }
    }
}

/// A series patch that gets a status error is abandoned: the second occurrence is lost,
/// and the later ones wait for the finish.
#[test]
fn a_server_error_on_the_series_patch_is_abandoned_and_the_finish_writes_the_count() {
    let input = [
        ev(0.0, "BackOff"),
        fault(1.0, "patch", &["servererror"]),
        ev(5.0, "BackOff"),
        ev(6.0, "BackOff"),
        end(800.0),
    ];
    assert_eq!(
        brief(&calls(&input)),
        ["0 create ok -", "5 patch servererror 2", "720 patch ok 3"]
    );
    let f = fates(&input, &[], "BackOff");
    assert_eq!(
        (f["created"], f["abandoned"], f["series_counted"]),
        (1, 1, 1)
    );
}

/// `recordEvent`: "Update can fail because the event may have been removed": `NotFound` on the
/// series patch falls back to a create carrying the series. Also what happens to the Event an
/// abandoned first create never made: the series patch finds nothing and creates it.
#[test]
fn not_found_on_a_series_patch_falls_back_to_a_create_carrying_the_series() {
    let input = [
        fault(0.0, "create", &["forbidden"]),
        ev(0.0, "BackOff"),
        ev(5.0, "BackOff"),
        end(100.0),
    ];
    assert_eq!(
        brief(&calls(&input)),
        [
            "0 create forbidden -",
            "5 patch notfound 2",
            "5 create ok 2"
        ]
    );
    let f = fates(&input, &[], "BackOff");
    assert_eq!((f["abandoned"], f["created"]), (1, 1));
}

/// `recordEvent`: `AlreadyExists` on the create of a series is retried ("safe to retry"); the
/// retry patches it.
#[test]
fn already_exists_is_retried_only_for_a_series() {
    let input = [
        ev(0.0, "BackOff"),
        fault(1.0, "patch", &["notfound"]),
        fault(1.0, "create", &["alreadyexists"]),
        ev(5.0, "BackOff"),
        end(100.0),
    ];
    let got = brief(&calls(&input));
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        &got[..3],
        [
            "0 create ok -",
            "5 patch notfound 2",
            "5 create alreadyexists 2"
        ]
    );
    assert!(got[3].ends_with("patch ok 2"), "{got:?}");
    let f = fates(&input, &[], "BackOff");
    assert_eq!((f["created"], f["series_patched"]), (1, 1));
}

/// The race client-go's comment describes ("a new Event is emitted twice in a very short
/// period of time"): the first create fails and is retried, the second occurrence's patch
/// finds nothing and creates the Event with the series, the first's retry gets `AlreadyExists`.
/// client-go gives it up; its occurrence is in the series count, so here it waits, folded,
/// for the finish to deliver it.
#[test]
fn a_first_create_beaten_by_its_series_is_counted_not_abandoned() {
    let input = [
        fault(0.0, "create", &["transport"]),
        ev(0.0, "BackOff"),
        ev(5.0, "BackOff"),
        end(1000.0),
    ];
    let got = brief(&calls(&input));
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(
        &got[..3],
        [
            "0 create transport -",
            "5 patch notfound 2",
            "5 create ok 2"
        ]
    );
    assert!(got[3].ends_with("create alreadyexists -"), "{got:?}");
    assert_eq!(got[4], "720 patch ok 2");
    let f = fates(&input, &[], "BackOff");
    assert_eq!(
        (f["created"], f["series_counted"], f["abandoned"]),
        (1, 1, 0)
    );
}

/// Eight workers and a queue of 1000 (`recordWorkers`, `maxQueuedEvents`): with the server
/// down, the 1009th distinct event in flight is dropped, counted.
#[test]
fn a_full_write_queue_drops_counted() {
    let mut always = fault(0.0, "create", &["transport"]);
    always["always"] = json!(true);
    let mut input = vec![always];
    for i in 0..1100 {
        let mut e = ev(0.0, "BackOff");
        e["regarding"]["name"] = json!(format!("web-{i}"));
        input.push(e);
    }
    input.push(end(10.0));
    let f = fates(&input, &[], "BackOff");
    assert_eq!(f["recorded"], 1100);
    assert_eq!(f["dropped_series_queue_full"], 1100 - 1008);
    assert_eq!(f["failed"], 1008);
}

/// recorded = Σ fates under every fault class, sticky and queued, across objects and reasons.
#[test]
fn recorded_equals_the_sum_of_fates_under_sink_faults() {
    let mut input = Vec::new();
    let classes = [
        "transport",
        "notfound",
        "alreadyexists",
        "forbidden",
        "servererror",
        "timeout",
    ];
    let mut recorded = 0u64;
    for i in 0..400u32 {
        let t = f64::from(i) * 7.0;
        if i % 13 == 0 {
            let verb = if i % 2 == 0 { "create" } else { "patch" };
            let results: Vec<&str> = (0..3)
                .map(|k| classes[(i as usize + k) % classes.len()])
                .collect();
            let mut f = fault(t, verb, &results);
            f["always"] = json!(i % 39 == 0);
            if i % 3 == 0 {
                f["matchReason"] = json!(format!("R{}", i % 4));
            }
            input.push(f);
        }
        let mut e = ev(t, &format!("R{}", i % 4));
        e["regarding"]["name"] = json!(format!("web-{}", i % 5));
        input.push(e);
        recorded += 1;
    }
    input.push(end(4000.0));
    let mut with_summary = simulate(&input, &["--summary"]);
    with_summary.remove(0);
    let sum: u64 = with_summary
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, recorded, "recorded = Σ fates: {with_summary:#?}");
}

/// Bad input is a clear error or a named fate, never a panic: an unknown API or a correlator
/// flag is a usage error (64), a malformed line names its number, an occurrence without a
/// name or with an unknown type ends `invalid`.
#[test]
fn bad_input_is_an_error_with_its_place_or_the_invalid_fate() {
    let run = |args: &[&str], lines: &[&str]| {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            writeln!(file, "{l}").unwrap();
        }
        let out = Command::new(env!("CARGO_BIN_EXE_informant"))
            .args(["simulate", "--events"])
            .arg(file.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let good = ev(0.0, "BackOff").to_string();
    let (code, err) = run(&["--api", "events/v1"], &[&good]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("events.k8s.io/v1"), "{err}");
    let (code, err) = run(&["--api", "events.k8s.io/v1", "--burst", "5"], &[&good]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("burst"), "{err}");
    let (code, err) = run(
        &["--api", "events.k8s.io/v1"],
        &[&good, "{\"t\": 1, \"op\": \"sink\"}"],
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("line 2"), "{err}");
    let (code, err) = run(
        &["--api", "events.k8s.io/v1"],
        &[&ev(5.0, "A").to_string(), &good],
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("line 2") && err.contains("back in time"),
        "{err}"
    );

    let mut no_name = ev(0.0, "NoName");
    no_name["regarding"]["name"] = json!("");
    let mut bad_type = ev(1.0, "BadType");
    bad_type["type"] = json!("warning");
    let input = [no_name, bad_type, end(2.0)];
    assert!(
        calls(&input).is_empty(),
        "no call for an invalid occurrence"
    );
    assert_eq!(fates(&input, &[], "NoName")["invalid"], 1);
    // Without an action the reason is the action (the API requires one), as in the pipeline.
    let mut no_action = ev(0.0, "NoAction");
    no_action.as_object_mut().unwrap().remove("action");
    assert_eq!(fates(&[no_action, end(1.0)], &[], "NoAction")["created"], 1);
    assert_eq!(fates(&input, &[], "BadType")["invalid"], 1);
}
