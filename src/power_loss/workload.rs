//! The workloads the power-loss tests cut: the reference order process and
//! a review (user task, wait state, signal, business rule task) driven by
//! random commands, and what each call was answered.
//!
//! Invariant: a call counts as answered only when it returned `Ok`; a
//! refusal by the engine changes nothing and the workload goes on; any
//! other error is the power going, and the workload stops there.

use crate::disk::sim::Disk;
use crate::{Delivery, ManualClock, Options, Postfach, Publish};
use proptest::prelude::*;
use std::collections::BTreeMap;

pub(super) const REFERENCE: &str = include_str!("../../bpmn/auftrag-ausfuehrung.bpmn");
pub(super) const MESSAGE: &str = "AuftragAbgeschlossen";
pub(super) const HAND_OVER: &str = "auftragUebergeben";

/// A review: a user task, a wait state, a signal catch, a business rule task.
const REVIEW: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <bpmn:process id="pruefung" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <bpmn:userTask id="pruefen"/>
    <bpmn:sequenceFlow id="f2" sourceRef="pruefen" targetRef="bestaetigen"/>
    <bpmn:receiveTask id="bestaetigen"/>
    <bpmn:sequenceFlow id="f2b" sourceRef="bestaetigen" targetRef="freigabe"/>
    <bpmn:intermediateCatchEvent id="freigabe"><bpmn:signalEventDefinition signalRef="sig"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f3" sourceRef="freigabe" targetRef="stufe"/>
    <bpmn:businessRuleTask id="stufe"><bpmn:extensionElements><zeebe:calledDecision decisionId="stufe" resultVariable="stufe"/></bpmn:extensionElements></bpmn:businessRuleTask>
    <bpmn:sequenceFlow id="f4" sourceRef="stufe" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
  <bpmn:signal id="sig" name="Freigabe"/>
</bpmn:definitions>"#;

/// A clarification: started by a condition over the variables offered, a
/// job whose BPMN error a boundary event catches, an ad-hoc subprocess.
const CLARIFY: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <bpmn:process id="klaerung" isExecutable="true">
    <bpmn:startEvent id="ks"><bpmn:conditionalEventDefinition><bpmn:condition>${betrag > 100}</bpmn:condition></bpmn:conditionalEventDefinition></bpmn:startEvent>
    <bpmn:sequenceFlow id="k1" sourceRef="ks" targetRef="klaeren"/>
    <bpmn:serviceTask id="klaeren"/>
    <bpmn:boundaryEvent id="fehlt" attachedToRef="klaeren"><bpmn:errorEventDefinition errorRef="err"/></bpmn:boundaryEvent>
    <bpmn:sequenceFlow id="k2" sourceRef="klaeren" targetRef="nacharbeit"/>
    <bpmn:adHocSubProcess id="nacharbeit"><bpmn:task id="notiz"/><bpmn:task id="anruf"/></bpmn:adHocSubProcess>
    <bpmn:sequenceFlow id="k3" sourceRef="nacharbeit" targetRef="ke"/>
    <bpmn:endEvent id="ke"/>
    <bpmn:sequenceFlow id="k4" sourceRef="fehlt" targetRef="kf"/>
    <bpmn:endEvent id="kf"/>
  </bpmn:process>
  <bpmn:error id="err" errorCode="FEHLT"/>
</bpmn:definitions>"#;

/// The clarification's job topic.
const CLARIFY_TASK: &str = "klaeren";

/// The decision the review's business rule task takes.
#[cfg(feature = "feel")]
const STUFE: &str = r#"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/stufe" name="stufe" id="stufe-file">
  <decision name="Stufe" id="stufe">
    <decisionTable id="dt" hitPolicy="FIRST">
      <input id="i"><inputExpression typeRef="number"><text>betrag</text></inputExpression></input>
      <output id="o" typeRef="string"/>
      <rule id="klein"><inputEntry id="a"><text>&lt; 100</text></inputEntry><outputEntry id="b"><text>"klein"</text></outputEntry></rule>
      <rule id="gross"><inputEntry id="c"><text>-</text></inputEntry><outputEntry id="d"><text>"gross"</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;

