//! Events: start, end, intermediate catch and throw events, boundary events,
//! the start event of an event subprocess, link flows between link events
//! and the attachment of a boundary event to its activity.
//!
//! Invariant: an event is kept only with exactly one definition postfach
//! runs (or none where BPMN gives none a meaning); every other one is
//! refused naming its definition, and a boundary event sits on an activity
//! of its own scope that can hold it.

use super::Issue;
use super::context::{Cx, event_definitions, issue, model_key, no_message, no_signal};
use super::scopes::event_subprocess;
use super::tasks::topic_of;
use super::xml::Node;
use crate::model::{
    ActivityKind, CatchKind, Element, ElementKind, Flow, ScopeKind, StartKind, ThrowKind, Trigger,
    parse_condition,
};
use std::collections::HashMap;

/// The element kind of event `n` (directly inside `container`, a subprocess,
/// or at the process level); `None` when it was refused or has a problem,
/// both recorded in `cx`.
pub(super) fn kind(cx: &mut Cx, n: &Node, container: Option<&Node>) -> Option<ElementKind> {
    let evdefs = event_definitions(n);
    match n.name.as_str() {
        "startEvent" if container.is_some_and(event_subprocess) => {
            event_subprocess_start(cx, n, container, &evdefs)
        }
        "boundaryEvent" => boundary(cx, n, &evdefs),
        _ => flow_event(cx, n, &evdefs),
    }
}

/// The start event of an event subprocess: its event starts the event
/// subprocess, which keeps the trigger; the start itself is a none start.
fn event_subprocess_start(
    cx: &mut Cx,
    n: &Node,
    container: Option<&Node>,
    evdefs: &[&Node],
) -> Option<ElementKind> {
    let interrupting =
        !matches!(n.attr("isInterrupting"), Some(v) if v.trim().eq_ignore_ascii_case("false"));
    let trigger = match evdefs {
        [d] => match trigger_of(cx, n, d) {
            Ok(Some((t, key))) => {
                if let Trigger::Message { message } = &t {
                    cx.catches.push((message.clone(), n.id(), n.line, key));
                }
                if !interrupting && matches!(t, Trigger::Error { .. }) {
                    cx.problem(issue(n, "an error start event always interrupts: isInterrupting=\"false\" is not allowed on it".into()));
                }
                if matches!(t, Trigger::Cancel) {
                    cx.refuse(
                        n,
                        "startEvent with cancelEventDefinition in an event subprocess".into(),
                    );
                    return None;
                }
                if matches!(t, Trigger::Compensation { .. })
                    && let Some(problem) = compensation_catch_problem(d)
                {
                    cx.problem(issue(n, problem));
                    return None;
                }
                t
            }
            Ok(None) => {
                cx.refuse(
                    n,
                    format!("startEvent with {} in an event subprocess", d.name),
                );
                return None;
            }
            Err(problem) => {
                cx.problem(problem);
                return None;
            }
        },
        [] => {
            cx.problem(issue(n, "the start event of an event subprocess needs a message, timer, signal, error or escalation definition".into()));
            return None;
        }
        _ => {
            cx.refuse(n, "startEvent with several event definitions".into());
            return None;
        }
    };
    if let Some(c) = container {
        cx.esp_starts.insert(c.id(), (trigger, interrupting));
    }
    Some(ElementKind::Start(StartKind::Plain))
}

/// A start, end, intermediate catch or intermediate throw event on a
/// sequence flow, by its one event definition.
fn flow_event(cx: &mut Cx, n: &Node, evdefs: &[&Node]) -> Option<ElementKind> {
    if evdefs.len() > 1 {
        cx.refuse(n, format!("{} with several event definitions", n.name));
        return None;
    }
    let def = evdefs.first().copied();
    match n.name.as_str() {
        "startEvent" => start_event(cx, n, def),
        "intermediateCatchEvent" => catch_event(cx, n, def),
        _ => throw_event(cx, n, def),
    }
}

/// Refuses an event whose definition (or lack of one) its kind cannot run.
fn cannot_run(cx: &mut Cx, n: &Node, def: Option<&Node>) -> Option<ElementKind> {
    match def {
        Some(d) => cx.refuse(n, format!("{} with {}", n.name, d.name)),
        None => cx.refuse(n, format!("{} without event definition", n.name)),
    }
    None
}

