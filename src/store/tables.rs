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
use std::collections::BTreeSet;

/// All tables of one write transaction, opened once per batch.
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
    message_rows: std::collections::HashMap<u64, Option<MessageRows>>,
    job_rows: std::collections::HashMap<u64, Option<JobRows>>,
    /// Definition version of the instances read or written in this
    /// transaction, for the per-version job gauges.
    scopes: std::cell::RefCell<std::collections::HashMap<u64, (String, u32)>>,
    /// Moves of the per-version job gauges (ready, incident) by (instance,
    /// element), applied by [`Tables::finish`]: a job may be written before
    /// the new instance it belongs to.
    job_stats: std::collections::BTreeMap<(u64, String), (i64, i64)>,
    meta: Table<'t, &'static str, u64>,
    definitions: Table<'t, (&'static str, u32), &'static [u8]>,
    definition_extras: Table<'t, (&'static str, u32), &'static [u8]>,
    latest: Table<'t, &'static str, u32>,
    definition_sources: Table<'t, (&'static str, u32), &'static [u8]>,
    catalog: Table<'t, (&'static str, &'static str), &'static [u8]>,
    instances: Table<'t, u64, &'static [u8]>,
    history: Table<'t, (u64, u64), &'static [u8]>,
    tokens: Table<'t, (u64, u64), &'static [u8]>,
    token_scopes: Table<'t, (u64, u64, u64), ()>,
    scope_sizes: Table<'t, (u64, u64), u64>,
    body_items: Table<'t, (u64, u64, u32), &'static [u8]>,
    variables: Table<'t, (u64, &'static str), &'static [u8]>,
    tokens_at: Table<'t, (&'static str, u64, u64, u64), ()>,
    version_tokens: Table<'t, (&'static str, u32, &'static str, u64, u64, u64), ()>,
    subscriptions: MultimapTable<'t, (&'static str, &'static str), (u64, u64)>,
    signal_subs: MultimapTable<'t, &'static str, (u64, u64)>,
    expect: MultimapTable<'t, (&'static str, &'static str), u64>,
    passed: MultimapTable<'t, (&'static str, &'static str), u64>,
    messages: Table<'t, u64, &'static [u8]>,
    dedup: Table<'t, (&'static str, &'static str), (u64, u64)>,
    buffer: Table<'t, (&'static str, &'static str, u64), ()>,
    expiry: Table<'t, (u64, u64), ()>,
    buffer_age: Table<'t, (u64, u64), ()>,
    parked: Table<'t, u64, ()>,
    instance_messages: Table<'t, (u64, u64), ()>,
    incident_jobs: Table<'t, u64, ()>,
    tasks_at: Table<'t, (&'static str, u64, u64), ()>,
    jobs: Table<'t, u64, &'static [u8]>,
    cont_due: Table<'t, (u64, u64), ()>,
    topic_due: Table<'t, (&'static str, u64, u64), ()>,
    leases: Table<'t, (u64, u64), ()>,
    start_timers: Table<'t, (&'static str, u64), ()>,
    tasks: Table<'t, u64, &'static [u8]>,
    parked_event_rows: Table<'t, u64, &'static [u8]>,
}

/// What an instance header had indexed: the definition version its tokens
/// count under and the (message, key) pairs it will still catch (`expect`).
/// Taken when an instance is loaded and handed back when it is written, so
/// the store changes exactly the rows that moved. (Each token's own rows —
/// `tokens_at`, `version_tokens`, `token_scopes` and the gauges — follow from
/// comparing the token with its stored row, see [`Tokens`].)
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Resting {
    /// The definition version the tokens count under.
    scope: (String, u32),
    expects: BTreeSet<(String, String)>,
}

impl Resting {
    /// The indexed state of `rec`'s header.
    pub fn of(rec: &InstanceRecord) -> Self {
        Resting {
            scope: (rec.process.clone(), rec.version),
            expects: rec.expects.iter().cloned().collect(),
        }
    }
}

/// The partition stamped in `meta`, if any (a damaged stamp is refused).
fn stored_partition(
    meta: &impl ReadableTable<&'static str, u64>,
) -> Result<Option<crate::partition::Partition>, StoreError> {
    let count = meta.get(PARTITION_COUNT_KEY)?.map(|g| g.value());
    let index = meta.get(PARTITION_INDEX_KEY)?.map(|g| g.value());
    match (count, index) {
        (None, None) => Ok(None),
        (Some(c), Some(i)) => crate::partition::Partition::new(i, c)
            .map(Some)
            .map_err(|e| CodecError::Decode(format!("the stored partition: {e}")).into()),
        _ => Err(
            CodecError::Decode("the stored partition has only one of its two numbers".into())
                .into(),
        ),
    }
}

/// Where a token rests as `tokens_at` says it: (element, since, token,
/// stopped by an engine error).
fn resting_row(t: &Token) -> (&str, Millis, u64, bool) {
    (
        t.element.as_str(),
        t.since,
        t.id,
        matches!(t.wait, Wait::Incident { .. }),
    )
}

/// The index rows a message record owns besides `dedup` (which lives as long
/// as the record).
#[derive(Clone, PartialEq)]
struct MessageRows {
    /// When a buffered message was accepted.
    buffered: Option<Millis>,
    expiry: Option<Millis>,
    /// The reason a parked message is parked for.
    parked: Option<&'static str>,
    /// The instances whose detail lists it: the one it was correlated into,
    /// or the candidates it is parked with.
    instances: Vec<u64>,
}

impl MessageRows {
    fn of(m: &MessageRecord) -> Self {
        let buffered = m.state == MessageState::Buffered;
        MessageRows {
            buffered: buffered.then_some(m.accepted_at),
            expiry: m.expires_at.filter(|_| buffered),
            parked: (m.state == MessageState::Parked).then(|| parked_reason(m)),
            instances: message_instances(m),
        }
    }
}

/// The instances whose detail lists message `m` (see [`INSTANCE_MESSAGES`]).
pub(super) fn message_instances(m: &MessageRecord) -> Vec<u64> {
    match m.state {
        MessageState::Correlated => m.instance.into_iter().collect(),
        MessageState::Parked => m.candidates.clone(),
        MessageState::Buffered | MessageState::Discarded => Vec::new(),
    }
}

/// The gauge name a parked message counts under.
fn parked_reason(m: &MessageRecord) -> &'static str {
    m.reason.map_or("unknown", Reason::as_str)
}

/// The index rows a job record owns: its due row, its lease row, for the
/// schedule of a timer start event its process row, whether it counts as an
/// incident, and whether it is ready (both per element and definition version
/// for an instance's job).
#[derive(Clone, PartialEq)]
struct JobRows(DueRow, Option<Millis>, Option<String>, bool, bool);

impl JobRows {
    const NONE: JobRows = JobRows(DueRow::None, None, None, false, false);
}

impl JobRows {
    fn of(j: &JobRecord) -> Self {
        let schedule = match &j.kind {
            JobKind::StartTimer { process, .. } => Some(process.clone()),
            JobKind::Continue
            | JobKind::ContinueAfter
            | JobKind::Task { .. }
            | JobKind::Timer { .. } => None,
        };
        JobRows(
            due_row(j),
            lease_row(j),
            schedule,
            j.state == JobState::Incident,
            j.state == JobState::Ready,
        )
    }
}

/// A job's due row.
#[derive(Clone, PartialEq)]
enum DueRow {
    None,
    Continuation(Millis),
    Topic(String, Millis),
}

fn due_row(j: &JobRecord) -> DueRow {
    if j.state != JobState::Ready {
        return DueRow::None;
    }
    match &j.kind {
        JobKind::Continue
        | JobKind::ContinueAfter
        | JobKind::Timer { .. }
        | JobKind::StartTimer { .. } => DueRow::Continuation(j.due_at),
        JobKind::Task { topic } => DueRow::Topic(topic.clone(), j.due_at),
    }
}

fn lease_row(j: &JobRecord) -> Option<Millis> {
    j.lease.as_ref().map(|l| l.until)
}

