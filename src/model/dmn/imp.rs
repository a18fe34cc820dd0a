//! The DMN engine behind [`super::DecisionModel`]: DecisionToolkit's model
//! parser and evaluator, the typing of JSON variables by the input data's
//! declared types, and a matcher per decision table that tells which of its
//! rules matched (DecisionToolkit answers the value only).
//!
//! Every decision and decision service is evaluated by DecisionToolkit's
//! model evaluator, as the DMN TCK runs it: required decisions, knowledge
//! models, decision services, and results coerced to their declared types.
//! The file is built as [`crate::model::parse::dmn::prepared`] gives it: the
//! names a decision's texts read without the file declaring them (a
//! process's variables, as Camunda and Zeebe have them) are input data of
//! type Any, and `now()`, `today()` and Camunda's extension functions are
//! input data holding postfach's functions bound to the caller's instant.

use super::{Decided, DecisionOutline, DmnOutline};
use crate::model::feel::imp as feel;
use crate::model::parse::ParseError;
use crate::model::parse::dmn::ValueType;
use dsntk_feel::context::FeelContext;
use dsntk_feel::values::Value;
use dsntk_feel::{Evaluator, FeelScope, Name};
use dsntk_feel_parser::AstNode;
use dsntk_model::{DmnElement, ExpressionInstance, NamedElement};
use dsntk_model_evaluator::ModelEvaluator;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A built decision file.
pub(super) struct Built {
    evaluator: Arc<ModelEvaluator>,
    namespace: String,
    model: String,
    /// Per decision table (by decision id): per rule, one evaluator per
    /// input entry (true when the entry matches).
    matchers: HashMap<String, Vec<Vec<Evaluator>>>,
}

pub(super) fn build(file: &str, xml: &str, outline: &DmnOutline) -> Result<Built, ParseError> {
    let refused = |message: String| ParseError::Dmn {
        file: file.into(),
        message,
    };
    let xml = crate::model::parse::dmn::prepared(xml, outline);
    let defs = dsntk_model::parse(&xml).map_err(|e| refused(e.to_string()))?;
    let evaluator =
        ModelEvaluator::new(std::slice::from_ref(&defs)).map_err(|e| refused(e.to_string()))?;
    let mut matchers = HashMap::new();
    for d in defs.decisions() {
        let Some(o) = outline.decisions.iter().find(|o| &o.id == d.id()) else {
            continue;
        };
        if let Some(ExpressionInstance::DecisionTable(table)) = d.decision_logic() {
            let m = table_matcher(table, outline, o)
                .map_err(|e| refused(format!("decision '{}': {e}", d.id())))?;
            matchers.insert(o.id.clone(), m);
        }
    }
    Ok(Built {
        evaluator,
        namespace: defs.namespace().to_string(),
        model: defs.name().to_string(),
        matchers,
    })
}

/// Per rule of `table`, the evaluators of `input expression in input entry`.
fn table_matcher(
    table: &dsntk_model::DecisionTable,
    outline: &DmnOutline,
    d: &DecisionOutline,
) -> Result<Vec<Vec<Evaluator>>, String> {
    let mut known = outline.declared.clone();
    known.extend(d.implicit.iter().chain(&d.functions).cloned());
    let scope = feel::parse_scope("", &known)?;
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
    Ok(rules)
}

