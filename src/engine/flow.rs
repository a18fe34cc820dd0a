//! The token loop: instances start, and tokens arrive at, execute and leave
//! elements (`Step::Arrive → Execute → Leave`), until they rest or end.
//!
//! Invariant: one place per lifecycle phase of an element kind — `execute` is
//! the activation, `leave` the completion; what a resting token registers is
//! opened and closed in `waits`.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Starts an instance of the latest version of `process` at its none start event.
    pub fn start(&mut self, process: &str, vars: Vars, business_key: Option<String>) -> R<u64> {
        let version = match self.t.latest_version(process)? {
            0 => return Err(EngineError::UnknownProcess(process.to_string())),
            v => v,
        };
        let def = self.def(process, version)?;
        let start = def
            .none_start()
            .ok_or_else(|| EngineError::NoStartEvent(process.to_string()))?;
        let start_idx = def.index_of(&start.id).unwrap_or(0);
        let slot = self.place_start(&def, &vars)?;
        let id = self.create_instance(def, version, vars, business_key, start_idx, slot)?;
        self.run()?;
        Ok(id)
    }

    /// In a cluster, an instance started by a command lives in the slot of
    /// its correlation key: refused here when another partition owns it (or
    /// it is moving), or when the start does not set it. A process without a
    /// keyed message may start on any partition, in a slot it owns. Returns
    /// the slot.
    fn place_start(&mut self, def: &Process, vars: &Vars) -> R<u32> {
        let Some(state) = self.t.slot_state()? else {
            return Ok(0);
        };
        let Some(message) = def.keyed_messages().next() else {
            return self.home_slot();
        };
        match def.correlation_key(message, vars) {
            Ok(key) => self.own_key(&key).map(|()| state.map.slot_of_key(&key)),
            Err(variable) => Err(EngineError::KeyNeeded {
                process: def.id.clone(),
                variable: variable.to_string(),
                count: state.map.partitions(),
            }),
        }
    }

    pub(super) fn create_instance(
        &mut self,
        def: Arc<Process>,
        version: u32,
        vars: Vars,
        business_key: Option<String>,
        start: usize,
        slot: u32,
    ) -> R<u64> {
        let id = self.t.next_slot_id("instance", slot)?;
        let rec = InstanceRecord {
            id,
            process: def.id.clone(),
            version,
            business_key,
            variables: Variables::complete(vars),
            tokens: Tokens::complete([Token {
                id: 1,
                element: def.at(start).id.clone(),
                wait: Wait::Incident {
                    error: "starting".into(),
                },
                since: self.now,
                timers: Vec::new(),
                scope: 0,
                locals: Vars::new(),
                boundary_messages: Vec::new(),
                boundary_signals: Vec::new(),
            }]),
            next_token: 2,
            activations: 0,
            history_len: 0,
            started_at: self.now,
            ended_at: None,
            cancelled: false,
            expects: Vec::new(),
            top_level: 1,
            called_by: None,
            new_history: vec![HistoryEntry {
                element: def.id.clone(),
                event: "instance_started".into(),
                at: self.now,
            }],
        };
        self.dirty.insert(
            id,
            Box::new(Dirty {
                rec,
                process: def,
                before: Resting::default(),
                conditions_due: false,
            }),
        );
        self.queue_arrive(id, 1, start, None);
        self.open_listeners(id, 0, None);
        Ok(id)
    }

    /// Runs queued steps until every token rests, then writes dirty instances.
    pub(super) fn run(&mut self) -> R<()> {
        let mut guard = 0u64;
        let mut rounds = 0u32;
        loop {
            self.run_queue(&mut guard)?;
            // every token rests now: an inclusive join nothing can reach any more fires
            if self.settle_inclusive_joins()? {
                continue;
            }
            // and the conditions of instances whose variables changed are asked
            // (after the last round those still holding become incidents)
            if self.fire_conditions(rounds >= conditions::MAX_ROUNDS)? {
                rounds += 1;
                continue;
            }
            break;
        }
        self.flush()
    }

    fn run_queue(&mut self, guard: &mut u64) -> R<()> {
        while let Some(step) = self.queue.pop_front() {
            *guard += 1;
            if *guard > 1_000_000 {
                // a model that loops without a wait state: stop it visibly
                let (Step::Arrive {
                    inst,
                    token,
                    element,
                    ..
                }
                | Step::Execute {
                    inst,
                    token,
                    element,
                }
                | Step::Leave {
                    inst,
                    token,
                    element,
                }) = step;
                let id = self.proc_of(inst).at(element).id.clone();
                self.incident(
                    inst,
                    token,
                    &id,
                    "loop without wait state: stopped after 1,000,000 steps".into(),
                );
                self.queue.clear();
                break;
            }
            if !self.has_token(step.instance(), step.token())? {
                continue; // withdrawn meanwhile (its scope was cancelled or ended)
            }
            match step {
                Step::Arrive {
                    inst,
                    token,
                    element,
                    via,
                } => self.arrive(inst, token, element, via)?,
                Step::Execute {
                    inst,
                    token,
                    element,
                } => self.execute(inst, token, element)?,
                Step::Leave {
                    inst,
                    token,
                    element,
                } => self.leave(inst, token, element)?,
            }
        }
        Ok(())
    }

    /// Fires every inclusive join with waiting tokens that no other token of its
    /// scope can still reach; returns whether one fired (its token moves on).
    fn settle_inclusive_joins(&mut self) -> R<bool> {
        let mut fired = false;
        let ids: Vec<u64> = self.dirty.keys().copied().collect();
        for inst in ids {
            let p = self.proc_of(inst);
            if self.inst(inst).ended_at.is_some() || !p.has_inclusive_join() {
                continue;
            }
            self.fill_all(inst)?;
            let rec = self.inst(inst);
            let waiting_at = |t: &Token| {
                matches!(t.wait, Wait::Join { .. })
                    .then(|| p.index_of(&t.element))
                    .flatten()
                    .filter(|&i| {
                        matches!(
                            p.at(i).kind,
                            ElementKind::Gateway(GatewayKind::Inclusive { .. })
                        )
                    })
            };
            let mut joins: Vec<(usize, u64)> = rec
                .tokens
                .iter()
                .filter_map(|t| Some((waiting_at(t)?, t.scope)))
                .collect();
            joins.sort_unstable();
            joins.dedup();
            for (join, scope) in joins {
                let rec = self.inst(inst);
                let here = |t: &Token| t.scope == scope && waiting_at(t) == Some(join);
                let blocked = rec.tokens.iter().any(|t| {
                    t.scope == scope
                        && !here(t)
                        && p.index_of(&t.element)
                            .is_none_or(|at| p.can_reach(at, join))
                });
                if blocked {
                    continue;
                }
                rec.tokens.retain(|t| !here(t));
                let id = p.at(join).id.clone();
                let merged = self.new_token(inst, &id, scope);
                self.history(inst, &id, "joined");
                self.queue_leave(inst, merged, join);
                fired = true;
            }
        }
        Ok(fired)
    }

    pub(super) fn arrive(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        via: Option<usize>,
    ) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        if !self.join(inst, token, idx, via)? {
            return Ok(());
        }
        self.history(inst, &el.id, "activated");
        if el.async_before {
            let job = self.create_job(inst, token, &el.id, JobKind::Continue)?;
            self.set_token(inst, token, &el.id, Wait::Job { job });
            return Ok(());
        }
        self.queue.push_back(Step::Execute {
            inst,
            token,
            element: idx,
        });
        Ok(())
    }

    pub(super) fn execute(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        // an inner instance of a multi-instance body: the body holds the boundary events
        let inner = self.inst(inst).body_of(token).is_some();
        let hosts = !inner && !el.boundaries.is_empty() && family::hosts_boundaries(&el.kind);
        if hosts {
            if let Some(error) = self.boundary_key_problem(inst, token, &p, idx)? {
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
            self.open_boundaries(inst, token, &p, idx)?;
        }
        if el.extras.multi.is_some() && !inner {
            self.start_body(inst, token, idx)?;
        } else {
            self.activate(inst, token, idx)?;
        }
        if hosts {
            self.take_buffered_at_boundaries(inst, token, idx)?;
        }
        Ok(())
    }

    /// A passing element: no result arrives here, so its output mappings
    /// read the variables and inputs; then the token leaves.
    pub(super) fn pass_through(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        if p.at(idx).extras.outputs.is_empty()
            || self.complete_with(inst, token, idx, &Vars::new())?
        {
            self.queue_leave(inst, token, idx);
        }
        Ok(())
    }

    /// The token arrives at element `idx` (by flow `via`) in a later step of
    /// this command.
    pub(super) fn queue_arrive(&mut self, inst: u64, token: u64, idx: usize, via: Option<usize>) {
        self.queue.push_back(Step::Arrive {
            inst,
            token,
            element: idx,
            via,
        });
    }

    /// The token leaves the element in a later step of this command.
    pub(super) fn queue_leave(&mut self, inst: u64, token: u64, idx: usize) {
        self.queue.push_back(Step::Leave {
            inst,
            token,
            element: idx,
        });
    }

    /// The element has completed: its boundary timers end, and the token takes
    /// its outgoing flows now or, with asyncAfter, when that job runs. (An
    /// inner instance of a multi-instance body reports to its body instead.)
    pub(super) fn leave(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        self.remember_compensable(inst, token, idx)?;
        if let Some(body) = self.inst(inst).body_of(token) {
            return self.inner_done(inst, body, token, idx);
        }
        self.close_boundaries(inst, token)?;
        let p = self.proc_of(inst);
        let el = p.at(idx);
        self.history(inst, &el.id, "completed");
        if self.completed_elsewhere(inst, token, idx)? {
            return Ok(());
        }
        if el.extras.async_after {
            let job = self.create_job(inst, token, &el.id, JobKind::ContinueAfter)?;
            self.set_token(inst, token, &el.id, Wait::Job { job });
            return Ok(());
        }
        self.depart(inst, token, idx)
    }

    /// The token takes the element's outgoing flows whose conditions hold (as
    /// its kind decides), or ends there when it has none.
    pub(super) fn depart(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let taken = self.choose_flows(inst, token, idx)?;
        let chosen = match taken {
            Ok(c) => c,
            Err(error) => {
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
        };
        if el.outgoing.is_empty() {
            // implicit end
            return self.end_token(inst, token);
        }
        if chosen.is_empty() {
            let error = format!(
                "no outgoing flow of '{}' can be taken: every condition is false and there is no default flow",
                el.id
            );
            self.incident(inst, token, &el.id, error);
            return Ok(());
        }
        let scope = self.scope_of(inst, token);
        for (i, f) in chosen.into_iter().enumerate() {
            let target = p.flows[f].target;
            let tid = if i == 0 {
                token
            } else {
                self.new_token(inst, &el.id, scope)
            };
            let target_id = p.at(target).id.clone();
            self.set_token(
                inst,
                tid,
                &target_id,
                Wait::Incident {
                    error: "moving".into(),
                },
            );
            self.queue_arrive(inst, tid, target, Some(f));
        }
        Ok(())
    }

    /// A token ends (at an end event, or where no flow leads on). The last
    /// token of a subprocess's scope completes the subprocess: its token
    /// leaves it; the last token of the instance completes the instance.
    pub(super) fn end_token(&mut self, inst: u64, token: u64) -> R<()> {
        let scope = self.scope_of(inst, token);
        self.inst(inst).tokens.remove(token);
        if scope != 0 && self.proc_of(inst).has_ad_hoc() {
            self.fill(inst, scope)?;
            let in_ad_hoc = matches!(
                self.inst(inst).tokens.get(scope).map(|t| &t.wait),
                Some(Wait::AdHoc { .. })
            );
            if in_ad_hoc {
                return self.ad_hoc_inner_ended(inst, scope);
            }
        }
        if !self.scope_done(inst, scope)? {
            return Ok(());
        }
        if scope == 0 {
            self.close_listeners(inst, 0)?;
            if self.no_tokens(inst)? {
                self.complete_instance(inst)?;
            }
            return Ok(());
        }
        let p = self.proc_of(inst);
        self.fill(inst, scope)?;
        let Some(idx) = self
            .inst(inst)
            .tokens
            .get(scope)
            .and_then(|t| p.index_of(&t.element))
        else {
            return Ok(());
        };
        // its listeners stop; the scope completed, it was not cancelled
        self.close_listeners(inst, scope)?;
        self.cancel_wait(inst, scope)?;
        if let ElementKind::Throw(ThrowKind::Compensate { wait: false, .. }) = p.at(idx).kind {
            // the holder of handlers nobody waits for ends with them
            return self.end_token(inst, scope);
        }
        self.queue_leave(inst, scope, idx);
        Ok(())
    }

    /// Whether nothing runs in `scope` any more: no token but the listeners
    /// of its event subprocesses (which stop when their scope ends).
    ///
    /// Reads the scope's members only when its size allows nothing but
    /// listeners (at most one per event subprocess of the process): a step
    /// inside a large scope does not read its neighbours.
    pub(super) fn scope_done(&mut self, inst: u64, scope: u64) -> R<bool> {
        let p = self.proc_of(inst);
        self.fill_size(inst, scope)?;
        let size = self.inst(inst).tokens.scope_size(scope);
        if size == 0 {
            return Ok(true);
        }
        if size > p.event_subprocess_count() as u64 {
            return Ok(false);
        }
        let members = self.members(inst, scope)?;
        let rec = self.inst(inst);
        Ok(!members
            .iter()
            .filter_map(|&m| rec.tokens.get(m))
            .any(|t| !is_listener(&p, t)))
    }

    /// Whether instance `inst` has no token left (every token runs at the
    /// process level or inside a scope held by one that does).
    pub(super) fn no_tokens(&mut self, inst: u64) -> R<bool> {
        self.fill_size(inst, 0)?;
        Ok(self.inst(inst).tokens.scope_size(0) == 0)
    }

    /// The token `holder` enters the subprocess or event subprocess at `idx`:
    /// it holds the scope, a token starts inside at `start`, and the event
    /// subprocesses inside begin to listen.
    pub(super) fn enter_scope(&mut self, inst: u64, holder: u64, idx: usize, start: usize) {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let Some(first) = p.elements.get(start) else {
            let error = format!("subprocess '{}' has no start event", el.id);
            self.incident(inst, holder, &el.id, error);
            return;
        };
        self.set_token(inst, holder, &el.id, Wait::Scope);
        let inner = self.new_token(inst, &first.id, holder);
        self.queue_arrive(inst, inner, start, None);
        self.open_listeners(inst, holder, Some(idx));
    }

    /// The instance has ended (completed, terminated or cancelled by an
    /// operator): recorded, and a call activity waiting for it is told.
    pub(super) fn complete_instance(&mut self, inst: u64) -> R<()> {
        self.finish_instance(inst)?;
        self.child_ended(inst)
    }

    /// Records the end of an instance: no later message for it is expected.
    pub(super) fn finish_instance(&mut self, inst: u64) -> R<()> {
        let p = self.proc_of(inst);
        let now = self.now;
        let rec = self.inst(inst);
        rec.ended_at = Some(now);
        rec.record(&p.id, "instance_completed", now);
        if p.has_compensation() {
            // nothing of an ended instance is compensated any more
            self.t.clear_compensables(inst)?;
        }
        let vars = self.key_variables(inst, 0)?;
        for (m, k) in p.correlation_pairs(&vars) {
            self.t.set_passed(m, &k, inst, true)?;
        }
        Ok(())
    }

    /// Keeps `expect` equal to the (message, key) pairs this instance may still
    /// catch: those waited for where its tokens are or downstream of them.
    ///
    /// A process without message catches expects nothing and reads no token;
    /// one with them reads every token of the instance here when a token
    /// began or ended, or moved to where other messages may come, or a key
    /// variable changed (a bound on the size of instances that catch
    /// messages, see ARCHITECTURE.md) — not when tokens only went on within
    /// the same reach ([`expects_stand`]).
    pub(super) fn refresh_expect(&mut self, inst: u64) -> R<()> {
        let p = self.proc_of(inst);
        if !p
            .elements
            .iter()
            .any(|e| e.kind.waits_for_message().is_some())
        {
            self.inst(inst).expects.clear();
            return Ok(());
        }
        // nothing moved and no variable changed: what it expects is the same
        let rec = self.inst(inst);
        if rec.tokens.is_unchanged() && rec.variables.is_unchanged() {
            return Ok(());
        }
        // tokens moved without changing what they wait for: the same,
        // without reading the instance's other tokens
        if expects_stand(&p, rec) {
            return Ok(());
        }
        // an instance without tokens (it ended) expects nothing
        if self.no_tokens(inst)? {
            self.inst(inst).expects.clear();
            return Ok(());
        }
        let desired = self.desired_expects(inst)?;
        self.inst(inst).expects = desired;
        Ok(())
    }

    /// The (message, key) pairs instance `inst` may still catch, from every
    /// token it has (all are read).
    pub(super) fn desired_expects(&mut self, inst: u64) -> R<Vec<(String, String)>> {
        let p = self.proc_of(inst);
        self.fill_all(inst)?;
        let ids: Vec<u64> = self.inst(inst).tokens.iter().map(|t| t.id).collect();
        let mut desired: Vec<(String, String)> = Vec::new();
        for id in ids {
            let Some(t) = self.inst(inst).tokens.get(id) else {
                continue;
            };
            let reach = token_reach(&p, t);
            if reach.is_empty() {
                continue;
            }
            let vars = self.key_variables(inst, id)?;
            for m in reach {
                if let Ok(k) = p.correlation_key(m, &vars) {
                    let e = (m.clone(), k);
                    if !desired.contains(&e) {
                        desired.push(e);
                    }
                }
            }
        }
        Ok(desired)
    }

    /// The variables `token` sees that correlation keys of its process name
    /// (only those are read).
    pub(super) fn key_variables(&mut self, inst: u64, token: u64) -> R<Vars> {
        let p = self.proc_of(inst);
        let names: Vec<String> = p
            .correlation_keys
            .values()
            .flat_map(|spec| model::key_names(spec))
            .collect();
        self.vars_named(inst, token, names.iter().map(String::as_str))
    }

    /// Moves a token to a given element (the timer target of an event gateway).
    pub(super) fn force_target(&mut self, inst: u64, token: u64, target: usize) -> usize {
        let id = self.proc_of(inst).at(target).id.clone();
        let now = self.now;
        if let Some(t) = self.inst(inst).tokens.get_mut(token) {
            t.element = id;
            t.since = now;
        }
        target
    }
}

/// Whether what `rec` expects stays as stored although its tokens or
/// variables changed: every changed token still runs, in the same scope with
/// the same local variables, and may wait for the same messages (at its
/// element and downstream) as before; and no variable that a correlation key
/// names changed. The stored expectations were right for the stored tokens
/// and variables, so they are right now.
fn expects_stand(p: &Process, rec: &crate::store::InstanceRecord) -> bool {
    let tokens_stand = rec.tokens.changes().into_iter().all(|c| match c {
        (Some(was), Some(now)) => {
            was.scope == now.scope
                && was.locals == now.locals
                && token_reach(p, was) == token_reach(p, now)
        }
        _ => false,
    });
    tokens_stand && {
        let changed = rec.variables.changes();
        changed.is_empty()
            || !p
                .correlation_keys
                .values()
                .flat_map(|spec| model::key_names(spec))
                .any(|name| changed.iter().any(|(n, _)| *n == name))
    }
}

/// Whether token `t` listens for the event of an event subprocess (rather
/// than running inside one, or anywhere else).
pub(super) fn is_listener(p: &Process, t: &Token) -> bool {
    t.wait != Wait::Scope
        && p.element(&t.element).is_some_and(|e| {
            matches!(
                e.kind,
                ElementKind::Scope(ScopeKind::EventSubProcess { .. })
            )
        })
}

/// Message names token `t` may still wait for: at its element and downstream
/// (inside a subprocess and after it), or, for the token holding a
/// subprocess's scope, at that subprocess's boundary events and after them
/// (the tokens inside speak for the rest).
pub(super) fn token_reach<'p>(p: &'p Process, t: &Token) -> &'p [String] {
    let Some(idx) = p.index_of(&t.element) else {
        return &[];
    };
    if t.wait == Wait::Scope {
        p.messages_reachable_from_scope(idx)
    } else {
        p.messages_reachable_from(idx)
    }
}
