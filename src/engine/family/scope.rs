//! Scopes: embedded and ad-hoc subprocesses, whose token rests while the
//! tokens inside run (`flow::enter_scope`, `ad_hoc`), and event
//! subprocesses, whose token listens for the event that starts them
//! (`event_subprocesses`).
//!
//! Invariant: an event subprocess's timer starts it only while its listener
//! still waits for that timer.

use super::*;

impl Engine<'_, '_> {
    /// A scope is entered: a subprocess starts inside, an ad-hoc subprocess
    /// opens its activities, an event subprocess's listener waits.
    pub(super) fn activate_scope(&mut self, at: At, kind: &ScopeKind) -> R<()> {
        let At { inst, token, idx } = at;
        match kind {
            ScopeKind::SubProcess { start, .. } => {
                self.enter_scope(inst, token, idx, *start);
                Ok(())
            }
            ScopeKind::AdHoc { .. } => self.enter_ad_hoc(inst, token, idx),
            // a token placed here listens for the event that starts it
            ScopeKind::EventSubProcess { .. } => self.arm_listener(inst, token, idx),
        }
    }

    /// The timer of an event subprocess's listener: a cycle of a
    /// non-interrupting one keeps listening with the same job, else the
    /// listener is done; the event subprocess starts.
    pub(super) fn scope_timer_due(
        &mut self,
        job: &JobRecord,
        tok: &Token,
        at: usize,
        kind: &ScopeKind,
    ) -> R<()> {
        let (def, interrupting) = match kind {
            ScopeKind::EventSubProcess {
                trigger: Trigger::Timer(def),
                interrupting,
                ..
            } => (def, *interrupting),
            // a stale job of a model changed under it
            ScopeKind::EventSubProcess { .. }
            | ScopeKind::SubProcess { .. }
            | ScopeKind::AdHoc { .. } => {
                return Ok(());
            }
        };
        if tok.wait != (Wait::Timer { job: job.id }) {
            return Ok(());
        }
        let inst = job.instance;
        if !interrupting && !self.rearm(inst, job, def)? {
            self.interrupt(inst, job.token)?;
        }
        self.start_event_subprocess(inst, tok.scope, at, &Vars::new(), "timer_fired")?;
        Ok(())
    }
}

pub(super) fn hosts_boundaries(kind: &ScopeKind) -> bool {
    match kind {
        ScopeKind::SubProcess { .. } | ScopeKind::AdHoc { .. } => true,
        ScopeKind::EventSubProcess { .. } => false,
    }
}
