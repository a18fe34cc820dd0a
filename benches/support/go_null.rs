//! Google's Go Pub/Sub client as a null consumer (`benches/go-null-consumer`):
//! the peer that the ingest and cluster benchmarks drain the same backlog with.

use postfach::ingress::ACK_LATENCY_BOUNDS;
use postfach::pubsub::Emulator;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

const PROJECT: &str = super::PROJECT;

/// Google's Go client as a null consumer, in its own process.
pub struct GoNull {
    child: Child,
    pub seen: Arc<std::sync::Mutex<(u64, Vec<u64>)>>,
}

impl GoNull {
    /// Builds the peer with `go build` (modules from the Go module proxy).
    pub fn build() -> std::path::PathBuf {
        let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/go-null-consumer");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/benches/go-null-consumer"
            ))
            .status()
            .expect("the Go toolchain (go) is needed for the Go peer");
        assert!(
            status.success(),
            "go build of benches/go-null-consumer failed"
        );
        out
    }

    pub fn start(
        bin: &std::path::Path,
        emulator: &Emulator,
        subscription: &str,
        streams: u32,
    ) -> GoNull {
        let bounds = ACK_LATENCY_BOUNDS
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut child = Command::new(bin)
            .args(["-project", PROJECT, "-subscription", subscription])
            .args(["-streams", &streams.to_string(), "-bounds", &bounds])
            .env("PUBSUB_EMULATOR_HOST", emulator.host())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("go-null-consumer");
        let seen: Arc<std::sync::Mutex<(u64, Vec<u64>)>> = Default::default();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let into = seen.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut fields = line
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|v| v.parse().ok());
                if let Some(acked) = fields.next() {
                    *into.lock().unwrap() = (acked, fields.collect());
                }
            }
        });
        GoNull { child, seen }
    }
}

impl Drop for GoNull {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GoNull {
    /// Deliveries it acked so far.
    pub fn acked(&self) -> u64 {
        self.seen.lock().unwrap().0
    }
}
