//! The layering the code promises: dependencies flow one way, cli → hooks → controller →
//! manager → config → cache → selector, with the recorder and serving (TLS, the API server's
//! reviews) leaves and the embedded API server beside them (the controller's test kit runs it
//! in process); and only the CLI knows clap.

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Shared leaves every room may use: the built-in kinds, did-you-mean, YAML, telemetry.
const LEAVES: [&str; 4] = ["kinds", "suggest", "yaml", "telemetry"];

/// Each room of `src/` and the rooms it may use (besides [`LEAVES`]): only rooms below it.
const ROOMS: [(&str, &[&str]); 10] = [
    ("selector", &[]),
    ("recorder", &[]),
    ("serving", &[]),
    ("apiserver", &["selector"]),
    ("cache", &["selector"]),
    ("config", &["cache", "selector", "recorder"]),
    (
        "manager",
        &["config", "cache", "selector", "recorder", "serving"],
    ),
    // The test kit (`controller::testing`) runs the embedded API server in process as its
    // recording fake; the API server uses nothing of the controller's.
    (
        "controller",
        &[
            "manager",
            "config",
            "cache",
            "selector",
            "recorder",
            "serving",
            "apiserver",
        ],
    ),
    (
        "hooks",
        &[
            "controller",
            "manager",
            "config",
            "cache",
            "selector",
            "recorder",
            "serving",
        ],
    ),
    (
        "samples",
        &[
            "controller",
            "manager",
            "config",
            "cache",
            "selector",
            "recorder",
            "serving",
        ],
    ),
];

/// The `crate::<room>` paths of the code lines of `text` (comments and docs may point anywhere),
/// each with the line of its `crate::`. A group names several rooms at once, on one line or
/// several: `crate::{cache, recorder}`, `use crate::{\n    cache::Cache,\n    hooks::X,\n};`, and
/// nested, `crate::{cache::{a, b}, manager}`; only the first segment of each path in the
/// outermost group is a room.
fn uses(text: &str) -> Vec<(usize, String)> {
    // The code, comment lines blanked (kept as empty lines so line numbers stay right).
    let code: String = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.extend(room_of(rest).map(|room| (line_of(at), room)));
            continue;
        };
        // The outermost group: a path starts after its `{` and after each `,` at depth 0.
        let mut depth = 0usize;
        let mut start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if start && !c.is_whitespace() => {
                    start = false;
                    let offset = at + "crate::{".len() + i;
                    out.extend(room_of(&group[i..]).map(|room| (line_of(offset), room)));
                }
                _ => {}
            }
        }
    }
    out
}

/// The room a path begins with (`cache` of `cache::Cache`), if it begins with a name.
fn room_of(path: &str) -> Option<String> {
    let room: String = path
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
        .collect();
    (!room.is_empty()).then_some(room)
}

#[test]
fn every_room_uses_only_the_rooms_below_it() {
    for (room, allowed) in ROOMS {
        for (path, text) in sources(&src().join(room)) {
            for (line, used) in uses(&text) {
                assert!(
                    used == room
                        || allowed.contains(&used.as_str())
                        || LEAVES.contains(&used.as_str()),
                    "{path}:{line}: {room} must not use crate::{used} (it may use {allowed:?} and {LEAVES:?})"
                );
            }
        }
    }
}

#[test]
fn the_direction_check_can_fail() {
    let text = "use crate::cache::Cache;\n// crate::hooks in a comment is fine\nlet x = crate::hooks::f();\n";
    assert_eq!(
        uses(text),
        [(1, "cache".to_owned()), (3, "hooks".to_owned())]
    );
    // A group over several lines, nested groups, and `self` inside a group.
    let text = "use crate::{\n    cache::Cache,\n    hooks::X,\n};\nuse crate::{cache::{a, b}, manager};\n";
    assert_eq!(
        uses(text),
        [
            (2, "cache".to_owned()),
            (3, "hooks".to_owned()),
            (5, "cache".to_owned()),
            (5, "manager".to_owned()),
        ]
    );
    let (_, manager_may_use) = ROOMS[6];
    assert!(
        !manager_may_use.contains(&"hooks"),
        "the manager must not know hooks"
    );
}

