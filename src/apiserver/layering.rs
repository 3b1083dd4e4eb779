//! The API server's import layering, checked on its source: the handlers never import
//! `server` (which imports them); the leaves they share (`config`, `state`, `request`,
//! `respond`, and `client_config`, shared by the server and the test server) import neither;
//! and a handler file reaches into `handlers/mod.rs` (the dispatcher, which imports every
//! handler file) only for its sibling handler modules (issue #34: the handlers and `server.rs`
//! imported each other in a circle).

use std::path::{Path, PathBuf};

/// The files the handlers (and the server and test server) share, which must therefore import
/// no handler and not the server.
const LEAVES: [&str; 5] = [
    "config.rs",
    "state.rs",
    "request.rs",
    "respond.rs",
    "client_config.rs",
];

/// The Rust files directly under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();
    files
}

fn apiserver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/apiserver")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `source` without `//` comments (doc comments included), line by line.
fn code_lines(source: &str) -> impl Iterator<Item = (usize, &str)> {
    source
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split_once("//").map_or(line, |(code, _)| code)))
}

/// The lines of `source` that name the crate-local module `module` as a path: `super::module`,
/// `crate::apiserver::module`, a bare `module::Item` (after importing the module), or `module`
/// inside a `use super::{…}` / `use crate::…::{…}` group. Another crate's module of the same name
/// (`hyper::server`) is not ours and does not count.
fn references(source: &str, module: &str) -> Vec<String> {
    let mut found = Vec::new();
    // The root of the `use` statement the current line continues, if any.
    let mut open_use: Option<String> = None;
    for (number, code) in code_lines(source) {
        let trimmed = code.trim_start();
        let use_start = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|prefix| trimmed.strip_prefix(prefix));
        if let Some(rest) = use_start {
            open_use = Some(
                rest.split("::")
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            );
        }
        let in_local_use = open_use
            .as_deref()
            .is_some_and(|root| matches!(root, "super" | "crate" | "self"));
        let mut hit = false;
        for (at, _) in code.match_indices(module) {
            let before = &code[..at];
            let after = &code[at + module.len()..];
            if before.chars().next_back().is_some_and(is_ident)
                || after.chars().next().is_some_and(is_ident)
            {
                continue; // part of a longer name (`apiserver`, `server_addr`)
            }
            hit |= match before.strip_suffix("::") {
                Some(path) => {
                    let parent = path
                        .rsplit(|c: char| !is_ident(c))
                        .next()
                        .unwrap_or_default();
                    matches!(parent, "super" | "crate" | "apiserver")
                }
                None => after.starts_with("::") || in_local_use,
            };
        }
        if hit {
            found.push(format!("{number}: {}", code.trim()));
        }
        if open_use.is_some() && code.contains(';') {
            open_use = None;
        }
    }
    found
}

/// The names a handler file takes from `super::` (the handlers' `mod.rs`) that are not one of
/// `siblings`, before its tests (whose `super` is the file itself).
fn non_sibling_super_items(source: &str, siblings: &[String]) -> Vec<String> {
    let body = source.split("#[cfg(test)]").next().unwrap_or_default();
    let code: String = code_lines(body)
        .map(|(_, code)| code)
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for (at, _) in code.match_indices("super::") {
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[at + "super::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => {
                let group = group.split('}').next().unwrap_or_default();
                group
                    .split(',')
                    .map(|item| item.trim().split("::").next().unwrap_or_default().trim())
                    .filter(|name| !name.is_empty())
                    .collect()
            }
            None => vec![
                rest.split(|c: char| !is_ident(c))
                    .next()
                    .unwrap_or_default(),
            ],
        };
        for name in names {
            if name != "super" && !siblings.iter().any(|sibling| sibling == name) {
                found.push(name.to_string());
            }
        }
    }
    found
}

#[test]
fn no_handler_imports_the_server() {
    let dir = apiserver_dir().join("handlers");
    let files = rust_files(&dir);
    assert!(
        files.len() > 1,
        "no handler files found in {}",
        dir.display()
    );
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|path| {
            references(&read(path), "server")
                .into_iter()
                .map(move |line| format!("{}:{line}", path.display()))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "handlers must not import server (it imports them; take state from `state`, responses \
         from `respond`):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_shared_leaves_import_neither_handlers_nor_the_server() {
    let dir = apiserver_dir();
    let mut offenders = Vec::new();
    for leaf in LEAVES {
        let path = dir.join(leaf);
        let source = read(&path);
        for module in ["server", "handlers"] {
            for line in references(&source, module) {
                offenders.push(format!("{}:{line}", path.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

#[test]
fn handler_files_take_only_sibling_modules_from_the_dispatcher() {
    let dir = apiserver_dir().join("handlers");
    let files = rust_files(&dir);
    let siblings: Vec<String> = files
        .iter()
        .filter_map(|path| path.file_stem()?.to_str().map(str::to_string))
        .filter(|stem| stem != "mod")
        .collect();
    let mut offenders = Vec::new();
    for path in files.iter().filter(|path| !path.ends_with("mod.rs")) {
        for name in non_sibling_super_items(&read(path), &siblings) {
            offenders.push(format!("{}: super::{name}", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "handlers/mod.rs imports every handler file, so a handler file takes from it only the \
         sibling handler modules; shared helpers belong in a leaf (`request`, `respond`):\n{}",
        offenders.join("\n")
    );
}

/// The checks above can fail: each way of importing the server is caught, and the server's
/// name elsewhere is not.
#[test]
fn the_guard_catches_every_form_of_importing_the_server() {
    let caught = [
        "use crate::apiserver::server::App;",
        "use super::super::server::App;",
        "use super::server::App;",
        "fn f(app: &crate::apiserver::server::App) {}",
        "use crate::apiserver::{server, store};",
        "use crate::apiserver::{\n    store::ObjKey,\n    server::App,\n};",
        "use super::super::server;\nfn f(app: &server::App) {}",
    ];
    for sample in caught {
        assert!(
            !references(sample, "server").is_empty(),
            "not caught:\n{sample}"
        );
    }
    let innocent = [
        "use crate::apiserver::state::App;",
        "use tokio_rustls::server::TlsStream;",
        "// see crate::apiserver::server::App\nuse super::state::App;",
        "let server = start(); let apiserver_name = server.name();",
        "use super::{json_body, observer};",
    ];
    for sample in innocent {
        assert!(
            references(sample, "server").is_empty(),
            "wrongly caught:\n{sample}"
        );
    }
}

#[test]
fn the_guard_catches_a_handler_taking_a_helper_from_the_dispatcher() {
    let siblings = ["write".to_string(), "strategic".to_string()];
    assert_eq!(
        non_sibling_super_items("use super::{Ctx, json_bytes, strategic};", &siblings),
        ["Ctx", "json_bytes"]
    );
    assert_eq!(
        non_sibling_super_items("let m = super::partial_metadata(&v);", &siblings),
        ["partial_metadata"]
    );
    assert!(
        non_sibling_super_items(
            "use super::write::modify;\nuse super::strategic;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}",
            &siblings
        )
        .is_empty()
    );
}
