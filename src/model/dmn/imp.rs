//! The DMN engine behind [`super::DecisionModel`]: DecisionToolkit's model
//! parser and evaluators, and a matcher per decision table that tells which
//! of its rules matched (DecisionToolkit answers the value only).
//!
//! A decision table or literal expression is evaluated in a scope of all
//! the instance's variables and the values of the decisions it requires (a
//! process's decisions read its variables without declaring them as input
//! data, as Camunda and Zeebe have them); any other decision logic (boxed
//! contexts, invocations of knowledge models …) goes to DecisionToolkit's
//! model evaluator, which sees the input data the file declares.

use super::{Decided, DecisionOutline, DmnOutline};
use crate::model::feel::imp as feel;
use crate::model::parse::ParseError;
use dsntk_feel::context::FeelContext;
use dsntk_feel::values::Value;
use dsntk_feel::{Evaluator, FeelScope, Name};
use dsntk_feel_parser::AstNode;
use dsntk_model::{DmnElement, ExpressionInstance, NamedElement};
use dsntk_model_evaluator::ModelEvaluator;
use std::collections::HashMap;
use std::sync::Arc;

/// A built decision file.
pub(super) struct Built {
    evaluator: Arc<ModelEvaluator>,
    namespace: String,
    model: String,
    /// Per decision id: how its value is computed.
    logic: HashMap<String, Logic>,
}

/// How a decision's value is computed.
enum Logic {
    /// A decision table: its evaluator (hit policy included) and, per rule,
    /// one evaluator per input entry (true when the entry matches).
    Table(Evaluator, Vec<Vec<Evaluator>>),
    /// A literal expression.
    Literal(Evaluator),
    /// Anything else, by DecisionToolkit's model evaluator.
    Model,
}

pub(super) fn build(file: &str, xml: &str, outline: &DmnOutline) -> Result<Built, ParseError> {
    let refused = |message: String| ParseError::Dmn {
        file: file.into(),
        message,
    };
    let defs = dsntk_model::parse(xml).map_err(|e| refused(e.to_string()))?;
    let evaluator =
        ModelEvaluator::new(std::slice::from_ref(&defs)).map_err(|e| refused(e.to_string()))?;
    let declared = &outline.declared;
    let mut logic = HashMap::new();
    for d in defs.decisions() {
        let knowledge = outline
            .decisions
            .iter()
            .any(|o| &o.id == d.id() && o.uses_knowledge);
        let built = match d.decision_logic() {
            _ if knowledge => Ok(Logic::Model),
            Some(ExpressionInstance::DecisionTable(table)) => table_logic(table, declared),
            Some(ExpressionInstance::LiteralExpression(e)) => {
                let text = e.text().clone().unwrap_or_default();
                feel::parse_scope(&text, declared).and_then(|scope| {
                    dsntk_feel_parser::parse_expression(&scope, &text, false)
                        .map(|ast| Logic::Literal(dsntk_feel_evaluator::prepare(&ast)))
                        .map_err(|e| e.to_string())
                })
            }
            _ => Ok(Logic::Model),
        };
        let built = built.map_err(|e| refused(format!("decision '{}': {e}", d.id())))?;
        logic.insert(d.id().clone(), built);
    }
    Ok(Built {
        evaluator,
        namespace: defs.namespace().to_string(),
        model: defs.name().to_string(),
        logic,
    })
}

