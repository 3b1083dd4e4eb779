//! What a bad selector is told: over HTTP the embedded API server answers a label selector
//! apimachinery refuses with apimachinery's message, as kube-apiserver does: its grammar's
//! (`found 'a' expected: '('`) and its field errors for a bad key or value
//! (`values[0][x]: Invalid value: "x@": a valid label must be ...`); a `CacheConfig` field selector with an empty field name (`==x`), which
//! no API server serves, is refused by `informant validate` with kube-apiserver's words.

use crate::support;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use informant::apiserver::{Config, Server};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn list(label_selector: &str) -> (StatusCode, Value) {
    let router = Server::bind(Config {
        seeds: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        ],
        ..Config::default()
    })
    .await
    .unwrap()
    .router();
    let uri = format!(
        "/api/v1/namespaces/default/configmaps?labelSelector={}",
        percent_encoding::utf8_percent_encode(label_selector, percent_encoding::NON_ALPHANUMERIC)
    );
    let resp = router
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_label_selector_the_grammar_refuses_gets_apimachinerys_message() {
    for (selector, message) in [
        (
            "x in a",
            "unable to parse requirement: found 'a' expected: '('",
        ),
        ("app=web,,", "found ',', expected: identifier after ','"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        (
            "x (",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
    ] {
        let (code, body) = list(selector).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{selector:?}: {body}");
        assert_eq!(body["reason"], "BadRequest");
        assert_eq!(body["message"], message, "{selector:?}");
    }
}

#[tokio::test]
async fn a_bad_key_or_value_gets_apimachinerys_field_error() {
    for (selector, message) in [
        (
            "x=x@",
            r#"unable to parse requirement: values[0][x]: Invalid value: "x@": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
        ),
        (
            "a@b=c",
            r#"unable to parse requirement: <nil>: Invalid value: "a@b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
        ),
        (
            "tier>web",
            r#"unable to parse requirement: values[0]: Invalid value: "web": for 'Gt', 'Lt' operators, the value must be an integer"#,
        ),
    ] {
        let (code, body) = list(selector).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{selector:?}: {body}");
        assert_eq!(body["reason"], "BadRequest");
        assert_eq!(body["message"], message, "{selector:?}");
    }
}

#[test]
fn validate_refuses_a_field_selector_with_an_empty_field_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cacheconfig.yaml");
    std::fs::write(
        &path,
        support::cache_config("  defaultFieldSelector: '==x'\n"),
    )
    .unwrap();
    let out = support::informant(&["validate", "-c", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains(
            r#"spec.defaultFieldSelector: invalid field selector term "==x" at position 0: "" is not a known field selector: only "metadata.name", "metadata.namespace"; "#
        ),
        "{stderr}"
    );
}
