//! The commit path: the log record of a batch ([`Command`]), the single writer
//! thread that applies batches to redb, the syncer thread that makes their log
//! frames durable before anyone is answered, checkpoints, and recovery at open.
//!
//! Invariants:
//! - Every state change goes through the one writer thread. It takes all queued
//!   commands (up to `max_batch`), applies them to one redb write transaction
//!   committed without fsync, and hands the batch's log frame to the syncer, which
//!   answers the callers only after the frame is fsynced (`wal`): a returned `Ok`
//!   means the change survives a crash, and concurrent callers share one fsync.
//! - The writer reads the clock once per batch and hands the instant to the engine.
//! - When a batch fails technically, it is aborted as a whole and every caller in
//!   it gets the error; nothing of it is visible afterwards.
//! - A log write failure poisons the writer: an unlogged batch never becomes durable.
//!
//! Format rule: [`Command`] (with everything it contains, [`Publish`] and
//! [`Malformed`] included) is the log's record format. Variant order and field
//! order are format: a change bumps `codec::FORMAT_VERSION` and brings a
//! migration; `tests/fixtures/format-v1.redb` and the golden frame in this
//! module's tests keep opening.

pub(crate) mod wal;

use crate::Vars;
use crate::clock::{Clock, Millis};
use crate::engine::{
    Config, DefCache, Delivery, Deployed, Engine, EngineError, LockedJob, Malformed, Publish,
    Repair,
};
use crate::error::Error;
use crate::options::Options;
use crate::store::{self, JobState, StoreError, Tables};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::oneshot;
use wal::Wal;

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
}

