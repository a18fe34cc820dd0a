//! What must be found after a power cut: every answered call with its
//! outcome, the store's consistency, and a message answered before the cut
//! recognised when it comes again.

use super::workload::{Answered, MESSAGE, options};
use crate::disk::sim::Disk;
use crate::{Outcome, Postfach, Publish};
use std::collections::BTreeMap;

/// Opens what survived and checks every answer against it; the problems found.
pub(super) async fn check(
    files: BTreeMap<String, Vec<u8>>,
    checkpoint_often: bool,
    got: &Answered,
) -> Vec<String> {
    let disk = Disk::from_files(files, None);
    let pf = match Postfach::open_sim(&disk, options(checkpoint_often)) {
        Ok(pf) => pf,
        Err(e) => {
            return vec![format!(
                "the database does not open after the power cut: {e}"
            )];
        }
    };
    let mut problems = pf
        .store_problems()
        .unwrap_or_else(|e| vec![format!("the store check failed: {e}")]);
    let r = pf.reader().expect("a reader");
    for id in &got.started {
        if r.instance(*id).ok().flatten().is_none() {
            problems.push(format!("started instance {id} is gone"));
        }
    }
    for job in &got.completed_jobs {
        if r.job(*job).ok().flatten().is_some() {
            problems.push(format!("completed job {job} is back"));
        }
    }
    for (id, d) in &got.published {
        let stored = r.message(id).unwrap_or_default();
        let kept = match d.outcome {
            // nothing was recorded for these
            Outcome::Duplicate | Outcome::Rejected => true,
            Outcome::Correlated => stored.iter().any(|m| {
                m.state == "correlated" && m.instance == d.instance.map(|i| i.to_string())
            }),
            // a later command may have correlated it, or its TTL parked it
            Outcome::Buffered => stored
                .iter()
                .any(|m| matches!(m.state, "buffered" | "correlated" | "parked")),
            // an operator may have requeued or discarded it since
            Outcome::Parked => stored
                .iter()
                .any(|m| matches!(m.state, "parked" | "discarded" | "buffered" | "correlated")),
        };
        if !kept {
            problems.push(format!(
                "message {id} answered {:?} is stored as {:?}",
                d.outcome,
                stored.iter().map(|m| m.state).collect::<Vec<_>>()
            ));
        }
    }
    check_repairs(&r, got, &mut problems);
    drop(r);
    // a signal's id is remembered with what its first broadcast reached
    for (id, reached) in &got.signals {
        let again = pf
            .signal_once(id, "Freigabe", crate::model::Vars::new())
            .await;
        if !matches!(&again, Ok(n) if n == reached) {
            problems.push(format!(
                "signal {id} reached {reached}; sent again it answers {again:?}"
            ));
        }
    }
    // a message answered before the cut is recognised when it comes again
    for (id, d) in &got.published {
        if matches!(d.outcome, Outcome::Duplicate | Outcome::Rejected) {
            continue;
        }
        let again = pf
            .publish(Publish {
                name: MESSAGE.into(),
                key: "A-0".into(),
                message_id: Some(id.clone()),
                ..Default::default()
            })
            .await;
        if !matches!(&again, Ok(a) if a.outcome == Outcome::Duplicate) {
            problems.push(format!("message {id} is not recognised again: {again:?}"));
        }
    }
    pf.close();
    problems
}

/// The repairs, user tasks and jobs `got` was answered about, as `r` finds
/// them after the cut; what is not so goes into `problems`.
fn check_repairs(r: &crate::ops::Reader, got: &Answered, problems: &mut Vec<String>) {
    check_tasks(r, got, problems);
    check_histories(r, got, problems);
    check_jobs(r, got, problems);
    check_messages(r, got, problems);
}

/// The user tasks completed, claimed, unclaimed and assigned.
fn check_tasks(r: &crate::ops::Reader, got: &Answered, problems: &mut Vec<String>) {
    let open = r
        .tasks(&crate::ops::TaskFilter::default())
        .unwrap_or_default();
    for task in &got.tasks {
        if open.iter().any(|t| t.task == task.to_string()) {
            problems.push(format!("completed user task {task} is open again"));
        }
    }
    for (task, last) in &got.task_last {
        let view = open.iter().find(|t| t.task == task.to_string());
        let holder = view.and_then(|t| t.assignee.as_deref());
        // a task that is no longer open went with its review (cancelled)
        let kept = match *last {
            "claimed" => view.is_none() || holder == Some("anna"),
            "unclaimed" => view.is_none() || holder.is_none(),
            "assigned" => view.is_none() || holder == Some("ben"),
            _ => view.is_none(),
        };
        if !kept {
            problems.push(format!(
                "user task {task} was {last}, now held by {holder:?}"
            ));
        }
    }
}

