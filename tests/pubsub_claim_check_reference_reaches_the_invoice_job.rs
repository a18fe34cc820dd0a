//! Against the real Pub/Sub emulator, the article's claim check on the way in:
//! the provider stores the completion protocol in Cloud Storage and publishes a
//! lean message (the notification attributes name the object); it correlates on
//! its key like any other, and the reference reaches the invoice job as a typed
//! variable. A lean message without its reference is parked malformed, never
//! correlated empty.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, eventually};
use common::{Env, MESSAGE};
use postfach::ingress::SubscriptionConfig;
use postfach::pubsub::Consumer;
use postfach::pubsub::consumer::ConsumerOptions;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const SUB: &str = "auftrag-abgeschlossen-sub";
const TOPIC: &str = "auftrag-abgeschlossen";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_completion_carries_its_protocol_reference_to_the_invoice_job() {
    let broker = Broker::start();
    broker.topic_with_subscription(TOPIC, SUB).await;
    let env = Env::reference().await;
    let order = env.waiting_order("A-1").await;
    let mut cfg = SubscriptionConfig::new(SUB, MESSAGE, "attribute:auftragId");
    cfg.claim_check = Some("attributes".into());
    cfg.claim_check_variable = Some("protokoll".into());
    let consumer = Consumer::start(
        broker.conn.clone(),
        &cfg,
        Arc::new(env.pf.clone()),
        ConsumerOptions::default(),
    )
    .unwrap();
    let stats = consumer.stats();

    // a Cloud Storage notification: object metadata as payload, the object in the attributes
    broker
        .publish(
            TOPIC,
            r#"{"kind": "storage#object", "name": "A-1/protokoll.json", "size": "7340032"}"#,
            &[
                ("auftragId", "A-1"),
                ("eventId", "evt-A-1"),
                ("bucketId", "abschluss-protokolle"),
                ("objectId", "A-1/protokoll.json"),
                ("objectGeneration", "1733220000123456"),
            ],
        )
        .await;
    // the same lean message without the object: not correlated, parked with its bytes
    broker
        .publish(
            TOPIC,
            r#"{"kind": "storage#object"}"#,
            &[("auftragId", "A-1"), ("eventId", "evt-A-1-bare")],
        )
        .await;
    eventually("both are acked", Duration::from_secs(30), || {
        stats.acked.load(Ordering::Relaxed) == 2
    })
    .await;
    consumer.stop().await;

    assert_eq!(env.waiting_at(order), ["rechnungStellen"]);
    // the invoice task is async: its continuation hands it to the worker topic
    env.pf.run_continuations(10).await.unwrap();
    let jobs = env.lock("rechnungStellen", 10, "invoicer", 60_000).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        jobs[0].task.variables["protokoll"],
        serde_json::json!({
            "bucket": "abschluss-protokolle",
            "object": "A-1/protokoll.json",
            "generation": "1733220000123456"
        })
    );
    let open = env.open_messages();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(
        (open[0].message_id.as_str(), open[0].reason),
        ("evt-A-1-bare", Some("malformed"))
    );
    assert!(
        open[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("claim-check reference: attributes bucketId and objectId are missing"),
        "{:?}",
        open[0].note
    );
}
