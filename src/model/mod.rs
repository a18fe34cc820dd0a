//! The executable process model: plain data parsed from BPMN 2.0 XML.
//!
//! Invariant: a [`Process`] that exists is runnable exactly as its diagram reads.
//! Every element the engine cannot execute was refused by [`parse`], every flow
//! points at an existing element, every message catch has a correlation key, and
//! every condition is parsed. The model is immutable once deployed; instances keep
//! the version they started with.

pub mod cron;
pub(crate) mod expr;
pub mod iso;
mod parse;

pub use expr::{ArithOp, CmpOp, Expr, Lit, eval_bool, eval_value, parse as parse_condition};
pub use parse::{
    Issue, MAX_DEPTH, MAX_SIZE, ParseError, Parsed, Unsupported, Warning, parse, parse_report,
};

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// One executable process of a BPMN file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Process {
    /// The BPMN process id (the definition key).
    pub id: String,
    /// The process name, if the model gives one.
    pub name: Option<String>,
    /// The flow nodes, in document order.
    pub elements: Vec<Element>,
    /// The sequence flows, in document order.
    pub flows: Vec<Flow>,
    /// Correlation key variable per message name caught in this process, and
    /// per start message that has a key (the started instance gets that variable).
    pub correlation_keys: BTreeMap<String, String>,
    #[serde(skip)]
    index: HashMap<String, usize>,
    /// Per element: message names waited for there or anywhere downstream
    /// (sorted; elements of one cycle, and a chain without catch points, share one set).
    #[serde(skip)]
    reach: Vec<std::sync::Arc<[String]>>,
    /// Per element: the embedded subprocess it is directly inside, if any.
    #[serde(skip)]
    parent: Vec<Option<usize>>,
    /// Per subprocess: message names its boundary events (and what follows
    /// them) wait for; empty for every other element.
    #[serde(skip)]
    boundary_reach: Vec<std::sync::Arc<[String]>>,
    /// The event subprocesses of the process level.
    #[serde(skip)]
    event_subprocesses: Vec<usize>,
}

/// A flow node.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Boundary events attached to this element (indices into [`Process::elements`]).
    pub boundaries: Vec<usize>,
    /// asyncAfter and variable mappings. Not part of the stored definition
    /// record (whose layout is the format of version 1): the store keeps them
    /// beside it and fills them in when it reads the definition.
    #[serde(skip)]
    pub extras: Extras,
}

/// What a model says about an element beyond its kind: kept by the store beside
/// the definition record, so definitions stored before these existed read as
/// "none".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Stored in the tail of the extras record (see `store::extras_of`).
    #[serde(skip)]
    pub multi: Option<MultiInstance>,
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
    /// `nrOfActiveInstances`; when it holds, the remaining inner instances
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
}

