//! Slot moves through the facade: the source begins a move, then drives it
//! a slice at a time — each slice read on a snapshot and sent to the target
//! ([`MoveTarget`]), marked once the target wrote it; once every item is
//! sent, the writes made meanwhile join the items (`CatchUp`) until the
//! slots are fenced and nothing is left — hands the slots over once the
//! target has every item, and forgets them a slice at a time.
//!
//! Invariant: the source marks a slice sent only after the target answered
//! that it wrote it, and flips the map only after the target took the
//! slots; every step is one command, idempotent on both sides, so a crash
//! of either side at any point resumes from the durable state of both.

use super::Postfach;
use crate::commit::Command;
use crate::engine::MoveCommand;
use crate::error::Error;
use crate::slots::MovePhase;
use crate::store::batches::BatchRecord;
use std::future::Future;

/// Items one slice of a move carries.
pub const MOVE_SLICE: usize = 32;

/// The largest delta a move sends with its slots fenced: a larger one is
/// copied in another round while the slots take writes. At the rate a move
/// sends, this many items take well under a second.
pub const FENCE_AT: u64 = 512;

/// Where a move's source sends the steps its target applies (`Import`,
/// `Adopt`): the target's API at `url`, or a test's engine.
pub trait MoveTarget: Send + Sync {
    /// Applies `step` at the target; `Ok` once it is durable there.
    fn send(
        &self,
        url: &str,
        step: &MoveCommand,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// A partition in this process is a target itself: each step is applied to
/// it directly, whatever the move names as its address (two partitions in
/// one host, tests, benchmarks).
impl MoveTarget for Postfach {
    async fn send(&self, _url: &str, step: &MoveCommand) -> Result<(), String> {
        self.slot_move_step(step.clone())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// What became of one drive of the moves leaving a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Driven {
    /// Moves that took a step.
    pub stepped: usize,
    /// Moves still in flight afterwards.
    pub left: usize,
}

impl Postfach {
    /// Begins moving the slots this partition owns in `first ..= last` to
    /// partition `to`, reached at `to_url`: the slots are fenced and what
    /// they hold fixed as a move batch (its id is the move's). The move
    /// makes map version `version` (default: one above the map held here).
    pub async fn begin_slot_move(
        &self,
        first: u32,
        last: u32,
        to: u32,
        to_url: &str,
        version: Option<u64>,
    ) -> Result<BatchRecord, Error> {
        crate::limits::check_name("to_url", to_url)?;
        let version = match version {
            Some(v) => v,
            None => self
                .reader()?
                .slot_state()?
                .map_or(1, |s| s.map.version() + 1),
        };
        self.slot_move_step(MoveCommand::Begin {
            first,
            last,
            to,
            to_url: to_url.to_string(),
            version,
        })
        .await?
        .ok_or_else(|| {
            Error::Store(crate::StoreError::Aborted(
                "a begun move names no batch".into(),
            ))
        })
    }

    /// Applies one step of a slot move (the target's steps arrive so).
    pub async fn slot_move_step(&self, step: MoveCommand) -> Result<Option<BatchRecord>, Error> {
        Ok(match self.submit(Command::SlotMove(step)).await? {
            crate::commit::Reply::Batch(b) => Some(b),
            _ => None,
        })
    }

    /// Takes every move leaving this partition one step further: a slice
    /// sent and marked, the slots handed over, or a slice forgotten.
    pub async fn drive_moves(&self, target: &impl MoveTarget) -> Result<Driven, Error> {
        let Some(state) = self.reader()?.slot_state()? else {
            return Ok(Driven::default());
        };
        let mut driven = Driven::default();
        for m in state.moves.iter().filter(|m| m.from == state.me) {
            match m.phase {
                MovePhase::Copying { .. } | MovePhase::Exporting => {
                    self.send_move(m, target).await?;
                }
                MovePhase::Forgetting { .. } => {
                    self.slot_move_step(MoveCommand::Forget {
                        batch: m.id,
                        limit: MOVE_SLICE,
                    })
                    .await?;
                }
                MovePhase::Importing { .. } => continue,
            }
            driven.stepped += 1;
        }
        driven.left = self
            .reader()?
            .slot_state()?
            .map_or(0, |s| s.moves.iter().filter(|m| m.from == s.me).count());
        Ok(driven)
    }
}

impl Postfach {
    /// Sends the next slice of move `m`; with every item sent, takes the
    /// delta (`CatchUp`), and hands the slots over once they are fenced and
    /// nothing is left to send.
    async fn send_move(
        &self,
        m: &crate::slots::SlotMove,
        target: &impl MoveTarget,
    ) -> Result<(), Error> {
        let reader = self.reader()?;
        let Some(b) = reader.batch(m.id, 0)? else {
            return Ok(());
        };
        if b.record.next < b.record.items {
            let records = reader.moved_items(m.id, b.record.next, MOVE_SLICE)?;
            let upto = b.record.next + records.len() as u64;
            let step = MoveCommand::Import {
                slot_move: m.clone(),
                upto,
                counters: reader.id_counters()?,
                records,
            };
            drop(reader);
            target
                .send(&m.to_url, &step)
                .await
                .map_err(|e| unreachable(m, &e))?;
            self.slot_move_step(MoveCommand::Exported { batch: m.id, upto })
                .await?;
            return Ok(());
        }
        drop(reader);
        let caught = self
            .slot_move_step(MoveCommand::CatchUp {
                batch: m.id,
                fence_at: FENCE_AT,
            })
            .await?;
        let fenced = m.phase == MovePhase::Exporting;
        if !fenced || caught.is_none_or(|b| b.next < b.items) {
            return Ok(());
        }
        let step = MoveCommand::Adopt {
            slot_move: m.clone(),
        };
        target
            .send(&m.to_url, &step)
            .await
            .map_err(|e| unreachable(m, &e))?;
        self.slot_move_step(MoveCommand::Flip { batch: m.id })
            .await?;
        Ok(())
    }
}

fn unreachable(m: &crate::slots::SlotMove, e: &str) -> Error {
    Error::Store(crate::StoreError::Aborted(format!(
        "move {} of slots {}-{}: partition {} at {} did not take its step: {e}",
        m.id, m.first, m.last, m.to, m.to_url
    )))
}
