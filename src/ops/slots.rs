//! The slot map as a partition shows it: the map it holds, its own ranges
//! and its moves in flight ([`crate::slots`]).
//!
//! Invariant: read-only, like every view; renders whatever is stored.

use super::{RErr, Reader};
use crate::slots::{SlotMove, SlotState};
use crate::store::Moved;
use serde_json::{Value, json};

impl Reader {
    /// This partition's slot state (`None` unpartitioned).
    pub fn slot_state(&self) -> Result<Option<SlotState>, RErr> {
        self.snap.slot_state()
    }

    /// Items `from ..` (at most `limit`) of move batch `batch`, read for
    /// sending to its target, each instance with its passed pairs per its
    /// model.
    pub fn moved_items(&self, batch: u64, from: u64, limit: usize) -> Result<Vec<Moved>, RErr> {
        let pairs = |p: &str, v: u32, vars: &crate::model::Vars| -> Vec<(String, String)> {
            match self.process(p, v) {
                Ok(Some(m)) => m
                    .correlation_pairs(vars)
                    .map(|(a, b)| (a.to_string(), b))
                    .collect(),
                _ => Vec::new(),
            }
        };
        self.snap.export_items(batch, from, limit, &pairs)
    }

    /// Where this partition's id counters stand (a target goes on above).
    pub fn id_counters(&self) -> Result<Vec<(String, u64)>, RErr> {
        self.snap.id_counters()
    }
}

/// A partition's slot state in the shape of `GET /slots`: its number, the
/// map's slot count, version and ranges (`slots`: `[[first, last,
/// partition], …]`), the ranges it owns and its moves in flight.
/// Unpartitioned: partition 0 and no map.
pub fn slots_json(state: Option<&SlotState>) -> Value {
    let Some(s) = state else {
        return json!({"partition": 0, "slot_count": null, "map_version": 0, "slots": [], "moves": []});
    };
    json!({
        "partition": s.me,
        "slot_count": s.map.slots(),
        "base_partitions": s.map.base(),
        "map_version": s.map.version(),
        "slots": s.map.to_json(),
        "owned": s.map.owned_by(s.me).iter().map(|r| json!([r.first, r.last])).collect::<Vec<_>>(),
        "moves": s.moves.iter().map(move_json).collect::<Vec<_>>(),
    })
}

/// A move in flight: its id, slots, source, target and the version it makes.
pub fn move_json(m: &SlotMove) -> Value {
    json!({
        "move": m.id.to_string(),
        "first": m.first,
        "last": m.last,
        "from": m.from,
        "to": m.to,
        "version": m.version,
        "phase": m.phase.name(),
    })
}
