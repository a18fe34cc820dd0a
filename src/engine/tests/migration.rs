//! Engine-level tests of instance migration: the reference order moved to
//! a version with a new task, refusals that change nothing, dry runs, and
//! random migrations between generated versions with every store invariant
//! checked after each step (see the parent module).

use super::*;
use crate::engine::{Carry, MigrationPlan};

/// The reference model with a check task (`pruefen`, a job on topic
/// `pruefen`) between the completion and the invoice.
fn with_check() -> String {
    REFERENCE.replace(
        r#"<sequenceFlow id="zurRechnung" sourceRef="warteAufAbschluss" targetRef="rechnungStellen" />"#,
        r#"<sequenceFlow id="zurRechnung" sourceRef="warteAufAbschluss" targetRef="pruefen" />
        <serviceTask id="pruefen" name="Prüfen" flowable:type="external" flowable:topic="pruefen" />
        <sequenceFlow id="zurRechnung2" sourceRef="pruefen" targetRef="rechnungStellen" />"#,
    )
}

impl Harness {
    fn deploy_version(&mut self, xml: &str) {
        let keys = [(MSG.to_string(), "auftragId".to_string())].into();
        self.step(|e| e.deploy("ref.bpmn", xml, &keys, None))
            .unwrap();
    }

    fn migrate(
        &mut self,
        plan: &MigrationPlan,
        inst: u64,
        dry: bool,
    ) -> R<crate::engine::Migrated> {
        let r = self.step(|e| e.migrate(plan, inst, dry));
        self.check_invariants();
        r
    }

    fn instance(&self, id: u64) -> InstanceRecord {
        self.db.snapshot().instance(id).unwrap().unwrap()
    }

    fn history_of(&self, id: u64) -> Vec<String> {
        let snap = self.db.snapshot();
        let rec = snap.instance(id).unwrap().unwrap();
        let model = self.defs.get(&rec.process, rec.version);
        snap.history(&rec, model.as_deref())
            .unwrap()
            .into_iter()
            .map(|h| format!("{} {}", h.element, h.event))
            .collect()
    }

    /// Completes every job of `topic` there is now; returns how many.
    fn finish_topic(&mut self, topic: &str) -> usize {
        self.step(|e| e.run_continuations(1000)).unwrap();
        let jobs = self
            .step(|e| e.lock_jobs(topic, 1000, "w", 30_000, false, None))
            .unwrap();
        for j in &jobs {
            self.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
                .unwrap();
        }
        self.check_invariants();
        jobs.len()
    }
}

fn plan(from: u32, to: u32, map: &[(&str, &str)]) -> MigrationPlan {
    MigrationPlan {
        process: "auftrag-ausfuehrung".into(),
        from,
        to,
        map: map
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    }
}

#[test]
fn waiting_orders_move_to_a_version_with_a_check_and_each_is_invoiced_once() {
    let mut h = Harness::reference();
    let waiting: Vec<u64> = (1..=4).map(|k| h.start(&k.to_string())).collect();
    h.work();
    // two more orders whose completions arrive before they reach the catch
    let early: Vec<u64> = (5..=6).map(|k| h.start(&k.to_string())).collect();
    for k in 5..=6 {
        assert_eq!(
            h.publish(&k.to_string(), &format!("e{k}")).outcome,
            Outcome::Buffered
        );
    }
    h.deploy_version(&with_check());
    for &i in waiting.iter().chain(&early) {
        let m = h.migrate(&plan(1, 2, &[]), i, false).unwrap();
        assert!(m.tokens.iter().all(|t| t.carry == Carry::Kept), "{m:?}");
        assert_eq!(h.instance(i).version, 2);
    }
    assert!(
        h.history_of(waiting[0])
            .iter()
            .any(|l| l.contains("migrated v1 → v2"))
    );
    h.work(); // the early ones reach the catch and take their buffered completions
    for k in 1..=4 {
        assert_eq!(
            h.publish(&k.to_string(), &format!("e{k}")).outcome,
            Outcome::Correlated
        );
    }
    assert_eq!(
        h.finish_topic("pruefen"),
        6,
        "every order passes the new task"
    );
    assert_eq!(h.finish_topic("rechnungStellen"), 6, "one invoice each");
    assert_eq!(h.finish_topic("rechnungStellen"), 0);
    for &i in waiting.iter().chain(&early) {
        let rec = h.instance(i);
        assert!(rec.ended_at.is_some() && !rec.cancelled, "{rec:?}");
        assert!(
            h.history_of(i)
                .iter()
                .any(|l| l.starts_with("pruefen completed"))
        );
    }
}

