//! Jobs at the edge: handler registry and the in-process runner.
//!
//! Invariants:
//! - A handler runs outside any transaction, under a lease; its result comes back
//!   as a command, and the token moves in the same transaction that completes the job.
//! - A handler that fails or panics becomes a recorded failed attempt (retried with
//!   doubling delay, then an incident), never a crashed runner or a lost job.
//! - The idempotency key handed to a handler is stable across retries and crashes.

use crate::runtime::{Error, Postfach, WorkReport};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::engine::JobContext;

pub use crate::handler::{Handler, HandlerError, HandlerFuture, Handlers};

impl Postfach {
    /// Starts the job executor on the current tokio runtime: it runs async
    /// continuations and the task jobs of registered handlers as soon as they are
    /// committed, and wakes at the due time of retries.
    pub fn start_executor(&self, config: ExecutorConfig) -> Executor {
        Executor::start(self.clone(), config)
    }

    /// Runs due jobs until none is left that can run now: async continuations,
    /// and task jobs whose topic has a registered handler.
    pub async fn work_until_idle(&self) -> Result<WorkReport, Error> {
        work_until_idle(self).await
    }
}

/// Lease for in-process handlers.
pub const HANDLER_LEASE_MS: u64 = 5 * 60 * 1000;

fn owner() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "pid{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub(crate) async fn work_until_idle(pf: &Postfach) -> Result<WorkReport, Error> {
    let mut report = WorkReport::default();
    let owner = owner();
    loop {
        let mut progressed = false;
        loop {
            let n = pf.run_continuations(1024).await?;
            report.continuations += n;
            if n == 0 {
                break;
            }
            progressed = true;
        }
        let mut running = tokio::task::JoinSet::new();
        for topic in pf.handlers().topics() {
            let Some(handler) = pf.handlers().get(&topic) else {
                continue;
            };
            for job in pf
                .lock_in_process(&topic, 1024, &owner, HANDLER_LEASE_MS)
                .await?
            {
                running.spawn(run_handler(pf.clone(), handler.clone(), job));
            }
        }
        while let Some(done) = running.join_next().await {
            progressed = true;
            match done {
                Ok(Ok(true)) => report.tasks_completed += 1,
                Ok(Ok(false)) => report.tasks_failed += 1,
                Ok(Err(e)) => return Err(e),
                Err(e) => tracing::error!(error = %e, "job task failed"),
            }
        }
        if !progressed {
            return Ok(report);
        }
    }
}

/// Settings of the job executor.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Handlers running at once.
    pub concurrency: usize,
    /// Lease of a handler on its job.
    pub lease_ms: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            concurrency: 16,
            lease_ms: HANDLER_LEASE_MS,
        }
    }
}

/// A running job executor; [`Executor::stop`] lets in-flight handlers finish.
pub struct Executor {
    stop: Arc<tokio::sync::Notify>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<Result<WorkReport, Error>>,
}

impl Executor {
    pub(crate) fn start(pf: Postfach, config: ExecutorConfig) -> Self {
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = tokio::spawn(run_executor(pf, config, stop.clone(), stopping.clone()));
        Self {
            stop,
            stopping,
            task,
        }
    }

    /// Stops taking jobs, waits for running handlers, returns what was done.
    pub async fn stop(self) -> Result<WorkReport, Error> {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.notify_one();
        self.task.await.map_err(|e| Error::Task(e.to_string()))?
    }
}

async fn run_executor(
    pf: Postfach,
    config: ExecutorConfig,
    stop: Arc<tokio::sync::Notify>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
) -> Result<WorkReport, Error> {
    let owner = owner();
    let mut report = WorkReport::default();
    let mut running = Running::default();
    let mut backoff = RETRY_FIRST;
    let mut turn = 0usize;
    while !stopping.load(Ordering::SeqCst) {
        let pass = Pass {
            pf: &pf,
            config: &config,
            owner: &owner,
            stop: &stop,
            turn,
        };
        turn = turn.wrapping_add(1);
        match pass.run(&mut running, &mut report).await {
            Ok(()) => backoff = RETRY_FIRST,
            // the database is closing: nothing more can be done
            Err(e @ Error::Store(crate::StoreError::Closed)) => return Err(e),
            Err(e) => {
                // a failed pass must not stop the executor: due jobs would
                // wait for a restart while the rest of the server runs on
                tracing::error!(error = %e, retry_in_ms = backoff.as_millis() as u64, "a pass of the job executor failed; it tries again");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.notified() => {}
                }
                backoff = (backoff * 2).min(RETRY_MOST);
            }
        }
    }
    while let Some(done) = running.join_next().await {
        count(&mut report, done)?;
    }
    Ok(report)
}

/// The first and the longest wait after a failed pass of the executor.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const RETRY_MOST: std::time::Duration = std::time::Duration::from_secs(5);

/// One pass of the executor: continuations, jobs locked for free handler
/// slots, then a wait for a commit, a due time, a finished handler or the
/// stop.
///
/// The free slots are shared among the topics: each pass asks them in turn
/// from another first topic, and each for at most its share of what is
/// still free — so a topic whose handlers are slow (a broker that answers
/// late) cannot hold every slot while another topic's jobs wait.
struct Pass<'a> {
    pf: &'a Postfach,
    config: &'a ExecutorConfig,
    owner: &'a str,
    stop: &'a tokio::sync::Notify,
    /// Which topic is asked first this pass (counted up pass by pass).
    turn: usize,
}

