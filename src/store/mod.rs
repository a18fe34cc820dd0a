//! Every table, key encoding and stored record of the redb file.
//!
//! Invariant: only this module names redb tables. Each record is encoded by
//! [`crate::codec`] behind a format version byte. Keys that carry order are
//! sequential u64 or tuples ending in one (accept order, due time), so range
//! scans return oldest first and lookups cost O(log n) however large a table grows.
//!
//! Key encodings (tuple keys use redb's order-preserving tuple encoding):
//! - `instances`: instance id (u64) → [`InstanceRecord`] header ([`codec::HEADER_VERSION`]: no tokens inside)
//! - `tokens`: (instance, token) → [`Token`]; `token_scopes`: (instance, scope, token) → ();
//!   `scope_sizes`: (instance, scope) → count; `body_items`: (instance, body, index) → [`BodyItem`];
//!   `variables`: (instance, name) → JSON text
//! - `history`: (instance, sequence of the first entry) → the [`HistoryEntry`]s of one write ([`history`]: texts once per row, instants as differences), appended, removed with the instance
//! - `tokens_at`: (element id, since, instance, token) → () — who waits where, oldest first
//! - `subscriptions`: (message name, correlation key) → {(instance, token)},
//!   derived from the tokens' open registrations ([`Token::open_messages`])
//! - `signal_subs`: signal name → {(instance, token)}, derived likewise
//!   ([`Token::open_signals`])
//! - `expect`: (message, key) → {instance} — active instances that will still catch it
//! - `passed`: (message, key) → {instance} — instances that caught it or ended
//! - `messages`: accept sequence (u64) → [`MessageRecord`]
//! - `buffer`: (message, key, seq) → () — buffered messages per key in accept order
//! - `expiry`: (expires_at, seq) → () — the TTL sweep's index
//! - `meta`: sequences by name, and event counters under `count:NAME`
//! - `dedup`: (message id, message name) → (seq, accepted_at); also finds a message by id
//! - `jobs`: job id → [`JobRecord`]; `cont_due`: (due, job); `topic_due`: (topic, due, job);
//!   `leases`: (lease expiry, job); `start_timers`: (process, job) — the schedules of timer start events
//! - `tasks`: task id → [`TaskRecord`], the open user tasks; `tasks_at`: (element, created_at, task) → ()
//! - `version_tokens`: (process, version, element, since, instance, token) → () — per definition version
//! - `buffer_age`: (accepted_at, seq) → () — the oldest buffered message first; `parked`: seq → ();
//!   `instance_messages`: (instance, seq) → () — the messages an instance's detail lists
//! - `incident_jobs`: job id → () — the jobs out of attempts
//! - `parked_events`: event id → JSON — events about parked messages not yet
//!   published (`[notifications]`); written with the change they report
//! - `definitions`: (process, version) → [`DefinitionRecord`]; `definition_extras`: (process, version) →
//!   element extras; `definition_sources`: (process, version) → the BPMN XML; `definition_latest`:
//!   process → latest version; `message_catalog`: (message, process) → what starts or waits for it
//!
//! A test (`the_key_layout_names_every_table`) holds this list to the table definitions below.

pub mod damage;
pub(crate) mod history;
mod tokens;
mod variables;

pub use tokens::{BodyItem, Tokens};
pub(crate) use tokens::{decode_token, encode_token};
pub use variables::{Variables, names_of};

