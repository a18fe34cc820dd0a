//! The records of a slot move as they travel between partitions: an
//! instance with everything that is its own (header, tokens, variables,
//! history, multi-instance items, compensable completions, the (message,
//! key) pairs it passed, its jobs and user tasks), or a message record (with
//! its dedup entry, which follows from it).
//!
//! Invariants: what travels is the primary rows as stored; the target writes
//! them through the store's own record writers, so every index row and gauge
//! of the target follows from the records as for any write, and the source
//! removes them the same way. A record read for a move is taken whole or not
//! at all. The move's delta (`move_delta`, noted by the writers, see
//! `delta`) is taken whole, with this transaction's own writes.

use super::*;
use crate::store::batches::BatchItem;
use crate::store::snapshot::Snapshot;

/// An instance as it moves: its rows as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovedInstance {
    /// Its id.
    pub id: u64,
    header: Vec<u8>,
    tokens: Vec<Vec<u8>>,
    variables: Vec<(String, Vec<u8>)>,
    history: Vec<(u64, Vec<u8>)>,
    body_items: Vec<(u64, u32, Vec<u8>)>,
    compensations: Vec<(u64, Vec<u8>)>,
    passed: Vec<(String, String)>,
    jobs: Vec<Vec<u8>>,
    tasks: Vec<Vec<u8>>,
}

/// One item of a move, as it travels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Moved {
    /// An instance with what is its own.
    Instance(Box<MovedInstance>),
    /// A message record (sequence, record as stored).
    Message(u64, Vec<u8>),
    /// An item that was gone when it was read (removed by retention).
    Gone,
    /// Instance `id` was gone when it was read: the target removes its copy.
    InstanceGone(u64),
    /// Message record `seq` was gone when it was read: the target removes
    /// its copy.
    MessageGone(u64),
}

/// The id counters a target of a move continues above the source's, so no
/// id repeats in the slots it takes.
pub const ID_COUNTERS: [&str; 4] = ["instance", "job", "task", "message"];

/// The (message, key) pairs an instance of `process` version `version` with
/// variables `vars` correlates by (the model's answer).
pub type PairsOf<'a> = &'a dyn Fn(&str, u32, &Vars) -> Vec<(String, String)>;

/// A job's row as it travels: a lease of the source's own handlers does
/// not — they cannot complete the job at the target — so there it is ready
/// (as at an engine's restart); an external worker's lease travels, its
/// completion routed to the new owner.
fn travelling_job(bytes: &[u8]) -> Result<Vec<u8>, StoreError> {
    let mut job: JobRecord = codec::decode(bytes)?;
    if !job.lease.as_ref().is_some_and(|l| l.in_process) {
        return Ok(bytes.to_vec());
    }
    job.lease = None;
    job.state = JobState::Ready;
    Ok(codec::encode(&job)?)
}

