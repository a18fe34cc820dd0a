//! Jobs (`jobs`) with the rows they own — `cont_due`, `topic_due`,
//! `leases`, `incident_jobs`, `start_timers` — and the ready and incident
//! gauges of their element and version.
//!
//! Invariant: a job is due in exactly one due index while it is ready, and
//! leased in `leases` exactly while a worker holds it.

use super::*;

/// The index rows a job record owns: its due row, its lease row, for the
/// schedule of a timer start event its process row, whether it counts as an
/// incident, and whether it is ready (both per element and definition version
/// for an instance's job).
#[derive(Clone, PartialEq)]
pub(super) struct JobRows(DueRow, Option<Millis>, Option<String>, bool, bool);

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
pub(super) enum DueRow {
    None,
    Continuation(Millis),
    Topic(String, Millis),
}

pub(super) fn due_row(j: &JobRecord) -> DueRow {
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

pub(super) fn lease_row(j: &JobRecord) -> Option<Millis> {
    j.lease.as_ref().map(|l| l.until)
}

impl Tables<'_> {
    /// A job record.
    pub fn job(&mut self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        let rec: Option<JobRecord> = get_record(self.jobs.get()?, id)?;
        if let Some(j) = &rec {
            self.job_rows.insert(id, Some(JobRows::of(j)));
        }
        Ok(rec)
    }

    /// The index rows of job `id` as stored now (`None`: no such job).
    pub(super) fn stored_job_rows(&mut self, id: u64) -> Result<Option<JobRows>, StoreError> {
        if let Some(rows) = self.job_rows.get(&id) {
            return Ok(rows.clone());
        }
        if self.jobs.get()?.get(id)?.is_none() {
            return Ok(None);
        }
        Ok(self.job(id)?.map(|j| JobRows::of(&j)))
    }

    /// Writes a job record and brings its due and lease rows in line with it.
    pub fn put_job(&mut self, rec: &JobRecord) -> Result<(), StoreError> {
        let new = JobRows::of(rec);
        if new.2.is_none() {
            self.touched.instance_written(rec.instance);
        }
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
                self.start_timers.get_mut()?.remove((p.as_str(), rec.id))?;
            }
            if let Some(p) = &new.2 {
                self.start_timers
                    .get_mut()?
                    .insert((p.as_str(), rec.id), ())?;
            }
        }
        if old.3 != new.3 {
            self.gauge(INCIDENTS_GAUGE, new.3)?;
            if new.3 {
                self.incident_jobs.get_mut()?.insert(rec.id, ())?;
            } else {
                self.incident_jobs.get_mut()?.remove(rec.id)?;
            }
        }
        self.job_stat(
            rec,
            i64::from(new.4) - i64::from(old.4),
            i64::from(new.3) - i64::from(old.3),
        );
        self.jobs
            .get_mut()?
            .insert(rec.id, codec::encode(rec)?.as_slice())?;
        self.job_rows.insert(rec.id, Some(new));
        Ok(())
    }

    /// Removes a job with its due and lease rows.
    pub fn remove_job(&mut self, rec: &JobRecord) -> Result<(), StoreError> {
        let Some(JobRows(due, lease, schedule, incident, ready)) = self.stored_job_rows(rec.id)?
        else {
            return Ok(());
        };
        if schedule.is_none() {
            self.touched.instance_written(rec.instance);
        }
        self.due_rows(rec.id, &due, false)?;
        self.lease_rows(rec.id, lease, false)?;
        if incident {
            self.gauge(INCIDENTS_GAUGE, false)?;
            self.incident_jobs.get_mut()?.remove(rec.id)?;
        }
        self.job_stat(rec, -i64::from(ready), -i64::from(incident));
        if let Some(p) = schedule {
            self.start_timers.get_mut()?.remove((p.as_str(), rec.id))?;
        }
        self.job_rows.insert(rec.id, None);
        self.jobs.get_mut()?.remove(rec.id)?;
        Ok(())
    }

    /// Notes a move of the per-version job gauges of `rec`'s element (applied
    /// by [`Tables::finish`]). A timer start event's job has no instance.
    pub(super) fn job_stat(&mut self, rec: &JobRecord, ready: i64, incidents: i64) {
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

    /// Instance `inst` of `process` moves from version `from` to `to` (a
    /// migration): the job gauge moves of this transaction not yet applied
    /// are applied under `from`, and the ready and incident gauges of `jobs`
    /// (every job its tokens hold) move to `to`. Call before
    /// [`Tables::move_version`].
    pub fn move_job_versions(
        &mut self,
        inst: u64,
        jobs: &[JobRecord],
        (process, from): (&str, u32),
        to: u32,
    ) -> Result<(), StoreError> {
        self.settle_job_stats(inst, process, from)?;
        for j in jobs {
            self.move_job_gauges(j, process, from, to)?;
        }
        Ok(())
    }

    /// The job gauge moves of instance `inst` this transaction holds, applied
    /// now under (`process`, `version`): its version is about to change.
    fn settle_job_stats(
        &mut self,
        inst: u64,
        process: &str,
        version: u32,
    ) -> Result<(), StoreError> {
        let mine: Vec<(u64, String)> = self
            .job_stats
            .range((inst, String::new())..)
            .take_while(|((i, _), _)| *i == inst)
            .map(|(k, _)| k.clone())
            .collect();
        for k in mine {
            let Some((ready, incidents)) = self.job_stats.remove(&k) else {
                continue;
            };
            for (kind, delta) in [(STAT_READY, ready), (STAT_INCIDENTS, incidents)] {
                let key = stat_key(kind, process, version, &k.1);
                for _ in 0..delta.unsigned_abs() {
                    self.gauge(&key, delta > 0)?;
                }
            }
        }
        Ok(())
    }

    /// Job `j`'s ready and incident gauges move from version `from` of
    /// `process` to `to` (its instance migrates).
    fn move_job_gauges(
        &mut self,
        j: &JobRecord,
        process: &str,
        from: u32,
        to: u32,
    ) -> Result<(), StoreError> {
        let rows = self.stored_job_rows(j.id)?.unwrap_or(JobRows::NONE);
        for (kind, counted) in [(STAT_READY, rows.4), (STAT_INCIDENTS, rows.3)] {
            if counted {
                self.gauge(&stat_key(kind, process, from, &j.element), false)?;
                self.gauge(&stat_key(kind, process, to, &j.element), true)?;
            }
        }
        Ok(())
    }

    /// Job `id` belongs to element `element` from now on (its instance
    /// migrated): its gauges move with it.
    pub fn rename_job(&mut self, id: u64, element: &str) -> Result<(), StoreError> {
        let Some(mut job) = self.job(id)? else {
            return Ok(());
        };
        if job.element == element {
            return Ok(());
        }
        self.remove_job(&job)?;
        job.element = element.to_string();
        self.put_job(&job)
    }

    pub(super) fn due_rows(
        &mut self,
        id: u64,
        row: &DueRow,
        insert: bool,
    ) -> Result<(), StoreError> {
        match row {
            DueRow::None => {}
            DueRow::Continuation(at) if insert => {
                self.cont_due.get_mut()?.insert((*at, id), ())?;
            }
            DueRow::Continuation(at) => {
                self.cont_due.get_mut()?.remove((*at, id))?;
            }
            DueRow::Topic(topic, at) if insert => {
                self.topic_due
                    .get_mut()?
                    .insert((topic.as_str(), *at, id), ())?;
            }
            DueRow::Topic(topic, at) => {
                self.topic_due
                    .get_mut()?
                    .remove((topic.as_str(), *at, id))?;
            }
        }
        Ok(())
    }

    pub(super) fn lease_rows(
        &mut self,
        id: u64,
        until: Option<Millis>,
        insert: bool,
    ) -> Result<(), StoreError> {
        match until {
            Some(u) if insert => {
                self.leases.get_mut()?.insert((u, id), ())?;
            }
            Some(u) => {
                self.leases.get_mut()?.remove((u, id))?;
            }
            None => {}
        }
        Ok(())
    }

    /// Whether job `id` is a timer start's (read only while a move is in
    /// flight, for a job whose slot is not live).
    fn is_start_timer(&self, id: u64) -> Result<bool, StoreError> {
        let job: Option<JobRecord> = get_record(self.jobs.get()?, id)?;
        Ok(job.is_some_and(|j| matches!(j.kind, JobKind::StartTimer { .. })))
    }

    /// Up to `limit` continuation and timer jobs due by `now`, oldest first.
    pub fn due_continuations(&self, now: Millis, limit: usize) -> Result<Vec<u64>, StoreError> {
        let mut due = Vec::new();
        for row in self.cont_due.get()?.range((0u64, 0u64)..=(now, u64::MAX))? {
            let id = row?.0.value().1;
            // a slot in a move waits; a start timer is the partition's
            if !self.is_live(id)? && !self.is_start_timer(id)? {
                continue;
            }
            due.push(id);
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
            .get()?
            .range((topic, 0u64, 0u64)..=(topic, now, u64::MAX))?
        {
            let id = row?.0.value().2;
            if !self.is_live(id)? {
                continue;
            }
            ids.push(id);
            if ids.len() >= limit {
                break;
            }
        }
        Ok(ids)
    }

    /// Leases that run out by `until`, as (until, job).
    pub fn leases_until(&self, until: Millis) -> Result<Vec<(Millis, u64)>, StoreError> {
        let mut out = Vec::new();
        for row in self.leases.get()?.range((0u64, 0u64)..=(until, u64::MAX))? {
            let (at, id) = row?.0.value();
            if self.is_live(id)? {
                out.push((at, id));
            }
        }
        Ok(out)
    }

    /// The schedules (jobs) of the timer start events of `process`, any version.
    pub fn start_timers_of(&self, process: &str) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .start_timers
            .get()?
            .range((process, 0u64)..=(process, u64::MAX))?
        {
            out.push(row?.0.value().1);
        }
        Ok(out)
    }

    /// Drops a `leases` row whose job is gone (see [`Tables::drop_orphan_expiry`]).
    pub fn drop_orphan_lease(&mut self, until: Millis, id: u64) -> Result<(), StoreError> {
        self.leases.get_mut()?.remove((until, id))?;
        Ok(())
    }
}