use crate::Vars;
use crate::clock::Millis;
use crate::codec::{self, CodecError, json_text};
use crate::model::Process;
use redb::{MultimapTableDefinition, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `meta` key of the database's format (see [`DB_FORMAT`]).
pub(crate) const FORMAT_KEY: &str = "format_version";
/// The database format this build writes: 2 keeps instance histories in
/// `history` rows, 3 an instance's tokens and multi-instance items in rows of
/// their own (`tokens`, `body_items`), 4 every boundary subscription with its
/// token (the `subscriptions` and `signal_subs` rows derive from the token
/// rows); a database of an earlier format is migrated when it opens, one of a
/// later format is refused.
pub(crate) const DB_FORMAT: u64 = 4;
/// `meta` keys of the partition a database is (absent: unpartitioned).
pub(crate) const PARTITION_COUNT_KEY: &str = "partition_count";
pub(crate) const PARTITION_INDEX_KEY: &str = "partition_index";
/// Prefix of counter keys in `meta`.
pub(crate) const COUNTER_PREFIX: &str = "count:";
/// `meta` keys of the gauges the store keeps with its rows: parked messages
/// per reason (`open:parked:REASON`) and jobs in an incident.
pub(crate) const PARKED_GAUGE: &str = "open:parked:";
pub(crate) const INCIDENTS_GAUGE: &str = "open:incidents";
/// `meta` key of the index generation a database was brought to; below
/// [`INDEX_VERSION`] the derived rows and gauges are rebuilt from the records
/// when the database is opened (records and format stay as they are).
pub(crate) const INDEX_VERSION_KEY: &str = "index_version";
pub(crate) const INDEX_VERSION: u64 = 4;
/// Gauges per definition version and element (`stat:KIND:PROCESS:VERSION:ELEMENT`;
/// BPMN ids are NCNames, so they hold no `:`): tokens resting there, ready jobs
/// and jobs in an incident of that element.
pub(crate) const STAT_TOKENS: &str = "stat:tokens:";
pub(crate) const STAT_READY: &str = "stat:ready:";
pub(crate) const STAT_INCIDENTS: &str = "stat:incidents:";
/// Gauges per message name: buffered (`open:buffered:NAME`) and parked
/// (`open:parked_by:REASON:NAME`; the name last, since names may hold `:`).
pub(crate) const BUFFERED_BY_NAME: &str = "open:buffered:";
pub(crate) const PARKED_BY_NAME: &str = "open:parked_by:";

/// The `meta` key of a per-version element gauge.
pub(crate) fn stat_key(kind: &str, process: &str, version: u32, element: &str) -> String {
    format!("{kind}{process}:{version}:{element}")
}

/// Tokens by (process, version, element, since, instance, token): per
/// definition version, the longest-waiting token at an element is the first
/// row of its range.
pub(crate) const VERSION_TOKENS: TableDefinition<(&str, u32, &str, u64, u64, u64), ()> =
    TableDefinition::new("version_tokens");
pub(crate) const DEFINITIONS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definitions");
/// (process, version) → the [`crate::model::Extras`] of its elements, as
/// (element index, extras) pairs; a row only where some element has any. Kept
/// beside the definition record because that record's layout is format 1.
pub(crate) const DEFINITION_EXTRAS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definition_extras");
pub(crate) const LATEST: TableDefinition<&str, u32> = TableDefinition::new("definition_latest");
/// (process, version) → the BPMN XML it was deployed from, for the console's
/// diagram (versions deployed before this table existed have no row).
pub(crate) const DEFINITION_SOURCES: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definition_sources");
pub(crate) const CATALOG: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("message_catalog");
pub(crate) const INSTANCES: TableDefinition<u64, &[u8]> = TableDefinition::new("instances");
/// (instance, sequence of its first entry) → the [`HistoryEntry`]s one write
/// of the instance appended (one row per step, not per entry), never
/// rewritten: a step writes its own entries and reads none, so an instance's
/// history costs nothing on its later steps.
pub(crate) const HISTORY: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("history");
/// An instance's tokens, one row per token: (instance, token) → the token
/// ([`encode_token`]). A step reads and writes the rows it touches.
pub(crate) const TOKENS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("tokens");
/// (instance, scope, token) → (): the tokens running in a scope (0: at the
/// process level), derived from the token rows.
pub(crate) const TOKEN_SCOPES: TableDefinition<(u64, u64, u64), ()> =
    TableDefinition::new("token_scopes");
/// (instance, scope) → how many tokens run in it, derived from the token
/// rows; no row for an empty scope.
pub(crate) const SCOPE_SIZES: TableDefinition<(u64, u64), u64> =
    TableDefinition::new("scope_sizes");
/// (instance, name) → the variable's JSON text: an instance's variables, one
/// row each; a step reads the ones it names.
pub(crate) const VARIABLES: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("variables");
/// (instance, body token, index) → [`BodyItem`]: the items and outputs of a
/// multi-instance body, removed with the body's token.
pub(crate) const BODY_ITEMS: TableDefinition<(u64, u64, u32), &[u8]> =
    TableDefinition::new("body_items");
pub(crate) const TOKENS_AT: TableDefinition<(&str, u64, u64, u64), ()> =
    TableDefinition::new("tokens_at");
pub(crate) const SUBSCRIPTIONS: MultimapTableDefinition<(&str, &str), (u64, u64)> =
    MultimapTableDefinition::new("subscriptions");
pub(crate) const SIGNAL_SUBS: MultimapTableDefinition<&str, (u64, u64)> =
    MultimapTableDefinition::new("signal_subs");
pub(crate) const EXPECT: MultimapTableDefinition<(&str, &str), u64> =
    MultimapTableDefinition::new("expect");
pub(crate) const PASSED: MultimapTableDefinition<(&str, &str), u64> =
    MultimapTableDefinition::new("passed");
pub(crate) const MESSAGES: TableDefinition<u64, &[u8]> = TableDefinition::new("messages");
pub(crate) const DEDUP: TableDefinition<(&str, &str), (u64, u64)> = TableDefinition::new("dedup");
pub(crate) const BUFFER: TableDefinition<(&str, &str, u64), ()> = TableDefinition::new("buffer");
pub(crate) const EXPIRY: TableDefinition<(u64, u64), ()> = TableDefinition::new("expiry");
/// Buffered messages by (accepted_at, seq): the oldest buffered message is the
/// first row, so its age is one lookup however many wait.
pub(crate) const BUFFER_AGE: TableDefinition<(u64, u64), ()> = TableDefinition::new("buffer_age");
pub(crate) const PARKED: TableDefinition<u64, ()> = TableDefinition::new("parked");
/// (instance, message seq): the messages an instance's detail lists — one
/// correlated into it, and a parked one that names it as a candidate.
pub(crate) const INSTANCE_MESSAGES: TableDefinition<(u64, u64), ()> =
    TableDefinition::new("instance_messages");
/// Open user tasks by (element, created_at, task): the oldest open task of an
/// element is the first row of its range.
pub(crate) const TASKS_AT: TableDefinition<(&str, u64, u64), ()> = TableDefinition::new("tasks_at");
/// Gauge of open user tasks per element (`open:tasks:ELEMENT`).
pub(crate) const OPEN_TASKS: &str = "open:tasks:";
/// The ids of the jobs in an incident (out of attempts), for the incident list.
pub(crate) const INCIDENT_JOBS: TableDefinition<u64, ()> = TableDefinition::new("incident_jobs");
pub(crate) const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");
pub(crate) const CONT_DUE: TableDefinition<(u64, u64), ()> = TableDefinition::new("cont_due");
pub(crate) const TOPIC_DUE: TableDefinition<(&str, u64, u64), ()> =
    TableDefinition::new("topic_due");
pub(crate) const LEASES: TableDefinition<(u64, u64), ()> = TableDefinition::new("leases");
pub(crate) const START_TIMERS: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("start_timers");
pub(crate) const TASKS: TableDefinition<u64, &[u8]> = TableDefinition::new("tasks");
/// Events about parked messages not yet published (`[notifications]`): id →
/// the event as JSON. Written in the transaction that parks, expires,
/// requeues or discards; removed once the broker confirmed the publish.
pub(crate) const PARKED_EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("parked_events");

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

mod overlay;
#[cfg(test)]
mod sim;
mod snapshot;
mod tables;
#[cfg(test)]
mod verify;

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

pub(crate) use snapshot::Snapshot;
pub(crate) use tables::{Resting, Tables};
#[cfg(test)]
pub(crate) use verify::MemoryStore;

// ---------- records ----------

/// A deployed process version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DefinitionRecord {
    pub process: Process,
    pub version: u32,
    pub deployed_at: Millis,
    pub file: String,
    /// Hash of source and key overrides; an identical redeploy keeps the version.
    pub fingerprint: u64,
}

