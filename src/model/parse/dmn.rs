//! DMN files as postfach reads them before DecisionToolkit builds them: which
//! DMN version, the decisions with id, name and line, the ids of their rules,
//! and whether every FEEL text parses.
//!
//! Invariant: a refusal names the file and, where the problem is in one
//! element, that element's id and line (a rule, an input entry, a decision);
//! DMN 1.1 and 1.2 are read as DMN 1.3 (their decision tables and literal
//! expressions mean the same there).

use super::xml::{Node, build_tree};
use super::{Issue, MAX_SIZE, ParseError, Warning};

/// What a DMN file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmnOutline {
    /// The `namespace` of its `<definitions>`.
    pub namespace: String,
    /// The `name` of its `<definitions>`.
    pub name: String,
    /// Its decisions, in document order.
    pub decisions: Vec<DecisionOutline>,
    /// The names it declares (input data, decisions, knowledge models,
    /// decision services).
    pub declared: Vec<String>,
    /// Its input data by name, with the type each declares (what a
    /// variable of that name is read as: ISO 8601 text of a date becomes a
    /// date where the type says so).
    pub inputs: Vec<(String, ValueType)>,
    /// What postfach reads other than written (a decision without an id).
    pub warnings: Vec<Warning>,
}

/// The type an input declares, as far as it changes how a JSON value is
/// read: temporal values arrive as text, lists and contexts hold them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    /// Anything: taken as it is.
    Any,
    /// A date (`date`).
    Date,
    /// A time (`time`).
    Time,
    /// A date and time (`dateTime`, `date and time`).
    DateTime,
    /// A duration (`duration`, `dayTimeDuration`, `yearMonthDuration`, …).
    Duration,
    /// A list of values of one type (`isCollection`).
    List(Box<ValueType>),
    /// A context whose named components have types.
    Context(Vec<(String, ValueType)>),
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
    /// Whether it invokes business knowledge models.
    pub uses_knowledge: bool,
    /// Whether it is a decision service (its `outputs` are the decisions
    /// it answers with).
    pub service: bool,
    /// The names its FEEL texts read that the file does not declare: the
    /// variables of the process (as Camunda and Zeebe read a decision's
    /// texts against every variable), given to it as input data.
    pub implicit: Vec<String>,
    /// The functions postfach binds itself that its texts call (`now`,
    /// `today`, Camunda's extensions).
    pub functions: Vec<String>,
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

