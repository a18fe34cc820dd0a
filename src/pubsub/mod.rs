//! Google Cloud Pub/Sub at the edge of the engine: the connection (endpoint,
//! credentials, project), topic and subscription administration, the streaming
//! consumer that feeds subscriptions into the engine ([`consumer`]), the outbox
//! publisher of send tasks ([`outbox`]) and the emulator for tests and the demo
//! ([`emulator`]).
//!
//! Invariant: a delivery is acked only after the engine answered for it, and the
//! engine answers only after the log fsync ([`crate::ingress::AckDecision`]); a
//! send task completes only after Pub/Sub confirmed its publish. Nothing in this
//! module touches storage except through the `Postfach` API.

pub mod backups;
pub mod consumer;
pub mod emulator;
pub mod gcs_emulator;
pub mod notifications;
pub mod outbox;
pub mod reroute;
pub mod router;
pub mod storage;

pub use crate::config::PubsubConfig;
use google_cloud_gax::error::rpc::Code;
use google_cloud_pubsub::client::{Publisher, Subscriber, SubscriptionAdmin, TopicAdmin};

pub use consumer::{Consumer, Sink};
pub use emulator::Emulator;
pub use gcs_emulator::FakeGcs;
pub use storage::CloudStorage;

/// Errors of the Pub/Sub edge.
#[derive(Debug, thiserror::Error)]
pub enum PubsubError {
    /// The client could not be built.
    #[error("Pub/Sub client for {endpoint}: {source}")]
    Client {
        /// The endpoint.
        endpoint: String,
        /// What the client builder said.
        source: google_cloud_gax::client_builder::Error,
    },
    /// A call to Pub/Sub failed.
    #[error("Pub/Sub {what}: {source}")]
    Rpc {
        /// What was called.
        what: String,
        /// What Pub/Sub said.
        source: google_cloud_pubsub::Error,
    },
    /// The configuration is not usable.
    #[error("Pub/Sub configuration: {0}")]
    Config(String),
    /// The emulator failed.
    #[error(transparent)]
    Emulator(#[from] emulator::EmulatorError),
}

/// Builds a client from one of the client builders (their types differ, their
/// endpoint and credential setters do not): endpoint and, for emulators,
/// anonymous credentials.
macro_rules! build {
    ($conn:expr, $builder:expr) => {{
        let mut b = $builder;
        if let Some(e) = &$conn.endpoint {
            b = b.with_endpoint(e);
        }
        if $conn.anonymous {
            b = b.with_credentials(Self::anonymous());
        }
        b.build().await.map_err(|e| $conn.client_err(e))
    }};
}

/// How to reach Pub/Sub.
#[derive(Debug, Clone)]
pub struct Connection {
    endpoint: Option<String>,
    anonymous: bool,
    project: String,
}

impl Connection {
    /// Resolves endpoint, credentials and project from the configuration and
    /// the environment (`PUBSUB_EMULATOR_HOST`, `GOOGLE_CLOUD_PROJECT`).
    pub fn new(cfg: &PubsubConfig) -> Self {
        let project = cfg
            .project
            .clone()
            .or_else(|| std::env::var("GOOGLE_CLOUD_PROJECT").ok())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "postfach".into());
        let emulator = std::env::var("PUBSUB_EMULATOR_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty());
        let endpoint = cfg
            .endpoint
            .clone()
            .or_else(|| emulator.map(|h| format!("http://{}", h.trim())));
        // plaintext endpoints are emulators: they take no credentials
        let anonymous = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        Self {
            endpoint,
            anonymous,
            project,
        }
    }

    /// A connection to an emulator at `http://HOST:PORT`.
    pub fn emulator(endpoint: &str, project: &str) -> Self {
        Self {
            endpoint: Some(endpoint.into()),
            anonymous: true,
            project: project.into(),
        }
    }

    /// Whether this talks to an emulator (plaintext, no credentials).
    pub fn is_emulator(&self) -> bool {
        self.anonymous
    }

    /// The endpoint and project, for logs.
    pub fn describe(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| "https://pubsub.googleapis.com".into())
    }

    /// `projects/P/topics/NAME` for a short name; full paths stay.
    pub fn topic_path(&self, name: &str) -> String {
        if name.starts_with("projects/") {
            name.into()
        } else {
            format!("projects/{}/topics/{name}", self.project)
        }
    }

    /// `projects/P/subscriptions/NAME` for a short name; full paths stay.
    pub fn subscription_path(&self, name: &str) -> String {
        if name.starts_with("projects/") {
            name.into()
        } else {
            format!("projects/{}/subscriptions/{name}", self.project)
        }
    }

    fn client_err(&self, source: google_cloud_gax::client_builder::Error) -> PubsubError {
        PubsubError::Client {
            endpoint: self.describe(),
            source,
        }
    }

    fn anonymous() -> google_cloud_auth::credentials::Credentials {
        google_cloud_auth::credentials::anonymous::Builder::new().build()
    }

    /// A streaming-pull client.
    pub async fn subscriber(&self) -> Result<Subscriber, PubsubError> {
        build!(self, Subscriber::builder())
    }

