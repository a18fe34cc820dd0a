//! Engine-level tests: commands applied to an in-memory redb, one transaction
//! per step, no threads, no log, no fsync — fast enough for many cases. Each
//! step is what one writer batch does (TTL sweep, lease release, the command).

use super::*;
use crate::store::MemoryStore;
use proptest::prelude::*;

const REFERENCE: &str = include_str!("../../../bpmn/auftrag-ausfuehrung.bpmn");
const MSG: &str = "AuftragAbgeschlossen";
/// 2026-01-01T00:00:00Z
const T0: Millis = 1_767_225_600_000;

struct Harness {
    db: MemoryStore,
    defs: DefCache,
    cfg: Config,
    now: Millis,
}

impl Harness {
    /// An empty in-memory database with the reference model deployed.
    fn reference() -> Self {
        let mut h = Harness {
            db: MemoryStore::new(),
            defs: DefCache::default(),
            cfg: Config::default(),
            now: T0,
        };
        let keys = [(MSG.to_string(), "auftragId".to_string())].into();
        h.step(|e| e.deploy("ref.bpmn", REFERENCE, &keys, None))
            .unwrap();
        h
    }

    /// Partition `index` of a cluster of `count`, with the reference model
    /// deployed.
    fn partition(index: u64, count: u64) -> Self {
        let p = crate::partition::Partition::new(index, count).unwrap();
        let mut h = Harness {
            db: MemoryStore::partition(p),
            defs: DefCache::default(),
            cfg: Config {
                partition: p,
                ..Config::default()
            },
            now: T0,
        };
        let keys = [(MSG.to_string(), "auftragId".to_string())].into();
        h.step(|e| e.deploy("ref.bpmn", REFERENCE, &keys, None))
            .unwrap();
        h
    }

    /// One batch: the TTL sweep and lease release every batch does, then `f`.
    fn step<T>(&mut self, f: impl FnOnce(&mut Engine<'_, '_>) -> R<T>) -> R<T> {
        let (defs, cfg, now) = (&self.defs, &self.cfg, self.now);
        self.db.write(|tables| {
            let mut e = Engine::new(tables, defs, cfg, now);
            e.expire(10_000).unwrap();
            e.release_expired_leases().unwrap();
            let mut e = Engine::new(tables, defs, cfg, now);
            f(&mut e)
        })
    }

    fn start(&mut self, key: &str) -> u64 {
        self.step(|e| {
            e.start(
                "auftrag-ausfuehrung",
                crate::model::vars([("auftragId", key.into())]),
                None,
            )
        })
        .unwrap()
    }

    /// Runs async continuations and completes the hand-over jobs (the unbound
    /// send task waits for its worker), so started orders wait at the catch.
    fn work(&mut self) {
        self.step(|e| e.run_continuations(1000)).unwrap();
        let jobs = self
            .step(|e| e.lock_jobs("auftragUebergeben", 1000, "provider", 30_000, false, None))
            .unwrap();
        for j in jobs {
            self.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
                .unwrap();
        }
    }

    fn publish(&mut self, key: &str, id: &str) -> Delivery {
        let msg = Publish {
            name: MSG.into(),
            key: key.into(),
            message_id: Some(id.into()),
            ..Default::default()
        };
        self.step(|e| e.publish(&msg)).unwrap()
    }

    /// What every instance expects (its `expect` rows) is what its tokens
    /// and variables say, computed afresh from all of them: the writes that
    /// kept the stored expectations without reading every token were right.
    fn check_expects(&mut self) {
        let ids: Vec<u64> = self
            .db
            .write(|t| t.instances_from(0, usize::MAX).unwrap().0)
            .into_iter()
            .map(|i| i.id)
            .collect();
        for inst in ids {
            let (mut stored, mut fresh) = self
                .step(|e| {
                    e.load(inst)?;
                    let stored = e.inst(inst).expects.clone();
                    let fresh = if e.no_tokens(inst)? {
                        Vec::new()
                    } else if e
                        .proc_of(inst)
                        .elements
                        .iter()
                        .any(|el| el.kind.waits_for_message().is_some())
                    {
                        e.desired_expects(inst)?
                    } else {
                        Vec::new()
                    };
                    Ok((stored, fresh))
                })
                .unwrap();
            stored.sort();
            fresh.sort();
            assert_eq!(stored, fresh, "instance {inst} expects what its tokens say");
        }
    }

