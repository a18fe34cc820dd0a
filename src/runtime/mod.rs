//! The embedding API: [`Postfach`] owns the redb file, the writer of
//! [`crate::commit`], the clock and the registered handlers.
//!
//! Invariants:
//! - Every method that changes state sends one command to the writer and returns
//!   when the writer's syncer answered, after the batch's log record is fsynced:
//!   a returned `Ok` survives a crash.
//! - Values from outside are range-checked here ([`crate::limits`]) before a
//!   command is sent; a deploy is parsed here, off the writer.

mod actions;
mod backups;
mod batches;
pub use batches::{BATCH_SLICE, Selection};
mod jobs;
mod migrate;
mod moves;
pub use migrate::MIGRATE_IN_CALL;
pub use moves::{Driven, MOVE_SLICE, MoveTarget};

use crate::clock::{Clock, Millis};
pub use crate::commit::CommitStats;
use crate::commit::wal::{self, Wal};
use crate::commit::{Command, Job, Parsed, Reply, Request, Writer, unreachable_reply, writer_loop};
use crate::engine::{DefCache, Delivery, Deployed, EngineError, Malformed, Publish};
pub use crate::error::Error;
use crate::handler::{Handler, Handlers};
use crate::model::Vars;
use crate::ops;
pub use crate::options::{Archive, Options};
use crate::store::{self, StoreError, damage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

// redb stays behind the store and the runtime: its errors become the store's
impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        Error::Store(StoreError::Redb(e))
    }
}

/// What a deploy stored, and what the model says that will not run as written.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// Each process of the file and the version now stored.
    pub deployed: Vec<Deployed>,
    /// Listeners, Java implementations, mappings and skipped pools postfach does not execute.
    pub warnings: Vec<crate::model::Warning>,
}

/// What opening the database had to repair.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// Batches replayed from the write-ahead log (work acknowledged but not yet
    /// in a durable redb commit when the previous process ended).
    pub replayed_batches: usize,
    /// Job leases of an earlier process released at once.
    pub released_leases: usize,
    /// Bytes of a torn record at the end of the write-ahead log: cut at open
    /// (a read-only open leaves them for the next writer). Whatever that
    /// record held was not acknowledged by this log, or was damaged since:
    /// the file cannot tell which, so it is reported, never ignored.
    pub torn_tail_bytes: u64,
}

/// Counts from one pass of the job runner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WorkReport {
    /// Async continuations and timers run.
    pub continuations: usize,
    /// Task jobs whose handler succeeded.
    pub tasks_completed: usize,
    /// Task jobs whose handler failed.
    pub tasks_failed: usize,
}

struct Inner {
    db: Mutex<Option<Arc<redb::Database>>>,
    path: PathBuf,
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    defs: Arc<DefCache>,
    clock: Arc<dyn Clock>,
    handlers: Handlers,
    recovery: Recovery,
    committed: Arc<tokio::sync::Notify>,
    stats: Arc<CommitStats>,
    /// Opened with [`Postfach::open_read_only`]: every command is refused.
    read_only: bool,
    /// The partition the database is.
    partition: crate::partition::Partition,
    /// The trace context of jobs not yet run (telemetry, in memory only).
    job_traces: Arc<crate::trace::JobTraces>,
}

/// An open postfach database. Cheap to clone; all clones share one writer.
#[derive(Clone)]
pub struct Postfach {
    inner: Arc<Inner>,
}

