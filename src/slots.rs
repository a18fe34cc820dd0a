//! Key slots and the slot map: which partition of a cluster owns a
//! correlation key or an id, as a table that can change.
//!
//! A cluster has a fixed number S of key slots, chosen when it is created:
//! the largest multiple of its first partition count P up to [`SLOTS`]
//! (4,096 for P = 1, 2, 4, 8 …). A key's slot is 64-bit FNV-1a of its UTF-8
//! bytes ([`crate::partition::key_hash`]) modulo S. The **slot map** gives
//! every slot its partition; it is the cluster's one piece of shared
//! configuration, versioned: a move of slots to another partition makes a
//! new version. Every cluster starts with slot s on partition s mod P
//! ([`SlotMap::new`]), which places every key on FNV-1a modulo P — where a
//! cluster created before slots placed it, since (h mod S) mod P = h mod P
//! when P divides S — so routers, gateways and databases of such a cluster
//! agree with the map without a change; moves then give slots elsewhere.
//!
//! The ids a partition hands out for what belongs to a key — instances,
//! their jobs and user tasks, message records — carry their slot:
//! `n · S + slot` ([`slot_id`]), so an id routes by the map without a lookup
//! and still routes after its slot moved. What belongs to the partition
//! itself (batches, parked events) carries the partition: `n · 1024 + index`
//! ([`partition_id`]). Unpartitioned, ids stay 1, 2, 3 …
//!
//! Invariants: a map covers every slot `0 … S-1` exactly once, each with a
//! partition below [`crate::partition::MAX_PARTITIONS`]; `owner` of any slot
//! and `slot_of_*` of any key or id are in range; a map built from outside
//! ([`SlotMap::from_ranges`]) is range-checked before it is used. May not do
//! I/O.

use crate::partition::{MAX_PARTITIONS, key_hash};
use serde::{Deserialize, Serialize};

/// Key slots of a new cluster.
pub const SLOTS: u32 = 4096;

/// A slot map that cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// A number of slots out of range.
    #[error("a cluster has 1 to {SLOTS} key slots, not {0}")]
    Slots(u64),
    /// A number of partitions out of range.
    #[error("a cluster has 1 to {MAX_PARTITIONS} partitions, not {0}")]
    Partitions(u64),
    /// A range outside the slots, reversed, or overlapping another.
    #[error("slot range {first}-{last} {why} (slots are 0 to {last_slot})")]
    Range {
        /// First slot of the range.
        first: u64,
        /// Last slot of the range.
        last: u64,
        /// What is wrong with it.
        why: &'static str,
        /// The last slot there is.
        last_slot: u32,
    },
    /// Slots no range covers.
    #[error("slot {0} has no partition in the map")]
    Uncovered(u32),
    /// A range's text is not `FIRST-LAST` or `SLOT`.
    #[error("'{0}' is no slot range: give FIRST-LAST (for example 0-1023) or one slot")]
    Syntax(String),
}

/// Slots `first ..= last` on `partition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRange {
    /// First slot.
    pub first: u32,
    /// Last slot (inclusive).
    pub last: u32,
    /// The partition that owns them.
    pub partition: u32,
}

/// The slot map of a cluster at one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotMap {
    slots: u32,
    version: u64,
    /// P: the partitions the cluster started with (slot s on s mod P).
    partitions: u32,
    /// Slots given to another partition than the base names: sorted,
    /// disjoint ranges.
    moved: Vec<SlotRange>,
}

impl SlotMap {
    /// The map of a new cluster of `partitions` (or one created before
    /// slots): slot s on s mod P, with the largest multiple of P up to
    /// [`SLOTS`] slots, version 1.
    pub fn new(partitions: u32) -> Result<Self, SlotError> {
        check_partitions(u64::from(partitions))?;
        Ok(SlotMap {
            slots: SLOTS.max(partitions) / partitions * partitions,
            version: 1,
            partitions,
            moved: Vec::new(),
        })
    }

