//! BPMN 2.0 XML → [`Process`], with quick-xml.
//!
//! Invariant: no input makes this module panic. Input size and nesting depth are
//! capped, malformed XML is reported with line and column, and every element the
//! engine cannot execute is reported at once, each with id, type and line.

use super::{Element, ElementKind, Flow, Process, Trigger, parse_condition};
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Largest BPMN file accepted (bytes).
pub const MAX_SIZE: usize = 16 * 1024 * 1024;
/// Deepest element nesting accepted.
pub const MAX_DEPTH: usize = 128;

/// An element the engine cannot execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The element id.
    pub id: String,
    /// Its BPMN type (`userTask`, `subProcess` …).
    pub kind: String,
    /// Its line in the file.
    pub line: u32,
}

/// A problem with a supported element (missing key, dangling reference, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// The element the problem is at.
    pub id: String,
    /// Its line in the file.
    pub line: u32,
    /// What is wrong, in words.
    pub message: String,
    /// Set when the problem is a message without a correlation key: that
    /// message's name (an edge can say how its deploy gives one).
    pub missing_key_for: Option<String>,
}

/// Something a model says that deploys but is not executed as written (an
/// execution listener, a Java class, an input/output mapping, a skipped pool):
/// reported at deploy, refused by a strict deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The element (or process) it is at.
    pub id: String,
    /// Its line in the file.
    pub line: u32,
    /// What is not executed, and what happens instead.
    pub message: String,
}

/// A parsed file: its executable processes and what will not run as written.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The processes to deploy.
    pub processes: Vec<Process>,
    /// What the model says that postfach does not execute.
    pub warnings: Vec<Warning>,
}

/// Why a BPMN file does not deploy.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The file is not well-formed XML.
    #[error("{file}:{line}:{column}: malformed XML: {message}")]
    Xml {
        /// The file.
        file: String,
        /// Line of the error.
        line: u32,
        /// Column of the error.
        column: u32,
        /// What the XML reader said.
        message: String,
    },
    /// The file is larger than a model may be.
    #[error("{file}: file is {size} bytes, more than the {MAX_SIZE} bytes a BPMN model may have")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size in bytes.
        size: usize,
    },
    /// Elements nest too deep.
    #[error("{file}:{line}: elements nest deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The file.
        file: String,
        /// Where the limit was passed.
        line: u32,
    },
    /// The root element is not BPMN's `<definitions>`.
    #[error("{file}: the root element is <{found}>, expected <definitions> of BPMN 2.0")]
    NotBpmn {
        /// The file.
        file: String,
        /// The root element found.
        found: String,
    },
    /// The file has no process.
    #[error("{file}: no <process> element found")]
    NoProcess {
        /// The file.
        file: String,
    },
    #[error(
        "{file}:{line}: process '{process}' has isExecutable=\"false\": set isExecutable=\"true\" in the modeler to deploy it"
    )]
    /// The process is marked not executable.
    NotExecutable {
        /// The file.
        file: String,
        /// The process id.
        process: String,
        /// Its line.
        line: u32,
    },
    /// Elements the engine cannot execute.
    #[error("{file}: {} element(s) the engine cannot execute: {}", items.len(), list_unsupported(items))]
    Unsupported {
        /// The file.
        file: String,
        /// Each of them, with id, type and line.
        items: Vec<Unsupported>,
    },
    /// Supported elements with problems (missing key, dangling reference …).
    #[error("{file}: {}", list_issues(issues))]
    Invalid {
        /// The file.
        file: String,
        /// Each problem.
        issues: Vec<Issue>,
    },
    /// A strict deploy refuses a model with warnings.
    #[error("{file}: {} part(s) would not run as written, refused by a strict deploy: {}", warnings.len(), list_warnings(warnings))]
    Strict {
        /// The file.
        file: String,
        /// Each warning.
        warnings: Vec<Warning>,
    },
}

impl ParseError {
    /// Names of messages that have no correlation key, for an edge to say how
    /// its deploy gives one.
    pub fn missing_keys(&self) -> Vec<&str> {
        match self {
            ParseError::Invalid { issues, .. } => issues
                .iter()
                .filter_map(|i| i.missing_key_for.as_deref())
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn list_unsupported(items: &[Unsupported]) -> String {
    items
        .iter()
        .map(|u| format!("{} '{}' (line {})", u.kind, u.id, u.line))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_warnings(warnings: &[Warning]) -> String {
    warnings
        .iter()
        .map(|w| format!("line {}: '{}': {}", w.line, w.id, w.message))
        .collect::<Vec<_>>()
        .join("; ")
}

fn list_issues(issues: &[Issue]) -> String {
    issues
        .iter()
        .map(|i| format!("line {}: '{}': {}", i.line, i.id, i.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A parsed XML element: local name, attributes by local name, children, text.
struct Node {
    prefix: String,
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
    text: String,
    line: u32,
}

impl Node {
    fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == local)
            .map(|(_, v)| v.as_str())
    }
    fn id(&self) -> String {
        self.attr("id").unwrap_or("").to_string()
    }
    fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name)
    }
}

struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        Self(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }
    /// 1-based line and column of a byte offset.
    fn at(&self, offset: usize) -> (u32, u32) {
        let line = self.0.partition_point(|&nl| nl < offset);
        let start = if line == 0 { 0 } else { self.0[line - 1] + 1 };
        (line as u32 + 1, (offset.saturating_sub(start)) as u32 + 1)
    }
}

fn local(s: &str) -> (String, String) {
    match s.split_once(':') {
        Some((p, l)) => (p.to_string(), l.to_string()),
        None => (String::new(), s.to_string()),
    }
}

fn node_from(e: &BytesStart<'_>, line: u32) -> Result<Node, String> {
    let (prefix, name) = local(e.name().as_ref());
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| err.to_string())?;
        let (p, l) = local(a.key.as_ref());
        if p.is_empty() && l == "xmlns" {
            continue;
        }
        if p == "xmlns" {
            // a prefix declaration, kept to resolve QName references
            // (`messageRef="tns:order"`); no attribute has a colon in its name
            #[allow(deprecated)]
            let v = a.unescape_value().map_err(|err| err.to_string())?;
            attrs.push((format!("xmlns:{l}"), v.into_owned()));
            continue;
        }
        #[allow(deprecated)]
        let v = a.unescape_value().map_err(|err| err.to_string())?;
        attrs.push((l, v.into_owned()));
    }
    Ok(Node {
        prefix,
        name,
        attrs,
        children: Vec::new(),
        text: String::new(),
        line,
    })
}

/// The elements that are flow nodes: each needs an id.
const FLOW_NODES: [&str; 22] = [
    "startEvent",
    "endEvent",
    "intermediateCatchEvent",
    "intermediateThrowEvent",
    "boundaryEvent",
    "task",
    "userTask",
    "serviceTask",
    "sendTask",
    "receiveTask",
    "scriptTask",
    "businessRuleTask",
    "manualTask",
    "callActivity",
    "subProcess",
    "transaction",
    "adHocSubProcess",
    "exclusiveGateway",
    "parallelGateway",
    "inclusiveGateway",
    "eventBasedGateway",
    "complexGateway",
];

/// Gives every flow node without an id a stable one, `TAG_LINE` (`_2`, `_3`
/// … should that be taken), as Flowable accepts such models; returns (id,
/// line, tag) of each, for the deploy's warnings. Nothing refers to such a
/// node (a reference needs its id), so no reference changes.
fn name_anonymous_flow_nodes(root: &mut Node) -> Vec<(String, u32, String)> {
    fn ids(n: &Node, out: &mut std::collections::HashSet<String>) {
        if let Some(id) = n.attr("id") {
            out.insert(id.to_string());
        }
        for c in &n.children {
            ids(c, out);
        }
    }
    fn name(
        n: &mut Node,
        taken: &mut std::collections::HashSet<String>,
        out: &mut Vec<(String, u32, String)>,
    ) {
        let anonymous = n.attr("id").is_none_or(|id| id.trim().is_empty());
        if anonymous && FLOW_NODES.contains(&n.name.as_str()) {
            let base = format!("{}_{}", n.name, n.line);
            let id = (1..)
                .map(|i| {
                    if i == 1 {
                        base.clone()
                    } else {
                        format!("{base}_{i}")
                    }
                })
                .find(|id| !taken.contains(id))
                .unwrap_or(base);
            taken.insert(id.clone());
            n.attrs.retain(|(k, _)| k != "id");
            n.attrs.push(("id".into(), id.clone()));
            out.push((id, n.line, n.name.clone()));
        }
        for c in &mut n.children {
            name(c, taken, out);
        }
    }
    let mut taken = std::collections::HashSet::new();
    ids(root, &mut taken);
    let mut out = Vec::new();
    name(root, &mut taken, &mut out);
    out
}

