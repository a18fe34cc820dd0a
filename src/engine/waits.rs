//! Waits: what a resting token registers (message subscription, signal
//! subscription, job, timer, the branches of an event-based gateway, boundary
//! timers and boundary signals) is opened and closed here.
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
    /// task or an event-based gateway); returns the element it caught it at.
    pub(super) fn deliver(
        &mut self,
        inst: u64,
        token: u64,
        name: &str,
        key: &str,
        vars: &Vars,
    ) -> R<String> {
        let idx = self.event_target(inst, token, |k| k.waits_for_message() == Some(name));
        self.cancel_wait(inst, token)?;
        let element = self.proc_of(inst).at(idx).id.clone();
        self.history(inst, &element, "message_correlated");
        self.t.set_passed(name, key, inst, true)?;
        self.complete_with(inst, idx, vars)?;
        self.queue.push_back(Step::Leave {
            inst,
            token,
            element: idx,
        });
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
            .iter()
            .find(|t| t.id == token)
            .and_then(|t| p.index_of(&t.element))
        else {
            return 0;
        };
        if p.at(at).kind != ElementKind::EventGateway {
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
        if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            t.element = id;
            t.since = now;
        }
        target
    }

    /// Removes every registration of a waiting token: subscriptions, signal
    /// subscriptions, its job or timers. The token itself stays.
    pub(super) fn cancel_wait(&mut self, inst: u64, token: u64) -> R<()> {
        let Some(wait) = self
            .inst(inst)
            .tokens
            .iter()
            .find(|t| t.id == token)
            .map(|t| t.wait.clone())
        else {
            return Ok(());
        };
        match wait {
            Wait::Message { name, key } => {
                self.t.unsubscribe(&name, &key, inst, token)?;
                // the instance is past this catch point: a later message is late
                self.t.set_passed(&name, &key, inst, true)?;
            }
            Wait::Signal { name } => self.t.unsubscribe_signal(&name, inst, token)?,
            Wait::Job { job } | Wait::Timer { job } => self.delete_job(job)?,
            Wait::Events {
                messages,
                signals,
                timers,
            } => {
                for (name, key) in messages {
                    self.t.unsubscribe(&name, &key, inst, token)?;
                    self.t.set_passed(&name, &key, inst, true)?;
                }
                for name in signals {
                    self.t.unsubscribe_signal(&name, inst, token)?;
                }
                for job in timers {
                    self.delete_job(job)?;
                }
            }
            Wait::Task { task } => self.t.remove_task(task)?,
            Wait::Join { .. } | Wait::Incident { .. } => {}
        }
        if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            t.wait = Wait::Incident {
                error: "moving".into(),
            };
        }
        Ok(())
    }

    /// Opens the boundary events of the activity a token enters: starts
    /// their timers (remembered on the token) and subscribes their signals
    /// (derived from the model again when the token leaves).
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
                    let repetitions_left = def.repetitions();
                    let job = self.create_job_at(
                        inst,
                        token,
                        &p.at(b).id,
                        JobKind::Timer { repetitions_left },
                        def.first_due(self.now),
                    )?;
                    if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
                        t.timers.push(job);
                    }
                }
                Trigger::Signal { signal } => self.t.subscribe_signal(signal, inst, token)?,
                // caught when the worker throws it, nothing to open
                Trigger::Error { .. } => {}
            }
        }
        Ok(())
    }

    /// Closes the boundary events of a token leaving its activity: cancels
    /// their timers and unsubscribes their signals.
    pub(super) fn close_boundaries(&mut self, inst: u64, token: u64) -> R<()> {
        let p = self.proc_of(inst);
        let (timers, host) = match self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            Some(t) => (std::mem::take(&mut t.timers), p.index_of(&t.element)),
            None => return Ok(()),
        };
        for job in timers {
            self.delete_job(job)?;
        }
        if let Some(host) = host {
            for &b in &p.at(host).boundaries {
                if let ElementKind::Boundary {
                    trigger: Trigger::Signal { signal },
                    ..
                } = &p.at(b).kind
                {
                    self.t.unsubscribe_signal(signal, inst, token)?;
                }
            }
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
            .iter()
            .find(|t| t.id == token)
            .map(|t| t.element.clone())?;
        let host = p.index_of(&element)?;
        p.at(host).boundaries.iter().copied().find(|&b| {
            matches!(&p.at(b).kind, ElementKind::Boundary { trigger: Trigger::Signal { signal: s }, .. } if s == signal)
        })
    }

    /// Ends the activity a token is in (interrupting boundary event).
    pub(super) fn interrupt(&mut self, inst: u64, token: u64) -> R<()> {
        self.cancel_wait(inst, token)?;
        self.close_boundaries(inst, token)?;
        self.inst(inst).tokens.retain(|t| t.id != token);
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
        let mut messages = Vec::new();
        for &t in &targets {
            if let Some(m) = p.at(t).kind.waits_for_message() {
                let key = match p.correlation_key(m, &self.inst(inst).variables) {
                    Ok(key) => key,
                    Err(var) => {
                        let error =
                            format!("correlation key variable '{var}' of message '{m}' is not set");
                        self.incident(inst, token, &gateway, error);
                        return Ok(());
                    }
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
            match &p.at(t).kind {
                ElementKind::SignalCatch { signal } => {
                    self.t.subscribe_signal(signal, inst, token)?;
                    signals.push(signal.clone());
                }
                ElementKind::TimerCatch { timer } => {
                    let target = p.at(t).id.clone();
                    timers.push(self.create_job_at(
                        inst,
                        token,
                        &target,
                        JobKind::Timer {
                            repetitions_left: None,
                        },
                        timer.first_due(self.now),
                    )?);
                }
                // message branches were registered above
                ElementKind::MessageCatch { .. } | ElementKind::ReceiveTask { .. } => {}
                // the parser refuses any other element after an event-based gateway
                ElementKind::NoneStart
                | ElementKind::MessageStart { .. }
                | ElementKind::TimerStart { .. }
                | ElementKind::UserTask { .. }
                | ElementKind::InclusiveGateway { .. }
                | ElementKind::TerminateEnd
                | ElementKind::EventGateway
                | ElementKind::Boundary { .. }
                | ElementKind::End
                | ElementKind::ExclusiveGateway { .. }
                | ElementKind::ParallelGateway
                | ElementKind::SendTask
                | ElementKind::ServiceTask { .. }
                | ElementKind::Delegated { .. }
                | ElementKind::SignalThrow { .. }
                | ElementKind::NoneThrow
                | ElementKind::Publish { .. }
                | ElementKind::Task { .. } => {}
            }
        }
        for (m, k) in &messages {
            self.t.subscribe(m, k, inst, token)?;
        }
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
}
