//! The deterministic core: every state change of postfach happens here, inside
//! one redb write transaction, at an instant handed in by the caller.
//!
//! Invariants:
//! - The engine never reads the clock, never does I/O beyond the transaction's
//!   tables, and never waits: handlers run outside, their results come back as commands.
//! - A command returns an [`EngineError`] other than `Store` only before its first
//!   write, so a refused command leaves the batch it shares untouched.
//! - Correlation looks up and consumes a subscription in the same transaction, so a
//!   subscription cannot vanish between lookup and delivery (rejection 4 cannot happen).
//! - For one (message, key) there is never both an open subscription and a buffered
//!   message after a command: opening a subscription consumes the oldest buffered one.
//! - Every accepted message has exactly one record in `messages`, in exactly one state.

use crate::Vars;
use crate::clock::Millis;
use crate::codec;
use crate::model::{self, ElementKind, Process, TimerDef, Trigger};
use crate::store::*;
use redb::{ReadableMultimapTable, ReadableTable};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Engine settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long a (message name, message id) pair is remembered. Default 31 days,
    /// longer than Pub/Sub's longest retention, so any redelivery is recognised.
    pub dedup_window: Millis,
    /// How long a message waits in the buffer when neither the publish nor the
    /// per-message setting says otherwise. Default 24 h.
    pub default_ttl: Millis,
    /// TTL per message name.
    pub ttl_per_message: HashMap<String, Millis>,
    /// Attempts of a task job before it becomes an incident (default 10).
    pub max_attempts: u32,
    /// First retry delay; doubles per attempt (default 1 s).
    pub retry_base: Millis,
    /// Longest retry delay (default 10 min).
    pub retry_cap: Millis,
    /// How long completed instances and settled messages are kept (default 31
    /// days; never shorter than `dedup_window`).
    pub retention: Millis,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            dedup_window: 31 * 24 * 3600 * 1000,
            default_ttl: 24 * 3600 * 1000,
            ttl_per_message: HashMap::new(),
            max_attempts: 10,
            retry_base: 1000,
            retry_cap: 600_000,
            retention: 31 * 24 * 3600 * 1000,
        }
    }
}

impl Config {
    /// Every window and period lies in [`crate::limits::CONFIGURED`].
    pub fn check(&self) -> Result<(), crate::limits::OutOfRange> {
        use crate::limits::CONFIGURED;
        CONFIGURED.named("dedup_window").check(self.dedup_window)?;
        crate::limits::MESSAGE_TTL
            .named("default_ttl")
            .check(self.default_ttl)?;
        for ttl in self.ttl_per_message.values() {
            crate::limits::MESSAGE_TTL
                .named("ttl_per_message")
                .check(*ttl)?;
        }
        CONFIGURED.named("retry_base").check(self.retry_base)?;
        CONFIGURED.named("retry_cap").check(self.retry_cap)?;
        CONFIGURED.named("retention").check(self.retention)?;
        Ok(())
    }
}

/// Errors of engine commands. All but `Store` are refusals that changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Parse(#[from] model::ParseError),
    #[error("process '{0}' is not deployed")]
    UnknownProcess(String),
    #[error(
        "process '{0}' has no none start event: start it by publishing its start message instead"
    )]
    NoStartEvent(String),
    #[error("instance {0} does not exist")]
    UnknownInstance(u64),
    #[error("element '{element}' does not exist in process '{process}'")]
    UnknownElement { process: String, element: String },
    #[error("job {0} does not exist (it may have completed)")]
    UnknownJob(u64),
    #[error("job {job} {refusal}")]
    JobState { job: u64, refusal: JobRefusal },
    #[error(
        "job {0}: the lease was lost (expired or taken by another worker); its result is refused, the job runs again"
    )]
    StaleLease(u64),
    #[error("message '{0}' is not known")]
    UnknownMessageId(String),
    #[error("message id '{id}' is used by several messages ({names}): address it as NAME/ID")]
    AmbiguousMessageId { id: String, names: String },
    #[error(
        "message '{id}' is {state}, not parked: only parked messages can be requeued or discarded"
    )]
    NotParked { id: String, state: &'static str },
    #[error(
        "refused: instance {existing_instance} has a token at '{existing_element}' that waits for or will reach message '{message}' with key '{key}'; a second token would make every completion ambiguous"
    )]
    RepairRefused {
        message: String,
        key: String,
        existing_instance: u64,
        existing_element: String,
    },
    #[error("instance {0} has ended; it can no longer be modified")]
    InstanceEnded(u64),
    #[error("instance {instance} has no token {token}")]
    UnknownToken { instance: u64, token: u64 },
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

/// A message to publish or correlate.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Publish {
    pub name: String,
    pub key: String,
    /// Business message id for deduplication; generated when absent.
    pub message_id: Option<String>,
    #[serde(with = "crate::codec::json_text")]
    pub variables: Vars,
    /// Buffer TTL; `Some(0)` disables buffering.
    pub ttl: Option<Millis>,
    /// Transport attributes kept with the record (Pub/Sub attributes, delivery attempt).
    pub attributes: Vec<(String, String)>,
}

/// A payload that could not be decoded, parked as `malformed`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Malformed {
    pub name: String,
    pub message_id: String,
    pub raw: Vec<u8>,
    pub attributes: Vec<(String, String)>,
    pub error: String,
}

/// Outcome of a publish or correlate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Correlated,
    Buffered,
    Duplicate,
    Parked,
    /// Synchronous correlate only: nothing was recorded.
    Rejected,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Correlated => "correlated",
            Outcome::Buffered => "buffered",
            Outcome::Duplicate => "duplicate",
            Outcome::Parked => "parked",
            Outcome::Rejected => "rejected",
        }
    }
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub outcome: Outcome,
    pub message_id: String,
    pub instance: Option<u64>,
    pub element: Option<String>,
    pub reason: Option<Reason>,
    pub candidates: Vec<u64>,
    pub expires_at: Option<Millis>,
}

/// A deployed process version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    pub process: String,
    pub version: u32,
    /// False when an identical model was already the latest version.
    pub new_version: bool,
}

/// A task job handed to a handler or worker under a lease.
#[derive(Debug, Clone)]
pub struct LockedJob {
    pub job: u64,
    pub instance: u64,
    pub element: String,
    pub topic: String,
    pub variables: Vars,
    pub idempotency_key: String,
    pub lease_token: u64,
    pub attempt: u32,
}

/// Result of a token repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub token: u64,
    /// Jobs the repair created: the work happens when they run, not now.
    pub jobs_created: Vec<u64>,
    pub waiting_at: Vec<String>,
}

/// Definitions by (process, version), shared by reader threads and the writer.
/// Entries are immutable; the cache is cleared when a batch aborts.
/// The message catalog (what each message name means to which process) is
/// cached the same way and dropped whenever a deploy changes it.
#[derive(Default)]
pub struct DefCache(
    Mutex<HashMap<(String, u32), Arc<Process>>>,
    Mutex<HashMap<String, CatalogRows>>,
);

type CatalogRows = Arc<Vec<(String, CatalogEntry)>>;

impl DefCache {
    fn catalog(&self, name: &str) -> Option<CatalogRows> {
        self.1.lock().ok()?.get(name).cloned()
    }
    fn put_catalog(&self, name: &str, rows: CatalogRows) {
        if let Ok(mut m) = self.1.lock() {
            m.insert(name.to_string(), rows);
        }
    }
    fn clear_catalog(&self) {
        if let Ok(mut m) = self.1.lock() {
            m.clear();
        }
    }
    pub fn get(&self, process: &str, version: u32) -> Option<Arc<Process>> {
        self.0
            .lock()
            .ok()?
            .get(&(process.to_string(), version))
            .cloned()
    }
    pub fn put(&self, process: &str, version: u32, p: Arc<Process>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert((process.to_string(), version), p);
        }
    }
    pub fn clear(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
        self.clear_catalog();
    }
}

/// Loads a definition through the cache from any table implementing reads.
pub(crate) fn load_def(
    cache: &DefCache,
    table: &impl ReadableTable<(&'static str, u32), &'static [u8]>,
    process: &str,
    version: u32,
) -> Result<Option<Arc<Process>>, StoreError> {
    if let Some(p) = cache.get(process, version) {
        return Ok(Some(p));
    }
    let Some(g) = table.get((process, version))? else {
        return Ok(None);
    };
    let mut rec: DefinitionRecord = codec::decode(g.value())?;
    rec.process.build_index();
    let p = Arc::new(rec.process);
    cache.put(process, version, p.clone());
    Ok(Some(p))
}

/// The string form of a correlation key value.
pub fn key_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Arrive {
        inst: u64,
        token: u64,
        element: usize,
        via: Option<usize>,
    },
    Execute {
        inst: u64,
        token: u64,
        element: usize,
    },
    Leave {
        inst: u64,
        token: u64,
        element: usize,
    },
}

struct Dirty {
    rec: InstanceRecord,
    process: Arc<Process>,
    /// Resting places indexed in `tokens_at` when the instance was loaded.
    indexed: Vec<(String, Millis, u64)>,
}

/// One engine command application over a transaction's tables.
pub struct Engine<'a, 't> {
    t: &'a mut Tables<'t>,
    defs: &'a DefCache,
    cfg: &'a Config,
    now: Millis,
    dirty: BTreeMap<u64, Dirty>,
    queue: VecDeque<Step>,
    jobs_created: Vec<u64>,
}

type R<T> = Result<T, EngineError>;

impl From<redb::StorageError> for EngineError {
    fn from(e: redb::StorageError) -> Self {
        EngineError::Store(e.into())
    }
}

