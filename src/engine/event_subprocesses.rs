//! Event subprocesses: while a scope (the process, a subprocess, an event
//! subprocess) is active, each message, timer or signal event subprocess of
//! it has a listener token resting at the event subprocess with the matching
//! wait; an error or escalation event subprocess needs none (a throw finds it,
//! `throws`). When its event comes, an occurrence token enters the event
//! subprocess as its scope; an interrupting one first withdraws everything
//! else in the enclosing scope (the listener with it), a non-interrupting one
//! leaves the listener listening.
//!
//! Invariant: listeners do not keep a scope alive — a scope whose last other
//! token has ended completes and its listeners stop (`end_token`,
//! `scope_done`); a listener's registrations are removed by `cancel_wait`
//! like any wait.

use super::flow::is_listener;
use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// The scope held by `holder` (0: the process) at `container` (`None`: the
    /// process) begins: a listener token for each of its message, timer and
    /// signal event subprocesses, armed when its step runs.
    pub(super) fn open_listeners(&mut self, inst: u64, holder: u64, container: Option<usize>) {
        let p = self.proc_of(inst);
        for esp in p.event_subprocesses_of(container) {
            let ElementKind::Scope(ScopeKind::EventSubProcess { trigger, .. }) = &p.at(esp).kind
            else {
                continue;
            };
            match trigger {
                Trigger::Message { .. }
                | Trigger::Timer(_)
                | Trigger::Signal { .. }
                | Trigger::Condition { .. } => {
                    let listener = self.new_token(inst, &p.at(esp).id, holder);
                    self.queue.push_back(Step::Execute {
                        inst,
                        token: listener,
                        element: esp,
                    });
                }
                // started by a throw inside the scope, or by compensation
                // once the scope completed: nothing to listen for
                Trigger::Error { .. }
                | Trigger::Escalation { .. }
                | Trigger::Compensation { .. }
                | Trigger::Cancel => {}
            }
        }
    }

    /// A listener token at event subprocess `idx` opens its wait: a message
    /// subscription under the instance's key (a buffered message is taken at
    /// once: one by an interrupting listener, every one by a non-interrupting
    /// one), a timer job, or a signal subscription.
    pub(super) fn arm_listener(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Scope(ScopeKind::EventSubProcess {
            trigger,
            interrupting,
            ..
        }) = &el.kind
        else {
            return Ok(());
        };
        match trigger {
            Trigger::Message { message } => {
                let by = Catcher::Listener(&el.id);
                let Some(key) = self.catch_key(inst, token, &el.id, message, by)? else {
                    return Ok(());
                };
                if *interrupting {
                    // the first buffered message starts it at once
                    self.rest_on_message(inst, token, &el.id, message, key)?;
                    return Ok(());
                }
                // a non-interrupting listener keeps listening: every buffered
                // message starts an occurrence
                let wait = Wait::Message {
                    name: message.clone(),
                    key: key.clone(),
                };
                self.set_token(inst, token, &el.id, wait);
                self.take_buffered_while(inst, token, message, &key, |_| true)?;
            }
            Trigger::Timer(def) => match self.open_timer(inst, token, &el.id, def, true)? {
                Ok(job) => self.set_token(inst, token, &el.id, Wait::Timer { job }),
                Err(error) => self.incident(inst, token, &el.id, error),
            },
            Trigger::Signal { signal } => self.wait_for_signal(inst, token, &el.id, signal)?,
            Trigger::Condition { .. } => {
                self.set_token(inst, token, &el.id, Wait::Condition);
                self.conditions_due(inst);
            }
            Trigger::Error { .. }
            | Trigger::Escalation { .. }
            | Trigger::Compensation { .. }
            | Trigger::Cancel => {
                let error = format!(
                    "event subprocess '{}' is started by an error, escalation or compensation thrown for its scope, not by a token",
                    el.id
                );
                self.incident(inst, token, &el.id, error);
            }
        }
        Ok(())
    }

    /// The event subprocess `token` listens for, if it is a listener.
    pub(super) fn listener_at(&mut self, inst: u64, token: u64) -> Option<usize> {
        let p = self.proc_of(inst);
        let t = self.inst(inst).tokens.get(token)?;
        is_listener(&p, t).then(|| p.index_of(&t.element)).flatten()
    }

    /// The event of event subprocess `idx` came to listener `token` (a message,
    /// a signal, a timer): it starts in the listener's scope; a
    /// non-interrupting listener keeps listening. Returns the event
    /// subprocess's id.
    pub(super) fn listener_fires(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        vars: &Vars,
        event: &str,
    ) -> R<String> {
        let scope = self.scope_of(inst, token);
        self.start_event_subprocess(inst, scope, idx, vars, event)
    }

    /// Event subprocess `idx` of `scope` starts: an interrupting one withdraws
    /// every token of the scope first (listeners, and what runs in nested
    /// scopes, included); then a new token enters it as its scope.
    pub(super) fn start_event_subprocess(
        &mut self,
        inst: u64,
        scope: u64,
        idx: usize,
        vars: &Vars,
        event: &str,
    ) -> R<String> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Scope(ScopeKind::EventSubProcess {
            start,
            interrupting,
            ..
        }) = &el.kind
        else {
            return Ok(el.id.clone());
        };
        if *interrupting {
            for t in self.members(inst, scope)? {
                self.interrupt(inst, t)?;
            }
        }
        let occurrence = self.new_token(inst, &el.id, scope);
        self.history(inst, &el.id, event);
        if self.complete_with(inst, occurrence, idx, vars)? {
            self.enter_scope(inst, occurrence, idx, *start);
        }
        Ok(el.id.clone())
    }

    /// The listeners of `scope` stop (it has ended).
    pub(super) fn close_listeners(&mut self, inst: u64, scope: u64) -> R<()> {
        let p = self.proc_of(inst);
        if p.event_subprocess_count() == 0 {
            return Ok(());
        }
        let members = self.members(inst, scope)?;
        let rec = self.inst(inst);
        let listeners: Vec<u64> = members
            .into_iter()
            .filter(|&m| rec.tokens.get(m).is_some_and(|t| is_listener(&p, t)))
            .collect();
        for l in listeners {
            self.interrupt(inst, l)?;
        }
        Ok(())
    }
}
