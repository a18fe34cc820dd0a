//! Sequence flows: each `<sequenceFlow>` of the process and of its
//! subprocesses, joined to its source and target element, with its
//! condition parsed.
//!
//! Invariant: a kept flow connects two elements of one scope, leaves no end
//! event, touches no event subprocess, and its condition is parsed.

use super::Issue;
use super::context::Cx;
use super::xml::Node;
use crate::model::{Element, ElementKind, Flow, ScopeKind, parse_condition};
use std::collections::{HashMap, HashSet};

/// The elements of one process and where each sits, as the flows need them.
pub(super) struct Scopes<'a> {
    /// the process id
    pub(super) pid: &'a str,
    /// element id → index
    pub(super) index: &'a HashMap<String, usize>,
    /// every id in the process, refused elements included
    pub(super) known: &'a HashSet<String>,
    /// per element: the index of the subprocess it is directly inside
    pub(super) parents: &'a [Option<usize>],
    /// per element: the id of the subprocess it is directly inside
    pub(super) parent_ids: &'a [Option<String>],
}

/// The sequence flows of process `p` (`tree` from [`super::scopes::scope_tree`]),
/// each added to its source's outgoing and its target's incoming flows.
pub(super) fn connect(
    cx: &mut Cx,
    p: &Node,
    tree: &[(&Node, Option<&Node>)],
    at: &Scopes,
    elements: &mut [Element],
) -> Vec<Flow> {
    let mut flows = Vec::new();
    let scope_flows = tree
        .iter()
        .filter(|(n, _)| super::scopes::is_scope_node(n))
        .flat_map(|(n, _)| n.children.iter().map(move |c| (c, Some(n.id()))));
    let all_flows = p
        .children
        .iter()
        .map(|c| (c, None))
        .chain(scope_flows)
        .filter(|(c, _)| c.name == "sequenceFlow");
    // an end event ends its token: a flow out of one would never be taken
    let ends: HashSet<String> = tree
        .iter()
        .filter(|(n, _)| n.name == "endEvent")
        .map(|(n, _)| n.id())
        .collect();
    for (f, container) in all_flows {
        let (src, tgt) = (
            f.attr("sourceRef").unwrap_or(""),
            f.attr("targetRef").unwrap_or(""),
        );
        let id = f
            .attr("id")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{src}->{tgt}"));
        let problem = |message: String| Issue {
            id: id.clone(),
            line: f.line,
            message,
            missing_key_for: None,
        };
        if ends.contains(src) {
            cx.problem(problem(format!(
                "sequence flow leaves end event '{src}', which ends its token: make '{src}' an intermediate throw event, or remove the flow"
            )));
            continue;
        }
        let (Some(&s), Some(&t)) = (at.index.get(src), at.index.get(tgt)) else {
            let missing = if at.index.contains_key(src) { tgt } else { src };
            if !at.known.contains(missing) {
                cx.problem(problem(format!(
                    "sequence flow refers to '{missing}', which is not a flow node of process '{}'",
                    at.pid
                )));
            }
            continue;
        };
        if at.parents[s] != at.parents[t] || at.parent_ids[s] != container {
            let scope = |e: usize| {
                at.parents[e]
                    .map(|sp| format!("subprocess '{}'", elements[sp].id))
                    .unwrap_or_else(|| format!("process '{}'", at.pid))
            };
            cx.problem(problem(format!(
                "sequence flow from '{src}' ({}) to '{tgt}' ({}) crosses a scope boundary: a flow connects nodes of one process or subprocess",
                scope(s),
                scope(t)
            )));
            continue;
        }
        if let Some(e) = [s, t].into_iter().find(|&e| {
            matches!(
                elements[e].kind,
                ElementKind::Scope(ScopeKind::EventSubProcess { .. })
            )
        }) {
            cx.problem(problem(format!(
                "sequence flow touches event subprocess '{}': an event subprocess is started by its event, not by a flow",
                elements[e].id
            )));
            continue;
        }
        let condition = match f
            .child("conditionExpression")
            .map(|c| c.text.trim())
            .filter(|t| !t.is_empty())
        {
            Some(text) => parse_condition(text)
                .map_err(|m| cx.problem(problem(m)))
                .ok(),
            None => None,
        };
        let fi = flows.len();
        flows.push(Flow {
            id,
            source: s,
            target: t,
            condition,
        });
        elements[s].outgoing.push(fi);
        elements[t].incoming.push(fi);
    }
    flows
}
