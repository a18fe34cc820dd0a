//! Durable batches through the facade: the items are chosen on a read
//! snapshot by the filters of `instances` or `messages`, the batch is
//! created in one command, then worked through one slice per command by
//! whoever runs batches (the server's batch runner, or the command line in
//! the foreground).
//!
//! Invariant: a slice is one command of at most [`BATCH_SLICE`] items, and
//! the runner rests as long as a slice took before the next, so the
//! commands of live traffic queue behind one slice at most and a batch
//! holds the writer at most half the time; a batch resumed after a crash
//! goes on from its durable cursor.

use super::Postfach;
use crate::commit::Command;
use crate::error::Error;
use crate::ops::{InstanceFilter, MessageFilter};
use crate::store::batches::{BatchItem, BatchOp, BatchRecord, BatchState};

/// Items one slice of a batch does: one command, short enough that live
/// traffic waits for it no longer than for a few ordinary batches.
pub const BATCH_SLICE: usize = 16;

/// Which items a batch takes.
#[derive(Debug, Clone)]
pub enum Selection {
    /// The instances `instances` would list with this filter (an operation
    /// on running instances takes the running ones, `delete` the ended ones,
    /// `retry` those with an incident, `migrate` those of its version).
    Instances(InstanceFilter),
    /// The parked messages `messages --parked` would list with this filter.
    Messages(MessageFilter),
}

impl Postfach {
    /// Creates a durable batch of `op` over the items `selection` chooses
    /// now; [`Postfach::run_batches`] (the server runs it) works it off.
    /// Refused when a name it carries (element, process, mapped element,
    /// who discards) is out of range, or the selection is not of the kind
    /// `op` takes.
    pub async fn create_batch(
        &self,
        op: BatchOp,
        selection: &Selection,
    ) -> Result<BatchRecord, Error> {
        use crate::limits::check_name;
        match &op {
            BatchOp::MoveToken { from, to } => {
                check_name("element", from)?;
                check_name("element", to)?;
            }
            BatchOp::Migrate(plan) => {
                check_name("process", &plan.process)?;
                for (old, new) in &plan.map {
                    check_name("mapped element", old)?;
                    check_name("mapped element", new)?;
                }
            }
            BatchOp::Discard { by, .. } => {
                check_name("by", by)?;
            }
            BatchOp::Cancel | BatchOp::Retry | BatchOp::Requeue | BatchOp::Delete => {}
            BatchOp::MoveSlots { .. } => {
                return Err(crate::EngineError::BatchRefused {
                    batch: 0,
                    reason: "slots are moved by a slot move (`cluster move-slots`), which chooses its own items".into(),
                }
                .into());
            }
        }
        let items = self.select(&op, selection)?;
        self.submit(Command::CreateBatch { op, items })
            .await?
            .batch()
    }

    fn select(&self, op: &BatchOp, selection: &Selection) -> Result<Vec<BatchItem>, Error> {
        let reader = self.reader()?;
        match selection {
            Selection::Instances(f) => {
                let mut f = f.clone();
                // which instances it takes: running ones (active, with an
                // incident or without), or for `delete` ended ones
                let running = match op {
                    BatchOp::Migrate(plan) => {
                        f.process = Some(plan.process.clone());
                        f.version = Some(plan.from);
                        true
                    }
                    BatchOp::Retry => {
                        f.has_incident.get_or_insert(true);
                        true
                    }
                    BatchOp::Cancel | BatchOp::MoveToken { .. } | BatchOp::MoveSlots { .. } => true,
                    BatchOp::Delete | BatchOp::Requeue | BatchOp::Discard { .. } => false,
                };
                let ended = |s: &str| s == "completed" || s == "cancelled";
                let mut out = Vec::new();
                for v in reader.instances(&f)? {
                    if ended(v.state) == running {
                        continue;
                    }
                    if let Ok(id) = v.instance.parse() {
                        out.push(BatchItem::Instance(id));
                    }
                }
                Ok(out)
            }
            Selection::Messages(f) => {
                let f = MessageFilter {
                    parked: true,
                    buffered: false,
                    reason: f.reason,
                };
                Ok(reader
                    .messages(&f)?
                    .into_iter()
                    .map(|m| {
                        BatchItem::Message(if m.name.contains('/') {
                            m.message_id
                        } else {
                            format!("{}/{}", m.name, m.message_id)
                        })
                    })
                    .collect())
            }
        }
    }

    /// Does the next slice of batch `id` and answers where it is.
    pub async fn run_batch_slice(&self, id: u64) -> Result<BatchRecord, Error> {
        self.submit(Command::RunBatch {
            batch: id,
            limit: BATCH_SLICE,
        })
        .await?
        .batch()
    }

    /// Works every running batch off, a slice per command, and answers how
    /// many items it did; `progress` hears each batch after each slice.
    pub async fn run_batches(&self, mut progress: impl FnMut(&BatchRecord)) -> Result<u64, Error> {
        let mut items = 0;
        loop {
            let running: Vec<u64> = self
                .reader()?
                .batches()?
                .into_iter()
                // a slot move is driven by its own runner (`runtime::moves`)
                .filter(|b| {
                    b.state == BatchState::Running && !matches!(b.op, BatchOp::MoveSlots { .. })
                })
                .map(|b| b.id)
                .collect();
            if running.is_empty() {
                return Ok(items);
            }
            for id in running {
                let before = self.reader()?.batch(id, 0)?.map_or(0, |b| b.record.next);
                let took = std::time::Instant::now();
                let after = self.run_batch_slice(id).await?;
                items += after.next.saturating_sub(before);
                progress(&after);
                // room for live traffic: as long again as the slice took, so
                // a batch holds the writer at most half the time
                tokio::time::sleep(took.elapsed()).await;
            }
        }
    }

    /// Stops running batch `id`; the items it did not reach keep no outcome.
    pub async fn stop_batch(&self, id: u64) -> Result<BatchRecord, Error> {
        self.submit(Command::StopBatch { batch: id }).await?.batch()
    }
}
