//! The user guide under `docs/` builds with mdBook, every chapter is in its
//! table of contents, and every relative link of the book, the decisions,
//! the README and ARCHITECTURE.md leads to a file of the repository (and,
//! into a chapter, to a heading it has).
use crate::common;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The relative link targets of markdown `text` (`[x](target)`), code spans
/// and fenced blocks left out.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in common::prose_lines(text) {
        // code spans hold no links
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect();
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].trim();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
            rest = &after[end..];
        }
    }
    out
}

/// The anchors mdBook gives the headings of `text`.
fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    ' ' => Some('-'),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    files.extend(common::markdown_in("docs/src"));
    files.extend(common::markdown_in("docs/decisions"));
    files
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in links(&text) {
            checked += 1;
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
                continue;
            }
            if let Some(a) = anchor
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&target).unwrap())
                    .iter()
                    .any(|h| h == a)
            {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn every_chapter_is_in_the_table_of_contents() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let listed = links(&summary);
    for file in markdown_files()
        .iter()
        .filter(|f| f.parent().is_some_and(|d| d.ends_with("docs/src")))
    {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if name != "SUMMARY.md" {
            assert!(listed.contains(&name), "{name} is not in SUMMARY.md");
        }
    }
}

/// Every decision under `docs/decisions/` says, under its title, what forced
/// a choice, what was chosen and what follows: `## Context`, `## Decision`
/// and `## Consequences`, in that order, each with text under it.
#[test]
fn every_decision_has_its_context_decision_and_consequences() {
    let mut decisions = 0;
    for file in common::markdown_in("docs/decisions") {
        if file.file_name().is_some_and(|n| n == "README.md") {
            continue;
        }
        decisions += 1;
        let text = std::fs::read_to_string(&file).unwrap();
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            headings,
            ["## Context", "## Decision", "## Consequences"],
            "{}",
            file.display()
        );
        for part in text.split("\n## ").skip(1) {
            let body = part.split_once('\n').map_or("", |(_, b)| b);
            assert!(
                body.split_whitespace().count() >= 5,
                "{}: `## {}` says nothing",
                file.display(),
                part.lines().next().unwrap_or("")
            );
        }
    }
    assert!(decisions >= 69, "only {decisions} decisions found");
}

#[test]
fn the_book_builds() {
    let mdbook = common::tools::mdbook();
    let out_dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(out_dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mdbook.display()));
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "mdbook build: {log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");
    // the command-line contract is included whole, not linked
    let cli = std::fs::read_to_string(out_dir.path().join("cli.html")).unwrap();
    assert!(cli.contains("Exit codes"), "docs/cli.md is in the book");
    for page in [
        "introduction",
        "concepts",
        "feel-dmn",
        "cluster",
        "benchmarks",
    ] {
        assert!(
            out_dir.path().join(format!("{page}.html")).is_file(),
            "{page}"
        );
    }
}

/// Every command line the README and the book show (`postfach …` or
/// `cargo run --release -- …` in their shell blocks) names a subcommand that
/// exists and flags that subcommand has: its `--help` lists each of them.
#[cfg(feature = "server")]
#[test]
fn every_command_line_shown_names_flags_that_exist() {
    let mut files = vec![root().join("README.md")];
    files.extend(
        markdown_files()
            .into_iter()
            .filter(|f| f.parent().is_some_and(|d| d.ends_with("docs/src"))),
    );
    let mut help: std::collections::HashMap<Vec<String>, String> = Default::default();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_sh = false;
        let mut continued = String::new();
        for raw in text.lines() {
            let line = raw.trim();
            if line.starts_with("```") {
                in_sh = line == "```sh";
                continue;
            }
            if !in_sh {
                continue;
            }
            // a line ending in a backslash goes on on the next
            if let Some(head) = line.strip_suffix('\\') {
                continued.push_str(head);
                continue;
            }
            let whole = std::mem::take(&mut continued) + line;
            let command = whole.split(" #").next().unwrap().trim();
            let args = if let Some(rest) = command.strip_prefix("postfach ") {
                rest
            } else if let Some(rest) = command.strip_prefix("cargo run --release -- ") {
                rest
            } else {
                continue;
            };
            let words: Vec<&str> = args.split_whitespace().take_while(|w| *w != "<").collect();
            // global flags before the subcommand (and their values)
            let mut i = 0;
            while i < words.len() && words[i].starts_with("--") {
                i += if words[i].contains('=') || words[i] == "--json" {
                    1
                } else {
                    2
                };
            }
            let Some(sub) = words.get(i) else { continue };
            let mut path = vec![sub.to_string()];
            if ["task", "cluster", "batch"].contains(sub)
                && let Some(action) = words.get(i + 1)
            {
                path.push(action.to_string());
            }
            let text = help.entry(path.clone()).or_insert_with(|| {
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
                    .args(&path)
                    .arg("--help")
                    .output()
                    .unwrap();
                if out.status.success() {
                    String::from_utf8_lossy(&out.stdout).to_string()
                } else {
                    String::new()
                }
            });
            checked += 1;
            if text.is_empty() {
                wrong.push(format!(
                    "{}: `{command}`: no subcommand {path:?}",
                    file.display()
                ));
                continue;
            }
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                let name = flag.split('=').next().unwrap();
                if !text.contains(&format!("{name} "))
                    && !text.contains(&format!("{name}\n"))
                    && !text.contains(&format!("{name}="))
                {
                    wrong.push(format!(
                        "{}: `{command}`: {path:?} has no {name}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} command lines found");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
