//! Ingress: what a broker delivery becomes in the engine. Configuration of a
//! subscription (message name, where key and message id come from, TTL,
//! variables, flow control), the decoding of one delivery into a [`Publish`] or
//! a [`Malformed`] record, the ack decision, and the counters of each consumer.
//!
//! Invariant: decoding is a pure function of the configuration and the delivery;
//! it never fails — what cannot be decoded becomes a `Malformed` record with the
//! raw bytes, so it is parked and kept, never dropped. A delivery is acked only
//! after the engine answered for it, which is after the log fsync
//! ([`AckDecision::of`]); any failure of the engine or the storage nacks.
//! The transport itself (Google's Pub/Sub client) lives in `pubsub`.

use crate::engine::{Delivery, Malformed, Publish};
pub use crate::objects::ObjectRef;
use crate::ops::Histogram;
use crate::{Millis, Outcome, Vars};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where a value of a delivery comes from: `attribute:NAME` or a JSON pointer
/// into the payload such as `/auftragId`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A Pub/Sub attribute of this name.
    Attribute(String),
    /// A JSON pointer into the payload.
    Pointer(String),
}

impl Source {
    /// Parses `attribute:NAME` or `/json/pointer`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(name) = s.strip_prefix("attribute:") {
            if name.is_empty() {
                return Err(format!("'{s}': the attribute name is missing"));
            }
            return Ok(Source::Attribute(name.to_string()));
        }
        if s.starts_with('/') {
            return Ok(Source::Pointer(s.to_string()));
        }
        Err(format!(
            "'{s}' is neither attribute:NAME nor a JSON pointer into the payload such as /auftragId"
        ))
    }

    fn describe(&self) -> String {
        match self {
            Source::Attribute(a) => format!("attribute '{a}'"),
            Source::Pointer(p) => format!("payload field {p}"),
        }
    }
}

/// One subscription as configured (`[[subscriptions]]` in postfach.toml, or the
/// flags of `postfach run` for the single-subscription case).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionConfig {
    /// `projects/P/subscriptions/S`, or `S` in the configured project.
    pub subscription: String,
    /// The topic to create the subscription on when it is missing (only where
    /// creating is on: emulators by default, see `[pubsub] create`).
    #[serde(default)]
    pub topic: Option<String>,
    /// The BPMN message name every delivery of this subscription carries.
    pub message: String,
    /// Where the correlation key comes from: `/auftragId` or `attribute:NAME`.
    pub key: String,
    /// Where the business message id comes from (default `attribute:eventId`);
    /// a delivery without it falls back to Pub/Sub's message_id.
    #[serde(default = "default_message_id")]
    pub message_id: String,
    /// Buffer TTL of these messages (`24h`; `0s` disables buffering); default:
    /// the engine's (24 h).
    #[serde(default)]
    pub ttl: Option<String>,
    /// Payload fields that become process variables (JSON pointers; the last
    /// segment names the variable). Default: every top-level field.
    #[serde(default)]
    pub variables: Option<Vec<String>>,
    /// Where a claim-check reference is (the article's variant 5: the data in
    /// Cloud Storage, the lean message carries the reference): `attributes`
    /// for Cloud Storage notification attributes (`bucketId`, `objectId`,
    /// `objectGeneration`), or a JSON pointer to a `gs://BUCKET/OBJECT[#GENERATION]`
    /// string in the payload. Default: none.
    #[serde(default)]
    pub claim_check: Option<String>,
    /// The variable the reference becomes (default `claimCheck`).
    #[serde(default)]
    pub claim_check_variable: Option<String>,
    /// Whether every delivery must carry the reference (default true: one
    /// without it is parked malformed). `false` for a topic that carries small
    /// messages whole and large ones by reference, as postfach's outbox does;
    /// a reference that is there but invalid is malformed either way.
    #[serde(default = "default_true")]
    pub claim_check_required: bool,
    /// Streaming pulls opened on the subscription (1–32, default
    /// [`DEFAULT_STREAMS`]). One stream takes only part of what a broker can
    /// hand out; several share the engine's group commits.
    #[serde(default = "default_streams")]
    pub streams: u32,
    /// Flow control: deliveries in flight at most, per stream and in total
    /// over the subscription's streams (1–1,000,000, default 1000).
    #[serde(default = "default_max_messages")]
    pub max_outstanding_messages: i64,
    /// Flow control: bytes in flight at most, per stream and in total
    /// (1 KiB–1 GiB, default 100 MiB).
    #[serde(default = "default_max_bytes")]
    pub max_outstanding_bytes: i64,
    /// How far the client extends a delivery's ack deadline at a time (10s–10m, default 60s).
    #[serde(default = "default_lease_extension")]
    pub max_lease_extension: String,
}