/// A start event on a sequence flow (the start family).
fn start_event(cx: &mut Cx, n: &Node, def: Option<&Node>) -> Option<ElementKind> {
    let Some(d) = def else {
        return Some(ElementKind::Start(StartKind::Plain));
    };
    let kind = match d.name.as_str() {
        "messageEventDefinition" => {
            let Some((message, key)) = cx.message_of(d) else {
                cx.problem(no_message(n));
                return None;
            };
            cx.starts.push((message.clone(), key));
            StartKind::Message { message }
        }
        "timerEventDefinition" => {
            let timer = timer_of(d, cx.defs.quartz_weekdays)
                .map_err(|message| cx.problem(issue(n, message)))
                .ok()?;
            if let crate::model::TimerDef::Variable { path, .. } = &timer {
                cx.problem(issue(n, format!("a timer start event reads '{path}', but no instance exists yet whose variables it could read: write the time in the model")));
                return None;
            }
            StartKind::Timer { timer }
        }
        "conditionalEventDefinition" => StartKind::Conditional {
            condition: condition_of(d)
                .map_err(|message| cx.problem(issue(n, message)))
                .ok()?,
        },
        "signalEventDefinition" => StartKind::Signal {
            signal: signal(cx, n, d)?,
        },
        _ => return cannot_run(cx, n, def),
    };
    Some(ElementKind::Start(kind))
}

/// An intermediate catch event (the catch family); one without a definition
/// is a wait state.
fn catch_event(cx: &mut Cx, n: &Node, def: Option<&Node>) -> Option<ElementKind> {
    let Some(d) = def else {
        return Some(ElementKind::Activity(ActivityKind::WaitState));
    };
    let kind = match d.name.as_str() {
        "messageEventDefinition" => {
            let Some((message, key)) = cx.message_of(d) else {
                cx.problem(no_message(n));
                return None;
            };
            let key = key.or_else(|| model_key(n)).or_else(|| model_key(d));
            cx.catches.push((message.clone(), n.id(), n.line, key));
            CatchKind::Message { message }
        }
        "timerEventDefinition" => CatchKind::Timer {
            timer: timer_of(d, cx.defs.quartz_weekdays)
                .map_err(|message| cx.problem(issue(n, message)))
                .ok()?,
        },
        "signalEventDefinition" => CatchKind::Signal {
            signal: signal(cx, n, d)?,
        },
        "conditionalEventDefinition" => CatchKind::Conditional {
            condition: condition_of(d)
                .map_err(|message| cx.problem(issue(n, message)))
                .ok()?,
        },
        "linkEventDefinition" => CatchKind::Link {
            name: link(cx, n, d)?,
        },
        _ => return cannot_run(cx, n, def),
    };
    Some(ElementKind::Catch(kind))
}

/// An intermediate throw or end event (the throw family); a message throw
/// is work for a worker that sends it: a job.
fn throw_event(cx: &mut Cx, n: &Node, def: Option<&Node>) -> Option<ElementKind> {
    let end = n.name == "endEvent";
    let Some(d) = def else {
        return Some(ElementKind::Throw(if end {
            ThrowKind::End
        } else {
            ThrowKind::Plain
        }));
    };
    let kind = match (end, d.name.as_str()) {
        (true, "terminateEventDefinition") => ThrowKind::Terminate,
        (true, "errorEventDefinition") => ThrowKind::Error {
            code: cx.error_code(d),
        },
        (_, "escalationEventDefinition") => ThrowKind::Escalation {
            code: cx.escalation_code(d),
            end,
        },
        // a signal end event broadcasts, then its token ends (it has no
        // outgoing flow)
        (_, "signalEventDefinition") => ThrowKind::Signal {
            signal: signal(cx, n, d)?,
        },
        (_, "compensateEventDefinition") => {
            if let Some(r) = d
                .attr("activityRef")
                .map(str::trim)
                .filter(|r| !r.is_empty())
            {
                cx.compensate_refs
                    .insert(n.id(), cx.defs.reference(r).to_string());
            }
            ThrowKind::Compensate {
                activity: None,
                wait: !matches!(d.attr("waitForCompletion"), Some(v) if v.trim().eq_ignore_ascii_case("false")),
                end,
            }
        }
        // its transaction is resolved once every element has its index
        (true, "cancelEventDefinition") => ThrowKind::Cancel {
            transaction: usize::MAX,
        },
        (false, "linkEventDefinition") => ThrowKind::Link {
            name: link(cx, n, d)?,
        },
        (_, "messageEventDefinition") => {
            return Some(ElementKind::Activity(ActivityKind::Delegated {
                topic: topic_of(n),
                work: crate::model::Delegated::Message {
                    name: cx.message_of(d).map(|(m, _)| m),
                    end,
                },
            }));
        }
        _ => return cannot_run(cx, n, def),
    };
    Some(ElementKind::Throw(kind))
}

