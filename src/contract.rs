//! The JSON shapes of docs/cli.md, shared by the command line and the HTTP API
//! (and what a command prints: one JSON document and its human form).
//!
//! Invariant: one builder per shape; the command line and the API never build
//! the same document twice.

use crate::clock::rfc3339;
use crate::{Delivery, Reason};
use serde_json::{Value, json};

/// What a command prints: one JSON document and its human form.
pub struct Output {
    /// The JSON document (`--json`).
    pub json: Value,
    /// The text for people.
    pub text: String,
}

/// A publish or correlate outcome, as JSON.
pub fn delivery_json(d: &Delivery) -> Value {
    json!({
        "outcome": d.outcome.as_str(),
        "message_id": d.message_id,
        "instance": d.instance.map(|i| i.to_string()),
        "element": d.element,
        "reason": d.reason.map(Reason::as_str),
        "candidates": d.candidates.iter().map(u64::to_string).collect::<Vec<_>>(),
        "candidate_elements": d.candidate_elements.iter()
            .map(|(i, e)| json!({"instance": i.to_string(), "element": e}))
            .collect::<Vec<_>>(),
        "expires_at": d.expires_at.map(rfc3339),
    })
}

/// A job handed to an external worker, as JSON.
pub fn locked_job_json(j: &crate::LockedJob) -> Value {
    let t = &j.task;
    let mut v = json!({"job": t.job.to_string(), "instance": t.instance.to_string(), "element": t.element, "topic": t.topic,
        "lease_token": j.lease_token, "idempotency_key": t.idempotency_key, "attempt": t.attempt, "variables": t.variables});
    if let Some(work) = &t.work {
        v["work"] = work_json(work);
    }
    v
}

/// What a script or business-rule task asks its worker to evaluate, as JSON.
pub fn work_json(w: &crate::model::Delegated) -> Value {
    use crate::model::Delegated;
    match w {
        Delegated::Script {
            format,
            text,
            result_variable,
        } => {
            json!({"kind": "script", "format": format, "script": text, "result_variable": result_variable})
        }
        Delegated::Decision {
            decision,
            result_variable,
        } => json!({"kind": "decision", "decision": decision, "result_variable": result_variable}),
        Delegated::Message { name, end } => {
            json!({"kind": "message", "message": name, "end_event": end})
        }
        Delegated::Send {
            message,
            implementation,
        } => json!({"kind": "send", "message": message, "implementation": implementation}),
    }
}

/// What a deploy stored and what will not run as written, as JSON.
pub fn deployment_json(d: &crate::Deployment) -> Value {
    json!({
        "deployed": d.deployed.iter().map(|d| json!({"process": d.process, "version": d.version, "new_version": d.new_version, "kind": if d.decision { "decision" } else { "process" }})).collect::<Vec<_>>(),
        "warnings": d.warnings.iter().map(|w| json!({"element": w.id, "line": w.line, "message": w.message})).collect::<Vec<_>>(),
    })
}

/// What a repair did, as JSON.
pub fn repair_json(instance: u64, r: &crate::Repair) -> Value {
    json!({
        "instance": instance.to_string(), "token": r.token,
        "jobs_created": r.jobs_created.iter().map(u64::to_string).collect::<Vec<_>>(),
        "waiting_at": r.waiting_at,
    })
}

/// Retries job `job` and says what it did next: `ran` (it is gone: its token
/// moved on), `incident` again (with the error), `locked` (a worker or handler
/// holds it) or still `ready` (and what it waits for). Where an executor runs
/// (a server), it is given up to `wait` to run the job; `Duration::ZERO`
/// reports at once.
pub async fn retried(
    pf: &crate::Postfach,
    job: u64,
    wait: std::time::Duration,
) -> Result<Value, crate::Error> {
    pf.retry_job(job).await?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        let now = pf.reader()?.job(job)?;
        // ready, or locked by a handler now running it: not settled yet
        let settled = !matches!(&now, Some(j) if j.state == "ready" || j.state == "locked");
        if settled || std::time::Instant::now() >= deadline {
            return Ok(retry_json(job, now.as_ref()));
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

fn retry_json(job: u64, now: Option<&crate::ops::JobView>) -> Value {
    let Some(j) = now else {
        return json!({"job": job.to_string(), "state": "ran",
                      "next": "it ran: its token moved on"});
    };
    let next = match (j.state, j.kind, &j.topic) {
        ("incident", ..) => format!(
            "it failed again: {}",
            j.error.as_deref().unwrap_or("no error given")
        ),
        ("locked", ..) => format!(
            "{} holds it",
            j.lease_owner.as_deref().unwrap_or("a worker")
        ),
        (_, "task", Some(topic)) => format!("it waits for a worker on topic {topic}"),
        (_, "timer" | "start_timer", _) => format!("it is due at {}", j.due_at),
        _ => "it waits for the job executor (postfach work, or a running postfach run)".into(),
    };
    json!({"job": job.to_string(), "state": j.state, "next": next, "error": j.error})
}

/// Retention run to its end, in batches of 1,000: `{"instances_removed",
/// "messages_removed"}`.
pub async fn cleanup(pf: &crate::Postfach) -> Result<Value, crate::Error> {
    let (mut instances, mut messages) = (0u64, 0u64);
    loop {
        let (i, m, more) = pf.cleanup(1000).await?;
        instances += i as u64;
        messages += m as u64;
        if !more {
            break;
        }
    }
    Ok(json!({"instances_removed": instances, "messages_removed": messages}))
}

/// One pass of the job executor until nothing is due: `{"continuations",
/// "tasks_completed", "tasks_failed", "tasks_waiting"}`.
pub async fn work_pass(pf: &crate::Postfach) -> Result<Value, crate::Error> {
    let total = pf.work_until_idle().await?;
    worked_json(pf, &total)
}

/// What an executor ran, and the task jobs that wait for a handler or a
/// worker.
pub fn worked_json(
    pf: &crate::Postfach,
    total: &crate::runtime::WorkReport,
) -> Result<Value, crate::Error> {
    let waiting = pf
        .reader()?
        .jobs(false)?
        .iter()
        .filter(|j| j.kind == "task" && j.state == "ready")
        .count();
    Ok(
        json!({"continuations": total.continuations, "tasks_completed": total.tasks_completed, "tasks_failed": total.tasks_failed, "tasks_waiting": waiting}),
    )
}

/// A migration's answer (docs/cli.md `migrate`): how many instances moved
/// (or, in a dry run, would), each refused one with its reason, and per
/// instance what happens to each token.
pub fn migration_json(r: &crate::MigrationReport, dry_run: bool) -> Value {
    json!({
        "migrated": r.migrated.len(),
        "refused": r.refused.iter().map(|(i, why)| json!({
            "instance": i.to_string(),
            "reason": why,
        })).collect::<Vec<_>>(),
        "dry_run": dry_run,
        "batch": r.batch.map(|b| b.to_string()),
        "instances": r.migrated.iter().map(|m| json!({
            "instance": m.instance.to_string(),
            "tokens": m.tokens,
        })).collect::<Vec<_>>(),
    })
}