fn default_message_id() -> String {
    "attribute:eventId".into()
}
/// Streaming pulls per subscription unless configured: measured with
/// `cargo bench --bench ingest` (README, "Ingest through Pub/Sub").
pub const DEFAULT_STREAMS: u32 = 8;
/// The most streaming pulls one subscription may open.
pub const MAX_STREAMS: u32 = 32;

fn default_true() -> bool {
    true
}

fn default_streams() -> u32 {
    DEFAULT_STREAMS
}
fn default_max_messages() -> i64 {
    1000
}
fn default_max_bytes() -> i64 {
    100 * 1024 * 1024
}
fn default_lease_extension() -> String {
    "60s".into()
}

impl SubscriptionConfig {
    /// A subscription with defaults for everything but the three essentials.
    pub fn new(subscription: &str, message: &str, key: &str) -> Self {
        Self {
            subscription: subscription.into(),
            topic: None,
            message: message.into(),
            key: key.into(),
            message_id: default_message_id(),
            ttl: None,
            variables: None,
            claim_check: None,
            claim_check_variable: None,
            claim_check_required: true,
            streams: default_streams(),
            max_outstanding_messages: default_max_messages(),
            max_outstanding_bytes: default_max_bytes(),
            max_lease_extension: default_lease_extension(),
        }
    }