fn build_tree(file: &str, xml: &str) -> Result<Node, ParseError> {
    let lines = Lines::new(xml);
    let mut reader = Reader::from_str(xml);
    let xml_err = |offset: u64, message: String| {
        let (line, column) = lines.at(offset as usize);
        ParseError::Xml {
            file: file.to_string(),
            line,
            column,
            // one line, even when the reader quotes document text with a newline
            message: message.replace("\r\n", " ").replace(['\n', '\r'], " "),
        }
    };
    let mut stack: Vec<Node> = Vec::new();
    let mut root: Option<Node> = None;
    loop {
        let before = reader.buffer_position();
        let event = reader
            .read_event()
            .map_err(|e| xml_err(reader.error_position(), e.to_string()))?;
        let line = lines.at(before as usize).0;
        match event {
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(ParseError::TooDeep {
                        file: file.to_string(),
                        line,
                    });
                }
                stack.push(node_from(&e, line).map_err(|m| xml_err(before, m))?);
            }
            Event::Empty(e) => {
                let node = node_from(&e, line).map_err(|m| xml_err(before, m))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None if root.is_none() => root = Some(node),
                    None => return Err(xml_err(before, "more than one root element".into())),
                }
            }
            Event::End(_) => {
                let node = stack
                    .pop()
                    .ok_or_else(|| xml_err(before, "unexpected closing tag".into()))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None if root.is_none() => root = Some(node),
                    None => return Err(xml_err(before, "more than one root element".into())),
                }
            }
            Event::Text(t) => {
                if let Some(n) = stack.last_mut() {
                    n.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(n) = stack.last_mut() {
                    n.text.push_str(&t);
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => match &*r {
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "amp" => "&".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => {
                            return Err(xml_err(before, format!("unknown entity '&{other};'")));
                        }
                    },
                    Err(e) => return Err(xml_err(before, e.to_string())),
                };
                if let Some(n) = stack.last_mut() {
                    n.text.push_str(&resolved);
                }
            }
            Event::DocType(_) => {
                return Err(xml_err(
                    before,
                    "DOCTYPE declarations are refused: BPMN needs none, and their entities can reach files and URLs".into(),
                ));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(xml_err(
            xml.len() as u64,
            format!("element <{}> is never closed", open.name),
        ));
    }
    root.ok_or_else(|| xml_err(0, "document has no root element".into()))
}

/// Flow nodes the engine does not execute (yet): refused at deploy.
const UNSUPPORTED_NODES: &[&str] = &[
    "transaction",
    "adHocSubProcess",
    "complexGateway",
    "choreographyTask",
];