impl Postfach {
    /// Opens (or creates) the database at `path` with default settings.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), postfach::Error> {
    /// let pf = postfach::Postfach::open("orders.redb")?;
    /// let xml = std::fs::read_to_string("bpmn/auftrag-ausfuehrung.bpmn").unwrap();
    /// let keys = [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into();
    /// pf.deploy("auftrag-ausfuehrung.bpmn", &xml, keys).await?;
    /// let vars = postfach::vars([("auftragId", "4711".into())]);
    /// let instance = pf.start("auftrag-ausfuehrung", vars, None).await?;
    /// # Ok(()) }
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, Options::default())
    }

    /// Opens with explicit settings (clock, TTLs, dedup window, batch size).
    ///
    /// Leases held by an earlier process are released at once: the file lock
    /// guarantees that no earlier owner is still running.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        options.config.check()?;
        crate::files::regular(&path).map_err(StoreError::Io)?;
        // a damaged log refuses before redb's own recovery writes to the file
        let log_path = Wal::path_for(&path);
        let scan = Wal::scan(&log_path)?;
        scan.refuse_damaged(&log_path)?;
        let torn_tail_bytes = scan.torn_tail();
        let (db, partition) = store::open_db(&path, options.partition)?;
        let (log, records) = Wal::open_scanned(&log_path, Some(scan))?;
        Self::run_opened(
            path,
            db,
            partition,
            (log, records),
            torn_tail_bytes,
            options,
        )
    }

    /// Opens the database `postfach.redb` of the simulated disk of the
    /// power-loss tests, as [`Postfach::open_with`] opens a file.
    #[cfg(test)]
    pub(crate) fn open_sim(disk: &crate::disk::sim::Disk, options: Options) -> Result<Self, Error> {
        let path = PathBuf::from("postfach.redb");
        let log_path = Wal::path_for(&path);
        let bytes = disk.read(&log_path.to_string_lossy()).unwrap_or_default();
        let scan = crate::commit::wal::Scan::read(&bytes);
        let torn_tail_bytes = scan.torn_tail();
        let (db, partition) = store::open_db_sim(disk, &path, options.partition)?;
        let log = Wal::open_sim(disk, &log_path)?;
        Self::run_opened(path, db, partition, log, torn_tail_bytes, options)
    }

    /// Recovers an opened database from its log and starts its writer.
    fn run_opened(
        path: PathBuf,
        db: redb::Database,
        partition: crate::partition::Partition,
        (log, records): (Wal, Vec<crate::commit::wal::Record>),
        torn_tail_bytes: u64,
        options: Options,
    ) -> Result<Self, Error> {
        let db = Arc::new(db);
        let mut options = options;
        options.config.partition = partition;
        let defs = Arc::new(DefCache::default());
        let mut wal = Writer::recover(db.clone(), defs.clone(), &options, Some(log), records)?;
        // this process holds the file lock now, so no earlier lease holder runs
        let released = match wal
            .run_at_open(options.clock.now(), &[Command::ReleaseAllLeases])?
            .first()
        {
            Some(Ok(Reply::Count(n))) => *n,
            _ => 0,
        };
        if released > 0 {
            tracing::info!(jobs = released, "released leases of an earlier process");
        }
        let recovery = Recovery {
            replayed_batches: wal.replayed,
            released_leases: released,
            torn_tail_bytes,
        };
        // after the replay (which keeps the events its batches kept first),
        // made durable by the checkpoint below
        if let Some(setting) = options.parked_events
            && store::set_parked_events(&db, setting)?
        {
            tracing::info!(
                parked_events = setting.is_some(),
                payload = setting.is_some_and(|s| s.payload),
                "events about parked messages are kept from now on as configured"
            );
        }
        wal.checkpoint()?;
        let (tx, rx) = mpsc::channel::<Job>();
        let committed = Arc::new(tokio::sync::Notify::new());
        let stats = Arc::new(CommitStats::default());
        wal.start_syncer(committed.clone(), stats.clone())?;
        let job_traces = wal.job_traces.clone();
        let writer = {
            let stats = stats.clone();
            let clock = options.clock.clone();
            let max_batch = options.max_batch.max(1);
            std::thread::Builder::new()
                .name("postfach-writer".into())
                .spawn(move || writer_loop(wal, rx, clock, max_batch, stats))
                .map_err(StoreError::Io)?
        };
        let pf = Self {
            inner: Arc::new(Inner {
                db: Mutex::new(Some(db)),
                path,
                tx: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
                defs,
                clock: options.clock,
                handlers: Handlers::default(),
                recovery,
                committed,
                stats,
                read_only: false,
                partition,
                job_traces,
            }),
        };
        Ok(pf)
    }

    /// Opens the database for looking only (views, metrics): neither the file
    /// nor its write-ahead log is changed. redb's recovery after a crash and the
    /// replay of the log happen in memory, so this works on a full disk or a
    /// read-only file system. Every command is refused with
    /// [`StoreError::ReadOnly`]; a torn log tail is left for the next writer to cut.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        options.config.check()?;
        crate::files::existing_regular(&path, "database").map_err(StoreError::Io)?;
        let log = Wal::path_for(&path);
        let scan = Wal::scan(&log)?;
        scan.refuse_damaged(&log)?;
        let torn_tail_bytes = scan.torn_tail();
        if torn_tail_bytes > 0 {
            tracing::warn!(
                log = %log.display(),
                offset = scan.intact_until,
                bytes = torn_tail_bytes,
                "the write-ahead log ends in a torn record: {torn_tail_bytes} byte(s) from offset {} are not read, and the next open for writing cuts them",
                scan.intact_until
            );
        }
        let (db, partition) = store::open_db_read_only(&path, options.partition)?;
        let db = Arc::new(db);
        let mut options = options;
        options.config.partition = partition;
        let defs = Arc::new(DefCache::default());
        let w = Writer::recover(db.clone(), defs.clone(), &options, None, scan.records)?;
        Ok(Self {
            inner: Arc::new(Inner {
                db: Mutex::new(Some(db)),
                path,
                tx: Mutex::new(None),
                writer: Mutex::new(None),
                defs,
                clock: options.clock,
                handlers: Handlers::default(),
                recovery: Recovery {
                    replayed_batches: w.replayed,
                    released_leases: 0,
                    torn_tail_bytes,
                },
                committed: Arc::default(),
                stats: Arc::default(),
                read_only: true,
                partition,
                job_traces: Arc::default(),
            }),
        })
    }

    /// The trace context job `id` was created in, once (see [`crate::trace`]).
    pub(crate) fn job_trace(&self, id: u64) -> Option<String> {
        self.inner.job_traces.take(id)
    }

    /// The partition of a cluster this database is
    /// ([`crate::partition::Partition::SINGLE`] unpartitioned).
    pub fn partition(&self) -> crate::partition::Partition {
        self.inner.partition
    }

    /// Whether this handle was opened with [`Postfach::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// What opening had to repair: replayed log batches, released leases.
    pub fn recovery(&self) -> Recovery {
        self.inner.recovery
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The injected clock.
    pub fn now(&self) -> Millis {
        self.inner.clock.now()
    }

    /// Stops the writer after the commands already queued and releases the file.
    pub fn close(&self) {
        if let Ok(mut tx) = self.inner.tx.lock() {
            tx.take();
        }
        if let Ok(mut w) = self.inner.writer.lock()
            && let Some(handle) = w.take()
        {
            let _ = handle.join();
        }
        if let Ok(mut db) = self.inner.db.lock() {
            db.take();
        }
    }

    fn send(
        &self,
        cmd: Command,
        parsed: Option<Parsed>,
    ) -> Result<oneshot::Receiver<Result<Reply, Error>>, Error> {
        let (reply, rx) = oneshot::channel();
        // a principal's audited command travels with it (crate::audit)
        let cmd = cmd.by_actor();
        // encoded here, on the caller's thread, not on the writer's (a
        // deploy's model is encoded by the writer, see `carries_a_model`)
        let encoded = if cmd.carries_a_model() {
            None
        } else {
            Some(crate::commit::wal::encode_command(&cmd)?)
        };
        let guard = self.inner.tx.lock().map_err(|_| StoreError::Closed)?;
        if self.inner.read_only {
            return Err(StoreError::ReadOnly.into());
        }
        let tx = guard.as_ref().ok_or(StoreError::Closed)?;
        tx.send(Job::Apply(Request {
            cmd,
            encoded,
            parsed,
            reply,
            trace: crate::trace::current_traceparent(),
        }))
        .map_err(|_| StoreError::Closed)?;
        Ok(rx)
    }

    pub(crate) async fn submit(&self, cmd: Command) -> Result<Reply, Error> {
        self.submit_parsed(cmd, None).await
    }

    async fn submit_parsed(&self, cmd: Command, parsed: Option<Parsed>) -> Result<Reply, Error> {
        use tracing::Instrument;
        // enqueue → batch applied → log frame fsynced → answered
        let span = tracing::info_span!(target: crate::trace::TARGET, "postfach.group_commit");
        let rx = span.in_scope(|| self.send(cmd, parsed))?;
        async move { rx.await.map_err(|_| Error::Store(StoreError::Closed))? }
            .instrument(span)
            .await
    }

    // ------------------------------------------------------------ commands

    /// Parses, validates and stores a BPMN file. `correlation_keys` maps message
    /// name to key variable and wins over the model. What the model says that
    /// will not run as written is dropped here; see [`Postfach::deploy_checked`].
    pub async fn deploy(
        &self,
        file: &str,
        xml: &str,
        correlation_keys: BTreeMap<String, String>,
    ) -> Result<Vec<Deployed>, Error> {
        Ok(self
            .deploy_checked(file, xml, correlation_keys, false)
            .await?
            .deployed)
    }

    /// [`Postfach::deploy`], returning what the model says that postfach does
    /// not execute (listeners, Java classes, mappings, skipped pools) as
    /// warnings; `strict` refuses such a model instead
    /// ([`crate::model::ParseError::Strict`]).
    pub async fn deploy_checked(
        &self,
        file: &str,
        xml: &str,
        correlation_keys: BTreeMap<String, String>,
        strict: bool,
    ) -> Result<Deployment, Error> {
        // parse and validate here, off the writer: a large model must not hold up
        // the publishes queued behind it, and a refused one never reaches the log
        let (name, text, keys) = (file.to_string(), xml.to_string(), correlation_keys);
        let parse = move || {
            // a decision file is built here too: the engine finds it cached
            let dmn = crate::model::dmn::is_dmn(&text);
            let parsed = if dmn {
                crate::model::dmn::cached(&name, &text).map(|m| crate::model::Parsed {
                    processes: Vec::new(),
                    warnings: m.outline.warnings.clone(),
                })
            } else {
                crate::model::parse_report(&name, &text, &keys)
            };
            let parsed = parsed.and_then(|p| {
                if strict && !p.warnings.is_empty() {
                    Err(crate::model::ParseError::Strict {
                        file: name.clone(),
                        warnings: p.warnings,
                    })
                } else {
                    Ok(p)
                }
            });
            (parsed, name, text, keys)
        };
        let (parsed, file, xml, overrides) = match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt
                .spawn_blocking(parse)
                .await
                .map_err(|e| Error::Task(e.to_string()))?,
            Err(_) => parse(),
        };
        let parsed = parsed.map_err(EngineError::from)?;
        let deployed = self
            .submit_parsed(
                Command::Deploy {
                    file,
                    xml,
                    overrides,
                },
                Some(parsed.processes),
            )
            .await?
            .deployed()?;
        Ok(Deployment {
            deployed,
            warnings: parsed.warnings,
        })
    }

    /// Starts an instance of the latest version of `process`.
    #[tracing::instrument(level = "debug", skip(self, vars, business_key))]
    pub async fn start(
        &self,
        process: &str,
        vars: Vars,
        business_key: Option<String>,
    ) -> Result<u64, Error> {
        self.submit(Command::Start {
            process: process.into(),
            vars,
            business_key,
        })
        .await?
        .started()
    }

    /// Publishes a message (the normal, buffered path). Every message ends in a
    /// recorded outcome: correlated, buffered, duplicate or parked.
    ///
    /// ```no_run
    /// # async fn demo(pf: postfach::Postfach) -> Result<(), postfach::Error> {
    /// let d = pf.publish(postfach::Publish {
    ///     name: "AuftragAbgeschlossen".into(),
    ///     key: "4711".into(),
    ///     message_id: Some("evt-1".into()),
    ///     ..Default::default()
    /// }).await?;
    /// println!("{:?}", d.outcome);
    /// # Ok(()) }
    /// ```
    #[tracing::instrument(level = "debug", skip_all, fields(message = %msg.name, key = %msg.key, message_id = ?msg.message_id))]
    pub async fn publish(&self, msg: Publish) -> Result<Delivery, Error> {
        check_ttl(&msg)?;
        self.submit(Command::Publish(msg)).await?.delivery()
    }

    /// Correlates synchronously: exactly one waiting subscription or an
    /// [`Error::Rejected`] naming the reason and the candidates. Never buffers.
    #[tracing::instrument(level = "debug", skip_all, fields(message = %msg.name, key = %msg.key, message_id = ?msg.message_id))]
    pub async fn correlate(&self, msg: Publish) -> Result<Delivery, Error> {
        check_ttl(&msg)?;
        let (name, key) = (msg.name.clone(), msg.key.clone());
        match self.submit(Command::Correlate(msg)).await? {
            Reply::Delivery(d) if d.outcome == crate::Outcome::Rejected => Err(Error::Rejected {
                name,
                key,
                reason: d.reason.map(|r| r.as_str()).unwrap_or("no_subscription"),
                candidates: d.candidates,
            }),
            Reply::Delivery(d) => Ok(d),
            _ => unreachable_reply(),
        }
    }

    /// Offers `vars` to the conditional start events of every deployed
    /// process (only `process`'s, when given): an instance of the latest
    /// version starts at each one whose condition holds over them. Returns
    /// the instances started (none is not an error); an unknown `process`
    /// is refused.
    #[tracing::instrument(level = "debug", skip(self, vars))]
    pub async fn start_by_conditions(
        &self,
        process: Option<&str>,
        vars: Vars,
    ) -> Result<Vec<u64>, Error> {
        if let Some(p) = process {
            crate::limits::check_name("process id", p)?;
        }
        self.submit(Command::StartByConditions {
            process: process.map(str::to_string),
            vars,
        })
        .await?
        .started_all()
    }

    /// Broadcasts a signal once per `id` (1 … 256 characters): a second call
    /// with the id changes nothing and answers what the first reached. A
    /// cluster's gateway and its partitions' forwarders give every signal an
    /// id, so each partition applies it once however often it arrives.
    #[tracing::instrument(level = "debug", skip(self, vars))]
    pub async fn signal_once(&self, id: &str, name: &str, vars: Vars) -> Result<usize, Error> {
        crate::limits::check_name("signal id", id)?;
        self.submit(Command::SignalOnce {
            id: id.into(),
            name: name.into(),
            vars,
        })
        .await?
        .count()
    }

    /// Forgets signals thrown here that every other partition took: (seq of
    /// [`ops::Reader::signals_out`], whether it reached nobody on any
    /// partition); returns how many were still kept.
    pub async fn signals_forwarded(&self, done: Vec<(u64, bool)>) -> Result<usize, Error> {
        self.submit(Command::SignalsForwarded { done })
            .await?
            .count()
    }

    /// Parks an undecodable payload with its raw bytes (reason `malformed`).
    pub async fn park_malformed(&self, m: Malformed) -> Result<Delivery, Error> {
        self.submit(Command::Malformed(m)).await?.delivery()
    }

    /// Broadcasts a signal; returns how many subscriptions it reached.
    #[tracing::instrument(level = "debug", skip(self, vars))]
    pub async fn signal(&self, name: &str, vars: Vars) -> Result<usize, Error> {
        self.submit(Command::Signal {
            name: name.into(),
            vars,
        })
        .await?
        .count()
    }

    /// Runs due async continuations (up to `limit`).
    pub async fn run_continuations(&self, limit: usize) -> Result<usize, Error> {
        self.submit(Command::RunContinuations { limit })
            .await?
            .count()
    }

    /// Evaluates a parked message again, like a new publish.
    pub async fn requeue(&self, message_id: &str) -> Result<Delivery, Error> {
        self.submit(Command::Requeue {
            id: message_id.into(),
        })
        .await?
        .delivery()
    }

    /// Ends a parked message explicitly, with the reason recorded.
    pub async fn discard(&self, message_id: &str, by: &str, why: &str) -> Result<(), Error> {
        self.submit(Command::Discard {
            id: message_id.into(),
            by: by.into(),
            why: why.into(),
        })
        .await
        .map(|_| ())
    }

    /// Forgets the events about parked messages the broker confirmed (see
    /// [`ops::Reader::parked_events`]); returns how many were still kept.
    pub async fn parked_events_sent(&self, ids: Vec<u64>) -> Result<usize, Error> {
        self.submit(Command::ParkedEventsSent { ids })
            .await?
            .count()
    }

    /// Retention: removes one batch (up to `limit` scanned records per table) of
    /// completed instances and settled messages older than the retention period;
    /// returns (instances, messages) removed and whether the pass goes on: call
    /// again while it does.
    pub async fn cleanup(&self, limit: usize) -> Result<(usize, usize, bool), Error> {
        match self.submit(Command::Cleanup { limit }).await? {
            Reply::Cleaned(i, m, more) => Ok((i, m, more)),
            _ => unreachable_reply(),
        }
    }

    /// Compacts the database file offline (no other process may hold it):
    /// replays and checkpoints the log, then lets redb reclaim free space.
    /// Returns the file size before and after.
    pub fn compact(path: impl AsRef<Path>) -> Result<(u64, u64), Error> {
        let path = path.as_ref();
        Postfach::open(path)?.close();
        let before = std::fs::metadata(path).map_err(StoreError::Io)?.len();
        let (mut db, _) = store::open_db(path, None)?;
        while db.compact().map_err(|e| StoreError::Redb(e.into()))? {}
        drop(db);
        let after = std::fs::metadata(path).map_err(StoreError::Io)?.len();
        Ok((before, after))
    }

    /// The operator's repair of a damaged write-ahead log (when opening failed
    /// with [`StoreError::LogDamaged`]): keeps a copy of the log beside it,
    /// rewrites it with every intact record — before and after the damage — and
    /// opens the database once, which replays them. Returns `None`, changing
    /// nothing, when the log is not damaged. Commands of the batches listed in
    /// [`crate::LogSalvage::missing_batches`] are lost.
    pub fn recover_damaged_log(
        path: impl AsRef<Path>,
        options: Options,
    ) -> Result<Option<crate::LogSalvage>, Error> {
        let path = path.as_ref();
        let Some(s) = wal::salvage(&Wal::path_for(path), options.clock.now())? else {
            return Ok(None);
        };
        Postfach::open_with(path, options)?.close();
        Ok(Some(s))
    }

    /// Checks every page of the database file at `path` without changing it
    /// (redb's integrity check over an in-memory overlay). Slow on a large
    /// file: it reads all of it. Refused while another process writes to it.
    pub fn check_database(path: impl AsRef<Path>) -> Result<crate::FileCheck, Error> {
        let path = path.as_ref();
        regular_file(path)?;
        match damage::contain(path, || Ok(redb::Database::builder().open_read_only(path))) {
            Ok(Err(redb::DatabaseError::DatabaseAlreadyOpen)) => Err(StoreError::Locked {
                path: path.display().to_string(),
            }
            .into()),
            Err(StoreError::Damaged { detail, .. }) => Ok(crate::FileCheck::Damaged(detail)),
            Err(e) => Err(e.into()),
            Ok(_) => Ok(store::check_file(path)?),
        }
    }

    /// Repairs a database file that [`Postfach::check_database`] found
    /// [`crate::FileCheck::Repairable`]: redb goes back to its last commit whose
    /// pages are intact, in place; what was committed after it and is not in
    /// the write-ahead log is lost. Offline only (the file lock refuses it
    /// while another process holds the file).
    pub fn repair_database(path: impl AsRef<Path>) -> Result<crate::FileCheck, Error> {
        let path = path.as_ref();
        regular_file(path)?;
        Ok(store::repair_file(path)?)
    }

    /// What the write-ahead log of `path` holds, read without changing it.
    pub fn inspect_log(path: impl AsRef<Path>) -> Result<crate::LogState, Error> {
        regular_file(path.as_ref())?;
        let log = Wal::path_for(path.as_ref());
        let scan = Wal::scan(&log)?;
        Ok(crate::LogState {
            path: log,
            size: scan.size,
            intact_records: scan.records.len(),
            intact_until: scan.intact_until,
            reserved: (scan.size - scan.intact_until) - scan.torn_tail(),
            damaged: scan.damaged,
            intact_after: scan.after.len(),
        })
    }

    /// Commits an empty batch: parks expired buffered messages and releases
    /// expired leases as of the clock's now.
    pub async fn tick(&self) -> Result<(), Error> {
        self.submit(Command::Tick).await.map(|_| ())
    }

    // ------------------------------------------------------------ handlers

    /// Binds a handler to a service task topic (by default the task's element id).
    ///
    /// ```no_run
    /// # fn demo(pf: postfach::Postfach) {
    /// pf.register_handler("rechnungStellen", |job: postfach::JobContext| async move {
    ///     // issue the invoice keyed by job.idempotency_key, then:
    ///     Ok(postfach::Vars::new())
    /// });
    /// # }
    /// ```
    pub fn register_handler(&self, topic: &str, handler: impl Handler) {
        self.inner.handlers.insert(topic, Arc::new(handler));
    }

    pub(crate) fn handlers(&self) -> &Handlers {
        &self.inner.handlers
    }

    /// Notified after every committed batch.
    pub(crate) fn committed(&self) -> &tokio::sync::Notify {
        &self.inner.committed
    }

    /// Commit latency and batch size histograms.
    pub fn commit_stats(&self) -> &CommitStats {
        &self.inner.stats
    }

    // ------------------------------------------------------------ reads

    /// What the store's consistency check finds (nothing when it holds).
    #[cfg(test)]
    pub(crate) fn store_problems(&self) -> Result<Vec<String>, Error> {
        let db = self.open_db()?;
        let r = store::begin_read_tx(&db)?;
        Ok(store::verify_read(&r)?)
    }

    /// The open database, or `Closed`.
    fn open_db(&self) -> Result<Arc<redb::Database>, StoreError> {
        self.inner
            .db
            .lock()
            .ok()
            .and_then(|d| d.clone())
            .ok_or(StoreError::Closed)
    }

    /// A read snapshot for the views in [`crate::ops`].
    pub fn reader(&self) -> Result<ops::Reader, Error> {
        let db = self.open_db()?;
        Ok(ops::Reader::new(
            store::begin_read(&db)?,
            self.inner.defs.clone(),
            self.now(),
        ))
    }
}

/// A message's TTL must lie in [`crate::limits::MESSAGE_TTL`].
fn check_ttl(msg: &Publish) -> Result<(), Error> {
    if let Some(ttl) = msg.ttl {
        crate::limits::MESSAGE_TTL.check(ttl)?;
    }
    Ok(())
}

/// The database file at `path`, which must exist and be a regular file.
fn regular_file(path: &Path) -> Result<(), Error> {
    crate::files::existing_regular(path, "database").map_err(StoreError::Io)?;
    Ok(())
}
