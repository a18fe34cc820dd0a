//! Tasks: plain, manual, send, service, user, script, business-rule and
//! receive tasks — which of them pass through, which wait for a worker (a
//! job on a topic), which publish to a broker topic and which wait for a
//! message.
//!
//! Invariant: no task passes silently that its model says does work: a task
//! with work and no broker binding waits as a job for a worker.

use super::context::{Cx, extension, model_key, no_message, strip_feel};
use super::xml::Node;
use crate::model::{ActivityKind, Delegated, ElementKind};

/// The element kind of task `n`; `None` when it has a problem, recorded in `cx`.
pub(super) fn kind(cx: &mut Cx, n: &Node) -> Option<ElementKind> {
    let kind = match n.name.as_str() {
        "task" => ElementKind::Activity(ActivityKind::Task { manual: false }),
        "manualTask" => ElementKind::Activity(ActivityKind::Task { manual: true }),
        "sendTask" => send_task(cx, n),
        "serviceTask" => ElementKind::Activity(ActivityKind::ServiceTask { topic: topic_of(n) }),
        "userTask" => {
            let spec = user_task_spec(n);
            for (attr, raw) in spec.attributes() {
                if let Some(Err(e)) = raw.and_then(super::data::feel_text) {
                    cx.problem(super::context::issue(
                        n,
                        format!("userTask {attr} '{}': {e}", raw.unwrap_or_default()),
                    ));
                    return None;
                }
            }
            ElementKind::Activity(ActivityKind::UserTask { spec })
        }
        "scriptTask" => run_here_or_delegate(cx, n, feel_script(n), script_task)?,
        "businessRuleTask" => run_here_or_delegate(cx, n, decided_here(n), business_rule_task)?,
        // without a message: a wait state, moved on by a caller
        "receiveTask" if n.attr("messageRef").is_none_or(|r| r.trim().is_empty()) => {
            ElementKind::Activity(ActivityKind::WaitState)
        }
        "receiveTask" => {
            let Some((message, key)) = cx.message_of(n) else {
                cx.problem(no_message(n));
                return None;
            };
            let key = key.or_else(|| model_key(n));
            cx.catches.push((message.clone(), n.id(), n.line, key));
            ElementKind::Activity(ActivityKind::ReceiveTask { message })
        }
        _ => return None,
    };
    Some(kind)
}

/// A send task publishes to the broker topic bound to it (at deploy, or its
/// `topic` attribute); unbound, a worker sends it — never a silent
/// pass-through.
fn send_task(cx: &Cx, n: &Node) -> ElementKind {
    // Camunda's external send task names a worker topic, not a broker topic
    let external = n.attr("type").is_some_and(|t| t.trim() == "external");
    let topic = cx
        .key_overrides
        .get(&crate::model::send_topic_override(&n.id()))
        .map(String::as_str)
        .or_else(|| n.attr("topic").filter(|_| !external))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    match topic {
        Some(t) => ElementKind::Activity(ActivityKind::Publish { topic: t.into() }),
        None => ElementKind::Activity(ActivityKind::Delegated {
            topic: topic_of(n),
            work: Delegated::Send {
                message: cx.message_of(n).map(|(m, _)| m),
                implementation: n
                    .attr("type")
                    .map(str::trim)
                    .filter(|t| !t.is_empty() && *t != "external")
                    .map(str::to_string),
            },
        }),
    }
}

/// A Zeebe script task the engine evaluates (`zeebe:script expression="=…"
/// resultVariable="…"`, feature `feel`): `None` for any other script task.
fn feel_script(n: &Node) -> Option<Result<ElementKind, String>> {
    if !cfg!(feature = "feel") {
        return None;
    }
    let zeebe = extension(n, "script")?;
    let raw = zeebe.attr("expression")?.trim();
    let Some(body) = crate::model::feel::body(raw) else {
        return Some(Err(format!(
            "zeebe:script expression '{raw}' is no FEEL expression: write it with a leading '='"
        )));
    };
    let Some(result_variable) = zeebe
        .attr("resultVariable")
        .map(str::trim)
        .filter(|v| super::data::variable_path(v).is_some_and(|p| !p.contains('.')))
    else {
        return Some(Err(
            "zeebe:script needs a resultVariable (a variable name) for the value of its expression"
                .into(),
        ));
    };
    Some(
        crate::model::feel::Feel::parse(body)
            .map(|f| {
                ElementKind::Activity(ActivityKind::Script {
                    expression: crate::model::Expr::Feel(f),
                    result_variable: result_variable.to_string(),
                })
            })
            .map_err(|e| format!("zeebe:script expression '{raw}': {e}")),
    )
}