impl Snapshot {
    /// Instance `id` with what is its own, as stored (`None`: gone). Its
    /// passed pairs are those of `pairs` that are stored.
    pub fn export_instance(
        &self,
        id: u64,
        pairs: PairsOf<'_>,
    ) -> Result<Option<MovedInstance>, StoreError> {
        let Some(header) = self.table(INSTANCES)?.get(id)?.map(|g| g.value().to_vec()) else {
            return Ok(None);
        };
        let rec = decode_instance(&header)?;
        let mut out = MovedInstance {
            id,
            header,
            tokens: Vec::new(),
            variables: Vec::new(),
            history: Vec::new(),
            body_items: Vec::new(),
            compensations: Vec::new(),
            passed: Vec::new(),
            jobs: Vec::new(),
            tasks: Vec::new(),
        };
        let mut held_jobs = Vec::new();
        for row in self.table(TOKENS)?.range((id, 0)..=(id, u64::MAX))? {
            let bytes = row?.1.value().to_vec();
            let t = decode_token(&bytes)?;
            held_jobs.extend(t.timers.iter().copied());
            held_jobs.extend(t.wait.jobs());
            if let Wait::Task { task } = t.wait
                && let Some(g) = self.table(TASKS)?.get(task)?
            {
                out.tasks.push(g.value().to_vec());
            }
            out.tokens.push(bytes);
        }
        let jobs = self.table(JOBS)?;
        for j in held_jobs {
            if let Some(g) = jobs.get(j)? {
                out.jobs.push(travelling_job(g.value())?);
            }
        }
        let mut vars = Vars::new();
        for row in self
            .table(VARIABLES)?
            .range((id, "")..(id.saturating_add(1), ""))?
        {
            let (k, v) = row?;
            let bytes = v.value().to_vec();
            if let Ok(value) = serde_json::from_slice(&bytes) {
                vars.insert(k.value().1.to_string(), value);
            }
            out.variables.push((k.value().1.to_string(), bytes));
        }
        for row in self.table(HISTORY)?.range((id, 0)..=(id, u64::MAX))? {
            let (k, v) = row?;
            out.history.push((k.value().1, v.value().to_vec()));
        }
        for row in self
            .table(BODY_ITEMS)?
            .range((id, 0, 0)..=(id, u64::MAX, u32::MAX))?
        {
            let (k, v) = row?;
            let (_, body, index) = k.value();
            out.body_items.push((body, index, v.value().to_vec()));
        }
        for row in self.table(COMPENSATIONS)?.range((id, 0)..=(id, u64::MAX))? {
            let (k, v) = row?;
            out.compensations.push((k.value().1, v.value().to_vec()));
        }
        let passed = self.tx.open_multimap_table(PASSED)?;
        for (m, k) in pairs(&rec.process, rec.version, &vars) {
            let holds = passed
                .get((m.as_str(), k.as_str()))?
                .any(|v| v.is_ok_and(|v| v.value() == id));
            if holds {
                out.passed.push((m, k));
            }
        }
        Ok(Some(out))
    }

    /// Items `from ..` (at most `limit`) of move batch `batch`, read for
    /// sending: each instance with what is its own, each message record.
    pub fn export_items(
        &self,
        batch: u64,
        from: u64,
        limit: usize,
        pairs: PairsOf<'_>,
    ) -> Result<Vec<Moved>, StoreError> {
        use crate::store::batches::BatchItemRow;
        let mut out = Vec::new();
        let Some(items) = self.optional(BATCH_ITEMS)? else {
            return Ok(out);
        };
        for row in items.range((batch, from)..=(batch, u64::MAX))?.take(limit) {
            let row: BatchItemRow = codec::decode(row?.1.value())?;
            out.push(match row.item {
                BatchItem::Instance(id) => match self.export_instance(id, pairs)? {
                    Some(i) => Moved::Instance(Box::new(i)),
                    None => Moved::InstanceGone(id),
                },
                BatchItem::MessageRecord(seq) => match self.export_message(seq)? {
                    Some(bytes) => Moved::Message(seq, bytes),
                    None => Moved::MessageGone(seq),
                },
                BatchItem::Message(_) => Moved::Gone,
            });
        }
        Ok(out)
    }

    /// Where the id counters of [`ID_COUNTERS`] stand.
    pub fn id_counters(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let meta = self.table(META)?;
        let mut out = Vec::new();
        for k in ID_COUNTERS {
            out.push((k.to_string(), meta.get(k)?.map_or(0, |g| g.value())));
        }
        Ok(out)
    }

    /// Message record `seq` as stored (`None`: gone).
    pub fn export_message(&self, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.table(MESSAGES)?.get(seq)?.map(|g| g.value().to_vec()))
    }
}