    /// A map read from outside: every slot of `slots` covered exactly once,
    /// each range's partition in range; `base` the partitions the cluster
    /// started with.
    pub fn from_ranges(
        slots: u64,
        version: u64,
        base: u32,
        ranges: &[SlotRange],
    ) -> Result<Self, SlotError> {
        check_partitions(u64::from(base))?;
        if slots == 0 || slots > u64::from(SLOTS).max(u64::from(MAX_PARTITIONS)) {
            return Err(SlotError::Slots(slots));
        }
        let slots = slots as u32;
        let mut sorted = ranges.to_vec();
        sorted.sort_by_key(|r| r.first);
        let mut next = 0u32;
        for r in &sorted {
            check_range(slots, u64::from(r.first), u64::from(r.last))?;
            check_partitions(u64::from(r.partition) + 1)?;
            if r.first != next {
                return Err(if r.first < next {
                    range_error(slots, r.first, r.last, "overlaps another")
                } else {
                    SlotError::Uncovered(next)
                });
            }
            next = r.last + 1;
        }
        if next != slots {
            return Err(SlotError::Uncovered(next));
        }
        let mut map = SlotMap {
            slots,
            version,
            partitions: base,
            moved: Vec::new(),
        };
        // what differs from the base is kept as moved
        for r in sorted {
            map.put(r.first, r.last, r.partition);
        }
        Ok(map)
    }

    /// Key slots in the cluster.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// The map's version: 1 when created, one more with each move.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The partitions the cluster started with (slot s on s mod P unless
    /// moved).
    pub fn base(&self) -> u32 {
        self.partitions
    }

    /// The partitions the map names: one more than the highest it gives a
    /// slot to, at least those it started with.
    pub fn partitions(&self) -> u32 {
        self.moved
            .iter()
            .map(|r| r.partition + 1)
            .max()
            .unwrap_or(0)
            .max(self.partitions)
    }

    /// The partitions that own slots: one more than the highest that owns
    /// one (after a shrink, fewer than [`SlotMap::partitions`]).
    pub fn owning(&self) -> u32 {
        (0..self.partitions())
            .rev()
            .find(|p| self.count_owned(*p) > 0)
            .map_or(0, |p| p + 1)
    }

    /// The slot of correlation key `key`.
    pub fn slot_of_key(&self, key: &str) -> u32 {
        (key_hash(key.as_bytes()) % u64::from(self.slots)) as u32
    }

    /// The slot an id carries (see [`slot_id`]).
    pub fn slot_of_id(&self, id: u64) -> u32 {
        (id % u64::from(self.slots)) as u32
    }

    /// The partition that owns `slot` (a slot beyond the map: taken modulo).
    pub fn owner(&self, slot: u32) -> u32 {
        let slot = slot % self.slots;
        let i = self.moved.partition_point(|r| r.last < slot);
        match self.moved.get(i) {
            Some(r) if r.first <= slot => r.partition,
            _ => self.base_owner(slot),
        }
    }

    /// The partition that owns correlation key `key`.
    pub fn partition_of_key(&self, key: &str) -> u32 {
        self.owner(self.slot_of_key(key))
    }

    /// The partition that owns what id `id` names.
    pub fn partition_of_id(&self, id: u64) -> u32 {
        self.owner(self.slot_of_id(id))
    }

    fn base_owner(&self, slot: u32) -> u32 {
        slot % self.partitions
    }

    /// The map as contiguous ranges, in slot order, neighbours of one
    /// partition merged.
    pub fn ranges(&self) -> Vec<SlotRange> {
        let mut out: Vec<SlotRange> = Vec::new();
        let mut slot = 0u32;
        while slot < self.slots {
            let (last, partition) = self.run_from(slot);
            match out.last_mut() {
                Some(prev) if prev.partition == partition && prev.last + 1 == slot => {
                    prev.last = last
                }
                _ => out.push(SlotRange {
                    first: slot,
                    last,
                    partition,
                }),
            }
            slot = last + 1;
        }
        out
    }

    /// The last slot from `slot` on with the same owner without looking
    /// further than the next boundary, and that owner.
    fn run_from(&self, slot: u32) -> (u32, u32) {
        let i = self.moved.partition_point(|r| r.last < slot);
        if let Some(r) = self.moved.get(i).filter(|r| r.first <= slot) {
            return (r.last, r.partition);
        }
        let owner = self.base_owner(slot);
        // one partition at the start: its run ends where a moved range starts
        let base_end = if self.partitions == 1 {
            self.moved.get(i).map_or(self.slots, |r| r.first) - 1
        } else {
            slot
        };
        (base_end, owner)
    }

    /// The slots `partition` owns, as ranges.
    pub fn owned_by(&self, partition: u32) -> Vec<SlotRange> {
        self.ranges()
            .into_iter()
            .filter(|r| r.partition == partition)
            .collect()
    }

