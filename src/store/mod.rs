//! Every table, key encoding and stored record of the redb file.
//!
//! Invariant: only this module names redb tables. Each record is encoded by
//! [`crate::codec`] behind a format version byte. Keys that carry order are
//! sequential u64 or tuples ending in one (accept order, due time), so range
//! scans return oldest first and lookups cost O(log n) however large a table grows.
//!
//! The tables and their keys are laid out in [`schema`].

pub mod batches;
pub mod compensations;
pub mod damage;
pub(crate) mod history;
pub(crate) mod schema;
mod tokens;
mod variables;

pub(crate) use schema::*;
pub use tokens::{BodyItem, Tokens};
pub(crate) use tokens::{decode_token, encode_token};
pub use variables::{Variables, names_of};

use crate::clock::Millis;
use crate::codec::{self, CodecError, json_text};
use crate::model::Process;
use crate::model::Vars;
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an event about a parked message carries (see
/// [`crate::Options::parked_events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParkedEvents {
    /// The message's variables go into the event too (off by default: a
    /// payload may hold what an alerting channel must not see).
    pub payload: bool,
}

/// `meta` key of the parked-event setting: absent or 0 off, 1 on, 2 on with
/// the payload. Database state, not a setting of one process: the log's
/// replay writes exactly the events the first run of a batch wrote.
pub(crate) const PARKED_EVENTS_KEY: &str = "parked_events";

pub(crate) fn parked_events_of(stored: Option<u64>) -> Option<ParkedEvents> {
    match stored {
        Some(1) => Some(ParkedEvents { payload: false }),
        Some(2) => Some(ParkedEvents { payload: true }),
        _ => None,
    }
}

/// Stores the parked-event setting; says whether it changed.
pub(crate) fn set_parked_events(
    db: &redb::Database,
    setting: Option<ParkedEvents>,
) -> Result<bool, StoreError> {
    let code = match setting {
        None => 0,
        Some(ParkedEvents { payload: false }) => 1,
        Some(ParkedEvents { payload: true }) => 2,
    };
    let tx = db.begin_write()?;
    let changed = {
        let mut meta = tx.open_table(META)?;
        let old = meta.get(PARKED_EVENTS_KEY)?.map_or(0, |v| v.value());
        if old != code {
            meta.insert(PARKED_EVENTS_KEY, code)?;
        }
        old != code
    };
    tx.commit()?;
    Ok(changed)
}

/// Storage failures. All of them are technical: retrying the operation, or
/// redelivering the message that caused it, is the right reaction.
#[derive(Debug, thiserror::Error)]
// exhaustive on purpose: each edge (CLI hints, HTTP status) places every
// kind deliberately; a new kind is a breaking change and versioned as one
pub enum StoreError {
    #[error(
        "database {path} is held by another process (a running postfach server, or a host application)"
    )]
    /// Another process holds the database file.
    Locked {
        /// The file.
        path: String,
    },
    /// The database file could not be opened.
    #[error("database {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// What redb said.
        source: redb::DatabaseError,
    },
    /// A stored process version cannot be made into a model again.
    #[error("version {version} of process '{process}' cannot be loaded: {reason}")]
    UnreadableDefinition {
        /// The process id.
        process: String,
        /// The version.
        version: u32,
        /// Why.
        reason: String,
    },
    /// A read or write of the database failed.
    #[error("storage error: {0}")]
    Redb(#[from] redb::Error),
    /// A stored record could not be read or written.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// The batch this command was part of was aborted.
    #[error("the commit batch was aborted ({0}); nothing of it was stored: retry the operation")]
    Aborted(String),
    /// A file operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "write-ahead log {path} is damaged at byte {offset} of {size}: {intact_before} intact record(s) before it, {intact_after} intact record(s) after it; nothing was opened or changed"
    )]
    /// The write-ahead log is damaged in the middle, not just torn at its end.
    LogDamaged {
        /// The log file.
        path: String,
        /// Where the damage starts.
        offset: u64,
        /// The log's size.
        size: u64,
        /// Intact records before the damage.
        intact_before: usize,
        /// Intact records found after it.
        intact_after: usize,
    },
    /// A write was asked of a database opened for reading.
    #[error("the database was opened for reading only")]
    ReadOnly,
    /// The database was written in a format newer than this build reads.
    #[error(
        "database {path} is in format {found}, written by a newer release; this build reads formats 1 to {reads}"
    )]
    NewerFormat {
        /// The file.
        path: String,
        /// The format the file is in.
        found: u64,
        /// The newest format this build reads.
        reads: u64,
    },
    /// The database is another partition than the one asked for.
    #[error("database {path} is {stored}; it was opened as {given}")]
    OtherPartition {
        /// The file.
        path: String,
        /// What the database is ("partition 1 of 4", "unpartitioned").
        stored: String,
        /// What it was opened as.
        given: String,
    },
    /// The database file is damaged: redb found a page it cannot read.
    #[error("database {path} is damaged: {detail}")]
    Damaged {
        /// The file.
        path: String,
        /// What redb hit.
        detail: String,
    },
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Redb(e.into()) }
        }
    )*};
}
from_redb!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError
);

