//! Write access to every table of one transaction, for the engine.
//!
//! Invariant: the store owns its index rows. A record written through
//! [`Tables`] derives its index rows from the record before and after the
//! write — a message's `dedup`, `buffer`, `buffer_age`, `expiry`, `parked`
//! and `instance_messages` rows and the parked-per-reason and per-name gauges, a job's `cont_due`,
//! `topic_due`, `leases` and `incident_jobs` rows, the incident gauge and the ready/incident
//! gauges of its element and definition version, an instance's `tokens_at`,
//! `version_tokens`, `token_scopes`, `scope_sizes`, `subscriptions` and
//! `signal_subs` rows (the last two from the registrations each token holds
//! open: [`Token::open_messages`], [`Token::open_signals`]) and per-version
//! token gauges — so no engine code path can forget one. The tables themselves are private:
//! the engine sees records, questions and registrations, never a redb table.

use super::*;
use redb::{MultimapTable, ReadableMultimapTable, ReadableTable, Table, WriteTransaction};

mod audit;
mod batches;
mod compensations;
mod decisions;
mod definitions;
mod delta;
mod instances;
mod jobs;
mod lazy;
mod messages;
mod migrations;
mod moves;
mod slots;
mod tasks;
mod waits;

pub(crate) use compensations::read_compensables;
pub(crate) use decisions::read_decision;
pub(crate) use definitions::read_definition;
pub(crate) use instances::Resting;
use jobs::JobRows;
use lazy::{Lazy, LazyMultimap, LazyTable};
use messages::MessageRows;
pub(in crate::store) use messages::message_instances;
#[cfg(test)]
pub(in crate::store) use migrations::overrides_giving;
pub use moves::{ID_COUNTERS, Moved};