/// A script task: a job for a worker, with the script as the model writes
/// it (`<script>`, or Zeebe's `script expression`).
fn script_task(n: &Node) -> ElementKind {
    let zeebe = extension(n, "script");
    let text = n
        .child("script")
        .map(|s| s.text.trim().to_string())
        .filter(|t| !t.is_empty())
        .or_else(|| zeebe.and_then(|z| z.attr("expression")).map(strip_feel));
    let format = n
        .attr("scriptFormat")
        .map(str::to_string)
        .or_else(|| zeebe.map(|_| "feel".to_string()));
    let result_variable = result_variable(n, zeebe).map(str::to_string);
    ElementKind::Activity(ActivityKind::Delegated {
        topic: topic_of(n),
        work: Delegated::Script {
            format,
            text,
            result_variable,
        },
    })
}

/// A business rule task the engine decides (feature `feel`): it names its
/// decision by id (Zeebe `calledDecision`, `camunda:decisionRef`,
/// `flowable:decisionTableReferenceKey`) and no worker (no topic, external
/// type, Java class or expression, no `zeebe:taskDefinition`). `None` for
/// any other business rule task.
fn decided_here(n: &Node) -> Option<Result<ElementKind, String>> {
    if !cfg!(feature = "feel") {
        return None;
    }
    let worker = ["topic", "type", "class", "delegateExpression", "expression"]
        .iter()
        .any(|a| n.attr(a).is_some())
        || extension(n, "taskDefinition").is_some();
    let zeebe = extension(n, "calledDecision");
    let decision = n
        .attr("decisionRef")
        .or_else(|| n.attr("decisionTableReferenceKey"))
        .or_else(|| zeebe.and_then(|z| z.attr("decisionId")))
        .map(strip_feel)
        .filter(|d| !d.is_empty())?;
    if worker || decision.contains("${") || decision.contains("#{") {
        return None;
    }
    let result_variable = result_variable(n, zeebe)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    use crate::model::DecisionMapping as M;
    let flowable = n.attr("decisionTableReferenceKey").is_some();
    let mapping = match (zeebe.is_some(), n.attr("mapDecisionResult").map(str::trim)) {
        (true, _) => M::Value,
        (false, _) if flowable => M::Outputs,
        (false, None | Some("resultList")) => M::ResultList,
        (false, Some("singleEntry")) => M::SingleEntry,
        (false, Some("singleResult")) => M::SingleResult,
        (false, Some("collectEntries")) => M::CollectEntries,
        (false, Some(other)) => {
            return Some(Err(format!(
                "mapDecisionResult '{other}' is not one of resultList, singleEntry, singleResult, collectEntries"
            )));
        }
    };
    if zeebe.is_some() && result_variable.is_none() {
        return Some(Err(
            "zeebe:calledDecision needs a resultVariable for the decision's value".into(),
        ));
    }
    let version = match decision_version(n, zeebe) {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(ElementKind::Activity(ActivityKind::Decide {
        decision,
        version,
        result_variable,
        mapping,
    })))
}

/// The decision version a business rule task binds: Camunda's
/// `decisionRefBinding` (`latest`, `deployment` — the latest, with a deploy
/// warning —, or `version` with `decisionRefVersion`), Zeebe's
/// `bindingType` (`latest`, `deployment`). `None` is the latest; a binding
/// postfach does not resolve (a version tag) is refused by name.
fn decision_version(n: &Node, zeebe: Option<&Node>) -> Result<Option<u32>, String> {
    let binding = n
        .attr("decisionRefBinding")
        .or_else(|| zeebe.and_then(|z| z.attr("bindingType")))
        .map(str::trim);
    match binding {
        None | Some("latest") | Some("deployment") => Ok(None),
        Some("version") => {
            let v = n.attr("decisionRefVersion").map(str::trim).unwrap_or("");
            v.parse::<u32>().ok().filter(|&v| v > 0).map(Some).ok_or_else(|| {
                format!("decisionRefBinding=\"version\" needs decisionRefVersion as a version number, not '{v}'")
            })
        }
        Some(other) => Err(format!(
            "decision binding '{other}' is not supported: use latest, deployment or version"
        )),
    }
}

/// A business-rule task: a job for a worker, with the decision the model
/// names (Camunda, Flowable or Zeebe).
fn business_rule_task(n: &Node) -> ElementKind {
    let zeebe = extension(n, "calledDecision");
    let decision = n
        .attr("decisionRef")
        .or_else(|| n.attr("decisionTableReferenceKey"))
        .or_else(|| zeebe.and_then(|z| z.attr("decisionId")))
        .map(strip_feel);
    let result_variable = result_variable(n, zeebe).map(str::to_string);
    ElementKind::Activity(ActivityKind::Delegated {
        topic: topic_of(n),
        work: Delegated::Decision {
            decision,
            result_variable,
        },
    })
}

