//! What a flow node does: [`ElementKind`], by family — activities, start,
//! catch and throw events, gateways, scopes, boundary events — the way
//! Zeebe groups its element processors.
//!
//! Invariant: a kind belongs to exactly one family, and a family's kinds
//! are matched exhaustively wherever a family's behaviour is decided (its
//! parser file, its engine file, its label here); the kinds are plain data,
//! never stored (a definition is stored as its source).

use super::{DecisionMapping, Delegated, Expr, TimerDef, Trigger, UserTaskSpec, VarPass};

/// What a flow node does, by family (the way Zeebe groups its element
/// processors). The engine dispatches on the family; each family's behaviour
/// matches its own kinds exhaustively, in its own file.
#[derive(Debug, Clone, PartialEq)]
pub enum ElementKind {
    /// An activity: a task that does work or waits for it, or a call of another
    /// process. Each may host boundary events and run as a multi-instance body.
    Activity(ActivityKind),
    /// A start event: where a token of a new instance (or of a scope) begins;
    /// what starts it is decided before a token exists.
    Start(StartKind),
    /// An intermediate catch event: the token waits here until what it catches
    /// happens.
    Catch(CatchKind),
    /// An intermediate throw or end event: it throws what it names and the
    /// token goes on (throw) or ends (end event).
    Throw(ThrowKind),
    /// A gateway: it decides which outgoing flows a token takes and, as a join,
    /// when it goes on.
    Gateway(GatewayKind),
    /// A scope: a container whose inner flow nodes run under the token that
    /// entered it, which completes when they have.
    Scope(ScopeKind),
    /// A boundary event on a task (`host` indexes [`Process::elements`]).
    Boundary {
        /// The activity it is attached to.
        host: usize,
        /// Interrupting (`cancelActivity`, the default) or not.
        cancel: bool,
        /// What triggers it.
        trigger: Trigger,
    },
}

/// The kinds of the [`ElementKind::Activity`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum ActivityKind {
    /// Waits as a job on `topic` until a handler or worker completes it.
    ServiceTask {
        /// The topic workers fetch its jobs by.
        topic: String,
    },
    /// A `scriptTask` or `businessRuleTask` postfach does not evaluate itself
    /// (a script language, a decision given by an expression, an external
    /// task): it waits as a job on `topic`, like a service task, and the job
    /// carries what to evaluate.
    Delegated {
        /// The topic workers fetch its jobs by.
        topic: String,
        /// What the worker is asked to evaluate.
        work: Delegated,
    },
    /// A send task bound to a broker topic: an outbox job on
    /// `pubsub:TOPIC` that completes when the broker confirmed the publish.
    Publish {
        /// The job topic (`pubsub:` and the broker topic).
        topic: String,
    },
    /// A user task: a wait state with a task record in the task list, done by
    /// a person through `claim` and `complete`.
    UserTask {
        /// Who may or should do it, as the model writes it.
        spec: UserTaskSpec,
    },
    /// Waits for a message, like a message catch event.
    ReceiveTask {
        /// The message name.
        message: String,
    },
    /// A receive task or intermediate catch event without an event
    /// definition: a wait state — the token rests until a caller triggers it
    /// (Flowable's `trigger`, Camunda 7's `signal`).
    WaitState,
    /// A script task the engine evaluates itself (Zeebe `zeebe:script`
    /// with a FEEL expression): its value goes to `result_variable` and the
    /// token moves on in the same step; no job, no worker.
    Script {
        /// The FEEL expression.
        expression: Expr,
        /// `resultVariable`.
        result_variable: String,
    },
    /// A business rule task the engine decides itself (feature `feel`): the
    /// latest deployed version of the DMN decision is evaluated in the step
    /// the token arrives in, its result set as `mapping` says.
    Decide {
        /// The decision's id (`zeebe:calledDecision decisionId`,
        /// `camunda:decisionRef`, `flowable:decisionTableReferenceKey`).
        decision: String,
        /// The version the model binds (`camunda:decisionRefBinding="version"`
        /// with `decisionRefVersion`); `None`: the latest when the token
        /// arrives.
        version: Option<u32>,
        /// The variable the result goes to (`resultVariable`); `None` keeps
        /// no result (unless `mapping` is [`DecisionMapping::Outputs`]).
        result_variable: Option<String>,
        /// How the result becomes the variable's value.
        mapping: DecisionMapping,
    },
    /// A plain `task` or a `manualTask`: no behaviour in the engine, the token
    /// passes through (BPMN: work done outside any system).
    Task {
        /// A `manualTask` (else a plain `task`).
        manual: bool,
    },
    /// A send task of a definition stored before unbound send tasks became
    /// jobs ([`Delegated::Send`]): it passes through, as it did when that
    /// version was deployed (a stored version keeps its meaning). The parser no
    /// longer produces it.
    SendTask,
    /// A call activity: starts an instance of `process` (a child) and waits
    /// until it ends; cancelling the call activity cancels the child.
    CallActivity {
        /// The called process id, or `=PATH`: the process id is the string
        /// value of that variable (or path) when the activity starts (written
        /// `${name}`, `#{name}` or `=name` in the model; see
        /// [`called_process_variable`]).
        process: String,
        /// The version called; `None`: the latest deployed when it is called.
        version: Option<u32>,
        /// The variables the child starts with.
        inputs: VarPass,
        /// The child's variables that come back when it completes.
        outputs: VarPass,
    },
}

