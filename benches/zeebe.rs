//! Camunda 8 clients against postfach's own API, in the same run on the same
//! machine, each side on a fresh `postfach run` (the order model of
//! `bpmn/auftrag-zeebe.bpmn`, N orders started over HTTP before the clock):
//!
//! - workers: Camunda's Java client (8.9.0) completing N `auftragUebergeben`
//!   jobs over Zeebe's gateway protocol (a polling `JobWorker`, up to 100
//!   jobs active, each completed in its handler, which waits for the
//!   answer), against a worker of postfach's own HTTP API in the same JVM
//!   (`POST /jobs/acquire` of 100, then `POST /jobs/{id}/complete` for each,
//!   one keep-alive connection); both after 2,000 jobs untimed, which warm
//!   the JIT. The same HTTP worker written in Rust on a raw socket is the
//!   reference of what the server takes. Jobs per second each.
//! - publishing: `PublishMessage` with 64 concurrent calls (tonic, the gRPC
//!   library postfach serves with, over 8 connections) against `POST
//!   /messages` on 64 keep-alive connections; every message buffered, so each
//!   is one durable write. Messages per second each.
//! - streaming: a `StreamActivatedJobs` worker (tonic) open while orders are
//!   started one after another over gRPC; the time from the start call to
//!   the job reaching the worker, p50 and p99.
//!
//! The sides run alternately, `POSTFACH_ZEEBE_RUNS` times (default 3); the
//! table gives medians and the ratios.
//!
//! cargo bench --bench zeebe

#[path = "support/mod.rs"]
mod support;

use postfach::server::zeebe::proto::{self, gateway_client::GatewayClient};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const CONNECTIONS: usize = 64;

