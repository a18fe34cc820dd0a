//! Compensation and transactions: what a completed activity leaves behind
//! (a `compensations` row), the throw that undoes it, and the cancel end
//! event that undoes a transaction and leaves it by its cancel boundary.
//!
//! Semantics are Camunda 7's: a row is written each time an activity with a
//! compensation boundary event completes (each inner instance of a
//! multi-instance activity, each pass of a loop), with the variables local to
//! it; a subprocess with compensable work inside leaves a row whose `inner`
//! keeps that work. A throw compensates the rows of its scope (or those of
//! its `activityRef`) in reverse order of completion: a row with a handler
//! starts the handler, a subprocess row starts its compensation event
//! subprocess if it has one and otherwise compensates what it keeps, in
//! reverse order too. Handlers are started one after the other in that order
//! and run at once (a handler that waits does not hold back the next);
//! the throwing token waits for all of them (`Wait::Compensating`) unless
//! `waitForCompletion="false"`. A row is used once.
//!
//! Invariant: the handlers a throw started run in the scope of a token
//! holding `Wait::Compensating` at the throw (the throw's own token, or for
//! `waitForCompletion="false"` a holder beside it that ends with them), so
//! the scope machinery (`end_token`, `cancel_wait`) ends and cancels them
//! like any scope.

use super::*;
use crate::store::compensations::Compensable;

/// What a throw starts, in order.
enum Undo {
    /// The handler activity of a completed activity.
    Handler {
        compensated: String,
        handler: String,
        locals: Vars,
    },
    /// The compensation event subprocess of a completed subprocess, which
    /// takes over the rows the subprocess kept (`inner`).
    EventSubProcess {
        compensated: String,
        esp: usize,
        inner: u64,
        locals: Vars,
    },
}

impl<'a, 't> Engine<'a, 't> {
    /// Activity `idx` completed with `token` (called as it leaves): if it can
    /// be compensated — it has a compensation boundary event, or is a
    /// subprocess that keeps compensable work or has a compensation event
    /// subprocess — a row remembers it in the scope it completed in. A
    /// multi-instance body leaves none: its inner instances did.
    pub(super) fn remember_compensable(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        if !p.has_compensation() {
            return Ok(());
        }
        let el = p.at(idx);
        let body = self.inst(inst).body_of(token);
        if el.extras.multi.is_some() && body.is_none() {
            return Ok(());
        }
        let handler = p.compensation_handler(idx).map(|h| p.at(h).id.clone());
        let scope_like = matches!(el.kind, ElementKind::Scope(ScopeKind::SubProcess { .. }));
        let mut inner = None;
        if scope_like {
            let keeps = self
                .t
                .compensables(inst)?
                .into_iter()
                .filter(|(_, c)| c.scope == token)
                .map(|(seq, _)| seq)
                .collect::<Vec<_>>();
            if handler.is_some() {
                // its own handler undoes it: what it keeps inside is not asked
                for seq in keeps {
                    self.t.remove_compensable(inst, seq)?;
                }
            } else if !keeps.is_empty() || p.compensation_event_subprocess(idx).is_some() {
                inner = Some(token);
            }
        }
        if handler.is_none() && inner.is_none() {
            return Ok(());
        }
        let scope = self.scope_of(inst, body.unwrap_or(token));
        let locals = self
            .inst(inst)
            .tokens
            .get(token)
            .map(|t| t.locals.clone())
            .unwrap_or_default();
        let row = Compensable {
            scope,
            element: el.id.clone(),
            completed_at: self.now,
            handler,
            inner,
            locals,
        };
        self.t.put_compensable(inst, &row)?;
        Ok(())
    }

    /// The rows of scope `scope` (and of the scopes they keep) are
    /// forgotten: the scope was cancelled, its work is not compensated.
    pub(super) fn forget_compensables(&mut self, inst: u64, scope: u64) -> R<()> {
        if !self.proc_of(inst).has_compensation() {
            return Ok(());
        }
        let rows = self.t.compensables(inst)?;
        let mut scopes = vec![scope];
        while let Some(s) = scopes.pop() {
            for (seq, c) in rows.iter().filter(|(_, c)| c.scope == s) {
                scopes.extend(c.inner);
                self.t.remove_compensable(inst, *seq)?;
            }
        }
        Ok(())
    }