/// A user task's attributes from Flowable/Camunda 7 attributes or Zeebe's
/// extension elements (the attribute wins where both are given).
pub(super) fn user_task_spec(n: &Node) -> crate::model::UserTaskSpec {
    let ext = |el: &str, attr: &str| {
        extension(n, el)
            .and_then(|x| x.attr(attr))
            .map(str::to_string)
    };
    let attr = |a: &str| n.attr(a).map(str::to_string);
    crate::model::UserTaskSpec {
        assignee: attr("assignee").or_else(|| ext("assignmentDefinition", "assignee")),
        candidate_users: attr("candidateUsers")
            .or_else(|| ext("assignmentDefinition", "candidateUsers")),
        candidate_groups: attr("candidateGroups")
            .or_else(|| ext("assignmentDefinition", "candidateGroups")),
        due_date: attr("dueDate").or_else(|| ext("taskSchedule", "dueDate")),
        follow_up_date: attr("followUpDate").or_else(|| ext("taskSchedule", "followUpDate")),
        priority: attr("priority").or_else(|| ext("priorityDefinition", "priority")),
        form_key: attr("formKey")
            .or_else(|| ext("formDefinition", "formKey"))
            .or_else(|| ext("formDefinition", "formId")),
    }
}

/// The job topic of a task done by a worker: `flowable:topic` / `camunda:topic`,
/// Zeebe's `taskDefinition type`, else the element id.
pub(super) fn topic_of(n: &Node) -> String {
    n.attr("topic")
        .map(str::to_string)
        .or_else(|| {
            extension(n, "taskDefinition")
                .and_then(|t| t.attr("type"))
                .map(strip_feel)
        })
        .unwrap_or_else(|| n.id())
}

/// `flowable:failedJobRetryTimeCycle` / `camunda:failedJobRetryTimeCycle`
/// (`R5/PT10S`: 5 retries 10 s apart), `postfach:retries="N"` or Zeebe's
/// `zeebe:taskDefinition retries="N"` (N attempts, engine backoff).
pub(super) fn retry_policy(n: &Node) -> Result<Option<crate::model::Retry>, String> {
    let cycle = n
        .child("extensionElements")
        .and_then(|x| {
            x.children
                .iter()
                .find(|c| c.name == "failedJobRetryTimeCycle")
        })
        .map(|c| c.text.trim().to_string())
        .or_else(|| n.attr("failedJobRetryTimeCycle").map(str::to_string));
    if let Some(c) = cycle {
        let (reps, delay) = crate::model::iso::cycle(&c)?;
        // Flowable counts retries after the first attempt
        let attempts = reps.map_or(u32::MAX, |r| r.saturating_add(1));
        return Ok(Some(crate::model::Retry {
            attempts,
            delay: Some(delay),
        }));
    }
    // postfach:retries, else Zeebe's taskDefinition retries (a literal count,
    // with or without FEEL's '=')
    let zeebe = extension(n, "taskDefinition").and_then(|t| t.attr("retries"));
    match n.attr("retries").or(zeebe) {
        Some(r) => match r.trim().trim_start_matches('=').trim().parse::<u32>() {
            Ok(attempts) if attempts > 0 => Ok(Some(crate::model::Retry {
                attempts,
                delay: None,
            })),
            _ => Err(format!(
                "retries=\"{r}\" must be a whole number of attempts, at least 1"
            )),
        },
        None => Ok(None),
    }
}

/// A task postfach runs itself where it can (`here`: a FEEL script, a
/// decision deployed beside it), a problem where that is written wrongly,
/// else work for a worker (`delegate`).
fn run_here_or_delegate(
    cx: &mut Cx,
    n: &Node,
    here: Option<Result<ElementKind, String>>,
    delegate: fn(&Node) -> ElementKind,
) -> Option<ElementKind> {
    match here {
        Some(Ok(kind)) => Some(kind),
        Some(Err(message)) => {
            cx.problem(super::context::issue(n, message));
            None
        }
        None => Some(delegate(n)),
    }
}

/// The variable a script or decision writes its result to: the BPMN
/// element's `resultVariable`, or its Zeebe extension's.
fn result_variable<'n>(n: &'n Node, zeebe: Option<&'n Node>) -> Option<&'n str> {
    n.attr("resultVariable")
        .or_else(|| zeebe.and_then(|z| z.attr("resultVariable")))
}
