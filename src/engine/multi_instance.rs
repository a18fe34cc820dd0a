//! Multi-instance activities: a token that reaches a task, subprocess or
//! call activity with multi-instance characteristics becomes its body
//! (`Wait::Body`); the body starts one inner instance per item — a token at
//! the same element, in the body's scope, with its item and index as
//! variables local to it — all at once (parallel) or one after the other
//! (sequential), and leaves when they have completed.
//!
//! Invariants: a body's inner instances are exactly the tokens whose scope is
//! the body (`InstanceRecord::body_of`); the body, not an inner instance,
//! holds the activity's boundary events, so an interrupting one cancels every
//! inner instance with the body (`cancel_wait`); the items are fixed when the
//! body starts; between transactions a body has at least one inner instance
//! (an empty collection completes the activity at once); the output
//! collection has one entry per item, in item order, whatever order the
//! inner instances complete in.

use super::*;
use crate::model::{LoopOver, MultiInstance};
use serde_json::Value;

impl<'a, 't> Engine<'a, 't> {
    /// A token executes multi-instance activity `idx`: it becomes the body,
    /// the items are evaluated (a collection or loopCardinality that cannot
    /// be is an incident naming it), and the first inner instances start.
    pub(super) fn start_body(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let Some(mi) = &el.extras.multi else {
            return Ok(());
        };
        let limit = self.cfg.multi_instance_items;
        let items = {
            let vars = self.vars_all(inst, token)?;
            items_of(mi, &vars, limit, self.now)
        };
        let (count, items) = match items {
            Ok(found) => found,
            Err(error) => {
                let error = format!(
                    "multi-instance {error}: set the variable and move the token here again"
                );
                self.incident(inst, token, &el.id, error);
                return Ok(());
            }
        };
        self.history(inst, &el.id, &format!("multi_instance_started {count}"));
        // the items (and the outputs to come) are rows of their own: a step
        // of one inner instance reads and writes its own, not all of them
        self.t.clear_body_items(inst, token)?;
        if !items.is_empty() || mi.output_collection.is_some() {
            let output = mi
                .output_collection
                .as_ref()
                .map(|_| Value::Null.to_string());
            for i in 0..count {
                let item = BodyItem {
                    item: items.get(i as usize).cloned(),
                    output: output.clone(),
                };
                self.t.put_body_item(inst, token, i, &item)?;
            }
        }
        self.set_token(
            inst,
            token,
            &el.id,
            Wait::Body {
                items: Vec::new(),
                outputs: Vec::new(),
                count,
                started: 0,
                completed: 0,
            },
        );
        if count == 0 {
            return self.finish_body(inst, token, idx);
        }
        let first = if mi.sequential { 1 } else { count };
        for _ in 0..first {
            self.start_inner(inst, token, idx)?;
        }
        Ok(())
    }

    /// The body starts its next inner instance: its index and item become
    /// its local variables, and it executes the activity (the body already
    /// arrived: no second asyncBefore job, no second boundary events).
    fn start_inner(&mut self, inst: u64, body: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let Some(mi) = &el.extras.multi else {
            return Ok(());
        };
        let mut next = None;
        if let Some(t) = self.inst(inst).tokens.get_mut(body)
            && let Wait::Body { started, .. } = &mut t.wait
        {
            next = Some(*started);
            *started += 1;
        }
        let Some(i) = next else {
            return Ok(());
        };
        let item = match &mi.element_variable {
            Some(_) => self.t.body_item(inst, body, i)?.and_then(|b| b.item),
            None => None,
        };
        let inner = self.new_token(inst, &el.id, body);
        self.locals_of(inst, inner, |l| {
            l.insert(mi.index_variable.clone(), i.into());
            if let (Some(var), Some(item)) = (&mi.element_variable, item) {
                let value = serde_json::from_str(&item).unwrap_or(Value::Null);
                l.insert(var.clone(), value);
            }
        });
        self.history(inst, &el.id, &format!("inner_started {i}"));
        self.queue.push_back(Step::Execute {
            inst,
            token: inner,
            element: idx,
        });
        Ok(())
    }