/// The variables as the decisions' input: each typed as the input data of
/// its name declares, and postfach's functions bound to `now`.
fn input(
    outline: &DmnOutline,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<FeelContext, String> {
    let mut ctx = FeelContext::default();
    for (k, v) in vars {
        let ty = outline
            .inputs
            .iter()
            .find(|(n, _)| n == k)
            .map_or(&ValueType::Any, |(_, t)| t);
        ctx.set_entry(&Name::from(k.as_str()), typed(v, ty));
    }
    let mut bound: Vec<&String> = Vec::new();
    for d in &outline.decisions {
        for f in &d.functions {
            if !bound.contains(&f) {
                ctx.set_entry(&Name::from(f.as_str()), feel::bound_function(f, now)?);
                bound.push(f);
            }
        }
    }
    Ok(ctx)
}

/// JSON value `v` as FEEL's, read as type `ty` says: ISO 8601 text of a
/// date, time, date and time or duration becomes one (text that is none
/// stays text, which the decision's type check then refuses as DMN does).
fn typed(v: &serde_json::Value, ty: &ValueType) -> Value {
    use serde_json::Value as J;
    match (ty, v) {
        (ValueType::Any, v) => feel::to_feel(v),
        (ValueType::List(item), J::Array(items)) => {
            Value::List(items.iter().map(|i| typed(i, item)).collect())
        }
        (ValueType::Context(fields), J::Object(map)) => {
            let mut ctx = FeelContext::default();
            for (k, v) in map {
                let ty = fields
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or(&ValueType::Any, |(_, t)| t);
                ctx.set_entry(&Name::from(k.as_str()), typed(v, ty));
            }
            Value::Context(ctx)
        }
        (ValueType::Date, J::String(s)) => temporal("date", s),
        (ValueType::Time, J::String(s)) => temporal("time", s),
        (ValueType::DateTime, J::String(s)) => temporal("date and time", s),
        (ValueType::Duration, J::String(s)) => temporal("duration", s),
        (_, v) => feel::to_feel(v),
    }
}

/// Text `s` as FEEL's `function(s)` reads it (`date`, `time`, `date and
/// time`, `duration`); text FEEL cannot read stays text.
fn temporal(function: &'static str, s: &str) -> Value {
    type Conversions = HashMap<&'static str, Evaluator>;
    static CONVERSIONS: OnceLock<Conversions> = OnceLock::new();
    let conversions = CONVERSIONS.get_or_init(|| {
        ["date", "time", "date and time", "duration"]
            .into_iter()
            .filter_map(|f| {
                let scope = feel::parse_scope("", &["s".to_string()]).ok()?;
                let ast =
                    dsntk_feel_parser::parse_expression(&scope, &format!("{f}(s)"), false).ok()?;
                Some((f, dsntk_feel_evaluator::prepare(&ast)))
            })
            .collect()
    });
    let Some(convert) = conversions.get(function) else {
        return Value::String(s.to_string());
    };
    let mut ctx = FeelContext::default();
    ctx.set_entry(&Name::from("s"), Value::String(s.to_string()));
    match convert(&FeelScope::from(ctx)) {
        Value::Null(_) => Value::String(s.to_string()),
        v => v,
    }
}

pub(super) fn decide(
    b: &Built,
    outline: &DmnOutline,
    d: &DecisionOutline,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<Decided, String> {
    let ctx = input(outline, vars, now)?;
    let value = b
        .evaluator
        .evaluate_invocable(&b.namespace, &b.model, &d.name, &ctx);
    let rules = match b.matchers.get(&d.id) {
        Some(matcher) => matched(b, outline, d, matcher, &ctx),
        None => Vec::new(),
    };
    // DMN's semantics: what FEEL cannot compute is null (the DMN TCK holds
    // decisions to it), so is a table where no rule matched
    let value =
        feel::from_feel_nullable(&value).map_err(|why| format!("decision '{}': {why}", d.id))?;
    Ok(Decided { value, rules })
}

/// The ids of the rules of decision table `d` that match: its input
/// expressions read the input and the values of the decisions it requires.
fn matched(
    b: &Built,
    outline: &DmnOutline,
    d: &DecisionOutline,
    matcher: &[Vec<Evaluator>],
    ctx: &FeelContext,
) -> Vec<String> {
    let mut scope_ctx = ctx.clone();
    for required in &d.requires {
        if let Some(r) = outline.decisions.iter().find(|o| &o.id == required) {
            let v = b
                .evaluator
                .evaluate_invocable(&b.namespace, &b.model, &r.name, ctx);
            scope_ctx.set_entry(&Name::from(r.name.as_str()), v);
        }
    }
    let scope = FeelScope::from(scope_ctx);
    matcher
        .iter()
        .zip(&d.rules)
        .filter(|(entries, _)| entries.iter().all(|e| e(&scope).is_true()))
        .map(|(_, id)| id.clone())
        .collect()
}
