//! Views of messages: buffered and parked messages by filter and cursor,
//! one message id, counts per state and reason, and the events about
//! parked messages still to publish.
//!
//! Invariant: only reads; a message cursor names the index it continues in.

use super::*;
use crate::clock::{Millis, rfc3339};
use crate::store::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// A message in the buffer or parked (or settled).
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    /// Message id.
    pub message_id: String,
    /// Message name.
    pub name: String,
    /// Correlation key.
    pub key: String,
    /// `buffered`, `parked`, `correlated` or `discarded`.
    pub state: &'static str,
    /// Why it was parked.
    pub reason: Option<&'static str>,
    /// When it was accepted (RFC 3339).
    pub accepted_at: String,
    /// When a buffered message expires (RFC 3339).
    pub expires_at: Option<String>,
    /// Instances that could have taken it (ambiguous, late).
    pub candidates: Vec<String>,
    /// Of an ambiguous message: every place that waited for it.
    pub candidate_elements: Vec<CandidateView>,
    /// Instance it was correlated into.
    pub instance: Option<String>,
    /// Element that caught it.
    pub element: Option<String>,
    /// Decoding error, or why it was discarded.
    pub note: Option<String>,
    /// Transport attributes.
    pub attributes: BTreeMap<String, String>,
    /// Raw payload of a malformed message, as (lossy) text.
    pub raw: Option<String>,
    /// The same raw payload byte for byte, as lowercase hex.
    pub raw_hex: Option<String>,
    /// How often an operator requeued it.
    pub requeues: u32,
    /// When it was correlated or discarded.
    pub settled_at: Option<String>,
}

/// Where a page of messages goes on: after a parked message (`p:SEQ`) or
/// after a buffered one (`b:ACCEPTED_AT:SEQ`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum MessageCursor {
    Parked(u64),
    Buffered(Millis, u64),
}

impl MessageCursor {
    fn parse(s: &str) -> Result<Self, MessageCursorError> {
        let bad = || MessageCursorError::Cursor(s.to_string());
        let mut parts = s.split(':');
        let c = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("p"), Some(seq), None, None) => {
                MessageCursor::Parked(seq.parse().map_err(|_| bad())?)
            }
            (Some("b"), Some(at), Some(seq), None) => MessageCursor::Buffered(
                at.parse().map_err(|_| bad())?,
                seq.parse().map_err(|_| bad())?,
            ),
            _ => return Err(bad()),
        };
        Ok(c)
    }
}

impl std::fmt::Display for MessageCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageCursor::Parked(s) => write!(f, "p:{s}"),
            MessageCursor::Buffered(a, s) => write!(f, "b:{a}:{s}"),
        }
    }
}

/// Why a page of messages could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MessageCursorError {
    /// The cursor is not one a page handed out.
    #[error("cursor {0:?} is not the `next` of a page of messages")]
    Cursor(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Which messages to list; both flags false lists buffered and parked.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// List buffered messages.
    pub buffered: bool,
    /// List parked messages.
    pub parked: bool,
    /// Only parked messages with this reason.
    pub reason: Option<Reason>,
}

/// One page of buffered and parked messages: the parked ones by sequence,
/// then the buffered ones oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    /// The messages of this page.
    pub messages: Vec<MessageView>,
    /// The cursor of the next page, when more messages may follow.
    pub next: Option<String>,
}

/// An event about a parked message that waits to be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// Its row: hand it to [`crate::Postfach::parked_events_sent`] once published.
    pub id: u64,
    /// The stable id a receiver deduplicates by (`eventId` in the JSON and
    /// as attribute).
    pub event_id: String,
    /// The event as JSON.
    pub data: Vec<u8>,
}

/// A signal thrown here in a cluster, to be taken by every other partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingSignal {
    /// Its row (hand it to [`crate::Postfach::signals_forwarded`]).
    pub seq: u64,
    /// Its id, the same on every partition (`pI-sN`).
    pub id: String,
    /// The signal's name.
    pub name: String,
    /// Receivers it reached here.
    pub reached: u64,
}

impl Reader {
    /// Messages in the buffer and/or parked.
    pub fn messages(&self, filter: &MessageFilter) -> Result<Vec<MessageView>, RErr> {
        let (buffered, parked) = if !filter.buffered && !filter.parked {
            (true, true)
        } else {
            (filter.buffered, filter.parked)
        };
        let mut recs: Vec<MessageRecord> = Vec::new();
        if buffered {
            recs.extend(self.snap.buffered()?);
        }
        if parked {
            recs.extend(self.snap.parked()?);
        }
        if let Some(r) = filter.reason {
            recs.retain(|m| m.reason == Some(r));
        }
        recs.sort_by_key(|m| m.seq);
        Ok(recs.iter().map(message_view).collect())
    }

