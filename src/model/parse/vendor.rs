//! What a model says in its vendors' extensions that postfach does not run
//! as written: listeners, Java implementations, mappings it cannot evaluate,
//! typed send tasks, call activity options.
//!
//! Invariant: every such part becomes one deploy warning naming the element;
//! a strict deploy refuses the file on any of them.

use super::Warning;
use super::context::{event_definitions, is_true};
use super::data::{extras_of, reads_variables_only};
use super::scopes::scope_tree;
use super::xml::Node;
use crate::model::{ActivityKind, ElementKind, Process};

/// What a process says that postfach does not execute: listeners, Java
/// implementations, variable mappings it cannot evaluate, typed send tasks
/// (a Flowable mail task: a job for a worker).
pub(super) fn not_run_as_written(p: &Node, proc: &Process, out: &mut Vec<Warning>) {
    let mut warn = |n: &Node, messages: Vec<String>| {
        let id = if n.id().is_empty() {
            proc.id.clone()
        } else {
            n.id()
        };
        out.extend(messages.into_iter().map(|message| Warning {
            id: id.clone(),
            line: n.line,
            message,
        }))
    };
    warn(p, listener_warnings(p));
    for (n, _) in scope_tree(p) {
        let Some(el) = proc.element(&n.id()) else {
            continue;
        };
        warn(n, listener_warnings(n));
        warn(n, definition_warnings(n));
        warn(n, activity_warnings(n, &el.kind));
    }
}

/// The listeners and variable mappings of `n` that are not run.
fn listener_warnings(n: &Node) -> Vec<String> {
    let mut out = Vec::new();
    let Some(ext) = n.child("extensionElements") else {
        return out;
    };
    for c in &ext.children {
        match c.name.as_str() {
            "executionListener" | "taskListener" => {
                let how = ["class", "delegateExpression", "expression"]
                    .iter()
                    .find_map(|a| c.attr(a).map(|v| format!(" ({a} '{v}')")))
                    .unwrap_or_default();
                out.push(format!("{}{how} is not run by postfach", c.name));
            }
            "inputOutput" | "ioMapping" => out.extend(extras_of(n).1),
            _ => {}
        }
    }
    out
}

/// The options of `n`'s event definitions and loop characteristics that are
/// not applied.
fn definition_warnings(n: &Node) -> Vec<String> {
    let mut out = Vec::new();
    for d in event_definitions(n)
        .into_iter()
        .filter(|d| d.name == "conditionalEventDefinition")
    {
        for a in ["variableName", "variableEvents"] {
            if let Some(v) = d.attr(a) {
                out.push(format!(
                    "conditionalEventDefinition {a} '{v}' is not applied: the condition is asked after every command that changed the instance's variables"
                ));
            }
        }
    }
    if let Some(lc) = n.child("multiInstanceLoopCharacteristics") {
        for a in ["async", "asyncBefore", "asyncAfter"] {
            if is_true(lc.attr(a)) {
                out.push(format!(
                    "multiInstanceLoopCharacteristics {a} is not applied: the inner instances start in the transaction that starts the activity (asyncBefore on the activity itself is)"
                ));
            }
        }
    }
    out
}

/// What activity `n` of kind `kind` says that is not run as written.
fn activity_warnings(n: &Node, kind: &ElementKind) -> Vec<String> {
    let implementation = ["class", "delegateExpression", "expression"]
        .iter()
        .find_map(|a| n.attr(a).map(|v| (*a, v)));
    let ElementKind::Activity(activity) = kind else {
        return Vec::new();
    };
    match (activity, implementation) {
        (
            ActivityKind::ServiceTask { topic }
            | ActivityKind::Publish { topic }
            | ActivityKind::Delegated { topic, .. },
            Some((attr, v)),
        ) => vec![format!(
            "{attr} '{v}' is not run: the task waits as a job on topic '{topic}' for a handler or worker"
        )],
        (ActivityKind::Decide { decision, .. }, _)
            if n.attr("decisionRefBinding").map(str::trim) == Some("deployment")
                || super::context::extension(n, "calledDecision")
                    .and_then(|z| z.attr("bindingType"))
                    .map(str::trim)
                    == Some("deployment") =>
        {
            vec![format!(
                "decides with the latest deployed version of '{decision}', not the one deployed with this file"
            )]
        }
        (ActivityKind::CallActivity { process, .. }, _) => call_activity_warnings(n, process),
        (ActivityKind::UserTask { spec }, _) => [
            ("assignee", &spec.assignee),
            ("candidateUsers", &spec.candidate_users),
            ("candidateGroups", &spec.candidate_groups),
            ("dueDate", &spec.due_date),
            ("followUpDate", &spec.follow_up_date),
            ("priority", &spec.priority),
            ("formKey", &spec.form_key),
        ]
        .into_iter()
        .filter_map(|(attr, raw)| {
            let raw = raw.as_deref().filter(|r| !reads_variables_only(r))?;
            Some(format!(
                "userTask {attr} '{raw}' is not evaluated as written: postfach reads variables and paths (${{a.b}}, =a.b, text with ${{a}} inside); the task gets no {attr} where it cannot"
            ))
        })
        .collect(),
        (
            ActivityKind::Delegated {
                topic,
                work:
                    crate::model::Delegated::Send {
                        implementation: Some(t),
                        ..
                    },
            },
            None,
        ) => vec![format!(
            "sendTask of type '{t}' is not run by postfach: it waits as a job on topic '{topic}' for a worker that sends it, unless a broker topic is bound to it at deploy time"
        )],
        _ => Vec::new(),
    }
}

/// What a call activity says that postfach does not do as written.
pub(super) fn call_activity_warnings(n: &Node, process: &str) -> Vec<String> {
    let mut out = Vec::new();
    if n.attr("calledElementBinding").map(str::trim) == Some("deployment")
        || is_true(n.attr("sameDeployment"))
    {
        out.push(format!(
            "calls the latest deployed version of '{process}', not the one deployed with this file"
        ));
    }
    for a in ["variableMappingClass", "variableMappingDelegateExpression"] {
        if let Some(v) = n.attr(a) {
            out.push(format!(
                "{a} '{v}' is not run: variables cross as the in/out mappings say"
            ));
        }
    }
    let mappings = n
        .child("extensionElements")
        .map(|x| x.children.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.name == "in" || c.name == "out");
    for c in mappings {
        if is_true(c.attr("local")) {
            out.push(format!(
                "{} with local=\"true\" passes the variables it names from the whole instance: postfach keeps no local variables",
                c.name
            ));
        }
        if let Some(bk) = c.attr("businessKey").map(str::trim)
            && !matches!(
                bk,
                "#{execution.processBusinessKey}" | "${execution.processBusinessKey}"
            )
        {
            out.push(format!(
                "businessKey '{bk}' is not evaluated: the child inherits the parent's business key"
            ));
        }
    }
    out
}
