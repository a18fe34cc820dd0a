//! Durable batches: an operation over a fixed list of instances or
//! messages, worked through a slice at a time (`run_batch`), each item's
//! outcome recorded with the batch's cursor. The items run as the batch's
//! creator (their history names who).
//!
//! Invariant: an item is done in the transaction that records its outcome
//! and moves the cursor past it, so a batch resumed after a crash does no
//! item twice and skips none; a refused item changed nothing (each item's
//! operation refuses before its first write).

use super::*;
use crate::store::batches::{BatchItem, BatchOp, BatchRecord, BatchState, ItemOutcome};

/// Items a batch holds at most.
pub const MAX_BATCH_ITEMS: usize = 1_000_000;

impl<'a, 't> Engine<'a, 't> {
    /// Creates a batch of `op` over `items` (fixed from now on). Refused when
    /// an item is not of the kind `op` takes, when there are more than
    /// [`MAX_BATCH_ITEMS`], or for a migration whose versions are not
    /// deployed or are the same.
    pub fn create_batch(&mut self, op: &BatchOp, items: &[BatchItem]) -> R<BatchRecord> {
        let refuse = |reason: String| Err(EngineError::BatchRefused { batch: 0, reason });
        if items.len() > MAX_BATCH_ITEMS {
            return refuse(format!(
                "{} items; a batch holds at most {MAX_BATCH_ITEMS}",
                items.len()
            ));
        }
        if let Some(odd) = items
            .iter()
            .find(|i| matches!(i, BatchItem::Message(_)) != op.on_messages())
        {
            let takes = if op.on_messages() {
                "messages"
            } else {
                "instances"
            };
            return refuse(format!("a {} batch takes {takes}, not '{odd}'", op.name()));
        }
        if let BatchOp::Migrate(plan) = op {
            if plan.from == plan.to {
                return refuse(format!("version {} is the version it runs", plan.to));
            }
            self.def(&plan.process, plan.from)?;
            self.def(&plan.process, plan.to)?;
        }
        let id = self.t.next_partition_id("batch")?;
        let empty = items.is_empty();
        let rec = BatchRecord {
            id,
            op: op.clone(),
            state: if empty {
                BatchState::Done
            } else {
                BatchState::Running
            },
            items: items.len() as u64,
            next: 0,
            done: 0,
            refused: 0,
            by: self.actor.clone(),
            created_at: self.now,
            finished_at: empty.then_some(self.now),
        };
        self.t.put_new_batch(&rec, items)?;
        Ok(rec)
    }

    /// Works through up to `limit` items of running batch `id` from its
    /// cursor, recording each one's outcome; the batch is done once every
    /// item has one. A batch that is not running is answered as it is.
    pub fn run_batch(&mut self, id: u64, limit: usize) -> R<BatchRecord> {
        let mut rec = self.t.batch(id)?.ok_or(EngineError::UnknownBatch(id))?;
        // a slot move is worked off by its own steps (`engine::moves`)
        if rec.state != BatchState::Running || matches!(rec.op, BatchOp::MoveSlots { .. }) {
            return Ok(rec);
        }
        let caller = std::mem::replace(&mut self.actor, rec.by.clone());
        let result = self.run_items(&mut rec, limit);
        self.actor = caller;
        result?;
        if rec.next >= rec.items {
            rec.state = BatchState::Done;
            rec.finished_at = Some(self.now);
        }
        self.t.put_batch(&rec)?;
        Ok(rec)
    }

    fn run_items(&mut self, rec: &mut BatchRecord, limit: usize) -> R<()> {
        let end = rec.next.saturating_add(limit.max(1) as u64).min(rec.items);
        while rec.next < end {
            let pos = rec.next;
            let item = self.t.batch_item(rec.id, pos)?;
            let outcome = match &item {
                None => ItemOutcome::Refused("the item's row is missing".into()),
                Some(item) => match self.batch_item(&rec.op, item) {
                    Ok(()) => ItemOutcome::Done,
                    Err(EngineError::Store(e)) => return Err(EngineError::Store(e)),
                    Err(e) => {
                        // a refusal changed nothing: forget what it read
                        self.dirty.clear();
                        self.queue.clear();
                        ItemOutcome::Refused(e.to_string())
                    }
                },
            };
            match outcome {
                ItemOutcome::Done => rec.done += 1,
                ItemOutcome::Refused(_) => rec.refused += 1,
            }
            let item = item.unwrap_or(BatchItem::Message(String::new()));
            self.t.set_item_outcome(rec.id, pos, item, outcome)?;
            rec.next += 1;
        }
        Ok(())
    }

