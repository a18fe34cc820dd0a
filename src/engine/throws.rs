//! BPMN errors and escalations: where a throw is caught.
//!
//! Invariant: a throw is caught by the innermost catcher — the boundary events
//! of the activity whose worker threw it, then, scope by scope outwards, the
//! scope's event subprocesses and the boundary events of the subprocess
//! holding it — and fires through `fire_boundary` or
//! `start_event_subprocess`, the places where an interrupting catcher cancels
//! what it interrupts. An error nobody catches is an incident; an escalation
//! nobody catches is recorded and the token goes on.

use super::*;

/// Where a throw is caught.
pub(super) enum Catch {
    /// A boundary event of the activity or subprocess `holder` holds in
    /// instance `inst`.
    Boundary {
        inst: u64,
        holder: u64,
        boundary: usize,
    },
    /// An event subprocess of `scope` (0: the process) of instance `inst`.
    EventSubProcess { inst: u64, scope: u64, esp: usize },
}

impl<'a, 't> Engine<'a, 't> {
    /// The innermost catcher whose trigger `catches`, for a throw from
    /// `token`: with `own`, the boundary events of the activity the token is
    /// in first; then, scope by scope outwards, the event subprocesses of the
    /// scope (not the one the throw comes out of) and the boundary events of
    /// the subprocess holding it.
    pub(super) fn catcher(
        &mut self,
        inst: u64,
        token: u64,
        own: bool,
        catches: impl Fn(&Trigger) -> bool,
    ) -> Option<Catch> {
        let p = self.proc_of(inst);
        let holds = |k: &ElementKind| matches!(k, ElementKind::Boundary { trigger, .. } if catches(trigger));
        let boundary_of = |at: usize| {
            p.at(at)
                .boundaries
                .iter()
                .copied()
                .find(|&b| holds(&p.at(b).kind))
        };
        let element_of = |me: &mut Self, t: u64| {
            me.inst(inst)
                .tokens
                .get(t)
                .and_then(|x| p.index_of(&x.element))
        };
        // an inner instance of a multi-instance activity: its body holds the boundary events
        let holder_of = |me: &mut Self, t: u64| me.inst(inst).body_of(t).unwrap_or(t);
        if own
            && let Some(at) = element_of(self, token)
            && let Some(b) = boundary_of(at)
        {
            return Some(Catch::Boundary {
                inst,
                holder: holder_of(self, token),
                boundary: b,
            });
        }
        let mut scope = self.scope_of(inst, token);
        let mut came_from: Option<usize> = None;
        for _ in 0..=crate::store::MAX_NESTING {
            if scope != 0
                && matches!(
                    self.inst(inst).tokens.get(scope),
                    Some(Token {
                        wait: Wait::Body { .. },
                        ..
                    })
                )
            {
                // a body is no scope of its own: its boundary events were
                // asked for the inner instance
                scope = self.scope_of(inst, scope);
                continue;
            }
            let container = match scope {
                0 => None,
                s => Some(element_of(self, s)?),
            };
            let esp = p.event_subprocesses_of(container).into_iter().find(|&e| {
                Some(e) != came_from
                    && matches!(&p.at(e).kind, ElementKind::Scope(ScopeKind::EventSubProcess { trigger, .. }) if catches(trigger))
            });
            if let Some(esp) = esp {
                return Some(Catch::EventSubProcess { inst, scope, esp });
            }
            let Some(at) = container else {
                // uncaught in this instance: on at the call activity that started it
                let (parent, token) = self.inst(inst).called_by?;
                self.load_at(parent, token).ok()?;
                return self.catcher(parent, token, true, catches);
            };
            if let Some(b) = boundary_of(at) {
                return Some(Catch::Boundary {
                    inst,
                    holder: holder_of(self, scope),
                    boundary: b,
                });
            }
            came_from = matches!(
                p.at(at).kind,
                ElementKind::Scope(ScopeKind::EventSubProcess { .. })
            )
            .then_some(at);
            scope = self.scope_of(inst, scope);
        }
        None
    }

    /// Fires what [`Engine::catcher`] found; returns whether it interrupts
    /// (the throwing token is withdrawn with the scope it cancels).
    pub(super) fn caught(&mut self, c: Catch, vars: &Vars, event: &str) -> R<bool> {
        match c {
            Catch::Boundary {
                inst,
                holder,
                boundary,
            } => {
                let p = self.proc_of(inst);
                self.fire_boundary(inst, holder, boundary, vars, event)?;
                Ok(matches!(
                    p.at(boundary).kind,
                    ElementKind::Boundary { cancel: true, .. }
                ))
            }
            Catch::EventSubProcess { inst, scope, esp } => {
                let p = self.proc_of(inst);
                self.start_event_subprocess(inst, scope, esp, vars, event)?;
                Ok(matches!(
                    p.at(esp).kind,
                    ElementKind::Scope(ScopeKind::EventSubProcess {
                        interrupting: true,
                        ..
                    })
                ))
            }
        }
    }

    /// An error end event throws `code`: the subprocess that catches it is
    /// cancelled with everything inside (this token too) and its boundary
    /// event's token moves on; uncaught, the token stops at an incident.
    pub(super) fn throw_error_end(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Throw(ThrowKind::Error { code }) = &el.kind else {
            return Ok(());
        };
        let code = code.clone().unwrap_or_default();
        self.history(inst, &el.id, &format!("bpmn_error {code}"));
        match self.catcher(inst, token, false, |t| t.catches_error(&code)) {
            Some(c) => {
                self.caught(c, &Vars::new(), "error_caught")?;
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
        let ElementKind::Throw(ThrowKind::Escalation { code, end }) = &el.kind else {
            return Ok(());
        };
        let (code, end) = (code.clone(), *end);
        let label = code.clone().unwrap_or_default();
        self.history(inst, &el.id, &format!("escalation_thrown {label}"));
        let mut interrupted = false;
        match self.catcher(inst, token, false, |t| {
            t.catches_escalation(code.as_deref())
        }) {
            Some(c) => interrupted = self.caught(c, &Vars::new(), "escalation_caught")?,
            None => self.history(inst, &el.id, "escalation_uncaught"),
        }
        if interrupted {
            return Ok(()); // withdrawn with the scope that caught it
        }
        if end {
            self.history(inst, &el.id, "completed");
            return self.end_token(inst, token);
        }
        self.queue_leave(inst, token, idx);
        Ok(())
    }
}
