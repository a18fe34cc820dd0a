//! A partition's slot state in its transaction, and the ids that carry a
//! slot or the partition ([`crate::slots`]).
//!
//! Invariant: ids of one kind never repeat in a cluster — a slot id
//! `n · S + slot` is unique because one partition owns a slot at a time and
//! a partition taking slots continues its counters above the giver's; a
//! cluster that adopted slots hands out ids above every one it handed out
//! as `n · P + index` before.

use super::*;
use crate::slots::{SlotMap, SlotState, partition_id, slot_id};
use std::sync::Arc;

impl<'t> Tables<'t> {
    /// Stores the partition's slot state.
    pub fn put_slot_state(&mut self, state: SlotState) -> Result<(), StoreError> {
        let bytes = crate::codec::encode(&state)?;
        self.slot_state
            .get_mut()?
            .insert(SLOT_STATE_KEY, bytes.as_slice())?;
        self.slots = std::cell::OnceCell::from(Some(Arc::new(state)));
        Ok(())
    }

    /// The id of the next record of kind `name` that belongs to `slot`
    /// (an instance, its jobs and tasks, a message): `n · S + slot` in a
    /// cluster, `n` unpartitioned.
    pub fn next_slot_id(&mut self, name: &'static str, slot: u32) -> Result<u64, StoreError> {
        let n = self.add(name, 1)?;
        Ok(match self.slot_state()? {
            Some(s) => slot_id(n, s.map.slots(), slot),
            None => n,
        })
    }

    /// The accept sequence of a new message in `slot` (its key's): known to
    /// have no record yet, so its first write needs no lookup.
    pub fn next_message_seq(&mut self, slot: u32) -> Result<u64, StoreError> {
        let seq = self.next_slot_id("message", slot)?;
        self.message_rows.insert(seq, None);
        Ok(seq)
    }

    /// The id of a new job in `slot` (its instance's; see
    /// [`Tables::next_message_seq`]).
    pub fn next_job_id(&mut self, slot: u32) -> Result<u64, StoreError> {
        let id = self.next_slot_id("job", slot)?;
        self.job_rows.insert(id, None);
        Ok(id)
    }

    /// The id of the next record of kind `name` the partition keeps for
    /// itself (a batch, a parked event): `n · 1024 + index` in a cluster.
    pub fn next_partition_id(&mut self, name: &'static str) -> Result<u64, StoreError> {
        let n = self.add(name, 1)?;
        Ok(if self.partition.is_clustered() {
            partition_id(n, self.partition.index())
        } else {
            n
        })
    }

    /// The counter `name` stands at (the last `n` handed out).
    pub fn counter_at(&mut self, name: &'static str) -> Result<u64, StoreError> {
        self.add(name, 0)
    }

    /// Raises counter `name` to at least `n` (a partition taking slots
    /// continues above the giver, so no id repeats).
    pub fn raise_counter(&mut self, name: &'static str, n: u64) -> Result<(), StoreError> {
        let at = self.add(name, 0)?;
        if n > at {
            self.add(name, n - at)?;
        }
        Ok(())
    }

    /// Whether the record `id` names (a job, message record, instance) is
    /// live here: its slot is this partition's and not moving (see
    /// [`crate::slots::is_live`]). A start timer belongs to the partition,
    /// whatever slot its id carries.
    pub(super) fn is_live(&self, id: u64) -> Result<bool, StoreError> {
        let state = self.slot_state()?;
        Ok(crate::slots::is_live(state.as_deref(), id))
    }

    /// Every instance id, in order (keys only: a move picks its items).
    pub fn instance_ids(&self) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for row in self.instances.get()?.iter()? {
            out.push(row?.0.value());
        }
        Ok(out)
    }

    /// Whether an instance with an id below `below` runs, or a message
    /// record with a sequence below it is buffered (records from before
    /// slots, which a move cannot place by their id).
    pub fn legacy_in_flight(&self, below: u64) -> Result<Option<String>, StoreError> {
        for row in self.instances.get()?.range(0..below)? {
            let (k, v) = row?;
            if decode_instance(v.value())?.ended_at.is_none() {
                return Ok(Some(format!("instance {}", k.value())));
            }
        }
        for row in self.messages.get()?.range(0..below)? {
            let (k, v) = row?;
            if decode_message(v.value())?.state == MessageState::Buffered {
                return Ok(Some(format!("buffered message record {}", k.value())));
            }
        }
        Ok(None)
    }

    /// Every message record's sequence, in order.
    pub fn message_seqs(&self) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for row in self.messages.get()?.iter()? {
            out.push(row?.0.value());
        }
        Ok(out)
    }

    /// Gives a clustered database its slot state when it has none: the map
    /// of its partitions (slot s on s mod P, every key where it was). A
    /// database from before slots keeps its counters: the n-th id after the
    /// change, `n · S + slot` (S ≥ P) or `n · 1024 + index`, lies above every
    /// `m · P + index` with m < n it handed out before.
    pub(in crate::store) fn adopt_slots(&mut self) -> Result<(), StoreError> {
        let p = self.partition;
        if !p.is_clustered() || self.slot_state()?.is_some() {
            return Ok(());
        }
        let map = SlotMap::new(p.count()).map_err(|e| CodecError::Decode(e.to_string()))?;
        let mut state = SlotState::new(p.index(), map);
        // every id handed out so far is `m · P + index` with m at most the
        // highest counter
        let mut highest = 0;
        for kind in crate::store::ID_COUNTERS {
            highest = highest.max(self.counter_at(kind)?);
        }
        if highest > 0 {
            state.legacy_below = (highest + 1).saturating_mul(u64::from(p.count()));
        }
        self.put_slot_state(state)
    }
}

impl crate::store::snapshot::Snapshot {
    /// The partition's slot state (`None` unpartitioned, or a database from
    /// before slots opened read-only).
    pub fn slot_state(&self) -> Result<Option<SlotState>, StoreError> {
        let Some(t) = self.optional(SLOT_STATE)? else {
            return Ok(None);
        };
        match redb::ReadableTable::get(&t, SLOT_STATE_KEY)? {
            Some(v) => Ok(Some(crate::codec::decode(v.value())?)),
            None => Ok(None),
        }
    }
}
