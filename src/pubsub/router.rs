//! The cluster's router: consumes the shared subscription with the consumer
//! every partition uses, decodes each delivery's correlation key with the
//! subscription's own rules, and publishes it unchanged to the topic of the
//! partition that owns the key's slot per the slot map it holds (gathered
//! from a gateway every few seconds with `slot_map`, else the map the
//! cluster started with), which that partition consumes as it would
//! consume the shared one; a partition that no longer owns the slot hands
//! the delivery on ([`super::reroute`]).
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
use super::reroute::Topics;
use super::{Connection, PubsubError, SubscriptionOptions};
use crate::ingress::{Decoded, Incoming, SubscriptionConfig};
use crate::partition::Partition;
use crate::slots::SlotMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// A gateway whose `GET /slots` gives the map to route by, asked every
    /// few seconds (with `$POSTFACH_TOKEN`); none: the map the cluster
    /// started with.
    pub slot_map: Option<String>,
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
    map: Arc<std::sync::RwLock<SlotMap>>,
    topics: Topics,
}

impl Take for Forward {
    async fn take(&self, incoming: &Incoming, decoded: Decoded) -> Taken {
        let to = match &decoded {
            Decoded::Publish(p) => self
                .map
                .read()
                .map(|m| m.partition_of_key(&p.key))
                .unwrap_or(0),
            Decoded::Malformed(_) => 0,
        };
        Taken::Forwarded(self.topics.forward(to, incoming).await)
    }
}

/// How often a router asks its gateway for the slot map.
const MAP_EVERY: Duration = Duration::from_secs(2);

/// Asks `url`'s `GET /slots` for the map every [`MAP_EVERY`] and keeps the
/// newest version; opens the topics of partitions it names for the first
/// time.
fn spawn_map_refresh(
    url: String,
    map: Arc<std::sync::RwLock<SlotMap>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let token = std::env::var("POSTFACH_TOKEN").ok();
        let full = format!("{}/slots", url.trim_end_matches('/'));
        loop {
            let mut ask = client.get(&full);
            if let Some(t) = &token {
                ask = ask.bearer_auth(t.trim());
            }
            let got = match ask.send().await {
                Ok(a) => a
                    .json::<serde_json::Value>()
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match got.map(|v| SlotMap::from_json(&v)) {
                Ok(Ok(Some(m))) => {
                    if let Ok(mut held) = map.write()
                        && m.version() > held.version()
                    {
                        tracing::info!(version = m.version(), "router routes by a new slot map");
                        *held = m;
                    }
                }
                other => {
                    tracing::warn!(url = %full, answer = ?other.map(|r| r.map(|_| ())), "no slot map from the gateway; routing by the one held")
                }
            }
            tokio::time::sleep(MAP_EVERY).await;
        }
    })
}

/// A running router.
pub struct Router {
    consumer: Consumer,
    refresh: Option<tokio::task::JoinHandle<()>>,
}

impl Router {
    /// Creates the partitions' topics and subscriptions where configured
    /// (emulators by default), then consumes the shared subscription.
    pub async fn start(conn: Connection, cfg: &RouterConfig) -> Result<Self, PubsubError> {
        cfg.check()?;
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
        }
        let create = cfg.create.unwrap_or(conn.is_emulator());
        let topics = Topics::new(
            conn.clone(),
            &cfg.topic,
            create.then_some(cfg.partition_subscription.as_str()),
            cfg.subscription.lease_extension().as_secs().clamp(10, 600) as i32,
        )?;
        for i in 0..cfg.partitions {
            topics.open(i).await?;
        }
        let map = Arc::new(std::sync::RwLock::new(
            SlotMap::new(cfg.partitions).map_err(|e| PubsubError::Config(e.to_string()))?,
        ));
        let refresh = cfg
            .slot_map
            .clone()
            .map(|url| spawn_map_refresh(url, map.clone()));
        let consumer = Consumer::start(
            conn.clone(),
            &cfg.subscription,
            Arc::new(Forward { map, topics }),
            ConsumerOptions::default(),
        )?;
        eprintln!(
            "postfach: routing {} to {} partition topics ({}) (Pub/Sub at {})",
            conn.subscription_path(&cfg.subscription.subscription),
            cfg.partitions,
            conn.topic_path(&cfg.topic),
            conn.describe()
        );
        Ok(Router { consumer, refresh })
    }

    /// Its consumer's counters and state (for readiness and metrics).
    pub fn stats(&self) -> Arc<crate::ingress::ConsumerStats> {
        self.consumer.stats()
    }

    /// Stops pulling; forwards in flight finish and are acked.
    pub async fn stop(self) {
        if let Some(r) = &self.refresh {
            r.abort();
        }
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
            slot_map: None,
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
