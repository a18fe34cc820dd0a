//! Instance migration: a running instance moves from one version of its
//! process to another. A plan maps each element of the old version to one
//! of the new (by the same id unless mapped); every token goes to its
//! element's counterpart.
//!
//! What happens to a token, by what it waits for:
//! - **kept** where the target element does the same (the same kind with
//!   the same settings; a running scope, body or call; an incident): the
//!   token is renamed, and its job, timer, user task (with its assignee),
//!   subscription and boundary registrations stay as they are;
//! - **re-opened** where the target differs: the old wait is cancelled and
//!   the token arrives at the target anew (a new job, a timer counted from
//!   now, a subscription under the key computed now — which takes a
//!   buffered message at once);
//! - boundary events stay where the target has the same ones, else they are
//!   closed and the target's opened;
//! - a listening event subprocess the target lacks stops; one the target
//!   adds begins to listen.
//!
//! Invariant: an instance is checked whole before its first write (`plan`
//! is pure over the model and the tokens); one that cannot migrate is refused
//! with its reason and nothing of it changes. Variables stay as they are.

use super::*;
use crate::store::JobRecord;
pub use crate::store::batches::MigrationPlan;
use plan::{Step, boundary_counterpart, check_compensables, plan_instance};
use serde::Serialize;

mod plan;

/// What happens to one token in a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carry {
    /// Renamed; its wait and registrations stay.
    Kept,
    /// Its wait is cancelled and it arrives at the target anew.
    Reopened,
    /// A listener of an event subprocess the target does not listen with:
    /// it stops.
    Closed,
    /// A listener the target adds.
    Opened,
}

/// One token's move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenMove {
    /// The token.
    pub token: u64,
    /// Its element in the old version (empty for an opened listener).
    pub from: String,
    /// Its element in the new version (empty for a closed listener).
    pub to: String,
    /// What happens to it.
    pub carry: Carry,
    /// Its boundary events are closed and the target's opened.
    pub boundaries_reopened: bool,
}

/// What a migration did (or, in a dry run, would do) to one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Migrated {
    /// The instance.
    pub instance: u64,
    /// Every token's move (listeners a target adds are opened after).
    pub tokens: Vec<TokenMove>,
}

/// What a migration did (or would do) to each instance asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct MigrationReport {
    /// The instances migrated (in a dry run: that would be).
    pub migrated: Vec<Migrated>,
    /// The instances refused: (instance, why).
    pub refused: Vec<(u64, String)>,
    /// A selection too large to migrate in one call became this durable
    /// batch ([`crate::Postfach::migrate`]); its items' outcomes are its own.
    pub batch: Option<u64>,
}

impl<'a, 't> Engine<'a, 't> {
    /// Migrates each of `instances` as `plan` says, each whole or not at
    /// all: one that cannot move is refused with its reason (in the
    /// report) and the others go on. Only a storage failure fails the
    /// command.
    pub fn migrate_all(
        &mut self,
        plan: &MigrationPlan,
        instances: &[u64],
        dry_run: bool,
    ) -> R<MigrationReport> {
        if plan.from == plan.to {
            return Err(EngineError::MigrationRefused {
                instance: instances.first().copied().unwrap_or(0),
                reason: format!("version {} is the version it runs", plan.to),
            });
        }
        self.def(&plan.process, plan.from)?;
        self.def(&plan.process, plan.to)?;
        let mut report = MigrationReport::default();
        for &inst in instances {
            match self.migrate(plan, inst, dry_run) {
                Ok(m) => report.migrated.push(m),
                Err(EngineError::Store(e)) => return Err(EngineError::Store(e)),
                Err(e) => report.refused.push((inst, refusal_text(inst, &e))),
            }
        }
        Ok(report)
    }

