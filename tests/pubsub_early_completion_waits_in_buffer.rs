//! Against the real Pub/Sub emulator: a completion that overtakes its order is
//! consumed from the subscription into the buffer, acked, and correlated when
//! the order reaches the catch event; an undecodable payload is parked with its
//! raw bytes and acked instead of being redelivered forever.
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

fn consume(broker: &Broker, env: &Env) -> Consumer {
    Consumer::start(
        broker.conn.clone(),
        &SubscriptionConfig::new(SUB, MESSAGE, "/auftragId"),
        Arc::new(env.pf.clone()),
        ConsumerOptions::default(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_completion_is_buffered_acked_and_correlated_later() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftrag-abgeschlossen", SUB)
        .await;
    let env = Env::reference().await;
    let consumer = consume(&broker, &env);
    let stats = consumer.stats();

    broker
        .publish(
            "auftrag-abgeschlossen",
            r#"{"auftragId": "A-1", "erledigtePositionen": 1200, "abschlussZeitpunkt": "2026-12-02T10:00:00Z"}"#,
            &[("eventId", "evt-A-1")],
        )
        .await;
    eventually("the completion is acked", Duration::from_secs(20), || {
        stats.acked.load(Ordering::Relaxed) == 1
    })
    .await;
    let buffered = env.open_messages();
    assert_eq!(buffered.len(), 1, "{buffered:?}");
    assert_eq!(buffered[0].state, "buffered");
    assert_eq!(
        buffered[0].message_id, "evt-A-1",
        "the business id, not Pub/Sub's"
    );
    assert_eq!(buffered[0].key, "A-1");
    assert!(buffered[0].attributes.contains_key("pubsub.message_id"));

    // the order arrives only now and reaches the catch event
    let id = env.waiting_order("A-1").await;
    assert_eq!(
        env.waiting_at(id),
        ["rechnungStellen"],
        "correlated from the buffer"
    );
    let inst = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(inst.variables["erledigtePositionen"], 1200);
    assert!(env.open_messages().is_empty());
    assert_eq!(stats.nacked.load(Ordering::Relaxed), 0);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_parked_with_its_raw_bytes_and_acked() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftrag-abgeschlossen", SUB)
        .await;
    let env = Env::reference().await;
    let consumer = consume(&broker, &env);
    let stats = consumer.stats();

    let pubsub_id = broker
        .publish("auftrag-abgeschlossen", "{\"auftragId\": 4711,", &[])
        .await;
    eventually(
        "the malformed delivery is acked",
        Duration::from_secs(20),
        || stats.acked.load(Ordering::Relaxed) == 1,
    )
    .await;
    let parked = env.open_messages();
    assert_eq!(parked.len(), 1);
    let m = &parked[0];
    assert_eq!((m.state, m.reason), ("parked", Some("malformed")));
    assert_eq!(
        m.message_id, pubsub_id,
        "no business id: Pub/Sub's message_id"
    );
    assert_eq!(m.raw.as_deref(), Some("{\"auftragId\": 4711,"));
    assert_eq!(
        m.raw_hex.as_deref(),
        Some("7b22617566747261674964223a20343731312c"),
        "the same bytes in hex"
    );
    assert!(
        m.note.as_deref().unwrap_or_default().contains("not JSON"),
        "{m:?}"
    );
    // acked, not nacked: it is not coming back
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(stats.received.load(Ordering::Relaxed), 1);
    assert_eq!(stats.nacked.load(Ordering::Relaxed), 0);
    consumer.stop().await;
}