pub(crate) mod copy;
mod instance;
#[cfg(test)]
mod memory;
mod open;
mod overlay;
mod pinned;
#[cfg(test)]
mod sim;
mod snapshot;
pub(crate) mod tables;
pub(crate) mod verify;

/// A table opened where a database of an earlier release may not have it
/// yet (it is created on the first writable open): `None` then. The one
/// place that decides what a missing table is; its callers decide what it
/// means.
pub(crate) fn present<T>(opened: Result<T, redb::TableError>) -> Result<Option<T>, StoreError> {
    match opened {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(redb::Error::from(e).into()),
    }
}

/// The store's consistency check over a read transaction (tests).
#[cfg(test)]
pub(crate) fn verify_read(r: &redb::ReadTransaction) -> Result<Vec<String>, StoreError> {
    verify::verify(r, true)
}

/// A read transaction of `db` (tests).
#[cfg(test)]
pub(crate) fn begin_read_tx(db: &redb::Database) -> Result<redb::ReadTransaction, StoreError> {
    Ok(db.begin_read().map_err(redb::Error::from)?)
}

pub use instance::*;
#[cfg(test)]
pub(crate) use memory::MemoryStore;
pub use open::*;
pub(crate) use snapshot::Snapshot;
pub use tables::{ID_COUNTERS, Moved};
pub(crate) use tables::{Resting, Tables};

// ---------- records ----------

/// A deployed process version, as the engine runs it.
#[derive(Debug, Clone)]
pub struct DefinitionRecord {
    pub process: Process,
    pub deployed_at: Millis,
    pub file: String,
    /// Hash of source and key overrides; an identical redeploy keeps the version.
    pub fingerprint: u64,
}

/// How a process version was deployed: besides its source, what it takes to
/// parse it again into the same model (`definition_heads`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefinitionHead {
    /// When it was deployed.
    pub deployed_at: Millis,
    /// The file name it was deployed from.
    pub file: String,
    /// Hash of source and key overrides; an identical redeploy keeps the version.
    pub fingerprint: u64,
    /// The correlation keys and send-task topics given at deploy time.
    pub overrides: BTreeMap<String, String>,
    /// The parser's level when it was deployed ([`crate::model::PARSER_LEVEL`]).
    pub parser: u32,
}

/// A process version as the store keeps it: its source with how it was
/// deployed, or (a version of database format 4 whose source does not give
/// it again) its model as that format stored it.
#[derive(Debug, Clone)]
pub enum StoredDefinition {
    /// The source it was deployed from.
    Source {
        /// How it was deployed.
        head: DefinitionHead,
        /// The BPMN XML.
        xml: String,
    },
    /// A format-4 row, read through its frozen layout.
    Pinned(Box<DefinitionRecord>),
}

impl StoredDefinition {
    /// The hash of its source and overrides.
    pub fn fingerprint(&self) -> u64 {
        match self {
            Self::Source { head, .. } => head.fingerprint,
            Self::Pinned(rec) => rec.fingerprint,
        }
    }

    /// When it was deployed, and from which file.
    pub fn deployed(&self) -> (Millis, &str) {
        match self {
            Self::Source { head, .. } => (head.deployed_at, &head.file),
            Self::Pinned(rec) => (rec.deployed_at, &rec.file),
        }
    }

