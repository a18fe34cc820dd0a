//! Shared by the benchmarks: a 2-thread runtime and a database directory on the
//! project's disk (never a tmpfs, so every fsync is real).
#![allow(dead_code)]

#[cfg(feature = "pubsub")]
pub mod go_null;

/// The Pub/Sub project the benchmarks use on their emulator.
pub const PROJECT: &str = "postfach-bench";

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn bench_dir() -> tempfile::TempDir {
    std::fs::create_dir_all("target/bench-db").unwrap();
    tempfile::tempdir_in("target/bench-db").unwrap()
}

/// The commit the run measures (`git describe --always --dirty`, taken when
/// the run starts), so a figure in the README can name what produced it;
/// "unknown" outside a checkout.
pub fn measured_commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