    /// A batching publisher for one topic (short name or path).
    pub async fn publisher(&self, topic: &str) -> Result<Publisher, PubsubError> {
        build!(self, Publisher::builder(self.topic_path(topic)))
    }

    /// A topic administration client.
    pub async fn topic_admin(&self) -> Result<TopicAdmin, PubsubError> {
        build!(self, TopicAdmin::builder())
    }

    /// A subscription administration client.
    pub async fn subscription_admin(&self) -> Result<SubscriptionAdmin, PubsubError> {
        build!(self, SubscriptionAdmin::builder())
    }

    /// Creates a topic unless it exists.
    pub async fn ensure_topic(&self, topic: &str) -> Result<(), PubsubError> {
        let path = self.topic_path(topic);
        match self
            .topic_admin()
            .await?
            .create_topic()
            .set_name(&path)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if code(&e) == Some(Code::AlreadyExists) => Ok(()),
            Err(source) => Err(PubsubError::Rpc {
                what: format!("create topic {path}"),
                source,
            }),
        }
    }

    /// Creates a subscription on `topic` unless it exists.
    pub async fn ensure_subscription(
        &self,
        subscription: &str,
        topic: &str,
        options: SubscriptionOptions,
    ) -> Result<(), PubsubError> {
        use google_cloud_pubsub::model::{DeadLetterPolicy, RetryPolicy};
        let path = self.subscription_path(subscription);
        let mut req = self
            .subscription_admin()
            .await?
            .create_subscription()
            .set_name(&path)
            .set_topic(self.topic_path(topic))
            .set_ack_deadline_seconds(options.ack_deadline_seconds);
        if let Some((dlt, max)) = &options.dead_letter {
            req = req.set_dead_letter_policy(
                DeadLetterPolicy::new()
                    .set_dead_letter_topic(self.topic_path(dlt))
                    .set_max_delivery_attempts(*max),
            );
        }
        if let Some((min, max)) = options.retry_backoff {
            let d = |x: std::time::Duration| {
                google_cloud_wkt_duration(x).expect("backoff durations are small")
            };
            req = req.set_retry_policy(
                RetryPolicy::new()
                    .set_minimum_backoff(d(min))
                    .set_maximum_backoff(d(max)),
            );
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) if code(&e) == Some(Code::AlreadyExists) => Ok(()),
            Err(source) => Err(PubsubError::Rpc {
                what: format!("create subscription {path}"),
                source,
            }),
        }
    }

    /// Checks that a subscription exists and can be read.
    pub async fn check_subscription(&self, subscription: &str) -> Result<(), PubsubError> {
        let path = self.subscription_path(subscription);
        self.subscription_admin()
            .await?
            .get_subscription()
            .set_subscription(&path)
            .send()
            .await
            .map(|_| ())
            .map_err(|source| PubsubError::Rpc {
                what: format!("subscription {path}"),
                source,
            })
    }
}

fn google_cloud_wkt_duration(d: std::time::Duration) -> Option<google_cloud_wkt::Duration> {
    google_cloud_wkt::Duration::try_from(d).ok()
}

/// Options of a subscription created by [`Connection::ensure_subscription`].
#[derive(Debug, Clone)]
pub struct SubscriptionOptions {
    /// How long a delivery may stay unacked before redelivery.
    pub ack_deadline_seconds: i32,
    /// Dead-letter topic and max delivery attempts.
    pub dead_letter: Option<(String, i32)>,
    /// Minimum and maximum redelivery backoff.
    pub retry_backoff: Option<(std::time::Duration, std::time::Duration)>,
}

impl Default for SubscriptionOptions {
    fn default() -> Self {
        Self {
            ack_deadline_seconds: 60,
            dead_letter: None,
            retry_backoff: None,
        }
    }
}

/// What `postfach run` runs against Pub/Sub: the consumers of the configured
/// subscriptions and the outbox publishers of bound send tasks.
pub struct Edge {
    consumers: Vec<Consumer>,
    objects: Option<std::sync::Arc<CloudStorage>>,
    /// The publisher of events about parked messages, when configured.
    notifier: Option<tokio::task::JoinHandle<()>>,
}

