//! Power-loss tests, in the manner of SQLite's crash-test VFS: the whole
//! stack — engine, commit path, write-ahead log and redb — runs on the
//! simulated disk of [`crate::disk::sim`], which keeps only what was synced.
//! Random workloads lose the power at a random write or sync: deploys of a
//! process and a decision, starts, hand-overs, completions published early,
//! on time and late, ticks, user tasks completed, signals broadcast once per
//! id, business rule tasks deciding, repairs (a token moved on, a token
//! cancelled), parked messages requeued and discarded — with and without
//! checkpoints. The files are then taken as they would be found — what was
//! synced and, of what was not, nothing, an in-order prefix with its last
//! write torn at a sector, or any sectors of any unsynced writes (a disk's
//! write-back keeps a later page without an earlier one) — and opened again.
//!
//! Invariant proven: every call that was answered `Ok` survives with its
//! outcome (an instance started, a message stored with the outcome it was
//! answered with and recognised as a duplicate when it comes again, a job
//! or user task completed stays completed, a signal's id is remembered with
//! what it reached, a repair stays made, a requeued or discarded message
//! stays so), and the store's consistency check holds. The run counts the
//! calls answered before the cuts, so that cuts which fall before anything
//! is answered cannot make it pass empty. The tests at the end show that the
//! check has teeth: without the log's fsync, redb's sync or the directory
//! sync, a named answered call is lost.
//!
//! `cargo test` runs 24 cases; `benches/power_loss.sh` runs thousands.

use crate::disk::sim::Disk;
use crate::{Delivery, ManualClock, Options, Outcome, Postfach, Publish};
use proptest::prelude::*;
use std::collections::BTreeMap;

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
const MESSAGE: &str = "AuftragAbgeschlossen";
const HAND_OVER: &str = "auftragUebergeben";

/// A review: a user task, a signal catch, a business rule task.
const REVIEW: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <bpmn:process id="pruefung" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <bpmn:userTask id="pruefen"/>
    <bpmn:sequenceFlow id="f2" sourceRef="pruefen" targetRef="freigabe"/>
    <bpmn:intermediateCatchEvent id="freigabe"><bpmn:signalEventDefinition signalRef="sig"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f3" sourceRef="freigabe" targetRef="stufe"/>
    <bpmn:businessRuleTask id="stufe"><bpmn:extensionElements><zeebe:calledDecision decisionId="stufe" resultVariable="stufe"/></bpmn:extensionElements></bpmn:businessRuleTask>
    <bpmn:sequenceFlow id="f4" sourceRef="stufe" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
  <bpmn:signal id="sig" name="Freigabe"/>
</bpmn:definitions>"#;

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
enum Op {
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
}

fn op() -> impl Strategy<Value = Op> {
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
    ]
}

/// What a workload was answered with.
#[derive(Debug, Default)]
struct Answered {
    /// How many calls were answered `Ok`.
    calls: usize,
    started: Vec<u64>,
    published: Vec<(String, Delivery)>,
    completed_jobs: Vec<u64>,
    /// User tasks completed.
    tasks: Vec<u64>,
    /// Signal ids with the number of catches the first broadcast reached.
    signals: Vec<(String, usize)>,
    /// Instances whose last token was cancelled.
    cancelled: Vec<u64>,
    /// Orders whose token was moved on from `warteAufAbschluss`.
    moved: Vec<u64>,
    /// Parked messages requeued, with what the requeue answered.
    requeued: Vec<(String, Delivery)>,
    /// Parked messages discarded.
    discarded: Vec<String>,
}

fn options(checkpoint_often: bool) -> Options {
    Options {
        clock: ManualClock::new(1_767_225_600_000),
        checkpoint_every: if checkpoint_often {
            std::time::Duration::ZERO
        } else {
            std::time::Duration::from_secs(3600)
        },
        ..Options::default()
    }
}

fn keys() -> BTreeMap<String, String> {
    [(MESSAGE.to_string(), "auftragId".to_string())].into()
}

/// Deploys the reference process, the review and its decision.
async fn deploy_all(pf: &Postfach) -> Result<(), ()> {
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
    Ok(())
}

