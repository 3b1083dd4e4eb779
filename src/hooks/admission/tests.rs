use std::time::Duration;

use super::*;
use crate::hooks::resource::Hook;

/// An exec hook that answers `answer` to any request (`sh`, in every image the tests run in).
fn answering(answer: &str) -> Hook {
    Hook::Exec {
        env: Vec::new(),
        command: vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("cat >/dev/null; printf '%s' '{answer}'"),
        ],
        timeout: Duration::from_secs(10),
    }
}

fn sh(script: &str) -> Hook {
    Hook::Exec {
        env: Vec::new(),
        command: vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()],
        timeout: Duration::from_secs(10),
    }
}

fn admission(name: &str, type_: AdmissionType, policy: FailurePolicy, hook: Hook) -> AdmissionHook {
    AdmissionHook {
        name: name.to_owned(),
        type_,
        operations: vec!["CREATE".to_owned(), "UPDATE".to_owned()],
        hook,
        failure_policy: policy,
        timeout: Duration::from_secs(10),
        namespace_selector: None,
        object_selector: None,
        match_conditions: Vec::new(),
    }
}

fn admitter(hook: AdmissionHook, metrics: &HookMetrics) -> Admitter {
    Admitter::new(
        ControllerKey::new("ops", "guard"),
        hook,
        Arc::new(Policy::open()),
        None,
        Some(metrics.clone()),
    )
}

fn review(operation: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "web",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web", "namespace": "default"}, "data": {"a": "1"}},
            "oldObject": null,
            "dryRun": false
        }
    }))
    .unwrap()
}

fn response(decision: &Decision) -> &Value {
    &decision.review["response"]
}