/// The kinds of the [`ElementKind::Start`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum StartKind {
    /// A start event without trigger: `start` begins here.
    Plain,
    /// A message start event: a message of this name starts an instance.
    Message {
        /// The message name.
        message: String,
    },
    /// A timer start event: the deployed version's schedule starts instances.
    Timer {
        /// When it fires.
        timer: TimerDef,
    },
    /// A signal start event: a broadcast of this signal starts an instance
    /// of the latest version (on partition 0 of a cluster).
    Signal {
        /// The signal name.
        signal: String,
    },
    /// A conditional start event: variables offered to the processes with
    /// conditional starts (`postfach conditions`, `POST /conditions`) start
    /// an instance of the latest version where its condition holds over
    /// them (Camunda 7's `evaluateStartConditions`).
    Conditional {
        /// The condition (a failed evaluation counts as not holding).
        condition: Expr,
    },
}

/// The kinds of the [`ElementKind::Catch`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum CatchKind {
    /// Intermediate timer catch event.
    Timer {
        /// When it fires.
        timer: TimerDef,
    },
    /// Intermediate message catch event.
    Message {
        /// The message name.
        message: String,
    },
    /// Intermediate signal catch event: waits for a broadcast.
    Signal {
        /// The signal name.
        signal: String,
    },
    /// Intermediate conditional catch event: the token passes when its
    /// condition holds — at once, or after a command that changed the
    /// instance's variables.
    Conditional {
        /// The condition (a failed evaluation counts as not holding).
        condition: Expr,
    },
    /// A link catch event: the link throw events of the same name in the same
    /// scope continue here (the parser joins each throw to its catch with a
    /// flow); the token passes through.
    Link {
        /// The link's name.
        name: String,
    },
}

/// The kinds of the [`ElementKind::Throw`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum ThrowKind {
    /// An intermediate throw event without definition: a pass-through.
    Plain,
    /// Intermediate signal throw event: broadcasts and moves on.
    Signal {
        /// The signal name.
        signal: String,
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
    /// A compensation intermediate throw or end event: the compensation
    /// handlers of the activities completed in its scope (or only those of
    /// `activity`) run, in reverse order of completion; with `wait` the
    /// token moves on (or ends) when they have completed.
    Compensate {
        /// `activityRef`: compensate only this activity (index into
        /// [`Process::elements`]); `None`: the whole scope.
        activity: Option<usize>,
        /// `waitForCompletion` (default true).
        wait: bool,
        /// An end event (else an intermediate throw event).
        end: bool,
    },
    /// A link throw event: an off-page connector; the token goes on at the
    /// catch of the same name, along the flow the parser added.
    Link {
        /// The link's name.
        name: String,
    },
    /// An end event: the token ends here.
    End,
    /// A terminate end event: ends its scope at once (the instance, or the
    /// embedded subprocess it is in), withdrawing every other token of that
    /// scope with its waits, jobs, timers and user tasks.
    Terminate,
    /// An error end event: throws BPMN error `code` to the error boundary
    /// events of the subprocesses around it (innermost first); the scope that
    /// catches it is cancelled. Uncaught, it is an incident.
    Error {
        /// The error code (from the `<error>` its `errorRef` names).
        code: Option<String>,
    },
    /// A cancel end event inside a transaction subprocess: everything else
    /// in the transaction is withdrawn, its completed activities are
    /// compensated, and it is left by its cancel boundary event.
    Cancel {
        /// The transaction subprocess (index into [`Process::elements`]).
        transaction: usize,
    },
}

