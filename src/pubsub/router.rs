//! The cluster's router: consumes the shared subscription with the consumer
//! every partition uses, decodes each delivery's correlation key with the
//! subscription's own rules, and publishes it unchanged to the topic of the
//! partition that owns the key, which that partition consumes as it would
//! consume the shared one.
//!
//! Invariants:
//! - A delivery is acked only once the broker confirmed its forward (a failed
//!   or unconfirmed forward is nacked and comes again); the forward keeps the
//!   data, the attributes, the first broker id and the first publish time, so
//!   the partition decodes the same message id and deduplicates a forward
//!   that happened twice.
//! - An undecodable delivery goes to partition 0's topic, where the
//!   partition's own decoding parks it `malformed`: nothing is dropped here.
//! - A partition that is down does not stop the others' traffic: the router
//!   writes to topics, never to partitions; the broker keeps each partition's
//!   backlog. The router's memory is bounded by the subscription's flow
//!   control (outstanding messages and bytes), as every consumer's is.

use super::consumer::{Consumer, ConsumerOptions, Take, Taken};
use super::{Connection, PubsubError, SubscriptionOptions};
use crate::ingress::{Decoded, Incoming, SubscriptionConfig};
use crate::partition::Partition;
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use std::sync::Arc;
use std::time::Duration;

/// How long a forward may wait for the broker's confirmation.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// What the router forwards where.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// The shared subscription and how its deliveries decode.
    pub subscription: SubscriptionConfig,
    /// Partitions in the cluster.
    pub partitions: u32,
    /// The topic of partition I: `{partition}` replaced by I.
    pub topic: String,
    /// The subscription partition I consumes (created with its topic when
    /// `create`): `{partition}` replaced by I.
    pub partition_subscription: String,
    /// Create the topics and partition subscriptions when missing (an
    /// emulator's default).
    pub create: Option<bool>,
}

impl RouterConfig {
    /// The topic of partition `i`.
    pub fn topic_of(&self, i: u32) -> String {
        self.topic.replace("{partition}", &i.to_string())
    }

    /// The subscription of partition `i`.
    pub fn subscription_of(&self, i: u32) -> String {
        self.partition_subscription
            .replace("{partition}", &i.to_string())
    }

    /// Refuses a configuration that would send every partition's messages to
    /// one topic, or a partition count out of range.
    pub fn check(&self) -> Result<(), PubsubError> {
        Partition::new(0, u64::from(self.partitions))
            .map_err(|e| PubsubError::Config(e.to_string()))?;
        for (what, t) in [
            ("forward topic", &self.topic),
            ("partition subscription", &self.partition_subscription),
        ] {
            if !t.contains("{partition}") {
                return Err(PubsubError::Config(format!(
                    "{what} '{t}' does not contain {{partition}}: every partition needs its own"
                )));
            }
        }
        self.subscription
            .compile()
            .map(|_| ())
            .map_err(PubsubError::Config)
    }
}

/// Forwards each delivery to the topic of its key's partition.
struct Forward {
    partition: Partition,
    topics: Vec<(String, Publisher)>,
}

impl Take for Forward {
    async fn take(&self, incoming: &Incoming, decoded: Decoded) -> Taken {
        let to = match &decoded {
            Decoded::Publish(p) => self.partition.of_key(&p.key),
            Decoded::Malformed(_) => 0,
        };
        let (topic, publisher) = &self.topics[to as usize];
        let msg = Message::new()
            .set_data(bytes::Bytes::from(incoming.data.clone()))
            .set_attributes(incoming.forwarded_attributes());
        Taken::Forwarded(
            match tokio::time::timeout(FORWARD_TIMEOUT, publisher.publish(msg)).await {
                Ok(Ok(id)) => {
                    tracing::debug!(topic = %topic, partition = to, pubsub_message_id = %incoming.broker_id, forwarded_as = %id, "delivery forwarded");
                    Ok(id)
                }
                Ok(Err(e)) => Err(format!("forward to {topic}: {e}")),
                Err(_) => Err(format!(
                    "forward to {topic}: no confirmation within {} s",
                    FORWARD_TIMEOUT.as_secs()
                )),
            },
        )
    }
}

/// A running router.
pub struct Router {
    consumer: Consumer,
}

