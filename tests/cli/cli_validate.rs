//! The `informant` binary: `validate` and `crd` exit codes and output, `run`'s errors before
//! it touches a cluster, and `demo`'s story. The invalid samples in `config/samples/invalid/` fail
//! with exit 64, and the README's validation example (command and output) is exactly what the
//! binary prints, so the README and the binary cannot drift apart.

use crate::support;

use std::path::{Path, PathBuf};

use support::informant;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/samples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn validate_exits_zero_and_prints_a_summary_for_every_sample() {
    let all = samples();
    assert_eq!(all.len(), 7);
    for path in all {
        let out = informant(&["validate", "--config", path.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        assert!(stdout.contains(" is valid\ncache:\n"), "{stdout}");
        assert!(stdout.contains("\nrecorder:\n"), "{stdout}");
    }
}

#[test]
fn validate_summary_shows_the_defaulted_namespaces() {
    let out = informant(&[
        "validate",
        "--config",
        "config/samples/multi-namespace.yaml",
    ]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "    <all other namespaces>: labels app.kubernetes.io/part-of=shop; \
             fields metadata.namespace!=team-a,metadata.namespace!=team-b; drops managedFields; resync 10h\n"
        ),
        "{stdout}"
    );
    let out = informant(&["validate", "--config", "config/samples/cronjob-events.yaml"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "  spam filter: key [source, involvedObject, type, reason], burst 25, \
             qps 0.0033333334140479565 (one token every 5m)\n"
        ),
        "{stdout}"
    );
}

#[test]
fn validate_exits_64_and_lists_every_error_of_a_broken_sample() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let original = std::fs::read_to_string("config/samples/by-object.yaml").unwrap();
    let text_broken = original
        .replace("syncPeriod: 1h30m", "syncPeriod: 90")
        .replace("kind: Deployment", "kind: Deployments")
        .replace("spec.nodeName=node01", "spec.nodeName")
        .replace("labelSelector: \"\"", "labelSelecter: \"\"");
    assert_ne!(text_broken, original);
    std::fs::write(&broken, text_broken).unwrap();

    let out = informant(&["validate", "--config", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    let want = format!(
        "informant validate: {}: invalid cacheconfig (4 errors):\n  \
         spec.byObject[2].labelSelecter: unknown field; did you mean \"labelSelector\"?\n  \
         spec.syncPeriod: must be a string, found the number 90; quote the value\n  \
         spec.byObject[0].fieldSelector: invalid field selector term \"spec.nodeName\" at position 0: \
         it has no operator (\"=\", \"==\" or \"!=\"); write terms such as status.phase=Running or \
         metadata.name!=x, separated by commas\n  \
         spec.byObject[1].kind: unknown kind \"Deployments\" in API version apps/v1; did you mean \"Deployment\"?\n",
        broken.display()
    );
    assert_eq!(stderr, want);
}

#[test]
fn validate_exits_64_on_yaml_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "spec: [unclosed\n").unwrap();
    let out = informant(&["validate", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        text(&out.stderr).contains("not valid YAML"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn validate_exits_66_when_the_file_is_missing() {
    let out = informant(&["validate", "--config", "config/samples/does-not-exist.yaml"]);
    assert_eq!(out.status.code(), Some(66));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "informant validate: cannot read cacheconfig file config/samples/does-not-exist.yaml: "
        ),
        "{stderr}"
    );
}

#[test]
fn validate_without_a_config_flag_is_a_usage_error() {
    let out = informant(&["validate"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(text(&out.stderr).contains("--config <FILE>"));
}

#[test]
fn crd_prints_the_committed_crds_as_one_multi_document_yaml() {
    let out = informant(&["crd"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cache_config = std::fs::read_to_string("crds/cacheconfigs.informant.dev.yaml").unwrap();
    let controller = std::fs::read_to_string("crds/controllers.informant.dev.yaml").unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("{cache_config}---\n{controller}")
    );
    for (kind, committed) in [("CacheConfig", &cache_config), ("Controller", &controller)] {
        let one = informant(&["crd", "--kind", kind]);
        assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
        assert_eq!(&text(&one.stdout), committed, "--kind {kind}");
    }
    let unknown = informant(&["crd", "--kind", "Pod"]);
    assert_eq!(unknown.status.code(), Some(2), "clap's usage error");
}

#[test]
fn run_reports_a_bad_config_file_before_touching_a_cluster() {
    let missing = informant(&["run", "--config", "/nonexistent/informant.yaml"]);
    assert_eq!(missing.status.code(), Some(66), "{}", text(&missing.stderr));
    let invalid = informant(&[
        "run",
        "--config",
        "config/samples/invalid/typos-and-bad-values.yaml",
    ]);
    assert_eq!(invalid.status.code(), Some(64), "{}", text(&invalid.stderr));
    assert!(
        text(&invalid.stderr).contains("spec."),
        "{}",
        text(&invalid.stderr)
    );
    let reference = informant(&["run", "--cache-config", "no-slash"]);
    assert_eq!(reference.status.code(), Some(64));
    assert!(text(&reference.stderr).contains("NAMESPACE/NAME"));
    let no_source = informant(&["run"]);
    assert_eq!(no_source.status.code(), Some(2), "clap's usage error");
}

/// The README's example of an invalid config: the arguments of its `$ informant validate ...`
/// line (the `# exit 64` comment removed) and the lines printed below it up to the end of its
/// fenced block, as the binary writes them to standard error.
fn readme_example() -> (Vec<String>, String) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let prompt = "$ informant validate --config config/samples/invalid/";
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(prompt));
    let command = lines
        .next()
        .unwrap_or_else(|| panic!("README.md has no line starting with {prompt:?}"));
    let (command, comment) = command
        .trim_start_matches("$ informant ")
        .split_once('#')
        .unwrap_or_else(|| panic!("the README's command has no `# exit 64` comment: {command}"));
    assert_eq!(comment.trim(), "exit 64", "the README's exit code comment");
    let args = command.split_whitespace().map(str::to_owned).collect();
    let mut output = String::new();
    for line in lines.take_while(|l| !l.starts_with("```")) {
        output.push_str(line);
        output.push('\n');
    }
    (args, output)
}

fn invalid_samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/samples/invalid");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
}

#[test]
fn the_readme_validate_example_runs_as_printed_and_prints_what_the_readme_shows() {
    let (args, want) = readme_example();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(args[..2], ["validate", "--config"], "{args:?}");
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(args[2])
            .is_file(),
        "the README's example names {}, which is not in the repository",
        args[2]
    );
    let out = informant(&args);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        want,
        "README.md's validation example differs from what the binary prints"
    );
}