/// The kinds of the [`ElementKind::Gateway`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum GatewayKind {
    /// Takes the first outgoing flow whose condition holds, else the default.
    Exclusive {
        /// The default flow (index into [`Process::flows`]).
        default: Option<usize>,
    },
    /// Forks to every outgoing flow; joins all incoming ones.
    Parallel,
    /// Inclusive gateway: forks on every flow whose condition holds (the
    /// default flow when none does); as a join it waits until no other token
    /// of the instance can still reach it.
    Inclusive {
        /// The default flow (index into [`Process::flows`]).
        default: Option<usize>,
    },
    /// Event-based gateway: the first of its target events to happen wins.
    Event,
}

/// The kinds of the [`ElementKind::Scope`] family.
#[derive(Debug, Clone, PartialEq)]
pub enum ScopeKind {
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
    /// An ad-hoc subprocess: a scope whose activities without incoming
    /// flows run when a caller activates them (Flowable's
    /// `executeActivityInAdhocSubProcess`), or, with Zeebe's
    /// `activeElementsCollection`, those the collection names when it
    /// starts. It completes when its completion condition holds after an
    /// inner activity completed (the others cancelled unless
    /// `cancelRemainingInstances="false"`), when a caller completes it with
    /// nothing running, or — with a collection and no condition — when the
    /// last activated activity has completed.
    AdHoc {
        /// The flow nodes directly inside it (indices).
        children: Vec<usize>,
        /// `completionCondition`, asked after each inner activity completed.
        completion: Option<Expr>,
        /// `cancelRemainingInstances` (default true).
        cancel_remaining: bool,
        /// `ordering="Sequential"`: one activity at a time.
        sequential: bool,
        /// Zeebe `activeElementsCollection`: the ids of the activities to
        /// activate when it starts.
        active_elements: Option<Expr>,
    },
}

impl ActivityKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            ActivityKind::WaitState => {
                "wait state (receiveTask or intermediateCatchEvent without a definition)"
            }
            ActivityKind::SendTask => "sendTask",
            ActivityKind::ServiceTask { .. } => "serviceTask",
            ActivityKind::ReceiveTask { .. } => "receiveTask",
            ActivityKind::Publish { .. } => "sendTask",
            ActivityKind::Task { manual: false } => "task",
            ActivityKind::Task { manual: true } => "manualTask",
            ActivityKind::Delegated {
                work: Delegated::Script { .. },
                ..
            } => "scriptTask",
            ActivityKind::Delegated {
                work: Delegated::Decision { .. },
                ..
            } => "businessRuleTask",
            ActivityKind::Delegated {
                work: Delegated::Message { end: false, .. },
                ..
            } => "intermediateThrowEvent(message)",
            ActivityKind::Delegated {
                work: Delegated::Message { end: true, .. },
                ..
            } => "endEvent(message)",
            ActivityKind::Delegated {
                work: Delegated::Send { .. },
                ..
            } => "sendTask",
            ActivityKind::UserTask { .. } => "userTask",
            ActivityKind::CallActivity { .. } => "callActivity",
            ActivityKind::Script { .. } => "scriptTask(FEEL)",
            ActivityKind::Decide { .. } => "businessRuleTask(DMN)",
        }
    }
}

