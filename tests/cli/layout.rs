//! The layering the code promises: dependencies flow one way, cli → hooks → controller →
//! manager → config → cache → selector, with the recorder and serving (TLS, the API server's
//! reviews) leaves and the embedded API server beside them; and only the CLI knows clap.

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
    (
        "controller",
        &[
            "manager", "config", "cache", "selector", "recorder", "serving",
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

/// The `crate::<room>` paths of the code lines of `text` (comments and docs may point anywhere).
fn uses(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            // `crate::{cache, recorder}` names several rooms at once.
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .collect(),
                None => vec![rest],
            };
            for name in names {
                let room: String = name
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !room.is_empty() {
                    out.push((n + 1, room));
                }
            }
        }
    }
    out
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
    let (_, manager_may_use) = ROOMS[6];
    assert!(
        !manager_may_use.contains(&"hooks"),
        "the manager must not know hooks"
    );
}

#[test]
fn only_the_cli_knows_clap() {
    for (path, text) in sources(&src()) {
        let cli = path.contains("/src/cli/") || path.ends_with("/src/main.rs");
        if !cli {
            assert!(!text.contains("clap"), "{path} mentions clap");
        }
    }
}
