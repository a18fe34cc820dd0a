//! How much of the vendors' BPMN postfach runs as drawn: every `.bpmn` /
//! `.bpmn20.xml` file under each vendor's directory is parsed as `postfach
//! deploy` parses it and counted once — as drawn (deployed, no warning),
//! with warnings (deployed, but something in it is not run as written:
//! listeners, Java delegates become jobs, skipped mappings or pools …; by
//! class of warning), or refused (by class: an element type, a problem, a
//! correlation key to give at deploy) — and panics (must stay 0).
//!
//!     cargo run --release --example vendor_sweep -- [--json FILE] \
//!         NAME,REPOSITORY,COMMIT,DIR [NAME,REPOSITORY,COMMIT,DIR …]
//!
//! `benches/vendor_sweep.sh` gets the test models of Flowable, Camunda 7 and
//! Zeebe, runs this over each and keeps the result in
//! `bench-results/vendor-sweep.json`.
use postfach::model::{ParseError, parse_report};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn models(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            models(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && (name.ends_with(".bpmn") || name.ends_with(".bpmn20.xml"))
        {
            out.push(p);
        }
    }
}

/// The first words of a message, its ids and names left out, so that equal
/// problems and warnings group.
fn class_of(prefix: &str, message: &str) -> String {
    let words: Vec<&str> = message
        .split_whitespace()
        .filter(|w| !w.contains('\'') && !w.contains('"'))
        .take(7)
        .collect();
    format!("{prefix}: {}", words.join(" "))
}

/// The classes a refusal counts under: the element type refused, a
/// correlation key to give at deploy, or the first words of a problem.
fn refusal_classes(e: &ParseError) -> Vec<String> {
    match e {
        ParseError::Unsupported { items, .. } => items
            .iter()
            .map(|u| format!("unsupported: {}", u.kind))
            .collect(),
        ParseError::Invalid { issues, .. } => issues
            .iter()
            .map(|i| match i.missing_key_for {
                Some(_) => "a correlation key to give at deploy".to_string(),
                None => class_of("problem", &i.message),
            })
            .collect(),
        other => vec![
            format!("{}", other)
                .split(": ")
                .nth(1)
                .unwrap_or("other")
                .chars()
                .take(60)
                .collect(),
        ],
    }
}

/// One vendor's models: where they come from and what became of them.
#[derive(Default)]
struct Sweep {
    name: String,
    repository: String,
    commit: String,
    files: usize,
    as_drawn: usize,
    with_warnings: usize,
    refused: usize,
    /// Refused only for a correlation key: a deploy that gives it runs it.
    refused_for_keys_only: usize,
    panics: usize,
    warning_classes: BTreeMap<String, usize>,
    refusal_classes: BTreeMap<String, usize>,
}

impl Sweep {
    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "repository": self.repository,
            "commit": self.commit,
            "files": self.files,
            "as_drawn": self.as_drawn,
            "with_warnings": self.with_warnings,
            "refused": self.refused,
            "refused_for_keys_only": self.refused_for_keys_only,
            "panics": self.panics,
            "warning_classes": self.warning_classes,
            "refusal_classes": self.refusal_classes,
        })
    }
}

/// Counts each distinct class of `classes` once into `into`.
fn count(into: &mut BTreeMap<String, usize>, mut classes: Vec<String>) {
    classes.sort();
    classes.dedup();
    for c in classes {
        *into.entry(c).or_default() += 1;
    }
}