/// Runs `op` against `pf`, adding what it was answered to `got`; `Err`
/// once a call fails (the power is gone).
async fn apply(pf: &Postfach, op: &Op, got: &mut Answered) -> Result<(), ()> {
    let reader = || pf.reader().map_err(|_| ());
    match op {
        Op::Start(k) => {
            let vars = crate::vars([("auftragId", format!("A-{k}").into())]);
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
                pf.complete_job(j.task.job, Some(j.lease_token), crate::Vars::new())
                    .await
                    .map_err(|_| ())?;
                got.completed_jobs.push(j.task.job);
            }
        }
        Op::Tick => pf.tick().await.map_err(|_| ())?,
        Op::Deploy => deploy_all(pf).await?,
        Op::Review(k) => {
            let vars = crate::vars([("betrag", (u64::from(*k) * 40).into())]);
            let id = pf.start("pruefung", vars, None).await.map_err(|_| ())?;
            got.started.push(id);
        }
        Op::CompleteTask => {
            let open = reader()?
                .tasks(&crate::ops::TaskFilter::default())
                .map_err(|_| ())?;
            let Some(task) = open.first().and_then(|t| t.task.parse::<u64>().ok()) else {
                return Ok(());
            };
            pf.claim_task(task, "anna").await.map_err(|_| ())?;
            got.calls += 1;
            pf.complete_task(task, "anna", crate::Vars::new())
                .await
                .map_err(|_| ())?;
            got.tasks.push(task);
        }
        Op::Signal(n) => {
            let id = format!("sig-{n}");
            let reached = pf
                .signal_once(&id, "Freigabe", crate::Vars::new())
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
                return Ok(());
            };
            let (Ok(id), Some(t)) = (v.instance.parse::<u64>(), v.tokens.first()) else {
                return Ok(());
            };
            pf.cancel_token(id, t.token).await.map_err(|_| ())?;
            got.cancelled.push(id);
        }
        Op::MoveOrder => {
            let filter = crate::ops::InstanceFilter {
                waiting_at: Some("warteAufAbschluss".into()),
                ..Default::default()
            };
            let found = reader()?.instances(&filter).map_err(|_| ())?;
            let Some(v) = found.first() else {
                return Ok(());
            };
            let Ok(id) = v.instance.parse::<u64>() else {
                return Ok(());
            };
            let Some(t) = v.tokens.iter().find(|t| t.element == "warteAufAbschluss") else {
                return Ok(());
            };
            pf.move_token(id, t.token, "rechnungStellen", false)
                .await
                .map_err(|_| ())?;
            got.moved.push(id);
        }
        Op::Requeue | Op::Discard => {
            let filter = crate::ops::MessageFilter {
                parked: true,
                ..Default::default()
            };
            let parked = reader()?.messages(&filter).map_err(|_| ())?;
            let Some(m) = parked.first() else {
                return Ok(());
            };
            let id = m.message_id.clone();
            if matches!(op, Op::Requeue) {
                let d = pf.requeue(&id).await.map_err(|_| ())?;
                got.requeued.push((id, d));
            } else {
                pf.discard(&id, "power-loss test", "drawn")
                    .await
                    .map_err(|_| ())?;
                got.discarded.push(id);
            }
        }
    }
    got.calls += 1;
    Ok(())
}

