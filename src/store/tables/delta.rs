//! What changed in slots while they are copied away: the delta of a move
//! (`move_delta`). A move copies its slots while they keep taking writes;
//! every instance and message record written after the move began is noted
//! here, so the source sends it again before the slots change hands.
//!
//! Invariant: the store notes the delta itself — every writer of an
//! instance's own rows (header, tokens, variables, history, items,
//! compensable completions, passed pairs, its jobs and user tasks) and of a
//! message record marks what it wrote in [`Written`], and
//! [`super::Tables::finish`] writes a `move_delta` row for each one whose
//! slot is in a move not yet handed over, in the transaction of the write.
//! No engine code path can write in a slot being copied without its record
//! being sent again. This module is a leaf: it calls nothing of the tables.

/// A record written in this transaction, as a move sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Item {
    /// An instance (with what is its own).
    Instance(u64),
    /// A message record.
    Message(u64),
}

impl Item {
    pub(super) fn row(self) -> (u64, u64) {
        match self {
            Item::Instance(id) => (0, id),
            Item::Message(seq) => (1, seq),
        }
    }

    pub(super) fn id(self) -> u64 {
        self.row().1
    }
}

/// The records written in one transaction, in a cluster (unpartitioned,
/// nothing is kept: nothing moves).
pub(super) struct Written {
    on: bool,
    items: Vec<Item>,
}

impl Written {
    /// Kept when `on` (a partition of a cluster).
    pub(super) fn new(on: bool) -> Self {
        Written {
            on,
            items: Vec::new(),
        }
    }

    /// Instance `id` (or what is its own) was written.
    pub(super) fn instance_written(&mut self, id: u64) {
        if self.on {
            self.items.push(Item::Instance(id));
        }
    }

    /// Message record `seq` was written.
    pub(super) fn message_written(&mut self, seq: u64) {
        if self.on {
            self.items.push(Item::Message(seq));
        }
    }

    /// What was written since the last take, each record once, in order.
    pub(super) fn take(&mut self) -> Vec<Item> {
        let mut items = std::mem::take(&mut self.items);
        items.sort_unstable();
        items.dedup();
        items
    }
}
