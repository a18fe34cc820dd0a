//! Power-loss tests, in the manner of SQLite's crash-test VFS: the whole
//! stack — engine, commit path, write-ahead log and redb — runs on the
//! simulated disk of [`crate::disk::sim`], which keeps only what was synced.
//! Random workloads (deploys, starts, hand-overs, completions published early,
//! on time and late, ticks, with and without checkpoints) lose the power at a
//! random write or sync; the files are then taken as they would be found —
//! what was synced, and optionally a prefix of what was not, its last write
//! torn at a sector — and opened again.
//!
//! Invariant proven: every call that was answered `Ok` survives with its
//! outcome (an instance started, a message stored with the outcome it was
//! answered with and recognised as a duplicate when it comes again, a job
//! completed stays completed), and the store's consistency check holds. The
//! tests at the end show that the check has teeth: without the log's fsync,
//! redb's sync or the directory sync, an answered call is lost.
//!
//! `cargo test` runs 24 cases; `benches/power_loss.sh` runs thousands.

use crate::disk::sim::Disk;
use crate::{Delivery, ManualClock, Options, Outcome, Postfach, Publish};
use proptest::prelude::*;
use std::collections::BTreeMap;

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
const MESSAGE: &str = "AuftragAbgeschlossen";
const HAND_OVER: &str = "auftragUebergeben";

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
    /// Deploys the model again (unchanged: idempotent).
    Deploy,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6).prop_map(Op::Start),
        4 => (0u8..6, 0u16..40).prop_map(|(k, m)| Op::Publish(k, m)),
        3 => Just(Op::HandOver),
        1 => Just(Op::Tick),
        1 => Just(Op::Deploy),
    ]
}

/// What a workload was answered with.
#[derive(Debug, Default)]
struct Answered {
    started: Vec<u64>,
    published: Vec<(String, Delivery)>,
    completed_jobs: Vec<u64>,
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

/// Runs `ops` on `disk` until the first error (the power is gone then: the
/// process answers nothing more), then closes; returns what was answered
/// `Ok` and how many disk operations were done before the close.
async fn workload(disk: &Disk, checkpoint_often: bool, ops: &[Op]) -> (Answered, u64) {
    let mut got = Answered::default();
    let Ok(pf) = Postfach::open_sim(disk, options(checkpoint_often)) else {
        return (got, disk.ops());
    };
    let run = async {
        pf.deploy("auftrag.bpmn", REFERENCE, keys())
            .await
            .map_err(|_| ())?;
        for op in ops {
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
                Op::Deploy => {
                    pf.deploy("auftrag.bpmn", REFERENCE, keys())
                        .await
                        .map_err(|_| ())?;
                }
            }
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
            Outcome::Parked => stored.iter().any(|m| m.state == "parked"),
        };
        if !kept {
            problems.push(format!(
                "message {id} answered {:?} is stored as {:?}",
                d.outcome,
                stored.iter().map(|m| m.state).collect::<Vec<_>>()
            ));
        }
    }
    drop(r);
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

/// One case: a dry run counts the disk operations, the real run loses the
/// power where `cut` says, the check runs on what was left.
fn case(
    ops: &[Op],
    checkpoint_often: bool,
    cut: Cut,
    keep_unsynced: Option<u64>,
    spoil: impl Fn(&Disk),
) -> Vec<String> {
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
        let keep: BTreeMap<String, (usize, usize)> = match keep_unsynced {
            None => BTreeMap::new(),
            Some(seed) => {
                let mut x = seed | 1;
                let mut next = move || {
                    // xorshift: a different prefix for each file
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                disk.pending()
                    .into_iter()
                    .map(|(name, n)| {
                        let keep = (next() % (n as u64 + 1)) as usize;
                        let torn = (next() % 9) as usize;
                        (name, (keep, torn))
                    })
                    .collect()
            }
        };
        let files = disk.after_power_cut(&keep);
        check(files, checkpoint_often, &got).await
    })
}

fn cases() -> u32 {
    std::env::var("POSTFACH_POWER_LOSS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_answered_call_survives_a_power_cut_at_any_moment(
        ops in prop::collection::vec(op(), 1..30),
        checkpoint_often in any::<bool>(),
        cut in 0.0f64..1.0,
        keep_unsynced in prop::option::of(any::<u64>()),
    ) {
        let problems = case(&ops, checkpoint_often, Cut::At(cut), keep_unsynced, |_| {});
        prop_assert!(problems.is_empty(), "{problems:#?}");
    }
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
    case(&teeth(), checkpoint_often, Cut::BeforeClose, None, spoil)
}

#[test]
fn the_workload_survives_when_every_sync_is_made() {
    assert_eq!(survives(false, |_| {}), Vec::<String>::new());
    assert_eq!(survives(true, |_| {}), Vec::<String>::new());
}

#[test]
fn without_the_logs_fsync_an_answered_call_is_lost() {
    let problems = survives(false, |d| d.skip_syncs_of("postfach.redb.wal"));
    assert!(!problems.is_empty(), "the check must see the loss");
}

#[test]
fn without_reds_sync_at_a_checkpoint_an_answered_call_is_lost() {
    // the log is emptied after each checkpoint: only redb holds the batches
    let problems = survives(true, |d| d.skip_syncs_of("postfach.redb"));
    assert!(!problems.is_empty(), "the check must see the loss");
}

#[test]
fn without_the_directory_sync_a_new_log_is_lost_with_what_it_held() {
    let problems = survives(false, |d| d.skip_dir_syncs());
    assert!(!problems.is_empty(), "the check must see the loss");
}

#[test]
fn a_cut_before_anything_was_synced_leaves_a_database_that_opens() {
    for cut in [0.0, 0.01, 0.05] {
        assert_eq!(
            case(&teeth(), false, Cut::At(cut), Some(7), |_| {}),
            Vec::<String>::new()
        );
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
