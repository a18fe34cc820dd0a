//! DMN files as postfach reads them before DecisionToolkit builds them: which
//! DMN version, the decisions with id, name and line, the ids of their rules,
//! and whether every FEEL text parses.
//!
//! Invariant: a refusal names the file and, where the problem is in one
//! element, that element's id and line (a rule, an input entry, a decision);
//! DMN 1.1 and 1.2 are read as DMN 1.3 (their decision tables and literal
//! expressions mean the same there).

use super::xml::{Node, build_tree};
use super::{Issue, MAX_SIZE, ParseError};

/// What a DMN file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmnOutline {
    /// The `namespace` of its `<definitions>`.
    pub namespace: String,
    /// The `name` of its `<definitions>`.
    pub name: String,
    /// Its decisions, in document order.
    pub decisions: Vec<DecisionOutline>,
    /// The names it declares (input data, decisions, knowledge models).
    pub declared: Vec<String>,
}

/// One decision of a DMN file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionOutline {
    /// Its id (what a business rule task names).
    pub id: String,
    /// Its name (what DMN evaluates it by).
    pub name: String,
    /// Its line.
    pub line: u32,
    /// The ids of its decision table's rules, in order (empty for a literal
    /// expression).
    pub rules: Vec<String>,
    /// The ids of the decisions it requires.
    pub requires: Vec<String>,
    /// The names of its decision table's outputs (empty for a literal
    /// expression; an output without a name is the decision's own name).
    pub outputs: Vec<String>,
    /// Whether it invokes business knowledge models (then DecisionToolkit's
    /// model evaluator evaluates it, with the input data the file declares).
    pub uses_knowledge: bool,
}

/// The DMN namespaces postfach reads, oldest first (1.1 twice, 1.2 … 1.5).
#[cfg_attr(not(feature = "feel"), allow(dead_code))]
const DMN_NAMESPACES: [&str; 6] = [
    "http://www.omg.org/spec/DMN/20151101/dmn.xsd",
    "http://www.omg.org/spec/DMN/20151101/dmn11.xsd",
    "http://www.omg.org/spec/DMN/20180521/MODEL/",
    "https://www.omg.org/spec/DMN/20191111/MODEL/",
    "https://www.omg.org/spec/DMN/20211108/MODEL/",
    "https://www.omg.org/spec/DMN/20230324/MODEL/",
];

/// Whether `xml` is a DMN file: its root element declares a DMN namespace.
pub fn is_dmn(xml: &str) -> bool {
    let start = xml
        .find("<definitions")
        .or_else(|| xml.find(":definitions"))
        .unwrap_or(usize::MAX);
    let Some(root) = xml.get(start..) else {
        return false;
    };
    let tag = &root[..root.find('>').unwrap_or(root.len())];
    tag.contains("omg.org/spec/DMN/") && !tag.contains("omg.org/spec/BPMN/")
}

