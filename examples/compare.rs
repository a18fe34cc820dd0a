//! The side-by-side benchmark driver (run it through `benches/compare.sh`):
//! postfach against the Flowable-backed receivers of the article, each behind
//! its own copy of the same Pub/Sub topics on one emulator, with one seeded
//! workload and one SIGKILL of the receiver mid-stream.
//!
//! Workload per contender (seed 4711): N orders; 30 % of the completions are
//! published before their order exists, 5 % twice; 0.5 % of N undecodable
//! payloads; five orders started twice (two waiting subscriptions for one key:
//! the repair's second token); after the drain, a second completion with a new
//! id for 1 % of the orders, already invoiced. The provider simulator answers
//! every other order when the send task hands it over on the orders topic.
//!
//! Before that, in a receiver life of its own on a topic of its own, the
//! capacity under a backlog: `--burst` orders (default min(2N, 2,000)) are
//! started and handed over, so each waits at the catch event; then all their
//! completions are published at once and timed until correlated (after a
//! warm-up burst of a tenth, for the JIT's sake).
//!
//! Measured per contender: completions correlated; orders invoiced, and twice;
//! messages lost (published, never correlated, retained nowhere); retained for
//! a human (parked / dead-letter topic / inbox); redeliveries; time to drain;
//! throughput of the chaos run and under the backlog; p50/p99 publish →
//! correlation; CPU seconds; peak RSS; time from the restart after the kill
//! until the receiver is ready and until the first correlation.

use google_cloud_pubsub::model::Message;
use postfach::pubsub::{Connection, Emulator, SubscriptionOptions};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PROJECT: &str = "compare";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

use postfach::demo::Rng;

fn order(i: usize) -> String {
    format!("A-{i:06}")
}

/// The seeded workload, the same for every contender.
#[derive(Clone)]
struct Plan {
    n: usize,
    early: Vec<bool>,
    twice: Vec<bool>,
    again: Vec<usize>,
    ambiguous: Vec<usize>,
    malformed: usize,
}

impl Plan {
    fn new(n: usize, early: f64, seed: u64) -> Plan {
        let mut rng = Rng(seed);
        let early_v: Vec<bool> = (0..n).map(|_| rng.chance(early)).collect();
        let twice: Vec<bool> = (0..n).map(|_| rng.chance(0.05)).collect();
        let ambiguous: Vec<usize> = (0..n).filter(|&i| !early_v[i]).take(5).collect();
        let again: Vec<usize> = (0..n)
            .filter(|i| !ambiguous.contains(i))
            .filter(|_| rng.chance(0.01))
            .collect();
        Plan {
            n,
            early: early_v,
            twice,
            again,
            ambiguous,
            malformed: (n / 200).max(1),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Postfach,
    Naive,
    NackDlt,
    Inbox,
}

#[derive(Clone)]
struct Contender {
    name: String,
    kind: Kind,
    pg: bool,
}

impl Contender {
    fn parse(s: &str) -> Contender {
        let (kind, pg) = match s {
            "postfach" => (Kind::Postfach, false),
            "naive-h2" => (Kind::Naive, false),
            "naive-pg" => (Kind::Naive, true),
            "nack-dlt-h2" => (Kind::NackDlt, false),
            "nack-dlt-pg" => (Kind::NackDlt, true),
            "inbox-h2" => (Kind::Inbox, false),
            "inbox-pg" => (Kind::Inbox, true),
            other => panic!("unknown contender {other}"),
        };
        Contender {
            name: s.into(),
            kind,
            pg,
        }
    }
    fn variant(&self) -> &'static str {
        match self.kind {
            Kind::Postfach => "postfach",
            Kind::Naive => "naive",
            Kind::NackDlt => "nack-dlt",
            Kind::Inbox => "inbox",
        }
    }
}

struct Args {
    orders: usize,
    early: f64,
    seed: u64,
    contenders: Vec<Contender>,
    out: PathBuf,
    java_cp: String,
    pg_bin: PathBuf,
    quiet: Duration,
    limit: Duration,
    burst: Option<usize>,
    burst_limit: Duration,
    merge: Option<PathBuf>,
    /// Draw compare.svg from this compare.json and run nothing.
    chart_only: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        orders: 500,
        early: 0.30,
        seed: 4711,
        contenders: "postfach,naive-h2,nack-dlt-h2,inbox-h2,naive-pg,nack-dlt-pg,inbox-pg"
            .split(',')
            .map(Contender::parse)
            .collect(),
        out: "bench-results".into(),
        java_cp: String::new(),
        pg_bin: "/usr/lib/postgresql/15/bin".into(),
        quiet: Duration::from_secs(90),
        limit: Duration::from_secs(420),
        burst: None,
        burst_limit: Duration::from_secs(180),
        merge: None,
        chart_only: None,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--orders" => a.orders = val.parse().expect("--orders N"),
            "--early" => a.early = val.parse().expect("--early SHARE"),
            "--seed" => a.seed = val.parse().expect("--seed N"),
            "--contenders" => a.contenders = val.split(',').map(Contender::parse).collect(),
            "--out" => a.out = val.into(),
            "--java-cp" => a.java_cp = val,
            "--pg-bin" => a.pg_bin = val.into(),
            "--quiet" => a.quiet = Duration::from_secs(val.parse().expect("--quiet SECONDS")),
            "--limit" => a.limit = Duration::from_secs(val.parse().expect("--limit SECONDS")),
            "--burst" => a.burst = Some(val.parse().expect("--burst N")),
            "--burst-limit" => {
                a.burst_limit = Duration::from_secs(val.parse().expect("--burst-limit SECONDS"))
            }
            "--merge" => a.merge = Some(val.into()),
            "--chart-only" => a.chart_only = Some(val.into()),
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// A throwaway PostgreSQL cluster on a loopback port, stopped on drop.
struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Postgres {
    fn start(bin: &Path, root: &Path) -> Postgres {
        let dir = root.join("pgdata");
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        // initdb refuses root: the cluster belongs to the postgres user
        run_as_postgres(&format!("chown -R postgres {}", root.display()), true);
        run_as_postgres(
            &format!(
                "{}/initdb -D {} -U postgres --auth=trust -E UTF8 >/dev/null",
                bin.display(),
                dir.display()
            ),
            false,
        );
        run_as_postgres(
            &format!(
                "{}/pg_ctl -D {} -l {}/pg.log -w -o \"-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200\" start >/dev/null",
                bin.display(),
                dir.display(),
                root.display(),
                dir.display()
            ),
            false,
        );
        Postgres {
            bin: bin.into(),
            dir,
            port,
        }
    }

    fn create_db(&self, name: &str) -> String {
        let status = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-q",
                "-c",
            ])
            .arg(format!("CREATE DATABASE \"{name}\""))
            .status()
            .unwrap();
        assert!(status.success(), "create database {name}");
        format!("jdbc:postgresql://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        run_as_postgres(
            &format!(
                "{}/pg_ctl -D {} -m immediate stop >/dev/null",
                self.bin.display(),
                self.dir.display()
            ),
            true,
        );
    }
}

