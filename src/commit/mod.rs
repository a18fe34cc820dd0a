//! The commit path: the log record of a batch ([`Command`]), the single writer
//! thread that applies batches to redb, the syncer thread that makes their log
//! frames durable before anyone is answered, checkpoints, and recovery at open.
//!
//! Invariants:
//! - Every state change goes through the one writer thread. It takes all queued
//!   commands (up to `max_batch`), hands the batch's log frame to the syncer
//!   ([`syncer`]), which appends and fsyncs it (`wal`) while the writer applies
//!   the commands to one redb write transaction committed without fsync. A
//!   caller is answered only when both are done: a returned `Ok` means the
//!   change survives a crash, concurrent callers share one fsync, and a lone
//!   caller waits for the longer of apply and fsync, not their sum.
//! - The writer reads the clock once per batch and hands the instant to the engine.
//! - When a batch fails technically, it is aborted as a whole and every caller in
//!   it gets the error once the abort record that follows its frame in the log
//!   is durable: from then on nothing of it is visible, replay included. (When
//!   the power goes before that record is durable, nobody was answered, and
//!   replay applies the batch again.)
//! - A log write failure poisons the writer: an unlogged batch never becomes durable.
//!
//! Format rule: [`Command`] (with everything it contains, [`Publish`] and
//! [`Malformed`] included) is the log's record format. Variant order and field
//! order are format: a change bumps `codec::FORMAT_VERSION` and brings a
//! migration; `tests/fixtures/format-v1.redb` and the golden frame in this
//! module's tests keep opening.

mod audited;
mod command;
mod syncer;
pub(crate) mod wal;

use crate::clock::{Clock, Millis};
use crate::engine::{Config, DefCache, Engine, EngineError};
use crate::error::Error;
use crate::options::Options;
use crate::store::{self, StoreError, Tables, WAL_BATCH};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use syncer::{PendingBatch, Syncer};
use tokio::sync::oneshot;
use wal::Wal;

use command::apply;
pub(crate) use command::{Command, Reply};

pub(crate) struct Request {
    pub(crate) cmd: Command,
    /// `cmd` as its log frame holds it ([`wal::encode_command`]), encoded
    /// by the caller: the writer thread only copies it into the frame.
    /// `None` for a deploy ([`Command::carries_a_model`]): the writer
    /// encodes it.
    pub(crate) encoded: Option<Vec<u8>>,
    /// A deploy's model, parsed and validated by the caller so that the writer
    /// only stores it (replay parses the logged XML again).
    pub(crate) parsed: Option<Parsed>,
    pub(crate) reply: oneshot::Sender<Result<Reply, Error>>,
    /// The caller's W3C `traceparent`, when a trace is recorded: the jobs
    /// this command creates continue it ([`crate::trace`]).
    pub(crate) trace: Option<String>,
}

/// The commands of one batch as the writer gathered them from their
/// requests, in order (kept from batch to batch: growing them anew for every
/// batch costs the writer page faults).
#[derive(Default)]
struct Gathered {
    cmds: Vec<Command>,
    /// Each command as its caller encoded it for the log (`None`: the
    /// writer encodes it).
    encoded: Vec<Option<Vec<u8>>>,
    traces: Vec<Option<String>>,
}

impl Gathered {
    fn clear(&mut self) {
        self.cmds.clear();
        self.encoded.clear();
        self.traces.clear();
    }
}

/// What the writer thread is asked.
// a job moves once through the channel: boxing its request would cost an
// allocation per command for nothing
#[allow(clippy::large_enum_variant)]
pub(crate) enum Job {
    /// A command, applied in the next batch.
    Apply(Request),
    /// A read snapshot of everything applied so far and the last batch it
    /// holds, taken between two batches (a backup copies it while the writer
    /// goes on).
    Snapshot(oneshot::Sender<Result<(u64, redb::ReadTransaction), StoreError>>),
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

/// Log size that forces a checkpoint.
const CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;

/// The single writer: applies batches to redb and makes them durable in the log.
pub(crate) struct Writer {
    db: Arc<redb::Database>,
    defs: Arc<DefCache>,
    config: Config,
    /// The log while opening; moved into the syncer afterwards.
    wal: Option<Wal>,
    syncer: Option<Syncer>,
    batch: u64,
    last_checkpoint: std::time::Instant,
    /// Log bytes written since the last checkpoint.
    logged: u64,
    /// Set when the log could not be written: nothing more is accepted.
    poisoned: Arc<Mutex<Option<String>>>,
    checkpoint_every: std::time::Duration,
    /// When the log is rolled for an archive (`None`: emptied at checkpoints).
    archive: Option<crate::options::Archive>,
    /// When the log's current segment began, and its record bytes.
    segment: (std::time::Instant, u64),
    pub(crate) replayed: usize,
    /// Where the trace context of new jobs is noted for the executor.
    pub(crate) job_traces: Arc<crate::trace::JobTraces>,
}

/// Where a caller waits for its answer.
type ReplyTo = oneshot::Sender<Result<Reply, Error>>;

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
            archive: options.archive,
            segment: (std::time::Instant::now(), 0),
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

