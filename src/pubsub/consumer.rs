//! The streaming consumer of one subscription: decode → engine → durable commit
//! → ack, over `streams` streaming pulls. Deliveries are handled concurrently
//! (up to the flow-control limit, per stream and in total), so they share the
//! engine's group commits and one slow key never blocks another.
//!
//! Invariant: `ack` is called only after the engine answered with a recorded
//! outcome (after the log fsync); a failure nacks; a decode failure is parked
//! as `malformed` and then acked. On stop: no stream pulls again, in-flight
//! deliveries of every stream finish, pending acks are flushed.
//!
//! Order: the streams only hand deliveries over; the engine's single writer
//! accepts them one after another, and that acceptance order is the order
//! within a correlation key (DESIGN.md). Two deliveries of one key on two
//! streams are accepted in the order they reach the writer, exactly as two
//! concurrent deliveries of one stream are; Pub/Sub promises no order between
//! them either. No stream waits for a key: a stream waits only for the total
//! flow-control limit.

use super::{Connection, PubsubError, millis};
use crate::engine::{Delivery, Malformed, Publish};
use crate::ingress::{
    AckDecision, ConsumerState, ConsumerStats, Decoded, Decoder, Incoming, StreamTally,
    SubscriptionConfig,
};
use crate::{Error, Postfach};
use google_cloud_pubsub::subscriber::ShutdownBehavior;
use google_cloud_pubsub::subscriber::handler::Handler as AckHandler;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::Instrument;

/// Where decoded deliveries go: the engine ([`Postfach`]), or a wrapper of it.
pub trait Sink: Send + Sync + 'static {
    /// Stores a decoded delivery; returns after it is durable.
    fn publish(&self, p: Publish) -> impl Future<Output = Result<Delivery, Error>> + Send;
    /// Parks an undecodable delivery; returns after it is durable.
    fn park_malformed(&self, m: Malformed) -> impl Future<Output = Result<Delivery, Error>> + Send;
}

/// What a stream hands each delivery to: the message as it arrived and what
/// the subscription's decoding made of it. Every [`Sink`] takes deliveries
/// into the engine; the cluster's router hands them on to their partition.
pub trait Take: Send + Sync + 'static {
    /// Takes one delivery; returns once it is durable where it went.
    fn take(&self, incoming: &Incoming, decoded: Decoded) -> impl Future<Output = Taken> + Send;
}

/// What became of one delivery, and so whether it is acked.
#[derive(Debug)]
pub enum Taken {
    /// The engine's answer: acked when it recorded an outcome.
    Engine(Result<Delivery, Error>),
    /// Handed on to another topic: acked when the broker confirmed it (its
    /// message id), nacked otherwise (why).
    Forwarded(Result<String, String>),
}

impl Taken {
    /// Ack or nack.
    pub fn decision(&self) -> AckDecision {
        match self {
            Taken::Engine(r) => AckDecision::of(r),
            Taken::Forwarded(Ok(_)) => AckDecision::Ack,
            Taken::Forwarded(Err(_)) => AckDecision::Nack,
        }
    }

    /// Why it is nacked.
    fn failure(&self) -> String {
        match self {
            Taken::Engine(Err(e)) => e.to_string(),
            Taken::Engine(Ok(d)) => format!("outcome {}", d.outcome.as_str()),
            Taken::Forwarded(Err(e)) => e.clone(),
            Taken::Forwarded(Ok(id)) => format!("forwarded as {id}"),
        }
    }
}

impl<S: Sink> Take for S {
    async fn take(&self, _incoming: &Incoming, decoded: Decoded) -> Taken {
        Taken::Engine(match decoded {
            Decoded::Publish(p) => self.publish(p).await,
            Decoded::Malformed(bad) => {
                tracing::warn!(message_id = %bad.message_id, error = %bad.error, "undecodable delivery parked as malformed");
                self.park_malformed(bad).await
            }
        })
    }
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
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stats: Arc<ConsumerStats>,
}

/// The total flow-control limit over all streams of a subscription: a stream
/// hands a delivery on only once it holds one message permit and its size in
/// byte permits; both return when the delivery is acked or nacked.
struct FlowLimit {
    messages: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    max_bytes: u32,
}

impl FlowLimit {
    fn new(cfg: &SubscriptionConfig) -> Self {
        let max_bytes = u32::try_from(cfg.max_outstanding_bytes.max(1)).unwrap_or(u32::MAX);
        Self {
            messages: Arc::new(Semaphore::new(cfg.max_outstanding_messages.max(1) as usize)),
            bytes: Arc::new(Semaphore::new(max_bytes as usize)),
            max_bytes,
        }
    }

