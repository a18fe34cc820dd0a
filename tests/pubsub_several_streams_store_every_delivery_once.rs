//! Against the real Pub/Sub emulator: a subscription consumed over four
//! streaming pulls stores every delivery exactly once, keeps the total
//! flow-control limit across its streams (not four times it), and a graceful
//! stop lets every stream finish and ack what it holds — what was not received
//! stays in the subscription for the next start.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, eventually};
use common::{Env, MESSAGE};
use postfach::ingress::{ConsumerState, SubscriptionConfig};
use postfach::pubsub::Consumer;
use postfach::pubsub::consumer::{ConsumerOptions, Sink};
use postfach::{Delivery, Malformed, Publish};
use postfach::{Error, Postfach};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const SUB: &str = "auftrag-abgeschlossen-sub";
const TOPIC: &str = "auftrag-abgeschlossen";

/// The engine, slowed a little, counting how many deliveries it holds at once.
struct Counting {
    pf: Postfach,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Counting {
    async fn hold<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let out = f.await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

impl Sink for Counting {
    async fn publish(&self, p: Publish) -> Result<Delivery, Error> {
        self.hold(self.pf.publish(p)).await
    }
    async fn park_malformed(&self, m: Malformed) -> Result<Delivery, Error> {
        self.hold(self.pf.park_malformed(m)).await
    }
}

fn config(streams: u32, outstanding: i64) -> SubscriptionConfig {
    let mut c = SubscriptionConfig::new(SUB, MESSAGE, "/auftragId");
    c.streams = streams;
    c.max_outstanding_messages = outstanding;
    c.max_lease_extension = "10s".into();
    c
}

async fn publish_completions(broker: &Broker, n: usize) {
    let p = broker.conn.publisher(TOPIC).await.unwrap();
    let pending: Vec<_> = (0..n)
        .map(|i| {
            // 40 keys, ten completions each: one key arrives on several streams
            p.publish(common::pubsub::message(
                &format!(
                    r#"{{"auftragId": "K-{}", "erledigtePositionen": {i}}}"#,
                    i % 40
                ),
                &[("eventId", &format!("evt-{i}"))],
            ))
        })
        .collect();
    for f in pending {
        f.await.unwrap();
    }
}

fn stored_ids(env: &Env) -> Vec<String> {
    env.open_messages()
        .into_iter()
        .map(|m| m.message_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_streams_store_each_delivery_once_within_one_total_limit() {
    let broker = Broker::start();
    broker.topic_with_subscription(TOPIC, SUB).await;
    let env = Env::reference().await;
    publish_completions(&broker, 400).await;
    let sink = Arc::new(Counting {
        pf: env.pf.clone(),
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    // each stream may hold 8; together they may hold 8, not 32
    let consumer = Consumer::start(
        broker.conn.clone(),
        &config(4, 8),
        sink.clone(),
        ConsumerOptions::default(),
    )
    .unwrap();
    let stats = consumer.stats();
    eventually("all 400 are acked", Duration::from_secs(60), || {
        stats.acked.load(Ordering::Relaxed) >= 400
    })
    .await;
    assert_eq!(stats.streams(), 4);
    assert_eq!(stats.streams_running(), 4, "every stream pulls");
    assert_eq!(stats.state(), ConsumerState::Running);
    consumer.stop().await;
    assert_eq!(stats.state(), ConsumerState::Stopped);
    assert_eq!(stats.streams_running(), 0);

    let most = sink.most.load(Ordering::SeqCst);
    assert!(
        (1..=8).contains(&most),
        "at most 8 deliveries in flight over all streams, saw {most}"
    );
    let ids = stored_ids(&env);
    let distinct: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), 400, "each delivery stored once");
    assert_eq!(distinct.len(), 400);
    assert_eq!(stats.nacked.load(Ordering::Relaxed), 0);
    assert_eq!(
        stats.outcomes()[2],
        stats.received.load(Ordering::Relaxed) - 400,
        "a redelivery of an acked message can only be a recognised duplicate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_mid_backlog_acks_what_every_stream_holds_and_leaves_the_rest() {
    let broker = Broker::start();
    broker.topic_with_subscription(TOPIC, SUB).await;
    let env = Env::reference().await;
    publish_completions(&broker, 1_000).await;
    let first = Consumer::start(
        broker.conn.clone(),
        &config(4, 50),
        Arc::new(env.pf.clone()),
        ConsumerOptions::default(),
    )
    .unwrap();
    let stats = first.stats();
    eventually("some are acked", Duration::from_secs(60), || {
        stats.acked.load(Ordering::Relaxed) >= 100
    })
    .await;
    first.stop().await;
    let (received, acked) = (
        stats.received.load(Ordering::Relaxed),
        stats.acked.load(Ordering::Relaxed),
    );
    assert_eq!(
        received, acked,
        "every delivery in flight finished with its ack"
    );
    let stored = stored_ids(&env).len() as u64;
    assert!(stored <= acked, "{stored} stored, {acked} acked");

    // the rest waits in the subscription for the next start
    let second = Consumer::start(
        broker.conn.clone(),
        &config(4, 50),
        Arc::new(env.pf.clone()),
        ConsumerOptions::default(),
    )
    .unwrap();
    // what the stopped streams had pulled but not handed over comes back
    // when its lease runs out (10 s here)
    eventually("every message is stored", Duration::from_secs(150), || {
        stored_ids(&env).len() == 1_000
    })
    .await;
    second.stop().await;
    let distinct: BTreeSet<String> = stored_ids(&env).into_iter().collect();
    assert_eq!(distinct.len(), 1_000);
}