#[test]
fn every_invalid_sample_fails_validation_with_exit_64_and_a_field_path() {
    let all = invalid_samples();
    assert!(!all.is_empty());
    for path in all {
        assert!(
            path.extension().is_some_and(|x| x == "yaml"),
            "{}: config/samples/invalid/ holds only .yaml samples",
            path.display()
        );
        let out = informant(&["validate", "--config", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{}: {stderr}", path.display());
        assert!(out.stdout.is_empty(), "{}", path.display());
        assert!(
            stderr.contains(": invalid cacheconfig (") && stderr.contains("\n  spec."),
            "{}: {stderr}",
            path.display()
        );
    }
}

#[test]
fn the_demo_tells_the_story_the_readme_promises() {
    // Fewer, faster runs than the README's; the same story.
    let out = informant(&["demo", "--runs", "15", "--every", "100ms"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    for expected in [
        "ByKindCache (root)",
        "reloaded: started 2 informers, stopped 0, kept 2; recorder: spamKeyFields",
        "SawCompletedJob",
        "SuccessfulCreate",
        "SuccessfulDelete",
        "spam_filtered",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // 15 runs of 3 reasons drain the shared bucket of 25: some events were filtered before
    // the edit (the "spam_filtered" column before the edit, the third count of a reason's
    // row, is not all zeros).
    let filtered_before: u64 = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("Su") || l.trim_start().starts_with("Saw"))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(filtered_before > 0, "{stdout}");
}

/// Given the manager's `--hook-*` flags, `validate` checks each Controller against the policy
/// they make, every refusal at once; without them it does not (the file alone is valid).
#[test]
fn validate_checks_controllers_against_the_hook_policy_of_the_hook_flags() {
    let file = "examples/hooks/controllers.yaml";
    let out = informant(&["validate", "--config", file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let out = informant(&[
        "validate",
        "--config",
        file,
        "--hook-policy",
        "restricted",
        "--hook-allow-exec",
        "/opt/hooks/",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    for name in [
        "cronjob-watch",
        "configmap-to-secret",
        "count-keys",
        "configmap-census",
    ] {
        assert!(
            stderr.contains(&format!(
                "controller default/{name} is refused by the hook policy"
            )),
            "{name}: {stderr}"
        );
    }
    assert!(
        stderr.contains("controllers[configmap-to-secret]: ")
            && stderr.contains("spec.owns[0]: v1 Secret objects are not sent to hooks"),
        "{stderr}"
    );

    let out = informant(&[
        "validate",
        "--config",
        file,
        "--hook-policy",
        "open",
        "--hook-allow-secrets",
        // The copier listens on loopback, refused unless named (issue 45, item 9).
        "--hook-allow-url",
        "127.0.0.1:8089",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