    /// Inner instance `inner` of `body` has completed the activity: its
    /// output element goes into the output collection at its index, the
    /// completion condition is asked, and the next inner instance starts or
    /// the body completes. A completion condition that cannot be evaluated
    /// stops the inner instance at an incident (nothing of it is counted).
    pub(super) fn inner_done(&mut self, inst: u64, body: u64, inner: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let Some(mi) = &el.extras.multi else {
            return Ok(());
        };
        // only what the index, the output element and the completion
        // condition name is read: not the collection the items came from
        let mut names: Vec<&str> = vec![mi.index_variable.as_str(), "nrOfInstances"];
        names.extend(mi.output_element.iter().flat_map(crate::store::names_of));
        names.extend(mi.completion.iter().flat_map(crate::store::names_of));
        let mut vars = self.vars_named(inst, inner, names)?;
        let now = self.now;
        let index = vars
            .get(&mi.index_variable)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let output = mi
            .output_element
            .as_ref()
            .map(|e| model::eval_value(e, &vars, now));
        // the counters as they will be once this inner instance is done
        let completed = self.body_counts(inst, body).1 + 1;
        let active = self.inner_count(inst, body)?.saturating_sub(1);
        vars.insert("nrOfCompletedInstances".into(), completed.into());
        vars.insert("nrOfActiveInstances".into(), active.into());
        // the same counts under Zeebe's names
        vars.insert("numberOfCompletedInstances".into(), completed.into());
        vars.insert("numberOfActiveInstances".into(), active.into());
        if let Some(n) = vars.get("nrOfInstances").cloned() {
            vars.insert("numberOfInstances".into(), n);
        }
        let done_early = match mi
            .completion
            .as_ref()
            .map(|c| model::eval_bool(c, &vars, now))
        {
            None => false,
            Some(Ok(holds)) => holds,
            Some(Err(e)) => {
                let error = format!(
                    "multi-instance completionCondition: {e}: set the variable and move this inner instance's token here again (the activity runs again for its item)"
                );
                self.incident(inst, inner, &el.id, error);
                return Ok(());
            }
        };
        self.history(inst, &el.id, &format!("inner_completed {index}"));
        let output = output.map(|value| {
            value.unwrap_or_else(|e| {
                self.history(inst, &el.id, &format!("output_element_null {index}: {e}"));
                Value::Null
            })
        });
        self.inst(inst).tokens.remove(inner);
        if let Some(t) = self.inst(inst).tokens.get_mut(body)
            && let Wait::Body { completed, .. } = &mut t.wait
        {
            *completed += 1;
        }
        if let (Some(value), Ok(index)) = (output, u32::try_from(index)) {
            let mut row = self.t.body_item(inst, body, index)?.unwrap_or_default();
            row.output = Some(value.to_string());
            self.t.put_body_item(inst, body, index, &row)?;
        }
        if done_early {
            for t in self.members(inst, body)? {
                self.interrupt(inst, t)?;
            }
            self.history(inst, &el.id, "completion_condition_met");
            return self.finish_body(inst, body, idx);
        }
        if self.inner_count(inst, body)? == 0 {
            let (started, _, count) = self.body_counts(inst, body);
            if started < count {
                self.start_inner(inst, body, idx)?;
            } else {
                return self.finish_body(inst, body, idx);
            }
        }
        Ok(())
    }

    /// Every inner instance is done: the output collection is set in the
    /// scope around the body, and the body leaves the activity (its boundary
    /// events close, its outgoing flows are taken).
    fn finish_body(&mut self, inst: u64, body: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let mi: Option<&MultiInstance> = p.at(idx).extras.multi.as_ref();
        let (count, scope) = match self.inst(inst).tokens.get(body) {
            Some(Token {
                wait: Wait::Body { count, .. },
                scope,
                ..
            }) => (*count, *scope),
            Some(_) | None => return Ok(()),
        };
        let outputs = match mi.and_then(|m| m.output_collection.as_ref()) {
            Some(_) => self.t.body_items(inst, body)?,
            None => Vec::new(),
        };
        self.cancel_wait(inst, body)?;
        if let Some(out) = mi.and_then(|m| m.output_collection.as_ref()) {
            // one entry per item, in item order
            let mut list = vec![Value::Null; count as usize];
            for (i, row) in outputs {
                if let (Some(slot), Some(json)) = (list.get_mut(i as usize), row.output) {
                    *slot = serde_json::from_str(&json).unwrap_or(Value::Null);
                }
            }
            let list = list;
            self.inst(inst).assign(scope, out, Value::Array(list));
            self.conditions_due(inst);
        }
        self.queue_leave(inst, body, idx);
        Ok(())
    }

    /// How many inner instances `body` has now (the tokens in its scope),
    /// from the stored count: no inner instance is read.
    fn inner_count(&mut self, inst: u64, body: u64) -> R<usize> {
        self.fill_size(inst, body)?;
        Ok(self.inst(inst).tokens.scope_size(body) as usize)
    }

    /// (started, completed, count) of `body`.
    fn body_counts(&mut self, inst: u64, body: u64) -> (u32, u32, u32) {
        match self.inst(inst).tokens.get(body) {
            Some(Token {
                wait:
                    Wait::Body {
                        started,
                        completed,
                        count,
                        ..
                    },
                ..
            }) => (*started, *completed, *count),
            _ => (0, 0, 0),
        }
    }

    /// Changes the local variables of `token`.
    fn locals_of(&mut self, inst: u64, token: u64, change: impl FnOnce(&mut Vars)) {
        if let Some(t) = self.inst(inst).tokens.get_mut(token) {
            change(&mut t.locals);
        }
    }
}

/// The number of inner instances and their items (as JSON text; none for
/// loopCardinality), or what is wrong with the collection or cardinality.
fn items_of(
    mi: &MultiInstance,
    vars: &Vars,
    limit: u32,
    now: crate::clock::Millis,
) -> Result<(u32, Vec<String>), String> {
    let count_ok = |n: usize, what: &str| {
        u32::try_from(n)
            .ok()
            .filter(|&n| n <= limit)
            .ok_or_else(|| {
                format!(
                    "{what} asks for {n} inner instances, more than the {limit} one activity runs (the engine setting multi_instance_items)"
                )
            })
    };
    match &mi.over {
        LoopOver::Collection(e) => match model::eval_value(e, vars, now) {
            Ok(Value::Array(items)) => {
                let count = count_ok(items.len(), "collection")?;
                Ok((count, items.iter().map(Value::to_string).collect()))
            }
            Ok(other) => Err(format!(
                "collection is {}, not a list",
                model::expr::quoted(&other)
            )),
            Err(e) => Err(format!("collection: {e}")),
        },
        LoopOver::Cardinality(e) => match model::eval_value(e, vars, now) {
            Ok(v) => {
                let n = v
                    .as_u64()
                    .or_else(|| {
                        v.as_f64()
                            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                            .map(|f| f as u64)
                    })
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .ok_or_else(|| {
                        format!(
                            "loopCardinality is {}, not a whole number of 0 or more",
                            model::expr::quoted(&v)
                        )
                    })?;
                let count = count_ok(usize::try_from(n).unwrap_or(usize::MAX), "loopCardinality")?;
                Ok((count, Vec::new()))
            }
            Err(e) => Err(format!("loopCardinality: {e}")),
        },
    }
}