const EVENT_DEFINITIONS: &[&str] = &[
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

struct Defs {
    /// message id → (name, correlation key from the model)
    messages: HashMap<String, (String, Option<String>)>,
    /// signal id → name
    signals: HashMap<String, String>,
    /// error id → errorCode
    errors: HashMap<String, String>,
    /// escalation id → escalationCode
    escalations: HashMap<String, String>,
    /// Cron weekdays as Quartz counts them (Camunda 7, Flowable), unless the
    /// file declares Zeebe's namespace (Spring: 0 or 7 = Sunday).
    quartz_weekdays: bool,
    /// Namespace prefixes `<definitions>` declares (`tns` of `xmlns:tns`).
    prefixes: Vec<String>,
}

impl Defs {
    /// The id a reference attribute names: a QName with a prefix the file
    /// declares (`tns:order`) names the element `order` of that namespace;
    /// anything else is the id itself. Whether the id exists is the caller's
    /// question.
    fn reference<'r>(&self, r: &'r str) -> &'r str {
        match r.split_once(':') {
            Some((prefix, id)) if self.prefixes.iter().any(|p| p == prefix) => id,
            _ => r,
        }
    }

    /// The `<message>` a `messageRef` names: (name, correlation key from the
    /// model). An unprefixed reference to no `<message>` is the message name
    /// itself (as Flowable reads it); a prefixed one to none names nothing.
    fn message(&self, r: &str) -> Option<(String, Option<String>)> {
        let id = self.reference(r);
        match self.messages.get(id) {
            Some(m) => Some(m.clone()),
            None if id != r => None,
            None => Some((r.to_string(), None)),
        }
    }
    /// The signal name a signal event definition refers to (its `<signal>`'s
    /// name, else the reference itself); `None` when it names none.
    fn signal_of(&self, d: &Node) -> Option<String> {
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
fn issue(n: &Node, message: String) -> Issue {
    Issue {
        id: n.id(),
        line: n.line,
        message,
        missing_key_for: None,
    }
}

/// The refusal of a signal event that names no signal.
fn no_signal(n: &Node) -> Issue {
    issue(
        n,
        "names no signal: set signalRef to the id of a <signal>".into(),
    )
}

fn strip_feel(s: &str) -> String {
    s.trim().trim_start_matches('=').trim().to_string()
}

fn model_key(node: &Node) -> Option<String> {
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
/// `=order.id`), `="A-1"` or `=42` a FEEL literal, and text without `=` a
/// literal key, as Zeebe reads it. Literals are kept quoted (`'A-1'`), see
/// [`super::Process::correlation_key`].
fn zeebe_key(raw: &str) -> String {
    let raw = raw.trim();
    let literal = |v: &str| format!("'{v}'");
    match raw.strip_prefix('=').map(str::trim) {
        None => literal(raw),
        Some(expr) => match expr.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
            Some(s) => literal(s),
            None if expr.parse::<f64>().is_ok() => literal(expr),
            None => expr.to_string(),
        },
    }
}

/// A user task's attributes from Flowable/Camunda 7 attributes or Zeebe's
/// extension elements (the attribute wins where both are given).
fn user_task_spec(n: &Node) -> super::UserTaskSpec {
    let ext = |el: &str, attr: &str| {
        extension(n, el)
            .and_then(|x| x.attr(attr))
            .map(str::to_string)
    };
    let attr = |a: &str| n.attr(a).map(str::to_string);
    super::UserTaskSpec {
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

/// A child of `<extensionElements>` by local name (`zeebe:script`, `zeebe:taskDefinition` …).
fn extension<'n>(node: &'n Node, name: &str) -> Option<&'n Node> {
    node.child("extensionElements")?
        .children
        .iter()
        .find(|c| c.name == name)
}

/// The job topic of a task done by a worker: `flowable:topic` / `camunda:topic`,
/// Zeebe's `taskDefinition type`, else the element id.
fn topic_of(n: &Node) -> String {
    n.attr("topic")
        .map(str::to_string)
        .or_else(|| {
            extension(n, "taskDefinition")
                .and_then(|t| t.attr("type"))
                .map(strip_feel)
        })
        .unwrap_or_else(|| n.id())
}

fn is_true(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Parses a BPMN file into its executable processes.
///
/// `file` names the source in errors. `key_overrides` maps message name to the
/// correlation key variable and wins over what the model says.
pub fn parse(
    file: &str,
    xml: &str,
    key_overrides: &BTreeMap<String, String>,
) -> Result<Vec<Process>, ParseError> {
    parse_report(file, xml, key_overrides).map(|p| p.processes)
}

/// [`parse`], with what the model says that will not run as written.
pub fn parse_report(
    file: &str,
    xml: &str,
    key_overrides: &BTreeMap<String, String>,
) -> Result<Parsed, ParseError> {
    if xml.len() > MAX_SIZE {
        return Err(ParseError::TooLarge {
            file: file.into(),
            size: xml.len(),
        });
    }
    let mut root = build_tree(file, xml)?;
    let named = name_anonymous_flow_nodes(&mut root);
    if root.name != "definitions" {
        return Err(ParseError::NotBpmn {
            file: file.into(),
            found: root.name.clone(),
        });
    }
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
    let processes: Vec<&Node> = root
        .children
        .iter()
        .filter(|c| c.name == "process")
        .collect();
    if processes.is_empty() {
        return Err(ParseError::NoProcess { file: file.into() });
    }
    let mut unsupported = Vec::new();
    let mut issues = Vec::new();
    let mut warnings: Vec<Warning> = named
        .into_iter()
        .map(|(id, line, name)| Warning {
            message: format!(
                "<{name}> has no id: postfach calls it '{id}' (in instances, history and the API)"
            ),
            id,
            line,
        })
        .collect();
    let mut out = Vec::new();
    let not_executable = |p: &Node| {
        p.attr("isExecutable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    };
    // a collaboration deploys its executable pools and skips the others, as
    // Flowable and Camunda do; a file with none executable is refused
    if let Some(p) = processes.iter().find(|p| not_executable(p))
        && processes.iter().all(|p| not_executable(p))
    {
        return Err(ParseError::NotExecutable {
            file: file.into(),
            process: p.id(),
            line: p.line,
        });
    }
    for p in processes {
        if not_executable(p) {
            warnings.push(Warning {
                id: p.id(),
                line: p.line,
                message: "process is not executable (isExecutable=\"false\"): skipped".into(),
            });
            continue;
        }
        if let Some(proc) = process(p, &defs, key_overrides, &mut unsupported, &mut issues) {
            not_run_as_written(p, &proc, &mut warnings);
            out.push(proc);
        }
    }
    // a correlation key given at deploy time for a message no process of
    // this file catches or starts is not used: said, not silently ignored
    for (message, variable) in key_overrides
        .iter()
        .filter(|(k, _)| !k.starts_with("sendTask:"))
    {
        let used = out.iter().any(|p| {
            p.correlation_keys.contains_key(message) || p.start_messages().any(|m| m == message)
        });
        if !used {
            warnings.push(Warning {
                id: message.clone(),
                line: 0,
                message: format!(
                    "a correlation key ({variable}) is given for message '{message}', which no process of this file catches or starts: it is not used"
                ),
            });
        }
    }
    // a deploy-time topic binding must name a send task of this file
    for element in key_overrides
        .keys()
        .filter_map(|k| k.strip_prefix("sendTask:"))
    {
        let bound = out.iter().any(|p| {
            p.elements
                .iter()
                .any(|e| e.id == element && matches!(e.kind, ElementKind::Publish { .. }))
        });
        if !bound {
            issues.push(Issue {
                id: element.to_string(),
                line: 0,
                message: format!(
                    "the deployment binds a topic to '{element}', but this file has no sendTask with that id"
                ),
                missing_key_for: None,
            });
        }
    }
    if !unsupported.is_empty() {
        return Err(ParseError::Unsupported {
            file: file.into(),
            items: unsupported,
        });
    }
    if !issues.is_empty() {
        return Err(ParseError::Invalid {
            file: file.into(),
            issues,
        });
    }
    Ok(Parsed {
        processes: out,
        warnings,
    })
}

/// A variable path (`orderId`, `order.id`) as mappings and FEEL write it.
fn variable_path(s: &str) -> Option<String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && !s.ends_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    ok.then(|| s.to_string())
}

/// A Camunda/Flowable parameter body: `${var}` / `#{var}` reads a variable,
/// plain text is a string; any other expression cannot be evaluated (`None`).
fn camunda_source(text: &str) -> Option<super::Source> {
    let t = text.trim();
    let inner = t
        .strip_prefix("${")
        .or_else(|| t.strip_prefix("#{"))
        .and_then(|r| r.strip_suffix('}'));
    match inner {
        Some(e) => variable_path(e).map(super::Source::Variable),
        None if t.contains("${") || t.contains("#{") => None,
        None => Some(super::Source::Literal(
            serde_json::Value::String(t.into()).to_string(),
        )),
    }
}

/// A Zeebe mapping source: `=path`, `="text"`, `=12`, `=true`, `=null`, or a
/// static value without `=`; any other FEEL expression cannot be evaluated.
fn zeebe_source(text: &str) -> Option<super::Source> {
    let t = text.trim();
    let Some(feel) = t.strip_prefix('=') else {
        return Some(super::Source::Literal(
            serde_json::Value::String(t.into()).to_string(),
        ));
    };
    let feel = feel.trim();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(feel)
        && !v.is_object()
        && !v.is_array()
    {
        return Some(super::Source::Literal(v.to_string()));
    }
    variable_path(feel).map(super::Source::Variable)
}

/// An element's asyncAfter and variable mappings, and what of its mappings
/// cannot be applied (each a warning text).
fn extras_of(n: &Node) -> (super::Extras, Vec<String>) {
    let mut x = super::Extras {
        async_after: is_true(n.attr("asyncAfter")),
        ..Default::default()
    };
    let mut skipped = Vec::new();
    let Some(ext) = n.child("extensionElements") else {
        return (x, skipped);
    };
    for c in &ext.children {
        let params = c.children.iter().filter_map(|p| {
            let (inputs, source) = match (c.name.as_str(), p.name.as_str()) {
                ("inputOutput", "inputParameter") => (true, p.attr("name")),
                ("inputOutput", "outputParameter") => (false, p.attr("name")),
                ("ioMapping", "input") => (true, p.attr("target")),
                ("ioMapping", "output") => (false, p.attr("target")),
                _ => return None,
            };
            Some((inputs, p, source.unwrap_or("").trim().to_string()))
        });
        for (input, p, target) in params {
            let source = if c.name == "ioMapping" {
                zeebe_source(p.attr("source").unwrap_or(""))
            } else if p.children.is_empty() {
                camunda_source(&p.text)
            } else {
                None // camunda:list, camunda:map, camunda:script
            };
            let what = if input { "input" } else { "output" };
            match (variable_path(&target).filter(|t| !t.contains('.')), source) {
                (Some(target), Some(source)) => {
                    let m = super::Mapping { target, source };
                    if input { x.inputs.push(m) } else { x.outputs.push(m) }
                }
                _ => skipped.push(format!(
                    "{} {what} '{target}' is not applied: postfach maps plain variables, paths and constants, not this expression",
                    c.name
                )),
            }
        }
    }
    (x, skipped)
}

/// What a process says that postfach does not execute: listeners, Java
/// implementations, variable mappings it cannot evaluate, typed send tasks
/// (a Flowable mail task: a job for a worker).
fn not_run_as_written(p: &Node, proc: &Process, out: &mut Vec<Warning>) {
    let mut warn = |n: &Node, message: String| {
        out.push(Warning {
            id: if n.id().is_empty() {
                proc.id.clone()
            } else {
                n.id()
            },
            line: n.line,
            message,
        })
    };
    let listener_warnings = |n: &Node, warn: &mut dyn FnMut(&Node, String)| {
        let Some(ext) = n.child("extensionElements") else {
            return;
        };
        for c in &ext.children {
            match c.name.as_str() {
                "executionListener" | "taskListener" => {
                    let how = ["class", "delegateExpression", "expression"]
                        .iter()
                        .find_map(|a| c.attr(a).map(|v| format!(" ({a} '{v}')")))
                        .unwrap_or_default();
                    warn(n, format!("{}{how} is not run by postfach", c.name));
                }
                "inputOutput" | "ioMapping" => {
                    for skipped in extras_of(n).1 {
                        warn(n, skipped);
                    }
                }
                _ => {}
            }
        }
    };
    listener_warnings(p, &mut warn);
    for (n, _) in scope_tree(p) {
        let Some(el) = proc.element(&n.id()) else {
            continue;
        };
        listener_warnings(n, &mut warn);
        for d in event_definitions(n)
            .into_iter()
            .filter(|d| d.name == "conditionalEventDefinition")
        {
            for a in ["variableName", "variableEvents"] {
                if let Some(v) = d.attr(a) {
                    warn(
                        n,
                        format!(
                            "conditionalEventDefinition {a} '{v}' is not applied: the condition is asked after every command that changed the instance's variables"
                        ),
                    );
                }
            }
        }
        if let Some(lc) = n.child("multiInstanceLoopCharacteristics") {
            for a in ["async", "asyncBefore", "asyncAfter"] {
                if is_true(lc.attr(a)) {
                    warn(
                        n,
                        format!(
                            "multiInstanceLoopCharacteristics {a} is not applied: the inner instances start in the transaction that starts the activity (asyncBefore on the activity itself is)"
                        ),
                    );
                }
            }
        }
        let implementation = ["class", "delegateExpression", "expression"]
            .iter()
            .find_map(|a| n.attr(a).map(|v| (*a, v)));
        match (&el.kind, implementation) {
            (
                ElementKind::ServiceTask { topic }
                | ElementKind::Publish { topic }
                | ElementKind::Delegated { topic, .. },
                Some((attr, v)),
            ) => warn(
                n,
                format!(
                    "{attr} '{v}' is not run: the task waits as a job on topic '{topic}' for a handler or worker"
                ),
            ),
            (ElementKind::CallActivity { process, .. }, _) => {
                for w in call_activity_warnings(n, process) {
                    warn(n, w);
                }
            }
            (ElementKind::UserTask { spec }, _) => {
                let attrs = [
                    ("assignee", &spec.assignee),
                    ("candidateUsers", &spec.candidate_users),
                    ("candidateGroups", &spec.candidate_groups),
                    ("dueDate", &spec.due_date),
                    ("followUpDate", &spec.follow_up_date),
                    ("priority", &spec.priority),
                    ("formKey", &spec.form_key),
                ];
                for (attr, raw) in attrs {
                    if let Some(raw) = raw.as_deref().filter(|r| !reads_variables_only(r)) {
                        warn(
                            n,
                            format!(
                                "userTask {attr} '{raw}' is not evaluated as written: postfach reads variables and paths (${{a.b}}, =a.b, text with ${{a}} inside); the task gets no {attr} where it cannot"
                            ),
                        );
                    }
                }
            }
            (
                ElementKind::Delegated {
                    topic,
                    work:
                        super::Delegated::Send {
                            implementation: Some(t),
                            ..
                        },
                },
                None,
            ) => warn(
                n,
                format!(
                    "sendTask of type '{t}' is not run by postfach: it waits as a job on topic '{topic}' for a worker that sends it, unless a broker topic is bound to it at deploy time"
                ),
            ),
            _ => {}
        }
    }
}

/// The condition of a `conditionalEventDefinition` (its `<condition>`),
/// parsed; what is missing or cannot be parsed is said.
fn condition_of(d: &Node) -> Result<super::Expr, String> {
    let text = d
        .child("condition")
        .map(|c| c.text.trim())
        .filter(|t| !t.is_empty())
        .ok_or("conditionalEventDefinition has no <condition>: say when the event happens")?;
    parse_condition(text).map_err(|e| format!("condition '{text}': {e}"))
}

/// Joins each link throw event to the link catch event of its name in the
/// same scope with a flow (`THROW~link~CATCH`); a throw with outgoing flows
/// or without its catch, and two catches of one name in a scope, are refused.
fn link_flows(
    nodes: &[&Node],
    parents: &[Option<usize>],
    elements: &mut [Element],
    flows: &mut Vec<Flow>,
    issues: &mut Vec<Issue>,
) {
    let mut catches: HashMap<(Option<usize>, String), usize> = HashMap::new();
    for (i, e) in elements.iter().enumerate() {
        if let ElementKind::Link { name, catch: true } = &e.kind
            && catches.insert((parents[i], name.clone()), i).is_some()
        {
            issues.push(issue(nodes[i], format!("a second link catch event named '{name}' in this scope: a link throw event must know where it continues")));
        }
    }
    for i in 0..elements.len() {
        let ElementKind::Link { name, catch: false } = &elements[i].kind else {
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

/// Whether a user task attribute is something [`super::UserTaskSpec::resolve`]
/// evaluates as written: a literal, `=path`, or text whose `${…}`/`#{…}`
/// parts are variable paths.
fn reads_variables_only(raw: &str) -> bool {
    let raw = raw.trim();
    if let Some(feel) = raw.strip_prefix('=') {
        return variable_path(feel).is_some();
    }
    let mut rest = raw;
    while let Some(at) = [rest.find("${"), rest.find("#{")]
        .into_iter()
        .flatten()
        .min()
    {
        let Some(end) = rest[at..].find('}').map(|e| e + at) else {
            return false;
        };
        if variable_path(&rest[at + 2..end]).is_none() {
            return false;
        }
        rest = &rest[end + 1..];
    }
    true
}

/// Whether an element of this kind can run as a multi-instance activity:
/// tasks, subprocesses and call activities (BPMN's activities), not events
/// or gateways.
fn runs_multi_instance(kind: &ElementKind) -> bool {
    match kind {
        ElementKind::Task { .. }
        | ElementKind::SendTask
        | ElementKind::ServiceTask { .. }
        | ElementKind::ReceiveTask { .. }
        | ElementKind::Publish { .. }
        | ElementKind::Delegated { .. }
        | ElementKind::UserTask { .. }
        | ElementKind::SubProcess { .. }
        | ElementKind::CallActivity { .. } => true,
        // an event subprocess is started by its event, once per event
        ElementKind::EventSubProcess { .. }
        | ElementKind::NoneStart
        | ElementKind::MessageStart { .. }
        | ElementKind::SignalStart { .. }
        | ElementKind::TimerStart { .. }
        | ElementKind::TimerCatch { .. }
        | ElementKind::EventGateway
        | ElementKind::Boundary { .. }
        | ElementKind::End
        | ElementKind::ExclusiveGateway { .. }
        | ElementKind::ParallelGateway
        | ElementKind::InclusiveGateway { .. }
        | ElementKind::MessageCatch { .. }
        | ElementKind::SignalCatch { .. }
        | ElementKind::SignalThrow { .. }
        | ElementKind::NoneThrow
        | ElementKind::TerminateEnd
        | ElementKind::ErrorEnd { .. }
        | ElementKind::Escalation { .. }
        | ElementKind::Link { .. }
        | ElementKind::ConditionalCatch { .. }
        | ElementKind::WaitState => false,
    }
}

/// `multiInstanceLoopCharacteristics` as Flowable and Camunda 7 write it
/// (`isSequential`, `collection`/`loopDataInputRef`, `elementVariable`/
/// `inputDataItem`, `elementIndexVariable`, `loopCardinality`,
/// `completionCondition`) and as Zeebe does (`zeebe:loopCharacteristics`
/// with `inputCollection`, `inputElement`, `outputCollection`,
/// `outputElement`). An expression postfach cannot evaluate is a refusal
/// naming it: the activity could not run as its diagram reads.
fn multi_instance(lc: &Node) -> Result<super::MultiInstance, String> {
    let zeebe = extension(lc, "loopCharacteristics");
    let text = |name: &str| {
        lc.child(name)
            .map(|c| c.text.trim())
            .filter(|t| !t.is_empty())
    };
    let expr = |what: &str, raw: &str| {
        parse_condition(raw).map_err(|e| {
            format!("multi-instance {what} '{raw}' cannot be evaluated ({e}): postfach reads variables, paths, literals, comparisons and arithmetic")
        })
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
        (Some(c), None) => super::LoopOver::Collection(expr("collection", c)?),
        (None, Some(n)) => super::LoopOver::Cardinality(expr("loopCardinality", n)?),
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
    Ok(super::MultiInstance {
        sequential: is_true(lc.attr("isSequential")),
        over,
        element_variable,
        index_variable,
        completion,
        output_collection,
        output_element,
    })
}

/// `flowable:failedJobRetryTimeCycle` / `camunda:failedJobRetryTimeCycle`
/// (`R5/PT10S`: 5 retries 10 s apart) or `postfach:retries="N"` (N attempts,
/// engine backoff).
fn retry_policy(n: &Node) -> Result<Option<super::Retry>, String> {
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
        let (reps, delay) = super::iso::cycle(&c)?;
        // Flowable counts retries after the first attempt
        let attempts = reps.map_or(u32::MAX, |r| r.saturating_add(1));
        return Ok(Some(super::Retry {
            attempts,
            delay: Some(delay),
        }));
    }
    match n.attr("retries") {
        Some(r) => match r.trim().parse::<u32>() {
            Ok(attempts) if attempts > 0 => Ok(Some(super::Retry {
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

/// `timeDuration`, `timeDate` or `timeCycle` of a timer event definition.
fn timer_of(def: &Node, quartz_weekdays: bool) -> Result<super::TimerDef, String> {
    let text = |n: &Node| {
        n.text
            .trim()
            .trim_start_matches('=')
            .trim()
            .trim_matches('"')
            .to_string()
    };
    if let Some(d) = def.child("timeDuration") {
        return super::iso::duration(&text(d)).map(super::TimerDef::Duration);
    }
    if let Some(d) = def.child("timeDate") {
        return super::iso::instant(&text(d)).map(super::TimerDef::Date);
    }
    if let Some(c) = def.child("timeCycle") {
        let expression = text(c);
        if super::cron::looks_like_cron(&expression) {
            super::cron::check(&expression, quartz_weekdays, 0)?;
            return Ok(super::TimerDef::Cron {
                expression,
                quartz_weekdays,
            });
        }
        let (repetitions, every) = super::iso::cycle(&expression)?;
        if every == 0 {
            return Err("timeCycle with a zero interval would fire without end".into());
        }
        return Ok(super::TimerDef::Cycle { repetitions, every });
    }
    Err("timer has no timeDuration, timeDate or timeCycle".into())
}

fn event_definitions(node: &Node) -> Vec<&Node> {
    node.children
        .iter()
        .filter(|c| EVENT_DEFINITIONS.contains(&c.name.as_str()))
        .collect()
}

/// A call activity as the vendors write it: the called process
/// (`calledElement`, Zeebe `calledElement processId`), the version
/// (`camunda:calledElementBinding="version"` with `calledElementVersion`,
/// else the latest), and the variables in and out (`camunda:in`/`out`,
/// `flowable:in`/`out` with `variables="all"` or `source`/`sourceExpression`
/// and `target`; `flowable:inheritVariables`; Zeebe
/// `propagateAllParentVariables` / `propagateAllChildVariables`). Without any
/// of them every variable goes in and comes back out.
fn call_activity(n: &Node) -> Result<ElementKind, String> {
    let zeebe = extension(n, "calledElement");
    let raw = n
        .attr("calledElement")
        .or_else(|| zeebe.and_then(|z| z.attr("processId")))
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or(
            "call activity names no process: set calledElement (or zeebe:calledElement processId)",
        )?;
    let process = match raw.strip_prefix('=').map(str::trim) {
        Some(feel) => feel
            .strip_prefix('"')
            .and_then(|f| f.strip_suffix('"'))
            .map(str::to_string)
            .ok_or_else(|| format!("called process given by the expression '{raw}': name the process id in the model"))?,
        None if raw.contains("${") || raw.contains("#{") => {
            return Err(format!(
                "called process given by the expression '{raw}': name the process id in the model"
            ));
        }
        None => raw.to_string(),
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
    let mut inputs = super::VarPass::default();
    let mut outputs = super::VarPass::default();
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
            (Some(v), _) => variable_path(v).map(super::Source::Variable),
            (None, Some(e)) => camunda_source(e),
            // a business key passes to the child anyway
            (None, None) if c.attr("businessKey").is_some() => continue,
            (None, None) => None,
        };
        match (variable_path(target).filter(|t| !t.contains('.')), source) {
            (Some(target), Some(source)) => pass.mappings.push(super::Mapping { target, source }),
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
    Ok(ElementKind::CallActivity {
        process,
        version,
        inputs,
        outputs,
    })
}

/// What a call activity says that postfach does not do as written.
fn call_activity_warnings(n: &Node, process: &str) -> Vec<String> {
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

/// Whether `n` is an event subprocess (`triggeredByEvent="true"`).
fn event_subprocess(n: &Node) -> bool {
    n.name == "subProcess" && is_true(n.attr("triggeredByEvent"))
}

/// The children of a process and of its subprocesses (embedded and event
/// subprocesses), depth first (a subprocess before its own children), each
/// with the subprocess node it is directly inside (`None` at the process level).
fn scope_tree(p: &Node) -> Vec<(&Node, Option<&Node>)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&Node, Option<&Node>)> =
        p.children.iter().rev().map(|c| (c, None)).collect();
    while let Some((n, parent)) = stack.pop() {
        out.push((n, parent));
        if n.name == "subProcess" {
            stack.extend(n.children.iter().rev().map(|c| (c, Some(n))));
        }
    }
    out
}

fn process(
    p: &Node,
    defs: &Defs,
    key_overrides: &BTreeMap<String, String>,
    unsupported: &mut Vec<Unsupported>,
    issues: &mut Vec<Issue>,
) -> Option<Process> {
    let pid = p.id();
    if pid.is_empty() {
        issues.push(Issue {
            id: "<process>".into(),
            line: p.line,
            message: "process has no id".into(),
            missing_key_for: None,
        });
    }
    let mut elements: Vec<Element> = Vec::new();
    // ids of the elements kept so far: duplicate checks stay linear
    let mut ids: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut flow_nodes: Vec<&Node> = Vec::new();
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut catches: Vec<(String, String, u32, Option<String>)> = Vec::new();
    // (message, key from the model) of message start events
    let mut starts: Vec<(String, Option<String>)> = Vec::new();
    let refuse = |u: &mut Vec<Unsupported>, n: &Node, kind: String| {
        u.push(Unsupported {
            id: n.id(),
            kind,
            line: n.line,
        });
    };
    // (name, key from the model); `None` when the element names no message
    let message_of = |d: &Node| -> Option<(String, Option<String>)> {
        let r = d.attr("messageRef").map(str::trim).unwrap_or("");
        if r.is_empty() {
            return None;
        }
        defs.message(r)
    };
    // the code an error or escalation event definition names (its `<error>`'s
    // or `<escalation>`'s code, else the reference itself); `None` for none
    let error_code = |d: &Node| {
        d.attr("errorRef")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                defs.errors
                    .get(defs.reference(r))
                    .cloned()
                    .unwrap_or_else(|| r.to_string())
            })
    };
    let escalation_code = |d: &Node| {
        d.attr("escalationRef")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                defs.escalations
                    .get(defs.reference(r))
                    .cloned()
                    .unwrap_or_else(|| r.to_string())
            })
    };
    let no_message = |n: &Node| {
        issue(
            n,
            "names no message: set messageRef to the id of a <message>".into(),
        )
    };
    // what a boundary event's or an event subprocess start's one event
    // definition `d` triggers on, with a message's correlation key from the
    // model: `Ok(None)` for a kind postfach does not run, `Err` for a
    // definition that names nothing it needs
    let trigger_of = |n: &Node, d: &Node| -> Result<Option<(Trigger, Option<String>)>, Issue> {
        let mut key = None;
        let trigger = match d.name.as_str() {
            "timerEventDefinition" => {
                Trigger::Timer(timer_of(d, defs.quartz_weekdays).map_err(|m| issue(n, m))?)
            }
            "errorEventDefinition" => Trigger::Error {
                code: error_code(d),
            },
            "escalationEventDefinition" => Trigger::Escalation {
                code: escalation_code(d),
            },
            "signalEventDefinition" => Trigger::Signal {
                signal: defs.signal_of(d).ok_or_else(|| no_signal(n))?,
            },
            "messageEventDefinition" => {
                let (message, k) = message_of(d).ok_or_else(|| no_message(n))?;
                key = k.or_else(|| model_key(n)).or_else(|| model_key(d));
                Trigger::Message { message }
            }
            "conditionalEventDefinition" => Trigger::Condition {
                condition: condition_of(d).map_err(|m| issue(n, m))?,
            },
            _ => return Ok(None),
        };
        Ok(Some((trigger, key)))
    };
    let tree = scope_tree(p);
    // event subprocess id → (trigger, interrupting), from its start event
    let mut esp_starts: HashMap<String, (Trigger, bool)> = HashMap::new();
    // per kept element: the id of the subprocess it is directly inside
    let mut parent_ids: Vec<Option<String>> = Vec::new();
    for &(n, container) in &tree {
        let name = n.name.as_str();
        if UNSUPPORTED_NODES.contains(&name) {
            refuse(unsupported, n, name.to_string());
            continue;
        }
        let evdefs = event_definitions(n);
        let kind = match name {
            // the start event of an event subprocess: its event starts the
            // event subprocess, which keeps the trigger
            "startEvent" if container.is_some_and(event_subprocess) => {
                let interrupting = !matches!(n.attr("isInterrupting"), Some(v) if v.trim().eq_ignore_ascii_case("false"));
                let trigger = match evdefs.as_slice() {
                    [d] => match trigger_of(n, d) {
                        Ok(Some((t, key))) => {
                            if let Trigger::Message { message } = &t {
                                catches.push((message.clone(), n.id(), n.line, key));
                            }
                            if !interrupting && matches!(t, Trigger::Error { .. }) {
                                issues.push(issue(n, "an error start event always interrupts: isInterrupting=\"false\" is not allowed on it".into()));
                            }
                            t
                        }
                        Ok(None) => {
                            refuse(
                                unsupported,
                                n,
                                format!("startEvent with {} in an event subprocess", d.name),
                            );
                            continue;
                        }
                        Err(problem) => {
                            issues.push(problem);
                            continue;
                        }
                    },
                    [] => {
                        issues.push(issue(n, "the start event of an event subprocess needs a message, timer, signal, error or escalation definition".into()));
                        continue;
                    }
                    _ => {
                        refuse(
                            unsupported,
                            n,
                            "startEvent with several event definitions".into(),
                        );
                        continue;
                    }
                };
                if let Some(c) = container {
                    esp_starts.insert(c.id(), (trigger, interrupting));
                }
                ElementKind::NoneStart
            }
            "startEvent" | "endEvent" | "intermediateCatchEvent" | "intermediateThrowEvent" => {
                if evdefs.len() > 1 {
                    refuse(
                        unsupported,
                        n,
                        format!("{name} with several event definitions"),
                    );
                    continue;
                }
                let def = evdefs.first().map(|d| d.name.as_str());
                match (name, def) {
                    ("startEvent", None) => ElementKind::NoneStart,
                    ("startEvent", Some("messageEventDefinition")) => {
                        let Some((message, key)) = message_of(evdefs[0]) else {
                            issues.push(no_message(n));
                            continue;
                        };
                        starts.push((message.clone(), key));
                        ElementKind::MessageStart { message }
                    }
                    ("startEvent", Some("timerEventDefinition")) => {
                        match timer_of(evdefs[0], defs.quartz_weekdays) {
                            Ok(timer) => ElementKind::TimerStart { timer },
                            Err(message) => {
                                issues.push(issue(n, message));
                                continue;
                            }
                        }
                    }
                    ("endEvent", None) => ElementKind::End,
                    ("endEvent", Some("terminateEventDefinition")) => ElementKind::TerminateEnd,
                    ("endEvent", Some("errorEventDefinition")) => ElementKind::ErrorEnd {
                        code: error_code(evdefs[0]),
                    },
                    ("endEvent", Some("escalationEventDefinition"))
                    | ("intermediateThrowEvent", Some("escalationEventDefinition")) => {
                        ElementKind::Escalation {
                            code: escalation_code(evdefs[0]),
                            end: name == "endEvent",
                        }
                    }
                    ("intermediateCatchEvent", Some("messageEventDefinition")) => {
                        let Some((message, key)) = message_of(evdefs[0]) else {
                            issues.push(no_message(n));
                            continue;
                        };
                        let key = key
                            .or_else(|| model_key(n))
                            .or_else(|| model_key(evdefs[0]));
                        catches.push((message.clone(), n.id(), n.line, key));
                        ElementKind::MessageCatch { message }
                    }
                    ("intermediateCatchEvent", Some("timerEventDefinition")) => {
                        match timer_of(evdefs[0], defs.quartz_weekdays) {
                            Ok(timer) => ElementKind::TimerCatch { timer },
                            Err(message) => {
                                issues.push(issue(n, message));
                                continue;
                            }
                        }
                    }
                    ("intermediateCatchEvent", Some("signalEventDefinition"))
                    | ("intermediateThrowEvent", Some("signalEventDefinition"))
                    | ("startEvent", Some("signalEventDefinition"))
                    | ("endEvent", Some("signalEventDefinition")) => {
                        let Some(signal) = defs.signal_of(evdefs[0]) else {
                            issues.push(no_signal(n));
                            continue;
                        };
                        match name {
                            "intermediateCatchEvent" => ElementKind::SignalCatch { signal },
                            "startEvent" => ElementKind::SignalStart { signal },
                            // a signal end event broadcasts, then its token
                            // ends (it has no outgoing flow)
                            _ => ElementKind::SignalThrow { signal },
                        }
                    }
                    ("intermediateThrowEvent", None) => ElementKind::NoneThrow,
                    ("intermediateCatchEvent", Some("conditionalEventDefinition")) => {
                        match condition_of(evdefs[0]) {
                            Ok(condition) => ElementKind::ConditionalCatch { condition },
                            Err(message) => {
                                issues.push(issue(n, message));
                                continue;
                            }
                        }
                    }
                    (
                        "intermediateThrowEvent" | "intermediateCatchEvent",
                        Some("linkEventDefinition"),
                    ) => {
                        let Some(link) = evdefs[0]
                            .attr("name")
                            .map(str::trim)
                            .filter(|l| !l.is_empty())
                        else {
                            issues.push(issue(n, "linkEventDefinition has no name: a link throw event continues at the link catch event of its name".into()));
                            continue;
                        };
                        ElementKind::Link {
                            name: link.to_string(),
                            catch: name == "intermediateCatchEvent",
                        }
                    }
                    // a message throw is work for a worker that sends it: a job
                    ("intermediateThrowEvent", Some("messageEventDefinition"))
                    | ("endEvent", Some("messageEventDefinition")) => ElementKind::Delegated {
                        topic: topic_of(n),
                        work: super::Delegated::Message {
                            name: message_of(evdefs[0]).map(|(m, _)| m),
                            end: name == "endEvent",
                        },
                    },
                    (_, Some(d)) => {
                        refuse(unsupported, n, format!("{name} with {d}"));
                        continue;
                    }
                    // a catch without a definition is a wait state
                    ("intermediateCatchEvent", None) => ElementKind::WaitState,
                    (_, None) => {
                        refuse(unsupported, n, format!("{name} without event definition"));
                        continue;
                    }
                }
            }
            "exclusiveGateway" => ElementKind::ExclusiveGateway { default: None },
            "inclusiveGateway" => ElementKind::InclusiveGateway { default: None },
            "eventBasedGateway" => ElementKind::EventGateway,
            "boundaryEvent" => {
                let trigger = match evdefs.as_slice() {
                    [d] => match trigger_of(n, d) {
                        Ok(Some((t, key))) => {
                            if let Trigger::Message { message } = &t {
                                catches.push((message.clone(), n.id(), n.line, key));
                            }
                            t
                        }
                        Ok(None) => {
                            refuse(unsupported, n, format!("boundaryEvent with {}", d.name));
                            continue;
                        }
                        Err(problem) => {
                            issues.push(problem);
                            continue;
                        }
                    },
                    _ => {
                        refuse(
                            unsupported,
                            n,
                            "boundaryEvent without exactly one event definition".into(),
                        );
                        continue;
                    }
                };
                let cancel = !matches!(n.attr("cancelActivity"), Some(v) if v.trim().eq_ignore_ascii_case("false"))
                    || matches!(trigger, Trigger::Error { .. });
                ElementKind::Boundary {
                    host: usize::MAX,
                    cancel,
                    trigger,
                }
            }
            "parallelGateway" => ElementKind::ParallelGateway,
            // its start and children are filled in once every element has its index
            "subProcess" if event_subprocess(n) => ElementKind::EventSubProcess {
                start: usize::MAX,
                children: Vec::new(),
                trigger: Trigger::Error { code: None },
                interrupting: true,
            },
            "subProcess" => ElementKind::SubProcess {
                start: usize::MAX,
                children: Vec::new(),
            },
            "callActivity" => match call_activity(n) {
                Ok(kind) => kind,
                Err(message) => {
                    issues.push(issue(n, message));
                    continue;
                }
            },
            "task" => ElementKind::Task { manual: false },
            "manualTask" => ElementKind::Task { manual: true },
            "sendTask" => {
                // Camunda's external send task names a worker topic, not a broker topic
                let external = n.attr("type").is_some_and(|t| t.trim() == "external");
                let topic = key_overrides
                    .get(&super::send_topic_override(&n.id()))
                    .map(String::as_str)
                    .or_else(|| n.attr("topic").filter(|_| !external))
                    .map(str::trim)
                    .filter(|t| !t.is_empty());
                match topic {
                    Some(t) => ElementKind::Publish { topic: t.into() },
                    // unbound: a worker sends it, never a silent pass-through
                    None => ElementKind::Delegated {
                        topic: topic_of(n),
                        work: super::Delegated::Send {
                            message: message_of(n).map(|(m, _)| m),
                            implementation: n
                                .attr("type")
                                .map(str::trim)
                                .filter(|t| !t.is_empty() && *t != "external")
                                .map(str::to_string),
                        },
                    },
                }
            }
            "serviceTask" => ElementKind::ServiceTask { topic: topic_of(n) },
            "userTask" => ElementKind::UserTask {
                spec: user_task_spec(n),
            },
            "scriptTask" => {
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
                let result_variable = n
                    .attr("resultVariable")
                    .or_else(|| zeebe.and_then(|z| z.attr("resultVariable")))
                    .map(str::to_string);
                ElementKind::Delegated {
                    topic: topic_of(n),
                    work: super::Delegated::Script {
                        format,
                        text,
                        result_variable,
                    },
                }
            }
            "businessRuleTask" => {
                let zeebe = extension(n, "calledDecision");
                let decision = n
                    .attr("decisionRef")
                    .or_else(|| n.attr("decisionTableReferenceKey"))
                    .or_else(|| zeebe.and_then(|z| z.attr("decisionId")))
                    .map(strip_feel);
                let result_variable = n
                    .attr("resultVariable")
                    .or_else(|| zeebe.and_then(|z| z.attr("resultVariable")))
                    .map(str::to_string);
                ElementKind::Delegated {
                    topic: topic_of(n),
                    work: super::Delegated::Decision {
                        decision,
                        result_variable,
                    },
                }
            }
            // without a message: a wait state, moved on by a caller
            "receiveTask" if n.attr("messageRef").is_none_or(|r| r.trim().is_empty()) => {
                ElementKind::WaitState
            }
            "receiveTask" => {
                let Some((message, key)) = message_of(n) else {
                    issues.push(no_message(n));
                    continue;
                };
                let key = key.or_else(|| model_key(n));
                catches.push((message.clone(), n.id(), n.line, key));
                ElementKind::ReceiveTask { message }
            }
            _ => continue, // not a flow node: diagram, lanes, annotations, data, vendor extensions
        };
        if n.child("standardLoopCharacteristics").is_some() {
            refuse(
                unsupported,
                n,
                format!("{name} with standardLoopCharacteristics"),
            );
            continue;
        }
        let mut multi = None;
        if let Some(lc) = n.child("multiInstanceLoopCharacteristics") {
            if !runs_multi_instance(&kind) {
                refuse(
                    unsupported,
                    n,
                    format!("{name} with multiInstanceLoopCharacteristics"),
                );
                continue;
            }
            match multi_instance(lc) {
                Ok(m) => multi = Some(m),
                // the element's type beside its id and line, as refusals
                // name it; the element stays, so that what refers to it
                // (boundary events, flows) is not refused for its sake
                Err(message) => issues.push(issue(n, format!("{name}: {message}"))),
            }
        }
        if n.id().is_empty() {
            issues.push(Issue {
                id: format!("<{name}>"),
                line: n.line,
                message: "flow node has no id".into(),
                missing_key_for: None,
            });
            continue;
        }
        if !ids.insert(n.id()) {
            issues.push(issue(n, "id is used twice".into()));
            continue;
        }
        let async_before = is_true(n.attr("async")) || is_true(n.attr("asyncBefore"));
        let retry = match retry_policy(n) {
            Ok(r) => r,
            Err(message) => {
                issues.push(issue(n, message));
                None
            }
        };
        elements.push(Element {
            id: n.id(),
            name: n.attr("name").map(str::to_string),
            kind,
            incoming: Vec::new(),
            outgoing: Vec::new(),
            async_before,
            line: n.line,
            retry,
            boundaries: Vec::new(),
            extras: super::Extras {
                multi,
                ..extras_of(n).0
            },
        });
        flow_nodes.push(n);
        parent_ids.push(container.map(Node::id));
    }
    for (message, id, line, key) in catches {
        if !ids.contains(&id) {
            continue;
        }
        let key = key_overrides
            .get(&message)
            .cloned()
            .or(key)
            .or_else(|| keys.get(&message).cloned());
        match key {
            Some(k) if !k.is_empty() => {
                keys.insert(message, k);
            }
            _ => issues.push(Issue {
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
    for (message, key) in starts {
        if keys.contains_key(&message) {
            continue;
        }
        if let Some(k) = key_overrides
            .get(&message)
            .cloned()
            .or(key)
            .filter(|k| !k.is_empty())
        {
            keys.insert(message, k);
        }
    }
    let index: HashMap<String, usize> = elements
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.clone(), i))
        .collect();
    // every id in the process, refused elements included (for the errors below)
    let known: std::collections::HashSet<String> = tree
        .iter()
        .map(|(n, _)| n.id())
        .filter(|id| !id.is_empty())
        .collect();
    // the subprocess each element is directly inside, and each subprocess's
    // children and start event
    let parents: Vec<Option<usize>> = parent_ids
        .iter()
        .map(|c| c.as_ref().and_then(|c| index.get(c).copied()))
        .collect();
    for (i, parent) in parents.iter().enumerate() {
        if let Some(sp) = *parent
            && let ElementKind::SubProcess { children, .. }
            | ElementKind::EventSubProcess { children, .. } = &mut elements[sp].kind
        {
            children.push(i);
        }
    }
    for (i, n) in flow_nodes.iter().enumerate() {
        let (ElementKind::SubProcess { children, .. }
        | ElementKind::EventSubProcess { children, .. }) = &elements[i].kind
        else {
            continue;
        };
        let is_event = matches!(elements[i].kind, ElementKind::EventSubProcess { .. });
        let starts: Vec<usize> = children
            .iter()
            .copied()
            .filter(|&c| {
                matches!(
                    elements[c].kind,
                    ElementKind::NoneStart
                        | ElementKind::MessageStart { .. }
                        | ElementKind::SignalStart { .. }
                        | ElementKind::TimerStart { .. }
                )
            })
            .collect();
        match starts.as_slice() {
            [s] if is_event => {
                let s = *s;
                // a start event whose definition was refused has no trigger:
                // its issue is reported already
                if let Some((t, intr)) = esp_starts.remove(&n.id())
                    && let ElementKind::EventSubProcess {
                        start,
                        trigger,
                        interrupting,
                        ..
                    } = &mut elements[i].kind
                {
                    (*start, *trigger, *interrupting) = (s, t, intr);
                }
            }
            [s] if elements[*s].kind == ElementKind::NoneStart => {
                let s = *s;
                if let ElementKind::SubProcess { start, .. } = &mut elements[i].kind {
                    *start = s;
                }
            }
            [s] => issues.push(issue(
                n,
                format!(
                    "starts at '{}', a {}: an embedded subprocess starts at one none start event (message and timer starts belong to event subprocesses)",
                    elements[*s].id,
                    elements[*s].kind.label()
                ),
            )),
            [] if is_event => issues.push(issue(
                n,
                "event subprocess has no start event: give it one with the event that starts it"
                    .into(),
            )),
            [] => issues.push(issue(
                n,
                "embedded subprocess has no start event: give it one none start event".into(),
            )),
            _ => issues.push(issue(
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
    let mut flows = Vec::new();
    let scope_flows = tree
        .iter()
        .filter(|(n, _)| n.name == "subProcess")
        .flat_map(|(n, _)| n.children.iter().map(move |c| (c, Some(n.id()))));
    let all_flows = p
        .children
        .iter()
        .map(|c| (c, None))
        .chain(scope_flows)
        .filter(|(c, _)| c.name == "sequenceFlow");
    // an end event ends its token: a flow out of one would never be taken
    let ends: std::collections::HashSet<String> = tree
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
        if ends.contains(src) {
            issues.push(Issue {
                id,
                line: f.line,
                message: format!(
                    "sequence flow leaves end event '{src}', which ends its token: make '{src}' an intermediate throw event, or remove the flow"
                ),
                missing_key_for: None,
            });
            continue;
        }
        let (Some(&s), Some(&t)) = (index.get(src), index.get(tgt)) else {
            let missing = if index.contains_key(src) { tgt } else { src };
            if !known.contains(missing) {
                issues.push(Issue {
                    id,
                    line: f.line,
                    message: format!("sequence flow refers to '{missing}', which is not a flow node of process '{pid}'"),
                    missing_key_for: None,
                });
            }
            continue;
        };
        if parents[s] != parents[t] || parent_ids[s] != container {
            let scope = |e: usize| {
                parents[e]
                    .map(|sp| format!("subprocess '{}'", elements[sp].id))
                    .unwrap_or_else(|| format!("process '{pid}'"))
            };
            issues.push(Issue {
                id,
                line: f.line,
                message: format!(
                    "sequence flow from '{src}' ({}) to '{tgt}' ({}) crosses a scope boundary: a flow connects nodes of one process or subprocess",
                    scope(s),
                    scope(t)
                ),
                missing_key_for: None,
            });
            continue;
        }
        if let Some(e) = [s, t]
            .into_iter()
            .find(|&e| matches!(elements[e].kind, ElementKind::EventSubProcess { .. }))
        {
            issues.push(Issue {
                id,
                line: f.line,
                message: format!(
                    "sequence flow touches event subprocess '{}': an event subprocess is started by its event, not by a flow",
                    elements[e].id
                ),
                missing_key_for: None,
            });
            continue;
        }
        let condition = match f
            .child("conditionExpression")
            .map(|c| c.text.trim())
            .filter(|t| !t.is_empty())
        {
            Some(text) => match parse_condition(text) {
                Ok(e) => Some(e),
                Err(m) => {
                    issues.push(Issue {
                        id: id.clone(),
                        line: f.line,
                        message: m,
                        missing_key_for: None,
                    });
                    None
                }
            },
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
    link_flows(&flow_nodes, &parents, &mut elements, &mut flows, issues);
    for (i, n) in flow_nodes.iter().enumerate() {
        if let ElementKind::Boundary { .. } = elements[i].kind {
            let host_id = n.attr("attachedToRef").unwrap_or("");
            match index.get(host_id).copied() {
                Some(h)
                    if matches!(
                        elements[i].kind,
                        ElementKind::Boundary {
                            trigger: Trigger::Escalation { .. },
                            ..
                        }
                    ) && !matches!(
                        elements[h].kind,
                        ElementKind::SubProcess { .. } | ElementKind::CallActivity { .. }
                    ) =>
                {
                    issues.push(issue(n, format!("escalation boundary event on '{host_id}', which is not a subprocess or call activity: only what runs inside one can escalate")));
                }
                Some(h) if parents[h] != parents[i] => {
                    issues.push(issue(n, format!("attachedToRef '{host_id}' is in another scope: a boundary event sits beside its activity, in the same process or subprocess")));
                }
                Some(h)
                    if matches!(
                        elements[h].kind,
                        ElementKind::ServiceTask { .. }
                            | ElementKind::Delegated { .. }
                            | ElementKind::UserTask { .. }
                            | ElementKind::SendTask
                            | ElementKind::Publish { .. }
                            | ElementKind::ReceiveTask { .. }
                            | ElementKind::SubProcess { .. }
                            | ElementKind::CallActivity { .. }
                    ) =>
                {
                    // one subscription per (host, signal): two boundary events for
                    // the same signal on one activity would race for it
                    let signal_of = |k: &ElementKind| match k {
                        ElementKind::Boundary {
                            trigger: Trigger::Signal { signal },
                            ..
                        } => Some(signal.clone()),
                        _ => None,
                    };
                    if let Some(sig) = signal_of(&elements[i].kind)
                        && elements[h]
                            .boundaries
                            .iter()
                            .any(|&b| signal_of(&elements[b].kind).as_deref() == Some(sig.as_str()))
                    {
                        issues.push(issue(n, format!("a second boundary event for signal '{sig}' on '{host_id}': one activity catches a signal at one boundary event")));
                        continue;
                    }
                    // one subscription per (host, message) too, and a receive
                    // task's own message is not also its boundary's: one token
                    // would hold the same (message, key) twice
                    let message_of = |k: &ElementKind| match k {
                        ElementKind::Boundary {
                            trigger: Trigger::Message { message },
                            ..
                        } => Some(message.clone()),
                        _ => None,
                    };
                    if let Some(m) = message_of(&elements[i].kind) {
                        if elements[h]
                            .boundaries
                            .iter()
                            .any(|&b| message_of(&elements[b].kind).as_deref() == Some(m.as_str()))
                        {
                            issues.push(issue(n, format!("a second boundary event for message '{m}' on '{host_id}': one activity catches a message at one boundary event")));
                            continue;
                        }
                        if elements[h].kind.waits_for_message() == Some(m.as_str()) {
                            issues.push(issue(n, format!("boundary event for message '{m}' on '{host_id}', which itself waits for '{m}': every such message would be ambiguous")));
                            continue;
                        }
                    }
                    if let ElementKind::Boundary { host, .. } = &mut elements[i].kind {
                        *host = h;
                    }
                    elements[h].boundaries.push(i);
                }
                _ => issues.push(issue(n, format!("attachedToRef '{host_id}' is not a service, script, business-rule, user, send or receive task, an embedded subprocess or a call activity of this process"))),
            }
        }
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
                    issues.push(issue(n, format!("event-based gateway leads to '{}', which is not a message, timer or signal catch event", t.id)));
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
                None => issues.push(issue(
                    n,
                    format!("default flow '{d}' is not an outgoing flow of this gateway"),
                )),
            }
        }
    }
    if !elements.iter().enumerate().any(|(i, e)| {
        parents[i].is_none()
            && matches!(
                e.kind,
                ElementKind::NoneStart
                    | ElementKind::MessageStart { .. }
                    | ElementKind::SignalStart { .. }
                    | ElementKind::TimerStart { .. }
            )
    }) {
        issues.push(Issue {
            id: pid.clone(),
            line: p.line,
            message: "process has no start event".into(),
            missing_key_for: None,
        });
    }
    let _ = &p.prefix;
    Some(Process::new(
        pid,
        p.attr("name").map(str::to_string),
        elements,
        flows,
        keys,
    ))
}
