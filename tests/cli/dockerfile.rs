//! The image builds from what the Dockerfile copies: every file a source includes from outside
//! `src/` (`include_str!`, `include_bytes!`) is copied by a `COPY` line and not kept out of the
//! build context by `.dockerignore`. The demo's hook once was not, and `docker build` failed for
//! every user while every test passed (the container harness, `bash e2e/run.sh container`, builds
//! the image itself; this test says why in a second).

use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The files, relative to the repository, that the non-test code of `src/` includes from
/// outside `src/`.
fn included_from_outside_src() -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut out = Vec::new();
    for file in files {
        // Test modules are not built by `cargo build --release`: a module's `tests.rs` (declared
        // `#[cfg(test)] mod tests;`, the layout's rule) and what follows `#[cfg(test)]` in a file,
        // or `#[cfg(doctest)]` (the docs `lib.rs` includes for `cargo test --doc`, last in it).
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text
            .split("#[cfg(test)]")
            .next()
            .and_then(|code| code.split("#[cfg(doctest)]").next())
            .unwrap_or_default();
        for macro_name in ["include_str!(\"", "include_bytes!(\""] {
            for piece in code.split(macro_name).skip(1) {
                let literal = piece.split('"').next().unwrap_or_default();
                let target = normalize(&file.parent().unwrap().join(literal));
                let relative = target.strip_prefix(&root).unwrap().to_path_buf();
                if !relative.starts_with("src") {
                    out.push(relative.display().to_string());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The sources of the build stage's `COPY` lines (not `COPY --from`).
fn copied() -> Vec<String> {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    dockerfile
        .lines()
        .filter_map(|line| line.strip_prefix("COPY "))
        .filter(|rest| !rest.starts_with("--"))
        .flat_map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            words[..words.len().saturating_sub(1)]
                .iter()
                .map(|w| w.trim_end_matches('/').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether `.dockerignore` keeps `path` out of the context: the last pattern that matches it
/// (a directory pattern matches what is below it) decides, a `!` pattern letting it back in.
fn ignored(path: &str) -> bool {
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    let mut out = false;
    for line in ignore.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negated, pattern) = match line.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, line),
        };
        let pattern = pattern.trim_end_matches('/');
        if path == pattern || path.starts_with(&format!("{pattern}/")) {
            out = !negated;
        }
    }
    out
}

#[test]
fn every_file_the_sources_include_from_outside_src_is_in_the_image_build() {
    let included = included_from_outside_src();
    assert!(
        included.contains(&"examples/hooks/cronjob.py".to_string()),
        "the scan finds the demo's hook: {included:?}"
    );
    let copied = copied();
    for file in &included {
        if let Err(why) = in_image_build(file, &copied) {
            panic!("{file} is included by src/ but {why}");
        }
    }
}

/// Whether `file` reaches the image build: copied by a `COPY` line (itself or a directory
/// above it) and not kept out of the context by `.dockerignore`; else why not.
fn in_image_build(file: &str, copied: &[String]) -> Result<(), String> {
    if !copied
        .iter()
        .any(|c| file == c || file.starts_with(&format!("{c}/")))
    {
        return Err(format!(
            "no COPY line of the Dockerfile copies it: {copied:?}"
        ));
    }
    if ignored(file) {
        return Err(".dockerignore keeps it out of the build context".to_owned());
    }
    Ok(())
}

/// The files of the `[[example]]` targets `Cargo.toml` declares (`examples/NAME.rs`): cargo
/// refuses a manifest whose declared target is missing, so the image build needs each.
fn declared_examples() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let lines: Vec<&str> = manifest.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == "[[example]]")
        .filter_map(|pair| {
            let name = pair[1].strip_prefix("name = \"")?.strip_suffix('"')?;
            Some(format!("examples/{name}.rs"))
        })
        .collect()
}

#[test]
fn every_example_the_manifest_declares_is_in_the_image_build() {
    let declared = declared_examples();
    assert!(
        declared.contains(&"examples/cronjob_controller.rs".to_string()),
        "the scan finds the declared examples: {declared:?}"
    );
    let copied = copied();
    for file in &declared {
        if let Err(why) = in_image_build(file, &copied) {
            panic!(
                "Cargo.toml declares the example {file} (cargo refuses the manifest without it) but {why}"
            );
        }
    }
}

#[test]
fn the_dockerignore_reading_sees_a_directory_pattern_and_its_exception() {
    // The checker can fail: examples/ is ignored as a whole, only the hook is let back in.
    assert!(ignored("examples/hooks/serve-exec.py"));
    assert!(ignored("target/debug/informant"));
    assert!(!ignored("examples/hooks/cronjob.py"));
    assert!(!ignored("src/main.rs"));
}
