//! Against the real Pub/Sub emulator: when the engine cannot record a delivery
//! (a storage failure), the consumer nacks instead of acking, Pub/Sub delivers
//! again, and the retry is correlated. With a dead-letter policy on the
//! subscription, the delivery attempt is recorded on what gets parked.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, eventually};
use common::{Env, MESSAGE};
use postfach::StoreError;
use postfach::ingress::SubscriptionConfig;
use postfach::pubsub::consumer::{ConsumerOptions, Sink};
use postfach::pubsub::{Consumer, SubscriptionOptions};
use postfach::{Delivery, Malformed, Publish};
use postfach::{Error, Postfach};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SUB: &str = "auftrag-abgeschlossen-sub";

/// The engine, failing its first `failures` calls the way a broken disk does.
struct FailingStore {
    pf: Postfach,
    failures: AtomicUsize,
}

impl FailingStore {
    fn fail(&self) -> Option<Error> {
        self.failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .ok()
            .map(|_| Error::Store(StoreError::Io(std::io::Error::other("injected: disk full"))))
    }
}

impl Sink for FailingStore {
    async fn publish(&self, p: Publish) -> Result<Delivery, Error> {
        match self.fail() {
            Some(e) => Err(e),
            None => self.pf.publish(p).await,
        }
    }
    async fn park_malformed(&self, m: Malformed) -> Result<Delivery, Error> {
        match self.fail() {
            Some(e) => Err(e),
            None => self.pf.park_malformed(m).await,
        }
    }
}

/// A consumer whose store fails its first two calls.
fn consume_failing_twice(broker: &Broker, env: &Env) -> Consumer {
    Consumer::start(
        broker.conn.clone(),
        &SubscriptionConfig::new(SUB, MESSAGE, "/auftragId"),
        Arc::new(FailingStore {
            pf: env.pf.clone(),
            failures: AtomicUsize::new(2),
        }),
        ConsumerOptions::default(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_failure_nacks_then_the_redelivery_is_correlated() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftrag-abgeschlossen", SUB)
        .await;
    let env = Env::reference().await;
    let order = env.waiting_order("A-7").await;
    let consumer = consume_failing_twice(&broker, &env);
    let stats = consumer.stats();
    broker
        .publish(
            "auftrag-abgeschlossen",
            r#"{"auftragId": "A-7", "erledigtePositionen": 3}"#,
            &[("eventId", "evt-7")],
        )
        .await;
    eventually("the redelivery is acked", Duration::from_secs(60), || {
        stats.acked.load(Ordering::Relaxed) == 1
    })
    .await;
    assert_eq!(
        stats.nacked.load(Ordering::Relaxed),
        2,
        "two failed attempts, two nacks"
    );
    assert_eq!(
        stats.received.load(Ordering::Relaxed),
        3,
        "Pub/Sub delivered it again"
    );
    assert_eq!(env.waiting_at(order), ["rechnungStellen"]);
    let c = env.pf.reader().unwrap().counters().unwrap();
    assert_eq!(c.get("messages_correlated").copied(), Some(1));
    assert_eq!(c.get("messages_duplicate").copied().unwrap_or(0), 0);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_subscription_records_the_delivery_attempt_on_the_parked_message() {
    let broker = Broker::start();
    broker
        .conn
        .ensure_topic("auftrag-abgeschlossen-dlq")
        .await
        .unwrap();
    broker
        .subscription(
            "auftrag-abgeschlossen",
            SUB,
            SubscriptionOptions {
                ack_deadline_seconds: 10,
                dead_letter: Some(("auftrag-abgeschlossen-dlq".into(), 5)),
                retry_backoff: None,
            },
        )
        .await;
    let env = Env::reference().await;
    let consumer = consume_failing_twice(&broker, &env);
    let stats = consumer.stats();
    broker
        .publish(
            "auftrag-abgeschlossen",
            "kein json",
            &[("eventId", "evt-x")],
        )
        .await;
    eventually(
        "the third attempt is parked and acked",
        Duration::from_secs(90),
        || stats.acked.load(Ordering::Relaxed) == 1,
    )
    .await;
    let parked = env.open_messages();
    assert_eq!(parked.len(), 1);
    let m = &parked[0];
    assert_eq!((m.state, m.reason), ("parked", Some("malformed")));
    assert_eq!(m.message_id, "evt-x");
    assert_eq!(
        m.attributes
            .get("pubsub.delivery_attempt")
            .map(String::as_str),
        Some("3"),
        "{:?}",
        m.attributes
    );
    assert_eq!(m.raw.as_deref(), Some("kein json"));
    consumer.stop().await;
}