/// A `postfach run` with Zeebe's gateway protocol on a free port.
struct Server {
    child: Child,
    http: String,
    grpc: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = support::bench_dir();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let grpc = format!("127.0.0.1:{port}");
        let mut cmd =
            support::reference_run(env!("CARGO_BIN_EXE_postfach"), &dir.path().join("run.redb"));
        cmd.args(["--zeebe-listen", &grpc]);
        let (child, http) = support::spawn_listening(cmd);
        let s = Server {
            child,
            http,
            grpc,
            _dir: dir,
        };
        let model = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/bpmn/auftrag-zeebe.bpmn"
        ))
        .unwrap();
        let (status, body) = s.call(
            "POST",
            "/deployments",
            &json!({"xml": model, "file": "auftrag-zeebe.bpmn"}),
        );
        assert!(status == 200 || status == 201, "deploy: {status} {body}");
        s
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let mut s = TcpStream::connect(&self.http).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        request(&mut s, &mut r, method, path, body)
    }

    /// `n` orders started over HTTP on 8 connections.
    fn orders(&self, n: usize, prefix: &str) {
        std::thread::scope(|scope| {
            for c in 0..8 {
                scope.spawn(move || {
                    let mut s = TcpStream::connect(&self.http).unwrap();
                    s.set_nodelay(true).unwrap();
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    for i in (c..n).step_by(8) {
                        let body = json!({"process": "auftrag-zeebe",
                            "variables": {"auftragId": format!("{prefix}-{i}")}});
                        let (status, v) = request(&mut s, &mut r, "POST", "/instances", &body);
                        assert_eq!(status, 201, "{v}");
                    }
                });
            }
        });
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a keep-alive connection, its answer read whole.
fn request(
    s: &mut TcpStream,
    r: &mut BufReader<TcpStream>,
    method: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let body = body.to_string();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let code: u16 = status.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
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
    r.read_exact(&mut answer).unwrap();
    (code, serde_json::from_slice(&answer).unwrap_or(Value::Null))
}

/// postfach's own HTTP worker: acquire 100, complete each; jobs per second.
fn http_worker(n: usize) -> f64 {
    let srv = Server::start();
    srv.orders(n, "h");
    let mut s = TcpStream::connect(&srv.http).unwrap();
    s.set_nodelay(true).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let started = Instant::now();
    let mut done = 0;
    while done < n {
        let acquire =
            json!({"topic": "auftragUebergeben", "worker": "bench", "max": 100, "lease_ms": 60000});
        let (status, v) = request(&mut s, &mut r, "POST", "/jobs/acquire", &acquire);
        assert_eq!(status, 200, "{v}");
        for job in v["jobs"].as_array().unwrap() {
            let path = format!("/jobs/{}/complete", job["job"].as_str().unwrap());
            let body = json!({"lease_token": job["lease_token"]});
            let (status, v) = request(&mut s, &mut r, "POST", &path, &body);
            assert_eq!(status, 200, "{v}");
            done += 1;
        }
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// The class path of Camunda's Java client with `BenchWorker` compiled.
fn java_classpath() -> String {
    let dir = std::path::Path::new("target/bench-java");
    std::fs::create_dir_all(dir.join("classes")).unwrap();
    let listed = dir.join("classpath.txt");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/zeebe/java");
    if !listed.exists() {
        let ok = Command::new("mvn")
            .args(["-q", "-B", "-f", &format!("{fixtures}/pom.xml")])
            .arg("dependency:build-classpath")
            .arg(format!(
                "-Dmdep.outputFile={}",
                std::fs::canonicalize(dir)
                    .unwrap()
                    .join("classpath.txt")
                    .display()
            ))
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "mvn: Camunda's Java client");
    }
    let cp = std::fs::read_to_string(&listed).unwrap().trim().to_string();
    let ok = Command::new("javac")
        .args(["-cp", &cp, "-d"])
        .arg(dir.join("classes"))
        .arg(format!("{fixtures}/BenchWorker.java"))
        .status()
        .unwrap();
    assert!(ok.success(), "javac BenchWorker.java");
    format!("{}:{cp}", dir.join("classes").display())
}

/// Jobs not counted, run first in every Java worker: the JIT compiles what
/// runs hot.
const WARM: usize = 2_000;

/// A Java worker (`worker`: Camunda's JobWorker over gRPC; `http`:
/// postfach's HTTP API from the same JVM); jobs per second.
fn java_worker(classpath: &str, n: usize, mode: &str) -> f64 {
    let srv = Server::start();
    srv.orders(WARM + n, "j");
    let o = Command::new("java")
        .args(["-cp", classpath, "BenchWorker", &srv.grpc, &srv.http])
        .args(["auftragUebergeben", &WARM.to_string(), &n.to_string(), mode])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "BenchWorker {mode}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let seconds: f64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    n as f64 / seconds
}

/// `POST /messages` on 64 keep-alive connections; messages per second.
fn http_publish(total: usize) -> f64 {
    let srv = Server::start();
    let per = total / CONNECTIONS;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for c in 0..CONNECTIONS {
            let addr = srv.http.clone();
            scope.spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_nodelay(true).unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                for i in 0..per {
                    let body = json!({"name": "AuftragAbgeschlossen", "key": format!("k-{c}-{i}"),
                        "id": format!("m-{c}-{i}"), "variables": {"erledigtePositionen": i}});
                    let (status, v) = request(&mut s, &mut r, "POST", "/messages", &body);
                    assert_eq!(status, 200, "{v}");
                }
            });
        }
    });
    (per * CONNECTIONS) as f64 / started.elapsed().as_secs_f64()
}

