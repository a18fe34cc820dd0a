//! The log's record ([`Command`]: what callers ask the writer), what each
//! answers ([`Reply`]), and [`apply`]: one command applied to the engine.
//!
//! Invariant: `Command` is the log's record format — variants are appended
//! last and each has golden bytes (`commit::tests`); `apply` is one
//! exhaustive match, so a new command does not compile until it says what it
//! does.

use super::{Parsed, unreachable_reply};
use crate::clock::Millis;
use crate::engine::{
    Delivery, Deployed, Engine, EngineError, LockedJob, Malformed, Publish, Repair,
};
use crate::error::Error;
use crate::model::Vars;
use crate::store::JobState;
use std::collections::BTreeMap;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) enum Command {
    Deploy {
        file: String,
        xml: String,
        overrides: BTreeMap<String, String>,
    },
    Start {
        process: String,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
        business_key: Option<String>,
    },
    Publish(Publish),
    Correlate(Publish),
    Malformed(Malformed),
    Signal {
        name: String,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    RunContinuations {
        limit: usize,
    },
    LockJobs {
        topic: String,
        max: usize,
        owner: String,
        lease: Millis,
        in_process: bool,
    },
    CompleteJob {
        job: u64,
        lease: Option<u64>,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    FailJob {
        job: u64,
        lease: Option<u64>,
        error: String,
        retries_left: Option<u32>,
        retry_delay: Option<Millis>,
    },
    ExtendLease {
        job: u64,
        lease: u64,
        by: Millis,
    },
    ThrowError {
        job: u64,
        lease: Option<u64>,
        code: String,
        message: String,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    RetryJob {
        job: u64,
    },
    Requeue {
        id: String,
    },
    Discard {
        id: String,
        by: String,
        why: String,
    },
    AddToken {
        instance: u64,
        element: String,
        force: bool,
    },
    MoveToken {
        instance: u64,
        token: u64,
        element: String,
        force: bool,
    },
    CancelToken {
        instance: u64,
        token: u64,
    },
    Cleanup {
        limit: usize,
    },
    ReleaseAllLeases,
    Tick,
    /// A person acts on a user task. (Variant order is the log format: new
    /// variants go last.)
    Task {
        task: u64,
        user: String,
        action: crate::engine::TaskAction,
    },
    /// [`Command::LockJobs`] for a worker that names the variables it needs.
    LockJobsFetching {
        topic: String,
        max: usize,
        owner: String,
        lease: Millis,
        fetch: Vec<String>,
    },
    /// A caller moves a token on from its wait state.
    Trigger {
        instance: u64,
        token: u64,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    /// The broker confirmed these events about parked messages.
    ParkedEventsSent {
        ids: Vec<u64>,
    },
    /// A signal with an id, applied once here (a cluster's partitions take a
    /// signal at least once each).
    SignalOnce {
        id: String,
        name: String,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    /// Every other partition took these signals thrown here: (seq, whether
    /// the signal reached no receiver on any partition).
    SignalsForwarded {
        done: Vec<(u64, bool)>,
    },
    /// Variables offered to the conditional start events (of one process,
    /// or of every one).
    StartByConditions {
        process: Option<String>,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    /// A caller activates an activity of the ad-hoc subprocess a token
    /// holds, or (`activate` none) completes it.
    AdHoc {
        instance: u64,
        token: u64,
        activate: Option<String>,
    },
    /// A command done by a principal: applied with its audit entry.
    By {
        by: String,
        command: Box<Command>,
    },
    /// A caller ends a running instance as cancelled.
    CancelInstance {
        instance: u64,
    },
    /// A caller sets variables of a running instance, as `token` writes
    /// them (0: the instance), or on the token itself (`local`).
    SetVariables {
        instance: u64,
        token: u64,
        local: bool,
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
    /// A principal took backup `id` of this partition: changes nothing but
    /// the audit trail (the copy itself is not a command).
    BackupTaken {
        id: String,
    },
    /// Instances of one version move to another as `plan` says (or, with
    /// `dry_run`, are only checked); each is migrated whole or refused.
    Migrate {
        plan: crate::engine::MigrationPlan,
        instances: Vec<u64>,
        dry_run: bool,
    },
    /// A durable batch of `op` over `items`, fixed from now on.
    CreateBatch {
        op: crate::store::batches::BatchOp,
        items: Vec<crate::store::batches::BatchItem>,
    },
    /// The next slice of at most `limit` items of batch `batch`.
    RunBatch {
        batch: u64,
        limit: usize,
    },
    /// A caller stops batch `batch`.
    StopBatch {
        batch: u64,
    },
    /// A step of a move of key slots between partitions.
    SlotMove(crate::engine::MoveCommand),
}

impl Command {
    /// Whether committing this command can make new work due for the executor.
    /// The executor's own polling commands do not, so it never wakes itself.
    /// Whether it carries a model's source (a deploy: up to megabytes), which
    /// the writer encodes for the log rather than its caller: encoding it on
    /// a runtime thread would hold up the publishes scheduled there.
    pub(crate) fn carries_a_model(&self) -> bool {
        match self {
            Command::By { command, .. } => command.carries_a_model(),
            Command::Deploy { .. } => true,
            _ => false,
        }
    }

    pub(super) fn wakes_executor(&self) -> bool {
        if let Command::By { command, .. } = self {
            return command.wakes_executor();
        }
        !matches!(
            self,
            Command::RunContinuations { .. }
                | Command::LockJobs { .. }
                | Command::LockJobsFetching { .. }
                | Command::ExtendLease { .. }
                | Command::Tick
                | Command::Cleanup { .. }
                | Command::ParkedEventsSent { .. }
                | Command::SignalsForwarded { .. }
        )
    }
}

pub(crate) enum Reply {
    Deployed(Vec<Deployed>),
    Started(u64),
    Delivery(Delivery),
    Count(usize),
    Locked(Vec<LockedJob>),
    JobState(JobState),
    Repair(Repair),
    Cleaned(usize, usize, bool),
    /// What a trigger did.
    Triggered(crate::engine::Triggered),
    /// The instances a command started.
    StartedAll(Vec<u64>),
    /// What a migration did to each instance.
    Migrated(crate::engine::MigrationReport),
    /// A batch as it is after the command.
    Batch(crate::store::batches::BatchRecord),
    Done,
}

/// Typed views of a reply; a mismatch cannot happen for the command sent.
macro_rules! reply_as {
    ($($fn_name:ident: $variant:ident => $ty:ty),* $(,)?) => {
        impl Reply {
            $(pub(crate) fn $fn_name(self) -> Result<$ty, Error> {
                match self {
                    Reply::$variant(v) => Ok(v),
                    _ => unreachable_reply(),
                }
            })*
        }
    };
}

reply_as! {
    repair: Repair => Repair,
    delivery: Delivery => Delivery,
    deployed: Deployed => Vec<Deployed>,
    started: Started => u64,
    count: Count => usize,
    locked: Locked => Vec<LockedJob>,
    job_state: JobState => JobState,
    triggered: Triggered => crate::engine::Triggered,
    started_all: StartedAll => Vec<u64>,
    migrated: Migrated => crate::engine::MigrationReport,
    batch: Batch => crate::store::batches::BatchRecord,
}

pub(super) fn apply(
    e: &mut Engine<'_, '_>,
    cmd: &Command,
    parsed: Option<Parsed>,
) -> Result<Reply, EngineError> {
    Ok(match cmd {
        Command::Deploy {
            file,
            xml,
            overrides,
        } => Reply::Deployed(e.deploy(file, xml, overrides, parsed)?),
        Command::Start {
            process,
            vars,
            business_key,
        } => Reply::Started(e.start(process, vars.clone(), business_key.clone())?),
        Command::Publish(p) => Reply::Delivery(e.publish(p)?),
        Command::Correlate(p) => Reply::Delivery(e.correlate(p)?),
        Command::Malformed(m) => Reply::Delivery(e.park_malformed(m)?),
        Command::Signal { name, vars } => Reply::Count(e.signal(name, vars)?),
        Command::RunContinuations { limit } => Reply::Count(e.run_continuations(*limit)?),
        Command::LockJobs {
            topic,
            max,
            owner,
            lease,
            in_process,
        } => Reply::Locked(e.lock_jobs(topic, *max, owner, *lease, *in_process, None)?),
        Command::LockJobsFetching {
            topic,
            max,
            owner,
            lease,
            fetch,
        } => Reply::Locked(e.lock_jobs(topic, *max, owner, *lease, false, Some(fetch))?),
        Command::CompleteJob { job, lease, vars } => {
            e.complete_job(*job, *lease, vars).map(done)?
        }
        Command::ThrowError {
            job,
            lease,
            code,
            message,
            vars,
        } => Reply::Count(usize::from(
            e.throw_error(*job, *lease, code, message, vars)?,
        )),
        Command::ExtendLease { job, lease, by } => {
            Reply::Count(e.extend_lease(*job, *lease, *by)? as usize)
        }
        Command::FailJob {
            job,
            lease,
            error,
            retries_left,
            retry_delay,
        } => Reply::JobState(e.fail_job(*job, *lease, error, *retries_left, *retry_delay)?),
        Command::RetryJob { job } => e.retry_job(*job).map(done)?,
        Command::Requeue { id } => Reply::Delivery(e.requeue(id)?),
        Command::Discard { id, by, why } => e.discard(id, by, why).map(done)?,
        Command::AddToken {
            instance,
            element,
            force,
        } => Reply::Repair(e.add_token(*instance, element, *force)?),
        Command::MoveToken {
            instance,
            token,
            element,
            force,
        } => Reply::Repair(e.move_token(*instance, *token, element, *force)?),
        Command::CancelToken { instance, token } => {
            Reply::Repair(e.cancel_token(*instance, *token)?)
        }
        Command::Cleanup { limit } => {
            let (i, m, more) = e.cleanup(*limit)?;
            Reply::Cleaned(i, m, more)
        }
        Command::ReleaseAllLeases => Reply::Count(e.release_all_leases()?),
        Command::Tick => Reply::Done,
        Command::Task { task, user, action } => e.task_action(*task, user, action).map(done)?,
        Command::Trigger {
            instance,
            token,
            vars,
        } => Reply::Triggered(e.trigger(*instance, *token, vars)?),
        Command::ParkedEventsSent { ids } => Reply::Count(e.parked_events_sent(ids)?),
        Command::SignalOnce { id, name, vars } => Reply::Count(e.signal_once(id, name, vars)?),
        Command::SignalsForwarded { done } => Reply::Count(e.signals_forwarded(done)?),
        Command::StartByConditions { process, vars } => {
            Reply::StartedAll(e.start_by_conditions(process.as_deref(), vars)?)
        }
        Command::AdHoc {
            instance,
            token,
            activate,
        } => Reply::Triggered(e.ad_hoc(*instance, *token, activate.as_deref())?),
        Command::CancelInstance { instance } => e.cancel_instance(*instance).map(done)?,
        Command::SetVariables {
            instance,
            token,
            local,
            vars,
        } => e.set_variables(*instance, *token, *local, vars).map(done)?,
        Command::BackupTaken { .. } => Reply::Done,
        Command::Migrate {
            plan,
            instances,
            dry_run,
        } => Reply::Migrated(e.migrate_all(plan, instances, *dry_run)?),
        Command::CreateBatch { op, items } => Reply::Batch(e.create_batch(op, items)?),
        Command::RunBatch { batch, limit } => Reply::Batch(e.run_batch(*batch, *limit)?),
        Command::StopBatch { batch } => Reply::Batch(e.stop_batch(*batch)?),
        Command::SlotMove(step) => match e.slot_move(step)? {
            Some(b) => Reply::Batch(b),
            None => Reply::Done,
        },
        Command::By { by, command } => apply_by(e, by, command, parsed)?,
    })
}

/// A command done by principal `by`: applied as theirs, with its audit
/// entry in the same transaction.
fn apply_by(
    e: &mut Engine<'_, '_>,
    by: &str,
    command: &Command,
    parsed: Option<Parsed>,
) -> Result<Reply, EngineError> {
    e.acting_as(Some(by));
    let reply = apply(e, command, parsed);
    e.acting_as(None);
    let reply = reply?;
    if let Some((operation, target)) = command.audited() {
        e.audit(by, operation, &target)?;
    }
    Ok(reply)
}

/// The reply of a command that answers nothing but that it was done.
fn done((): ()) -> Reply {
    Reply::Done
}
