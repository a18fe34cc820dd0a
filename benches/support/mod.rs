//! Shared by the benchmarks: a 2-thread runtime and a database directory on the
//! project's disk (never a tmpfs, so every fsync is real).
#![allow(dead_code)]

#[cfg(feature = "pubsub")]
pub mod go_null;

/// The benchmarks measure what the binary runs: its allocator too (the
/// feature `mimalloc`, on by default; off, the system's).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Starts `cmd` (a `postfach run` or `gateway`, its stderr piped) and
/// returns it with the address it printed that it listens on; its further
/// log lines are drained.
pub fn spawn_listening(mut cmd: std::process::Command) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the postfach binary starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the process ended before it listened")
            .unwrap();
        if let Some(rest) = line.split(" on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    (child, addr)
}

/// Keeps a run's figures: `bench-results/NAME.md` (the table, after the
/// commit) and `bench-results/NAME.json`.
pub fn keep_results(name: &str, commit: &str, md: &str, doc: &serde_json::Value) {
    std::fs::create_dir_all("bench-results").unwrap();
    std::fs::write(
        format!("bench-results/{name}.md"),
        format!("commit {commit}\n\n{md}"),
    )
    .unwrap();
    std::fs::write(
        format!("bench-results/{name}.json"),
        serde_json::to_string_pretty(doc).unwrap(),
    )
    .unwrap();
}

/// A process with a message catch right after its start (`warten`, message
/// `Fertig`, correlated by `key`): instances that only wait.
pub const WAITING_MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="bench">
  <message id="m" name="Fertig"/>
  <process id="warten" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="c"/>
    <intermediateCatchEvent id="c"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="c" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

/// `binary run` of the reference model on the database `db`, on a free
/// port, from the project's directory (more arguments may follow).
pub fn reference_run(binary: &str, db: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(binary);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--db")
        .arg(db)
        .args([
            "run",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
            "--listen",
            "127.0.0.1:0",
        ]);
    cmd
}

/// 64 publishers on `pf` until `stop`: caller `c` publishes `next(c, i)`
/// for i = 0, 1, … (a `None` is skipped); the latency of each publish,
/// sorted.
pub async fn publishers<F>(
    pf: &postfach::Postfach,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    next: F,
) -> Vec<std::time::Duration>
where
    F: Fn(u64, u64) -> Option<postfach::Publish> + Clone + Send + 'static,
{
    let mut tasks = Vec::new();
    for c in 0..64u64 {
        let (pf, stop, next) = (pf.clone(), stop.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let Some(msg) = next(c, i) else { continue };
                let t = std::time::Instant::now();
                pf.publish(msg).await.unwrap();
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    all
}

/// The `q` quantile of `sorted`.
pub fn quantile(sorted: &[std::time::Duration], q: f64) -> std::time::Duration {
    sorted[((sorted.len() as f64 - 1.0) * q) as usize]
}

/// The number in environment variable `name`, else `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
