//! Views of jobs: one job, lists and pages, incidents, what is due next, and
//! the claim-check reference a job's variable holds.
//!
//! Invariant: only reads; counts come from the due indexes and gauges.

use super::*;
use crate::clock::{Millis, rfc3339};
use crate::store::*;
use serde::Serialize;

/// A job's topic and the token of its lease ([`Reader::job_lease`]).
pub type JobLease = (Option<String>, Option<u64>);

/// A job or incident.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    /// Job id.
    pub job: String,
    /// Instance id; `None` for the schedule of a timer start event, which
    /// belongs to no instance (it starts them).
    pub instance: Option<String>,
    /// The token of the instance the job runs for (0 for a timer start's
    /// schedule).
    pub token: u64,
    /// Element the job runs for.
    pub element: String,
    /// `continuation`, `task` or `timer`.
    pub kind: &'static str,
    /// Topic of a task job.
    pub topic: Option<String>,
    /// `ready`, `locked` or `incident`.
    pub state: &'static str,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Error of the last failed attempt.
    pub error: Option<String>,
    /// When it is due (RFC 3339).
    pub due_at: String,
    /// `instance:element:activation`, the same for every attempt.
    pub idempotency_key: String,
    /// Failed attempts, oldest first.
    pub history: Vec<AttemptView>,
    /// Who holds its lease.
    pub lease_owner: Option<String>,
    /// Until when (RFC 3339).
    pub lease_until: Option<String>,
}

/// One failed attempt.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    /// When (RFC 3339).
    pub at: String,
    /// What the handler or worker reported.
    pub error: String,
}

impl Reader {
    /// One job, while it exists (a job that ran is gone).
    pub fn job(&self, id: u64) -> Result<Option<JobView>, RErr> {
        Ok(self.snap.job(id)?.as_ref().map(job_view))
    }

    /// The fencing token of the lease a job is held under, if it is held
    /// (a face without lease tokens, Zeebe's, completes with it).
    pub fn lease_token(&self, id: u64) -> Result<Option<u64>, RErr> {
        Ok(self.snap.job(id)?.and_then(|j| j.lease.map(|l| l.token)))
    }

    /// A job's topic (none for a job of no worker) and the token of the
    /// lease it is held under, in one read; `None` for no such job.
    pub fn job_lease(&self, id: u64) -> Result<Option<JobLease>, RErr> {
        Ok(self.snap.job(id)?.map(|j| {
            let topic = match j.kind {
                JobKind::Task { topic } => Some(topic),
                JobKind::Continue
                | JobKind::ContinueAfter
                | JobKind::Timer { .. }
                | JobKind::StartTimer { .. } => None,
            };
            (topic, j.lease.map(|l| l.token))
        }))
    }

    /// Jobs, or only incidents.
    pub fn jobs(&self, incidents_only: bool) -> Result<Vec<JobView>, RErr> {
        let jobs = if incidents_only {
            self.snap.incident_jobs()?
        } else {
            self.snap.jobs()?
        };
        Ok(jobs.iter().map(job_view).collect())
    }

    /// One page of jobs (or only incidents) after job id `after`, by id, and
    /// the cursor of the next page when more may follow.
    pub fn job_page(
        &self,
        incidents_only: bool,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<JobView>, Option<String>), RErr> {
        let limit = limit.max(1);
        let mut jobs = self.snap.jobs_after(incidents_only, after, limit + 1)?;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let next = more
            .then(|| jobs.last().map(|j| j.id.to_string()))
            .flatten();
        Ok((jobs.iter().map(job_view).collect(), next))
    }

    /// The claim-check reference in variable `variable` of job `id`'s
    /// instance: `Ok(None)` for an unknown job, an error naming the job and
    /// variable when it holds no reference.
    pub fn claim_check(
        &self,
        id: u64,
        variable: &str,
    ) -> Result<Option<Result<crate::objects::ObjectRef, crate::objects::ObjectError>>, RErr> {
        let Some(job) = self.snap.job(id)? else {
            return Ok(None);
        };
        let variables = self
            .snap
            .instance(job.instance)?
            .map(|i| i.variables)
            .unwrap_or_default();
        Ok(Some(crate::objects::reference_in(id, &variables, variable)))
    }

    /// When the next job becomes due: the earliest async continuation, task job
    /// of one of `topics`, or lease expiry.
    pub fn next_due(&self, topics: &[String]) -> Result<Option<Millis>, RErr> {
        self.snap.next_due(topics)
    }

    /// Jobs due now and not taken yet, and incidents: from the due indexes
    /// and the incident gauge, without reading a job record.
    pub fn job_counts(&self) -> Result<(u64, u64), RErr> {
        Ok((self.snap.due_count(self.now)?, self.snap.incident_count()?))
    }
}

pub(super) fn job_view(j: &JobRecord) -> JobView {
    JobView {
        job: j.id.to_string(),
        instance: (!matches!(j.kind, JobKind::StartTimer { .. })).then(|| j.instance.to_string()),
        token: j.token,
        element: j.element.clone(),
        kind: match j.kind {
            JobKind::Continue => "async_continuation",
            JobKind::ContinueAfter => "async_after",
            JobKind::Task { .. } => "task",
            JobKind::Timer { .. } => "timer",
            JobKind::StartTimer { .. } => "start_timer",
        },
        topic: match &j.kind {
            JobKind::Task { topic } => Some(topic.clone()),
            JobKind::Continue
            | JobKind::ContinueAfter
            | JobKind::Timer { .. }
            | JobKind::StartTimer { .. } => None,
        },
        state: match j.state {
            JobState::Ready => "ready",
            JobState::Locked => "locked",
            JobState::Incident => "incident",
        },
        attempts: j.attempts,
        error: j.last_error.clone(),
        due_at: rfc3339(j.due_at),
        idempotency_key: j.idempotency_key.clone(),
        history: j
            .history
            .iter()
            .map(|a| AttemptView {
                at: rfc3339(a.at),
                error: a.error.clone(),
            })
            .collect(),
        lease_owner: j.lease.as_ref().map(|l| l.owner.clone()),
        lease_until: j.lease.as_ref().map(|l| rfc3339(l.until)),
    }
}
