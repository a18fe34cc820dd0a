//! A move of key slots from one partition (the source) to another (the
//! target), as steps of each side's state machine. The source fixes what
//! the slots hold as a batch (`Begin`) and copies it a slice at a time while
//! the slots still take writes, marking each slice once the target wrote it
//! (`Exported`); the store notes every record written in the slots
//! meanwhile (its move delta), and `CatchUp` appends those to the batch to
//! be sent again — in further copying rounds while the delta is large, then
//! with the slots fenced, so the fence lasts only as long as the last,
//! small delta takes. The source hands the slots over once the target owns
//! them (`Flip`) and removes what they held here a slice at a time
//! (`Forget`). The target writes each slice (`Import`; a record it has
//! already is replaced, one gone at the source removed) and takes the slots
//! when the source says so (`Adopt`).
//!
//! Invariants: one owner per slot per map version, and no write accepted on
//! a slot in a move but by its owner — while copying, only the source takes
//! writes (the target refuses them until `Adopt`, naming the source); under
//! the fence, nobody (`SlotMoving`); after `Flip`, only the target (the
//! source names it). The slots change hands only with the delta empty and
//! every item sent. Every step is idempotent: a slice repeated after a crash
//! of either side writes nothing twice (the target remembers how far it
//! imported, the source how far it exported and forgot).

use super::*;
use crate::slots::{MovePhase, SlotMove, SlotState};
use crate::store::Moved;
use crate::store::batches::{BatchItem, BatchOp, BatchRecord, BatchState};

/// The (message, key) pairs of an instance, per its model.
type Pairs = Box<dyn Fn(&str, u32, &Vars) -> Vec<(String, String)>>;
use serde::{Deserialize, Serialize};

/// A step of a slot move (in the log: variants are appended last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MoveCommand {
    /// Source: fence the slots this partition owns in `first ..= last` and
    /// fix what they hold as the items of a move batch.
    Begin {
        /// First slot of the range.
        first: u32,
        /// Last slot of the range.
        last: u32,
        /// The target partition.
        to: u32,
        /// Where the target serves its API.
        to_url: String,
        /// The map version the move makes.
        version: u64,
    },
    /// Source: the target wrote the items before `upto`.
    Exported {
        /// The move (its batch).
        batch: u64,
        /// Items written by the target so far.
        upto: u64,
    },
    /// Source: the target owns the slots; the map says so from now on.
    Flip {
        /// The move (its batch).
        batch: u64,
    },
    /// Source: remove up to `limit` more of the moved items here.
    Forget {
        /// The move (its batch).
        batch: u64,
        /// Items at most.
        limit: usize,
    },
    /// Target: write the items `upto - records.len() .. upto` of `slot_move`.
    Import {
        /// The move as the source has it.
        slot_move: SlotMove,
        /// Items written once this slice is.
        upto: u64,
        /// The source's id counters: the target's go on above them.
        counters: Vec<(String, u64)>,
        /// The slice's records.
        records: Vec<Moved>,
    },
    /// Target: the source hands the slots of `slot_move` over.
    Adopt {
        /// The move as the source has it.
        slot_move: SlotMove,
    },
    /// Source: every item sent; append what was written in the slots since
    /// (the delta) to the items, and fence the slots once the delta was at
    /// most `fence_at` items (or after [`COPY_ROUNDS`] rounds).
    CatchUp {
        /// The move (its batch).
        batch: u64,
        /// The largest delta sent under the fence.
        fence_at: u64,
    },
}

/// Rounds a move copies its slots' delta while they take writes; the next
/// is sent under the fence whatever its size.
pub const COPY_ROUNDS: u32 = 4;

fn refused(why: String) -> EngineError {
    EngineError::BatchRefused {
        batch: 0,
        reason: why,
    }
}

impl<'a, 't> Engine<'a, 't> {
    /// Applies one step of a slot move.
    pub fn slot_move(&mut self, cmd: &MoveCommand) -> R<Option<BatchRecord>> {
        match cmd {
            MoveCommand::Begin {
                first,
                last,
                to,
                to_url,
                version,
            } => self
                .begin_move(*first, *last, *to, to_url, *version)
                .map(Some),
            MoveCommand::Exported { batch, upto } => self.exported(*batch, *upto).map(Some),
            MoveCommand::Flip { batch } => self.flip_move(*batch).map(Some),
            MoveCommand::Forget { batch, limit } => self.forget_moved(*batch, *limit).map(Some),
            MoveCommand::Import {
                slot_move,
                upto,
                counters,
                records,
            } => self
                .import_moved(slot_move, *upto, counters, records)
                .map(|()| None),
            MoveCommand::Adopt { slot_move } => self.adopt_move(slot_move).map(|()| None),
            MoveCommand::CatchUp { batch, fence_at } => self.catch_up(*batch, *fence_at).map(Some),
        }
    }