/// What a message name means to one process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CatalogEntry {
    pub key_variable: Option<String>,
    pub starts: bool,
}

/// Where a resting token waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Wait {
    Message {
        name: String,
        key: String,
    },
    Signal {
        name: String,
    },
    Job {
        job: u64,
    },
    /// An intermediate timer catch event; the job fires it.
    Timer {
        job: u64,
    },
    /// An event-based gateway: whichever of these happens first.
    Events {
        messages: Vec<(String, String)>,
        signals: Vec<String>,
        timers: Vec<u64>,
    },
    Join {
        flow: usize,
    },
    Incident {
        error: String,
    },
    /// A user task: the open task record `task` in the task list.
    /// (Stored in instance records: new variants go last.)
    Task {
        /// The task id.
        task: u64,
    },
    /// The token holds the scope of an embedded subprocess: tokens whose
    /// `scope` is its id run inside; it holds the subprocess's boundary events
    /// and leaves when the last of them has ended.
    Scope,
    /// A call activity: waits for the child instance it started.
    Child {
        /// The child instance's id.
        instance: u64,
    },
    /// The multi-instance body of an activity: its inner instances are the
    /// tokens at the same element whose scope is this token; the body holds
    /// the activity's boundary events and leaves when the last inner instance
    /// has completed (or the completion condition held).
    Body {
        /// The items, as JSON text, fixed when the body started (empty for
        /// `loopCardinality`: the inner instances have no item).
        items: Vec<String>,
        /// The output collection as JSON text, one entry per item (empty
        /// without one): kept here, not in a variable, so that no inner
        /// instance's result can overwrite it.
        outputs: Vec<String>,
        /// Inner instances in all.
        count: u32,
        /// Inner instances started so far (sequential: the next one's index).
        started: u32,
        /// Inner instances completed so far.
        completed: u32,
    },
    /// A conditional catch event, or the listener of a conditional event
    /// subprocess: nothing is registered; the engine asks the condition
    /// after every command that changed the instance's variables.
    Condition,
    /// A wait state (a receive task or catch event without an event
    /// definition): nothing is registered; a caller triggers it.
    Trigger,
}

impl Wait {
    /// What the token waits for, in words (views, refusals). A body's count
    /// of running inner instances is the caller's to add.
    pub fn describe(&self) -> String {
        match self {
            Wait::Message { name, key } => format!("message {name} key {key}"),
            Wait::Signal { name } => format!("signal {name}"),
            Wait::Job { job } => format!("job {job}"),
            Wait::Timer { job } => format!("timer job {job}"),
            Wait::Events { .. } => "the first of its gateway's events".to_string(),
            Wait::Join { .. } => "the other branches of the join".to_string(),
            Wait::Incident { error } => format!("an operator: {error}"),
            Wait::Task { task } => format!("user task {task}"),
            Wait::Scope => "the tokens inside it to end".to_string(),
            Wait::Child { instance } => format!("called instance {instance} to end"),
            Wait::Condition => "its condition to hold".to_string(),
            Wait::Trigger => "to be triggered".to_string(),
            Wait::Body {
                count, completed, ..
            } => format!("its inner instances: {completed} of {count} completed"),
        }
    }

    /// The jobs this wait holds: a job or timer it waits for, the timers of
    /// an event-based gateway. (Boundary timers are the token's `timers`.)
    pub fn jobs(&self) -> Vec<u64> {
        match self {
            Wait::Job { job } | Wait::Timer { job } => vec![*job],
            Wait::Events { timers, .. } => timers.clone(),
            Wait::Message { .. }
            | Wait::Signal { .. }
            | Wait::Join { .. }
            | Wait::Incident { .. }
            | Wait::Task { .. }
            | Wait::Scope
            | Wait::Child { .. }
            | Wait::Body { .. }
            | Wait::Condition
            | Wait::Trigger => Vec::new(),
        }
    }

    /// The (message, key) subscriptions this wait holds open (a message
    /// catch, an event-based gateway's messages). Boundary subscriptions are
    /// the token's `boundary_messages`.
    pub fn messages(&self) -> Vec<(&str, &str)> {
        match self {
            Wait::Message { name, key } => vec![(name.as_str(), key.as_str())],
            Wait::Events { messages, .. } => messages
                .iter()
                .map(|(n, k)| (n.as_str(), k.as_str()))
                .collect(),
            Wait::Signal { .. }
            | Wait::Job { .. }
            | Wait::Timer { .. }
            | Wait::Join { .. }
            | Wait::Incident { .. }
            | Wait::Task { .. }
            | Wait::Scope
            | Wait::Child { .. }
            | Wait::Body { .. }
            | Wait::Condition
            | Wait::Trigger => Vec::new(),
        }
    }

