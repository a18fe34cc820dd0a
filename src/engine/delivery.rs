//! What a message is and what becomes of it: the publish and malformed
//! commands' payloads, the classification of one message against what waits
//! ([`Decision`]) and the answer ([`Delivery`]) read off its stored record.
//!
//! Invariant: a delivery of a stored message is derived from its record
//! alone ([`delivery_of`]), so the answer and what is stored cannot disagree;
//! only a duplicate or a refusal, which store nothing, answer without one.

use crate::clock::Millis;
use crate::model::Vars;
use crate::store::{MessageRecord, MessageState, Reason};

/// A message to publish or correlate.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Publish {
    /// Message name, as the model's `<message name>`.
    pub name: String,
    /// Correlation key value.
    pub key: String,
    /// Business message id for deduplication; generated when absent.
    pub message_id: Option<String>,
    /// Variables merged into the instance on correlation.
    #[serde(with = "crate::codec::json_text")]
    pub variables: Vars,
    /// Buffer TTL; `Some(0)` disables buffering.
    pub ttl: Option<Millis>,
    /// Transport attributes kept with the record (Pub/Sub attributes, delivery attempt).
    pub attributes: Vec<(String, String)>,
}

/// A payload that could not be decoded, parked as `malformed`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Malformed {
    /// Message name the payload was meant as.
    pub name: String,
    /// Message id (from the transport).
    pub message_id: String,
    /// The payload as received.
    pub raw: Vec<u8>,
    /// Transport attributes.
    pub attributes: Vec<(String, String)>,
    /// Why it could not be decoded.
    pub error: String,
}

/// Outcome of a publish or correlate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Delivered to a waiting instance (or started one).
    Correlated,
    /// Waits in the buffer for its subscription.
    Buffered,
    /// Seen before under this (name, id): nothing changed.
    Duplicate,
    /// Parked with a reason for an operator.
    Parked,
    /// Synchronous correlate only: nothing was recorded.
    Rejected,
}

impl Outcome {
    /// The name in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Correlated => "correlated",
            Outcome::Buffered => "buffered",
            Outcome::Duplicate => "duplicate",
            Outcome::Parked => "parked",
            Outcome::Rejected => "rejected",
        }
    }
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// What happened.
    pub outcome: Outcome,
    /// The message id (generated when none was given).
    pub message_id: String,
    /// The instance it was correlated into.
    pub instance: Option<u64>,
    /// The element that caught it.
    pub element: Option<String>,
    /// Why it was parked or rejected.
    pub reason: Option<Reason>,
    /// Instances that could have taken it (ambiguous, late).
    pub candidates: Vec<u64>,
    /// Of an ambiguous message: every (instance, element) that waited for
    /// it — two places of one instance are two entries.
    pub candidate_elements: Vec<(u64, String)>,
    /// When a buffered message expires.
    pub expires_at: Option<Millis>,
}

/// Where a message goes, decided before anything is written.
pub(super) enum Decision {
    Deliver(u64, u64),
    StartInstance(String),
    Wait,
    /// Parked, with the candidate instances and (ambiguous) the elements
    /// that waited for it.
    Park(Reason, Vec<u64>, Vec<(u64, String)>),
}

impl Decision {
    /// Why a synchronous publish is refused instead of taken: it would wait
    /// or be parked.
    pub(super) fn refusal(&self) -> Option<(Reason, Vec<u64>)> {
        match self {
            Decision::Deliver(..) | Decision::StartInstance(_) => None,
            Decision::Wait => Some((Reason::NoSubscription, Vec::new())),
            Decision::Park(r, c, _) => Some((*r, c.clone())),
        }
    }
}

/// What became of a message that settled nowhere (a duplicate, a refusal).
pub(super) fn unsettled(
    outcome: Outcome,
    message_id: String,
    reason: Option<Reason>,
    candidates: Vec<u64>,
) -> Delivery {
    Delivery {
        outcome,
        message_id,
        instance: None,
        element: None,
        reason,
        candidates,
        candidate_elements: Vec::new(),
        expires_at: None,
    }
}

pub(super) fn delivery_of(rec: &MessageRecord) -> Delivery {
    Delivery {
        outcome: match rec.state {
            MessageState::Buffered => Outcome::Buffered,
            MessageState::Parked | MessageState::Discarded => Outcome::Parked,
            MessageState::Correlated => Outcome::Correlated,
        },
        message_id: rec.message_id.clone(),
        instance: rec.instance,
        element: rec.element.clone(),
        reason: rec.reason,
        candidates: rec.candidates.clone(),
        candidate_elements: rec.candidate_elements.clone(),
        expires_at: rec
            .expires_at
            .filter(|_| rec.state == MessageState::Buffered),
    }
}
