//! BPMN 2.0 XML → [`Process`], with quick-xml.
//!
//! Invariant: no input makes this module panic. Input size and nesting depth are
//! capped, malformed XML is reported with line and column, and every element the
//! engine cannot execute is reported at once, each with id, type and line.

//!
//! The parser is split by element family, in the manner of Zeebe's
//! transformers: [`xml`] reads the tree, [`context`] holds the file's
//! definitions and what a process's parse collects, [`process`] dispatches
//! each node to its family ([`events`], [`tasks`], [`gateways`], [`scopes`])
//! and resolves what needs every element's index ([`flows`], links,
//! boundary hosts, defaults, [`compensation`] handlers and transactions);
//! [`data`] reads mappings and [`vendor`] names
//! what a model's vendor extensions say that does not run as written.

mod compensation;
mod context;
mod data;
pub(crate) mod dmn;
mod events;
mod flows;
mod gateways;
mod process;
mod scopes;
mod tasks;
mod vendor;
mod xml;

use super::{ActivityKind, ElementKind, Process};
use context::{Cx, Defs};
/// Whether an element of this kind is an activity (a task, subprocess, call
/// activity or wait state), as multi-instance and ad-hoc subprocesses ask.
pub(crate) use scopes::runs_multi_instance as runs_as_activity;
use std::collections::BTreeMap;
use xml::Node;

/// The level of what this parser makes of a file. A stored process version
/// is its source, parsed again whenever it is loaded: a change to the model a
/// given file parses into (a kind, a default, a mapping) must raise this level
/// and keep the reading of the lower levels for sources deployed at them, so a
/// deployed version keeps its meaning. A source of a higher level than this
/// build's is refused when it is loaded.
pub const PARSER_LEVEL: u32 = 1;

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
    /// The root element is not DMN's `<definitions>` (a decision file).
    #[error("{file}: the root element is <{found}>, expected <definitions> of DMN 1.1 to 1.5")]
    NotDmn {
        /// The file.
        file: String,
        /// The root element found.
        found: String,
    },
    /// DecisionToolkit refuses the decision file (a schema or model rule of
    /// DMN, a decision it cannot build).
    #[error("{file}: {message}")]
    Dmn {
        /// The file.
        file: String,
        /// What was refused, as DecisionToolkit says it.
        message: String,
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

/// What the deploy options say that this file does not use: a correlation
/// key given at deploy time for a message no process of this file catches or
/// starts is not used (said, not silently ignored); a topic binding must
/// name a send task of this file.
fn unused_overrides(
    key_overrides: &BTreeMap<String, String>,
    out: &[Process],
    warnings: &mut Vec<Warning>,
    issues: &mut Vec<Issue>,
) {
    for (message, variable) in key_overrides {
        if let Some(element) = message.strip_prefix("sendTask:") {
            let bound = out.iter().any(|p| {
                p.elements.iter().any(|e| {
                    e.id == element
                        && matches!(e.kind, ElementKind::Activity(ActivityKind::Publish { .. }))
                })
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
            continue;
        }
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
    let mut root = xml::build_tree(file, xml)?;
    let named = xml::name_anonymous_flow_nodes(&mut root);
    if root.name != "definitions" {
        return Err(ParseError::NotBpmn {
            file: file.into(),
            found: root.name.clone(),
        });
    }
    let defs = Defs::of(&root, xml);
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
        let mut cx = Cx::new(&defs, key_overrides, &mut unsupported, &mut issues);
        if let Some(proc) = process::process(p, &mut cx) {
            vendor::not_run_as_written(p, &proc, &mut warnings);
            out.push(proc);
        }
    }
    unused_overrides(key_overrides, &out, &mut warnings, &mut issues);
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