/// The instances triggered, repaired, caught, moved and released, by what
/// their history and tokens say.
fn check_histories(r: &crate::ops::Reader, got: &Answered, problems: &mut Vec<String>) {
    let had = |id: u64, element: &str, event: &str| {
        r.instance(id).ok().flatten().is_some_and(|v| {
            v.history
                .iter()
                .any(|h| h.element == element && h.event == event)
        })
    };
    for id in &got.triggered {
        if !had(*id, "bestaetigen", "triggered") {
            problems.push(format!(
                "review {id} was triggered; its history does not say so"
            ));
        }
    }
    for id in &got.added {
        if !had(*id, "pruefen", "token_added") {
            problems.push(format!(
                "a token was added to review {id}; its history does not say so"
            ));
        }
    }
    for id in &got.caught {
        if !had(*id, "fehlt", "completed") {
            problems.push(format!(
                "clarification {id}: its BPMN error was caught; its history does not say so"
            ));
        }
    }
    for (id, element) in &got.ad_hoc {
        if !had(*id, element, "completed") {
            problems.push(format!(
                "clarification {id}: the ad-hoc subprocess went on to {element}; its history does not say so"
            ));
        }
    }
    for (id, token) in &got.cancelled {
        // token ids are never reused: a cancelled one is gone for good
        let v = r.instance(*id).ok().flatten();
        if v.is_none_or(|v| v.tokens.iter().any(|t| t.token == *token)) {
            problems.push(format!("cancelled token {token} of instance {id} is back"));
        }
    }
    for id in &got.released {
        let v = r.instance(*id).ok().flatten();
        if v.is_none_or(|v| v.waiting_at.iter().any(|w| w == "freigabe")) {
            problems.push(format!(
                "review {id} was released by a broadcast and waits for it again"
            ));
        }
    }
    for id in &got.moved {
        let v = r.instance(*id).ok().flatten();
        if v.is_none_or(|v| v.waiting_at.iter().any(|w| w == "warteAufAbschluss")) {
            problems.push(format!(
                "order {id} moved on waits for its completion again"
            ));
        }
    }
}

/// The jobs failed, retried and extended.
fn check_jobs(r: &crate::ops::Reader, got: &Answered, problems: &mut Vec<String>) {
    for (job, last) in &got.job_last {
        let view = r.job(*job).ok().flatten();
        let state = view.as_ref().map(|j| j.state);
        let kept = match *last {
            "failed" => state == Some("incident"),
            // a retried job is due again (or taken, or done since)
            "retried" => state != Some("incident"),
            // nothing takes a leased job before its lease ends, and the
            // workload's clock stands still
            "extended" => view.is_some_and(|j| {
                j.state == "locked"
                    && j.lease_until == got.extended.get(job).map(|u| crate::clock::rfc3339(*u))
            }),
            _ => state.is_none(),
        };
        if !kept {
            problems.push(format!("job {job} was {last}, now {state:?}"));
        }
    }
}

/// The messages requeued, parked as undecodable and discarded, and the
/// parked events marked as published.
fn check_messages(r: &crate::ops::Reader, got: &Answered, problems: &mut Vec<String>) {
    for (id, _) in &got.requeued {
        let stored = r.message(id).unwrap_or_default();
        if !stored.iter().any(|m| m.requeues > 0 || m.state != "parked") {
            problems.push(format!("requeued message {id} is parked as before"));
        }
    }
    for id in &got.malformed {
        if r.message(id).unwrap_or_default().is_empty() {
            problems.push(format!("undecodable payload {id} parked is gone"));
        }
    }
    let pending = r.parked_events(100_000).map(|(e, _)| e).unwrap_or_default();
    for id in &got.events_sent {
        if pending.iter().any(|e| e.id == *id) {
            problems.push(format!("event {id} marked as published is pending again"));
        }
    }
    for id in &got.discarded {
        let stored = r.message(id).unwrap_or_default();
        if !stored.iter().any(|m| m.state == "discarded") {
            problems.push(format!(
                "discarded message {id} is stored as {:?}",
                stored.iter().map(|m| m.state).collect::<Vec<_>>()
            ));
        }
    }
}
