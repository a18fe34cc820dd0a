//! Conditional events: an intermediate conditional catch event, a
//! conditional boundary event and a conditional event subprocess fire when
//! their condition holds; a conditional start event starts an instance when
//! variables offered to it make its condition hold ([`Engine::start_by_conditions`]). Nothing is registered for them: a condition is
//! asked when its wait begins (the catch is reached, the activity or scope
//! begins) and after every command that changed the instance's variables,
//! once every token of the command rests.
//!
//! Invariants: conditions are asked only for instances whose variables
//! changed or that began such a wait in this command (`Dirty::conditions_due`),
//! so an instance nobody touched costs nothing; a condition that cannot be
//! evaluated (a variable not set yet) does not hold; a boundary condition is
//! asked only while its activity runs (not before an asyncBefore job has
//! started it, not after it completed), on the token that holds the
//! activity's boundary events; one command asks at most [`MAX_ROUNDS`]
//! rounds, so conditions that keep firing each other cannot hold the writer:
//! a condition that still holds after the last round does not fire, it
//! becomes an incident naming its element (the waiting token's, or a new
//! token's at the boundary event), so nothing stops silently.

use super::*;

/// The most rounds of conditions one command asks.
pub(super) const MAX_ROUNDS: u32 = 1000;

/// The incident of a conditional event at `element` that still holds after
/// [`MAX_ROUNDS`] rounds in one command.
fn endless(element: &str) -> String {
    format!(
        "the condition of '{element}' still holds after {MAX_ROUNDS} rounds of conditional events in one command: the conditions keep firing each other; change the variables or the model, then move or cancel this token"
    )
}

impl<'a, 't> Engine<'a, 't> {
    /// Variables offered to every process with a conditional start event
    /// (only to `process`, when given): an instance of the latest version
    /// starts at each conditional start event whose condition holds over
    /// them (a failed evaluation does not hold), with them as its variables;
    /// in a cluster on partition 0 only, as signal and timer starts (another
    /// partition refuses, naming partition 0, before anything is written).
    /// Returns the instances started, in the order of the processes' ids.
    pub fn start_by_conditions(&mut self, process: Option<&str>, vars: &Vars) -> R<Vec<u64>> {
        let part = self.cfg.partition;
        if part.index() != 0 {
            return Err(EngineError::OtherPartition {
                what: "a conditional start".into(),
                owner: 0,
                here: part.index(),
                version: self.map_version()?,
            });
        }
        if let Some(p) = process
            && self.t.latest_version(p)? == 0
        {
            return Err(EngineError::UnknownProcess(p.to_string()));
        }
        let mut started = Vec::new();
        for (id, version) in self.t.latest_versions()? {
            if process.is_some_and(|p| p != id) {
                continue;
            }
            let def = self.def(&id, version)?;
            let now = self.now;
            let starts = def.process_starts(|k| {
                matches!(k, StartKind::Conditional { condition }
                    if model::eval_bool(condition, vars, now).unwrap_or(false))
            });
            for idx in starts {
                let slot = self.home_slot()?;
                started.push(self.create_instance(
                    def.clone(),
                    version,
                    vars.clone(),
                    None,
                    idx,
                    slot,
                )?);
            }
        }
        self.run()?;
        Ok(started)
    }

    /// Whether `condition` holds for `token` (a failed evaluation does not).
    pub(super) fn holds(&mut self, inst: u64, token: u64, condition: &model::Expr) -> R<bool> {
        let vars = self.vars_named(inst, token, crate::store::names_of(condition))?;
        Ok(model::eval_bool(condition, &vars, self.now).unwrap_or(false))
    }

