//! The cluster on this machine, processes standing in for pods, on one Pub/Sub
//! emulator in one run:
//!
//! 1. **End to end, P = 1, 2, 4** (each `POSTFACH_CLUSTER_RUNS` = 5 times,
//!    alternating; the run with the median CPU is reported, and the mean of
//!    every run beside it). P `postfach run --partitions P` processes
//!    and a router process; N instances wait at a message catch (started
//!    through a gateway, so each lives on the partition of its key); then N
//!    completions are published to the shared subscription and the router
//!    forwards each to its partition, which correlates it. Measured from the
//!    first publish to the last correlation: wall time, and the CPU seconds the
//!    partitions and the router used (from /proc), per 1,000 completions, the
//!    router's part apart. The bench sees the end by asking each partition's
//!    `/metrics` every 20 ms on a kept connection until it correlated its
//!    share (those answers are in the CPU measured). The
//!    emulator's CPU is reported apart: it is the broker, not postfach. The
//!    partitions share the streaming pulls one partition alone has (4 in all:
//!    4, 2 and 1 each).
//! 2. **Gateway.** 2,000 publishes one after another, alternately straight to a
//!    partition and through a gateway in front of it (keep-alive connections
//!    both): the medians and their difference.
//! 3. **Router.** A backlog of N messages drained by the router (forwarding to
//!    P = 4 topics, each forward confirmed before its ack) and by Google's Go
//!    client as a null consumer (acks at once), the same number of streaming
//!    pulls: deliveries per second and their ratio.
//! 4. **Restart.** A partition of the P = 4 run (its database holds the run's
//!    instances and messages) SIGKILLed and started again on its directory and
//!    address, five times: time from the start of the process to its first
//!    200 on `/health/ready` (database open, log replayed, model deployed,
//!    subscription consumed).
//!
//! cargo bench --bench cluster            (N=20000, streams 4, 5 runs of each P)
//! POSTFACH_CLUSTER_N=10000 cargo bench --bench cluster

#[path = "support/mod.rs"]
mod support;

use postfach::ingress::SubscriptionConfig;
use postfach::pubsub::router::{Router, RouterConfig};
use postfach::pubsub::{Connection, Emulator, SubscriptionOptions};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::PROJECT;
use support::go_null::GoNull;

const MESSAGE: &str = "Fertig";

const MODEL: &str = support::WAITING_MODEL;

/// CPU seconds a process used so far (user + system, from /proc).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // the fields after the command name in parentheses: state is field 3,
    // utime 14, stime 15
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    ticks as f64 / clock_ticks()
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// A postfach child process: a partition or a gateway.
struct Proc {
    child: Child,
    addr: String,
    args: Vec<String>,
}