    /// Waits until a delivery of `size` bytes fits into the total limit (a
    /// delivery larger than the whole limit waits for all others to finish).
    async fn admit(&self, size: usize) -> (OwnedSemaphorePermit, OwnedSemaphorePermit) {
        let size = u32::try_from(size)
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_bytes);
        let message = self.messages.clone().acquire_owned().await;
        let bytes = self.bytes.clone().acquire_many_owned(size).await;
        match (message, bytes) {
            (Ok(m), Ok(b)) => (m, b),
            _ => unreachable!("the flow-control semaphores are never closed"),
        }
    }
}

impl Consumer {
    /// Starts consuming `cfg.subscription` into `sink` over `cfg.streams`
    /// streaming pulls. Configuration errors are returned at once; connection
    /// errors are retried per stream (the consumer is then not ready, and
    /// `/health/ready` says why).
    pub fn start<S: Take>(
        conn: Connection,
        cfg: &SubscriptionConfig,
        sink: Arc<S>,
        options: ConsumerOptions,
    ) -> Result<Self, PubsubError> {
        let decoder = Arc::new(cfg.compile().map_err(PubsubError::Config)?);
        let stats = ConsumerStats::with_streams(&cfg.subscription, cfg.streams as usize);
        let (stop, stop_rx) = watch::channel(false);
        let flow = Arc::new(FlowLimit::new(cfg));
        let tasks = (0..stats.streams())
            .map(|stream| {
                tokio::spawn(run(
                    Stream {
                        index: stream,
                        conn: conn.clone(),
                        cfg: cfg.clone(),
                        decoder: decoder.clone(),
                        sink: sink.clone(),
                        stats: stats.clone(),
                        flow: flow.clone(),
                        options: options.clone(),
                    },
                    stop_rx.clone(),
                ))
            })
            .collect();
        Ok(Self { stop, tasks, stats })
    }

    /// Its counters and state.
    pub fn stats(&self) -> Arc<ConsumerStats> {
        self.stats.clone()
    }