impl Source {
    /// The value against `vars` (an absent variable or path is null).
    pub fn value(&self, vars: &crate::Vars) -> serde_json::Value {
        match self {
            Source::Variable(path) => {
                if let Some(v) = vars.get(path) {
                    return v.clone();
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
        }
    }
}

/// Applies `mappings` to `from`: each target with its source's value.
pub fn mapped(mappings: &[Mapping], from: &crate::Vars) -> crate::Vars {
    mappings
        .iter()
        .map(|m| (m.target.clone(), m.source.value(from)))
        .collect()
}

/// How often a failing job of an element is tried, and how long to wait between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retry {
    /// Attempts in all (the first one included).
    pub attempts: u32,
    /// Fixed delay between attempts; `None` uses the engine's exponential backoff.
    pub delay: Option<crate::clock::Millis>,
}

/// What a flow node does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ElementKind {
    /// A start event without trigger: `start` begins here.
    NoneStart,
    /// A message start event: a message of this name starts an instance.
    MessageStart {
        /// The message name.
        message: String,
    },
    /// Intermediate timer catch event.
    TimerCatch {
        /// When it fires.
        timer: TimerDef,
    },
    /// Event-based gateway: the first of its target events to happen wins.
    EventGateway,
    /// A boundary event on a task (`host` indexes [`Process::elements`]).
    Boundary {
        /// The activity it is attached to.
        host: usize,
        /// Interrupting (`cancelActivity`, the default) or not.
        cancel: bool,
        /// What triggers it.
        trigger: Trigger,
    },
    /// An end event: the token ends here.
    End,
    /// Takes the first outgoing flow whose condition holds, else the default.
    ExclusiveGateway {
        /// The default flow (index into [`Process::flows`]).
        default: Option<usize>,
    },
    /// Forks to every outgoing flow; joins all incoming ones.
    ParallelGateway,
    /// A send task of a definition stored before unbound send tasks became
    /// jobs ([`Delegated::Send`]): it passes through, as it did when that
    /// version was deployed (a stored version keeps its meaning). The parser no
    /// longer produces it.
    SendTask,
    /// Waits as a job on `topic` until a handler or worker completes it.
    ServiceTask {
        /// The topic workers fetch its jobs by.
        topic: String,
    },
    /// Waits for a message, like a message catch event.
    ReceiveTask {
        /// The message name.
        message: String,
    },
    /// Intermediate message catch event.
    MessageCatch {
        /// The message name.
        message: String,
    },
    /// Intermediate signal catch event: waits for a broadcast.
    SignalCatch {
        /// The signal name.
        signal: String,
    },
    /// Intermediate signal throw event: broadcasts and moves on.
    SignalThrow {
        /// The signal name.
        signal: String,
    },
    /// An intermediate throw event without definition: a pass-through.
    NoneThrow,
    /// A send task bound to a broker topic: an outbox job on
    /// `pubsub:TOPIC` that completes when the broker confirmed the publish.
    /// (Stored definitions encode variants by position: new ones go last.)
    Publish {
        /// The job topic (`pubsub:` and the broker topic).
        topic: String,
    },
    /// A plain `task` or a `manualTask`: no behaviour in the engine, the token
    /// passes through (BPMN: work done outside any system).
    Task {
        /// A `manualTask` (else a plain `task`).
        manual: bool,
    },
    /// A `scriptTask` or `businessRuleTask`: postfach evaluates no script
    /// language and no DMN itself, so it waits as a job on `topic`, like a
    /// service task, and the job carries what to evaluate.
    Delegated {
        /// The topic workers fetch its jobs by.
        topic: String,
        /// What the worker is asked to evaluate.
        work: Delegated,
    },
    /// A timer start event: the deployed version's schedule starts instances.
    TimerStart {
        /// When it fires.
        timer: TimerDef,
    },
    /// A user task: a wait state with a task record in the task list, done by
    /// a person through `claim` and `complete`.
    UserTask {
        /// Who may or should do it, as the model writes it.
        spec: UserTaskSpec,
    },
    /// Inclusive gateway: forks on every flow whose condition holds (the
    /// default flow when none does); as a join it waits until no other token
    /// of the instance can still reach it.
    InclusiveGateway {
        /// The default flow (index into [`Process::flows`]).
        default: Option<usize>,
    },
    /// A terminate end event: ends its scope at once (the instance, or the
    /// embedded subprocess it is in), withdrawing every other token of that
    /// scope with its waits, jobs, timers and user tasks.
    TerminateEnd,
    /// An embedded subprocess: a scope. The token that enters it rests here
    /// (holding the boundary events) while tokens inside run from `start`; it
    /// completes when the last token inside has ended.
    SubProcess {
        /// Its none start event (index into [`Process::elements`]).
        start: usize,
        /// The flow nodes directly inside it (indices), nested scopes' own
        /// elements not included.
        children: Vec<usize>,
    },
    /// An error end event: throws BPMN error `code` to the error boundary
    /// events of the subprocesses around it (innermost first); the scope that
    /// catches it is cancelled. Uncaught, it is an incident.
    ErrorEnd {
        /// The error code (from the `<error>` its `errorRef` names).
        code: Option<String>,
    },
    /// An escalation end or intermediate throw event: escalates `code` to the
    /// escalation boundary events of the subprocesses around it. An
    /// interrupting catcher cancels its scope; otherwise (and when nothing
    /// catches it) the token goes on (throw) or ends (end event).
    Escalation {
        /// The escalation code (from the `<escalation>` its `escalationRef` names).
        code: Option<String>,
        /// An end event (else an intermediate throw event).
        end: bool,
    },
    /// An event subprocess (`triggeredByEvent="true"`) of the process or of
    /// the subprocess it is in: while that scope is active, `trigger` (a
    /// message, timer or signal; or an error or escalation thrown inside the
    /// scope) starts it at `start`. An interrupting one first cancels
    /// everything else in the scope; a non-interrupting one runs beside it,
    /// once per event. It has no sequence flows.
    EventSubProcess {
        /// Its start event (index into [`Process::elements`]); the trigger is
        /// kept here, the start event itself is a plain start.
        start: usize,
        /// The flow nodes directly inside it (indices).
        children: Vec<usize>,
        /// What starts it.
        trigger: Trigger,
        /// `isInterrupting` of its start event (default true).
        interrupting: bool,
    },
    /// A call activity: starts an instance of `process` (a child) and waits
    /// until it ends; cancelling the call activity cancels the child.
    CallActivity {
        /// The called process id.
        process: String,
        /// The version called; `None`: the latest deployed when it is called.
        version: Option<u32>,
        /// The variables the child starts with.
        inputs: VarPass,
        /// The child's variables that come back when it completes.
        outputs: VarPass,
    },
    /// A link event: a throw continues at the catch of the same name in
    /// the same scope (an off-page connector). The parser joins each throw
    /// to its catch with a flow, so both pass the token through.
    Link {
        /// The link's name.
        name: String,
        /// The catch event (else the throw event).
        catch: bool,
    },
    /// Intermediate conditional catch event: the token passes when its
    /// condition holds — at once, or after a command that changed the
    /// instance's variables.
    ConditionalCatch {
        /// The condition (a failed evaluation counts as not holding).
        condition: Expr,
    },
    /// A signal start event: a broadcast of this signal starts an instance
    /// of the latest version (on partition 0 of a cluster).
    SignalStart {
        /// The signal name.
        signal: String,
    },
    /// A receive task or intermediate catch event without an event
    /// definition: a wait state — the token rests until a caller triggers it
    /// (Flowable's `trigger`, Camunda 7's `signal`). (Stored in definitions:
    /// new variants go last.)
    WaitState,
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
    /// The variables that cross, from `from`.
    pub fn apply(&self, from: &crate::Vars) -> crate::Vars {
        let mut out = if self.all {
            from.clone()
        } else {
            crate::Vars::new()
        };
        out.extend(mapped(&self.mappings, from));
        out
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
    /// The value of one attribute for an instance: `${var}`, `#{var}` and
    /// `=var` read the variable or path (a list becomes comma-separated);
    /// text with `${var}` inside (`kermit_${loopCounter}`) has each one
    /// replaced by the variable's value; anything else is a literal. `None`
    /// when unset or when a variable it reads is not set.
    pub fn resolve(raw: Option<&str>, vars: &crate::Vars) -> Option<String> {
        let raw = raw?.trim();
        let whole = raw
            .strip_prefix("${")
            .or_else(|| raw.strip_prefix("#{"))
            .and_then(|r| r.strip_suffix('}'))
            .filter(|inner| !inner.contains('}'))
            .or_else(|| raw.strip_prefix('='))
            .map(str::trim);
        let text = |path: &str| match Source::Variable(path.to_string()).value(vars) {
            serde_json::Value::Null => None,
            serde_json::Value::Array(items) => Some(
                items
                    .iter()
                    .filter_map(key_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            v => key_string(&v),
        };
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
    /// A decision: the DMN decision to evaluate and the variable its result goes to.
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

/// The key under which a deploy-time binding of send task `element` to a topic
/// travels in the override map (beside message name → key variable).
pub fn send_topic_override(element: &str) -> String {
    format!("sendTask:{element}")
}

impl ElementKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            ElementKind::NoneStart => "startEvent",
            ElementKind::WaitState => {
                "wait state (receiveTask or intermediateCatchEvent without a definition)"
            }
            ElementKind::TimerCatch { .. } => "intermediateCatchEvent(timer)",
            ElementKind::EventGateway => "eventBasedGateway",
            ElementKind::Boundary { .. } => "boundaryEvent",
            ElementKind::MessageStart { .. } => "messageStartEvent",
            ElementKind::SignalStart { .. } => "signalStartEvent",
            ElementKind::End => "endEvent",
            ElementKind::ExclusiveGateway { .. } => "exclusiveGateway",
            ElementKind::ParallelGateway => "parallelGateway",
            ElementKind::SendTask => "sendTask",
            ElementKind::ServiceTask { .. } => "serviceTask",
            ElementKind::ReceiveTask { .. } => "receiveTask",
            ElementKind::MessageCatch { .. } => "intermediateCatchEvent(message)",
            ElementKind::SignalCatch { .. } => "intermediateCatchEvent(signal)",
            ElementKind::SignalThrow { .. } => "intermediateThrowEvent(signal)",
            ElementKind::NoneThrow => "intermediateThrowEvent",
            ElementKind::Publish { .. } => "sendTask",
            ElementKind::Task { manual: false } => "task",
            ElementKind::Task { manual: true } => "manualTask",
            ElementKind::Delegated {
                work: Delegated::Script { .. },
                ..
            } => "scriptTask",
            ElementKind::Delegated {
                work: Delegated::Decision { .. },
                ..
            } => "businessRuleTask",
            ElementKind::Delegated {
                work: Delegated::Message { end: false, .. },
                ..
            } => "intermediateThrowEvent(message)",
            ElementKind::Delegated {
                work: Delegated::Message { end: true, .. },
                ..
            } => "endEvent(message)",
            ElementKind::Delegated {
                work: Delegated::Send { .. },
                ..
            } => "sendTask",
            ElementKind::TimerStart { .. } => "startEvent(timer)",
            ElementKind::UserTask { .. } => "userTask",
            ElementKind::InclusiveGateway { .. } => "inclusiveGateway",
            ElementKind::TerminateEnd => "endEvent(terminate)",
            ElementKind::SubProcess { .. } => "subProcess",
            ElementKind::EventSubProcess { .. } => "subProcess(event)",
            ElementKind::CallActivity { .. } => "callActivity",
            ElementKind::ErrorEnd { .. } => "endEvent(error)",
            ElementKind::Escalation { end: true, .. } => "endEvent(escalation)",
            ElementKind::Escalation { end: false, .. } => "intermediateThrowEvent(escalation)",
            ElementKind::Link { catch: true, .. } => "intermediateCatchEvent(link)",
            ElementKind::Link { catch: false, .. } => "intermediateThrowEvent(link)",
            ElementKind::ConditionalCatch { .. } => "intermediateCatchEvent(conditional)",
        }
    }

    /// The message this element waits for, if it is a message wait state.
    pub fn waits_for_message(&self) -> Option<&str> {
        match self {
            ElementKind::ReceiveTask { message }
            | ElementKind::MessageCatch { message }
            | ElementKind::Boundary {
                trigger: Trigger::Message { message },
                ..
            }
            | ElementKind::EventSubProcess {
                trigger: Trigger::Message { message },
                ..
            } => Some(message),
            _ => None,
        }
    }
}

/// When a timer fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerDef {
    /// `timeDuration`: this long after the timer starts.
    Duration(crate::clock::Millis),
    /// `timeDate`: at this instant (at once if it is past).
    Date(crate::clock::Millis),
    /// `timeCycle` `R[n]/duration`: every `every`, `repetitions` times (unbounded if `None`).
    Cycle {
        /// How often (unbounded when `None`).
        repetitions: Option<u32>,
        /// The period.
        every: crate::clock::Millis,
    },
    /// `timeCycle` as a cron expression (UTC), without end (see [`cron`]).
    Cron {
        /// The expression as the model writes it.
        expression: String,
        /// Weekdays count 1 = Sunday … 7 = Saturday (Quartz, Camunda 7 and
        /// Flowable) instead of 0/7 = Sunday (Spring, Zeebe).
        quartz_weekdays: bool,
    },
}

impl TimerDef {
    /// The first due time of a timer started at `now`. A cron expression whose
    /// dates have all passed is due at the last representable instant: its job
    /// stays visible instead of firing.
    pub fn first_due(&self, now: crate::clock::Millis) -> crate::clock::Millis {
        match self {
            TimerDef::Duration(d) => now.saturating_add(*d),
            TimerDef::Date(t) => (*t).max(now),
            TimerDef::Cycle { every, .. } => now.saturating_add(*every),
            TimerDef::Cron {
                expression,
                quartz_weekdays,
            } => cron::next_after(expression, *quartz_weekdays, now)
                .unwrap_or(crate::limits::MAX_INSTANT),
        }
    }

