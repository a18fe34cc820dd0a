//! Waits: what a resting token registers (message subscription, signal
//! subscription, job, timer, the branches of an event-based gateway, boundary
//! timers, boundary signals and boundary messages) is opened and closed here.
//!
//! Invariant: per (message, key) an open subscription xor a buffered message;
//! `cancel_wait` removes every registration of a token together.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Delivers buffered message `seq` to a token already set to wait for it.
    pub(super) fn consume_buffered(&mut self, seq: u64, inst: u64, token: u64) -> R<()> {
        let mut msg = self
            .t
            .message(seq)?
            .ok_or(EngineError::UnknownMessageId(seq.to_string()))?;
        let element = self.deliver(inst, token, &msg.name, &msg.key, &msg.variables)?;
        msg.state = MessageState::Correlated;
        msg.instance = Some(inst);
        msg.element = Some(element);
        msg.settled_at = Some(self.now);
        self.t.put_message(&msg)?;
        self.t.bump(Counter::MessagesCorrelatedFromBuffer, 1)?;
        Ok(())
    }

    /// Moves a token waiting for message `name` on (at a catch event, a receive
    /// task or an event-based gateway), or fires the message boundary event
    /// of the activity it is in; returns the element that caught it.
    pub(super) fn deliver(
        &mut self,
        inst: u64,
        token: u64,
        name: &str,
        key: &str,
        vars: &Vars,
    ) -> R<String> {
        if let Some(esp) = self.listener_at(inst, token) {
            return self.listener_fires(inst, token, esp, vars, "message_correlated");
        }
        if let Some(b) = self.message_boundary(inst, token, name) {
            return self.fire_boundary(inst, token, b, vars, "message_correlated");
        }
        let idx = self.event_target(inst, token, |k| k.waits_for_message() == Some(name));
        self.cancel_wait(inst, token)?;
        let element = self.proc_of(inst).at(idx).id.clone();
        self.history(inst, &element, "message_correlated");
        self.t.set_passed(name, key, inst, true)?;
        if self.complete_with(inst, token, idx, vars)? {
            self.queue_leave(inst, token, idx);
        }
        Ok(element)
    }

    /// Where a waiting token leaves from when an event arrives: its own element,
    /// or, at an event-based gateway, the first target the event matches (the
    /// token moves there).
    pub(super) fn event_target(
        &mut self,
        inst: u64,
        token: u64,
        matches: impl Fn(&ElementKind) -> bool,
    ) -> usize {
        let p = self.proc_of(inst);
        let Some(at) = self
            .inst(inst)
            .tokens
            .get(token)
            .and_then(|t| p.index_of(&t.element))
        else {
            return 0;
        };
        if p.at(at).kind != ElementKind::Gateway(GatewayKind::Event) {
            return at;
        }
        let Some(target) = p
            .at(at)
            .outgoing
            .iter()
            .map(|&f| p.flows[f].target)
            .find(|&t| matches(&p.at(t).kind))
        else {
            return at;
        };
        let (id, now) = (p.at(target).id.clone(), self.now);
        if let Some(t) = self.inst(inst).tokens.get_mut(token) {
            t.element = id;
            t.since = now;
        }
        target
    }

    /// Removes every registration of a waiting token: subscriptions, signal
    /// subscriptions (by leaving the wait that holds them), its job or
    /// timers. The token itself stays, on its way.
    pub(super) fn cancel_wait(&mut self, inst: u64, token: u64) -> R<()> {
        let Some(wait) = self.inst(inst).tokens.get(token).map(|t| t.wait.clone()) else {
            return Ok(());
        };
        match wait {
            // the subscriptions go with the wait (the store derives their
            // rows from the token)
            Wait::Message { name, key } => {
                // the instance is past this catch point: a later message is late
                self.t.set_passed(&name, &key, inst, true)?;
            }
            Wait::Signal { .. } => {}
            Wait::Job { job } | Wait::Timer { job } => self.delete_job(job)?,
            Wait::Events {
                messages, timers, ..
            } => {
                for (name, key) in messages {
                    self.t.set_passed(&name, &key, inst, true)?;
                }
                for job in timers {
                    self.delete_job(job)?;
                }
            }
            Wait::Task { task } => self.t.remove_task(task)?,
            // the scope (of a subprocess, or a multi-instance body) is
            // cancelled: everything running inside goes with it
            Wait::Scope | Wait::Body { .. } | Wait::Compensating | Wait::AdHoc { .. } => {
                if matches!(wait, Wait::Body { .. }) {
                    self.t.clear_body_items(inst, token)?;
                }
                let inside = self.members(inst, token)?;
                if !inside.is_empty() {
                    let element = self
                        .inst(inst)
                        .tokens
                        .get(token)
                        .map(|t| t.element.clone())
                        .unwrap_or_default();
                    for t in inside {
                        self.interrupt(inst, t)?;
                    }
                    self.history(inst, &element, "scope_cancelled");
                }
            }
            // the call activity is left: its child goes
            Wait::Child { instance } => self.cancel_child(instance)?,
            // nothing registered: the condition is only asked
            Wait::Join { .. } | Wait::Incident { .. } | Wait::Condition | Wait::Trigger => {}
        }
        if let Some(t) = self.inst(inst).tokens.get_mut(token) {
            t.wait = Wait::Incident {
                error: "moving".into(),
            };
        }
        Ok(())
    }

    /// Opens the boundary events of the activity a token enters: starts
    /// their timers and subscribes their messages and signals, each kept
    /// with the token.
    pub(super) fn open_boundaries(
        &mut self,
        inst: u64,
        token: u64,
        p: &Process,
        host: usize,
    ) -> R<()> {
        for &b in &p.at(host).boundaries {
            let ElementKind::Boundary { trigger, .. } = &p.at(b).kind else {
                continue;
            };
            match trigger {
                Trigger::Timer(def) => {
                    // a variable timer's value was read by `boundary_key_problem` before
                    if let Ok(job) = self.open_timer(inst, token, &p.at(b).id, def, true)?
                        && let Some(t) = self.inst(inst).tokens.get_mut(token)
                    {
                        t.timers.push(job);
                    }
                }
                // kept with the token (the store derives the row): closing
                // removes this one
                Trigger::Signal { signal } => {
                    if let Some(t) = self.inst(inst).tokens.get_mut(token) {
                        t.boundary_signals.push(signal.clone());
                    }
                }
                Trigger::Message { message } => {
                    // `boundary_key_problem` was asked before: the key is set
                    let by = Catcher::Boundary(&p.at(b).id);
                    if let Ok(key) = self.key_for(inst, token, message, by)?
                        && let Some(t) = self.inst(inst).tokens.get_mut(token)
                    {
                        t.boundary_messages.push((message.clone(), key));
                    }
                }
                // caught when thrown (by a worker, an end or throw event
                // inside), or asked once the activity completed (a
                // compensation handler): nothing to open
                Trigger::Error { .. }
                | Trigger::Escalation { .. }
                | Trigger::Compensation { .. }
                | Trigger::Cancel => {}
                // asked once the token rests, and after every change of variables
                Trigger::Condition { .. } => self.conditions_due(inst),
            }
        }
        Ok(())
    }

    /// Why the message boundary events of activity `host` cannot be opened
    /// for this instance (a correlation key variable that is not set), if so.
    pub(super) fn boundary_key_problem(
        &mut self,
        inst: u64,
        token: u64,
        p: &Process,
        host: usize,
    ) -> R<Option<String>> {
        for &b in &p.at(host).boundaries {
            if let ElementKind::Boundary {
                trigger: Trigger::Timer(def),
                ..
            } = &p.at(b).kind
                && let Err(problem) = self.timer_for(inst, token, &p.at(b).id, def)?
            {
                return Ok(Some(problem));
            }
            if let ElementKind::Boundary {
                trigger: Trigger::Message { message },
                ..
            } = &p.at(b).kind
                && let Err(problem) =
                    self.key_for(inst, token, message, Catcher::Boundary(&p.at(b).id))?
            {
                return Ok(Some(problem));
            }
        }
        Ok(None)
    }

    /// Once the activity waits: a message buffered for one of its message
    /// boundary events is taken now, in this transaction (per (message, key)
    /// a subscription xor a buffered message). An interrupting boundary takes
    /// one and ends the activity; a non-interrupting one takes every buffered
    /// message, each starting a token.
    pub(super) fn take_buffered_at_boundaries(
        &mut self,
        inst: u64,
        token: u64,
        host: usize,
    ) -> R<()> {
        let p = self.proc_of(inst);
        for &b in &p.at(host).boundaries {
            let ElementKind::Boundary {
                trigger: Trigger::Message { message },
                ..
            } = &p.at(b).kind
            else {
                continue;
            };
            let by = Catcher::Boundary(&p.at(b).id);
            let Ok(key) = self.key_for(inst, token, message, by)? else {
                continue;
            };
            let host_id = p.at(host).id.clone();
            self.take_buffered_while(inst, token, message, &key, |me| {
                me.inst(inst).tokens.get(token).is_some_and(|t| {
                    t.element == host_id && !matches!(t.wait, Wait::Incident { .. })
                })
            })?;
        }
        Ok(())
    }

    /// The message boundary event of the activity `token` is in that catches
    /// `message`, if the token does not itself wait for it.
    pub(super) fn message_boundary(
        &mut self,
        inst: u64,
        token: u64,
        message: &str,
    ) -> Option<usize> {
        let p = self.proc_of(inst);
        let t = self.inst(inst).tokens.get(token)?;
        let own = t.wait.messages().iter().any(|(n, _)| *n == message);
        if own {
            return None;
        }
        let host = p.index_of(&t.element)?;
        p.at(host).boundaries.iter().copied().find(|&b| {
            matches!(&p.at(b).kind, ElementKind::Boundary { trigger: Trigger::Message { message: m }, .. } if m == message)
        })
    }

    /// A boundary event fires on a message or signal (`event`, for the
    /// history): an interrupting one ends its activity (its wait, timers and
    /// subscriptions), a non-interrupting one leaves it open and subscribed;
    /// either way a new token leaves from the boundary event with the event's
    /// variables. Returns the boundary event's id.
    pub(super) fn fire_boundary(
        &mut self,
        inst: u64,
        token: u64,
        b: usize,
        vars: &Vars,
        event: &str,
    ) -> R<String> {
        let p = self.proc_of(inst);
        let ElementKind::Boundary { cancel, .. } = p.at(b).kind else {
            return Ok(p.at(b).id.clone());
        };
        let boundary = p.at(b).id.clone();
        // the boundary event sits beside its activity, in the same scope
        let scope = self.scope_of(inst, token);
        if cancel {
            self.interrupt(inst, token)?;
        }
        self.history(inst, &boundary, event);
        let new = self.new_token(inst, &boundary, scope);
        if self.complete_with(inst, new, b, vars)? {
            self.queue_leave(inst, new, b);
        }
        Ok(boundary)
    }

    /// Closes the boundary events of a token leaving its activity: cancels
    /// their timers and drops exactly the message and signal subscriptions
    /// kept with the token (the store removes their rows); nothing is
    /// recomputed from the model or the variables.
    pub(super) fn close_boundaries(&mut self, inst: u64, token: u64) -> R<()> {
        if self.inst(inst).body_of(token).is_some() {
            return Ok(()); // an inner instance: its body holds the boundary events
        }
        let (timers, messages) = match self.inst(inst).tokens.get_mut(token) {
            Some(t) => {
                t.boundary_signals.clear();
                (
                    std::mem::take(&mut t.timers),
                    std::mem::take(&mut t.boundary_messages),
                )
            }
            None => return Ok(()),
        };
        for job in timers {
            self.delete_job(job)?;
        }
        for (message, key) in messages {
            // the activity is left: a later message is late
            self.t.set_passed(&message, &key, inst, true)?;
        }
        Ok(())
    }

    /// The signal boundary event of the activity `token` is in that catches
    /// `signal`, if any.
    pub(super) fn signal_boundary(&mut self, inst: u64, token: u64, signal: &str) -> Option<usize> {
        let p = self.proc_of(inst);
        let element = self
            .inst(inst)
            .tokens
            .get(token)
            .map(|t| t.element.clone())?;
        let host = p.index_of(&element)?;
        p.at(host).boundaries.iter().copied().find(|&b| {
            matches!(&p.at(b).kind, ElementKind::Boundary { trigger: Trigger::Signal { signal: s }, .. } if s == signal)
        })
    }

    /// The token rests at `element` until signal `signal` is broadcast.
    pub(super) fn wait_for_signal(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        signal: &str,
    ) -> R<()> {
        self.set_token(
            inst,
            token,
            element,
            Wait::Signal {
                name: signal.to_string(),
            },
        );
        Ok(())
    }

    /// Ends the activity a token is in (interrupting boundary event, a
    /// cancelled scope): its wait (for a scope token, everything inside),
    /// its boundary events, the token.
    pub(super) fn interrupt(&mut self, inst: u64, token: u64) -> R<()> {
        if self
            .inst(inst)
            .tokens
            .get(token)
            .is_some_and(|t| matches!(t.wait, Wait::Scope | Wait::AdHoc { .. }))
        {
            // a cancelled scope's completed work is not compensated
            self.forget_compensables(inst, token)?;
        }
        self.cancel_wait(inst, token)?;
        self.close_boundaries(inst, token)?;
        self.inst(inst).tokens.remove(token);
        Ok(())
    }

    /// At an event-based gateway: take a buffered message at once if one waits
    /// for a target, else register every target event and wait for the first.
    pub(super) fn open_event_gateway(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let gateway = p.at(idx).id.clone();
        let targets: Vec<usize> = p
            .at(idx)
            .outgoing
            .iter()
            .map(|&f| p.flows[f].target)
            .collect();
        // the timers' values first: a variable that names no time stops the
        // gateway before anything is registered
        let mut timer_defs = HashMap::new();
        for &t in &targets {
            if let family::Branch::Timer(timer) = family::branch(&p.at(t).kind) {
                match self.timer_for(inst, token, &p.at(t).id, timer)? {
                    Ok(def) => {
                        timer_defs.insert(t, def);
                    }
                    Err(error) => {
                        self.incident(inst, token, &gateway, error);
                        return Ok(());
                    }
                }
            }
        }
        let mut messages = Vec::new();
        for &t in &targets {
            if let family::Branch::Message(m) = family::branch(&p.at(t).kind) {
                let by = Catcher::Branch(&p.at(t).id);
                let Some(key) = self.catch_key(inst, token, &gateway, m, by)? else {
                    return Ok(());
                };
                if let Some(seq) = self.t.oldest_buffered(m, &key)? {
                    let target = p.at(t).id.clone();
                    self.set_token(
                        inst,
                        token,
                        &target,
                        Wait::Message {
                            name: m.to_string(),
                            key: key.clone(),
                        },
                    );
                    return self.consume_buffered(seq, inst, token);
                }
                messages.push((m.to_string(), key));
            }
        }
        let mut signals = Vec::new();
        let mut timers = Vec::new();
        for &t in &targets {
            match family::branch(&p.at(t).kind) {
                family::Branch::Signal(signal) => signals.push(signal.to_string()),
                family::Branch::Timer(timer) => {
                    // read above: a variable timer's value is at hand
                    let timer = timer_defs.get(&t).map_or(timer, |d| d.as_ref());
                    let target = p.at(t).id.clone();
                    match self.open_timer(inst, token, &target, timer, false)? {
                        Ok(job) => timers.push(job),
                        Err(error) => {
                            self.incident(inst, token, &target, error);
                            return Ok(());
                        }
                    }
                }
                // message branches were registered above; the parser
                // refuses any other element after an event-based gateway
                family::Branch::Message(_) | family::Branch::None => {}
            }
        }
        // the wait holds the subscriptions (the store derives their rows)
        self.set_token(
            inst,
            token,
            &gateway,
            Wait::Events {
                messages,
                signals,
                timers,
            },
        );
        self.history(inst, &gateway, "waiting");
        Ok(())
    }

    /// A caller moves token `token` on from the wait state it rests at (a
    /// receive task or catch event without an event definition), with
    /// `vars` as the element's result; refused when the token waits for
    /// anything else. Returns the element it left and where the instance
    /// waits then.
    pub fn trigger(&mut self, inst: u64, token: u64, vars: &Vars) -> R<Triggered> {
        self.load_active(inst)?;
        let at = self.existing_token(inst, token)?;
        let wait = self.inst(inst).tokens.get(token).map(|t| t.wait.clone());
        if wait != Some(Wait::Trigger) {
            self.dirty.remove(&inst);
            return Err(EngineError::NotTriggerable {
                instance: inst,
                token,
                element: at,
                waits: wait.map(|w| w.describe()).unwrap_or_default(),
            });
        }
        let p = self.proc_of(inst);
        let Some(idx) = p.index_of(&at) else {
            self.dirty.remove(&inst);
            return Err(EngineError::UnknownElement {
                process: p.id.clone(),
                element: at,
            });
        };
        self.cancel_wait(inst, token)?;
        self.history(inst, &at, "triggered");
        if self.complete_with(inst, token, idx, vars)? {
            self.queue_leave(inst, token, idx);
        }
        self.run()?;
        Ok(Triggered {
            element: at,
            waiting_at: self.waiting(inst)?,
        })
    }
}