impl From<codec::CodecError> for EngineError {
    fn from(e: codec::CodecError) -> Self {
        EngineError::Store(e.into())
    }
}

impl<'a, 't> Engine<'a, 't> {
    pub(crate) fn new(
        t: &'a mut Tables<'t>,
        defs: &'a DefCache,
        cfg: &'a Config,
        now: Millis,
    ) -> Self {
        Self {
            t,
            defs,
            cfg,
            now,
            dirty: BTreeMap::new(),
            queue: VecDeque::new(),
            jobs_created: Vec::new(),
        }
    }

    // ---------------------------------------------------------------- deploy

    /// Stores a BPMN file; each process gets a new version unless the latest
    /// version was deployed from the identical source. `parsed` is what
    /// [`model::parse`] made of `xml` (the caller parses off the writer); `None`
    /// parses here (replay of the log).
    pub fn deploy(
        &mut self,
        file: &str,
        xml: &str,
        overrides: &BTreeMap<String, String>,
        parsed: Option<Vec<Process>>,
    ) -> R<Vec<Deployed>> {
        let processes = match parsed {
            Some(p) => p,
            None => model::parse(file, xml, overrides)?,
        };
        let fingerprint = fingerprint(xml, overrides);
        let mut out = Vec::new();
        for p in processes {
            let latest = self
                .t
                .latest
                .get(p.id.as_str())?
                .map(|g| g.value())
                .unwrap_or(0);
            if latest > 0
                && let Some(prev) = self.t.definition(&p.id, latest)?
                && prev.fingerprint == fingerprint
            {
                out.push(Deployed {
                    process: p.id.clone(),
                    version: latest,
                    new_version: false,
                });
                continue;
            }
            let version = latest + 1;
            let rec = DefinitionRecord {
                process: p.clone(),
                version,
                deployed_at: self.now,
                file: file.to_string(),
                fingerprint,
            };
            self.t
                .definitions
                .insert((p.id.as_str(), version), codec::encode(&rec)?.as_slice())?;
            self.t.latest.insert(p.id.as_str(), version)?;
            let mut entries: BTreeMap<&str, CatalogEntry> = BTreeMap::new();
            for (m, k) in &p.correlation_keys {
                entries.entry(m).or_default().key_variable = Some(k.clone());
            }
            for m in p.start_messages() {
                entries.entry(m).or_default().starts = true;
            }
            // a new version replaces what the process means to each message name
            let stale: Vec<String> = {
                let mut v = Vec::new();
                for row in self.t.catalog.iter()? {
                    let (k, _) = row?;
                    let (m, proc_id) = k.value();
                    if proc_id == p.id && !entries.contains_key(m) {
                        v.push(m.to_string());
                    }
                }
                v
            };
            for m in stale {
                self.t.catalog.remove((m.as_str(), p.id.as_str()))?;
            }
            self.defs.clear_catalog();
            for (m, e) in entries {
                self.t
                    .catalog
                    .insert((m, p.id.as_str()), codec::encode(&e)?.as_slice())?;
            }
            out.push(Deployed {
                process: p.id.clone(),
                version,
                new_version: true,
            });
        }
        Ok(out)
    }

    // ---------------------------------------------------------------- instances

    /// Starts an instance of the latest version of `process` at its none start event.
    pub fn start(&mut self, process: &str, vars: Vars, business_key: Option<String>) -> R<u64> {
        let version = self
            .t
            .latest
            .get(process)?
            .map(|g| g.value())
            .ok_or_else(|| EngineError::UnknownProcess(process.to_string()))?;
        let def = self.def(process, version)?;
        let start = def
            .none_start()
            .ok_or_else(|| EngineError::NoStartEvent(process.to_string()))?;
        let start_idx = def.index_of(&start.id).unwrap_or(0);
        let id = self.create_instance(def, version, vars, business_key, start_idx)?;
        self.run()?;
        Ok(id)
    }

    fn create_instance(
        &mut self,
        def: Arc<Process>,
        version: u32,
        vars: Vars,
        business_key: Option<String>,
        start: usize,
    ) -> R<u64> {
        let id = self.t.next_seq("instance")?;
        let rec = InstanceRecord {
            id,
            process: def.id.clone(),
            version,
            business_key,
            variables: vars,
            tokens: vec![Token {
                id: 1,
                element: def.at(start).id.clone(),
                wait: Wait::Incident {
                    error: "starting".into(),
                },
                since: self.now,
                timers: Vec::new(),
            }],
            next_token: 2,
            activations: 0,
            history: vec![HistoryEntry {
                element: def.id.clone(),
                event: "instance_started".into(),
                at: self.now,
            }],
            started_at: self.now,
            ended_at: None,
            cancelled: false,
            expects: Vec::new(),
        };
        self.dirty.insert(
            id,
            Dirty {
                rec,
                process: def,
                indexed: Vec::new(),
            },
        );
        self.queue.push_back(Step::Arrive {
            inst: id,
            token: 1,
            element: start,
            via: None,
        });
        Ok(id)
    }

    fn def(&self, process: &str, version: u32) -> R<Arc<Process>> {
        load_def(self.defs, &self.t.definitions, process, version)?
            .ok_or_else(|| EngineError::UnknownProcess(format!("{process} (version {version})")))
    }

    fn load(&mut self, id: u64) -> R<()> {
        if self.dirty.contains_key(&id) {
            return Ok(());
        }
        let rec = self
            .t
            .instance(id)?
            .ok_or(EngineError::UnknownInstance(id))?;
        let process = self.def(&rec.process, rec.version)?;
        let indexed = rec
            .tokens
            .iter()
            .map(|t| (t.element.clone(), t.since, t.id))
            .collect();
        self.dirty.insert(
            id,
            Dirty {
                rec,
                process,
                indexed,
            },
        );
        Ok(())
    }

    fn inst(&mut self, id: u64) -> &mut InstanceRecord {
        &mut self
            .dirty
            .get_mut(&id)
            .expect("instance loaded before use")
            .rec
    }

    fn proc_of(&self, id: u64) -> Arc<Process> {
        self.dirty[&id].process.clone()
    }

    fn history(&mut self, inst: u64, element: &str, event: &str) {
        let at = self.now;
        self.inst(inst).history.push(HistoryEntry {
            element: element.to_string(),
            event: event.to_string(),
            at,
        });
    }

    fn set_token(&mut self, inst: u64, token: u64, element: &str, wait: Wait) {
        let now = self.now;
        let rec = self.inst(inst);
        if let Some(t) = rec.tokens.iter_mut().find(|t| t.id == token) {
            if t.element != element
                || std::mem::discriminant(&t.wait) != std::mem::discriminant(&wait)
            {
                t.since = now;
            }
            t.element = element.to_string();
            t.wait = wait;
        }
    }

    fn new_token(&mut self, inst: u64, element: &str) -> u64 {
        let now = self.now;
        let rec = self.inst(inst);
        let id = rec.next_token;
        rec.next_token += 1;
        rec.tokens.push(Token {
            id,
            element: element.to_string(),
            wait: Wait::Incident {
                error: "moving".into(),
            },
            since: now,
            timers: Vec::new(),
        });
        id
    }

    fn incident(&mut self, inst: u64, token: u64, element: &str, error: String) {
        tracing::warn!(instance = inst, element, %error, "incident");
        self.history(inst, element, "incident");
        self.set_token(inst, token, element, Wait::Incident { error });
    }

    /// Runs queued steps until every token rests, then writes dirty instances.
    fn run(&mut self) -> R<()> {
        let mut guard = 0u64;
        while let Some(step) = self.queue.pop_front() {
            guard += 1;
            if guard > 1_000_000 {
                // a model that loops without a wait state: stop it visibly
                let (Step::Arrive {
                    inst,
                    token,
                    element,
                    ..
                }
                | Step::Execute {
                    inst,
                    token,
                    element,
                }
                | Step::Leave {
                    inst,
                    token,
                    element,
                }) = step;
                let id = self.proc_of(inst).at(element).id.clone();
                self.incident(
                    inst,
                    token,
                    &id,
                    "loop without wait state: stopped after 1,000,000 steps".into(),
                );
                self.queue.clear();
                break;
            }
            match step {
                Step::Arrive {
                    inst,
                    token,
                    element,
                    via,
                } => self.arrive(inst, token, element, via)?,
                Step::Execute {
                    inst,
                    token,
                    element,
                } => self.execute(inst, token, element)?,
                Step::Leave {
                    inst,
                    token,
                    element,
                } => self.leave(inst, token, element)?,
            }
        }
        self.flush()
    }