    /// How often it fires in all (unbounded when `None`).
    pub fn repetitions(&self) -> Option<u32> {
        match self {
            TimerDef::Duration(_) | TimerDef::Date(_) => Some(1),
            TimerDef::Cycle { repetitions, .. } => *repetitions,
            TimerDef::Cron { .. } => None,
        }
    }

    /// After a fire that was due at `due` and happened at `now`: the next due
    /// time of a cycle, the first one still ahead of `now` (due times missed
    /// while nothing ran are not made up). `None` for a one-shot timer or a
    /// cron expression with no later date.
    pub fn next_due(
        &self,
        due: crate::clock::Millis,
        now: crate::clock::Millis,
    ) -> Option<crate::clock::Millis> {
        match self {
            TimerDef::Duration(_) | TimerDef::Date(_) => None,
            TimerDef::Cycle { every: 0, .. } => None,
            TimerDef::Cycle { every, .. } => {
                let mut next = due.saturating_add(*every);
                if next <= now {
                    let missed = (now - next) / every + 1;
                    next = next.saturating_add(missed.saturating_mul(*every));
                }
                Some(next)
            }
            TimerDef::Cron {
                expression,
                quartz_weekdays,
            } => cron::next_after(expression, *quartz_weekdays, due.max(now)),
        }
    }
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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

impl Process {
    pub(crate) fn new(
        id: String,
        name: Option<String>,
        elements: Vec<Element>,
        flows: Vec<Flow>,
        correlation_keys: BTreeMap<String, String>,
    ) -> Self {
        let mut p = Self {
            id,
            name,
            elements,
            flows,
            correlation_keys,
            index: HashMap::new(),
            reach: Vec::new(),
            parent: Vec::new(),
            boundary_reach: Vec::new(),
            event_subprocesses: Vec::new(),
        };
        p.build_index();
        p
    }

