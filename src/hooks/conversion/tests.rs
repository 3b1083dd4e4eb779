use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::hooks::resource::Hook;

const GROUP: &str = "conv.test.informant.dev";

fn widget(version: &str, name: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Widget",
           "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"size": 1}})
}

fn answer(objects: Vec<Value>) -> ConversionAnswer {
    ConversionAnswer {
        objects: Some(objects),
        failed: None,
    }
}

#[test]
fn a_converted_list_is_taken_when_each_object_is_at_the_version_with_its_metadata() {
    let sent = vec![widget("v1alpha1", "a"), widget("v1alpha1", "b")];
    let mut back = vec![widget("v1", "a"), widget("v1", "b")];
    back[1]["metadata"]["labels"] = json!({"converted": "yes"});
    back[1]["metadata"]["annotations"] = json!({"from": "v1alpha1"});
    let to = format!("{GROUP}/v1");
    assert_eq!(checked_answer(&sent, answer(back.clone()), &to), Ok(back));
}

#[test]
fn a_converted_list_is_refused_naming_the_object_and_why() {
    let sent = vec![widget("v1alpha1", "a"), widget("v1alpha1", "b")];
    let to = format!("{GROUP}/v1");
    let invalid = |back: Vec<Value>| checked_answer(&sent, answer(back), &to).unwrap_err();

    let (fate, message) = invalid(vec![widget("v1", "a")]);
    assert_eq!(fate, ConversionFate::InvalidAnswer);
    assert!(
        message.contains("answered 1 objects for the 2 sent"),
        "{message}"
    );

    let (_, message) = invalid(vec![widget("v1", "a"), widget("v1alpha1", "b")]);
    assert!(
        message.starts_with("default/b: converted to apiVersion"),
        "{message}"
    );

    let mut renamed = widget("v1", "b");
    renamed["metadata"]["uid"] = json!("other");
    let (_, message) = invalid(vec![widget("v1", "a"), renamed]);
    assert!(
        message.starts_with("default/b: metadata.uid changed"),
        "{message}"
    );

    let mut kind = widget("v1", "a");
    kind["kind"] = json!("Gadget");
    let (_, message) = invalid(vec![kind, widget("v1", "b")]);
    assert!(message.starts_with("default/a: kind changed"), "{message}");
}

#[test]
fn a_failed_answer_names_an_object_sent_or_is_invalid() {
    let sent = vec![widget("v1alpha1", "a"), widget("v1alpha1", "b")];
    let to = format!("{GROUP}/v1");
    let failed = |namespace: Option<&str>, name: &str| ConversionAnswer {
        objects: None,
        failed: Some(ConversionFailure {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            message: "size is negative".to_owned(),
        }),
    };
    assert_eq!(
        checked_answer(&sent, failed(Some("default"), "b"), &to),
        Err((
            ConversionFate::Failed,
            "cannot convert default/b: size is negative".to_owned()
        ))
    );
    let (fate, message) = checked_answer(&sent, failed(None, "b"), &to).unwrap_err();
    assert_eq!(fate, ConversionFate::InvalidAnswer, "{message}");
    let (fate, _) = checked_answer(&sent, ConversionAnswer::default(), &to).unwrap_err();
    assert_eq!(fate, ConversionFate::InvalidAnswer);
    let mut both = failed(Some("default"), "a");
    both.objects = Some(vec![]);
    let (fate, _) = checked_answer(&sent, both, &to).unwrap_err();
    assert_eq!(fate, ConversionFate::InvalidAnswer);
}

/// A hook that logs each step's `from to` and answers the objects at `to` (with `sed`).
const STEP_HOOK: &str = r##"read -r line
from=$(printf '%s' "$line" | sed 's/.*"from":"\([^"]*\)".*/\1/')
to=$(printf '%s' "$line" | sed 's/.*"to":"\([^"]*\)".*/\1/')
echo "$from $to" >>"$0.steps"
objects=$(printf '%s' "$line" | sed 's/.*"objects":\(\[.*\]\)}$/\1/')
printf '{"objects": %s}' "$(printf '%s' "$objects" | sed "s#\"apiVersion\":\"$from\"#\"apiVersion\":\"$to\"#g")"
"##;

fn converter(dir: &std::path::Path, hub: Option<&str>) -> (Converter, std::path::PathBuf) {
    let script = dir.join("hook.sh");
    std::fs::write(&script, STEP_HOOK).unwrap();
    let hook = ConversionHook {
        versions: vec!["v1alpha1".into(), "v1beta1".into(), "v1".into()],
        hub: hub.map(str::to_owned),
        hook: Hook::Exec {
            env: Vec::new(),
            command: vec!["sh".into(), script.display().to_string()],
            timeout: Duration::from_secs(10),
        },
    };
    let metrics = HookMetrics::new();
    let converter = Converter::new(
        ControllerKey::new("default", "widgets"),
        GROUP,
        hook,
        Arc::new(Policy::open()),
        None,
        Some(metrics),
    );
    (converter, dir.join("hook.sh.steps"))
}

fn review(objects: &[Value], to: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u1", "desiredAPIVersion": format!("{GROUP}/{to}"), "objects": objects},
    }))
    .unwrap()
}

