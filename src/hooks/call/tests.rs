//! Unit tests of a hook call: the excerpts of what a hook wrote, the size limit of an exec
//! hook's answer, and the decoding of any answer (fuzzed).

use super::*;

#[test]
fn an_excerpt_is_one_short_line_without_control_characters() {
    assert_eq!(
        excerpt("Traceback:\n  line 1\r\n\tboom\u{1b}[31m"),
        "Traceback: line 1 boom [31m"
    );
    let long = "x".repeat(10_000);
    let cut = excerpt(&long);
    assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
    assert!(cut.ends_with('…'));
    let end = excerpt_end(&format!("{long} ValueError: bad"));
    assert!(
        end.starts_with('…') && end.ends_with("ValueError: bad"),
        "{end}"
    );
    assert_eq!(end.chars().count(), EXCERPT_CHARS + 1);
}

#[test]
fn a_malformed_answer_is_named_and_its_excerpt_short() {
    let long = format!(r#"{{"requeueAfterSeconds": "{}"}}"#, "x".repeat(100_000));
    let e = decode(long.as_bytes()).unwrap_err();
    assert!(matches!(e, CallError::Malformed { .. }), "{e}");
    assert!(e.to_string().len() < 400, "{}", e.to_string().len());
    let e = decode(br#"{"requeueAfterSeconds": 1e20}"#).unwrap_err();
    assert!(matches!(e, CallError::Invalid(_)), "{e}");
    let e = decode(br#"{"requeueAfterSeconds": 1e400}"#).unwrap_err();
    assert!(matches!(e, CallError::Malformed { .. }), "{e}");
}

fn request() -> Request {
    Request {
        api_version: super::super::contract::API_VERSION.to_owned(),
        controller: super::super::contract::ControllerRef {
            namespace: "ops".into(),
            name: "c".into(),
        },
        object: serde_json::json!({}),
        children: std::collections::BTreeMap::new(),
        related: Vec::new(),
        finalizing: false,
    }
}

fn sh(script: &str) -> Hook {
    Hook::Exec {
        env: Vec::new(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        timeout: Duration::from_secs(20),
    }
}

#[tokio::test]
async fn an_exec_hook_writing_past_the_limit_is_killed_with_a_named_error() {
    let policy = Arc::new(Policy::open().max_response_bytes(1024));
    // Writes forever: only the limit stops it, long before the timeout.
    let caller = Caller::new(sh("cat >/dev/null; yes '{}'"), policy, None);
    let started = Instant::now();
    let e = caller.call(&request()).await.unwrap_err();
    assert_eq!(e.to_string(), "hook response too large (over 1024 bytes)");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn an_answer_at_the_limit_is_read() {
    let policy = Arc::new(Policy::open().max_response_bytes(2));
    let caller = Caller::new(sh("cat >/dev/null; printf '{}'"), policy, None);
    assert_eq!(caller.call(&request()).await.unwrap(), Response::default());
}

#[tokio::test]
async fn a_failing_hooks_stderr_reaches_the_error_as_the_end_of_one_line() {
    let script = "cat >/dev/null; i=0; while [ $i -lt 2000 ]; do echo \"noise $i\" >&2; \
                  i=$((i+1)); done; printf 'Error:\\tbad\\n' >&2; exit 3";
    let e = call(&sh(script), &request()).await.unwrap_err();
    let CallError::Exit { stderr, .. } = &e else {
        panic!("{e}");
    };
    assert!(stderr.ends_with("Error: bad"), "{stderr}");
    assert!(stderr.chars().count() <= EXCERPT_CHARS + 1);
    assert!(!stderr.contains('\n'));
}

/// Hook answers a fuzzer would try: any JSON, under the response's own keys or others, with
/// huge and negative numbers, wrong types and long strings.
mod answers {
    use super::super::super::contract::MAX_REQUEUE_AFTER;
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
                .prop_map(Value::from),
            Just(json!(1e20)),
            Just(json!(-1)),
            Just(json!(f64::MAX)),
            Just(json!(f64::MIN_POSITIVE)),
            Just(json!(31_536_000.000_001)),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            ".{0,40}".prop_map(Value::String),
            (1usize..5_000).prop_map(|n| Value::String("x".repeat(n))),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(key(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("events".to_owned()),
            Just("children".to_owned()),
            Just("status".to_owned()),
            Just("requeueAfterSeconds".to_owned()),
            Just("finalized".to_owned()),
            Just("type".to_owned()),
            Just("reason".to_owned()),
            Just("message".to_owned()),
            Just("regarding".to_owned()),
            "[a-zA-Z]{1,12}",
        ]
    }

    /// The fate of one answer: decoded (its requeue within bounds), or a named failure whose
    /// text is short.
    fn fate(answer: &[u8]) {
        match decode(answer) {
            Ok(response) => {
                let after = response.requeue_after().expect("checked by decode");
                assert!(after.is_none_or(|d| d <= MAX_REQUEUE_AFTER));
            }
            Err(e @ (CallError::Malformed { .. } | CallError::Invalid(_))) => {
                assert!(e.to_string().chars().count() < 600, "{e}");
            }
            Err(e) => panic!("an unnamed fate: {e:?}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn any_json_answer_decodes_or_fails_by_name(value in json_value()) {
            fate(&serde_json::to_vec(&value).unwrap());
        }

        #[test]
        fn any_response_shaped_answer_decodes_or_fails_by_name(
            fields in prop::collection::btree_map(key(), json_value(), 0..6),
            requeue in number(),
        ) {
            let mut answer: serde_json::Map<String, Value> = fields.into_iter().collect();
            answer.insert("requeueAfterSeconds".to_owned(), requeue);
            fate(&serde_json::to_vec(&Value::Object(answer)).unwrap());
        }

        #[test]
        fn any_bytes_decode_or_fail_by_name(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            fate(&bytes);
        }
    }

    #[test]
    fn deep_nesting_and_huge_bodies_fail_by_name_without_overflowing_the_stack() {
        let deep = format!(
            r#"{{"status": {}1{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        fate(deep.as_bytes());
        let huge = format!(
            r#"{{"status": {{"x": "{}"}}, "requeueAfterSeconds": 1e308}}"#,
            "y".repeat(5 << 20)
        );
        fate(huge.as_bytes());
        let numbers = format!(r#"{{"requeueAfterSeconds": 1{}}}"#, "0".repeat(10_000));
        fate(numbers.as_bytes());
    }
}

/// A webhook on `127.0.0.1` answering every request with `response`; its URL.
async fn raw_webhook(response: Vec<u8>) -> (String, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 << 10];
                let _ = stream.read(&mut buffer).await;
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (format!("http://127.0.0.1:{port}/"), port)
}

/// The open policy, with loopback (where these tests' webhooks listen) named: it is refused
/// otherwise (issue 45).
fn loopback() -> Policy {
    Policy::open().allow_url("127.0.0.1".parse().unwrap())
}

fn webhook(url: &str) -> Hook {
    Hook::Webhook {
        url: url.to_owned(),
        timeout: Duration::from_secs(20),
        tls: None,
    }
}

#[tokio::test]
async fn a_webhook_body_past_the_limit_is_not_read_with_or_without_a_length() {
    let policy = Arc::new(loopback().max_response_bytes(1024));
    let mut huge =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b' ', 10 << 20));
    let (url, _) = raw_webhook(huge).await;
    let e = Caller::new(webhook(&url), Arc::clone(&policy), None)
        .call(&request())
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "hook response too large (over 1024 bytes)");
    let said = b"HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n{}".to_vec();
    let (url, _) = raw_webhook(said).await;
    let e = Caller::new(webhook(&url), policy, None)
        .call(&request())
        .await
        .unwrap_err();
    assert!(matches!(e, CallError::TooLarge { limit: 1024 }), "{e}");
}

#[tokio::test]
async fn an_error_body_reaches_the_error_as_a_short_excerpt() {
    let mut body =
        b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\nTraceback\n".to_vec();
    body.extend(std::iter::repeat_n(b'y', 100 << 10));
    let (url, _) = raw_webhook(body).await;
    let e = Caller::new(webhook(&url), Arc::new(loopback()), None)
        .call(&request())
        .await
        .unwrap_err();
    let CallError::Status { status, body, .. } = &e else {
        panic!("{e}");
    };
    assert_eq!(*status, 500);
    assert!(
        body.starts_with("Traceback yyy") && body.ends_with('…'),
        "{body}"
    );
    assert_eq!(body.chars().count(), EXCERPT_CHARS + 1);
}

#[tokio::test]
async fn a_name_resolving_to_the_api_servers_address_is_refused_at_connection() {
    let (_, port) = raw_webhook(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec()).await;
    // Loopback named by a block (not the address): the API server's refusal still holds.
    let policy = Policy::open()
        .allow_url("127.0.0.0/8".parse().unwrap())
        .api_server("127.0.0.1", port);
    let url = format!("http://localhost:{port}/");
    assert_eq!(
        policy.check_url(&url),
        Ok(()),
        "a name is checked at connection"
    );
    let e = Caller::new(webhook(&url), Arc::new(policy), None)
        .call(&request())
        .await
        .unwrap_err();
    let CallError::Refused { reason, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        reason,
        &format!(
            "webhook address 127.0.0.1:{port} (of localhost) is the API server's; refused unless \
             --hook-allow-url names it"
        )
    );
    // The same webhook, its API server elsewhere, answers.
    let elsewhere = Policy::open()
        .allow_url("127.0.0.0/8".parse().unwrap())
        .api_server("127.0.0.1", port.wrapping_add(1));
    let answer = Caller::new(webhook(&url), Arc::new(elsewhere), None)
        .call(&request())
        .await;
    assert_eq!(answer.unwrap(), Response::default());
}