    /// Rebuilds the derived indexes; call after deserialising.
    pub fn build_index(&mut self) {
        self.index = self
            .elements
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        let n = self.elements.len();
        self.parent = vec![None; n];
        for (i, e) in self.elements.iter().enumerate() {
            if let ElementKind::SubProcess { children, .. }
            | ElementKind::EventSubProcess { children, .. } = &e.kind
            {
                for &c in children.iter().filter(|&&c| c < n && c != i) {
                    self.parent[c] = Some(i);
                }
            }
        }
        self.event_subprocesses = (0..n)
            .filter(|&i| {
                matches!(self.elements[i].kind, ElementKind::EventSubProcess { .. })
                    && self.parent[i].is_none()
            })
            .collect();
        self.reach = self.reach_sets();
        self.boundary_reach = (0..n)
            .map(|i| {
                let e = &self.elements[i];
                if !matches!(e.kind, ElementKind::SubProcess { .. }) || e.boundaries.is_empty() {
                    return std::sync::Arc::from(Vec::new());
                }
                let mut all: Vec<String> = e
                    .boundaries
                    .iter()
                    .filter_map(|&b| self.reach.get(b))
                    .flat_map(|s| s.iter().cloned())
                    .collect();
                all.sort();
                all.dedup();
                std::sync::Arc::from(all)
            })
            .collect();
    }