    /// How many slots `partition` owns.
    pub fn count_owned(&self, partition: u32) -> u32 {
        self.owned_by(partition)
            .iter()
            .map(|r| r.last - r.first + 1)
            .sum()
    }

    /// This map with each of `slots` on `partition`, at `version`.
    pub fn assign_all(
        &self,
        slots: &[(u32, u32)],
        partition: u32,
        version: u64,
    ) -> Result<Self, SlotError> {
        let mut next = self.clone();
        for (first, last) in slots {
            check_range(self.slots, u64::from(*first), u64::from(*last))?;
            check_partitions(u64::from(partition) + 1)?;
            next.put(*first, *last, partition);
        }
        next.version = version.max(self.version);
        Ok(next)
    }

    /// This map with slots `first ..= last` on `partition`, one version on.
    pub fn assign(&self, first: u32, last: u32, partition: u32) -> Result<Self, SlotError> {
        check_range(self.slots, u64::from(first), u64::from(last))?;
        check_partitions(u64::from(partition) + 1)?;
        let mut next = self.clone();
        next.put(first, last, partition);
        next.version = self.version + 1;
        Ok(next)
    }

    /// Puts `first ..= last` on `partition`, keeping `moved` sorted,
    /// disjoint and free of what the base says anyway.
    fn put(&mut self, first: u32, last: u32, partition: u32) {
        let mut kept: Vec<SlotRange> = Vec::with_capacity(self.moved.len() + 2);
        for r in self.moved.drain(..) {
            if r.last < first || r.first > last {
                kept.push(r);
                continue;
            }
            if r.first < first {
                kept.push(SlotRange {
                    last: first - 1,
                    ..r
                });
            }
            if r.last > last {
                kept.push(SlotRange {
                    first: last + 1,
                    ..r
                });
            }
        }
        // only the slots the base places elsewhere are kept as moved
        let mut slot = first;
        while slot <= last {
            let base = self.base_owner(slot);
            let mut end = slot;
            while end < last && self.base_owner(end + 1) == base {
                end += 1;
            }
            if base != partition {
                kept.push(SlotRange {
                    first: slot,
                    last: end,
                    partition,
                });
            }
            slot = end + 1;
        }
        kept.sort_by_key(|r| r.first);
        // neighbours of one partition merged
        let mut merged: Vec<SlotRange> = Vec::with_capacity(kept.len());
        for r in kept {
            match merged.last_mut() {
                Some(m) if m.partition == r.partition && m.last + 1 == r.first => m.last = r.last,
                _ => merged.push(r),
            }
        }
        self.moved = merged;
    }

    /// The map as `GET /slots` and `cluster status --json` show it
    /// (`slot_count`, `map_version`, `base_partitions`, `slots`: `[[first,
    /// last, partition], …]`), range-checked; `None` for an unpartitioned
    /// answer (no slot count).
    pub fn from_json(v: &serde_json::Value) -> Result<Option<Self>, SlotError> {
        let Some(count) = v["slot_count"].as_u64() else {
            return Ok(None);
        };
        let n = |x: &serde_json::Value| x.as_u64().map(|n| n.min(u64::from(u32::MAX)) as u32);
        let ranges = v["slots"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                Some(SlotRange {
                    first: n(&r[0])?,
                    last: n(&r[1])?,
                    partition: n(&r[2])?,
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| SlotError::Syntax(v["slots"].to_string()))?;
        let base = n(&v["base_partitions"]).unwrap_or(1);
        Self::from_ranges(count, v["map_version"].as_u64().unwrap_or(1), base, &ranges).map(Some)
    }

    /// The map as `[[first, last, partition], …]`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.ranges()
                .iter()
                .map(|r| serde_json::json!([r.first, r.last, r.partition]))
                .collect(),
        )
    }
}

/// Parses `FIRST-LAST` or `SLOT`, checked against `slots`.
pub fn parse_range(text: &str, slots: u32) -> Result<(u32, u32), SlotError> {
    let syntax = || SlotError::Syntax(text.to_string());
    let (a, b) = match text.trim().split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (text.trim(), text.trim()),
    };
    let first: u64 = a.parse().map_err(|_| syntax())?;
    let last: u64 = b.parse().map_err(|_| syntax())?;
    check_range(slots, first, last)?;
    Ok((first as u32, last as u32))
}

