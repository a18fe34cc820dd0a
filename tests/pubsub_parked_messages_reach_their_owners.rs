//! Against the real Pub/Sub emulator and the `postfach run` binary: with
//! `[notifications] parked_topic`, every parked and discarded message is
//! announced on that topic — once per event, under a stable `eventId`,
//! without the payload. While the topic cannot be reached the events stay
//! kept (and counted in `/metrics`); they go out once it can.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, PROJECT, wait};
use common::server::Server;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const CONFIG: &str = r#"
[pubsub]
create = false

[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
message = "AuftragAbgeschlossen"
key = "/auftragId"

[notifications]
parked_topic = "postfach-parked"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_and_discarded_messages_are_announced_once_each_and_wait_for_the_topic() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftrag-abgeschlossen", "auftrag-abgeschlossen-sub")
        .await;
    // the events' topic does not exist yet: nothing can be published
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("postfach.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let env = [
        ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
        ("GOOGLE_CLOUD_PROJECT", PROJECT),
    ];
    let server = Server::launch(
        dir.path(),
        &["--config".to_string(), config.display().to_string()],
        &env,
    );
    let (status, _) = server.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "A-1"}})),
    );
    assert_eq!(status, 201);
    server.hand_over(1);

    let completion = r#"{"auftragId": "A-1", "erledigtePositionen": 3}"#;
    broker
        .publish("auftrag-abgeschlossen", completion, &[("eventId", "evt-1")])
        .await;
    // deliveries run concurrently: the second is late only once the first arrived
    wait(
        "the first completion correlates",
        Duration::from_secs(30),
        || {
            let (_, v) = server.json("GET", "/instances?waiting_at=warteAufAbschluss", None);
            v["instances"].as_array().is_some_and(Vec::is_empty)
        },
    );
    broker
        .publish("auftrag-abgeschlossen", completion, &[("eventId", "evt-2")])
        .await; // late: the order passed its catch event
    broker
        .publish("auftrag-abgeschlossen", "{kaputt", &[("eventId", "evt-3")])
        .await; // malformed
    wait("both are parked", Duration::from_secs(30), || {
        let (_, v) = server.json("GET", "/messages?parked=true", None);
        v["messages"].as_array().map_or(0, Vec::len) == 2
    });
    let (status, body) = server.json(
        "POST",
        "/messages/evt-2/discard",
        Some(json!({"by": "ops", "why": "doppelt"})),
    );
    assert_eq!(status, 200, "{body}");
    // three events wait for a topic that is not there
    wait("three events are kept", Duration::from_secs(10), || {
        server.metric("postfach_parked_events_unpublished") == 3.0
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        server.metric("postfach_parked_events_unpublished"),
        3.0,
        "kept while the topic cannot be reached"
    );

    broker
        .topic_with_subscription("postfach-parked", "ops-alerts")
        .await;
    wait("the events went out", Duration::from_secs(90), || {
        server.metric("postfach_parked_events_unpublished") == 0.0
    });
    assert!(server.stop().success());

    let received = broker
        .drain(
            "ops-alerts",
            Duration::from_secs(3),
            Duration::from_secs(30),
        )
        .await;
    let mut seen = Vec::new();
    let mut ids = BTreeSet::new();
    for (data, attrs) in &received {
        let v: Value = serde_json::from_str(data).expect("an event is JSON");
        let id = attrs.get("eventId").expect("carries eventId").clone();
        assert_eq!(v["eventId"], id.as_str());
        assert_eq!(
            attrs.get("postfachEvent").map(String::as_str),
            v["event"].as_str()
        );
        assert!(v.get("variables").is_none(), "no payload: {v}");
        assert_eq!(v["message"]["name"], "AuftragAbgeschlossen");
        if ids.insert(id) {
            seen.push((
                v["event"].as_str().unwrap().to_string(),
                v["message"]["id"].as_str().unwrap().to_string(),
                v["reason"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("discarded".into(), "evt-2".into(), "late".into()),
            ("parked".into(), "evt-2".into(), "late".into()),
            ("parked".into(), "evt-3".into(), "malformed".into()),
        ],
        "one event per park and discard"
    );
}