    /// Stops pulling on every stream, lets in-flight deliveries finish and
    /// flushes their acks.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// What one streaming pull works with.
struct Stream<S> {
    index: usize,
    conn: Connection,
    cfg: SubscriptionConfig,
    decoder: Arc<Decoder>,
    sink: Arc<S>,
    stats: Arc<ConsumerStats>,
    flow: Arc<FlowLimit>,
    options: ConsumerOptions,
}

async fn run<S: Take>(s: Stream<S>, mut stop: watch::Receiver<bool>) {
    let Stream {
        index,
        conn,
        cfg,
        decoder,
        sink,
        stats,
        flow,
        options,
    } = s;
    let path = conn.subscription_path(&cfg.subscription);
    let book: Arc<Book> = Default::default();
    let mut backoff = Duration::from_secs(1);
    loop {
        if *stop.borrow() {
            break;
        }
        let subscriber = match connect(&conn, &cfg.subscription).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(subscription = %path, stream = index, error = %e, retry_in = ?backoff, "Pub/Sub consumer cannot start");
                stats.set_stream_state(index, ConsumerState::Failing, Some(e.to_string()));
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
            .set_shutdown_behavior(ShutdownBehavior::NackImmediately)
            .build();
        let shutdown = stream.shutdown_token();
        stats.set_stream_state(index, ConsumerState::Running, None);
        tracing::info!(subscription = %path, stream = index, endpoint = %conn.describe(), "Pub/Sub consumer running");
        let mut inflight = tokio::task::JoinSet::new();
        let stopped = loop {
            tokio::select! {
                _ = stop.changed() => break true,
                Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
                next = stream.next() => match next {
                    Some(Ok((m, h))) => {
                        backoff = Duration::from_secs(1);
                        // the total limit over all streams; in flight until acked or nacked
                        let permits = flow.admit(m.data.len()).await;
                        let work = deliver(m, h, decoder.clone(), sink.clone(), stats.clone(), book.clone(), options.hold_acks);
                        inflight.spawn(async move {
                            work.await;
                            drop(permits);
                        });
                    }
                    Some(Err(e)) => {
                        tracing::warn!(subscription = %path, stream = index, error = %e, "Pub/Sub stream failed; reconnecting");
                        stats.set_stream_state(index, ConsumerState::Failing, Some(e.to_string()));
                        break false;
                    }
                    None => break false,
                }
            }
        };
        // finish what is in flight (commit, then ack), then flush the acks;
        // what the client pulled but never handed over is nacked at once
        // (NackImmediately), so the next consumer gets it without waiting
        // for its lease to run out
        while inflight.join_next().await.is_some() {}
        if let Ok(mut h) = book.held.lock() {
            h.clear(); // held deliveries (test hook) go back to the broker
        }
        shutdown.shutdown().await;
        drop(stream);
        if stopped {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
    stats.set_stream_state(index, ConsumerState::Stopped, None);
    // every delivery handed over ended acked, nacked or held: say so, so that
    // a delivery that went missing at a stop can be placed (never handed
    // over: the client's nack did not reach the broker; or lost here)
    let t = book.tally.snapshot();
    let balanced = t.received == t.acked + t.nacked + t.held;
    if balanced {
        tracing::info!(subscription = %path, stream = index, received = t.received, stored = t.stored, acked = t.acked, nacked = t.nacked, held = t.held, balanced, "Pub/Sub stream stopped: deliveries accounted");
    } else {
        tracing::warn!(subscription = %path, stream = index, received = t.received, stored = t.stored, acked = t.acked, nacked = t.nacked, held = t.held, balanced, "Pub/Sub stream stopped: deliveries accounted");
    }
    stats.set_stream_tally(index, t);
}

/// One stream's book: what it did with its deliveries, and the ack handles
/// it holds (test hook).
#[derive(Default)]
struct Book {
    tally: Tally,
    held: Mutex<Vec<AckHandler>>,
}

/// What one stream did with the deliveries the client handed it.
#[derive(Default)]
struct Tally {
    received: AtomicU64,
    stored: AtomicU64,
    acked: AtomicU64,
    nacked: AtomicU64,
    held: AtomicU64,
}

impl Tally {
    fn snapshot(&self) -> StreamTally {
        StreamTally {
            received: self.received.load(Ordering::Relaxed),
            stored: self.stored.load(Ordering::Relaxed),
            acked: self.acked.load(Ordering::Relaxed),
            nacked: self.nacked.load(Ordering::Relaxed),
            held: self.held.load(Ordering::Relaxed),
        }
    }
}

async fn connect(
    conn: &Connection,
    subscription: &str,
) -> Result<google_cloud_pubsub::client::Subscriber, PubsubError> {
    conn.check_subscription(subscription).await?;
    conn.subscriber().await
}

async fn deliver<S: Take>(
    m: google_cloud_pubsub::model::Message,
    h: AckHandler,
    decoder: Arc<Decoder>,
    sink: Arc<S>,
    stats: Arc<ConsumerStats>,
    book: Arc<Book>,
    hold_acks: bool,
) {
    let tally = &book.tally;
    stats.received.fetch_add(1, Ordering::Relaxed);
    tally.received.fetch_add(1, Ordering::Relaxed);
    // a delivery a cluster's router forwarded keeps the broker id and
    // publish time it first had
    let incoming = Incoming {
        data: m.data.to_vec(),
        attributes: m.attributes.into_iter().collect(),
        broker_id: m.message_id,
        publish_time: m.publish_time.as_ref().map(millis),
        delivery_attempt: h.delivery_attempt(),
    }
    .as_first_published();
    let publish_time = incoming.publish_time;
    // the delivery continues the trace its publisher put into the attributes
    let span = tracing::info_span!(
        target: crate::trace::TARGET,
        "pubsub.receive",
        otel.kind = "consumer",
        subscription = decoder.subscription(),
        pubsub_message_id = %incoming.broker_id,
    );
    crate::trace::continue_from(
        &span,
        incoming
            .attributes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let decoded = tracing::info_span!(target: crate::trace::TARGET, parent: &span, "pubsub.decode")
        .in_scope(|| decoder.decode(&incoming));
    let taken = sink
        .take(&incoming, decoded)
        .instrument(
            tracing::info_span!(target: crate::trace::TARGET, parent: &span, "postfach.publish"),
        )
        .await;
    if let Taken::Engine(result) = &taken {
        stats.record(result);
    }
    let decision = taken.decision();
    if decision == AckDecision::Ack {
        tally.stored.fetch_add(1, Ordering::Relaxed);
    }
    match decision {
        AckDecision::Ack if hold_acks => {
            if let Ok(mut v) = book.held.lock() {
                v.push(h);
            }
            tally.held.fetch_add(1, Ordering::Relaxed);
            tracing::info!(message_id = %incoming.broker_id, "committed; ack held (POSTFACH_TEST_HOLD_ACKS)");
        }
        AckDecision::Ack => {
            tracing::info_span!(target: crate::trace::TARGET, parent: &span, "pubsub.ack")
                .in_scope(|| h.ack());
            stats.acked.fetch_add(1, Ordering::Relaxed);
            tally.acked.fetch_add(1, Ordering::Relaxed);
            if let Some(t) = publish_time {
                let now = crate::Clock::now(&crate::clock::SystemClock);
                stats
                    .ack_latency
                    .observe(now.saturating_sub(t) as f64 / 1000.0);
            }
        }
        AckDecision::Nack => {
            let why = taken.failure();
            tracing::warn!(subscription = decoder.subscription(), pubsub_message_id = %incoming.broker_id, error = %why, "nothing recorded; nack for redelivery");
            // a short pause so a broken store does not spin through redeliveries
            tokio::time::sleep(Duration::from_millis(200)).await;
            tracing::info_span!(target: crate::trace::TARGET, parent: &span, "pubsub.nack")
                .in_scope(|| h.nack());
            stats.nacked.fetch_add(1, Ordering::Relaxed);
            tally.nacked.fetch_add(1, Ordering::Relaxed);
        }
    }
}
