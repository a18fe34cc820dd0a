//! An instance's history rows: the entries one write appended, keyed
//! (instance, sequence of the first entry), in a compact layout.
//!
//! A history repeats itself: the elements of its process, the same event
//! names, instants a few milliseconds apart. A row therefore names an element
//! of the instance's process definition by its position in it (the process
//! itself by the position after the last), the engine's common event names
//! by number ([`KNOWN`]), any other text once in a dictionary of the row,
//! and each instant as the milliseconds since the entry before (the first
//! since the instance started), so an entry costs three or four bytes
//! instead of its texts and a full instant. Rows of the first layout (a
//! plain list of entries) are read as they are; nothing needs to be
//! rewritten.
//!
//! Invariant: `decode(encode(entries, base, model), base, model) == entries`
//! for every list, whatever its texts and instants (the instants may go
//! backwards: a clock set back), with or without the model.

use super::HistoryEntry;
use crate::clock::Millis;
use crate::codec::{self, CodecError};
use crate::model::Process;
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

/// The compact layout: the instant of the first entry (as a difference to
/// the instance's start), the distinct texts (after the [`KNOWN`] ones),
/// and per entry (element, event text, milliseconds since the entry before,
/// wrapping: a clock set back costs bytes, not correctness). An element is
/// `2·i` for element `i` of the model (the process itself: `i` = the number
/// of elements), `2·t + 1` for text `t`.
#[derive(Serialize, Deserialize)]
struct Compact {
    first_at: u64,
    texts: Vec<String>,
    entries: Vec<(u32, u32, u64)>,
}