#[derive(Debug, Clone)]
pub(super) enum Op {
    /// Starts the order `A-k`.
    Start(u8),
    /// Publishes a completion of `A-k` with message id `m`.
    Publish(u8, u16),
    /// Runs continuations and completes every due hand-over.
    HandOver,
    /// A batch without a command of its own (expiry, leases).
    Tick,
    /// Deploys the models and the decision again (unchanged: idempotent).
    Deploy,
    /// Starts review `k` (amount k·40).
    Review(u8),
    /// Claims and completes the oldest open user task as "anna".
    CompleteTask,
    /// Broadcasts signal `Freigabe` once for id `sig-n`: the reviews past
    /// their task decide.
    Signal(u8),
    /// Cancels the token of the newest review still at its user task.
    CancelReview,
    /// Moves the oldest order waiting for its completion on to the invoice.
    MoveOrder,
    /// Requeues the oldest parked message.
    Requeue,
    /// Discards the oldest parked message.
    Discard,
    /// Claims the oldest open user task as "anna" and gives it back.
    Unclaim,
    /// Triggers the oldest review waiting at its wait state.
    Trigger,
    /// Adds a token at the user task of the newest review (refused where
    /// it would duplicate a wait).
    AddToken,
    /// Locks a hand-over job and fails it with no retries left: an incident.
    FailHandOver,
    /// Retries the oldest incident.
    RetryIncident,
    /// Offers `betrag` k·60 to the conditional start events: a
    /// clarification starts above 100.
    Conditions(u8),
    /// Locks a clarification job and throws BPMN error `FEHLT`: the
    /// boundary event catches it.
    ThrowError,
    /// Locks a clarification job and completes it: its ad-hoc subprocess
    /// opens.
    FinishClarify,
    /// Activates `notiz` in (true) or completes (false) the oldest open
    /// ad-hoc subprocess.
    AdHoc(bool),
    /// Claims the oldest open user task as "anna" and assigns it to "ben".
    AssignTask,
    /// Correlates a completion of `A-k` synchronously with id `cor-m`
    /// (rejected, recording nothing, when nobody waits).
    Correlate(u8, u16),
    /// Imports three completions at once (`postfach import`: concurrent
    /// publishes) for `A-k` … `A-(k+2)`, ids `imp-m-0` … `imp-m-2`.
    Import(u8, u16),
    /// Parks an undecodable payload with id `bad-m`.
    Malformed(u16),
    /// Locks a hand-over fetching only `auftragId` and extends its lease.
    ExtendHandOver,
    /// Marks the pending events about parked messages as published.
    EventsSent,
    /// One batch of retention.
    Cleanup,
    /// Broadcasts signal `Freigabe` without an id: every review waiting for
    /// it goes on.
    Broadcast,
}

pub(super) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6).prop_map(Op::Start),
        4 => (0u8..6, 0u16..40).prop_map(|(k, m)| Op::Publish(k, m)),
        3 => Just(Op::HandOver),
        1 => Just(Op::Tick),
        1 => Just(Op::Deploy),
        2 => (0u8..5).prop_map(Op::Review),
        2 => Just(Op::CompleteTask),
        2 => (0u8..4).prop_map(Op::Signal),
        1 => Just(Op::CancelReview),
        2 => Just(Op::MoveOrder),
        2 => Just(Op::Requeue),
        2 => Just(Op::Discard),
        1 => Just(Op::Unclaim),
        2 => Just(Op::Trigger),
        1 => Just(Op::AddToken),
        1 => Just(Op::FailHandOver),
        1 => Just(Op::RetryIncident),
        2 => (0u8..5).prop_map(Op::Conditions),
        1 => Just(Op::ThrowError),
        2 => Just(Op::FinishClarify),
        2 => any::<bool>().prop_map(Op::AdHoc),
        1 => Just(Op::AssignTask),
        1 => (0u8..6, 0u16..40).prop_map(|(k, m)| Op::Correlate(k, m)),
        1 => (0u8..4, 0u16..10).prop_map(|(k, m)| Op::Import(k, m)),
        1 => (0u16..5).prop_map(Op::Malformed),
        1 => Just(Op::ExtendHandOver),
        1 => Just(Op::EventsSent),
        1 => Just(Op::Cleanup),
        1 => Just(Op::Broadcast),
    ]
}

