//! The partition topics of a cluster, as a router and a partition write to
//! them, and a partition's consumer that hands on a delivery for a key whose
//! slot another partition owns (a slot moved since the router forwarded it,
//! or a router that holds an older map) to that partition's topic.
//!
//! Invariants: a delivery is handed on only when the engine refused it
//! before writing anything (`OtherPartition`, naming the owner per this
//! partition's map, which is at least as new as any move it took part in),
//! and acked only once the broker confirmed the forward, which keeps the
//! first broker id and publish time (so the owner deduplicates a forward
//! made twice). A delivery for a slot in a move is nacked: it comes again
//! and is taken, or handed on, once the move is done.

use super::consumer::{Take, Taken};
use super::{Connection, PubsubError, SubscriptionOptions};
use crate::ingress::{Decoded, Incoming};
use crate::{EngineError, Error, Postfach};
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long a forward may wait for the broker's confirmation.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// The topics of the partitions (`{partition}` in the template replaced by
/// a partition's number), a publisher each, made when first written to;
/// on an emulator with `create`, the topic and the partition's
/// subscription are created then too.
pub struct Topics {
    conn: Connection,
    topic: String,
    subscription: Option<String>,
    ack_deadline_seconds: i32,
    publishers: Mutex<HashMap<u32, Publisher>>,
}

impl Topics {
    /// Topics named by `topic`; with `subscription` (a template too) they
    /// and their subscriptions are created when missing.
    pub fn new(
        conn: Connection,
        topic: &str,
        subscription: Option<&str>,
        ack_deadline_seconds: i32,
    ) -> Result<Self, PubsubError> {
        if !topic.contains("{partition}") {
            return Err(PubsubError::Config(format!(
                "forward topic '{topic}' does not contain {{partition}}: every partition needs its own"
            )));
        }
        Ok(Topics {
            conn,
            topic: topic.to_string(),
            subscription: subscription.map(str::to_string),
            ack_deadline_seconds,
            publishers: Mutex::new(HashMap::new()),
        })
    }

    /// The topic of partition `i`.
    pub fn topic_of(&self, i: u32) -> String {
        self.topic.replace("{partition}", &i.to_string())
    }

    /// Makes the publisher of partition `i` (creating its topic and
    /// subscription where asked).
    pub async fn open(&self, i: u32) -> Result<(), PubsubError> {
        let mut held = self.publishers.lock().await;
        if held.contains_key(&i) {
            return Ok(());
        }
        let topic = self.topic_of(i);
        if let Some(sub) = &self.subscription {
            self.conn.ensure_topic(&topic).await?;
            let options = SubscriptionOptions {
                ack_deadline_seconds: self.ack_deadline_seconds,
                ..Default::default()
            };
            let sub = sub.replace("{partition}", &i.to_string());
            self.conn.ensure_subscription(&sub, &topic, options).await?;
        }
        held.insert(i, self.conn.publisher(&topic).await?);
        Ok(())
    }

    /// Publishes `incoming` unchanged to partition `to`'s topic, keeping its
    /// first broker id and publish time; the forward's id once confirmed.
    pub async fn forward(&self, to: u32, incoming: &Incoming) -> Result<String, String> {
        let topic = self.topic_of(to);
        self.open(to)
            .await
            .map_err(|e| format!("forward to {topic}: {e}"))?;
        let publisher = self.publishers.lock().await.get(&to).cloned();
        let Some(publisher) = publisher else {
            return Err(format!("forward to {topic}: no publisher"));
        };
        let msg = Message::new()
            .set_data(bytes::Bytes::from(incoming.data.clone()))
            .set_attributes(incoming.forwarded_attributes());
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
        }
    }
}

/// A partition's consumer: the engine takes each delivery, and one for a
/// key another partition owns goes to that partition's topic (with
/// `topics`; without, it is nacked as before).
pub struct Reroute {
    /// The engine.
    pub pf: Postfach,
    /// The partitions' topics, when the partition knows them.
    pub topics: Option<Topics>,
}

impl Take for Reroute {
    async fn take(&self, incoming: &Incoming, decoded: Decoded) -> Taken {
        match decoded {
            Decoded::Publish(p) => match self.pf.publish(p).await {
                Err(Error::Engine(EngineError::OtherPartition { owner, .. }))
                    if let Some(t) = &self.topics =>
                {
                    Taken::Forwarded(t.forward(owner, incoming).await)
                }
                other => Taken::Engine(other),
            },
            Decoded::Malformed(bad) => {
                tracing::warn!(message_id = %bad.message_id, error = %bad.error, "undecodable delivery parked as malformed");
                Taken::Engine(self.pf.park_malformed(bad).await)
            }
        }
    }
}
