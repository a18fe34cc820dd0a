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

use crate::clock::Millis;
use crate::codec;
use crate::model::Vars;
use crate::model::{
    self, ActivityKind, CatchKind, ElementKind, GatewayKind, Process, ScopeKind, StartKind,
    ThrowKind, Trigger,
};
use crate::store::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use def_cache::CatalogRows;
pub use def_cache::DefCache;
pub(crate) use def_cache::load_def;
use delivery::{Decision, delivery_of, unsettled};
pub use delivery::{Delivery, Malformed, Outcome, Publish};
pub use error::{EngineError, JobRefusal};
pub use tasks::{TaskAction, TaskRefusal};

mod ad_hoc;
mod audit;
mod batches;
pub use batches::MAX_BATCH_ITEMS;
mod calls;
mod catch;
mod compensation;
use catch::Catcher;
mod conditions;
mod decisions;
mod def_cache;
mod delivery;
mod deploy;
mod error;
mod event_subprocesses;
mod family;
mod flow;
mod jobs;
mod messages;
mod migration;
mod moves;
pub use migration::{Carry, Migrated, MigrationPlan, MigrationReport, TokenMove};
pub use moves::MoveCommand;
mod multi_instance;
mod parked_events;
pub use parked_events::{EVENT_ID_PREFIX, ParkedEvent};
mod repair;
mod retention;
mod scripts;
mod slots;
mod tasks;
#[cfg(test)]
mod tests;
mod throws;
mod timers;
mod waits;

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
    /// The most inner instances one multi-instance activity runs (default
    /// [`crate::limits::MULTI_INSTANCE_ITEMS`], at most 1,000,000): above it
    /// the activity stops at an incident that names the limit.
    pub multi_instance_items: u32,
    /// The partition this engine is: it accepts only the correlation keys
    /// and ids it owns. Set from the database when it opens
    /// ([`crate::Options::partition`]).
    pub partition: crate::partition::Partition,
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
            multi_instance_items: crate::limits::MULTI_INSTANCE_ITEMS,
            partition: crate::partition::Partition::SINGLE,
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
        let items = crate::limits::MULTI_INSTANCE_ITEMS_RANGE;
        crate::limits::check_count(
            "multi_instance_items",
            self.multi_instance_items as usize,
            *items.start() as usize..=*items.end() as usize,
        )?;
        Ok(())
    }
}

/// A deployed process version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    /// The process id (or the decision's, see `decision`).
    pub process: String,
    /// Whether it is a DMN decision rather than a process.
    pub decision: bool,
    /// The version now stored for it.
    pub version: u32,
    /// False when an identical model was already the latest version.
    pub new_version: bool,
}

/// What a handler or worker is given to do a task job.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The job's id.
    pub job: u64,
    /// The instance the job belongs to.
    pub instance: u64,
    /// The element (service task, send task …) the job runs for.
    pub element: String,
    /// The topic workers fetch it by.
    pub topic: String,
    /// The instance's variables when the job was locked.
    pub variables: Vars,
    /// `instance:element:activation` — the same for every attempt of this job.
    pub idempotency_key: String,
    /// Which attempt this is (1 for the first).
    pub attempt: u32,
    /// For a script or business-rule task: what to evaluate (postfach runs no
    /// script language or DMN itself). `None` for service and send tasks.
    pub work: Option<model::Delegated>,
}

/// A task job locked for a handler or worker: the work and the lease it is held under.
#[derive(Debug, Clone)]
pub struct LockedJob {
    /// The work.
    pub task: JobContext,
    /// The fencing token of the lease: only a result that carries it is accepted.
    pub lease_token: u64,
}

/// Result of a token repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The token that was added or moved.
    pub token: u64,
    /// Jobs the repair created: the work happens when they run, not now.
    pub jobs_created: Vec<u64>,
    /// Where the instance's tokens wait afterwards.
    pub waiting_at: Vec<String>,
}

/// Result of a trigger: the element the token left and where the instance's
/// tokens wait afterwards, as the same transaction left them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triggered {
    /// The wait state the token left.
    pub element: String,
    /// Where the instance's tokens wait afterwards.
    pub waiting_at: Vec<String>,
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

impl Step {
    fn token(&self) -> u64 {
        match *self {
            Step::Arrive { token, .. }
            | Step::Execute { token, .. }
            | Step::Leave { token, .. } => token,
        }
    }

