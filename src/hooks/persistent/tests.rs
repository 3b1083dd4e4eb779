//! Unit tests of persistent exec hooks, against a Python hook written to a temporary directory:
//! one process serves many calls, answers out of order, a process that dies mid-call or never
//! answers, malformed lines; the validation of `exec.mode` and `exec.callsPerProcess`; the
//! level of standard error lines.

use super::*;
use crate::config::Origin;
use crate::hooks::contract::{API_VERSION, ControllerRef, Request, Response};
use crate::hooks::resource::validate_controller_value;

/// Answers each request line by the object's name: `die` exits (once: a marker file in the
/// directory of `sys.argv[1]` remembers), `hang` is never answered, `garbage` gets a line that
/// is not JSON, `bad` a response with an unknown field, `pair-*` are answered two at a time in
/// reverse order; `stall` (with a request waiting behind it on standard input) is answered
/// once bytes of the next request are in the pipe, after which nothing is read until a file
/// `resume` exists; `fork` starts a `sleep` that outlives it and answers its pid as `child`;
/// any other name gets `{"status": {"name": NAME, "pid": PID}}`. A line that is not one JSON
/// request (two requests torn into one line) is written to the file `torn` and ends the
/// process with 4. Each start appends the process id to `sys.argv[1]`; standard input's end
/// ends the process. Every wait is bounded (20 s).
const HOOK: &str = r#"
import array, fcntl, json, os, subprocess, sys, termios, time
here = os.path.dirname(sys.argv[1])
marker = os.path.join(here, "died")
with open(sys.argv[1], "a") as log:
    log.write(f"{os.getpid()}\n")
def answer(msg, response):
    sys.stdout.write(json.dumps({"id": msg["id"], "response": response}) + "\n")
    sys.stdout.flush()
def until(condition):
    deadline = time.monotonic() + 20
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
def waiting_input():
    count = array.array("i", [0])
    fcntl.ioctl(0, termios.FIONREAD, count)
    return count[0]
pairs = []
for line in sys.stdin:
    try:
        msg = json.loads(line)
        name = msg["request"]["object"]["metadata"]["name"]
    except Exception as e:
        with open(os.path.join(here, "torn"), "w") as torn:
            torn.write(f"{len(line)} bytes: {e}\n")
        os._exit(4)
    if name == "stall":
        open(os.path.join(here, "stalled"), "w").close()
        until(lambda: waiting_input() > 0)
        answer(msg, {"status": {"name": name, "pid": os.getpid()}})
        until(lambda: os.path.exists(os.path.join(here, "resume")))
        continue
    if name == "fork":
        child = subprocess.Popen(["sleep", "300"])
        answer(msg, {"status": {"name": name, "pid": os.getpid(), "child": child.pid}})
        continue
    sys.stderr.write(f"level=debug got {name}\n")
    if name == "die" and not os.path.exists(marker):
        open(marker, "w").close()
        sys.stderr.write("level=error dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "hang":
        continue
    elif name == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    elif name == "bad":
        answer(msg, {"bogus": 1})
    elif name.startswith("pair-"):
        pairs.append(msg)
        if len(pairs) == 2:
            for m in reversed(pairs):
                answer(m, {"status": {"name": m["request"]["object"]["metadata"]["name"]}})
            pairs = []
    else:
        answer(msg, {"status": {"name": name, "pid": os.getpid()}})
"#;

/// The Python to run hooks with (`INFORMANT_PYTHON`, else `python3`), or `None` when there is
/// none: the test then says it is skipped.
fn python() -> Option<String> {
    let python = std::env::var("INFORMANT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = std::process::Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: no {python} to run the persistent hook with (set INFORMANT_PYTHON)");
        return None;
    }
    Some(python)
}

struct Fixture {
    dir: tempfile::TempDir,
    processes: Processes,
}

