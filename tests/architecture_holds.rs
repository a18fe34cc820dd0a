//! Architecture rules of ARCHITECTURE.md, checked on the source text so that they
//! stay true after their authors have moved on.
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file of src/ holds only tests (`mod tests;` of its parent).
fn is_test_file(rel: &str) -> bool {
    rel == "tests.rs" || rel.ends_with("/tests.rs")
}

/// Every source file of the crate, as (path relative to src/, text).
fn crate_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap().display().to_string();
            (rel, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The command line is part of the binary only: the library does not declare
/// it, and no library module names it (with `--server` the command line
/// sends the API's typed requests).
#[test]
fn the_command_line_lives_in_the_binary_only() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(!lib.contains("mod cli"), "lib.rs declares the command line");
    let main =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs")).unwrap();
    assert!(
        main.contains("mod cli;"),
        "the binary declares its command line"
    );
    for (file, text) in crate_files() {
        if file.starts_with("cli/") || file == "main.rs" {
            continue;
        }
        assert!(
            !text.contains("crate::cli") && !text.contains("postfach::cli"),
            "src/{file} imports the command line; move what it needs into the library"
        );
    }
}

/// Files outside the store that name redb today. The rule is "only the
/// store"; this list may only shrink. The engine is off it: it sees records
/// and questions through `store::Tables`, never a table.
const NAMES_REDB: &[&str] = &["runtime/mod.rs", "commit/mod.rs"];

#[test]
fn no_new_module_names_redb() {
    for (file, text) in crate_files() {
        if file.starts_with("store/") {
            continue;
        }
        if text.contains("redb::") || text.contains("use redb") {
            assert!(
                NAMES_REDB.contains(&file.as_str()),
                "src/{file} names redb; storage goes through the store"
            );
        }
    }
}

