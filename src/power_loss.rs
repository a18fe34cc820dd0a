//! Power-loss tests, in the manner of SQLite's crash-test VFS: the whole
//! stack — engine, commit path, write-ahead log and redb — runs on the
//! simulated disk of [`crate::disk::sim`], which keeps only what was synced.
//! Random workloads (`workload.rs`) lose the power at a random write or
//! sync: deploys of a process and a decision, starts, hand-overs,
//! completions published early, on time and late, ticks, user tasks claimed,
//! given back and completed, wait states triggered, signals broadcast once
//! per id, business rule tasks deciding, repairs (tokens moved, added and
//! cancelled), jobs failed into incidents and retried, parked messages
//! requeued and discarded, conditional starts, BPMN errors caught by a
//! boundary event, ad-hoc activities activated and completed, tasks
//! assigned, leases extended with fetched variables, synchronous
//! correlations, imports' concurrent publishes, undecodable payloads,
//! parked-message events marked published, retention, broadcasts without an
//! id — every command of the
//! log but `SignalsForwarded`, which only a partition of a cluster writes
//! and which has a cut test of its own on a partitioned database (at the
//! end) — with and without checkpoints. The files are then taken as they would be found — what was
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
//! A backup cut by the power (`during_backup.rs`) leaves the database
//! whole and the backup either complete or refused as partial; a batch cut
//! by the power (`during_batch.rs`) resumes and does every item once; a
//! slot move cut on either side (`during_move.rs`) resumes and leaves
//! everything on one partition; a batch that fails to apply after its frame
//! was logged (`aborted_batch.rs`) is never replayed.
//!
//! `cargo test` runs 24 cases; `benches/power_loss.sh` runs thousands.

use crate::disk::sim::Disk;
use crate::{Options, Postfach};
use check::check;
use proptest::prelude::*;
use std::collections::BTreeMap;
use workload::{Op, op, options, workload};

mod aborted_batch;
mod check;
mod during_backup;
mod during_batch;
mod during_move;
mod workload;

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