    /// Every message record, by sequence.
    fn messages(&self) -> Vec<MessageRecord> {
        self.db.messages()
    }

    /// The invariants every step must keep, read back from the tables: every
    /// index row belongs to a record and every record has its rows (buffer,
    /// expiry, parked, dedup, job due and lease rows, tokens_at, expect,
    /// subscriptions of waiting tokens); per (message, key) an open
    /// subscription xor a buffered message; a correlated message names its instance.
    fn check_invariants(&self) {
        let problems = self.db.verify_with_waits();
        assert!(problems.is_empty(), "{problems:#?}");
        for m in &self.messages() {
            if m.state == MessageState::Correlated {
                assert!(m.instance.is_some(), "{m:?}");
            }
        }
    }
}

#[test]
fn an_early_completion_waits_then_correlates_when_the_order_reaches_its_catch() {
    let mut h = Harness::reference();
    let order = h.start("4711");
    let early = h.publish("4711", "evt-1");
    assert_eq!(early.outcome, Outcome::Buffered);
    h.work();
    let m = &h.messages()[0];
    assert_eq!(m.state, MessageState::Correlated);
    assert_eq!(m.instance, Some(order));
    h.check_invariants();
}

#[test]
fn a_completion_for_an_order_past_its_catch_is_parked_late() {
    let mut h = Harness::reference();
    h.start("1");
    h.work();
    assert_eq!(h.publish("1", "first").outcome, Outcome::Correlated);
    let again = h.publish("1", "second");
    assert_eq!(
        (again.outcome, again.reason),
        (Outcome::Parked, Some(Reason::Late))
    );
}

#[test]
fn two_orders_with_one_key_make_the_completion_ambiguous() {
    let mut h = Harness::reference();
    let (a, b) = (h.start("7"), h.start("7"));
    h.work();
    let d = h.publish("7", "evt");
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Ambiguous))
    );
    let mut both = vec![a, b];
    both.sort_unstable();
    assert_eq!(d.candidates, both);
    h.check_invariants();
}

#[test]
fn a_redelivery_is_a_duplicate_and_a_buffered_message_expires_into_the_parked_list() {
    let mut h = Harness::reference();
    assert_eq!(h.publish("9", "evt").outcome, Outcome::Buffered);
    assert_eq!(h.publish("9", "evt").outcome, Outcome::Duplicate);
    assert_eq!(h.messages().len(), 1);
    h.now += h.cfg.default_ttl + 1;
    h.step(|_| Ok(())).unwrap();
    let m = &h.messages()[0];
    assert_eq!(
        (m.state, m.reason),
        (MessageState::Parked, Some(Reason::Expired))
    );
    h.check_invariants();
}

/// One step of the random walk.
#[derive(Debug, Clone)]
enum Op {
    Start(u8),
    Work,
    Publish(u8, u8),
    Advance(u32),
    Requeue(u8),
    /// A worker locks due invoice jobs for 30 s.
    Lock,
    /// The worker completes (true) or fails (false) the i-th job it locked.
    Finish(u8, bool),
    /// An operator retries job i (an incident, or refused).
    Retry(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8).prop_map(Op::Start),
        Just(Op::Work),
        (0..4u8, 0..6u8).prop_map(|(k, id)| Op::Publish(k, id)),
        (0..172_800u32).prop_map(Op::Advance),
        (0..6u8).prop_map(Op::Requeue),
        Just(Op::Lock),
        (0..4u8, any::<bool>()).prop_map(|(i, ok)| Op::Finish(i, ok)),
        (0..12u8).prop_map(Op::Retry),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// After every step of any sequence of starts, publishes, requeues, clock
    /// advances and worker actions: every index row matches its record (see
    /// `check_invariants`), and every message id has exactly one record.
    #[test]
    fn every_step_keeps_the_engine_invariants(ops in proptest::collection::vec(op(), 1..40)) {
        let mut h = Harness::reference();
        h.cfg.max_attempts = 2;
        let mut ids = std::collections::BTreeSet::new();
        let mut locked: Vec<(u64, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Start(k) => { h.start(&k.to_string()); }
                Op::Work => h.work(),
                Op::Publish(k, id) => {
                    let id = format!("evt-{id}");
                    h.publish(&k.to_string(), &id);
                    ids.insert(id);
                }
                Op::Advance(s) => {
                    h.now += u64::from(s) * 1000;
                    h.step(|_| Ok(())).unwrap();
                }
                Op::Requeue(id) => {
                    let _ = h.step(|e| e.requeue(&format!("evt-{id}")));
                }
                Op::Lock => {
                    let jobs = h
                        .step(|e| e.lock_jobs("rechnungStellen", 2, "w", 30_000, false, None))
                        .unwrap();
                    locked.extend(jobs.iter().map(|j| (j.task.job, j.lease_token)));
                }
                Op::Finish(i, ok) => {
                    if let Some(&(job, lease)) = locked.get(usize::from(i)) {
                        // a stale lease (expired, relocked) is refused, which is fine
                        let _ = h.step(|e| if ok {
                            e.complete_job(job, Some(lease), &Vars::new())
                        } else {
                            e.fail_job(job, Some(lease), "boom", None, None).map(|_| ())
                        });
                    }
                }
                Op::Retry(job) => {
                    let _ = h.step(|e| e.retry_job(u64::from(job)));
                }
            }
            h.check_invariants();
            h.check_expects();
        }
        let recorded: Vec<String> = h.messages().into_iter().map(|m| m.message_id).collect();
        prop_assert_eq!(recorded.len(), ids.len(), "one record per message id");
    }
}

