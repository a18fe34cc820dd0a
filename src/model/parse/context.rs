//! What every element family reads while a process is parsed: the file's
//! `<message>`, `<signal>`, `<error>` and `<escalation>` definitions ([`Defs`]),
//! and the process's collected refusals and what is left to resolve ([`Cx`]).
//!
//! Invariant: a family reports a refusal or a problem through [`Cx`] and
//! returns no element for it; nothing is dropped without a record.

use super::xml::Node;
use super::{Issue, Unsupported};
use crate::model::Trigger;
use std::collections::{BTreeMap, HashMap};

/// Flow nodes the engine does not execute (yet): refused at deploy.
pub(super) const UNSUPPORTED_NODES: &[&str] = &["complexGateway", "choreographyTask"];

pub(super) const EVENT_DEFINITIONS: &[&str] = &[
    "messageEventDefinition",
    "signalEventDefinition",
    "timerEventDefinition",
    "errorEventDefinition",
    "escalationEventDefinition",
    "compensateEventDefinition",
    "conditionalEventDefinition",
    "linkEventDefinition",
    "terminateEventDefinition",
    "cancelEventDefinition",
];

pub(super) struct Defs {
    /// message id → (name, correlation key from the model)
    pub(super) messages: HashMap<String, (String, Option<String>)>,
    /// signal id → name
    pub(super) signals: HashMap<String, String>,
    /// error id → errorCode
    pub(super) errors: HashMap<String, String>,
    /// escalation id → escalationCode
    pub(super) escalations: HashMap<String, String>,
    /// Cron weekdays as Quartz counts them (Camunda 7, Flowable), unless the
    /// file declares Zeebe's namespace (Spring: 0 or 7 = Sunday).
    pub(super) quartz_weekdays: bool,
    /// Namespace prefixes `<definitions>` declares (`tns` of `xmlns:tns`).
    pub(super) prefixes: Vec<String>,
}

impl Defs {
    /// The definitions `<definitions>` holds; `xml` is the file's text (a
    /// file that declares Zeebe's namespace counts weekdays as Spring does).
    pub(super) fn of(root: &Node, xml: &str) -> Defs {
        let mut defs = Defs {
            messages: HashMap::new(),
            signals: HashMap::new(),
            errors: HashMap::new(),
            escalations: HashMap::new(),
            quartz_weekdays: !xml.contains("camunda.org/schema/zeebe/"),
            prefixes: root
                .attrs
                .iter()
                .filter_map(|(k, _)| k.strip_prefix("xmlns:").map(String::from))
                .collect(),
        };
        for c in &root.children {
            match c.name.as_str() {
                "message" => {
                    let name = c.attr("name").or(c.attr("id")).unwrap_or("").to_string();
                    defs.messages.insert(c.id(), (name, model_key(c)));
                }
                "signal" => {
                    let name = c.attr("name").or(c.attr("id")).unwrap_or("").to_string();
                    defs.signals.insert(c.id(), name);
                }
                "error" => {
                    let code = c
                        .attr("errorCode")
                        .or(c.attr("name"))
                        .unwrap_or("")
                        .to_string();
                    defs.errors.insert(c.id(), code);
                }
                "escalation" => {
                    let code = c
                        .attr("escalationCode")
                        .or(c.attr("name"))
                        .unwrap_or("")
                        .to_string();
                    defs.escalations.insert(c.id(), code);
                }
                _ => {}
            }
        }
        defs
    }

    /// The id a reference attribute names: a QName with a prefix the file
    /// declares (`tns:order`) names the element `order` of that namespace;
    /// anything else is the id itself. Whether the id exists is the caller's
    /// question.
    pub(super) fn reference<'r>(&self, r: &'r str) -> &'r str {
        match r.split_once(':') {
            Some((prefix, id)) if self.prefixes.iter().any(|p| p == prefix) => id,
            _ => r,
        }
    }

    /// The `<message>` a `messageRef` names: (name, correlation key from the
    /// model). An unprefixed reference to no `<message>` is the message name
    /// itself (as Flowable reads it); a prefixed one to none names nothing.
    pub(super) fn message(&self, r: &str) -> Option<(String, Option<String>)> {
        let id = self.reference(r);
        match self.messages.get(id) {
            Some(m) => Some(m.clone()),
            None if id != r => None,
            None => Some((r.to_string(), None)),
        }
    }
    /// The signal name a signal event definition refers to (its `<signal>`'s
    /// name, else the reference itself); `None` when it names none.
    pub(super) fn signal_of(&self, d: &Node) -> Option<String> {
        let r = d.attr("signalRef").map(str::trim).unwrap_or("");
        if r.is_empty() {
            return None;
        }
        let id = self.reference(r);
        match self.signals.get(id) {
            Some(name) => Some(name.clone()),
            // a prefixed reference to no <signal> names nothing
            None if id != r => None,
            None => Some(r.to_string()),
        }
    }
}

/// A refusal of flow node `n`, at its id and line.
pub(super) fn issue(n: &Node, message: String) -> Issue {
    Issue {
        id: n.id(),
        line: n.line,
        message,
        missing_key_for: None,
    }
}

/// The refusal of a signal event that names no signal.
pub(super) fn no_signal(n: &Node) -> Issue {
    issue(
        n,
        "names no signal: set signalRef to the id of a <signal>".into(),
    )
}

pub(super) fn strip_feel(s: &str) -> String {
    s.trim().trim_start_matches('=').trim().to_string()
}

