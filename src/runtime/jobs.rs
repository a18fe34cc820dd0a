//! What workers and operators do to jobs: lock (with or without a variable
//! selection), complete, fail, extend a lease, throw a BPMN error, retry an
//! incident.
//!
//! Invariant: like every method of [`Postfach`], each sends one command to
//! the writer after range-checking what it carries (lease, batch size,
//! worker name, retry delay), and returns once the command's batch is
//! durable.

use super::Postfach;
use crate::clock::Millis;
use crate::commit::{Command, Reply, unreachable_reply};
use crate::engine::LockedJob;
use crate::error::Error;
use crate::model::Vars;
use crate::store::JobState;

impl Postfach {
    /// Locks due task jobs of a topic for a worker; each carries every
    /// variable its token sees.
    pub async fn lock_jobs(
        &self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
    ) -> Result<Vec<LockedJob>, Error> {
        self.lock(topic, max, owner, lease, false).await
    }

    /// [`Postfach::lock_jobs`] for a worker that needs only the variables
    /// named in `fetch` (as Zeebe's `fetchVariables` and Camunda's
    /// `fetchAndLock` variables): each job carries only those its token sees,
    /// and no other variable is copied.
    pub async fn lock_jobs_fetching(
        &self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
        fetch: Vec<String>,
    ) -> Result<Vec<LockedJob>, Error> {
        check_lock(max, owner, lease)?;
        for name in &fetch {
            crate::limits::check_name("fetch_variables", name)?;
        }
        self.submit(Command::LockJobsFetching {
            topic: topic.into(),
            max,
            owner: owner.into(),
            lease,
            fetch,
        })
        .await?
        .locked()
    }

    /// Locks jobs for handlers of this process: their leases are released when
    /// the database is opened again.
    pub(crate) async fn lock_in_process(
        &self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
    ) -> Result<Vec<LockedJob>, Error> {
        self.lock(topic, max, owner, lease, true).await
    }

    async fn lock(
        &self,
        topic: &str,
        max: usize,
        owner: &str,
        lease: Millis,
        in_process: bool,
    ) -> Result<Vec<LockedJob>, Error> {
        check_lock(max, owner, lease)?;
        self.submit(Command::LockJobs {
            topic: topic.into(),
            max,
            owner: owner.into(),
            lease,
            in_process,
        })
        .await?
        .locked()
    }

    /// Completes a task job and moves its token on. `lease` is the lease token
    /// from [`Postfach::lock_jobs`], or `None` to complete an unlocked job by hand.
    #[tracing::instrument(level = "debug", skip(self, vars))]
    pub async fn complete_job(
        &self,
        job: u64,
        lease: Option<u64>,
        vars: Vars,
    ) -> Result<(), Error> {
        self.submit(Command::CompleteJob { job, lease, vars })
            .await
            .map(|_| ())
    }

    /// Records a failed attempt; returns whether the job will retry or is an incident.
    pub async fn fail_job(
        &self,
        job: u64,
        lease: Option<u64>,
        error: &str,
    ) -> Result<JobState, Error> {
        self.fail_job_with(job, lease, error, None, None).await
    }

    /// Records a failed attempt as a worker sees it: `retries_left` attempts
    /// remain (0: incident now), the next one after `retry_delay`.
    pub async fn fail_job_with(
        &self,
        job: u64,
        lease: Option<u64>,
        error: &str,
        retries_left: Option<u32>,
        retry_delay: Option<Millis>,
    ) -> Result<JobState, Error> {
        if let Some(d) = retry_delay {
            crate::limits::RETRY_DELAY.check(d)?;
        }
        self.submit(Command::FailJob {
            job,
            lease,
            error: error.into(),
            retries_left,
            retry_delay,
        })
        .await?
        .job_state()
    }

    /// Extends a worker's lease to now + `by`; returns the new expiry. Refused
    /// ([`crate::EngineError::StaleLease`]) when the lease expired or went to another worker.
    pub async fn extend_lease(&self, job: u64, lease: u64, by: Millis) -> Result<Millis, Error> {
        crate::limits::LEASE_EXTENSION.check(by)?;
        match self.submit(Command::ExtendLease { job, lease, by }).await? {
            Reply::Count(until) => Ok(until as Millis),
            _ => unreachable_reply(),
        }
    }

    /// A worker reports a business error (BPMN error `code`) for a task job: an
    /// error boundary event on the task takes the token (returns true); without
    /// one the job becomes an incident (returns false).
    pub async fn throw_error(
        &self,
        job: u64,
        lease: Option<u64>,
        code: &str,
        message: &str,
        vars: Vars,
    ) -> Result<bool, Error> {
        match self
            .submit(Command::ThrowError {
                job,
                lease,
                code: code.into(),
                message: message.into(),
                vars,
            })
            .await?
        {
            Reply::Count(n) => Ok(n == 1),
            _ => unreachable_reply(),
        }
    }

    /// Makes an incident runnable again.
    pub async fn retry_job(&self, job: u64) -> Result<(), Error> {
        self.submit(Command::RetryJob { job }).await.map(|_| ())
    }
}

/// What every lock request carries, range-checked: the lease, the batch size
/// and the worker's name.
fn check_lock(max: usize, owner: &str, lease: Millis) -> Result<(), Error> {
    crate::limits::LEASE.check(lease)?;
    crate::limits::check_count("max", max, crate::limits::LOCK_BATCH)?;
    crate::limits::check_name("worker", owner)?;
    Ok(())
}