/// The temporal types' FEEL names and their XML Schema names.
#[cfg_attr(not(feature = "feel"), allow(dead_code))]
const TEMPORAL_TYPES: [(&str, &str); 3] = [
    ("date and time", "dateTime"),
    ("days and time duration", "dayTimeDuration"),
    ("years and months duration", "yearMonthDuration"),
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
    // DMN 1.3 names the temporal types as FEEL does; DecisionToolkit's
    // type references know their XML Schema names (DMN 1.1's)
    for (feel, xsd) in TEMPORAL_TYPES {
        for (from, to) in [
            (format!("typeRef>{feel}<"), format!("typeRef>{xsd}<")),
            (format!("typeRef=\"{feel}\""), format!("typeRef=\"{xsd}\"")),
        ] {
            if out.contains(&from) {
                out = out.replace(&from, &to);
            }
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
    issues.extend(imports(&root));
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    let declared = declared_names(&root);
    let types = item_types(&root);
    let components = component_names(&root);
    let not_implicit: Vec<&str> = declared
        .iter()
        .chain(&components)
        .flat_map(|n| n.split_whitespace())
        .chain(types.keys().map(String::as_str))
        .chain(["?", "item"])
        .collect();
    let mut warnings = Vec::new();
    for (i, d) in root
        .children
        .iter()
        .filter(|c| c.name == "decision")
        .enumerate()
    {
        match decision_outline(d, i, &declared, &not_implicit, &mut warnings, &mut issues) {
            Some(o) if decisions.iter().any(|x| x.id == o.id) => {
                issues.push(issue(d, "id is used twice".into()))
            }
            Some(o) => decisions.push(o),
            None => {}
        }
    }
    for s in root.children.iter().filter(|c| c.name == "decisionService") {
        let (id, name) = (s.id(), s.attr("name").unwrap_or("").trim().to_string());
        if id.is_empty() || name.is_empty() {
            issues.push(issue(s, "a decision service needs an id and a name".into()));
        } else if decisions.iter().any(|o| o.id == id) {
            issues.push(issue(s, "id is used twice".into()));
        } else {
            let outputs = service_outputs(s, &decisions);
            decisions.push(DecisionOutline {
                id,
                name,
                line: s.line,
                rules: Vec::new(),
                requires: Vec::new(),
                outputs,
                uses_knowledge: false,
                service: true,
                implicit: Vec::new(),
                functions: Vec::new(),
            });
        }
    }
    if decisions.is_empty() && issues.is_empty() {
        issues.push(issue(&root, "the file has no <decision>".into()));
    }
    if !issues.is_empty() {
        return Err(invalid(issues));
    }
    let inputs = input_types(&root, &types);
    Ok(DmnOutline {
        namespace,
        name: root.attr("name").unwrap_or("").trim().to_string(),
        decisions,
        declared,
        inputs,
        warnings,
    })
}

/// An issue for every import of `root`: a decision file deploys alone.
fn imports(root: &Node) -> Vec<Issue> {
    let imports = root.children.iter().filter(|c| c.name == "import");
    imports
        .map(|i| {
            let what = i
                .attr("locationURI")
                .or_else(|| i.attr("namespace"))
                .unwrap_or("")
                .trim();
            Issue {
                id: i.id(),
                line: i.line,
                message: format!(
                    "imports '{what}': a decision file deploys alone (copy what it needs of the imported file into this one)"
                ),
                missing_key_for: None,
            }
        })
        .collect()
}

/// The type of every named input data of `root`.
fn input_types(
    root: &Node,
    types: &std::collections::HashMap<String, &Node>,
) -> Vec<(String, ValueType)> {
    root.children
        .iter()
        .filter(|c| c.name == "inputData")
        .filter_map(|c| {
            let name = c.attr("name")?.trim().to_string();
            let ty = c
                .child("variable")
                .and_then(type_ref)
                .map_or(ValueType::Any, |t| resolve(&t, types, 0));
            Some((name, ty))
        })
        .collect()
}

/// The outline of decision `d`, the `i`-th of its file (`None`, with an
/// issue, when it cannot be read); an id it lacks is generated, with a
/// warning.
fn decision_outline(
    d: &Node,
    i: usize,
    declared: &[String],
    not_implicit: &[&str],
    warnings: &mut Vec<Warning>,
    issues: &mut Vec<Issue>,
) -> Option<DecisionOutline> {
    let name = d.attr("name").unwrap_or("").trim().to_string();
    if name.is_empty() {
        issues.push(Issue {
            id: d.id(),
            line: d.line,
            message: "a decision needs a name".into(),
            missing_key_for: None,
        });
        return None;
    }
    let id = match d.id() {
        id if !id.is_empty() => id,
        _ => {
            let id = generated_id(i);
            warnings.push(Warning {
                id: id.clone(),
                line: d.line,
                message: format!(
                    "decision '{name}' has no id: it is deployed as '{id}' (give it an id to name it in a business rule task)"
                ),
            });
            id
        }
    };
    let table = d.child("decisionTable");
    let rules = table
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
    let outputs = table
        .map(|t| {
            t.children
                .iter()
                .filter(|o| o.name == "output")
                .map(|o| o.attr("name").unwrap_or(&name).trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let uses_knowledge = d.children.iter().any(|c| c.name == "knowledgeRequirement");
    check_texts(d, d, declared, issues);
    let (implicit, functions) = outside_names(d, not_implicit);
    Some(DecisionOutline {
        id,
        name,
        line: d.line,
        rules,
        requires,
        outputs,
        uses_knowledge,
        service: false,
        implicit,
        functions,
    })
}

/// What the FEEL texts of decision `d` read that its file does not declare
/// (variables, leaving out `not_implicit`), and the functions postfach
/// binds that they call.
fn outside_names(d: &Node, not_implicit: &[&str]) -> (Vec<String>, Vec<String>) {
    let (mut implicit, mut functions) = (Vec::new(), Vec::new());
    for text in texts(d) {
        let (variables, called) = crate::model::feel::outside_names(text);
        for v in variables {
            if !not_implicit.contains(&v.as_str()) && !implicit.contains(&v) {
                implicit.push(v);
            }
        }
        for f in called {
            if !functions.contains(&f) {
                functions.push(f);
            }
        }
    }
    (implicit, functions)
}

/// The names of the decisions decision service `s` answers with.
fn service_outputs(s: &Node, decisions: &[DecisionOutline]) -> Vec<String> {
    s.children
        .iter()
        .filter(|c| c.name == "outputDecision")
        .filter_map(|r| r.attr("href"))
        .filter_map(|h| {
            let id = h.trim().trim_start_matches('#');
            decisions
                .iter()
                .find(|o| o.id == id)
                .map(|o| o.name.clone())
        })
        .collect()
}

/// The id postfach gives the `i`-th decision of a file that has none.
fn generated_id(i: usize) -> String {
    format!("decision-{}", i + 1)
}

/// The FEEL texts below `n`.
fn texts(n: &Node) -> Vec<&str> {
    let mut out = Vec::new();
    for c in &n.children {
        if c.name == "text" {
            out.push(c.text.trim());
        } else {
            out.extend(texts(c));
        }
    }
    out
}

/// The type an element names: its `typeRef` attribute or `<typeRef>`
/// child (DMN 1.1 writes it as a QName: `feel:date`).
fn type_ref(n: &Node) -> Option<String> {
    let t = n
        .attr("typeRef")
        .map(str::to_string)
        .or_else(|| n.child("typeRef").map(|c| c.text.clone()))?;
    let t = t.trim();
    // a prefix names a namespace, not a part of the type (`feel:date`)
    let t = match t.split_once(':') {
        Some((_, local)) if !local.is_empty() => local,
        _ => t,
    };
    Some(t.to_string()).filter(|t| !t.is_empty())
}

/// The file's item definitions by name.
fn item_types(root: &Node) -> std::collections::HashMap<String, &Node> {
    root.children
        .iter()
        .filter(|c| c.name == "itemDefinition")
        .filter_map(|c| Some((c.attr("name")?.trim().to_string(), c)))
        .collect()
}

/// The names of the components of the file's item definitions (they are
/// read as paths, `loan.rate`, never as variables of their own).
fn component_names(n: &Node) -> Vec<String> {
    let mut out = Vec::new();
    for c in &n.children {
        if matches!(c.name.as_str(), "itemDefinition" | "itemComponent") {
            if c.name == "itemComponent"
                && let Some(name) = c.attr("name")
            {
                out.push(name.trim().to_string());
            }
            out.extend(component_names(c));
        }
    }
    out
}

/// The deepest chain of item definitions followed.
const MAX_TYPE_DEPTH: usize = 16;

/// The type `name` stands for: a built-in one, or an item definition.
fn resolve(
    name: &str,
    types: &std::collections::HashMap<String, &Node>,
    depth: usize,
) -> ValueType {
    match name {
        "date" => ValueType::Date,
        "time" => ValueType::Time,
        "dateTime" | "date and time" => ValueType::DateTime,
        "duration"
        | "dayTimeDuration"
        | "yearMonthDuration"
        | "days and time duration"
        | "years and months duration" => ValueType::Duration,
        _ => match types.get(name) {
            Some(def) if depth < MAX_TYPE_DEPTH => item_type(def, types, depth + 1),
            _ => ValueType::Any,
        },
    }
}

/// The type an item definition (or component) `n` describes.
fn item_type(
    n: &Node,
    types: &std::collections::HashMap<String, &Node>,
    depth: usize,
) -> ValueType {
    let components: Vec<(String, ValueType)> = n
        .children
        .iter()
        .filter(|c| c.name == "itemComponent")
        .filter_map(|c| {
            let name = c.attr("name")?.trim().to_string();
            Some((name, item_type(c, types, depth + 1)))
        })
        .collect();
    let base = if !components.is_empty() {
        ValueType::Context(components)
    } else if depth > MAX_TYPE_DEPTH {
        ValueType::Any
    } else {
        type_ref(n).map_or(ValueType::Any, |t| resolve(&t, types, depth))
    };
    if n.attr("isCollection") == Some("true") {
        ValueType::List(Box::new(base))
    } else {
        base
    }
}

/// The names a DMN file declares (input data, decisions, knowledge models):
/// FEEL reads names with spaces only when it knows them.
fn declared_names(root: &Node) -> Vec<String> {
    root.children
        .iter()
        .filter(|c| {
            matches!(
                c.name.as_str(),
                "inputData" | "decision" | "businessKnowledgeModel" | "decisionService"
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

/// The names every decision of `outline` reads without the file declaring
/// them (variables and functions postfach binds), in a stable order.
#[cfg_attr(not(feature = "feel"), allow(dead_code))]
pub fn implicit_inputs(outline: &DmnOutline) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in &outline.decisions {
        for n in d.implicit.iter().chain(&d.functions) {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
    }
    out
}

/// `xml` as DecisionToolkit builds it: every decision has an id (the one
/// [`outline`] generated), and what a decision reads without the file
/// declaring it is declared as input data of type Any that the decision
/// requires — so FEEL's parser knows the names, and the decision sees the
/// variables of that name (Camunda's and Zeebe's decisions read every
/// variable of the process).
#[cfg_attr(not(feature = "feel"), allow(dead_code))]
pub fn prepared(xml: &str, outline: &DmnOutline) -> String {
    let implicit = implicit_inputs(outline);
    let input_id = |name: &str| {
        let j = implicit.iter().position(|n| n == name).unwrap_or(0);
        format!("postfach-input-{}", j + 1)
    };
    let mut out = String::with_capacity(xml.len() + 256 * implicit.len());
    let (mut rest, mut prefix, mut decision) = (xml, None::<String>, 0usize);
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // comments, CDATA, declarations and end tags pass unchanged
        let skip_to = |end: &str, rest: &str| rest.find(end).map_or(rest.len(), |e| e + end.len());
        let skip = if rest.starts_with("<!--") {
            Some(skip_to("-->", rest))
        } else if rest.starts_with("<![CDATA[") {
            Some(skip_to("]]>", rest))
        } else if rest.starts_with("<?") || rest.starts_with("<!") || rest.starts_with("</") {
            Some(skip_to(">", rest))
        } else {
            None
        };
        if let Some(n) = skip {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        let end = tag_end(rest);
        let tag = &rest[..end];
        let name = tag[1..]
            .split(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .next()
            .unwrap_or("");
        let p = prefix
            .get_or_insert_with(|| name.strip_suffix("definitions").unwrap_or("").to_string());
        if name == format!("{p}decision") {
            let d = outline
                .decisions
                .iter()
                .filter(|d| !d.service)
                .nth(decision);
            decision += 1;
            let closed = tag.ends_with("/>");
            let body = tag.trim_end_matches('>').trim_end_matches('/');
            out.push_str(body);
            if let Some(d) = d
                && !has_id(tag)
            {
                out.push_str(&format!(" id=\"{}\"", escape(&d.id)));
            }
            out.push_str(if closed { "/>" } else { ">" });
            if let Some(d) = d.filter(|_| !closed) {
                for n in d.implicit.iter().chain(&d.functions) {
                    out.push_str(&format!(
                        "<{p}informationRequirement><{p}requiredInput href=\"#{}\"/></{p}informationRequirement>",
                        input_id(n)
                    ));
                }
            }
            rest = &rest[end..];
            continue;
        }
        out.push_str(tag);
        rest = &rest[end..];
    }
    out.push_str(rest);
    if implicit.is_empty() {
        return out;
    }
    let p = prefix.unwrap_or_default();
    let inputs: String = implicit
        .iter()
        .map(|n| {
            format!(
                "<{p}inputData id=\"{}\" name=\"{n}\"><{p}variable name=\"{n}\" typeRef=\"Any\"/></{p}inputData>",
                input_id(n),
                n = escape(n)
            )
        })
        .collect();
    match out.rfind(&format!("</{p}definitions")) {
        Some(at) => out.insert_str(at, &inputs),
        None => out.push_str(&inputs),
    }
    out
}

/// The characters of start tag `tag` outside its quoted attribute values,
/// with their byte offsets.
fn unquoted(tag: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quote = None;
    tag.char_indices().filter(move |&(_, c)| match quote {
        Some(q) => {
            if c == q {
                quote = None;
            }
            false
        }
        None if c == '"' || c == '\'' => {
            quote = Some(c);
            false
        }
        None => true,
    })
}

/// The length of the start tag `tag` begins with (through its `>`).
fn tag_end(tag: &str) -> usize {
    unquoted(tag)
        .find(|&(_, c)| c == '>')
        .map_or(tag.len(), |(i, _)| i + 1)
}

/// Whether start tag `tag` has an `id` attribute.
fn has_id(tag: &str) -> bool {
    unquoted(tag).any(|(i, c)| {
        c.is_whitespace()
            && tag[i + 1..]
                .strip_prefix("id")
                .is_some_and(|v| v.trim_start().starts_with('='))
    })
}

/// `s` inside an XML attribute.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
