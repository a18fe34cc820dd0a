//! How much of the vendors' BPMN postfach runs as drawn: every `.bpmn` /
//! `.bpmn20.xml` file under the given directories is parsed as `postfach
//! deploy` parses it, and the result is counted — deployed, deployable once a
//! correlation key is given at deploy, refused (by element type or problem),
//! or a panic (must stay 0).
//!
//!     cargo run --release --example vendor_sweep -- DIR [DIR …]
//!
//! `benches/vendor_sweep.sh` gets the test models of Flowable, Camunda 7 and
//! Zeebe and runs this over each.
use postfach::model::{ParseError, parse_report};
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

/// The reason a refusal counts under: the element type refused, or the first
/// words of a problem (its ids and names left out, so equal problems group).
fn reasons(e: &ParseError) -> Vec<String> {
    match e {
        ParseError::Unsupported { items, .. } => items
            .iter()
            .map(|u| format!("unsupported: {}", u.kind))
            .collect(),
        ParseError::Invalid { issues, .. } => issues
            .iter()
            .map(|i| {
                let words: Vec<&str> = i
                    .message
                    .split_whitespace()
                    .filter(|w| !w.contains('\'') && !w.contains('"'))
                    .take(7)
                    .collect();
                format!("problem: {}", words.join(" "))
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

fn main() {
    let dirs: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        eprintln!("usage: vendor_sweep DIR [DIR …]");
        std::process::exit(2);
    }
    std::panic::set_hook(Box::new(|_| {}));
    for dir in dirs {
        let mut files = Vec::new();
        models(&dir, &mut files);
        files.sort();
        let (mut deployed, mut with_keys, mut refused, mut panics) = (0, 0, 0, 0);
        let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
        for f in &files {
            let Ok(bytes) = std::fs::read(f) else {
                continue;
            };
            let xml = String::from_utf8_lossy(&bytes).into_owned();
            let name = f.display().to_string();
            let parsed = std::panic::catch_unwind(|| {
                parse_report(&name, &xml, &BTreeMap::new()).map(|_| ())
            });
            match parsed {
                Err(_) => {
                    panics += 1;
                    println!("PANIC {name}");
                }
                Ok(Ok(())) => deployed += 1,
                Ok(Err(e)) => {
                    // refused only for keys: a deploy that gives them runs it
                    let only_keys = matches!(&e, ParseError::Invalid { issues, .. }
                        if issues.iter().all(|i| i.missing_key_for.is_some()));
                    if only_keys {
                        with_keys += 1;
                    } else {
                        refused += 1;
                        let mut seen: Vec<String> = reasons(&e);
                        seen.sort();
                        seen.dedup();
                        for r in seen {
                            *by_reason.entry(r).or_default() += 1;
                        }
                    }
                }
            }
        }
        let n = files.len().max(1) as f64;
        println!(
            "{}: {} files; deploy as drawn {} ({:.1} %); with a correlation key given at deploy {} more ({:.1} % in all); refused {}; panics {}",
            dir.display(),
            files.len(),
            deployed,
            100.0 * deployed as f64 / n,
            with_keys,
            100.0 * (deployed + with_keys) as f64 / n,
            refused,
            panics
        );
        let mut top: Vec<(String, usize)> = by_reason.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (reason, count) in top.iter().take(25) {
            println!("  {count:>5} files  {reason}");
        }
    }
}
