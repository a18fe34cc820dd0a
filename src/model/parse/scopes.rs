//! Scopes: embedded and event subprocesses, call activities, and
//! multi-instance activities — what runs inside what, where a scope starts,
//! and what a call activity passes in and out.
//!
//! Invariant: an embedded subprocess starts at exactly one none start event
//! and an event subprocess at exactly one start event whose event it keeps
//! as its trigger; multi-instance runs only on activities, with expressions
//! postfach can evaluate.

use super::context::{Cx, extension, is_true, issue, strip_feel};
use super::data::{camunda_source, expression_path, variable_path};
use super::xml::Node;
use crate::model::{ActivityKind, Element, ElementKind, ScopeKind, StartKind, parse_condition};

/// The element kind of subprocess or call activity `n`; a subprocess's start
/// and children are filled in once every element has its index ([`fill`]).
/// `None` when it has a problem, recorded in `cx`.
pub(super) fn kind(cx: &mut Cx, n: &Node) -> Option<ElementKind> {
    match n.name.as_str() {
        "subProcess" if event_subprocess(n) => {
            Some(ElementKind::Scope(ScopeKind::EventSubProcess {
                start: usize::MAX,
                children: Vec::new(),
                trigger: crate::model::Trigger::Error { code: None },
                interrupting: true,
            }))
        }
        // a transaction runs as a subprocess; what sets it apart (its
        // cancel end and cancel boundary events) is resolved in `compensation`
        "subProcess" | "transaction" => Some(ElementKind::Scope(ScopeKind::SubProcess {
            start: usize::MAX,
            children: Vec::new(),
        })),
        "adHocSubProcess" => ad_hoc(n)
            .map_err(|message| cx.problem(issue(n, message)))
            .ok(),
        "callActivity" => call_activity(n)
            .map_err(|message| cx.problem(issue(n, message)))
            .ok(),
        _ => None,
    }
}

/// Gives every subprocess its children (from `parents`, the subprocess each
/// element is directly inside) and its start event, and an event
/// subprocess the trigger and interruption its start event said.
pub(super) fn fill(
    cx: &mut Cx,
    elements: &mut [Element],
    flow_nodes: &[&Node],
    parents: &[Option<usize>],
) {
    for (i, parent) in parents.iter().enumerate() {
        if let Some(sp) = *parent
            && let ElementKind::Scope(ScopeKind::SubProcess { children, .. })
            | ElementKind::Scope(ScopeKind::EventSubProcess { children, .. })
            | ElementKind::Scope(ScopeKind::AdHoc { children, .. }) = &mut elements[sp].kind
        {
            children.push(i);
        }
    }
    for (i, n) in flow_nodes.iter().enumerate() {
        let (ElementKind::Scope(ScopeKind::SubProcess { children, .. })
        | ElementKind::Scope(ScopeKind::EventSubProcess { children, .. })) = &elements[i].kind
        else {
            continue;
        };
        let is_event = matches!(
            elements[i].kind,
            ElementKind::Scope(ScopeKind::EventSubProcess { .. })
        );
        let starts: Vec<usize> = children
            .iter()
            .copied()
            .filter(|&c| matches!(elements[c].kind, ElementKind::Start(_)))
            .collect();
        match starts.as_slice() {
            [s] if is_event => {
                let s = *s;
                // a start event whose definition was refused has no trigger:
                // its issue is reported already
                if let Some((t, intr)) = cx.esp_starts.remove(&n.id())
                    && let ElementKind::Scope(ScopeKind::EventSubProcess {
                        start,
                        trigger,
                        interrupting,
                        ..
                    }) = &mut elements[i].kind
                {
                    (*start, *trigger, *interrupting) = (s, t, intr);
                }
            }
            [s] if elements[*s].kind == ElementKind::Start(StartKind::Plain) => {
                let s = *s;
                if let ElementKind::Scope(ScopeKind::SubProcess { start, .. }) = &mut elements[i].kind {
                    *start = s;
                }
            }
            [s] => cx.problem(issue(
                n,
                format!(
                    "starts at '{}', a {}: an embedded subprocess starts at one none start event (message and timer starts belong to event subprocesses)",
                    elements[*s].id,
                    elements[*s].kind.label()
                ),
            )),
            [] if is_event => cx.problem(issue(
                n,
                "event subprocess has no start event: give it one with the event that starts it"
                    .into(),
            )),
            [] => cx.problem(issue(
                n,
                "embedded subprocess has no start event: give it one none start event".into(),
            )),
            _ => cx.problem(issue(
                n,
                format!(
                    "{} has {} start events: give it exactly one",
                    if is_event {
                        "event subprocess"
                    } else {
                        "embedded subprocess"
                    },
                    starts.len()
                ),
            )),
        }
    }
}