impl Edge {
    /// Creates missing topics and subscriptions where configured (emulators by
    /// default), registers the outbox handlers and starts the consumers.
    /// `$POSTFACH_TEST_HOLD_ACKS=1` makes every consumer hold its acks (tests
    /// kill the process between commit and ack with it).
    pub async fn start(
        pf: &crate::Postfach,
        config: &crate::config::ConfigFile,
        registry: &crate::ingress::Consumers,
    ) -> Result<Self, PubsubError> {
        let objects = Self::storage(config).await?;
        let parked_topic = config.notifications.parked_topic.clone();
        if config.subscriptions.is_empty()
            && config.send_topics.is_empty()
            && parked_topic.is_none()
        {
            return Ok(Self {
                consumers: Vec::new(),
                objects,
                notifier: None,
            });
        }
        let conn = Connection::new(&config.pubsub);
        let topics: std::collections::BTreeSet<String> =
            config.send_topics.values().cloned().collect();
        if config.pubsub.create.unwrap_or(conn.is_emulator()) {
            for t in topics.iter().chain(&parked_topic) {
                conn.ensure_topic(t).await?;
            }
            for s in &config.subscriptions {
                if let Some(t) = &s.topic {
                    conn.ensure_topic(t).await?;
                    conn.ensure_subscription(
                        &s.subscription,
                        t,
                        SubscriptionOptions {
                            ack_deadline_seconds: s.lease_extension().as_secs().clamp(10, 600)
                                as i32,
                            ..Default::default()
                        },
                    )
                    .await?;
                }
            }
        }
        let claim_check = match (&objects, &config.storage.claim_check_bucket) {
            (Some(store), Some(bucket)) => Some(outbox::ClaimCheckOut {
                store: store.clone(),
                bucket: bucket.clone(),
                above: config.storage.claim_check_above(),
            }),
            _ => None,
        };
        outbox::register(pf, &conn, topics.iter().cloned(), claim_check).await?;
        for t in &topics {
            tracing::info!(topic = %conn.topic_path(t), "outbox publishing to topic");
        }
        let notifier = match parked_topic {
            Some(topic) => {
                let publisher = conn.publisher(&topic).await?;
                eprintln!(
                    "postfach: publishing events about parked messages to {}",
                    conn.topic_path(&topic)
                );
                Some(tokio::spawn(notifications::run(
                    pf.clone(),
                    publisher,
                    topic,
                )))
            }
            None => None,
        };
        let options = consumer::ConsumerOptions {
            // fault injection for tests: builds with debug assertions only
            hold_acks: cfg!(debug_assertions)
                && std::env::var("POSTFACH_TEST_HOLD_ACKS").is_ok_and(|v| v == "1"),
        };
        // a delivery for a slot that moved goes on to its owner's topic
        let topics = match &config.cluster.forward_topic {
            Some(t) if pf.partition().is_clustered() => {
                Some(reroute::Topics::new(conn.clone(), t, None, 10)?)
            }
            _ => None,
        };
        let sink = std::sync::Arc::new(reroute::Reroute {
            pf: pf.clone(),
            topics,
        });
        let mut consumers = Vec::new();
        for s in &config.subscriptions {
            let c = Consumer::start(conn.clone(), s, sink.clone(), options.clone())?;
            registry.add(c.stats());
            eprintln!(
                "postfach: consuming {} as message {} (Pub/Sub at {})",
                conn.subscription_path(&s.subscription),
                s.message,
                conn.describe()
            );
            consumers.push(c);
        }
        Ok(Self {
            consumers,
            objects,
            notifier,
        })
    }

    /// The Cloud Storage client, when claim checks are configured (a
    /// `[storage]` endpoint or bucket, `$STORAGE_EMULATOR_HOST`, or a
    /// subscription with `claim_check`); its claim-check bucket is created on
    /// an emulator.
    async fn storage(
        config: &crate::config::ConfigFile,
    ) -> Result<Option<std::sync::Arc<CloudStorage>>, PubsubError> {
        let s = &config.storage;
        let wanted = s.endpoint.is_some()
            || s.claim_check_bucket.is_some()
            || std::env::var("STORAGE_EMULATOR_HOST").is_ok_and(|h| !h.trim().is_empty())
            || config.subscriptions.iter().any(|c| c.claim_check.is_some());
        if !wanted {
            return Ok(None);
        }
        let store = CloudStorage::connect(s).await?;
        if let Some(bucket) = &s.claim_check_bucket
            && s.create.unwrap_or(store.is_emulator())
        {
            store
                .ensure_bucket(bucket)
                .await
                .map_err(|e| PubsubError::Config(e.to_string()))?;
        }
        tracing::info!(endpoint = %store.describe(), bucket = ?s.claim_check_bucket, "claim checks through Cloud Storage");
        Ok(Some(std::sync::Arc::new(store)))
    }

    /// The object store claim checks are read through (HTTP and CLI workers).
    pub fn objects(&self) -> Option<std::sync::Arc<dyn crate::objects::ObjectStore>> {
        self.objects
            .clone()
            .map(|o| o as std::sync::Arc<dyn crate::objects::ObjectStore>)
    }

    /// Stops every consumer: no new pulls, in-flight deliveries committed and acked.
    pub async fn stop(self) {
        // what it has not confirmed stays kept and goes out at the next start
        if let Some(n) = &self.notifier {
            n.abort();
        }
        let mut set = tokio::task::JoinSet::new();
        for c in self.consumers {
            set.spawn(c.stop());
        }
        while set.join_next().await.is_some() {}
    }
}

fn code(e: &google_cloud_pubsub::Error) -> Option<Code> {
    e.status().map(|s| s.code)
}

/// Milliseconds since the epoch of a Pub/Sub timestamp.
pub(crate) fn millis(t: &google_cloud_wkt::Timestamp) -> crate::Millis {
    (t.seconds().max(0) as u64)
        .saturating_mul(1000)
        .saturating_add((t.nanos().max(0) as u64) / 1_000_000)
}