/// A runtime on the test's thread: one case runs its calls in order.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
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
    let rt = runtime();
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
                got.task_last
                    .values()
                    .filter(|l| **l == "unclaimed")
                    .count(),
                got.triggered.len(),
                got.added.len(),
                got.job_last.values().filter(|l| **l != "completed").count(),
                got.caught.len(),
                got.ad_hoc.len(),
                got.task_last.values().filter(|l| **l == "assigned").count(),
                got.extended.len(),
                got.malformed.len(),
                got.events_sent.len(),
                got.released.len(),
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
    /// moved, messages requeued, messages discarded, tasks given back, wait
    /// states triggered, tokens added, jobs failed or retried last, BPMN
    /// errors caught, ad-hoc activations and completions, tasks assigned,
    /// leases extended, undecodable payloads parked, parked-message events
    /// marked published, reviews released by a broadcast.
    static KINDS: std::cell::RefCell<[usize; 17]> = const { std::cell::RefCell::new([0; 17]) };
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
        "power loss: {n} cases, {answered} calls answered; tasks, signals reaching, cancels, moves, requeues, discards, unclaims, triggers, added tokens, failed/retried jobs, errors caught, ad-hoc, assigned, extended, malformed, events sent, released: {kinds:?}"
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
    // the cut falls where the dry run's last answer fell; a checkpoint
    // thread's timing may move it by a write, so the last call may go
    // unanswered — the ones before it must have been
    assert!(
        calls >= teeth().len(),
        "{calls} calls answered: the deploy and the ops before the last"
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

/// Every kind of command the random workloads draw, in an order where each
/// takes effect: conditional starts, BPMN errors, ad-hoc activation and
/// completion, assignment, lease extension with fetched variables,
/// synchronous correlation, an import's concurrent publishes, undecodable
/// payloads, parked-message events, retention.
fn every_kind() -> Vec<Op> {
    vec![
        Op::Start(1),
        Op::HandOver,
        Op::Conditions(3),
        Op::Conditions(4),
        Op::Conditions(1),
        Op::ThrowError,
        Op::FinishClarify,
        Op::AdHoc(true),
        Op::AdHoc(false),
        Op::Review(1),
        Op::CompleteTask,
        Op::Trigger,
        Op::Broadcast,
        Op::Review(2),
        Op::AssignTask,
        Op::Start(2),
        Op::ExtendHandOver,
        Op::Correlate(1, 1),
        Op::Correlate(5, 2),
        Op::Import(3, 1),
        Op::Malformed(1),
        Op::Publish(1, 2),
        Op::EventsSent,
        Op::Cleanup,
    ]
}

/// The commands added to the workload take effect (each kind is answered at
/// least once, so a check of it is not vacuous) and survive a cut after the
/// last answer with every sync made.
#[test]
fn every_kind_of_command_takes_effect_and_survives() {
    let before = KINDS.with(|k| *k.borrow());
    let (problems, calls) = case(
        &every_kind(),
        false,
        Cut::BeforeClose,
        Unsynced::Lost,
        |_| {},
    );
    assert_eq!(problems, Vec::<String>::new());
    let after = KINDS.with(|k| *k.borrow());
    let names = [
        "errors caught",
        "ad-hoc",
        "assigned",
        "extended",
        "malformed",
        "events sent",
        "released",
    ];
    for (i, name) in names.iter().enumerate() {
        assert!(after[10 + i] > before[10 + i], "no {name}: {after:?}");
    }
    // the ad-hoc subprocess both activated and completed
    assert!(after[11] - before[11] >= 2, "{after:?}");
    assert!(calls >= every_kind().len(), "{calls} calls answered");
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
    let rt = runtime();
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
            .start("stamp", crate::model::Vars::new(), None)
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
            clock: crate::ManualClock::new(1_767_225_600_000 + 2 * 86_400_000),
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

/// A process that throws signal `Tarifwechsel`.
const THROWS: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <bpmn:signal id="tw" name="Tarifwechsel"/>
  <bpmn:process id="wirft" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f1" sourceRef="s" targetRef="t"/>
    <bpmn:intermediateThrowEvent id="t"><bpmn:signalEventDefinition signalRef="tw"/></bpmn:intermediateThrowEvent>
    <bpmn:sequenceFlow id="f2" sourceRef="t" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
</bpmn:definitions>"#;

/// Partition 0 of a cluster of 2, which keeps the signals its processes
/// throw until the other partition took them.
fn partition_options() -> Options {
    Options {
        partition: Some(crate::partition::Partition::new(0, 2).expect("partition 0 of 2")),
        ..options(false)
    }
}

/// Throws two signals on a partition and forgets the first as forwarded to
/// every other partition; the id of the one forgotten once that was answered,
/// and the disk operations before the close.
async fn throw_and_forward(disk: &Disk) -> (Option<String>, u64) {
    let Ok(pf) = Postfach::open_sim(disk, partition_options()) else {
        return (None, disk.ops());
    };
    let mut forgotten = None;
    let run = async {
        pf.deploy("wirft.bpmn", THROWS, BTreeMap::new())
            .await
            .map_err(|_| ())?;
        for _ in 0..2 {
            pf.start("wirft", crate::model::Vars::new(), None)
                .await
                .map_err(|_| ())?;
        }
        let kept = pf
            .reader()
            .map_err(|_| ())?
            .signals_out(10)
            .map_err(|_| ())?;
        let first = kept.first().ok_or(())?;
        pf.signals_forwarded(vec![(first.seq, false)])
            .await
            .map_err(|_| ())?;
        forgotten = Some(first.id.clone());
        Ok::<(), ()>(())
    };
    let _ = run.await;
    let before_close = disk.ops();
    pf.close();
    (forgotten, before_close)
}

/// Forgetting the signals forwarded to a cluster's other partitions is a
/// command of the log like the rest: once answered, a power cut right after
/// it (every unsynced write lost) keeps it forgotten, and the signal thrown
/// after it is still kept to be forwarded.
#[test]
fn a_signal_forwarded_to_every_partition_stays_forgotten_after_a_power_cut() {
    let rt = runtime();
    rt.block_on(async {
        let dry = Disk::new(None);
        let (_, before_close) = throw_and_forward(&dry).await;
        let disk = Disk::new(Some(before_close));
        let (forgotten, _) = throw_and_forward(&disk).await;
        let forgotten = forgotten.expect("the forgetting was answered before the cut");
        let disk = Disk::from_files(disk.after_power_cut(&BTreeMap::new()), None);
        let pf = Postfach::open_sim(&disk, partition_options()).expect("it opens");
        let kept: Vec<String> = pf
            .reader()
            .expect("a reader")
            .signals_out(10)
            .expect("the kept signals")
            .into_iter()
            .map(|s| s.id)
            .collect();
        pf.close();
        assert_eq!(kept.len(), 1, "the second signal is still kept: {kept:?}");
        assert!(
            !kept.contains(&forgotten),
            "{forgotten} came back: {kept:?}"
        );
    });
}
