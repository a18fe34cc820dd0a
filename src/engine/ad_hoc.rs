//! Ad-hoc subprocesses: a scope whose activities run when they are
//! activated — by a caller ([`Engine::ad_hoc`], Flowable's
//! `executeActivityInAdhocSubProcess`) or, with Zeebe's
//! `activeElementsCollection`, by the collection when it starts — and that
//! completes by its completion condition, by a caller, or (a collection and
//! no condition) when the last activated activity has ended.
//!
//! Invariant: the token holding an ad-hoc subprocess rests with
//! `Wait::AdHoc` however many activities run inside it (none included); it
//! leaves only through [`Engine::finish_ad_hoc`], which runs when nothing
//! runs inside it any more. An activity is activated only if it is one of
//! the subprocess's activities without incoming flows, and with
//! `ordering="Sequential"` only while nothing else runs inside.

use super::*;
use serde_json::Value;

impl<'a, 't> Engine<'a, 't> {
    /// The token `holder` enters ad-hoc subprocess `idx`: it rests there,
    /// and the activities its active elements collection names start.
    pub(super) fn enter_ad_hoc(&mut self, inst: u64, holder: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Scope(ScopeKind::AdHoc {
            active_elements, ..
        }) = &el.kind
        else {
            return Ok(());
        };
        self.set_token(inst, holder, &el.id, Wait::AdHoc { completing: false });
        self.history(inst, &el.id, "waiting");
        let Some(expr) = active_elements else {
            return Ok(());
        };
        let vars = self.vars_named(inst, holder, crate::store::names_of(expr))?;
        let ids: Result<Vec<String>, String> = match model::eval_value(expr, &vars, self.now) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(format!("it holds {other}, not an element id")),
                })
                .collect(),
            Ok(Value::Null) => Ok(Vec::new()),
            Ok(other) => Err(format!("it is {other}, not a list of element ids")),
            Err(e) => Err(e.to_string()),
        };
        let ids = match ids.and_then(|ids| {
            ids.iter()
                .map(|id| self.activatable(&p, idx, id))
                .collect::<Result<Vec<usize>, String>>()
        }) {
            Ok(ids) => ids,
            Err(why) => {
                let error = format!(
                    "the active elements collection of ad-hoc subprocess '{}' cannot be used: {why}; set it, then move this token here again",
                    el.id
                );
                self.incident(inst, holder, &el.id, error);
                return Ok(());
            }
        };
        if ids.is_empty() {
            // nothing to run: done at once
            return self.finish_ad_hoc(inst, holder, idx);
        }
        for a in ids {
            self.activate_in_ad_hoc(inst, holder, a);
        }
        Ok(())
    }

    /// Element `id` as an activity of ad-hoc subprocess `idx` that can be
    /// activated, or why not.
    fn activatable(&self, p: &Process, idx: usize, id: &str) -> Result<usize, String> {
        let enabled = p.ad_hoc_enabled(idx);
        match p.index_of(id) {
            Some(a) if enabled.contains(&a) => Ok(a),
            _ => {
                let names: Vec<&str> = enabled.iter().map(|&a| p.at(a).id.as_str()).collect();
                Err(format!(
                    "'{id}' is not one of its activities that can be activated ({})",
                    names.join(", ")
                ))
            }
        }
    }

    /// A token starts at activity `a` inside the ad-hoc subprocess `holder` holds.
    fn activate_in_ad_hoc(&mut self, inst: u64, holder: u64, a: usize) {
        let p = self.proc_of(inst);
        let t = self.new_token(inst, &p.at(a).id, holder);
        self.queue_arrive(inst, t, a, None);
    }

    /// A caller activates `activate` in the ad-hoc subprocess token `token`
    /// holds, or (`None`) completes it. Refused, changing nothing, when the
    /// token holds no ad-hoc subprocess, the activity is not one that can be
    /// activated, a sequential one already runs an activity, or (to
    /// complete) activities still run inside it.
    pub fn ad_hoc(&mut self, inst: u64, token: u64, activate: Option<&str>) -> R<Triggered> {
        self.load_active(inst)?;
        let at = self.existing_token(inst, token)?;
        let wait = self.inst(inst).tokens.get(token).map(|t| t.wait.clone());
        let p = self.proc_of(inst);
        let idx = p.index_of(&at).unwrap_or(usize::MAX);
        let refuse = |me: &mut Self, why: String| {
            me.dirty.remove(&inst);
            Err(EngineError::AdHocRefused {
                instance: inst,
                element: at.clone(),
                why,
            })
        };
        // once its condition held only completing it is left to do
        let open = match activate {
            Some(_) => wait == Some(Wait::AdHoc { completing: false }),
            None => matches!(wait, Some(Wait::AdHoc { .. })),
        };
        let sequential = match p.elements.get(idx).map(|e| &e.kind) {
            Some(ElementKind::Scope(ScopeKind::AdHoc { sequential, .. })) if open => *sequential,
            _ => {
                let waits = wait.map_or_else(String::new, |w| w.describe());
                return refuse(
                    self,
                    format!(
                        "token {token} holds no ad-hoc subprocess open for activities (it waits for {waits})"
                    ),
                );
            }
        };
        let running = self.members(inst, token)?.len();
        let element = match activate {
            Some(id) => {
                let a = match self.activatable(&p, idx, id) {
                    Ok(a) => a,
                    Err(why) => return refuse(self, why),
                };
                if sequential && running > 0 {
                    return refuse(
                        self,
                        format!(
                            "its ordering is Sequential and {running} activity runs in it: activate the next one when it has ended"
                        ),
                    );
                }
                self.history(inst, &at, &format!("activated {id}"));
                self.activate_in_ad_hoc(inst, token, a);
                id.to_string()
            }
            None => {
                if running > 0 {
                    return refuse(
                        self,
                        format!(
                            "{running} activities still run in it: complete or cancel them first"
                        ),
                    );
                }
                self.history(inst, &at, "completed_by_caller");
                self.finish_ad_hoc(inst, token, idx)?;
                at.clone()
            }
        };
        self.run()?;
        Ok(Triggered {
            element,
            waiting_at: self.waiting(inst)?,
        })
    }

    /// A token inside the ad-hoc subprocess `holder` holds has ended: its
    /// completion condition is asked; when it holds, the remaining
    /// activities are cancelled (unless `cancelRemainingInstances` is off,
    /// then it waits for them), and with nothing left running it completes.
    pub(super) fn ad_hoc_inner_ended(&mut self, inst: u64, holder: u64) -> R<()> {
        let p = self.proc_of(inst);
        let Some((idx, completing)) = self.inst(inst).tokens.get(holder).and_then(|t| {
            let completing = matches!(t.wait, Wait::AdHoc { completing: true });
            Some((p.index_of(&t.element)?, completing))
        }) else {
            return Ok(());
        };
        let ElementKind::Scope(ScopeKind::AdHoc {
            completion,
            cancel_remaining,
            active_elements,
            ..
        }) = &p.at(idx).kind
        else {
            return Ok(());
        };
        let id = p.at(idx).id.clone();
        let holds = match completion {
            Some(c) => {
                let vars = self.vars_named(inst, holder, crate::store::names_of(c))?;
                match model::eval_bool(c, &vars, self.now) {
                    Ok(h) => h,
                    Err(e) => {
                        // said in the history; it does not hold
                        self.history(
                            inst,
                            &id,
                            &format!("completion_condition_not_evaluated: {e}"),
                        );
                        false
                    }
                }
            }
            None => false,
        };
        if holds && *cancel_remaining {
            for t in self.members(inst, holder)? {
                self.interrupt(inst, t)?;
            }
        }
        if holds {
            self.history(inst, &id, "completion_condition_met");
        }
        let empty = self.scope_done(inst, holder)?;
        let by_collection = completion.is_none() && active_elements.is_some();
        if empty && (holds || completing || by_collection) {
            return self.finish_ad_hoc(inst, holder, idx);
        }
        if holds && let Some(t) = self.inst(inst).tokens.get_mut(holder) {
            t.wait = Wait::AdHoc { completing: true };
        }
        Ok(())
    }

    /// The ad-hoc subprocess `holder` holds completes: its token leaves it.
    pub(super) fn finish_ad_hoc(&mut self, inst: u64, holder: u64, idx: usize) -> R<()> {
        self.cancel_wait(inst, holder)?;
        self.queue_leave(inst, holder, idx);
        Ok(())
    }
}