impl<'t> Tables<'t> {
    /// Opens every table of `tx`.
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
            definitions: tx.open_table(DEFINITIONS)?,
            definition_extras: tx.open_table(DEFINITION_EXTRAS)?,
            latest: tx.open_table(LATEST)?,
            definition_sources: tx.open_table(DEFINITION_SOURCES)?,
            catalog: tx.open_table(CATALOG)?,
            instances: tx.open_table(INSTANCES)?,
            history: tx.open_table(HISTORY)?,
            tokens: tx.open_table(TOKENS)?,
            token_scopes: tx.open_table(TOKEN_SCOPES)?,
            scope_sizes: tx.open_table(SCOPE_SIZES)?,
            body_items: tx.open_table(BODY_ITEMS)?,
            variables: tx.open_table(VARIABLES)?,
            tokens_at: tx.open_table(TOKENS_AT)?,
            version_tokens: tx.open_table(VERSION_TOKENS)?,
            subscriptions: tx.open_multimap_table(SUBSCRIPTIONS)?,
            signal_subs: tx.open_multimap_table(SIGNAL_SUBS)?,
            expect: tx.open_multimap_table(EXPECT)?,
            passed: tx.open_multimap_table(PASSED)?,
            messages: tx.open_table(MESSAGES)?,
            dedup: tx.open_table(DEDUP)?,
            buffer: tx.open_table(BUFFER)?,
            expiry: tx.open_table(EXPIRY)?,
            buffer_age: tx.open_table(BUFFER_AGE)?,
            parked: tx.open_table(PARKED)?,
            instance_messages: tx.open_table(INSTANCE_MESSAGES)?,
            incident_jobs: tx.open_table(INCIDENT_JOBS)?,
            tasks_at: tx.open_table(TASKS_AT)?,
            jobs: tx.open_table(JOBS)?,
            cont_due: tx.open_table(CONT_DUE)?,
            topic_due: tx.open_table(TOPIC_DUE)?,
            leases: tx.open_table(LEASES)?,
            start_timers: tx.open_table(START_TIMERS)?,
            tasks: tx.open_table(TASKS)?,
            parked_event_rows: tx.open_table(PARKED_EVENTS)?,
        })
    }

    // ---------- sequences, counters, cursors ----------

    /// Takes the next value of a named sequence (starting at 1).
    pub fn next_seq(&mut self, name: &'static str) -> Result<u64, StoreError> {
        self.add(name, 1)
    }

    /// The accept sequence of a new message: known to have no record yet, so
    /// its first write needs no lookup.
    pub fn next_message_seq(&mut self) -> Result<u64, StoreError> {
        let seq = self.next_id("message")?;
        self.message_rows.insert(seq, None);
        Ok(seq)
    }

    /// The id of a new job (see [`Tables::next_message_seq`]).
    pub fn next_job_id(&mut self) -> Result<u64, StoreError> {
        let id = self.next_id("job")?;
        self.job_rows.insert(id, None);
        Ok(id)
    }

    /// The id of a new record of kind `name` (an instance, a user task; jobs
    /// and messages have their own): `n · count + index` for the n-th, so
    /// the id names the partition that owns it
    /// ([`crate::partition::Partition::id`]).
    pub fn next_id(&mut self, name: &'static str) -> Result<u64, StoreError> {
        let n = self.add(name, 1)?;
        Ok(self.partition.id(n))
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

    /// Writes sequences and counters of this batch; call once before commit.
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

    /// Brings the derived rows and gauges of a database written before
    /// [`INDEX_VERSION`] in line with its records, once: `buffer_age` from the
    /// buffered messages, the parked gauges from the parked ones, the incident
    /// gauge from the jobs. A new database only gets the stamp.
    pub(super) fn upgrade_indexes(&mut self) -> Result<(), StoreError> {
        let version = self
            .meta
            .get(INDEX_VERSION_KEY)?
            .map(|g| g.value())
            .unwrap_or(0);
        if version >= INDEX_VERSION {
            return Ok(());
        }
        if version < 2 {
            self.upgrade_to_2()?;
        }
        if version < 3 {
            self.upgrade_to_3()?;
        }
        self.upgrade_to_4()?;
        self.meta.insert(INDEX_VERSION_KEY, INDEX_VERSION)?;
        Ok(())
    }

    /// Index generation 2: `buffer_age`, the parked and incident gauges.
    fn upgrade_to_2(&mut self) -> Result<(), StoreError> {
        let mut buffered = Vec::new();
        for row in self.buffer.iter()? {
            buffered.push(row?.0.value().2);
        }
        for seq in buffered {
            if let Some(m) = self.message(seq)? {
                self.buffer_age.insert((m.accepted_at, seq), ())?;
            }
        }
        let mut parked = Vec::new();
        for row in self.parked.iter()? {
            parked.push(row?.0.value());
        }
        let mut by_reason: std::collections::BTreeMap<&'static str, u64> = Default::default();
        for seq in parked {
            if let Some(m) = self.message(seq)? {
                *by_reason.entry(parked_reason(&m)).or_default() += 1;
            }
        }
        for (reason, n) in by_reason {
            self.meta
                .insert(format!("{PARKED_GAUGE}{reason}").as_str(), n)?;
        }
        let mut incidents = 0u64;
        for row in self.jobs.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            incidents += u64::from(j.state == JobState::Incident);
        }
        self.meta.insert(INCIDENTS_GAUGE, incidents)?;
        Ok(())
    }

    /// Index generation 3: `version_tokens` and the per-version element
    /// gauges from the instances and jobs, the per-name message gauges from
    /// the buffered and parked messages.
    fn upgrade_to_3(&mut self) -> Result<(), StoreError> {
        let mut gauges: std::collections::BTreeMap<String, u64> = Default::default();
        let mut scopes: std::collections::HashMap<u64, (String, u32)> = Default::default();
        let mut rows = Vec::new();
        for row in self.instances.iter()? {
            let mut i = super::decode_instance(row?.1.value())?;
            self.fill_all(i.id, &mut i.tokens)?;
            for t in i.tokens.iter() {
                rows.push((
                    i.process.clone(),
                    i.version,
                    t.element.clone(),
                    t.since,
                    i.id,
                    t.id,
                ));
                *gauges
                    .entry(stat_key(STAT_TOKENS, &i.process, i.version, &t.element))
                    .or_default() += 1;
                if matches!(t.wait, Wait::Incident { .. }) {
                    *gauges
                        .entry(stat_key(STAT_INCIDENTS, &i.process, i.version, &t.element))
                        .or_default() += 1;
                }
            }
            scopes.insert(i.id, (i.process, i.version));
        }
        for (p, v, e, since, i, t) in &rows {
            self.version_tokens
                .insert((p.as_str(), *v, e.as_str(), *since, *i, *t), ())?;
        }
        for row in self.jobs.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            if matches!(j.kind, JobKind::StartTimer { .. }) {
                continue;
            }
            let Some((p, v)) = scopes.get(&j.instance) else {
                continue;
            };
            let kind = match j.state {
                JobState::Ready => STAT_READY,
                JobState::Incident => STAT_INCIDENTS,
                JobState::Locked => continue,
            };
            *gauges.entry(stat_key(kind, p, *v, &j.element)).or_default() += 1;
        }
        for row in self.messages.iter()? {
            let m = super::decode_message(row?.1.value())?;
            match m.state {
                MessageState::Buffered => {
                    *gauges
                        .entry(format!("{BUFFERED_BY_NAME}{}", m.name))
                        .or_default() += 1;
                }
                MessageState::Parked => {
                    let key = format!("{PARKED_BY_NAME}{}:{}", parked_reason(&m), m.name);
                    *gauges.entry(key).or_default() += 1;
                }
                MessageState::Correlated | MessageState::Discarded => {}
            }
        }
        for (k, v) in gauges {
            self.meta.insert(k.as_str(), v)?;
        }
        Ok(())
    }

    /// Index generation 4: `instance_messages` from the correlated and
    /// parked messages, `incident_jobs` from the jobs, `tasks_at` and the
    /// open-task gauges from the open user tasks.
    fn upgrade_to_4(&mut self) -> Result<(), StoreError> {
        let mut tasks = Vec::new();
        for row in self.tasks.iter()? {
            let t: TaskRecord = codec::decode(row?.1.value())?;
            tasks.push((t.element, t.created_at, t.id));
        }
        let mut open: std::collections::BTreeMap<String, u64> = Default::default();
        for (element, at, id) in &tasks {
            self.tasks_at.insert((element.as_str(), *at, *id), ())?;
            *open.entry(format!("{OPEN_TASKS}{element}")).or_default() += 1;
        }
        for (k, n) in open {
            self.meta.insert(k.as_str(), n)?;
        }
        let mut incidents = Vec::new();
        for row in self.jobs.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            if j.state == JobState::Incident {
                incidents.push(j.id);
            }
        }
        for id in incidents {
            self.incident_jobs.insert(id, ())?;
        }
        let mut rows = Vec::new();
        for row in self.messages.iter()? {
            let m = super::decode_message(row?.1.value())?;
            for inst in message_instances(&m) {
                rows.push((inst, m.seq));
            }
        }
        for r in rows {
            self.instance_messages.insert(r, ())?;
        }
        Ok(())
    }

    /// Stamps the format of a new database, and brings an older one to it:
    /// format 1 kept each instance's history inside its record; format 2
    /// keeps it in `history` rows, format 3 the tokens too
    /// ([`Tables::migrate_instances_to_rows`]); format 4 keeps every boundary
    /// subscription with its token ([`Tables::keep_registrations_with_tokens`]).
    pub(super) fn stamp_format(&mut self, path: &str) -> Result<(), StoreError> {
        let found = self.meta.get(FORMAT_KEY)?.map(|g| g.value());
        match found {
            None => {}
            Some(v) if v > DB_FORMAT => {
                return Err(StoreError::NewerFormat {
                    path: path.to_string(),
                    found: v,
                    reads: DB_FORMAT,
                });
            }
            Some(v) if v < DB_FORMAT => {
                if v < 3 {
                    let n = self.migrate_instances_to_rows()?;
                    if n > 0 {
                        tracing::info!(
                            instances = n,
                            from = v,
                            "moved instance histories and tokens into rows (database format {v} → {DB_FORMAT})"
                        );
                    }
                }
                let (tokens, dropped) = self.keep_registrations_with_tokens()?;
                if tokens > 0 || dropped > 0 {
                    tracing::info!(
                        tokens,
                        dropped,
                        from = v,
                        "kept the boundary subscriptions with their tokens (database format {v} → {DB_FORMAT}); dropped subscriptions of tokens that no longer exist"
                    );
                }
            }
            Some(_) => return Ok(()),
        }
        self.meta.insert(FORMAT_KEY, DB_FORMAT)?;
        Ok(())
    }

    // ---------- definitions and the message catalog ----------

    /// A stored process version.
    pub fn definition(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<DefinitionRecord>, StoreError> {
        let Some(g) = self.definitions.get((process, version))? else {
            return Ok(None);
        };
        let rec: DefinitionRecord = codec::decode(g.value())?;
        let extras = self.definition_extras.get((process, version))?;
        Ok(Some(super::with_extras(
            rec,
            extras.as_ref().map(|g| g.value()),
        )?))
    }

    /// Every deployed process with its latest version, by process id.
    pub fn latest_versions(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let mut out = Vec::new();
        for row in self.latest.iter()? {
            let (k, v) = row?;
            out.push((k.value().to_string(), v.value()));
        }
        Ok(out)
    }

    /// The latest version of a process (0 when it was never deployed).
    pub fn latest_version(&self, process: &str) -> Result<u32, StoreError> {
        Ok(self.latest.get(process)?.map(|g| g.value()).unwrap_or(0))
    }

    /// Stores a process version and makes it the latest.
    pub fn put_definition(&mut self, rec: &DefinitionRecord) -> Result<(), StoreError> {
        let id = rec.process.id.as_str();
        self.definitions
            .insert((id, rec.version), codec::encode(rec)?.as_slice())?;
        if let Some(extras) = super::extras_of(rec)? {
            self.definition_extras
                .insert((id, rec.version), extras.as_slice())?;
        }
        self.latest.insert(id, rec.version)?;
        Ok(())
    }

    /// Keeps the XML a process version was deployed from.
    pub fn put_definition_source(
        &mut self,
        process: &str,
        version: u32,
        xml: &str,
    ) -> Result<(), StoreError> {
        self.definition_sources
            .insert((process, version), xml.as_bytes())?;
        Ok(())
    }

    /// What message `name` means to each process: (process, entry).
    pub fn catalog_of(&self, name: &str) -> Result<Vec<(String, CatalogEntry)>, StoreError> {
        let mut out = Vec::new();
        for row in self.catalog.range((name, "")..)? {
            let (k, v) = row?;
            let (m, p) = k.value();
            if m != name {
                break;
            }
            out.push((p.to_string(), codec::decode::<CatalogEntry>(v.value())?));
        }
        Ok(out)
    }

    /// Replaces what the messages mean to `process` with `entries`.
    pub fn set_catalog(
        &mut self,
        process: &str,
        entries: &std::collections::BTreeMap<&str, CatalogEntry>,
    ) -> Result<(), StoreError> {
        let mut stale = Vec::new();
        for row in self.catalog.iter()? {
            let (k, _) = row?;
            let (m, p) = k.value();
            if p == process && !entries.contains_key(m) {
                stale.push(m.to_string());
            }
        }
        for m in stale {
            self.catalog.remove((m.as_str(), process))?;
        }
        for (m, e) in entries {
            self.catalog
                .insert((*m, process), codec::encode(e)?.as_slice())?;
        }
        Ok(())
    }

    // ---------- instances ----------

    /// An instance's header; its tokens are read as they are asked for
    /// ([`Tables::fill_token`] and friends).
    pub fn instance(&self, id: u64) -> Result<Option<InstanceRecord>, StoreError> {
        let rec: Option<InstanceRecord> = get_record(&self.instances, id)?;
        if let Some(r) = &rec {
            self.remember_scope(r);
        }
        Ok(rec)
    }

    /// An instance with every token and every variable.
    pub fn instance_full(&self, id: u64) -> Result<Option<InstanceRecord>, StoreError> {
        let Some(mut rec) = self.instance(id)? else {
            return Ok(None);
        };
        self.fill_all(id, &mut rec.tokens)?;
        self.fill_variables(id, &mut rec.variables)?;
        Ok(Some(rec))
    }

    /// Reads variable `name` of `inst` into `set`, unless it knows it.
    pub fn fill_variable(
        &self,
        inst: u64,
        set: &mut Variables,
        name: &str,
    ) -> Result<(), StoreError> {
        if set.knows(name) {
            return Ok(());
        }
        let row = match self.variables.get((inst, name))? {
            Some(g) => Some(serde_json::from_slice(g.value()).map_err(|e| {
                CodecError::Decode(format!("variable '{name}' of instance {inst}: {e}"))
            })?),
            None => None,
        };
        set.loaded(name, row);
        Ok(())
    }

    /// Reads every variable of `inst` into `set`.
    pub fn fill_variables(&self, inst: u64, set: &mut Variables) -> Result<(), StoreError> {
        if set.is_complete() {
            return Ok(());
        }
        set.loaded_all(super::read_variables(&self.variables, inst)?);
        Ok(())
    }

    /// Reads token `token` of `inst` into `set`, unless it knows it.
    pub fn fill_token(&self, inst: u64, set: &mut Tokens, token: u64) -> Result<(), StoreError> {
        if set.knows(token) {
            return Ok(());
        }
        let row = match self.tokens.get((inst, token))? {
            Some(g) => Some(super::decode_token(g.value())?),
            None => None,
        };
        set.loaded(token, row);
        Ok(())
    }

    /// Reads token `token` and the tokens holding the scopes around it, and
    /// the sizes of the scopes they hold: what [`InstanceRecord::view`] and
    /// [`InstanceRecord::assign`] need.
    pub fn fill_chain(&self, inst: u64, set: &mut Tokens, token: u64) -> Result<(), StoreError> {
        let mut at = token;
        for _ in 0..=MAX_NESTING {
            if at == 0 {
                break;
            }
            self.fill_token(inst, set, at)?;
            let Some(t) = set.get(at) else { break };
            let (scope, body) = (t.scope, matches!(t.wait, Wait::Body { .. }));
            if body {
                self.fill_size(inst, set, at)?;
            }
            at = scope;
        }
        Ok(())
    }

    /// Reads every token of `inst` into `set`.
    pub fn fill_all(&self, inst: u64, set: &mut Tokens) -> Result<(), StoreError> {
        if set.is_complete() {
            return Ok(());
        }
        let mut rows = Vec::new();
        for row in self.tokens.range((inst, 0)..=(inst, u64::MAX))? {
            let (k, v) = row?;
            // a token read before keeps what this transaction did to it
            if !set.knows(k.value().1) {
                rows.push(super::decode_token(v.value())?);
            }
        }
        set.loaded_all(rows);
        Ok(())
    }

    /// Reads the stored size of scope `scope` of `inst` into `set`.
    pub fn fill_size(&self, inst: u64, set: &mut Tokens, scope: u64) -> Result<(), StoreError> {
        if set.knows_size(scope) {
            return Ok(());
        }
        debug_assert!(scope != 0, "the header counts the process level");
        let n = self
            .scope_sizes
            .get((inst, scope))?
            .map_or(0, |g| g.value());
        set.sized(scope, n);
        Ok(())
    }

    /// Reads the tokens stored as running in scope `scope` of `inst` into
    /// `set` (and the scope's size).
    pub fn fill_scope(&self, inst: u64, set: &mut Tokens, scope: u64) -> Result<(), StoreError> {
        if scope == 0 {
            // the process level has no `token_scopes` rows: everything is read
            return self.fill_all(inst, set);
        }
        self.fill_size(inst, set, scope)?;
        if set.is_complete() {
            return Ok(());
        }
        let mut ids = Vec::new();
        for row in self
            .token_scopes
            .range((inst, scope, 0)..=(inst, scope, u64::MAX))?
        {
            ids.push(row?.0.value().2);
        }
        for id in ids {
            self.fill_token(inst, set, id)?;
        }
        Ok(())
    }

    /// Item `index` of multi-instance body `body` of `inst`.
    pub fn body_item(
        &self,
        inst: u64,
        body: u64,
        index: u32,
    ) -> Result<Option<BodyItem>, StoreError> {
        match self.body_items.get((inst, body, index))? {
            Some(g) => Ok(Some(codec::decode(g.value())?)),
            None => Ok(None),
        }
    }

    /// Every item of multi-instance body `body` of `inst`, by index.
    pub fn body_items(&self, inst: u64, body: u64) -> Result<Vec<(u32, BodyItem)>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .body_items
            .range((inst, body, 0)..=(inst, body, u32::MAX))?
        {
            let (k, v) = row?;
            out.push((k.value().2, codec::decode(v.value())?));
        }
        Ok(out)
    }

    /// Removes the items of multi-instance body `body` of `inst`.
    pub fn clear_body_items(&mut self, inst: u64, body: u64) -> Result<(), StoreError> {
        self.body_items
            .retain_in((inst, body, 0)..=(inst, body, u32::MAX), |_, _| false)?;
        Ok(())
    }

    /// Writes item `index` of multi-instance body `body` of `inst`.
    pub fn put_body_item(
        &mut self,
        inst: u64,
        body: u64,
        index: u32,
        item: &BodyItem,
    ) -> Result<(), StoreError> {
        self.body_items
            .insert((inst, body, index), codec::encode(item)?.as_slice())?;
        Ok(())
    }

    fn remember_scope(&self, rec: &InstanceRecord) {
        self.scopes
            .borrow_mut()
            .entry(rec.id)
            .or_insert_with(|| (rec.process.clone(), rec.version));
    }

    /// The definition version of instance `id`, when it exists (or existed
    /// earlier in this transaction).
    fn scope_of(&self, id: u64) -> Result<Option<(String, u32)>, StoreError> {
        if let Some(s) = self.scopes.borrow().get(&id) {
            return Ok(Some(s.clone()));
        }
        Ok(self.instance(id)?.map(|r| (r.process.clone(), r.version)))
    }

    /// Writes an instance: its header, the rows of the tokens that changed
    /// since they were read (with their `tokens_at`, `version_tokens`,
    /// `token_scopes` and `scope_sizes` rows and gauges), its `expect` rows
    /// moved from `before` ([`Resting::of`] the header as loaded; the default
    /// for a new one), and its new history entries appended as rows (after
    /// which `rec` counts them in `history_len` and holds none).
    pub fn put_instance(
        &mut self,
        rec: &mut InstanceRecord,
        before: &Resting,
        model: Option<&Process>,
    ) -> Result<(), StoreError> {
        let after = Resting::of(rec);
        self.remember_scope(rec);
        let (process, version) = (rec.process.clone(), rec.version);
        debug_assert!(
            before.scope.0.is_empty() || before.scope == after.scope,
            "an instance keeps its definition version"
        );
        for (was, now) in rec.tokens.changes() {
            self.token_rows(rec.id, &process, version, was, now)?;
        }
        rec.top_level = rec.tokens.scope_size(0);
        for (name, value) in rec.variables.changes() {
            match value {
                Some(v) => {
                    let json =
                        serde_json::to_vec(v).map_err(|e| CodecError::Encode(e.to_string()))?;
                    self.variables.insert((rec.id, name), json.as_slice())?;
                }
                None => {
                    self.variables.remove((rec.id, name))?;
                }
            }
        }
        if after.expects != before.expects {
            for (m, key) in before.expects.difference(&after.expects) {
                self.set_expect(m, key, rec.id, false)?;
            }
            for (m, key) in after.expects.difference(&before.expects) {
                self.set_expect(m, key, rec.id, true)?;
            }
        }
        self.append_history(rec, model)?;
        self.instances
            .insert(rec.id, super::encode_instance(rec)?.as_slice())?;
        Ok(())
    }

    /// Moves one token's row and the rows derived from it from `was` (as
    /// stored; `None`: new) to `now` (`None`: removed). A body that stops
    /// being one takes its items with it.
    fn token_rows(
        &mut self,
        inst: u64,
        process: &str,
        version: u32,
        was: Option<&Token>,
        now: Option<&Token>,
    ) -> Result<(), StoreError> {
        let Some(id) = now.or(was).map(|t| t.id) else {
            return Ok(());
        };
        match now {
            Some(t) => {
                self.tokens
                    .insert((inst, id), super::encode_token(t)?.as_slice())?;
            }
            None => {
                self.tokens.remove((inst, id))?;
            }
        }
        let was_body = was.is_some_and(|t| matches!(t.wait, Wait::Body { .. }));
        let is_body = now.is_some_and(|t| matches!(t.wait, Wait::Body { .. }));
        if was_body && !is_body {
            self.clear_body_items(inst, id)?;
        }
        let (rest_was, rest_now) = (was.map(resting_row), now.map(resting_row));
        if rest_was != rest_now {
            for (row, insert) in [(rest_was, false), (rest_now, true)] {
                let Some((e, since, tok, incident)) = row else {
                    continue;
                };
                let k = (e, since, inst, tok);
                let vk = (process, version, e, since, inst, tok);
                if insert {
                    self.tokens_at.insert(k, ())?;
                    self.version_tokens.insert(vk, ())?;
                } else {
                    self.tokens_at.remove(k)?;
                    self.version_tokens.remove(vk)?;
                }
                self.gauge(&stat_key(STAT_TOKENS, process, version, e), insert)?;
                if incident {
                    self.gauge(&stat_key(STAT_INCIDENTS, process, version, e), insert)?;
                }
            }
        }
        // the subscriptions are the registrations the token holds open
        let open = |t: Option<&Token>| -> BTreeSet<(String, String)> {
            t.map(|t| {
                t.open_messages()
                    .into_iter()
                    .map(|(n, k)| (n.to_string(), k.to_string()))
                    .collect()
            })
            .unwrap_or_default()
        };
        let (subs_was, subs_now) = (open(was), open(now));
        for (name, key) in subs_was.difference(&subs_now) {
            self.subscriptions
                .remove((name.as_str(), key.as_str()), (inst, id))?;
        }
        for (name, key) in subs_now.difference(&subs_was) {
            self.subscriptions
                .insert((name.as_str(), key.as_str()), (inst, id))?;
        }
        let signals = |t: Option<&Token>| -> BTreeSet<String> {
            t.map(|t| t.open_signals().into_iter().map(String::from).collect())
                .unwrap_or_default()
        };
        let (sig_was, sig_now) = (signals(was), signals(now));
        for name in sig_was.difference(&sig_now) {
            self.signal_subs.remove(name.as_str(), (inst, id))?;
        }
        for name in sig_now.difference(&sig_was) {
            self.signal_subs.insert(name.as_str(), (inst, id))?;
        }
        // the process level is counted in the header (`top_level`)
        let inside = |t: &Token| Some(t.scope).filter(|&s| s != 0);
        let (scope_was, scope_now) = (was.and_then(inside), now.and_then(inside));
        if scope_was != scope_now {
            if let Some(s) = scope_was {
                self.token_scopes.remove((inst, s, id))?;
                self.scope_size(inst, s, false)?;
            }
            if let Some(s) = scope_now {
                self.token_scopes.insert((inst, s, id), ())?;
                self.scope_size(inst, s, true)?;
            }
        }
        Ok(())
    }

    /// Counts a token into (or out of) scope `scope` of `inst`.
    fn scope_size(&mut self, inst: u64, scope: u64, up: bool) -> Result<(), StoreError> {
        let n = self
            .scope_sizes
            .get((inst, scope))?
            .map_or(0, |g| g.value());
        let n = if up { n + 1 } else { n.saturating_sub(1) };
        if n == 0 {
            self.scope_sizes.remove((inst, scope))?;
        } else {
            self.scope_sizes.insert((inst, scope), n)?;
        }
        Ok(())
    }

    /// Writes `rec.new_history` as one row keyed by the sequence of its first
    /// entry, `rec.history_len`.
    fn append_history(
        &mut self,
        rec: &mut InstanceRecord,
        model: Option<&Process>,
    ) -> Result<(), StoreError> {
        if rec.new_history.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut rec.new_history);
        self.history.insert(
            (rec.id, rec.history_len),
            super::history::encode(&entries, rec.started_at, model)?.as_slice(),
        )?;
        rec.history_len += entries.len() as u64;
        Ok(())
    }

    /// Brings instance records of the layouts before rows (history, tokens
    /// and variables inside, versions 1 to 3) to the rows layout: the
    /// history, the tokens and the variables become rows, a multi-instance body's items `body_items`
    /// rows. The token's `tokens_at` rows and gauges exist already; its
    /// `token_scopes` and `scope_sizes` rows are written here. Run once when a
    /// database of format 1 or 2 opens; returns how many records it rewrote.
    pub(super) fn migrate_instances_to_rows(&mut self) -> Result<u64, StoreError> {
        let mut legacy = Vec::new();
        for row in self.instances.iter()? {
            let (k, v) = row?;
            if codec::version_of(v.value())? != codec::HEADER_VERSION {
                legacy.push(k.value());
            }
        }
        for id in &legacy {
            let Some(mut rec) = get_record::<InstanceRecord>(&self.instances, *id)? else {
                continue;
            };
            self.append_history(&mut rec, None)?;
            for t in rec.tokens.iter() {
                let mut t = t.clone();
                if let Wait::Body { items, outputs, .. } = &mut t.wait {
                    let (items, outputs) = (std::mem::take(items), std::mem::take(outputs));
                    let n = items.len().max(outputs.len());
                    for i in 0..n {
                        let item = BodyItem {
                            item: items.get(i).cloned(),
                            output: outputs.get(i).cloned(),
                        };
                        self.put_body_item(rec.id, t.id, i as u32, &item)?;
                    }
                }
                self.tokens
                    .insert((rec.id, t.id), super::encode_token(&t)?.as_slice())?;
                if t.scope != 0 {
                    self.token_scopes.insert((rec.id, t.scope, t.id), ())?;
                    self.scope_size(rec.id, t.scope, true)?;
                }
            }
            for (name, value) in rec.variables.iter() {
                let json =
                    serde_json::to_vec(value).map_err(|e| CodecError::Encode(e.to_string()))?;
                self.variables
                    .insert((rec.id, name.as_str()), json.as_slice())?;
            }
            self.instances
                .insert(rec.id, super::encode_instance(&rec)?.as_slice())?;
        }
        Ok(legacy.len() as u64)
    }

    /// Moves the boundary subscriptions onto their tokens (database format
    /// 4): every `subscriptions` or `signal_subs` row that its token's wait
    /// does not explain was opened by a boundary event of the token's
    /// activity — format 3 kept the message ones with the token only when
    /// written by a later release, the signal ones never — and is now kept
    /// with the token, from which the store derives the rows. Rows that name
    /// a token which no longer exists cannot be closed by anything and are
    /// dropped. Returns (tokens rewritten, rows dropped).
    pub(super) fn keep_registrations_with_tokens(&mut self) -> Result<(u64, u64), StoreError> {
        type Open = (Vec<(String, String)>, Vec<String>);
        let mut open: std::collections::BTreeMap<(u64, u64), Open> = Default::default();
        for row in self.subscriptions.iter()? {
            let (k, vals) = row?;
            let (m, key) = k.value();
            for v in vals {
                let entry = open.entry(v?.value()).or_default();
                entry.0.push((m.to_string(), key.to_string()));
            }
        }
        for row in self.signal_subs.iter()? {
            let (k, vals) = row?;
            let name = k.value();
            for v in vals {
                open.entry(v?.value()).or_default().1.push(name.to_string());
            }
        }
        let (mut rewritten, mut dropped) = (0u64, 0u64);
        for ((inst, token), (messages, signals)) in open {
            let stored = match self.tokens.get((inst, token))? {
                Some(g) => Some(super::decode_token(g.value())?),
                None => None,
            };
            let Some(mut t) = stored else {
                for (m, key) in &messages {
                    self.subscriptions
                        .remove((m.as_str(), key.as_str()), (inst, token))?;
                }
                for name in &signals {
                    self.signal_subs.remove(name.as_str(), (inst, token))?;
                }
                dropped += (messages.len() + signals.len()) as u64;
                continue;
            };
            let before = (t.boundary_messages.len(), t.boundary_signals.len());
            for (m, key) in messages {
                if !t.open_messages().contains(&(m.as_str(), key.as_str())) {
                    t.boundary_messages.push((m, key));
                }
            }
            for name in signals {
                if !t.open_signals().contains(&name.as_str()) {
                    t.boundary_signals.push(name);
                }
            }
            if before != (t.boundary_messages.len(), t.boundary_signals.len()) {
                self.tokens
                    .insert((inst, token), super::encode_token(&t)?.as_slice())?;
                rewritten += 1;
            }
        }
        Ok((rewritten, dropped))
    }

    /// Removes an instance with its token rows (and what they index), its
    /// `expect` rows and its history. `rec` holds every token.
    pub fn remove_instance(&mut self, rec: &InstanceRecord) -> Result<(), StoreError> {
        self.remember_scope(rec);
        for t in rec.tokens.iter() {
            self.token_rows(rec.id, &rec.process, rec.version, Some(t), None)?;
        }
        for (m, key) in &rec.expects {
            self.set_expect(m, key, rec.id, false)?;
        }
        self.variables
            .retain_in((rec.id, "")..(rec.id.saturating_add(1), ""), |_, _| false)?;
        self.history
            .retain_in((rec.id, 0)..=(rec.id, u64::MAX), |_, _| false)?;
        self.instances.remove(rec.id)?;
        Ok(())
    }

    /// Up to `limit` instances from id `from` on, and the id to continue from
    /// (`None` when the table ends).
    pub fn instances_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<(Vec<InstanceRecord>, Option<u64>), StoreError> {
        let (mut found, next): (Vec<InstanceRecord>, _) = scan(&self.instances, from, limit)?;
        for rec in &mut found {
            self.fill_all(rec.id, &mut rec.tokens)?;
            self.fill_variables(rec.id, &mut rec.variables)?;
        }
        Ok((found, next))
    }

    // ---------- messages ----------

    /// A message record by accept sequence.
    pub fn message(&mut self, seq: u64) -> Result<Option<MessageRecord>, StoreError> {
        let rec: Option<MessageRecord> = get_record(&self.messages, seq)?;
        if let Some(m) = &rec {
            self.message_rows.insert(seq, Some(MessageRows::of(m)));
        }
        Ok(rec)
    }

    /// The index rows of message `seq` as stored now (`None`: no such record).
    fn stored_message_rows(&mut self, seq: u64) -> Result<Option<MessageRows>, StoreError> {
        if let Some(rows) = self.message_rows.get(&seq) {
            return Ok(rows.clone());
        }
        if self.messages.get(seq)?.is_none() {
            return Ok(None);
        }
        Ok(self.message(seq)?.map(|m| MessageRows::of(&m)))
    }

    /// The (seq, accepted_at) recorded for (message id, name), if any.
    pub fn dedup(&self, message_id: &str, name: &str) -> Result<Option<(u64, Millis)>, StoreError> {
        Ok(self.dedup.get((message_id, name))?.map(|g| g.value()))
    }

    /// Accept sequences of every message recorded under this message id (any name).
    pub fn seqs_by_id(&self, message_id: &str) -> Result<Vec<u64>, StoreError> {
        seqs_by_id(&self.dedup, message_id)
    }

    /// Writes a message record and brings its index rows in line with its state.
    pub fn put_message(&mut self, rec: &MessageRecord) -> Result<(), StoreError> {
        let new = MessageRows::of(rec);
        match self.stored_message_rows(rec.seq)? {
            None => {
                self.dedup.insert(
                    (rec.message_id.as_str(), rec.name.as_str()),
                    (rec.seq, rec.accepted_at),
                )?;
                self.message_rows(rec, &new, true)?;
            }
            // name and key never change, so the old rows are `rec`'s with the
            // old state (the instances they name are kept in the rows)
            Some(old) if old != new => {
                self.message_rows(rec, &old, false)?;
                self.message_rows(rec, &new, true)?;
            }
            Some(_) => {}
        }
        self.messages
            .insert(rec.seq, super::encode_message(rec)?.as_slice())?;
        self.message_rows.insert(rec.seq, Some(new));
        Ok(())
    }

    fn message_rows(
        &mut self,
        m: &MessageRecord,
        rows: &MessageRows,
        insert: bool,
    ) -> Result<(), StoreError> {
        let buffer_key = (m.name.as_str(), m.key.as_str(), m.seq);
        if let Some(accepted_at) = rows.buffered {
            if insert {
                self.buffer.insert(buffer_key, ())?;
                self.buffer_age.insert((accepted_at, m.seq), ())?;
            } else {
                self.buffer.remove(buffer_key)?;
                self.buffer_age.remove((accepted_at, m.seq))?;
            }
            self.gauge(&format!("{BUFFERED_BY_NAME}{}", m.name), insert)?;
        }
        if let Some(at) = rows.expiry {
            if insert {
                self.expiry.insert((at, m.seq), ())?;
            } else {
                self.expiry.remove((at, m.seq))?;
            }
        }
        for &inst in &rows.instances {
            if insert {
                self.instance_messages.insert((inst, m.seq), ())?;
            } else {
                self.instance_messages.remove((inst, m.seq))?;
            }
        }
        if let Some(reason) = rows.parked {
            if insert {
                self.parked.insert(m.seq, ())?;
            } else {
                self.parked.remove(m.seq)?;
            }
            self.gauge(&format!("{PARKED_GAUGE}{reason}"), insert)?;
            self.gauge(&format!("{PARKED_BY_NAME}{reason}:{}", m.name), insert)?;
        }
        Ok(())
    }

    /// Removes a message record with all its index rows, `dedup` included.
    pub fn remove_message(&mut self, rec: &MessageRecord) -> Result<(), StoreError> {
        let rows = match self.stored_message_rows(rec.seq)? {
            Some(rows) => rows,
            None => return Ok(()),
        };
        self.message_rows(rec, &rows, false)?;
        self.message_rows.insert(rec.seq, None);
        self.dedup
            .remove((rec.message_id.as_str(), rec.name.as_str()))?;
        self.messages.remove(rec.seq)?;
        Ok(())
    }

    /// Up to `limit` messages from seq `from` on, and the seq to continue from.
    pub fn messages_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<(Vec<MessageRecord>, Option<u64>), StoreError> {
        scan(&self.messages, from, limit)
    }

    /// The oldest message buffered for (name, key).
    pub fn oldest_buffered(&self, name: &str, key: &str) -> Result<Option<u64>, StoreError> {
        let mut range = self
            .buffer
            .range((name, key, 0u64)..=(name, key, u64::MAX))?;
        Ok(match range.next() {
            Some(row) => Some(row?.0.value().2),
            None => None,
        })
    }

    /// Up to `limit` buffered messages whose TTL ran out by `now`, as (expires_at, seq).
    pub fn expired(&self, now: Millis, limit: usize) -> Result<Vec<(Millis, u64)>, StoreError> {
        let mut due = Vec::new();
        for row in self.expiry.range((0u64, 0u64)..=(now, u64::MAX))? {
            due.push(row?.0.value());
            if due.len() >= limit {
                break;
            }
        }
        Ok(due)
    }

    /// Drops an `expiry` row whose message is gone or no longer buffered (a
    /// database written before the store derived its rows may hold one).
    pub fn drop_orphan_expiry(&mut self, at: Millis, seq: u64) -> Result<(), StoreError> {
        self.expiry.remove((at, seq))?;
        Ok(())
    }

    // ---------- jobs ----------

    /// A job record.
    pub fn job(&mut self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        let rec: Option<JobRecord> = get_record(&self.jobs, id)?;
        if let Some(j) = &rec {
            self.job_rows.insert(id, Some(JobRows::of(j)));
        }
        Ok(rec)
    }

    /// The index rows of job `id` as stored now (`None`: no such job).
    fn stored_job_rows(&mut self, id: u64) -> Result<Option<JobRows>, StoreError> {
        if let Some(rows) = self.job_rows.get(&id) {
            return Ok(rows.clone());
        }
        if self.jobs.get(id)?.is_none() {
            return Ok(None);
        }
        Ok(self.job(id)?.map(|j| JobRows::of(&j)))
    }

    /// Writes a job record and brings its due and lease rows in line with it.
    pub fn put_job(&mut self, rec: &JobRecord) -> Result<(), StoreError> {
        let new = JobRows::of(rec);
        let old = self.stored_job_rows(rec.id)?.unwrap_or(JobRows::NONE);
        if old.0 != new.0 {
            self.due_rows(rec.id, &old.0, false)?;
            self.due_rows(rec.id, &new.0, true)?;
        }
        if old.1 != new.1 {
            self.lease_rows(rec.id, old.1, false)?;
            self.lease_rows(rec.id, new.1, true)?;
        }
        if old.2 != new.2 {
            if let Some(p) = &old.2 {
                self.start_timers.remove((p.as_str(), rec.id))?;
            }
            if let Some(p) = &new.2 {
                self.start_timers.insert((p.as_str(), rec.id), ())?;
            }
        }
        if old.3 != new.3 {
            self.gauge(INCIDENTS_GAUGE, new.3)?;
            if new.3 {
                self.incident_jobs.insert(rec.id, ())?;
            } else {
                self.incident_jobs.remove(rec.id)?;
            }
        }
        self.job_stat(
            rec,
            i64::from(new.4) - i64::from(old.4),
            i64::from(new.3) - i64::from(old.3),
        );
        self.jobs.insert(rec.id, codec::encode(rec)?.as_slice())?;
        self.job_rows.insert(rec.id, Some(new));
        Ok(())
    }

    /// Removes a job with its due and lease rows.
    pub fn remove_job(&mut self, rec: &JobRecord) -> Result<(), StoreError> {
        let Some(JobRows(due, lease, schedule, incident, ready)) = self.stored_job_rows(rec.id)?
        else {
            return Ok(());
        };
        self.due_rows(rec.id, &due, false)?;
        self.lease_rows(rec.id, lease, false)?;
        if incident {
            self.gauge(INCIDENTS_GAUGE, false)?;
            self.incident_jobs.remove(rec.id)?;
        }
        self.job_stat(rec, -i64::from(ready), -i64::from(incident));
        if let Some(p) = schedule {
            self.start_timers.remove((p.as_str(), rec.id))?;
        }
        self.job_rows.insert(rec.id, None);
        self.jobs.remove(rec.id)?;
        Ok(())
    }

    /// Notes a move of the per-version job gauges of `rec`'s element (applied
    /// by [`Tables::finish`]). A timer start event's job has no instance.
    fn job_stat(&mut self, rec: &JobRecord, ready: i64, incidents: i64) {
        let instance_job = match &rec.kind {
            JobKind::StartTimer { .. } => false,
            JobKind::Continue
            | JobKind::ContinueAfter
            | JobKind::Task { .. }
            | JobKind::Timer { .. } => true,
        };
        if !instance_job || (ready == 0 && incidents == 0) {
            return;
        }
        let e = self
            .job_stats
            .entry((rec.instance, rec.element.clone()))
            .or_default();
        e.0 += ready;
        e.1 += incidents;
    }

    fn due_rows(&mut self, id: u64, row: &DueRow, insert: bool) -> Result<(), StoreError> {
        match row {
            DueRow::None => {}
            DueRow::Continuation(at) if insert => {
                self.cont_due.insert((*at, id), ())?;
            }
            DueRow::Continuation(at) => {
                self.cont_due.remove((*at, id))?;
            }
            DueRow::Topic(topic, at) if insert => {
                self.topic_due.insert((topic.as_str(), *at, id), ())?;
            }
            DueRow::Topic(topic, at) => {
                self.topic_due.remove((topic.as_str(), *at, id))?;
            }
        }
        Ok(())
    }

    fn lease_rows(
        &mut self,
        id: u64,
        until: Option<Millis>,
        insert: bool,
    ) -> Result<(), StoreError> {
        match until {
            Some(u) if insert => {
                self.leases.insert((u, id), ())?;
            }
            Some(u) => {
                self.leases.remove((u, id))?;
            }
            None => {}
        }
        Ok(())
    }

    /// Up to `limit` continuation and timer jobs due by `now`, oldest first.
    pub fn due_continuations(&self, now: Millis, limit: usize) -> Result<Vec<u64>, StoreError> {
        let mut due = Vec::new();
        for row in self.cont_due.range((0u64, 0u64)..=(now, u64::MAX))? {
            due.push(row?.0.value().1);
            if due.len() >= limit {
                break;
            }
        }
        Ok(due)
    }

    /// Up to `limit` task jobs of `topic` due by `now`, oldest first.
    pub fn due_tasks(
        &self,
        topic: &str,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<u64>, StoreError> {
        let mut ids = Vec::new();
        for row in self
            .topic_due
            .range((topic, 0u64, 0u64)..=(topic, now, u64::MAX))?
        {
            ids.push(row?.0.value().2);
            if ids.len() >= limit {
                break;
            }
        }
        Ok(ids)
    }

    /// Leases that run out by `until`, as (until, job).
    pub fn leases_until(&self, until: Millis) -> Result<Vec<(Millis, u64)>, StoreError> {
        let mut out = Vec::new();
        for row in self.leases.range((0u64, 0u64)..=(until, u64::MAX))? {
            out.push(row?.0.value());
        }
        Ok(out)
    }

    /// The schedules (jobs) of the timer start events of `process`, any version.
    pub fn start_timers_of(&self, process: &str) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .start_timers
            .range((process, 0u64)..=(process, u64::MAX))?
        {
            out.push(row?.0.value().1);
        }
        Ok(out)
    }

    /// Drops a `leases` row whose job is gone (see [`Tables::drop_orphan_expiry`]).
    pub fn drop_orphan_lease(&mut self, until: Millis, id: u64) -> Result<(), StoreError> {
        self.leases.remove((until, id))?;
        Ok(())
    }

    // ---------- user tasks ----------

    /// An open user task.
    pub fn task(&self, id: u64) -> Result<Option<TaskRecord>, StoreError> {
        get_record(&self.tasks, id)
    }

    /// Whether parked messages leave events to publish, as the database says.
    pub fn parked_events(&self) -> Option<ParkedEvents> {
        self.parked_events
    }

    /// Keeps an event about a parked message until it is published.
    pub fn put_parked_event(&mut self, id: u64, event: &[u8]) -> Result<(), StoreError> {
        self.parked_event_rows.insert(id, event)?;
        Ok(())
    }

    /// Forgets a published event (an id not kept is no error: a confirmation
    /// may arrive twice).
    pub fn remove_parked_event(&mut self, id: u64) -> Result<bool, StoreError> {
        Ok(self.parked_event_rows.remove(id)?.is_some())
    }

    /// Writes an open user task; a new one gets its `tasks_at` row and moves
    /// the open-task gauge of its element (element and creation never change).
    pub fn put_task(&mut self, rec: &TaskRecord) -> Result<(), StoreError> {
        if self.tasks.get(rec.id)?.is_none() {
            self.tasks_at
                .insert((rec.element.as_str(), rec.created_at, rec.id), ())?;
            self.gauge(&format!("{OPEN_TASKS}{}", rec.element), true)?;
        }
        self.tasks.insert(rec.id, codec::encode(rec)?.as_slice())?;
        Ok(())
    }

    /// Removes a user task (completed, or its token left) with its row and gauge.
    pub fn remove_task(&mut self, id: u64) -> Result<(), StoreError> {
        if let Some(rec) = self.task(id)? {
            self.tasks_at
                .remove((rec.element.as_str(), rec.created_at, rec.id))?;
            self.gauge(&format!("{OPEN_TASKS}{}", rec.element), false)?;
        }
        self.tasks.remove(id)?;
        Ok(())
    }

    // ---------- registrations of waiting tokens ----------

    /// Pairs (instance, token) subscribed to a (message, key), as written
    /// (rows derived from the tokens' open registrations when an instance is
    /// written: [`Tables::put_instance`]).
    pub fn subscribers(&self, name: &str, key: &str) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut out = Vec::new();
        for v in self.subscriptions.get((name, key))? {
            out.push(v?.value());
        }
        Ok(out)
    }

    /// Pairs (instance, token) waiting for signal `name`.
    pub fn signal_subscribers(&self, name: &str) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut out = Vec::new();
        for v in self.signal_subs.get(name)? {
            out.push(v?.value());
        }
        Ok(out)
    }

    /// Active instances that will still catch (message, key).
    pub fn expecting(&self, name: &str, key: &str) -> Result<Vec<u64>, StoreError> {
        multimap_u64(&self.expect, name, key)
    }

    fn set_expect(&mut self, name: &str, key: &str, inst: u64, on: bool) -> Result<(), StoreError> {
        if on {
            self.expect.insert((name, key), inst)?;
        } else {
            self.expect.remove((name, key), inst)?;
        }
        Ok(())
    }

    /// Instances that caught (message, key) or ended: a later one is late.
    pub fn passed(&self, name: &str, key: &str) -> Result<Vec<u64>, StoreError> {
        multimap_u64(&self.passed, name, key)
    }

    /// Instance `inst` is past (message, key) (`on`), or forgotten by retention.
    pub fn set_passed(
        &mut self,
        name: &str,
        key: &str,
        inst: u64,
        on: bool,
    ) -> Result<(), StoreError> {
        if on {
            self.passed.insert((name, key), inst)?;
        } else {
            self.passed.remove((name, key), inst)?;
        }
        Ok(())
    }
}