const USER_TASK: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <process id="ut" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="check"/>
    <userTask id="check" camunda:candidateGroups="${team}"/>
    <boundaryEvent id="late" attachedToRef="check"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f1" sourceRef="check" targetRef="e"/>
    <sequenceFlow id="f2" sourceRef="late" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[test]
fn a_user_task_record_lives_exactly_as_long_as_its_waiting_token() {
    let mut h = Harness::reference();
    h.step(|e| e.deploy("ut.bpmn", USER_TASK, &BTreeMap::new(), None))
        .unwrap();
    let start = |h: &mut Harness| {
        h.step(|e| e.start("ut", crate::model::vars([("team", "a, b".into())]), None))
            .unwrap()
    };
    let (done, late) = (start(&mut h), start(&mut h));
    h.check_invariants();
    let refused = h.step(|e| e.task_action(1, "x", &TaskAction::Claim));
    assert!(refused.is_ok(), "task 1 belongs to the first instance");
    h.check_invariants();
    let by_other = h.step(|e| e.task_action(1, "y", &TaskAction::Complete { vars: Vars::new() }));
    assert!(matches!(
        by_other,
        Err(EngineError::TaskRefused {
            refusal: TaskRefusal::NotHolder(Some(_)),
            ..
        })
    ));
    h.step(|e| e.task_action(1, "x", &TaskAction::Complete { vars: Vars::new() }))
        .unwrap();
    h.check_invariants();
    // the other instance's task is withdrawn by its interrupting timer
    h.now += 3_600_000;
    h.step(|e| e.run_continuations(100)).unwrap();
    h.check_invariants();
    for id in [done, late] {
        let ended =
            h.db.write(|t| t.instance(id).unwrap().unwrap().ended_at.is_some());
        assert!(ended, "instance {id} ended");
    }
}

/// An activity with a message boundary (interrupting or not) and a timer
/// boundary, entered after an async continuation so that messages can come
/// before, during and after it.
/// A service task under a message boundary (interrupting when `cancel`), a
/// timer boundary and a signal boundary (interrupting when not `cancel`); a
/// parallel branch `aendern` whose worker may change the correlation key
/// while the boundary waits. After the task a user task waits (a token
/// that left with its registrations would show there).
fn storno_model(cancel: bool) -> String {
    let signal_cancels = !cancel;
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn">
  <message id="m" name="Storno"/>
  <signal id="sig" name="Alarm"/>
  <process id="storno" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="fa" sourceRef="fork" targetRef="bearbeiten"/>
    <sequenceFlow id="fb" sourceRef="fork" targetRef="aendern"/>
    <serviceTask id="aendern"/>
    <sequenceFlow id="fc" sourceRef="aendern" targetRef="geaendert"/>
    <endEvent id="geaendert"/>
    <serviceTask id="bearbeiten" flowable:async="true"/>
    <sequenceFlow id="f1" sourceRef="bearbeiten" targetRef="abschluss"/>
    <userTask id="abschluss"/>
    <sequenceFlow id="f5" sourceRef="abschluss" targetRef="fertig"/>
    <endEvent id="fertig"/>
    <boundaryEvent id="storniert" attachedToRef="bearbeiten" cancelActivity="{cancel}"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <boundaryEvent id="frist" attachedToRef="bearbeiten"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <boundaryEvent id="alarm" attachedToRef="bearbeiten" cancelActivity="{signal_cancels}"><signalEventDefinition signalRef="sig"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="storniert" targetRef="ende"/>
    <sequenceFlow id="f3" sourceRef="frist" targetRef="ende"/>
    <sequenceFlow id="f4" sourceRef="alarm" targetRef="ende"/>
    <endEvent id="ende"/>
  </process>
</definitions>"#
    )
}

