//! The executable process model: plain data parsed from BPMN 2.0 XML.
//!
//! Invariant: a [`Process`] that exists is runnable exactly as its diagram reads.
//! Every element the engine cannot execute was refused by [`parse`], every flow
//! points at an existing element, every message catch has a correlation key, and
//! every condition is parsed. The model is immutable once deployed; instances keep
//! the version they started with.

pub mod cron;
pub mod dmn;
pub(crate) mod expr;
pub mod feel;
pub mod iso;
mod kinds;
mod parse;
mod process;
mod timer;
mod vars;

pub use kinds::{
    ActivityKind, CatchKind, ElementKind, GatewayKind, ScopeKind, StartKind, ThrowKind,
};
pub use process::{Process, key_names, key_string};
pub use timer::{TimerDef, TimerField};

pub use vars::{Vars, vars};

pub use expr::{ArithOp, CmpOp, Expr, Lit, eval_bool, eval_value, parse as parse_condition};
pub use parse::{
    Issue, MAX_DEPTH, MAX_SIZE, PARSER_LEVEL, ParseError, Parsed, Unsupported, Warning, parse,
    parse_report,
};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A flow node.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    /// The BPMN id.
    pub id: String,
    /// The name shown in the diagram.
    pub name: Option<String>,
    /// What it does.
    pub kind: ElementKind,
    /// Indices into [`Process::flows`].
    pub incoming: Vec<usize>,
    /// Indices into [`Process::flows`], in document order.
    pub outgoing: Vec<usize>,
    /// `flowable:async="true"` or `camunda:asyncBefore="true"`: a durable job is
    /// created before the element runs.
    pub async_before: bool,
    /// Line in the source file.
    pub line: u32,
    /// Retry policy of the element's jobs, when the model sets one.
    pub retry: Option<Retry>,
    /// Boundary events attached to this element (indices into
    /// [`Process::elements`]).
    pub boundaries: Vec<usize>,
    /// asyncAfter, variable mappings, loops and task headers.
    pub extras: Extras,
}

/// What a model says about an element beyond its kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// `camunda:asyncAfter` / `flowable:asyncAfter`: a durable job between the
    /// element's completion and its outgoing flows.
    pub async_after: bool,
    /// Input mappings (`camunda:inputParameter`, `zeebe:input`): values the
    /// element's job, user task or message sees in addition to the instance's
    /// variables.
    pub inputs: Vec<Mapping>,
    /// Output mappings (`camunda:outputParameter`, `zeebe:output`): when there
    /// are any, only these reach the instance's variables when the element
    /// completes, computed from its inputs and the result (job, task or message
    /// variables); without them the result is merged as it is.
    pub outputs: Vec<Mapping>,
    /// `multiInstanceLoopCharacteristics`: the element runs once per item
    /// (or `loopCardinality` times), in parallel or one after the other.
    pub multi: Option<MultiInstance>,
    /// `zeebe:taskHeaders`: (key, value) pairs a worker's job carries, in
    /// the model's order.
    pub headers: Vec<(String, String)>,
}

/// How a multi-instance activity runs: a body that starts one inner instance
/// per item, each seeing its item in a variable local to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiInstance {
    /// `isSequential`: one inner instance after the other (else all at once).
    pub sequential: bool,
    /// What the inner instances are made of.
    pub over: LoopOver,
    /// The variable local to each inner instance that holds its item
    /// (`elementVariable`, `inputDataItem`, Zeebe `inputElement`).
    pub element_variable: Option<String>,
    /// The variable local to each inner instance that holds its index,
    /// counted from 0 (`elementIndexVariable`; default `loopCounter`).
    pub index_variable: String,
    /// `completionCondition`: evaluated after each inner instance completes,
    /// seeing its variables and `nrOfInstances`, `nrOfCompletedInstances`,
    /// `nrOfActiveInstances` (also as Zeebe names them: `numberOfInstances`,
    /// `numberOfCompletedInstances`, `numberOfActiveInstances`); when it holds,
    /// the remaining inner instances
    /// are cancelled and the activity completes.
    pub completion: Option<Expr>,
    /// Zeebe `outputCollection`: a list with one entry per item, filled in
    /// item order from `output_element`, set in the enclosing scope when the
    /// activity completes.
    pub output_collection: Option<String>,
    /// Zeebe `outputElement`: what each inner instance contributes to the
    /// output collection, evaluated when it completes.
    pub output_element: Option<Expr>,
}

