//! Jobs: async continuations, task jobs for handlers and external workers,
//! timers, leases with fencing tokens, retries, incidents, BPMN errors.
//!
//! Invariant: a job's due and lease index rows change with the job record; a
//! stale lease token is refused; failed attempts end in an incident, never a
//! silent dead end.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    pub(super) fn create_job(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        kind: JobKind,
    ) -> R<u64> {
        self.create_job_at(inst, token, element, kind, self.now)
    }

    pub(super) fn create_job_at(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        kind: JobKind,
        due_at: Millis,
    ) -> R<u64> {
        let id = self.t.next_job_id(self.slot_of_id(inst)?)?;
        let rec = self.inst(inst);
        rec.activations += 1;
        let key = format!("{inst}:{element}:{}", rec.activations);
        let job = JobRecord {
            id,
            instance: inst,
            token,
            element: element.to_string(),
            kind: kind.clone(),
            state: JobState::Ready,
            due_at,
            attempts: 0,
            last_error: None,
            idempotency_key: key,
            created_at: self.now,
            lease: None,
            max_attempts: None,
            history: Vec::new(),
        };
        self.t.put_job(&job)?;
        self.jobs_created.push(id);
        self.history(inst, element, "job_created");
        Ok(id)
    }

    /// Runs up to `limit` due async continuations; returns how many ran.
    pub fn run_continuations(&mut self, limit: usize) -> R<usize> {
        let due = self.t.due_continuations(self.now, limit)?;
        for &id in &due {
            let Some(job) = self.t.job(id)? else { continue };
            self.t.remove_job(&job)?;
            match job.kind {
                JobKind::Timer { .. } => {
                    self.fire_timer(job)?;
                    continue;
                }
                JobKind::StartTimer { .. } => {
                    self.fire_start_timer(job)?;
                    continue;
                }
                JobKind::Continue | JobKind::ContinueAfter | JobKind::Task { .. } => {}
            }
            self.load_at(job.instance, job.token)?;
            let p = self.proc_of(job.instance);
            let Some(idx) = p.index_of(&job.element) else {
                continue;
            };
            self.history(job.instance, &job.element, "job_executed");
            if job.kind == JobKind::ContinueAfter {
                self.depart(job.instance, job.token, idx)?;
            } else {
                self.queue.push_back(Step::Execute {
                    inst: job.instance,
                    token: job.token,
                    element: idx,
                });
            }
            self.run()?;
        }
        Ok(due.len())
    }

    /// Locks up to `max` due task jobs of `topic` for `owner` until now +
    /// `lease`. Each job carries the variables its token sees (with the task's
    /// input mappings), or with `fetch` only those named. An instance is read
    /// once per call however many of its jobs are locked.
    pub fn lock_jobs(
        &mut self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
        in_process: bool,
        fetch: Option<&[String]>,
    ) -> R<Vec<LockedJob>> {
        let ids = self.t.due_tasks(topic, self.now, max)?;
        let mut out = Vec::with_capacity(ids.len());
        let mut read: foldhash::HashMap<u64, Option<(InstanceRecord, Arc<Process>)>> =
            foldhash::HashMap::with_capacity_and_hasher(ids.len(), Default::default());
        for id in ids {
            let Some(mut job) = self.t.job(id)? else {
                continue;
            };
            let token = self.t.next_seq("lease")?;
            job.state = JobState::Locked;
            job.lease = Some(Lease {
                owner: owner.to_string(),
                token,
                until: self.now.saturating_add(lease),
                in_process,
            });
            self.t.put_job(&job)?;
            if let std::collections::hash_map::Entry::Vacant(slot) = read.entry(job.instance) {
                let found = match self.t.instance(job.instance)? {
                    Some(i) => {
                        let p = self.def(&i.process, i.version)?;
                        Some((i, p))
                    }
                    None => None,
                };
                slot.insert(found);
            }
            if let Some(Some((i, p))) = read.get_mut(&job.instance) {
                self.t.fill_chain(job.instance, &mut i.tokens, job.token)?;
                // a worker that names its variables gets (and costs) only those
                let inputs = p
                    .element(&job.element)
                    .is_some_and(|e| !e.extras.inputs.is_empty());
                match fetch {
                    Some(names) if !inputs => {
                        for n in names {
                            self.t.fill_variable(job.instance, &mut i.variables, n)?;
                        }
                    }
                    _ => self.t.fill_variables(job.instance, &mut i.variables)?,
                }
            }
            let mut failed = None;
            let (variables, work) = match &read[&job.instance] {
                Some((i, p)) => {
                    let el = p.element(&job.element);
                    let work = match el.map(|e| &e.kind) {
                        Some(ElementKind::Activity(ActivityKind::Delegated { work, .. })) => {
                            Some(work.clone())
                        }
                        _ => None,
                    };
                    let inputs = el.map(|e| &e.extras.inputs).filter(|m| !m.is_empty());
                    let variables = match (fetch, inputs) {
                        (Some(names), None) => i.view_of(job.token, names),
                        (fetch, inputs) => {
                            let mut all = i.view(job.token).into_owned();
                            if let Some(m) = inputs {
                                match model::mapped(m, &all, self.now) {
                                    Ok(mapped) => all.extend(mapped),
                                    Err(e) => failed = Some(e),
                                }
                            }
                            if let Some(names) = fetch {
                                all.retain(|k, _| names.contains(k));
                            }
                            all
                        }
                    };
                    (variables, work)
                }
                None => (Vars::new(), None),
            };
            if let Some(e) = failed {
                // its worker would get wrong inputs: the job stops at an
                // incident naming the mapping (retried once it is fixed)
                let error = format!("input {e}");
                job.attempt_failed(self.now, error.clone());
                job.state = JobState::Incident;
                job.lease = None;
                self.t.put_job(&job)?;
                self.history(job.instance, &job.element, "incident");
                tracing::warn!(job = id, element = %job.element, error, "job input mapping failed");
                continue;
            }
            out.push(LockedJob {
                task: JobContext {
                    job: id,
                    instance: job.instance,
                    element: job.element.clone(),
                    topic: topic.to_string(),
                    variables,
                    idempotency_key: job.idempotency_key.clone(),
                    attempt: job.attempts + 1,
                    work,
                },
                lease_token: token,
            });
        }
        Ok(out)
    }

    pub(super) fn check_lease(&self, job: &JobRecord, lease_token: Option<u64>) -> R<()> {
        match (lease_token, &job.lease, job.state) {
            (None, _, JobState::Ready) => Ok(()),
            (None, _, JobState::Locked) => Err(EngineError::JobState {
                job: job.id,
                refusal: JobRefusal::LockedByWorker,
            }),
            (_, _, JobState::Incident) => Err(EngineError::JobState {
                job: job.id,
                refusal: JobRefusal::Incident,
            }),
            (Some(t), Some(l), JobState::Locked) if l.token == t => Ok(()),
            (Some(_), _, _) => Err(EngineError::StaleLease(job.id)),
        }
    }

    /// Completes a task job: merges `vars` and moves the token on.
    /// `lease_token` is the one handed out by [`Engine::lock_jobs`]; `None` completes
    /// an unlocked job by hand.
    pub fn complete_job(&mut self, id: u64, lease_token: Option<u64>, vars: &Vars) -> R<()> {
        let job = self.own_job(id)?;
        self.check_lease(&job, lease_token)?;
        if !matches!(job.kind, JobKind::Task { .. }) {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::Continuation,
            });
        }
        self.load_at(job.instance, job.token)?;
        self.t.remove_job(&job)?;
        let p = self.proc_of(job.instance);
        let idx = p
            .index_of(&job.element)
            .ok_or_else(|| EngineError::UnknownElement {
                process: p.id.clone(),
                element: job.element.clone(),
            })?;
        self.history(job.instance, &job.element, "job_completed");
        self.t.bump(Counter::JobAttemptsCompleted, 1)?;
        if self.complete_with(job.instance, job.token, idx, vars)? {
            self.queue_leave(job.instance, job.token, idx);
        }
        self.run()
    }

    /// Records a failed attempt. The job retries after a delay (the element's fixed
    /// delay, or doubling from `retry_base` up to `retry_cap` with ±10 % jitter)
    /// until its attempts are used up; then it is an incident.
    ///
    /// A worker may say how many more attempts are left (`retries_left`; 0 makes it
    /// an incident now) and when to retry (`retry_delay`).
    pub fn fail_job(
        &mut self,
        id: u64,
        lease_token: Option<u64>,
        error: &str,
        retries_left: Option<u32>,
        retry_delay: Option<Millis>,
    ) -> R<JobState> {
        let mut job = self.own_job(id)?;
        self.check_lease(&job, lease_token)?;
        self.load_at(job.instance, job.token)?;
        let policy = self
            .proc_of(job.instance)
            .element(&job.element)
            .and_then(|e| e.retry);
        job.attempt_failed(self.now, error.to_string());
        self.t.bump(Counter::JobAttemptsFailed, 1)?;
        if let Some(left) = retries_left {
            job.max_attempts = Some(job.attempts.saturating_add(left));
        }
        let limit = job
            .max_attempts
            .or(policy.map(|p| p.attempts))
            .unwrap_or(self.cfg.max_attempts);
        if job.attempts >= limit {
            job.state = JobState::Incident;
            self.history(job.instance, &job.element, "incident");
            tracing::warn!(job = id, element = %job.element, attempts = job.attempts, error, "job became an incident");
        } else {
            job.state = JobState::Ready;
            let delay = retry_delay
                .or(policy.and_then(|p| p.delay))
                .unwrap_or_else(|| backoff(self.cfg, id, job.attempts));
            job.due_at = self.now.saturating_add(delay);
        }
        self.t.put_job(&job)?;
        self.flush()?;
        Ok(job.state)
    }

    /// Extends a worker's lease to now + `by`; refused when the lease was lost.
    pub fn extend_lease(&mut self, id: u64, lease_token: u64, by: Millis) -> R<Millis> {
        let mut job = self.own_job(id)?;
        let Some(lease) = job
            .lease
            .as_mut()
            .filter(|l| l.token == lease_token && job.state == JobState::Locked)
        else {
            return Err(EngineError::StaleLease(id));
        };
        lease.until = self.now.saturating_add(by);
        let until = lease.until;
        self.t.put_job(&job)?;
        Ok(until)
    }

    /// Makes an incident runnable again.
    pub fn retry_job(&mut self, id: u64) -> R<()> {
        let mut job = self.own_job(id)?;
        if job.state != JobState::Incident {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::NotAnIncident,
            });
        }
        job.state = JobState::Ready;
        job.attempts = 0;
        job.due_at = self.now;
        self.t.put_job(&job)?;
        self.load_at(job.instance, job.token)?;
        self.history(job.instance, &job.element, "incident_retried");
        self.flush()
    }

    /// Returns jobs whose lease ran out to the ready queue.
    pub fn release_expired_leases(&mut self) -> R<usize> {
        self.release_leases_until(self.now)
    }

    /// Releases every lease at once: used at open, when this process is the
    /// database's only owner and no earlier lease holder can still be running.
    pub fn release_all_leases(&mut self) -> R<usize> {
        self.release_leases(u64::MAX, true)
    }

    pub(super) fn release_leases_until(&mut self, until: Millis) -> R<usize> {
        self.release_leases(until, false)
    }

    pub(super) fn release_leases(&mut self, until: Millis, only_in_process: bool) -> R<usize> {
        let mut released = 0;
        for (lease_end, id) in self.t.leases_until(until)? {
            let mut job = match self.t.job(id)? {
                Some(j) if j.lease.as_ref().is_some_and(|l| l.until == lease_end) => j,
                _ => {
                    self.t.drop_orphan_lease(lease_end, id)?;
                    continue;
                }
            };
            if only_in_process && !job.lease.as_ref().is_some_and(|l| l.in_process) {
                continue;
            }
            released += 1;
            job.lease = None;
            job.state = JobState::Ready;
            job.due_at = self.now;
            self.t.put_job(&job)?;
        }
        Ok(released)
    }

    pub(super) fn delete_job(&mut self, id: u64) -> R<()> {
        if let Some(job) = self.t.job(id)? {
            self.t.remove_job(&job)?;
        }
        Ok(())
    }

    /// Schedules the timer start events of a newly deployed version and drops
    /// the schedules of every earlier version of that process.
    /// Job `id` of this partition, or why not.
    fn own_job(&mut self, id: u64) -> R<JobRecord> {
        self.own_id("job", id)?;
        self.t.job(id)?.ok_or(EngineError::UnknownJob(id))
    }

    /// A worker throws a BPMN error from a task job: an error boundary event on
    /// the task with a matching code (or none) takes the token; without one the
    /// job becomes an incident. Returns whether a boundary caught it.
    pub fn throw_error(
        &mut self,
        id: u64,
        lease_token: Option<u64>,
        code: &str,
        message: &str,
        vars: &Vars,
    ) -> R<bool> {
        let mut job = self.own_job(id)?;
        self.check_lease(&job, lease_token)?;
        if !matches!(job.kind, JobKind::Task { .. }) {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::NotATask,
            });
        }
        self.load_at(job.instance, job.token)?;
        let inst = job.instance;
        let p = self.proc_of(inst);
        if p.index_of(&job.element).is_none() {
            return Err(EngineError::UnknownElement {
                process: p.id.clone(),
                element: job.element.clone(),
            });
        }
        match self.catcher(inst, job.token, true, |t| t.catches_error(code)) {
            Some(c) => {
                self.history(inst, &job.element, &format!("bpmn_error {code}"));
                // the task, or the subprocess that catches it with all inside
                self.caught(c, vars, "error_caught")?;
                self.run()?;
                Ok(true)
            }
            None => {
                let error = format!(
                    "BPMN error '{code}' ({message}) is not caught: '{}' nothing around it (boundary event, subprocess, event subprocess) catches it",
                    job.element
                );
                job.attempt_failed(self.now, error);
                job.state = JobState::Incident;
                self.history(inst, &job.element, "incident");
                self.t.put_job(&job)?;
                self.flush()?;
                Ok(false)
            }
        }
    }
}