impl Proc {
    fn spawn(args: &[String], emulator: &Emulator) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
            .args(args)
            .env("PUBSUB_EMULATOR_HOST", emulator.host())
            .env("GOOGLE_CLOUD_PROJECT", PROJECT)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!("{args:?} ended: {seen:?}");
            };
            if let Some(rest) = line.split(" on http://").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
            if line.contains("routing ") {
                break String::new();
            }
            seen.push(line);
        };
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Proc {
            child,
            addr,
            args: args.to_vec(),
        }
    }

    fn cpu(&self) -> f64 {
        cpu_seconds(self.child.id())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn partition_args(
    dir: &std::path::Path,
    model: &std::path::Path,
    p: u64,
    i: u64,
    listen: &str,
) -> Vec<String> {
    vec![
        "--db".into(),
        dir.join(format!("p{i}.redb")).display().to_string(),
        "run".into(),
        model.display().to_string(),
        "--correlation-key".into(),
        format!("{MESSAGE}=auftragId"),
        "--listen".into(),
        listen.into(),
        "--partitions".into(),
        p.to_string(),
        "--partition".into(),
        i.to_string(),
        "--subscription".into(),
        format!("fertig-{p}-{i}"),
        "--message".into(),
        MESSAGE.into(),
        "--key-from".into(),
        "/auftragId".into(),
    ]
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn ready(addr: &str) -> bool {
    agent()
        .get(&format!("http://{addr}/health/ready"))
        .call()
        .is_ok_and(|r| r.status() == 200)
}

fn wait_ready(addr: &str) {
    let end = Instant::now() + Duration::from_secs(60);
    while !ready(addr) {
        assert!(Instant::now() < end, "{addr} never became ready");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Watches the partitions' correlation counters until each has correlated
/// the completions of its keys: one keep-alive connection per partition,
/// and a partition that is done is not asked again, so the bench's own
/// questions cost the partitions as little as they can (they are part of
/// the CPU measured).
struct Watch {
    agents: Vec<ureq::Agent>,
    /// Completions each partition owns (by the map the cluster starts with).
    expected: Vec<u64>,
    seen: Vec<u64>,
}

impl Watch {
    fn new(p: u64, n: u64) -> Watch {
        let map = postfach::slots::SlotMap::new(p as u32).unwrap();
        let mut expected = vec![0; p as usize];
        for i in 0..n {
            expected[map.partition_of_key(&format!("K-{i}")) as usize] += 1;
        }
        Watch {
            agents: (0..p).map(|_| agent()).collect(),
            expected,
            seen: vec![0; p as usize],
        }
    }

    /// Correlations so far, asking only the partitions not done yet.
    fn correlated(&mut self, parts: &[Proc]) -> u64 {
        for (i, part) in parts.iter().enumerate() {
            if self.seen[i] >= self.expected[i] {
                continue;
            }
            let text = scrape(&self.agents[i], part);
            self.seen[i] = sample(&text, "postfach_messages_total{outcome=\"correlated\"}") as u64;
        }
        self.seen.iter().sum()
    }
}

/// Commits and the commands in them so far, summed over the partitions
/// (their `postfach_commit_batch_size` histograms).
fn commits(parts: &[Proc]) -> (f64, f64) {
    let a = agent();
    parts.iter().fold((0.0, 0.0), |(b, c), part| {
        let text = scrape(&a, part);
        (
            b + sample(&text, "postfach_commit_batch_size_count"),
            c + sample(&text, "postfach_commit_batch_size_sum"),
        )
    })
}

/// A partition's `/metrics` text (empty when it does not answer).
fn scrape(a: &ureq::Agent, part: &Proc) -> String {
    a.get(&format!("http://{}/metrics", part.addr))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

/// The value of `series` in a `/metrics` text, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Starts `n` instances through the gateway, on two threads.
fn start_instances(gateway: &str, n: u64) {
    std::thread::scope(|s| {
        for half in 0..2 {
            s.spawn(move || {
                let a = agent();
                for i in (half..n).step_by(2) {
                    let r = a
                        .post(&format!("http://{gateway}/instances"))
                        .send_json(json!({"process": "warten", "variables": {"auftragId": format!("K-{i}")}}))
                        .unwrap();
                    assert_eq!(r.status(), 201);
                }
            });
        }
    });
}

fn completion(i: u64) -> google_cloud_pubsub::model::Message {
    google_cloud_pubsub::model::Message::new()
        .set_data(format!(r#"{{"auftragId": "K-{i}"}}"#))
        .set_attributes([("eventId", format!("e-{i}"))])
}

async fn publish_all(conn: &Connection, topic: &str, n: u64) {
    let p = conn.publisher(topic).await.unwrap();
    let mut pending = Vec::new();
    for i in 0..n {
        pending.push(p.publish(completion(i)));
        if pending.len() >= 1000 {
            for f in pending.drain(..) {
                f.await.unwrap();
            }
        }
    }
    for f in pending {
        f.await.unwrap();
    }
}

struct EndToEnd {
    partitions: u64,
    seconds: f64,
    cpu_postfach: f64,
    /// The router's part of `cpu_postfach`.
    cpu_router: f64,
    /// Commands per commit in the partitions' writers while it ran (each
    /// partition's share of the stream is 1/P, so its batches are smaller).
    per_commit: f64,
    cpu_emulator: f64,
    /// The P = 4 run's partitions, kept for the restart measurement.
    kept: Option<(Vec<Proc>, tempfile::TempDir)>,
}

fn end_to_end(
    emulator: &Emulator,
    conn: &Connection,
    rt: &tokio::runtime::Runtime,
    p: u64,
    n: u64,
    streams: u32,
    rep: u64,
) -> EndToEnd {
    let dir = support::bench_dir();
    let model = dir.path().join("warten.bpmn");
    std::fs::write(&model, MODEL).unwrap();
    let topic = format!("fertig-{p}-r{rep}");
    let shared = format!("{topic}-shared");
    rt.block_on(async {
        conn.ensure_topic(&topic).await.unwrap();
        conn.ensure_subscription(&shared, &topic, SubscriptionOptions::default())
            .await
            .unwrap();
    });
    let router_args: Vec<String> = [
        "router",
        "--partitions",
        &p.to_string(),
        "--subscription",
        &shared,
        "--message",
        MESSAGE,
        "--key-from",
        "/auftragId",
        "--forward-topic",
        &format!("{topic}-{{partition}}"),
        "--streams",
        &streams.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // the router first: it creates the partitions' topics and subscriptions
    let router = Proc::spawn(&router_args, emulator);
    let parts: Vec<Proc> = (0..p)
        .map(|i| {
            let mut args = partition_args(dir.path(), &model, p, i, "127.0.0.1:0");
            let at = args.iter().position(|a| a == "--subscription").unwrap();
            args[at + 1] = format!("{topic}-{i}");
            // the streaming pulls divided among the partitions: as many in
            // all as one partition alone has
            args.extend(["--streams".into(), (streams / p as u32).max(1).to_string()]);
            Proc::spawn(&args, emulator)
        })
        .collect();
    for part in &parts {
        wait_ready(&part.addr);
    }
    let mut gw_args = vec![
        "gateway".to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    for (i, part) in parts.iter().enumerate() {
        gw_args.push("--partition-url".into());
        gw_args.push(format!("{i}=http://{}", part.addr));
    }
    let gateway = Proc::spawn(&gw_args, emulator);
    start_instances(&gateway.addr, n);
    drop(gateway);
    let java = emulator_pid(emulator);
    let commits_before = commits(&parts);
    let mut watch = Watch::new(p, n);
    let parts_before: f64 = parts.iter().map(Proc::cpu).sum();
    let router_before = router.cpu();
    let java_before = java.map(cpu_seconds).unwrap_or(0.0);
    let t = Instant::now();
    rt.block_on(publish_all(conn, &topic, n));
    let end = Instant::now() + Duration::from_secs(600);
    loop {
        let seen = watch.correlated(&parts);
        if seen >= n {
            break;
        }
        assert!(Instant::now() < end, "P={p}: only {seen} of {n} correlated");
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = t.elapsed().as_secs_f64();
    let cpu_router = router.cpu() - router_before;
    let cpu_postfach = parts.iter().map(Proc::cpu).sum::<f64>() - parts_before + cpu_router;
    let cpu_emulator = java.map(cpu_seconds).unwrap_or(0.0) - java_before;
    // read after the CPU: these questions are not part of it
    let commits_after = commits(&parts);
    let per_commit =
        (commits_after.1 - commits_before.1) / (commits_after.0 - commits_before.0).max(1.0);
    eprintln!(
        "P={p}: {n} correlated in {seconds:.2} s, postfach {cpu_postfach:.2} CPU s (router {cpu_router:.2}), {per_commit:.1} commands per commit, emulator {cpu_emulator:.2} CPU s"
    );
    EndToEnd {
        partitions: p,
        seconds,
        cpu_postfach,
        cpu_router,
        per_commit,
        cpu_emulator,
        kept: (p == 4).then_some((parts, dir)),
    }
}

/// Deletes the topics and subscriptions of run `rep` of `p` partitions
/// (its processes ended), so that every run finds the emulator as fresh.
async fn forget(conn: &Connection, p: u64, rep: u64) {
    let topic = format!("fertig-{p}-r{rep}");
    let subs = conn.subscription_admin().await.unwrap();
    let topics = conn.topic_admin().await.unwrap();
    let mut names = vec![(format!("{topic}-shared"), topic.clone())];
    names.extend((0..p).map(|i| (format!("{topic}-{i}"), format!("{topic}-{i}"))));
    for (sub, t) in names {
        let _ = subs
            .delete_subscription()
            .set_subscription(conn.subscription_path(&sub))
            .send()
            .await;
        let _ = topics
            .delete_topic()
            .set_topic(conn.topic_path(&t))
            .send()
            .await;
    }
}

/// The emulator's JVM (the broker's CPU is not postfach's).
/// The JVM itself, not the script that started it: its command line names
/// the emulator's jar and this emulator's port.
fn emulator_pid(emulator: &Emulator) -> Option<u32> {
    let port = emulator.host().rsplit(':').next().unwrap_or_default();
    let out = Command::new("pgrep")
        .args([
            "-f",
            &format!("[-]jar .*cloud-pubsub-emulator.*--port={port}( |$)"),
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Publish latency straight to a partition and through a gateway, interleaved.
fn gateway_latency(emulator: &Emulator, publishes: u64) -> (f64, f64) {
    let dir = support::bench_dir();
    let model = dir.path().join("warten.bpmn");
    std::fs::write(&model, MODEL).unwrap();
    let mut args = partition_args(dir.path(), &model, 1, 0, "127.0.0.1:0");
    args.truncate(args.len() - 6); // no subscription
    let part = Proc::spawn(&args, emulator);
    wait_ready(&part.addr);
    let gw = Proc::spawn(
        &[
            "gateway".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--partition-url".into(),
            format!("0=http://{}", part.addr),
        ],
        emulator,
    );
    let (direct_agent, gw_agent) = (agent(), agent());
    let mut direct = Vec::new();
    let mut through = Vec::new();
    for i in 0..publishes * 2 {
        let (a, addr, into) = if i % 2 == 0 {
            (&direct_agent, &part.addr, &mut direct)
        } else {
            (&gw_agent, &gw.addr, &mut through)
        };
        let t = Instant::now();
        let r = a
            .post(&format!("http://{addr}/messages"))
            .send_json(json!({"name": MESSAGE, "key": format!("L-{i}"), "id": format!("l-{i}")}))
            .unwrap();
        assert_eq!(r.status(), 200);
        into.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (median(direct), median(through))
}

/// Deliveries per second: the router forwarding a backlog, and the Go null
/// consumer acking the same backlog, with `streams` streaming pulls each.
fn router_drain(
    emulator: &Emulator,
    conn: &Connection,
    rt: &tokio::runtime::Runtime,
    n: u64,
    streams: u32,
) -> (f64, f64) {
    let go = GoNull::build();
    let mut rates = Vec::new();
    for who in ["router", "go"] {
        let topic = format!("drain-{who}-{streams}");
        let sub = format!("{topic}-sub");
        rt.block_on(async {
            conn.ensure_topic(&topic).await.unwrap();
            conn.ensure_subscription(&sub, &topic, SubscriptionOptions::default())
                .await
                .unwrap();
            // the router's targets without subscriptions: the broker confirms
            // and keeps nothing, so the emulator's state does not grow
            for i in 0..4 {
                conn.ensure_topic(&format!("{topic}-p{i}")).await.unwrap();
            }
            publish_all(conn, &topic, n).await;
        });
        let (first, last) = if who == "router" {
            let mut cfg = SubscriptionConfig::new(&sub, MESSAGE, "/auftragId");
            cfg.streams = streams;
            let router = rt
                .block_on(Router::start(
                    conn.clone(),
                    &RouterConfig {
                        subscription: cfg,
                        partitions: 4,
                        topic: format!("{topic}-p{{partition}}"),
                        partition_subscription: format!("{topic}-p{{partition}}"),
                        create: Some(false),
                        slot_map: None,
                    },
                ))
                .unwrap();
            let stats = router.stats();
            let r = wait_acked(|| stats.acked.load(std::sync::atomic::Ordering::Relaxed), n);
            rt.block_on(router.stop());
            r
        } else {
            let peer = GoNull::start(&go, emulator, &sub, streams);
            wait_acked(|| peer.acked(), n)
        };
        let rate = (n - 1) as f64 / (last - first).as_secs_f64().max(1e-6);
        eprintln!("{who} x{streams}: {rate:.0} deliveries/s");
        rates.push(rate);
    }
    (rates[0], rates[1])
}

fn wait_acked(acked: impl Fn() -> u64, n: u64) -> (Instant, Instant) {
    let end = Instant::now() + Duration::from_secs(600);
    let mut first = None;
    loop {
        let a = acked();
        if a > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if a >= n {
            return (first.unwrap_or_else(Instant::now), Instant::now());
        }
        assert!(Instant::now() < end, "{a} of {n} acked in time");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills partition 0 of `parts` and starts it again, `times` times: seconds
/// from the start of the process to its first ready answer.
fn restart_to_ready(parts: &mut [Proc], emulator: &Emulator, times: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..times {
        let p = &mut parts[0];
        let _ = p.child.kill();
        let _ = p.child.wait();
        let mut args = p.args.clone();
        let at = args.iter().position(|a| a == "--listen").unwrap();
        args[at + 1] = p.addr.clone();
        let t = Instant::now();
        let fresh = Proc::spawn(&args, emulator);
        wait_ready(&fresh.addr);
        out.push(t.elapsed().as_secs_f64());
        *p = fresh;
    }
    out
}

fn main() {
    let commit = support::measured_commit();
    let n = support::env_or("POSTFACH_CLUSTER_N", 20_000);
    let streams = support::env_or("POSTFACH_CLUSTER_STREAMS", 4) as u32;
    let rt = support::rt();
    let emulator = Emulator::start().unwrap_or_else(|e| panic!("{e}"));
    let conn = Connection::emulator(&emulator.endpoint(), PROJECT);

    // the router and the gateway first, on a fresh emulator
    let (direct_ms, gateway_ms) = gateway_latency(&emulator, 2000);
    eprintln!("publish p50: direct {direct_ms:.3} ms, through the gateway {gateway_ms:.3} ms");
    let (router_rate, go_rate) = router_drain(&emulator, &conn, &rt, n * 5, streams);
    // each P several times, alternating, and the median run of each
    let reps = support::env_or("POSTFACH_CLUSTER_RUNS", 5);
    let mut all: Vec<EndToEnd> = Vec::new();
    for rep in 0..reps {
        // the order alternates, so that no P always runs first or last
        let order = if rep % 2 == 0 { [1, 2, 4] } else { [4, 2, 1] };
        for p in order {
            let mut r = end_to_end(&emulator, &conn, &rt, p, n, streams, rep);
            if rep + 1 < reps {
                r.kept = None; // only the last P = 4 run is kept for the restarts
            }
            if r.kept.is_none() {
                // the emulator keeps what a run leaves and slows down with it
                rt.block_on(forget(&conn, p, rep));
            }
            all.push(r);
        }
    }
    // every run's CPU per 1,000 by P, for the means beside the medians
    let every: Vec<(u64, f64)> = all
        .iter()
        .map(|r| (r.partitions, r.cpu_postfach / n as f64 * 1000.0))
        .collect();
    let mean_of = |p: u64| {
        let v: Vec<f64> = every.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let means: Vec<(u64, f64)> = [1, 2, 4].iter().map(|&p| (p, mean_of(p))).collect();
    let mut runs: Vec<EndToEnd> = Vec::new();
    for p in [1, 2, 4] {
        let mut of_p: Vec<EndToEnd> = all
            .iter_mut()
            .filter(|r| r.partitions == p)
            .map(|r| EndToEnd {
                partitions: r.partitions,
                seconds: r.seconds,
                cpu_postfach: r.cpu_postfach,
                cpu_router: r.cpu_router,
                per_commit: r.per_commit,
                cpu_emulator: r.cpu_emulator,
                kept: r.kept.take(),
            })
            .collect();
        of_p.sort_by(|a, b| a.cpu_postfach.total_cmp(&b.cpu_postfach));
        let kept = of_p.iter_mut().find_map(|r| r.kept.take());
        let mut median = of_p.swap_remove(of_p.len() / 2);
        median.kept = kept;
        runs.push(median);
    }
    let restarts = match runs.last_mut().and_then(|r| r.kept.as_mut()) {
        Some((parts, _)) => restart_to_ready(parts, &emulator, 5),
        None => Vec::new(),
    };
    eprintln!("restart to ready: {restarts:?}");

    let base = runs[0].cpu_postfach / n as f64 * 1000.0;
    let mut md = String::from(
        "| partitions | completions | wall (s) | completions/s | postfach CPU s per 1,000 | of it the router | vs P = 1 | commands per commit | emulator CPU s per 1,000 |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in &runs {
        let per = r.cpu_postfach / n as f64 * 1000.0;
        md.push_str(&format!(
            "| {} | {n} | {:.2} | {:.0} | {per:.3} | {:.3} | {:.2}× | {:.1} | {:.3} |\n",
            r.partitions,
            r.seconds,
            n as f64 / r.seconds,
            r.cpu_router / n as f64 * 1000.0,
            per / base,
            r.per_commit,
            r.cpu_emulator / n as f64 * 1000.0
        ));
    }
    md.push_str(&format!(
        "\nMeans of the {reps} runs of each P, postfach CPU s per 1,000: {}.\n",
        means
            .iter()
            .map(|(p, m)| format!("P = {p} {m:.3} ({:.2}×)", m / means[0].1))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    md.push_str(&format!(
        "\n| measure | value |\n| --- | ---: |\n| publish p50 straight to a partition | {direct_ms:.3} ms |\n| publish p50 through a gateway | {gateway_ms:.3} ms |\n| the gateway adds (p50) | {:.3} ms |\n| router forwarding a backlog of {}, {streams} streams | {router_rate:.0}/s |\n| Go null consumer, same backlog and streams | {go_rate:.0}/s |\n| router vs Go null consumer | {:.2}× |\n| partition restart to ready, median of {} | {:.3} s |\n| partition restart to ready, slowest | {:.3} s |\n",
        gateway_ms - direct_ms,
        n * 5,
        router_rate / go_rate,
        restarts.len(),
        if restarts.is_empty() { f64::NAN } else { median(restarts.clone()) },
        restarts.iter().cloned().fold(0.0, f64::max),
    ));
    println!("\n{md}");
    let doc: Value = json!({
        "commit": commit,
        "completions": n,
        "runs_per_partition_count": reps,
        "every_run_cpu_seconds_per_1000": every
            .iter()
            .map(|(p, c)| json!({"partitions": p, "postfach": c}))
            .collect::<Vec<_>>(),
        "streams": streams,
        "end_to_end": runs.iter().map(|r| json!({
            "partitions": r.partitions,
            "seconds": r.seconds,
            "postfach_cpu_seconds": r.cpu_postfach,
            "router_cpu_seconds": r.cpu_router,
            "commands_per_commit": r.per_commit,
            "emulator_cpu_seconds": r.cpu_emulator,
        })).collect::<Vec<_>>(),
        "publish_p50_ms": {"direct": direct_ms, "gateway": gateway_ms},
        "drain_per_s": {"router": router_rate, "go_null": go_rate},
        "restart_to_ready_s": restarts,
    });
    support::keep_results("cluster", &commit, &md, &doc);
}
