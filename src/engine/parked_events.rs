//! Events about parked messages: when the database keeps them
//! ([`crate::Options::parked_events`], `[notifications]` of `postfach run`), every
//! message that is parked, expires, is requeued or discarded leaves one event
//! row in the transaction that did it; the edge publishes the rows and
//! removes each once the broker confirmed it.
//!
//! Invariant: an event is written in the same transaction as the change it
//! reports, under an id that never changes, so it is published at least once
//! and always under the same `eventId` (a receiver that deduplicates by it
//! sees each event exactly once); while the setting is off nothing is
//! written. The payload goes into an event only when
//! the configuration says so.

use super::*;
use serde_json::{Value, json};

/// What happened to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkedEvent {
    /// Parked on arrival (late, ambiguous, no subscription, malformed, …).
    Parked,
    /// Its time in the buffer ran out.
    Expired,
    /// An operator evaluated it again.
    Requeued,
    /// An operator ended it.
    Discarded,
}

impl ParkedEvent {
    /// The name in the event's `event` field.
    pub fn as_str(self) -> &'static str {
        match self {
            ParkedEvent::Parked => "parked",
            ParkedEvent::Expired => "expired",
            ParkedEvent::Requeued => "requeued",
            ParkedEvent::Discarded => "discarded",
        }
    }
}

/// Attribute and field naming an event's stable id.
pub const EVENT_ID_PREFIX: &str = "postfach-parked-";

impl<'a, 't> Engine<'a, 't> {
    /// Keeps an event about `rec` for publishing, when events are asked for.
    pub(super) fn parked_event(&mut self, what: ParkedEvent, rec: &MessageRecord) -> R<()> {
        let Some(cfg) = self.t.parked_events() else {
            return Ok(());
        };
        let id = self.t.next_partition_id("parked_event")?;
        let mut event = json!({
            "eventId": format!("{EVENT_ID_PREFIX}{id}"),
            "event": what.as_str(),
            "at": crate::clock::rfc3339(self.now),
            "message": {
                "id": rec.message_id,
                "name": rec.name,
                "key": rec.key,
                "seq": rec.seq.to_string(),
                "state": rec.state.as_str(),
            },
            "reason": rec.reason.map(|r| r.as_str()),
            "candidates": rec.candidates.iter().map(u64::to_string).collect::<Vec<_>>(),
            "candidateElements": rec
                .candidate_elements
                .iter()
                .map(|(i, e)| json!({"instance": i.to_string(), "element": e}))
                .collect::<Vec<_>>(),
            "instance": rec.instance.map(|i| i.to_string()),
            "element": rec.element,
            "note": rec.note,
            "requeues": rec.requeues,
        });
        if cfg.payload
            && let Value::Object(map) = &mut event
        {
            map.insert(
                "variables".into(),
                Value::Object(rec.variables.clone().into_iter().collect()),
            );
        }
        let bytes = serde_json::to_vec(&event).map_err(|e| {
            EngineError::Store(StoreError::Aborted(format!("encode parked event: {e}")))
        })?;
        self.t.put_parked_event(id, &bytes)?;
        Ok(())
    }

    /// Forgets the events the broker confirmed; returns how many were kept.
    pub fn parked_events_sent(&mut self, ids: &[u64]) -> R<usize> {
        let mut n = 0;
        for &id in ids {
            n += usize::from(self.t.remove_parked_event(id)?);
        }
        Ok(n)
    }
}