/// The id `n` (counting from 1) of something in `slot`, in a cluster of
/// `slots` slots.
pub fn slot_id(n: u64, slots: u32, slot: u32) -> u64 {
    n.saturating_mul(u64::from(slots))
        .saturating_add(u64::from(slot))
}

/// The id `n` (counting from 1) of something partition `index` keeps for
/// itself: `n · 1024 + index`.
pub fn partition_id(n: u64, index: u32) -> u64 {
    n.saturating_mul(u64::from(MAX_PARTITIONS))
        .saturating_add(u64::from(index))
}

/// The partition a [`partition_id`] names.
pub fn partition_of_partition_id(id: u64) -> u32 {
    (id % u64::from(MAX_PARTITIONS)) as u32
}

fn check_partitions(p: u64) -> Result<(), SlotError> {
    if p == 0 || p > u64::from(MAX_PARTITIONS) {
        return Err(SlotError::Partitions(p));
    }
    Ok(())
}

fn check_range(slots: u32, first: u64, last: u64) -> Result<(), SlotError> {
    if last >= u64::from(slots) {
        return Err(range_error_u64(slots, first, last, "goes beyond the slots"));
    }
    if first > last {
        return Err(range_error_u64(slots, first, last, "is reversed"));
    }
    Ok(())
}

fn range_error(slots: u32, first: u32, last: u32, why: &'static str) -> SlotError {
    range_error_u64(slots, u64::from(first), u64::from(last), why)
}

fn range_error_u64(slots: u32, first: u64, last: u64, why: &'static str) -> SlotError {
    SlotError::Range {
        first,
        last,
        why,
        last_slot: slots - 1,
    }
}

#[cfg(test)]
mod tests;

/// What one partition keeps of the slot map: the map as it knows it (its
/// own slots authoritative, the others a hint of where they went) and the
/// moves of its slots in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotState {
    /// This partition's number.
    pub me: u32,
    /// The map at the newest version this partition took part in.
    pub map: SlotMap,
    /// Moves this partition is the source or the target of, not finished.
    pub moves: Vec<SlotMove>,
    /// Ids below this were handed out before the cluster had slots (as
    /// `n · P + index`): they name no slot of their key, so a move waits
    /// until no such instance runs and no such message is buffered (0:
    /// none).
    pub legacy_below: u64,
}

/// Whether a stored record (an id or sequence that carries its slot) is
/// live here: its slot is this partition's and not moving. With no move in
/// flight everything stored is.
pub fn is_live(state: Option<&SlotState>, id: u64) -> bool {
    match state {
        Some(s) if !s.moves.is_empty() => s.ownership(s.map.slot_of_id(id)) == Ownership::Mine,
        _ => true,
    }
}

/// A move of the slots `from` owns in `first ..= last` to partition `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotMove {
    /// The move's id (its batch's on the source).
    pub id: u64,
    /// First slot of the range.
    pub first: u32,
    /// Last slot of the range (inclusive).
    pub last: u32,
    /// The slots it carries: those of the range `from` owned, as ranges.
    pub slots: Vec<(u32, u32)>,
    /// The partition that owned them.
    pub from: u32,
    /// The partition that takes them.
    pub to: u32,
    /// Where the source reaches the target (its API's base URL).
    pub to_url: String,
    /// The map version the move makes.
    pub version: u64,
    /// Where the move is, as this partition sees it.
    pub phase: MovePhase,
}

/// Where a move is on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MovePhase {
    /// Source: the slots are fenced (no write accepted), their records are
    /// being sent.
    Exporting,
    /// Source: the target owns the slots; their records here are being
    /// removed, `forgotten` items so far.
    Forgetting {
        /// Items removed so far.
        forgotten: u64,
    },
    /// Target: records arrive, the items before `imported` are written;
    /// the slots are not this partition's until the source hands them over.
    Importing {
        /// Items written so far.
        imported: u64,
    },
    /// Source: the slots still take writes while their records are copied;
    /// what is written meanwhile is noted (the store's move delta) and sent
    /// again, in further rounds while it is large, then under the fence
    /// ([`MovePhase::Exporting`]).
    Copying {
        /// Rounds of the delta sent so far (0: the first copy).
        round: u32,
    },
}

impl MovePhase {
    /// The phase's name: `copying`, `fenced`, `forgetting` (the source's),
    /// `importing` (the target's).
    pub fn name(&self) -> &'static str {
        match self {
            MovePhase::Copying { .. } => "copying",
            MovePhase::Exporting => "fenced",
            MovePhase::Forgetting { .. } => "forgetting",
            MovePhase::Importing { .. } => "importing",
        }
    }
}

