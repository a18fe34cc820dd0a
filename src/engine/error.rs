//! Errors of engine commands: what was refused and why, in the core's words
//! (the edges add what to do next).
//!
//! Invariant: every kind but `Store` is a refusal that changed nothing.

use super::TaskRefusal;
use crate::model;
use crate::store::StoreError;

/// Errors of engine commands. All but `Store` are refusals that changed nothing.
#[derive(Debug, thiserror::Error)]
// exhaustive on purpose: each edge (CLI hints, HTTP status) places every
// kind deliberately; a new kind is a breaking change and versioned as one
pub enum EngineError {
    /// Storage failed; the command may be retried.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The BPMN file does not deploy.
    #[error(transparent)]
    Parse(#[from] model::ParseError),
    /// No version of this process is deployed.
    #[error("process '{0}' is not deployed")]
    UnknownProcess(String),
    #[error(
        "process '{0}' has no none start event: it starts by its message or timer start events"
    )]
    /// The process starts only by a message.
    NoStartEvent(String),
    /// No instance has this id.
    #[error("instance {0} does not exist")]
    UnknownInstance(u64),
    /// The element is not part of the instance's process version.
    #[error("element '{element}' does not exist in process '{process}'")]
    UnknownElement {
        /// The process id.
        process: String,
        /// The element id asked for.
        element: String,
    },
    /// No job has this id.
    #[error("job {0} does not exist (it may have completed)")]
    UnknownJob(u64),
    /// The job is not in a state that allows this.
    #[error("job {job} {refusal}")]
    JobState {
        /// The job id.
        job: u64,
        /// Why it refused.
        refusal: JobRefusal,
    },
    #[error(
        "job {0}: the lease was lost (expired or taken by another worker); its result is refused, the job runs again"
    )]
    /// The lease token is not the job's current one.
    StaleLease(u64),
    /// No message was accepted under this id.
    #[error("message '{0}' is not known")]
    UnknownMessageId(String),
    /// Several messages (of different names) share this id.
    #[error("message id '{id}' is used by several messages ({names}): address it as NAME/ID")]
    AmbiguousMessageId {
        /// The id as given.
        id: String,
        /// The names that use it.
        names: String,
    },
    #[error(
        "message '{id}' is {state}, not parked: only parked messages can be requeued or discarded"
    )]
    /// Only parked messages can be requeued or discarded.
    NotParked {
        /// The id as given.
        id: String,
        /// The state it is in.
        state: &'static str,
    },
    #[error(
        "refused: instance {existing_instance} has a token at '{existing_element}' that waits for or will reach message '{message}' with key '{key}'; a second token would make every completion ambiguous"
    )]
    /// A repair would make a second token wait for one (message, key).
    RepairRefused {
        /// The message both tokens would wait for.
        message: String,
        /// Its correlation key.
        key: String,
        /// The instance that already waits for it or will.
        existing_instance: u64,
        /// Where that instance's token is.
        existing_element: String,
    },
    /// An instance cannot move to another version as a migration plan says.
    #[error("instance {instance} cannot migrate: {reason}")]
    MigrationRefused {
        /// The instance.
        instance: u64,
        /// Why, naming the token, element and version.
        reason: String,
    },
    /// No batch has this id.
    #[error("batch {0} does not exist")]
    UnknownBatch(u64),
    /// A batch, or an item of one, refused what was asked.
    #[error("batch {batch}: {reason}")]
    BatchRefused {
        /// The batch (0: one being created).
        batch: u64,
        /// Why.
        reason: String,
    },
    /// The instance has no job in an incident to retry.
    #[error("instance {0} has no job in an incident")]
    NoIncident(u64),
    /// A token named by its element is not there exactly once.
    #[error("instance {instance} has {count} tokens at '{element}', not one")]
    NoSingleToken {
        /// The instance.
        instance: u64,
        /// The element.
        element: String,
        /// How many tokens rest there.
        count: usize,
    },
    /// The instance still runs; only an ended one can be deleted.
    #[error("instance {0} is still running; only an ended instance is deleted")]
    InstanceRunning(u64),
    /// The instance has completed or was cancelled.
    #[error("instance {0} has ended; it can no longer be modified")]
    InstanceEnded(u64),
    /// No open user task has this id (it may have been completed).
    #[error("user task {0} does not exist (it may have been completed)")]
    UnknownTask(u64),
    /// The user task refused the action.
    #[error("user task {task} {refusal}")]
    TaskRefused {
        /// The task id.
        task: u64,
        /// Why.
        refusal: TaskRefusal,
    },
    /// A repair names an element inside a subprocess, and the instance does
    /// not have exactly one scope of that subprocess to place the token in.
    #[error(
        "element '{element}' is inside subprocess '{subprocess}', which has {active} active scopes in instance {instance}: a token can be placed inside a subprocess only while exactly one scope of it is active"
    )]
    NoSingleScope {
        /// The instance id.
        instance: u64,
        /// The element asked for.
        element: String,
        /// The subprocess it is inside.
        subprocess: String,
        /// How many scopes of it are active (other than the token being moved).
        active: usize,
    },
    /// The instance has no token with this id.
    #[error("instance {instance} has no token {token}")]
    UnknownToken {
        /// The instance id.
        instance: u64,
        /// The token id asked for.
        token: u64,
    },
    /// The token does not wait at a wait state, so there is nothing to trigger.
    #[error(
        "token {token} of instance {instance} at '{element}' does not wait to be triggered (it waits for {waits})"
    )]
    NotTriggerable {
        /// The instance id.
        instance: u64,
        /// The token.
        token: u64,
        /// Where it rests.
        element: String,
        /// What it waits for instead.
        waits: String,
    },
    /// An ad-hoc subprocess refused an activation or completion.
    #[error("ad-hoc subprocess '{element}' of instance {instance}: {why}")]
    AdHocRefused {
        /// The instance id.
        instance: u64,
        /// The element the token rests at.
        element: String,
        /// Why, in words.
        why: String,
    },
    /// A correlation key or id that another partition of the cluster owns.
    #[error(
        "{what} belongs to partition {owner} (slot map version {version}); this is partition {here}"
    )]
    OtherPartition {
        /// What was addressed ("message key 'A-1'", "instance 17").
        what: String,
        /// The partition that owns it.
        owner: u32,
        /// This partition.
        here: u32,
        /// The version of the slot map that says so.
        version: u64,
    },
    /// A correlation key or id whose slot is moving to another partition:
    /// nothing is written for it until the move is done.
    #[error("{what} is in slot {slot}, which is moving from partition {here} to partition {to}")]
    SlotMoving {
        /// What was addressed.
        what: String,
        /// Its slot.
        slot: u32,
        /// This partition.
        here: u32,
        /// Where the slot goes.
        to: u32,
    },
    /// In a cluster, an instance is placed by its correlation key: a start
    /// without it cannot be placed.
    #[error(
        "process '{process}' is placed by its correlation key '{variable}' in a cluster of {count} partitions, and the start does not set it"
    )]
    KeyNeeded {
        /// The process.
        process: String,
        /// Its correlation key variable.
        variable: String,
        /// Partitions in the cluster.
        count: u32,
    },
    /// No decision of this id is deployed.
    #[error("decision '{0}' is not deployed")]
    UnknownDecision(String),
    /// A decision has no value for the variables given.
    #[error("decision '{decision}' (version {version}): {reason}")]
    DecisionFailed {
        /// The decision's id.
        decision: String,
        /// The version evaluated.
        version: u32,
        /// Why, as DMN says it.
        reason: String,
    },
    /// In a cluster, a process whose message catches use different
    /// correlation key variables cannot be placed on one partition.
    #[error(
        "process '{process}' cannot run in a cluster of {count} partitions: its messages are correlated by different variables ({keys}), and an instance lives on the partition of one key"
    )]
    MixedKeys {
        /// The process.
        process: String,
        /// Each variable with the messages and elements that use it.
        keys: String,
        /// Partitions in the cluster.
        count: u32,
    },
}

/// Why a job refused what was asked of it (the edges say what to do next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobRefusal {
    /// Held by an external worker: only its lease token completes or fails it.
    LockedByWorker,
    /// An incident: it runs again only after a retry.
    Incident,
    /// An async continuation: the job executor runs it, nobody completes it.
    Continuation,
    /// Not an incident, so there is nothing to retry.
    NotAnIncident,
    /// Not a task job, so it cannot throw a BPMN error.
    NotATask,
}

impl std::fmt::Display for JobRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobRefusal::LockedByWorker => "is locked by a worker",
            JobRefusal::Incident => "is an incident",
            JobRefusal::Continuation => "is an async continuation, run by the job executor",
            JobRefusal::NotAnIncident => "is not an incident",
            JobRefusal::NotATask => "is not a task job: only task workers throw BPMN errors",
        })
    }
}