#[derive(Debug, Clone)]
enum StornoOp {
    Start(u8),
    Publish(u8, u8),
    Continue,
    Complete,
    Advance(u32),
    /// The parallel branch sets the correlation key to this value.
    Rekey(u8),
    Signal,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Message and signal boundary events under any order of starts,
    /// messages, signals, work, time and changes of the key variable while a
    /// boundary waits: after every step the indexes match the records — a
    /// boundary's subscription exists only while its token is in the
    /// activity, under the key it was opened with, and a token's kept
    /// registrations are the ones its model implies — per (message, key) a
    /// subscription xor a buffered message, and every message id has one
    /// record.
    #[test]
    fn message_boundaries_keep_the_engine_invariants(
        cancel in any::<bool>(),
        ops in proptest::collection::vec(prop_oneof![
            (0..3u8).prop_map(StornoOp::Start),
            (0..3u8, 0..6u8).prop_map(|(k, id)| StornoOp::Publish(k, id)),
            Just(StornoOp::Continue),
            Just(StornoOp::Complete),
            (0..7_200u32).prop_map(StornoOp::Advance),
            (0..3u8).prop_map(StornoOp::Rekey),
            Just(StornoOp::Signal),
        ], 1..30)
    ) {
        let mut h = Harness::reference();
        let keys = [("Storno".to_string(), "auftragId".to_string())].into();
        h.step(|e| e.deploy("storno.bpmn", &storno_model(cancel), &keys, None)).unwrap();
        let mut ids = std::collections::BTreeSet::new();
        for op in ops {
            match op {
                StornoOp::Start(k) => {
                    h.step(|e| e.start("storno", crate::model::vars([("auftragId", k.to_string().into())]), None))
                        .unwrap();
                }
                StornoOp::Publish(k, id) => {
                    let msg = Publish {
                        name: "Storno".into(),
                        key: k.to_string(),
                        message_id: Some(format!("s-{id}")),
                        ..Default::default()
                    };
                    h.step(|e| e.publish(&msg)).unwrap();
                    ids.insert(format!("s-{id}"));
                }
                StornoOp::Continue => {
                    h.step(|e| e.run_continuations(100)).unwrap();
                }
                StornoOp::Complete => {
                    let jobs = h.step(|e| e.lock_jobs("bearbeiten", 10, "w", 30_000, false, None)).unwrap();
                    for j in jobs {
                        h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new())).unwrap();
                    }
                }
                StornoOp::Advance(s) => {
                    h.now += u64::from(s) * 1000;
                    h.step(|e| e.run_continuations(100)).unwrap();
                }
                StornoOp::Rekey(k) => {
                    let jobs = h.step(|e| e.lock_jobs("aendern", 1, "w", 30_000, false, None)).unwrap();
                    let to = crate::model::vars([("auftragId", format!("neu-{k}").into())]);
                    for j in jobs {
                        h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &to)).unwrap();
                    }
                }
                StornoOp::Signal => {
                    h.step(|e| e.signal("Alarm", &Vars::new())).unwrap();
                }
            }
            h.check_invariants();
        }
        prop_assert_eq!(h.messages().len(), ids.len(), "one record per message id");
    }
}