/// The files of `files` that mention clap outside the CLI (`src/cli/`, `src/main.rs`) and
/// are not modules declared behind the `cli` cargo feature (`#[cfg(feature = "cli")]` over
/// their `mod`) or their submodules: a library user who turns the feature off must not build
/// clap.
fn clap_outside_cli(files: &[(String, String)]) -> Vec<String> {
    let mut behind_feature = Vec::new();
    for (path, text) in files {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] != "#[cfg(feature = \"cli\")]" {
                continue;
            }
            let Some(module) = pair[1]
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'))
            else {
                continue;
            };
            let dir = match path.strip_suffix("/mod.rs") {
                Some(dir) => dir.to_owned(),
                None => path.trim_end_matches(".rs").to_owned(),
            };
            behind_feature.push(format!("{dir}/{module}.rs"));
        }
    }
    files
        .iter()
        .filter(|(path, text)| {
            let cli = path.contains("/src/cli/") || path.ends_with("/src/main.rs");
            let behind = behind_feature.iter().any(|module| {
                path == module
                    || module
                        .strip_suffix(".rs")
                        .is_some_and(|dir| path.starts_with(&format!("{dir}/")))
            });
            !cli && text.contains("clap") && !behind
        })
        .map(|(path, _)| path.clone())
        .collect()
}

#[test]
fn only_the_cli_and_the_cli_feature_know_clap() {
    let outside = clap_outside_cli(&sources(&src()));
    assert!(outside.is_empty(), "mention clap: {outside:?}");
}

#[test]
fn the_clap_check_can_fail() {
    let files = vec![
        (
            "/r/src/manager/mod.rs".to_owned(),
            "#[cfg(feature = \"cli\")]\nmod args;\nmod run;\n".to_owned(),
        ),
        (
            "/r/src/manager/args.rs".to_owned(),
            "use clap::Parser;".to_owned(),
        ),
        (
            "/r/src/manager/args/webhook.rs".to_owned(),
            "use clap::Parser;".to_owned(),
        ),
        (
            "/r/src/manager/run.rs".to_owned(),
            "use clap::Parser;".to_owned(),
        ),
        (
            "/r/src/manager/run/parts.rs".to_owned(),
            "use clap::Parser;".to_owned(),
        ),
        (
            "/r/src/cli/run.rs".to_owned(),
            "use clap::Parser;".to_owned(),
        ),
    ];
    assert_eq!(
        clap_outside_cli(&files),
        ["/r/src/manager/run.rs", "/r/src/manager/run/parts.rs"]
    );
}

/// The rooms whose public names must each be used outside the room (issue #34: the public
/// API without the wiring between siblings).
const GUARDED_ROOMS: [&str; 2] = ["cache", "manager"];

/// Public names no one outside the room writes, which stay public because a public item's
/// signature names them (a returned error or value, a parameter): callers receive them and
/// may name them, and Rust warns about a `pub(crate)` type in a public signature.
const IN_PUBLIC_SIGNATURES: [&str; 15] = [
    // The error of `manager::parse_bind_address`.
    "BindAddressError",
    // The key kind of `cache::CompactObject` in kube's store (`Lookup::DynamicType`).
    "StoreKind",
    // What `cache::Plan::describe` returns, and its scopes.
    "Description",
    "InformerScopeDescription",
    // The fields of `cache::Layer`'s variants.
    "InformerScope",
    "Selection",
    // What `cache::InformerPool::stats` and `cache::InformerPool::obtain` return.
    "PoolStats",
    "PooledInformer",
    // What `manager::State::snapshot` returns.
    "Snapshot",
    // The error of `manager::StatusWriter::write`.
    "StatusError",
    // The type of the public field `cache::InformerSettings::shard`.
    "InformerShard",
    // The error of `cache::projection::ObjectPath::parse`.
    "PathError",
    // The rows of `cache::estimate::Estimate`.
    "InformerEstimate",
    // The errors of `manager::Args::options` and `manager::Args::client`.
    "ArgsError",
    "ClientError",
];

/// The keywords of the items [`public_items`] reads.
const ITEM_KEYWORDS: [&str; 10] = [
    "fn ",
    "async fn ",
    "const fn ",
    "struct ",
    "enum ",
    "trait ",
    "const ",
    "static ",
    "type ",
    "mod ",
];