    /// The signals this wait is subscribed to (a signal catch, an
    /// event-based gateway's signals).
    pub fn signals(&self) -> Vec<&str> {
        match self {
            Wait::Signal { name } => vec![name.as_str()],
            Wait::Events { signals, .. } => signals.iter().map(String::as_str).collect(),
            Wait::Message { .. }
            | Wait::Job { .. }
            | Wait::Timer { .. }
            | Wait::Join { .. }
            | Wait::Incident { .. }
            | Wait::Task { .. }
            | Wait::Scope
            | Wait::Child { .. }
            | Wait::Body { .. }
            | Wait::Condition
            | Wait::Trigger => Vec::new(),
        }
    }
}

/// A token at rest. Between transactions every live token rests somewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub id: u64,
    pub element: String,
    pub wait: Wait,
    pub since: Millis,
    /// Timer jobs of the boundary events of the activity this token is in.
    pub timers: Vec<u64>,
    /// The token holding the scope this token runs in ([`Wait::Scope`], at an
    /// embedded subprocess); 0 for the process itself. Stored after the
    /// record (see [`encode_instance`]), so records without scopes keep the
    /// layout of format version 1.
    #[serde(skip)]
    pub scope: u64,
    /// Variables local to this token and the tokens running inside it (a
    /// multi-instance inner instance's element variable and loop counter).
    /// Stored in the record's tail, like `scope`.
    #[serde(skip)]
    pub locals: Vars,
    /// The (message, key) subscriptions the message boundary events of the
    /// activity this token is in opened, with the key as it was then: closing
    /// removes exactly these, whatever the key variable says by then. Stored
    /// in the record's tail; empty in records written before it was kept
    /// (their boundaries close by the key they have now).
    #[serde(skip)]
    pub boundary_messages: Vec<(String, String)>,
    /// The signals the signal boundary events of the activity this token is
    /// in subscribed to: closing removes exactly these. Stored in the token
    /// row's tail.
    #[serde(skip)]
    pub boundary_signals: Vec<String>,
}

impl Token {
    /// Every (message, key) subscription this token holds open: its wait's
    /// and its activity's boundary events'. The store derives the
    /// `subscriptions` rows from exactly these.
    pub fn open_messages(&self) -> Vec<(&str, &str)> {
        let mut out = self.wait.messages();
        out.extend(
            self.boundary_messages
                .iter()
                .map(|(n, k)| (n.as_str(), k.as_str())),
        );
        out
    }

    /// Every signal subscription this token holds open: its wait's and its
    /// activity's boundary events'. The store derives the `signal_subs` rows
    /// from exactly these.
    pub fn open_signals(&self) -> Vec<&str> {
        let mut out = self.wait.signals();
        out.extend(self.boundary_signals.iter().map(String::as_str));
        out
    }
}

/// One line of an instance's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub element: String,
    pub event: String,
    pub at: Millis,
}

/// A process instance with its tokens and variables; its history lives in
/// the `history` rows. (Read and written through [`decode_instance`] and
/// [`encode_instance`], which keep the token scopes.)
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub id: u64,
    pub process: String,
    pub version: u32,
    pub business_key: Option<String>,
    /// Its variables: rows of their own (`variables`), read as they are
    /// asked for (see [`Variables`]).
    #[serde(skip)]
    pub variables: Variables,
    /// Its tokens: rows of their own (`tokens`), read as they are asked for
    /// (see [`Tokens`]).
    #[serde(skip)]
    pub tokens: Tokens,
    pub next_token: u64,
    pub activations: u64,
    /// History entries written as rows so far: the next entry's sequence.
    pub history_len: u64,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    /// Ended because an operator cancelled its last token.
    pub cancelled: bool,
    /// (message, key) pairs registered in `expect`.
    pub expects: Vec<(String, String)>,
    /// How many tokens run at the process level (scope 0), kept here by the
    /// store from the token rows (a scope inside has `scope_sizes` rows):
    /// "has the instance a token left" is answered from the header.
    pub top_level: u64,
    /// The instance and token of the call activity that started this one
    /// (stored in the record's tail, see [`encode_instance`]).
    #[serde(skip)]
    pub called_by: Option<(u64, u64)>,
    /// History entries of this transaction, not written yet: the store
    /// appends them as rows from `history_len` on when it writes the record.
    #[serde(skip)]
    pub new_history: Vec<HistoryEntry>,
}

/// The layout of an instance record before its history became rows (record
/// versions 1 and 2): read to migrate, never written.
#[derive(Deserialize)]
struct LegacyInstanceRecord {
    id: u64,
    process: String,
    version: u32,
    business_key: Option<String>,
    #[serde(with = "json_text")]
    variables: Vars,
    tokens: Vec<Token>,
    next_token: u64,
    activations: u64,
    history: Vec<HistoryEntry>,
    started_at: Millis,
    ended_at: Option<Millis>,
    cancelled: bool,
    expects: Vec<(String, String)>,
}

