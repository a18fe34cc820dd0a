//! Compensation and transactions: joins each compensation boundary event to
//! its handler (the `isForCompensation` activity an `<association>` points
//! to), each compensation throw to its `activityRef`, and each cancel end
//! event to its transaction.
//!
//! Invariant: after [`resolve`] every compensation boundary names a handler
//! that is marked `isForCompensation` and has no sequence flows, every
//! `activityRef` names an activity of the throw's own scope, and every
//! cancel end event sits directly in a transaction that has exactly one
//! cancel boundary event; anything else is a problem naming the element.

use super::context::{Cx, is_true, issue};
use super::scopes::{event_subprocess, runs_multi_instance};
use super::xml::Node;
use crate::model::{Element, ElementKind, ScopeKind, ThrowKind, Trigger};
use std::collections::HashMap;

/// Resolves what compensation and transactions refer to (see the module
/// doc). `tree` is every node of the process with its container, `nodes`
/// the node of each element, `parents` the scope each element is directly in.
pub(super) fn resolve(
    cx: &mut Cx,
    tree: &[(&Node, Option<&Node>)],
    nodes: &[&Node],
    index: &HashMap<String, usize>,
    parents: &[Option<usize>],
    elements: &mut [Element],
) {
    // association: either end may be the boundary event
    let mut associated: HashMap<String, Vec<String>> = HashMap::new();
    for (n, _) in tree.iter().filter(|(n, _)| n.name == "association") {
        let (Some(s), Some(t)) = (n.attr("sourceRef"), n.attr("targetRef")) else {
            continue;
        };
        let (s, t) = (cx.defs.reference(s.trim()), cx.defs.reference(t.trim()));
        associated
            .entry(s.to_string())
            .or_default()
            .push(t.to_string());
        associated
            .entry(t.to_string())
            .or_default()
            .push(s.to_string());
    }
    let handler_of = |b: &str| {
        associated.get(b).and_then(|ends| {
            ends.iter()
                .filter_map(|e| index.get(e).copied())
                .find(|&h| is_true(nodes[h].attr("isForCompensation")))
        })
    };
    for i in 0..elements.len() {
        let problem = match &elements[i].kind {
            ElementKind::Boundary {
                trigger: Trigger::Compensation { .. },
                host,
                ..
            } => {
                let host = *host;
                match handler_of(&elements[i].id) {
                    _ if host == usize::MAX => None, // its attachment was a problem already
                    Some(h) => {
                        if let ElementKind::Boundary {
                            trigger: Trigger::Compensation { handler },
                            ..
                        } = &mut elements[i].kind
                        {
                            *handler = h;
                        }
                        second_compensation(i, host, elements)
                    }
                    None => Some("compensation boundary event has no handler: associate it with an activity marked isForCompensation=\"true\"".to_string()),
                }
            }
            ElementKind::Boundary {
                trigger: Trigger::Cancel,
                host,
                ..
            } if *host != usize::MAX && nodes[*host].name != "transaction" => Some(format!(
                "cancel boundary event on '{}', which is not a transaction: only a transaction is cancelled",
                elements[*host].id
            )),
            ElementKind::Throw(ThrowKind::Cancel { .. }) => match parents[i] {
                Some(tx) if nodes[tx].name == "transaction" => {
                    let cancels = elements[tx]
                        .boundaries
                        .iter()
                        .filter(|&&b| {
                            matches!(
                                elements[b].kind,
                                ElementKind::Boundary {
                                    trigger: Trigger::Cancel,
                                    ..
                                }
                            )
                        })
                        .count();
                    elements[i].kind = ElementKind::Throw(ThrowKind::Cancel { transaction: tx });
                    match cancels {
                        1 => None,
                        0 => Some(format!("transaction '{}' has no cancel boundary event: a cancel end event leaves the transaction by one", elements[tx].id)),
                        n => Some(format!("transaction '{}' has {n} cancel boundary events: give it one", elements[tx].id)),
                    }
                }
                _ => Some("cancel end event outside a transaction: it cancels the transaction it is directly inside".into()),
            },
            ElementKind::Throw(ThrowKind::Compensate { .. }) => activity_ref(cx, i, index, parents, nodes, elements),
            ElementKind::Scope(ScopeKind::EventSubProcess {
                trigger: Trigger::Compensation { .. },
                ..
            }) => compensation_event_subprocess(i, parents, nodes, elements),
            _ if is_true(nodes[i].attr("isForCompensation")) => {
                (!elements[i].incoming.is_empty() || !elements[i].outgoing.is_empty()).then(|| {
                    "a compensation handler (isForCompensation) has no sequence flows: compensation starts it, and it ends when it completes".to_string()
                })
            }
            _ => None,
        };
        if let Some(problem) = problem {
            cx.problem(issue(nodes[i], problem));
        }
    }
}