    fn state(&self) -> R<std::sync::Arc<SlotState>> {
        self.t
            .slot_state()?
            .ok_or_else(|| refused("an unpartitioned engine has no slots to move".into()))
    }

    /// Fixes what the slots this partition owns in `first ..= last` hold
    /// (instances, then message records) as a move batch, to be copied
    /// while they take writes.
    fn begin_move(
        &mut self,
        first: u32,
        last: u32,
        to: u32,
        to_url: &str,
        version: u64,
    ) -> R<BatchRecord> {
        let s = self.state()?;
        if to == s.me {
            return Err(refused(format!(
                "slots {first}-{last} are on partition {to} already"
            )));
        }
        if version <= s.map.version() {
            return Err(refused(format!(
                "the move would make slot map version {version}, and this partition holds version {} (gather the map again)",
                s.map.version()
            )));
        }
        let mine: Vec<(u32, u32)> = s
            .map
            .owned_by(s.me)
            .iter()
            .filter(|r| r.last >= first && r.first <= last)
            .map(|r| (r.first.max(first), r.last.min(last)))
            .collect();
        if mine.is_empty() {
            return Err(refused(format!(
                "partition {} owns none of slots {first}-{last}",
                s.me
            )));
        }
        if let Some(m) = s
            .moves
            .iter()
            .find(|m| mine.iter().any(|(a, b)| (*a..=*b).any(|x| m.holds(x))))
        {
            return Err(refused(format!(
                "move {} of slots {}-{} is in flight",
                m.id, m.first, m.last
            )));
        }
        if s.legacy_below > 0
            && let Some(what) = self.t.legacy_in_flight(s.legacy_below)?
        {
            return Err(refused(format!(
                "{what} dates from before this cluster had slots and is still open; its id names no slot of its key, so slots move once such instances have ended and such messages are settled"
            )));
        }
        let in_range = |id: u64| {
            let slot = s.map.slot_of_id(id);
            mine.iter().any(|(a, b)| (*a..=*b).contains(&slot))
        };
        let mut items: Vec<BatchItem> = self
            .t
            .instance_ids()?
            .into_iter()
            .filter(|id| in_range(*id))
            .map(BatchItem::Instance)
            .collect();
        items.extend(
            self.t
                .message_seqs()?
                .into_iter()
                .filter(|seq| in_range(*seq))
                .map(BatchItem::MessageRecord),
        );
        let id = self.t.next_partition_id("batch")?;
        let rec = BatchRecord {
            id,
            op: BatchOp::MoveSlots { first, last, to },
            state: BatchState::Running,
            items: items.len() as u64,
            next: 0,
            done: 0,
            refused: 0,
            by: self.actor.clone(),
            created_at: self.now,
            finished_at: None,
        };
        self.t.put_new_batch(&rec, &items)?;
        let mut next = (*s).clone();
        next.moves.push(SlotMove {
            id,
            first,
            last,
            slots: mine,
            from: s.me,
            to,
            to_url: to_url.to_string(),
            version,
            phase: MovePhase::Copying { round: 0 },
        });
        self.t.put_slot_state(next)?;
        Ok(rec)
    }

    /// The move of batch `batch` on this side, and the batch.
    fn outgoing(&self, batch: u64) -> R<(SlotMove, BatchRecord)> {
        let s = self.state()?;
        let m = s
            .moves
            .iter()
            .find(|m| m.id == batch && m.from == s.me)
            .cloned()
            .ok_or_else(|| refused(format!("no move {batch} leaves this partition")))?;
        let rec = self
            .t
            .batch(batch)?
            .ok_or(EngineError::UnknownBatch(batch))?;
        Ok((m, rec))
    }

    /// The target wrote the items before `upto`: they count as done.
    fn exported(&mut self, batch: u64, upto: u64) -> R<BatchRecord> {
        let (m, mut rec) = self.outgoing(batch)?;
        let sending = matches!(m.phase, MovePhase::Exporting | MovePhase::Copying { .. });
        if !sending || upto <= rec.next {
            return Ok(rec);
        }
        let upto = upto.min(rec.items);
        while rec.next < upto {
            let item = self
                .t
                .batch_item(batch, rec.next)?
                .unwrap_or(BatchItem::MessageRecord(0));
            self.t.set_item_outcome(
                batch,
                rec.next,
                item,
                crate::store::batches::ItemOutcome::Done,
            )?;
            rec.next += 1;
            rec.done += 1;
        }
        self.t.put_batch(&rec)?;
        Ok(rec)
    }