/// The text of every `#[error("…")]` attribute in `text`.
fn error_messages(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[error(") {
        let after = &rest[at + "#[error(".len()..];
        let end = after.find(")]\n").unwrap_or(after.len());
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

/// The core: what a host embeds. Its errors say what happened; what to do next
/// (a command, a flag) is added by the command line or the HTTP edge.
fn is_core(file: &str) -> bool {
    ["engine/", "store/", "commit/", "model/", "runtime/"]
        .iter()
        .any(|dir| file.starts_with(dir))
        || ["limits.rs", "jobs.rs", "codec.rs", "clock.rs"].contains(&file)
        || ["ops/", "ingress/"].iter().any(|dir| file.starts_with(dir))
}

#[test]
fn core_errors_name_no_command_or_flag() {
    let mut checked = 0;
    for (file, text) in crate_files() {
        if !is_core(&file) {
            continue;
        }
        for message in error_messages(&text) {
            checked += 1;
            assert!(
                !message.contains("`postfach ")
                    && !message.contains("(postfach ")
                    && !message.contains(" --"),
                "src/{file}: a core error advises a command line: {message}"
            );
        }
    }
    assert!(checked > 20, "the error attributes were found ({checked})");
}

/// No text the core builds for a person — a parse message, an incident, a
/// refusal — names a command-line flag: a host that embeds the engine has
/// none (the edges add them). Checked on every string literal line of the
/// core's code (comments and test modules aside).
#[test]
fn core_messages_name_no_flag() {
    let mut offenders = Vec::new();
    for (file, text) in crate_files() {
        if !is_core(&file) {
            continue;
        }
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        for (i, line) in code.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") || !t.contains('"') {
                continue;
            }
            let names_flag = line.match_indices("--").any(|(at, _)| {
                let before = line[..at].chars().last();
                let after = line[at + 2..].chars().next();
                matches!(before, Some('"' | ' ' | '`' | '('))
                    && after.is_some_and(|c| c.is_ascii_lowercase())
                    && line[..at].matches('"').count() % 2 == 1
            });
            if names_flag {
                offenders.push(format!("src/{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "core messages name flags:\n{}",
        offenders.join("\n")
    );
}

/// Modules behind the `server` feature, and the crates only it pulls in.
const SERVER_ONLY: &[&str] = &[
    "crate::cli",
    "crate::server",
    "crate::demo",
    "crate::contract",
    "axum::",
    "clap::",
    "ureq::",
    "utoipa::",
    "toml::",
    "tracing_subscriber::",
    "tempfile::",
];

/// Files compiled only with the `server` or `pubsub` feature.
fn behind_a_feature(file: &str) -> bool {
    [
        "main.rs",
        "demo.rs",
        "contract.rs",
        "config.rs",
        "alarms.rs",
    ]
    .contains(&file)
        || file.starts_with("cli/")
        || file.starts_with("server/")
        || file.starts_with("demo/")
        || file.starts_with("pubsub/")
}

#[test]
fn the_embeddable_engine_needs_no_server_code() {
    // what `default-features = false` compiles must not reach the server side
    for (file, text) in crate_files() {
        if behind_a_feature(&file) || is_test_file(&file) {
            continue;
        }
        // test modules may use dev-dependencies
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for name in SERVER_ONLY {
            assert!(
                !code.contains(name),
                "src/{file} uses {name}, which only the server feature compiles"
            );
        }
    }
}

/// The public face stays small: the engine, the store, the codec, the log and
/// the runtime are internal (their types are re-exported where a host needs
/// them), and every public item is documented.
#[test]
fn the_public_face_is_small_and_documented() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(lib.contains("#![deny(missing_docs)]"));
    for internal in ["engine", "store", "codec", "commit", "runtime"] {
        assert!(
            !lib.contains(&format!("pub mod {internal};")),
            "lib.rs makes `{internal}` public; re-export what a host needs instead"
        );
    }
}

/// Fault injection (`POSTFACH_TEST_…` variables that hold an ack or stop an
/// outbox where a test kills the process) exists only in builds with debug
/// assertions: every place that reads such a variable asks
/// `cfg!(debug_assertions)` in the same expression, so a release binary
/// ignores them.
#[test]
fn fault_injection_is_compiled_into_test_builds_only() {
    let mut found = 0;
    for (file, text) in crate_files() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains("env::var(\"POSTFACH_TEST_") {
                continue;
            }
            found += 1;
            let expression = lines[i.saturating_sub(2)..=i].join(" ");
            assert!(
                expression.contains("cfg!(debug_assertions)"),
                "{file}:{}: reads a fault-injection variable without cfg!(debug_assertions)",
                i + 1
            );
        }
    }
    assert!(found >= 2, "the fault-injection switches were not found");
}

/// The code map of ARCHITECTURE.md names modules and files that exist, and
/// every top-level module of `src/` is in it.
#[test]
fn the_code_map_matches_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let map = doc
        .split("## Code map")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a code map");
    let src = root.join("src");
    let mut named = std::collections::BTreeSet::new();
    for entry in map.split("**`").skip(1) {
        let Some((module, rest)) = entry.split_once("`**") else {
            continue;
        };
        if module.contains('/') {
            // paths of the repository outside src/: `a`, `b/` …
            for p in std::iter::once(module.split('`').next().unwrap_or_default())
                .chain(module.split('`').skip(2).step_by(2))
            {
                assert!(
                    root.join(p).exists(),
                    "ARCHITECTURE.md names `{p}`, which does not exist"
                );
            }
            continue;
        }
        let path = module.replace("::", "/");
        let dir = src.join(&path);
        let file = src.join(format!("{path}.rs"));
        assert!(
            dir.is_dir() || file.is_file(),
            "ARCHITECTURE.md names module `{module}`, which src/ does not have"
        );
        named.insert(path.split('/').next().unwrap().to_string());
        // the files listed right after it, `(`a.rs`, `b.rs` …)`
        if let Some(list) = rest.trim_start().strip_prefix('(') {
            let list = list.split([')', ';']).next().unwrap_or_default();
            for f in list.split('`').skip(1).step_by(2) {
                if f.ends_with(".rs") {
                    assert!(
                        dir.join(f).is_file() || src.join(f).is_file(),
                        "ARCHITECTURE.md lists `{f}` in `{module}`, which does not exist"
                    );
                }
            }
        }
    }
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if ["lib", "main"].contains(&name.as_str()) {
            continue;
        }
        assert!(
            named.contains(&name),
            "src/{} is not in the code map of ARCHITECTURE.md",
            p.file_name().unwrap().to_string_lossy()
        );
    }
}