/// A second compensation boundary event on `host`, or one on a host that
/// also has a compensation event subprocess inside.
fn second_compensation(b: usize, host: usize, elements: &[Element]) -> Option<String> {
    let compensations = elements[host]
        .boundaries
        .iter()
        .filter(|&&o| {
            matches!(
                elements[o].kind,
                ElementKind::Boundary {
                    trigger: Trigger::Compensation { .. },
                    ..
                }
            )
        })
        .count();
    let first = elements[host].boundaries.iter().copied().find(|&o| {
        matches!(
            elements[o].kind,
            ElementKind::Boundary {
                trigger: Trigger::Compensation { .. },
                ..
            }
        )
    });
    if compensations > 1 && first != Some(b) {
        return Some(format!(
            "a second compensation boundary event on '{}': an activity has one compensation handler",
            elements[host].id
        ));
    }
    None
}

/// Joins compensation throw `i` to its `activityRef`, which must name an
/// activity of the scope the throw compensates (its own, or the one around
/// the event subprocess it is in).
fn activity_ref(
    cx: &mut Cx,
    i: usize,
    index: &HashMap<String, usize>,
    parents: &[Option<usize>],
    nodes: &[&Node],
    elements: &mut [Element],
) -> Option<String> {
    let r = cx.compensate_refs.remove(&elements[i].id)?;
    let Some(&a) = index.get(&r) else {
        return Some(format!(
            "activityRef '{r}' names no activity of this process"
        ));
    };
    // in an event subprocess: an activity of it, or of the scope around it
    // (a compensation event subprocess takes over its subprocess's work)
    let own = parents[i];
    let around = own
        .filter(|&s| event_subprocess(nodes[s]))
        .map(|s| parents[s]);
    let beside = parents[a] == own || around == Some(parents[a]);
    if !beside || !runs_multi_instance(&elements[a].kind) {
        return Some(format!(
            "activityRef '{r}' is not an activity of the scope this event compensates: name an activity beside it"
        ));
    }
    if let ElementKind::Throw(ThrowKind::Compensate { activity, .. }) = &mut elements[i].kind {
        *activity = Some(a);
    }
    None
}

/// A compensation event subprocess sits in a subprocess (it compensates
/// that subprocess), one per subprocess, and not beside a compensation
/// boundary event of the same subprocess.
fn compensation_event_subprocess(
    i: usize,
    parents: &[Option<usize>],
    nodes: &[&Node],
    elements: &[Element],
) -> Option<String> {
    let Some(sp) = parents[i].filter(|&sp| !event_subprocess(nodes[sp])) else {
        return Some("a compensation event subprocess belongs in an embedded subprocess or transaction: it compensates that subprocess".into());
    };
    let others = (0..elements.len())
        .filter(|&o| {
            o != i
                && parents[o] == Some(sp)
                && matches!(
                    elements[o].kind,
                    ElementKind::Scope(ScopeKind::EventSubProcess {
                        trigger: Trigger::Compensation { .. },
                        ..
                    })
                )
        })
        .count();
    if others > 0 {
        return Some(format!(
            "subprocess '{}' has more than one compensation event subprocess: give it one",
            elements[sp].id
        ));
    }
    let boundary = elements[sp].boundaries.iter().any(|&b| {
        matches!(
            elements[b].kind,
            ElementKind::Boundary {
                trigger: Trigger::Compensation { .. },
                ..
            }
        )
    });
    boundary.then(|| format!("subprocess '{}' has both a compensation boundary event and a compensation event subprocess: keep one", elements[sp].id))
}