/// Whether node `n` holds flow nodes of its own: a subprocess (embedded or
/// event) or a transaction.
pub(super) fn is_scope_node(n: &Node) -> bool {
    matches!(
        n.name.as_str(),
        "subProcess" | "transaction" | "adHocSubProcess"
    )
}

/// An ad-hoc subprocess as Flowable writes it (`ordering`,
/// `cancelRemainingInstances`, `<completionCondition>`) and as Zeebe does
/// (`zeebe:adHoc activeElementsCollection`); its children are filled in by
/// [`fill`].
fn ad_hoc(n: &Node) -> Result<ElementKind, String> {
    let completion = n
        .child("completionCondition")
        .map(|c| c.text.trim())
        .filter(|t| !t.is_empty())
        .map(|t| {
            parse_condition(t).map_err(|e| {
                format!("ad-hoc completionCondition '{t}' cannot be evaluated ({e}): postfach reads variables, paths, literals, comparisons and arithmetic")
            })
        })
        .transpose()?;
    let active_elements = extension(n, "adHoc")
        .and_then(|z| z.attr("activeElementsCollection"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            parse_condition(t).map_err(|e| {
                format!("activeElementsCollection '{t}' cannot be evaluated ({e}): postfach reads a variable or path holding a list of element ids")
            })
        })
        .transpose()?;
    let sequential = match n.attr("ordering").map(str::trim) {
        None | Some("Parallel") => false,
        Some("Sequential") => true,
        Some(other) => {
            return Err(format!(
                "ordering '{other}' is neither Parallel nor Sequential"
            ));
        }
    };
    Ok(ElementKind::Scope(ScopeKind::AdHoc {
        children: Vec::new(),
        completion,
        cancel_remaining: !n
            .attr("cancelRemainingInstances")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false")),
        sequential,
        active_elements,
    }))
}

/// Whether `n` is an event subprocess (`triggeredByEvent="true"`).
pub(super) fn event_subprocess(n: &Node) -> bool {
    n.name == "subProcess" && is_true(n.attr("triggeredByEvent"))
}

/// The children of a process and of its subprocesses (embedded and event
/// subprocesses), depth first (a subprocess before its own children), each
/// with the subprocess node it is directly inside (`None` at the process level).
pub(super) fn scope_tree(p: &Node) -> Vec<(&Node, Option<&Node>)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&Node, Option<&Node>)> =
        p.children.iter().rev().map(|c| (c, None)).collect();
    while let Some((n, parent)) = stack.pop() {
        out.push((n, parent));
        if is_scope_node(n) {
            stack.extend(n.children.iter().rev().map(|c| (c, Some(n))));
        }
    }
    out
}