/// The layout of an instance record whose history was rows but whose tokens
/// were inside (record version 3): read to migrate, never written.
#[derive(Deserialize)]
struct InlineTokensRecord {
    id: u64,
    process: String,
    version: u32,
    business_key: Option<String>,
    #[serde(with = "json_text")]
    variables: Vars,
    tokens: Vec<Token>,
    next_token: u64,
    activations: u64,
    history_len: u64,
    started_at: Millis,
    ended_at: Option<Millis>,
    cancelled: bool,
    expects: Vec<(String, String)>,
}

impl InlineTokensRecord {
    /// The record with its tokens (their tail fields applied) as a complete set.
    fn into_record(self, tokens: Vec<Token>, new_history: Vec<HistoryEntry>) -> InstanceRecord {
        let top_level = tokens.iter().filter(|t| t.scope == 0).count() as u64;
        InstanceRecord {
            top_level,
            id: self.id,
            process: self.process,
            version: self.version,
            business_key: self.business_key,
            variables: Variables::complete(self.variables),
            tokens: Tokens::complete(tokens),
            next_token: self.next_token,
            activations: self.activations,
            history_len: self.history_len,
            started_at: self.started_at,
            ended_at: self.ended_at,
            cancelled: self.cancelled,
            expects: self.expects,
            called_by: None,
            new_history,
        }
    }
}

impl From<LegacyInstanceRecord> for (InlineTokensRecord, Vec<HistoryEntry>) {
    /// Its history becomes entries to append: rows from 0 on.
    fn from(l: LegacyInstanceRecord) -> Self {
        (
            InlineTokensRecord {
                id: l.id,
                process: l.process,
                version: l.version,
                business_key: l.business_key,
                variables: l.variables,
                tokens: l.tokens,
                next_token: l.next_token,
                activations: l.activations,
                history_len: 0,
                started_at: l.started_at,
                ended_at: l.ended_at,
                cancelled: l.cancelled,
                expects: l.expects,
            },
            l.history,
        )
    }
}

/// How deep scopes are followed outwards from a token: far beyond any
/// model's nesting, a bound only against damaged rows that form a cycle.
pub const MAX_NESTING: usize = 10_000;

/// The counters a multi-instance body shows its inner instances:
/// `nrOfInstances`, `nrOfCompletedInstances`, `nrOfActiveInstances`.
pub const COUNTERS: [&str; 3] = [
    "nrOfInstances",
    "nrOfCompletedInstances",
    "nrOfActiveInstances",
];

impl InstanceRecord {
    /// Appends a history entry (written as a row with the record).
    pub fn record(&mut self, element: &str, event: &str, at: Millis) {
        self.new_history.push(HistoryEntry {
            element: element.to_string(),
            event: event.to_string(),
            at,
        });
    }

    /// The variables named in `names` as token `token` sees them (see
    /// [`InstanceRecord::view`]), without copying the others: what a worker
    /// that asked for only these gets. A name no scope has is left out.
    pub fn view_of(&self, token: u64, names: &[String]) -> Vars {
        let chain = self.chain(token);
        let mut out = Vars::new();
        'names: for name in names {
            for t in &chain {
                if let Some(v) = t.locals.get(name) {
                    out.insert(name.clone(), v.clone());
                    continue 'names;
                }
                if let Wait::Body {
                    count, completed, ..
                } = t.wait
                    && let Some(i) = COUNTERS.iter().position(|c| c == name)
                {
                    let active = self.tokens.scope_size(t.id) as usize;
                    let n = [count as usize, completed as usize, active][i];
                    out.insert(name.clone(), n.into());
                    continue 'names;
                }
            }
            if let Some(v) = self.variables.lookup(name) {
                out.insert(name.clone(), v.clone());
            }
        }
        out
    }

    /// The variables token `token` sees: the instance's, overlaid by the
    /// local variables of each scope around the token (outermost first) and
    /// its own; a multi-instance body adds `nrOfInstances`,
    /// `nrOfCompletedInstances` and `nrOfActiveInstances`. Borrowed when
    /// nothing local applies (the common case).
    pub fn view(&self, token: u64) -> std::borrow::Cow<'_, Vars> {
        let chain = self.chain(token);
        if chain
            .iter()
            .all(|t| t.locals.is_empty() && !matches!(t.wait, Wait::Body { .. }))
        {
            return std::borrow::Cow::Borrowed(&*self.variables);
        }
        let mut vars: Vars = (*self.variables).clone();
        for t in chain.iter().rev() {
            if let Wait::Body {
                count, completed, ..
            } = t.wait
            {
                let active = self.tokens.scope_size(t.id) as usize;
                for (name, n) in COUNTERS
                    .iter()
                    .zip([count as usize, completed as usize, active])
                {
                    vars.insert(name.to_string(), n.into());
                }
            }
            vars.extend(t.locals.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        std::borrow::Cow::Owned(vars)
    }

    /// Sets variable `name` as token `token` writes it: in the innermost
    /// scope around the token (the token itself first) that has it as a
    /// local variable, else in the instance's variables.
    pub fn assign(&mut self, token: u64, name: &str, value: serde_json::Value) {
        let chain = self.chain(token);
        let counted = chain.iter().any(|t| matches!(t.wait, Wait::Body { .. }));
        if counted && COUNTERS.contains(&name) {
            return; // a body's counters are computed, not set
        }
        let owner = chain
            .iter()
            .find(|t| t.locals.contains_key(name))
            .map(|t| t.id);
        match owner.and_then(|id| self.tokens.get_mut(id)) {
            Some(t) => {
                t.locals.insert(name.to_string(), value);
            }
            None => self.variables.set(name, value),
        }
    }

    /// Token `token` and the tokens holding the scopes around it, innermost
    /// first (at most [`MAX_NESTING`], should the rows be damaged). Whoever
    /// asks has read them (`Tables::fill_chain`).
    fn chain(&self, token: u64) -> Vec<&Token> {
        let mut out: Vec<&Token> = Vec::new();
        let mut at = token;
        while at != 0 && out.len() <= MAX_NESTING {
            let Some(t) = self.tokens.get(at) else {
                break;
            };
            out.push(t);
            at = t.scope;
        }
        out
    }

    /// The multi-instance body token `token` is an inner instance of: its
    /// scope's holder, at the same element, holding [`Wait::Body`].
    pub fn body_of(&self, token: u64) -> Option<u64> {
        let t = self.tokens.get(token)?;
        if t.scope == 0 {
            return None;
        }
        let h = self.tokens.get(t.scope)?;
        (matches!(h.wait, Wait::Body { .. }) && h.element == t.element).then_some(h.id)
    }
}

