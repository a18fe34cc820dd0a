//! Messages: accept (dedup, classify, correlate, buffer, park), malformed
//! payloads, expiry, requeue, discard, and signals.
//!
//! Invariant: every accepted message has exactly one record in exactly one
//! state; expiry parks, it never deletes; a signal is never buffered.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    pub(super) fn dedup_hit(&self, name: &str, id: &str) -> R<Option<u64>> {
        if let Some((seq, at)) = self.t.dedup(id, name)?
            && self.now.saturating_sub(at) < self.cfg.dedup_window
        {
            return Ok(Some(seq));
        }
        Ok(None)
    }

    pub(super) fn catalog(&self, name: &str) -> R<CatalogRows> {
        if let Some(rows) = self.defs.catalog(name) {
            return Ok(rows);
        }
        let rows = Arc::new(self.t.catalog_of(name)?);
        self.defs.put_catalog(name, rows.clone());
        Ok(rows)
    }

    /// The element where token `token` of `inst` waits for message `name`: a
    /// catch event, receive task or event subprocess it rests at, the branch
    /// of its event-based gateway, or the message boundary event of its
    /// activity.
    pub(super) fn waiting_element(&self, inst: u64, token: u64, name: &str) -> R<Option<String>> {
        let Some(mut rec) = self.t.instance(inst)? else {
            return Ok(None);
        };
        self.t.fill_token(inst, &mut rec.tokens, token)?;
        let Some(t) = rec.tokens.get(token) else {
            return Ok(None);
        };
        let p = self.def(&rec.process, rec.version)?;
        let Some(at) = p.index_of(&t.element) else {
            return Ok(Some(t.element.clone()));
        };
        let catches = |e: usize| p.at(e).kind.waits_for_message() == Some(name);
        let found = match &t.wait {
            Wait::Message { name: n, .. } if n == name => Some(at),
            Wait::Events { messages, .. } if messages.iter().any(|(n, _)| n == name) => p
                .at(at)
                .outgoing
                .iter()
                .map(|&f| p.flows[f].target)
                .find(|&e| catches(e)),
            _ => p.at(at).boundaries.iter().copied().find(|&b| catches(b)),
        };
        Ok(Some(p.at(found.unwrap_or(at)).id.clone()))
    }

    /// The (instance, token) pairs holding (message `name`, `key`) open as
    /// this command stands: the stored rows, moved by what the command
    /// changed in the tokens it holds (the store writes the rows when the
    /// instances are written).
    fn subscribers_now(&self, name: &str, key: &str) -> R<Vec<(u64, u64)>> {
        let stored = self.t.subscribers(name, key)?;
        Ok(self.pending(stored, |t| t.open_messages().contains(&(name, key))))
    }

    /// The (instance, token) pairs holding signal `name` open as this
    /// command stands (see [`Engine::subscribers_now`]).
    fn signal_subscribers_now(&self, name: &str) -> R<Vec<(u64, u64)>> {
        let stored = self.t.signal_subscribers(name)?;
        Ok(self.pending(stored, |t| t.open_signals().contains(&name)))
    }

    /// `stored` (pairs as the rows have them) with the registrations the
    /// command opened and closed: a token that `holds` now and did not when
    /// read joins, one that held and does not any more leaves.
    fn pending(
        &self,
        mut subs: Vec<(u64, u64)>,
        holds: impl Fn(&Token) -> bool,
    ) -> Vec<(u64, u64)> {
        for (&inst, d) in &self.dirty {
            for (was, now) in d.rec.tokens.changes() {
                let Some(id) = now.or(was).map(|t| t.id) else {
                    continue;
                };
                match (was.is_some_and(&holds), now.is_some_and(&holds)) {
                    (true, false) => subs.retain(|&s| s != (inst, id)),
                    (false, true) => subs.push((inst, id)),
                    (true, true) | (false, false) => {}
                }
            }
        }
        subs.sort_unstable();
        subs.dedup();
        subs
    }

    /// Decides what a message meets without changing anything.
    pub(super) fn classify(&self, name: &str, key: &str) -> R<Decision> {
        let catalog = self.catalog(name)?;
        if catalog.is_empty() {
            return Ok(Decision::Park(
                Reason::UnknownMessage,
                Vec::new(),
                Vec::new(),
            ));
        }
        let subs = self.subscribers_now(name, key)?;
        match subs.len() {
            1 => return Ok(Decision::Deliver(subs[0].0, subs[0].1)),
            n if n > 1 => {
                let mut c: Vec<u64> = subs.iter().map(|s| s.0).collect();
                c.sort_unstable();
                c.dedup();
                let mut at = Vec::new();
                for &(inst, token) in &subs {
                    if let Some(e) = self.waiting_element(inst, token, name)? {
                        at.push((inst, e));
                    }
                }
                at.sort();
                at.dedup();
                return Ok(Decision::Park(Reason::Ambiguous, c, at));
            }
            _ => {}
        }
        if let Some((process, _)) = catalog.iter().find(|(_, e)| e.starts) {
            return Ok(Decision::StartInstance(process.clone()));
        }
        if !self.t.expecting(name, key)?.is_empty() {
            return Ok(Decision::Wait);
        }
        let passed = self.t.passed(name, key)?;
        if !passed.is_empty() {
            return Ok(Decision::Park(Reason::Late, passed, Vec::new()));
        }
        Ok(Decision::Wait)
    }

    /// The buffered publish: correlate, buffer, or park; deduplicated by id.
    pub fn publish(&mut self, msg: &Publish) -> R<Delivery> {
        self.accept(msg, None, false)
    }

    /// Synchronous correlation: correlates or rejects; never buffers, never parks.
    pub fn correlate(&mut self, msg: &Publish) -> R<Delivery> {
        self.accept(msg, None, true)
    }

    pub(super) fn accept(
        &mut self,
        msg: &Publish,
        requeue: Option<MessageRecord>,
        sync: bool,
    ) -> R<Delivery> {
        // a requeued message is this partition's already
        if requeue.is_none() {
            self.own_key(&msg.key)?;
            if let Some(id) = &msg.message_id
                && let Some(seq) = self.dedup_hit(&msg.name, id)?
            {
                self.t.bump(Counter::MessagesDuplicate, 1)?;
                let orig = self.t.message(seq)?;
                return Ok(Delivery {
                    instance: orig.as_ref().and_then(|m| m.instance),
                    element: orig.as_ref().and_then(|m| m.element.clone()),
                    ..unsettled(Outcome::Duplicate, id.clone(), None, Vec::new())
                });
            }
        }
        let decision = self.classify(&msg.name, &msg.key)?;
        if sync && let Some((reason, candidates)) = decision.refusal() {
            let id = msg.message_id.clone().unwrap_or_default();
            return Ok(unsettled(Outcome::Rejected, id, Some(reason), candidates));
        }
        let mut rec = match requeue {
            Some(mut r) => {
                r.requeues += 1;
                r.reason = None;
                r.candidates.clear();
                r.candidate_elements.clear();
                r
            }
            None => {
                let seq = self.t.next_message_seq(self.slot_of_key(&msg.key)?)?;
                let id = msg.message_id.clone();
                let mut rec = self.new_record(seq, id.unwrap_or_else(|| format!("pf-{seq}")));
                rec.name = msg.name.clone();
                rec.key = msg.key.clone();
                rec.variables = msg.variables.clone();
                rec.attributes = msg.attributes.clone();
                rec
            }
        };
        let ttl = msg
            .ttl
            .or_else(|| self.cfg.ttl_per_message.get(&msg.name).copied())
            .unwrap_or(self.cfg.default_ttl);
        match decision {
            Decision::Deliver(inst, token) => {
                self.load_at(inst, token)?;
                let element = self.deliver(inst, token, &rec.name, &rec.key, &rec.variables)?;
                self.correlated(&mut rec, inst, element)?;
            }
            Decision::StartInstance(process) => {
                let (inst, element) = self.start_by_message(&process, &rec)?;
                self.correlated(&mut rec, inst, element)?;
            }
            Decision::Wait if ttl > 0 => {
                rec.state = MessageState::Buffered;
                rec.expires_at = Some(self.now.saturating_add(ttl));
                self.t.put_message(&rec)?;
                self.t.bump(Counter::MessagesBuffered, 1)?;
            }
            Decision::Wait => {
                self.park(&mut rec, Reason::NoSubscription, Vec::new(), Vec::new())?
            }
            Decision::Park(reason, candidates, at) => {
                self.park(&mut rec, reason, candidates, at)?
            }
        }
        Ok(delivery_of(&rec))
    }

    /// A record of message `message_id` accepted now, buffered, with no name,
    /// key or payload yet.
    fn new_record(&self, seq: u64, message_id: String) -> MessageRecord {
        MessageRecord {
            seq,
            message_id,
            name: String::new(),
            key: String::new(),
            variables: Vars::new(),
            state: MessageState::Buffered,
            reason: None,
            accepted_at: self.now,
            expires_at: None,
            candidates: Vec::new(),
            candidate_elements: Vec::new(),
            instance: None,
            element: None,
            raw: None,
            attributes: Default::default(),
            settled_at: None,
            note: None,
            requeues: 0,
        }
    }

    /// Starts the latest version of `process` at its start event for message
    /// `rec`; the started instance knows its key unless the payload sets it.
    fn start_by_message(&mut self, process: &str, rec: &MessageRecord) -> R<(u64, String)> {
        let version = self.t.latest_version(process)?.max(1);
        let def = self.def(process, version)?;
        let start = def
            .message_start(&rec.name)
            .and_then(|e| def.index_of(&e.id))
            .unwrap_or(0);
        let mut vars = rec.variables.clone();
        if let Some(var) = def.correlation_keys.get(&rec.name)
            && !var.contains(['.', '\'', '='])
            && !vars.contains_key(var)
        {
            vars.insert(var.clone(), serde_json::Value::String(rec.key.clone()));
        }
        let slot = self.slot_of_key(&rec.key)?;
        let inst = self.create_instance(
            def.clone(),
            version,
            vars,
            Some(rec.key.clone()),
            start,
            slot,
        )?;
        Ok((inst, def.at(start).id.clone()))
    }

    /// Settles `rec` as correlated into `element` of `inst` and runs on.
    fn correlated(&mut self, rec: &mut MessageRecord, inst: u64, element: String) -> R<()> {
        rec.state = MessageState::Correlated;
        rec.instance = Some(inst);
        rec.element = Some(element);
        rec.settled_at = Some(self.now);
        self.t.put_message(rec)?;
        self.t.bump(Counter::MessagesCorrelated, 1)?;
        self.run()
    }

    /// Settles `rec` as parked for `reason`, visible as a parked event.
    fn park(
        &mut self,
        rec: &mut MessageRecord,
        reason: Reason,
        candidates: Vec<u64>,
        at: Vec<(u64, String)>,
    ) -> R<()> {
        rec.state = MessageState::Parked;
        rec.reason = Some(reason);
        rec.candidates = candidates;
        rec.candidate_elements = at;
        rec.settled_at = Some(self.now);
        self.t.put_message(rec)?;
        self.t.bump(Counter::MessagesParked(reason), 1)?;
        self.parked_event(ParkedEvent::Parked, rec)
    }

    /// Parks a payload that could not be decoded, with its raw bytes.
    pub fn park_malformed(&mut self, m: &Malformed) -> R<Delivery> {
        if self.dedup_hit(&m.name, &m.message_id)?.is_some() {
            self.t.bump(Counter::MessagesDuplicate, 1)?;
            let id = m.message_id.clone();
            return Ok(unsettled(Outcome::Duplicate, id, None, Vec::new()));
        }
        // a message without a key is kept in a slot of this partition's
        let slot = self.home_slot()?;
        let seq = self.t.next_message_seq(slot)?;
        let mut rec = self.new_record(seq, m.message_id.clone());
        rec.name = m.name.clone();
        rec.raw = Some(m.raw.clone());
        rec.attributes = m.attributes.clone();
        rec.note = Some(m.error.clone());
        self.park(&mut rec, Reason::Malformed, Vec::new(), Vec::new())?;
        Ok(delivery_of(&rec))
    }

    /// Parks every buffered message whose TTL ran out; returns how many.
    pub fn expire(&mut self, limit: usize) -> R<usize> {
        let due = self.t.expired(self.now, limit)?;
        for &(at, seq) in &due {
            let mut msg = match self.t.message(seq)? {
                Some(m) if m.state == MessageState::Buffered && m.expires_at == Some(at) => m,
                _ => {
                    self.t.drop_orphan_expiry(at, seq)?;
                    continue;
                }
            };
            msg.state = MessageState::Parked;
            msg.reason = Some(Reason::Expired);
            msg.settled_at = Some(self.now);
            self.t.put_message(&msg)?;
            self.t.bump(Counter::MessagesParked(Reason::Expired), 1)?;
            self.parked_event(ParkedEvent::Expired, &msg)?;
        }
        Ok(due.len())
    }

    pub(super) fn find_message(&mut self, id: &str) -> R<MessageRecord> {
        let (name, bare) = match id.split_once('/') {
            Some((n, i)) => (Some(n), i),
            None => (None, id),
        };
        let mut found = Vec::new();
        for seq in self.t.seqs_by_id(bare)? {
            if let Some(m) = self.t.message(seq)?
                && name.is_none_or(|n| n == m.name)
            {
                found.push(m);
            }
        }
        match found.len() {
            0 => Err(EngineError::UnknownMessageId(id.to_string())),
            1 => Ok(found.remove(0)),
            _ => Err(EngineError::AmbiguousMessageId {
                id: id.to_string(),
                names: found
                    .iter()
                    .map(|m| m.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Evaluates a parked message again, like a new publish.
    pub fn requeue(&mut self, id: &str) -> R<Delivery> {
        let rec = self.find_message(id)?;
        if rec.state != MessageState::Parked {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: rec.state.as_str(),
            });
        }
        if rec.reason == Some(Reason::Malformed) {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: "malformed (its payload cannot be decoded; discard it)",
            });
        }
        let publish = Publish {
            name: rec.name.clone(),
            key: rec.key.clone(),
            message_id: Some(rec.message_id.clone()),
            variables: rec.variables.clone(),
            ttl: None,
            attributes: Vec::new(),
        };
        self.t.bump(Counter::MessagesRequeued, 1)?;
        let seq = rec.seq;
        let delivery = self.accept(&publish, Some(rec), false)?;
        if self.t.parked_events().is_some()
            && let Some(now) = self.t.message(seq)?
        {
            self.parked_event(ParkedEvent::Requeued, &now)?;
        }
        Ok(delivery)
    }

    /// Ends a parked message explicitly, recording why.
    pub fn discard(&mut self, id: &str, by: &str, why: &str) -> R<()> {
        let mut rec = self.find_message(id)?;
        if rec.state != MessageState::Parked {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: rec.state.as_str(),
            });
        }
        rec.state = MessageState::Discarded;
        rec.note = Some(match rec.note.take() {
            Some(old) => format!("{old}; discarded by {by}: {why}"),
            None => format!("discarded by {by}: {why}"),
        });
        rec.settled_at = Some(self.now);
        self.t.put_message(&rec)?;
        self.t.bump(Counter::MessagesDiscarded, 1)?;
        self.parked_event(ParkedEvent::Discarded, &rec)?;
        Ok(())
    }

    /// Broadcasts a signal to every current subscription; never buffered.
    pub fn signal(&mut self, name: &str, vars: &Vars) -> R<usize> {
        let n = self.broadcast(name, vars)?;
        self.run()?;
        Ok(n)
    }

    /// Applies a signal with an id once: a second time it answers what the
    /// first did, and changes nothing.
    pub fn signal_once(&mut self, id: &str, name: &str, vars: &Vars) -> R<usize> {
        if let Some((reached, _)) = self.t.signal_seen(id)? {
            return Ok(reached as usize);
        }
        let n = self.broadcast(name, vars)?;
        self.t.put_signal_seen(id, n as u64, self.now)?;
        self.run()?;
        Ok(n)
    }

    /// In a cluster, keeps a signal a process threw here until every other
    /// partition took it (`reached`: receivers here).
    pub(super) fn signal_out(&mut self, name: &str, reached: usize) -> R<()> {
        if !self.cfg.partition.is_clustered() {
            return Ok(());
        }
        let seq = self.t.next_seq("signal_out")?;
        let id = format!("p{}-s{seq}", self.cfg.partition.index());
        let row = serde_json::json!({"id": id, "name": name, "reached": reached}).to_string();
        self.t.put_signal_out(seq, row.as_bytes())?;
        Ok(())
    }

    /// Forgets signals every other partition took; counts those that reached
    /// nobody anywhere.
    pub fn signals_forwarded(&mut self, done: &[(u64, bool)]) -> R<usize> {
        let mut n = 0;
        for &(seq, unreached) in done {
            if self.t.remove_signal_out(seq)?.is_some() {
                n += 1;
                if unreached {
                    self.t.bump(Counter::SignalsUnreached, 1)?;
                }
            }
        }
        Ok(n)
    }

    /// Starts an instance of the latest version of every process with a
    /// signal start event for `name` (in a cluster on partition 0 only, as
    /// timer starts); returns how many.
    fn start_by_signal(&mut self, name: &str, vars: &Vars) -> R<usize> {
        if self.cfg.partition.index() != 0 {
            return Ok(0);
        }
        let mut started = 0;
        for (process, version) in self.t.latest_versions()? {
            let def = self.def(&process, version)?;
            let starts =
                def.process_starts(|k| matches!(k, StartKind::Signal { signal } if signal == name));
            for idx in starts {
                let slot = self.home_slot()?;
                self.create_instance(def.clone(), version, vars.clone(), None, idx, slot)?;
                started += 1;
            }
        }
        Ok(started)
    }

    pub(super) fn broadcast(&mut self, name: &str, vars: &Vars) -> R<usize> {
        let subs = self.signal_subscribers_now(name)?;
        self.t.bump(Counter::SignalsThrown, 1)?;
        // the processes it starts (after the subscriptions were read: an
        // instance it starts does not also catch it)
        let started = self.start_by_signal(name, vars)?;
        // in a cluster a signal reaches other partitions too: who counts one
        // that reached nobody is the gateway (API) or the thrower's forwarder
        if subs.is_empty() && started == 0 && !self.cfg.partition.is_clustered() {
            self.t.bump(Counter::SignalsUnreached, 1)?;
            tracing::info!(signal = name, "signal reached no subscription");
        }
        for &(inst, token) in &subs {
            self.load(inst)?;
            self.fill_chain(inst, token)?;
            if let Some(esp) = self.listener_at(inst, token) {
                let waits_for_it = self
                    .inst(inst)
                    .tokens
                    .get(token)
                    .is_some_and(|t| matches!(&t.wait, Wait::Signal { name: n } if n == name));
                if waits_for_it {
                    self.listener_fires(inst, token, esp, vars, "signal_received")?;
                }
                continue;
            }
            let waits_for_it = self
                .inst(inst)
                .tokens
                .get(token)
                .is_some_and(|t| match &t.wait {
                    Wait::Signal { name: n } => n == name,
                    Wait::Events { signals, .. } => signals.iter().any(|n| n == name),
                    _ => false,
                });
            if !waits_for_it {
                // the token is in an activity whose boundary event catches it
                if let Some(b) = self.signal_boundary(inst, token, name) {
                    self.fire_boundary(inst, token, b, vars, "signal_received")?;
                }
                continue;
            }
            let idx = self.event_target(
                inst,
                token,
                |k| matches!(k, ElementKind::Catch(CatchKind::Signal { signal }) if signal == name),
            );
            self.cancel_wait(inst, token)?;
            let element = self.proc_of(inst).at(idx).id.clone();
            self.history(inst, &element, "signal_received");
            if self.complete_with(inst, token, idx, vars)? {
                self.queue_leave(inst, token, idx);
            }
        }
        Ok(subs.len() + started)
    }
}
