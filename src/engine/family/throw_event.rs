//! Intermediate throw and end events: each throws what it names — a
//! signal, an error, an escalation, compensation, a transaction's cancel
//! (`throws`, `compensation`) — and its token goes on (throw) or ends (end
//! event); a terminate end event ends its whole scope.
//!
//! Invariant: an end event never leaves by a flow (the parser gives it
//! none); a cancel end event's token leaves its transaction by the
//! transaction's cancel boundary event.

use super::*;

impl Engine<'_, '_> {
    /// A throw event does its throw (a signal, an escalation, an error, a
    /// compensation, a link) or ends its token, its scope or the instance.
    pub(super) fn activate_throw(&mut self, at: At, kind: &ThrowKind) -> R<()> {
        let At { inst, token, idx } = at;
        let p = self.proc_of(inst);
        let id = &p.at(idx).id;
        match kind {
            ThrowKind::End => {
                self.history(inst, id, "completed");
                self.end_token(inst, token)?;
            }
            ThrowKind::Terminate => self.terminate(inst, token, id)?,
            ThrowKind::Error { .. } => self.throw_error_end(inst, token, idx)?,
            ThrowKind::Compensate { .. } => self.throw_compensation(inst, token, idx)?,
            ThrowKind::Cancel { .. } => self.cancel_transaction(inst, token, idx)?,
            ThrowKind::Escalation { .. } => self.escalate(inst, token, idx)?,
            ThrowKind::Signal { signal } => {
                let reached = self.broadcast(signal, &Vars::new())?;
                self.signal_out(signal, reached)?;
                self.history(inst, id, &format!("signal_thrown reached={reached}"));
                self.queue_leave(inst, token, idx);
            }
            // a link throw goes on at its catch along the flow the parser added
            ThrowKind::Plain | ThrowKind::Link { .. } => self.pass_through(inst, token, idx)?,
        }
        Ok(())
    }

    /// A completed throw event: `true` when its token left another way
    /// than by its flows (a cancel end event, by its transaction's cancel
    /// boundary event).
    pub(super) fn throw_completed(&mut self, inst: u64, token: u64, kind: &ThrowKind) -> R<bool> {
        match kind {
            ThrowKind::Cancel { transaction } => {
                self.leave_transaction(inst, token, *transaction)?;
                Ok(true)
            }
            ThrowKind::End
            | ThrowKind::Terminate
            | ThrowKind::Error { .. }
            | ThrowKind::Compensate { .. }
            | ThrowKind::Escalation { .. }
            | ThrowKind::Signal { .. }
            | ThrowKind::Plain
            | ThrowKind::Link { .. } => Ok(false),
        }
    }

    /// A terminate end event: its scope (the instance, or the subprocess it is
    /// in) ends at once, every other token of it withdrawn.
    fn terminate(&mut self, inst: u64, token: u64, id: &str) -> R<()> {
        self.history(inst, id, "terminated");
        let scope = self.scope_of(inst, token);
        self.fill_all(inst)?;
        let others: Vec<u64> = self
            .inst(inst)
            .tokens
            .iter()
            .filter(|t| t.id != token && (scope == 0 || t.scope == scope))
            .map(|t| t.id)
            .collect();
        // a scope token among them withdraws what runs inside it
        for t in others {
            self.interrupt(inst, t)?;
        }
        if scope == 0 {
            self.inst(inst).tokens.clear();
            // steps of this instance still queued belong to withdrawn tokens
            self.queue.retain(|s| s.instance() != inst);
            self.complete_instance(inst)
        } else {
            // the subprocess ends normally and its token moves on
            self.end_token(inst, token)
        }
    }
}