    /// The scope a compensation thrown by `token` compensates: the one it
    /// runs in; inside an event subprocess that compensation did not start,
    /// the scope around that event subprocess.
    fn compensation_scope(&mut self, inst: u64, token: u64) -> u64 {
        let p = self.proc_of(inst);
        let scope = self.scope_of(inst, token);
        if scope == 0 {
            return 0;
        }
        let at = self
            .inst(inst)
            .tokens
            .get(scope)
            .and_then(|t| p.index_of(&t.element));
        match at.map(|i| &p.at(i).kind) {
            Some(ElementKind::Scope(ScopeKind::EventSubProcess { trigger, .. }))
                if !matches!(trigger, Trigger::Compensation { .. }) =>
            {
                self.scope_of(inst, scope)
            }
            _ => scope,
        }
    }

    /// What compensating `scope` (only `activity`'s rows, when given)
    /// starts, in reverse order of completion; every row used is removed.
    fn plan_undo(&mut self, inst: u64, scope: u64, activity: Option<&str>) -> R<Vec<Undo>> {
        let p = self.proc_of(inst);
        let rows = self.t.compensables(inst)?;
        let mut out = Vec::new();
        let mut used = Vec::new();
        plan(&p, &rows, scope, activity, &mut out, &mut used);
        for seq in used {
            self.t.remove_compensable(inst, seq)?;
        }
        Ok(out)
    }

    /// A compensation throw or end event: the handlers of its scope's
    /// completed activities start; the token waits for them (or, without
    /// `waitForCompletion`, moves on while they run beside it).
    pub(super) fn throw_compensation(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Throw(ThrowKind::Compensate { activity, wait, .. }) = el.kind else {
            return Ok(());
        };
        let scope = self.compensation_scope(inst, token);
        let activity = activity.map(|a| p.at(a).id.clone());
        let mut undo = self.plan_undo(inst, scope, activity.as_deref())?;
        let own = self.scope_of(inst, token);
        if undo.is_empty() && activity.is_some() && own != scope {
            // an activity of the event subprocess the throw is in
            undo = self.plan_undo(inst, own, activity.as_deref())?;
        }
        self.history(
            inst,
            &el.id,
            &format!("compensation_thrown handlers={}", undo.len()),
        );
        if undo.is_empty() {
            self.queue_leave(inst, token, idx);
            return Ok(());
        }
        let holder = if wait {
            token
        } else {
            // a holder beside the token ends with the handlers
            let outer = self.scope_of(inst, token);
            let h = self.new_token(inst, &el.id, outer);
            self.queue_leave(inst, token, idx);
            h
        };
        self.set_token(inst, holder, &el.id, Wait::Compensating);
        self.start_undo(inst, holder, undo)
    }

    /// A cancel end event: everything else in its transaction is withdrawn
    /// and the transaction's completed activities are compensated; when that
    /// is done ([`Engine::leave_transaction`]) the transaction is left by its
    /// cancel boundary event.
    pub(super) fn cancel_transaction(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let id = p.at(idx).id.clone();
        let tx = self.scope_of(inst, token);
        for t in self.members(inst, tx)? {
            if t != token {
                self.interrupt(inst, t)?;
            }
        }
        let undo = self.plan_undo(inst, tx, None)?;
        self.history(
            inst,
            &id,
            &format!("transaction_cancelled handlers={}", undo.len()),
        );
        if undo.is_empty() {
            self.queue_leave(inst, token, idx);
            return Ok(());
        }
        self.set_token(inst, token, &id, Wait::Compensating);
        self.start_undo(inst, token, undo)
    }