/// A model with scopes for the property test: an order subprocess with a
/// parallel receive task and checked job (its own timer boundary leading to a
/// plain, terminate, error or escalation end), then a nested payment
/// subprocess with a message catch; on the order subprocess a message boundary
/// (interrupting or not), a timer and an escalation boundary (interrupting or
/// not) and an error boundary.
/// A conditional boundary on `pruefen` (`menge == 2`, which a message's
/// variables set), interrupting when `frist_cancels`.
/// Event subprocesses too: a message one inside the order subprocess
/// (interrupting when `frist_cancels`) with a job, and a timer cycle at the
/// process level (non-interrupting).
/// Multi-instance by `multi`: none (0); the receive task `lieferung` over
/// `positionen`, keyed by its element variable, parallel with a completion
/// condition (1) or sequential collecting outputs (2); the subprocess
/// `zahlung` in parallel, its catch keyed by the element variable (3); the
/// service task `pruefen` twice by loopCardinality, its boundary timer on
/// the body (4).
fn scoped_model(storno_cancels: bool, frist_cancels: bool, abbruch: u8, multi: u8) -> String {
    let abbruch = match abbruch {
        0 => "",
        1 => "<terminateEventDefinition/>",
        2 => "<errorEventDefinition/>",
        _ => "<escalationEventDefinition/>",
    };
    let over =
        r#"isSequential="SEQ" camunda:collection="${positionen}" camunda:elementVariable="pos""#;
    let mi = |seq: bool, inner: &str| {
        format!(
            "<multiInstanceLoopCharacteristics {}>{inner}</multiInstanceLoopCharacteristics>",
            over.replace("SEQ", if seq { "true" } else { "false" })
        )
    };
    let (lieferung, zahlung, pruefen) = match multi {
        1 => (
            mi(
                false,
                "<completionCondition>${nrOfCompletedInstances >= 2}</completionCondition>",
            ),
            String::new(),
            String::new(),
        ),
        2 => (
            mi(
                true,
                r#"<extensionElements><zeebe:loopCharacteristics outputCollection="mengen" outputElement="= menge"/></extensionElements>"#,
            ),
            String::new(),
            String::new(),
        ),
        3 => (String::new(), mi(false, ""), String::new()),
        4 => (
            String::new(),
            String::new(),
            "<multiInstanceLoopCharacteristics><loopCardinality>2</loopCardinality></multiInstanceLoopCharacteristics>".to_string(),
        ),
        _ => (String::new(), String::new(), String::new()),
    };
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <message id="ml" name="Lieferung"/>
  <message id="mz" name="Zahlung"/>
  <message id="ms" name="Storno"/>
  <message id="mm" name="Mahnung"/>
  <message id="mq" name="Quittung"/>
  <process id="scoped" isExecutable="true">
    <subProcess id="takt" triggeredByEvent="true">
      <startEvent id="ts" isInterrupting="false"><timerEventDefinition><timeCycle>R3/PT20M</timeCycle></timerEventDefinition></startEvent>
      <sequenceFlow id="t0" sourceRef="ts" targetRef="tt"/>
      <task id="tt"/>
    </subProcess>
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="auftrag"/>
    <subProcess id="auftrag">
      <startEvent id="as"/>
      <sequenceFlow id="a0" sourceRef="as" targetRef="fork"/>
      <parallelGateway id="fork"/>
      <sequenceFlow id="a1" sourceRef="fork" targetRef="lieferung"/>
      <sequenceFlow id="a2" sourceRef="fork" targetRef="pruefen"/>
      <receiveTask id="lieferung" messageRef="ml">{lieferung}</receiveTask>
      <serviceTask id="pruefen">{pruefen}</serviceTask>
      <boundaryEvent id="pruefFrist" attachedToRef="pruefen"><timerEventDefinition><timeDuration>PT10M</timeDuration></timerEventDefinition></boundaryEvent>
      <boundaryEvent id="vollstaendig" attachedToRef="pruefen" cancelActivity="{frist_cancels}"><conditionalEventDefinition><condition>${{menge == 2}}</condition></conditionalEventDefinition></boundaryEvent>
      <sequenceFlow id="a8" sourceRef="vollstaendig" targetRef="geprueft"/>
      <endEvent id="geprueft"/>
      <sequenceFlow id="a3" sourceRef="lieferung" targetRef="join"/>
      <sequenceFlow id="a4" sourceRef="pruefen" targetRef="join"/>
      <sequenceFlow id="a5" sourceRef="pruefFrist" targetRef="abbruch"/>
      <endEvent id="abbruch">{abbruch}</endEvent>
      <parallelGateway id="join"/>
      <sequenceFlow id="a6" sourceRef="join" targetRef="zahlung"/>
      <subProcess id="zahlung">{zahlung}
        <startEvent id="zs"/>
        <sequenceFlow id="z0" sourceRef="zs" targetRef="eingang"/>
        <intermediateCatchEvent id="eingang"><messageEventDefinition messageRef="mz"/></intermediateCatchEvent>
        <sequenceFlow id="z1" sourceRef="eingang" targetRef="ze"/>
        <endEvent id="ze"/>
      </subProcess>
      <sequenceFlow id="a7" sourceRef="zahlung" targetRef="ae"/>
      <endEvent id="ae"/>
      <subProcess id="mahnung" triggeredByEvent="true">
        <startEvent id="mst" isInterrupting="{frist_cancels}"><messageEventDefinition messageRef="mm"/></startEvent>
        <sequenceFlow id="m0" sourceRef="mst" targetRef="mahnen"/>
        <serviceTask id="mahnen"/>
      </subProcess>
    </subProcess>
    <boundaryEvent id="storno" attachedToRef="auftrag" cancelActivity="{storno_cancels}"><messageEventDefinition messageRef="ms"/></boundaryEvent>
    <boundaryEvent id="frist" attachedToRef="auftrag" cancelActivity="{frist_cancels}"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <boundaryEvent id="fehler" attachedToRef="auftrag"><errorEventDefinition/></boundaryEvent>
    <boundaryEvent id="eskalation" attachedToRef="auftrag" cancelActivity="{frist_cancels}"><escalationEventDefinition/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="eskalation" targetRef="ende"/>
    <sequenceFlow id="f1" sourceRef="auftrag" targetRef="quittung"/>
    <callActivity id="quittung" calledElement="quittieren"/>
    <boundaryEvent id="quittungFrist" attachedToRef="quittung"><timerEventDefinition><timeDuration>PT30M</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f6" sourceRef="quittungFrist" targetRef="ende"/>
    <sequenceFlow id="f7" sourceRef="quittung" targetRef="fertig"/>
    <sequenceFlow id="f2" sourceRef="storno" targetRef="storniert"/>
    <sequenceFlow id="f3" sourceRef="frist" targetRef="ende"/>
    <sequenceFlow id="f4" sourceRef="fehler" targetRef="ende"/>
    <endEvent id="fertig"/>
    <endEvent id="storniert"/>
    <endEvent id="ende"/>
  </process>
  <process id="quittieren" isExecutable="true">
    <startEvent id="qs"/>
    <sequenceFlow id="q0" sourceRef="qs" targetRef="beleg"/>
    <receiveTask id="beleg" messageRef="mq"/>
    <sequenceFlow id="q1" sourceRef="beleg" targetRef="qe"/>
    <endEvent id="qe"/>
  </process>
</definitions>"#
    )
}