fn patch(decision: &Decision) -> json_patch::Patch {
    let text = response(decision)["patch"].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn the_hook_gets_the_reviews_request_and_its_answer_decides() {
    let metrics = HookMetrics::new();
    // The hook sees which admission hook is called and the request as the API server sent it.
    let checks = admitter(
        admission(
            "checks",
            AdmissionType::Validating,
            FailurePolicy::Fail,
            sh(r#"read -r line; case "$line" in
                *'"admission":{"name":"checks","type":"Validating"}'*'"username":"alice"'*)
                    printf '{"allowed": true, "warnings": ["looked at it"]}';;
                *) printf '{"allowed": false, "message": "unexpected request"}';;
            esac"#),
        ),
        &metrics,
    );
    let decision = checks.decide(&review("CREATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::Allowed, "{}", decision.review);
    assert_eq!(decision.review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(decision.review["kind"], "AdmissionReview");
    assert_eq!(
        response(&decision)["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(response(&decision)["allowed"], true);
    assert_eq!(response(&decision)["warnings"], json!(["looked at it"]));

    let denies = admitter(
        admission(
            "denies",
            AdmissionType::Validating,
            FailurePolicy::Fail,
            answering(r#"{"allowed": false, "message": "owner label required"}"#),
        ),
        &metrics,
    );
    let decision = denies.decide(&review("UPDATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::Denied);
    assert_eq!(response(&decision)["allowed"], false);
    assert_eq!(
        response(&decision)["status"],
        json!({"code": 403, "message": "owner label required"})
    );
    assert_eq!(
        metrics.admissions("ops/guard/denies", "UPDATE", AdmissionFate::Denied),
        1
    );
    assert_eq!(
        metrics.admissions("ops/guard/checks", "CREATE", AdmissionFate::Allowed),
        1
    );
}

#[tokio::test]
async fn a_mutating_hooks_changed_object_becomes_a_json_patch() {
    let metrics = HookMetrics::new();
    let defaults = admitter(
        admission(
            "defaults",
            AdmissionType::Mutating,
            FailurePolicy::Fail,
            answering(
                r#"{"allowed": true, "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "default", "labels": {"owner": "ops"}}, "data": {"a": "1"}}}"#,
            ),
        ),
        &metrics,
    );
    let decision = defaults.decide(&review("CREATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::Patched, "{}", decision.review);
    assert_eq!(response(&decision)["patchType"], "JSONPatch");
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "default"}, "data": {"a": "1"}});
    json_patch::patch(&mut object, &patch(&decision)).unwrap();
    assert_eq!(object["metadata"]["labels"], json!({"owner": "ops"}));

    // The same object back is no change: allowed, with no patch.
    let same = admitter(
        admission(
            "same",
            AdmissionType::Mutating,
            FailurePolicy::Fail,
            answering(
                r#"{"allowed": true, "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "default"}, "data": {"a": "1"}}}"#,
            ),
        ),
        &metrics,
    );
    let decision = same.decide(&review("CREATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::Allowed);
    assert!(response(&decision).get("patch").is_none());
}

#[tokio::test]
async fn a_mutating_hooks_own_patch_is_kept_if_it_applies() {
    let metrics = HookMetrics::new();
    let own = admitter(
        admission(
            "own",
            AdmissionType::Mutating,
            FailurePolicy::Fail,
            answering(
                r#"{"allowed": true, "patch": [{"op": "add", "path": "/data/b", "value": "2"}]}"#,
            ),
        ),
        &metrics,
    );
    let decision = own.decide(&review("CREATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::Patched);
    assert_eq!(
        serde_json::to_value(patch(&decision)).unwrap(),
        json!([{"op": "add", "path": "/data/b", "value": "2"}])
    );

    let broken = admitter(
        admission(
            "broken",
            AdmissionType::Mutating,
            FailurePolicy::Fail,
            answering(
                r#"{"allowed": true, "patch": [{"op": "replace", "path": "/spec/x", "value": 1}]}"#,
            ),
        ),
        &metrics,
    );
    let decision = broken.decide(&review("CREATE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::InvalidAnswer);
    assert_eq!(response(&decision)["allowed"], false);
    let message = response(&decision)["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("ops/guard/broken") && message.contains("does not apply"),
        "{message}"
    );
}

#[tokio::test]
async fn an_unusable_answer_is_decided_by_the_failure_policy() {
    let metrics = HookMetrics::new();
    // A validating hook may not change the object.
    let changes = r#"{"allowed": true, "patch": [{"op": "add", "path": "/data/b", "value": "2"}]}"#;
    for (policy, allowed) in [(FailurePolicy::Fail, false), (FailurePolicy::Ignore, true)] {
        let hook = admitter(
            admission(
                "strict",
                AdmissionType::Validating,
                policy,
                answering(changes),
            ),
            &metrics,
        );
        let decision = hook.decide(&review("CREATE")).await.unwrap();
        assert_eq!(decision.fate, AdmissionFate::InvalidAnswer);
        assert_eq!(response(&decision)["allowed"], allowed, "{policy:?}");
        assert!(response(&decision).get("patch").is_none());
        if allowed {
            let warning = response(&decision)["warnings"][0].as_str().unwrap();
            assert!(
                warning.contains("let in by failurePolicy Ignore"),
                "{warning}"
            );
        }
    }
    // Not JSON, an unknown field, both object and patch: each an invalid answer.
    for answer in [
        "not json",
        r#"{"allowed": true, "extra": 1}"#,
        r#"{"allowed": true, "object": {}, "patch": []}"#,
        r#"{"message": "no allowed"}"#,
    ] {
        let hook = admitter(
            admission(
                "bad",
                AdmissionType::Mutating,
                FailurePolicy::Fail,
                answering(answer),
            ),
            &metrics,
        );
        let decision = hook.decide(&review("CREATE")).await.unwrap();
        assert_eq!(decision.fate, AdmissionFate::InvalidAnswer, "{answer}");
    }
}

#[tokio::test]
async fn a_failing_hook_fails_closed_or_open_and_every_request_has_one_fate() {
    let metrics = HookMetrics::new();
    let fail = admitter(
        admission(
            "dies",
            AdmissionType::Validating,
            FailurePolicy::Fail,
            sh("exit 3"),
        ),
        &metrics,
    );
    let ignore = admitter(
        admission(
            "dies",
            AdmissionType::Validating,
            FailurePolicy::Ignore,
            sh("exit 3"),
        ),
        &metrics,
    );
    let closed = fail.decide(&review("CREATE")).await.unwrap();
    assert_eq!(closed.fate, AdmissionFate::FailedClosed);
    assert_eq!(response(&closed)["allowed"], false);
    assert_eq!(response(&closed)["status"]["code"], 500);
    let open = ignore.decide(&review("CREATE")).await.unwrap();
    assert_eq!(open.fate, AdmissionFate::FailedOpen);
    assert_eq!(response(&open)["allowed"], true);

    let seen = 2;
    let counted: u64 = AdmissionFate::ALL
        .iter()
        .map(|fate| metrics.admissions("ops/guard/dies", "CREATE", *fate))
        .sum();
    assert_eq!(counted, seen, "every request ends in exactly one fate");
}

#[tokio::test(start_paused = true)]
async fn a_late_hook_is_answered_for_before_the_api_servers_timeout() {
    let metrics = HookMetrics::new();
    let mut late = admission(
        "late",
        AdmissionType::Validating,
        FailurePolicy::Fail,
        sh("sleep 30"),
    );
    late.timeout = Duration::from_secs(2);
    assert_eq!(late.deadline(), Duration::from_millis(1500));
    let hook = admitter(late, &metrics);
    let decision = hook.decide(&review("DELETE")).await.unwrap();
    assert_eq!(decision.fate, AdmissionFate::TimedOut);
    assert_eq!(response(&decision)["allowed"], false);
    assert_eq!(
        metrics.admissions("ops/guard/late", "DELETE", AdmissionFate::TimedOut),
        1
    );
}

#[tokio::test]
async fn a_body_that_is_not_a_review_is_refused_without_a_fate() {
    let metrics = HookMetrics::new();
    let hook = admitter(
        admission(
            "any",
            AdmissionType::Validating,
            FailurePolicy::Fail,
            answering(r#"{"allowed": true}"#),
        ),
        &metrics,
    );
    for body in [
        &b"{"[..],
        br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
    ] {
        assert!(hook.decide(body).await.is_err());
    }
    let counted: u64 = AdmissionFate::ALL
        .iter()
        .map(|fate| metrics.admissions("ops/guard/any", "CREATE", *fate))
        .sum();
    assert_eq!(counted, 0);
}

#[test]
fn the_call_and_the_answer_have_the_fields_the_committed_schema_declares() {
    let schema: Value =
        serde_json::from_str(include_str!("../../../docs/hooks-v1.schema.json")).unwrap();
    let request = json!({"uid": "u"});
    let call = AdmissionCall {
        api_version: API_VERSION,
        controller: ControllerRef {
            namespace: "ops".into(),
            name: "guard".into(),
        },
        admission: AdmissionName {
            name: "require-owner",
            type_: "Validating",
        },
        request: &request,
    };
    let sent = serde_json::to_value(&call).unwrap();
    let keys = |v: &Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    let declared = &schema["$defs"]["admissionRequest"];
    let mut required: Vec<String> = serde_json::from_value(declared["required"].clone()).unwrap();
    required.sort();
    assert_eq!(keys(&sent), required);
    assert_eq!(
        keys(&sent["admission"]),
        keys(&declared["properties"]["admission"]["properties"])
    );
    // Every property the schema declares for an answer is one the manager reads.
    let answer = AdmissionAnswer {
        allowed: true,
        message: Some(String::new()),
        code: Some(403),
        object: Some(json!({})),
        patch: Some(json!([])),
        warnings: Some(Vec::new()),
    };
    assert_eq!(
        keys(&serde_json::to_value(&answer).unwrap()),
        keys(&schema["$defs"]["admissionResponse"]["properties"])
    );
    for line in ["requestLine", "responseLine"] {
        let envelope = schema["$defs"][line].to_string();
        assert!(envelope.contains("#/$defs/admission"), "{line}: {envelope}");
    }
}

/// Issue 45, item 3: an UPDATE review carries object and oldObject; the endpoint read only
/// 2 MiB (axum's default), answered 413 without a fate, and `Ignore` let the object in unchecked.
#[tokio::test]
async fn a_7_mib_review_is_decided_and_a_larger_one_is_refused_413_with_its_fate_counted() {
    use crate::serving::{DEFAULT_MAX_ADMISSION_BYTES, WebhookRouter, WebhookRoutes};
    use tower::ServiceExt as _;
    let metrics = HookMetrics::new();
    let hook = admitter(
        admission(
            "big",
            AdmissionType::Validating,
            FailurePolicy::Ignore,
            answering(r#"{"allowed": true}"#),
        ),
        &metrics,
    );
    let routes = WebhookRoutes::new();
    routes
        .set_route(
            "/admission/ops/guard/big",
            served::handler(Arc::new(hook), DEFAULT_MAX_ADMISSION_BYTES),
        )
        .unwrap();
    let app = WebhookRouter::new().with_routes(routes).into_router();
    // A review of exactly `size` bytes: its object padded.
    let sized = |size: usize| {
        let mut review: Value = serde_json::from_slice(&review("UPDATE")).unwrap();
        review["request"]["oldObject"] = review["request"]["object"].clone();
        review["request"]["object"]["data"]["pad"] = json!("");
        let bare = serde_json::to_vec(&review).unwrap().len();
        review["request"]["object"]["data"]["pad"] = json!("x".repeat(size - bare));
        let body = serde_json::to_vec(&review).unwrap();
        assert_eq!(body.len(), size);
        body
    };
    let post = |body: Vec<u8>| {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri("/admission/ops/guard/big")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        app.clone().oneshot(request)
    };
    let answer = post(sized(7 << 20)).await.unwrap();
    assert_eq!(answer.status(), 200);
    let body = axum::body::to_bytes(answer.into_body(), 1 << 20)
        .await
        .unwrap();
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(
        metrics.admissions("ops/guard/big", "UPDATE", AdmissionFate::Allowed),
        1,
        "the 7 MiB review was decided by the hook"
    );
    let refused = post(sized((7 << 20) + 1)).await.unwrap();
    assert_eq!(refused.status(), 413);
    let body = axum::body::to_bytes(refused.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("over this path's limit of 7340032 bytes")
            && text.contains("--webhook-max-admission-bytes"),
        "{text}"
    );
    assert_eq!(
        metrics.admissions("ops/guard/big", UNREAD_OPERATION, AdmissionFate::TooLarge),
        1,
        "the refusal is a counted fate"
    );
}

/// Whether process `pid` runs (exists and is not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) state ...`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Issue 45, item 2: 60 POSTs with a 1 s client timeout left 60 hook processes running after
/// every client had gone. Here N callers each give up after 50 ms: at most the limit of hook
/// processes ever run, the others are answered 429 (`busy`), every request ends in one fate,
/// and the processes end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_give_up_leave_at_most_the_limit_of_hook_processes_which_end() {
    use crate::serving::{DEFAULT_MAX_ADMISSION_BYTES, WebhookRouter, WebhookRoutes};
    use tower::ServiceExt as _;
    const CALLERS: usize = 40;
    const LIMIT: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let metrics = HookMetrics::new();
    let mut slow = admission(
        "slow",
        AdmissionType::Validating,
        FailurePolicy::Ignore,
        sh(&format!(
            "cat >/dev/null; echo $$ >>'{}'; exec sleep 30",
            pids.display()
        )),
    );
    slow.timeout = Duration::from_secs(2);
    let routes = WebhookRoutes::new();
    routes
        .set_route(
            "/admission/ops/guard/slow",
            served::handler(
                Arc::new(admitter(slow, &metrics)),
                DEFAULT_MAX_ADMISSION_BYTES,
            )
            .max_in_flight(LIMIT),
        )
        .unwrap();
    let app = WebhookRouter::new().with_routes(routes).into_router();
    let started = || -> Vec<u32> {
        std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let alive = || started().into_iter().filter(|pid| running(*pid)).count();
    let (mut most, mut busy) = (0, 0u64);
    for _ in 0..CALLERS {
        let request = axum::http::Request::builder()
            .method("POST")
            .uri("/admission/ops/guard/slow")
            .body(axum::body::Body::from(review("CREATE")))
            .unwrap();
        // The caller gives up after 50 ms (the API server's timeout, a client's curl -m).
        let answered =
            tokio::time::timeout(Duration::from_millis(50), app.clone().oneshot(request)).await;
        if let Ok(answer) = answered {
            assert_eq!(answer.unwrap().status(), 429);
            busy += 1;
        }
        most = most.max(alive());
    }
    assert!(
        most <= LIMIT,
        "{most} hook processes ran at once, over {LIMIT}"
    );
    assert!(busy > 0, "no caller was answered 429");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let counted: u64 = AdmissionFate::ALL
            .iter()
            .map(|fate| {
                metrics.admissions("ops/guard/slow", "CREATE", *fate)
                    + metrics.admissions("ops/guard/slow", UNREAD_OPERATION, *fate)
            })
            .sum();
        if alive() == 0 && counted == CALLERS as u64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} hook processes still run, {counted} of {CALLERS} requests counted",
            alive()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        metrics.admissions("ops/guard/slow", UNREAD_OPERATION, AdmissionFate::Busy),
        busy
    );
    assert!(started().len() < CALLERS, "every caller started a process");
}