    /// The version as the engine runs it: its source parsed as it was
    /// deployed (process `process` of the file), or the pinned model.
    pub fn load(self, process: &str, version: u32) -> Result<DefinitionRecord, StoreError> {
        let (head, xml) = match self {
            Self::Pinned(rec) => return Ok(*rec),
            Self::Source { head, xml } => (head, xml),
        };
        let unreadable = |reason: String| StoreError::UnreadableDefinition {
            process: process.to_string(),
            version,
            reason,
        };
        if head.parser > crate::model::PARSER_LEVEL {
            return Err(unreadable(format!(
                "it was deployed by a parser of level {}, this build's is {}",
                head.parser,
                crate::model::PARSER_LEVEL
            )));
        }
        let parsed = crate::model::parse(&head.file, &xml, &head.overrides)
            .map_err(|e| unreadable(e.to_string()))?;
        let Some(p) = parsed.into_iter().find(|p| p.id == process) else {
            return Err(unreadable(format!(
                "its source {} no longer holds an executable process of that id",
                head.file
            )));
        };
        Ok(DefinitionRecord {
            process: p,
            deployed_at: head.deployed_at,
            file: head.file,
            fingerprint: head.fingerprint,
        })
    }
}

/// A deployed DMN decision: one version of it, with the file it came from
/// (a decision is evaluated from the whole file: it may require others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The decision's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its version (1, 2, … per id).
    pub version: u32,
    /// When it was deployed.
    pub deployed_at: Millis,
    /// The file name it was deployed from.
    pub file: String,
    /// Hash of the file: an identical redeploy keeps the version.
    pub fingerprint: u64,
    /// The DMN XML.
    pub xml: String,
}

/// What a message name means to one process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CatalogEntry {
    pub key_variable: Option<String>,
    pub starts: bool,
}

/// Where a message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageState {
    /// Waits in the buffer for its subscription.
    Buffered,
    /// Parked with a reason, for an operator.
    Parked,
    /// Delivered to an instance.
    Correlated,
    /// Ended by an operator, with a note why.
    Discarded,
}

impl MessageState {
    /// The name in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Buffered => "buffered",
            MessageState::Parked => "parked",
            MessageState::Correlated => "correlated",
            MessageState::Discarded => "discarded",
        }
    }
}

/// Why a message was parked (or a synchronous correlation rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reason {
    /// Two or more subscriptions wait for the same (message, key).
    Ambiguous,
    /// The instance for the key already passed the catch event or ended.
    Late,
    /// The TTL ran out while the message waited in the buffer.
    Expired,
    /// The payload could not be decoded.
    Malformed,
    /// Nobody waits and the message may not be buffered (TTL 0 or synchronous correlate).
    NoSubscription,
    /// No deployed process catches or starts this message name.
    UnknownMessage,
}

impl Reason {
    /// Every reason, in the order views list them. Metrics, alarms, the HTTP
    /// listing and the command line iterate this list instead of spelling it.
    pub const ALL: [Reason; 6] = [
        Reason::Ambiguous,
        Reason::Late,
        Reason::Expired,
        Reason::Malformed,
        Reason::NoSubscription,
        Reason::UnknownMessage,
    ];

    /// The name in JSON, metrics and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ambiguous => "ambiguous",
            Reason::Late => "late",
            Reason::Expired => "expired",
            Reason::Malformed => "malformed",
            Reason::NoSubscription => "no_subscription",
            Reason::UnknownMessage => "unknown_message",
        }
    }
    /// The reason of a name, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The reason of a name, or an error listing every name.
    pub fn parse_or_list(s: &str) -> Result<Self, String> {
        Reason::parse(s).ok_or_else(|| {
            let names: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
            format!("reason '{s}' is not one of {}", names.join(", "))
        })
    }
}

/// An event counter, kept in `meta` under `count:NAME`. The names are stored
/// (and exported as metrics): renaming one is a format change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// A message went straight into a waiting subscription.
    MessagesCorrelated,
    /// A buffered message was taken by a subscription that opened.
    MessagesCorrelatedFromBuffer,
    /// A message was buffered.
    MessagesBuffered,
    /// A (name, id) seen before was recognised.
    MessagesDuplicate,
    /// A message was parked, by reason.
    MessagesParked(Reason),
    /// A parked message was evaluated again.
    MessagesRequeued,
    /// A parked message was ended by an operator.
    MessagesDiscarded,
    /// A signal was broadcast.
    SignalsThrown,
    /// A signal reached no subscription.
    SignalsUnreached,
    /// A job attempt completed.
    JobAttemptsCompleted,
    /// A job attempt failed.
    JobAttemptsFailed,
    /// Completed instances removed by retention.
    RetentionInstancesRemoved,
    /// Settled messages removed by retention.
    RetentionMessagesRemoved,
}