    /// Where a token at element `v` can go next: along its outgoing flows, to
    /// the boundary events of the activity, into a subprocess (its start), and,
    /// for an element inside a subprocess that ends its token (no outgoing
    /// flows), to what follows the subprocess once its scope completes.
    fn successors(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.elements.len();
        let el = &self.elements[v];
        // into a subprocess at its start, and to its event subprocesses
        // (listening from the moment it is entered)
        let (start, inner): (Option<usize>, &[usize]) = match &el.kind {
            ElementKind::SubProcess { start, children } => (Some(*start), children),
            ElementKind::EventSubProcess { start, .. } => (Some(*start), &[]),
            _ => (None, &[]),
        };
        let listeners = inner.iter().copied().filter(move |&c| {
            matches!(
                self.elements.get(c).map(|e| &e.kind),
                Some(ElementKind::EventSubProcess { .. })
            )
        });
        // the first enclosing subprocess that has outgoing flows
        let mut exit = None;
        if el.outgoing.is_empty() {
            let mut at = self.parent.get(v).copied().flatten();
            let mut hops = 0;
            while let Some(sp) = at {
                if !self.elements[sp].outgoing.is_empty() {
                    exit = Some(sp);
                    break;
                }
                at = self.parent.get(sp).copied().flatten();
                hops += 1;
                if hops > n {
                    break;
                }
            }
        }
        let flows_of = move |e: usize| {
            self.elements[e]
                .outgoing
                .iter()
                .filter_map(|&f| self.flows.get(f).map(|fl| fl.target))
        };
        flows_of(v)
            .chain(el.boundaries.iter().copied())
            .chain(start)
            .chain(listeners)
            .chain(exit.into_iter().flat_map(flows_of))
            .filter(move |&t| t < n)
    }

    /// The embedded subprocess element `idx` is directly inside, if any.
    pub fn parent_of(&self, idx: usize) -> Option<usize> {
        self.parent.get(idx).copied().flatten()
    }

