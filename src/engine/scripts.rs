//! Script tasks the engine evaluates itself: a Zeebe `zeebe:script` FEEL
//! expression, whose value goes to its result variable in the step the
//! token arrives in.
//!
//! Invariant: the evaluation reads the variables the expression names and
//! the step's instant, nothing else; a value FEEL cannot compute stops the
//! token at an incident naming the element, the expression and the reason —
//! it never sets a null the process goes on with.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Token `token` reaches script task `idx`: its expression is evaluated,
    /// the value set as `result_variable` (through the element's output
    /// mappings, as a worker's result would be) and the token moves on.
    pub(super) fn run_script(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        expression: &model::Expr,
        result_variable: &str,
    ) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let mut vars = self.vars_named(inst, token, crate::store::names_of(expression))?;
        let inputs = el.extras.inputs.iter().flat_map(|m| m.source.names());
        let more = self.vars_named(inst, token, inputs)?;
        vars.extend(more);
        let value = model::mapped(&el.extras.inputs, &vars, self.now).and_then(|inputs| {
            vars.extend(inputs);
            model::eval_value(expression, &vars, self.now)
        });
        let outcome = value
            .map(|v| {
                let result = Vars::from_iter([(result_variable.to_string(), v)]);
                (result, "script_evaluated".to_string())
            })
            .map_err(|e| {
                format!("script {e}: fix the variables it reads, then move this token here again")
            });
        self.finish_evaluation(inst, token, idx, outcome)
    }

    /// An element the engine evaluated itself (a script, a decision) is
    /// done: with a result, `event` goes into the history and the token
    /// moves on with the result (through the element's output mappings);
    /// with an error, the token stops at an incident saying it. In an inner
    /// instance of a multi-instance activity the result is a variable of
    /// that inner instance (as Zeebe has it): each item's output element
    /// reads its own, and nothing of it leaks into the scope around.
    pub(super) fn finish_evaluation(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        outcome: Result<(Vars, String), String>,
    ) -> R<()> {
        let element = self.proc_of(inst).at(idx).id.clone();
        match outcome {
            Ok((result, event)) => {
                self.history(inst, &element, &event);
                if self.inst(inst).body_of(token).is_some()
                    && let Some(t) = self.inst(inst).tokens.get_mut(token)
                {
                    for k in result.keys() {
                        t.locals.insert(k.clone(), serde_json::Value::Null);
                    }
                }
                if self.complete_with(inst, token, idx, &result)? {
                    self.queue_leave(inst, token, idx);
                }
            }
            Err(error) => self.incident(inst, token, &element, error),
        }
        Ok(())
    }
}
