//! Gateways: exclusive, inclusive, parallel and event-based, with the
//! default flow of an exclusive or inclusive gateway and the targets an
//! event-based gateway may lead to.
//!
//! Invariant: a default flow is an outgoing flow of its own gateway, and an
//! event-based gateway leads only to events a token can wait at.

use super::context::{Cx, issue};
use super::xml::Node;
use crate::model::{Element, ElementKind, Flow};

/// The element kind of gateway `name`; its default flow is set once the
/// flows exist ([`resolve`]).
pub(super) fn kind(name: &str) -> Option<ElementKind> {
    match name {
        "exclusiveGateway" => Some(ElementKind::ExclusiveGateway { default: None }),
        "inclusiveGateway" => Some(ElementKind::InclusiveGateway { default: None }),
        "eventBasedGateway" => Some(ElementKind::EventGateway),
        "parallelGateway" => Some(ElementKind::ParallelGateway),
        _ => None,
    }
}

/// Checks an event-based gateway's targets and sets an exclusive or
/// inclusive gateway's default flow, for element `i` (node `n`).
pub(super) fn resolve(cx: &mut Cx, i: usize, n: &Node, flows: &[Flow], elements: &mut [Element]) {
    if elements[i].kind == ElementKind::EventGateway {
        for &f in &elements[i].outgoing {
            let t = &elements[flows[f].target];
            if !matches!(
                t.kind,
                ElementKind::MessageCatch { .. }
                    | ElementKind::TimerCatch { .. }
                    | ElementKind::SignalCatch { .. }
                    | ElementKind::ReceiveTask { .. }
            ) {
                cx.problem(issue(n, format!("event-based gateway leads to '{}', which is not a message, timer or signal catch event", t.id)));
            }
        }
    }
    if (n.name == "exclusiveGateway" || n.name == "inclusiveGateway")
        && let Some(d) = n.attr("default")
    {
        match elements[i]
            .outgoing
            .iter()
            .copied()
            .find(|&fi| flows[fi].id == d)
        {
            Some(fi) => {
                elements[i].kind = if n.name == "inclusiveGateway" {
                    ElementKind::InclusiveGateway { default: Some(fi) }
                } else {
                    ElementKind::ExclusiveGateway { default: Some(fi) }
                }
            }
            None => cx.problem(issue(
                n,
                format!("default flow '{d}' is not an outgoing flow of this gateway"),
            )),
        }
    }
}