/// The `pub` items of `text` (one file) with their lines: items at module level and the
/// inherent `pub fn` of impl blocks (a line starting `pub fn`, `pub struct`, … `pub mod`, at
/// any indentation), and each name a `pub use` exports (a group over several lines too; its
/// alias when renamed). Not read: `pub(crate)` and narrower, fields and variants (their
/// types are public with them), trait methods (never `pub`), and everything in a
/// `#[cfg(test)]` module written in the file (a `#[cfg(test)] mod x;` file is skipped by
/// [`test_files`]).
fn public_items(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut depth = 0i64;
    // The depth a `#[cfg(test)]` module was opened at, while inside it.
    let mut test_module: Option<i64> = None;
    let mut after_cfg_test = false;
    let mut n = 0;
    while n < lines.len() {
        let line = lines[n].trim();
        let code = if line.starts_with("//") {
            ""
        } else {
            line.split("//").next().unwrap_or_default()
        };
        let opened: i64 = code
            .chars()
            .map(|c| match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            })
            .sum();
        if let Some(at) = test_module {
            depth += opened;
            if depth <= at {
                test_module = None;
            }
            n += 1;
            continue;
        }
        if line == "#[cfg(test)]" {
            after_cfg_test = true;
            n += 1;
            continue;
        }
        if after_cfg_test && !line.starts_with('#') {
            after_cfg_test = false;
            if code.ends_with('{') {
                test_module = Some(depth);
                depth += opened;
                n += 1;
                continue;
            }
        }
        if let Some(used) = line.strip_prefix("pub use ") {
            let first = n;
            let mut statement = used.to_owned();
            while !statement.trim_end().ends_with(';') && n + 1 < lines.len() {
                n += 1;
                statement.push(' ');
                statement.push_str(lines[n].trim());
            }
            {
                for piece in statement
                    .trim_end()
                    .trim_end_matches(';')
                    .split(['{', '}', ','])
                {
                    let piece = piece.trim();
                    let name = match piece.split_once(" as ") {
                        Some((_, alias)) => alias.trim(),
                        None => piece.rsplit("::").next().unwrap_or_default().trim(),
                    };
                    if !name.is_empty() && name != "self" && name != "*" && !piece.ends_with("::") {
                        out.push((first + 1, name.to_owned()));
                    }
                }
            }
        } else if let Some(item) = line.strip_prefix("pub ") {
            let name = ITEM_KEYWORDS.iter().find_map(|k| {
                let rest = item.strip_prefix(k)?;
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty()).then_some(name)
            });
            out.extend(name.map(|name| (n + 1, name)));
        }
        depth += opened;
        n += 1;
    }
    out
}

/// The files of `files` declared by a `#[cfg(test)] mod x;` (tests in a file of their own).
fn test_files(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (n, line) in lines.iter().enumerate() {
            if *line != "#[cfg(test)]" {
                continue;
            }
            let Some(next) = lines[n + 1..].iter().find(|l| !l.starts_with('#')) else {
                continue;
            };
            let Some(module) = next.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) else {
                continue;
            };
            let dir = match path.strip_suffix("/mod.rs") {
                Some(dir) => dir.to_owned(),
                None => path.trim_end_matches(".rs").to_owned(),
            };
            out.push(format!("{dir}/{module}.rs"));
            out.push(format!("{dir}/{module}/mod.rs"));
        }
    }
    out
}

/// Every identifier in the doc-tests of `text` (the code between ```` ``` ```` fences of `///`
/// and `//!` comments): a doc-test is compiled as a user's crate, so what it names is used
/// from outside, as examples/ is.
fn doc_test_identifiers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim_start();
        let Some(doc) = line
            .strip_prefix("///")
            .or_else(|| line.strip_prefix("//!"))
        else {
            inside = false;
            continue;
        };
        let doc = doc.trim_start();
        if doc.starts_with("```") {
            // A fence that names a language other than Rust opens no doc-test.
            let info = doc.trim_start_matches('`').trim();
            inside = !inside
                && (info.is_empty()
                    || info.split(',').all(|w| {
                        matches!(
                            w.trim(),
                            "rust" | "no_run" | "ignore" | "should_panic" | "compile_fail"
                        )
                    }));
            continue;
        }
        if inside {
            let code = doc.strip_prefix("# ").unwrap_or(doc);
            out.extend(
                code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|word| !word.is_empty()),
            );
        }
    }
    out
}

/// Every identifier on the code lines of `text` (comment and doc lines left out).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| line.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|word| !word.is_empty())
}

/// The `pub` names of a room's `files` (with their text, paths relative to the crate root)
/// that no code in `outside` names: each as `path:line: name`.
fn unused_outside(files: &[(String, String)], outside: &[(String, String)]) -> Vec<String> {
    let named: std::collections::HashSet<&str> = outside
        .iter()
        .flat_map(|(_, text)| identifiers(text))
        .chain(
            files
                .iter()
                .chain(outside)
                .flat_map(|(_, text)| doc_test_identifiers(text)),
        )
        .collect();
    let tests = test_files(files);
    let mut out = Vec::new();
    for (path, text) in files {
        if tests.contains(path) {
            continue;
        }
        for (line, name) in public_items(text) {
            if !named.contains(name.as_str()) && !IN_PUBLIC_SIGNATURES.contains(&name.as_str()) {
                out.push(format!("{path}:{line}: {name}"));
            }
        }
    }
    out
}

