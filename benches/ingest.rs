//! Ingest through Pub/Sub at 1, 4 and 8 streaming pulls, on one emulator in
//! one run: `postfach run` consuming a subscription (every delivery durably
//! stored before its ack), Google's Go client as a null consumer (acks at once,
//! stores nothing: what the broker hands out), and postfach's own consumer
//! code with a null sink (what the Rust client hands out).
//!
//! Per contender: (1) drain — N messages wait in the subscription, the consumer
//! starts and acks them all: deliveries per second; (2) steady — messages are
//! published at half of postfach's drain rate at that stream count (or
//! `POSTFACH_INGEST_RATE`) while the consumer runs: p50/p99 of broker publish
//! time → ack. The emulator's own ceiling for publishes is reported too.
//!
//! The Go peer is `benches/go-null-consumer` (`cloud.google.com/go/pubsub/v2`,
//! `ReceiveSettings.NumGoroutines` = streams, 1,000 outstanding messages),
//! built here with `go build` from the Go module proxy. postfach runs as the
//! release binary in its own process with `--streams`; all use 1,000
//! outstanding messages.
//!
//! cargo bench --bench ingest            (N=20000; streams 1, 4, 8)
//! POSTFACH_INGEST_N=50000 POSTFACH_INGEST_STREAMS=4 cargo bench --bench ingest

#[path = "support/mod.rs"]
mod support;

use google_cloud_pubsub::model::Message;
use postfach::ingress::{ACK_LATENCY_BOUNDS, ConsumerStats, SubscriptionConfig};
use postfach::pubsub::consumer::{ConsumerOptions, Sink};
use postfach::pubsub::{Connection, Consumer, Emulator, SubscriptionOptions};
use postfach::{Delivery, Malformed, Publish};
use postfach::{Error, Outcome};
use serde_json::json;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::go_null::GoNull;

const PROJECT: &str = "postfach-bench";
const MESSAGE: &str = "AuftragAbgeschlossen";

/// Acks without storing anything.
struct NullSink;

impl Sink for NullSink {
    async fn publish(&self, p: Publish) -> Result<Delivery, Error> {
        Ok(delivery(p.message_id.unwrap_or_default()))
    }
    async fn park_malformed(&self, m: Malformed) -> Result<Delivery, Error> {
        Ok(delivery(m.message_id))
    }
}

fn delivery(message_id: String) -> Delivery {
    Delivery {
        outcome: Outcome::Buffered,
        message_id,
        instance: None,
        element: None,
        reason: None,
        candidates: vec![],
        candidate_elements: vec![],
        expires_at: None,
    }
}

/// What a contender exposes: its acked count and its latency histogram.
trait Contender {
    fn name(&self) -> String;
    fn acked(&self) -> u64;
    /// Cumulative bucket counts of the publish → ack histogram.
    fn latency_buckets(&self) -> Vec<u64>;
}

struct Null {
    stats: Arc<ConsumerStats>,
}

impl Contender for Null {
    fn name(&self) -> String {
        "postfach's consumer, null sink (acks, stores nothing)".into()
    }
    fn acked(&self) -> u64 {
        self.stats.acked.load(Ordering::Relaxed)
    }
    fn latency_buckets(&self) -> Vec<u64> {
        // cumulative counts of the bounded buckets, as the server's /metrics shows them
        let (per_bucket, _) = self.stats.ack_latency.buckets();
        per_bucket
            .iter()
            .filter(|(bound, _)| *bound < f64::MAX)
            .scan(0, |sum, (_, n)| {
                *sum += n;
                Some(*sum)
            })
            .collect()
    }
}

struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(emulator: &Emulator, subscription: &str, streams: u32) -> Server {
        let dir = support::bench_dir();
        let mut cmd =
            support::reference_run(env!("CARGO_BIN_EXE_postfach"), &dir.path().join("run.redb"));
        cmd.args([
            "--subscription",
            subscription,
            "--message",
            MESSAGE,
            "--key-from",
            "/auftragId",
            "--streams",
            &streams.to_string(),
        ])
        .env("PUBSUB_EMULATOR_HOST", emulator.host())
        .env("GOOGLE_CLOUD_PROJECT", PROJECT)
        .env("RUST_LOG", "warn")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        let (child, addr) = support::spawn_listening(cmd);
        Server {
            child,
            addr,
            _dir: dir,
        }
    }

    fn metrics(&self) -> String {
        ureq::get(&format!("http://{}/metrics", self.addr))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Contender for Server {
    fn name(&self) -> String {
        "postfach run (stores, then acks)".into()
    }
    fn acked(&self) -> u64 {
        self.metrics()
            .lines()
            .find(|l| {
                l.starts_with("postfach_pubsub_deliveries_total{") && l.contains("result=\"acked\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
    fn latency_buckets(&self) -> Vec<u64> {
        buckets(
            &self.metrics(),
            "postfach_pubsub_ack_latency_seconds_bucket",
        )
    }
}

impl Contender for GoNull {
    fn name(&self) -> String {
        "Google's Go client, null consumer (acks, stores nothing)".into()
    }
    fn acked(&self) -> u64 {
        self.seen.lock().unwrap().0
    }
    fn latency_buckets(&self) -> Vec<u64> {
        self.seen.lock().unwrap().1.clone()
    }
}

/// Cumulative counts of a Prometheus histogram's finite buckets.
fn buckets(text: &str, series: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| l.starts_with(series) && !l.contains("+Inf"))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
        .collect()
}

/// Quantile of the observations between two cumulative snapshots, interpolated
/// inside its bucket.
fn quantile(before: &[u64], after: &[u64], total: u64, q: f64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut prev = 0u64;
    for (i, bound) in ACK_LATENCY_BOUNDS.iter().enumerate() {
        let cum = after.get(i).copied().unwrap_or(0) - before.get(i).copied().unwrap_or(0);
        if cum as f64 >= rank {
            let lo = if i == 0 {
                0.0
            } else {
                ACK_LATENCY_BOUNDS[i - 1]
            };
            let n = (cum - prev).max(1) as f64;
            return Some(lo + (bound - lo) * ((rank - prev as f64) / n).clamp(0.0, 1.0));
        }
        prev = cum;
    }
    ACK_LATENCY_BOUNDS.last().copied()
}

fn completion(i: u64) -> Message {
    Message::new()
        .set_data(format!(
            r#"{{"auftragId": "K-{i}", "erledigtePositionen": {i}, "abschlussZeitpunkt": "2026-12-02T10:00:00Z"}}"#
        ))
        .set_attributes([("eventId", format!("e-{i}"))])
}

/// Publishes `n` messages starting at `from` as fast as the broker takes them.
async fn publish_burst(conn: &Connection, topic: &str, from: u64, n: u64) -> f64 {
    let p = conn.publisher(topic).await.unwrap();
    let t = Instant::now();
    let mut pending = Vec::new();
    for i in from..from + n {
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
    n as f64 / t.elapsed().as_secs_f64()
}

/// Publishes at `rate` per second for `secs`, in 10 ms ticks.
async fn publish_steady(conn: &Connection, topic: &str, from: u64, rate: u64, secs: u64) -> u64 {
    let p = conn.publisher(topic).await.unwrap();
    let per_tick = (rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut i = from;
    let mut pending = Vec::new();
    for _ in 0..secs * 100 {
        tick.tick().await;
        for _ in 0..per_tick {
            pending.push(p.publish(completion(i)));
            i += 1;
        }
    }
    for f in pending {
        f.await.unwrap();
    }
    i - from
}

async fn wait_acked(c: &dyn Contender, n: u64, limit: Duration) -> (Option<Instant>, Instant) {
    let end = Instant::now() + limit;
    let mut first = None;
    loop {
        let a = c.acked();
        if a > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if a >= n {
            return (first, Instant::now());
        }
        assert!(
            Instant::now() < end,
            "{}: {a} of {n} acked in time",
            c.name()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Row {
    streams: u32,
    name: String,
    drain_per_s: f64,
    rate: u64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    steady: u64,
}

/// Drains the backlog of `n`, then publishes at `rate` (or at half the drain
/// rate when `rate` is `None`) for `secs`.
async fn measure(
    c: &dyn Contender,
    streams: u32,
    conn: &Connection,
    topic: &str,
    n: u64,
    rate: Option<u64>,
    secs: u64,
) -> Row {
    // drain: the backlog was published before the consumer started
    let (first, last) = wait_acked(c, n, Duration::from_secs(600)).await;
    let acked_at_first = 1; // the first ack is where the clock starts
    let first = first.unwrap_or(last);
    let drain_per_s = (n - acked_at_first) as f64 / (last - first).as_secs_f64().max(1e-6);
    let rate = rate.unwrap_or((drain_per_s / 2.0) as u64).max(100);
    // steady: publish at a fixed rate, latency of those deliveries only
    let before = c.latency_buckets();
    let steady = publish_steady(conn, topic, n, rate, secs).await;
    wait_acked(c, n + steady, Duration::from_secs(120)).await;
    let after = c.latency_buckets();
    let total = after.last().copied().unwrap_or(0) - before.last().copied().unwrap_or(0);
    // observations above the last finite bound are not in `after`; count them
    let q = |q| quantile(&before, &after, total.max(steady), q).map(|s| s * 1000.0);
    Row {
        streams,
        name: c.name(),
        drain_per_s,
        rate,
        p50_ms: q(0.5),
        p99_ms: q(0.99),
        steady,
    }
}

fn main() {
    // before anything is written: the result files themselves make the tree dirty
    let commit = support::measured_commit();
    let n = support::env_or("POSTFACH_INGEST_N", 20_000);
    let fixed_rate = std::env::var("POSTFACH_INGEST_RATE")
        .ok()
        .and_then(|v| v.parse().ok());
    let secs = support::env_or("POSTFACH_INGEST_SECS", 10);
    let stream_counts: Vec<u32> = std::env::var("POSTFACH_INGEST_STREAMS")
        .unwrap_or_else(|_| "1,4,8".into())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    let go = GoNull::build();
    let rt = support::rt();
    let emulator = Emulator::start().unwrap_or_else(|e| panic!("{e}"));
    let conn = Connection::emulator(&emulator.endpoint(), PROJECT);
    rt.block_on(async {
        let mut rows: Vec<Row> = Vec::new();
        let mut publish_rates = Vec::new();
        for &streams in &stream_counts {
            // postfach first: its drain rate sets the steady rate of all three
            let mut rate = fixed_rate;
            for contender in ["postfach", "go", "null"] {
                let topic = format!("ingest-{contender}-{streams}");
                let sub = format!("{topic}-sub");
                conn.ensure_topic(&topic).await.unwrap();
                conn.ensure_subscription(&sub, &topic, SubscriptionOptions::default())
                    .await
                    .unwrap();
                let publish_rate = publish_burst(&conn, &topic, 0, n).await;
                publish_rates.push(publish_rate);
                eprintln!("{contender} x{streams}: {n} messages waiting ({publish_rate:.0}/s published)");
                let row = match contender {
                    "postfach" => {
                        let server = Server::start(&emulator, &sub, streams);
                        measure(&server, streams, &conn, &topic, n, rate, secs).await
                    }
                    "go" => {
                        let peer = GoNull::start(&go, &emulator, &sub, streams);
                        measure(&peer, streams, &conn, &topic, n, rate, secs).await
                    }
                    _ => {
                        let mut cfg = SubscriptionConfig::new(&sub, MESSAGE, "/auftragId");
                        cfg.streams = streams;
                        let consumer = Consumer::start(
                            conn.clone(),
                            &cfg,
                            Arc::new(NullSink),
                            ConsumerOptions::default(),
                        )
                        .unwrap();
                        let c = Null {
                            stats: consumer.stats(),
                        };
                        let row = measure(&c, streams, &conn, &topic, n, rate, secs).await;
                        consumer.stop().await;
                        row
                    }
                };
                rate.get_or_insert(row.rate);
                eprintln!(
                    "{} x{streams}: drain {:.0}/s; steady {} msgs at {}/s: p50 {:?} ms, p99 {:?} ms",
                    row.name, row.drain_per_s, row.steady, row.rate, row.p50_ms, row.p99_ms
                );
                rows.push(row);
            }
        }
        let ceiling = publish_rates.iter().cloned().fold(f64::MAX, f64::min);
        let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let go_at = |streams: u32| {
            rows.iter()
                .find(|r| r.streams == streams && r.name.starts_with("Google"))
                .map_or(f64::NAN, |r| r.drain_per_s)
        };
        let mut md = String::from(
            "| streams | consumer | drain (acks/s) | vs Go null consumer | steady rate (/s) | p50 publish→ack (ms) | p99 (ms) |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for r in &rows {
            md.push_str(&format!(
                "| {} | {} | {:.0} | {:.2}× | {} | {} | {} |\n",
                r.streams,
                r.name,
                r.drain_per_s,
                r.drain_per_s / go_at(r.streams),
                r.rate,
                fmt(r.p50_ms),
                fmt(r.p99_ms)
            ));
        }
        md.push_str(&format!(
            "\nemulator: publishes accepted at least {ceiling:.0}/s (slowest burst of the run)\n"
        ));
        println!("\n{md}");
        let doc = json!({
            "commit": commit,
            "messages": n,
            "steady_seconds": secs,
            "emulator_publish_per_s": ceiling,
            "contenders": rows.iter().map(|r| json!({
                "streams": r.streams,
                "name": r.name,
                "drain_per_s": r.drain_per_s,
                "vs_go_null": r.drain_per_s / go_at(r.streams),
                "steady_rate": r.rate,
                "p50_ms": r.p50_ms,
                "p99_ms": r.p99_ms,
            })).collect::<Vec<_>>(),
        });
        std::fs::create_dir_all("bench-results").unwrap();
        std::fs::write("bench-results/ingest.md", &md).unwrap();
        std::fs::write(
            "bench-results/ingest.json",
            serde_json::to_string_pretty(&doc).unwrap(),
        )
        .unwrap();
    });
}
