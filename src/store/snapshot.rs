//! Read access to one consistent snapshot, for the views (`ops`) and metrics.
//!
//! Invariant: never writes and never blocks the writer (a redb read
//! transaction); returns records and plain values, never a table.

use super::*;
use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata};

/// A deployed version: (version, deployed at, file).
pub(crate) type DeployedVersion = (u32, Millis, String);

/// One read snapshot of every table.
pub(crate) struct Snapshot {
    pub(super) tx: ReadTransaction,
}

/// A kept event about a parked message: (row id, JSON).
pub type EventRow = (u64, Vec<u8>);

impl Snapshot {
    /// Reads from `tx`.
    pub fn new(tx: ReadTransaction) -> Self {
        Snapshot { tx }
    }

    pub(super) fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<ReadOnlyTable<K, V>, StoreError> {
        Ok(self.tx.open_table(def).map_err(redb::Error::from)?)
    }

    /// A table a database of an earlier release may not have yet (it is
    /// created on the first writable open): `None` then — the one place a
    /// read decides what a missing table means is its caller's `else`.
    pub(super) fn optional<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Option<ReadOnlyTable<K, V>>, StoreError> {
        super::present(self.tx.open_table(def))
    }

    /// Every record of a u64-keyed table, in key order.
    fn all<T: super::Record>(
        &self,
        def: TableDefinition<u64, &'static [u8]>,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        for row in self.table(def)?.iter()? {
            out.push(T::from_bytes(row?.1.value())?);
        }
        Ok(out)
    }

    /// Message records by sequence, skipping sequences without one.
    fn messages_of(
        &self,
        seqs: impl IntoIterator<Item = u64>,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let messages = self.table(MESSAGES)?;
        let mut out = Vec::new();
        for seq in seqs {
            if let Some(m) = get_record(&messages, seq)? {
                out.push(m);
            }
        }
        Ok(out)
    }

    /// An instance record.
    pub fn instance(&self, id: u64) -> Result<Option<InstanceRecord>, StoreError> {
        match self.table(INSTANCES)?.get(id)? {
            Some(g) => Ok(Some(super::read_instance(
                g.value(),
                &self.table(TOKENS)?,
                &self.table(VARIABLES)?,
            )?)),
            None => Ok(None),
        }
    }

    /// The history of instance `rec`, oldest first: its rows, then what the
    /// record holds that is not written as rows yet.
    pub fn history(
        &self,
        rec: &InstanceRecord,
        model: Option<&crate::model::Process>,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .table(HISTORY)?
            .range((rec.id, 0)..=(rec.id, u64::MAX))?
        {
            let chunk: Vec<HistoryEntry> =
                super::history::decode(row?.1.value(), rec.started_at, model)?;
            out.extend(chunk);
        }
        out.extend(rec.new_history.iter().cloned());
        Ok(out)
    }

    /// Up to `limit` instance records after `cursor` (exclusive) in id order,
    /// newest first when `newest_first`: one range over `instances`.
    pub fn instances_after(
        &self,
        cursor: Option<u64>,
        newest_first: bool,
        limit: usize,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        let t = self.table(INSTANCES)?;
        let tokens = self.table(TOKENS)?;
        let variables = self.table(VARIABLES)?;
        let mut out = Vec::new();
        let mut take = |row: Result<
            (
                redb::AccessGuard<'_, u64>,
                redb::AccessGuard<'_, &'static [u8]>,
            ),
            redb::StorageError,
        >|
         -> Result<bool, StoreError> {
            out.push(super::read_instance(row?.1.value(), &tokens, &variables)?);
            Ok(out.len() < limit)
        };
        if newest_first {
            if cursor == Some(0) {
                return Ok(out);
            }
            let upper = cursor.map_or(u64::MAX, |c| c - 1);
            for row in t.range(..=upper)?.rev() {
                if !take(row)? {
                    break;
                }
            }
        } else {
            let lower = cursor.map_or(0, |c| c.saturating_add(1));
            if cursor == Some(u64::MAX) {
                return Ok(out);
            }
            for row in t.range(lower..)? {
                if !take(row)? {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Instances that wait for, expect or have caught a message with
    /// correlation key `key` (any message name): the `subscriptions`, `expect`
    /// and `passed` rows of every catalogued message name.
    pub fn instances_with_key(
        &self,
        key: &str,
    ) -> Result<std::collections::BTreeSet<u64>, StoreError> {
        let mut names: Vec<String> = Vec::new();
        for row in self.table(CATALOG)?.iter()? {
            let name = row?.0.value().0.to_string();
            if names.last() != Some(&name) {
                names.push(name);
            }
        }
        let open_multimap = |def| self.tx.open_multimap_table(def).map_err(redb::Error::from);
        let subs = self
            .tx
            .open_multimap_table(SUBSCRIPTIONS)
            .map_err(redb::Error::from)?;
        let expect = open_multimap(EXPECT)?;
        let passed = open_multimap(PASSED)?;
        let mut out = std::collections::BTreeSet::new();
        for name in &names {
            for v in subs.get((name.as_str(), key))? {
                out.insert(v?.value().0);
            }
            for t in [&expect, &passed] {
                for v in t.get((name.as_str(), key))? {
                    out.insert(v?.value());
                }
            }
        }
        Ok(out)
    }

    /// Tokens resting at `element`, oldest first: (since, instance, token).
    pub fn tokens_at(&self, element: &str) -> Result<Vec<(Millis, u64, u64)>, StoreError> {
        let mut out = Vec::new();
        let t = self.table(TOKENS_AT)?;
        for row in t.range((element, 0u64, 0u64, 0u64)..=(element, u64::MAX, u64::MAX, u64::MAX))? {
            let row = row?;
            let (_, since, inst, token) = row.0.value();
            out.push((since, inst, token));
        }
        Ok(out)
    }

    /// Per element: tokens resting there and since when the oldest waits, by
    /// element id, over every definition version: the per-version token
    /// gauges and the first `version_tokens` row of each, never a walk over
    /// the tokens.
    pub fn resting_summary(&self) -> Result<Vec<(String, u64, Millis)>, StoreError> {
        let mut by: std::collections::BTreeMap<String, (u64, Millis)> = Default::default();
        for (scoped, n) in self.gauges(STAT_TOKENS)? {
            // PROCESS:VERSION:ELEMENT (BPMN ids hold no `:`)
            let mut parts = scoped.splitn(3, ':');
            let (Some(process), Some(version), Some(element)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(version) = version.parse::<u32>() else {
                continue;
            };
            let oldest = self
                .oldest_token(process, version, element)?
                .unwrap_or(Millis::MAX);
            let e = by.entry(element.to_string()).or_insert((0, Millis::MAX));
            e.0 += n;
            e.1 = e.1.min(oldest);
        }
        Ok(by
            .into_iter()
            .map(|(e, (n, oldest))| (e, n, oldest))
            .collect())
    }

    /// Per element: open user tasks and since when the oldest is open, from
    /// the open-task gauges and the first `tasks_at` row of each element.
    pub fn open_tasks_summary(&self) -> Result<Vec<(String, u64, Millis)>, StoreError> {
        let Some(t) = self.optional(TASKS_AT)? else {
            // a database of an earlier release opened read-only: read the tasks
            let mut by: std::collections::BTreeMap<String, (u64, Millis)> = Default::default();
            for task in self.tasks()? {
                let e = by.entry(task.element).or_insert((0, task.created_at));
                e.0 += 1;
                e.1 = e.1.min(task.created_at);
            }
            return Ok(by.into_iter().map(|(e, (n, o))| (e, n, o)).collect());
        };
        let mut out = Vec::new();
        for (element, n) in self.gauges(OPEN_TASKS)? {
            let first = t
                .range((element.as_str(), 0u64, 0u64)..=(element.as_str(), u64::MAX, u64::MAX))?
                .next();
            let oldest = match first {
                Some(row) => row?.0.value().1,
                None => continue,
            };
            out.push((element, n, oldest));
        }
        Ok(out)
    }

    /// Buffered messages, per (name, key) in accept order.
    pub fn buffered(&self) -> Result<Vec<MessageRecord>, StoreError> {
        let mut seqs = Vec::new();
        for row in self.table(BUFFER)?.iter()? {
            seqs.push(row?.0.value().2);
        }
        self.messages_of(seqs)
    }

    /// How many messages are buffered.
    pub fn buffered_count(&self) -> Result<u64, StoreError> {
        Ok(self.table(BUFFER)?.len()?)
    }

    /// When the oldest buffered message was accepted (one index lookup).
    pub fn oldest_buffered_at(&self) -> Result<Option<Millis>, StoreError> {
        Ok(self.table(BUFFER_AGE)?.first()?.map(|(k, _)| k.value().0))
    }

    /// Parked messages per reason, from the gauges the store keeps (reasons
    /// with none parked are left out).
    pub fn parked_gauges(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut out = Vec::new();
        for row in self.table(META)?.range(PARKED_GAUGE..)? {
            let (k, v) = row?;
            let Some(reason) = k.value().strip_prefix(PARKED_GAUGE) else {
                break;
            };
            if v.value() > 0 {
                out.push((reason.to_string(), v.value()));
            }
        }
        Ok(out)
    }

    /// Up to `limit` events about parked messages not yet published, oldest
    /// first, and how many wait in all.
    pub fn parked_events(&self, limit: usize) -> Result<(Vec<EventRow>, u64), StoreError> {
        // a database of an earlier release opened read-only may not have the table
        let Some(t) = self.optional(PARKED_EVENTS)? else {
            return Ok((Vec::new(), 0));
        };
        let mut out = Vec::new();
        for row in t.iter()?.take(limit) {
            let (k, v) = row?;
            out.push((k.value(), v.value().to_vec()));
        }
        Ok((out, t.len()?))
    }

    /// The completed activities of instance `inst` that can still be
    /// compensated, in order of completion (a row that does not decode is
    /// left out: a view renders what it can).
    pub fn compensables(
        &self,
        inst: u64,
    ) -> Result<Vec<super::compensations::Compensable>, StoreError> {
        let Some(t) = self.optional(COMPENSATIONS)? else {
            return Ok(Vec::new());
        };
        // a row that cannot be read is left out of the view
        let rows = super::tables::read_compensables(&t, inst)?;
        Ok(rows.into_iter().filter_map(|(_, c)| c.ok()).collect())
    }

    /// Up to `limit` signals thrown here that not every other partition took
    /// yet, oldest first.
    pub fn signals_out(&self, limit: usize) -> Result<Vec<EventRow>, StoreError> {
        let Some(t) = self.optional(SIGNALS_OUT)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in t.iter()?.take(limit) {
            let (k, v) = row?;
            out.push((k.value(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Jobs in an incident, from the gauge the store keeps.
    pub fn incident_count(&self) -> Result<u64, StoreError> {
        Ok(self
            .table(META)?
            .get(INCIDENTS_GAUGE)?
            .map_or(0, |g| g.value()))
    }

    /// Jobs due by `now` and not taken: continuations and timers from the
    /// front of their index, task jobs per topic from the front of theirs
    /// (keys only, no record is read).
    pub fn due_count(&self, now: Millis) -> Result<u64, StoreError> {
        let mut n = 0u64;
        for row in self.table(CONT_DUE)?.range(..=(now, u64::MAX))? {
            row?;
            n += 1;
        }
        let topic_due = self.table(TOPIC_DUE)?;
        let mut from: Option<String> = None;
        loop {
            // the next topic after `from`, then its rows due by `now`
            let next = match &from {
                None => topic_due.first()?,
                Some(t) => topic_due
                    .range((t.as_str(), u64::MAX, u64::MAX)..)?
                    .find(|r| r.as_ref().map_or(true, |(k, _)| k.value().0 != t.as_str()))
                    .transpose()?,
            };
            let Some((k, _)) = next else { break };
            let topic = k.value().0.to_string();
            for row in
                topic_due.range((topic.as_str(), 0u64, 0u64)..=(topic.as_str(), now, u64::MAX))?
            {
                row?;
                n += 1;
            }
            from = Some(topic);
        }
        Ok(n)
    }

    /// Parked messages, by sequence.
    pub fn parked(&self) -> Result<Vec<MessageRecord>, StoreError> {
        let mut seqs = Vec::new();
        for row in self.table(PARKED)?.iter()? {
            seqs.push(row?.0.value());
        }
        self.messages_of(seqs)
    }

    /// The messages correlated into instance `id` and the parked ones that
    /// name it as a candidate, by sequence (none on a database opened
    /// read-only before the index existed).
    pub fn messages_of_instance(&self, id: u64) -> Result<Vec<MessageRecord>, StoreError> {
        let Some(t) = self.optional(INSTANCE_MESSAGES)? else {
            return Ok(Vec::new());
        };
        let mut seqs = Vec::new();
        for row in t.range((id, 0u64)..=(id, u64::MAX))? {
            seqs.push(row?.0.value().1);
        }
        self.messages_of(seqs)
    }

    /// Up to `limit` parked messages after sequence `after`, by sequence.
    pub fn parked_after(
        &self,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let t = self.table(PARKED)?;
        let mut seqs = Vec::new();
        let from = match after {
            Some(u64::MAX) => return Ok(Vec::new()),
            Some(a) => a + 1,
            None => 0,
        };
        for row in t.range(from..)? {
            if seqs.len() == limit {
                break;
            }
            seqs.push(row?.0.value());
        }
        self.messages_of(seqs)
    }

    /// Up to `limit` buffered messages after (accepted_at, seq) `after`,
    /// oldest first: one range over `buffer_age`.
    pub fn buffered_after(
        &self,
        after: Option<(Millis, u64)>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let t = self.table(BUFFER_AGE)?;
        let mut seqs = Vec::new();
        let range = match after {
            Some(a) => t.range(a..)?,
            None => t.range((0u64, 0u64)..)?,
        };
        for row in range {
            let k = row?.0.value();
            if Some(k) == after {
                continue;
            }
            if seqs.len() == limit {
                break;
            }
            seqs.push(k.1);
        }
        self.messages_of(seqs)
    }

    /// Every message recorded under this message id (any name).
    pub fn messages_by_id(&self, id: &str) -> Result<Vec<MessageRecord>, StoreError> {
        self.messages_of(seqs_by_id(&self.table(DEDUP)?, id)?)
    }

    /// Every message record, by sequence.
    pub fn messages(&self) -> Result<Vec<MessageRecord>, StoreError> {
        self.all(MESSAGES)
    }

    /// A job record.
    pub fn job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        get_record(&self.table(JOBS)?, id)
    }

    /// The jobs in an incident, by id, from `incident_jobs` (a database
    /// opened read-only before the index existed: every job is read).
    pub fn incident_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let Some(t) = self.optional(INCIDENT_JOBS)? else {
            let mut all: Vec<JobRecord> = self.all(JOBS)?;
            all.retain(|j| j.state == JobState::Incident);
            return Ok(all);
        };
        let jobs = self.table(JOBS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            if let Some(j) = get_record(&jobs, row?.0.value())? {
                out.push(j);
            }
        }
        Ok(out)
    }

    /// Up to `limit` jobs after id `after` (exclusive), by id: all of them, or
    /// only those in an incident (from `incident_jobs`).
    pub fn jobs_after(
        &self,
        incidents_only: bool,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let from = match after {
            Some(u64::MAX) => return Ok(Vec::new()),
            Some(a) => a + 1,
            None => 0,
        };
        let jobs = self.table(JOBS)?;
        let mut out = Vec::new();
        if incidents_only {
            let Some(t) = self.optional(INCIDENT_JOBS)? else {
                let mut all = self.incident_jobs()?;
                all.retain(|j| j.id >= from);
                all.truncate(limit);
                return Ok(all);
            };
            for row in t.range(from..)? {
                if out.len() == limit {
                    break;
                }
                if let Some(j) = get_record(&jobs, row?.0.value())? {
                    out.push(j);
                }
            }
        } else {
            for row in jobs.range(from..)? {
                if out.len() == limit {
                    break;
                }
                out.push(codec::decode(row?.1.value())?);
            }
        }
        Ok(out)
    }

    /// Every job record, by id.
    pub fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.all(JOBS)
    }

    /// Audit entries that pass `filter`, newest first.
    pub fn audit(
        &self,
        filter: &crate::audit::AuditFilter,
    ) -> Result<Vec<crate::audit::AuditEntry>, StoreError> {
        let Some(t) = self.optional(AUDIT)? else {
            return Ok(Vec::new());
        };
        let limit = filter
            .limit
            .unwrap_or(crate::audit::AUDIT_PAGE)
            .clamp(1, crate::audit::AUDIT_PAGE);
        let mut out = Vec::new();
        for row in t.iter()?.rev() {
            let (_, v) = row?;
            let e: crate::audit::AuditEntry = codec::decode(v.value())?;
            if filter.since.is_some_and(|s| e.at < s) {
                break;
            }
            if filter.who.as_ref().is_some_and(|w| *w != e.who) {
                continue;
            }
            out.push(e);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// An open user task.
    pub fn task(&self, id: u64) -> Result<Option<TaskRecord>, StoreError> {
        get_record(&self.table(TASKS)?, id)
    }

    /// Every open user task, by id.
    pub fn tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        self.all(TASKS)
    }

    /// Event counters by stored name.
    pub fn counters(&self) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let mut out = std::collections::BTreeMap::new();
        for row in self.table(META)?.range(COUNTER_PREFIX..)? {
            let (k, v) = row?;
            let Some(name) = k.value().strip_prefix(COUNTER_PREFIX) else {
                break;
            };
            out.insert(name.to_string(), v.value());
        }
        Ok(out)
    }

    /// The gauges whose `meta` key starts with `prefix`, by the rest of the
    /// key (zero ones left out): one range over `meta`, however many records.
    pub fn gauges(
        &self,
        prefix: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let mut out = std::collections::BTreeMap::new();
        for row in self.table(META)?.range(prefix..)? {
            let (k, v) = row?;
            let Some(rest) = k.value().strip_prefix(prefix) else {
                break;
            };
            if v.value() > 0 {
                out.insert(rest.to_string(), v.value());
            }
        }
        Ok(out)
    }

    /// Since when the longest-waiting token of a definition version rests at
    /// `element`: the first row of its `version_tokens` range.
    pub fn oldest_token(
        &self,
        process: &str,
        version: u32,
        element: &str,
    ) -> Result<Option<Millis>, StoreError> {
        // a database of an earlier release opened read-only may not have the table
        let Some(t) = self.optional(VERSION_TOKENS)? else {
            return Ok(None);
        };
        let mut range = t.range(
            (process, version, element, 0u64, 0u64, 0u64)
                ..=(process, version, element, u64::MAX, u64::MAX, u64::MAX),
        )?;
        Ok(match range.next() {
            Some(row) => Some(row?.0.value().3),
            None => None,
        })
    }

    /// The earliest due time of a continuation or timer, of a lease's end, and
    /// of a task job of one of `topics`.
    pub fn next_due(&self, topics: &[String]) -> Result<Option<Millis>, StoreError> {
        let mut next: Option<Millis> = None;
        let mut take = |t: Millis| next = Some(next.map_or(t, |n: Millis| n.min(t)));
        if let Some((k, _)) = self.table(CONT_DUE)?.first()? {
            take(k.value().0);
        }
        if let Some((k, _)) = self.table(LEASES)?.first()? {
            take(k.value().0);
        }
        let topic_due = self.table(TOPIC_DUE)?;
        for t in topics {
            if let Some(row) = topic_due
                .range((t.as_str(), 0u64, 0u64)..=(t.as_str(), u64::MAX, u64::MAX))?
                .next()
            {
                take(row?.0.value().1);
            }
        }
        Ok(next)
    }

    /// A named cursor or sequence in `meta` (0 when never set).
    pub fn cursor(&self, name: &str) -> Result<u64, StoreError> {
        Ok(self.table(META)?.get(name)?.map(|g| g.value()).unwrap_or(0))
    }

    /// The XML a process version was deployed from (`None`: unknown version,
    /// or deployed before sources were kept).
    pub fn definition_source(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<String>, StoreError> {
        let Some(t) = self.optional(DEFINITION_SOURCES)? else {
            return Ok(None);
        };
        Ok(t.get((process, version))?
            .map(|g| String::from_utf8_lossy(g.value()).into_owned()))
    }

    /// Every deployed process with its versions, by id.
    pub fn deployed(&self) -> Result<Vec<(String, Vec<DeployedVersion>)>, StoreError> {
        let mut all: BTreeMap<(String, u32), (Millis, String)> = BTreeMap::new();
        if let Some(t) = self.optional(DEFINITION_HEADS)? {
            for row in t.iter()? {
                let (k, v) = row?;
                let (process, version) = k.value();
                let head: DefinitionHead = codec::decode(v.value())?;
                all.insert(
                    (process.to_string(), version),
                    (head.deployed_at, head.file),
                );
            }
        }
        for row in self.table(DEFINITIONS)?.iter()? {
            let (k, _) = row?;
            let (process, version) = k.value();
            if let Some(stored) = self.definition(process, version)? {
                let (at, file) = stored.deployed();
                all.insert((process.to_string(), version), (at, file.to_string()));
            }
        }
        let mut out: Vec<(String, Vec<DeployedVersion>)> = Vec::new();
        for ((process, version), (at, file)) in all {
            match out.last_mut() {
                Some((p, versions)) if *p == process => versions.push((version, at, file)),
                _ => out.push((process, vec![(version, at, file)])),
            }
        }
        Ok(out)
    }

    /// The latest deployed version of a process (`None`: never deployed).
    pub fn latest_version(&self, process: &str) -> Result<Option<u32>, StoreError> {
        Ok(self.table(LATEST)?.get(process)?.map(|g| g.value()))
    }

    /// A stored process version.
    pub fn definition(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<StoredDefinition>, StoreError> {
        // a database of an earlier release opened read-only may lack a table
        super::tables::read_definition(
            self.optional(DEFINITION_HEADS)?.as_ref(),
            self.optional(DEFINITION_SOURCES)?.as_ref(),
            self.optional(DEFINITIONS)?.as_ref(),
            self.optional(DEFINITION_EXTRAS)?.as_ref(),
            process,
            version,
        )
    }
}

impl Snapshot {
    /// Version `version` of decision `id`, or its latest when `None`.
    pub fn decision(
        &self,
        id: &str,
        version: Option<u32>,
    ) -> Result<Option<DecisionRecord>, StoreError> {
        super::tables::read_decision(
            self.optional(DECISION_LATEST)?.as_ref(),
            self.optional(DECISIONS)?.as_ref(),
            id,
            version,
        )
    }

    /// Every deployed decision with its latest version, by id.
    pub fn decisions(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let Some(t) = self.optional(DECISION_LATEST)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for row in t.iter()? {
            let (k, v) = row?;
            out.push((k.value().to_string(), v.value()));
        }
        Ok(out)
    }
}