/// The top-level module a file of src/ belongs to (`store/tables.rs` → `store`).
fn top_module(rel: &str) -> String {
    let first = rel.split('/').next().unwrap_or_default();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a source text names through `crate::` paths (also
/// inside `use crate::{a, b::c}` groups), test modules left out.
fn named_modules(text: &str) -> std::collections::BTreeSet<String> {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    // code only: a doc link names a module without depending on it
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let text = code.as_str();
    let mut out = std::collections::BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // a group: every path at its top level
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(ident(item.trim()));
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

/// No import circle between the top-level modules of src/: a module that
/// another one builds on never reaches back into it, so each can be read,
/// tested and replaced from the bottom up (ARCHITECTURE.md, "Code map").
#[test]
fn no_import_circle_between_top_level_modules() {
    let files = crate_files();
    let modules: std::collections::BTreeSet<String> = files
        .iter()
        .map(|(rel, _)| top_module(rel))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for (rel, text) in &files {
        let from = top_module(rel);
        if !modules.contains(&from) || is_test_file(rel) {
            continue;
        }
        for to in named_modules(text) {
            if to != from && modules.contains(&to) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // every module that reaches itself again lies on a circle
    let reaches = |start: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo: Vec<String> = edges.get(start).into_iter().flatten().cloned().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(edges.get(&m).into_iter().flatten().cloned());
            }
        }
        seen
    };
    let circles: Vec<String> = modules
        .iter()
        .filter(|m| reaches(m).contains(*m))
        .map(|m| {
            let back: Vec<&String> = edges[m].iter().filter(|t| reaches(t).contains(m)).collect();
            format!("{m} → {back:?}")
        })
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn every_test_file_is_a_module_of_the_scenarios_binary() {
    // tests/ is one binary (Cargo.toml: autotests = false): a file that is
    // not named in tests/scenarios.rs would never be compiled or run
    let root = env!("CARGO_MANIFEST_DIR");
    let listed = std::fs::read_to_string(format!("{root}/tests/scenarios.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(format!("{root}/tests")).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        if name != "scenarios" && !listed.contains(&format!("\nmod {name};\n")) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "test files not in tests/scenarios.rs: {missing:?}"
    );
}

/// The files of one folder of src/ (direct children, test files left out)
/// that call each other in a loop: an edge runs from a file to the file that
/// defines a function it calls (`self.name(`, `Self::name(`, `super::name(`,
/// `file::name(`), for the names defined in exactly one file of the folder; each strongly connected group of two
/// or more files is one circle, listed by its files.
fn call_circles(folder: &str, files: &[(String, String)]) -> Vec<Vec<String>> {
    let own: Vec<&(String, String)> = files
        .iter()
        .filter(|(rel, _)| {
            rel.rsplit_once('/').map(|(d, _)| d) == Some(folder) && !is_test_file(rel)
        })
        .collect();
    let mut owner: std::collections::BTreeMap<String, Option<usize>> = Default::default();
    for (i, (_, text)) in own.iter().enumerate() {
        for (name, _, _) in functions(text) {
            owner
                .entry(name)
                .and_modify(|o| {
                    if *o != Some(i) {
                        *o = None
                    }
                })
                .or_insert(Some(i));
        }
    }
    let n = own.len();
    let mut reach = vec![vec![false; n]; n];
    for (i, (_, text)) in own.iter().enumerate() {
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
        for (name, o) in &owner {
            let Some(j) = *o else { continue };
            let stem = own[j].0.rsplit('/').next().unwrap().trim_end_matches(".rs");
            let calls = [
                format!("self.{name}("),
                format!("Self::{name}("),
                format!("super::{name}("),
                format!("{stem}::{name}("),
            ];
            if j != i && calls.iter().any(|c| text.contains(c.as_str())) {
                reach[i][j] = true;
            }
        }
    }
    // reachability, then the groups of files that reach each other
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if reach[i][k] && reach[k][j] {
                    reach[i][j] = true;
                }
            }
        }
    }
    let mut seen = vec![false; n];
    let mut circles = Vec::new();
    for i in 0..n {
        if seen[i] || !reach[i][i] {
            continue;
        }
        let group: Vec<usize> = (0..n).filter(|&j| reach[i][j] && reach[j][i]).collect();
        for &j in &group {
            seen[j] = true;
        }
        let mut names: Vec<String> = group
            .iter()
            .map(|&j| own[j].0.rsplit_once('/').unwrap().1.to_string())
            .collect();
        names.sort();
        circles.push(names);
    }
    circles
}

/// Folders whose files still call each other in a loop, with the size of
/// the largest circle today. The list only shrinks: a folder not named here
/// that grows a circle fails, and so does a named one whose circle grew or
/// shrank (then its entry is lowered here, or removed when it is gone).
const KNOWN_CALL_CIRCLES: &[(&str, usize)] = &[
    ("cli", 2),
    ("engine", 13),
    ("server/zeebe", 2),
    ("store/tables", 2),
];

/// No circle of calls between the files of one folder of src/ beyond the
/// known ones above: each file of a folder builds on others without them
/// reaching back, so a folder reads from its bottom up.
#[test]
fn no_new_call_circle_inside_a_folder() {
    let files = crate_files();
    let folders: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| rel.rsplit_once('/').map(|(d, _)| d.to_string()))
        .collect();
    let mut wrong = Vec::new();
    for folder in &folders {
        let circles = call_circles(folder, &files);
        let largest = circles.iter().map(Vec::len).max().unwrap_or(0);
        match KNOWN_CALL_CIRCLES.iter().find(|(f, _)| f == folder) {
            None if largest > 0 => wrong.push(format!("src/{folder}: {circles:?}")),
            Some((_, known)) if largest != *known => wrong.push(format!(
                "src/{folder}: its largest circle has {largest} files (KNOWN_CALL_CIRCLES says {known}): {circles:?}"
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_call_circle_finder_finds_a_loop_and_no_chain() {
    let f = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let looped = [
        f("x/a.rs", "fn a() {\n    self.b();\n}\n"),
        f("x/b.rs", "fn b() {\n    a::a();\n}\n"),
        f("x/c.rs", "fn c() {\n    self.a();\n    other.b();\n}\n"),
    ];
    assert_eq!(call_circles("x", &looped), [["a.rs", "b.rs"]]);
    let chain = [
        f("x/a.rs", "fn a() {\n    self.b();\n}\n"),
        f("x/b.rs", "fn b() {\n}\n"),
    ];
    assert!(call_circles("x", &chain).is_empty());
}

/// Largest source file of src/ (lines): a module that grows past it is split
/// by concept (ARCHITECTURE.md, "Code map").
const MAX_FILE_LINES: usize = 800;
/// Longest function (lines, signature to closing brace): one that grows past
/// it is split into named steps.
const MAX_FN_LINES: usize = 120;

/// The functions of `text`: (name, first line, length in lines). A function
/// starts at a line whose code begins with `fn` (after visibility and
/// qualifiers) and ends at the first later line that is its indentation
/// followed by `}`; a declaration without a body (`;`) is skipped.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let mut rest = code;
        for q in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(q).unwrap_or(rest);
        }
        if rest.starts_with("pub(in ") {
            rest = rest.split_once(") ").map_or(rest, |(_, r)| r);
            rest = rest.strip_prefix("async ").unwrap_or(rest);
        }
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || line.trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (i..lines.len())
            .find(|&j| lines[j] == close || (j == i && line.trim_end().ends_with('}')))
        {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn no_source_file_or_function_is_a_monolith() {
    let mut long = Vec::new();
    let mut counted = 0;
    for (file, text) in crate_files() {
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            long.push(format!("src/{file}: {n} lines (at most {MAX_FILE_LINES})"));
        }
        for (name, line, len) in functions(&text) {
            counted += 1;
            if len > MAX_FN_LINES {
                long.push(format!(
                    "src/{file}:{line}: fn {name} has {len} lines (at most {MAX_FN_LINES})"
                ));
            }
        }
    }
    // near a limit: said, so a file is split by concept before it is trimmed
    for (file, text) in crate_files() {
        let n = text.lines().count();
        if n * 100 > MAX_FILE_LINES * 85 && n <= MAX_FILE_LINES {
            eprintln!("warning: src/{file} has {n} lines, past 85 % of {MAX_FILE_LINES}");
        }
        for (name, line, len) in functions(&text) {
            if len * 100 > MAX_FN_LINES * 85 && len <= MAX_FN_LINES {
                eprintln!(
                    "warning: src/{file}:{line}: fn {name} has {len} lines, past 85 % of {MAX_FN_LINES}"
                );
            }
        }
    }
    // the scanner finds functions: a broken one would pass everything
    assert!(counted > 1000, "only {counted} functions found");
    assert!(long.is_empty(), "split these: {long:#?}");
}

#[test]
fn the_function_scanner_measures_what_it_finds() {
    let text = "fn a() {\n    x();\n}\n\nimpl T {\n    pub(crate) async fn b(&self) {\n        if y {\n        }\n    }\n    fn c(&self);\n}\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 1, 3), ("b".to_string(), 6, 4)]
    );
}
