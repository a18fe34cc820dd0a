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
        match value {
            Ok(value) => {
                self.history(inst, &el.id, "script_evaluated");
                let result = Vars::from_iter([(result_variable.to_string(), value)]);
                if self.complete_with(inst, token, idx, &result)? {
                    self.queue.push_back(Step::Leave {
                        inst,
                        token,
                        element: idx,
                    });
                }
            }
            Err(e) => {
                let error = format!(
                    "script {e}: fix the variables it reads, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
            }
        }
        Ok(())
    }
}