impl Pass<'_> {
    async fn run(&self, running: &mut Running, report: &mut WorkReport) -> Result<(), Error> {
        let pf = self.pf;
        let concurrency = self.config.concurrency.max(1);
        // async continuations run inside the engine: no handler, no lease
        loop {
            let n = pf.run_continuations(1024).await?;
            report.continuations += n;
            if n < 1024 {
                break;
            }
        }
        let topics = pf.handlers().topics();
        let n = topics.len();
        // every other topic keeps a slot, however slow one topic is
        let most = concurrency.saturating_sub(n.saturating_sub(1)).max(1);
        let in_turn = topics.iter().cycle().skip(self.turn % n.max(1)).take(n);
        for (asked, topic) in in_turn.enumerate() {
            let free = concurrency.saturating_sub(running.len());
            if free == 0 {
                break;
            }
            let Some(handler) = pf.handlers().get(topic) else {
                continue;
            };
            let room = most.saturating_sub(running.of(topic));
            let share = free.div_ceil(n - asked).min(room);
            if share == 0 {
                continue;
            }
            for job in pf
                .lock_in_process(topic, share, self.owner, self.config.lease_ms)
                .await?
            {
                running.spawn(pf, handler.clone(), job);
            }
        }
        // only the topics that may take another job can make progress now;
        // with none (every slot busy, or each topic at its most), only a
        // finishing handler can
        let open: Vec<String> = topics
            .iter()
            .filter(|t| running.len() < concurrency && running.of(t) < most)
            .cloned()
            .collect();
        let sleep = if open.is_empty() {
            None
        } else {
            let now = pf.now();
            match pf.reader()?.next_due(&open)? {
                Some(t) if t <= now => return Ok(()),
                Some(t) => Some(std::time::Duration::from_millis((t - now).min(3_600_000))),
                None => Some(std::time::Duration::from_secs(3600)),
            }
        };
        tokio::select! {
            _ = pf.committed().notified() => {}
            _ = self.stop.notified() => {}
            _ = tokio::time::sleep(sleep.unwrap_or_default()), if sleep.is_some() => {
                // due work (a retry, an expired lease) is swept in by a batch
                pf.tick().await?;
            }
            Some(done) = running.join_next(), if !running.is_empty() => count(report, done)?,
        }
        Ok(())
    }
}

/// The handlers running now, counted by topic.
#[derive(Default)]
struct Running {
    set: tokio::task::JoinSet<Result<bool, Error>>,
    topic_of: std::collections::HashMap<tokio::task::Id, String>,
    by_topic: std::collections::HashMap<String, usize>,
}

impl Running {
    fn len(&self) -> usize {
        self.set.len()
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// How many jobs of `topic` run now.
    fn of(&self, topic: &str) -> usize {
        self.by_topic.get(topic).copied().unwrap_or(0)
    }

    fn spawn(&mut self, pf: &Postfach, handler: Arc<dyn Handler>, job: crate::LockedJob) {
        let topic = job.task.topic.clone();
        *self.by_topic.entry(topic.clone()).or_default() += 1;
        let id = self.set.spawn(run_handler(pf.clone(), handler, job)).id();
        self.topic_of.insert(id, topic);
    }

    /// The next handler to end, its topic counted down (also when its task
    /// failed).
    async fn join_next(&mut self) -> Option<Result<Result<bool, Error>, tokio::task::JoinError>> {
        let done = self.set.join_next_with_id().await?;
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some(topic) = self.topic_of.remove(&id)
            && let Some(n) = self.by_topic.get_mut(&topic)
        {
            *n = n.saturating_sub(1);
        }
        Some(done.map(|(_, r)| r))
    }
}

fn count(
    report: &mut WorkReport,
    done: Result<Result<bool, Error>, tokio::task::JoinError>,
) -> Result<(), Error> {
    match done {
        Ok(Ok(true)) => report.tasks_completed += 1,
        Ok(Ok(false)) => report.tasks_failed += 1,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "job result not recorded; the job runs again after its lease")
        }
        Err(e) => tracing::error!(error = %e, "job task failed"),
    }
    Ok(())
}

/// Runs one handler under its lease and records the result; a panic is a failure.
async fn run_handler(
    pf: Postfach,
    handler: Arc<dyn Handler>,
    job: crate::LockedJob,
) -> Result<bool, Error> {
    use tracing::Instrument;
    let (id, lease) = (job.task.job, job.lease_token);
    let span = tracing::info_span!(
        target: crate::trace::TARGET,
        "postfach.job",
        job = id,
        element = %job.task.element,
        instance = job.task.instance,
    );
    // the job continues the trace of the command that created it
    if let Some(tp) = pf.job_trace(id) {
        crate::trace::continue_from(&span, [(crate::trace::TRACEPARENT, tp.as_str())]);
    }
    let outcome = match tokio::spawn(handler.call(job.task).instrument(span.clone())).await {
        Ok(r) => r,
        Err(e) => Err(HandlerError::Failed(format!("handler panicked: {e}"))),
    };
    // the result is recorded (a group commit) inside the job's span
    async move {
        match outcome {
            Ok(vars) => pf.complete_job(id, Some(lease), vars).await.map(|_| true),
            Err(HandlerError::Failed(e)) => pf.fail_job(id, Some(lease), &e).await.map(|_| false),
            Err(HandlerError::Bpmn {
                code,
                message,
                variables,
            }) => {
                pf.throw_error(id, Some(lease), &code, &message, variables)
                    .await
            }
        }
    }
    .instrument(span)
    .await
}