impl StartKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            StartKind::Plain => "startEvent",
            StartKind::Message { .. } => "messageStartEvent",
            StartKind::Signal { .. } => "signalStartEvent",
            StartKind::Timer { .. } => "startEvent(timer)",
            StartKind::Conditional { .. } => "startEvent(conditional)",
        }
    }
}

impl CatchKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            CatchKind::Timer { .. } => "intermediateCatchEvent(timer)",
            CatchKind::Message { .. } => "intermediateCatchEvent(message)",
            CatchKind::Signal { .. } => "intermediateCatchEvent(signal)",
            CatchKind::Link { .. } => "intermediateCatchEvent(link)",
            CatchKind::Conditional { .. } => "intermediateCatchEvent(conditional)",
        }
    }
}

impl ThrowKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            ThrowKind::End => "endEvent",
            ThrowKind::Signal { .. } => "intermediateThrowEvent(signal)",
            ThrowKind::Plain => "intermediateThrowEvent",
            ThrowKind::Terminate => "endEvent(terminate)",
            ThrowKind::Error { .. } => "endEvent(error)",
            ThrowKind::Escalation { end: true, .. } => "endEvent(escalation)",
            ThrowKind::Escalation { end: false, .. } => "intermediateThrowEvent(escalation)",
            ThrowKind::Link { .. } => "intermediateThrowEvent(link)",
            ThrowKind::Compensate { end: true, .. } => "endEvent(compensate)",
            ThrowKind::Compensate { end: false, .. } => "intermediateThrowEvent(compensate)",
            ThrowKind::Cancel { .. } => "endEvent(cancel)",
        }
    }
}

impl GatewayKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            GatewayKind::Event => "eventBasedGateway",
            GatewayKind::Exclusive { .. } => "exclusiveGateway",
            GatewayKind::Parallel => "parallelGateway",
            GatewayKind::Inclusive { .. } => "inclusiveGateway",
        }
    }
}

impl ScopeKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            ScopeKind::SubProcess { .. } => "subProcess",
            ScopeKind::EventSubProcess { .. } => "subProcess(event)",
            ScopeKind::AdHoc { .. } => "adHocSubProcess",
        }
    }
}

impl ElementKind {
    /// A short name for listings and errors.
    pub fn label(&self) -> &'static str {
        match self {
            ElementKind::Activity(kind) => kind.label(),
            ElementKind::Start(kind) => kind.label(),
            ElementKind::Catch(kind) => kind.label(),
            ElementKind::Throw(kind) => kind.label(),
            ElementKind::Gateway(kind) => kind.label(),
            ElementKind::Scope(kind) => kind.label(),
            ElementKind::Boundary { .. } => "boundaryEvent",
        }
    }

    /// The message this element waits for, if it is a message wait state.
    pub fn waits_for_message(&self) -> Option<&str> {
        match self {
            ElementKind::Activity(ActivityKind::ReceiveTask { message })
            | ElementKind::Catch(CatchKind::Message { message })
            | ElementKind::Boundary {
                trigger: Trigger::Message { message },
                ..
            }
            | ElementKind::Scope(ScopeKind::EventSubProcess {
                trigger: Trigger::Message { message },
                ..
            }) => Some(message),
            _ => None,
        }
    }
}

impl ElementKind {
    /// The signal this element catches (a start, a wait, a boundary, an
    /// event subprocess), if any.
    pub fn catches_signal(&self) -> Option<&str> {
        match self {
            ElementKind::Start(StartKind::Signal { signal })
            | ElementKind::Catch(CatchKind::Signal { signal })
            | ElementKind::Boundary {
                trigger: Trigger::Signal { signal },
                ..
            }
            | ElementKind::Scope(ScopeKind::EventSubProcess {
                trigger: Trigger::Signal { signal },
                ..
            }) => Some(signal),
            _ => None,
        }
    }

    /// The message this element catches: a message wait state, or a
    /// message start event.
    pub fn catches_message(&self) -> Option<&str> {
        match self {
            ElementKind::Start(StartKind::Message { message }) => Some(message),
            other => other.waits_for_message(),
        }
    }
}