/// The tables of one write transaction, each opened when the batch first
/// uses it ([`Lazy`]).
pub(crate) struct Tables<'t> {
    /// The partition this database is: the ids it hands out carry it.
    partition: crate::partition::Partition,
    /// Whether parked messages leave events to publish (`meta`, see
    /// [`PARKED_EVENTS_KEY`]).
    parked_events: Option<ParkedEvents>,
    /// Sequences and counters are kept here during a batch and written to `meta`
    /// once, by [`Tables::finish`]: one `meta` write per batch instead of per command.
    pending: std::collections::BTreeMap<String, u64>,
    /// Index rows of the messages and jobs read or written in this transaction,
    /// as stored now: a write derives its row changes from them without reading
    /// and decoding the record again. Every write goes through `Tables`, so they
    /// cannot go stale; they die with the transaction.
    /// `None`: known not to exist (a sequence just handed out).
    message_rows: foldhash::HashMap<u64, Option<MessageRows>>,
    job_rows: foldhash::HashMap<u64, Option<JobRows>>,
    /// Definition version of the instances read or written in this
    /// transaction, for the per-version job gauges.
    scopes: std::cell::RefCell<foldhash::HashMap<u64, (String, u32)>>,
    /// Moves of the per-version job gauges (ready, incident) by (instance,
    /// element), applied by [`Tables::finish`]: a job may be written before
    /// the new instance it belongs to.
    job_stats: std::collections::BTreeMap<(u64, String), (i64, i64)>,
    meta: Table<'t, &'static str, u64>,
    definitions: LazyTable<'t, (&'static str, u32), &'static [u8]>,
    definition_extras: LazyTable<'t, (&'static str, u32), &'static [u8]>,
    latest: LazyTable<'t, &'static str, u32>,
    definition_sources: LazyTable<'t, (&'static str, u32), &'static [u8]>,
    definition_heads: LazyTable<'t, (&'static str, u32), &'static [u8]>,
    catalog: LazyTable<'t, (&'static str, &'static str), &'static [u8]>,
    instances: LazyTable<'t, u64, &'static [u8]>,
    history: LazyTable<'t, (u64, u64), &'static [u8]>,
    tokens: LazyTable<'t, (u64, u64), &'static [u8]>,
    token_scopes: LazyTable<'t, (u64, u64, u64), ()>,
    scope_sizes: LazyTable<'t, (u64, u64), u64>,
    body_items: LazyTable<'t, (u64, u64, u32), &'static [u8]>,
    variables: LazyTable<'t, (u64, &'static str), &'static [u8]>,
    tokens_at: LazyTable<'t, (&'static str, u64, u64, u64), ()>,
    version_tokens: LazyTable<'t, (&'static str, u32, &'static str, u64, u64, u64), ()>,
    subscriptions: LazyMultimap<'t, (&'static str, &'static str), (u64, u64)>,
    signal_subs: LazyMultimap<'t, &'static str, (u64, u64)>,
    expect: LazyMultimap<'t, (&'static str, &'static str), u64>,
    passed: LazyMultimap<'t, (&'static str, &'static str), u64>,
    messages: LazyTable<'t, u64, &'static [u8]>,
    dedup: LazyTable<'t, (&'static str, &'static str), (u64, u64)>,
    buffer: LazyTable<'t, (&'static str, &'static str, u64), ()>,
    expiry: LazyTable<'t, (u64, u64), ()>,
    buffer_age: LazyTable<'t, (u64, u64), ()>,
    parked: LazyTable<'t, u64, ()>,
    instance_messages: LazyTable<'t, (u64, u64), ()>,
    incident_jobs: LazyTable<'t, u64, ()>,
    tasks_at: LazyTable<'t, (&'static str, u64, u64), ()>,
    jobs: LazyTable<'t, u64, &'static [u8]>,
    cont_due: LazyTable<'t, (u64, u64), ()>,
    topic_due: LazyTable<'t, (&'static str, u64, u64), ()>,
    leases: LazyTable<'t, (u64, u64), ()>,
    start_timers: LazyTable<'t, (&'static str, u64), ()>,
    tasks: LazyTable<'t, u64, &'static [u8]>,
    parked_event_rows: LazyTable<'t, u64, &'static [u8]>,
    signals_seen: LazyTable<'t, &'static str, (u64, u64)>,
    signals_seen_at: LazyTable<'t, (u64, &'static str), ()>,
    signals_out: LazyTable<'t, u64, &'static [u8]>,
    compensations: LazyTable<'t, (u64, u64), &'static [u8]>,
    decisions: LazyTable<'t, (&'static str, u32), &'static [u8]>,
    decision_latest: LazyTable<'t, &'static str, u32>,
    audit: LazyTable<'t, u64, &'static [u8]>,
    batches: LazyTable<'t, u64, &'static [u8]>,
    batch_items: LazyTable<'t, (u64, u64), &'static [u8]>,
    slot_state: LazyTable<'t, &'static str, &'static [u8]>,
    move_delta: LazyTable<'t, (u64, u64, u64), ()>,
    /// The instances and message records written in this transaction (in a
    /// cluster): [`Tables::finish`] notes those of slots being moved away.
    touched: delta::Written,
    /// The slot state read in this transaction (`None` inside: unpartitioned).
    slots: std::cell::OnceCell<Option<std::sync::Arc<crate::slots::SlotState>>>,
}

/// The partition stamped in `meta`, if any (a damaged stamp is refused).
fn stored_partition(
    meta: &impl ReadableTable<&'static str, u64>,
) -> Result<Option<crate::partition::Partition>, StoreError> {
    let count = meta.get(PARTITION_COUNT_KEY)?.map(|g| g.value());
    let index = meta.get(PARTITION_INDEX_KEY)?.map(|g| g.value());
    match (count, index) {
        (None, None) => Ok(None),
        (Some(c), Some(i)) => crate::partition::Partition::member(i, c)
            .map(Some)
            .map_err(|e| CodecError::Decode(format!("the stored partition: {e}")).into()),
        _ => Err(
            CodecError::Decode("the stored partition has only one of its two numbers".into())
                .into(),
        ),
    }
}