    /// Every item sent: what was written in the slots since joins the items
    /// (the delta, taken), and the slots are fenced once it was at most
    /// `fence_at` items or the copying rounds are spent. With items unsent,
    /// or said again once fenced with nothing new, it changes nothing.
    fn catch_up(&mut self, batch: u64, fence_at: u64) -> R<BatchRecord> {
        let (m, mut rec) = self.outgoing(batch)?;
        let round = match m.phase {
            MovePhase::Copying { round } => Some(round),
            MovePhase::Exporting => None,
            MovePhase::Forgetting { .. } | MovePhase::Importing { .. } => return Ok(rec),
        };
        if rec.next < rec.items {
            return Ok(rec);
        }
        let delta = self.t.take_move_delta(batch)?;
        if !delta.is_empty() {
            self.t.append_batch_items(batch, rec.items, &delta)?;
            rec.items += delta.len() as u64;
            self.t.put_batch(&rec)?;
        }
        if let Some(round) = round {
            let phase = if delta.len() as u64 <= fence_at || round + 1 >= COPY_ROUNDS {
                MovePhase::Exporting
            } else {
                MovePhase::Copying { round: round + 1 }
            };
            let s = self.state()?;
            let mut next = (*s).clone();
            for x in next.moves.iter_mut().filter(|x| x.id == batch) {
                x.phase = phase;
            }
            self.t.put_slot_state(next)?;
        }
        Ok(rec)
    }

    /// Target: removes its copy of instance `id` (sent again, or gone at
    /// the source), with what is its own.
    fn forget_copy(&mut self, id: u64) -> R<()> {
        if self.t.instance(id)?.is_some() {
            let pairs = self.pairs_of_instance(id)?;
            self.t.forget_instance(id, &*pairs)?;
        }
        Ok(())
    }

    /// The target owns the slots: the map gives them to it at the move's
    /// version, and what they held here is forgotten from now on.
    fn flip_move(&mut self, batch: u64) -> R<BatchRecord> {
        let (m, rec) = self.outgoing(batch)?;
        if m.phase != MovePhase::Exporting {
            return Ok(rec);
        }
        if rec.next < rec.items || self.t.has_move_delta(batch)? {
            return Err(refused(format!(
                "move {batch} has sent {} of {} items and has writes to send again; the target takes the slots once it has all",
                rec.next, rec.items
            )));
        }
        let s = self.state()?;
        let mut next = (*s).clone();
        next.map = s
            .map
            .assign_all(&m.slots, m.to, m.version)
            .map_err(|e| refused(e.to_string()))?;
        for x in next.moves.iter_mut().filter(|x| x.id == batch) {
            x.phase = MovePhase::Forgetting { forgotten: 0 };
        }
        self.t.put_slot_state(next)?;
        Ok(rec)
    }

    /// Removes up to `limit` more of the moved items here; the move ends
    /// (its batch done) once every one is gone.
    fn forget_moved(&mut self, batch: u64, limit: usize) -> R<BatchRecord> {
        let (m, mut rec) = self.outgoing(batch)?;
        let MovePhase::Forgetting { forgotten } = m.phase else {
            return Ok(rec);
        };
        let end = forgotten.saturating_add(limit.max(1) as u64).min(rec.items);
        for pos in forgotten..end {
            match self.t.batch_item(batch, pos)? {
                Some(BatchItem::Instance(id)) => {
                    let pairs = self.pairs_of_instance(id)?;
                    self.t.forget_instance(id, &*pairs)?;
                }
                Some(BatchItem::MessageRecord(seq)) => {
                    self.t.forget_message(seq)?;
                }
                Some(BatchItem::Message(_)) | None => {}
            }
        }
        let s = self.state()?;
        let mut next = (*s).clone();
        if end >= rec.items {
            next.moves.retain(|x| x.id != batch);
            rec.state = BatchState::Done;
            rec.finished_at = Some(self.now);
            self.t.put_batch(&rec)?;
        } else {
            for x in next.moves.iter_mut().filter(|x| x.id == batch) {
                x.phase = MovePhase::Forgetting { forgotten: end };
            }
        }
        self.t.put_slot_state(next)?;
        Ok(rec)
    }