async fn client(addr: &str) -> GatewayClient<tonic::transport::Channel> {
    GatewayClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// `PublishMessage` with 64 concurrent calls; messages per second.
fn grpc_publish(total: usize) -> f64 {
    let srv = Server::start();
    let per = total / CONNECTIONS;
    support::rt().block_on(async {
        let mut channels = Vec::new();
        for _ in 0..8 {
            channels.push(client(&srv.grpc).await);
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..CONNECTIONS {
            let mut g = channels[c % channels.len()].clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..per {
                    g.publish_message(proto::PublishMessageRequest {
                        name: "AuftragAbgeschlossen".into(),
                        correlation_key: format!("k-{c}-{i}"),
                        message_id: format!("m-{c}-{i}"),
                        time_to_live: 3_600_000,
                        variables: json!({"erledigtePositionen": i}).to_string(),
                        tenant_id: String::new(),
                    })
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        (per * CONNECTIONS) as f64 / started.elapsed().as_secs_f64()
    })
}

/// Orders started one by one while a stream is open: milliseconds from
/// each start call to its job reaching the worker.
fn stream_latencies(n: usize) -> Vec<f64> {
    let srv = Server::start();
    support::rt().block_on(async {
        let mut g = client(&srv.grpc).await;
        let mut stream = g
            .stream_activated_jobs(proto::StreamActivatedJobsRequest {
                r#type: "auftragUebergeben".into(),
                worker: "bench".into(),
                timeout: 60_000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        // the stream is registered before the first order
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut out = Vec::new();
        for i in 0..n {
            let t0 = Instant::now();
            g.create_process_instance(proto::CreateProcessInstanceRequest {
                bpmn_process_id: "auftrag-zeebe".into(),
                version: -1,
                variables: json!({"auftragId": format!("s-{i}")}).to_string(),
                ..Default::default()
            })
            .await
            .unwrap();
            let job = stream.message().await.unwrap().unwrap();
            out.push(t0.elapsed().as_secs_f64() * 1e3);
            g.complete_job(proto::CompleteJobRequest {
                job_key: job.key,
                ..Default::default()
            })
            .await
            .unwrap();
        }
        out
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let commit = support::measured_commit();
    let runs = support::env_or("POSTFACH_ZEEBE_RUNS", 3).max(1);
    let jobs = support::env_or("POSTFACH_ZEEBE_JOBS", 5_000) as usize;
    let publishes = support::env_or("POSTFACH_ZEEBE_PUBLISHES", 20_000) as usize;
    let streamed = support::env_or("POSTFACH_ZEEBE_STREAMED", 500) as usize;
    let classpath = java_classpath();
    let (mut java, mut http, mut grpc_pub, mut http_pub) = (vec![], vec![], vec![], vec![]);
    let mut rust_http = vec![];
    for r in 0..runs as usize {
        http.push(java_worker(&classpath, jobs, "http"));
        java.push(java_worker(&classpath, jobs, "worker"));
        rust_http.push(http_worker(jobs));
        http_pub.push(http_publish(publishes));
        grpc_pub.push(grpc_publish(publishes));
        println!(
            "run {r}: Java HTTP worker {:.0}/s, Java gRPC JobWorker {:.0}/s, Rust HTTP worker {:.0}/s, HTTP publish {:.0}/s, gRPC publish {:.0}/s",
            http[r], java[r], rust_http[r], http_pub[r], grpc_pub[r]
        );
    }
    let latencies = stream_latencies(streamed);
    let (p50, p99) = (
        quantile(latencies.clone(), 0.5),
        quantile(latencies.clone(), 0.99),
    );
    let (w, p) = (
        median(java.clone()) / median(http.clone()),
        median(grpc_pub.clone()) / median(http_pub.clone()),
    );
    let md = format!(
        "| what | Camunda 8 face | postfach's own HTTP API | ratio |\n| --- | ---: | ---: | ---: |\n\
         | Java job worker ({jobs} jobs; Camunda's JobWorker over gRPC vs acquire 100 + complete each over HTTP) | {:.0} jobs/s | {:.0} jobs/s | {w:.2}× |\n\
         | publishing ({publishes} messages, 64 concurrent; PublishMessage vs POST /messages) | {:.0} /s | {:.0} /s | {p:.2}× |\n\n\
         StreamActivatedJobs, from the start call to the job at the worker ({streamed} orders one by one): p50 {p50:.2} ms, p99 {p99:.2} ms. \
         The HTTP worker in Rust on a raw socket, for reference: {:.0} jobs/s.\n\n\
         Medians of {runs} alternating runs.\n",
        median(java.clone()),
        median(http.clone()),
        median(grpc_pub.clone()),
        median(http_pub.clone()),
        median(rust_http.clone()),
    );
    println!("\n{md}");
    let doc = json!({
        "commit": commit, "runs": runs, "jobs": jobs, "publishes": publishes,
        "java_worker_per_s": java, "java_http_worker_per_s": http, "rust_http_worker_per_s": rust_http,
        "grpc_publish_per_s": grpc_pub, "http_publish_per_s": http_pub,
        "stream_ms": {"p50": p50, "p99": p99, "samples": streamed},
        "worker_ratio": w, "publish_ratio": p,
    });
    support::keep_results("zeebe", &commit, &md, &doc);
}