pub(super) fn model_key(node: &Node) -> Option<String> {
    if let Some(k) = node.attr("correlationKey") {
        return Some(strip_feel(k));
    }
    let ext = node.child("extensionElements")?;
    ext.children
        .iter()
        .find(|c| c.name == "subscription")
        .and_then(|s| s.attr("correlationKey"))
        .map(zeebe_key)
}

/// A Zeebe `correlationKey`: `=path` is a FEEL variable path (`=orderId`,
/// `=order.id`), `="A-1"` or `=42` a FEEL literal, any other `=…` a FEEL
/// expression (kept with its `=`), and text without `=` a literal key, as
/// Zeebe reads it. Literals are kept quoted (`'A-1'`), see
/// [`crate::model::Process::correlation_key`].
pub(super) fn zeebe_key(raw: &str) -> String {
    let raw = raw.trim();
    let literal = |v: &str| format!("'{v}'");
    match raw.strip_prefix('=').map(str::trim) {
        None => literal(raw),
        Some(expr) => match expr.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
            Some(s) => literal(s),
            None if expr.parse::<f64>().is_ok() => literal(expr),
            None if super::data::variable_path(expr).is_some() => expr.to_string(),
            None => format!("={expr}"),
        },
    }
}

/// A child of `<extensionElements>` by local name (`zeebe:script`, `zeebe:taskDefinition` …).
pub(super) fn extension<'n>(node: &'n Node, name: &str) -> Option<&'n Node> {
    node.child("extensionElements")?
        .children
        .iter()
        .find(|c| c.name == name)
}

pub(super) fn is_true(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

pub(super) fn event_definitions(node: &Node) -> Vec<&Node> {
    node.children
        .iter()
        .filter(|c| EVENT_DEFINITIONS.contains(&c.name.as_str()))
        .collect()
}

/// The refusal of a message event or task that names no message.
pub(super) fn no_message(n: &Node) -> Issue {
    issue(
        n,
        "names no message: set messageRef to the id of a <message>".into(),
    )
}

/// A message catch found while the elements are read: (message, element id,
/// line, correlation key from the model).
pub(super) type Catch = (String, String, u32, Option<String>);

/// One process's parse in progress: the file's definitions and deploy-time
/// keys, the refusals and problems of the whole file, and what the element
/// families leave for the process to resolve once every element has its index.
pub(super) struct Cx<'a> {
    pub(super) defs: &'a Defs,
    /// message name → correlation key variable given at deploy (wins over
    /// the model), and `sendTask:ID` → the broker topic bound to a send task
    pub(super) key_overrides: &'a BTreeMap<String, String>,
    pub(super) unsupported: &'a mut Vec<Unsupported>,
    pub(super) issues: &'a mut Vec<Issue>,
    /// every message catch: boundary, intermediate, receive task, event
    /// subprocess start
    pub(super) catches: Vec<Catch>,
    /// (message, key from the model) of message start events
    pub(super) starts: Vec<(String, Option<String>)>,
    /// event subprocess id → (trigger, interrupting), from its start event
    pub(super) esp_starts: HashMap<String, (Trigger, bool)>,
    /// compensation throw or end event id → the `activityRef` it names
    pub(super) compensate_refs: HashMap<String, String>,
}

impl<'a> Cx<'a> {
    /// The parse of one process of a file with `defs`, collecting into the
    /// file's `unsupported` and `issues`.
    pub(super) fn new(
        defs: &'a Defs,
        key_overrides: &'a BTreeMap<String, String>,
        unsupported: &'a mut Vec<Unsupported>,
        issues: &'a mut Vec<Issue>,
    ) -> Self {
        Cx {
            defs,
            key_overrides,
            unsupported,
            issues,
            catches: Vec::new(),
            starts: Vec::new(),
            esp_starts: HashMap::new(),
            compensate_refs: HashMap::new(),
        }
    }

    /// `n` is of a kind postfach does not run: refused with its id and line.
    pub(super) fn refuse(&mut self, n: &Node, kind: String) {
        self.unsupported.push(Unsupported {
            id: n.id(),
            kind,
            line: n.line,
        });
    }

    /// A problem with a supported element.
    pub(super) fn problem(&mut self, issue: Issue) {
        self.issues.push(issue);
    }

    /// The message an element or event definition names: (name, key from
    /// the model); `None` when it names none.
    pub(super) fn message_of(&self, d: &Node) -> Option<(String, Option<String>)> {
        let r = d.attr("messageRef").map(str::trim).unwrap_or("");
        if r.is_empty() {
            return None;
        }
        self.defs.message(r)
    }

    /// The code an error event definition names (its `<error>`'s code, else
    /// the reference itself); `None` for none.
    pub(super) fn error_code(&self, d: &Node) -> Option<String> {
        let defs = self.defs;
        d.attr("errorRef")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                defs.errors
                    .get(defs.reference(r))
                    .cloned()
                    .unwrap_or_else(|| r.to_string())
            })
    }

    /// The code an escalation event definition names (its `<escalation>`'s
    /// code, else the reference itself); `None` for none.
    pub(super) fn escalation_code(&self, d: &Node) -> Option<String> {
        let defs = self.defs;
        d.attr("escalationRef")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                defs.escalations
                    .get(defs.reference(r))
                    .cloned()
                    .unwrap_or_else(|| r.to_string())
            })
    }
}
