//! Publishing over the HTTP API: `POST /messages` on 64 keep-alive
//! connections against a `postfach run` process (each message buffered, so
//! each is one durable write; concurrent ones share a group commit). The
//! figure is messages per second from the first request to the last answer.
//!
//! With `POSTFACH_BENCH_BASELINE=PATH` (the `postfach` binary of an earlier
//! commit) the two binaries run alternately, `POSTFACH_HTTP_RUNS` times each
//! (default 3), and the table gives each one's median and their ratio: a
//! change to the API's edge (routing, catalogue, auth layer) is judged on the
//! same machine in the same minutes.
//!
//! cargo bench --bench http
//! POSTFACH_BENCH_BASELINE=/tmp/postfach-before cargo bench --bench http

#[path = "support/mod.rs"]
mod support;

use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Instant;

const CONNECTIONS: usize = 64;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A `postfach run` of the reference model on a fresh database.
struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(binary: &str) -> Server {
        let dir = support::bench_dir();
        let cmd = support::reference_run(binary, &dir.path().join("run.redb"));
        let (child, addr) = support::spawn_listening(cmd);
        Server {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One keep-alive connection's share: `n` publishes, each answered before
/// the next is sent.
fn publish_on_one_connection(addr: &str, conn: usize, n: usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for i in 0..n {
        let body = json!({
            "name": "AuftragAbgeschlossen",
            "key": format!("k-{conn}-{i}"),
            "id": format!("m-{conn}-{i}"),
            "variables": {"erledigtePositionen": i},
        })
        .to_string();
        write!(
            s,
            "POST /messages HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "publish answered {status}");
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut answer = vec![0u8; length];
        reader.read_exact(&mut answer).unwrap();
    }
}

/// Messages per second of `total` publishes on [`CONNECTIONS`] connections.
fn run_once(binary: &str, total: usize) -> f64 {
    let server = Server::start(binary);
    let per = total / CONNECTIONS;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for conn in 0..CONNECTIONS {
            let addr = server.addr.clone();
            scope.spawn(move || publish_on_one_connection(&addr, conn, per));
        }
    });
    (per * CONNECTIONS) as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let total = env_or("POSTFACH_HTTP_N", 20_000) as usize;
    let runs = env_or("POSTFACH_HTTP_RUNS", 3).max(1);
    let current = env!("CARGO_BIN_EXE_postfach").to_string();
    let baseline = std::env::var("POSTFACH_BENCH_BASELINE").ok();
    let mut now = Vec::new();
    let mut before = Vec::new();
    for r in 0..runs {
        if let Some(b) = &baseline {
            before.push(run_once(b, total));
            println!("run {r}: baseline {:.0}/s", before.last().unwrap());
        }
        now.push(run_once(&current, total));
        println!("run {r}: this commit {:.0}/s", now.last().unwrap());
    }
    let mut md = format!(
        "| binary | publishes | connections | runs | median publishes/s |\n| --- | ---: | ---: | ---: | ---: |\n| this commit ({commit}) | {total} | {CONNECTIONS} | {runs} | {:.0} |\n",
        median(now.clone())
    );
    if let Some(b) = &baseline {
        md.push_str(&format!(
            "| baseline ({}) | {total} | {CONNECTIONS} | {runs} | {:.0} |\n\nthis commit vs baseline: {:.2}×\n",
            std::path::Path::new(b)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            median(before.clone()),
            median(now.clone()) / median(before.clone())
        ));
    }
    println!("\n{md}");
    let doc = json!({
        "commit": commit,
        "publishes": total,
        "connections": CONNECTIONS,
        "runs": runs,
        "per_s": now,
        "baseline": baseline,
        "baseline_per_s": before,
    });
    support::keep_results("http", &commit, &md, &doc);
}
