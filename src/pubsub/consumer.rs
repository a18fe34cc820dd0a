//! The streaming consumer of one subscription: decode → engine → durable commit
//! → ack. Deliveries are handled concurrently (up to the flow-control limit), so
//! they share the engine's group commits and one slow key never blocks another.
//!
//! Invariant: `ack` is called only after the engine answered with a recorded
//! outcome (after the log fsync); a failure nacks; a decode failure is parked
//! as `malformed` and then acked. On stop: no new pulls, in-flight deliveries
//! finish, pending acks are flushed.

use super::{Connection, PubsubError, millis};
use crate::engine::{Delivery, Malformed, Publish};
use crate::ingress::{
    AckDecision, ConsumerState, ConsumerStats, Decoded, Decoder, Incoming, SubscriptionConfig,
};
use crate::{Error, Postfach};
use google_cloud_pubsub::subscriber::ShutdownBehavior;
use google_cloud_pubsub::subscriber::handler::Handler as AckHandler;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Where decoded deliveries go: the engine ([`Postfach`]), or a wrapper of it.
pub trait Sink: Send + Sync + 'static {
    /// Stores a decoded delivery; returns after it is durable.
    fn publish(&self, p: Publish) -> impl Future<Output = Result<Delivery, Error>> + Send;
    /// Parks an undecodable delivery; returns after it is durable.
    fn park_malformed(&self, m: Malformed) -> impl Future<Output = Result<Delivery, Error>> + Send;
}

impl Sink for Postfach {
    fn publish(&self, p: Publish) -> impl Future<Output = Result<Delivery, Error>> + Send {
        Postfach::publish(self, p)
    }
    fn park_malformed(&self, m: Malformed) -> impl Future<Output = Result<Delivery, Error>> + Send {
        Postfach::park_malformed(self, m)
    }
}

/// Test hooks of a consumer.
#[derive(Debug, Clone, Default)]
pub struct ConsumerOptions {
    /// Never ack: keep every delivery after its commit (to kill the process
    /// between commit and ack in tests). Set by `$POSTFACH_TEST_HOLD_ACKS=1`.
    pub hold_acks: bool,
}

/// A running consumer.
pub struct Consumer {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    stats: Arc<ConsumerStats>,
}

