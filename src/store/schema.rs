//! The store's schema: every redb table with its key and value types, and
//! the keys of the `meta` table.
//!
//! Invariant: a table is defined here and nowhere else, and the layout
//! below names every one of them; the bytes a key or value holds change only
//! with a format migration (`store::open`).
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
//! - `signals_seen`: signal id → (receivers reached, applied at) — a signal
//!   with an id is applied once per partition; `signals_seen_at`: (applied at,
//!   signal id) → (), for retention
//! - `signals_out`: seq → JSON — signals a process threw in a cluster, kept
//!   until every other partition took them (`[cluster]`); written with the throw
//! - `compensations`: (instance, seq) → [`compensations::Compensable`] — completed
//!   activities that can still be compensated, in order of completion
//! - `definition_heads`: (process, version) → [`DefinitionHead`] (how it was deployed);
//!   `definition_sources`: (process, version) → the BPMN XML it is parsed from;
//!   `definitions`, `definition_extras`: (process, version) → a format-4 model row kept
//!   where its source does not give it again (`store::pinned`); `definition_latest`:
//!   process → latest version; `message_catalog`: (message, process) → what starts or waits for it
//! - `decisions`: (decision, version) → [`DecisionRecord`] (with the DMN XML it was deployed
//!   from); `decision_latest`: decision → latest version
//! - `batches`: id → [`crate::store::batches::BatchRecord`]; `batch_items`:
//!   (batch, position) → the item and its outcome
//! - `slot_state`: `"state"` → [`crate::slots::SlotState`], the slot map a
//!   partition of a cluster holds and its moves in flight (none unpartitioned);
//!   `move_delta`: (move, kind, id) → () — the instances (kind 0) and
//!   message records (kind 1) of slots being moved away that were written
//!   after the move began, to be sent again before the slots change hands
//! - `audit`: seq → [`crate::audit::AuditEntry`] — who made an audited change,
//!   written with the change, removed by retention
//!
//! A test (`the_key_layout_names_every_table` in `store`) holds this list to
//! the table definitions below.

// the layout's links name the store's records
#[allow(unused_imports)]
use super::*;
use redb::{MultimapTableDefinition, TableDefinition};

pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `meta` key of the last batch of the log the database holds (durably at
/// a checkpoint; a backup's copy holds it too).
pub(crate) const WAL_BATCH: &str = "wal_batch";

/// A read snapshot as redb gives it (what a backup copies).
pub(crate) type RawSnapshot = redb::ReadTransaction;

/// `meta` key of the database's format (see [`DB_FORMAT`]).
pub(crate) const FORMAT_KEY: &str = "format_version";
/// The database format this build writes: 2 keeps instance histories in
/// `history` rows, 3 an instance's tokens and multi-instance items in rows of
/// their own (`tokens`, `body_items`), 4 every boundary subscription with its
/// token (the `subscriptions` and `signal_subs` rows derive from the token
/// rows), 5 a definition as its source (`definition_heads`) instead of its
/// model; a database of an earlier format is migrated when it opens, one of a
/// later format is refused.
pub(crate) const DB_FORMAT: u64 = 5;
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
/// (process, version) → a model of format 4 (`store::pinned`): only rows
/// whose source was not kept or parses to another model now.
pub(crate) const DEFINITIONS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definitions");
/// (process, version) → the element extras of a [`DEFINITIONS`] row, as
/// (element index, extras) pairs; a row only where some element has any.
pub(crate) const DEFINITION_EXTRAS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definition_extras");
pub(crate) const LATEST: TableDefinition<&str, u32> = TableDefinition::new("definition_latest");
/// (process, version) → the BPMN XML it was deployed from: parsed when the
/// version is loaded, drawn by the console (versions deployed before this
/// table existed have no row).
pub(crate) const DEFINITION_SOURCES: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definition_sources");
/// (process, version) → its [`DefinitionHead`]: a version deployed since
/// format 5 (or migrated to it) is its source and this.
pub(crate) const DEFINITION_HEADS: TableDefinition<(&str, u32), &[u8]> =
    TableDefinition::new("definition_heads");
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
/// Signals applied by id: id → (receivers reached, applied at).
pub(crate) const SIGNALS_SEEN: TableDefinition<&str, (u64, u64)> =
    TableDefinition::new("signals_seen");
/// The same signals by when they were applied, for retention.
pub(crate) const SIGNALS_SEEN_AT: TableDefinition<(u64, &str), ()> =
    TableDefinition::new("signals_seen_at");
/// Signals thrown by a process in a cluster, not yet taken by every other
/// partition: seq → JSON (`id`, `name`, `reached` here).
pub(crate) const SIGNALS_OUT: TableDefinition<u64, &[u8]> = TableDefinition::new("signals_out");
/// (instance, seq) → a [`compensations::Compensable`]: an activity that
/// completed and can be compensated; removed when it is, when its scope is
/// cancelled, or when the instance ends.
pub(crate) const COMPENSATIONS: TableDefinition<(u64, u64), &[u8]> =
    TableDefinition::new("compensations");
/// (decision id, version) → a [`DecisionRecord`]: a deployed DMN decision.
/// The audit trail: sequence → entry (`crate::audit::AuditEntry`).
pub(crate) const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
pub(crate) const DECISIONS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("decisions");
/// Batch id → a [`crate::store::batches::BatchRecord`].
pub(crate) const BATCHES: TableDefinition<u64, &[u8]> = TableDefinition::new("batches");
/// (batch, position) → a [`crate::store::batches::BatchItemRow`]: the item
/// and, once reached, its outcome.
pub(crate) const BATCH_ITEMS: TableDefinition<(u64, u64), &[u8]> =
    TableDefinition::new("batch_items");
/// `"state"` → the partition's [`crate::slots::SlotState`]: the slot map it
/// knows and its moves in flight (absent unpartitioned).
pub(crate) const SLOT_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("slot_state");
/// (move, kind, id) → (): an instance (kind 0) or message record (kind 1)
/// of a slot leaving in a move, written after the move began
/// ([`crate::store::tables`]' delta).
pub(crate) const MOVE_DELTA: TableDefinition<(u64, u64, u64), ()> =
    TableDefinition::new("move_delta");
/// The one key of [`SLOT_STATE`].
pub(crate) const SLOT_STATE_KEY: &str = "state";
/// Decision id → its latest version.
pub(crate) const DECISION_LATEST: TableDefinition<&str, u32> =
    TableDefinition::new("decision_latest");

/// What is done to each table of the schema ([`every_table`]).
pub(crate) trait TableVisitor {
    /// A table.
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: TableDefinition<K, V>,
    ) -> Result<(), StoreError>;
    /// A multimap table.
    fn multimap<K: redb::Key + 'static, V: redb::Key + 'static>(
        &mut self,
        def: MultimapTableDefinition<K, V>,
    ) -> Result<(), StoreError>;
}