/// The bytes of one history row of an instance that started at `base`,
/// naming elements of `model` by position (without a model, by text).
pub(crate) fn encode(
    entries: &[HistoryEntry],
    base: Millis,
    model: Option<&Process>,
) -> Result<Vec<u8>, CodecError> {
    let mut texts: Vec<String> = Vec::new();
    let mut text = |s: &str| -> u32 {
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
    let first_at = entries.first().map_or(base, |e| e.at);
    let mut before = first_at;
    let mut compact = Vec::with_capacity(entries.len());
    for e in entries {
        let at_model = model.and_then(|m| {
            if e.element == m.id {
                Some(m.elements.len())
            } else {
                m.index_of(&e.element)
            }
        });
        let element = match at_model {
            Some(i) => 2 * i as u32,
            None => 2 * text(&e.element) + 1,
        };
        compact.push((element, text(&e.event), e.at.wrapping_sub(before)));
        before = e.at;
    }
    codec::encode_versioned(
        &Compact {
            first_at: first_at.wrapping_sub(base),
            texts,
            entries: compact,
        },
        &(),
        codec::COMPACT_VERSION,
    )
}

/// Reads a history row of either layout of an instance that started at
/// `base`, with the model it was written with.
pub(crate) fn decode(
    bytes: &[u8],
    base: Millis,
    model: Option<&Process>,
) -> Result<Vec<HistoryEntry>, CodecError> {
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
    let element = |e: u32| {
        if e % 2 == 1 {
            return text(e / 2);
        }
        let i = (e / 2) as usize;
        match model {
            Some(m) if i == m.elements.len() => Ok(m.id.clone()),
            Some(m) if i < m.elements.len() => Ok(m.elements[i].id.clone()),
            Some(m) => Err(CodecError::Decode(format!(
                "history row names element {i} of process '{}', which has {}",
                m.id,
                m.elements.len()
            ))),
            None => Err(CodecError::Decode(format!(
                "history row names element {i} of its process definition, which is not stored"
            ))),
        }
    };
    let mut at = base.wrapping_add(c.first_at);
    let mut out = Vec::with_capacity(c.entries.len());
    for &(el, event, delta) in &c.entries {
        at = at.wrapping_add(delta);
        out.push(HistoryEntry {
            element: element(el)?,
            event: text(event)?,
            at,
        });
    }
    Ok(out)
}

/// How many entries a history row of either layout holds (its texts are
/// not resolved: no model needed). For the store's check.
pub(crate) fn len(bytes: &[u8]) -> Result<usize, CodecError> {
    if codec::version_of(bytes)? != codec::COMPACT_VERSION {
        return Ok(codec::decode::<Vec<HistoryEntry>>(bytes)?.len());
    }
    let (c, ()): (Compact, ()) = codec::decode_versioned(bytes, codec::COMPACT_VERSION)?;
    Ok(c.entries.len())
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

    fn reference() -> Process {
        let xml = include_str!("../../bpmn/auftrag-ausfuehrung.bpmn");
        let keys = [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into();
        let mut p = crate::model::parse("ref.bpmn", xml, &keys)
            .unwrap()
            .remove(0);
        p.build_index();
        p
    }

    #[test]
    fn a_row_of_the_first_layout_reads_as_before() {
        let entries = vec![entry("a", "activated", 5), entry("a", "completed", 9)];
        let old = codec::encode(&entries).unwrap();
        assert_eq!(decode(&old, 0, None).unwrap(), entries);
        assert_eq!(len(&old).unwrap(), 2);
    }

    /// The reference order's history: under a fifth of the plain layout
    /// with its model, under a third without.
    #[test]
    fn a_compact_row_is_a_fraction_of_the_plain_one() {
        let t0 = 1_767_225_600_000;
        // a task whose job ran twice: once failed, once completed
        const JOB_TASK: &[&str] = &[
            "activated",
            "job_created",
            "job_executed",
            "job_created",
            "job_completed",
            "completed",
        ];
        let mut entries = vec![entry("auftrag-ausfuehrung", "instance_started", t0)];
        for (element, events) in [
            ("auftragEingegangen", &["activated", "completed"][..]),
            ("auftragUebergeben", JOB_TASK),
            (
                "warteAufAbschluss",
                &["activated", "message_correlated", "completed"],
            ),
            ("rechnungStellen", JOB_TASK),
            ("auftragAbgerechnet", &["activated", "completed"]),
        ] {
            for ev in events {
                let at = t0 + entries.len() as u64 * 3;
                entries.push(entry(element, ev, at));
            }
        }
        let model = reference();
        let plain = codec::encode(&entries).unwrap();
        let compact = encode(&entries, t0, Some(&model)).unwrap();
        assert!(
            compact.len() * 5 < plain.len(),
            "{} vs {}",
            compact.len(),
            plain.len()
        );
        assert_eq!(decode(&compact, t0, Some(&model)).unwrap(), entries);
        assert_eq!(len(&compact).unwrap(), entries.len());
        let unnamed = encode(&entries, t0, None).unwrap();
        assert!(
            unnamed.len() * 3 < plain.len(),
            "{} vs {}",
            unnamed.len(),
            plain.len()
        );
        assert_eq!(decode(&unnamed, t0, None).unwrap(), entries);
    }

    #[test]
    fn a_row_that_names_its_model_needs_it_to_be_read() {
        let model = reference();
        let bytes = encode(
            &[entry("auftragUebergeben", "activated", 7)],
            0,
            Some(&model),
        )
        .unwrap();
        let err = decode(&bytes, 0, None).unwrap_err().to_string();
        assert!(err.contains("process definition"), "{err}");
    }

    proptest! {
        /// Element ids of the model and any other text, known and unknown
        /// event names, any instants, with and without the model.
        #[test]
        fn every_list_of_entries_comes_back_as_written(
            raw in proptest::collection::vec(
                (
                    prop_oneof![
                        "[a-c]{0,3}",
                        Just("auftragUebergeben".to_string()),
                        Just("auftrag-ausfuehrung".to_string()),
                    ],
                    prop_oneof!["[x-z ]{0,4}", Just("activated".to_string())],
                    any::<u64>(),
                ),
                0..12,
            ),
            base in any::<u64>(),
            with_model in any::<bool>(),
        ) {
            let model = reference();
            let model = with_model.then_some(&model);
            let entries: Vec<HistoryEntry> =
                raw.iter().map(|(el, ev, at)| entry(el, ev, *at)).collect();
            let bytes = encode(&entries, base, model).unwrap();
            prop_assert_eq!(decode(&bytes, base, model).unwrap(), entries);
        }
    }
}
