//! Durable batch operations: what a batch does to each of its items, the
//! items themselves and each one's outcome (`batches`, `batch_items` rows).
//!
//! Invariant: a batch's items are fixed when it is created; an item's
//! outcome is written in the transaction that did it, together with the
//! batch's cursor, so a batch resumed after a crash never does an item twice
//! and never skips one.

use crate::clock::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A migration of a process's instances from one version to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MigrationPlan {
    /// The process id.
    pub process: String,
    /// The version the instances run now.
    pub from: u32,
    /// The version they move to.
    pub to: u32,
    /// Element ids of `from` mapped to ids of `to`; an element not named
    /// maps to the element of the same id.
    pub map: BTreeMap<String, String>,
}

/// What a batch does to each item. (Stored, and in the log: variants are
/// appended last.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchOp {
    /// Cancel each running instance.
    Cancel,
    /// Retry each instance's jobs in an incident.
    Retry,
    /// Migrate each instance as the plan says.
    Migrate(MigrationPlan),
    /// Move each instance's one token at `from` to before `to`.
    MoveToken {
        /// The element the token rests at.
        from: String,
        /// The element it moves to.
        to: String,
    },
    /// Requeue each parked message.
    Requeue,
    /// Discard each parked message, by whom and why.
    Discard {
        /// Who discards them.
        by: String,
        /// Why.
        why: String,
    },
    /// Delete each ended instance with its history.
    Delete,
    /// Move slots `first ..= last` of this partition to partition `to`:
    /// each instance and message record is sent there, then forgotten here
    /// (`crate::slots::SlotMove`; the move's id is the batch's).
    MoveSlots {
        /// First slot of the range.
        first: u32,
        /// Last slot of the range.
        last: u32,
        /// The partition that takes them.
        to: u32,
    },
}

impl BatchOp {
    /// The operation's name (`postfach batch NAME`).
    pub fn name(&self) -> &'static str {
        match self {
            BatchOp::Cancel => "cancel",
            BatchOp::Retry => "retry",
            BatchOp::Migrate(_) => "migrate",
            BatchOp::MoveToken { .. } => "move-token",
            BatchOp::Requeue => "requeue",
            BatchOp::Discard { .. } => "discard",
            BatchOp::Delete => "delete",
            BatchOp::MoveSlots { .. } => "move-slots",
        }
    }

    /// Whether its items are messages (else instances).
    pub fn on_messages(&self) -> bool {
        match self {
            BatchOp::Requeue | BatchOp::Discard { .. } => true,
            BatchOp::Cancel
            | BatchOp::Retry
            | BatchOp::Migrate(_)
            | BatchOp::MoveToken { .. }
            | BatchOp::Delete
            | BatchOp::MoveSlots { .. } => false,
        }
    }
}

/// One item of a batch: an instance or a message (by its id as callers
/// address it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchItem {
    /// An instance id.
    Instance(u64),
    /// A message id (`NAME/ID` or the sequence).
    Message(String),
    /// A message record by its sequence (a slot move's).
    MessageRecord(u64),
}

impl std::fmt::Display for BatchItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchItem::Instance(i) => write!(f, "{i}"),
            BatchItem::Message(m) => f.write_str(m),
            BatchItem::MessageRecord(seq) => write!(f, "message record {seq}"),
        }
    }
}

/// What became of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemOutcome {
    /// Done.
    Done,
    /// Refused, with the reason; nothing of it changed.
    Refused(String),
}

/// An item's row: the item and, once the batch reached it, its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchItemRow {
    /// The item.
    pub item: BatchItem,
    /// Its outcome (none: not reached yet).
    pub outcome: Option<ItemOutcome>,
}

/// Where a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchState {
    /// Items are left to do.
    Running,
    /// Every item has its outcome.
    Done,
    /// Stopped by a caller; the items not reached keep none.
    Cancelled,
}

impl BatchState {
    /// The state's name in views.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Running => "running",
            BatchState::Done => "done",
            BatchState::Cancelled => "cancelled",
        }
    }
}

/// A batch: what it does, how far it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Its id (carries the partition, like every id).
    pub id: u64,
    /// What it does to each item.
    pub op: BatchOp,
    /// Where it is.
    pub state: BatchState,
    /// Items in all.
    pub items: u64,
    /// Items reached so far (the next one's position).
    pub next: u64,
    /// Items done.
    pub done: u64,
    /// Items refused.
    pub refused: u64,
    /// Who created it (its items' history names them).
    pub by: Option<String>,
    /// When it was created.
    pub created_at: Millis,
    /// When it was done or stopped.
    pub finished_at: Option<Millis>,
}

/// A batch as the read side sees it: the record and the items refused so
/// far, with their reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatus {
    /// The record.
    pub record: BatchRecord,
    /// (position, item, reason) of each refused item, in order.
    pub refused: Vec<(u64, BatchItem, String)>,
}

impl super::snapshot::Snapshot {
    /// Every batch, newest first (a database from before batches has none).
    pub fn batches(&self) -> Result<Vec<BatchRecord>, super::StoreError> {
        let Some(t) = self.optional(super::schema::BATCHES)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in redb::ReadableTable::iter(&t)?.rev() {
            out.push(crate::codec::decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Every item row of batch `id`, in order.
    pub fn batch_items(&self, id: u64) -> Result<Vec<BatchItemRow>, super::StoreError> {
        let Some(items) = self.optional(super::schema::BATCH_ITEMS)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in redb::ReadableTable::range(&items, (id, 0)..=(id, u64::MAX))? {
            out.push(crate::codec::decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Batch `id` with its refused items (at most `limit` of them).
    pub fn batch(&self, id: u64, limit: usize) -> Result<Option<BatchStatus>, super::StoreError> {
        let Some(t) = self.optional(super::schema::BATCHES)? else {
            return Ok(None);
        };
        let Some(v) = redb::ReadableTable::get(&t, id)? else {
            return Ok(None);
        };
        let record: BatchRecord = crate::codec::decode(v.value())?;
        let mut refused = Vec::new();
        if record.refused > 0
            && let Some(items) = self.optional(super::schema::BATCH_ITEMS)?
        {
            for row in redb::ReadableTable::range(&items, (id, 0)..=(id, u64::MAX))? {
                let (k, v) = row?;
                let r: BatchItemRow = crate::codec::decode(v.value())?;
                if let Some(ItemOutcome::Refused(why)) = r.outcome {
                    refused.push((k.value().1, r.item, why));
                    if refused.len() >= limit {
                        break;
                    }
                }
            }
        }
        Ok(Some(BatchStatus { record, refused }))
    }
}
