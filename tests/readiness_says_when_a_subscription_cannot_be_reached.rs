//! `/health/ready` answers 503 while a consumer cannot reach its
//! subscription, and says which subscription and why; the process itself is
//! alive (`/health/live`), its API serves, and `/metrics` shows the consumer
//! down. The broker here is a port where nothing listens.
#![cfg(feature = "pubsub")]
use crate::common;
use common::server::Server;

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}

#[test]
fn ready_is_503_naming_the_subscription_while_the_broker_cannot_be_reached() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("127.0.0.1:{}", closed_port());
    let args: Vec<String> = [
        "--subscription",
        "auftrag-abgeschlossen-sub",
        "--message",
        "AuftragAbgeschlossen",
        "--key-from",
        "/auftragId",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let srv = Server::launch(
        dir.path(),
        &args,
        &[
            ("PUBSUB_EMULATOR_HOST", broker.as_str()),
            ("GOOGLE_CLOUD_PROJECT", "postfach-test"),
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (status, body) = loop {
        let (status, body) = srv.call("GET", "/health/ready", None, None);
        if status == 503 || std::time::Instant::now() > deadline {
            break (status, body);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("subscription auftrag-abgeschlossen-sub"),
        "says which subscription: {body}"
    );
    // it stays not ready: nothing listens there
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(srv.call("GET", "/health/ready", None, None).0, 503);
    // alive and serving all the same
    assert_eq!(srv.call("GET", "/health/live", None, None).0, 200);
    assert_eq!(srv.call("GET", "/instances", None, None).0, 200);
    let metrics = srv.metrics();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("postfach_pubsub_consumer_up{") && l.ends_with(" 0")),
        "{metrics}"
    );
}
