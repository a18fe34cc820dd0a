//! A host that embeds only the engine builds postfach with
//! `default-features = false`. CI runs the README's `cargo test` once, with
//! the default features; this test runs the library's tests and every
//! scenario that needs no server once more without them, so a change that
//! breaks the embeddable build — or a test that needs the command line but
//! does not say so — fails CI. It builds into `target/engine-alone` (the
//! running `cargo test` holds its own target directory).
#![cfg(feature = "server")]

use std::process::Command;

#[test]
fn the_engine_alone_builds_and_passes_its_tests() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(cargo)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", format!("{root}/target/engine-alone"))
        .args(["test", "--no-default-features", "--no-fail-fast", "-q"])
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    assert!(
        out.status.success(),
        "cargo test --no-default-features failed:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    let passed: usize = text
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(
        passed > 300,
        "the engine's tests ran without the default features ({passed} passed)"
    );
}
