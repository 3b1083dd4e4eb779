use std::time::Duration;

use super::*;
use crate::hooks::resource::Hook;

/// An exec hook that answers `answer` to any request (`sh`, in every image the tests run in).
fn answering(answer: &str) -> Hook {
    Hook::Exec {
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