/// A decision table's evaluator and, per rule, the evaluators of `input
/// expression in input entry`.
fn table_logic(table: &dsntk_model::DecisionTable, declared: &[String]) -> Result<Logic, String> {
    let mut texts: Vec<&str> = table
        .input_clauses()
        .map(|c| c.input_expression.as_str())
        .collect();
    for r in table.rules() {
        texts.extend(r.input_entries.iter().map(|e| e.text.as_str()));
        texts.extend(r.output_entries.iter().map(|e| e.text.as_str()));
    }
    let scope = feel::parse_scope(&texts.join(" "), declared)?;
    let evaluator = dsntk_model_evaluator::build_decision_table_evaluator(&scope, table)
        .map_err(|e| e.to_string())?;
    let parse_err = |e: dsntk_common::DsntkError| e.to_string();
    let inputs: Vec<AstNode> = table
        .input_clauses()
        .map(|c| dsntk_feel_parser::parse_expression(&scope, &c.input_expression, false))
        .collect::<Result<_, _>>()
        .map_err(parse_err)?;
    let mut rules = Vec::new();
    for r in table.rules() {
        let mut entries = Vec::new();
        for (input, entry) in inputs.iter().zip(&r.input_entries) {
            let tests = dsntk_feel_parser::parse_unary_tests(&scope, &entry.text, false)
                .map_err(parse_err)?;
            let node = AstNode::In(Box::new(input.clone()), Box::new(tests));
            entries.push(dsntk_feel_evaluator::prepare(&node));
        }
        rules.push(entries);
    }
    Ok(Logic::Table(evaluator, rules))
}

/// The variables as a FEEL context, with `now` and `today` bound to `now`.
fn context(vars: &crate::Vars, now: crate::clock::Millis) -> Result<FeelContext, String> {
    let mut ctx = FeelContext::default();
    for (k, v) in vars {
        ctx.set_entry(&Name::from(k.as_str()), feel::to_feel(v));
    }
    feel::bind_clock(&mut ctx, now)?;
    Ok(ctx)
}

pub(super) fn decide(
    b: &Built,
    outline: &DmnOutline,
    d: &DecisionOutline,
    vars: &crate::Vars,
    now: crate::clock::Millis,
) -> Result<Decided, String> {
    let ctx = context(vars, now)?;
    let mut known = HashMap::new();
    let (value, rules) = value_of(b, outline, d, &ctx, &mut known, 0)?;
    // DMN's semantics: what FEEL cannot compute is null (the DMN TCK holds
    // decisions to it), so is a table where no rule matched
    let value =
        feel::from_feel_nullable(&value).map_err(|why| format!("decision '{}': {why}", d.id))?;
    Ok(Decided { value, rules })
}

/// The deepest chain of required decisions followed.
const MAX_DEPTH: usize = 64;

/// The value of decision `d` (and the rules of its table that matched),
/// its required decisions first; `known` keeps the values computed.
fn value_of(
    b: &Built,
    outline: &DmnOutline,
    d: &DecisionOutline,
    ctx: &FeelContext,
    known: &mut HashMap<String, Value>,
    depth: usize,
) -> Result<(Value, Vec<String>), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "decision '{}' requires decisions deeper than {MAX_DEPTH} levels (a cycle?)",
            d.id
        ));
    }
    let model = || {
        b.evaluator
            .evaluate_invocable(&b.namespace, &b.model, &d.name, ctx)
    };
    let logic = b.logic.get(&d.id).unwrap_or(&Logic::Model);
    if matches!(logic, Logic::Model) {
        return Ok((model(), Vec::new()));
    }
    // the variables, with the decisions it requires under their names
    let mut scope_ctx = ctx.clone();
    for required in &d.requires {
        let Some(r) = outline.decisions.iter().find(|o| &o.id == required) else {
            return Err(format!(
                "decision '{}' requires '{required}', which the file does not have",
                d.id
            ));
        };
        let v = match known.get(&r.id) {
            Some(v) => v.clone(),
            None => {
                let v = value_of(b, outline, r, ctx, known, depth + 1)?.0;
                known.insert(r.id.clone(), v.clone());
                v
            }
        };
        scope_ctx.set_entry(&Name::from(r.name.as_str()), v);
    }
    let scope = FeelScope::from(scope_ctx);
    Ok(match logic {
        Logic::Table(evaluator, matcher) => {
            let rules = matcher
                .iter()
                .zip(&d.rules)
                .filter(|(entries, _)| entries.iter().all(|e| e(&scope).is_true()))
                .map(|(_, id)| id.clone())
                .collect();
            (evaluator(&scope), rules)
        }
        Logic::Literal(evaluator) => (evaluator(&scope), Vec::new()),
        Logic::Model => (model(), Vec::new()),
    })
}