/// Runs `ops` on `disk` until the first error (the power is gone then: the
/// process answers nothing more), then closes; returns what was answered
/// `Ok` and how many disk operations were done before the close.
async fn workload(disk: &Disk, checkpoint_often: bool, ops: &[Op]) -> (Answered, u64) {
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

/// Opens what survived and checks every answer against it; the problems found.
async fn check(
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
    let open = r
        .tasks(&crate::ops::TaskFilter::default())
        .unwrap_or_default();
    for task in &got.tasks {
        if open.iter().any(|t| t.task == task.to_string()) {
            problems.push(format!("completed user task {task} is open again"));
        }
    }
    for id in &got.cancelled {
        let state = r.instance(*id).ok().flatten().map(|v| v.state);
        if state != Some("cancelled") {
            problems.push(format!("cancelled instance {id} is {state:?}"));
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
    for (id, _) in &got.requeued {
        let stored = r.message(id).unwrap_or_default();
        if !stored.iter().any(|m| m.requeues > 0 || m.state != "parked") {
            problems.push(format!("requeued message {id} is parked as before"));
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
    drop(r);
    // a signal's id is remembered with what its first broadcast reached
    for (id, reached) in &got.signals {
        let again = pf.signal_once(id, "Freigabe", crate::Vars::new()).await;
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

/// When the power goes.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// At this fraction of the run's disk operations (the close included).
    At(f64),
    /// Right after the last answered call, before the close.
    BeforeClose,
}

/// What becomes of the writes that were not synced when the power went.
#[derive(Debug, Clone, Copy)]
enum Unsynced {
    /// All lost.
    Lost,
    /// Of each file an in-order prefix kept, its last write torn at a
    /// sector (the seed draws how much).
    Prefix(u64),
    /// Any sectors of any writes kept, in no order (the seed draws which).
    Scattered(u64),
}

fn unsynced() -> impl Strategy<Value = Unsynced> {
    prop_oneof![
        Just(Unsynced::Lost),
        any::<u64>().prop_map(Unsynced::Prefix),
        any::<u64>().prop_map(Unsynced::Scattered),
    ]
}

/// One case: a dry run counts the disk operations, the real run loses the
/// power where `cut` says, the check runs on what was left. Returns the
/// problems found and how many calls were answered before the cut.
fn case(
    ops: &[Op],
    checkpoint_often: bool,
    cut: Cut,
    unsynced: Unsynced,
    spoil: impl Fn(&Disk),
) -> (Vec<String>, usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let dry = Disk::new(None);
        spoil(&dry);
        let (_, before_close) = workload(&dry, checkpoint_often, ops).await;
        let cut_at = match cut {
            Cut::At(f) => 1 + ((dry.ops().max(1) as f64 - 1.0) * f) as u64,
            Cut::BeforeClose => before_close,
        };
        let disk = Disk::new(Some(cut_at));
        spoil(&disk);
        let (got, _) = workload(&disk, checkpoint_often, ops).await;
        let files = match unsynced {
            Unsynced::Lost => disk.after_power_cut(&BTreeMap::new()),
            Unsynced::Scattered(seed) => disk.after_power_cut_scattered(seed),
            Unsynced::Prefix(seed) => {
                let mut x = seed | 1;
                let mut next = move || {
                    // xorshift: a different prefix for each file
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let keep: BTreeMap<String, (usize, usize)> = disk
                    .pending()
                    .into_iter()
                    .map(|(name, n)| {
                        let keep = (next() % (n as u64 + 1)) as usize;
                        let torn = (next() % 9) as usize;
                        (name, (keep, torn))
                    })
                    .collect();
                disk.after_power_cut(&keep)
            }
        };
        KINDS.with(|k| {
            let mut k = k.borrow_mut();
            for (i, n) in [
                got.tasks.len(),
                got.signals.iter().filter(|(_, r)| *r > 0).count(),
                got.cancelled.len(),
                got.moved.len(),
                got.requeued.len(),
                got.discarded.len(),
            ]
            .into_iter()
            .enumerate()
            {
                k[i] += n;
            }
        });
        (check(files, checkpoint_often, &got).await, got.calls)
    })
}

thread_local! {
    /// Per kind of answered call the workload draws beyond starts, publishes
    /// and hand-overs, how many were answered on this thread: user tasks
    /// completed, signals that reached a catch, reviews cancelled, orders
    /// moved, messages requeued, messages discarded.
    static KINDS: std::cell::RefCell<[usize; 6]> = const { std::cell::RefCell::new([0; 6]) };
}

fn cases() -> u32 {
    std::env::var("POSTFACH_POWER_LOSS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// Random workloads cut at random moments, every unsynced-write fate drawn.
/// A cut that falls before the first answer checks nothing, so the run
/// counts the calls answered: at least half of the cases answered one, and
/// on average two or more a case.
#[test]
fn every_answered_call_survives_a_power_cut_at_any_moment() {
    use proptest::test_runner::{Config, TestRunner};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = cases();
    let mut runner = TestRunner::new(Config {
        cases: n,
        // the smallest failing workload's seed is kept beside the others
        source_file: Some(file!()),
        ..Config::default()
    });
    let (answered, cases_answering) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let strategy = (
        prop::collection::vec(op(), 1..30),
        any::<bool>(),
        0.0f64..1.0,
        unsynced(),
    );
    runner
        .run(&strategy, |(ops, checkpoint_often, cut, unsynced)| {
            let (problems, calls) = case(&ops, checkpoint_often, Cut::At(cut), unsynced, |_| {});
            answered.fetch_add(calls, Ordering::Relaxed);
            cases_answering.fetch_add(usize::from(calls > 0), Ordering::Relaxed);
            prop_assert!(problems.is_empty(), "{problems:#?}");
            Ok(())
        })
        .unwrap();
    // a failing run shrinks (more cases ran): the floors hold on the passing run
    let (answered, with_answers) = (answered.into_inner(), cases_answering.into_inner());
    let kinds = KINDS.with(|k| *k.borrow());
    eprintln!(
        "power loss: {n} cases, {answered} calls answered; tasks, signals reaching, cancels, moves, requeues, discards: {kinds:?}"
    );
    assert!(
        with_answers * 2 >= n as usize,
        "only {with_answers} of {n} cases answered a call before the cut"
    );
    assert!(
        answered >= 2 * n as usize,
        "{answered} calls answered in {n} cases"
    );
}

/// A workload whose answers a lost sync would take away: orders handed over
/// and their completions correlated, nothing of it checkpointed after open.
fn teeth() -> Vec<Op> {
    vec![
        Op::Start(1),
        Op::Start(2),
        Op::HandOver,
        Op::Publish(1, 1),
        Op::Publish(2, 2),
        Op::Publish(3, 3),
    ]
}

/// Whether the answered calls survive a cut after the whole workload (all
/// unsynced writes lost) with `spoil` applied to the disk.
fn survives(checkpoint_often: bool, spoil: impl Fn(&Disk)) -> Vec<String> {
    let (problems, calls) = case(
        &teeth(),
        checkpoint_often,
        Cut::BeforeClose,
        Unsynced::Lost,
        spoil,
    );
    assert_eq!(
        calls,
        1 + teeth().len(),
        "every call was answered (the deploy, then each op)"
    );
    problems
}

/// Whether `problems` name the loss of an answered call: a started order,
/// a completed hand-over or a correlated completion.
fn names_a_lost_call(problems: &[String]) -> bool {
    problems.iter().any(|p| {
        (p.starts_with("started instance ") && p.ends_with(" is gone"))
            || (p.starts_with("completed job ") && p.ends_with(" is back"))
            || (p.starts_with("message evt-") && p.contains(" answered Correlated is stored as"))
            || p.starts_with("the database does not open")
    })
}

#[test]
fn the_workload_survives_when_every_sync_is_made() {
    assert_eq!(survives(false, |_| {}), Vec::<String>::new());
    assert_eq!(survives(true, |_| {}), Vec::<String>::new());
}

#[test]
fn without_the_logs_fsync_an_answered_call_is_lost() {
    let problems = survives(false, |d| d.skip_syncs_of("postfach.redb.wal"));
    assert!(names_a_lost_call(&problems), "{problems:#?}");
}

#[test]
fn without_reds_sync_at_a_checkpoint_an_answered_call_is_lost() {
    // the log is emptied after each checkpoint: only redb holds the batches
    let problems = survives(true, |d| d.skip_syncs_of("postfach.redb"));
    assert!(names_a_lost_call(&problems), "{problems:#?}");
}

#[test]
fn without_the_directory_sync_a_new_log_is_lost_with_what_it_held() {
    let problems = survives(false, |d| d.skip_dir_syncs());
    assert!(names_a_lost_call(&problems), "{problems:#?}");
}

#[test]
fn a_cut_before_anything_was_synced_leaves_a_database_that_opens() {
    for cut in [0.0, 0.01, 0.05] {
        for unsynced in [Unsynced::Prefix(7), Unsynced::Scattered(7)] {
            assert_eq!(
                case(&teeth(), false, Cut::At(cut), unsynced, |_| {}).0,
                Vec::<String>::new()
            );
        }
    }
}

/// The engine's state is a function of its log: a FEEL expression and a DMN
/// decision that read `now()`/`today()` are evaluated again when the log is
/// replayed after a power cut, and must come to what they came to before —
/// the instant of the batch that ran them, not the clock at replay.
#[cfg(feature = "feel")]
#[test]
fn feel_and_decisions_reading_the_clock_replay_to_the_same_value() {
    const MODEL: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <bpmn:process id="stamp" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="when"/>
    <bpmn:scriptTask id="when">
      <bpmn:extensionElements><zeebe:script expression="=string(now()) + &quot; &quot; + string(day of week(today()))" resultVariable="at"/></bpmn:extensionElements>
    </bpmn:scriptTask>
    <bpmn:sequenceFlow id="f1" sourceRef="when" targetRef="day"/>
    <bpmn:businessRuleTask id="day">
      <bpmn:extensionElements><zeebe:calledDecision decisionId="weekday" resultVariable="weekday"/></bpmn:extensionElements>
    </bpmn:businessRuleTask>
    <bpmn:sequenceFlow id="f2" sourceRef="day" targetRef="route"/>
    <bpmn:exclusiveGateway id="route"/>
    <bpmn:sequenceFlow id="weekday" sourceRef="route" targetRef="book"><bpmn:conditionExpression>=not(day of week(today()) in ("Saturday", "Sunday"))</bpmn:conditionExpression></bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="weekend" sourceRef="route" targetRef="later"><bpmn:conditionExpression>=day of week(today()) in ("Saturday", "Sunday")</bpmn:conditionExpression></bpmn:sequenceFlow>
    <bpmn:receiveTask id="book"/>
    <bpmn:receiveTask id="later"/>
  </bpmn:process>
</bpmn:definitions>"#;
    const WEEKDAY: &str = r#"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/weekday" name="weekday" id="weekday-file">
  <decision name="Weekday" id="weekday">
    <decisionTable id="dt" hitPolicy="FIRST">
      <input id="i"><inputExpression typeRef="string"><text>day of week(today())</text></inputExpression></input>
      <output id="o" typeRef="string"/>
      <rule id="weekend"><inputEntry id="a"><text>"Saturday","Sunday"</text></inputEntry><outputEntry id="b"><text>"weekend"</text></outputEntry></rule>
      <rule id="workday"><inputEntry id="c"><text>-</text></inputEntry><outputEntry id="d"><text>"workday"</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let disk = Disk::new(None);
        // 2026-01-01, a Thursday; no checkpoint after open
        let pf = Postfach::open_sim(&disk, options(false)).expect("opens");
        pf.deploy("weekday.dmn", WEEKDAY, BTreeMap::new())
            .await
            .expect("deploys");
        pf.deploy("stamp.bpmn", MODEL, BTreeMap::new())
            .await
            .expect("deploys");
        let id = pf
            .start("stamp", crate::Vars::new(), None)
            .await
            .expect("starts");
        let before = pf.reader().unwrap().instance(id).unwrap().unwrap();
        assert_eq!(
            before.variables["at"], "2026-01-01T00:00:00Z Thursday",
            "{before:?}"
        );
        assert_eq!(before.variables["weekday"], "workday");
        assert_eq!(before.waiting_at, ["book"]);
        // the power goes: only the synced log holds the start
        let files = disk.after_power_cut(&BTreeMap::new());
        drop(pf);
        let disk = Disk::from_files(files, None);
        // opened again on a Saturday
        let later = Options {
            clock: ManualClock::new(1_767_225_600_000 + 2 * 86_400_000),
            ..options(false)
        };
        let pf = Postfach::open_sim(&disk, later).expect("opens after the cut");
        assert!(
            pf.recovery().replayed_batches > 0,
            "the start came from the log"
        );
        let after = pf.reader().unwrap().instance(id).unwrap().unwrap();
        assert_eq!(after.variables["at"], before.variables["at"]);
        assert_eq!(after.variables["weekday"], "workday");
        let history = |v: &crate::ops::InstanceView| {
            v.history
                .iter()
                .map(|h| h.event.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(history(&after), history(&before));
        assert_eq!(after.waiting_at, before.waiting_at);
        pf.close();
    });
}