/// One thing an instance record carries after its format-1 body (see
/// [`encode_instance`]). Variants are encoded by position: new ones go last,
/// and a build that does not know one refuses the record.
#[derive(Debug, Serialize, Deserialize)]
enum TailField {
    /// The scope of each token, in token order.
    Scopes(Vec<u64>),
    /// The call activity that started this instance: (instance, token).
    CalledBy(u64, u64),
    /// The local variables of the tokens that have any: (token, JSON text).
    Locals(Vec<(u64, String)>),
    /// The boundary subscriptions of the tokens that hold any: (token,
    /// [(message, key)]).
    Subscribed(Vec<(u64, Vec<(String, String)>)>),
}

/// An instance header's bytes ([`codec::HEADER_VERSION`]): the record
/// without its tokens (rows of their own, [`encode_token`]) and without
/// `new_history` (rows, [`Tables::put_instance`]); the call activity that
/// started it in its tail.
pub(crate) fn encode_instance(rec: &InstanceRecord) -> Result<Vec<u8>, CodecError> {
    let mut tail = Vec::new();
    if let Some((i, t)) = rec.called_by {
        tail.push(TailField::CalledBy(i, t));
    }
    codec::encode_versioned(rec, &tail, codec::HEADER_VERSION)
}

/// Reads an instance record: a header ([`encode_instance`]; its tokens are
/// read on demand), or a record of the layouts before it (versions 1 to 3,
/// tokens inside: they come back as a complete set, and a history inside as
/// `new_history`, for the migration to write as rows).
pub(crate) fn decode_instance(bytes: &[u8]) -> Result<InstanceRecord, CodecError> {
    let version = codec::version_of(bytes)?;
    if version == codec::HEADER_VERSION {
        let (mut rec, tail): (InstanceRecord, Vec<TailField>) =
            codec::decode_versioned(bytes, codec::HEADER_VERSION)?;
        for field in tail {
            match field {
                TailField::CalledBy(i, t) => rec.called_by = Some((i, t)),
                TailField::Scopes(_) | TailField::Locals(_) | TailField::Subscribed(_) => {
                    return Err(CodecError::Decode(format!(
                        "instance {}: token fields in the tail of a header",
                        rec.id
                    )));
                }
            }
        }
        rec.tokens = Tokens::on_demand();
        rec.tokens.sized(0, rec.top_level);
        rec.variables = Variables::on_demand();
        return Ok(rec);
    }
    let (mut inline, history, tail): (InlineTokensRecord, Vec<HistoryEntry>, Vec<TailField>) =
        if version == codec::ROWS_VERSION {
            let (rec, tail) = codec::decode_versioned(bytes, codec::ROWS_VERSION)?;
            (rec, Vec::new(), tail)
        } else {
            let (legacy, tail): (LegacyInstanceRecord, Vec<TailField>) =
                codec::decode_tailed(bytes)?;
            let (rec, history) = legacy.into();
            (rec, history, tail)
        };
    let id = inline.id;
    let mut tokens = std::mem::take(&mut inline.tokens);
    let mut called_by = None;
    // token id → position: a tail names tokens by id (a linear search for
    // each would cost O(n²) in a large multi-instance activity)
    let at: std::collections::HashMap<u64, usize> =
        tokens.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    for field in tail {
        match field {
            TailField::Scopes(scopes) => {
                if scopes.len() != tokens.len() {
                    return Err(CodecError::Decode(format!(
                        "instance {id}: {} token scopes for {} tokens",
                        scopes.len(),
                        tokens.len()
                    )));
                }
                for (t, s) in tokens.iter_mut().zip(scopes) {
                    t.scope = s;
                }
            }
            TailField::CalledBy(i, t) => called_by = Some((i, t)),
            TailField::Subscribed(subs) => {
                for (token, pairs) in subs {
                    match at.get(&token).and_then(|&i| tokens.get_mut(i)) {
                        Some(t) => t.boundary_messages = pairs,
                        None => {
                            return Err(CodecError::Decode(format!(
                                "instance {id}: subscriptions of token {token}, which it does not have"
                            )));
                        }
                    }
                }
            }
            TailField::Locals(locals) => {
                for (token, json) in locals {
                    let vars: Vars = serde_json::from_str(&json).map_err(|e| {
                        CodecError::Decode(format!(
                            "instance {id}: local variables of token {token}: {e}"
                        ))
                    })?;
                    match at.get(&token).and_then(|&i| tokens.get_mut(i)) {
                        Some(t) => t.locals = vars,
                        None => {
                            return Err(CodecError::Decode(format!(
                                "instance {id}: local variables of token {token}, which it does not have"
                            )));
                        }
                    }
                }
            }
        }
    }
    let mut rec = inline.into_record(tokens, history);
    rec.called_by = called_by;
    Ok(rec)
}