impl Counter {
    /// The stored name (`messages_parked_late`).
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::Borrowed;
        match self {
            Counter::MessagesCorrelated => Borrowed("messages_correlated"),
            Counter::MessagesCorrelatedFromBuffer => Borrowed("messages_correlated_from_buffer"),
            Counter::MessagesBuffered => Borrowed("messages_buffered"),
            Counter::MessagesDuplicate => Borrowed("messages_duplicate"),
            Counter::MessagesParked(r) => format!("messages_parked_{}", r.as_str()).into(),
            Counter::MessagesRequeued => Borrowed("messages_requeued"),
            Counter::MessagesDiscarded => Borrowed("messages_discarded"),
            Counter::SignalsThrown => Borrowed("signals_thrown"),
            Counter::SignalsUnreached => Borrowed("signals_unreached"),
            Counter::JobAttemptsCompleted => Borrowed("job_attempts_completed"),
            Counter::JobAttemptsFailed => Borrowed("job_attempts_failed"),
            Counter::RetentionInstancesRemoved => Borrowed("retention_instances_removed"),
            Counter::RetentionMessagesRemoved => Borrowed("retention_messages_removed"),
        }
    }
}

/// An accepted message and its outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageRecord {
    pub seq: u64,
    pub message_id: String,
    pub name: String,
    pub key: String,
    #[serde(with = "json_text")]
    pub variables: Vars,
    pub state: MessageState,
    pub reason: Option<Reason>,
    pub accepted_at: Millis,
    pub expires_at: Option<Millis>,
    pub candidates: Vec<u64>,
    pub instance: Option<u64>,
    pub element: Option<String>,
    /// Raw payload of a message that could not be decoded.
    pub raw: Option<Vec<u8>>,
    pub attributes: Vec<(String, String)>,
    pub settled_at: Option<Millis>,
    /// Free text: the error of a malformed payload, or why it was discarded.
    pub note: Option<String>,
    pub requeues: u32,
    /// Of an ambiguous message: every (instance, element) that waited for
    /// it (stored in the record's tail, see [`encode_message`]).
    #[serde(skip)]
    pub candidate_elements: Vec<(u64, String)>,
}

/// One thing a message record carries after its format-1 body. Variants are
/// encoded by position: new ones go last.
#[derive(Debug, Serialize, Deserialize)]
enum MessageField {
    /// Every (instance, element) an ambiguous message was open at.
    CandidateElements(Vec<(u64, String)>),
}

/// A message record's bytes: format 1, with a tail
/// ([`codec::TAILED_VERSION`]) only when it names candidate elements.
pub(crate) fn encode_message(rec: &MessageRecord) -> Result<Vec<u8>, CodecError> {
    let tail = (!rec.candidate_elements.is_empty()).then(|| {
        vec![MessageField::CandidateElements(
            rec.candidate_elements.clone(),
        )]
    });
    codec::encode_tailed(rec, tail.as_ref())
}

/// Reads [`encode_message`]'s bytes: every message record is read here.
pub(crate) fn decode_message(bytes: &[u8]) -> Result<MessageRecord, CodecError> {
    let (mut rec, tail): (MessageRecord, Vec<MessageField>) = codec::decode_tailed(bytes)?;
    for field in tail {
        match field {
            MessageField::CandidateElements(c) => rec.candidate_elements = c,
        }
    }
    Ok(rec)
}

/// What a job does when it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobKind {
    /// An async continuation: the engine runs the element itself.
    Continue,
    /// Work for a handler or external worker on a topic.
    Task { topic: String },
    /// A timer of a timer catch event or boundary event (`element`); cycles
    /// count down their remaining repetitions.
    Timer { repetitions_left: Option<u32> },
    /// The schedule of a timer start event (`element`) of one deployed
    /// version; it belongs to no instance (`instance` is 0). Cycles count down.
    StartTimer {
        /// The process id.
        process: String,
        /// The version whose schedule it is.
        version: u32,
        /// Fires left (unbounded when `None`).
        repetitions_left: Option<u32>,
    },
    /// asyncAfter: the element (`element`) has completed; the engine takes its
    /// outgoing flows when the job runs.
    ContinueAfter,
}

/// Job lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Due at its time, waiting to be taken.
    Ready,
    /// Held under a lease by a handler or worker.
    Locked,
    /// Out of attempts (or an uncaught BPMN error): waits for an operator.
    Incident,
}

/// An exclusive, expiring claim on a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub token: u64,
    pub until: Millis,
    /// Held by a handler inside the engine's own process: released when the
    /// database is opened again (that process is gone). Leases of external
    /// workers survive an engine restart and run out on their own.
    pub in_process: bool,
}