impl<'t> Tables<'t> {
    /// The tables of `tx`: `meta` opened now, every other one when first used.
    pub fn open(tx: &'t WriteTransaction) -> Result<Self, StoreError> {
        let meta = tx.open_table(META)?;
        let partition = stored_partition(&meta)?.unwrap_or(crate::partition::Partition::SINGLE);
        let parked_events = parked_events_of(meta.get(PARKED_EVENTS_KEY)?.map(|v| v.value()));
        Ok(Self {
            partition,
            parked_events,
            pending: Default::default(),
            message_rows: Default::default(),
            job_rows: Default::default(),
            scopes: Default::default(),
            job_stats: Default::default(),
            meta,
            definitions: Lazy::new(tx, |tx| tx.open_table(DEFINITIONS)),
            definition_extras: Lazy::new(tx, |tx| tx.open_table(DEFINITION_EXTRAS)),
            latest: Lazy::new(tx, |tx| tx.open_table(LATEST)),
            definition_sources: Lazy::new(tx, |tx| tx.open_table(DEFINITION_SOURCES)),
            definition_heads: Lazy::new(tx, |tx| tx.open_table(DEFINITION_HEADS)),
            catalog: Lazy::new(tx, |tx| tx.open_table(CATALOG)),
            instances: Lazy::new(tx, |tx| tx.open_table(INSTANCES)),
            history: Lazy::new(tx, |tx| tx.open_table(HISTORY)),
            tokens: Lazy::new(tx, |tx| tx.open_table(TOKENS)),
            token_scopes: Lazy::new(tx, |tx| tx.open_table(TOKEN_SCOPES)),
            scope_sizes: Lazy::new(tx, |tx| tx.open_table(SCOPE_SIZES)),
            body_items: Lazy::new(tx, |tx| tx.open_table(BODY_ITEMS)),
            variables: Lazy::new(tx, |tx| tx.open_table(VARIABLES)),
            tokens_at: Lazy::new(tx, |tx| tx.open_table(TOKENS_AT)),
            version_tokens: Lazy::new(tx, |tx| tx.open_table(VERSION_TOKENS)),
            subscriptions: Lazy::new(tx, |tx| tx.open_multimap_table(SUBSCRIPTIONS)),
            signal_subs: Lazy::new(tx, |tx| tx.open_multimap_table(SIGNAL_SUBS)),
            expect: Lazy::new(tx, |tx| tx.open_multimap_table(EXPECT)),
            passed: Lazy::new(tx, |tx| tx.open_multimap_table(PASSED)),
            messages: Lazy::new(tx, |tx| tx.open_table(MESSAGES)),
            dedup: Lazy::new(tx, |tx| tx.open_table(DEDUP)),
            buffer: Lazy::new(tx, |tx| tx.open_table(BUFFER)),
            expiry: Lazy::new(tx, |tx| tx.open_table(EXPIRY)),
            buffer_age: Lazy::new(tx, |tx| tx.open_table(BUFFER_AGE)),
            parked: Lazy::new(tx, |tx| tx.open_table(PARKED)),
            instance_messages: Lazy::new(tx, |tx| tx.open_table(INSTANCE_MESSAGES)),
            incident_jobs: Lazy::new(tx, |tx| tx.open_table(INCIDENT_JOBS)),
            tasks_at: Lazy::new(tx, |tx| tx.open_table(TASKS_AT)),
            jobs: Lazy::new(tx, |tx| tx.open_table(JOBS)),
            cont_due: Lazy::new(tx, |tx| tx.open_table(CONT_DUE)),
            topic_due: Lazy::new(tx, |tx| tx.open_table(TOPIC_DUE)),
            leases: Lazy::new(tx, |tx| tx.open_table(LEASES)),
            start_timers: Lazy::new(tx, |tx| tx.open_table(START_TIMERS)),
            tasks: Lazy::new(tx, |tx| tx.open_table(TASKS)),
            parked_event_rows: Lazy::new(tx, |tx| tx.open_table(PARKED_EVENTS)),
            signals_seen: Lazy::new(tx, |tx| tx.open_table(SIGNALS_SEEN)),
            signals_seen_at: Lazy::new(tx, |tx| tx.open_table(SIGNALS_SEEN_AT)),
            signals_out: Lazy::new(tx, |tx| tx.open_table(SIGNALS_OUT)),
            compensations: Lazy::new(tx, |tx| tx.open_table(COMPENSATIONS)),
            decisions: Lazy::new(tx, |tx| tx.open_table(DECISIONS)),
            decision_latest: Lazy::new(tx, |tx| tx.open_table(DECISION_LATEST)),
            audit: Lazy::new(tx, |tx| tx.open_table(AUDIT)),
            batches: Lazy::new(tx, |tx| tx.open_table(BATCHES)),
            batch_items: Lazy::new(tx, |tx| tx.open_table(BATCH_ITEMS)),
            slot_state: Lazy::new(tx, |tx| tx.open_table(SLOT_STATE)),
            move_delta: Lazy::new(tx, |tx| tx.open_table(MOVE_DELTA)),
            touched: delta::Written::new(partition.is_clustered()),
            slots: std::cell::OnceCell::new(),
        })
    }