/// Every token row of instance `inst`, in id order.
pub(crate) fn read_tokens(
    table: &impl ReadableTable<(u64, u64), &'static [u8]>,
    inst: u64,
) -> Result<Vec<Token>, StoreError> {
    let mut out = Vec::new();
    for row in table.range((inst, 0)..=(inst, u64::MAX))? {
        out.push(decode_token(row?.1.value())?);
    }
    Ok(out)
}

/// Every variable row of instance `inst`.
pub(crate) fn read_variables(
    table: &impl ReadableTable<(u64, &'static str), &'static [u8]>,
    inst: u64,
) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
    let mut out = Vec::new();
    for row in table.range((inst, "")..)? {
        let (k, v) = row?;
        let (i, name) = k.value();
        if i != inst {
            break;
        }
        let value = serde_json::from_slice(v.value()).map_err(|e| {
            CodecError::Decode(format!("variable '{name}' of instance {inst}: {e}"))
        })?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// An instance record from its header's bytes with every token and every
/// variable read from their rows (a record of a layout before the header
/// holds them already).
pub(crate) fn read_instance(
    bytes: &[u8],
    tokens: &impl ReadableTable<(u64, u64), &'static [u8]>,
    variables: &impl ReadableTable<(u64, &'static str), &'static [u8]>,
) -> Result<InstanceRecord, StoreError> {
    let mut rec = decode_instance(bytes)?;
    if !rec.tokens.is_complete() {
        rec.tokens = Tokens::complete(read_tokens(tokens, rec.id)?);
    }
    if !rec.variables.is_complete() {
        rec.variables =
            Variables::complete(read_variables(variables, rec.id)?.into_iter().collect());
    }
    Ok(rec)
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

/// Fills the element extras stored beside a definition into its record.
pub(crate) fn with_extras(
    mut rec: DefinitionRecord,
    extras: Option<&[u8]>,
) -> Result<DefinitionRecord, StoreError> {
    if let Some(bytes) = extras {
        let (pairs, tail): (Vec<(u32, crate::model::Extras)>, Vec<ExtraField>) =
            codec::decode_tailed(bytes)?;
        for (idx, x) in pairs {
            if let Some(el) = rec.process.elements.get_mut(idx as usize) {
                el.extras = x;
            }
        }
        for field in tail {
            match field {
                ExtraField::Multi(multi) => {
                    for (idx, m) in multi {
                        if let Some(el) = rec.process.elements.get_mut(idx as usize) {
                            el.extras.multi = Some(m);
                        }
                    }
                }
            }
        }
    }
    Ok(rec)
}

/// What the extras record of a definition carries after its format-1 body
/// (the element extras added since). Variants are encoded by position: new
/// ones go last, and a build that does not know one refuses the record.
#[derive(Debug, Serialize, Deserialize)]
enum ExtraField {
    /// The multi-instance characteristics of elements: (element index, them).
    Multi(Vec<(u32, crate::model::MultiInstance)>),
}

/// The element extras of a definition to store beside it (`None`: nothing set).
pub(crate) fn extras_of(rec: &DefinitionRecord) -> Result<Option<Vec<u8>>, StoreError> {
    let pairs: Vec<(u32, &crate::model::Extras)> = rec
        .process
        .elements
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.extras.is_empty())
        .map(|(i, e)| (i as u32, &e.extras))
        .collect();
    if pairs.is_empty() {
        return Ok(None);
    }
    let multi: Vec<(u32, &crate::model::MultiInstance)> = rec
        .process
        .elements
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i as u32, e.extras.multi.as_ref()?)))
        .collect();
    let tail = (!multi.is_empty()).then(|| vec![ExtraFieldRef::Multi(multi)]);
    Ok(Some(codec::encode_tailed(&pairs, tail.as_ref())?))
}

/// [`ExtraField`] as written (borrowing what it carries).
#[derive(Serialize)]
enum ExtraFieldRef<'a> {
    Multi(Vec<(u32, &'a crate::model::MultiInstance)>),
}

/// Creates every table so that read transactions find them, stamps the
/// format version and the partition (`path` names the file in a refusal).
/// Returns the partition the database is: the one stamped, or `given` for a
/// new database (unpartitioned when none is given).
pub(crate) fn init(
    db: &redb::Database,
    path: &str,
    given: Option<crate::partition::Partition>,
) -> Result<crate::partition::Partition, StoreError> {
    // a newer format is refused before anything is written
    {
        let r = db.begin_read()?;
        let found = match r.open_table(META) {
            Ok(meta) => meta.get(FORMAT_KEY)?.map(|g| g.value()),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(redb::Error::from(e).into()),
        };
        if let Some(found) = found.filter(|&v| v > DB_FORMAT) {
            return Err(StoreError::NewerFormat {
                path: path.to_string(),
                found,
                reads: DB_FORMAT,
            });
        }
    }
    let tx = db.begin_write()?;
    let partition = {
        let mut t = Tables::open(&tx)?;
        let new = t.is_new()?;
        let partition = t.stamp_partition(path, given, new)?;
        t.stamp_format(path)?;
        t.upgrade_indexes()?;
        partition
    };
    tx.commit()?;
    Ok(partition)
}

/// Opens (or creates) the database file, mapping a held lock to a clear
/// error; as partition `given` (refused when the file is another one), or as
/// whatever partition it is. Returns the partition it is.
pub(crate) fn open_db(
    path: &std::path::Path,
    given: Option<crate::partition::Partition>,
) -> Result<(redb::Database, crate::partition::Partition), StoreError> {
    damage::contain(path, || open_db_unchecked(path, given))
}

fn open_db_unchecked(
    path: &std::path::Path,
    given: Option<crate::partition::Partition>,
) -> Result<(redb::Database, crate::partition::Partition), StoreError> {
    let shown = path.display().to_string();
    // a database whose name is not durable is lost with everything in it
    let db = crate::disk::create_durably(&crate::disk::FileSystem, path, || {
        redb::Database::builder()
            .set_cache_size(256 * 1024 * 1024)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
                    path: shown.clone(),
                },
                other => StoreError::Open {
                    path: shown.clone(),
                    source: other,
                },
            })
    })?;
    let partition = init(&db, &shown, given)?;
    Ok((db, partition))
}