impl Consumer {
    /// Starts consuming `cfg.subscription` into `sink`. Configuration errors are
    /// returned at once; connection errors are retried (the consumer is then not
    /// ready, and `/health/ready` says why).
    pub fn start<S: Sink>(
        conn: Connection,
        cfg: &SubscriptionConfig,
        sink: Arc<S>,
        options: ConsumerOptions,
    ) -> Result<Self, PubsubError> {
        let decoder = Arc::new(cfg.compile().map_err(PubsubError::Config)?);
        let stats = ConsumerStats::new(&cfg.subscription);
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(
            conn,
            cfg.clone(),
            decoder,
            sink,
            stats.clone(),
            stop_rx,
            options,
        ));
        Ok(Self { stop, task, stats })
    }

    /// Its counters and state.
    pub fn stats(&self) -> Arc<ConsumerStats> {
        self.stats.clone()
    }

    /// Stops pulling, lets in-flight deliveries finish and flushes their acks.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn run<S: Sink>(
    conn: Connection,
    cfg: SubscriptionConfig,
    decoder: Arc<Decoder>,
    sink: Arc<S>,
    stats: Arc<ConsumerStats>,
    mut stop: watch::Receiver<bool>,
    options: ConsumerOptions,
) {
    let path = conn.subscription_path(&cfg.subscription);
    let held: Arc<Mutex<Vec<AckHandler>>> = Default::default();
    let mut backoff = Duration::from_secs(1);
    loop {
        if *stop.borrow() {
            break;
        }
        let subscriber = match connect(&conn, &cfg.subscription).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(subscription = %path, error = %e, retry_in = ?backoff, "Pub/Sub consumer cannot start");
                stats.set_state(ConsumerState::Failing, Some(e.to_string()));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        let mut stream = subscriber
            .subscribe(&path)
            .set_max_outstanding_messages(cfg.max_outstanding_messages)
            .set_max_outstanding_bytes(cfg.max_outstanding_bytes)
            .set_max_lease_extension(cfg.lease_extension())
            .set_shutdown_behavior(ShutdownBehavior::WaitForProcessing)
            .build();
        let shutdown = stream.shutdown_token();
        stats.set_state(ConsumerState::Running, None);
        tracing::info!(subscription = %path, endpoint = %conn.describe(), "Pub/Sub consumer running");
        let mut inflight = tokio::task::JoinSet::new();
        let stopped = loop {
            tokio::select! {
                _ = stop.changed() => break true,
                Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
                next = stream.next() => match next {
                    Some(Ok((m, h))) => {
                        backoff = Duration::from_secs(1);
                        inflight.spawn(deliver(m, h, decoder.clone(), sink.clone(), stats.clone(), held.clone(), options.hold_acks));
                    }
                    Some(Err(e)) => {
                        tracing::warn!(subscription = %path, error = %e, "Pub/Sub stream failed; reconnecting");
                        stats.set_state(ConsumerState::Failing, Some(e.to_string()));
                        break false;
                    }
                    None => break false,
                }
            }
        };
        // finish what is in flight (commit, then ack), then flush the acks
        while inflight.join_next().await.is_some() {}
        if let Ok(mut h) = held.lock() {
            h.clear(); // held deliveries (test hook) go back to the broker
        }
        shutdown.shutdown().await;
        if stopped {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
    stats.set_state(ConsumerState::Stopped, None);
    tracing::info!(subscription = %path, "Pub/Sub consumer stopped");
}

async fn connect(
    conn: &Connection,
    subscription: &str,
) -> Result<google_cloud_pubsub::client::Subscriber, PubsubError> {
    conn.check_subscription(subscription).await?;
    conn.subscriber().await
}

async fn deliver<S: Sink>(
    m: google_cloud_pubsub::model::Message,
    h: AckHandler,
    decoder: Arc<Decoder>,
    sink: Arc<S>,
    stats: Arc<ConsumerStats>,
    held: Arc<Mutex<Vec<AckHandler>>>,
    hold_acks: bool,
) {
    stats.received.fetch_add(1, Ordering::Relaxed);
    let publish_time = m.publish_time.as_ref().map(millis);
    let incoming = Incoming {
        data: m.data.to_vec(),
        attributes: m.attributes.into_iter().collect(),
        broker_id: m.message_id,
        publish_time,
        delivery_attempt: h.delivery_attempt(),
    };
    let result = match decoder.decode(&incoming) {
        Decoded::Publish(p) => sink.publish(p).await,
        Decoded::Malformed(bad) => {
            tracing::warn!(subscription = decoder.subscription(), message_id = %bad.message_id, error = %bad.error, "undecodable delivery parked as malformed");
            sink.park_malformed(bad).await
        }
    };
    stats.record(&result);
    match AckDecision::of(&result) {
        AckDecision::Ack if hold_acks => {
            if let Ok(mut v) = held.lock() {
                v.push(h);
            }
            tracing::info!(message_id = %incoming.broker_id, "committed; ack held (POSTFACH_TEST_HOLD_ACKS)");
        }
        AckDecision::Ack => {
            h.ack();
            stats.acked.fetch_add(1, Ordering::Relaxed);
            if let Some(t) = publish_time {
                let now = crate::Clock::now(&crate::clock::SystemClock);
                stats
                    .ack_latency
                    .observe(now.saturating_sub(t) as f64 / 1000.0);
            }
        }
        AckDecision::Nack => {
            let why = match &result {
                Err(e) => e.to_string(),
                Ok(d) => format!("outcome {}", d.outcome.as_str()),
            };
            tracing::warn!(subscription = decoder.subscription(), pubsub_message_id = %incoming.broker_id, error = %why, "nothing recorded; nack for redelivery");
            // a short pause so a broken store does not spin through redeliveries
            tokio::time::sleep(Duration::from_millis(200)).await;
            h.nack();
            stats.nacked.fetch_add(1, Ordering::Relaxed);
        }
    }
}