/// A call activity as the vendors write it: the called process
/// (`calledElement`, Zeebe `calledElement processId`), the version
/// (`camunda:calledElementBinding="version"` with `calledElementVersion`,
/// else the latest), and the variables in and out (`camunda:in`/`out`,
/// `flowable:in`/`out` with `variables="all"` or `source`/`sourceExpression`
/// and `target`; `flowable:inheritVariables`; Zeebe
/// `propagateAllParentVariables` / `propagateAllChildVariables`). Without any
/// of them every variable goes in and comes back out.
pub(super) fn call_activity(n: &Node) -> Result<ElementKind, String> {
    let zeebe = extension(n, "calledElement");
    if let Some(case) = n.attr("caseRef").filter(|c| !c.trim().is_empty()) {
        return Err(format!(
            "call activity calls the CMMN case '{}' (camunda:caseRef): postfach runs BPMN processes, not cases",
            case.trim()
        ));
    }
    let raw = n
        .attr("calledElement")
        .or_else(|| zeebe.and_then(|z| z.attr("processId")))
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or(
            "call activity names no process: set calledElement (or zeebe:calledElement processId)",
        )?;
    // an expression is kept as `=PATH` (a process id never starts with
    // `=`): the process is read from that variable when the activity starts
    let unreadable = || {
        format!(
            "called process given by the expression '{raw}': postfach reads the process id from a variable or path there (${{name}}, #{{order.process}}, =name), or name the process id in the model"
        )
    };
    let literal = raw
        .strip_prefix('=')
        .map(str::trim)
        .and_then(|f| f.strip_prefix('"'))
        .and_then(|f| f.strip_suffix('"'));
    let feel = super::data::feel_text(raw).filter(|_| literal.is_none());
    let process = match (literal, expression_path(raw)) {
        (Some(literal), _) => literal.to_string(),
        // FEEL beyond a path: evaluated when the activity starts
        (None, _) if feel.is_some() => {
            feel.unwrap_or(Ok(()))
                .map_err(|e| format!("calledElement '{raw}': {e}"))?;
            format!("={}", crate::model::feel::body(raw).unwrap_or_default())
        }
        (None, Some(Some(path))) => format!("={path}"),
        (None, Some(None)) => return Err(unreadable()),
        // `="…` without its closing quote is no process id either
        (None, None) if raw.starts_with('=') => return Err(unreadable()),
        (None, None) => raw.to_string(),
    };
    if n.attr("calledElementType")
        .is_some_and(|t| t.trim() == "id")
    {
        return Err("flowable:calledElementType=\"id\" names a deployed definition id: name the process key instead".into());
    }
    let version = match n.attr("calledElementBinding").map(str::trim) {
        None | Some("latest") | Some("deployment") => None,
        Some("version") => {
            let v = n.attr("calledElementVersion").map(str::trim).unwrap_or("");
            Some(v.parse::<u32>().ok().filter(|&v| v > 0).ok_or_else(|| {
                format!("calledElementBinding=\"version\" needs calledElementVersion as a version number, not '{v}'")
            })?)
        }
        Some(other) => {
            return Err(format!(
                "calledElementBinding '{other}' is not supported: use latest, deployment or version"
            ));
        }
    };
    let mut inputs = crate::model::VarPass::default();
    let mut outputs = crate::model::VarPass::default();
    let (mut any_in, mut any_out) = (false, false);
    for c in n
        .child("extensionElements")
        .map(|x| x.children.as_slice())
        .unwrap_or_default()
    {
        let pass = match c.name.as_str() {
            "in" => {
                any_in = true;
                &mut inputs
            }
            "out" => {
                any_out = true;
                &mut outputs
            }
            _ => continue,
        };
        if c.attr("variables").is_some_and(|v| v.trim() == "all") {
            pass.all = true;
            continue;
        }
        let target = c.attr("target").map(str::trim).unwrap_or("");
        let source = match (c.attr("source"), c.attr("sourceExpression")) {
            (Some(v), _) => variable_path(v).map(crate::model::Source::Variable),
            (None, Some(e)) => camunda_source(e),
            // a business key passes to the child anyway
            (None, None) if c.attr("businessKey").is_some() => continue,
            (None, None) => None,
        };
        match (variable_path(target).filter(|t| !t.contains('.')), source) {
            (Some(target), Some(source)) => {
                pass.mappings.push(crate::model::Mapping { target, source })
            }
            _ => {
                return Err(format!(
                    "{} mapping to '{target}' cannot be applied: postfach maps plain variables, paths and constants",
                    c.name
                ));
            }
        }
    }
    let off = |v: Option<&str>| v.is_some_and(|v| v.trim().eq_ignore_ascii_case("false"));
    inputs.all |= is_true(n.attr("inheritVariables"))
        || (!any_in && !off(zeebe.and_then(|z| z.attr("propagateAllParentVariables"))));
    outputs.all |= !any_out && !off(zeebe.and_then(|z| z.attr("propagateAllChildVariables")));
    Ok(ElementKind::Activity(ActivityKind::CallActivity {
        process,
        version,
        inputs,
        outputs,
    }))
}