    fn arrive(&mut self, inst: u64, token: u64, idx: usize, via: Option<usize>) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        if el.kind == ElementKind::ParallelGateway && el.incoming.len() > 1 {
            let flow = via.unwrap_or(usize::MAX);
            self.set_token(inst, token, &el.id, Wait::Join { flow });
            let rec = self.inst(inst);
            let mut take: Vec<u64> = Vec::new();
            for f in &el.incoming {
                if let Some(t) = rec.tokens.iter().find(|t| {
                    t.element == el.id && t.wait == Wait::Join { flow: *f } && !take.contains(&t.id)
                }) {
                    take.push(t.id);
                }
            }
            if take.len() == el.incoming.len() {
                rec.tokens.retain(|t| !take.contains(&t.id));
                let merged = self.new_token(inst, &el.id);
                self.history(inst, &el.id, "joined");
                self.queue.push_back(Step::Leave {
                    inst,
                    token: merged,
                    element: idx,
                });
            }
            return Ok(());
        }
        self.history(inst, &el.id, "activated");
        if el.async_before {
            let job = self.create_job(inst, token, &el.id, JobKind::Continue)?;
            self.set_token(inst, token, &el.id, Wait::Job { job });
            return Ok(());
        }
        self.queue.push_back(Step::Execute {
            inst,
            token,
            element: idx,
        });
        Ok(())
    }

    fn execute(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        if !el.boundaries.is_empty()
            && matches!(
                el.kind,
                ElementKind::ServiceTask { .. }
                    | ElementKind::Publish { .. }
                    | ElementKind::ReceiveTask { .. }
            )
        {
            self.start_boundary_timers(inst, token, &p, idx)?;
        }
        match &el.kind {
            ElementKind::TimerCatch { timer } => {
                let job = self.create_job_at(
                    inst,
                    token,
                    &el.id,
                    JobKind::Timer {
                        repetitions_left: None,
                    },
                    timer.first_due(self.now),
                )?;
                self.set_token(inst, token, &el.id, Wait::Timer { job });
                self.history(inst, &el.id, "waiting");
            }
            ElementKind::EventGateway => self.open_event_gateway(inst, token, idx)?,
            ElementKind::Boundary { .. } => {
                self.queue.push_back(Step::Leave {
                    inst,
                    token,
                    element: idx,
                });
            }
            ElementKind::End => {
                self.history(inst, &el.id, "completed");
                self.inst(inst).tokens.retain(|t| t.id != token);
                if self.inst(inst).tokens.is_empty() {
                    self.complete_instance(inst)?;
                }
            }
            ElementKind::ServiceTask { .. } | ElementKind::Publish { .. } => {
                let topic = match &el.kind {
                    ElementKind::Publish { topic } => {
                        format!("{}{topic}", model::OUTBOX_TOPIC_PREFIX)
                    }
                    ElementKind::ServiceTask { topic } => topic.clone(),
                    _ => unreachable!("matched above"),
                };
                let job = self.create_job(inst, token, &el.id, JobKind::Task { topic })?;
                self.set_token(inst, token, &el.id, Wait::Job { job });
            }
            ElementKind::ReceiveTask { message } | ElementKind::MessageCatch { message } => {
                let var = p.correlation_keys.get(message).cloned().unwrap_or_default();
                let Some(key) = self.inst(inst).variables.get(&var).and_then(key_string) else {
                    let error = format!(
                        "correlation key variable '{var}' of message '{message}' is not set: set it (e.g. at start with --var {var}=VALUE) and move the token here again"
                    );
                    self.incident(inst, token, &el.id, error);
                    return Ok(());
                };
                if let Some(seq) = self.oldest_buffered(message, &key)? {
                    self.set_token(
                        inst,
                        token,
                        &el.id,
                        Wait::Message {
                            name: message.clone(),
                            key: key.clone(),
                        },
                    );
                    self.consume_buffered(seq, inst, token)?;
                } else {
                    self.t
                        .subscriptions
                        .insert((message.as_str(), key.as_str()), (inst, token))?;
                    self.set_token(
                        inst,
                        token,
                        &el.id,
                        Wait::Message {
                            name: message.clone(),
                            key,
                        },
                    );
                    self.history(inst, &el.id, "waiting");
                }
            }
            ElementKind::SignalCatch { signal } => {
                self.t.signal_subs.insert(signal.as_str(), (inst, token))?;
                self.set_token(
                    inst,
                    token,
                    &el.id,
                    Wait::Signal {
                        name: signal.clone(),
                    },
                );
                self.history(inst, &el.id, "waiting");
            }
            ElementKind::SignalThrow { signal } => {
                let reached = self.broadcast(signal, &Vars::new())?;
                self.history(inst, &el.id, &format!("signal_thrown reached={reached}"));
                self.queue.push_back(Step::Leave {
                    inst,
                    token,
                    element: idx,
                });
            }
            ElementKind::NoneStart
            | ElementKind::MessageStart { .. }
            | ElementKind::NoneThrow
            | ElementKind::SendTask
            | ElementKind::ExclusiveGateway { .. }
            | ElementKind::ParallelGateway => {
                self.queue.push_back(Step::Leave {
                    inst,
                    token,
                    element: idx,
                });
            }
        }
        Ok(())
    }

    fn leave(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        self.clear_boundary_timers(inst, token)?;
        let p = self.proc_of(inst);
        let el = p.at(idx);
        self.history(inst, &el.id, "completed");
        let vars = self.inst(inst).variables.clone();
        let mut chosen: Vec<usize> = Vec::new();
        match &el.kind {
            ElementKind::ExclusiveGateway { default } => {
                for &f in &el.outgoing {
                    if Some(f) == *default {
                        continue;
                    }
                    match &p.flows[f].condition {
                        None => {
                            chosen.push(f);
                            break;
                        }
                        Some(c) => match model::eval_bool(c, &vars) {
                            Ok(true) => {
                                chosen.push(f);
                                break;
                            }
                            Ok(false) => {}
                            Err(e) => {
                                let error = format!("condition of flow '{}': {e}", p.flows[f].id);
                                self.incident(inst, token, &el.id, error);
                                return Ok(());
                            }
                        },
                    }
                }
                if chosen.is_empty()
                    && let Some(d) = default
                {
                    chosen.push(*d);
                }
            }
            ElementKind::ParallelGateway => chosen = el.outgoing.clone(),
            _ => {
                for &f in &el.outgoing {
                    match &p.flows[f].condition {
                        None => chosen.push(f),
                        Some(c) => match model::eval_bool(c, &vars) {
                            Ok(true) => chosen.push(f),
                            Ok(false) => {}
                            Err(e) => {
                                let error = format!("condition of flow '{}': {e}", p.flows[f].id);
                                self.incident(inst, token, &el.id, error);
                                return Ok(());
                            }
                        },
                    }
                }
            }
        }
        if el.outgoing.is_empty() {
            // implicit end
            self.inst(inst).tokens.retain(|t| t.id != token);
            if self.inst(inst).tokens.is_empty() {
                self.complete_instance(inst)?;
            }
            return Ok(());
        }
        if chosen.is_empty() {
            let error = format!(
                "no outgoing flow of '{}' can be taken: every condition is false and there is no default flow",
                el.id
            );
            self.incident(inst, token, &el.id, error);
            return Ok(());
        }
        for (i, f) in chosen.into_iter().enumerate() {
            let target = p.flows[f].target;
            let tid = if i == 0 {
                token
            } else {
                self.new_token(inst, &el.id)
            };
            let target_id = p.at(target).id.clone();
            self.set_token(
                inst,
                tid,
                &target_id,
                Wait::Incident {
                    error: "moving".into(),
                },
            );
            self.queue.push_back(Step::Arrive {
                inst,
                token: tid,
                element: target,
                via: Some(f),
            });
        }
        Ok(())
    }

    fn complete_instance(&mut self, inst: u64) -> R<()> {
        let p = self.proc_of(inst);
        let now = self.now;
        let rec = self.inst(inst);
        rec.ended_at = Some(now);
        rec.history.push(HistoryEntry {
            element: p.id.clone(),
            event: "instance_completed".into(),
            at: now,
        });
        let vars = rec.variables.clone();
        for (m, var) in &p.correlation_keys {
            if let Some(k) = vars.get(var).and_then(key_string) {
                self.t.passed.insert((m.as_str(), k.as_str()), inst)?;
            }
        }
        Ok(())
    }

    /// Keeps `expect` equal to the (message, key) pairs this instance may still
    /// catch: those waited for where its tokens are or downstream of them.
    fn refresh_expect(&mut self, inst: u64) -> R<()> {
        let p = self.proc_of(inst);
        let rec = self.inst(inst);
        let mut desired: Vec<(String, String)> = Vec::new();
        for t in &rec.tokens {
            let Some(idx) = p.index_of(&t.element) else {
                continue;
            };
            for m in p.messages_reachable_from(idx) {
                let var = p.correlation_keys.get(m).map(String::as_str).unwrap_or("");
                if let Some(k) = rec.variables.get(var).and_then(key_string) {
                    let e = (m.clone(), k);
                    if !desired.contains(&e) {
                        desired.push(e);
                    }
                }
            }
        }
        let old = std::mem::replace(&mut rec.expects, desired.clone());
        for (m, k) in old.iter().filter(|e| !desired.contains(e)) {
            self.t.expect.remove((m.as_str(), k.as_str()), inst)?;
        }
        for (m, k) in desired.iter().filter(|e| !old.contains(e)) {
            self.t.expect.insert((m.as_str(), k.as_str()), inst)?;
        }
        Ok(())
    }

    fn merge_vars(&mut self, inst: u64, vars: &Vars) -> R<()> {
        if vars.is_empty() {
            return Ok(());
        }
        let rec = self.inst(inst);
        for (k, v) in vars {
            rec.variables.insert(k.clone(), v.clone());
        }
        Ok(())
    }

    /// Writes every touched instance and keeps `tokens_at` in step with its tokens.
    fn flush(&mut self) -> R<()> {
        let ids: Vec<u64> = self.dirty.keys().copied().collect();
        for id in ids {
            self.refresh_expect(id)?;
        }
        let dirty = std::mem::take(&mut self.dirty);
        for (_, d) in dirty {
            let now_resting: Vec<(String, Millis, u64)> = d
                .rec
                .tokens
                .iter()
                .map(|t| (t.element.clone(), t.since, t.id))
                .collect();
            for (e, since, tok) in d.indexed.iter().filter(|x| !now_resting.contains(x)) {
                self.t
                    .tokens_at
                    .remove((e.as_str(), *since, d.rec.id, *tok))?;
            }
            for (e, since, tok) in now_resting.iter().filter(|x| !d.indexed.contains(x)) {
                self.t
                    .tokens_at
                    .insert((e.as_str(), *since, d.rec.id, *tok), ())?;
            }
            self.t.put_instance(&d.rec)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- jobs

    fn create_job(&mut self, inst: u64, token: u64, element: &str, kind: JobKind) -> R<u64> {
        self.create_job_at(inst, token, element, kind, self.now)
    }

    fn create_job_at(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        kind: JobKind,
        due_at: Millis,
    ) -> R<u64> {
        let id = self.t.next_seq("job")?;
        let rec = self.inst(inst);
        rec.activations += 1;
        let key = format!("{inst}:{element}:{}", rec.activations);
        let job = JobRecord {
            id,
            instance: inst,
            token,
            element: element.to_string(),
            kind: kind.clone(),
            state: JobState::Ready,
            due_at,
            attempts: 0,
            last_error: None,
            idempotency_key: key,
            created_at: self.now,
            lease: None,
            max_attempts: None,
            history: Vec::new(),
        };
        self.t.put_job(&job)?;
        self.index_ready(&job)?;
        self.jobs_created.push(id);
        self.history(inst, element, "job_created");
        Ok(id)
    }

    fn index_ready(&mut self, job: &JobRecord) -> R<()> {
        match &job.kind {
            JobKind::Continue | JobKind::Timer { .. } => {
                self.t.cont_due.insert((job.due_at, job.id), ())?
            }
            JobKind::Task { topic } => self
                .t
                .topic_due
                .insert((topic.as_str(), job.due_at, job.id), ())?,
        };
        Ok(())
    }

    fn unindex_ready(&mut self, job: &JobRecord) -> R<()> {
        match &job.kind {
            JobKind::Continue | JobKind::Timer { .. } => {
                self.t.cont_due.remove((job.due_at, job.id))?
            }
            JobKind::Task { topic } => {
                self.t
                    .topic_due
                    .remove((topic.as_str(), job.due_at, job.id))?
            }
        };
        Ok(())
    }

    /// Runs up to `limit` due async continuations; returns how many ran.
    pub fn run_continuations(&mut self, limit: usize) -> R<usize> {
        let mut due = Vec::new();
        for row in self.t.cont_due.range((0u64, 0u64)..=(self.now, u64::MAX))? {
            let (k, _) = row?;
            due.push(k.value().1);
            if due.len() >= limit {
                break;
            }
        }
        for &id in &due {
            let Some(job) = self.t.job(id)? else { continue };
            self.unindex_ready(&job)?;
            self.t.jobs.remove(id)?;
            if let JobKind::Timer { .. } = job.kind {
                self.fire_timer(job)?;
                continue;
            }
            self.load(job.instance)?;
            let p = self.proc_of(job.instance);
            let Some(idx) = p.index_of(&job.element) else {
                continue;
            };
            self.history(job.instance, &job.element, "job_executed");
            self.queue.push_back(Step::Execute {
                inst: job.instance,
                token: job.token,
                element: idx,
            });
            self.run()?;
        }
        Ok(due.len())
    }

    /// Locks up to `max` due task jobs of `topic` for `owner` until now + `lease`.
    pub fn lock_jobs(
        &mut self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
        in_process: bool,
    ) -> R<Vec<LockedJob>> {
        let mut ids = Vec::new();
        for row in self
            .t
            .topic_due
            .range((topic, 0u64, 0u64)..=(topic, self.now, u64::MAX))?
        {
            ids.push(row?.0.value().2);
            if ids.len() >= max {
                break;
            }
        }
        let mut out = Vec::new();
        for id in ids {
            let Some(mut job) = self.t.job(id)? else {
                continue;
            };
            self.unindex_ready(&job)?;
            let token = self.t.next_seq("lease")?;
            job.state = JobState::Locked;
            job.lease = Some(Lease {
                owner: owner.to_string(),
                token,
                until: self.now.saturating_add(lease),
                in_process,
            });
            self.t
                .leases
                .insert((self.now.saturating_add(lease), id), ())?;
            self.t.put_job(&job)?;
            let variables = self
                .t
                .instance(job.instance)?
                .map(|i| i.variables)
                .unwrap_or_default();
            out.push(LockedJob {
                job: id,
                instance: job.instance,
                element: job.element.clone(),
                topic: topic.to_string(),
                variables,
                idempotency_key: job.idempotency_key.clone(),
                lease_token: token,
                attempt: job.attempts + 1,
            });
        }
        Ok(out)
    }

    fn check_lease(&self, job: &JobRecord, lease_token: Option<u64>) -> R<()> {
        match (lease_token, &job.lease, job.state) {
            (None, _, JobState::Ready) => Ok(()),
            (None, _, JobState::Locked) => Err(EngineError::JobState {
                job: job.id,
                refusal: JobRefusal::LockedByWorker,
            }),
            (_, _, JobState::Incident) => Err(EngineError::JobState {
                job: job.id,
                refusal: JobRefusal::Incident,
            }),
            (Some(t), Some(l), JobState::Locked) if l.token == t => Ok(()),
            (Some(_), _, _) => Err(EngineError::StaleLease(job.id)),
        }
    }

    /// Completes a task job: merges `vars` and moves the token on.
    /// `lease_token` is the one handed out by [`Engine::lock_jobs`]; `None` completes
    /// an unlocked job by hand.
    pub fn complete_job(&mut self, id: u64, lease_token: Option<u64>, vars: &Vars) -> R<()> {
        let job = self.t.job(id)?.ok_or(EngineError::UnknownJob(id))?;
        self.check_lease(&job, lease_token)?;
        if !matches!(job.kind, JobKind::Task { .. }) {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::Continuation,
            });
        }
        self.load(job.instance)?;
        self.drop_job(&job)?;
        self.merge_vars(job.instance, vars)?;
        let p = self.proc_of(job.instance);
        let idx = p
            .index_of(&job.element)
            .ok_or_else(|| EngineError::UnknownElement {
                process: p.id.clone(),
                element: job.element.clone(),
            })?;
        self.history(job.instance, &job.element, "job_completed");
        self.t.bump("job_attempts_completed", 1)?;
        self.queue.push_back(Step::Leave {
            inst: job.instance,
            token: job.token,
            element: idx,
        });
        self.run()
    }

    fn drop_job(&mut self, job: &JobRecord) -> R<()> {
        if job.state == JobState::Ready {
            self.unindex_ready(job)?;
        }
        if let Some(l) = &job.lease {
            self.t.leases.remove((l.until, job.id))?;
        }
        self.t.jobs.remove(job.id)?;
        Ok(())
    }

    /// Records a failed attempt. The job retries after a delay (the element's fixed
    /// delay, or doubling from `retry_base` up to `retry_cap` with ±10 % jitter)
    /// until its attempts are used up; then it is an incident.
    ///
    /// A worker may say how many more attempts are left (`retries_left`; 0 makes it
    /// an incident now) and when to retry (`retry_delay`).
    pub fn fail_job(
        &mut self,
        id: u64,
        lease_token: Option<u64>,
        error: &str,
        retries_left: Option<u32>,
        retry_delay: Option<Millis>,
    ) -> R<JobState> {
        let mut job = self.t.job(id)?.ok_or(EngineError::UnknownJob(id))?;
        self.check_lease(&job, lease_token)?;
        self.load(job.instance)?;
        let policy = self
            .proc_of(job.instance)
            .element(&job.element)
            .and_then(|e| e.retry);
        if job.state == JobState::Ready {
            self.unindex_ready(&job)?;
        }
        if let Some(l) = job.lease.take() {
            self.t.leases.remove((l.until, id))?;
        }
        job.attempts += 1;
        self.t.bump("job_attempts_failed", 1)?;
        job.last_error = Some(error.to_string());
        job.history.push(Attempt {
            at: self.now,
            error: error.to_string(),
        });
        if let Some(left) = retries_left {
            job.max_attempts = Some(job.attempts.saturating_add(left));
        }
        let limit = job
            .max_attempts
            .or(policy.map(|p| p.attempts))
            .unwrap_or(self.cfg.max_attempts);
        if job.attempts >= limit {
            job.state = JobState::Incident;
            self.history(job.instance, &job.element, "incident");
            tracing::warn!(job = id, element = %job.element, attempts = job.attempts, error, "job became an incident");
        } else {
            job.state = JobState::Ready;
            let delay = retry_delay
                .or(policy.and_then(|p| p.delay))
                .unwrap_or_else(|| backoff(self.cfg, id, job.attempts));
            job.due_at = self.now.saturating_add(delay);
            self.index_ready(&job)?;
        }
        self.t.put_job(&job)?;
        self.flush()?;
        Ok(job.state)
    }

    /// Extends a worker's lease to now + `by`; refused when the lease was lost.
    pub fn extend_lease(&mut self, id: u64, lease_token: u64, by: Millis) -> R<Millis> {
        let mut job = self.t.job(id)?.ok_or(EngineError::UnknownJob(id))?;
        let Some(lease) = job
            .lease
            .as_mut()
            .filter(|l| l.token == lease_token && job.state == JobState::Locked)
        else {
            return Err(EngineError::StaleLease(id));
        };
        self.t.leases.remove((lease.until, id))?;
        lease.until = self.now.saturating_add(by);
        let until = lease.until;
        self.t.leases.insert((until, id), ())?;
        self.t.put_job(&job)?;
        Ok(until)
    }

    /// Makes an incident runnable again.
    pub fn retry_job(&mut self, id: u64) -> R<()> {
        let mut job = self.t.job(id)?.ok_or(EngineError::UnknownJob(id))?;
        if job.state != JobState::Incident {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::NotAnIncident,
            });
        }
        job.state = JobState::Ready;
        job.attempts = 0;
        job.due_at = self.now;
        self.index_ready(&job)?;
        self.t.put_job(&job)?;
        self.load(job.instance)?;
        self.history(job.instance, &job.element, "incident_retried");
        self.flush()
    }

    /// Returns jobs whose lease ran out to the ready queue.
    pub fn release_expired_leases(&mut self) -> R<usize> {
        self.release_leases_until(self.now)
    }

    /// Releases every lease at once: used at open, when this process is the
    /// database's only owner and no earlier lease holder can still be running.
    pub fn release_all_leases(&mut self) -> R<usize> {
        self.release_leases(u64::MAX, true)
    }

    fn release_leases_until(&mut self, until: Millis) -> R<usize> {
        self.release_leases(until, false)
    }

    fn release_leases(&mut self, until: Millis, only_in_process: bool) -> R<usize> {
        let mut expired = Vec::new();
        for row in self.t.leases.range((0u64, 0u64)..=(until, u64::MAX))? {
            expired.push(row?.0.value());
        }
        let mut released = 0;
        for &(lease_end, id) in &expired {
            let job = self.t.job(id)?;
            if only_in_process
                && !job
                    .as_ref()
                    .is_some_and(|j| j.lease.as_ref().is_some_and(|l| l.in_process))
            {
                continue;
            }
            released += 1;
            self.t.leases.remove((lease_end, id))?;
            if let Some(mut job) = job {
                job.lease = None;
                job.state = JobState::Ready;
                job.due_at = self.now;
                self.index_ready(&job)?;
                self.t.put_job(&job)?;
            }
        }
        Ok(released)
    }

    // ---------------------------------------------------------------- messages

    fn oldest_buffered(&self, name: &str, key: &str) -> R<Option<u64>> {
        let mut range = self
            .t
            .buffer
            .range((name, key, 0u64)..=(name, key, u64::MAX))?;
        Ok(match range.next() {
            Some(row) => Some(row?.0.value().2),
            None => None,
        })
    }

    /// Delivers buffered message `seq` to a token already set to wait for it.
    fn consume_buffered(&mut self, seq: u64, inst: u64, token: u64) -> R<()> {
        let mut msg = self
            .t
            .message(seq)?
            .ok_or(EngineError::UnknownMessageId(seq.to_string()))?;
        self.t
            .buffer
            .remove((msg.name.as_str(), msg.key.as_str(), seq))?;
        if let Some(exp) = msg.expires_at {
            self.t.expiry.remove((exp, seq))?;
        }
        let element = self.deliver(inst, token, &msg.name, &msg.key, &msg.variables)?;
        msg.state = MessageState::Correlated;
        msg.instance = Some(inst);
        msg.element = Some(element);
        msg.settled_at = Some(self.now);
        self.t.put_message(&msg)?;
        self.t.bump("messages_correlated_from_buffer", 1)?;
        Ok(())
    }

    /// Moves a token waiting for message `name` on (at a catch event, a receive
    /// task or an event-based gateway); returns the element it caught it at.
    fn deliver(&mut self, inst: u64, token: u64, name: &str, key: &str, vars: &Vars) -> R<String> {
        let idx = self.event_target(inst, token, |k| k.waits_for_message() == Some(name));
        self.cancel_wait(inst, token)?;
        let element = self.proc_of(inst).at(idx).id.clone();
        self.history(inst, &element, "message_correlated");
        self.t.passed.insert((name, key), inst)?;
        self.merge_vars(inst, vars)?;
        self.queue.push_back(Step::Leave {
            inst,
            token,
            element: idx,
        });
        Ok(element)
    }

    /// Where a waiting token leaves from when an event arrives: its own element,
    /// or, at an event-based gateway, the first target the event matches (the
    /// token moves there).
    fn event_target(
        &mut self,
        inst: u64,
        token: u64,
        matches: impl Fn(&ElementKind) -> bool,
    ) -> usize {
        let p = self.proc_of(inst);
        let Some(at) = self
            .inst(inst)
            .tokens
            .iter()
            .find(|t| t.id == token)
            .and_then(|t| p.index_of(&t.element))
        else {
            return 0;
        };
        if p.at(at).kind != ElementKind::EventGateway {
            return at;
        }
        let Some(target) = p
            .at(at)
            .outgoing
            .iter()
            .map(|&f| p.flows[f].target)
            .find(|&t| matches(&p.at(t).kind))
        else {
            return at;
        };
        let (id, now) = (p.at(target).id.clone(), self.now);
        if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            t.element = id;
            t.since = now;
        }
        target
    }

    /// Removes every registration of a waiting token: subscriptions, signal
    /// subscriptions, its job or timers. The token itself stays.
    fn cancel_wait(&mut self, inst: u64, token: u64) -> R<()> {
        let Some(wait) = self
            .inst(inst)
            .tokens
            .iter()
            .find(|t| t.id == token)
            .map(|t| t.wait.clone())
        else {
            return Ok(());
        };
        match wait {
            Wait::Message { name, key } => {
                self.t
                    .subscriptions
                    .remove((name.as_str(), key.as_str()), (inst, token))?;
                // the instance is past this catch point: a later message is late
                self.t.passed.insert((name.as_str(), key.as_str()), inst)?;
            }
            Wait::Signal { name } => {
                self.t.signal_subs.remove(name.as_str(), (inst, token))?;
            }
            Wait::Job { job } | Wait::Timer { job } => self.delete_job(job)?,
            Wait::Events {
                messages,
                signals,
                timers,
            } => {
                for (name, key) in messages {
                    self.t
                        .subscriptions
                        .remove((name.as_str(), key.as_str()), (inst, token))?;
                    self.t.passed.insert((name.as_str(), key.as_str()), inst)?;
                }
                for name in signals {
                    self.t.signal_subs.remove(name.as_str(), (inst, token))?;
                }
                for job in timers {
                    self.delete_job(job)?;
                }
            }
            Wait::Join { .. } | Wait::Incident { .. } => {}
        }
        if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            t.wait = Wait::Incident {
                error: "moving".into(),
            };
        }
        Ok(())
    }

    fn delete_job(&mut self, id: u64) -> R<()> {
        if let Some(job) = self.t.job(id)? {
            self.drop_job(&job)?;
        }
        Ok(())
    }

    /// Starts the timers of the boundary events of the activity a token enters.
    fn start_boundary_timers(&mut self, inst: u64, token: u64, p: &Process, host: usize) -> R<()> {
        for &b in &p.at(host).boundaries {
            if let ElementKind::Boundary {
                trigger: Trigger::Timer(def),
                ..
            } = &p.at(b).kind
            {
                let repetitions_left = match def {
                    TimerDef::Cycle { repetitions, .. } => *repetitions,
                    _ => Some(1),
                };
                let job = self.create_job_at(
                    inst,
                    token,
                    &p.at(b).id,
                    JobKind::Timer { repetitions_left },
                    def.first_due(self.now),
                )?;
                if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
                    t.timers.push(job);
                }
            }
        }
        Ok(())
    }

    /// Cancels the boundary timers of a token leaving its activity.
    fn clear_boundary_timers(&mut self, inst: u64, token: u64) -> R<()> {
        let timers = match self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            Some(t) => std::mem::take(&mut t.timers),
            None => return Ok(()),
        };
        for job in timers {
            self.delete_job(job)?;
        }
        Ok(())
    }

    /// Ends the activity a token is in (interrupting boundary event).
    fn interrupt(&mut self, inst: u64, token: u64) -> R<()> {
        self.cancel_wait(inst, token)?;
        self.clear_boundary_timers(inst, token)?;
        self.inst(inst).tokens.retain(|t| t.id != token);
        Ok(())
    }

    /// At an event-based gateway: take a buffered message at once if one waits
    /// for a target, else register every target event and wait for the first.
    fn open_event_gateway(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let gateway = p.at(idx).id.clone();
        let targets: Vec<usize> = p
            .at(idx)
            .outgoing
            .iter()
            .map(|&f| p.flows[f].target)
            .collect();
        let mut messages = Vec::new();
        for &t in &targets {
            if let Some(m) = p.at(t).kind.waits_for_message() {
                let var = p.correlation_keys.get(m).map(String::as_str).unwrap_or("");
                let Some(key) = self.inst(inst).variables.get(var).and_then(key_string) else {
                    let error =
                        format!("correlation key variable '{var}' of message '{m}' is not set");
                    self.incident(inst, token, &gateway, error);
                    return Ok(());
                };
                if let Some(seq) = self.oldest_buffered(m, &key)? {
                    let target = p.at(t).id.clone();
                    self.set_token(
                        inst,
                        token,
                        &target,
                        Wait::Message {
                            name: m.to_string(),
                            key: key.clone(),
                        },
                    );
                    return self.consume_buffered(seq, inst, token);
                }
                messages.push((m.to_string(), key));
            }
        }
        let mut signals = Vec::new();
        let mut timers = Vec::new();
        for &t in &targets {
            match &p.at(t).kind {
                ElementKind::SignalCatch { signal } => {
                    self.t.signal_subs.insert(signal.as_str(), (inst, token))?;
                    signals.push(signal.clone());
                }
                ElementKind::TimerCatch { timer } => {
                    let target = p.at(t).id.clone();
                    timers.push(self.create_job_at(
                        inst,
                        token,
                        &target,
                        JobKind::Timer {
                            repetitions_left: None,
                        },
                        timer.first_due(self.now),
                    )?);
                }
                _ => {}
            }
        }
        for (m, k) in &messages {
            self.t
                .subscriptions
                .insert((m.as_str(), k.as_str()), (inst, token))?;
        }
        self.set_token(
            inst,
            token,
            &gateway,
            Wait::Events {
                messages,
                signals,
                timers,
            },
        );
        self.history(inst, &gateway, "waiting");
        Ok(())
    }

    /// A due timer job: a timer catch event (possibly behind an event-based
    /// gateway) or a boundary timer.
    fn fire_timer(&mut self, job: JobRecord) -> R<()> {
        let inst = job.instance;
        self.load(inst)?;
        let p = self.proc_of(inst);
        let Some(at) = p.index_of(&job.element) else {
            return Ok(());
        };
        let Some(tok) = self
            .inst(inst)
            .tokens
            .iter()
            .find(|t| t.id == job.token)
            .cloned()
        else {
            return Ok(()); // the token moved on: a stale timer
        };
        match &p.at(at).kind {
            ElementKind::Boundary {
                host,
                cancel,
                trigger: Trigger::Timer(def),
            } => {
                if tok.element != p.at(*host).id || !tok.timers.contains(&job.id) {
                    return Ok(());
                }
                self.history(inst, &job.element, "timer_fired");
                let left = match job.kind {
                    JobKind::Timer { repetitions_left } => repetitions_left,
                    _ => Some(1),
                };
                if *cancel {
                    self.interrupt(inst, job.token)?;
                } else if let (TimerDef::Cycle { every, .. }, false) = (def, left == Some(1)) {
                    let mut next = job.clone();
                    next.due_at = self.now.saturating_add(*every);
                    next.kind = JobKind::Timer {
                        repetitions_left: left.map(|n| n.saturating_sub(1)),
                    };
                    self.t.put_job(&next)?;
                    self.index_ready(&next)?;
                } else if let Some(t) = self
                    .inst(inst)
                    .tokens
                    .iter_mut()
                    .find(|t| t.id == job.token)
                {
                    t.timers.retain(|&j| j != job.id);
                }
                let new = self.new_token(inst, &job.element);
                self.queue.push_back(Step::Leave {
                    inst,
                    token: new,
                    element: at,
                });
            }
            ElementKind::TimerCatch { .. } => {
                let waiting = match &tok.wait {
                    Wait::Timer { job: j } => *j == job.id,
                    Wait::Events { timers, .. } => timers.contains(&job.id),
                    _ => false,
                };
                if !waiting {
                    return Ok(());
                }
                let from = self.force_target(inst, job.token, at);
                self.cancel_wait(inst, job.token)?;
                self.history(inst, &job.element, "timer_fired");
                self.queue.push_back(Step::Leave {
                    inst,
                    token: job.token,
                    element: from,
                });
            }
            _ => {}
        }
        self.run()
    }

    /// Moves a token to a given element (the timer target of an event gateway).
    fn force_target(&mut self, inst: u64, token: u64, target: usize) -> usize {
        let id = self.proc_of(inst).at(target).id.clone();
        let now = self.now;
        if let Some(t) = self.inst(inst).tokens.iter_mut().find(|t| t.id == token) {
            t.element = id;
            t.since = now;
        }
        target
    }

    /// A worker throws a BPMN error from a task job: an error boundary event on
    /// the task with a matching code (or none) takes the token; without one the
    /// job becomes an incident. Returns whether a boundary caught it.
    pub fn throw_error(
        &mut self,
        id: u64,
        lease_token: Option<u64>,
        code: &str,
        message: &str,
        vars: &Vars,
    ) -> R<bool> {
        let mut job = self.t.job(id)?.ok_or(EngineError::UnknownJob(id))?;
        self.check_lease(&job, lease_token)?;
        if !matches!(job.kind, JobKind::Task { .. }) {
            return Err(EngineError::JobState {
                job: id,
                refusal: JobRefusal::NotATask,
            });
        }
        self.load(job.instance)?;
        let inst = job.instance;
        let p = self.proc_of(inst);
        let host = p
            .index_of(&job.element)
            .ok_or_else(|| EngineError::UnknownElement {
                process: p.id.clone(),
                element: job.element.clone(),
            })?;
        let catcher = p.at(host).boundaries.iter().copied().find(|&b| {
            matches!(&p.at(b).kind, ElementKind::Boundary { trigger: Trigger::Error { code: c }, .. } if c.as_deref().is_none_or(|c| c == code))
        });
        match catcher {
            Some(b) => {
                self.merge_vars(inst, vars)?;
                self.history(inst, &job.element, &format!("bpmn_error {code}"));
                self.interrupt(inst, job.token)?;
                let boundary = p.at(b).id.clone();
                let new = self.new_token(inst, &boundary);
                self.queue.push_back(Step::Leave {
                    inst,
                    token: new,
                    element: b,
                });
                self.run()?;
                Ok(true)
            }
            None => {
                if job.state == JobState::Ready {
                    self.unindex_ready(&job)?;
                }
                if let Some(l) = job.lease.take() {
                    self.t.leases.remove((l.until, id))?;
                }
                let error = format!(
                    "BPMN error '{code}' ({message}) is not caught: '{}' has no error boundary event for it",
                    job.element
                );
                job.attempts += 1;
                job.state = JobState::Incident;
                job.last_error = Some(error.clone());
                job.history.push(Attempt {
                    at: self.now,
                    error,
                });
                self.history(inst, &job.element, "incident");
                self.t.put_job(&job)?;
                self.flush()?;
                Ok(false)
            }
        }
    }

    fn dedup_hit(&self, name: &str, id: &str) -> R<Option<u64>> {
        if let Some(g) = self.t.dedup.get((id, name))? {
            let (seq, at) = g.value();
            if self.now.saturating_sub(at) < self.cfg.dedup_window {
                return Ok(Some(seq));
            }
        }
        Ok(None)
    }

    fn catalog(&self, name: &str) -> R<CatalogRows> {
        if let Some(rows) = self.defs.catalog(name) {
            return Ok(rows);
        }
        let mut out = Vec::new();
        for row in self.t.catalog.range((name, "")..)? {
            let (k, v) = row?;
            let (m, p) = k.value();
            if m != name {
                break;
            }
            out.push((p.to_string(), codec::decode::<CatalogEntry>(v.value())?));
        }
        let rows = Arc::new(out);
        self.defs.put_catalog(name, rows.clone());
        Ok(rows)
    }

    /// Decides what a message meets without changing anything.
    fn classify(&self, name: &str, key: &str) -> R<Decision> {
        let catalog = self.catalog(name)?;
        if catalog.is_empty() {
            return Ok(Decision::Park(Reason::UnknownMessage, Vec::new()));
        }
        let subs = self.t.subscribers(name, key)?;
        match subs.len() {
            1 => return Ok(Decision::Deliver(subs[0].0, subs[0].1)),
            n if n > 1 => {
                let mut c: Vec<u64> = subs.iter().map(|s| s.0).collect();
                c.sort_unstable();
                c.dedup();
                return Ok(Decision::Park(Reason::Ambiguous, c));
            }
            _ => {}
        }
        if let Some((process, _)) = catalog.iter().find(|(_, e)| e.starts) {
            return Ok(Decision::StartInstance(process.clone()));
        }
        if !Tables::multimap_u64(&self.t.expect, name, key)?.is_empty() {
            return Ok(Decision::Wait);
        }
        let passed = Tables::multimap_u64(&self.t.passed, name, key)?;
        if !passed.is_empty() {
            return Ok(Decision::Park(Reason::Late, passed));
        }
        Ok(Decision::Wait)
    }

    /// The buffered publish: correlate, buffer, or park; deduplicated by id.
    pub fn publish(&mut self, msg: &Publish) -> R<Delivery> {
        self.accept(msg, None, false)
    }

    /// Synchronous correlation: correlates or rejects; never buffers, never parks.
    pub fn correlate(&mut self, msg: &Publish) -> R<Delivery> {
        self.accept(msg, None, true)
    }

    fn accept(&mut self, msg: &Publish, requeue: Option<MessageRecord>, sync: bool) -> R<Delivery> {
        if requeue.is_none()
            && let Some(id) = &msg.message_id
            && let Some(seq) = self.dedup_hit(&msg.name, id)?
        {
            self.t.bump("messages_duplicate", 1)?;
            let orig = self.t.message(seq)?;
            return Ok(Delivery {
                outcome: Outcome::Duplicate,
                message_id: id.clone(),
                instance: orig.as_ref().and_then(|m| m.instance),
                element: orig.as_ref().and_then(|m| m.element.clone()),
                reason: None,
                candidates: Vec::new(),
                expires_at: None,
            });
        }
        let decision = self.classify(&msg.name, &msg.key)?;
        if sync {
            let rejection = match &decision {
                Decision::Deliver(..) | Decision::StartInstance(_) => None,
                Decision::Wait => Some((Reason::NoSubscription, Vec::new())),
                Decision::Park(r, c) => Some((*r, c.clone())),
            };
            if let Some((reason, candidates)) = rejection {
                return Ok(Delivery {
                    outcome: Outcome::Rejected,
                    message_id: msg.message_id.clone().unwrap_or_default(),
                    instance: None,
                    element: None,
                    reason: Some(reason),
                    candidates,
                    expires_at: None,
                });
            }
        }
        let mut rec = match requeue {
            Some(mut r) => {
                r.requeues += 1;
                r.reason = None;
                r.candidates.clear();
                r
            }
            None => {
                let seq = self.t.next_seq("message")?;
                let message_id = msg
                    .message_id
                    .clone()
                    .unwrap_or_else(|| format!("pf-{seq}"));
                self.t
                    .dedup
                    .insert((message_id.as_str(), msg.name.as_str()), (seq, self.now))?;
                MessageRecord {
                    seq,
                    message_id,
                    name: msg.name.clone(),
                    key: msg.key.clone(),
                    variables: msg.variables.clone(),
                    state: MessageState::Buffered,
                    reason: None,
                    accepted_at: self.now,
                    expires_at: None,
                    candidates: Vec::new(),
                    instance: None,
                    element: None,
                    raw: None,
                    attributes: msg.attributes.clone(),
                    settled_at: None,
                    note: None,
                    requeues: 0,
                }
            }
        };
        let ttl = msg
            .ttl
            .or_else(|| self.cfg.ttl_per_message.get(&msg.name).copied())
            .unwrap_or(self.cfg.default_ttl);
        let decision = match decision {
            Decision::Wait if ttl == 0 => Decision::Park(Reason::NoSubscription, Vec::new()),
            d => d,
        };
        match decision {
            Decision::Deliver(inst, token) => {
                self.load(inst)?;
                let element = self.deliver(inst, token, &rec.name, &rec.key, &rec.variables)?;
                rec.state = MessageState::Correlated;
                rec.instance = Some(inst);
                rec.element = Some(element);
                rec.settled_at = Some(self.now);
                self.t.put_message(&rec)?;
                self.t.bump("messages_correlated", 1)?;
                self.run()?;
            }
            Decision::StartInstance(process) => {
                let version = self
                    .t
                    .latest
                    .get(process.as_str())?
                    .map(|g| g.value())
                    .unwrap_or(1);
                let def = self.def(&process, version)?;
                let start = def
                    .message_start(&rec.name)
                    .and_then(|e| def.index_of(&e.id))
                    .unwrap_or(0);
                let inst = self.create_instance(
                    def.clone(),
                    version,
                    rec.variables.clone(),
                    Some(rec.key.clone()),
                    start,
                )?;
                rec.state = MessageState::Correlated;
                rec.instance = Some(inst);
                rec.element = Some(def.at(start).id.clone());
                rec.settled_at = Some(self.now);
                self.t.put_message(&rec)?;
                self.t.bump("messages_correlated", 1)?;
                self.run()?;
            }
            Decision::Wait => {
                let expires = self.now.saturating_add(ttl);
                rec.state = MessageState::Buffered;
                rec.expires_at = Some(expires);
                self.t
                    .buffer
                    .insert((rec.name.as_str(), rec.key.as_str(), rec.seq), ())?;
                self.t.expiry.insert((expires, rec.seq), ())?;
                self.t.put_message(&rec)?;
                self.t.bump("messages_buffered", 1)?;
            }
            Decision::Park(reason, candidates) => {
                rec.state = MessageState::Parked;
                rec.reason = Some(reason);
                rec.candidates = candidates;
                rec.settled_at = Some(self.now);
                self.t.parked.insert(rec.seq, ())?;
                self.t.put_message(&rec)?;
                self.t
                    .bump(&format!("messages_parked_{}", reason.as_str()), 1)?;
            }
        }
        Ok(delivery_of(&rec))
    }

    /// Parks a payload that could not be decoded, with its raw bytes.
    pub fn park_malformed(&mut self, m: &Malformed) -> R<Delivery> {
        if let Some(seq) = self.dedup_hit(&m.name, &m.message_id)? {
            self.t.bump("messages_duplicate", 1)?;
            let _ = seq;
            return Ok(Delivery {
                outcome: Outcome::Duplicate,
                message_id: m.message_id.clone(),
                instance: None,
                element: None,
                reason: None,
                candidates: Vec::new(),
                expires_at: None,
            });
        }
        let seq = self.t.next_seq("message")?;
        self.t
            .dedup
            .insert((m.message_id.as_str(), m.name.as_str()), (seq, self.now))?;
        let rec = MessageRecord {
            seq,
            message_id: m.message_id.clone(),
            name: m.name.clone(),
            key: String::new(),
            variables: Vars::new(),
            state: MessageState::Parked,
            reason: Some(Reason::Malformed),
            accepted_at: self.now,
            expires_at: None,
            candidates: Vec::new(),
            instance: None,
            element: None,
            raw: Some(m.raw.clone()),
            attributes: m.attributes.clone(),
            settled_at: Some(self.now),
            note: Some(m.error.clone()),
            requeues: 0,
        };
        self.t.parked.insert(seq, ())?;
        self.t.put_message(&rec)?;
        self.t.bump("messages_parked_malformed", 1)?;
        Ok(delivery_of(&rec))
    }

    /// Parks every buffered message whose TTL ran out; returns how many.
    pub fn expire(&mut self, limit: usize) -> R<usize> {
        let mut due = Vec::new();
        for row in self.t.expiry.range((0u64, 0u64)..=(self.now, u64::MAX))? {
            due.push(row?.0.value());
            if due.len() >= limit {
                break;
            }
        }
        for &(at, seq) in &due {
            self.t.expiry.remove((at, seq))?;
            let Some(mut msg) = self.t.message(seq)? else {
                continue;
            };
            if msg.state != MessageState::Buffered {
                continue;
            }
            self.t
                .buffer
                .remove((msg.name.as_str(), msg.key.as_str(), seq))?;
            msg.state = MessageState::Parked;
            msg.reason = Some(Reason::Expired);
            msg.settled_at = Some(self.now);
            self.t.parked.insert(seq, ())?;
            self.t.put_message(&msg)?;
            self.t.bump("messages_parked_expired", 1)?;
        }
        Ok(due.len())
    }

    fn find_message(&self, id: &str) -> R<MessageRecord> {
        let (name, bare) = match id.split_once('/') {
            Some((n, i)) => (Some(n), i),
            None => (None, id),
        };
        let mut found = Vec::new();
        for seq in seqs_by_id(&self.t.dedup, bare)? {
            if let Some(m) = self.t.message(seq)?
                && name.is_none_or(|n| n == m.name)
            {
                found.push(m);
            }
        }
        match found.len() {
            0 => Err(EngineError::UnknownMessageId(id.to_string())),
            1 => Ok(found.remove(0)),
            _ => Err(EngineError::AmbiguousMessageId {
                id: id.to_string(),
                names: found
                    .iter()
                    .map(|m| m.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Evaluates a parked message again, like a new publish.
    pub fn requeue(&mut self, id: &str) -> R<Delivery> {
        let rec = self.find_message(id)?;
        if rec.state != MessageState::Parked {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: rec.state.as_str(),
            });
        }
        if rec.reason == Some(Reason::Malformed) {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: "malformed (its payload cannot be decoded; discard it)",
            });
        }
        self.t.parked.remove(rec.seq)?;
        let publish = Publish {
            name: rec.name.clone(),
            key: rec.key.clone(),
            message_id: Some(rec.message_id.clone()),
            variables: rec.variables.clone(),
            ttl: None,
            attributes: Vec::new(),
        };
        self.t.bump("messages_requeued", 1)?;
        self.accept(&publish, Some(rec), false)
    }

    /// Ends a parked message explicitly, recording why.
    pub fn discard(&mut self, id: &str, by: &str, why: &str) -> R<()> {
        let mut rec = self.find_message(id)?;
        if rec.state != MessageState::Parked {
            return Err(EngineError::NotParked {
                id: id.to_string(),
                state: rec.state.as_str(),
            });
        }
        self.t.parked.remove(rec.seq)?;
        rec.state = MessageState::Discarded;
        rec.note = Some(match rec.note.take() {
            Some(old) => format!("{old}; discarded by {by}: {why}"),
            None => format!("discarded by {by}: {why}"),
        });
        rec.settled_at = Some(self.now);
        self.t.put_message(&rec)?;
        self.t.bump("messages_discarded", 1)?;
        Ok(())
    }

    // ---------------------------------------------------------------- retention

    /// Removes, in one small batch, completed instances and settled messages
    /// (correlated or discarded, with their dedup records) older than the
    /// retention. Never touches parked or buffered messages, incidents or active
    /// instances. Each call scans at most `limit` records per table from a cursor
    /// kept in `meta`, so records that stay (old parked messages, long-running
    /// instances) never stall it. Returns (instances, messages) removed and whether
    /// a pass over the tables is still under way.
    pub fn cleanup(&mut self, limit: usize) -> R<(usize, usize, bool)> {
        let keep = self.cfg.retention.max(self.cfg.dedup_window);
        let cutoff = self.now.saturating_sub(keep);
        let limit = limit.max(1);

        let from = self
            .t
            .meta
            .get("retention_cursor_messages")?
            .map(|g| g.value())
            .unwrap_or(0);
        let mut old_messages = Vec::new();
        let mut next_msg = 0; // 0: this pass is done
        for (n, row) in self.t.messages.range(from..)?.enumerate() {
            let (k, v) = row?;
            if n == limit {
                next_msg = k.value();
                break;
            }
            let m: MessageRecord = codec::decode(v.value())?;
            if m.accepted_at >= cutoff {
                break;
            }
            let settled = matches!(m.state, MessageState::Correlated | MessageState::Discarded);
            if settled && m.settled_at.is_some_and(|t| t < cutoff) {
                old_messages.push(m);
            }
        }
        for m in &old_messages {
            self.t.messages.remove(m.seq)?;
            self.t
                .dedup
                .remove((m.message_id.as_str(), m.name.as_str()))?;
        }
        self.t.meta.insert("retention_cursor_messages", next_msg)?;

        let from = self
            .t
            .meta
            .get("retention_cursor_instances")?
            .map(|g| g.value())
            .unwrap_or(0);
        let mut old_instances = Vec::new();
        let mut next_inst = 0;
        for (n, row) in self.t.instances.range(from..)?.enumerate() {
            let (k, v) = row?;
            if n == limit {
                next_inst = k.value();
                break;
            }
            let i: InstanceRecord = codec::decode(v.value())?;
            if i.started_at >= cutoff {
                break;
            }
            if i.ended_at.is_some_and(|t| t < cutoff) {
                old_instances.push(i);
            }
        }
        for i in &old_instances {
            let p = self.def(&i.process, i.version)?;
            for (m, var) in &p.correlation_keys {
                if let Some(k) = i.variables.get(var).and_then(key_string) {
                    self.t.passed.remove((m.as_str(), k.as_str()), i.id)?;
                }
            }
            self.t.instances.remove(i.id)?;
        }
        self.t
            .meta
            .insert("retention_cursor_instances", next_inst)?;
        if !old_instances.is_empty() || !old_messages.is_empty() {
            self.t
                .bump("retention_instances_removed", old_instances.len() as u64)?;
            self.t
                .bump("retention_messages_removed", old_messages.len() as u64)?;
        }
        Ok((
            old_instances.len(),
            old_messages.len(),
            next_msg != 0 || next_inst != 0,
        ))
    }

    // ---------------------------------------------------------------- signals

    /// Broadcasts a signal to every current subscription; never buffered.
    pub fn signal(&mut self, name: &str, vars: &Vars) -> R<usize> {
        let n = self.broadcast(name, vars)?;
        self.run()?;
        Ok(n)
    }

    fn broadcast(&mut self, name: &str, vars: &Vars) -> R<usize> {
        let mut subs = Vec::new();
        for v in self.t.signal_subs.get(name)? {
            subs.push(v?.value());
        }
        self.t.bump("signals_thrown", 1)?;
        if subs.is_empty() {
            self.t.bump("signals_unreached", 1)?;
            tracing::info!(signal = name, "signal reached no subscription");
        }
        for &(inst, token) in &subs {
            self.load(inst)?;
            let idx = self.event_target(
                inst,
                token,
                |k| matches!(k, ElementKind::SignalCatch { signal } if signal == name),
            );
            self.cancel_wait(inst, token)?;
            let element = self.proc_of(inst).at(idx).id.clone();
            self.history(inst, &element, "signal_received");
            self.merge_vars(inst, vars)?;
            self.queue.push_back(Step::Leave {
                inst,
                token,
                element: idx,
            });
        }
        Ok(subs.len())
    }

    // ---------------------------------------------------------------- repair

    /// Adds a token before `element` of instance `inst`. Refused when the token
    /// would open a second subscription for a (message, key) that is already
    /// subscribed, or that another token will subscribe once its pending work runs
    /// (the article's trap: an async repair looks like it did nothing), unless `force`.
    pub fn add_token(&mut self, inst: u64, element: &str, force: bool) -> R<Repair> {
        let idx = self.repair_target(inst, element)?;
        if !force {
            self.repair_guard(inst, idx, None)?;
        }
        let token = self.new_token(inst, element);
        self.history(
            inst,
            element,
            if force {
                "token_added_forced"
            } else {
                "token_added"
            },
        );
        self.place(inst, token, idx)
    }

    /// Moves a token to before `element`; guarded like [`Engine::add_token`].
    pub fn move_token(&mut self, inst: u64, token: u64, element: &str, force: bool) -> R<Repair> {
        let idx = self.repair_target(inst, element)?;
        let from = self.existing_token(inst, token)?;
        if !force {
            self.repair_guard(inst, idx, Some(token))?;
        }
        self.cancel_wait(inst, token)?;
        self.clear_boundary_timers(inst, token)?;
        self.history(inst, &from, &format!("token_moved_to {element}"));
        self.place(inst, token, idx)
    }

    /// Removes a token. Removing the last one ends the instance as cancelled.
    pub fn cancel_token(&mut self, inst: u64, token: u64) -> R<Repair> {
        self.repair_target(inst, "")?;
        let at = self.existing_token(inst, token)?;
        self.interrupt(inst, token)?;
        self.history(inst, &at, "token_cancelled");
        if self.inst(inst).tokens.is_empty() {
            self.inst(inst).cancelled = true;
            self.complete_instance(inst)?;
        }
        self.flush()?;
        Ok(Repair {
            token,
            jobs_created: Vec::new(),
            waiting_at: self.waiting(inst)?,
        })
    }

    /// The element of a token named by an operator, or a refusal that changed nothing.
    fn existing_token(&mut self, inst: u64, token: u64) -> R<String> {
        match self.inst(inst).tokens.iter().find(|t| t.id == token) {
            Some(t) => Ok(t.element.clone()),
            None => {
                self.dirty.remove(&inst);
                Err(EngineError::UnknownToken {
                    instance: inst,
                    token,
                })
            }
        }
    }

    /// Loads an active instance for a repair; resolves `element` ("" for none).
    fn repair_target(&mut self, inst: u64, element: &str) -> R<usize> {
        self.load(inst)?;
        let p = self.proc_of(inst);
        if self.inst(inst).ended_at.is_some() {
            self.dirty.remove(&inst);
            return Err(EngineError::InstanceEnded(inst));
        }
        if element.is_empty() {
            return Ok(0);
        }
        p.index_of(element).ok_or_else(|| {
            self.dirty.remove(&inst);
            EngineError::UnknownElement {
                process: p.id.clone(),
                element: element.to_string(),
            }
        })
    }

    /// Refuses a repair that would make a second token wait for a (message, key)
    /// some token (other than `moving`) already waits for or will reach.
    fn repair_guard(&mut self, inst: u64, target: usize, moving: Option<u64>) -> R<()> {
        let p = self.proc_of(inst);
        for m in p.messages_reachable_from(target).to_vec() {
            let var = p.correlation_keys.get(&m).cloned().unwrap_or_default();
            let Some(key) = self.inst(inst).variables.get(&var).and_then(key_string) else {
                continue;
            };
            for other in Tables::multimap_u64(&self.t.expect, &m, &key)? {
                let rec = if other == inst {
                    Some(self.inst(inst).clone())
                } else {
                    self.t.instance(other)?
                };
                let Some(rec) = rec else { continue };
                let op = self.def(&rec.process, rec.version)?;
                let holder = rec.tokens.iter().find(|t| {
                    !(other == inst && Some(t.id) == moving)
                        && op
                            .index_of(&t.element)
                            .is_some_and(|i| op.messages_reachable_from(i).contains(&m))
                });
                if let Some(t) = holder {
                    let existing_element = t.element.clone();
                    self.dirty.remove(&inst);
                    return Err(EngineError::RepairRefused {
                        message: m,
                        key,
                        existing_instance: other,
                        existing_element,
                    });
                }
            }
        }
        Ok(())
    }

    /// Lets a repaired token arrive at `idx` and reports what that scheduled.
    fn place(&mut self, inst: u64, token: u64, idx: usize) -> R<Repair> {
        let before = self.jobs_created.len();
        self.queue.push_back(Step::Arrive {
            inst,
            token,
            element: idx,
            via: None,
        });
        self.run()?;
        let jobs_created = self.jobs_created[before..].to_vec();
        Ok(Repair {
            token,
            jobs_created,
            waiting_at: self.waiting(inst)?,
        })
    }

    fn waiting(&self, inst: u64) -> R<Vec<String>> {
        Ok(self
            .t
            .instance(inst)?
            .map(|r| r.tokens.iter().map(|t| t.element.clone()).collect())
            .unwrap_or_default())
    }
}