impl SlotMove {
    /// Whether `slot` is one the move carries.
    pub fn holds(&self, slot: u32) -> bool {
        self.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
    }
}

/// Who owns a slot, as one partition sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// This partition, and writes are taken.
    Mine,
    /// This partition, but it is moving to `to`: writes wait.
    Moving {
        /// Where it goes.
        to: u32,
    },
    /// Another partition, per the map at `version`.
    Other {
        /// The owner.
        owner: u32,
        /// The map version that says so.
        version: u64,
    },
}

impl SlotState {
    /// The state of a partition of a new cluster.
    pub fn new(me: u32, map: SlotMap) -> Self {
        SlotState {
            me,
            map,
            moves: Vec::new(),
            legacy_below: 0,
        }
    }

    /// Who owns `slot`, as this partition sees it.
    pub fn ownership(&self, slot: u32) -> Ownership {
        let owner = self.map.owner(slot);
        if owner != self.me {
            return Ownership::Other {
                owner,
                version: self.map.version(),
            };
        }
        match self
            .moves
            .iter()
            .find(|m| m.from == self.me && m.phase == MovePhase::Exporting && m.holds(slot))
        {
            Some(m) => Ownership::Moving { to: m.to },
            None => Ownership::Mine,
        }
    }

    /// A slot this partition owns and is not moving, for what has no key
    /// of its own (an instance started without one): the `n`-th of them,
    /// wrapping; `None` when it owns none.
    pub fn home_slot(&self, n: u64) -> Option<u32> {
        let owned: Vec<SlotRange> = self.map.owned_by(self.me);
        let free = |s: u32| !self.moves.iter().any(|m| m.holds(s));
        let total: u64 = owned.iter().map(|r| u64::from(r.last - r.first + 1)).sum();
        if total == 0 {
            return None;
        }
        // from the n-th owned slot on, the first that is not moving
        for k in 0..total {
            let mut i = (n.wrapping_add(k)) % total;
            for r in &owned {
                let len = u64::from(r.last - r.first + 1);
                if i < len {
                    let s = r.first + i as u32;
                    if free(s) {
                        return Some(s);
                    }
                    break;
                }
                i -= len;
            }
        }
        None
    }
}

/// One move of a growth or shrink plan: the slots of `from` in `first ..= last` go
/// to `to` (exactly the ones the plan chose: no other slot of `from` lies
/// in the range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedMove {
    /// First slot of the range.
    pub first: u32,
    /// Last slot of the range.
    pub last: u32,
    /// The partition that gives them.
    pub from: u32,
    /// The partition that takes them.
    pub to: u32,
}

/// How `map` comes to `partitions` partitions, growing or shrinking: the
/// share of partitions 0 … P'-1 is S / P' (the first S mod P' one more),
/// of every other one none. Every partition that owns more than its share
/// gives its highest slots to those that own less — new partitions, any
/// that had fewer, the remaining ones of a shrink — in order, until each has
/// its share. Only moves; none when every partition has its share already.
pub fn balance_plan(map: &SlotMap, partitions: u32) -> Result<Vec<PlannedMove>, SlotError> {
    check_partitions(u64::from(partitions))?;
    let now = map.partitions();
    let share = |p: u32| {
        if p < partitions {
            map.slots() / partitions + u32::from(p < map.slots() % partitions)
        } else {
            0
        }
    };
    let mut needs: Vec<(u32, u32)> = (0..partitions)
        .map(|p| (p, share(p).saturating_sub(map.count_owned(p))))
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut plan = Vec::new();
    for from in 0..now {
        let owned: Vec<u32> = map
            .owned_by(from)
            .iter()
            .flat_map(|r| r.first..=r.last)
            .collect();
        let surplus = (owned.len() as u32).saturating_sub(share(from)) as usize;
        let mut give = &owned[owned.len() - surplus..];
        while !give.is_empty() {
            let Some((to, need)) = needs.first_mut() else {
                break;
            };
            let n = (*need as usize).min(give.len());
            let (chunk, rest) = give.split_at(n);
            plan.push(PlannedMove {
                first: chunk[0],
                last: chunk[n - 1],
                from,
                to: *to,
            });
            give = rest;
            *need -= n as u32;
            if *need == 0 {
                needs.remove(0);
            }
        }
    }
    Ok(plan)
}