#[tokio::test]
async fn spoke_to_spoke_goes_through_the_hub_one_call_per_step_for_the_whole_list() {
    let dir = tempfile::tempdir().unwrap();
    let (converter, steps) = converter(dir.path(), Some("v1"));
    let objects = [
        widget("v1alpha1", "a"),
        widget("v1beta1", "b"),
        widget("v1alpha1", "c"),
    ];
    let done = converter
        .convert(&review(&objects, "v1beta1"))
        .await
        .unwrap();
    assert_eq!(done.fate, ConversionFate::Converted, "{}", done.review);
    let response = &done.review["response"];
    assert_eq!(response["uid"], "u1");
    assert_eq!(response["result"]["status"], "Success");
    let names: Vec<(&str, &str)> = response["convertedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap(),
                o["apiVersion"].as_str().unwrap(),
            )
        })
        .collect();
    let beta = format!("{GROUP}/v1beta1");
    assert_eq!(
        names,
        [
            ("a", beta.as_str()),
            ("b", beta.as_str()),
            ("c", beta.as_str())
        ],
        "in the order sent"
    );
    // a and c together, through the hub; b is already there.
    assert_eq!(
        std::fs::read_to_string(&steps).unwrap(),
        format!("{GROUP}/v1alpha1 {GROUP}/v1\n{GROUP}/v1 {GROUP}/v1beta1\n")
    );
    assert_eq!(
        converter
            .metrics
            .as_ref()
            .unwrap()
            .conversions("default/widgets", ConversionFate::Converted),
        1
    );
}

#[tokio::test]
async fn pairwise_converts_in_one_call_and_an_unknown_version_fails_the_review() {
    let dir = tempfile::tempdir().unwrap();
    let (converter, steps) = converter(dir.path(), None);
    let done = converter
        .convert(&review(&[widget("v1alpha1", "a")], "v1beta1"))
        .await
        .unwrap();
    assert_eq!(done.fate, ConversionFate::Converted, "{}", done.review);
    assert_eq!(std::fs::read_to_string(&steps).unwrap().lines().count(), 1);

    let done = converter
        .convert(&review(&[widget("v2", "z")], "v1"))
        .await
        .unwrap();
    assert_eq!(done.fate, ConversionFate::Failed);
    assert_eq!(done.review["response"]["result"]["status"], "Failure");
    let message = done.review["response"]["result"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("cannot convert default/z:"),
        "{message}"
    );
    assert!(converter.convert(b"{}").await.is_err(), "not a review");
}

#[test]
fn the_call_and_the_answer_have_the_fields_the_committed_schema_declares() {
    let schema: Value =
        serde_json::from_str(include_str!("../../../docs/hooks-v1.schema.json")).unwrap();
    let objects = [widget("v1alpha1", "a")];
    let call = ConversionCall {
        api_version: crate::hooks::contract::API_VERSION,
        controller: crate::hooks::contract::ControllerRef {
            namespace: "ops".into(),
            name: "widgets".into(),
        },
        conversion: ConversionStep {
            from: "a/v1alpha1",
            to: "a/v1",
        },
        objects: &objects,
    };
    let sent = serde_json::to_value(&call).unwrap();
    let keys = |v: &Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    let declared = &schema["$defs"]["conversionRequest"];
    let mut required: Vec<String> = serde_json::from_value(declared["required"].clone()).unwrap();
    required.sort();
    assert_eq!(keys(&sent), required);
    assert_eq!(
        keys(&sent["conversion"]),
        keys(&declared["properties"]["conversion"]["properties"])
    );
    let answer = ConversionAnswer {
        objects: Some(Vec::new()),
        failed: Some(ConversionFailure {
            namespace: Some("ops".into()),
            name: "a".into(),
            message: "no".into(),
        }),
    };
    let answered = serde_json::to_value(&answer).unwrap();
    let declared = &schema["$defs"]["conversionResponse"]["properties"];
    assert_eq!(keys(&answered), keys(declared));
    assert_eq!(
        keys(&answered["failed"]),
        keys(&declared["failed"]["properties"])
    );
    for line in ["requestLine", "responseLine"] {
        let envelope = schema["$defs"][line].to_string();
        assert!(
            envelope.contains("#/$defs/conversion"),
            "{line}: {envelope}"
        );
    }
}

#[tokio::test]
async fn a_hook_past_its_timeout_times_the_review_out_and_a_bad_answer_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let make = |script: &str, timeout: Duration| {
        let path = dir.path().join(format!("{}.sh", timeout.as_millis()));
        std::fs::write(&path, script).unwrap();
        Converter::new(
            ControllerKey::new("default", "widgets"),
            GROUP,
            ConversionHook {
                versions: vec!["v1alpha1".into(), "v1".into()],
                hub: None,
                hook: Hook::Exec {
                    env: Vec::new(),
                    command: vec!["sh".into(), path.display().to_string()],
                    timeout,
                },
            },
            Arc::new(Policy::open()),
            None,
            Some(HookMetrics::new()),
        )
    };
    let objects = [widget("v1alpha1", "a")];
    let late = make("cat >/dev/null; exec sleep 5\n", Duration::from_millis(200));
    let done = late.convert(&review(&objects, "v1")).await.unwrap();
    assert_eq!(done.fate, ConversionFate::TimedOut, "{}", done.review);
    assert_eq!(done.review["response"]["result"]["status"], "Failure");
    let garbage = make(
        "cat >/dev/null; printf '{\"objects\": [], \"extra\": 1}'\n",
        Duration::from_secs(10),
    );
    let done = garbage.convert(&review(&objects, "v1")).await.unwrap();
    assert_eq!(done.fate, ConversionFate::InvalidAnswer, "{}", done.review);
    let message = done.review["response"]["result"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("informant conversion hook default/widgets (invalid_answer):"),
        "{message}"
    );
    for (converter, fate) in [
        (&late, ConversionFate::TimedOut),
        (&garbage, ConversionFate::InvalidAnswer),
    ] {
        let metrics = converter.metrics.as_ref().unwrap();
        let counted: Vec<(ConversionFate, u64)> = ConversionFate::ALL
            .iter()
            .map(|f| (*f, metrics.conversions("default/widgets", *f)))
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(counted, [(fate, 1)], "one fate per review");
    }
}