/// Whether an element of this kind can run as a multi-instance activity:
/// tasks, subprocesses and call activities (BPMN's activities), not events
/// or gateways.
pub(crate) fn runs_multi_instance(kind: &ElementKind) -> bool {
    match kind {
        // every activity (a wait state's inner instances each wait to be triggered)
        ElementKind::Activity(_) => true,
        ElementKind::Scope(kind) => match kind {
            ScopeKind::SubProcess { .. } => true,
            // an event subprocess is started by its event, once per event
            ScopeKind::EventSubProcess { .. } | ScopeKind::AdHoc { .. } => false,
        },
        ElementKind::Start(_)
        | ElementKind::Catch(_)
        | ElementKind::Throw(_)
        | ElementKind::Gateway(_)
        | ElementKind::Boundary { .. } => false,
    }
}

/// `multiInstanceLoopCharacteristics` as Flowable and Camunda 7 write it
/// (`isSequential`, `collection`/`loopDataInputRef`, `elementVariable`/
/// `inputDataItem`, `elementIndexVariable`, `loopCardinality`,
/// `completionCondition`) and as Zeebe does (`zeebe:loopCharacteristics`
/// with `inputCollection`, `inputElement`, `outputCollection`,
/// `outputElement`). An expression postfach cannot evaluate is a refusal
/// naming it: the activity could not run as its diagram reads.
pub(super) fn multi_instance(lc: &Node) -> Result<crate::model::MultiInstance, String> {
    let zeebe = extension(lc, "loopCharacteristics");
    let text = |name: &str| {
        lc.child(name)
            .map(|c| c.text.trim())
            .filter(|t| !t.is_empty())
    };
    let expr = |what: &str, raw: &str| {
        parse_condition(raw)
            .map_err(|e| format!("multi-instance {what} '{raw}' cannot be evaluated: {e}"))
    };
    let name = |what: &str, raw: &str| {
        variable_path(&strip_feel(raw))
            .filter(|v| !v.contains('.'))
            .ok_or_else(|| format!("multi-instance {what} '{raw}' is not a variable name"))
    };
    let collection = lc
        .attr("collection")
        .or_else(|| text("loopDataInputRef"))
        .or_else(|| zeebe.and_then(|z| z.attr("inputCollection")))
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let over = match (collection, text("loopCardinality")) {
        (Some(c), None) => crate::model::LoopOver::Collection(expr("collection", c)?),
        (None, Some(n)) => crate::model::LoopOver::Cardinality(expr("loopCardinality", n)?),
        (Some(_), Some(_)) => {
            return Err(
                "multi-instance has both a collection and a loopCardinality: keep one".into(),
            );
        }
        (None, None) => {
            return Err(
                "multi-instance has neither a collection (collection, loopDataInputRef, zeebe inputCollection) nor a loopCardinality".into(),
            );
        }
    };
    if lc.child("loopDataOutputRef").is_some() || lc.child("outputDataItem").is_some() {
        return Err(
            "multi-instance loopDataOutputRef/outputDataItem are not collected: use zeebe:loopCharacteristics outputCollection and outputElement".into(),
        );
    }
    let element_variable = lc
        .attr("elementVariable")
        .or_else(|| lc.child("inputDataItem").and_then(|d| d.attr("name")))
        .or_else(|| zeebe.and_then(|z| z.attr("inputElement")))
        .filter(|v| !v.trim().is_empty())
        .map(|v| name("element variable", v))
        .transpose()?;
    let index_variable = match lc.attr("elementIndexVariable") {
        Some(v) => name("elementIndexVariable", v)?,
        None => "loopCounter".to_string(),
    };
    let completion = text("completionCondition")
        .map(|c| expr("completionCondition", c))
        .transpose()?;
    let output_collection = zeebe.and_then(|z| z.attr("outputCollection"));
    let output_element = zeebe.and_then(|z| z.attr("outputElement"));
    let (output_collection, output_element) = match (output_collection, output_element) {
        (Some(c), Some(e)) => (
            Some(name("outputCollection", c)?),
            Some(expr("outputElement", e)?),
        ),
        (None, None) => (None, None),
        _ => {
            return Err("multi-instance needs outputCollection and outputElement together".into());
        }
    };
    Ok(crate::model::MultiInstance {
        sequential: is_true(lc.attr("isSequential")),
        over,
        element_variable,
        index_variable,
        completion,
        output_collection,
        output_element,
    })
}