/// Every `.rs` file under the crate root's `dirs`, paths relative to the root.
fn crate_files(dirs: &[&str]) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in dirs {
        for (path, text) in sources(&root.join(dir)) {
            let relative = Path::new(&path)
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string();
            out.push((relative, text));
        }
    }
    out
}

/// Each `pub` item of `cache` and `manager` is named outside its room (other rooms of `src/`,
/// the binaries, `tests/`, `benches/`, `examples/`, or a doc-test anywhere: deliberate library
/// API shown to users); one only its room uses is `pub(crate)`
/// (issue #34). What counts as an item: [`public_items`]. By name, not by path: a name used
/// outside for anything counts.
#[test]
fn every_public_name_of_cache_and_manager_is_used_outside_its_room() {
    let everything = crate_files(&["src", "tests", "benches", "examples"]);
    for room in GUARDED_ROOMS {
        let inside = format!("src/{room}/");
        let (files, outside): (Vec<_>, Vec<_>) = everything
            .iter()
            // The crate index re-exports rooms; this file names the allowed exceptions.
            .filter(|(path, _)| path != "src/lib.rs" && path != "tests/cli/layout.rs")
            .cloned()
            .partition(|(path, _)| path.starts_with(&inside));
        let unused = unused_outside(&files, &outside);
        assert!(
            unused.is_empty(),
            "public, but only {room} uses them (make them pub(crate)):\n{}",
            unused.join("\n")
        );
    }
}

#[test]
fn the_public_name_check_can_fail() {
    let files = vec![
        (
            "src/cache/mod.rs".to_owned(),
            "mod a;\npub use a::{\n    Used,\n    helper as renamed,\n};\n"
                .to_owned(),
        ),
        (
            "src/cache/a.rs".to_owned(),
            "/// Shown to users, and helper in prose only:\n///\n/// ```\n/// # use cache::Used;\n/// Used.shown();\n/// ```\n///\n/// ```text\n/// Used.method()\n/// ```\npub struct Used;\npub(crate) fn quiet() {}\nimpl Used {\n    pub fn method(&self) {}\n    pub fn shown(&self) {}\n}\npub fn helper() {}\n#[cfg(test)]\nmod tests {\n    pub fn in_tests() {}\n}\n#[cfg(test)]\nmod cases;\n"
                .to_owned(),
        ),
        (
            "src/cache/a/cases.rs".to_owned(),
            "pub fn case() {}\n".to_owned(),
        ),
    ];
    let outside = vec![(
        "src/manager/run.rs".to_owned(),
        "use crate::cache::Used;\n// renamed, helper: a comment is no use\n".to_owned(),
    )];
    assert_eq!(
        unused_outside(&files, &outside),
        [
            "src/cache/mod.rs:2: renamed",
            "src/cache/a.rs:14: method",
            "src/cache/a.rs:17: helper",
        ]
    );
}

/// The longest a file of `src/` may be: a file longer than this holds more than one concept
/// (STYLE §2), and is split by concept, not by moving its tests out.
const MAX_SOURCE_LINES: usize = 700;

/// The files of `files` longer than [`MAX_SOURCE_LINES`], with their length.
fn too_long(files: &[(String, String)]) -> Vec<String> {
    let mut long: Vec<String> = files
        .iter()
        .filter(|(_, text)| text.lines().count() > MAX_SOURCE_LINES)
        .map(|(path, text)| format!("{path}: {} lines", text.lines().count()))
        .collect();
    long.sort();
    long
}

#[test]
fn every_source_file_holds_at_most_700_lines() {
    let long = too_long(&sources(&src()));
    assert!(
        long.is_empty(),
        "split these by concept (STYLE §2), not by moving tests out: {long:#?}"
    );
}

#[test]
fn the_length_check_can_fail() {
    let files = vec![
        ("src/a.rs".to_owned(), "x\n".repeat(MAX_SOURCE_LINES)),
        ("src/b.rs".to_owned(), "x\n".repeat(MAX_SOURCE_LINES + 1)),
    ];
    assert_eq!(too_long(&files), ["src/b.rs: 701 lines"]);
}