    /// The (message, key) pairs instance `id` correlates by, per its model.
    fn pairs_of_instance(&mut self, id: u64) -> R<Pairs> {
        let model = match self.t.instance(id)? {
            Some(i) => self.def(&i.process, i.version).ok(),
            None => None,
        };
        Ok(Box::new(move |_: &str, _: u32, vars: &Vars| match &model {
            Some(p) => p
                .correlation_pairs(vars)
                .map(|(m, k)| (m.to_string(), k))
                .collect(),
            None => Vec::new(),
        }))
    }

    /// Target: writes a slice of move `sm` (those before `upto` written,
    /// the slice ending there); a slice written already is skipped.
    fn import_moved(
        &mut self,
        sm: &SlotMove,
        upto: u64,
        counters: &[(String, u64)],
        records: &[Moved],
    ) -> R<()> {
        let s = self.state()?;
        if sm.to != s.me {
            return Err(refused(format!(
                "move {} goes to partition {}, and this is partition {}",
                sm.id, sm.to, s.me
            )));
        }
        let mut next = (*s).clone();
        let imported = match next
            .moves
            .iter()
            .find(|m| m.id == sm.id && m.from == sm.from)
        {
            Some(SlotMove {
                phase: MovePhase::Importing { imported },
                ..
            }) => *imported,
            Some(_) => 0,
            None => {
                // adopted already: a slice sent again after the move ended
                if sm.slots.iter().all(|(a, _)| s.map.owner(*a) == s.me) {
                    return Ok(());
                }
                next.moves.push(SlotMove {
                    phase: MovePhase::Importing { imported: 0 },
                    ..sm.clone()
                });
                0
            }
        };
        let start = upto.saturating_sub(records.len() as u64);
        if upto <= imported {
            return Ok(());
        }
        if start > imported {
            return Err(refused(format!(
                "move {}: items {start}-{upto} came before items {imported}-{start}",
                sm.id
            )));
        }
        // items of the slice this side has are skipped
        for rec in records.iter().skip((imported - start) as usize) {
            match rec {
                Moved::Instance(i) => {
                    let model = match self.t.decode_moved_header(i)? {
                        Some((process, version)) => self.def(&process, version).map_err(|e| {
                            refused(format!(
                                "instance {} runs {process} version {version}, which is not deployed here: {e}",
                                i.id
                            ))
                        })?,
                        None => continue,
                    };
                    self.forget_copy(i.id)?;
                    self.t.import_instance(i, Some(&model))?;
                }
                Moved::Message(seq, bytes) => self.t.import_message(*seq, bytes)?,
                Moved::InstanceGone(id) => self.forget_copy(*id)?,
                Moved::MessageGone(seq) => {
                    self.t.forget_message(*seq)?;
                }
                Moved::Gone => {}
            }
        }
        for (name, n) in counters {
            if let Some(kind) = crate::store::ID_COUNTERS
                .iter()
                .find(|k| **k == name.as_str())
            {
                self.t.raise_counter(kind, *n)?;
            }
        }
        for m in next
            .moves
            .iter_mut()
            .filter(|m| m.id == sm.id && m.from == sm.from)
        {
            m.phase = MovePhase::Importing { imported: upto };
        }
        self.t.put_slot_state(next)?;
        Ok(())
    }

    /// Target: the source hands move `sm`'s slots over; they are this
    /// partition's at the move's version from now on. Said again (the source
    /// did not hear the answer), it changes nothing.
    fn adopt_move(&mut self, sm: &SlotMove) -> R<()> {
        let s = self.state()?;
        if sm.to != s.me {
            return Err(refused(format!(
                "move {} goes to partition {}, and this is partition {}",
                sm.id, sm.to, s.me
            )));
        }
        let incoming = s.moves.iter().any(|m| m.id == sm.id && m.from == sm.from);
        let owned = sm
            .slots
            .iter()
            .all(|(a, b)| (*a..=*b).all(|x| s.map.owner(x) == s.me));
        if !incoming && (owned || s.map.version() >= sm.version) {
            return Ok(());
        }
        let mut next = (*s).clone();
        next.map = s
            .map
            .assign_all(&sm.slots, s.me, sm.version)
            .map_err(|e| refused(e.to_string()))?;
        next.moves.retain(|x| !(x.id == sm.id && x.from == sm.from));
        self.t.put_slot_state(next)?;
        Ok(())
    }
}