enum Decision {
    Deliver(u64, u64),
    StartInstance(String),
    Wait,
    Park(Reason, Vec<u64>),
}

fn delivery_of(rec: &MessageRecord) -> Delivery {
    Delivery {
        outcome: match rec.state {
            MessageState::Buffered => Outcome::Buffered,
            MessageState::Parked | MessageState::Discarded => Outcome::Parked,
            MessageState::Correlated => Outcome::Correlated,
        },
        message_id: rec.message_id.clone(),
        instance: rec.instance,
        element: rec.element.clone(),
        reason: rec.reason,
        candidates: rec.candidates.clone(),
        expires_at: rec
            .expires_at
            .filter(|_| rec.state == MessageState::Buffered),
    }
}

/// Delay before attempt `attempts + 1`: `retry_base · 2^(attempts-1)`, capped,
/// with ±10 % jitter derived from the job id so that replay computes the same.
pub fn backoff(cfg: &Config, job: u64, attempts: u32) -> Millis {
    let shift = attempts.saturating_sub(1).min(40);
    let raw = cfg
        .retry_base
        .saturating_mul(1u64 << shift)
        .min(cfg.retry_cap);
    let mut h =
        job.wrapping_mul(0x9E3779B97F4A7C15) ^ (attempts as u64).wrapping_mul(0xC2B2AE3D27D4EB4F);
    h ^= h >> 29;
    let frac = (h % 2001) as f64 / 1000.0 - 1.0; // -1.0 ..= 1.0
    (raw as f64 * (1.0 + 0.1 * frac)).round() as Millis
}

fn fingerprint(xml: &str, overrides: &BTreeMap<String, String>) -> u64 {
    // FNV-1a: stable across builds, unlike std's hasher
    let mut h: u64 = 0xcbf29ce484222325;
    let mut feed = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    };
    feed(xml.as_bytes());
    for (k, v) in overrides {
        feed(k.as_bytes());
        feed(b"=");
        feed(v.as_bytes());
        feed(b";");
    }
    h
}