/// What a workload was answered with.
#[derive(Debug, Default)]
pub(super) struct Answered {
    /// How many calls were answered `Ok`.
    pub(super) calls: usize,
    pub(super) started: Vec<u64>,
    pub(super) published: Vec<(String, Delivery)>,
    pub(super) completed_jobs: Vec<u64>,
    /// User tasks completed.
    pub(super) tasks: Vec<u64>,
    /// Signal ids with the number of catches the first broadcast reached.
    pub(super) signals: Vec<(String, usize)>,
    /// Tokens cancelled (instance, token).
    pub(super) cancelled: Vec<(u64, u64)>,
    /// Orders whose token was moved on from `warteAufAbschluss`.
    pub(super) moved: Vec<u64>,
    /// Parked messages requeued, with what the requeue answered.
    pub(super) requeued: Vec<(String, Delivery)>,
    /// Parked messages discarded.
    pub(super) discarded: Vec<String>,
    /// Per user task, what was last done to it (claimed, unclaimed,
    /// completed).
    pub(super) task_last: BTreeMap<u64, &'static str>,
    /// Reviews triggered on from their wait state.
    pub(super) triggered: Vec<u64>,
    /// Instances a token was added to.
    pub(super) added: Vec<u64>,
    /// Per job, what was last done to it (failed into an incident,
    /// retried, completed, thrown, extended).
    pub(super) job_last: BTreeMap<u64, &'static str>,
    /// Jobs whose lease was extended, with the lease's end answered.
    pub(super) extended: BTreeMap<u64, crate::Millis>,
    /// Clarifications whose BPMN error the boundary event caught.
    pub(super) caught: Vec<u64>,
    /// Ad-hoc subprocesses: (instance, the element activated, or `ke` where
    /// the completed subprocess went on to).
    pub(super) ad_hoc: Vec<(u64, &'static str)>,
    /// Undecodable payloads parked.
    pub(super) malformed: Vec<String>,
    /// Events about parked messages marked as published.
    pub(super) events_sent: Vec<u64>,
    /// Reviews that waited for the signal when a broadcast was answered.
    pub(super) released: Vec<u64>,
}

pub(super) fn options(checkpoint_often: bool) -> Options {
    Options {
        clock: ManualClock::new(1_767_225_600_000),
        checkpoint_every: if checkpoint_often {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::from_secs(3600)
        },
        parked_events: Some(Some(crate::store::ParkedEvents { payload: false })),
        ..Options::default()
    }
}

pub(super) fn keys() -> BTreeMap<String, String> {
    [(MESSAGE.to_string(), "auftragId".to_string())].into()
}

/// Deploys the reference process, the review and its decision.
pub(super) async fn deploy_all(pf: &Postfach) -> Result<(), ()> {
    pf.deploy("auftrag.bpmn", REFERENCE, keys())
        .await
        .map_err(|_| ())?;
    // without FEEL a decision file is refused: the review's business rule
    // task then stops at an incident, which is recorded state too
    #[cfg(feature = "feel")]
    pf.deploy("stufe.dmn", STUFE, BTreeMap::new())
        .await
        .map_err(|_| ())?;
    pf.deploy("pruefung.bpmn", REVIEW, BTreeMap::new())
        .await
        .map_err(|_| ())?;
    pf.deploy("klaerung.bpmn", CLARIFY, BTreeMap::new())
        .await
        .map_err(|_| ())?;
    Ok(())
}

/// A call's answer: `Ok(Some)` answered, `Ok(None)` refused by the engine
/// (nothing changed: the workload goes on), `Err` the power is gone.
fn answer<T>(r: Result<T, crate::Error>) -> Result<Option<T>, ()> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(crate::Error::Engine(_)) => Ok(None),
        Err(_) => Err(()),
    }
}

/// [`answer`] for a call about `key` in `last` (a task's or job's last
/// answered action): when the power goes during the call, it may or may not
/// have taken effect, so nothing is claimed about `key` any more.
fn answer_about<T>(
    r: Result<T, crate::Error>,
    last: &mut BTreeMap<u64, &'static str>,
    key: u64,
) -> Result<Option<T>, ()> {
    answer(r).inspect_err(|_| {
        last.remove(&key);
    })
}