impl Command {
    /// Whether committing this command can make new work due for the executor.
    /// The executor's own polling commands do not, so it never wakes itself.
    fn wakes_executor(&self) -> bool {
        !matches!(
            self,
            Command::RunContinuations { .. }
                | Command::LockJobs { .. }
                | Command::LockJobsFetching { .. }
                | Command::ExtendLease { .. }
                | Command::Tick
                | Command::Cleanup { .. }
                | Command::ParkedEventsSent { .. }
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
}

pub(crate) struct Request {
    pub(crate) cmd: Command,
    /// A deploy's model, parsed and validated by the caller so that the writer
    /// only stores it (replay parses the logged XML again).
    pub(crate) parsed: Option<Parsed>,
    pub(crate) reply: oneshot::Sender<Result<Reply, Error>>,
    /// The caller's W3C `traceparent`, when a trace is recorded: the jobs
    /// this command creates continue it ([`crate::trace`]).
    pub(crate) trace: Option<String>,
}

/// The processes of a parsed BPMN file.
pub(crate) type Parsed = Vec<crate::model::Process>;

/// Commit latency (apply + log fsync) and batch size of the writer.
#[derive(Debug)]
pub struct CommitStats {
    /// Seconds from taking a batch to its log fsync.
    pub latency_seconds: crate::histogram::Histogram,
    /// Commands per committed batch.
    pub batch_size: crate::histogram::Histogram,
}

impl Default for CommitStats {
    fn default() -> Self {
        Self {
            latency_seconds: crate::histogram::Histogram::new(&[
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
            batch_size: crate::histogram::Histogram::new(&[
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 4096.0,
            ]),
        }
    }
}

pub(crate) fn unreachable_reply<T>() -> Result<T, Error> {
    Err(Error::Store(StoreError::Closed))
}

fn apply(
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
            e.complete_job(*job, *lease, vars)?;
            Reply::Done
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
        Command::RetryJob { job } => {
            e.retry_job(*job)?;
            Reply::Done
        }
        Command::Requeue { id } => Reply::Delivery(e.requeue(id)?),
        Command::Discard { id, by, why } => {
            e.discard(id, by, why)?;
            Reply::Done
        }
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
        Command::Task { task, user, action } => {
            e.task_action(*task, user, action)?;
            Reply::Done
        }
        Command::Trigger {
            instance,
            token,
            vars,
        } => Reply::Triggered(e.trigger(*instance, *token, vars)?),
        Command::ParkedEventsSent { ids } => Reply::Count(e.parked_events_sent(ids)?),
    })
}

/// Log size that forces a checkpoint.
const CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;

/// The single writer: applies batches to redb and makes them durable in the log.
pub(crate) struct Writer {
    db: Arc<redb::Database>,
    defs: Arc<DefCache>,
    config: Config,
    /// The log while opening; moved into the syncer thread afterwards.
    wal: Option<Wal>,
    syncer: Option<(mpsc::Sender<SyncMsg>, JoinHandle<()>)>,
    batch: u64,
    last_checkpoint: std::time::Instant,
    /// Log bytes written since the last checkpoint.
    logged: u64,
    /// Set when the log could not be written: nothing more is accepted.
    poisoned: Arc<Mutex<Option<String>>>,
    checkpoint_every: std::time::Duration,
    pub(crate) replayed: usize,
    /// Where the trace context of new jobs is noted for the executor.
    pub(crate) job_traces: Arc<crate::trace::JobTraces>,
}

/// Where a caller waits for its answer.
type ReplyTo = oneshot::Sender<Result<Reply, Error>>;

/// What the writer hands the syncer thread.
enum SyncMsg {
    /// A batch applied to redb: sync its log frame, then answer its callers.
    Batch(PendingBatch),
    /// Empty the log (after a durable checkpoint), then say so.
    Reset(mpsc::Sender<Result<(), StoreError>>),
}

struct PendingBatch {
    frame: Vec<u8>,
    answers: Vec<(ReplyTo, Result<Reply, EngineError>)>,
    wake: bool,
    started: std::time::Instant,
}

impl Writer {
    /// Replays the log's batches newer than the last durable one. `wal` is the
    /// open log (`None` when opened for reading only: nothing is written then).
    pub(crate) fn recover(
        db: Arc<redb::Database>,
        defs: Arc<DefCache>,
        options: &Options,
        wal: Option<Wal>,
        records: Vec<wal::Record>,
    ) -> Result<Self, StoreError> {
        let durable = { store::begin_read(&db)?.cursor(WAL_BATCH)? };
        let mut w = Self {
            db,
            defs,
            config: options.config.clone(),
            wal,
            syncer: None,
            batch: durable,
            last_checkpoint: std::time::Instant::now(),
            logged: 0,
            poisoned: Arc::default(),
            checkpoint_every: options.checkpoint_every,
            replayed: 0,
            job_traces: Arc::default(),
        };
        let mut replayed = 0;
        for rec in records.into_iter().filter(|r| r.batch > durable) {
            w.batch = rec.batch - 1;
            w.apply_batch(
                rec.now,
                &rec.commands,
                Vec::new(),
                &[],
                redb::Durability::None,
            )?;
            replayed += 1;
        }
        w.replayed = replayed;
        if replayed > 0 {
            tracing::info!(batches = replayed, "replayed write-ahead log");
            w.checkpoint()?;
        }
        Ok(w)
    }

    /// Applies one batch at open, before the syncer runs: durable at once.
    pub(crate) fn run_at_open(
        &mut self,
        now: Millis,
        cmds: &[Command],
    ) -> Result<Vec<Result<Reply, EngineError>>, StoreError> {
        self.apply_batch(now, cmds, Vec::new(), &[], redb::Durability::Immediate)
    }

    /// Moves the log into its own thread: from now on the writer applies the next
    /// batch while the syncer fsyncs the previous ones (several at once if they
    /// queue up) and answers their callers.
    pub(crate) fn start_syncer(
        &mut self,
        committed: Arc<tokio::sync::Notify>,
        stats: Arc<CommitStats>,
    ) -> Result<(), StoreError> {
        let Some(wal) = self.wal.take() else {
            return Ok(());
        };
        let (tx, rx) = mpsc::channel::<SyncMsg>();
        let poisoned = self.poisoned.clone();
        let handle = std::thread::Builder::new()
            .name("postfach-syncer".into())
            .spawn(move || syncer_loop(wal, rx, poisoned, committed, stats))
            .map_err(StoreError::Io)?;
        self.syncer = Some((tx, handle));
        Ok(())
    }

    fn poisoned(&self) -> Option<String> {
        self.poisoned.lock().ok().and_then(|p| p.clone())
    }

    /// Applies one batch to redb without fsync and hands its log frame and its
    /// callers to the syncer, which answers them once the frame is on disk.
    fn submit(
        &mut self,
        now: Millis,
        cmds: &[Command],
        parsed: Vec<Option<Parsed>>,
        traces: &[Option<String>],
        replies: Vec<oneshot::Sender<Result<Reply, Error>>>,
        started: std::time::Instant,
    ) {
        let fail = |replies: Vec<oneshot::Sender<Result<Reply, Error>>>, text: String| {
            for reply in replies {
                let _ = reply.send(Err(Error::Store(StoreError::Aborted(text.clone()))));
            }
        };
        if let Some(why) = self.poisoned() {
            return fail(
                replies,
                format!("the write-ahead log failed earlier ({why}); reopen the database"),
            );
        }
        let results = match self.apply_batch(now, cmds, parsed, traces, redb::Durability::None) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "batch aborted");
                return fail(replies, e.to_string());
            }
        };
        let frame = match wal::frame(self.batch, now, cmds) {
            Ok(f) => f,
            Err(e) => {
                // redb already holds the batch in memory; it must never become durable
                if let Ok(mut p) = self.poisoned.lock() {
                    *p = Some(e.to_string());
                }
                return fail(
                    replies,
                    format!("write-ahead log: {e}; reopen the database"),
                );
            }
        };
        self.logged += frame.len() as u64;
        let batch = PendingBatch {
            frame,
            answers: replies.into_iter().zip(results).collect(),
            wake: cmds.iter().any(Command::wakes_executor),
            started,
        };
        if let Some((tx, _)) = &self.syncer
            && let Err(mpsc::SendError(SyncMsg::Batch(b))) = tx.send(SyncMsg::Batch(batch))
        {
            fail(
                b.answers.into_iter().map(|(r, _)| r).collect(),
                "the log syncer stopped; reopen the database".into(),
            );
        }
        if self.last_checkpoint.elapsed() >= self.checkpoint_every
            || self.logged >= CHECKPOINT_BYTES
        {
            // the batches are or will be durable in the log: a failed checkpoint
            // is retried later and must not turn their callers' success into an error
            if let Err(e) = self.checkpoint() {
                tracing::error!(error = %e, "checkpoint failed; the write-ahead log keeps growing until one succeeds");
                self.last_checkpoint = std::time::Instant::now();
            }
        }
    }

    fn apply_batch(
        &mut self,
        now: Millis,
        cmds: &[Command],
        parsed: Vec<Option<Parsed>>,
        traces: &[Option<String>],
        durability: redb::Durability,
    ) -> Result<Vec<Result<Reply, EngineError>>, StoreError> {
        let batch = self.batch + 1;
        match run_batch(self, now, cmds, parsed, traces, batch, durability) {
            Ok(r) => {
                self.batch = batch;
                Ok(r)
            }
            Err(e) => {
                self.defs.clear();
                Err(e)
            }
        }
    }

    /// A durable redb commit of everything so far; then the log is emptied.
    pub(crate) fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.poisoned().is_some() {
            return Ok(());
        }
        let mut tx = self.db.begin_write()?;
        tx.set_durability(redb::Durability::Immediate)
            .map_err(redb::Error::from)?;
        {
            let mut meta = tx.open_table(store::META)?;
            meta.insert(WAL_BATCH, self.batch)?;
        }
        tx.commit()?;
        match (&mut self.wal, &self.syncer) {
            (Some(wal), _) => wal.reset()?,
            (None, Some((sync, _))) => {
                // the syncer empties the log after the frames queued before this
                let (done, wait) = mpsc::channel();
                sync.send(SyncMsg::Reset(done))
                    .map_err(|_| StoreError::Aborted("the log syncer stopped".into()))?;
                wait.recv()
                    .map_err(|_| StoreError::Aborted("the log syncer stopped".into()))??;
            }
            (None, None) => {}
        }
        self.logged = 0;
        self.last_checkpoint = std::time::Instant::now();
        Ok(())
    }
}

