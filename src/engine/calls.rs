//! Call activities: a token at a call activity starts a child instance of the
//! called process and waits for it (`Wait::Child`). The child's completion
//! moves the token on with the child's variables; cancelling the wait (an
//! interrupting boundary event, a cancelled scope, an operator) cancels the
//! child with everything it waits for. A BPMN error or escalation the child
//! does not catch goes on at the call activity (`throws::catcher`).
//!
//! Invariant: a waiting call activity's token and its active child name each
//! other (`Wait::Child { instance }` ↔ `InstanceRecord::called_by`), checked
//! by `store::verify`; a child cancelled by its parent never reports back.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// A token reaches call activity `idx`: the child starts in this
    /// transaction with the variables the call activity passes in.
    pub(super) fn call(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Activity(ActivityKind::CallActivity {
            process,
            version,
            inputs,
            ..
        }) = &el.kind
        else {
            return Ok(());
        };
        let parent_vars = self.vars_all(inst, token)?;
        let process = &match called_process(process, &parent_vars, self.now) {
            Ok(process) => process,
            Err(why) => {
                let error = format!(
                    "the process to call is read from a variable or expression, and {why}: set it to the id of a deployed process, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
        };
        let version = match version {
            Some(v) => *v,
            None => self.t.latest_version(process)?,
        };
        let which = if version == 0 {
            "any version".to_string()
        } else {
            format!("version {version}")
        };
        let def = match self.def(process, version) {
            Ok(def) => def,
            Err(EngineError::UnknownProcess(_)) => {
                let error = format!(
                    "called process '{process}' ({which}) is not deployed: deploy it, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let Some(start) = def.none_start().and_then(|e| def.index_of(&e.id)) else {
            let error = format!(
                "called process '{process}' has no none start event: a call activity starts its child there"
            );
            self.incident(inst, token, &el.id, error);
            return Ok(());
        };
        let vars = inputs.apply(&parent_vars, self.now).and_then(|mut vars| {
            vars.extend(model::mapped(&el.extras.inputs, &parent_vars, self.now)?);
            Ok(vars)
        });
        let vars = match vars {
            Ok(vars) => vars,
            Err(e) => {
                let error = format!(
                    "input {e}: fix the variables it reads, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
        };
        let business_key = self.inst(inst).business_key.clone();
        // a called instance shares its caller's slot: they move together
        let slot = self.slot_of_id(inst)?;
        let child = self.create_instance(def, version, vars, business_key, start, slot)?;
        self.inst(child).called_by = Some((inst, token));
        self.history(child, process, &format!("called_by {inst}"));
        self.set_token(inst, token, &el.id, Wait::Child { instance: child });
        self.history(inst, &el.id, &format!("called {child}"));
        Ok(())
    }

    /// Instance `child` has ended: if a call activity waits for it, its token
    /// moves on with the child's outputs, or — when an operator cancelled the
    /// child — stops at an incident saying so.
    pub(super) fn child_ended(&mut self, child: u64) -> R<()> {
        let Some((parent, token)) = self.inst(child).called_by else {
            return Ok(());
        };
        match self.load(parent) {
            Ok(()) => {}
            Err(EngineError::UnknownInstance(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
        let p = self.proc_of(parent);
        self.fill_chain(parent, token)?;
        let Some(idx) = self
            .inst(parent)
            .tokens
            .get(token)
            .filter(|t| t.wait == Wait::Child { instance: child })
            .and_then(|t| p.index_of(&t.element))
        else {
            return Ok(()); // the call activity was left meanwhile
        };
        let el = p.at(idx);
        if self.inst(child).cancelled {
            let error = format!("called instance {child} was cancelled: move or cancel this token");
            self.incident(parent, token, &el.id, error);
            return Ok(());
        }
        let result = match &el.kind {
            ElementKind::Activity(ActivityKind::CallActivity { outputs, .. }) => {
                self.fill_vars(child)?;
                match outputs.apply(&self.inst(child).variables.clone(), self.now) {
                    Ok(vars) => vars,
                    Err(e) => {
                        let error = format!(
                            "output {e} (from called instance {child}): fix the variables it reads, then move this token here again"
                        );
                        self.incident(parent, token, &el.id, error);
                        return Ok(());
                    }
                }
            }
            _ => Vars::new(),
        };
        self.set_token(
            parent,
            token,
            &el.id,
            Wait::Incident {
                error: "moving".into(),
            },
        );
        self.history(parent, &el.id, &format!("child_completed {child}"));
        if self.complete_with(parent, token, idx, &result)? {
            self.queue_leave(parent, token, idx);
        }
        Ok(())
    }

    /// The call activity waiting for `child` is left without it: the child is
    /// cancelled with every wait it holds (its own children too), and does
    /// not report back.
    pub(super) fn cancel_child(&mut self, child: u64) -> R<()> {
        match self.load(child) {
            Ok(()) => {}
            Err(EngineError::UnknownInstance(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
        if self.inst(child).ended_at.is_some() {
            return Ok(());
        }
        self.fill_all(child)?;
        let tokens: Vec<u64> = self.inst(child).tokens.iter().map(|t| t.id).collect();
        for t in tokens {
            self.interrupt(child, t)?;
        }
        self.inst(child).tokens.clear();
        self.queue.retain(|s| s.instance() != child);
        self.inst(child).cancelled = true;
        let process = self.inst(child).process.clone();
        self.history(child, &process, "cancelled_by_parent");
        self.finish_instance(child)
    }
}

/// The process a call activity calls: its own id, or the string value of the
/// variable (or path) its expression names (`=PATH`, see
/// [`model::called_process_variable`]); `Err` says why there is none.
fn called_process(process: &str, vars: &Vars, now: crate::clock::Millis) -> Result<String, String> {
    let Some(path) = model::called_process_variable(process) else {
        return Ok(process.to_string());
    };
    if !model::is_path(path) {
        // FEEL (deploy parsed it)
        return match model::feel::eval_text(path, vars, now)? {
            serde_json::Value::String(id) => crate::limits::check_name(path, id.trim())
                .map(str::to_string)
                .map_err(|e| format!("expression {e}")),
            other => Err(format!(
                "expression '{path}' is {}, not the id of a process",
                model::expr::quoted(&other)
            )),
        };
    }
    match model::path_value(path, vars) {
        Some(serde_json::Value::String(id)) => crate::limits::check_name(path, id.trim())
            .map(str::to_string)
            .map_err(|e| format!("variable {e}")),
        None | Some(serde_json::Value::Null) => Err(format!("variable '{path}' is not set")),
        Some(other) => Err(format!(
            "variable '{path}' is {other}, not the id of a process"
        )),
    }
}
