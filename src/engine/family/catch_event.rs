//! Intermediate catch events: the token rests until what it catches
//! happens — a message (`catch`), a timer (`timers`), a signal, a condition
//! (`conditions`); a link catch passes the token on.
//!
//! Invariant: a timer catch fires only while its token still waits for that
//! timer (alone or behind an event-based gateway).

use super::*;

impl Engine<'_, '_> {
    /// A catch event waits for its timer, message, signal or condition (a
    /// condition that holds already lets the token pass); a link catch
    /// passes on.
    pub(super) fn activate_catch(&mut self, at: At, kind: &CatchKind) -> R<()> {
        let At { inst, token, idx } = at;
        let p = self.proc_of(inst);
        let id = &p.at(idx).id;
        match kind {
            CatchKind::Timer { timer } => match self.open_timer(inst, token, id, timer, false)? {
                Ok(job) => {
                    self.set_token(inst, token, id, Wait::Timer { job });
                    self.history(inst, id, "waiting");
                }
                Err(error) => self.incident(inst, token, id, error),
            },
            CatchKind::Message { message } => self.await_message(inst, token, idx, message)?,
            CatchKind::Signal { signal } => {
                self.wait_for_signal(inst, token, id, signal)?;
                self.history(inst, id, "waiting");
            }
            CatchKind::Conditional { condition } => {
                if self.holds(inst, token, condition)? {
                    self.history(inst, id, "condition_met");
                    self.queue_leave(inst, token, idx);
                } else {
                    self.set_token(inst, token, id, Wait::Condition);
                    self.history(inst, id, "waiting");
                }
            }
            // a link throw went on here along the flow the parser added
            CatchKind::Link { .. } => self.pass_through(inst, token, idx)?,
        }
        Ok(())
    }

    /// A timer catch event's timer: the token (or its event-based gateway)
    /// leaves by this event, its other subscriptions withdrawn.
    pub(super) fn catch_timer_due(
        &mut self,
        job: &JobRecord,
        tok: &Token,
        at: usize,
        kind: &CatchKind,
    ) -> R<()> {
        match kind {
            CatchKind::Timer { .. } => {}
            // a stale job of a model changed under it
            CatchKind::Message { .. }
            | CatchKind::Signal { .. }
            | CatchKind::Conditional { .. }
            | CatchKind::Link { .. } => return Ok(()),
        }
        let waiting = match &tok.wait {
            Wait::Timer { job: j } => *j == job.id,
            Wait::Events { timers, .. } => timers.contains(&job.id),
            _ => false,
        };
        if !waiting {
            return Ok(());
        }
        let inst = job.instance;
        let from = self.force_target(inst, job.token, at);
        self.cancel_wait(inst, job.token)?;
        self.history(inst, &job.element, "timer_fired");
        self.queue_leave(inst, job.token, from);
        Ok(())
    }
}

/// What a catch event behind an event-based gateway waits for.
pub(super) fn branch(kind: &CatchKind) -> Branch<'_> {
    match kind {
        CatchKind::Message { message } => Branch::Message(message),
        CatchKind::Signal { signal } => Branch::Signal(signal),
        CatchKind::Timer { timer } => Branch::Timer(timer),
        CatchKind::Conditional { .. } | CatchKind::Link { .. } => Branch::None,
    }
}