/// `xml` as DecisionToolkit reads it: a DMN 1.1 or 1.2 namespace as DMN
/// 1.3's, and what Camunda 7's files write beyond the standard — a
/// `namespace` or `expressionLanguage` that is no URI (`test-drg`, `juel`),
/// a text that is a JUEL variable path (`${amount}`, which FEEL reads as
/// `amount`).
#[cfg_attr(not(feature = "feel"), allow(dead_code))]
pub fn normalized(xml: &str) -> String {
    let mut out = xml.to_string();
    for old in &DMN_NAMESPACES[..3] {
        if out.contains(old) {
            out = out.replace(old, DMN_NAMESPACES[3]);
        }
    }
    let mut fixed = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find(['=', '>']) {
        let (head, tail) = rest.split_at(at);
        fixed.push_str(head);
        let attr = head.rsplit([' ', '\n', '\t', '\r']).next().unwrap_or("");
        if tail.starts_with("=\"")
            && (attr == "namespace" || attr == "expressionLanguage" || attr == "typeLanguage")
        {
            let end = tail[2..].find('"').map_or(tail.len(), |e| e + 2);
            let value = &tail[2..end];
            if value.contains(':') && !value.contains(char::is_whitespace) {
                fixed.push_str(&tail[..=end.min(tail.len() - 1)]);
            } else if attr == "namespace" {
                fixed.push_str(&format!("=\"urn:{value}\""));
            } else {
                // no URI: DMN's default (FEEL) applies
                fixed.truncate(fixed.len() - attr.len());
            }
            rest = &tail[(end + 1).min(tail.len())..];
            continue;
        }
        if let Some(after) = tail.strip_prefix(">${")
            && head.ends_with("<text")
            && let Some(close) = after.find("}</text>")
            && super::data::variable_path(&after[..close]).is_some()
        {
            fixed.push('>');
            fixed.push_str(after[..close].trim());
            rest = &after[close + 1..];
            continue;
        }
        fixed.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    fixed.push_str(rest);
    fixed
}

/// Reads the outline of DMN file `file`; `Err` names what is wrong where.
pub fn outline(file: &str, xml: &str) -> Result<DmnOutline, ParseError> {
    if xml.len() > MAX_SIZE {
        return Err(ParseError::TooLarge {
            file: file.into(),
            size: xml.len(),
        });
    }
    let root = build_tree(file, xml)?;
    let invalid = |issues: Vec<Issue>| ParseError::Invalid {
        file: file.into(),
        issues,
    };
    let issue = |n: &Node, message: String| Issue {
        id: n.id(),
        line: n.line,
        message,
        missing_key_for: None,
    };
    if root.name != "definitions" || !is_dmn(xml) {
        return Err(ParseError::NotDmn {
            file: file.into(),
            found: root.name.clone(),
        });
    }
    let mut issues = Vec::new();
    let namespace = root.attr("namespace").unwrap_or("").trim().to_string();
    if namespace.is_empty() {
        issues.push(issue(&root, "<definitions> has no namespace".into()));
    }
    let mut decisions: Vec<DecisionOutline> = Vec::new();
    let declared = declared_names(&root);
    for d in root.children.iter().filter(|c| c.name == "decision") {
        let (id, name) = (d.id(), d.attr("name").unwrap_or("").trim().to_string());
        if id.is_empty() || name.is_empty() {
            issues.push(issue(d, "a decision needs an id and a name".into()));
            continue;
        }
        if decisions.iter().any(|o| o.id == id) {
            issues.push(issue(d, "id is used twice".into()));
            continue;
        }
        let rules = d
            .child("decisionTable")
            .map(|t| {
                t.children
                    .iter()
                    .filter(|r| r.name == "rule")
                    .enumerate()
                    .map(|(i, r)| {
                        Some(r.id())
                            .filter(|s| !s.is_empty())
                            .unwrap_or(format!("rule {}", i + 1))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let requires = d
            .children
            .iter()
            .filter(|c| c.name == "informationRequirement")
            .filter_map(|r| r.child("requiredDecision"))
            .filter_map(|r| r.attr("href"))
            .map(|h| h.trim().trim_start_matches('#').to_string())
            .collect();
        let outputs = d
            .child("decisionTable")
            .map(|t| {
                t.children
                    .iter()
                    .filter(|o| o.name == "output")
                    .map(|o| o.attr("name").unwrap_or(&name).trim().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let uses_knowledge = d.children.iter().any(|c| c.name == "knowledgeRequirement");
        check_texts(d, d, &declared, &mut issues);
        decisions.push(DecisionOutline {
            id,
            name,
            line: d.line,
            rules,
            requires,
            outputs,
            uses_knowledge,
        });
    }
    if decisions.is_empty() && issues.is_empty() {
        issues.push(issue(&root, "the file has no <decision>".into()));
    }
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    Ok(DmnOutline {
        namespace,
        name: root.attr("name").unwrap_or("").trim().to_string(),
        decisions,
        declared,
    })
}

/// The names a DMN file declares (input data, decisions, knowledge models):
/// FEEL reads names with spaces only when it knows them.
fn declared_names(root: &Node) -> Vec<String> {
    root.children
        .iter()
        .filter(|c| {
            matches!(
                c.name.as_str(),
                "inputData" | "decision" | "businessKnowledgeModel"
            )
        })
        .filter_map(|c| c.attr("name"))
        .map(|n| n.trim().to_string())
        .collect()
}

/// Checks every FEEL text below `n` (inside decision `decision`): input
/// entries are unary tests, the rest expressions. Each one that does not
/// parse is an issue at the nearest element with an id.
fn check_texts(n: &Node, at: &Node, declared: &[String], issues: &mut Vec<Issue>) {
    let at = if n.attr("id").is_some_and(|i| !i.is_empty()) {
        n
    } else {
        at
    };
    for c in &n.children {
        if c.name == "text" {
            let text = c.text.trim();
            if text.is_empty() {
                continue;
            }
            let unary = matches!(
                n.name.as_str(),
                "inputEntry" | "inputValues" | "outputValues"
            );
            if let Err(e) = crate::model::feel::check_text(text, unary, declared) {
                issues.push(Issue {
                    id: at.id(),
                    line: c.line,
                    message: format!("<{}> text '{text}': {e}", n.name),
                    missing_key_for: None,
                });
            }
        } else {
            check_texts(c, at, declared, issues);
        }
    }
}
