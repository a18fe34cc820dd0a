//! Boundary events: opened and closed with the token of the activity or
//! scope they are attached to (`waits`); a token created when one fires
//! leaves it at once.
//!
//! Invariant: a boundary timer fires only while its host's token still
//! holds that timer.

use super::*;

impl Engine<'_, '_> {
    pub(super) fn activate_boundary(&mut self, inst: u64, token: u64, idx: usize) {
        self.queue_leave(inst, token, idx);
    }

    /// A boundary timer: an interrupting one withdraws its host; a cycle
    /// of a non-interrupting one is armed again; a new token leaves it.
    pub(super) fn boundary_timer_due(
        &mut self,
        job: &JobRecord,
        tok: &Token,
        at: usize,
        host: usize,
        cancel: bool,
        trigger: &Trigger,
    ) -> R<()> {
        let inst = job.instance;
        let p = self.proc_of(inst);
        let Trigger::Timer(def) = trigger else {
            return Ok(()); // a stale job of a model changed under it
        };
        if tok.element != p.at(host).id || !tok.timers.contains(&job.id) {
            return Ok(());
        }
        self.history(inst, &job.element, "timer_fired");
        if cancel {
            self.interrupt(inst, job.token)?;
        } else if !self.rearm(inst, job, def)?
            && let Some(t) = self.inst(inst).tokens.get_mut(job.token)
        {
            t.timers.retain(|&j| j != job.id);
        }
        let new = self.new_token(inst, &job.element, tok.scope);
        self.queue_leave(inst, new, at);
        Ok(())
    }
}
