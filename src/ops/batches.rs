//! Batches as the lists show them: each batch's operation, state and
//! progress, and a batch's refused items with their reasons.
//!
//! Invariant: read-only, like every view; renders whatever is stored.

use super::{RErr, Reader};
use crate::clock::rfc3339;
use crate::store::batches::{BatchItemRow, BatchRecord, BatchStatus};
use serde_json::{Value, json};

/// Refused items a batch's view shows at most.
pub const REFUSED_SHOWN: usize = 1000;

impl Reader {
    /// Every batch, newest first.
    pub fn batches(&self) -> Result<Vec<BatchRecord>, RErr> {
        self.snap.batches()
    }

    /// Every item of batch `id` with its outcome so far, in order.
    pub fn batch_items(&self, id: u64) -> Result<Vec<BatchItemRow>, RErr> {
        self.snap.batch_items(id)
    }

    /// Batch `id` with up to `refused` of its refused items.
    pub fn batch(&self, id: u64, refused: usize) -> Result<Option<BatchStatus>, RErr> {
        self.snap.batch(id, refused)
    }
}

/// A batch in the shape of docs/cli.md (`batch status`): its id, operation,
/// state and counts, and (from a status) the refused items with reasons.
pub fn batch_json(b: &BatchRecord, refused: Option<&BatchStatus>) -> Value {
    let mut v = json!({
        "batch": b.id.to_string(),
        "operation": b.op.name(),
        "state": b.state.as_str(),
        "items": b.items,
        "done": b.done,
        "refused": b.refused,
        "reached": b.next,
        "by": b.by,
        "created_at": rfc3339(b.created_at),
        "finished_at": b.finished_at.map(rfc3339),
    });
    if let Some(s) = refused {
        v["refused_items"] = json!(s
            .refused
            .iter()
            .map(|(pos, item, why)| json!({"position": pos, "item": item.to_string(), "reason": why}))
            .collect::<Vec<_>>());
    }
    v
}