/// What a multi-instance activity iterates over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LoopOver {
    /// A list, evaluated once when the activity starts (`collection`,
    /// `loopDataInputRef`, Zeebe `inputCollection`).
    Collection(Expr),
    /// A number of inner instances (`loopCardinality`).
    Cardinality(Expr),
}

impl Extras {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &Extras::default()
    }
}

/// One variable mapping: `target` gets the value of `source`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// The variable written.
    pub target: String,
    /// Where its value comes from.
    pub source: Source,
}

/// The value of a mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// A variable or a path into one (`order.id`); absent reads as null.
    Variable(String),
    /// A constant, as JSON text.
    Literal(String),
    /// A FEEL expression (Zeebe `source="=…"` beyond a path or a constant),
    /// evaluated when the mapping is applied.
    Feel(feel::Feel),
}

impl Source {
    /// The value against `vars` at `now` (an absent variable or path is
    /// null); `Err` when a FEEL expression cannot be computed.
    pub fn value(
        &self,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<serde_json::Value, String> {
        Ok(match self {
            Source::Variable(path) => {
                if let Some(v) = vars.get(path) {
                    return Ok(v.clone());
                }
                let mut parts = path.split('.');
                let first = parts.next().unwrap_or_default();
                let mut v = vars.get(first);
                for p in parts {
                    v = v.and_then(|v| v.get(p));
                }
                v.cloned().unwrap_or(serde_json::Value::Null)
            }
            Source::Literal(json) => serde_json::from_str(json).unwrap_or(serde_json::Value::Null),
            Source::Feel(f) => f.eval(vars, now)?,
        })
    }

    /// The variables it reads (the engine loads only those).
    pub fn names(&self) -> Vec<&str> {
        match self {
            Source::Variable(path) => vec![path.as_str(), path.split('.').next().unwrap_or(path)],
            Source::Literal(_) => Vec::new(),
            Source::Feel(f) => f.words().collect(),
        }
    }
}

/// Applies `mappings` to `from` at `now`: each target with its source's
/// value; `Err` names the mapping whose FEEL expression failed.
pub fn mapped(
    mappings: &[Mapping],
    from: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<crate::model::Vars, String> {
    mappings
        .iter()
        .map(|m| {
            m.source
                .value(from, now)
                .map(|v| (m.target.clone(), v))
                .map_err(|e| format!("mapping to '{}': {e}", m.target))
        })
        .collect()
}

/// How often a failing job of an element is tried, and how long to wait
/// between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retry {
    /// Attempts in all (the first one included).
    pub attempts: u32,
    /// Fixed delay between attempts; `None` uses the engine's exponential backoff.
    pub delay: Option<crate::clock::Millis>,
}

/// How a decision's result becomes a variable (Camunda 7's
/// `mapDecisionResult`; Zeebe keeps the decision's value as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecisionMapping {
    /// The decision's value as DMN gives it (Zeebe).
    Value,
    /// A list with one context per matched rule (Camunda's default `resultList`).
    ResultList,
    /// The one output of the one matched rule (`singleEntry`).
    SingleEntry,
    /// The one matched rule's outputs as a context (`singleResult`).
    SingleResult,
    /// The one output of each matched rule, as a list (`collectEntries`).
    CollectEntries,
    /// Each output of the first matched rule becomes a variable of its own
    /// (Flowable's decision task).
    Outputs,
}

/// Which variables cross between a call activity and its child: all of
/// them, and/or the mapped ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VarPass {
    /// Every variable, as it is.
    pub all: bool,
    /// Mapped variables (after `all`, so they win).
    pub mappings: Vec<Mapping>,
}

