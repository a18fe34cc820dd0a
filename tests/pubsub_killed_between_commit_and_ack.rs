//! Against the real Pub/Sub emulator and the `postfach run` binary: the process
//! is killed (SIGKILL) after a delivery was committed and before it was acked.
//! Pub/Sub delivers it again; the engine recognises the duplicate and counts the
//! message once. SIGTERM then stops the server cleanly (exit 0).
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, COMPLETIONS_CONFIG, launch_with, wait};
use common::server::Server;
use postfach::{MessageState, Postfach};
use std::time::Duration;

const SUB: &str = "auftrag-abgeschlossen-sub";
const DELIVERIES: &str =
    "postfach_pubsub_deliveries_total{subscription=\"auftrag-abgeschlossen-sub\",result=";

fn launch(dir: &std::path::Path, broker: &Broker, hold_acks: bool) -> Server {
    let env: &[(&str, &str)] = if hold_acks {
        &[("POSTFACH_TEST_HOLD_ACKS", "1")]
    } else {
        &[]
    };
    launch_with(dir, broker, COMPLETIONS_CONFIG, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_after_a_kill_before_the_ack_is_a_recognised_duplicate() {
    let broker = Broker::start();
    broker.reference_topics(SUB).await;
    let dir = tempfile::tempdir().unwrap();

    let server = launch(dir.path(), &broker, true);
    broker
        .publish(
            "auftrag-abgeschlossen",
            r#"{"auftragId": "A-1", "erledigtePositionen": 5}"#,
            &[("eventId", "evt-1")],
        )
        .await;
    wait("the delivery is committed", Duration::from_secs(30), || {
        server.metric(&format!("{DELIVERIES}\"buffered\"}}")) == 1.0
    });
    assert_eq!(server.metric(&format!("{DELIVERIES}\"acked\"}}")), 0.0);
    server.kill9(); // committed, never acked

    let server = launch(dir.path(), &broker, false);
    // the emulator redelivers a message leased by a killed stream when its
    // sweep gets to it, which under load can take well over a minute
    wait(
        "Pub/Sub delivers it again",
        Duration::from_secs(180),
        || server.metric(&format!("{DELIVERIES}\"acked\"}}")) == 1.0,
    );
    assert_eq!(server.metric(&format!("{DELIVERIES}\"duplicate\"}}")), 1.0);
    assert_eq!(
        server.metric("postfach_messages_total{outcome=\"duplicate\"}"),
        1.0
    );
    let status = server.stop();
    assert!(status.success(), "SIGTERM stops cleanly: {status:?}");

    let pf = Postfach::open(dir.path().join("run.redb")).unwrap();
    let r = pf.reader().unwrap();
    let records = r.message("evt-1").unwrap();
    assert_eq!(records.len(), 1, "one record for the message: {records:?}");
    assert_eq!(records[0].state, MessageState::Buffered.as_str());
    assert_eq!(
        r.counters().unwrap().get("messages_buffered").copied(),
        Some(1)
    );
}
