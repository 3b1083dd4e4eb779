use super::*;

fn at(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(second).unwrap()
}

fn input(validity: Validity, readiness: Readiness, now: i64) -> StatusInput {
    StatusInput {
        generation: Some(1),
        validity,
        readiness,
        informers: Vec::new(),
        namespace_selectors: Vec::new(),
        controllers: Vec::new(),
        sharding: None,
        last_reload_time: None,
        now: at(now),
    }
}

fn informer(kind: &str, namespace: Option<&str>, synced: bool) -> InformerStatus {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": kind, "namespace": namespace,
        "synced": synced, "objects": 0,
    }))
    .unwrap()
}

fn get<'a>(status: &'a CacheConfigStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn transition_times_change_only_when_a_condition_flips() {
    let first = desired_status(None, &input(Validity::Valid, Readiness::Synced, 100));
    assert_eq!(get(&first, "Valid").last_transition_time, Time(at(100)));

    let syncing = Readiness::Syncing {
        pending: vec!["v1 Pod in every namespace".into()],
    };
    let mut later = input(Validity::Valid, syncing, 200);
    later.generation = Some(2);
    let second = desired_status(Some(&first), &later);
    assert_eq!(get(&second, "Valid").last_transition_time, Time(at(100)));
    assert_eq!(get(&second, "Valid").observed_generation, Some(2));
    assert_eq!(get(&second, "Ready").last_transition_time, Time(at(200)));
    assert_eq!(get(&second, "Ready").reason, REASON_INFORMERS_SYNCING);

    // Same status, different reason: the time stays.
    let failed = Readiness::Failed {
        failed: vec!["v1 Pod in every namespace: 403".into()],
    };
    let third = desired_status(Some(&second), &input(Validity::Valid, failed, 300));
    assert_eq!(get(&third, "Ready").last_transition_time, Time(at(200)));
    assert_eq!(get(&third, "Ready").reason, REASON_INFORMER_FAILED);
}

#[test]
fn the_current_time_is_truncated_to_seconds_as_the_api_serializes_it() {
    let mut i = input(Validity::Valid, Readiness::Synced, 0);
    i.now = at(5) + jiff::SignedDuration::from_millis(700);
    let status = desired_status(None, &i);
    assert_eq!(get(&status, "Valid").last_transition_time, Time(at(5)));
}

#[test]
fn an_invalid_spec_lists_every_field_error_with_its_path() {
    let error = config::load_str(
        "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\n\
             spec: {syncPeriod: soon, defaultLabelSelector: 'a in (b'}\n",
    )
    .unwrap_err();
    let status = desired_status(
        None,
        &input(Validity::from_error(&error), Readiness::Synced, 0),
    );
    let valid = get(&status, "Valid");
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(valid.message.contains("(2 errors)"), "{}", valid.message);
    for line in valid.message.lines().skip(1) {
        assert!(line.starts_with("spec."), "{line}");
    }
    assert!(
        valid.message.contains("\nspec.syncPeriod: "),
        "{}",
        valid.message
    );
    assert!(
        valid.message.contains("\nspec.defaultLabelSelector: "),
        "{}",
        valid.message
    );
}

#[test]
fn readiness_names_failed_informers_before_syncing_ones() {
    let mut failing = informer("Pod", Some("team-a"), false);
    failing.error = Some("forbidden".into());
    let informers = [
        informer("ConfigMap", None, true),
        informer("Secret", None, false),
        failing,
    ];
    assert_eq!(
        Readiness::of(&informers),
        Readiness::Failed {
            failed: vec!["v1 Pod in team-a: forbidden".into()]
        }
    );
    assert_eq!(
        Readiness::of(&informers[..2]),
        Readiness::Syncing {
            pending: vec!["v1 Secret in every namespace".into()]
        }
    );
    assert_eq!(Readiness::of(&informers[..1]), Readiness::Synced);
}

#[test]
fn informers_are_sorted_and_counted() {
    let mut i = input(Validity::Valid, Readiness::Synced, 0);
    i.informers = vec![
        informer("Secret", None, true),
        informer("ConfigMap", Some("b"), true),
        informer("ConfigMap", Some("a"), true),
    ];
    let status = desired_status(None, &i);
    let order: Vec<_> = status
        .informers
        .iter()
        .map(|i| (i.kind.as_str(), i.namespace.as_deref()))
        .collect();
    assert_eq!(
        order,
        [
            ("ConfigMap", Some("a")),
            ("ConfigMap", Some("b")),
            ("Secret", None)
        ]
    );
    assert_eq!(status.informer_count, Some(3));
    assert_eq!(get(&status, "Ready").message, "3 informers synced");
}

#[test]
fn the_last_reload_time_is_kept_when_the_input_has_none() {
    let mut i = input(Validity::Valid, Readiness::Synced, 0);
    i.last_reload_time = Some(Time(at(42)));
    let first = desired_status(None, &i);
    i.last_reload_time = None;
    assert_eq!(
        desired_status(Some(&first), &i).last_reload_time,
        Some(Time(at(42)))
    );
}

#[test]
fn an_overlong_message_is_cut_to_what_the_api_server_accepts() {
    let errors = vec!["spec.x: too long".repeat(5000)];
    let status = desired_status(
        None,
        &input(Validity::Invalid { errors }, Readiness::Synced, 0),
    );
    let message = &get(&status, "Valid").message;
    assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS);
    assert!(message.ends_with('…'));
}

#[test]
fn informers_are_named_with_their_selectors() {
    let mut i = informer("Pod", None, true);
    i.label_selector = Some("tier=web".into());
    i.field_selector = Some("status.phase=Running".into());
    assert_eq!(
        informer_name(&i),
        "v1 Pod in every namespace, labels tier=web, fields status.phase=Running"
    );
}