impl Router {
    /// Creates the partitions' topics and subscriptions where configured
    /// (emulators by default), then consumes the shared subscription.
    pub async fn start(conn: Connection, cfg: &RouterConfig) -> Result<Self, PubsubError> {
        cfg.check()?;
        let partition = Partition::new(0, u64::from(cfg.partitions))
            .map_err(|e| PubsubError::Config(e.to_string()))?;
        if cfg.create.unwrap_or(conn.is_emulator()) {
            // the partitions' leases as long as the shared subscription's
            let options = || SubscriptionOptions {
                ack_deadline_seconds: cfg.subscription.lease_extension().as_secs().clamp(10, 600)
                    as i32,
                ..Default::default()
            };
            if let Some(t) = &cfg.subscription.topic {
                conn.ensure_topic(t).await?;
                conn.ensure_subscription(&cfg.subscription.subscription, t, options())
                    .await?;
            }
            for i in 0..cfg.partitions {
                conn.ensure_topic(&cfg.topic_of(i)).await?;
                conn.ensure_subscription(&cfg.subscription_of(i), &cfg.topic_of(i), options())
                    .await?;
            }
        }
        let mut topics = Vec::new();
        for i in 0..cfg.partitions {
            let t = cfg.topic_of(i);
            topics.push((conn.topic_path(&t), conn.publisher(&t).await?));
        }
        let consumer = Consumer::start(
            conn.clone(),
            &cfg.subscription,
            Arc::new(Forward { partition, topics }),
            ConsumerOptions::default(),
        )?;
        eprintln!(
            "postfach: routing {} to {} partition topics ({}) (Pub/Sub at {})",
            conn.subscription_path(&cfg.subscription.subscription),
            cfg.partitions,
            conn.topic_path(&cfg.topic),
            conn.describe()
        );
        Ok(Router { consumer })
    }

    /// Its consumer's counters and state (for readiness and metrics).
    pub fn stats(&self) -> Arc<crate::ingress::ConsumerStats> {
        self.consumer.stats()
    }

    /// Stops pulling; forwards in flight finish and are acked.
    pub async fn stop(self) {
        self.consumer.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(topic: &str, sub: &str, n: u32) -> RouterConfig {
        RouterConfig {
            subscription: SubscriptionConfig::new("s", "M", "/k"),
            partitions: n,
            topic: topic.into(),
            partition_subscription: sub.into(),
            create: None,
        }
    }

    #[test]
    fn every_partition_has_its_own_topic() {
        let c = cfg("done-{partition}", "done-{partition}-sub", 3);
        assert!(c.check().is_ok());
        assert_eq!(c.topic_of(2), "done-2");
        assert_eq!(c.subscription_of(0), "done-0-sub");
        let e = cfg("done", "done-{partition}", 3).check().unwrap_err();
        assert!(e.to_string().contains("forward topic 'done'"), "{e}");
        assert!(cfg("d-{partition}", "s", 3).check().is_err());
        assert!(cfg("d-{partition}", "s-{partition}", 0).check().is_err());
    }

    #[test]
    fn a_forward_keeps_the_first_id_and_publish_time() {
        let first = Incoming {
            data: b"{}".to_vec(),
            attributes: [("eventId".to_string(), "e-1".to_string())].into(),
            broker_id: "111".into(),
            publish_time: Some(1_700_000_000_000),
            delivery_attempt: None,
        };
        let copy = Incoming {
            data: first.data.clone(),
            attributes: first.forwarded_attributes(),
            broker_id: "999".into(),
            publish_time: Some(1_800_000_000_000),
            delivery_attempt: None,
        }
        .as_first_published();
        assert_eq!(copy.broker_id, "111");
        assert_eq!(copy.publish_time, Some(1_700_000_000_000));
        assert_eq!(copy.attributes, first.attributes);
        // forwarded twice (a router behind a router): still the first
        let again = Incoming {
            attributes: copy.forwarded_attributes(),
            broker_id: "555".into(),
            ..copy.clone()
        }
        .as_first_published();
        assert_eq!(again.broker_id, "111");
        // a publish time that is not one is ignored, not trusted
        let mut odd = first.clone();
        odd.attributes
            .insert(crate::ingress::FORWARDED_PUBLISH_TIME.into(), "soon".into());
        assert_eq!(
            odd.as_first_published().publish_time,
            Some(1_700_000_000_000)
        );
    }
}