/// Opens (or creates) the database `path` on the simulated disk of the
/// power-loss tests, as [`open_db`] does on a file.
#[cfg(test)]
pub(crate) fn open_db_sim(
    disk: &crate::disk::sim::Disk,
    path: &std::path::Path,
    given: Option<crate::partition::Partition>,
) -> Result<(redb::Database, crate::partition::Partition), StoreError> {
    let name = path.to_string_lossy().to_string();
    let db = crate::disk::create_durably(disk, path, || {
        disk.create(&name)?;
        redb::Database::builder()
            .create_with_backend(sim::Backend {
                disk: disk.clone(),
                name: name.clone(),
            })
            .map_err(|e| StoreError::Open {
                path: name.clone(),
                source: e,
            })
    })?;
    let partition = init(&db, &name, given)?;
    Ok((db, partition))
}

/// Opens the database file for looking only: nothing is ever written to it.
/// redb's own recovery after a crash, and the replay of the write-ahead log,
/// happen in a copy-on-write overlay in memory ([`overlay::Overlay`]), so this works on a
/// full disk and on a read-only file system. Refused while another process
/// holds the file as its writer.
pub(crate) fn open_db_read_only(
    path: &std::path::Path,
    given: Option<crate::partition::Partition>,
) -> Result<(redb::Database, crate::partition::Partition), StoreError> {
    damage::contain(path, || open_db_read_only_unchecked(path, given))
}

fn open_db_read_only_unchecked(
    path: &std::path::Path,
    given: Option<crate::partition::Partition>,
) -> Result<(redb::Database, crate::partition::Partition), StoreError> {
    let shown = path.display().to_string();
    // a running writer holds the file: redb's read-only open says so
    if let Err(redb::DatabaseError::DatabaseAlreadyOpen) =
        redb::Database::builder().open_read_only(path)
    {
        return Err(StoreError::Locked { path: shown });
    }
    let file = std::fs::File::open(path).map_err(StoreError::Io)?;
    let db = redb::Database::builder()
        .set_cache_size(64 * 1024 * 1024)
        .create_with_backend(overlay::Overlay::new(file)?)
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?;
    let partition = init(&db, &shown, given)?;
    Ok((db, partition))
}

/// What [`check_file`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheck {
    /// Every page's checksum holds.
    Intact,
    /// Damaged, and redb can repair it by going back to the last commit
    /// whose pages are intact (what came after it is lost).
    Repairable(String),
    /// Damaged beyond what redb can repair.
    Damaged(String),
}

/// Checks every page of the database file at `path` without changing it:
/// redb's integrity check runs over an in-memory overlay of the file.
pub(crate) fn check_file(path: &std::path::Path) -> Result<FileCheck, StoreError> {
    let file = std::fs::File::open(path).map_err(StoreError::Io)?;
    let checked = damage::contain(path, || {
        let mut db = redb::Database::builder()
            .create_with_backend(overlay::Overlay::new(file)?)
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        Ok(db.check_integrity())
    });
    Ok(match checked {
        Ok(Ok(true)) => FileCheck::Intact,
        Ok(Ok(false)) => FileCheck::Repairable("redb found pages whose checksums fail".into()),
        Ok(Err(e)) => FileCheck::Damaged(e.to_string()),
        Err(StoreError::Damaged { detail, .. }) => FileCheck::Damaged(detail),
        Err(StoreError::Open { source, .. }) => FileCheck::Damaged(source.to_string()),
        Err(e) => return Err(e),
    })
}

/// Repairs the database file at `path` in place with redb's integrity check
/// (the caller holds no handle to it); returns what the check found.
pub(crate) fn repair_file(path: &std::path::Path) -> Result<FileCheck, StoreError> {
    damage::contain(path, || {
        let mut db = redb::Database::builder()
            .create(path)
            .map_err(|source| match source {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
                    path: path.display().to_string(),
                },
                source => StoreError::Open {
                    path: path.display().to_string(),
                    source,
                },
            })?;
        Ok(match db.check_integrity() {
            Ok(true) => FileCheck::Intact,
            Ok(false) => FileCheck::Repairable("repaired".into()),
            Err(e) => FileCheck::Damaged(e.to_string()),
        })
    })
}

/// A read-only snapshot.
pub(crate) fn begin_read(db: &redb::Database) -> Result<Snapshot, StoreError> {
    Ok(Snapshot::new(db.begin_read()?))
}

#[cfg(test)]
mod layout_tests {
    /// The key layout in the module doc names every table this module
    /// defines.
    #[test]
    fn the_key_layout_names_every_table() {
        let src = include_str!("mod.rs");
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
