//! The binary with a multi-document config file of one `CacheConfig` and `Controller`s:
//! `explain` shows which cache serves each controller's kinds, `validate` accepts the file.

use crate::support;

use support::informant;

#[test]
fn explain_shows_which_cache_serves_each_controllers_kinds() {
    let out = informant(&[
        "explain",
        "-c",
        "examples/hooks/controllers.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let controllers = doc["controllers"].as_array().unwrap();
    let names: Vec<&str> = controllers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default/cronjob-watch",
            "default/configmap-to-secret",
            "default/count-keys",
            "default/configmap-census"
        ]
    );
    assert_eq!(controllers[0]["kinds"][1]["kind"], "batch/v1/Job");
    assert!(controllers[0]["kinds"][1]["servedBy"].is_array());
    // A scheduled controller shows its schedule and its next tick.
    let schedule = &controllers[3]["schedule"];
    assert_eq!(schedule["schedule"], "0 2 * * *");
    assert_eq!(schedule["timeZone"], "Europe/Paris");
    assert_eq!(schedule["mode"], "batch");
    let next: jiff::Timestamp = schedule["nextTick"].as_str().unwrap().parse().unwrap();
    let local = next.to_zoned(jiff::tz::TimeZone::get("Europe/Paris").unwrap());
    assert_eq!((local.hour(), local.minute()), (2, 0), "{next}");
    assert!(next > jiff::Timestamp::now());
    assert!(controllers[0].get("schedule").is_none());

    let out = informant(&["explain", "-c", "examples/hooks/controllers.yaml"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\ncontroller default/configmap-census:\n  schedule: 0 2 * * * (Europe/Paris, batch): next tick "),
        "{text}"
    );
}

#[test]
fn validate_accepts_a_multi_document_file() {
    let out = informant(&["validate", "-c", "examples/hooks/controllers.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_hooks_demo_runs_the_cronjob_story_with_the_python_hook() {
    // A second apart: the hook compares completion times, which have a resolution of a second.
    let out = informant(&["demo", "--hooks", "--runs", "3", "--every", "1s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("the Python exec hook") && stdout.contains("cronjob.py"),
        "{stdout}"
    );
    // SawCompletedJob was written, and only the hook records it: the Rust sample controller
    // (which also records SuccessfulDelete) did not run.
    // Every event of a reason, in every fate column (created, patched, spam_filtered; before
    // and after the edit).
    let recorded = |reason: &str| -> u64 {
        stdout
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("{reason} ")))
            .flat_map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .map(|n| n.parse::<u64>().unwrap())
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    let written: u64 = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("SawCompletedJob "))
        .map(|l| {
            // Delivered: created or patched, before (1, 2) and after (4, 5) the edit.
            let columns: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|n| n.parse().unwrap())
                .collect();
            columns[0] + columns[1] + columns[3] + columns[4]
        })
        .sum();
    assert!(written > 0, "no SawCompletedJob written:\n{stdout}");
    // One SawCompletedJob per completed Job at most (a Job is created before it completes):
    // the hook is never asked about a CronJob the cache holds from before the manager's own
    // status write, whose stale lastSuccessfulTime would make it report a Job twice.
    assert!(
        recorded("SawCompletedJob") <= recorded("SuccessfulCreate"),
        "a completed Job was reported twice:\n{stdout}"
    );
    assert!(!stdout.contains("SuccessfulDelete"), "{stdout}");
    let calls: u64 = stdout
        .split("The Python hook answered ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no hook call count in:\n{stdout}"))
        .parse()
        .unwrap();
    assert!(calls > 0, "{stdout}");
    assert!(stdout.contains(" calls (0 failed)"), "{stdout}");
}

/// Writes `text` to a file of its own and returns its path.
fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("informant-hooks-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const STRICT_CACHE: &str = "\
apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: strict, namespace: ops}
spec:
  readerFailOnMissingInformer: true
  byObject:
    - {apiVersion: batch/v1, kind: CronJob}
";

