//! One `<process>`: its elements read by family, then what needs every
//! element's index — correlation keys, scopes, flows, links, boundary
//! hosts, gateway defaults — resolved in that order.
//!
//! Invariant: this module only dispatches and orders; what an element kind
//! means is decided in its family module (events, tasks, gateways, scopes),
//! so a new kind touches one family and the matches the compiler points to.

use super::context::{Cx, UNSUPPORTED_NODES, is_true, issue};
use super::data::extras_of;
use super::flows::Scopes;
use super::scopes::{multi_instance, runs_multi_instance, scope_tree};
use super::tasks::retry_policy;
use super::xml::Node;
use super::{Issue, compensation, events, flows, gateways, scopes, tasks};
use crate::model::{Element, ElementKind, Process};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The elements kept so far, in the order they were read.
#[derive(Default)]
struct Kept<'n> {
    elements: Vec<Element>,
    /// the node of each element
    nodes: Vec<&'n Node>,
    /// the id of the subprocess each element is directly inside
    parent_ids: Vec<Option<String>>,
    /// the ids kept so far: duplicate checks stay linear
    ids: HashSet<String>,
}

/// Process `p` parsed; its refusals and problems go to `cx`. `None` when
/// the process could not be built at all.
pub(super) fn process(p: &Node, cx: &mut Cx) -> Option<Process> {
    let pid = p.id();
    if pid.is_empty() {
        cx.problem(Issue {
            id: "<process>".into(),
            line: p.line,
            message: "process has no id".into(),
            missing_key_for: None,
        });
    }
    let tree = scope_tree(p);
    let mut kept = Kept::default();
    for &(n, container) in &tree {
        if let Some(kind) = element_kind(cx, n, container) {
            keep(cx, &mut kept, n, container, kind);
        }
    }
    let keys = correlation_keys(cx, &kept.ids);
    let Kept {
        mut elements,
        nodes,
        parent_ids,
        ..
    } = kept;
    let index: HashMap<String, usize> = elements
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.clone(), i))
        .collect();
    // every id in the process, refused elements included (for the errors of the flows)
    let known: HashSet<String> = tree
        .iter()
        .map(|(n, _)| n.id())
        .filter(|id| !id.is_empty())
        .collect();
    let parents: Vec<Option<usize>> = parent_ids
        .iter()
        .map(|c| c.as_ref().and_then(|c| index.get(c).copied()))
        .collect();
    scopes::fill(cx, &mut elements, &nodes, &parents);
    let at = Scopes {
        pid: &pid,
        index: &index,
        known: &known,
        parents: &parents,
        parent_ids: &parent_ids,
    };
    let mut flows = flows::connect(cx, p, &tree, &at, &mut elements);
    events::link_flows(&nodes, &parents, &mut elements, &mut flows, cx.issues);
    for (i, n) in nodes.iter().enumerate() {
        events::attach_boundary(cx, i, n, &index, &parents, &mut elements);
        gateways::resolve(cx, i, n, &flows, &mut elements);
    }
    compensation::resolve(cx, &tree, &nodes, &index, &parents, &mut elements);
    if !elements
        .iter()
        .enumerate()
        .any(|(i, e)| parents[i].is_none() && matches!(e.kind, ElementKind::Start(_)))
    {
        cx.problem(Issue {
            id: pid.clone(),
            line: p.line,
            message: "process has no start event".into(),
            missing_key_for: None,
        });
    }
    Some(Process::new(
        pid,
        p.attr("name").map(str::to_string),
        elements,
        flows,
        keys,
    ))
}

/// The element kind of node `n` by its family; `None` for a node that is not
/// a flow node (diagram, lanes, annotations, data, vendor extensions) and for
/// one refused or with a problem (recorded in `cx`).
fn element_kind(cx: &mut Cx, n: &Node, container: Option<&Node>) -> Option<ElementKind> {
    let name = n.name.as_str();
    if UNSUPPORTED_NODES.contains(&name) {
        cx.refuse(n, name.to_string());
        return None;
    }
    match name {
        "startEvent"
        | "endEvent"
        | "intermediateCatchEvent"
        | "intermediateThrowEvent"
        | "boundaryEvent" => events::kind(cx, n, container),
        "exclusiveGateway" | "inclusiveGateway" | "eventBasedGateway" | "parallelGateway" => {
            gateways::kind(name)
        }
        "subProcess" | "transaction" | "adHocSubProcess" | "callActivity" => scopes::kind(cx, n),
        "task" | "manualTask" | "sendTask" | "serviceTask" | "userTask" | "scriptTask"
        | "businessRuleTask" | "receiveTask" => tasks::kind(cx, n),
        _ => None,
    }
}