    /// Asks the conditions of every instance that is due; fires those that
    /// hold, or, once the rounds are used up (`stop`), raises an incident
    /// for each instead. Returns whether one fired (its steps are queued).
    pub(super) fn fire_conditions(&mut self, stop: bool) -> R<bool> {
        let due: Vec<u64> = self
            .dirty
            .iter_mut()
            .filter_map(|(id, d)| std::mem::take(&mut d.conditions_due).then_some(*id))
            .collect();
        let mut fired = false;
        for inst in due {
            if self.inst(inst).ended_at.is_some() {
                continue;
            }
            let p = self.proc_of(inst);
            if !p.has_conditions() {
                continue;
            }
            // every token is asked: a process with conditional events pays
            // for its instance's size on each step that changes variables
            self.fill_all(inst)?;
            let tokens: Vec<u64> = self.inst(inst).tokens.iter().map(|t| t.id).collect();
            for token in tokens {
                // an earlier firing may have withdrawn it
                let Some(t) = self.inst(inst).tokens.get(token) else {
                    continue;
                };
                let (waits, element) = (t.wait == Wait::Condition, t.element.clone());
                let Some(idx) = p.index_of(&element) else {
                    continue;
                };
                fired |= match &p.at(idx).kind {
                    ElementKind::Catch(CatchKind::Conditional { condition })
                    | ElementKind::Scope(ScopeKind::EventSubProcess {
                        trigger: Trigger::Condition { condition },
                        ..
                    }) if waits && stop => {
                        if self.holds(inst, token, condition)? {
                            self.incident(inst, token, &element, endless(&element));
                        }
                        false
                    }
                    ElementKind::Catch(CatchKind::Conditional { condition }) if waits => {
                        let holds = self.holds(inst, token, condition)?;
                        if holds {
                            self.cancel_wait(inst, token)?;
                            self.history(inst, &element, "condition_met");
                            self.queue_leave(inst, token, idx);
                        }
                        holds
                    }
                    ElementKind::Scope(ScopeKind::EventSubProcess {
                        trigger: Trigger::Condition { condition },
                        ..
                    }) if waits => {
                        let holds = self.holds(inst, token, condition)?;
                        if holds {
                            self.listener_fires(inst, token, idx, &Vars::new(), "condition_met")?;
                        }
                        holds
                    }
                    _ => self.fire_boundary_conditions(inst, token, &p, idx, stop)?,
                };
            }
        }
        Ok(fired)
    }

    /// The conditional boundary events of activity `idx` whose condition
    /// holds fire, while `token` runs the activity; an interrupting one ends
    /// it (and the rest are not asked). With `stop`, each that holds starts
    /// a token that stops at the boundary event with an incident instead.
    fn fire_boundary_conditions(
        &mut self,
        inst: u64,
        token: u64,
        p: &Process,
        idx: usize,
        stop: bool,
    ) -> R<bool> {
        let conditional = p.at(idx).boundaries.iter().any(|&b| {
            matches!(
                p.at(b).kind,
                ElementKind::Boundary {
                    trigger: Trigger::Condition { .. },
                    ..
                }
            )
        });
        if !conditional || !self.runs_activity(inst, token)? {
            return Ok(false);
        }
        let mut fired = false;
        for &b in &p.at(idx).boundaries {
            let ElementKind::Boundary {
                trigger: Trigger::Condition { condition },
                cancel,
                ..
            } = &p.at(b).kind
            else {
                continue;
            };
            if stop && self.holds(inst, token, condition)? {
                let boundary = p.at(b).id.clone();
                let scope = self.scope_of(inst, token);
                let held = self.new_token(inst, &boundary, scope);
                self.incident(inst, held, &boundary, endless(&boundary));
                continue;
            }
            if self.holds(inst, token, condition)? {
                self.fire_boundary(inst, token, b, &Vars::new(), "condition_met")?;
                fired = true;
                if *cancel {
                    break;
                }
            }
        }
        Ok(fired)
    }

    /// Whether `token` is inside the activity it rests at, holding its
    /// boundary events: not an inner instance of a multi-instance body (the
    /// body holds them), not waiting for the asyncBefore job that starts the
    /// activity or the asyncAfter job after it, not stopped at an incident.
    fn runs_activity(&mut self, inst: u64, token: u64) -> R<bool> {
        if self.inst(inst).body_of(token).is_some() {
            return Ok(false);
        }
        let Some(wait) = self.inst(inst).tokens.get(token).map(|t| t.wait.clone()) else {
            return Ok(false);
        };
        Ok(match wait {
            Wait::Job { job } => self
                .t
                .job(job)?
                .is_some_and(|j| matches!(j.kind, JobKind::Task { .. })),
            // waiting inside it for an event, a person or a caller
            Wait::Message { .. } | Wait::Signal { .. } | Wait::Timer { .. } => true,
            Wait::Events { .. } | Wait::Task { .. } | Wait::Condition | Wait::Trigger => true,
            // holding what runs inside it
            Wait::Scope | Wait::Child { .. } | Wait::Body { .. } | Wait::AdHoc { .. } => true,
            Wait::Compensating => true,
            // not started yet, or stopped
            Wait::Join { .. } | Wait::Incident { .. } => false,
        })
    }
}