fn multimap_u64(
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
fn scan<T: super::Record>(
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
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn message(seq: u64, state: MessageState) -> MessageRecord {
        MessageRecord {
            seq,
            message_id: format!("m{seq}"),
            name: "Done".into(),
            key: "k".into(),
            variables: Default::default(),
            state,
            reason: None,
            accepted_at: 5,
            expires_at: Some(100),
            candidates: Vec::new(),
            instance: None,
            element: None,
            raw: None,
            attributes: Vec::new(),
            settled_at: None,
            note: None,
            requeues: 0,
            candidate_elements: Vec::new(),
        }
    }

    /// Every database written by an earlier release (the fixtures of the
    /// format tests) migrates on open to records and rows that pass the
    /// store's own check: the derived index rows, the scopes, the
    /// registrations each token keeps.
    #[test]
    fn every_older_format_migrates_to_a_consistent_store() {
        for name in [
            "format-v1.redb",
            "format-v2-scopes.redb",
            "format-v3-tokens.redb",
            "format-v4-registrations.redb",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(name);
            let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
            std::fs::copy(fixtures.join(name), &path).unwrap();
            let (db, _) = super::super::open_db(&path, None).unwrap();
            let r = db.begin_read().unwrap();
            let problems = super::super::verify::verify(&r, true).unwrap();
            assert!(problems.is_empty(), "{name}: {problems:#?}");
            let format = r
                .open_table(META)
                .unwrap()
                .get(FORMAT_KEY)
                .unwrap()
                .unwrap()
                .value();
            assert_eq!(format, DB_FORMAT, "{name}");
        }
    }

    #[test]
    fn a_record_written_around_the_store_is_found_by_the_check() {
        let db = MemoryStore::new();
        db.write(|t| {
            let rec = message(1, MessageState::Buffered);
            t.messages
                .insert(1, codec::encode(&rec).unwrap().as_slice())
                .unwrap();
        });
        let problems = db.verify();
        assert!(
            problems.iter().any(|p| p.starts_with("buffer:"))
                && problems.iter().any(|p| p.starts_with("expiry:"))
                && problems.iter().any(|p| p.starts_with("dedup:")),
            "{problems:?}"
        );
    }

    fn instance(id: u64, version: u32, tokens: &[(&str, Millis)]) -> InstanceRecord {
        InstanceRecord {
            id,
            process: "p".into(),
            version,
            business_key: None,
            variables: Default::default(),
            tokens: tokens
                .iter()
                .enumerate()
                .map(|(i, (element, since))| Token {
                    id: i as u64 + 1,
                    element: element.to_string(),
                    wait: Wait::Join { flow: 0 },
                    since: *since,
                    timers: Vec::new(),
                    scope: 0,
                    locals: Default::default(),
                    boundary_messages: Vec::new(),
                    boundary_signals: Vec::new(),
                })
                .collect(),
            next_token: tokens.len() as u64 + 1,
            activations: 0,
            history_len: 0,
            started_at: 0,
            ended_at: None,
            cancelled: false,
            expects: Vec::new(),
            top_level: tokens.len() as u64,
            called_by: None,
            new_history: Vec::new(),
        }
    }

    fn task(id: u64, element: &str, created_at: Millis) -> TaskRecord {
        TaskRecord {
            id,
            instance: 1,
            token: id,
            process: "p".into(),
            element: element.into(),
            name: None,
            assignee: None,
            candidate_users: Vec::new(),
            candidate_groups: Vec::new(),
            due: None,
            follow_up: None,
            priority: None,
            form_key: None,
            created_at,
        }
    }

    #[test]
    fn history_is_appended_as_rows_and_leaves_with_its_instance() {
        let db = MemoryStore::new();
        let mut rec = instance(1, 1, &[("a", 10)]);
        rec.record("p", "instance_started", 10);
        rec.record("a", "activated", 10);
        db.write(|t| t.put_instance(&mut rec, &Resting::default(), None).unwrap());
        assert_eq!((rec.history_len, rec.new_history.len()), (2, 0));
        let stored = db.write(|t| t.instance_full(1).unwrap().unwrap());
        assert_eq!((stored.history_len, stored.new_history.len()), (2, 0));
        // a later step appends without reading or rewriting the earlier rows
        let mut later = stored.clone();
        later.record("a", "completed", 20);
        let resting = Resting::of(&stored);
        db.write(|t| t.put_instance(&mut later, &resting, None).unwrap());
        let events: Vec<String> = db
            .snapshot()
            .history(&later, None)
            .unwrap()
            .into_iter()
            .map(|h| h.event)
            .collect();
        assert_eq!(events, ["instance_started", "activated", "completed"]);
        assert_eq!(db.verify(), Vec::<String>::new());
        // verify notices a count that disagrees with the rows
        let mut wrong = later.clone();
        wrong.history_len = 7;
        db.write(|t| {
            t.instances
                .insert(1, super::super::encode_instance(&wrong).unwrap().as_slice())
                .unwrap();
        });
        assert!(
            db.verify().iter().any(|p| p.contains("counts 7 entries")),
            "{:?}",
            db.verify()
        );
        db.write(|t| t.remove_instance(&later).unwrap());
        assert_eq!(db.verify(), Vec::<String>::new(), "no row outlives it");
        assert!(db.snapshot().history(&later, None).unwrap().is_empty());
    }

    #[test]
    fn the_scraped_summaries_come_from_gauges_and_index_heads_and_match_the_records() {
        let db = MemoryStore::new();
        db.write(|t| {
            // two versions with tokens at `a`, one at `b`
            t.put_instance(
                &mut instance(1, 1, &[("a", 50), ("b", 70)]),
                &Resting::default(),
                None,
            )
            .unwrap();
            t.put_instance(&mut instance(2, 2, &[("a", 30)]), &Resting::default(), None)
                .unwrap();
            t.put_task(&task(7, "review", 40)).unwrap();
            t.put_task(&task(8, "review", 20)).unwrap();
            let mut claimed = task(8, "review", 20);
            claimed.assignee = Some("anna".into());
            t.put_task(&claimed).unwrap(); // a claim counts the task once
            t.put_task(&task(9, "approve", 90)).unwrap();
        });
        let snap = db.snapshot();
        assert_eq!(
            snap.resting_summary().unwrap(),
            vec![("a".to_string(), 2, 30), ("b".to_string(), 1, 70)]
        );
        assert_eq!(
            snap.open_tasks_summary().unwrap(),
            vec![
                ("approve".to_string(), 1, 90),
                ("review".to_string(), 2, 20)
            ]
        );
        // (the tasks' tokens are not written here: only rows and gauges count)
        let derived = |db: &MemoryStore| -> Vec<String> {
            db.verify()
                .into_iter()
                .filter(|p| p.starts_with("tasks_at") || p.starts_with("gauges"))
                .collect()
        };
        assert_eq!(derived(&db), Vec::<String>::new());
        db.write(|t| {
            t.remove_task(8).unwrap();
            t.remove_task(9).unwrap();
            t.remove_task(9).unwrap(); // gone already: nothing moves
        });
        assert_eq!(
            db.snapshot().open_tasks_summary().unwrap(),
            vec![("review".to_string(), 1, 40)]
        );
        assert_eq!(derived(&db), Vec::<String>::new());
    }

    fn job(id: u64, kind: JobKind, state: JobState, due_at: Millis) -> JobRecord {
        JobRecord {
            id,
            instance: 1,
            token: id,
            element: "e".into(),
            kind,
            state,
            due_at,
            attempts: 0,
            last_error: None,
            idempotency_key: format!("1:e:{id}"),
            created_at: 0,
            lease: None,
            max_attempts: None,
            history: Vec::new(),
        }
    }

    #[test]
    fn what_metrics_count_comes_from_indexes_and_gauges() {
        let db = MemoryStore::new();
        let topic = |t: &str| JobKind::Task { topic: t.into() };
        db.write(|t| {
            t.put_job(&job(1, topic("a"), JobState::Ready, 10)).unwrap();
            t.put_job(&job(2, topic("b"), JobState::Ready, 20)).unwrap();
            t.put_job(&job(3, topic("b"), JobState::Ready, 30)).unwrap();
            t.put_job(&job(4, topic("c"), JobState::Locked, 5)).unwrap();
            t.put_job(&job(5, JobKind::Continue, JobState::Ready, 15))
                .unwrap();
            t.put_job(&job(6, topic("d"), JobState::Incident, 1))
                .unwrap();
            t.put_job(&job(7, topic("d"), JobState::Incident, 1))
                .unwrap();
            let mut late = message(1, MessageState::Parked);
            late.reason = Some(Reason::Late);
            t.put_message(&late).unwrap();
            let mut old = message(2, MessageState::Buffered);
            old.accepted_at = 3;
            t.put_message(&old).unwrap();
            t.put_message(&message(3, MessageState::Buffered)).unwrap();
        });
        let s = db.snapshot();
        assert_eq!(
            s.due_count(20).unwrap(),
            3,
            "a@10, b@20, the continuation@15"
        );
        assert_eq!(s.due_count(4).unwrap(), 0);
        assert_eq!(s.due_count(u64::MAX).unwrap(), 4);
        assert_eq!(s.incident_count().unwrap(), 2);
        assert_eq!(s.parked_gauges().unwrap(), vec![("late".to_string(), 1)]);
        assert_eq!(s.oldest_buffered_at().unwrap(), Some(3));
        drop(s);
        db.write(|t| {
            // the incident is retried, the other removed; the oldest message correlates
            t.put_job(&job(6, topic("d"), JobState::Ready, 1)).unwrap();
            let gone = t.job(7).unwrap().unwrap();
            t.remove_job(&gone).unwrap();
            let mut m = t.message(2).unwrap().unwrap();
            m.state = MessageState::Correlated;
            t.put_message(&m).unwrap();
            let mut late = t.message(1).unwrap().unwrap();
            late.state = MessageState::Discarded;
            t.put_message(&late).unwrap();
        });
        let s = db.snapshot();
        assert_eq!(s.incident_count().unwrap(), 0);
        assert_eq!(s.due_count(20).unwrap(), 4, "the retried job is due");
        assert_eq!(s.parked_gauges().unwrap(), vec![]);
        assert_eq!(s.oldest_buffered_at().unwrap(), Some(5));
        drop(s);
        assert_eq!(db.verify(), Vec::<String>::new());
    }

    #[test]
    fn instance_messages_and_incident_jobs_follow_their_records_and_are_rebuilt_on_upgrade() {
        let db = MemoryStore::new();
        let of = |db: &MemoryStore, inst| -> Vec<u64> {
            db.snapshot()
                .messages_of_instance(inst)
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect()
        };
        db.write(|t| {
            let mut m = message(1, MessageState::Parked);
            m.candidates = vec![10, 11];
            t.put_message(&m).unwrap();
        });
        assert_eq!((of(&db, 10), of(&db, 11)), (vec![1], vec![1]));
        db.write(|t| {
            let mut m = t.message(1).unwrap().unwrap();
            m.state = MessageState::Correlated;
            m.candidates.clear();
            m.instance = Some(11);
            t.put_message(&m).unwrap();
        });
        assert_eq!((of(&db, 10), of(&db, 11)), (vec![], vec![1]));
        assert_eq!(db.verify(), Vec::<String>::new());
        db.write(|t| {
            let mut j = job(3, JobKind::Task { topic: "t".into() }, JobState::Ready, 1);
            t.put_job(&j).unwrap();
            j.state = JobState::Incident;
            t.put_job(&j).unwrap();
        });
        assert_eq!(db.snapshot().incident_jobs().unwrap().len(), 1);
        assert_eq!(db.verify(), Vec::<String>::new());
        // a database from before the indexes gets their rows when it is opened
        db.write(|t| {
            t.incident_jobs.remove(3).unwrap();
            t.instance_messages.remove((11, 1)).unwrap();
            t.meta.insert(INDEX_VERSION_KEY, 3).unwrap();
        });
        assert!(!db.verify().is_empty());
        db.write(|t| t.upgrade_indexes().unwrap());
        assert_eq!(db.verify(), Vec::<String>::new());
        assert_eq!(of(&db, 11), vec![1]);
        assert_eq!(db.snapshot().incident_jobs().unwrap()[0].id, 3);
        db.write(|t| {
            let m = t.message(1).unwrap().unwrap();
            t.remove_message(&m).unwrap();
        });
        assert_eq!(of(&db, 11), Vec::<u64>::new());
        assert_eq!(db.verify(), Vec::<String>::new());
    }

    #[test]
    fn message_and_job_rows_follow_every_state_change() {
        let db = MemoryStore::new();
        db.write(|t| {
            let mut m = message(1, MessageState::Buffered);
            t.put_message(&m).unwrap();
            m.state = MessageState::Parked;
            t.put_message(&m).unwrap();
            t.put_message(&message(2, MessageState::Buffered)).unwrap();
        });
        assert_eq!(db.verify(), Vec::<String>::new());
        db.write(|t| {
            let m = t.message(2).unwrap().unwrap();
            t.remove_message(&m).unwrap();
            let mut job = JobRecord {
                id: 7,
                instance: 1,
                token: 1,
                element: "e".into(),
                kind: JobKind::Task { topic: "t".into() },
                state: JobState::Ready,
                due_at: 10,
                attempts: 0,
                last_error: None,
                idempotency_key: "1:e:1".into(),
                created_at: 0,
                lease: None,
                max_attempts: None,
                history: Vec::new(),
            };
            t.put_job(&job).unwrap();
            assert_eq!(t.due_tasks("t", 10, 5).unwrap(), vec![7]);
            job.state = JobState::Locked;
            job.lease = Some(Lease {
                owner: "w".into(),
                token: 1,
                until: 50,
                in_process: false,
            });
            t.put_job(&job).unwrap();
            assert_eq!(t.due_tasks("t", 10, 5).unwrap(), Vec::<u64>::new());
            assert_eq!(t.leases_until(50).unwrap(), vec![(50, 7)]);
            job.attempt_failed(20, "boom".into());
            job.state = JobState::Ready;
            job.due_at = 30;
            t.put_job(&job).unwrap();
            assert_eq!(t.leases_until(u64::MAX).unwrap(), Vec::new());
            assert_eq!(t.due_tasks("t", 30, 5).unwrap(), vec![7]);
        });
        assert_eq!(db.verify(), Vec::<String>::new());
    }
}