/// A durable unit of work attached to a resting token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    pub instance: u64,
    pub token: u64,
    pub element: String,
    pub kind: JobKind,
    pub state: JobState,
    pub due_at: Millis,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// Stable across retries and crashes: (instance, element, activation).
    pub idempotency_key: String,
    pub created_at: Millis,
    pub lease: Option<Lease>,
    /// Attempts allowed in all, when a worker set it; else the element's or engine's.
    pub max_attempts: Option<u32>,
    /// Every failed attempt, oldest first.
    pub history: Vec<Attempt>,
}

impl JobRecord {
    /// Records a failed attempt: counts it, keeps its error as the last one and
    /// in the history. The lease, if any, is given up (the attempt is over).
    pub fn attempt_failed(&mut self, at: Millis, error: String) {
        self.attempts += 1;
        self.lease = None;
        self.last_error = Some(error.clone());
        self.history.push(Attempt { at, error });
    }
}

/// An open user task in the task list (removed when completed or cancelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Task id.
    pub id: u64,
    /// The instance and the token that waits for it.
    pub instance: u64,
    /// The waiting token.
    pub token: u64,
    /// The process id of the instance.
    pub process: String,
    /// The user task's element id.
    pub element: String,
    /// The element's name, if the model gives one.
    pub name: Option<String>,
    /// Who holds it (claimed or assigned).
    pub assignee: Option<String>,
    /// Who may claim it.
    pub candidate_users: Vec<String>,
    /// Groups whose members may claim it.
    pub candidate_groups: Vec<String>,
    /// Due date as the model resolved it (ISO 8601).
    pub due: Option<String>,
    /// Follow-up date as the model resolved it (ISO 8601).
    pub follow_up: Option<String>,
    /// Priority as the model resolved it.
    pub priority: Option<String>,
    /// Form key.
    pub form_key: Option<String>,
    /// When it was created.
    pub created_at: Millis,
}

/// One failed attempt of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub at: Millis,
    pub error: String,
}

// ---------- typed access ----------

/// A record of a u64-keyed table, read the way its type is stored.
pub(crate) trait Record: Sized {
    /// The record from its stored bytes.
    fn from_bytes(bytes: &[u8]) -> Result<Self, CodecError>;
}

impl Record for InstanceRecord {
    fn from_bytes(bytes: &[u8]) -> Result<Self, CodecError> {
        decode_instance(bytes)
    }
}

macro_rules! plain_record {
    ($($t:ty),*) => {$(
        impl Record for $t {
            fn from_bytes(bytes: &[u8]) -> Result<Self, CodecError> {
                codec::decode(bytes)
            }
        }
    )*};
}
impl Record for MessageRecord {
    fn from_bytes(bytes: &[u8]) -> Result<Self, CodecError> {
        decode_message(bytes)
    }
}

plain_record!(JobRecord, TaskRecord);

/// Reads a record from a u64-keyed table.
pub(crate) fn get_record<T: Record>(
    table: &impl ReadableTable<u64, &'static [u8]>,
    id: u64,
) -> Result<Option<T>, StoreError> {
    match table.get(id)? {
        Some(g) => Ok(Some(T::from_bytes(g.value())?)),
        None => Ok(None),
    }
}

/// Accept sequences of every message recorded under this message id (any name).
pub(crate) fn seqs_by_id(
    dedup: &impl ReadableTable<(&'static str, &'static str), (u64, u64)>,
    id: &str,
) -> Result<Vec<u64>, StoreError> {
    let mut out = Vec::new();
    for row in dedup.range((id, "")..)? {
        let (k, v) = row?;
        if k.value().0 != id {
            break;
        }
        out.push(v.value().0);
    }
    Ok(out)
}

#[cfg(test)]
mod layout_tests {
    /// The key layout in the module doc names every table this module
    /// defines.
    #[test]
    fn the_key_layout_names_every_table() {
        let src = include_str!("schema.rs");
        let defined: std::collections::BTreeSet<&str> = src
            .split("TableDefinition::new(\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        let doc: String = src
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let named: std::collections::BTreeSet<&str> = doc
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| defined.contains(w))
            .collect();
        let missing: Vec<&&str> = defined.difference(&named).collect();
        assert!(
            missing.is_empty(),
            "tables missing from the key layout: {missing:?}"
        );
        assert!(defined.len() >= 33, "{defined:?}");
    }
}