#[derive(Debug, Clone)]
enum ScopeOp {
    Start(u8),
    /// Message 0 Lieferung, 1 Zahlung, 2 Storno, 3 Mahnung, 4 Quittung; key; id.
    Publish(u8, u8, u8),
    /// The worker of `pruefen` completes (0), fails (1) or throws a BPMN error (2).
    Work(u8),
    Advance(u32),
    /// An operator cancels token t of the i-th started instance.
    Cancel(u8, u8),
    /// An operator adds a token at element e (0 lieferung, 1 pruefen, 2
    /// eingang, 3 auftrag) of the i-th started instance (refused or not).
    Add(u8, u8),
    Requeue(u8),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random models with scopes (and multi-instance activities) under random
    /// starts, messages, worker results, timers and repairs: after every step
    /// every index row matches its record, every token runs in an active
    /// scope of its subprocess or is an inner instance of a body at its
    /// element, no scope or body is empty, every job is held by a live token (no wait outside an
    /// active scope), per (message, key) a subscription xor a buffered
    /// message; every message id has one record; ended instances hold no tokens.
    #[test]
    fn scopes_keep_the_engine_invariants(
        storno_cancels in any::<bool>(),
        frist_cancels in any::<bool>(),
        abbruch in 0..4u8,
        multi in 0..5u8,
        ops in proptest::collection::vec(prop_oneof![
            (0..3u8).prop_map(ScopeOp::Start),
            (0..5u8, 0..3u8, 0..8u8).prop_map(|(m, k, id)| ScopeOp::Publish(m, k, id)),
            (0..3u8).prop_map(ScopeOp::Work),
            (0..5_400u32).prop_map(ScopeOp::Advance),
            (0..4u8, 1..16u8).prop_map(|(i, t)| ScopeOp::Cancel(i, t)),
            (0..4u8, 0..5u8).prop_map(|(i, e)| ScopeOp::Add(i, e)),
            (0..8u8).prop_map(ScopeOp::Requeue),
        ], 1..40)
    ) {
        let mut h = Harness::reference();
        h.cfg.max_attempts = 2;
        // a catch inside a multi-instance activity is keyed by its element variable
        let keyed_by = |m: &str| match (multi, m) {
            (1 | 2, "Lieferung") | (3, "Zahlung") => "pos",
            _ => "auftragId",
        };
        let keys = ["Lieferung", "Zahlung", "Storno", "Mahnung", "Quittung"]
            .map(|m| (m.to_string(), keyed_by(m).to_string()))
            .into();
        let xml = scoped_model(storno_cancels, frist_cancels, abbruch, multi);
        h.step(|e| e.deploy("scoped.bpmn", &xml, &keys, None)).unwrap();
        let mut started: Vec<u64> = Vec::new();
        let mut ids = std::collections::BTreeSet::new();
        for op in ops {
            match op {
                ScopeOp::Start(k) => {
                    let positionen: Vec<String> = (0..3).map(|i| ((k + i) % 3).to_string()).collect();
                    let vars = crate::model::vars([
                        ("auftragId", k.to_string().into()),
                        ("positionen", positionen.into()),
                    ]);
                    let id = h.step(|e| e.start("scoped", vars, None)).unwrap();
                    started.push(id);
                }
                ScopeOp::Publish(m, k, id) => {
                    let name = ["Lieferung", "Zahlung", "Storno", "Mahnung", "Quittung"][usize::from(m)];
                    let id = format!("{name}-{id}");
                    let msg = Publish {
                        name: name.into(),
                        key: k.to_string(),
                        message_id: Some(id.clone()),
                        variables: crate::model::vars([("menge", k.into())]),
                        ..Default::default()
                    };
                    h.step(|e| e.publish(&msg)).unwrap();
                    ids.insert(id);
                }
                ScopeOp::Work(how) => {
                    let mut jobs = h.step(|e| e.lock_jobs("pruefen", 10, "w", 30_000, false, None)).unwrap();
                    jobs.extend(h.step(|e| e.lock_jobs("mahnen", 10, "w", 30_000, false, None)).unwrap());
                    for j in jobs {
                        let (job, lease) = (j.task.job, Some(j.lease_token));
                        let done = h.step(|e| match how {
                            0 => e.complete_job(job, lease, &Vars::new()),
                            1 => e.fail_job(job, lease, "boom", None, None).map(|_| ()),
                            _ => e.throw_error(job, lease, "DEFEKT", "defekt", &Vars::new()).map(|_| ()),
                        });
                        // an earlier result of this batch may have cancelled the job's scope
                        prop_assert!(
                            matches!(done, Ok(()) | Err(EngineError::UnknownJob(_))),
                            "{done:?}"
                        );
                    }
                }
                ScopeOp::Advance(s) => {
                    h.now += u64::from(s) * 1000;
                    h.step(|e| e.run_continuations(100)).unwrap();
                }
                ScopeOp::Cancel(i, t) => {
                    if let Some(&inst) = started.get(usize::from(i)) {
                        // unknown tokens and ended instances are refused, which is fine
                        let _ = h.step(|e| e.cancel_token(inst, u64::from(t)));
                    }
                }
                ScopeOp::Add(i, el) => {
                    if let Some(&inst) = started.get(usize::from(i)) {
                        let element = ["lieferung", "pruefen", "eingang", "auftrag", "mahnen"][usize::from(el)];
                        let _ = h.step(|e| e.add_token(inst, element, false));
                    }
                }
                ScopeOp::Requeue(id) => {
                    for name in ["Lieferung", "Zahlung", "Storno", "Mahnung", "Quittung"] {
                        let _ = h.step(|e| e.requeue(&format!("{name}-{id}")));
                    }
                }
            }
            h.check_invariants();
            for &inst in &started {
                let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
                prop_assert!(rec.ended_at.is_none() || rec.tokens.is_empty(), "{rec:?}");
            }
        }
        prop_assert_eq!(h.messages().len(), ids.len(), "one record per message id");
    }
}

mod batches;
mod compensation;
mod migration;
mod moves;