impl Fixture {
    fn new(python: String, slots: u16, calls_per_process: u16, timeout: Duration) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("hook.py");
        std::fs::write(&script, HOOK).unwrap();
        let command = vec![
            python,
            script.display().to_string(),
            dir.path().join("starts").display().to_string(),
        ];
        let processes = Processes::new(
            command,
            timeout,
            slots,
            calls_per_process,
            1 << 20,
            "ops/c".into(),
        );
        Self { dir, processes }
    }

    /// The process ids, one per start, as the processes wrote them.
    fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.path().join("starts"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    }

    async fn call(&self, name: &str) -> Result<Response, CallError> {
        super::super::call::decode_value(self.processes.call(&request(name)).await?)
    }
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes (not running), and reaped soon after by tokio.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
}

fn request(name: &str) -> Request {
    Request {
        api_version: API_VERSION.to_owned(),
        controller: ControllerRef {
            namespace: "ops".into(),
            name: "c".into(),
        },
        object: serde_json::json!({"metadata": {"namespace": "ops", "name": name}}),
        children: std::collections::BTreeMap::new(),
        related: Vec::new(),
        finalizing: false,
    }
}

fn status_name(response: &Response) -> String {
    response.status.as_ref().unwrap()["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

const LONG: Duration = Duration::from_secs(20);

#[tokio::test]
async fn one_process_serves_many_calls() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 1, LONG);
    for i in 0..50 {
        let name = format!("cm-{i}");
        let response = hook.call(&name).await.unwrap();
        assert_eq!(status_name(&response), name);
    }
    assert_eq!(hook.processes.starts(), 1);
    assert_eq!(hook.pids().len(), 1);
    hook.processes.stop().await;
}

#[tokio::test]
async fn answers_out_of_order_reach_their_calls() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 2, LONG);
    for round in 0..5 {
        let (a, b) = (format!("pair-{round}-a"), format!("pair-{round}-b"));
        // The hook answers b before a: each call still gets its own answer.
        let (ra, rb) = tokio::join!(hook.call(&a), hook.call(&b));
        assert_eq!(status_name(&ra.unwrap()), a);
        assert_eq!(status_name(&rb.unwrap()), b);
    }
    assert_eq!(hook.processes.starts(), 1);
    hook.processes.stop().await;
}

#[tokio::test]
async fn a_process_that_dies_mid_call_fails_it_with_a_named_error_and_is_restarted() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 1, LONG);
    hook.call("before").await.unwrap();
    let e = hook.call("die").await.unwrap_err();
    let CallError::Exited { status, stderr, .. } = &e else {
        panic!("not Exited: {e}");
    };
    assert!(status.contains('3'), "{e}");
    assert!(stderr.contains("dying on purpose"), "{e}");
    // The retry (what the controller's backoff does) reaches a new process, which answers.
    let response = hook.call("die").await.unwrap();
    assert_eq!(status_name(&response), "die");
    assert_eq!(hook.processes.starts(), 2);
    let pids = hook.pids();
    assert_eq!(pids.len(), 2);
    assert!(!alive(pids[0]), "the dead process is reaped");
    hook.processes.stop().await;
}