#[test]
fn an_instance_that_cannot_move_is_refused_with_its_reason_and_nothing_changes() {
    let mut h = Harness::reference();
    let order = h.start("1");
    h.work();
    let renamed = REFERENCE.replace("warteAufAbschluss", "aufAbschlussWarten");
    h.deploy_version(&renamed);
    let before = h.history_of(order);
    let err = h.migrate(&plan(1, 2, &[]), order, false).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, EngineError::MigrationRefused { instance, .. } if instance == order),
        "{text}"
    );
    assert!(
        text.contains("'warteAufAbschluss' has no counterpart"),
        "{text}"
    );
    assert_eq!(h.instance(order).version, 1);
    assert_eq!(h.history_of(order), before);
    // the wrong version is refused too
    let err = h.migrate(&plan(2, 1, &[]), order, false).unwrap_err();
    assert!(err.to_string().contains("runs version 1"), "{err}");
    // mapped, it moves, and its subscription stays
    let m = h
        .migrate(
            &plan(1, 2, &[("warteAufAbschluss", "aufAbschlussWarten")]),
            order,
            false,
        )
        .unwrap();
    assert_eq!(m.tokens[0].to, "aufAbschlussWarten");
    assert_eq!(m.tokens[0].carry, Carry::Kept);
    assert_eq!(h.publish("1", "e1").outcome, Outcome::Correlated);
}

#[test]
fn a_dry_run_says_what_would_happen_and_changes_nothing() {
    let mut h = Harness::reference();
    let order = h.start("1");
    h.work();
    // version 2 catches the completion by another key: the catch re-opens
    let other_key = REFERENCE.to_string();
    let keys = [(MSG.to_string(), "bestellNr".to_string())].into();
    h.step(|e| e.deploy("ref.bpmn", &other_key, &keys, None))
        .unwrap();
    let before = (h.history_of(order), h.instance(order).version);
    let m = h.migrate(&plan(1, 2, &[]), order, true).unwrap();
    assert_eq!(m.tokens[0].carry, Carry::Reopened);
    assert_eq!((h.history_of(order), h.instance(order).version), before);
    // still waits under its old key
    assert_eq!(h.publish("1", "e1").outcome, Outcome::Correlated);
}

#[test]
fn a_timer_task_becoming_a_message_catch_is_reopened_under_the_key() {
    let timer = REFERENCE.replace(
        r#"<messageEventDefinition messageRef="auftragAbgeschlossenMessage" />"#,
        r#"<timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition>"#,
    );
    let mut h = Harness {
        db: MemoryStore::new(),
        defs: DefCache::default(),
        cfg: Config::default(),
        now: T0,
    };
    h.deploy_version(&timer);
    let order = h.start("1");
    h.work();
    h.deploy_version(REFERENCE);
    // the completion arrives before the order catches it: buffered
    assert_eq!(h.publish("1", "e1").outcome, Outcome::Buffered);
    let m = h.migrate(&plan(1, 2, &[]), order, false).unwrap();
    assert_eq!(m.tokens[0].carry, Carry::Reopened);
    // the timer job is gone, the buffered completion was taken at once
    h.now += 2 * 3_600_000;
    h.step(|e| e.run_continuations(100)).unwrap();
    assert_eq!(h.messages()[0].state, MessageState::Correlated);
    assert_eq!(h.finish_topic("rechnungStellen"), 1);
    assert!(h.instance(order).ended_at.is_some());
}

/// A generated version of the order process: what the order waits at after
/// the hand-over (`warten`), and whether a check task follows it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shape {
    wait: u8,
    check: bool,
}