    /// Migrates running instance `inst` as `plan` says, or (`dry_run`) says
    /// what it would do. Refused, with nothing changed, when the instance
    /// does not run version `plan.from` of `plan.process` or cannot move
    /// ([`EngineError::MigrationRefused`] names why).
    pub fn migrate(&mut self, plan: &MigrationPlan, inst: u64, dry_run: bool) -> R<Migrated> {
        self.load_active(inst)?;
        let refuse = |e: &mut Self, reason: String| {
            e.dirty.remove(&inst);
            Err(EngineError::MigrationRefused {
                instance: inst,
                reason,
            })
        };
        let (process, version) = {
            let r = self.inst(inst);
            (r.process.clone(), r.version)
        };
        if process != plan.process || version != plan.from {
            let why = format!(
                "it runs version {version} of '{process}', not version {} of '{}'",
                plan.from, plan.process
            );
            return refuse(self, why);
        }
        let from = self.proc_of(inst);
        let to = match self.def(&plan.process, plan.to) {
            Ok(p) => p,
            Err(e) => {
                self.dirty.remove(&inst);
                return Err(e);
            }
        };
        let jobs = self.held_jobs(inst)?;
        let rows = self.t.compensables(inst)?;
        let steps = match plan_instance(&from, &to, &plan.map, &self.inst(inst).tokens, &jobs)
            .and_then(|s| check_compensables(&to, &plan.map, &rows).map(|()| s))
        {
            Ok(s) => s,
            Err(why) => return refuse(self, why),
        };
        let mut out = Migrated {
            instance: inst,
            tokens: steps.iter().map(|s| describe(&to, self, inst, s)).collect(),
        };
        if dry_run {
            out.tokens.extend(
                self.missing_listeners(inst, &to)
                    .into_iter()
                    .map(|(_, esp)| TokenMove {
                        token: 0,
                        from: String::new(),
                        to: to.at(esp).id.clone(),
                        carry: Carry::Opened,
                        boundaries_reopened: false,
                    }),
            );
            self.dirty.remove(&inst);
            return Ok(out);
        }
        self.switch_version(inst, &from, &to, plan.to, &jobs)?;
        for (seq, c) in rows {
            let mut c = c;
            let target = mapped(&plan.map, &c.element).to_string();
            let idx = to.index_of(&target);
            c.handler = idx
                .and_then(|i| to.compensation_handler(i))
                .map(|h| to.at(h).id.clone());
            c.element = target;
            self.t.update_compensable(inst, seq, &c)?;
        }
        for s in &steps {
            self.migrate_token(inst, &from, &to, &plan.map, s)?;
        }
        for (holder, esp) in self.missing_listeners(inst, &to) {
            let listener = self.new_token(inst, &to.at(esp).id, holder);
            out.tokens.push(TokenMove {
                token: listener,
                from: String::new(),
                to: to.at(esp).id.clone(),
                carry: Carry::Opened,
                boundaries_reopened: false,
            });
            self.queue.push_back(super::Step::Execute {
                inst,
                token: listener,
                element: esp,
            });
        }
        let by = self.by_actor();
        let what = format!("migrated v{} → v{}{by}", plan.from, plan.to);
        self.history(inst, &plan.process, &what);
        self.run()?;
        self.flush()?;
        Ok(out)
    }