#[tokio::test]
async fn a_process_that_never_answers_times_out_and_is_killed_and_restarted() {
    let Some(python) = python() else { return };
    let timeout = Duration::from_millis(500);
    let hook = Fixture::new(python, 1, 1, timeout);
    // The first start of Python may be slow: warm up with a real call under a long wait.
    let warm = tokio::time::timeout(LONG, async {
        loop {
            if hook.call("warm").await.is_ok() {
                return;
            }
        }
    });
    warm.await.unwrap();
    let starts = hook.processes.starts();
    let e = hook.call("hang").await.unwrap_err();
    assert!(matches!(e, CallError::Timeout(t) if t == timeout), "{e}");
    let first = *hook.pids().last().unwrap();
    // The silent process is killed, and the next call runs on a new one.
    let killed = tokio::time::timeout(LONG, async {
        while alive(first) {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    killed.await.expect("the silent process is killed");
    let response = tokio::time::timeout(LONG, async {
        loop {
            if let Ok(r) = hook.call("after").await {
                return r;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(status_name(&response), "after");
    assert!(hook.processes.starts() > starts);
    hook.processes.stop().await;
}

#[tokio::test]
async fn a_malformed_line_fails_its_call_with_a_named_error_and_nothing_else() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 2, LONG);
    hook.call("first").await.unwrap();
    // A line that is not JSON, with one call in flight: that call fails, by name.
    let e = hook.call("garbage").await.unwrap_err();
    assert!(matches!(e, CallError::Envelope { .. }), "{e}");
    assert!(e.to_string().contains("this is not json"), "{e}");
    // A response with an unknown field fails its own call while another call on the same
    // process is answered.
    let (bad, good) = tokio::join!(hook.call("bad"), hook.call("good"));
    let bad = bad.unwrap_err();
    assert!(matches!(bad, CallError::Malformed { .. }), "{bad}");
    assert_eq!(status_name(&good.unwrap()), "good");
    assert_eq!(hook.processes.starts(), 1, "the process is kept");
    hook.processes.stop().await;
}

#[tokio::test]
async fn stopped_processes_are_gone() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 3, 1, LONG);
    let (a, b, c) = tokio::join!(hook.call("a"), hook.call("b"), hook.call("c"));
    let pids: std::collections::BTreeSet<_> = [a, b, c]
        .into_iter()
        .map(|r| r.unwrap().status.unwrap()["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "concurrency 3 keeps three processes");
    assert_eq!(hook.processes.starts(), 3);
    hook.processes.stop().await;
    for pid in hook.pids() {
        assert!(!alive(pid), "process {pid} outlived stop");
    }
    let e = hook.call("late").await.unwrap_err();
    assert!(matches!(e, CallError::Exited { .. }), "{e}");
}

fn errors(yaml_exec: &str) -> Vec<String> {
    let yaml = format!(
        "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: c, namespace: ops}}
spec:
  for: {{apiVersion: v1, kind: ConfigMap}}
  hook: {{exec: {yaml_exec}}}
"
    );
    let value = crate::yaml::from_str(&yaml).unwrap();
    match validate_controller_value(value, &Origin::Text, None) {
        Ok(v) => panic!("valid: {:?}", v.settings.hook),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn exec_mode_and_calls_per_process_are_validated_with_every_error_at_once() {
    let e = errors("{command: [], mode: forever, timeout: 0s}");
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(
        e.iter()
            .any(|e| e.starts_with("spec.hook.exec.mode: unknown mode \"forever\"")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|e| e.starts_with("spec.hook.exec.timeout")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|e| e.starts_with("spec.hook.exec.command")),
        "{e:#?}"
    );
    let e = errors("{command: [/bin/hook], callsPerProcess: 2}");
    assert_eq!(
        e,
        [
            "spec.hook.exec.callsPerProcess: only with mode: persistent (a process per call \
          answers one call); remove it or set mode: persistent"
        ]
    );
    let e = errors("{command: [/bin/hook], mode: persistent, callsPerProcess: 0}");
    assert!(
        e.len() == 1 && e[0].starts_with("spec.hook.exec.callsPerProcess: must be at least 1"),
        "{e:#?}"
    );
}

#[test]
fn persistent_mode_becomes_a_persistent_hook() {
    let yaml = "apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: c, namespace: ops}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  hook: {exec: {command: [/bin/hook], mode: persistent, callsPerProcess: 4, timeout: 2s}}
  concurrency: 3
";
    let v = validate_controller_value(crate::yaml::from_str(yaml).unwrap(), &Origin::Text, None)
        .unwrap();
    assert_eq!(
        v.settings.hook,
        Hook::Persistent {
            env: Vec::new(),
            command: vec!["/bin/hook".into()],
            timeout: Duration::from_secs(2),
            calls_per_process: 4,
        }
    );
    let per_call = yaml.replace(", mode: persistent, callsPerProcess: 4", ", mode: perCall");
    let v = validate_controller_value(
        crate::yaml::from_str(&per_call).unwrap(),
        &Origin::Text,
        None,
    )
    .unwrap();
    assert!(matches!(v.settings.hook, Hook::Exec { .. }));
}

#[test]
fn a_stderr_line_is_logged_at_the_level_it_states() {
    use tracing::Level;
    assert_eq!(
        stderr_level("level=warn disk low"),
        (Level::WARN, "disk low")
    );
    assert_eq!(stderr_level("level=warning x"), (Level::WARN, "x"));
    assert_eq!(stderr_level("level=ERROR boom"), (Level::ERROR, "boom"));
    assert_eq!(stderr_level("level=debug"), (Level::DEBUG, ""));
    assert_eq!(
        stderr_level("level=loud shout"),
        (Level::INFO, "level=loud shout")
    );
    assert_eq!(stderr_level("plain line"), (Level::INFO, "plain line"));
}

#[test]
fn a_request_line_is_one_line_with_the_schemas_envelope() {
    let schema: Value =
        serde_json::from_str(include_str!("../../../docs/hooks-v1.schema.json")).unwrap();
    let mut req = request("a\nb");
    req.object["data"] = serde_json::json!({"multi": "line\none\ntwo"});
    let line = request_line(42, &req).unwrap();
    assert!(!line[..line.len() - 1].contains(&b'\n'), "one line");
    assert!(line.ends_with(b"\n"));
    let value: Value = serde_json::from_slice(&line).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(
        serde_json::json!(keys),
        schema["$defs"]["requestLine"]["required"],
        "the schema's requestLine lists what is written"
    );
    assert_eq!(value["id"], 42);
    assert_eq!(
        schema["$defs"]["responseLine"]["required"],
        serde_json::json!(["id", "response"])
    );
    let Value::Object(envelope) =
        serde_json::json!({"id": 42, "response": {"requeueAfterSeconds": 5}})
    else {
        panic!("an object")
    };
    let response: Response = super::super::call::decode_value(decode(envelope).unwrap()).unwrap();
    assert_eq!(response.requeue_after_seconds, Some(5.0));
}

/// Waits (polling, at most [`LONG`]) until `condition` holds; panics with `what` otherwise.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + LONG;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {LONG:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn pid_of(response: &Response) -> u32 {
    let pid = response.status.as_ref().unwrap()["pid"].as_u64().unwrap();
    u32::try_from(pid).unwrap()
}

// Issue 45, item 5: an admission review drops its call at its deadline (timeoutSeconds less
// half a second), before the hook's own timeout; the hung process must not live on.
#[tokio::test]
async fn a_hung_process_is_killed_when_its_caller_stops_waiting_and_its_other_calls_fail_by_name() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 2, LONG);
    let first = pid_of(&hook.call("warm").await.unwrap());
    // Two calls on the one process, neither answered: the first one's caller gives up at its
    // own deadline, far before the hook's timeout.
    let (cut, other) = tokio::join!(
        tokio::time::timeout(Duration::from_millis(300), hook.call("hang")),
        hook.call("hang"),
    );
    assert!(cut.is_err(), "the caller's deadline passed: {cut:?}");
    let e = other.unwrap_err();
    let CallError::Exited { status, .. } = &e else {
        panic!("the other call fails as Exited, not {e}");
    };
    assert!(status.contains("caller stopped waiting"), "{e}");
    until("the hung process is killed", || !alive(first)).await;
    let after = hook.call("after").await.unwrap();
    assert_eq!(status_name(&after), "after");
    assert_ne!(pid_of(&after), first, "served by a new process");
    assert_eq!(hook.processes.starts(), 2);
    hook.processes.stop().await;
}

// Issue 45, item 6: a 1.5 MB request whose call is cut while its line is half written must
// not leave half a line that the next request completes.
#[tokio::test]
async fn a_request_cut_at_its_deadline_leaves_no_half_line_for_the_next() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 2, LONG);
    let dir = hook.dir.path().to_owned();
    let pid = pid_of(&hook.call("warm").await.unwrap());
    let stall = hook.call("stall");
    tokio::pin!(stall);
    let stalled = until("the hook stalls", || dir.join("stalled").exists());
    tokio::select! {
        r = &mut stall => panic!("stall answered before the big request: {r:?}"),
        () = stalled => {}
    }
    // The hook reads nothing more: the big line fills the pipe and its write waits.
    let mut big = request("big");
    big.object["data"] = serde_json::json!({"padding": "x".repeat(1_500_000)});
    // Boxed, so that dropping it below cancels the call (a pinned borrow would not).
    let mut big = Box::pin(hook.processes.call(&big));
    // The hook answers `stall` once bytes of the big line are in its pipe; the big call is cut
    // (its caller's deadline) then, with its line half written.
    let stalled = tokio::select! {
        r = &mut stall => r.unwrap(),
        r = &mut big => panic!("the big request answered while the hook reads nothing: {r:?}"),
    };
    assert_eq!(pid_of(&stalled), pid);
    drop(big);
    std::fs::write(dir.join("resume"), "").unwrap();
    let next = hook.call("next").await.unwrap();
    assert_eq!(status_name(&next), "next");
    assert_eq!(
        pid_of(&next),
        pid,
        "the same process answers, its input whole"
    );
    assert!(
        !dir.join("torn").exists(),
        "the hook read a torn line: {}",
        std::fs::read_to_string(dir.join("torn")).unwrap_or_default()
    );
    hook.processes.stop().await;
}

// Issue 45, item 13: a call that took its slot before the stop and starts its process while
// the stop goes over the slots; the process was left to no one and the stop waited for it
// forever.
#[tokio::test]
async fn a_process_started_while_the_set_stops_is_killed_and_the_stop_ends() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 2, 1, LONG);
    // The stop waits for the second slot while the first one, already gone over, starts.
    let second = hook.processes.slots[1].process.lock().await;
    let stop = hook.processes.stop();
    tokio::pin!(stop);
    tokio::select! {
        () = &mut stop => panic!("the stop ended with a slot held"),
        () = tokio::task::yield_now() => {}
    }
    let started = hook.processes.running(&hook.processes.slots[0]).await;
    drop(second);
    tokio::time::timeout(LONG, stop)
        .await
        .expect("the stop ends");
    if started.is_ok() {
        until("a process started during the stop is killed", || {
            hook.pids().iter().all(|pid| !alive(*pid))
        })
        .await;
    }
    for pid in hook.pids() {
        assert!(!alive(pid), "process {pid} outlived the stop");
    }
}