    fn instance(&self) -> u64 {
        match *self {
            Step::Arrive { inst, .. } | Step::Execute { inst, .. } | Step::Leave { inst, .. } => {
                inst
            }
        }
    }
}

struct Dirty {
    rec: InstanceRecord,
    process: Arc<Process>,
    /// Where its tokens rested when the instance was loaded: the store moves
    /// the index rows from there when it is written.
    before: Resting,
    /// Its variables changed, or a conditional event began to wait: its
    /// conditions are asked once every token rests (`fire_conditions`).
    conditions_due: bool,
}

/// One engine command application over a transaction's tables.
pub struct Engine<'a, 't> {
    t: &'a mut Tables<'t>,
    defs: &'a DefCache,
    cfg: &'a Config,
    now: Millis,
    /// Boxed: a map node holds eleven entries, and an instance record is large.
    dirty: BTreeMap<u64, Box<Dirty>>,
    queue: VecDeque<Step>,
    jobs_created: Vec<u64>,
    /// Who the command being applied is done by (an audited command's
    /// principal): its repairs' history entries name it.
    actor: Option<String>,
}

type R<T> = Result<T, EngineError>;

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
            actor: None,
        }
    }

    /// The jobs this command created so far.
    pub(crate) fn jobs_created(&self) -> &[u64] {
        &self.jobs_created
    }

    fn def(&self, process: &str, version: u32) -> R<Arc<Process>> {
        load_def(self.defs, process, version, || {
            self.t.definition(process, version)
        })?
        .ok_or_else(|| EngineError::UnknownProcess(format!("{process} (version {version})")))
    }

    fn load(&mut self, id: u64) -> R<()> {
        if self.dirty.contains_key(&id) {
            return Ok(());
        }
        self.own_id("instance", id)?;
        let rec = self
            .t
            .instance(id)?
            .ok_or(EngineError::UnknownInstance(id))?;
        let process = self.def(&rec.process, rec.version)?;
        let before = Resting::of(&rec);
        self.dirty.insert(
            id,
            Box::new(Dirty {
                rec,
                process,
                before,
                conditions_due: false,
            }),
        );
        Ok(())
    }

    /// Loads instance `inst` with token `token` and the scopes around it.
    fn load_at(&mut self, inst: u64, token: u64) -> R<()> {
        self.load(inst)?;
        self.fill_chain(inst, token)
    }

    /// Reads token `token` of loaded instance `inst`, unless it is known.
    fn fill(&mut self, inst: u64, token: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_token(inst, &mut d.rec.tokens, token)?)
    }

    /// Reads token `token` and the tokens holding the scopes around it.
    fn fill_chain(&mut self, inst: u64, token: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_chain(inst, &mut d.rec.tokens, token)?)
    }

    /// Reads every token of `inst`: for what looks at all of them (repairs,
    /// joins, terminate, conditions), never on the path of a plain step.
    fn fill_all(&mut self, inst: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_all(inst, &mut d.rec.tokens)?)
    }

    /// Reads the tokens running in scope `scope` of `inst` (and its size).
    fn fill_scope(&mut self, inst: u64, scope: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_scope(inst, &mut d.rec.tokens, scope)?)
    }

    /// Reads how many tokens run in scope `scope` of `inst`.
    fn fill_size(&mut self, inst: u64, scope: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_size(inst, &mut d.rec.tokens, scope)?)
    }

    /// Reads every variable of `inst`.
    fn fill_vars(&mut self, inst: u64) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        Ok(self.t.fill_variables(inst, &mut d.rec.variables)?)
    }

    /// The variables `token` sees, only those named (each read first): what
    /// an expression over these names needs, without reading the others (a
    /// large collection among them).
    fn vars_named<'n>(
        &mut self,
        inst: u64,
        token: u64,
        names: impl IntoIterator<Item = &'n str>,
    ) -> R<Vars> {
        let names: Vec<String> = names.into_iter().map(str::to_string).collect();
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        for n in &names {
            self.t.fill_variable(inst, &mut d.rec.variables, n)?;
        }
        Ok(self.inst(inst).view_of(token, &names))
    }

    /// Every variable `token` sees (all are read).
    fn vars_all(&mut self, inst: u64, token: u64) -> R<Vars> {
        self.fill_vars(inst)?;
        Ok(self.inst(inst).view(token).into_owned())
    }

    /// The ids of the tokens running in scope `scope` of `inst` now.
    fn members(&mut self, inst: u64, scope: u64) -> R<Vec<u64>> {
        self.fill_scope(inst, scope)?;
        Ok(self
            .inst(inst)
            .tokens
            .held()
            .filter(|t| t.scope == scope)
            .map(|t| t.id)
            .collect())
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
        self.inst(inst).record(element, event, at);
    }

    fn set_token(&mut self, inst: u64, token: u64, element: &str, wait: Wait) {
        let now = self.now;
        let rec = self.inst(inst);
        if let Some(t) = rec.tokens.get_mut(token) {
            if t.element != element
                || std::mem::discriminant(&t.wait) != std::mem::discriminant(&wait)
            {
                t.since = now;
            }
            t.element = element.to_string();
            t.wait = wait;
        }
    }

    /// A new token at `element`, running in `scope` (the token holding it, 0
    /// for the process itself).
    fn new_token(&mut self, inst: u64, element: &str, scope: u64) -> u64 {
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
            scope,
            locals: Vars::new(),
            boundary_messages: Vec::new(),
            boundary_signals: Vec::new(),
        });
        id
    }

    /// The scope `token` runs in (0: the process itself, or no such token).
    fn scope_of(&mut self, inst: u64, token: u64) -> u64 {
        self.inst(inst).tokens.get(token).map_or(0, |t| t.scope)
    }

    /// Whether `token` of `inst` exists (a queued step of a withdrawn token
    /// is dropped); reads it and the scopes around it.
    fn has_token(&mut self, inst: u64, token: u64) -> R<bool> {
        self.fill_chain(inst, token)?;
        Ok(self.inst(inst).tokens.get(token).is_some())
    }

    fn incident(&mut self, inst: u64, token: u64, element: &str, error: String) {
        tracing::warn!(instance = inst, element, %error, "incident");
        self.history(inst, element, "incident");
        self.set_token(inst, token, element, Wait::Incident { error });
    }

    /// An element's result arrives (a job's, a user task's, a message's or a
    /// signal's variables). With output mappings only the mapped values reach
    /// the instance, computed from its variables, the element's inputs and the
    /// result; without them the result is merged as it is. `false` when a
    /// mapping's FEEL expression fails: the token stops at an incident
    /// naming it instead of moving on.
    fn complete_with(&mut self, inst: u64, token: u64, idx: usize, vars: &Vars) -> R<bool> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let x = &el.extras;
        if x.outputs.is_empty() {
            self.merge_vars(inst, token, vars);
            return Ok(true);
        }
        let mut local = self.vars_all(inst, token)?;
        let out = model::mapped(&x.inputs, &local, self.now).and_then(|inputs| {
            local.extend(inputs);
            local.extend(vars.clone());
            model::mapped(&x.outputs, &local, self.now)
        });
        match out {
            Ok(out) => {
                self.merge_vars(inst, token, &out);
                Ok(true)
            }
            Err(e) => {
                let error = format!(
                    "output {e}: fix the variables it reads, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
                Ok(false)
            }
        }
    }

    /// Sets `vars` as `token` writes them: a variable local to a scope
    /// around the token changes there, any other in the instance
    /// ([`InstanceRecord::assign`]).
    fn merge_vars(&mut self, inst: u64, token: u64, vars: &Vars) {
        if vars.is_empty() {
            return;
        }
        let rec = self.inst(inst);
        for (k, v) in vars {
            rec.assign(token, k, v.clone());
        }
        self.conditions_due(inst);
    }

    /// The conditions of `inst` are to be asked once every token rests.
    fn conditions_due(&mut self, inst: u64) {
        if let Some(d) = self.dirty.get_mut(&inst) {
            d.conditions_due = true;
        }
    }

    /// Writes every touched instance; the store moves its index rows.
    fn flush(&mut self) -> R<()> {
        let ids: Vec<u64> = self.dirty.keys().copied().collect();
        for id in ids {
            self.refresh_expect(id)?;
        }
        for (_, mut d) in std::mem::take(&mut self.dirty) {
            self.t
                .put_instance(&mut d.rec, &d.before, Some(&d.process))?;
        }
        Ok(())
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