    /// Every job the tokens of loaded instance `inst` hold (their waits'
    /// and their boundary timers).
    fn held_jobs(&mut self, inst: u64) -> R<Vec<JobRecord>> {
        let ids: Vec<u64> = self
            .inst(inst)
            .tokens
            .iter()
            .flat_map(|t| t.wait.jobs().into_iter().chain(t.timers.iter().copied()))
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(j) = self.t.job(id)? {
                out.push(j);
            }
        }
        Ok(out)
    }

    /// The instance counts under version `to` from now on: the store moves
    /// its per-version rows and gauges, the engine runs it by `to`.
    fn switch_version(
        &mut self,
        inst: u64,
        from: &Process,
        to: &Arc<Process>,
        version: u32,
        jobs: &[JobRecord],
    ) -> R<()> {
        let d = self
            .dirty
            .get_mut(&inst)
            .expect("instance loaded before use");
        let old = (d.rec.process.as_str(), d.rec.version);
        self.t.move_job_versions(inst, jobs, old, version)?;
        self.t
            .move_version(&d.rec, &mut d.before, version, (from, to))?;
        d.rec.version = version;
        d.process = to.clone();
        Ok(())
    }

    /// Applies one token's step (the instance runs the target version).
    fn migrate_token(
        &mut self,
        inst: u64,
        from: &Process,
        to: &Process,
        map: &BTreeMap<String, String>,
        s: &Step,
    ) -> R<()> {
        let Some(idx) = s.target else {
            return self.interrupt(inst, s.token);
        };
        let target = to.at(idx);
        let Some(t) = self.inst(inst).tokens.get(s.token).cloned() else {
            return Ok(());
        };
        match s.carry {
            Carry::Kept | Carry::Opened => {
                if let Some(tok) = self.inst(inst).tokens.get_mut(s.token) {
                    tok.element = target.id.clone();
                    if let (Wait::Join { flow }, Some(f)) = (&mut tok.wait, s.join_flow) {
                        *flow = f;
                    }
                }
                // a job belongs to the token's element, or (an event-based
                // gateway's timers) to the catch event it fires
                for job in t.wait.jobs() {
                    if let Some(j) = self.t.job(job)? {
                        let to_id = mapped(map, &j.element).to_string();
                        self.t.rename_job(job, &to_id)?;
                    }
                }
                if let Wait::Task { task } = &t.wait {
                    self.t.rename_task(*task, &target.id, target.name.clone())?;
                }
                if s.boundaries_reopened {
                    self.close_boundaries(inst, s.token)?;
                    self.open_boundaries(inst, s.token, to, idx)?;
                } else {
                    self.rename_boundary_timers(&t, from, to, map, idx)?;
                }
            }
            Carry::Reopened => {
                self.close_boundaries(inst, s.token)?;
                self.cancel_wait(inst, s.token)?;
                let id = target.id.clone();
                if let Some(tok) = self.inst(inst).tokens.get_mut(s.token) {
                    tok.element = id;
                }
                self.queue_arrive(inst, s.token, idx, None);
            }
            Carry::Closed => return self.interrupt(inst, s.token),
        }
        Ok(())
    }

    /// A kept token's boundary timers belong to the target's boundary events.
    fn rename_boundary_timers(
        &mut self,
        t: &Token,
        from: &Process,
        to: &Process,
        map: &BTreeMap<String, String>,
        host: usize,
    ) -> R<()> {
        for &job in &t.timers {
            let Some(rec) = self.t.job(job)? else {
                continue;
            };
            let Some(b) = from.index_of(&rec.element) else {
                continue;
            };
            if let Some(tb) = boundary_counterpart(from, to, map, b, host) {
                self.t.rename_job(job, &to.at(tb).id)?;
            }
        }
        Ok(())
    }

    /// The event subprocesses of `to` that listen (message, timer, signal,
    /// condition) in an active scope of loaded instance `inst` without a
    /// listener token there: (holder, event subprocess).
    fn missing_listeners(&mut self, inst: u64, to: &Process) -> Vec<(u64, usize)> {
        let rec = self.inst(inst);
        let mut scopes: Vec<(u64, Option<usize>)> = vec![(0, None)];
        for t in rec.tokens.iter() {
            if matches!(t.wait, Wait::Scope)
                && let Some(i) = to.index_of(&t.element)
            {
                scopes.push((t.id, Some(i)));
            }
        }
        let mut out = Vec::new();
        for (holder, container) in scopes {
            for esp in to.event_subprocesses_of(container) {
                let ElementKind::Scope(ScopeKind::EventSubProcess { trigger, .. }) =
                    &to.at(esp).kind
                else {
                    continue;
                };
                if !listens(trigger) {
                    continue;
                }
                let id = &to.at(esp).id;
                let has = rec
                    .tokens
                    .iter()
                    .any(|t| t.scope == holder && &t.element == id && t.wait != Wait::Scope);
                if !has {
                    out.push((holder, esp));
                }
            }
        }
        out
    }
}

/// A refusal in the report's words: a migration refusal's reason, any
/// other refusal as it reads.
fn refusal_text(inst: u64, e: &EngineError) -> String {
    match e {
        EngineError::MigrationRefused { instance, reason } if *instance == inst => reason.clone(),
        other => other.to_string(),
    }
}

/// Whether an event subprocess with this trigger has a listener token.
fn listens(trigger: &Trigger) -> bool {
    match trigger {
        Trigger::Message { .. }
        | Trigger::Timer(_)
        | Trigger::Signal { .. }
        | Trigger::Condition { .. } => true,
        Trigger::Error { .. }
        | Trigger::Escalation { .. }
        | Trigger::Compensation { .. }
        | Trigger::Cancel => false,
    }
}

/// The element `id` maps to.
fn mapped<'m>(map: &'m BTreeMap<String, String>, id: &'m str) -> &'m str {
    map.get(id).map_or(id, String::as_str)
}

/// A token's move in words (the report), from its step.
fn describe(to: &Process, e: &mut Engine, inst: u64, s: &Step) -> TokenMove {
    let element = e
        .inst(inst)
        .tokens
        .get(s.token)
        .map(|t| t.element.clone())
        .unwrap_or_default();
    TokenMove {
        token: s.token,
        from: element,
        to: s.target.map(|i| to.at(i).id.clone()).unwrap_or_default(),
        carry: s.carry,
        boundaries_reopened: s.boundaries_reopened,
    }
}