fn sweep(name: &str, repository: &str, commit: &str, dir: &Path) -> Sweep {
    let mut files = Vec::new();
    models(dir, &mut files);
    files.sort();
    let mut s = Sweep {
        name: name.into(),
        repository: repository.into(),
        commit: commit.into(),
        files: files.len(),
        ..Sweep::default()
    };
    for f in &files {
        let Ok(bytes) = std::fs::read(f) else {
            continue;
        };
        let xml = String::from_utf8_lossy(&bytes).into_owned();
        let file = f.display().to_string();
        let parsed = std::panic::catch_unwind(|| {
            parse_report(&file, &xml, &BTreeMap::new()).map(|p| p.warnings)
        });
        match parsed {
            Err(_) => {
                s.panics += 1;
                println!("PANIC {file}");
            }
            Ok(Ok(warnings)) if warnings.is_empty() => s.as_drawn += 1,
            Ok(Ok(warnings)) => {
                s.with_warnings += 1;
                let classes = warnings
                    .iter()
                    .map(|w| class_of("warning", &w.message))
                    .collect();
                count(&mut s.warning_classes, classes);
            }
            Ok(Err(e)) => {
                s.refused += 1;
                if matches!(&e, ParseError::Invalid { issues, .. }
                    if issues.iter().all(|i| i.missing_key_for.is_some()))
                {
                    s.refused_for_keys_only += 1;
                }
                count(&mut s.refusal_classes, refusal_classes(&e));
            }
        }
    }
    s
}

fn percent(n: usize, of: usize) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

fn report(s: &Sweep) {
    println!(
        "{} ({} at {}): {} files; as drawn {} ({:.1} %); with warnings {} ({:.1} %); refused {} ({:.1} %; {} only for a correlation key); panics {}",
        s.name,
        s.repository,
        s.commit,
        s.files,
        s.as_drawn,
        percent(s.as_drawn, s.files),
        s.with_warnings,
        percent(s.with_warnings, s.files),
        s.refused,
        percent(s.refused, s.files),
        s.refused_for_keys_only,
        s.panics
    );
    for (what, classes) in [
        ("warnings", &s.warning_classes),
        ("refusals", &s.refusal_classes),
    ] {
        let mut top: Vec<(&String, &usize)> = classes.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("  {what}, most frequent classes:");
        for (class, n) in top.iter().take(12) {
            println!("    {n:>5} files  {class}");
        }
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let json_out = match args.iter().position(|a| a == "--json") {
        Some(i) if i + 1 < args.len() => {
            let out = args.remove(i + 1);
            args.remove(i);
            Some(out)
        }
        Some(_) => {
            eprintln!("--json needs a file");
            std::process::exit(2);
        }
        None => None,
    };
    if args.is_empty() {
        eprintln!("usage: vendor_sweep [--json FILE] NAME,REPOSITORY,COMMIT,DIR …");
        std::process::exit(2);
    }
    std::panic::set_hook(Box::new(|_| {}));
    let mut sweeps = Vec::new();
    for a in &args {
        let parts: Vec<&str> = a.splitn(4, ',').collect();
        let [name, repository, commit, dir] = parts[..] else {
            eprintln!("'{a}': expected NAME,REPOSITORY,COMMIT,DIR");
            std::process::exit(2);
        };
        let s = sweep(name, repository, commit, Path::new(dir));
        report(&s);
        sweeps.push(s);
    }
    let total = |f: fn(&Sweep) -> usize| sweeps.iter().map(f).sum::<usize>();
    let (files, as_drawn, warned, refused) = (
        total(|s| s.files),
        total(|s| s.as_drawn),
        total(|s| s.with_warnings),
        total(|s| s.refused),
    );
    println!(
        "all: {files} files; as drawn {as_drawn} ({:.1} %); with warnings {warned} ({:.1} %); refused {refused} ({:.1} %); panics {}",
        percent(as_drawn, files),
        percent(warned, files),
        percent(refused, files),
        total(|s| s.panics)
    );
    if let Some(out) = json_out {
        let doc = json!({
            "command": "benches/vendor_sweep.sh",
            "postfach_commit": std::env::var("POSTFACH_COMMIT").unwrap_or_default(),
            "date": std::env::var("POSTFACH_DATE").unwrap_or_default(),
            "machine": std::env::var("POSTFACH_MACHINE").unwrap_or_default(),
            "vendors": sweeps.iter().map(Sweep::json).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
        if let Err(e) = std::fs::write(&out, text) {
            eprintln!("{out}: {e}");
            std::process::exit(1);
        }
    }
}
