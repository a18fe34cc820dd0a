//! Timers: every timer a token waits for or listens with — a timer catch
//! event (alone or behind an event-based gateway), a timer boundary event,
//! an event subprocess's timer start — and the timer start events of a
//! deployed process; opened here, fired here, repeated here.
//!
//! Invariant: a timer is a job of kind `Timer` (or `StartTimer`) whose due
//! time is the timer's next instant; a variable timer reads its variable
//! when it opens and again before it repeats, and a value it cannot use is
//! an incident (opening) or the end of the repetition (repeating), named in
//! the history — never a silent stop. A timer job that fires for a token
//! that no longer waits for it is stale and does nothing.

use super::*;

impl Engine<'_, '_> {
    /// Opens a timer at `element` for token `token`: its definition as it
    /// runs now ([`Engine::timer_for`]), a job due at its first instant,
    /// repeating as a cycle says when `repeats`. `Err` is the incident text
    /// of a variable timer that names no usable time.
    pub(super) fn open_timer(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        def: &model::TimerDef,
        repeats: bool,
    ) -> R<Result<u64, String>> {
        let def = match self.timer_for(inst, token, element, def)? {
            Ok(def) => def,
            Err(why) => return Ok(Err(why)),
        };
        let repetitions_left = if repeats { def.repetitions() } else { None };
        let job = self.create_job_at(
            inst,
            token,
            element,
            JobKind::Timer { repetitions_left },
            def.first_due(self.now),
        )?;
        Ok(Ok(job))
    }

    /// `def` as it runs for token `token` of `inst`: a variable timer reads
    /// its value now. `Err` is the incident text, naming `element` and the
    /// variable.
    pub(super) fn timer_for<'d>(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        def: &'d model::TimerDef,
    ) -> R<Result<std::borrow::Cow<'d, model::TimerDef>, String>> {
        if !matches!(def, model::TimerDef::Variable { .. }) {
            return Ok(Ok(std::borrow::Cow::Borrowed(def)));
        }
        let vars = self.vars_all(inst, token)?;
        let from = match def {
            model::TimerDef::Variable { path, .. } if !model::is_path(path) => "an expression",
            _ => "a variable",
        };
        Ok(def.resolve(&vars, self.now).map(std::borrow::Cow::Owned).map_err(|why| {
            format!(
                "timer '{element}' reads its time from {from}, and {why}: set it, then move this token here again"
            )
        }))
    }

    pub(super) fn schedule_start_timers(&mut self, p: &Process, version: u32) -> R<()> {
        for id in self.t.start_timers_of(&p.id)? {
            if let Some(job) = self.t.job(id)? {
                self.t.remove_job(&job)?;
            }
        }
        for (idx, timer) in p.timer_starts() {
            let repetitions_left = timer.repetitions();
            // a start timer belongs to the partition, not to a slot's key
            let slot = self.home_slot().unwrap_or(0);
            let id = self.t.next_job_id(slot)?;
            let element = p.at(idx).id.clone();
            self.t.put_job(&JobRecord {
                id,
                instance: 0,
                token: 0,
                element: element.clone(),
                kind: JobKind::StartTimer {
                    process: p.id.clone(),
                    version,
                    repetitions_left,
                },
                state: JobState::Ready,
                due_at: timer.first_due(self.now),
                attempts: 0,
                last_error: None,
                idempotency_key: format!("{}:{version}:{element}", p.id),
                created_at: self.now,
                lease: None,
                max_attempts: None,
                history: Vec::new(),
            })?;
        }
        Ok(())
    }

    /// A due timer start event: starts one instance, and for a cycle schedules
    /// the next due time of the same schedule. Due times missed while nothing
    /// ran are not made up: one instance, then the next time still ahead.
    pub(super) fn fire_start_timer(&mut self, job: JobRecord) -> R<()> {
        let JobKind::StartTimer {
            process,
            version,
            repetitions_left,
        } = &job.kind
        else {
            return Ok(());
        };
        let def = self.def(process, *version)?;
        let Some(idx) = def.index_of(&job.element) else {
            return Ok(()); // a stored schedule of an element the model no longer has
        };
        if let ElementKind::Start(StartKind::Timer { timer }) = &def.at(idx).kind
            && *repetitions_left != Some(1)
            && let Some(due) = timer.next_due(job.due_at, self.now)
        {
            let mut next = job.clone();
            next.due_at = due;
            next.kind = JobKind::StartTimer {
                process: process.clone(),
                version: *version,
                repetitions_left: repetitions_left.map(|n| n.saturating_sub(1)),
            };
            self.t.put_job(&next)?;
        }
        let slot = self.home_slot()?;
        self.create_instance(def, *version, Vars::new(), None, idx, slot)?;
        self.run()
    }

    /// When a repeating timer that fired at `job.due_at` is due next: a
    /// cycle read from a variable reads it again (what it holds now); one
    /// that names no cycle any more stops repeating, recorded in the
    /// history with the reason.
    fn next_fire(
        &mut self,
        inst: u64,
        job: &JobRecord,
        def: &model::TimerDef,
    ) -> R<Option<Millis>> {
        match self.timer_for(inst, job.token, &job.element, def)? {
            Ok(def) => Ok(def.next_due(job.due_at, self.now)),
            Err(why) => {
                self.history(inst, &job.element, &format!("timer_stopped: {why}"));
                Ok(None)
            }
        }
    }

    /// A repeating timer job that fired is due again: stored with its next
    /// due time and one repetition fewer. False when it does not repeat (a
    /// date or duration, its last repetition, or a cycle that no longer
    /// names a time): the caller closes it.
    pub(super) fn rearm(&mut self, inst: u64, job: &JobRecord, def: &model::TimerDef) -> R<bool> {
        let left = match job.kind {
            JobKind::Timer { repetitions_left } => repetitions_left,
            _ => Some(1),
        };
        if left == Some(1) {
            return Ok(false);
        }
        let Some(due) = self.next_fire(inst, job, def)? else {
            return Ok(false);
        };
        let mut next = job.clone();
        next.due_at = due;
        next.kind = JobKind::Timer {
            repetitions_left: left.map(|n| n.saturating_sub(1)),
        };
        self.t.put_job(&next)?;
        Ok(true)
    }

    /// A due timer job: a timer catch event (possibly behind an event-based
    /// gateway) or a boundary timer.
    pub(super) fn fire_timer(&mut self, job: JobRecord) -> R<()> {
        let inst = job.instance;
        self.load_at(inst, job.token)?;
        let p = self.proc_of(inst);
        let Some(at) = p.index_of(&job.element) else {
            return Ok(());
        };
        let Some(tok) = self.inst(inst).tokens.get(job.token).cloned() else {
            return Ok(()); // the token moved on: a stale timer
        };
        self.timer_due(&job, &tok, at)?;
        self.run()
    }
}