/// The signal an event definition names, or a problem saying it names none.
fn signal(cx: &mut Cx, n: &Node, d: &Node) -> Option<String> {
    let signal = cx.defs.signal_of(d);
    if signal.is_none() {
        cx.problem(no_signal(n));
    }
    signal
}

/// The name a link event definition gives, or a problem saying it gives none.
fn link(cx: &mut Cx, n: &Node, d: &Node) -> Option<String> {
    let link = d.attr("name").map(str::trim).filter(|l| !l.is_empty());
    if link.is_none() {
        cx.problem(issue(n, "linkEventDefinition has no name: a link throw event continues at the link catch event of its name".into()));
    }
    link.map(str::to_string)
}

/// A boundary event: its one definition's trigger; its host is set once
/// every element has its index ([`attach_boundary`]).
fn boundary(cx: &mut Cx, n: &Node, evdefs: &[&Node]) -> Option<ElementKind> {
    let trigger = match evdefs {
        [d] => match trigger_of(cx, n, d) {
            Ok(Some((t, key))) => {
                if let Trigger::Message { message } = &t {
                    cx.catches.push((message.clone(), n.id(), n.line, key));
                }
                if matches!(t, Trigger::Compensation { .. })
                    && let Some(problem) = compensation_catch_problem(d)
                {
                    cx.problem(issue(n, problem));
                    return None;
                }
                t
            }
            Ok(None) => {
                cx.refuse(n, format!("boundaryEvent with {}", d.name));
                return None;
            }
            Err(problem) => {
                cx.problem(problem);
                return None;
            }
        },
        _ => {
            cx.refuse(
                n,
                "boundaryEvent without exactly one event definition".into(),
            );
            return None;
        }
    };
    let cancel = !matches!(n.attr("cancelActivity"), Some(v) if v.trim().eq_ignore_ascii_case("false"))
        || matches!(trigger, Trigger::Error { .. });
    Some(ElementKind::Boundary {
        host: usize::MAX,
        cancel,
        trigger,
    })
}

/// What a boundary event's or an event subprocess start's one event
/// definition `d` triggers on, with a message's correlation key from the
/// model: `Ok(None)` for a kind postfach does not run, `Err` for a
/// definition that names nothing it needs.
fn trigger_of(cx: &Cx, n: &Node, d: &Node) -> Result<Option<(Trigger, Option<String>)>, Issue> {
    let mut key = None;
    let trigger = match d.name.as_str() {
        "timerEventDefinition" => {
            Trigger::Timer(timer_of(d, cx.defs.quartz_weekdays).map_err(|m| issue(n, m))?)
        }
        "errorEventDefinition" => Trigger::Error {
            code: cx.error_code(d),
        },
        "escalationEventDefinition" => Trigger::Escalation {
            code: cx.escalation_code(d),
        },
        "signalEventDefinition" => Trigger::Signal {
            signal: cx.defs.signal_of(d).ok_or_else(|| no_signal(n))?,
        },
        "messageEventDefinition" => {
            let (message, k) = cx.message_of(d).ok_or_else(|| no_message(n))?;
            key = k.or_else(|| model_key(n)).or_else(|| model_key(d));
            Trigger::Message { message }
        }
        "conditionalEventDefinition" => Trigger::Condition {
            condition: condition_of(d).map_err(|m| issue(n, m))?,
        },
        // the handler is joined by its association once every element has its index
        "compensateEventDefinition" => Trigger::Compensation {
            handler: usize::MAX,
        },
        "cancelEventDefinition" => Trigger::Cancel,
        _ => return Ok(None),
    };
    Ok(Some((trigger, key)))
}

/// What a compensation catch (a boundary event, the start of a compensation
/// event subprocess) may not say: it is caught, so it names no activity to
/// compensate.
fn compensation_catch_problem(d: &Node) -> Option<String> {
    if d.attr("activityRef").is_some() {
        return Some("a compensation boundary event or event subprocess start names no activityRef: it catches the compensation of its own activity".into());
    }
    // (a `waitForCompletion` there, which modelers write, says nothing: a
    // catch waits for nothing)
    None
}