// Issue 45, item 7: a persistent hook's own children die with it at the stop.
#[tokio::test]
async fn what_a_process_started_is_killed_with_it_at_the_stop() {
    let Some(python) = python() else { return };
    let hook = Fixture::new(python, 1, 1, LONG);
    let response = hook.call("fork").await.unwrap();
    let child = response.status.as_ref().unwrap()["child"].as_u64().unwrap();
    let child = u32::try_from(child).unwrap();
    assert!(alive(child));
    hook.processes.stop().await;
    until("the hook's child is killed", || !alive(child)).await;
}

// Issue 45, item 13: a hook writing standard error at a high rate does not flood the log.
#[test]
fn stderr_lines_past_the_budget_are_counted_not_logged() {
    let start = std::time::Instant::now();
    let mut budget = LogBudget::new(start);
    let logged = (0..10_000).filter(|_| budget.take(start).is_some()).count();
    assert_eq!(
        logged, STDERR_BURST as usize,
        "a burst logs at most the burst"
    );
    // One second later, the refill: the first line logged says how many were skipped.
    let later = start + Duration::from_secs(1);
    assert_eq!(budget.take(later), Some(10_000 - u64::from(STDERR_BURST)));
    let more = (0..1_000).filter(|_| budget.take(later).is_some()).count();
    assert_eq!(more + 1, STDERR_PER_SECOND as usize);
    assert_eq!(budget.skipped(), 1_000 - more as u64);
    // Idle, the budget fills up to the burst and no further.
    let idle = later + Duration::from_hours(1);
    let refilled = (0..10_000).filter(|_| budget.take(idle).is_some()).count();
    assert_eq!(refilled, STDERR_BURST as usize);
}
