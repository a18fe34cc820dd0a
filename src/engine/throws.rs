//! BPMN errors and escalations: where a throw is caught.
//!
//! Invariant: a throw is caught by the innermost catcher — the boundary events
//! of the activity whose worker threw it, then those of each subprocess around
//! it, outwards — and the catching boundary event fires through
//! `fire_boundary`, the one place an interrupting boundary event cancels its
//! activity or scope. An error nobody catches is an incident; an escalation
//! nobody catches is recorded and the token goes on.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// The innermost boundary event whose trigger `catches`, for a throw from
    /// `token`: with `own`, the boundary events of the activity the token is
    /// in come first; then those of the subprocesses around it. Returns the
    /// token holding that activity or scope, and the boundary event.
    pub(super) fn catcher(
        &mut self,
        inst: u64,
        token: u64,
        own: bool,
        catches: impl Fn(&Trigger) -> bool,
    ) -> Option<(u64, usize)> {
        let p = self.proc_of(inst);
        let mut holder = if own {
            token
        } else {
            self.scope_of(inst, token)
        };
        let limit = self.inst(inst).tokens.len();
        for _ in 0..=limit {
            if holder == 0 {
                return None;
            }
            let at = self
                .inst(inst)
                .tokens
                .iter()
                .find(|t| t.id == holder)
                .and_then(|t| p.index_of(&t.element))?;
            let caught = p.at(at).boundaries.iter().copied().find(|&b| {
                matches!(&p.at(b).kind, ElementKind::Boundary { trigger, .. } if catches(trigger))
            });
            if let Some(b) = caught {
                return Some((holder, b));
            }
            holder = self.scope_of(inst, holder);
        }
        None
    }

    /// An error end event throws `code`: the subprocess that catches it is
    /// cancelled with everything inside (this token too) and its boundary
    /// event's token moves on; uncaught, the token stops at an incident.
    pub(super) fn throw_error_end(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::ErrorEnd { code } = &el.kind else {
            return Ok(());
        };
        let code = code.clone().unwrap_or_default();
        self.history(inst, &el.id, &format!("bpmn_error {code}"));
        match self.catcher(inst, token, false, |t| t.catches_error(&code)) {
            Some((holder, b)) => {
                self.fire_boundary(inst, holder, b, &Vars::new(), "error_caught")?;
            }
            None => {
                let error = format!(
                    "BPMN error '{code}' thrown by end event '{}' is not caught: no subprocess around it has an error boundary event for it",
                    el.id
                );
                self.incident(inst, token, &el.id, error);
            }
        }
        Ok(())
    }

    /// An escalation throw or end event: the innermost escalation boundary
    /// event of the subprocesses around it that catches the code fires; an
    /// interrupting one cancels its subprocess (this token with it). Otherwise
    /// the token goes on (throw) or ends (end event).
    pub(super) fn escalate(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Escalation { code, end } = &el.kind else {
            return Ok(());
        };
        let (code, end) = (code.clone(), *end);
        let label = code.clone().unwrap_or_default();
        self.history(inst, &el.id, &format!("escalation_thrown {label}"));
        let mut interrupted = false;
        match self.catcher(inst, token, false, |t| {
            t.catches_escalation(code.as_deref())
        }) {
            Some((holder, b)) => {
                interrupted = matches!(p.at(b).kind, ElementKind::Boundary { cancel: true, .. });
                self.fire_boundary(inst, holder, b, &Vars::new(), "escalation_caught")?;
            }
            None => self.history(inst, &el.id, "escalation_uncaught"),
        }
        if interrupted {
            return Ok(()); // withdrawn with the scope that caught it
        }
        if end {
            self.history(inst, &el.id, "completed");
            return self.end_token(inst, token);
        }
        self.queue.push_back(Step::Leave {
            inst,
            token,
            element: idx,
        });
        Ok(())
    }
}
