//! `postfach demo --pubsub` as a new user runs it (it starts its own emulator),
//! and `postfach run` stopped with SIGTERM in the middle of a stream of
//! deliveries: in-flight deliveries are committed and acked before it exits 0,
//! so nothing committed comes back as a redelivery.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, PROJECT, message, wait};
use common::server::Server;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// `postfach demo ARGS --json` as a new user runs it (it starts its own
/// emulators): its summary.
fn demo(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("demo")
        .args(args)
        .arg("--json")
        .env_remove("PUBSUB_EMULATOR_HOST")
        .env_remove("STORAGE_EMULATOR_HOST")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn demo_pubsub_starts_an_emulator_and_loses_nothing() {
    let s = demo(&["--pubsub", "--orders", "200"]);
    assert_eq!(s["orders_completed"], 200, "{s}");
    assert_eq!(s["invoices_issued"], 200, "{s}");
    assert_eq!(s["orders_invoiced_twice"], 0, "{s}");
    assert_eq!(s["messages_lost"], 0, "{s}");
    assert_eq!(s["parked"]["malformed"], 2, "{s}");
    assert_eq!(s["parked"]["late"], 1, "{s}");
    assert!(s["correlated_from_buffer"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["pubsub"]["nacked"], 0, "{s}");
    assert_eq!(s["pubsub"]["acked"], s["completions_published"], "{s}");
}

#[test]
fn demo_pubsub_claim_check_hands_large_orders_and_every_protocol_over_by_reference() {
    common::tools::go(); // the demo installs the Cloud Storage emulator with it
    let s = demo(&["--pubsub", "--claim-check", "--orders", "50"]);
    assert_eq!(s["orders_completed"], 50, "{s}");
    assert_eq!(s["messages_lost"], 0, "{s}");
    let cc = &s["pubsub"]["claim_checks"];
    // every tenth order (2,000 positions) went out by reference and was read
    assert_eq!(cc["orders_by_reference"], 5, "{s}");
    assert_eq!(cc["positions_in_them"], 10_000, "{s}");
    // no invoice without its protocol
    assert_eq!(cc["protocols_read"], s["invoices_issued"], "{s}");
    assert_eq!(s["invoices_issued"], 50, "{s}");
}

const CONFIG: &str = r#"
[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
topic = "auftrag-abgeschlossen"
message = "AuftragAbgeschlossen"
key = "/auftragId"
max_lease_extension = "10s"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_stream_commits_and_acks_what_is_in_flight() {
    const N: usize = 3_000;
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("postfach.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let env = [
        ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
        ("GOOGLE_CLOUD_PROJECT", PROJECT),
    ];
    let args = ["--config".to_string(), config.display().to_string()];
    // the server creates topic and subscription itself (emulator: create = true)
    let server = Server::launch(dir.path(), &args, &env);
    wait("ready", Duration::from_secs(30), || {
        server.call("GET", "/health/ready", None, None).0 == 200
    });
    // ready means every stream of the subscription pulls (8 unless configured)
    assert_eq!(
        server
            .metric("postfach_pubsub_streams_running{subscription=\"auftrag-abgeschlossen-sub\"}"),
        8.0
    );
    let publisher = broker
        .conn
        .publisher("auftrag-abgeschlossen")
        .await
        .unwrap();
    let mut futures = Vec::new();
    for i in 0..N {
        let body = format!(r#"{{"auftragId": "B-{i}"}}"#);
        futures.push(publisher.publish(message(&body, &[("eventId", &format!("evt-{i}"))])));
    }
    for f in futures {
        f.await.unwrap();
    }
    const ACKED: &str = "postfach_pubsub_deliveries_total{subscription=\"auftrag-abgeschlossen-sub\",result=\"acked\"}";
    wait("the stream is flowing", Duration::from_secs(60), || {
        server.metric(ACKED) >= 300.0
    });
    let (status, log) = server.stop_with_log();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    // every stream accounts for what it was handed: acked, nacked or held,
    // and every stored delivery was acked before the exit
    // the log lines without their colour codes
    let plain = |l: &String| {
        let mut out = String::new();
        let mut chars = l.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    };
    let accounted: Vec<String> = log
        .iter()
        .map(plain)
        .filter(|l| l.contains("deliveries accounted"))
        .collect();
    assert_eq!(accounted.len(), 8, "one account per stream: {log:#?}");
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {line}"))
    };
    let mut handed_over = 0;
    for line in &accounted {
        assert!(line.contains("balanced=true"), "{line}");
        assert_eq!(field(line, "stored"), field(line, "acked"), "{line}");
        assert_eq!(field(line, "held"), 0, "{line}");
        handed_over += field(line, "received");
    }
    eprintln!("the stopped server was handed {handed_over} of {N} deliveries");

    let server = Server::launch(dir.path(), &args, &env);
    // deliveries the stopped server had pulled but not yet handed over come
    // back when the broker sees its nack, or at the latest when their lease
    // runs out: give that time on a loaded 2-core machine
    let end = std::time::Instant::now() + Duration::from_secs(300);
    while server.metric("postfach_messages_total{outcome=\"buffered\"}") < N as f64 {
        // should it time out, say what was stored and what the broker still holds
        assert!(
            std::time::Instant::now() < end,
            "not everything was stored within 300 s after the restart: {}",
            server
                .metrics()
                .lines()
                .filter(|l| l.starts_with("postfach_messages_total")
                    || l.starts_with("postfach_pubsub_"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // nothing that was committed before the stop came back
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        server.metric("postfach_messages_total{outcome=\"duplicate\"}"),
        0.0,
        "a committed delivery was not acked before the exit"
    );
    assert_eq!(
        server.metric("postfach_messages_total{outcome=\"buffered\"}"),
        N as f64
    );
    assert!(server.stop().success());
}
