//! Against the real Pub/Sub emulator and the `postfach run` binary: the send task
//! `auftragUebergeben` bound to topic `auftraege` publishes each order through
//! the outbox. The process is killed while orders are being handed over; after
//! the restart every order has reached the topic at least once, and every copy
//! of one order carries the same `eventId`, so a deduplicating receiver sees
//! each order exactly once.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, PROJECT, wait};
use common::server::Server;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const ORDERS: usize = 300;

fn launch(dir: &std::path::Path, broker: &Broker) -> Server {
    Server::launch(
        dir,
        &["--send-topic".into(), "auftragUebergeben=auftraege".into()],
        &[
            ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
            ("GOOGLE_CLOUD_PROJECT", PROJECT),
        ],
    )
}

fn handed_over(s: &Server) -> usize {
    let (_, v) = s.json(
        "GET",
        "/instances?waiting_at=warteAufAbschluss&limit=1000",
        None,
    );
    v["instances"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_reaches_the_topic_with_a_stable_message_id_across_a_kill() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftraege", "auftraege-dienstleister")
        .await;
    let dir = tempfile::tempdir().unwrap();

    let server = launch(dir.path(), &broker);
    for i in 0..ORDERS {
        let (status, _) = server.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": format!("A-{i}")}})),
        );
        assert_eq!(status, 201);
    }
    wait(
        "some orders are handed over",
        Duration::from_secs(60),
        || handed_over(&server) >= ORDERS / 4,
    );
    server.kill9(); // some publishes confirmed but not completed, some not sent

    let server = launch(dir.path(), &broker);
    wait(
        "every order is handed over",
        Duration::from_secs(120),
        || handed_over(&server) == ORDERS,
    );
    assert!(server.stop().success());

    let received = broker
        .drain(
            "auftraege-dienstleister",
            Duration::from_secs(3),
            Duration::from_secs(60),
        )
        .await;
    assert!(received.len() >= ORDERS, "{} messages", received.len());
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (data, attrs) in &received {
        let order: serde_json::Value = serde_json::from_str(data).expect("the order is JSON");
        let auftrag = order["auftragId"]
            .as_str()
            .expect("carries auftragId")
            .to_string();
        let id = attrs
            .get("eventId")
            .expect("every order carries eventId")
            .clone();
        assert_eq!(
            attrs.get("postfachElement").map(String::as_str),
            Some("auftragUebergeben")
        );
        ids.entry(auftrag).or_default().insert(id);
    }
    assert_eq!(ids.len(), ORDERS, "every order reached the topic");
    for (auftrag, set) in &ids {
        assert_eq!(
            set.len(),
            1,
            "{auftrag} was published under several ids: {set:?}"
        );
    }
    let distinct: BTreeSet<&String> = ids.values().flatten().collect();
    assert_eq!(
        distinct.len(),
        ORDERS,
        "a deduplicating receiver sees each order once"
    );
    eprintln!(
        "{} messages for {ORDERS} orders ({} redelivered or republished after the kill)",
        received.len(),
        received.len() - ORDERS
    );
}