/// Claims the oldest open user task as "anna" (an answered call, recorded);
/// `None` when there is none or the engine refused.
async fn claim_oldest_task(pf: &Postfach, got: &mut Answered) -> Result<Option<u64>, ()> {
    let open = pf
        .reader()
        .map_err(|_| ())?
        .tasks(&crate::ops::TaskFilter::default())
        .map_err(|_| ())?;
    let Some(task) = open.first().and_then(|t| t.task.parse::<u64>().ok()) else {
        return Ok(None);
    };
    if answer_about(pf.claim_task(task, "anna").await, &mut got.task_last, task)?.is_none() {
        return Ok(None);
    }
    got.calls += 1;
    got.task_last.insert(task, "claimed");
    Ok(Some(task))
}

/// Runs `op` against `pf`, adding what it was answered to `got`; `Err`
/// once a call fails (the power is gone).
pub(super) async fn apply(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<(), ()> {
    let answered = match op {
        Op::Start(_)
        | Op::Publish(..)
        | Op::HandOver
        | Op::Tick
        | Op::Deploy
        | Op::MoveOrder
        | Op::FailHandOver
        | Op::RetryIncident => apply_orders(pf, op, got).await?,
        Op::Review(_)
        | Op::CompleteTask
        | Op::Unclaim
        | Op::Trigger
        | Op::AddToken
        | Op::Signal(_)
        | Op::CancelReview => apply_reviews(pf, op, got).await?,
        Op::Requeue | Op::Discard => apply_parked(pf, matches!(op, Op::Requeue), got).await?,
        Op::Conditions(_)
        | Op::ThrowError
        | Op::FinishClarify
        | Op::AdHoc(_)
        | Op::AssignTask
        | Op::Broadcast
        | Op::ExtendHandOver => apply_work(pf, op, got).await?,
        Op::Correlate(..) | Op::Import(..) | Op::Malformed(_) | Op::EventsSent | Op::Cleanup => {
            apply_messages(pf, op, got).await?
        }
    };
    got.calls += usize::from(answered);
    Ok(())
}

/// Runs `op` on the orders of the reference process: starts, publishes,
/// hand-overs, ticks, deploys, token moves, failed and retried jobs;
/// `Ok(false)` when there was nothing to do it to or the engine refused it
/// (nothing changed), `Err` once the power is gone.
async fn apply_orders(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<bool, ()> {
    let reader = || pf.reader().map_err(|_| ());
    match op {
        Op::Start(k) => {
            let vars = crate::model::vars([("auftragId", format!("A-{k}").into())]);
            let id = pf
                .start("auftrag-ausfuehrung", vars, None)
                .await
                .map_err(|_| ())?;
            got.started.push(id);
        }
        Op::Publish(k, m) => {
            let id = format!("evt-{m}");
            let d = pf
                .publish(Publish {
                    name: MESSAGE.into(),
                    key: format!("A-{k}"),
                    message_id: Some(id.clone()),
                    ..Default::default()
                })
                .await
                .map_err(|_| ())?;
            got.published.push((id, d));
        }
        Op::HandOver => {
            pf.run_continuations(100).await.map_err(|_| ())?;
            let jobs = pf
                .lock_jobs(HAND_OVER, 100, "provider", 60_000)
                .await
                .map_err(|_| ())?;
            for j in jobs {
                let done = pf
                    .complete_job(j.task.job, Some(j.lease_token), crate::model::Vars::new())
                    .await;
                if answer_about(done, &mut got.job_last, j.task.job)?.is_none() {
                    continue;
                }
                got.completed_jobs.push(j.task.job);
                got.job_last.insert(j.task.job, "completed");
            }
        }
        Op::Tick => pf.tick().await.map_err(|_| ())?,
        Op::Deploy => deploy_all(pf).await?,
        Op::FailHandOver => {
            pf.run_continuations(100).await.map_err(|_| ())?;
            let jobs = pf
                .lock_jobs(HAND_OVER, 1, "provider", 60_000)
                .await
                .map_err(|_| ())?;
            let Some(j) = jobs.first() else {
                return Ok(false);
            };
            let failed = pf
                .fail_job_with(
                    j.task.job,
                    Some(j.lease_token),
                    "drawn failure",
                    Some(0),
                    None,
                )
                .await;
            if answer_about(failed, &mut got.job_last, j.task.job)?.is_none() {
                return Ok(false);
            }
            got.job_last.insert(j.task.job, "failed");
        }
        Op::RetryIncident => {
            let incidents = reader()?.jobs(true).map_err(|_| ())?;
            let Some(job) = incidents.first().and_then(|j| j.job.parse::<u64>().ok()) else {
                return Ok(false);
            };
            if answer_about(pf.retry_job(job).await, &mut got.job_last, job)?.is_none() {
                return Ok(false);
            }
            got.job_last.insert(job, "retried");
        }
        Op::MoveOrder => {
            let filter = crate::ops::InstanceFilter {
                waiting_at: Some("warteAufAbschluss".into()),
                ..Default::default()
            };
            let found = reader()?.instances(&filter).map_err(|_| ())?;
            let Some(v) = found.first() else {
                return Ok(false);
            };
            let Ok(id) = v.instance.parse::<u64>() else {
                return Ok(false);
            };
            let Some(t) = v.tokens.iter().find(|t| t.element == "warteAufAbschluss") else {
                return Ok(false);
            };
            pf.move_token(id, t.token, "rechnungStellen", false)
                .await
                .map_err(|_| ())?;
            got.moved.push(id);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Runs `op` on the reviews: starts, user tasks, wait states, added and
/// cancelled tokens, signals; `Ok(false)` when there was nothing to do it to
/// or the engine refused it (nothing changed), `Err` once the power is gone.
async fn apply_reviews(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<bool, ()> {
    let reader = || pf.reader().map_err(|_| ());
    match op {
        Op::Review(k) => {
            let vars = crate::model::vars([("betrag", (u64::from(*k) * 40).into())]);
            let id = pf.start("pruefung", vars, None).await.map_err(|_| ())?;
            got.started.push(id);
        }
        Op::CompleteTask => {
            let Some(task) = claim_oldest_task(pf, got).await? else {
                return Ok(false);
            };
            let done = pf
                .complete_task(task, "anna", crate::model::Vars::new())
                .await;
            if answer_about(done, &mut got.task_last, task)?.is_none() {
                return Ok(false);
            }
            got.tasks.push(task);
            got.task_last.insert(task, "completed");
        }
        Op::Unclaim => {
            let Some(task) = claim_oldest_task(pf, got).await? else {
                return Ok(false);
            };
            if answer_about(
                pf.unclaim_task(task, "anna").await,
                &mut got.task_last,
                task,
            )?
            .is_none()
            {
                return Ok(false);
            }
            got.task_last.insert(task, "unclaimed");
        }
        Op::Trigger => {
            let filter = crate::ops::InstanceFilter {
                waiting_at: Some("bestaetigen".into()),
                ..Default::default()
            };
            let found = reader()?.instances(&filter).map_err(|_| ())?;
            let Some((id, token)) = found.first().and_then(|v| {
                let t = v.tokens.iter().find(|t| t.element == "bestaetigen")?;
                Some((v.instance.parse::<u64>().ok()?, t.token))
            }) else {
                return Ok(false);
            };
            if answer(pf.trigger(id, token, crate::model::Vars::new()).await)?.is_none() {
                return Ok(false);
            }
            got.triggered.push(id);
        }
        Op::AddToken => {
            let filter = crate::ops::InstanceFilter {
                process: Some("pruefung".into()),
                state: Some("active".into()),
                ..Default::default()
            };
            let found = reader()?.instances(&filter).map_err(|_| ())?;
            let Some(id) = found.last().and_then(|v| v.instance.parse::<u64>().ok()) else {
                return Ok(false);
            };
            if answer(pf.add_token(id, "pruefen", false).await)?.is_none() {
                return Ok(false);
            }
            got.added.push(id);
        }
        Op::Signal(n) => {
            let id = format!("sig-{n}");
            let reached = pf
                .signal_once(&id, "Freigabe", crate::model::Vars::new())
                .await
                .map_err(|_| ())?;
            if !got.signals.iter().any(|(s, _)| *s == id) {
                got.signals.push((id, reached));
            }
        }
        Op::CancelReview => {
            let filter = crate::ops::InstanceFilter {
                waiting_at: Some("pruefen".into()),
                ..Default::default()
            };
            let found = reader()?.instances(&filter).map_err(|_| ())?;
            let Some(v) = found.last() else {
                return Ok(false);
            };
            let (Ok(id), Some(t)) = (v.instance.parse::<u64>(), v.tokens.first()) else {
                return Ok(false);
            };
            if answer(pf.cancel_token(id, t.token).await)?.is_none() {
                return Ok(false);
            }
            got.cancelled.push((id, t.token));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Requeues (`requeue`: the oldest that is not malformed) or discards the
/// oldest parked message; `Ok(false)`
/// when there is none or the engine refused, `Err` once the power is gone.
async fn apply_parked(pf: &Postfach, requeue: bool, got: &mut Answered) -> Result<bool, ()> {
    let filter = crate::ops::MessageFilter {
        parked: true,
        ..Default::default()
    };
    let parked = pf
        .reader()
        .map_err(|_| ())?
        .messages(&filter)
        .map_err(|_| ())?;
    // an undecodable payload can only be discarded
    let Some(id) = parked
        .iter()
        .find(|m| !requeue || m.reason != Some("malformed"))
        .map(|m| m.message_id.clone())
    else {
        return Ok(false);
    };
    if requeue {
        let Some(d) = answer(pf.requeue(&id).await)? else {
            return Ok(false);
        };
        got.requeued.push((id, d));
    } else {
        if answer(pf.discard(&id, "power-loss test", "drawn").await)?.is_none() {
            return Ok(false);
        }
        got.discarded.push(id);
    }
    Ok(true)
}

/// The oldest instance waiting at `element`, with its token there.
fn waiting_at(pf: &Postfach, element: &str) -> Result<Option<(u64, u64)>, ()> {
    let filter = crate::ops::InstanceFilter {
        waiting_at: Some(element.into()),
        ..Default::default()
    };
    let found = pf
        .reader()
        .map_err(|_| ())?
        .instances(&filter)
        .map_err(|_| ())?;
    Ok(found.first().and_then(|v| {
        let t = v.tokens.iter().find(|t| t.element == element)?;
        Some((v.instance.parse::<u64>().ok()?, t.token))
    }))
}

/// Runs `op` on clarifications, user task assignment and leases:
/// conditional starts, BPMN errors, ad-hoc activations; `Ok(false)` when
/// there was nothing to do it to or the engine refused it, `Err` once the
/// power is gone.
async fn apply_work(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<bool, ()> {
    match op {
        Op::Conditions(k) => {
            let vars = crate::model::vars([("betrag", (u64::from(*k) * 60).into())]);
            let Some(started) = answer(pf.start_by_conditions(Some("klaerung"), vars).await)?
            else {
                return Ok(false);
            };
            got.started.extend(started);
        }
        Op::ThrowError | Op::FinishClarify => {
            let jobs = pf
                .lock_jobs(CLARIFY_TASK, 1, "clerk", 60_000)
                .await
                .map_err(|_| ())?;
            let Some(j) = jobs.first() else {
                return Ok(false);
            };
            let (job, lease) = (j.task.job, Some(j.lease_token));
            if matches!(op, Op::ThrowError) {
                let thrown = pf
                    .throw_error(job, lease, "FEHLT", "drawn", crate::model::Vars::new())
                    .await;
                if answer_about(thrown, &mut got.job_last, job)?.is_none() {
                    return Ok(false);
                }
                got.job_last.insert(job, "thrown");
                got.caught.push(j.task.instance);
            } else {
                let done = pf.complete_job(job, lease, crate::model::Vars::new()).await;
                if answer_about(done, &mut got.job_last, job)?.is_none() {
                    return Ok(false);
                }
                got.completed_jobs.push(job);
                got.job_last.insert(job, "completed");
            }
        }
        Op::AdHoc(activate) => {
            let Some((id, token)) = waiting_at(pf, "nacharbeit")? else {
                return Ok(false);
            };
            let element = activate.then_some("notiz");
            if answer(pf.ad_hoc(id, token, element).await)?.is_none() {
                return Ok(false);
            }
            got.ad_hoc.push((id, element.unwrap_or("ke")));
        }
        Op::AssignTask => {
            let Some(task) = claim_oldest_task(pf, got).await? else {
                return Ok(false);
            };
            let assigned = pf.assign_task(task, "ben", "anna").await;
            if answer_about(assigned, &mut got.task_last, task)?.is_none() {
                return Ok(false);
            }
            got.task_last.insert(task, "assigned");
        }
        Op::ExtendHandOver => {
            pf.run_continuations(100).await.map_err(|_| ())?;
            let fetch = vec!["auftragId".to_string()];
            let jobs = pf
                .lock_jobs_fetching(HAND_OVER, 1, "provider", 60_000, fetch)
                .await
                .map_err(|_| ())?;
            let Some(j) = jobs.first() else {
                return Ok(false);
            };
            let job = j.task.job;
            let until = pf.extend_lease(job, j.lease_token, 3_600_000).await;
            let Some(until) = answer_about(until, &mut got.job_last, job)? else {
                return Ok(false);
            };
            got.job_last.insert(job, "extended");
            got.extended.insert(job, until);
        }
        Op::Broadcast => {
            let filter = crate::ops::InstanceFilter {
                waiting_at: Some("freigabe".into()),
                ..Default::default()
            };
            let waiting = pf
                .reader()
                .map_err(|_| ())?
                .instances(&filter)
                .map_err(|_| ())?;
            pf.signal("Freigabe", crate::model::Vars::new())
                .await
                .map_err(|_| ())?;
            let ids = waiting
                .iter()
                .filter_map(|v| v.instance.parse::<u64>().ok());
            got.released.extend(ids);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Runs `op` on messages beside publish: synchronous correlation, an
/// import's concurrent publishes, undecodable payloads, parked-message
/// events and retention; `Ok(false)` when there was nothing to do or the
/// engine refused it, `Err` once the power is gone.
async fn apply_messages(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<bool, ()> {
    let completion = |k: u8, id: String| Publish {
        name: MESSAGE.into(),
        key: format!("A-{k}"),
        message_id: Some(id),
        ..Default::default()
    };
    match op {
        Op::Correlate(k, m) => {
            let id = format!("cor-{m}");
            // a rejection records nothing (a refusal, not the power going)
            let d = match pf.correlate(completion(*k, id.clone())).await {
                Err(crate::Error::Rejected { .. }) => None,
                r => answer(r)?,
            };
            let Some(d) = d else {
                return Ok(false);
            };
            got.published.push((id, d));
        }
        Op::Import(k, m) => {
            let ids: Vec<String> = (0..3).map(|i| format!("imp-{m}-{i}")).collect();
            let (a, b, c) = tokio::join!(
                pf.publish(completion(*k, ids[0].clone())),
                pf.publish(completion(k + 1, ids[1].clone())),
                pf.publish(completion(k + 2, ids[2].clone())),
            );
            let mut gone = false;
            for (id, d) in ids.into_iter().zip([a, b, c]) {
                match d {
                    Ok(d) => got.published.push((id, d)),
                    Err(_) => gone = true,
                }
            }
            if gone {
                return Err(());
            }
        }
        Op::Malformed(m) => {
            let id = format!("bad-{m}");
            let parked = pf
                .park_malformed(crate::Malformed {
                    name: MESSAGE.into(),
                    message_id: id.clone(),
                    raw: b"{not json".to_vec(),
                    attributes: vec![("eventId".into(), id.clone())],
                    error: "expected a JSON object".into(),
                })
                .await;
            if answer(parked)?.is_none() {
                return Ok(false);
            }
            got.malformed.push(id);
        }
        Op::EventsSent => {
            let (events, _) = pf
                .reader()
                .map_err(|_| ())?
                .parked_events(5)
                .map_err(|_| ())?;
            let ids: Vec<u64> = events.iter().map(|e| e.id).collect();
            if ids.is_empty() || answer(pf.parked_events_sent(ids.clone()).await)?.is_none() {
                return Ok(false);
            }
            got.events_sent.extend(ids);
        }
        Op::Cleanup => {
            pf.cleanup(100).await.map_err(|_| ())?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Runs `ops` on `disk` until the first error (the power is gone then: the
/// process answers nothing more), then closes; returns what was answered
/// `Ok` and how many disk operations were done before the close.
pub(super) async fn workload(disk: &Disk, checkpoint_often: bool, ops: &[Op]) -> (Answered, u64) {
    let mut got = Answered::default();
    let Ok(pf) = Postfach::open_sim(disk, options(checkpoint_often)) else {
        return (got, disk.ops());
    };
    let run = async {
        deploy_all(&pf).await?;
        got.calls += 1;
        for op in ops {
            apply(&pf, op, &mut got).await?;
        }
        Ok::<(), ()>(())
    };
    let _ = run.await;
    let before_close = disk.ops();
    pf.close();
    (got, before_close)
}
