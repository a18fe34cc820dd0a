//! The XML tree a BPMN file is read into: elements by local name with their
//! attributes, children, text and line.
//!
//! Invariant: no input makes reading panic or run away — nesting is capped at
//! [`MAX_DEPTH`], DOCTYPE declarations (and with them external entities) are
//! refused, and every error names its line and column.

use super::{MAX_DEPTH, ParseError};
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use std::fmt;

/// A parsed XML element: local name, attributes by local name, children, text.
pub(super) struct Node {
    pub(super) name: String,
    pub(super) attrs: Vec<(String, String)>,
    pub(super) children: Vec<Node>,
    pub(super) text: String,
    pub(super) line: u32,
}

impl Node {
    pub(super) fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == local)
            .map(|(_, v)| v.as_str())
    }
    pub(super) fn id(&self) -> String {
        self.attr("id").unwrap_or("").to_string()
    }
    pub(super) fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name)
    }
}

pub(super) struct Lines(Vec<usize>);

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

pub(super) fn local(s: &str) -> (String, String) {
    match s.split_once(':') {
        Some((p, l)) => (p.to_string(), l.to_string()),
        None => (String::new(), s.to_string()),
    }
}

pub(super) fn node_from(e: &BytesStart<'_>, line: u32) -> Result<Node, String> {
    let (_, name) = local(e.name().as_ref());
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
        name,
        attrs,
        children: Vec::new(),
        text: String::new(),
        line,
    })
}

/// The elements that are flow nodes: each needs an id.
pub(super) const FLOW_NODES: [&str; 22] = [
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
pub(super) fn name_anonymous_flow_nodes(root: &mut Node) -> Vec<(String, u32, String)> {
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

pub(super) fn build_tree(file: &str, xml: &str) -> Result<Node, ParseError> {
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