    /// Takes the next value of a named sequence (starting at 1).
    pub fn next_seq(&mut self, name: &'static str) -> Result<u64, StoreError> {
        self.add(name, 1)
    }

    /// Whether the database was just created (no format stamped yet).
    pub(super) fn is_new(&self) -> Result<bool, StoreError> {
        Ok(self.meta.get(FORMAT_KEY)?.is_none())
    }

    /// The partition the database is, checked against `given`: a new
    /// database becomes `given` (unpartitioned without one); an existing one
    /// stays what it is, and opening it as another partition is refused
    /// naming both.
    pub(super) fn stamp_partition(
        &mut self,
        path: &str,
        given: Option<crate::partition::Partition>,
        new: bool,
    ) -> Result<crate::partition::Partition, StoreError> {
        use crate::partition::Partition;
        let stored = stored_partition(&self.meta)?;
        let refuse = |stored: &str, given: Partition| StoreError::OtherPartition {
            path: path.to_string(),
            stored: stored.to_string(),
            given: given.to_string(),
        };
        let is = match (stored, given) {
            (Some(s), Some(g)) if s != g => return Err(refuse(&s.to_string(), g)),
            (Some(s), _) => s,
            (None, Some(g)) if g.is_clustered() && !new => {
                return Err(refuse("unpartitioned", g));
            }
            (None, Some(g)) => g,
            (None, None) => Partition::SINGLE,
        };
        if stored.is_none() && is.is_clustered() {
            self.meta
                .insert(PARTITION_COUNT_KEY, u64::from(is.count()))?;
            self.meta
                .insert(PARTITION_INDEX_KEY, u64::from(is.index()))?;
        }
        self.partition = is;
        Ok(is)
    }

    /// Adds to an event counter.
    pub fn bump(&mut self, counter: Counter, by: u64) -> Result<(), StoreError> {
        self.add(&format!("{COUNTER_PREFIX}{}", counter.name()), by)
            .map(|_| ())
    }

    fn add(&mut self, key: &str, by: u64) -> Result<u64, StoreError> {
        let v = match self.pending.get_mut(key) {
            Some(v) => v,
            None => {
                let stored = self.meta.get(key)?.map(|g| g.value()).unwrap_or(0);
                self.pending.entry(key.to_string()).or_insert(stored)
            }
        };
        *v += by;
        Ok(*v)
    }

    /// Moves a gauge the store keeps with its rows one up or down.
    fn gauge(&mut self, key: &str, up: bool) -> Result<(), StoreError> {
        if up {
            self.add(key, 1)?;
        } else if self.add(key, 0)? > 0
            && let Some(v) = self.pending.get_mut(key)
        {
            *v -= 1;
        }
        Ok(())
    }

