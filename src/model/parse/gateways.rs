//! Gateways: exclusive, inclusive, parallel and event-based, with the
//! default flow of an exclusive or inclusive gateway and the targets an
//! event-based gateway may lead to.
//!
//! Invariant: a default flow is an outgoing flow of its own gateway, and an
//! event-based gateway leads only to events a token can wait at.

use super::context::{Cx, issue};
use super::xml::Node;
use crate::model::{ActivityKind, CatchKind, Element, ElementKind, Flow, GatewayKind};

/// The element kind of gateway `name`; its default flow is set once the
/// flows exist ([`resolve`]).
pub(super) fn kind(name: &str) -> Option<ElementKind> {
    match name {
        "exclusiveGateway" => Some(ElementKind::Gateway(GatewayKind::Exclusive {
            default: None,
        })),
        "inclusiveGateway" => Some(ElementKind::Gateway(GatewayKind::Inclusive {
            default: None,
        })),
        "eventBasedGateway" => Some(ElementKind::Gateway(GatewayKind::Event)),
        "parallelGateway" => Some(ElementKind::Gateway(GatewayKind::Parallel)),
        _ => None,
    }
}

/// Checks an event-based gateway's targets and sets an exclusive or
/// inclusive gateway's default flow, for element `i` (node `n`).
pub(super) fn resolve(cx: &mut Cx, i: usize, n: &Node, flows: &[Flow], elements: &mut [Element]) {
    if elements[i].kind == ElementKind::Gateway(GatewayKind::Event) {
        for &f in &elements[i].outgoing {
            let t = &elements[flows[f].target];
            if !matches!(
                t.kind,
                ElementKind::Catch(CatchKind::Message { .. })
                    | ElementKind::Catch(CatchKind::Timer { .. })
                    | ElementKind::Catch(CatchKind::Signal { .. })
                    | ElementKind::Activity(ActivityKind::ReceiveTask { .. })
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
                    ElementKind::Gateway(GatewayKind::Inclusive { default: Some(fi) })
                } else {
                    ElementKind::Gateway(GatewayKind::Exclusive { default: Some(fi) })
                }
            }
            None => cx.problem(issue(
                n,
                format!("default flow '{d}' is not an outgoing flow of this gateway"),
            )),
        }
    }
}
