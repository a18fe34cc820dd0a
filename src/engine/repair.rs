//! Guarded token repair: add, move and cancel tokens; cancel an instance;
//! set its variables.
//!
//! Invariant: a repair that would make a second token wait for (or reach) a
//! (message, key) already waited for is refused unless forced; a token placed
//! inside a subprocess runs in its one active scope, an inner instance of a
//! multi-instance activity moved to its own element stays that inner
//! instance, and a scope or body a repair leaves empty is cancelled with it.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Adds a token before `element` of instance `inst`. Refused when the token
    /// would open a second subscription for a (message, key) that is already
    /// subscribed, or that another token will subscribe once its pending work runs
    /// (the article's trap: an async repair looks like it did nothing), unless `force`.
    pub fn add_token(&mut self, inst: u64, element: &str, force: bool) -> R<Repair> {
        let idx = self.repair_target(inst, element)?;
        if !force {
            self.repair_guard(inst, idx, None)?;
        }
        let scope = self.repair_scope(inst, idx, None)?;
        let token = self.new_token(inst, element, scope);
        let what = if force {
            "token_added_forced"
        } else {
            "token_added"
        };
        self.history(inst, element, &format!("{what}{}", self.by_actor()));
        self.place(inst, token, idx)
    }

    /// Moves a token to before `element`; guarded like [`Engine::add_token`].
    pub fn move_token(&mut self, inst: u64, token: u64, element: &str, force: bool) -> R<Repair> {
        let idx = self.repair_target(inst, element)?;
        let from = self.existing_token(inst, token)?;
        if !force {
            self.repair_guard(inst, idx, Some(token))?;
        }
        // an inner instance of a multi-instance body moved to its own
        // element runs again as that inner instance, with its item
        let body = self.inst(inst).body_of(token).filter(|_| from == element);
        let scope = match body {
            Some(body) => body,
            None => self.repair_scope(inst, idx, Some(token))?,
        };
        let left = self.scope_of(inst, token);
        self.cancel_wait(inst, token)?;
        self.close_boundaries(inst, token)?;
        if let Some(t) = self.inst(inst).tokens.get_mut(token) {
            if t.scope != scope {
                t.locals.clear(); // they belonged to the scope it leaves
            }
            t.scope = scope;
        }
        let by = self.by_actor();
        self.history(inst, &from, &format!("token_moved_to {element}{by}"));
        if left != scope {
            self.withdraw_empty_scopes(inst, left)?;
        }
        self.place(inst, token, idx)
    }

    /// Removes a token. Removing the last one ends the instance as cancelled.
    pub fn cancel_token(&mut self, inst: u64, token: u64) -> R<Repair> {
        self.load_active(inst)?;
        let at = self.existing_token(inst, token)?;
        let scope = self.scope_of(inst, token);
        self.interrupt(inst, token)?;
        self.history(inst, &at, &format!("token_cancelled{}", self.by_actor()));
        self.withdraw_empty_scopes(inst, scope)?;
        if self.scope_done(inst, 0)? {
            self.close_listeners(inst, 0)?;
        }
        if self.inst(inst).tokens.is_empty() {
            self.inst(inst).cancelled = true;
            self.complete_instance(inst)?;
        }
        self.flush()?;
        Ok(Repair {
            token,
            jobs_created: Vec::new(),
            waiting_at: self.waiting(inst)?,
        })
    }

    /// Ends running instance `inst` as cancelled with everything inside it:
    /// its tokens' waits go with them (jobs, timers, subscriptions, user
    /// tasks, called instances, listening event subprocesses). A caller's
    /// call activity that waited for it stops at an incident, as when its
    /// last token is cancelled.
    pub fn cancel_instance(&mut self, inst: u64) -> R<()> {
        self.load_active(inst)?;
        let top: Vec<u64> = self
            .inst(inst)
            .tokens
            .iter()
            .filter(|t| t.scope == 0)
            .map(|t| t.id)
            .collect();
        for t in top {
            self.interrupt(inst, t)?; // a scope takes its members along
        }
        self.inst(inst).tokens.clear();
        self.queue.retain(|s| s.instance() != inst);
        self.close_listeners(inst, 0)?;
        let process = self.inst(inst).process.clone();
        self.history(
            inst,
            &process,
            &format!("instance_cancelled{}", self.by_actor()),
        );
        self.inst(inst).cancelled = true;
        self.complete_instance(inst)?;
        self.flush()
    }

    /// Sets `vars` in running instance `inst` as token `token` writes them
    /// (a variable local to a scope around it changes there, any other in
    /// the instance); `token` 0 is the instance itself. `local` sets them
    /// on the token itself, visible to it and what runs inside it. Conditions
    /// that read them are asked.
    pub fn set_variables(&mut self, inst: u64, token: u64, local: bool, vars: &Vars) -> R<()> {
        self.load_active(inst)?;
        let at = if token == 0 {
            self.inst(inst).process.clone()
        } else {
            self.existing_token(inst, token)?
        };
        if local && token != 0 {
            if let Some(t) = self.inst(inst).tokens.get_mut(token) {
                for (k, v) in vars {
                    t.locals.insert(k.clone(), v.clone());
                }
            }
            self.conditions_due(inst);
        } else {
            self.merge_vars(inst, token, vars);
        }
        self.history(inst, &at, &format!("variables_set{}", self.by_actor()));
        self.run()
    }

    /// The scope a token placed at `idx` runs in: 0 at the process level, else
    /// the one active scope of the subprocess around `idx` (not `moving`, nor
    /// one inside it, which the move withdraws); a refusal changes nothing.
    pub(super) fn repair_scope(&mut self, inst: u64, idx: usize, moving: Option<u64>) -> R<u64> {
        let p = self.proc_of(inst);
        let Some(sp) = p.parent_of(idx) else {
            return Ok(0);
        };
        let sp_id = p.at(sp).id.clone();
        let rec = self.inst(inst);
        let scope_of = |id: u64| rec.tokens.get(id).map(|t| t.scope);
        let inside_moving = |mut id: u64| {
            let mut hops = 0;
            while id != 0 && hops <= rec.tokens.len() {
                if Some(id) == moving {
                    return true;
                }
                id = scope_of(id).unwrap_or(0);
                hops += 1;
            }
            false
        };
        let holders: Vec<u64> = rec
            .tokens
            .iter()
            .filter(|t| {
                t.element == sp_id
                    && matches!(t.wait, Wait::Scope | Wait::AdHoc { .. })
                    && !inside_moving(t.id)
            })
            .map(|t| t.id)
            .collect();
        if let [one] = holders[..] {
            return Ok(one);
        }
        self.dirty.remove(&inst);
        Err(EngineError::NoSingleScope {
            instance: inst,
            element: p.at(idx).id.clone(),
            subprocess: sp_id,
            active: holders.len(),
        })
    }

    /// A repair took the last token out of `scope`: the scope is cancelled,
    /// and so is each scope around it that this leaves empty.
    pub(super) fn withdraw_empty_scopes(&mut self, inst: u64, mut scope: u64) -> R<()> {
        while scope != 0 && self.scope_done(inst, scope)? {
            let Some(holder) = self.inst(inst).tokens.get(scope).cloned() else {
                break;
            };
            if matches!(holder.wait, Wait::AdHoc { .. }) {
                // an ad-hoc subprocess may be empty: it waits for activations
                // (or, its condition met, for a caller to complete it)
                break;
            }
            self.interrupt(inst, scope)?;
            self.history(inst, &holder.element, "scope_cancelled");
            scope = holder.scope;
        }
        Ok(())
    }

    /// The element of a token named by an operator, or a refusal that changed nothing.
    pub(super) fn existing_token(&mut self, inst: u64, token: u64) -> R<String> {
        match self.inst(inst).tokens.get(token) {
            Some(t) => Ok(t.element.clone()),
            None => {
                self.dirty.remove(&inst);
                Err(EngineError::UnknownToken {
                    instance: inst,
                    token,
                })
            }
        }
    }

    /// Loads an active instance for a repair, with every token (a repair
    /// looks at all of them), or refuses one that has ended.
    pub(super) fn load_active(&mut self, inst: u64) -> R<()> {
        self.load(inst)?;
        if self.inst(inst).ended_at.is_some() {
            self.dirty.remove(&inst);
            return Err(EngineError::InstanceEnded(inst));
        }
        self.fill_all(inst)?;
        self.fill_vars(inst)
    }

    /// Loads an active instance for a repair and resolves `element`, which
    /// must name an element of its process version: an empty or unknown id is
    /// refused, never taken for the first element.
    pub(super) fn repair_target(&mut self, inst: u64, element: &str) -> R<usize> {
        self.load_active(inst)?;
        let p = self.proc_of(inst);
        p.index_of(element).ok_or_else(|| {
            self.dirty.remove(&inst);
            EngineError::UnknownElement {
                process: p.id.clone(),
                element: element.to_string(),
            }
        })
    }

    /// Refuses a repair that would make a second token wait for a (message, key)
    /// some token (other than `moving`) already waits for or will reach.
    pub(super) fn repair_guard(&mut self, inst: u64, target: usize, moving: Option<u64>) -> R<()> {
        let p = self.proc_of(inst);
        for m in p.messages_reachable_from(target).to_vec() {
            let Ok(key) = p.correlation_key(&m, &self.inst(inst).variables) else {
                continue;
            };
            for other in self.t.expecting(&m, &key)? {
                let rec = if other == inst {
                    Some(self.inst(inst).clone())
                } else {
                    self.t.instance_full(other)?
                };
                let Some(rec) = rec else { continue };
                let op = self.def(&rec.process, rec.version)?;
                let holder = rec.tokens.iter().find(|t| {
                    !(other == inst && Some(t.id) == moving)
                        && super::flow::token_reach(&op, t).contains(&m)
                });
                if let Some(t) = holder {
                    let existing_element = t.element.clone();
                    self.dirty.remove(&inst);
                    return Err(EngineError::RepairRefused {
                        message: m,
                        key,
                        existing_instance: other,
                        existing_element,
                    });
                }
            }
        }
        Ok(())
    }

    /// Lets a repaired token arrive at `idx` and reports what that scheduled.
    pub(super) fn place(&mut self, inst: u64, token: u64, idx: usize) -> R<Repair> {
        let before = self.jobs_created.len();
        self.queue_arrive(inst, token, idx, None);
        self.run()?;
        let jobs_created = self.jobs_created[before..].to_vec();
        Ok(Repair {
            token,
            jobs_created,
            waiting_at: self.waiting(inst)?,
        })
    }

    pub(super) fn waiting(&self, inst: u64) -> R<Vec<String>> {
        Ok(self
            .t
            .instance_full(inst)?
            .map(|r| r.tokens.iter().map(|t| t.element.clone()).collect())
            .unwrap_or_default())
    }
}
