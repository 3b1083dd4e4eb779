//! Unit tests of schedules: the tick computation (cron with seconds, `@every`, macros, time
//! zones across daylight-saving changes), the ticker on a paused clock, the skipping of a tick
//! whose predecessor still runs, and the validation messages.

use std::sync::Mutex;

use futures::StreamExt as _;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{reflector, watcher};

use super::ticks::{Key, per_object_ticks};
use super::*;
use crate::config::Origin;
use crate::controller::{Series, Stub};
use crate::hooks::metrics::HookMetrics;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn schedule(text: &str, zone: Option<&str>) -> Schedule {
    Schedule::parse(text, zone, ScheduleMode::PerObject).unwrap()
}

/// The `n` ticks after `from`, computed.
fn ticks(schedule: &Schedule, from: &str, n: usize) -> Vec<String> {
    let mut now = at(from);
    let mut out = Vec::new();
    for _ in 0..n {
        now = schedule.next_after(now).unwrap();
        out.push(now.to_string());
    }
    out
}

/// A ticker of `text` in `zone` on a wall clock that reads `start` now and follows tokio's
/// (paused) clock, and where it publishes its next tick.
fn ticker(text: &str, zone: Option<&str>, start: &str) -> (Ticker, Arc<Mutex<Option<Timestamp>>>) {
    let next = Arc::new(Mutex::new(None));
    let clock = Arc::new(TokioClock::starting_at(at(start)));
    let ticker = Ticker::new(schedule(text, zone), clock, Arc::clone(&next));
    (ticker, next)
}