    /// Applies one batch at open, before the syncer runs: durable at once,
    /// and in the log first like every batch (an archive of the log has
    /// every batch, without a gap); one that fails gets its abort record.
    pub(crate) fn run_at_open(
        &mut self,
        now: Millis,
        cmds: &[Command],
    ) -> Result<Vec<Result<Reply, EngineError>>, StoreError> {
        if let Some(wal) = &mut self.wal {
            // a version-1 log holds only durable batches here: emptied first
            wal.fold(wal::Fold::Keep)?;
            let frame = wal::frame(self.batch + 1, now, cmds)?;
            wal.append_frames([frame.as_slice()])?;
            self.segment.1 += frame.len() as u64;
        }
        let applied = self.apply_batch(now, cmds, Vec::new(), &[], redb::Durability::Immediate);
        if applied.is_err()
            && let Some(wal) = &mut self.wal
        {
            // replay must not apply what failed here
            let record = wal::abort_frame(self.batch + 1, now)?;
            wal.append_frames([record.as_slice()])?;
            self.segment.1 += record.len() as u64;
        }
        applied
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
        self.syncer = Some(Syncer::start(wal, self.poisoned.clone(), committed, stats)?);
        Ok(())
    }

    /// A read snapshot after the last batch applied, and that batch.
    fn snapshot(&self) -> Result<(u64, redb::ReadTransaction), StoreError> {
        if let Some(why) = self.poisoned() {
            return Err(StoreError::Aborted(why));
        }
        use redb::ReadableDatabase;
        Ok((self.batch, self.db.begin_read().map_err(redb::Error::from)?))
    }

    fn poisoned(&self) -> Option<String> {
        self.poisoned.lock().ok().and_then(|p| p.clone())
    }

