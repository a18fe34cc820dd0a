//! An instance's history rows: the entries one write appended, keyed
//! (instance, sequence of the first entry), in a compact layout.
//!
//! A history repeats itself: the same element ids and event names, instants
//! a few milliseconds apart. A row therefore stores each distinct text once
//! (a dictionary of element ids and event names) and each entry as two
//! indexes into it and the milliseconds since the entry before, so an
//! entry costs three or four bytes instead of its texts and a full instant.
//! Rows of the first layout (a plain list of entries) are read as they are;
//! nothing needs to be rewritten.
//!
//! Invariant: `decode(encode(entries)) == entries` for every list, whatever
//! its texts and instants (the instants may go backwards: a clock set back).

use super::HistoryEntry;
use crate::codec::{self, CodecError};
use serde::{Deserialize, Serialize};

/// Event names the engine writes most, by position: text `i` below
/// `KNOWN.len()` is `KNOWN[i]`, stored in no row. Part of the stored format:
/// names are only ever appended, never reordered or removed.
const KNOWN: [&str; 28] = [
    "instance_started",
    "instance_completed",
    "activated",
    "completed",
    "job_created",
    "job_executed",
    "job_completed",
    "message_correlated",
    "waiting",
    "timer_fired",
    "signal_received",
    "condition_met",
    "task_created",
    "joined",
    "incident",
    "inner_started",
    "inner_completed",
    "scope_cancelled",
    "terminated",
    "token_cancelled",
    "child_completed",
    "called",
    "bpmn_error",
    "escalation_thrown",
    "incident_retried",
    "completion_condition_met",
    "cancelled_by_parent",
    "escalation_uncaught",
];

/// The compact layout: the instant of the first entry, the distinct texts
/// (after the [`KNOWN`] ones),
/// and per entry (element text, event text, milliseconds since the entry
/// before, wrapping: a clock set back costs bytes, not correctness).
#[derive(Serialize, Deserialize)]
struct Compact {
    first_at: u64,
    texts: Vec<String>,
    entries: Vec<(u32, u32, u64)>,
}

/// The bytes of one history row.
pub(crate) fn encode(entries: &[HistoryEntry]) -> Result<Vec<u8>, CodecError> {
    let mut texts: Vec<String> = Vec::new();
    let mut index = |s: &str| -> u32 {
        if let Some(i) = KNOWN.iter().position(|k| *k == s) {
            return i as u32;
        }
        let i = match texts.iter().position(|t| t == s) {
            Some(i) => i,
            None => {
                texts.push(s.to_string());
                texts.len() - 1
            }
        };
        (KNOWN.len() + i) as u32
    };
    let first_at = entries.first().map_or(0, |e| e.at);
    let mut before = first_at;
    let mut compact = Vec::with_capacity(entries.len());
    for e in entries {
        compact.push((
            index(&e.element),
            index(&e.event),
            e.at.wrapping_sub(before),
        ));
        before = e.at;
    }
    codec::encode_versioned(
        &Compact {
            first_at,
            texts,
            entries: compact,
        },
        &(),
        codec::COMPACT_VERSION,
    )
}

/// Reads a history row of either layout.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<HistoryEntry>, CodecError> {
    if codec::version_of(bytes)? != codec::COMPACT_VERSION {
        return codec::decode(bytes);
    }
    let (c, ()): (Compact, ()) = codec::decode_versioned(bytes, codec::COMPACT_VERSION)?;
    let text = |i: u32| {
        let i = i as usize;
        if let Some(k) = KNOWN.get(i) {
            return Ok(k.to_string());
        }
        c.texts.get(i - KNOWN.len()).cloned().ok_or_else(|| {
            CodecError::Decode(format!(
                "history row names text {i} of {}",
                KNOWN.len() + c.texts.len()
            ))
        })
    };
    let mut at = c.first_at;
    let mut out = Vec::with_capacity(c.entries.len());
    for &(element, event, delta) in &c.entries {
        at = at.wrapping_add(delta);
        out.push(HistoryEntry {
            element: text(element)?,
            event: text(event)?,
            at,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(element: &str, event: &str, at: u64) -> HistoryEntry {
        HistoryEntry {
            element: element.into(),
            event: event.into(),
            at,
        }
    }

    #[test]
    fn a_row_of_the_first_layout_reads_as_before() {
        let entries = vec![entry("a", "activated", 5), entry("a", "completed", 9)];
        let old = codec::encode(&entries).unwrap();
        assert_eq!(decode(&old).unwrap(), entries);
    }

    /// The reference order's history: under a third of the plain layout.
    #[test]
    fn a_compact_row_is_a_fraction_of_the_plain_one() {
        let t0 = 1_767_225_600_000;
        let mut entries = vec![entry("auftrag-ausfuehrung", "instance_started", t0)];
        for (element, events) in [
            ("auftragEingegangen", &["activated", "completed"][..]),
            (
                "auftragUebergeben",
                &[
                    "activated",
                    "job_created",
                    "job_executed",
                    "job_created",
                    "job_completed",
                    "completed",
                ],
            ),
            (
                "warteAufAbschluss",
                &["activated", "message_correlated", "completed"],
            ),
            (
                "rechnungStellen",
                &[
                    "activated",
                    "job_created",
                    "job_executed",
                    "job_created",
                    "job_completed",
                    "completed",
                ],
            ),
            ("auftragAbgerechnet", &["activated", "completed"]),
        ] {
            for ev in events {
                let at = t0 + entries.len() as u64 * 3;
                entries.push(entry(element, ev, at));
            }
        }
        let (plain, compact) = (codec::encode(&entries).unwrap(), encode(&entries).unwrap());
        assert!(
            compact.len() * 3 < plain.len(),
            "{} vs {}",
            compact.len(),
            plain.len()
        );
        assert_eq!(decode(&compact).unwrap(), entries);
    }

    proptest! {
        #[test]
        fn every_list_of_entries_comes_back_as_written(
            raw in proptest::collection::vec(("[a-c]{0,3}", "[x-z ]{0,4}", any::<u64>()), 0..12)
        ) {
            let entries: Vec<HistoryEntry> =
                raw.iter().map(|(el, ev, at)| entry(el, ev, *at)).collect();
            prop_assert_eq!(decode(&encode(&entries).unwrap()).unwrap(), entries);
        }
    }
}