/// The next `n` ticks of `ticker`, each with the (virtual) time waited for it since the
/// first call, in whole seconds.
async fn waited(ticker: &mut Ticker, n: usize) -> Vec<(String, u64)> {
    let started = tokio::time::Instant::now();
    let mut out = Vec::new();
    for _ in 0..n {
        let tick = ticker.tick().await;
        out.push((tick.to_string(), started.elapsed().as_secs()));
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_cron_with_seconds_ticks_at_the_declared_times_on_a_paused_clock() {
    let (mut ticker, next) = ticker("*/20 * * * * *", None, "2026-01-01T00:00:05Z");
    assert_eq!(
        waited(&mut ticker, 3).await,
        [
            ("2026-01-01T00:00:20Z".to_owned(), 15),
            ("2026-01-01T00:00:40Z".to_owned(), 35),
            ("2026-01-01T00:01:00Z".to_owned(), 55),
        ]
    );
    // The tick being waited for is published (the Controller's status shows it).
    let pending = tokio::time::timeout(Duration::from_secs(1), ticker.tick()).await;
    assert!(pending.is_err(), "no tick within a second of the last");
    assert_eq!(*next.lock().unwrap(), Some(at("2026-01-01T00:01:20Z")));
}

#[tokio::test(start_paused = true)]
async fn every_ticks_at_multiples_of_its_interval_and_never_replays_missed_ticks() {
    let (mut ticker, _) = ticker("@every 5m", None, "2026-01-01T00:03:00Z");
    assert_eq!(
        waited(&mut ticker, 2).await,
        [
            ("2026-01-01T00:05:00Z".to_owned(), 120),
            ("2026-01-01T00:10:00Z".to_owned(), 420),
        ]
    );
    // 17 minutes in which nobody waited (no leader): the ticks of 00:15, 00:20 and 00:25
    // are gone, the next is 00:30.
    tokio::time::advance(Duration::from_mins(17)).await;
    assert_eq!(
        waited(&mut ticker, 1).await,
        [("2026-01-01T00:30:00Z".to_owned(), 180)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_time_zone_ticks_at_its_wall_time_across_a_daylight_saving_change() {
    // Paris moves from UTC+1 to UTC+2 at 02:00 on 29 March 2026: 09:00 there is 08:00 UTC
    // before, 07:00 UTC after, 23 hours later.
    let (mut ticker, _) = ticker("0 9 * * *", Some("Europe/Paris"), "2026-03-27T12:00:00Z");
    assert_eq!(
        waited(&mut ticker, 3).await,
        [
            ("2026-03-28T08:00:00Z".to_owned(), 20 * 3600),
            ("2026-03-29T07:00:00Z".to_owned(), 43 * 3600),
            ("2026-03-30T07:00:00Z".to_owned(), 67 * 3600),
        ]
    );
}

#[test]
fn a_time_skipped_or_repeated_by_a_clock_change_ticks_once() {
    // 02:30 does not exist in Paris on 29 March: that day's tick falls when the clocks jump
    // (03:00 local, 01:00 UTC).
    assert_eq!(
        ticks(
            &schedule("30 2 * * *", Some("Europe/Paris")),
            "2026-03-27T12:00:00Z",
            3
        ),
        [
            "2026-03-28T01:30:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    // 01:30 happens twice in New York on 1 November: it ticks once, at the first.
    assert_eq!(
        ticks(
            &schedule("30 1 * * *", Some("America/New_York")),
            "2026-10-31T12:00:00Z",
            2
        ),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
}

#[test]
fn five_fields_macros_and_names_mean_what_cron_means() {
    assert_eq!(
        ticks(
            &schedule("*/15 3 * * MON-FRI", None),
            "2026-11-27T00:00:00Z",
            3
        ),
        [
            "2026-11-27T03:00:00Z",
            "2026-11-27T03:15:00Z",
            "2026-11-27T03:30:00Z"
        ]
    );
    let from = "2026-11-27T10:20:30Z";
    for (text, first) in [
        ("@hourly", "2026-11-27T11:00:00Z"),
        ("@daily", "2026-11-28T00:00:00Z"),
        ("@midnight", "2026-11-28T00:00:00Z"),
        ("@weekly", "2026-11-29T00:00:00Z"),
        ("@monthly", "2026-12-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
        ("@every 1h30m", "2026-11-27T10:30:00Z"),
    ] {
        assert_eq!(ticks(&schedule(text, None), from, 1), [first], "{text}");
    }
}

fn problem(text: &str) -> String {
    Schedule::parse(text, None, ScheduleMode::Batch)
        .unwrap_err()
        .schedule
        .unwrap()
}

#[test]
fn a_bad_expression_names_its_field_and_character() {
    assert_eq!(
        problem("61 * * * *"),
        "invalid schedule \"61 * * * *\": field 1 (minute) \"61\" at character 1: Component \
         error: Number out of bounds; the minute field takes 0-59"
    );
    assert_eq!(
        problem("*/5 x * * * *"),
        "invalid schedule \"*/5 x * * * *\": field 2 (minute) \"x\" at character 5: 'x' (its \
         character 1) is not allowed in the minute field"
    );
    assert_eq!(
        problem("0 0 * 13 *"),
        "invalid schedule \"0 0 * 13 *\": field 4 (month) \"13\" at character 7: Component \
         error: Number out of bounds; the month field takes 1-12 or JAN-DEC"
    );
    assert!(
        problem("* * * * * * *").contains("7 fields; write 5"),
        "{}",
        problem("* * * * * * *")
    );
    assert!(problem("@fortnightly").contains("unknown macro @fortnightly at character 1"));
    assert!(problem("@daily 3").contains("@daily takes nothing after it"));
    assert!(problem("@every 500ms").contains("shorter than a second"));
    assert!(problem("@every soon").contains("after @every"));
    assert!(problem("0 0 30 2 *").contains("matches no date"));
    let both =
        Schedule::parse("61 * * * *", Some("Mars/Olympus"), ScheduleMode::Batch).unwrap_err();
    assert!(both.schedule.is_some());
    assert_eq!(
        both.time_zone.as_deref(),
        Some(
            "unknown time zone \"Mars/Olympus\"; write an IANA name such as UTC, Europe/Paris \
             or America/New_York"
        )
    );
}

#[test]
fn a_controller_reports_every_schedule_error_at_once_with_its_path() {
    let yaml = |spec: &str| {
        let text = format!(
            "apiVersion: informant.dev/v1alpha1\nkind: Controller\n\
             metadata: {{name: nightly, namespace: ops}}\nspec:\n\
             \x20 for: {{apiVersion: v1, kind: ConfigMap}}\n\
             \x20 hook: {{exec: {{command: [/hooks/x]}}}}\n{spec}"
        );
        crate::yaml::from_str::<serde_json::Value>(&text).unwrap()
    };
    let e = crate::hooks::validate_controller_value(
        yaml("  schedule: '0 0 32 * *'\n  timeZone: Europe/Pariss\n  scheduleMode: group\n"),
        &Origin::Text,
        None,
    )
    .unwrap_err();
    let paths: Vec<String> = e.errors.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(
        paths,
        ["spec.scheduleMode", "spec.schedule", "spec.timeZone"],
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("field 3 (day-of-month) \"32\" at character 5"),
        "{e}"
    );
    assert!(e.to_string().contains("unknown mode \"group\""), "{e}");

    let e = crate::hooks::validate_controller_value(yaml("  timeZone: UTC\n"), &Origin::Text, None)
        .unwrap_err();
    assert_eq!(
        e.errors[0].to_string(),
        "spec.timeZone: set without spec.schedule; add a schedule or remove it"
    );

    let v = crate::hooks::validate_controller_value(
        yaml("  schedule: '@every 10m'\n  timeZone: Asia/Tokyo\n  scheduleMode: batch\n"),
        &Origin::Text,
        None,
    )
    .unwrap();
    let schedule = v.settings.schedule.unwrap();
    assert_eq!(schedule.to_string(), "@every 10m (Asia/Tokyo, batch)");
    assert_eq!(schedule.mode(), ScheduleMode::Batch);
}

/// The stream's next item within 15 s (of a paused clock).
async fn next<S: futures::Stream + Unpin>(
    stream: &mut S,
) -> Result<Option<S::Item>, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(15), stream.next()).await
}

fn stub_store(names: &[&str]) -> (reflector::Store<Stub<DynamicObject>>, Arc<ApiResource>) {
    let resource = Arc::new(ApiResource::from_gvk(&GroupVersionKind::gvk(
        "",
        "v1",
        "ConfigMap",
    )));
    let mut writer = reflector::store::Writer::<Stub<DynamicObject>>::new(Arc::clone(&resource));
    for name in names {
        writer.apply_watcher_event(&watcher::Event::Apply(Stub::new(name, Some("default"))));
    }
    (writer.as_reader(), resource)
}

#[tokio::test(start_paused = true)]
async fn a_tick_that_finds_the_previous_ones_calls_running_is_skipped_and_counted() {
    let (store, resource) = stub_store(&["a", "b"]);
    let (ticker, _) = ticker("@every 10s", None, "2026-01-01T00:00:00Z");
    let outstanding = Arc::new(Outstanding::default());
    let metrics = HookMetrics::new();
    let requests = per_object_ticks(
        ticker,
        store.clone(),
        resource,
        Arc::clone(&outstanding),
        (
            Series::default(),
            Some(metrics.clone()),
            "ops/sweep".to_owned(),
        ),
    );
    let mut requests = std::pin::pin!(requests);

    // The first tick asks for both objects.
    let mut first = [
        next(&mut requests).await.unwrap().unwrap().name,
        next(&mut requests).await.unwrap().unwrap().name,
    ];
    first.sort();
    assert_eq!(first, ["a", "b"]);
    let stubs = store.state();
    let stub = |name: &str| stubs.iter().find(|s| s.name() == name).unwrap();
    // `a`'s call ends at once; `b`'s runs on past the next tick.
    drop(outstanding.claim(stub("a")).expect("the tick waits for a"));
    let slow = outstanding.claim(stub("b")).expect("the tick waits for b");
    assert!(
        outstanding.claim(stub("b")).is_none(),
        "one reconcile answers a tick's object"
    );
    assert!(
        next(&mut requests).await.is_err(),
        "the tick at 00:00:20 is skipped"
    );
    assert_eq!(
        (
            metrics.schedule_ticks("ops/sweep", true),
            metrics.schedule_ticks("ops/sweep", false)
        ),
        (1, 1)
    );

    // Once b's call ended, the next tick runs.
    drop(slow);
    let mut again = [
        next(&mut requests).await.unwrap().unwrap().name,
        next(&mut requests).await.unwrap().unwrap().name,
    ];
    again.sort();
    assert_eq!(again, ["a", "b"]);
    assert_eq!(
        (
            metrics.schedule_ticks("ops/sweep", true),
            metrics.schedule_ticks("ops/sweep", false)
        ),
        (2, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_before_its_call_does_not_hold_the_next_tick() {
    let (store, resource) = stub_store(&["gone"]);
    let (ticker, _) = ticker("@every 10s", None, "2026-01-01T00:00:00Z");
    let outstanding = Arc::new(Outstanding::default());
    let metrics = HookMetrics::new();
    // Ticks of an empty store: the object's stub is in a store the ticks do not read.
    let (empty, _) = stub_store(&[]);
    assert!(outstanding.begin(&[Key::of(&store.state()[0])]));
    let requests = per_object_ticks(
        ticker,
        empty,
        resource,
        Arc::clone(&outstanding),
        (
            Series::default(),
            Some(metrics.clone()),
            "ops/sweep".to_owned(),
        ),
    );
    let mut requests = std::pin::pin!(requests);
    // The waiting object is no longer in the store: the tick runs (with nothing to ask for).
    let none = tokio::time::timeout(Duration::from_secs(15), requests.next()).await;
    assert!(none.is_err());
    assert_eq!(metrics.schedule_ticks("ops/sweep", true), 1);
    assert_eq!(metrics.schedule_ticks("ops/sweep", false), 0);
}

#[test]
fn a_batch_request_has_the_fields_the_committed_schema_declares() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/hooks-v1.schema.json")).unwrap();
    let declared = &schema["$defs"]["batchRequest"];
    let request = crate::hooks::contract::BatchRequest {
        api_version: crate::hooks::contract::API_VERSION.to_owned(),
        controller: crate::hooks::contract::ControllerRef {
            namespace: "ops".into(),
            name: "census".into(),
        },
        scheduled_time: "2026-11-27T01:00:00Z".into(),
        objects: vec![serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}})],
    };
    let value = serde_json::to_value(&request).unwrap();
    let mut sent: Vec<&String> = value.as_object().unwrap().keys().collect();
    let mut required: Vec<&str> = declared["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    sent.sort();
    required.sort_unstable();
    assert_eq!(sent, required);
    assert_eq!(
        declared["properties"]["apiVersion"]["const"],
        value["apiVersion"]
    );
    assert!(
        schema["oneOf"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"$ref": "#/$defs/batchRequest"}))
    );
}

#[test]
fn the_tz_database_is_compiled_in() {
    // What a container without /usr/share/zoneinfo resolves names from.
    let bundled = jiff::tz::TimeZoneDatabase::bundled();
    for name in ["Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC"] {
        assert!(bundled.get(name).is_ok(), "{name} is not bundled");
    }
}