    /// Checks every field and compiles the sources; errors say which field.
    pub fn compile(&self) -> Result<Decoder, String> {
        let at =
            |field: &str, e: String| format!("subscription '{}': {field}: {e}", self.subscription);
        if self.subscription.trim().is_empty() {
            return Err("a subscription needs a name (subscription = \"...\")".into());
        }
        if self.message.trim().is_empty() {
            return Err(at("message", "the BPMN message name is empty".into()));
        }
        let key = Source::parse(&self.key).map_err(|e| at("key", e))?;
        let message_id = Source::parse(&self.message_id).map_err(|e| at("message_id", e))?;
        let ttl = match &self.ttl {
            Some(t) => Some(
                crate::limits::MESSAGE_TTL
                    .parse(t)
                    .map_err(|e| at("ttl", e))?,
            ),
            None => None,
        };
        let variables = match &self.variables {
            None => None,
            Some(v) => Some(
                v.iter()
                    .map(|p| {
                        let name = p.rsplit('/').next().unwrap_or_default();
                        if !p.starts_with('/') || name.is_empty() {
                            Err(at(
                                "variables",
                                format!("'{p}' is not a JSON pointer such as /erledigtePositionen"),
                            ))
                        } else {
                            Ok((name.to_string(), p.clone()))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let claim_check = match self.claim_check.as_deref().map(str::trim) {
            None => None,
            Some("attributes") => Some(ClaimCheck::Attributes),
            Some(p) if p.starts_with('/') => Some(ClaimCheck::Pointer(p.to_string())),
            Some(other) => {
                return Err(at(
                    "claim_check",
                    format!(
                        "'{other}' is neither \"attributes\" nor a JSON pointer such as /protokoll"
                    ),
                ));
            }
        };
        let claim_check_variable = match self.claim_check_variable.as_deref().map(str::trim) {
            None => "claimCheck".to_string(),
            Some("") => {
                return Err(at(
                    "claim_check_variable",
                    "the variable name is empty".into(),
                ));
            }
            Some(v) => v.to_string(),
        };
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(at(
                "streams",
                format!("{} is out of range 1–{MAX_STREAMS}", self.streams),
            ));
        }
        if !(1..=1_000_000).contains(&self.max_outstanding_messages) {
            return Err(at(
                "max_outstanding_messages",
                format!(
                    "{} is out of range 1–1000000",
                    self.max_outstanding_messages
                ),
            ));
        }
        if !(1024..=1 << 30).contains(&self.max_outstanding_bytes) {
            return Err(at(
                "max_outstanding_bytes",
                format!(
                    "{} is out of range 1024–1073741824 (1 KiB–1 GiB)",
                    self.max_outstanding_bytes
                ),
            ));
        }
        crate::limits::CONFIGURED
            .named("max_lease_extension")
            .parse(&self.max_lease_extension)
            .map_err(|e| at("max_lease_extension", e))?;
        Ok(Decoder {
            subscription: self.subscription.clone(),
            message: self.message.clone(),
            key,
            message_id,
            ttl,
            variables,
            claim_check: claim_check.map(|c| (c, claim_check_variable)),
            claim_check_required: self.claim_check_required,
        })
    }

    /// The lease extension as a duration.
    pub fn lease_extension(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            crate::limits::CONFIGURED
                .parse(&self.max_lease_extension)
                .unwrap_or(60_000),
        )
    }
}

/// One delivery as the transport hands it over.
#[derive(Debug, Clone, Default)]
pub struct Incoming {
    /// The payload.
    pub data: Vec<u8>,
    /// The Pub/Sub attributes.
    pub attributes: BTreeMap<String, String>,
    /// The broker's id of the message (Pub/Sub message_id).
    pub broker_id: String,
    /// When the broker accepted the message.
    pub publish_time: Option<Millis>,
    /// Set when the subscription has a dead-letter policy.
    pub delivery_attempt: Option<i32>,
}

/// The attribute in which a cluster's router keeps the broker's id of the
/// message it forwards (Pub/Sub gives the forwarded copy a new one).
pub const FORWARDED_BROKER_ID: &str = "postfach-first-message-id";

/// The attribute in which a cluster's router keeps the first publish time of
/// the message it forwards, in milliseconds since the epoch.
pub const FORWARDED_PUBLISH_TIME: &str = "postfach-first-publish-time";

impl Incoming {
    /// The delivery as it was first published: a copy a router forwarded
    /// carries the first broker id and publish time in two attributes, which
    /// take the place of the copy's own (and are removed, so the stored
    /// attributes are the publisher's). A publish time that does not parse is
    /// left alone (the copy's own stays).
    pub fn as_first_published(mut self) -> Self {
        if let Some(id) = self.attributes.remove(FORWARDED_BROKER_ID)
            && !id.is_empty()
        {
            self.broker_id = id;
        }
        if let Some(t) = self.attributes.remove(FORWARDED_PUBLISH_TIME)
            && let Ok(ms) = t.parse::<u64>()
            && crate::limits::check_instant(FORWARDED_PUBLISH_TIME, ms).is_ok()
        {
            self.publish_time = Some(ms);
        }
        self
    }

    /// The attributes of a forwarded copy: the publisher's, and the first
    /// broker id and publish time (kept from an earlier forward if any).
    pub fn forwarded_attributes(&self) -> BTreeMap<String, String> {
        let mut a = self.attributes.clone();
        a.insert(FORWARDED_BROKER_ID.into(), self.broker_id.clone());
        if let Some(t) = self.publish_time {
            a.insert(FORWARDED_PUBLISH_TIME.into(), t.to_string());
        }
        a
    }
}

/// What a delivery becomes.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A message to publish into the engine.
    Publish(Publish),
    /// A payload that could not be decoded, to be parked.
    Malformed(Malformed),
}

/// A compiled [`SubscriptionConfig`].
#[derive(Debug, Clone)]
pub struct Decoder {
    subscription: String,
    message: String,
    key: Source,
    message_id: Source,
    ttl: Option<Millis>,
    variables: Option<Vec<(String, String)>>,
    /// Where the claim-check reference is, and the variable it becomes.
    claim_check: Option<(ClaimCheck, String)>,
    /// Whether a delivery without the reference is malformed.
    claim_check_required: bool,
}

/// Where a claim-check reference is found in a delivery.
#[derive(Debug, Clone)]
enum ClaimCheck {
    /// Cloud Storage notification attributes.
    Attributes,
    /// A JSON pointer to a `gs://` URI in the payload.
    Pointer(String),
}

impl Decoder {
    /// Decodes one delivery. Never fails: what cannot be decoded is `Malformed`.
    pub fn decode(&self, m: &Incoming) -> Decoded {
        let mut attributes: Vec<(String, String)> = m
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        attributes.push(("pubsub.subscription".into(), self.subscription.clone()));
        attributes.push(("pubsub.message_id".into(), m.broker_id.clone()));
        if let Some(t) = m.publish_time {
            attributes.push(("pubsub.publish_time".into(), crate::clock::rfc3339(t)));
        }
        if let Some(a) = m.delivery_attempt {
            attributes.push(("pubsub.delivery_attempt".into(), a.to_string()));
        }
        let payload: Result<Value, String> =
            serde_json::from_slice(&m.data).map_err(|e| format!("payload is not JSON: {e}"));
        let message_id = match self.value(&self.message_id, m, payload.as_ref().ok()) {
            Some(id) if !id.is_empty() => id,
            _ => m.broker_id.clone(),
        };
        let malformed = |error: String| {
            Decoded::Malformed(Malformed {
                name: self.message.clone(),
                message_id: message_id.clone(),
                raw: m.data.clone(),
                attributes: attributes.clone(),
                error,
            })
        };
        if let Some(t) = m.publish_time
            && let Err(e) = crate::limits::check_instant("pubsub.publish_time", t)
        {
            return malformed(e.to_string());
        }
        let payload = match payload {
            Ok(Value::Object(o)) => o,
            Ok(other) => {
                return malformed(format!(
                    "payload is JSON but not an object (found {})",
                    json_kind(&other)
                ));
            }
            Err(e) => return malformed(e),
        };
        let value = Value::Object(payload);
        let key = match self.value(&self.key, m, Some(&value)) {
            Some(k) if !k.is_empty() => k,
            _ => {
                return malformed(format!(
                    "correlation key ({}) is missing or empty",
                    self.key.describe()
                ));
            }
        };
        let claim = match self.claim(m, &value) {
            Ok(claim) => claim,
            Err(e) => return malformed(format!("claim-check reference: {e}")),
        };
        let Value::Object(payload) = value else {
            unreachable!("checked above")
        };
        let mut variables: Vars = match &self.variables {
            None => payload,
            Some(list) => list
                .iter()
                .filter_map(|(name, ptr)| {
                    Value::Object(payload.clone())
                        .pointer(ptr)
                        .cloned()
                        .map(|v| (name.clone(), v))
                })
                .collect(),
        };
        if let Some((r, variable)) = claim {
            variables.insert(variable.clone(), r.to_value());
        }
        Decoded::Publish(Publish {
            name: self.message.clone(),
            key,
            message_id: Some(message_id),
            variables,
            ttl: self.ttl,
            attributes,
        })
    }

    /// The claim-check reference of a delivery and the variable it goes to:
    /// `Ok(None)` where none is configured or an optional one is absent, `Err`
    /// where one is there but invalid or a required one is missing.
    fn claim(&self, m: &Incoming, value: &Value) -> Result<Option<(ObjectRef, &String)>, String> {
        let Some((where_, variable)) = &self.claim_check else {
            return Ok(None);
        };
        let found = match where_ {
            ClaimCheck::Attributes => {
                match (m.attributes.get("bucketId"), m.attributes.get("objectId")) {
                    (Some(b), Some(o)) => {
                        let generation = m.attributes.get("objectGeneration");
                        ObjectRef::new(b, o, generation.map(String::as_str)).map(Some)
                    }
                    (None, None) => Ok(None),
                    _ => Err("attributes bucketId and objectId come together".into()),
                }
            }
            ClaimCheck::Pointer(p) => match value.pointer(p) {
                Some(Value::String(uri)) => ObjectRef::parse_uri(uri)
                    .map(Some)
                    .map_err(|e| format!("{p}: {e}")),
                Some(other) => Err(format!("{p} is {}, not a gs:// URI", json_kind(other))),
                None => Ok(None),
            },
        };
        match found? {
            Some(r) => Ok(Some((r, variable))),
            None if !self.claim_check_required => Ok(None),
            None => Err(match where_ {
                ClaimCheck::Attributes => "attributes bucketId and objectId are missing".into(),
                ClaimCheck::Pointer(p) => format!("{p} is missing"),
            }),
        }
    }

    fn value(&self, source: &Source, m: &Incoming, payload: Option<&Value>) -> Option<String> {
        match source {
            Source::Attribute(a) => m.attributes.get(a).cloned(),
            Source::Pointer(p) => payload?.pointer(p).and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }),
        }
    }