impl VarPass {
    /// The variables that cross, from `from` at `now`; `Err` names the
    /// mapping whose FEEL expression failed.
    pub fn apply(
        &self,
        from: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<crate::model::Vars, String> {
        let mut out = if self.all {
            from.clone()
        } else {
            crate::model::Vars::new()
        };
        out.extend(mapped(&self.mappings, from, now)?);
        Ok(out)
    }
}

/// A user task's attributes as written in the model (Flowable and Camunda 7
/// attributes, Zeebe's `assignmentDefinition`, `formDefinition`,
/// `taskSchedule`, `priorityDefinition`). Each may be a literal or an
/// expression (`${var}`, `#{var}`, `=var`), resolved against the instance's
/// variables when the task is created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserTaskSpec {
    /// The assignee.
    pub assignee: Option<String>,
    /// Candidate users, comma-separated.
    pub candidate_users: Option<String>,
    /// Candidate groups, comma-separated.
    pub candidate_groups: Option<String>,
    /// Due date (ISO 8601).
    pub due_date: Option<String>,
    /// Follow-up date (ISO 8601).
    pub follow_up_date: Option<String>,
    /// Priority.
    pub priority: Option<String>,
    /// Form key (or Zeebe form id).
    pub form_key: Option<String>,
}

impl UserTaskSpec {
    /// Each attribute with its model name.
    pub fn attributes(&self) -> [(&'static str, Option<&str>); 7] {
        [
            ("assignee", self.assignee.as_deref()),
            ("candidateUsers", self.candidate_users.as_deref()),
            ("candidateGroups", self.candidate_groups.as_deref()),
            ("dueDate", self.due_date.as_deref()),
            ("followUpDate", self.follow_up_date.as_deref()),
            ("priority", self.priority.as_deref()),
            ("formKey", self.form_key.as_deref()),
        ]
    }

    /// The value of one attribute for an instance: `${var}`, `#{var}` and
    /// `=var` read the variable or path (a list becomes comma-separated);
    /// text with `${var}` inside (`kermit_${loopCounter}`) has each one
    /// replaced by the variable's value; `=` with more than a path is FEEL,
    /// evaluated at `now`; anything else is a literal. `Ok(None)` when unset
    /// or when a variable it reads is not set; `Err` when a FEEL expression
    /// cannot be computed.
    pub fn resolve(
        raw: Option<&str>,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<Option<String>, String> {
        let Some(raw) = raw.map(str::trim) else {
            return Ok(None);
        };
        if let Some(expr) = feel::body(raw).filter(|e| !is_path(e)) {
            return Ok(listed(&feel::eval_text(expr, vars, now)?).filter(|v| !v.is_empty()));
        }
        Ok(Self::resolve_paths(raw, vars))
    }

    fn resolve_paths(raw: &str, vars: &crate::model::Vars) -> Option<String> {
        let whole = raw
            .strip_prefix("${")
            .or_else(|| raw.strip_prefix("#{"))
            .and_then(|r| r.strip_suffix('}'))
            .filter(|inner| !inner.contains('}'))
            .or_else(|| raw.strip_prefix('='))
            .map(str::trim);
        let text = |path: &str| listed(&Source::Variable(path.to_string()).value(vars, 0).ok()?);
        let value = match whole {
            Some(path) => text(path)?,
            None => {
                // a composite expression: literal text with `${…}` parts
                let mut out = String::new();
                let mut rest = raw;
                while let Some(at) = [rest.find("${"), rest.find("#{")]
                    .into_iter()
                    .flatten()
                    .min()
                {
                    let end = rest[at..].find('}')? + at;
                    out.push_str(&rest[..at]);
                    out.push_str(&text(rest[at + 2..end].trim())?);
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                out
            }
        };
        (!value.is_empty()).then_some(value)
    }
}

/// A value as a user task attribute: a list comma-separated, null none.
fn listed(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .filter_map(key_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        v => key_string(v),
    }
}

/// Whether `s` is a variable path (`order.id`) rather than an expression.
pub fn is_path(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && !s.ends_with('.')
        && !s.contains("..")
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

/// What a script or business-rule task asks its worker to evaluate, or which
/// message a message throw event asks its worker to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Delegated {
    /// A script: its language (`scriptFormat`), text (or Zeebe FEEL
    /// expression), and the variable its result goes to.
    Script {
        /// `scriptFormat` (`groovy`, `javascript`, `feel` …), if given.
        format: Option<String>,
        /// The script text or expression, if given inline.
        text: Option<String>,
        /// The variable the result is stored in, if the model names one.
        result_variable: Option<String>,
    },
    /// A decision: the DMN decision to evaluate and the variable its result
    /// goes to.
    Decision {
        /// The decision's id or key, if the model names one.
        decision: Option<String>,
        /// The variable the result is stored in, if the model names one.
        result_variable: Option<String>,
    },
    /// A message to send (an intermediate or end message throw event): the
    /// worker sends it; postfach records that it was sent when the job completes.
    Message {
        /// The message name (from `messageRef`), if the model names one.
        name: Option<String>,
        /// An end event: the token ends when the message is sent.
        end: bool,
    },
    /// A send task no broker topic is bound to: the worker sends it (mail,
    /// webhook, another broker); the token moves on when the job completes.
    Send {
        /// The message name (from `messageRef`), if the model names one.
        message: Option<String>,
        /// The vendor's `type` (Flowable's `mail`, `camel` …), if given.
        implementation: Option<String>,
    },
}

/// Job topics of send tasks bound to a broker topic start with this.
pub const OUTBOX_TOPIC_PREFIX: &str = "pubsub:";

/// The variable (or path) a call activity reads its process id from, when
/// its `process` is one (`=PATH`); `None` for a process id.
pub fn called_process_variable(process: &str) -> Option<&str> {
    process.strip_prefix('=')
}

/// The key under which a deploy-time binding of send task `element` to a topic
/// travels in the override map (beside message name → key variable).
pub fn send_topic_override(element: &str) -> String {
    format!("sendTask:{element}")
}

/// The value at `path` (`name` or `a.b.c`) of `vars`.
pub fn path_value<'v>(path: &str, vars: &'v crate::model::Vars) -> Option<&'v serde_json::Value> {
    let mut parts = path.split('.');
    let mut value = vars.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some(value)
}

/// What triggers a boundary event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Trigger {
    /// A timer started when the token enters the activity.
    Timer(TimerDef),
    /// A BPMN error thrown by the task's worker; `None` catches every code.
    Error {
        /// The error code caught (every code when `None`).
        code: Option<String>,
    },
    /// A signal broadcast while the token is in the activity (appended last:
    /// definitions stored before it still decode).
    Signal {
        /// The signal name.
        signal: String,
    },
    /// A message correlated by its key while the token is in the activity:
    /// subscribed when the activity is entered, unsubscribed when it is left
    /// (appended last: definitions stored before it still decode).
    Message {
        /// The message name.
        message: String,
    },
    /// An escalation thrown inside the subprocess it is attached to; `None`
    /// catches every code (appended last).
    Escalation {
        /// The escalation code caught (every code when `None`).
        code: Option<String>,
    },
    /// A condition over the variables: asked when the activity or scope
    /// begins and after every command that changed the instance's
    /// variables; it fires when it holds (appended last).
    Condition {
        /// The condition (a failed evaluation counts as not holding).
        condition: Expr,
    },
    /// Compensation: a boundary event that never fires as a token; when the
    /// activity it is attached to has completed and compensation is thrown
    /// for it, `handler` (its `isForCompensation` activity, joined by an
    /// association) runs. On the start event of a compensation event
    /// subprocess, `handler` is the event subprocess itself (appended last).
    Compensation {
        /// The compensation handler (index into [`Process::elements`]).
        handler: usize,
    },
    /// A transaction's cancel boundary event: fired by a cancel end event
    /// inside the transaction once its compensation has run (appended last).
    Cancel,
}

impl Trigger {
    /// Whether this boundary trigger catches BPMN error `code`.
    pub fn catches_error(&self, code: &str) -> bool {
        matches!(self, Trigger::Error { code: c } if c.as_deref().is_none_or(|c| c == code))
    }

    /// Whether this boundary trigger catches escalation `code` (`None`: the
    /// throw names none, caught only by a catch-all).
    pub fn catches_escalation(&self, code: Option<&str>) -> bool {
        matches!(self, Trigger::Escalation { code: c } if c.is_none() || c.as_deref() == code)
    }
}

/// A sequence flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// The BPMN id (generated when the file gives none).
    pub id: String,
    /// Where it starts (index into [`Process::elements`]).
    pub source: usize,
    /// Where it leads.
    pub target: usize,
    /// Its condition, if any (on flows out of an exclusive gateway).
    pub condition: Option<Expr>,
}

#[cfg(test)]
mod tests;