/// Sets the host of boundary event `i` (node `n`) to the activity its
/// `attachedToRef` names, once every element has its index; a host in
/// another scope, one that cannot hold a boundary event, or a second
/// boundary for the same signal or message on one activity is a problem.
pub(super) fn attach_boundary(
    cx: &mut Cx,
    i: usize,
    n: &Node,
    index: &HashMap<String, usize>,
    parents: &[Option<usize>],
    elements: &mut [Element],
) {
    if !matches!(elements[i].kind, ElementKind::Boundary { .. }) {
        return;
    }
    let host_id = n.attr("attachedToRef").unwrap_or("");
    let problem = match index.get(host_id).copied() {
        Some(h)
            if matches!(
                elements[i].kind,
                ElementKind::Boundary {
                    trigger: Trigger::Escalation { .. },
                    ..
                }
            ) && !matches!(
                elements[h].kind,
                ElementKind::Scope(ScopeKind::SubProcess { .. })
                    | ElementKind::Activity(ActivityKind::CallActivity { .. })
            ) =>
        {
            format!(
                "escalation boundary event on '{host_id}', which is not a subprocess or call activity: only what runs inside one can escalate"
            )
        }
        Some(h) if parents[h] != parents[i] => {
            format!(
                "attachedToRef '{host_id}' is in another scope: a boundary event sits beside its activity, in the same process or subprocess"
            )
        }
        Some(h)
            if can_hold_boundaries(&elements[h].kind)
                || (matches!(
                    elements[i].kind,
                    ElementKind::Boundary {
                        trigger: Trigger::Compensation { .. },
                        ..
                    }
                ) && super::scopes::runs_multi_instance(&elements[h].kind)) =>
        {
            match second_wait(&elements[i].kind, h, host_id, elements) {
                Some(problem) => problem,
                None => {
                    if let ElementKind::Boundary { host, .. } = &mut elements[i].kind {
                        *host = h;
                    }
                    elements[h].boundaries.push(i);
                    return;
                }
            }
        }
        _ => format!(
            "attachedToRef '{host_id}' is not a service, script, business-rule, user, send or receive task, an embedded subprocess or a call activity of this process"
        ),
    };
    cx.problem(issue(n, problem));
}

/// Whether an element of this kind can have boundary events: the
/// activities whose token waits inside them.
fn can_hold_boundaries(kind: &ElementKind) -> bool {
    match kind {
        ElementKind::Activity(kind) => match kind {
            ActivityKind::ServiceTask { .. }
            | ActivityKind::Delegated { .. }
            | ActivityKind::UserTask { .. }
            | ActivityKind::SendTask
            | ActivityKind::Publish { .. }
            | ActivityKind::ReceiveTask { .. }
            | ActivityKind::CallActivity { .. } => true,
            // done in the step it starts in, or waiting for nothing a boundary could interrupt
            ActivityKind::WaitState
            | ActivityKind::Script { .. }
            | ActivityKind::Decide { .. }
            | ActivityKind::Task { .. } => false,
        },
        ElementKind::Scope(kind) => match kind {
            ScopeKind::SubProcess { .. } | ScopeKind::AdHoc { .. } => true,
            ScopeKind::EventSubProcess { .. } => false,
        },
        ElementKind::Start(_)
        | ElementKind::Catch(_)
        | ElementKind::Throw(_)
        | ElementKind::Gateway(_)
        | ElementKind::Boundary { .. } => false,
    }
}

/// Why boundary event `kind` cannot join host `h`: one subscription per
/// (host, signal) and per (host, message) — two boundary events for the
/// same one would race for it — and a receive task's own message is not
/// also its boundary's (one token would hold the same (message, key)
/// twice). `None` when it can.
fn second_wait(
    kind: &ElementKind,
    h: usize,
    host_id: &str,
    elements: &[Element],
) -> Option<String> {
    let signal_of = |k: &ElementKind| match k {
        ElementKind::Boundary {
            trigger: Trigger::Signal { signal },
            ..
        } => Some(signal.clone()),
        _ => None,
    };
    if let Some(sig) = signal_of(kind)
        && elements[h]
            .boundaries
            .iter()
            .any(|&b| signal_of(&elements[b].kind).as_deref() == Some(sig.as_str()))
    {
        return Some(format!(
            "a second boundary event for signal '{sig}' on '{host_id}': one activity catches a signal at one boundary event"
        ));
    }
    let message_of = |k: &ElementKind| match k {
        ElementKind::Boundary {
            trigger: Trigger::Message { message },
            ..
        } => Some(message.clone()),
        _ => None,
    };
    let m = message_of(kind)?;
    if elements[h]
        .boundaries
        .iter()
        .any(|&b| message_of(&elements[b].kind).as_deref() == Some(m.as_str()))
    {
        return Some(format!(
            "a second boundary event for message '{m}' on '{host_id}': one activity catches a message at one boundary event"
        ));
    }
    if elements[h].kind.waits_for_message() == Some(m.as_str()) {
        return Some(format!(
            "boundary event for message '{m}' on '{host_id}', which itself waits for '{m}': every such message would be ambiguous"
        ));
    }
    None
}