    /// The event subprocesses of a scope: of the process (`None`), or directly
    /// inside subprocess or event subprocess `container`.
    pub fn event_subprocesses_of(&self, container: Option<usize>) -> Vec<usize> {
        let Some(c) = container else {
            return self.event_subprocesses.clone();
        };
        match self.elements.get(c).map(|e| &e.kind) {
            Some(
                ElementKind::SubProcess { children, .. }
                | ElementKind::EventSubProcess { children, .. },
            ) => children
                .iter()
                .copied()
                .filter(|&i| {
                    matches!(
                        self.elements.get(i).map(|e| &e.kind),
                        Some(ElementKind::EventSubProcess { .. })
                    )
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Message names waited for at or downstream of each element, in time linear
    /// in the graph (times the message names per set): the strongly connected
    /// components (Tarjan, iteratively, so a chain of 100,000 elements does not
    /// overflow the stack) come out successors first, and each component's set
    /// is its own catch points joined with its successors' sets.
    fn reach_sets(&self) -> Vec<std::sync::Arc<[String]>> {
        use std::sync::Arc;
        const UNSEEN: usize = usize::MAX;
        let n = self.elements.len();
        // a token in an activity may leave by its boundary events: they are
        // successors of their host here (see `successors`)
        let targets = |v: usize| self.successors(v);
        let (mut order, mut low) = (vec![UNSEEN; n], vec![0usize; n]);
        let (mut on_stack, mut comp) = (vec![false; n], vec![UNSEEN; n]);
        let mut stack: Vec<usize> = Vec::new();
        let mut sets: Vec<Arc<[String]>> = Vec::new();
        let empty: Arc<[String]> = Arc::from(Vec::new());
        let mut next = 0usize;
        // (element, how many of its outgoing flows were followed)
        let mut calls: Vec<(usize, usize)> = Vec::new();
        for root in 0..n {
            if order[root] != UNSEEN {
                continue;
            }
            order[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            calls.push((root, 0));
            while let Some(&(v, followed)) = calls.last() {
                if let Some(w) = targets(v).nth(followed) {
                    if let Some(top) = calls.last_mut() {
                        top.1 += 1;
                    }
                    if order[w] == UNSEEN {
                        order[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        calls.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(order[w]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(u, _)) = calls.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] != order[v] {
                    continue;
                }
                let c = sets.len();
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = c;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                let own: Vec<&str> = members
                    .iter()
                    .filter_map(|&w| self.elements[w].kind.waits_for_message())
                    .collect();
                let mut later: Vec<&Arc<[String]>> = Vec::new();
                for &w in &members {
                    for t in targets(w) {
                        let d = comp[t];
                        if d != c && d != UNSEEN && !later.iter().any(|s| Arc::ptr_eq(s, &sets[d]))
                        {
                            later.push(&sets[d]);
                        }
                    }
                }
                let set = match (own.is_empty(), later.as_slice()) {
                    (true, []) => empty.clone(),
                    (true, [only]) => Arc::clone(only),
                    _ => {
                        let mut all: Vec<String> = own.iter().map(|m| m.to_string()).collect();
                        all.extend(later.iter().flat_map(|s| s.iter().cloned()));
                        all.sort();
                        all.dedup();
                        Arc::from(all)
                    }
                };
                sets.push(set);
            }
        }
        comp.into_iter()
            .map(|c| sets.get(c).cloned().unwrap_or_else(|| empty.clone()))
            .collect()
    }

    /// Message names a token at element `idx` may still wait for: there, at
    /// the boundary events of the activity, or downstream of either (inside
    /// a subprocess, and after it once it completes).
    pub fn messages_reachable_from(&self, idx: usize) -> &[String] {
        self.reach.get(idx).map(|s| &s[..]).unwrap_or(&[])
    }

    /// Message names the token holding the scope of subprocess `idx` may
    /// still wait for: at its boundary events and after them. (What is
    /// inside, and after its completion, the tokens inside contribute.)
    pub fn messages_reachable_from_scope(&self, idx: usize) -> &[String] {
        self.boundary_reach.get(idx).map(|s| &s[..]).unwrap_or(&[])
    }

    /// The element with this id.
    pub fn element(&self, id: &str) -> Option<&Element> {
        self.index.get(id).map(|&i| &self.elements[i])
    }

    /// The element at an index.
    pub fn at(&self, idx: usize) -> &Element {
        &self.elements[idx]
    }

    /// The index of the element with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The none start event the instance begins at, if there is one (a
    /// subprocess's own start event is not one).
    pub fn none_start(&self) -> Option<&Element> {
        self.elements
            .iter()
            .enumerate()
            .find(|(i, e)| e.kind == ElementKind::NoneStart && self.parent_of(*i).is_none())
            .map(|(_, e)| e)
    }

    /// The message start event for `message`, if there is one.
    pub fn message_start(&self, message: &str) -> Option<&Element> {
        self.elements
            .iter()
            .find(|e| matches!(&e.kind, ElementKind::MessageStart { message: m } if m == message))
    }

    /// The correlation key of `message` in `vars`: the value of its key
    /// variable as a string, or `Err(variable)` when that variable is not set.
    pub fn correlation_key<'p>(
        &'p self,
        message: &str,
        vars: &crate::Vars,
    ) -> Result<String, &'p str> {
        let var = self
            .correlation_keys
            .get(message)
            .map(String::as_str)
            .unwrap_or("");
        key_of(var, vars).ok_or(var)
    }

    /// Every (message, key) that `vars` hold a correlation key for.
    pub fn correlation_pairs<'p>(
        &'p self,
        vars: &'p crate::Vars,
    ) -> impl Iterator<Item = (&'p str, String)> + 'p {
        self.correlation_keys
            .iter()
            .filter_map(|(m, var)| Some((m.as_str(), key_of(var, vars)?)))
    }

    /// Message names this process knows a correlation key for: those it waits
    /// for at catch events and receive tasks, and keyed start messages.
    pub fn keyed_messages(&self) -> impl Iterator<Item = &str> {
        self.correlation_keys.keys().map(String::as_str)
    }

    /// The ids of the elements that catch or start on `message` (catch
    /// events, receive tasks, boundary events, event subprocesses, message
    /// start events), in document order.
    pub fn message_catchers(&self, message: &str) -> Vec<&str> {
        self.elements
            .iter()
            .filter(|e| match &e.kind {
                ElementKind::MessageStart { message: m } => m == message,
                ElementKind::Boundary {
                    trigger: Trigger::Message { message: m },
                    ..
                }
                | ElementKind::EventSubProcess {
                    trigger: Trigger::Message { message: m },
                    ..
                } => m == message,
                kind => kind.waits_for_message() == Some(message),
            })
            .map(|e| e.id.as_str())
            .collect()
    }

    /// Timer start events: (element index, when it fires).
    pub fn timer_starts(&self) -> impl Iterator<Item = (usize, &TimerDef)> + '_ {
        self.elements
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.kind {
                ElementKind::TimerStart { timer } => Some((i, timer)),
                _ => None,
            })
    }

    /// How many event subprocesses the process has (at every level): a bound
    /// on the listeners one scope can hold.
    pub fn event_subprocess_count(&self) -> usize {
        self.elements
            .iter()
            .filter(|e| matches!(e.kind, ElementKind::EventSubProcess { .. }))
            .count()
    }

    /// Whether the process has a conditional event (catch, boundary or event
    /// subprocess): only then are its tokens asked after variables change.
    pub fn has_conditions(&self) -> bool {
        self.elements.iter().any(|e| {
            matches!(
                e.kind,
                ElementKind::ConditionalCatch { .. }
                    | ElementKind::Boundary {
                        trigger: Trigger::Condition { .. },
                        ..
                    }
                    | ElementKind::EventSubProcess {
                        trigger: Trigger::Condition { .. },
                        ..
                    }
            )
        })
    }

    /// Whether the process has an inclusive gateway that joins (more than
    /// one incoming flow): only then must every token be asked whether it
    /// still can reach one.
    pub fn has_inclusive_join(&self) -> bool {
        self.elements
            .iter()
            .any(|e| matches!(e.kind, ElementKind::InclusiveGateway { .. }) && e.incoming.len() > 1)
    }

    /// Whether a token at element `from` can still get to element `to` along
    /// sequence flows (or through the boundary events of the activity it is in).
    pub fn can_reach(&self, from: usize, to: usize) -> bool {
        let mut seen = vec![false; self.elements.len()];
        let mut stack = vec![from];
        while let Some(e) = stack.pop() {
            if e == to {
                return true;
            }
            if std::mem::replace(&mut seen[e], true) {
                continue;
            }
            stack.extend(self.successors(e));
        }
        false
    }

    /// Message names that start this process.
    pub fn start_messages(&self) -> impl Iterator<Item = &str> {
        self.elements.iter().filter_map(|e| match &e.kind {
            ElementKind::MessageStart { message } => Some(message.as_str()),
            _ => None,
        })
    }
}

/// The key a correlation key definition gives for `vars`: a variable, a
/// variable path (`order.id`), or a literal kept quoted (`'A-1'`, from Zeebe's
/// `correlationKey="A-1"`).
fn key_of(spec: &str, vars: &crate::Vars) -> Option<String> {
    if let Some(lit) = spec
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .filter(|_| spec.len() >= 2)
    {
        return Some(lit.to_string());
    }
    if let Some(v) = vars.get(spec) {
        return key_string(v);
    }
    let mut parts = spec.split('.');
    let mut v = vars.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    key_string(v)
}

/// The string form of a correlation key value (`null` is no key).
pub fn key_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_task_attributes_read_variables_paths_and_composite_text() {
        let vars = crate::vars([
            ("pruefer", "anna".into()),
            ("loopCounter", 2.into()),
            ("gruppen", serde_json::json!(["a", "b"])),
            ("auftrag", serde_json::json!({"bearbeiter": "ben"})),
        ]);
        let r = |raw: &str| UserTaskSpec::resolve(Some(raw), &vars);
        assert_eq!(r("${pruefer}").as_deref(), Some("anna"));
        assert_eq!(r("=auftrag.bearbeiter").as_deref(), Some("ben"));
        assert_eq!(r("#{gruppen}").as_deref(), Some("a,b"));
        assert_eq!(r("kermit_${loopCounter}").as_deref(), Some("kermit_2"));
        assert_eq!(
            r("${pruefer}-#{auftrag.bearbeiter}!").as_deref(),
            Some("anna-ben!")
        );
        assert_eq!(r("sales").as_deref(), Some("sales"));
        assert_eq!(r("kermit_${fehlt}"), None, "a variable it reads is not set");
        assert_eq!(r("${fehlt}"), None);
        assert_eq!(r("offen_${"), None, "an open expression is no value");
    }
    use proptest::prelude::*;

    /// A process over `n` elements (every third one a message catch) and `edges`.
    fn graph(n: usize, edges: &[(usize, usize)]) -> Process {
        let mut elements: Vec<Element> = (0..n)
            .map(|i| Element {
                id: format!("e{i}"),
                name: None,
                kind: if i % 3 == 0 {
                    ElementKind::MessageCatch {
                        message: format!("m{}", i % 7),
                    }
                } else {
                    ElementKind::NoneThrow
                },
                incoming: Vec::new(),
                outgoing: Vec::new(),
                async_before: false,
                line: 0,
                retry: None,
                boundaries: Vec::new(),
                extras: Extras::default(),
            })
            .collect();
        let flows: Vec<Flow> = edges
            .iter()
            .enumerate()
            .map(|(i, &(s, t))| {
                elements[s].outgoing.push(i);
                elements[t].incoming.push(i);
                Flow {
                    id: format!("f{i}"),
                    source: s,
                    target: t,
                    condition: None,
                }
            })
            .collect();
        Process::new("p".into(), None, elements, flows, BTreeMap::new())
    }

    /// The definition: every message waited for on some path from `from`.
    fn walk(p: &Process, from: usize) -> Vec<String> {
        let mut seen = vec![false; p.elements.len()];
        let mut stack = vec![from];
        let mut out = Vec::new();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            out.extend(p.elements[i].kind.waits_for_message().map(str::to_string));
            stack.extend(p.elements[i].outgoing.iter().map(|&f| p.flows[f].target));
            stack.extend(p.elements[i].boundaries.iter().copied());
        }
        out.sort();
        out.dedup();
        out
    }

    proptest! {
        #[test]
        fn reachable_messages_match_a_walk_of_the_graph(
            (n, edges) in (1usize..40).prop_flat_map(|n| (Just(n), proptest::collection::vec((0..n, 0..n), 0..80)))
        ) {
            let p = graph(n, &edges);
            for i in 0..n {
                prop_assert_eq!(p.messages_reachable_from(i).to_vec(), walk(&p, i), "from e{}", i);
            }
        }
    }

    #[test]
    fn reach_enters_a_subprocess_at_its_start_and_leaves_it_after_its_ends() {
        let xml = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <message id="a" name="A"/><message id="b" name="B"/><message id="c" name="C"/>
  <process id="p">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="innen"/>
      <receiveTask id="innen" messageRef="a"/>
      <sequenceFlow id="i1" sourceRef="innen" targetRef="nested"/>
      <subProcess id="nested">
        <startEvent id="ns"/>
        <sequenceFlow id="n0" sourceRef="ns" targetRef="tief"/>
        <serviceTask id="tief"/>
      </subProcess>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="sub" targetRef="danach"/>
    <receiveTask id="danach" messageRef="b"/>
    <boundaryEvent id="rand" attachedToRef="sub"><messageEventDefinition messageRef="c"/></boundaryEvent>
  </process>
</definitions>"#;
        let keys: BTreeMap<String, String> = ["A", "B", "C"]
            .map(|m| (m.to_string(), "k".to_string()))
            .into();
        let p = parse::parse("r.bpmn", xml, &keys).unwrap().remove(0);
        let at = |id: &str| p.index_of(id).unwrap();
        let reach = |id: &str| p.messages_reachable_from(at(id)).to_vec();
        assert_eq!(reach("s"), ["A", "B", "C"]);
        // the service task in the nested subprocess has no outgoing flow: after
        // it, both scopes complete and the token goes on after `sub`
        assert_eq!(reach("tief"), ["B"]);
        assert_eq!(reach("innen"), ["A", "B"]);
        // the token holding `sub` speaks for its boundary event only
        assert_eq!(p.messages_reachable_from_scope(at("sub")), ["C"]);
        assert_eq!(p.parent_of(at("tief")), Some(at("nested")));
        assert_eq!(p.parent_of(at("nested")), Some(at("sub")));
        assert_eq!(p.parent_of(at("sub")), None);
        assert_eq!(p.none_start().map(|e| e.id.as_str()), Some("s"));
        assert!(p.can_reach(at("tief"), at("danach")));
        assert!(!p.can_reach(at("danach"), at("tief")));
    }

    #[test]
    fn a_chain_of_a_hundred_thousand_elements_is_indexed_without_recursion() {
        let n = 100_000;
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        let p = graph(n, &edges);
        assert_eq!(
            p.messages_reachable_from(n - 1),
            [format!("m{}", (n - 1) % 7)]
        );
        assert_eq!(p.messages_reachable_from(0).len(), 7);
    }
}