fn run_as_postgres(cmd: &str, may_fail: bool) {
    let status = if cmd.starts_with("chown") {
        Command::new("sh").arg("-c").arg(cmd).status().unwrap()
    } else {
        Command::new("runuser")
            .args(["-u", "postgres", "--", "sh", "-c", cmd])
            .status()
            .unwrap()
    };
    assert!(may_fail || status.success(), "{cmd}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// CPU seconds and peak RSS of a running process, from /proc.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?;
    Some((ticks / 100.0, hwm * 1024))
}

/// One life of a receiver process.
struct Life {
    child: Child,
    addr: Option<String>,
    started_ms: u64,
    cpu: f64,
    rss: u64,
    deliveries: u64,
}

impl Life {
    fn sample(&mut self, stats_file: &Path) {
        if let Some((cpu, rss)) = proc_usage(self.child.id()) {
            self.cpu = cpu;
            self.rss = self.rss.max(rss);
        }
        match &self.addr {
            Some(addr) => {
                if let Some(v) = metric(addr, "result=\"received\"") {
                    self.deliveries = v as u64;
                }
            }
            None => {
                if let Ok(text) = std::fs::read_to_string(stats_file)
                    && let Ok(v) = serde_json::from_str::<Value>(&text)
                {
                    self.deliveries = v["deliveries"].as_u64().unwrap_or(self.deliveries);
                }
            }
        }
    }
}

/// How often the burst measurement asks a receiver how many it correlated.
const POLL: Duration = Duration::from_millis(20);

/// The sum of the /metrics samples whose line contains one of `names` (one
/// request, so polling adds one scrape per round to the measured process).
fn metrics(addr: &str, names: &[&str]) -> Option<f64> {
    let text = ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    Some(
        text.lines()
            .filter(|l| !l.starts_with('#') && names.iter().any(|n| l.contains(n)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

fn metric(addr: &str, contains: &str) -> Option<f64> {
    metrics(addr, &[contains])
}

struct Run<'a> {
    args: &'a Args,
    c: Contender,
    conn: Connection,
    emulator: &'a Emulator,
    dir: PathBuf,
    jdbc: String,
    topics: (String, String),
    sub: String,
    plan: Plan,
}

impl Run<'_> {
    /// Starts the receiver on subscription `sub`.
    fn launch(&self, sub: &str) -> Life {
        let plan = &self.plan;
        let started_ms = now_ms();
        if self.c.kind == Kind::Postfach {
            let config = self.dir.join("postfach.toml");
            std::fs::write(
                &config,
                format!(
                    "[correlation_keys]\nAuftragAbgeschlossen = \"auftragId\"\n\n[send_topics]\nauftragUebergeben = \"{}\"\n\n[[subscriptions]]\nsubscription = \"{}\"\nmessage = \"AuftragAbgeschlossen\"\nkey = \"/auftragId\"\nmax_lease_extension = \"10s\"\n",
                    self.topics.0, sub
                ),
            )
            .unwrap();
            let mut child = Command::new(postfach_bin())
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .arg("--db")
                .arg(self.dir.join("run.redb"))
                .args([
                    "run",
                    "bpmn/auftrag-ausfuehrung.bpmn",
                    "--listen",
                    "127.0.0.1:0",
                ])
                .arg("--config")
                .arg(&config)
                .arg("--invoice-ledger")
                .arg(self.dir.join("ledger.tsv"))
                .env("PUBSUB_EMULATOR_HOST", self.emulator.host())
                .env("GOOGLE_CLOUD_PROJECT", PROJECT)
                .env("RUST_LOG", "error")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
            let addr = loop {
                let line = lines.next().expect("postfach run started").unwrap();
                if let Some(rest) = line.split("HTTP API on http://").nth(1) {
                    break rest.split_whitespace().next().unwrap().to_string();
                }
            };
            std::thread::spawn(move || for _ in lines {});
            return Life {
                child,
                addr: Some(addr),
                started_ms,
                cpu: 0.0,
                rss: 0,
                deliveries: 0,
            };
        }
        let mut cmd = Command::new("java");
        cmd.stdin(Stdio::piped());
        cmd.args([
            "-Xmx1g",
            "-cp",
            &self.args.java_cp,
            "postfach.compare.Receiver",
        ])
        .args(["--variant", self.c.variant()])
        .args(["--jdbc", &self.jdbc])
        .args(["--jdbc-user", if self.c.pg { "postgres" } else { "sa" }])
        .args(["--emulator", self.emulator.host()])
        .args(["--project", PROJECT])
        .args(["--subscription", sub])
        .args(["--orders-topic", &self.topics.0])
        .arg("--bpmn")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bpmn/auftrag-ausfuehrung.bpmn"))
        .arg("--ledger")
        .arg(self.dir.join("ledger.tsv"))
        .arg("--correlations")
        .arg(self.dir.join("correlations.tsv"))
        .arg("--stats")
        .arg(self.dir.join("stats.json"))
        .arg("--acks")
        .arg(self.dir.join("acks.tsv"))
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(self.dir.join(format!("receiver-{started_ms}.log"))).unwrap(),
        );
        cmd.args([
            "--start-twice",
            &plan
                .ambiguous
                .iter()
                .map(|&i| order(i))
                .collect::<Vec<_>>()
                .join(","),
        ]);
        let _ = std::fs::remove_file(self.dir.join("stats.json"));
        Life {
            child: cmd.spawn().expect("java"),
            addr: None,
            started_ms,
            cpu: 0.0,
            rss: 0,
            deliveries: 0,
        }
    }

    /// Waits until the receiver consumes (postfach: ready; Java: its "running" line).
    fn wait_ready(&self, life: &Life) {
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = match &life.addr {
                Some(a) => ureq::get(&format!("http://{a}/health/ready"))
                    .call()
                    .is_ok(),
                None => std::fs::read_dir(&self.dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with(&format!("receiver-{}", life.started_ms))
                    })
                    .any(|e| {
                        std::fs::read_to_string(e.path())
                            .unwrap_or_default()
                            .contains(" running")
                    }),
            };
            if ready {
                return;
            }
            assert!(
                Instant::now() < end,
                "{}: receiver did not start",
                self.c.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether every order has been started (a kill before would lose starts,
    /// not messages).
    fn orders_started(&self, life: &Life) -> bool {
        life.addr.is_some()
            || std::fs::read_to_string(self.dir.join(format!("receiver-{}.log", life.started_ms)))
                .unwrap_or_default()
                .contains("started A ")
    }

    /// Starts the orders `PREFIX-000000` … (the chaos batch `A` with the five
    /// started twice).
    fn start_orders(&self, life: &mut Life, prefix: &str, count: usize) {
        match &life.addr {
            Some(addr) => {
                let twice: Vec<String> = match prefix {
                    "A" => self.plan.ambiguous.iter().map(|&i| order(i)).collect(),
                    _ => Vec::new(),
                };
                start_orders_http(addr, prefix, count, &twice)
            }
            None => {
                use std::io::Write;
                let stdin = life.child.stdin.as_mut().expect("piped stdin");
                writeln!(stdin, "start {prefix} {count}").unwrap();
                stdin.flush().unwrap();
            }
        }
    }

    /// How many of `ids` the receiver has settled: postfach recorded them as
    /// parked (the late ones), a Java receiver acked them.
    fn settled(&self, life: &Life, ids: &[String]) -> usize {
        let have: HashSet<String> = match &life.addr {
            Some(a) => ureq::get(&format!("http://{a}/messages?parked=true"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .map(|v| {
                    v["messages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|m| m["message_id"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            None => std::fs::read_to_string(self.dir.join("acks.tsv"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
        };
        ids.iter().filter(|id| have.contains(*id)).count()
    }

    /// Completions correlated by this process so far (all batches).
    fn correlated_count(&self, life: &Life) -> usize {
        match &life.addr {
            Some(a) => metrics(
                a,
                &[
                    "postfach_messages_total{outcome=\"correlated\"}",
                    "postfach_messages_total{outcome=\"correlated_from_buffer\"}",
                ],
            )
            .unwrap_or(0.0) as usize,
            None => std::fs::read_to_string(self.dir.join("correlations.tsv"))
                .unwrap_or_default()
                .lines()
                .count(),
        }
    }

    /// A Java receiver's correlations: (event id, correlated at ms). postfach's
    /// are read from its store after the stop.
    fn correlations(&self) -> Vec<(String, u64)> {
        std::fs::read_to_string(self.dir.join("correlations.tsv"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                Some((f.first()?.to_string(), f.get(3)?.parse().ok()?))
            })
            .collect()
    }

    fn invoices(&self) -> Vec<(String, u64)> {
        std::fs::read_to_string(self.dir.join("ledger.tsv"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (a, b) = l.split_once('\t')?;
                // postfach's ledger: key<TAB>order; the Java one: order<TAB>ms
                Some(if self.c.kind == Kind::Postfach {
                    (b.to_string(), 0)
                } else {
                    (a.to_string(), b.parse().unwrap_or(0))
                })
            })
            .filter(|(o, _)| o.starts_with("A-")) // the chaos batch; bursts aside
            .collect()
    }
}

/// The `postfach` binary next to this example (target/release/postfach).
fn postfach_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    exe.parent()
        .and_then(Path::parent)
        .map(|d| d.join("postfach"))
        .filter(|p| p.exists())
        .expect("target/<profile>/postfach: build it with `cargo build --release` first")
}

fn start_orders_http(addr: &str, prefix: &str, count: usize, twice: &[String]) {
    let addr = addr.to_string();
    let mut starts: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:06}")).collect();
    starts.extend_from_slice(twice);
    let chunks: Vec<Vec<String>> = starts
        .chunks(starts.len().div_ceil(8))
        .map(<[String]>::to_vec)
        .collect();
    let threads: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let agent = ureq::Agent::new_with_defaults();
                for o in chunk {
                    agent
                        .post(&format!("http://{addr}/instances"))
                        .send_json(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": o}}))
                        .expect("start order");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn completion(o: &str, id: &str) -> Message {
    Message::new()
        .set_data(
            json!({"auftragId": o, "erledigtePositionen": 1200, "abschlussZeitpunkt": "2026-12-02T10:00:00Z"})
                .to_string(),
        )
        .set_attributes([("eventId", id)])
}

type Published = Arc<Mutex<Vec<(String, u64, bool)>>>; // (event id, publish ms, decodable)
type HandedOver = Arc<Mutex<HashSet<String>>>; // burst orders the provider has seen

/// Capacity under a backlog: starts `n` orders `PREFIX-…`, waits until every
/// one is handed over (so every instance waits at the catch event; 2 s of
/// grace for the commit that follows the hand-over), then publishes all `n`
/// completions at once and times until the receiver has correlated them.
async fn burst(
    run: &Run<'_>,
    life: &mut Life,
    publisher: &google_cloud_pubsub::client::Publisher,
    handed_over: &HandedOver,
    prefix: &str,
    n: usize,
) -> Value {
    let stats_file = run.dir.join("stats.json");
    run.start_orders(life, prefix, n);
    let tag = format!("{prefix}-");
    let end = Instant::now() + Duration::from_secs(900);
    loop {
        let seen = handed_over
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.starts_with(&tag))
            .count();
        if seen >= n {
            break;
        }
        if Instant::now() > end {
            eprintln!(
                "{}: only {seen} of {n} burst orders handed over",
                run.c.name
            );
            break;
        }
        life.sample(&stats_file);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let base = run.correlated_count(life);
    let started = Instant::now();
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let (p, o) = (publisher.clone(), format!("{prefix}-{i:06}"));
            tokio::spawn(async move {
                p.publish(completion(&o, &format!("done-{o}")))
                    .await
                    .expect("publish")
            })
        })
        .collect();
    for s in sends {
        s.await.unwrap();
    }
    let published_s = started.elapsed().as_secs_f64();
    // until all are correlated or `--burst-limit` passed (a receiver whose
    // leases expire under a backlog waits for redeliveries); the rate counts up
    // to the last correlation seen
    let end = started + run.args.burst_limit;
    let (mut done, mut last) = (0, started.elapsed());
    while Instant::now() < end {
        let now = run.correlated_count(life).saturating_sub(base);
        if now > done {
            (done, last) = (now, started.elapsed());
        }
        if done >= n {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    life.sample(&stats_file);
    let seconds = last.as_secs_f64();
    json!({
        "orders": n,
        "publish_seconds": published_s,
        "correlated": done,
        "seconds": seconds,
        "per_s": if seconds > 0.0 { done as f64 / seconds } else { 0.0 },
        // the count is polled every POLL: the end is known to within one
        // poll, so a short burst has a coarse rate
        "poll_seconds": POLL.as_secs_f64(),
        "resolution": if seconds > 0.0 { POLL.as_secs_f64() / seconds } else { 1.0 },
    })
}

async fn publish(
    p: &google_cloud_pubsub::client::Publisher,
    m: Message,
    id: &str,
    ok: bool,
    log: &Published,
) {
    p.publish(m).await.expect("publish");
    log.lock().unwrap().push((id.to_string(), now_ms(), ok));
}

/// Publishes the completion `PREFIX-ORDER` of an order, `copies` times.
async fn publish_completion(
    p: &google_cloud_pubsub::client::Publisher,
    o: &str,
    prefix: &str,
    copies: usize,
    log: &Published,
) {
    let id = format!("{prefix}-{o}");
    for _ in 0..copies {
        publish(p, completion(o, &id), &id, true, log).await;
    }
}

async fn contender(
    args: &Args,
    emulator: &Emulator,
    pg: Option<&Postgres>,
    c: Contender,
    root: &Path,
) -> Value {
    let started = Instant::now();
    let plan = Plan::new(args.orders, args.early, args.seed);
    let conn = Connection::emulator(&emulator.endpoint(), PROJECT);
    let tag = c.name.clone();
    let orders_topic = format!("auftraege-{tag}");
    let completions_topic = format!("auftrag-abgeschlossen-{tag}");
    let sub = format!("auftrag-abgeschlossen-sub-{tag}");
    let burst_sub = format!("auftrag-abgeschlossen-burst-{tag}"); // topic and subscription
    let provider_sub = format!("auftraege-dienstleister-{tag}");
    let dlt = format!("auftrag-abgeschlossen-dlt-{tag}");
    for t in [&orders_topic, &completions_topic, &dlt] {
        conn.ensure_topic(t).await.unwrap();
    }
    let options = if c.kind == Kind::NackDlt {
        SubscriptionOptions {
            ack_deadline_seconds: 10,
            dead_letter: Some((dlt.clone(), 10)),
            retry_backoff: Some((Duration::from_secs(10), Duration::from_secs(600))),
        }
    } else {
        SubscriptionOptions {
            ack_deadline_seconds: 10,
            ..Default::default()
        }
    };
    conn.ensure_topic(&burst_sub).await.unwrap();
    conn.ensure_subscription(&burst_sub, &burst_sub, options.clone())
        .await
        .unwrap();
    conn.ensure_subscription(&sub, &completions_topic, options)
        .await
        .unwrap();
    conn.ensure_subscription(&provider_sub, &orders_topic, SubscriptionOptions::default())
        .await
        .unwrap();
    conn.ensure_subscription(&format!("{dlt}-sub"), &dlt, SubscriptionOptions::default())
        .await
        .unwrap();
    let dir = root.join(&tag);
    std::fs::create_dir_all(&dir).unwrap();
    let jdbc = match (c.kind, pg) {
        (Kind::Postfach, _) => String::new(),
        (_, Some(pg)) if c.pg => pg.create_db(&tag.replace('-', "_")),
        _ => format!("jdbc:h2:file:{}/flowable", dir.display()),
    };
    let run = Run {
        args,
        c: c.clone(),
        conn: conn.clone(),
        emulator,
        dir: dir.clone(),
        jdbc,
        topics: (orders_topic.clone(), completions_topic.clone()),
        sub: sub.clone(),
        plan: plan.clone(),
    };
    let publisher = conn.publisher(&completions_topic).await.unwrap();
    let burst_publisher = conn.publisher(&burst_sub).await.unwrap();
    let published: Published = Default::default();
    let handed_over: HandedOver = Default::default();

    // the provider answers every other order as it is handed over
    let provider = {
        let conn = conn.clone();
        let publisher = publisher.clone();
        let published = published.clone();
        let plan = plan.clone();
        let provider_sub = provider_sub.clone();
        let handed_over = handed_over.clone();
        tokio::spawn(async move {
            let client = conn.subscriber().await.unwrap();
            let mut stream = client
                .subscribe(conn.subscription_path(&provider_sub))
                .build();
            let mut answered = HashSet::new();
            // the orders started twice: hand-over ids seen, answered once both
            // instances wait (so the completion meets two subscriptions)
            let mut both: HashMap<String, HashSet<String>> = HashMap::new();
            let index: HashMap<String, usize> = (0..plan.n).map(|i| (order(i), i)).collect();
            while let Some(Ok((m, h))) = stream.next().await {
                h.ack();
                let Some(o) = serde_json::from_slice::<Value>(&m.data)
                    .ok()
                    .and_then(|v| v["auftragId"].as_str().map(str::to_string))
                else {
                    continue;
                };
                let Some(&i) = index.get(&o) else {
                    handed_over.lock().unwrap().insert(o); // a burst order: the driver answers
                    continue;
                };
                let mut delay = Duration::ZERO;
                if plan.ambiguous.contains(&i) {
                    let ids = both.entry(o.clone()).or_default();
                    ids.insert(m.attributes.get("eventId").cloned().unwrap_or(m.message_id));
                    if ids.len() < 2 {
                        continue;
                    }
                    delay = Duration::from_secs(1); // the second instance's commit
                }
                if plan.early[i] || !answered.insert(o.clone()) {
                    continue;
                }
                let id = format!("done-{o}");
                for _ in 0..if plan.twice[i] { 2 } else { 1 } {
                    let (publisher, published, o, id) =
                        (publisher.clone(), published.clone(), o.clone(), id.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        publish(&publisher, completion(&o, &id), &id, true, &published).await
                    });
                }
            }
        })
    };

    let stats_file = dir.join("stats.json");

    // capacity under a backlog, in a life of its own on a subscription of its
    // own (what a slow receiver leaves behind does not spill into the chaos
    // run): a warm-up burst, then the measured one
    let mut burst_life = run.launch(&burst_sub);
    run.wait_ready(&burst_life);
    eprintln!("{tag}: running (backlog)");
    let burst_n = args.burst.unwrap_or((2 * args.orders).min(2_000));
    let mut bursts = Vec::new();
    for (prefix, n) in [("W", (burst_n / 10).max(1)), ("B", burst_n)] {
        let b = burst(
            &run,
            &mut burst_life,
            &burst_publisher,
            &handed_over,
            prefix,
            n,
        )
        .await;
        eprintln!("{tag}: burst {prefix}: {b}");
        bursts.push(b);
    }
    stop(&mut burst_life, &stats_file);

    let mut lives = vec![run.launch(&sub)];
    run.wait_ready(&lives[0]);
    eprintln!("{tag}: running (chaos)");
    let base = run.correlated_count(&lives[0]);
    // the early wave and the undecodable payloads arrive before any order exists
    let t0 = now_ms();
    for i in (0..plan.n).filter(|&i| plan.early[i]) {
        let copies = if plan.twice[i] { 2 } else { 1 };
        publish_completion(&publisher, &order(i), "done", copies, &published).await;
    }
    for k in 0..plan.malformed {
        let id = format!("kaputt-{k}");
        let m = Message::new()
            .set_data(format!("{{\"auftragId\": \"{}\", ", order(k)))
            .set_attributes([("eventId", id.as_str())]);
        publish(&publisher, m, &id, false, &published).await;
    }

    let early_count = published.lock().unwrap().len() as u64;
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        lives[0].sample(&stats_file);
        if lives[0].deliveries >= early_count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.start_orders(&mut lives[0], "A", plan.n);
    // the kill: once 40 % of the orders are correlated
    let kill_at = plan.n * 2 / 5;
    let deadline = Instant::now() + args.limit;
    let mut killed_ms = None;
    let mut ready_ms = None;
    let mut last_progress = (0usize, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let life = lives.last_mut().unwrap();
        life.sample(&stats_file);
        // for the kill and the progress check: the burst orders aside in the
        // first life (a restarted postfach counts from zero)
        let corr = run
            .correlated_count(life)
            .saturating_sub(if lives.len() == 1 { base } else { 0 });
        let invoiced: HashSet<String> = run.invoices().into_iter().map(|(o, _)| o).collect();
        if corr != last_progress.0 {
            last_progress = (corr, Instant::now());
        }
        if killed_ms.is_none() && corr >= kill_at && run.orders_started(&lives[0]) {
            let life = lives.last_mut().unwrap();
            life.sample(&stats_file);
            life.child.kill().unwrap();
            life.child.wait().unwrap();
            eprintln!("{tag}: SIGKILL at {corr} correlations; restarting");
            killed_ms = Some(now_ms());
            lives.push(run.launch(&sub));
            let life = lives.last().unwrap();
            run.wait_ready(life);
            ready_ms = Some(now_ms() - life.started_ms);
            last_progress.1 = Instant::now();
            continue;
        }
        // every order invoiced (the ambiguous ones aside); otherwise (lost messages, jobs
        // locked by the killed process) until nothing moved for `quiet`
        let done = invoiced.len() >= plan.n - plan.ambiguous.len();
        let stalled = last_progress.1.elapsed() > args.quiet;
        if (killed_ms.is_some() && done) || stalled || Instant::now() > deadline {
            if !done {
                eprintln!(
                    "{tag}: stopped waiting with {} of {} orders invoiced",
                    invoiced.len(),
                    plan.n
                );
            }
            break;
        }
    }
    // completions for orders already invoiced; they and the ambiguous ones are
    // given until they are settled (postfach: parked; naive, inbox: acked) or
    // `quiet` passes; the nack-dlt receiver never settles them (redelivery with
    // backoff, then the DLT)
    for &i in &plan.again {
        publish_completion(&publisher, &order(i), "nachtrag", 1, &published).await;
    }
    let late: Vec<String> = plan
        .again
        .iter()
        .map(|&i| format!("nachtrag-{}", order(i)))
        .chain(plan.ambiguous.iter().map(|&i| format!("done-{}", order(i))))
        .collect();
    let end = Instant::now()
        + if c.kind == Kind::NackDlt {
            Duration::from_secs(5)
        } else {
            args.quiet
        };
    while Instant::now() < end && run.settled(lives.last().unwrap(), &late) < late.len() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drained_ms = now_ms();
    provider.abort();
    stop(lives.last_mut().unwrap(), &stats_file);
    let published = published.lock().unwrap().clone();
    let mut row = collect(
        &run, &plan, &published, &lives, t0, killed_ms, drained_ms, &dlt,
    )
    .await;
    let b = &bursts[1];
    row["burst_orders"] = b["orders"].clone();
    row["burst_correlated"] = b["correlated"].clone();
    row["burst_seconds"] = b["seconds"].clone();
    row["burst_per_s"] = b["per_s"].clone();
    row["burst_cpu_seconds"] = json!(burst_life.cpu);
    row["peak_rss_mib"] = json!(
        row["peak_rss_mib"]
            .as_f64()
            .unwrap_or(0.0)
            .max(burst_life.rss as f64 / 1048576.0)
    );
    row["ready_after_restart_ms"] = json!(ready_ms);
    row["wall_seconds"] = json!(started.elapsed().as_secs_f64());
    row["measured_at"] = json!(
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(t0)).to_string()
    );
    row
}

#[allow(clippy::too_many_arguments)]
async fn collect(
    run: &Run<'_>,
    plan: &Plan,
    published: &[(String, u64, bool)],
    lives: &[Life],
    t0: u64,
    killed_ms: Option<u64>,
    drained_ms: u64,
    dlt: &str,
) -> Value {
    let mut first_publish: HashMap<&str, u64> = HashMap::new();
    for (id, ms, _) in published {
        first_publish.entry(id.as_str()).or_insert(*ms);
    }
    let ids: HashSet<&str> = first_publish.keys().copied().collect();
    // correlated (event id → ms) and retained (event id → where)
    let mut correlated: HashMap<String, u64> = HashMap::new();
    let mut retained: BTreeMap<String, String> = BTreeMap::new();
    match run.c.kind {
        Kind::Postfach => {
            let pf = postfach::Postfach::open(run.dir.join("run.redb")).unwrap();
            let r = pf.reader().unwrap();
            for id in &ids {
                for m in r.message(id).unwrap_or_default() {
                    match m.state {
                        "correlated" => {
                            let at = m
                                .settled_at
                                .as_deref()
                                .and_then(|t| humantime::parse_rfc3339(t).ok())
                                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                                .map_or(0, |d| d.as_millis() as u64);
                            correlated.insert(id.to_string(), at);
                        }
                        s => {
                            retained
                                .insert(id.to_string(), format!("{s}:{}", m.reason.unwrap_or("")));
                        }
                    }
                }
            }
            pf.close();
        }
        _ => {
            for (id, ms) in run.correlations() {
                if ids.contains(id.as_str()) {
                    correlated.entry(id).or_insert(ms); // the chaos batch; bursts aside
                }
            }
            let broker = BrokerDrain(&run.conn);
            for id in broker
                .drain_for(&format!("{dlt}-sub"), Duration::from_secs(5))
                .await
            {
                retained.entry(id).or_insert("dead_letter".into());
            }
            if run.c.kind == Kind::Inbox {
                for (id, status) in inbox_rows(run) {
                    if status != "DONE" {
                        retained.entry(id).or_insert(format!("inbox:{status}"));
                    }
                }
            }
        }
    }
    // lost: acked, never correlated, retained nowhere. The Java receivers log
    // every ack; postfach acks only what it recorded, so an id without a record
    // counts as lost unless it is still waiting in the subscription.
    let mut pending: HashSet<String> = BrokerDrain(&run.conn)
        .drain(&run.sub)
        .await
        .into_iter()
        .filter(|id| !correlated.contains_key(id) && !retained.contains_key(id))
        .collect();
    let lost: Vec<&str> = if run.c.kind == Kind::Postfach {
        ids.iter()
            .filter(|id| {
                !correlated.contains_key(**id)
                    && !retained.contains_key(**id)
                    && !pending.contains(**id)
            })
            .copied()
            .collect()
    } else {
        let acked: HashSet<String> = std::fs::read_to_string(run.dir.join("acks.tsv"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        for id in &ids {
            if !acked.contains(*id) && !correlated.contains_key(*id) && !retained.contains_key(*id)
            {
                pending.insert(id.to_string()); // never acked: Pub/Sub still has it
            }
        }
        ids.iter()
            .filter(|id| {
                acked.contains(**id)
                    && !correlated.contains_key(**id)
                    && !retained.contains_key(**id)
            })
            .copied()
            .collect()
    };
    let mut lat: Vec<u64> = correlated
        .iter()
        .filter_map(|(id, ms)| {
            first_publish
                .get(id.as_str())
                .map(|p| ms.saturating_sub(*p))
        })
        .filter(|_| true)
        .collect();
    lat.sort_unstable();
    let pct = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
    };
    let invoices = run.invoices();
    let mut per_order: HashMap<&str, usize> = HashMap::new();
    for (o, _) in &invoices {
        *per_order.entry(o.as_str()).or_default() += 1;
    }
    let last_corr = correlated.values().copied().max().unwrap_or(t0);
    let drain_s = (last_corr.max(t0) - t0) as f64 / 1000.0;
    // steady throughput: correlations between the 10th and the 90th percentile
    // of their times, over that span (start-up and the tail after the kill aside)
    let mut times: Vec<u64> = correlated.values().copied().collect();
    times.sort_unstable();
    let steady = if times.len() >= 10 {
        let (a, b) = (times[times.len() / 10], times[times.len() * 9 / 10]);
        let n = times.len() * 8 / 10;
        if b > a {
            Some(n as f64 * 1000.0 / (b - a) as f64)
        } else {
            None
        }
    } else {
        None
    };
    let resume_ms = killed_ms.and_then(|k| {
        correlated
            .values()
            .filter(|&&ms| ms > k)
            .min()
            .map(|first| first - lives.last().unwrap().started_ms)
    });
    let deliveries: u64 = lives.iter().map(|l| l.deliveries).sum();
    let mut by_where: BTreeMap<String, usize> = BTreeMap::new();
    for w in retained.values() {
        *by_where.entry(w.clone()).or_default() += 1;
    }
    let _ = drained_ms;
    json!({
        "contender": run.c.name,
        "orders": plan.n,
        "messages_published": published.len(),
        "message_ids": ids.len(),
        "correlated": correlated.len(),
        "orders_invoiced": per_order.len(),
        "orders_invoiced_twice": per_order.values().filter(|&&n| n > 1).count(),
        "lost": lost.len(),
        "lost_sample": lost.iter().take(10).collect::<Vec<_>>(),
        "retained": retained.len(),
        "retained_by_reason": by_where,
        "pending_in_subscription": pending.len(),
        "redeliveries": deliveries.saturating_sub(published.len() as u64),
        "drain_seconds": drain_s,
        "throughput_per_s": steady,
        "drain_rate_per_s": if drain_s > 0.0 { correlated.len() as f64 / drain_s } else { 0.0 },
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "cpu_seconds": lives.iter().map(|l| l.cpu).sum::<f64>(),
        "peak_rss_mib": lives.iter().map(|l| l.rss).max().unwrap_or(0) as f64 / 1048576.0,
        "resume_after_restart_ms": resume_ms,
    })
}

/// Stops a receiver: SIGTERM (postfach stops cleanly; the JVM runs its
/// shutdown hooks), SIGKILL after 30 s.
fn stop(life: &mut Life, stats_file: &Path) {
    life.sample(stats_file);
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(life.child.id().to_string())
        .status();
    let end = Instant::now() + Duration::from_secs(30);
    while life.child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = life.child.kill();
    let _ = life.child.wait();
}

struct BrokerDrain<'a>(&'a Connection);

impl BrokerDrain<'_> {
    /// Pulls until `quiet` passes without a message. The emulator hands back
    /// messages whose lease expired with a dead consumer only on its own sweep,
    /// which can take a minute; a shorter window would count them as lost.
    async fn drain(&self, sub: &str) -> Vec<String> {
        self.drain_for(sub, Duration::from_secs(75)).await
    }

    async fn drain_for(&self, sub: &str, quiet: Duration) -> Vec<String> {
        let client = self.0.subscriber().await.unwrap();
        let mut stream = client.subscribe(self.0.subscription_path(sub)).build();
        let mut out = Vec::new();
        while let Ok(Some(Ok((m, h)))) = tokio::time::timeout(quiet, stream.next()).await {
            out.push(
                m.attributes
                    .get("eventId")
                    .cloned()
                    .unwrap_or(m.message_id.clone()),
            );
            h.ack();
        }
        stream.shutdown_token().shutdown().await;
        out
    }
}

fn inbox_rows(run: &Run<'_>) -> Vec<(String, String)> {
    let out = Command::new("java")
        .args(["-cp", &run.args.java_cp, "postfach.compare.Receiver"])
        .args(["--dump-inbox", &run.jdbc])
        .args(["--jdbc-user", if run.c.pg { "postgres" } else { "sa" }])
        .output()
        .expect("java");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn table(rows: &[Value]) -> String {
    let mut md = String::from(
        "| contender | correlated | invoiced | invoiced twice | lost | retained (parked / DLT / inbox) | still in subscription | redeliveries | drain (s) | completions/s (chaos run) | completions/s (backlog) | p50 (ms) | p99 (ms) | CPU (s) | peak RSS (MiB) | ready after restart (ms) | first correlation after restart (ms) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let f = |k: &str| match &r[k] {
            Value::Null => "—".to_string(),
            Value::Number(n) if n.is_f64() => format!("{:.1}", n.as_f64().unwrap()),
            v => v.to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["contender"].as_str().unwrap_or(""),
            f("correlated"),
            f("orders_invoiced"),
            f("orders_invoiced_twice"),
            f("lost"),
            f("retained"),
            f("pending_in_subscription"),
            f("redeliveries"),
            f("drain_seconds"),
            f("throughput_per_s"),
            match (r["burst_correlated"].as_u64(), r["burst_orders"].as_u64()) {
                (Some(c), Some(n)) if c < n => format!("{} ({c} of {n})", f("burst_per_s")),
                _ => f("burst_per_s"),
            },
            f("p50_ms"),
            f("p99_ms"),
            f("cpu_seconds"),
            f("peak_rss_mib"),
            f("ready_after_restart_ms"),
            f("resume_after_restart_ms"),
        ));
    }
    let rate = |name: &str| {
        rows.iter()
            .find(|r| r["contender"] == name)
            .and_then(|r| r["burst_per_s"].as_f64())
    };
    let best = rows
        .iter()
        .filter(|r| r["contender"] != "postfach")
        .filter_map(|r| Some((r["burst_per_s"].as_f64()?, r["contender"].as_str()?)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(pf) = rate("postfach") {
        md.push('\n');
        if let Some(pg) = rate("inbox-pg") {
            md.push_str(&format!(
                "Backlog throughput, postfach / inbox-pg: **{:.1}×** (target ≥ 20×)\n",
                pf / pg
            ));
        }
        if let Some((b, name)) = best {
            md.push_str(&format!(
                "Backlog throughput, postfach / best Flowable receiver ({name}): **{:.1}×** (target ≥ 5×)\n",
                pf / b
            ));
        }
    }
    md
}

/// Two bar charts side by side: throughput under the backlog and lost
/// messages per contender, drawn by plotters.
fn svg(rows: &[Value]) -> String {
    use plotters::prelude::*;
    let names: Vec<String> = rows
        .iter()
        .map(|r| r["contender"].as_str().unwrap_or("").to_string())
        .collect();
    let height = 70 + 30 * rows.len() as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, height)).into_drawing_area();
        root.fill(&WHITE).expect("svg");
        let (left, right) = root.split_horizontally(520);
        let panels = [
            (
                &left,
                "completions correlated per second (backlog)",
                "burst_per_s",
                RGBColor(0x3b, 0x7d, 0xd8),
                150,
            ),
            (
                &right,
                "messages lost",
                "lost",
                RGBColor(0xd8, 0x45, 0x3b),
                10,
            ),
        ];
        for (area, title, field, color, label_width) in panels {
            let values: Vec<f64> = rows
                .iter()
                .map(|r| r[field].as_f64().unwrap_or(0.0))
                .collect();
            let max = values.iter().copied().fold(1.0, f64::max) * 1.2;
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(20)
                .y_label_area_size(label_width)
                .build_cartesian_2d(0.0..max, (0..rows.len()).into_segmented())
                .expect("chart");
            let shown = names.clone();
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(rows.len())
                .y_label_formatter(&move |v| match v {
                    SegmentValue::CenterOf(i) if label_width > 10 => {
                        shown.get(*i).cloned().unwrap_or_default()
                    }
                    _ => String::new(),
                })
                .x_label_formatter(&|x| format!("{x:.0}"))
                .draw()
                .expect("mesh");
            chart
                .draw_series(values.iter().enumerate().map(|(i, v)| {
                    let mut bar = Rectangle::new(
                        [
                            (0.0, SegmentValue::Exact(i)),
                            (*v, SegmentValue::Exact(i + 1)),
                        ],
                        color.filled(),
                    );
                    bar.set_margin(4, 4, 0, 0);
                    bar
                }))
                .expect("bars");
            chart
                .draw_series(values.iter().enumerate().map(|(i, v)| {
                    Text::new(
                        format!(" {v:.0}"),
                        (*v, SegmentValue::CenterOf(i)),
                        ("sans-serif", 12),
                    )
                }))
                .expect("values");
        }
        root.present().expect("svg");
    }
    out
}

/// The rows of an earlier run's compare.json (same orders, seed and burst),
/// with the contenders of this run replacing theirs; each row says when it was
/// measured.
fn merge(file: &Path, args: &Args, rows: Vec<Value>) -> Vec<Value> {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("--merge {}: {e}", file.display()));
    let old: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("--merge {}: {e}", file.display()));
    assert!(
        old["orders"] == json!(args.orders) && old["seed"] == json!(args.seed),
        "--merge {}: another workload (orders {}, seed {})",
        file.display(),
        old["orders"],
        old["seed"]
    );
    let mut out: Vec<Value> = old["contenders"].as_array().cloned().unwrap_or_default();
    for row in rows {
        match out.iter_mut().find(|r| r["contender"] == row["contender"]) {
            Some(slot) => *slot = row,
            None => out.push(row),
        }
    }
    out
}

fn main() {
    // before anything is written: the result files themselves make the tree dirty
    let commit = measured_commit();
    let args = args();
    if let Some(file) = &args.chart_only {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let doc: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rows = doc["contenders"].as_array().cloned().unwrap_or_default();
        std::fs::create_dir_all(&args.out).unwrap();
        std::fs::write(args.out.join("compare.svg"), svg(&rows)).unwrap();
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // receiver logs, ledgers and databases stay here when POSTFACH_COMPARE_KEEP is set
    let guard = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let root = guard.path().to_path_buf();
    let _guard = match std::env::var("POSTFACH_COMPARE_KEEP") {
        Ok(_) => {
            eprintln!("compare: keeping {}", guard.keep().display());
            None
        }
        Err(_) => Some(guard),
    };
    let emulator = Emulator::start().unwrap_or_else(|e| panic!("{e}"));
    let pg = args
        .contenders
        .iter()
        .any(|c| c.pg)
        .then(|| Postgres::start(&args.pg_bin, &root.join("pg")));
    let mut rows = Vec::new();
    let started = Instant::now();
    for c in args.contenders.clone() {
        let row = rt.block_on(contender(&args, &emulator, pg.as_ref(), c, &root));
        eprintln!("{row}");
        rows.push(row);
    }
    eprintln!(
        "compare: {} contender(s) in {:.1} min",
        args.contenders.len(),
        started.elapsed().as_secs_f64() / 60.0
    );
    drop(pg);
    if let Some(file) = &args.merge {
        rows = merge(file, &args, rows);
    }
    let md = table(&rows);
    println!("\n{md}");
    std::fs::create_dir_all(&args.out).unwrap();
    std::fs::write(args.out.join("compare.md"), &md).unwrap();
    std::fs::write(
        args.out.join("compare.json"),
        serde_json::to_string_pretty(&json!({
            "commit": commit,
            "orders": args.orders,
            "early": args.early,
            "seed": args.seed,
            "contenders": rows,
        }))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(args.out.join("compare.svg"), svg(&rows)).unwrap();
}

/// The commit the run measures (`git describe --always --dirty`, taken when
/// the run starts), so a figure in the README can name what produced it;
/// "unknown" outside a checkout.
fn measured_commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