/// `meta` key of the last batch applied to redb.
const WAL_BATCH: &str = "wal_batch";

pub(crate) fn writer_loop(
    mut w: Writer,
    rx: mpsc::Receiver<Request>,
    clock: Arc<dyn Clock>,
    max_batch: usize,
    stats: Arc<CommitStats>,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let started = std::time::Instant::now();
        let now = clock.now();
        let mut cmds = Vec::with_capacity(batch.len());
        let mut parsed = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        let mut traces = Vec::with_capacity(batch.len());
        for r in batch {
            cmds.push(r.cmd);
            parsed.push(r.parsed);
            replies.push(r.reply);
            traces.push(r.trace);
        }
        stats.batch_size.observe(cmds.len() as f64);
        w.submit(now, &cmds, parsed, &traces, replies, started);
    }
    if let Err(e) = w.checkpoint() {
        tracing::error!(error = %e, "checkpoint at close failed; the write-ahead log is replayed at the next open");
    }
    if let Some((tx, handle)) = w.syncer.take() {
        drop(tx);
        let _ = handle.join();
    }
}

/// Syncs queued log frames — all that queued up since the last fsync with one
/// fsync — then answers their callers. A failed write poisons the writer.
fn syncer_loop(
    mut wal: Wal,
    rx: mpsc::Receiver<SyncMsg>,
    poisoned: Arc<Mutex<Option<String>>>,
    committed: Arc<tokio::sync::Notify>,
    stats: Arc<CommitStats>,
) {
    let mut held: Option<SyncMsg> = None;
    loop {
        let msg = match held.take() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => return,
            },
        };
        let first = match msg {
            SyncMsg::Reset(done) => {
                let _ = done.send(wal.reset());
                continue;
            }
            SyncMsg::Batch(b) => b,
        };
        let mut group = vec![first];
        loop {
            match rx.try_recv() {
                Ok(SyncMsg::Batch(b)) => group.push(b),
                Ok(other) => {
                    held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        let earlier = poisoned.lock().ok().and_then(|p| p.clone());
        let synced = match earlier {
            Some(why) => Err(format!(
                "the write-ahead log failed earlier ({why}); reopen the database"
            )),
            None => wal
                .append_frames(group.iter().map(|b| b.frame.as_slice()))
                .map_err(|e| {
                    if let Ok(mut p) = poisoned.lock() {
                        *p = Some(e.to_string());
                    }
                    format!("write-ahead log: {e}; reopen the database")
                }),
        };
        let mut wake = false;
        for b in group {
            match &synced {
                Ok(()) => {
                    stats
                        .latency_seconds
                        .observe(b.started.elapsed().as_secs_f64());
                    wake |= b.wake;
                    for (reply, result) in b.answers {
                        let _ = reply.send(result.map_err(Error::from));
                    }
                }
                Err(text) => {
                    for (reply, _) in b.answers {
                        let _ = reply.send(Err(Error::Store(StoreError::Aborted(text.clone()))));
                    }
                }
            }
        }
        // wakes the job executor: new jobs are picked up at once
        if wake {
            committed.notify_one();
        }
    }
}

fn run_batch(
    w: &Writer,
    now: Millis,
    cmds: &[Command],
    mut parsed: Vec<Option<Parsed>>,
    traces: &[Option<String>],
    batch: u64,
    durability: redb::Durability,
) -> Result<Vec<Result<Reply, EngineError>>, StoreError> {
    let (defs, config) = (&*w.defs, &w.config);
    let mut tx = w.db.begin_write()?;
    tx.set_durability(durability).map_err(redb::Error::from)?;
    let mut results = Vec::with_capacity(cmds.len());
    {
        let mut tables = Tables::open(&tx)?;
        tables.set_cursor(WAL_BATCH, batch)?;
        let mut engine = Engine::new(&mut tables, defs, config, now);
        engine.expire(10_000).map_err(technical)?;
        engine.release_expired_leases().map_err(technical)?;
        for (i, cmd) in cmds.iter().enumerate() {
            let mut engine = Engine::new(&mut tables, defs, config, now);
            let result = apply(&mut engine, cmd, parsed.get_mut(i).and_then(Option::take));
            if let (Ok(_), Some(Some(trace))) = (&result, traces.get(i)) {
                w.job_traces.note(engine.jobs_created(), trace);
            }
            match result {
                Err(EngineError::Store(e)) => return Err(e),
                other => results.push(other),
            }
        }
        tables.finish()?;
    }
    tx.commit()?;
    Ok(results)
}

fn technical(e: EngineError) -> StoreError {
    match e {
        EngineError::Store(s) => s,
        other => StoreError::Aborted(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands whose encoding is the log format (see the module doc).
    fn golden_commands() -> Vec<Command> {
        vec![
            Command::Publish(Publish {
                name: "AuftragAbgeschlossen".into(),
                key: "4711".into(),
                message_id: Some("evt-1".into()),
                variables: crate::vars([("erledigtePositionen", 1200.into())]),
                ttl: Some(86_400_000),
                attributes: vec![("pubsub.message_id".into(), "42".into())],
            }),
            Command::Start {
                process: "auftrag-ausfuehrung".into(),
                vars: crate::vars([("auftragId", "4711".into())]),
                business_key: None,
            },
            Command::Malformed(Malformed {
                name: "AuftragAbgeschlossen".into(),
                message_id: "kaputt".into(),
                raw: b"{\"auftragId\":".to_vec(),
                attributes: Vec::new(),
                error: "payload is not JSON".into(),
            }),
            Command::Tick,
        ]
    }

    /// The log frame of these commands, as format 2 writes it. When this test
    /// fails, the log format changed: bump `codec::FORMAT_VERSION`, migrate, and
    /// only then update the bytes.
    const GOLDEN: &str = concat!(
        "50465232d3000000ea33ba800107fd00a8da769b010000040214417566747261",
        "67416267657363686c6f7373656e043437313101056576742d311c7b2265726c",
        "656469677465506f736974696f6e656e223a313230307d01fc005c2605011170",
        "75627375622e6d6573736167655f69640234320113617566747261672d617573",
        "6675656872756e67147b22617566747261674964223a2234373131227d000414",
        "41756674726167416267657363686c6f7373656e066b61707574740d7b226175",
        "66747261674964223a00137061796c6f6164206973206e6f74204a534f4e14"
    );

    /// `LockJobsFetching`, the variant added after the frame above: last in
    /// the enum, so logs written before it decode unchanged.
    const GOLDEN_FETCHING: &str = "504652322c000000843a6cb50108fd00a8da769b01000001160a6162726563686e756e6714027731fcc02709000109617566747261674964";

    #[test]
    fn the_fetching_lock_command_is_pinned() {
        let cmd = [Command::LockJobsFetching {
            topic: "abrechnung".into(),
            max: 20,
            owner: "w1".into(),
            lease: 600_000,
            fetch: vec!["auftragId".into()],
        }];
        let frame = wal::frame(8, 1_767_225_600_000, &cmd).unwrap();
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN_FETCHING, "the log format changed");
    }

    /// How many variants `Command` has; [`variant_index`] numbers them.
    const VARIANTS: usize = 25;

    /// The position of `c`'s variant in the enum (its tag in the log). The
    /// match has no wildcard arm: a new variant does not compile until it is
    /// numbered here, which leads to [`every_variant`] and its golden bytes.
    fn variant_index(c: &Command) -> usize {
        match c {
            Command::Deploy { .. } => 0,
            Command::Start { .. } => 1,
            Command::Publish(_) => 2,
            Command::Correlate(_) => 3,
            Command::Malformed(_) => 4,
            Command::Signal { .. } => 5,
            Command::RunContinuations { .. } => 6,
            Command::LockJobs { .. } => 7,
            Command::CompleteJob { .. } => 8,
            Command::FailJob { .. } => 9,
            Command::ExtendLease { .. } => 10,
            Command::ThrowError { .. } => 11,
            Command::RetryJob { .. } => 12,
            Command::Requeue { .. } => 13,
            Command::Discard { .. } => 14,
            Command::AddToken { .. } => 15,
            Command::MoveToken { .. } => 16,
            Command::CancelToken { .. } => 17,
            Command::Cleanup { .. } => 18,
            Command::ReleaseAllLeases => 19,
            Command::Tick => 20,
            Command::Task { .. } => 21,
            Command::LockJobsFetching { .. } => 22,
            Command::Trigger { .. } => 23,
            Command::ParkedEventsSent { .. } => 24,
        }
    }

    /// One example of every variant, in enum order.
    fn every_variant() -> Vec<Command> {
        let publish = Publish {
            name: "AuftragAbgeschlossen".into(),
            key: "4711".into(),
            message_id: Some("evt-1".into()),
            variables: crate::vars([("ok", true.into())]),
            ttl: Some(60_000),
            attributes: Vec::new(),
        };
        vec![
            Command::Deploy {
                file: "a.bpmn".into(),
                xml: "<definitions/>".into(),
                overrides: [("M".to_string(), "k".to_string())].into(),
            },
            Command::Start {
                process: "p".into(),
                vars: crate::vars([("k", "4711".into())]),
                business_key: Some("B-1".into()),
            },
            Command::Publish(publish.clone()),
            Command::Correlate(publish),
            Command::Malformed(Malformed {
                name: "M".into(),
                message_id: "m-1".into(),
                raw: vec![0xff, 0x00],
                attributes: vec![("a".into(), "b".into())],
                error: "not JSON".into(),
            }),
            Command::Signal {
                name: "Alarm".into(),
                vars: crate::vars([("stufe", 2.into())]),
            },
            Command::RunContinuations { limit: 100 },
            Command::LockJobs {
                topic: "t".into(),
                max: 10,
                owner: "w".into(),
                lease: 30_000,
                in_process: true,
            },
            Command::CompleteJob {
                job: 7,
                lease: Some(3),
                vars: crate::vars([("r", 1.into())]),
            },
            Command::FailJob {
                job: 7,
                lease: None,
                error: "boom".into(),
                retries_left: Some(2),
                retry_delay: Some(5_000),
            },
            Command::ExtendLease {
                job: 7,
                lease: 3,
                by: 10_000,
            },
            Command::ThrowError {
                job: 7,
                lease: Some(3),
                code: "E1".into(),
                message: "nein".into(),
                vars: Vars::new(),
            },
            Command::RetryJob { job: 7 },
            Command::Requeue { id: "m-1".into() },
            Command::Discard {
                id: "m-1".into(),
                by: "ops".into(),
                why: "doppelt".into(),
            },
            Command::AddToken {
                instance: 1,
                element: "a".into(),
                force: false,
            },
            Command::MoveToken {
                instance: 1,
                token: 2,
                element: "b".into(),
                force: true,
            },
            Command::CancelToken {
                instance: 1,
                token: 2,
            },
            Command::Cleanup { limit: 500 },
            Command::ReleaseAllLeases,
            Command::Tick,
            Command::Task {
                task: 9,
                user: "anna".into(),
                action: crate::engine::TaskAction::Assign { to: "ben".into() },
            },
            Command::LockJobsFetching {
                topic: "t".into(),
                max: 1,
                owner: "w".into(),
                lease: 30_000,
                fetch: vec!["k".into()],
            },
            Command::Trigger {
                instance: 1,
                token: 2,
                vars: crate::vars([("ok", true.into())]),
            },
            Command::ParkedEventsSent { ids: vec![1, 300] },
        ]
    }

    /// The log bytes of each example in [`every_variant`], in order. When one
    /// differs, the log format changed: bump the format, migrate, and only
    /// then update the bytes.
    const GOLDEN_EACH: [&str; VARIANTS] = [
        "010006612e62706d6e0e3c646566696e6974696f6e732f3e01014d016b",
        "010101700c7b226b223a2234373131227d0103422d31",
        "01021441756674726167416267657363686c6f7373656e043437313101056576742d310b7b226f6b223a747275657d01fb60ea00",
        "01031441756674726167416267657363686c6f7373656e043437313101056576742d310b7b226f6b223a747275657d01fb60ea00",
        "0104014d036d2d3102ff000101610162086e6f74204a534f4e",
        "010505416c61726d0b7b227374756665223a327d",
        "010664",
        "010701740a0177fb307501",
        "0108070103077b2272223a317d",
        "0109070004626f6f6d010201fb8813",
        "010a0703fb1027",
        "010b070103024531046e65696e027b7d",
        "010c07",
        "010d036d2d31",
        "010e036d2d31036f707307646f7070656c74",
        "010f01016100",
        "01100102016201",
        "01110102",
        "0112fbf401",
        "0113",
        "0114",
        "01150904616e6e61020362656e",
        "01160174010177fb307501016b",
        "011701020b7b226f6b223a747275657d",
        "01180201fb2c01",
    ];

    #[test]
    fn every_command_variant_has_golden_bytes() {
        let examples = every_variant();
        let tags: Vec<usize> = examples.iter().map(variant_index).collect();
        assert_eq!(
            tags,
            (0..VARIANTS).collect::<Vec<_>>(),
            "one example of every variant, in enum order"
        );
        for (i, c) in examples.iter().enumerate() {
            let hex: String = crate::codec::encode(c)
                .unwrap()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(hex, GOLDEN_EACH[i], "the log bytes of variant {i} changed");
        }
    }

    #[test]
    fn the_log_record_format_is_pinned() {
        let frame = wal::frame(7, 1_767_225_600_000, &golden_commands()).unwrap();
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN, "the log format changed");
    }
}