    /// Does `op` to one item.
    fn batch_item(&mut self, op: &BatchOp, item: &BatchItem) -> R<()> {
        match (op, item) {
            (BatchOp::Cancel, BatchItem::Instance(i)) => self.cancel_instance(*i),
            (BatchOp::Retry, BatchItem::Instance(i)) => self.retry_incidents(*i),
            (BatchOp::Migrate(plan), BatchItem::Instance(i)) => {
                self.migrate(plan, *i, false).map(drop)
            }
            (BatchOp::MoveToken { from, to }, BatchItem::Instance(i)) => {
                self.move_only_token(*i, from, to)
            }
            (BatchOp::Delete, BatchItem::Instance(i)) => self.delete_instance(*i),
            (BatchOp::Requeue, BatchItem::Message(m)) => self.requeue(m).map(drop),
            (BatchOp::Discard { by, why }, BatchItem::Message(m)) => self.discard(m, by, why),
            (
                BatchOp::Cancel
                | BatchOp::Retry
                | BatchOp::Migrate(_)
                | BatchOp::MoveToken { .. }
                | BatchOp::Delete
                | BatchOp::Requeue
                | BatchOp::Discard { .. }
                | BatchOp::MoveSlots { .. },
                BatchItem::Instance(_) | BatchItem::Message(_) | BatchItem::MessageRecord(_),
            ) => Err(EngineError::BatchRefused {
                batch: 0,
                reason: format!("a {} batch does not take '{item}'", op.name()),
            }),
        }
    }

    /// Stops running batch `id`: the items not reached keep no outcome.
    pub fn stop_batch(&mut self, id: u64) -> R<BatchRecord> {
        let mut rec = self.t.batch(id)?.ok_or(EngineError::UnknownBatch(id))?;
        if matches!(rec.op, BatchOp::MoveSlots { .. }) {
            return Err(EngineError::BatchRefused {
                batch: id,
                reason: "a slot move runs to its end once begun: its slots are fenced until the target owns them".into(),
            });
        }
        if rec.state != BatchState::Running {
            return Err(EngineError::BatchRefused {
                batch: id,
                reason: format!("it is {} already", rec.state.as_str()),
            });
        }
        rec.state = BatchState::Cancelled;
        rec.finished_at = Some(self.now);
        self.t.put_batch(&rec)?;
        Ok(rec)
    }

    /// Retries every job of running instance `inst` that is in an incident.
    fn retry_incidents(&mut self, inst: u64) -> R<()> {
        self.load_active(inst)?;
        let held: Vec<u64> = self
            .inst(inst)
            .tokens
            .iter()
            .flat_map(|t| t.wait.jobs().into_iter().chain(t.timers.iter().copied()))
            .collect();
        let mut incidents = Vec::new();
        for id in held {
            if self
                .t
                .job(id)?
                .is_some_and(|j| j.state == JobState::Incident)
            {
                incidents.push(id);
            }
        }
        self.dirty.remove(&inst);
        if incidents.is_empty() {
            return Err(EngineError::NoIncident(inst));
        }
        for job in incidents {
            self.retry_job(job)?;
        }
        Ok(())
    }

    /// Moves the one token of `inst` at `from` to before `to`; refused when
    /// there is none or more than one.
    fn move_only_token(&mut self, inst: u64, from: &str, to: &str) -> R<()> {
        self.load_active(inst)?;
        let at: Vec<u64> = self
            .inst(inst)
            .tokens
            .iter()
            .filter(|t| t.element == from)
            .map(|t| t.id)
            .collect();
        if at.len() != 1 {
            self.dirty.remove(&inst);
            return Err(EngineError::NoSingleToken {
                instance: inst,
                element: from.to_string(),
                count: at.len(),
            });
        }
        self.move_token(inst, at[0], to, false).map(drop)
    }

    /// Deletes ended instance `inst` with its history; a running one is
    /// refused.
    fn delete_instance(&mut self, inst: u64) -> R<()> {
        self.own_id("instance", inst)?;
        let rec = self
            .t
            .instance_full(inst)?
            .ok_or(EngineError::UnknownInstance(inst))?;
        if rec.ended_at.is_none() {
            return Err(EngineError::InstanceRunning(inst));
        }
        let p = self.def(&rec.process, rec.version)?;
        for (m, k) in p.correlation_pairs(&rec.variables) {
            self.t.set_passed(m, &k, inst, false)?;
        }
        self.t.remove_instance(&rec)?;
        Ok(())
    }
}