#[test]
fn validate_reports_every_controllers_errors_with_their_paths_and_exits_64() {
    let path = config_file(
        "invalid-controllers.yaml",
        &format!(
            "{STRICT_CACHE}---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: cronjob-watch, namespace: ops}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  owns: [{{apiVersion: batch/v1, kind: Job}}]
  hook: {{exec: {{command: []}}}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: fine, namespace: ops}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{webhook: {{url: http://hook:8080/sync}}}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {{name: typo, namespace: ops}}
spec:
  for: {{apiVersion: batch/v1, kind: CronJob}}
  hook: {{exec: {{command: [x]}}}}
  concurency: 2
"
        ),
    );
    let out = informant(&["validate", "-c", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(out.stdout.is_empty());
    let file = path.display();
    assert!(
        stderr.starts_with(&format!(
            "informant validate: {file}: invalid controller ops/cronjob-watch (2 errors):\n  \
             controllers[cronjob-watch].spec.hook.exec.command: required; "
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "\n  controllers[cronjob-watch].spec.owns[0]: batch/v1 Job is not cached: the \
             active CacheConfig sets readerFailOnMissingInformer"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "\n{file}: invalid controller ops/typo (1 error):\n  controllers[typo].spec"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("concurency"), "{stderr}");
    assert!(!stderr.contains("ops/fine"), "{stderr}");
}

#[test]
fn validate_reports_an_invalid_cacheconfig_and_its_controllers_at_once() {
    let path = config_file(
        "invalid-both.yaml",
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: bad, namespace: ops}
spec: {defaultNamespaces: 3}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: no-hook, namespace: ops}
spec:
  for: {apiVersion: batch/v1, kind: CronJob}
  hook: {}
",
    );
    let out = informant(&["validate", "-c", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains(": invalid cacheconfig ("), "{stderr}");
    assert!(
        stderr.contains("\n  controllers[no-hook].spec.hook: required; "),
        "{stderr}"
    );
}

#[test]
fn validate_lists_the_valid_controllers_of_a_valid_file() {
    let out = informant(&["validate", "-c", "examples/hooks/controllers.yaml"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "controllers:\n  default/cronjob-watch: for batch/v1 CronJob, owns 1, watches 0; \
             exec python3 examples/hooks/cronjob.py\n"
        ),
        "{stdout}"
    );
}

/// `explain` lists a controller's admission hooks and says they are not served yet.
#[test]
fn explain_shows_a_controllers_admission_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guarded.yaml");
    std::fs::write(
        &path,
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec: {}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: guarded, namespace: default}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  hook: {exec: {command: [sh, hook.sh]}}
  admission:
  - {name: require-owner, type: Validating}
  - {name: defaults, type: Mutating, operations: ['*'], failurePolicy: Ignore, timeoutSeconds: 3}
",
    )
    .unwrap();
    let file = path.to_str().unwrap();
    let out = informant(&["explain", "-c", file]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "  admission require-owner: Validating on CREATE,UPDATE, failurePolicy Fail, \
             timeoutSeconds 10: served at /admission/default/guarded/require-owner by a manager \
             with --webhook-service (without it: AdmissionNotServed)\n  \
             admission defaults: Mutating on *, failurePolicy Ignore, timeoutSeconds 3"
        ),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = informant(&["explain", "-c", file, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let admission = &doc["controllers"][0]["admission"];
    assert_eq!(admission[1]["name"], "defaults");
    assert_eq!(admission[1]["operations"], serde_json::json!(["*"]));
    assert_eq!(admission[1]["failurePolicy"], "Ignore");
    assert_eq!(
        admission[0]["path"],
        "/admission/default/guarded/require-owner"
    );
}

/// A config of one `CacheConfig` (namespaces `shop` and `ops`) and two `Controller`s with
/// admission hooks, one for `ConfigMap`s, one for `Secret`s, written in `dir`.
fn guarded_config(dir: &std::path::Path) -> String {
    let path = dir.join("guarded.yaml");
    std::fs::write(
        &path,
        "apiVersion: informant.dev/v1alpha1
kind: CacheConfig
metadata: {name: test, namespace: default}
spec:
  defaultNamespaces: {shop: {}, ops: {}}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: guarded, namespace: default}
spec:
  for: {apiVersion: v1, kind: ConfigMap}
  hook: {exec: {command: [sh, hook.sh]}}
  admission:
  - {name: require-owner, type: Validating}
  - name: web-only
    type: Validating
    objectSelector: {matchLabels: {app: web}}
    namespaceSelector: {matchLabels: {team: shop}}
    matchConditions: [{name: not-system, expression: \"!object.metadata.name.startsWith('system-')\"}]
  - {name: defaults, type: Mutating, failurePolicy: Ignore}
---
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: secrets, namespace: default}
spec:
  for: {apiVersion: v1, kind: Secret}
  hook: {exec: {command: [sh, hook.sh]}}
  admission:
  - {name: no-plain-passwords, type: Validating}
",
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// `explain --object` names the admission hooks the API server would call for that object:
/// those of the Controllers for its kind, mutating first, each called, not called (why), or
/// called depending on what a file cannot say (the namespace's labels, the object's labels
/// unless `--object-labels` gives them, CEL matchConditions).
#[test]
fn explain_object_names_the_admission_hooks_that_apply_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = &guarded_config(dir.path());
    let run = |args: &[&str]| {
        let out = informant(args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };

    let text = run(&["explain", "-c", file, "--object", "v1/ConfigMap/shop/web"]);
    let expected = "  admission hooks (mutating first, as the API server calls them):
    default/guarded/defaults: Mutating on CREATE,UPDATE, failurePolicy Ignore: called
    default/guarded/require-owner: Validating on CREATE,UPDATE, failurePolicy Fail: called
    default/guarded/web-only: Validating on CREATE,UPDATE, failurePolicy Fail: called if \
the namespace's labels match namespaceSelector team=shop; and if the object's labels match \
objectSelector app=web; and if its matchConditions hold (CEL, checked by the API server: \
not-system)
";
    assert!(text.ends_with(expected), "{text}");
    let (_, about_object) = text.split_once("\nv1/ConfigMap/shop/web:\n").unwrap();
    assert!(
        !about_object.contains("no-plain-passwords"),
        "a Secret's hook is not a ConfigMap's: {text}"
    );

    // The object's labels decide its objectSelector.
    let text = run(&[
        "explain",
        "-c",
        file,
        "--object",
        "v1/ConfigMap/shop/web",
        "--object-labels",
        "app=db,tier=1",
    ]);
    assert!(
        text.contains(
            "default/guarded/web-only: Validating on CREATE,UPDATE, failurePolicy Fail: not \
             called: the object's labels do not match objectSelector app=web\n"
        ),
        "{text}"
    );

    // A kind no Controller is for.
    let text = run(&["explain", "-c", file, "--object", "v1/Pod/shop/p"]);
    assert!(
        text.ends_with("  admission hooks: none of this file's Controllers is for its kind\n"),
        "{text}"
    );
    // Labels that are not KEY=VALUE are a usage error.
    let out = informant(&[
        "explain",
        "-c",
        file,
        "--object",
        "v1/Pod/shop/p",
        "--object-labels",
        "app",
    ]);
    assert_eq!(out.status.code(), Some(64));
}

/// `explain --object -o json` says the same under `admission`, beside `servedBy`; every hook
/// is bounded by the `CacheConfig`'s namespaces, its own `namespaceSelector` or not.
#[test]
fn explain_object_json_says_which_admission_hooks_are_called() {
    let dir = tempfile::tempdir().unwrap();
    let file = &guarded_config(dir.path());
    let out = informant(&[
        "explain",
        "-c",
        file,
        "--object",
        "v1/Secret/shop/creds",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["servedBy"].is_array(), "{doc}");
    assert_eq!(
        doc["admission"],
        serde_json::json!([{
            "hook": "default/secrets/no-plain-passwords",
            "controller": "default/secrets",
            "name": "no-plain-passwords",
            "type": "Validating",
            "operations": ["CREATE", "UPDATE"],
            "failurePolicy": "Fail",
            "called": "yes",
        }])
    );
    let out = informant(&[
        "explain",
        "-c",
        file,
        "--object",
        "v1/ConfigMap/kube-system/x",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let admission = doc["admission"].as_array().unwrap();
    assert_eq!(admission[0]["name"], "defaults");
    assert_eq!(admission[0]["called"], "no");
    assert_eq!(
        admission[0]["reason"],
        "namespace kube-system is not among the CacheConfig's defaultNamespaces, which bounds \
         every hook of its Controllers"
    );
    // A hook's own namespaceSelector does not reach past its Controller's cache scope: the
    // manager registers both, ANDed (issue 45, item 1).
    assert_eq!(admission[2]["name"], "web-only");
    assert_eq!(admission[2]["called"], "no");
    assert_eq!(admission[2]["reason"], admission[0]["reason"]);
    let out = informant(&[
        "explain",
        "-c",
        file,
        "--object",
        "v1/ConfigMap/shop/x",
        "-o",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let admission = doc["admission"].as_array().unwrap();
    assert_eq!(admission[2]["name"], "web-only");
    assert_eq!(admission[2]["called"], "depends", "{doc}");
    assert_eq!(
        admission[2]["dependsOn"].as_array().unwrap().len(),
        3,
        "{doc}"
    );
}