    /// One page of the messages `filter` asks for, read from the `parked` and
    /// `buffer_age` indexes (never the whole table): parked ones first, by
    /// sequence, then buffered ones, oldest first. `after` is the `next` of
    /// the previous page; a page reads at most [`PAGE_SCAN_BUDGET`] records.
    pub fn message_page(
        &self,
        filter: &MessageFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<MessagePage, MessageCursorError> {
        let (buffered, parked) = if !filter.buffered && !filter.parked {
            (true, true)
        } else {
            (filter.buffered, filter.parked)
        };
        let limit = limit.max(1);
        let mut cursor = match after {
            None => None,
            Some(c) => Some(MessageCursor::parse(c)?),
        };
        let mut out = Vec::new();
        let mut examined = 0usize;
        let full = |out: &Vec<MessageView>, examined: usize| {
            out.len() == limit || examined >= PAGE_SCAN_BUDGET
        };
        if parked && !matches!(cursor, Some(MessageCursor::Buffered(..))) {
            let mut from = match cursor {
                Some(MessageCursor::Parked(s)) => Some(s),
                _ => None,
            };
            loop {
                let batch = self.snap.parked_after(from, 256)?;
                if batch.is_empty() {
                    break;
                }
                for m in batch {
                    if full(&out, examined) {
                        return Ok(MessagePage {
                            messages: out,
                            next: from.map(|s| MessageCursor::Parked(s).to_string()),
                        });
                    }
                    examined += 1;
                    from = Some(m.seq);
                    if filter.reason.is_none_or(|r| m.reason == Some(r)) {
                        out.push(message_view(&m));
                    }
                }
            }
            cursor = None;
        }
        if buffered && filter.reason.is_none() {
            let mut from = match cursor {
                Some(MessageCursor::Buffered(at, seq)) => Some((at, seq)),
                _ => None,
            };
            loop {
                let batch = self.snap.buffered_after(from, 256)?;
                if batch.is_empty() {
                    break;
                }
                for m in batch {
                    if full(&out, examined) {
                        return Ok(MessagePage {
                            messages: out,
                            // before the first buffered one: the start of the buffer
                            next: Some(from.map_or(MessageCursor::Buffered(0, 0), |(a, s)| {
                                MessageCursor::Buffered(a, s)
                            }))
                            .map(|c| c.to_string()),
                        });
                    }
                    examined += 1;
                    from = Some((m.accepted_at, m.seq));
                    out.push(message_view(&m));
                }
            }
        }
        Ok(MessagePage {
            messages: out,
            next: None,
        })
    }

    /// Every message record with this id (any state).
    pub fn message(&self, id: &str) -> Result<Vec<MessageView>, RErr> {
        Ok(self
            .snap
            .messages_by_id(id)?
            .iter()
            .map(message_view)
            .collect())
    }

    /// Number of message records per state.
    pub fn message_counts(&self) -> Result<BTreeMap<&'static str, u64>, RErr> {
        let mut out = BTreeMap::new();
        for m in self.snap.messages()? {
            *out.entry(m.state.as_str()).or_default() += 1;
        }
        Ok(out)
    }

    /// Age of the oldest buffered message, if any (one index lookup).
    pub fn oldest_buffered_age(&self) -> Result<Option<u64>, RErr> {
        let oldest = self.snap.oldest_buffered_at()?;
        Ok(oldest.map(|o| self.now.saturating_sub(o)))
    }

    /// How many messages wait in the buffer.
    pub fn buffered_count(&self) -> Result<u64, RErr> {
        self.snap.buffered_count()
    }

    /// Up to `limit` signals a process threw here (in a cluster) that not
    /// every other partition took yet, oldest first: (seq, id, name,
    /// receivers reached here). A row that does not decode is skipped.
    pub fn signals_out(&self, limit: usize) -> Result<Vec<OutgoingSignal>, RErr> {
        Ok(self
            .snap
            .signals_out(limit)?
            .into_iter()
            .filter_map(|(seq, data)| {
                let v: serde_json::Value = serde_json::from_slice(&data).ok()?;
                Some(OutgoingSignal {
                    seq,
                    id: v.get("id")?.as_str()?.to_string(),
                    name: v.get("name")?.as_str()?.to_string(),
                    reached: v
                        .get("reached")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0),
                })
            })
            .collect())
    }

    /// Up to `limit` events about parked messages still to publish, oldest
    /// first, and how many wait in all (`[notifications] parked_topic`).
    pub fn parked_events(&self, limit: usize) -> Result<(Vec<PendingEvent>, u64), RErr> {
        let (rows, total) = self.snap.parked_events(limit)?;
        let events = rows
            .into_iter()
            .map(|(id, data)| PendingEvent {
                id,
                event_id: format!("{}{id}", crate::engine::EVENT_ID_PREFIX),
                data,
            })
            .collect();
        Ok((events, total))
    }

    /// Parked messages per reason.
    pub fn parked_by_reason(&self) -> Result<BTreeMap<&'static str, u64>, RErr> {
        let mut out = BTreeMap::new();
        for (reason, n) in self.snap.parked_gauges()? {
            let name = Reason::ALL
                .iter()
                .map(|r| r.as_str())
                .find(|r| *r == reason)
                .unwrap_or("unknown");
            *out.entry(name).or_default() += n;
        }
        Ok(out)
    }
}

pub(super) fn message_view(m: &MessageRecord) -> MessageView {
    MessageView {
        message_id: m.message_id.clone(),
        name: m.name.clone(),
        key: m.key.clone(),
        state: m.state.as_str(),
        reason: m.reason.map(Reason::as_str),
        accepted_at: rfc3339(m.accepted_at),
        expires_at: m
            .expires_at
            .filter(|_| m.state == MessageState::Buffered)
            .map(rfc3339),
        candidates: m.candidates.iter().map(u64::to_string).collect(),
        candidate_elements: m
            .candidate_elements
            .iter()
            .map(|(i, e)| CandidateView {
                instance: i.to_string(),
                element: e.clone(),
            })
            .collect(),
        instance: m.instance.map(|i| i.to_string()),
        element: m.element.clone(),
        note: m.note.clone(),
        attributes: m.attributes.iter().cloned().collect(),
        raw: m
            .raw
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        raw_hex: m.raw.as_ref().map(|b| {
            use std::fmt::Write;
            b.iter()
                .fold(String::with_capacity(b.len() * 2), |mut s, x| {
                    let _ = write!(s, "{x:02x}");
                    s
                })
        }),
        requeues: m.requeues,
        settled_at: m.settled_at.map(rfc3339),
    }
}