/// Visits every table of the schema, `meta` first: the one list a copy of
/// the database and the creation of missing tables share.
pub(crate) fn every_table(v: &mut impl TableVisitor) -> Result<(), StoreError> {
    v.table(META)?;
    v.table(VERSION_TOKENS)?;
    v.table(DEFINITIONS)?;
    v.table(DEFINITION_EXTRAS)?;
    v.table(LATEST)?;
    v.table(DEFINITION_SOURCES)?;
    v.table(DEFINITION_HEADS)?;
    v.table(CATALOG)?;
    v.table(INSTANCES)?;
    v.table(HISTORY)?;
    v.table(TOKENS)?;
    v.table(TOKEN_SCOPES)?;
    v.table(SCOPE_SIZES)?;
    v.table(VARIABLES)?;
    v.table(BODY_ITEMS)?;
    v.table(TOKENS_AT)?;
    v.table(MESSAGES)?;
    v.table(DEDUP)?;
    v.table(BUFFER)?;
    v.table(EXPIRY)?;
    v.table(BUFFER_AGE)?;
    v.table(PARKED)?;
    v.table(INSTANCE_MESSAGES)?;
    v.table(TASKS_AT)?;
    v.table(INCIDENT_JOBS)?;
    v.table(JOBS)?;
    v.table(CONT_DUE)?;
    v.table(TOPIC_DUE)?;
    v.table(LEASES)?;
    v.table(START_TIMERS)?;
    v.table(TASKS)?;
    v.table(PARKED_EVENTS)?;
    v.table(SIGNALS_SEEN)?;
    v.table(SIGNALS_SEEN_AT)?;
    v.table(SIGNALS_OUT)?;
    v.table(COMPENSATIONS)?;
    v.table(DECISIONS)?;
    v.table(DECISION_LATEST)?;
    v.table(AUDIT)?;
    v.table(BATCHES)?;
    v.table(BATCH_ITEMS)?;
    v.table(SLOT_STATE)?;
    v.table(MOVE_DELTA)?;
    v.multimap(SUBSCRIPTIONS)?;
    v.multimap(EXPECT)?;
    v.multimap(PASSED)?;
    v.multimap(SIGNAL_SUBS)?;
    Ok(())
}

/// Creates each table a write transaction does not have yet.
pub(crate) struct Creator<'a>(pub(crate) &'a redb::WriteTransaction);

impl TableVisitor for Creator<'_> {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: TableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        self.0.open_table(def)?;
        Ok(())
    }

    fn multimap<K: redb::Key + 'static, V: redb::Key + 'static>(
        &mut self,
        def: MultimapTableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        self.0.open_multimap_table(def)?;
        Ok(())
    }
}