/// Keeps element `n` of `kind` with what every activity may carry
/// (multi-instance, asyncBefore/After, retries, mappings), unless its loop,
/// id or multi-instance is refused.
fn keep<'n>(
    cx: &mut Cx,
    kept: &mut Kept<'n>,
    n: &'n Node,
    container: Option<&Node>,
    kind: ElementKind,
) {
    let name = n.name.as_str();
    if n.child("standardLoopCharacteristics").is_some() {
        cx.refuse(n, format!("{name} with standardLoopCharacteristics"));
        return;
    }
    let mut multi = None;
    if let Some(lc) = n.child("multiInstanceLoopCharacteristics") {
        if !runs_multi_instance(&kind) {
            cx.refuse(n, format!("{name} with multiInstanceLoopCharacteristics"));
            return;
        }
        match multi_instance(lc) {
            Ok(m) => multi = Some(m),
            // the element's type beside its id and line, as refusals
            // name it; the element stays, so that what refers to it
            // (boundary events, flows) is not refused for its sake
            Err(message) => cx.problem(issue(n, format!("{name}: {message}"))),
        }
    }
    if n.id().is_empty() {
        cx.problem(Issue {
            id: format!("<{name}>"),
            line: n.line,
            message: "flow node has no id".into(),
            missing_key_for: None,
        });
        return;
    }
    if !kept.ids.insert(n.id()) {
        cx.problem(issue(n, "id is used twice".into()));
        return;
    }
    let async_before = is_true(n.attr("async")) || is_true(n.attr("asyncBefore"));
    let (extras, _, refused) = extras_of(n);
    for r in refused {
        cx.problem(issue(n, r));
    }
    let retry = retry_policy(n)
        .map_err(|message| cx.problem(issue(n, message)))
        .ok()
        .flatten();
    kept.elements.push(Element {
        id: n.id(),
        name: n.attr("name").map(str::to_string),
        kind,
        incoming: Vec::new(),
        outgoing: Vec::new(),
        async_before,
        line: n.line,
        retry,
        boundaries: Vec::new(),
        extras: crate::model::Extras { multi, ..extras },
    });
    kept.nodes.push(n);
    kept.parent_ids.push(container.map(Node::id));
}

/// Whether a FEEL correlation key (`=…`) can be evaluated: it parses, and
/// reads no clock (the same instance must have the same key whenever it is
/// asked).
fn feel_key(k: &str) -> Result<(), String> {
    let f = crate::model::feel::Feel::parse(&k[1..])?;
    if f.reads_clock() {
        return Err("a correlation key may not read the clock (now(), today())".into());
    }
    Ok(())
}

/// The correlation key variable of every message the process catches or
/// starts with: given at deploy, else from the model; a catch whose message
/// has none is a problem naming the message.
fn correlation_keys(cx: &mut Cx, ids: &HashSet<String>) -> BTreeMap<String, String> {
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    for (message, id, line, key) in std::mem::take(&mut cx.catches) {
        if !ids.contains(&id) {
            continue;
        }
        let key = cx
            .key_overrides
            .get(&message)
            .cloned()
            .or(key)
            .or_else(|| keys.get(&message).cloned());
        match key {
            Some(k) if k.starts_with('=') => match feel_key(&k) {
                Ok(()) => {
                    keys.insert(message, k);
                }
                Err(e) => cx.problem(Issue {
                    id: id.clone(),
                    line,
                    message: format!("correlation key '{k}' of message '{message}': {e}"),
                    missing_key_for: None,
                }),
            },
            Some(k) if !k.is_empty() => {
                keys.insert(message, k);
            }
            _ => cx.problem(Issue {
                id: id.clone(),
                line,
                message: format!(
                    "waits for message '{message}' but no correlation key is defined: add postfach:correlationKey=\"VARIABLE\" (xmlns:postfach=\"https://postfach.dev/bpmn\") to its <message>, or give one for '{message}' at deploy time"
                ),
                missing_key_for: Some(message.clone()),
            }),
        }
    }
    // a message start with a key (deploy-time or from the model) sets that
    // variable in the instance it starts; without one it only starts
    for (message, key) in std::mem::take(&mut cx.starts) {
        if keys.contains_key(&message) {
            continue;
        }
        if let Some(k) = cx
            .key_overrides
            .get(&message)
            .cloned()
            .or(key)
            .filter(|k| !k.is_empty())
        {
            keys.insert(message, k);
        }
    }
    keys
}