    /// Hands the batch's log frame to the syncer, applies the batch to redb
    /// without fsync while the frame is synced, and has its callers answered
    /// once both are done. A batch that fails is aborted in redb and a record
    /// of the abort follows its frame in the log ([`wal`]: replay skips it);
    /// its callers get the error once that record is durable, and the next
    /// batch takes its number.
    fn submit(
        &mut self,
        now: Millis,
        gathered: &Gathered,
        parsed: Vec<Option<Parsed>>,
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
        let Gathered {
            cmds,
            encoded,
            traces,
        } = gathered;
        let frame = match wal::frame_of_parts(self.batch + 1, now, cmds, encoded) {
            Ok(f) => f,
            // nothing of it was logged or applied
            Err(e) => return fail(replies, format!("write-ahead log: {e}")),
        };
        let logged = frame.len() as u64;
        let Some(ticket) = self.syncer.as_mut().map(|s| s.log(frame)) else {
            return fail(replies, "the database is open for reading only".into());
        };
        self.logged += logged;
        self.segment.1 += logged;
        let batch = match self.apply_batch(now, cmds, parsed, traces, redb::Durability::None) {
            Ok(results) => PendingBatch {
                ticket,
                answers: replies
                    .into_iter()
                    .zip(results)
                    .map(|(reply, r)| (reply, r.map_err(Error::from)))
                    .collect(),
                wake: cmds.iter().any(Command::wakes_executor),
                started,
            },
            Err(e) => {
                tracing::error!(error = %e, "batch aborted");
                return self.abort_logged(now, replies, started, e.to_string());
            }
        };
        if let Some(syncer) = &self.syncer {
            syncer.answer(batch);
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

    /// A batch whose frame is in the log failed to apply: its abort record
    /// (the batch's number, no commands) follows the frame, and its callers
    /// get `why` once that record is durable.
    fn abort_logged(
        &mut self,
        now: Millis,
        replies: Vec<oneshot::Sender<Result<Reply, Error>>>,
        started: std::time::Instant,
        why: String,
    ) {
        let Some(syncer) = self.syncer.as_mut() else {
            return;
        };
        let answers = |why: &str| -> Vec<(ReplyTo, Result<Reply, Error>)> {
            replies
                .into_iter()
                .map(|reply| {
                    (
                        reply,
                        Err(Error::Store(StoreError::Aborted(why.to_string()))),
                    )
                })
                .collect()
        };
        let record = match wal::abort_frame(self.batch + 1, now) {
            Ok(r) => r,
            Err(e) => {
                // without its abort record, replay may apply the batch
                let text = format!("the abort of a batch could not be logged: {e}");
                if let Ok(mut p) = self.poisoned.lock() {
                    *p = Some(text.clone());
                }
                let outcome =
                    format!("{why}; {text}; reopen the database to see whether it applied");
                for (reply, answer) in answers(&outcome) {
                    let _ = reply.send(answer);
                }
                return;
            }
        };
        self.logged += record.len() as u64;
        self.segment.1 += record.len() as u64;
        let ticket = syncer.log(record);
        syncer.answer(PendingBatch {
            ticket,
            answers: answers(&why),
            wake: false,
            started,
        });
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
        let fold = self.fold();
        let closed = match (&mut self.wal, &self.syncer) {
            (Some(wal), _) => wal.fold(fold)?,
            // the syncer folds the log after the frames handed over before this
            (None, Some(syncer)) => syncer.fold(fold)?,
            (None, None) => None,
        };
        if let Some(closed) = closed {
            tracing::debug!(segment = %closed.display(), "log segment closed for the archive");
            self.segment = (std::time::Instant::now(), 0);
        }
        self.logged = 0;
        self.last_checkpoint = std::time::Instant::now();
        Ok(())
    }
}

impl Writer {
    /// With an archive and nothing to do: a checkpoint when the log's
    /// segment holds records and is due, so that it reaches the archive
    /// without waiting for the next batch.
    fn idle(&mut self) {
        if self.segment.1 > 0
            && matches!(self.fold(), wal::Fold::Roll(_))
            && let Err(e) = self.checkpoint()
        {
            tracing::error!(error = %e, "checkpoint failed; the log segment is closed at the next one");
        }
    }

    /// What this checkpoint does to the log: emptied without an archive;
    /// with one, kept until its segment is old or large enough, then rolled.
    fn fold(&self) -> wal::Fold {
        match self.archive {
            None => wal::Fold::Empty,
            Some(a) if self.segment.0.elapsed() >= a.every || self.segment.1 >= a.bytes => {
                wal::Fold::Roll(self.batch)
            }
            Some(_) => wal::Fold::Keep,
        }
    }
}

pub(crate) fn writer_loop(
    mut w: Writer,
    rx: mpsc::Receiver<Job>,
    clock: Arc<dyn Clock>,
    max_batch: usize,
    stats: Arc<CommitStats>,
) {
    // kept from batch to batch: growing them anew each batch costs the
    // writer page faults
    let mut batch: Vec<Request> = Vec::new();
    let mut gathered = Gathered::default();
    loop {
        // idle, a log segment for the archive is still closed on time
        let first = match w
            .archive
            .map(|a| a.every.max(std::time::Duration::from_millis(100)))
        {
            None => match rx.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    w.idle();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
        };
        let first = match first {
            Job::Apply(r) => r,
            Job::Snapshot(asked) => {
                let _ = asked.send(w.snapshot());
                continue;
            }
        };
        batch.push(first);
        // a snapshot asked for while the batch gathers sees the batch
        let mut snapshots = Vec::new();
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(Job::Apply(r)) => batch.push(r),
                Ok(Job::Snapshot(asked)) => {
                    snapshots.push(asked);
                    break;
                }
                Err(_) => break,
            }
        }
        let started = std::time::Instant::now();
        let now = clock.now();
        let mut parsed = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        for r in batch.drain(..) {
            gathered.cmds.push(r.cmd);
            gathered.encoded.push(r.encoded);
            parsed.push(r.parsed);
            replies.push(r.reply);
            gathered.traces.push(r.trace);
        }
        stats.batch_size.observe(gathered.cmds.len() as f64);
        w.submit(now, &gathered, parsed, replies, started);
        gathered.clear();
        for asked in snapshots {
            let _ = asked.send(w.snapshot());
        }
    }
    // with an archive, the close closes the segment too: all of it can be
    // shipped once the database is closed
    if w.segment.1 > 0
        && let Some(a) = &mut w.archive
    {
        a.every = std::time::Duration::ZERO;
    }
    if let Err(e) = w.checkpoint() {
        tracing::error!(error = %e, "checkpoint at close failed; the write-ahead log is replayed at the next open");
    }
    if let Some(syncer) = w.syncer.take() {
        syncer.stop();
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
mod tests;
