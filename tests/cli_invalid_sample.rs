//! The invalid samples in `config/samples/invalid/`: `informant validate` rejects each with exit
//! 64, and the README's validation example (command and output) is exactly what the binary
//! prints, so the README and the binary cannot drift apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn informant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_informant"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The README's example of an invalid config: the arguments of its `$ informant validate ...`
/// line (the `# exit 64` comment removed) and the lines printed below it, as the binary writes
/// them to standard error.
fn readme_example() -> (Vec<String>, String) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let prompt = "    $ informant validate --config config/samples/invalid/";
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(prompt));
    let command = lines
        .next()
        .unwrap_or_else(|| panic!("README.md has no line starting with {prompt:?}"));
    let (command, comment) = command
        .trim_start_matches("    $ informant ")
        .split_once('#')
        .unwrap_or_else(|| panic!("the README's command has no `# exit 64` comment: {command}"));
    assert_eq!(comment.trim(), "exit 64", "the README's exit code comment");
    let args = command.split_whitespace().map(str::to_owned).collect();
    let mut output = String::new();
    for line in lines.take_while(|l| !l.trim().is_empty()) {
        let line = line
            .strip_prefix("    ")
            .unwrap_or_else(|| panic!("the README's output line is not indented: {line:?}"));
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