    /// The subscription this decoder belongs to.
    pub fn subscription(&self) -> &str {
        &self.subscription
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What one stream of a consumer did with the deliveries handed to it:
/// every one `received` ended `acked`, `nacked` or `held` (a test hook);
/// `stored` counts those whose outcome was recorded (acked or held).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTally {
    /// Deliveries the client handed to the stream.
    pub received: u64,
    /// Of those, the ones whose outcome the engine recorded durably.
    pub stored: u64,
    /// Acked after they were stored.
    pub acked: u64,
    /// Nacked (nothing recorded), for redelivery.
    pub nacked: u64,
    /// Stored but kept unacked (`POSTFACH_TEST_HOLD_ACKS`).
    pub held: u64,
}

/// What the transport does with a delivery once the engine answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckDecision {
    /// The outcome is durably recorded (correlated, buffered, duplicate, parked).
    Ack,
    /// Nothing was recorded (storage or engine failure): let the broker redeliver.
    Nack,
}

impl AckDecision {
    /// The ack rule: ack exactly when the engine answered with a recorded outcome.
    pub fn of(result: &Result<Delivery, crate::Error>) -> Self {
        match result {
            Ok(d) if d.outcome != Outcome::Rejected => AckDecision::Ack,
            _ => AckDecision::Nack,
        }
    }
}

