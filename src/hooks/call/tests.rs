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