    /// The partition's slot state (`None` unpartitioned), read once per
    /// transaction.
    pub fn slot_state(
        &self,
    ) -> Result<Option<std::sync::Arc<crate::slots::SlotState>>, StoreError> {
        if let Some(s) = self.slots.get() {
            return Ok(s.clone());
        }
        let read = if self.partition.is_clustered() {
            match self.slot_state.get()?.get(SLOT_STATE_KEY)? {
                Some(v) => Some(std::sync::Arc::new(crate::codec::decode::<
                    crate::slots::SlotState,
                >(v.value())?)),
                None => None,
            }
        } else {
            None
        };
        Ok(self.slots.get_or_init(|| read).clone())
    }

    /// Writes a `move_delta` row for each record written in this
    /// transaction whose slot is in a move leaving this partition and not
    /// yet handed over.
    pub(super) fn note_delta(&mut self) -> Result<(), StoreError> {
        let touched = self.touched.take();
        if touched.is_empty() {
            return Ok(());
        }
        let Some(s) = self.slot_state()? else {
            return Ok(());
        };
        let leaving: Vec<&crate::slots::SlotMove> = s
            .moves
            .iter()
            .filter(|m| {
                m.from == s.me
                    && matches!(
                        m.phase,
                        crate::slots::MovePhase::Copying { .. }
                            | crate::slots::MovePhase::Exporting
                    )
            })
            .collect();
        if leaving.is_empty() {
            return Ok(());
        }
        for item in touched {
            let slot = s.map.slot_of_id(item.id());
            for m in leaving.iter().filter(|m| m.holds(slot)) {
                let (kind, id) = item.row();
                self.move_delta.get_mut()?.insert((m.id, kind, id), ())?;
            }
        }
        Ok(())
    }

    /// Writes sequences and counters of this batch, and the move delta its
    /// writes make (`delta`); call once before commit.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        for ((inst, element), (ready, incidents)) in std::mem::take(&mut self.job_stats) {
            // a job whose instance is gone counts nowhere (verify agrees)
            let Some((process, version)) = self.scope_of(inst)? else {
                continue;
            };
            for (kind, delta) in [(STAT_READY, ready), (STAT_INCIDENTS, incidents)] {
                let key = stat_key(kind, &process, version, &element);
                for _ in 0..delta.unsigned_abs() {
                    self.gauge(&key, delta > 0)?;
                }
            }
        }
        self.note_delta()?;
        for (k, v) in std::mem::take(&mut self.pending) {
            self.meta.insert(k.as_str(), v)?;
        }
        Ok(())
    }

    /// A named cursor in `meta` (0 when never set).
    pub fn cursor(&self, name: &str) -> Result<u64, StoreError> {
        Ok(self.meta.get(name)?.map(|g| g.value()).unwrap_or(0))
    }

    /// Sets a named cursor.
    pub fn set_cursor(&mut self, name: &str, value: u64) -> Result<(), StoreError> {
        self.meta.insert(name, value)?;
        Ok(())
    }
}

pub(super) fn multimap_u64(
    table: &MultimapTable<'_, (&'static str, &'static str), u64>,
    name: &str,
    key: &str,
) -> Result<Vec<u64>, StoreError> {
    let mut out = Vec::new();
    for v in table.get((name, key))? {
        out.push(v?.value());
    }
    Ok(out)
}

/// Up to `limit` records of a u64-keyed table from `from` on, and the key to
/// continue from when more follow.
pub(super) fn scan<T: super::Record>(
    table: &impl ReadableTable<u64, &'static [u8]>,
    from: u64,
    limit: usize,
) -> Result<(Vec<T>, Option<u64>), StoreError> {
    let mut out = Vec::new();
    for row in table.range(from..)? {
        let (k, v) = row?;
        if out.len() == limit {
            return Ok((out, Some(k.value())));
        }
        out.push(T::from_bytes(v.value())?);
    }
    Ok((out, None))
}

#[cfg(test)]
mod tests;