impl Shape {
    fn xml(self) -> String {
        let (after, check) = if self.check {
            (
                "pruefen",
                r#"<serviceTask id="pruefen" flowable:type="external" flowable:topic="pruefen"/>
                   <sequenceFlow id="f4" sourceRef="pruefen" targetRef="rechnungStellen"/>"#,
            )
        } else {
            ("rechnungStellen", "")
        };
        let leave = format!(r#"<sequenceFlow id="f3" sourceRef="warten" targetRef="{after}"/>"#);
        let warten = match self.wait % 6 {
            0 => format!(
                r#"<intermediateCatchEvent id="warten"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>{leave}"#
            ),
            1 => format!(r#"<receiveTask id="warten" messageRef="m"/>{leave}"#),
            2 => format!(
                r#"<serviceTask id="warten" flowable:type="external" flowable:topic="warten"/>
              <boundaryEvent id="frist" attachedToRef="warten"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
              <sequenceFlow id="f9" sourceRef="frist" targetRef="rechnungStellen"/>{leave}"#
            ),
            3 => format!(r#"<userTask id="warten"/>{leave}"#),
            4 => format!(
                r#"<intermediateCatchEvent id="warten"><timerEventDefinition><timeDuration>PT30M</timeDuration></timerEventDefinition></intermediateCatchEvent>{leave}"#
            ),
            _ => format!(
                r#"<eventBasedGateway id="warten"/>
              <sequenceFlow id="g1" sourceRef="warten" targetRef="nachricht"/>
              <intermediateCatchEvent id="nachricht"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
              <sequenceFlow id="g2" sourceRef="warten" targetRef="frist2"/>
              <intermediateCatchEvent id="frist2"><timerEventDefinition><timeDuration>PT2H</timeDuration></timerEventDefinition></intermediateCatchEvent>
              <sequenceFlow id="f3" sourceRef="nachricht" targetRef="{after}"/>
              <sequenceFlow id="g3" sourceRef="frist2" targetRef="{after}"/>"#
            ),
        };
        format!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" targetNamespace="t">
  <message id="m" name="{MSG}"/>
  <process id="auftrag-ausfuehrung">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="auftragUebergeben"/>
    <sendTask id="auftragUebergeben" flowable:async="true"/>
    <sequenceFlow id="f2" sourceRef="auftragUebergeben" targetRef="warten"/>
    {warten}
    {check}
    <serviceTask id="rechnungStellen" flowable:async="true"/>
    <sequenceFlow id="f5" sourceRef="rechnungStellen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#
        )
    }
}

/// One step of the random walk over migrations.
#[derive(Debug, Clone)]
enum MigOp {
    Start(u8),
    /// The hand-over (0) or the jobs of one topic done.
    Work(u8),
    Publish(u8),
    Advance(u32),
    /// Instance i (by start order) to version v (1-based, modulo the versions).
    Migrate(u8, u8, bool),
    Tasks,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random migrations between random pairs of generated versions, among
    /// starts, work, completions and time: after every step the store's
    /// check holds (every index row, subscription and gauge follows from the
    /// records; every job of an instance is held by a live token of it; each
    /// instance agrees with its model), and a refused migration changes nothing.
    #[test]
    fn random_migrations_between_generated_versions_keep_every_invariant(
        shapes in proptest::collection::vec((0..6u8, any::<bool>()), 2..4),
        ops in proptest::collection::vec(prop_oneof![
            3 => (0..4u8).prop_map(MigOp::Start),
            2 => (0..4u8).prop_map(MigOp::Work),
            2 => (0..4u8).prop_map(MigOp::Publish),
            1 => (0..7_200u32).prop_map(MigOp::Advance),
            5 => (0..6u8, 0..4u8, any::<bool>()).prop_map(|(i, v, d)| MigOp::Migrate(i, v, d)),
            1 => Just(MigOp::Tasks),
        ], 1..40),
    ) {
        let mut h = Harness {
            db: MemoryStore::new(),
            defs: DefCache::default(),
            cfg: Config::default(),
            now: T0,
        };
        let mut shapes: Vec<Shape> = shapes.into_iter().map(|(wait, check)| Shape { wait, check }).collect();
        shapes.dedup();
        for s in &shapes {
            h.deploy_version(&s.xml());
        }
        let versions = shapes.len() as u32;
        let mut started: Vec<u64> = Vec::new();
        let mut published = 0u32;
        for op in ops {
            match op {
                MigOp::Start(k) => started.push(h.start(&k.to_string())),
                MigOp::Work(0) => h.work(),
                MigOp::Work(t) => {
                    h.finish_topic(["warten", "pruefen", "rechnungStellen"][usize::from(t % 3)]);
                }
                MigOp::Publish(k) => {
                    published += 1;
                    h.publish(&k.to_string(), &format!("e{published}"));
                }
                MigOp::Advance(s) => {
                    h.now += u64::from(s) * 1000;
                    h.step(|e| e.run_continuations(100)).unwrap();
                }
                MigOp::Migrate(i, v, dry) => {
                    let Some(&inst) = started.get(usize::from(i)) else { continue };
                    let rec = h.instance(inst);
                    let to = 1 + u32::from(v) % versions;
                    let before = (h.history_of(inst), rec.version, h.db.snapshot().instance(inst).unwrap().map(|r| r.tokens));
                    let r = h.migrate(&plan(rec.version, to, &[]), inst, dry);
                    let after = (h.history_of(inst), h.instance(inst).version, h.db.snapshot().instance(inst).unwrap().map(|r| r.tokens));
                    match r {
                        Ok(_) if !dry => prop_assert_eq!(after.1, to),
                        _ => prop_assert_eq!(&before, &after, "a refusal or dry run changed the instance"),
                    }
                }
                MigOp::Tasks => {
                    let open: Vec<u64> = h.db.snapshot().tasks().unwrap().into_iter().map(|t| t.id).collect();
                    for t in open {
                        let _ = h.step(|e| e.task_action(t, "u", &crate::engine::TaskAction::Claim));
                        let _ = h.step(|e| e.task_action(t, "u", &crate::engine::TaskAction::Complete { vars: Vars::new() }));
                    }
                }
            }
            h.check_invariants();
        }
    }
}

/// A service task `arbeiten` with a message boundary event (`storno`) and,
/// with `inside`, the task inside a subprocess `rahmen`.
fn boundary_model(inside: bool) -> String {
    let task = r#"<serviceTask id="arbeiten" flowable:type="external" flowable:topic="arbeiten"/>
      <boundaryEvent id="storno" attachedToRef="arbeiten"><messageEventDefinition messageRef="m"/></boundaryEvent>
      <sequenceFlow id="b1" sourceRef="storno" targetRef="ende2"/>
      <endEvent id="ende2"/>"#;
    let body = if inside {
        format!(
            r#"<subProcess id="rahmen"><startEvent id="is"/><sequenceFlow id="i1" sourceRef="is" targetRef="arbeiten"/>{task}
              <sequenceFlow id="i2" sourceRef="arbeiten" targetRef="ie"/><endEvent id="ie"/></subProcess>
              <sequenceFlow id="f1" sourceRef="s" targetRef="rahmen"/><sequenceFlow id="f2" sourceRef="rahmen" targetRef="e"/>"#
        )
    } else {
        format!(
            r#"{task}<sequenceFlow id="f1" sourceRef="s" targetRef="arbeiten"/><sequenceFlow id="f2" sourceRef="arbeiten" targetRef="e"/>"#
        )
    };
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" targetNamespace="t">
  <message id="m" name="Storno"/>
  <process id="arbeit"><startEvent id="s"/>{body}<endEvent id="e"/></process>
</definitions>"#
    )
}

#[test]
fn a_boundary_whose_key_variable_changed_or_a_scope_the_target_lacks_is_refused() {
    let mut h = Harness {
        db: MemoryStore::new(),
        defs: DefCache::default(),
        cfg: Config::default(),
        now: T0,
    };
    let by = |v: &str| [("Storno".to_string(), v.to_string())].into();
    h.step(|e| e.deploy("a.bpmn", &boundary_model(false), &by("auftragId"), None))
        .unwrap();
    let vars = crate::model::vars([("auftragId", "1".into()), ("kunde", "k".into())]);
    let inst = h.step(|e| e.start("arbeit", vars.clone(), None)).unwrap();
    // version 2 correlates the boundary's message by another variable
    h.step(|e| e.deploy("a.bpmn", &boundary_model(false), &by("kunde"), None))
        .unwrap();
    let plan = |from, to| MigrationPlan {
        process: "arbeit".into(),
        from,
        to,
        map: Default::default(),
    };
    let err = h.migrate(&plan(1, 2), inst, false).unwrap_err().to_string();
    assert!(
        err.contains("waits for message 'Storno' by variable 'auftragId'"),
        "{err}"
    );
    // version 3 puts the task inside a subprocess the instance is not in
    h.step(|e| e.deploy("a.bpmn", &boundary_model(true), &by("auftragId"), None))
        .unwrap();
    let err = h.migrate(&plan(1, 3), inst, false).unwrap_err().to_string();
    assert!(err.contains("lies inside 'rahmen'"), "{err}");
    // and back: a token inside the subprocess cannot leave it
    let inner = h.step(|e| e.start("arbeit", vars.clone(), None)).unwrap();
    let err = h
        .migrate(&plan(3, 1), inner, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("is not inside 'rahmen'") || err.contains("has no counterpart"),
        "{err}"
    );
    // a migration by a principal says who in the history
    h.step(|e| {
        e.acting_as(Some("anna"));
        e.migrate(&plan(3, 4), inner, true)
    })
    .unwrap_err();
    h.step(|e| {
        e.deploy(
            "a.bpmn",
            &boundary_model(true).replace("ende2", "ende3"),
            &by("auftragId"),
            None,
        )
    })
    .unwrap();
    h.step(|e| {
        e.acting_as(Some("anna"));
        e.migrate(&plan(3, 4), inner, false)
    })
    .unwrap();
    assert!(
        h.history_of(inner)
            .iter()
            .any(|l| l.contains("migrated v3 → v4 by anna")),
        "{:?}",
        h.history_of(inner)
    );
}
