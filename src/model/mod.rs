//! The executable process model: plain data parsed from BPMN 2.0 XML.
//!
//! Invariant: a [`Process`] that exists is runnable exactly as its diagram reads.
//! Every element the engine cannot execute was refused by [`parse`], every flow
//! points at an existing element, every message catch has a correlation key, and
//! every condition is parsed. The model is immutable once deployed; instances keep
//! the version they started with.

mod expr;
pub mod iso;
mod parse;

pub use expr::{CmpOp, Expr, Lit, eval_bool, parse as parse_condition};
pub use parse::{Issue, MAX_DEPTH, MAX_SIZE, ParseError, Unsupported, parse};

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
    /// Correlation key variable per message name caught in this process.
    pub correlation_keys: BTreeMap<String, String>,
    #[serde(skip)]
    index: HashMap<String, usize>,
    /// Per element: message names waited for there or anywhere downstream.
    #[serde(skip)]
    reach: Vec<Vec<String>>,
}

/// A flow node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Element {
    pub id: String,
    pub name: Option<String>,
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
    NoneStart,
    MessageStart {
        message: String,
    },
    /// Intermediate timer catch event.
    TimerCatch {
        timer: TimerDef,
    },
    /// Event-based gateway: the first of its target events to happen wins.
    EventGateway,
    /// A boundary event on a task (`host` indexes [`Process::elements`]).
    Boundary {
        host: usize,
        /// Interrupting (`cancelActivity`, the default) or not.
        cancel: bool,
        trigger: Trigger,
    },
    End,
    ExclusiveGateway {
        default: Option<usize>,
    },
    ParallelGateway,
    /// Completes as a pass-through unless bound to a topic by the outbox.
    SendTask,
    /// Waits as a job on `topic` until a handler or worker completes it.
    ServiceTask {
        topic: String,
    },
    ReceiveTask {
        message: String,
    },
    MessageCatch {
        message: String,
    },
    SignalCatch {
        signal: String,
    },
    SignalThrow {
        signal: String,
    },
    /// An intermediate throw event without definition: a pass-through.
    NoneThrow,
    /// A send task bound to a broker topic: an outbox job on
    /// `pubsub:TOPIC` that completes when the broker confirmed the publish.
    /// (Last variant: stored definitions encode variants by position.)
    Publish {
        topic: String,
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
            ElementKind::TimerCatch { .. } => "intermediateCatchEvent(timer)",
            ElementKind::EventGateway => "eventBasedGateway",
            ElementKind::Boundary { .. } => "boundaryEvent",
            ElementKind::MessageStart { .. } => "messageStartEvent",
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
        }
    }

    /// The message this element waits for, if it is a message wait state.
    pub fn waits_for_message(&self) -> Option<&str> {
        match self {
            ElementKind::ReceiveTask { message } | ElementKind::MessageCatch { message } => {
                Some(message)
            }
            _ => None,
        }
    }
}

/// When a timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerDef {
    /// `timeDuration`: this long after the timer starts.
    Duration(crate::clock::Millis),
    /// `timeDate`: at this instant (at once if it is past).
    Date(crate::clock::Millis),
    /// `timeCycle` `R[n]/duration`: every `every`, `repetitions` times (unbounded if `None`).
    Cycle {
        repetitions: Option<u32>,
        every: crate::clock::Millis,
    },
}

impl TimerDef {
    /// The first due time of a timer started at `now`.
    pub fn first_due(&self, now: crate::clock::Millis) -> crate::clock::Millis {
        match *self {
            TimerDef::Duration(d) => now.saturating_add(d),
            TimerDef::Date(t) => t.max(now),
            TimerDef::Cycle { every, .. } => now.saturating_add(every),
        }
    }
}

/// What triggers a boundary event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    Timer(TimerDef),
    /// A BPMN error thrown by the task's worker; `None` catches every code.
    Error {
        code: Option<String>,
    },
}

/// A sequence flow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flow {
    pub id: String,
    pub source: usize,
    pub target: usize,
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
        self.reach = (0..self.elements.len())
            .map(|i| self.walk_messages(i))
            .collect();
    }

    fn walk_messages(&self, from: usize) -> Vec<String> {
        let mut seen = vec![false; self.elements.len()];
        let mut stack = vec![from];
        let mut out: Vec<String> = Vec::new();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            if let Some(m) = self.elements[i].kind.waits_for_message()
                && !out.iter().any(|x| x == m)
            {
                out.push(m.to_string());
            }
            stack.extend(
                self.elements[i]
                    .outgoing
                    .iter()
                    .map(|&f| self.flows[f].target),
            );
        }
        out
    }

    /// Message names a token at element `idx` may still wait for: there or downstream.
    pub fn messages_reachable_from(&self, idx: usize) -> &[String] {
        self.reach.get(idx).map(Vec::as_slice).unwrap_or(&[])
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

    /// The none start event the instance begins at, if there is one.
    pub fn none_start(&self) -> Option<&Element> {
        self.elements
            .iter()
            .find(|e| e.kind == ElementKind::NoneStart)
    }

    /// The message start event for `message`, if there is one.
    pub fn message_start(&self, message: &str) -> Option<&Element> {
        self.elements
            .iter()
            .find(|e| matches!(&e.kind, ElementKind::MessageStart { message: m } if m == message))
    }

    /// Message names this process waits for at catch events and receive tasks.
    pub fn caught_messages(&self) -> impl Iterator<Item = &str> {
        self.correlation_keys.keys().map(String::as_str)
    }

    /// Message names that start this process.
    pub fn start_messages(&self) -> impl Iterator<Item = &str> {
        self.elements.iter().filter_map(|e| match &e.kind {
            ElementKind::MessageStart { message } => Some(message.as_str()),
            _ => None,
        })
    }
}
