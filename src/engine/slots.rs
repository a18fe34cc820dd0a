//! Where a command may write in a cluster: the slot of a key or id, and
//! whether this partition owns it ([`crate::slots`]).
//!
//! Invariant: every write for a key or an id passes [`Engine::own_key`] or
//! [`Engine::own_id`] before its first write, so a partition writes only for
//! the slots it owns and is not moving — never for one another partition
//! owns per its map, never for one in a move (the caller retries once the
//! move is done). Unpartitioned, everything is owned and every slot is 0.

use super::*;
use crate::slots::Ownership;

impl<'a, 't> Engine<'a, 't> {
    /// The slot of correlation key `key` (0 unpartitioned).
    pub(super) fn slot_of_key(&self, key: &str) -> R<u32> {
        Ok(match self.t.slot_state()? {
            Some(s) => s.map.slot_of_key(key),
            None => 0,
        })
    }

    /// The slot id `id` carries (0 unpartitioned): an instance's, which its
    /// jobs, tasks and called instances share.
    pub(super) fn slot_of_id(&self, id: u64) -> R<u32> {
        Ok(match self.t.slot_state()? {
            Some(s) => s.map.slot_of_id(id),
            None => 0,
        })
    }

    /// A slot this partition owns for an instance without a key of its own
    /// (0 unpartitioned); refused when it owns none.
    pub(super) fn home_slot(&mut self) -> R<u32> {
        let Some(s) = self.t.slot_state()? else {
            return Ok(0);
        };
        let n = self.t.counter_at("instance")?;
        s.home_slot(n).ok_or_else(|| EngineError::OtherPartition {
            what: "an instance without a correlation key".into(),
            owner: s.map.owner(s.map.slot_of_id(n)),
            here: s.me,
            version: s.map.version(),
        })
    }

    /// Refuses an id whose slot this partition does not own or is moving.
    pub(super) fn own_id(&self, kind: &str, id: u64) -> R<()> {
        match self.t.slot_state()? {
            Some(s) => owned(&s, s.map.slot_of_id(id), || format!("{kind} {id}")),
            None => Ok(()),
        }
    }

    /// Refuses a correlation key whose slot this partition does not own or
    /// is moving.
    pub(super) fn own_key(&self, key: &str) -> R<()> {
        match self.t.slot_state()? {
            Some(s) => owned(&s, s.map.slot_of_key(key), || {
                format!("message key '{key}'")
            }),
            None => Ok(()),
        }
    }

    /// The version of the slot map this partition holds (0 unpartitioned).
    pub(super) fn map_version(&self) -> R<u64> {
        Ok(self.t.slot_state()?.map_or(0, |s| s.map.version()))
    }
}

fn owned(s: &crate::slots::SlotState, slot: u32, what: impl Fn() -> String) -> R<()> {
    match s.ownership(slot) {
        Ownership::Mine => Ok(()),
        Ownership::Moving { to } => Err(EngineError::SlotMoving {
            what: what(),
            slot,
            here: s.me,
            to,
        }),
        Ownership::Other { owner, version } => Err(EngineError::OtherPartition {
            what: what(),
            owner,
            here: s.me,
            version,
        }),
    }
}
