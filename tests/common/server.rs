//! A `postfach run` child process on an ephemeral port, and a plain HTTP/1.1 client.
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub addr: String,
    pub db: std::path::PathBuf,
    /// What the server logged before it listened.
    pub startup_log: Vec<String>,
    /// What it logged after that (collected until it exits).
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    drain: Option<std::thread::JoinHandle<()>>,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    pub fn start(listen: &str, token: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = vec!["--listen".into(), listen.into()];
        if !listen.starts_with("127.") {
            // plain HTTP beyond loopback is asked for, as behind a proxy
            args.push("--insecure-plaintext".into());
        }
        if let Some(t) = token {
            let p = dir.path().join("token");
            std::fs::write(&p, t).unwrap();
            args.push("--token-file".into());
            args.push(p.display().to_string());
        }
        let mut s = Server::launch(dir.path(), &args, &[]);
        s._dir = Some(dir);
        s
    }

    /// `postfach run` of the reference model on `dir/run.redb` with its invoice
    /// ledger in `dir/invoices.tsv`, plus `args` and `env`; listens on an
    /// ephemeral port and keeps its ledger there unless `args` says otherwise.
    pub fn launch(dir: &std::path::Path, args: &[String], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("--db")
            .arg(dir.join("run.redb"))
            .args([
                "run",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--correlation-key",
                "AuftragAbgeschlossen=auftragId",
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if !args.iter().any(|a| a == "--invoice-ledger") {
            // a cluster's partitions share one invoice system: one ledger
            cmd.arg("--invoice-ledger").arg(dir.join("invoices.tsv"));
        }
        if !args.iter().any(|a| a == "--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        if !args.iter().any(|a| a == "--zeebe-listen") {
            // parallel tests would race for Zeebe's port 26500
            cmd.args(["--zeebe-listen", "none"]);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!(
                    "postfach run ended before it listened:\n{}",
                    seen.join("\n")
                );
            };
            if let Some(rest) = line.split("HTTP API on ").nth(1) {
                let url = rest.split_whitespace().next().unwrap();
                break url.split("://").nth(1).unwrap_or(url).to_string();
            }
            seen.push(line);
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let drain = {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in lines.map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            })
        };
        let port = addr.rsplit(':').next().unwrap().to_string();
        Server {
            child,
            addr: format!("127.0.0.1:{port}"),
            db: dir.join("run.redb"),
            startup_log: seen,
            log,
            drain: Some(drain),
            _dir: None,
        }
    }

    /// SIGKILL: no shutdown, no flush, no ack.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Prometheus text of `/metrics`.
    pub fn metrics(&self) -> String {
        self.call("GET", "/metrics", None, None).1
    }

    /// One sample of `/metrics` (the line starting with `series `), or 0.
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> (u16, String) {
        call(&self.addr, method, path, body, token)
    }

    pub fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, text) = self.call(method, path, body.as_ref(), None);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub fn wait_for(&self, path: &str, what: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, v) = self.json("GET", path, None);
            if what(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never reached the expected state: {v}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The provider's worker over HTTP: acquires `n` hand-over jobs (the
    /// reference model's unbound send task waits as a job on its own topic),
    /// polling while the executor has not created them yet, and completes them.
    pub fn hand_over(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut done = 0;
        while done < n {
            let (status, got) = self.json(
                "POST",
                "/jobs/acquire",
                Some(serde_json::json!({"topic": "auftragUebergeben", "worker": "provider", "max": n - done, "lease_ms": 60_000})),
            );
            assert_eq!(status, 200, "{got}");
            for j in got["jobs"].as_array().unwrap() {
                let (status, body) = self.json(
                    "POST",
                    &format!("/jobs/{}/complete", j["job"].as_str().unwrap()),
                    Some(serde_json::json!({"lease_token": j["lease_token"]})),
                );
                assert_eq!(status, 200, "{body}");
                done += 1;
            }
            assert!(
                Instant::now() < deadline,
                "only {done} of {n} hand-overs became due"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM and returns at once.
    pub fn signal_term(&self) {
        sigterm(self.child.id());
    }

    /// The exit status once the server ended, waiting at most `within`.
    pub fn exited_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged after it listened, so far.
    pub fn log_so_far(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn stop(mut self) -> std::process::ExitStatus {
        sigterm(self.child.id());
        self.child.wait().unwrap()
    }

    /// SIGTERM, and everything the server logged after it listened.
    pub fn stop_with_log(mut self) -> (std::process::ExitStatus, Vec<String>) {
        sigterm(self.child.id());
        let status = self.child.wait().unwrap();
        if let Some(d) = self.drain.take() {
            let _ = d.join();
        }
        let log = std::mem::take(&mut *self.log.lock().unwrap());
        (status, log)
    }
}

/// One HTTP/1.1 request to `addr`: status and body.
pub fn call(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status: u16 = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// One JSON request to `addr`: status and body (null when it is not JSON).
pub fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let (status, text) = call(addr, method, path, body, None);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn sigterm(pid: u32) {
    Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
}

impl Drop for Server {
    fn drop(&mut self) {
        // a failing test must not leave a server behind
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `postfach gateway` child process in front of partitions at `addrs`.
pub struct Gateway {
    child: Child,
    pub addr: String,
}

impl Gateway {
    pub fn start(partitions: &[String]) -> Gateway {
        Self::start_with(partitions, &[])
    }

    /// A gateway with more arguments (`--config`, `--token-file`).
    pub fn start_with(partitions: &[String], args: &[&str]) -> Gateway {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
        cmd.args(["gateway", "--listen", "127.0.0.1:0"]).args(args);
        for (i, addr) in partitions.iter().enumerate() {
            cmd.arg("--partition-url").arg(format!("{i}=http://{addr}"));
        }
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the gateway ended before it listened")
                .unwrap();
            if let Some(rest) = line
                .split(" on http://")
                .nth(1)
                .or_else(|| line.split(" on https://").nth(1))
            {
                break rest.trim().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Gateway { child, addr }
    }

    pub fn json(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(&self.addr, method, path, body.as_ref())
    }

    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--server")
            .arg(format!("http://{}", self.addr))
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` consecutive free ports on loopback (bound once and released), for
/// processes that must know each other's address before they start.
pub fn free_ports(n: u16) -> u16 {
    // every call of this process starts elsewhere: two ports asked for
    // before either is bound must not be the same
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut seed = std::process::id() as u64 * 7919 + n as u64 + call * 104_729;
    loop {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let base = 20_000 + (seed >> 33) as u16 % 30_000;
        if (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
}

/// `dir/postfach.toml` with `[auth] tokens_file` naming `dir/tokens.toml`,
/// which holds one named token per `(name, token, role)`, kept as its
/// SHA-256; returns the configuration's path.
pub fn tokens_config(dir: &std::path::Path, tokens: &[(&str, &str, &str)]) -> String {
    use sha2::Digest;
    let mut file = String::new();
    for (name, token, role) in tokens {
        let sum: String = sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        file.push_str(&format!(
            "[[token]]\nname = \"{name}\"\nsha256 = \"{sum}\"\nroles = [\"{role}\"]\n\n"
        ));
    }
    std::fs::write(dir.join("tokens.toml"), file).unwrap();
    let cfg = dir.join("postfach.toml");
    let path = dir.join("tokens.toml").display().to_string();
    std::fs::write(&cfg, format!("[auth]\ntokens_file = {path:?}\n")).unwrap();
    cfg.display().to_string()
}

/// `postfach --json --server URL ARGS`, holding `token` when given, which
/// must succeed: its JSON answer (null when it printed none).
pub fn cli_ok(url: &str, token: Option<&str>, args: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(t) = token {
        cmd.env("POSTFACH_TOKEN", t);
    }
    let o = cmd
        .args(["--json", "--server", url])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// The completed instances of `process`, asked until there are `expected`
/// of them or 30 s have passed: a client may count its last job done when
/// the answer to its completion is still on the way.
pub fn completed(url: &str, token: Option<&str>, process: &str, expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let done = cli_ok(
            url,
            token,
            &["instances", "--state", "completed", "--process", process],
        );
        let n = done["instances"].as_array().map_or(0, |a| a.len());
        if n >= expected || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