    /// The cancel end event's compensation is done: its transaction is
    /// cancelled (the token with it) and its cancel boundary event's token
    /// moves on.
    pub(super) fn leave_transaction(&mut self, inst: u64, token: u64, tx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let scope = self.scope_of(inst, token);
        let holder = match scope {
            0 => 0,
            s => self.inst(inst).body_of(s).unwrap_or(s),
        };
        let boundary = p.at(tx).boundaries.iter().copied().find(|&b| {
            matches!(
                p.at(b).kind,
                ElementKind::Boundary {
                    trigger: Trigger::Cancel,
                    ..
                }
            )
        });
        match boundary {
            Some(b) if holder != 0 => {
                self.fire_boundary(inst, holder, b, &Vars::new(), "transaction_left")?;
            }
            // the parser wants a cancel boundary event: a damaged definition
            _ => {
                let error = format!(
                    "transaction '{}' has no cancel boundary event to leave by",
                    p.at(tx).id
                );
                let element = p.at(tx).id.clone();
                self.incident(inst, token, &element, error);
            }
        }
        Ok(())
    }

    /// Starts what `undo` lists, in order, in the scope held by `holder`.
    fn start_undo(&mut self, inst: u64, holder: u64, undo: Vec<Undo>) -> R<()> {
        let p = self.proc_of(inst);
        for u in undo {
            match u {
                Undo::Handler {
                    compensated,
                    handler,
                    locals,
                } => {
                    let Some(h) = p.index_of(&handler) else {
                        continue;
                    };
                    self.history(inst, &compensated, &format!("compensating by {handler}"));
                    let t = self.new_token(inst, &handler, holder);
                    if let Some(tok) = self.inst(inst).tokens.get_mut(t) {
                        tok.locals = locals;
                    }
                    self.queue_arrive(inst, t, h, None);
                }
                Undo::EventSubProcess {
                    compensated,
                    esp,
                    inner,
                    locals,
                } => {
                    let ElementKind::Scope(ScopeKind::EventSubProcess { start, .. }) =
                        p.at(esp).kind
                    else {
                        continue;
                    };
                    let esp_id = p.at(esp).id.clone();
                    self.history(inst, &compensated, &format!("compensating by {esp_id}"));
                    let t = self.new_token(inst, &esp_id, holder);
                    if let Some(tok) = self.inst(inst).tokens.get_mut(t) {
                        tok.locals = locals;
                    }
                    // the event subprocess compensates what the subprocess kept
                    for (seq, mut c) in self.t.compensables(inst)? {
                        if c.scope == inner {
                            c.scope = t;
                            self.t.update_compensable(inst, seq, &c)?;
                        }
                    }
                    self.history(inst, &esp_id, "compensation_started");
                    self.enter_scope(inst, t, esp, start);
                }
            }
        }
        Ok(())
    }
}

/// The rows of `scope` (only `activity`'s, when given) as [`Undo`]s, the
/// latest completion first, a subprocess without handler or event
/// subprocess replaced by what it keeps; `used` collects every row consumed.
fn plan(
    p: &Process,
    rows: &[(u64, Compensable)],
    scope: u64,
    activity: Option<&str>,
    out: &mut Vec<Undo>,
    used: &mut Vec<u64>,
) {
    let mut here: Vec<&(u64, Compensable)> = rows
        .iter()
        .filter(|(_, c)| c.scope == scope && activity.is_none_or(|a| c.element == a))
        .collect();
    here.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
    for (seq, c) in here {
        used.push(*seq);
        if let Some(handler) = &c.handler {
            out.push(Undo::Handler {
                compensated: c.element.clone(),
                handler: handler.clone(),
                locals: c.locals.clone(),
            });
            continue;
        }
        let Some(inner) = c.inner else {
            continue;
        };
        match p
            .index_of(&c.element)
            .and_then(|sp| p.compensation_event_subprocess(sp))
        {
            Some(esp) => out.push(Undo::EventSubProcess {
                compensated: c.element.clone(),
                esp,
                inner,
                locals: c.locals.clone(),
            }),
            None => plan(p, rows, inner, None, out, used),
        }
    }
}