impl Tables<'_> {
    /// Writes a moved instance with what is its own through the record
    /// writers (its index rows and gauges follow); `model` is its
    /// definition version.
    pub fn import_instance(
        &mut self,
        m: &MovedInstance,
        model: Option<&Process>,
    ) -> Result<(), StoreError> {
        let mut rec = decode_instance(&m.header)?;
        let mut tokens = Vec::with_capacity(m.tokens.len());
        for t in &m.tokens {
            tokens.push(decode_token(t)?);
        }
        let mut vars = Vars::new();
        for (name, bytes) in &m.variables {
            let v = serde_json::from_slice(bytes).map_err(|e| {
                CodecError::Decode(format!("variable '{name}' of instance {}: {e}", m.id))
            })?;
            vars.insert(name.clone(), v);
        }
        rec.tokens = Tokens::complete(tokens);
        rec.variables = Variables::complete(vars);
        rec.new_history.clear();
        self.put_instance(&mut rec, &Resting::default(), model)?;
        for (seq, bytes) in &m.history {
            self.history
                .get_mut()?
                .insert((m.id, *seq), bytes.as_slice())?;
        }
        for (body, index, bytes) in &m.body_items {
            self.body_items
                .get_mut()?
                .insert((m.id, *body, *index), bytes.as_slice())?;
        }
        for (seq, bytes) in &m.compensations {
            self.compensations
                .get_mut()?
                .insert((m.id, *seq), bytes.as_slice())?;
        }
        for (name, key) in &m.passed {
            self.set_passed(name, key, m.id, true)?;
        }
        for bytes in &m.jobs {
            let job: JobRecord = codec::decode(bytes)?;
            self.job_rows.insert(job.id, None);
            self.put_job(&job)?;
        }
        for bytes in &m.tasks {
            let task: TaskRecord = codec::decode(bytes)?;
            self.put_task(&task)?;
        }
        Ok(())
    }

    /// The process and version of a moved instance (`None`: its header
    /// cannot be read, which [`Tables::import_instance`] says).
    pub fn decode_moved_header(
        &self,
        m: &MovedInstance,
    ) -> Result<Option<(String, u32)>, StoreError> {
        let rec = decode_instance(&m.header)?;
        Ok(Some((rec.process, rec.version)))
    }

    /// Writes a moved message record (its dedup, buffer and gauge rows
    /// follow).
    pub fn import_message(&mut self, seq: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let rec = decode_message(bytes)?;
        if rec.seq != seq {
            return Err(CodecError::Decode(format!(
                "a moved message record says sequence {}, sent as {seq}",
                rec.seq
            ))
            .into());
        }
        if self.messages.get()?.get(seq)?.is_none() {
            self.message_rows.insert(seq, None);
        }
        self.put_message(&rec)
    }

    /// Removes instance `id` with everything that is its own (its jobs and
    /// tasks, items, compensable completions, the passed pairs of `pairs`),
    /// as the source of a move does once the target took it. Returns
    /// whether it was there.
    pub fn forget_instance(&mut self, id: u64, pairs: PairsOf<'_>) -> Result<bool, StoreError> {
        let Some(rec) = self.instance_full(id)? else {
            return Ok(false);
        };
        for t in rec.tokens.iter() {
            for j in t.timers.iter().copied().chain(t.wait.jobs()) {
                if let Some(job) = self.job(j)? {
                    self.remove_job(&job)?;
                }
            }
            if let Wait::Task { task } = t.wait {
                self.remove_task(task)?;
            }
        }
        self.body_items
            .get_mut()?
            .retain_in((id, 0, 0)..=(id, u64::MAX, u32::MAX), |_, _| false)?;
        self.clear_compensables(id)?;
        for (m, k) in pairs(&rec.process, rec.version, &rec.variables) {
            self.set_passed(&m, &k, id, false)?;
        }
        self.remove_instance(&rec)?;
        Ok(true)
    }

    /// Removes message record `seq` with its rows, as the source of a move
    /// does. Returns whether it was there.
    pub fn forget_message(&mut self, seq: u64) -> Result<bool, StoreError> {
        match self.message(seq)? {
            Some(rec) => {
                self.remove_message(&rec)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Tables<'_> {
    /// Takes the delta of move `batch` noted so far (this transaction's
    /// writes included), as batch items, leaving none.
    pub fn take_move_delta(&mut self, batch: u64) -> Result<Vec<BatchItem>, StoreError> {
        self.note_delta()?;
        let mut out = Vec::new();
        self.move_delta.get_mut()?.retain_in(
            (batch, 0, 0)..=(batch, u64::MAX, u64::MAX),
            |(_, kind, id), ()| {
                out.push(if kind == 0 {
                    BatchItem::Instance(id)
                } else {
                    BatchItem::MessageRecord(id)
                });
                false
            },
        )?;
        Ok(out)
    }

    /// Whether move `batch` has a delta not yet taken.
    pub fn has_move_delta(&mut self, batch: u64) -> Result<bool, StoreError> {
        self.note_delta()?;
        Ok(self
            .move_delta
            .get()?
            .range((batch, 0, 0)..=(batch, u64::MAX, u64::MAX))?
            .next()
            .is_some())
    }
}