/// Consumer states for readiness. A consumer of several streams is `Failing`
/// while any of them fails, `Running` once every one that has not stopped runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConsumerState {
    /// Connecting.
    Starting = 0,
    /// Receiving deliveries.
    Running = 1,
    /// Retrying after an error.
    Failing = 2,
    /// Stopped.
    Stopped = 3,
}

/// Counters of one consumer, shared with `/metrics` and `/health/ready`.
pub struct ConsumerStats {
    /// The subscription consumed.
    pub subscription: String,
    /// One state per streaming pull.
    streams: Vec<AtomicU8>,
    last_error: Mutex<Option<String>>,
    /// What each stream did with its deliveries, as it reported when it
    /// stopped (all zero while it runs).
    tallies: Mutex<Vec<StreamTally>>,
    /// Deliveries received.
    pub received: AtomicU64,
    /// Deliveries acked (after their outcome was stored).
    pub acked: AtomicU64,
    /// Deliveries nacked (storage failed: redelivered later).
    pub nacked: AtomicU64,
    outcomes: [AtomicU64; 4],
    /// Broker publish time → ack handed to the client, seconds.
    pub ack_latency: Histogram,
}

/// Buckets of the publish-to-ack latency, seconds.
pub const ACK_LATENCY_BOUNDS: &[f64] = &[
    0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

impl ConsumerStats {
    /// Counters of a new consumer of `subscription` with one stream.
    pub fn new(subscription: &str) -> Arc<Self> {
        Self::with_streams(subscription, 1)
    }

    /// Counters of a new consumer of `subscription` over `streams` streaming
    /// pulls (at least one).
    pub fn with_streams(subscription: &str, streams: usize) -> Arc<Self> {
        Arc::new(Self {
            subscription: subscription.into(),
            streams: (0..streams.max(1))
                .map(|_| AtomicU8::new(ConsumerState::Starting as u8))
                .collect(),
            last_error: Mutex::new(None),
            tallies: Mutex::new(vec![StreamTally::default(); streams.max(1)]),
            received: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            nacked: AtomicU64::new(0),
            outcomes: Default::default(),
            ack_latency: Histogram::new(ACK_LATENCY_BOUNDS),
        })
    }

    /// Where the consumer stands, over all its streams.
    pub fn state(&self) -> ConsumerState {
        let states: Vec<ConsumerState> = (0..self.streams.len())
            .map(|i| self.stream_state(i))
            .collect();
        if states.contains(&ConsumerState::Failing) {
            ConsumerState::Failing
        } else if states.iter().all(|s| *s == ConsumerState::Stopped) {
            ConsumerState::Stopped
        } else if states.contains(&ConsumerState::Starting) {
            ConsumerState::Starting
        } else {
            ConsumerState::Running
        }
    }

    /// What stream `i` did with the deliveries handed to it, as it reported
    /// when it stopped.
    pub fn stream_tally(&self, i: usize) -> StreamTally {
        self.tallies
            .lock()
            .ok()
            .and_then(|t| t.get(i).copied())
            .unwrap_or_default()
    }

    /// Records what stream `i` did with its deliveries (when it stops).
    pub fn set_stream_tally(&self, i: usize, t: StreamTally) {
        if let Ok(mut all) = self.tallies.lock()
            && let Some(slot) = all.get_mut(i)
        {
            *slot = t;
        }
    }

    /// How many streaming pulls this consumer has.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// How many of its streams receive deliveries now.
    pub fn streams_running(&self) -> usize {
        (0..self.streams.len())
            .filter(|i| self.stream_state(*i) == ConsumerState::Running)
            .count()
    }

    fn stream_state(&self, i: usize) -> ConsumerState {
        match self.streams[i].load(Ordering::Relaxed) {
            0 => ConsumerState::Starting,
            1 => ConsumerState::Running,
            2 => ConsumerState::Failing,
            _ => ConsumerState::Stopped,
        }
    }

    /// Records a new state of every stream and its error, if any.
    pub fn set_state(&self, s: ConsumerState, error: Option<String>) {
        for i in 0..self.streams.len() {
            self.set_stream_state(i, s, None);
        }
        self.set_error(error);
    }

    /// Records a new state of stream `i` (ignored when out of range); an
    /// error replaces the last one, a recovery keeps it until every stream
    /// runs again.
    pub fn set_stream_state(&self, i: usize, s: ConsumerState, error: Option<String>) {
        let Some(slot) = self.streams.get(i) else {
            return;
        };
        slot.store(s as u8, Ordering::Relaxed);
        if error.is_some() || self.state() != ConsumerState::Failing {
            self.set_error(error);
        }
    }

    fn set_error(&self, error: Option<String>) {
        if let Ok(mut e) = self.last_error.lock() {
            *e = error;
        }
    }

    /// The error of the last failure, if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Records the engine's answer for one delivery.
    pub fn record(&self, result: &Result<Delivery, crate::Error>) {
        if let Ok(d) = result {
            let i = match d.outcome {
                Outcome::Correlated => 0,
                Outcome::Buffered => 1,
                Outcome::Duplicate => 2,
                Outcome::Parked | Outcome::Rejected => 3,
            };
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Deliveries by outcome: correlated, buffered, duplicate, parked.
    pub fn outcomes(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.outcomes[i].load(Ordering::Relaxed))
    }
}

/// The consumers of a process, for `/metrics` and `/health/ready`.
#[derive(Default, Clone)]
pub struct Consumers {
    list: Arc<Mutex<Vec<Arc<ConsumerStats>>>>,
}

impl Consumers {
    /// Adds a consumer.
    pub fn add(&self, s: Arc<ConsumerStats>) {
        if let Ok(mut l) = self.list.lock() {
            l.push(s);
        }
    }

    /// Every consumer.
    pub fn all(&self) -> Vec<Arc<ConsumerStats>> {
        self.list.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Why the process is not ready: consumers not (yet) consuming, with their errors.
    pub fn not_ready(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter(|c| c.state() != ConsumerState::Running)
            .map(|c| match c.last_error() {
                Some(e) => format!("subscription {}: {e}", c.subscription),
                None => format!("subscription {}: {:?}", c.subscription, c.state()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