/// The condition of a `conditionalEventDefinition` (its `<condition>`),
/// parsed; what is missing or cannot be parsed is said.
pub(super) fn condition_of(d: &Node) -> Result<crate::model::Expr, String> {
    let text = d
        .child("condition")
        .map(|c| c.text.trim())
        .filter(|t| !t.is_empty())
        .ok_or("conditionalEventDefinition has no <condition>: say when the event happens")?;
    parse_condition(text).map_err(|e| format!("condition '{text}': {e}"))
}

/// `timeDuration`, `timeDate` or `timeCycle` of a timer event definition.
pub(super) fn timer_of(
    def: &Node,
    quartz_weekdays: bool,
) -> Result<crate::model::TimerDef, String> {
    use crate::model::{TimerDef, TimerField, iso};
    let text = |n: &Node| {
        n.text
            .trim()
            .trim_start_matches('=')
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let timer = |n: &Node, field: TimerField| {
        let literal = match field {
            TimerField::Duration => iso::duration(&text(n)).map(TimerDef::Duration),
            TimerField::Date => iso::instant(&text(n)).map(TimerDef::Date),
            TimerField::Cycle { quartz_weekdays } => TimerDef::cycle(&text(n), quartz_weekdays),
        };
        // a value the model writes wins; only what is no value is read as
        // an expression (`=PT5M` and `=R3/PT1H` are values, `=frist` is not)
        match literal {
            Ok(timer) => Ok(timer),
            Err(e) => match timer_variable(n)? {
                Some(path) => Ok(TimerDef::Variable { field, path }),
                None => Err(e),
            },
        }
    };
    if let Some(d) = def.child("timeDuration") {
        return timer(d, TimerField::Duration);
    }
    if let Some(d) = def.child("timeDate") {
        return timer(d, TimerField::Date);
    }
    if let Some(c) = def.child("timeCycle") {
        return timer(c, TimerField::Cycle { quartz_weekdays });
    }
    Err("timer has no timeDuration, timeDate or timeCycle".into())
}

/// The variable (or path) a timer value reads when it is an expression
/// (`${name}`, `#{order.due}`, `=name`); `Ok(None)` for text that is no
/// expression, `Err` for an expression that is more than a variable or path.
fn timer_variable(n: &Node) -> Result<Option<String>, String> {
    let raw = n.text.trim();
    match super::data::expression_path(raw) {
        None => Ok(None),
        Some(Some(path)) => Ok(Some(path)),
        // FEEL beyond a path: kept as its body, evaluated when the timer starts
        Some(None) if super::data::feel_text(raw).is_some() => {
            super::data::feel_text(raw)
                .unwrap_or(Ok(()))
                .map_err(|e| format!("timer value '{raw}': {e}"))?;
            Ok(crate::model::feel::body(raw).map(str::to_string))
        }
        Some(None) => Err(format!(
            "timer value given by the expression '{raw}': postfach reads a variable or path there (${{name}}, #{{order.due}}, =name), or write the value in the model"
        )),
    }
}

/// Joins each link throw event to the link catch event of its name in the
/// same scope with a flow (`THROW~link~CATCH`); a throw with outgoing flows
/// or without its catch, and two catches of one name in a scope, are refused.
pub(super) fn link_flows(
    nodes: &[&Node],
    parents: &[Option<usize>],
    elements: &mut [Element],
    flows: &mut Vec<Flow>,
    issues: &mut Vec<Issue>,
) {
    let mut catches: HashMap<(Option<usize>, String), usize> = HashMap::new();
    for (i, e) in elements.iter().enumerate() {
        if let ElementKind::Catch(CatchKind::Link { name }) = &e.kind
            && catches.insert((parents[i], name.clone()), i).is_some()
        {
            issues.push(issue(nodes[i], format!("a second link catch event named '{name}' in this scope: a link throw event must know where it continues")));
        }
    }
    for i in 0..elements.len() {
        let ElementKind::Throw(ThrowKind::Link { name }) = &elements[i].kind else {
            continue;
        };
        if !elements[i].outgoing.is_empty() {
            issues.push(issue(nodes[i], "a link throw event has no outgoing sequence flow: it continues at the link catch event of its name".into()));
            continue;
        }
        let Some(&c) = catches.get(&(parents[i], name.clone())) else {
            issues.push(issue(nodes[i], format!("no link catch event named '{name}' in this scope: a link connects events of one process or subprocess")));
            continue;
        };
        let fi = flows.len();
        flows.push(Flow {
            id: format!("{}~link~{}", elements[i].id, elements[c].id),
            source: i,
            target: c,
            condition: None,
        });
        elements[i].outgoing.push(fi);
        elements[c].incoming.push(fi);
    }
}
