//! Engine-level tests of compensation, transactions and ad-hoc
//! subprocesses: random commands on models that use them, with the
//! invariants of every step checked (see the parent module).

use super::*;

impl Harness {
    /// Seconds pass and due jobs run.
    fn advance(&mut self, secs: u32) {
        self.now += u64::from(secs) * 1000;
        self.step(|e| e.run_continuations(100)).unwrap();
    }

    /// An operator cancels token `t` of `inst` (unknown tokens and ended
    /// instances are refused, which is fine).
    fn cancel(&mut self, inst: Option<&u64>, t: u8) {
        if let Some(&inst) = inst {
            let _ = self.step(|e| e.cancel_token(inst, u64::from(t)));
        }
    }
}

/// A transaction whose bookings can be compensated: `hotel` (a service task,
/// twice by loopCardinality when `multi`) with a handler that waits as a job,
/// and the subprocess `flug`, whose `sitz` has a handler that waits too.
/// `entscheiden` (a wait state) is triggered with `ok`: 1 completes the
/// transaction (then `danach` compensates it from outside), 2 cancels it
/// (cancel end: compensate, leave by `abgebrochen`), anything else
/// compensates it from inside (a compensation end event). A `Storno`
/// message interrupts the transaction (its work is then not compensated).
fn compensation_model(multi: bool) -> String {
    let mi = if multi {
        "<multiInstanceLoopCharacteristics><loopCardinality>2</loopCardinality></multiInstanceLoopCharacteristics>"
    } else {
        ""
    };
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <message id="ms" name="Storno"/>
  <process id="komp" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="tx"/>
    <transaction id="tx">
      <startEvent id="ts"/>
      <sequenceFlow id="t0" sourceRef="ts" targetRef="fork"/>
      <parallelGateway id="fork"/>
      <sequenceFlow id="t1" sourceRef="fork" targetRef="hotel"/>
      <sequenceFlow id="t2" sourceRef="fork" targetRef="flug"/>
      <serviceTask id="hotel">{mi}</serviceTask>
      <boundaryEvent id="bh" attachedToRef="hotel"><compensateEventDefinition/></boundaryEvent>
      <serviceTask id="storniereHotel" isForCompensation="true"/>
      <association id="a1" sourceRef="bh" targetRef="storniereHotel"/>
      <subProcess id="flug">
        <startEvent id="fs"/>
        <sequenceFlow id="g0" sourceRef="fs" targetRef="sitz"/>
        <task id="sitz"/>
        <boundaryEvent id="bs" attachedToRef="sitz"><compensateEventDefinition/></boundaryEvent>
        <serviceTask id="sitzFrei" isForCompensation="true"/>
        <association id="a2" sourceRef="bs" targetRef="sitzFrei"/>
        <sequenceFlow id="g1" sourceRef="sitz" targetRef="fe"/>
        <endEvent id="fe"/>
      </subProcess>
      <sequenceFlow id="t3" sourceRef="hotel" targetRef="join"/>
      <sequenceFlow id="t4" sourceRef="flug" targetRef="join"/>
      <parallelGateway id="join"/>
      <sequenceFlow id="t5" sourceRef="join" targetRef="entscheiden"/>
      <receiveTask id="entscheiden"/>
      <sequenceFlow id="t6" sourceRef="entscheiden" targetRef="gw"/>
      <exclusiveGateway id="gw" default="t9"/>
      <sequenceFlow id="t7" sourceRef="gw" targetRef="te"><conditionExpression>${{ok == 1}}</conditionExpression></sequenceFlow>
      <sequenceFlow id="t8" sourceRef="gw" targetRef="abbrechen"><conditionExpression>${{ok == 2}}</conditionExpression></sequenceFlow>
      <sequenceFlow id="t9" sourceRef="gw" targetRef="rueckgaengig"/>
      <endEvent id="te"/>
      <endEvent id="abbrechen"><cancelEventDefinition/></endEvent>
      <endEvent id="rueckgaengig"><compensateEventDefinition/></endEvent>
    </transaction>
    <boundaryEvent id="abgebrochen" attachedToRef="tx"><cancelEventDefinition/></boundaryEvent>
    <sequenceFlow id="f1" sourceRef="abgebrochen" targetRef="ende"/>
    <boundaryEvent id="storno" attachedToRef="tx"><messageEventDefinition messageRef="ms"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="storno" targetRef="stornoUndo"/>
    <intermediateThrowEvent id="stornoUndo"><compensateEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f3" sourceRef="stornoUndo" targetRef="ende"/>
    <sequenceFlow id="f4" sourceRef="tx" targetRef="danach"/>
    <intermediateThrowEvent id="danach"><compensateEventDefinition activityRef="tx"/></intermediateThrowEvent>
    <sequenceFlow id="f5" sourceRef="danach" targetRef="ende"/>
    <endEvent id="ende"/>
  </process>
</definitions>"#
    )
}

#[derive(Debug, Clone)]
enum CompOp {
    Start(u8),
    /// The worker of topic 0 hotel, 1 storniereHotel, 2 sitzFrei completes
    /// (true) or fails (false) every due job.
    Work(u8, bool),
    /// The i-th started instance's `entscheiden` is triggered with `ok`.
    Decide(u8, u8),
    Storno(u8),
    /// An operator cancels token t of the i-th started instance.
    Cancel(u8, u8),
    Advance(u32),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random compensation, cancellation and wait states: after every step
    /// the store's rows match its records, every handler runs in the scope
    /// of a throw that waits for it, no compensable row outlives its
    /// instance, and an ended instance holds no token.
    #[test]
    fn compensation_keeps_the_engine_invariants(
        multi in any::<bool>(),
        ops in proptest::collection::vec(prop_oneof![
            (0..3u8).prop_map(CompOp::Start),
            (0..3u8, any::<bool>()).prop_map(|(t, ok)| CompOp::Work(t, ok)),
            (0..3u8, 0..4u8).prop_map(|(i, ok)| CompOp::Decide(i, ok)),
            (0..3u8).prop_map(CompOp::Storno),
            (0..3u8, 1..12u8).prop_map(|(i, t)| CompOp::Cancel(i, t)),
            (0..600u32).prop_map(CompOp::Advance),
        ], 1..40)
    ) {
        let mut h = Harness::reference();
        h.cfg.max_attempts = 2;
        let keys = [("Storno".to_string(), "auftragId".to_string())].into();
        let xml = compensation_model(multi);
        h.step(|e| e.deploy("komp.bpmn", &xml, &keys, None)).unwrap();
        let mut started: Vec<u64> = Vec::new();
        for op in ops {
            match op {
                CompOp::Start(k) => {
                    let vars = crate::model::vars([("auftragId", k.to_string().into())]);
                    started.push(h.step(|e| e.start("komp", vars, None)).unwrap());
                }
                CompOp::Work(topic, ok) => {
                    let topic = ["hotel", "storniereHotel", "sitzFrei"][usize::from(topic)];
                    let jobs = h.step(|e| e.lock_jobs(topic, 10, "w", 30_000, false, None)).unwrap();
                    for j in jobs {
                        let (job, lease) = (j.task.job, Some(j.lease_token));
                        let done = h.step(|e| if ok {
                            e.complete_job(job, lease, &Vars::new())
                        } else {
                            e.fail_job(job, lease, "boom", None, None).map(|_| ())
                        });
                        prop_assert!(matches!(done, Ok(()) | Err(EngineError::UnknownJob(_))), "{done:?}");
                    }
                }
                CompOp::Decide(i, ok) => {
                    if let Some(&inst) = started.get(usize::from(i)) {
                        let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
                        let waiting = rec.tokens.iter().find(|t| t.element == "entscheiden" && t.wait == Wait::Trigger).map(|t| t.id);
                        if let Some(t) = waiting {
                            let vars = crate::model::vars([("ok", ok.into())]);
                            h.step(|e| e.trigger(inst, t, &vars)).unwrap();
                        }
                    }
                }
                CompOp::Storno(k) => {
                    let msg = Publish {
                        name: "Storno".into(),
                        key: k.to_string(),
                        message_id: None,
                        ..Default::default()
                    };
                    h.step(|e| e.publish(&msg)).unwrap();
                }
                CompOp::Cancel(i, t) => h.cancel(started.get(usize::from(i)), t),
                CompOp::Advance(s) => h.advance(s),
            }
            h.check_invariants();
            for &inst in &started {
                let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
                prop_assert!(rec.ended_at.is_none() || rec.tokens.is_empty(), "{rec:?}");
                // a throw that waits holds at least one handler
                for t in rec.tokens.iter().filter(|t| t.wait == Wait::Compensating) {
                    prop_assert!(rec.tokens.iter().any(|c| c.scope == t.id), "{rec:?}");
                }
            }
        }
    }
}

#[test]
fn a_cancelled_transaction_is_compensated_then_left_by_its_cancel_boundary() {
    let mut h = Harness::reference();
    let keys = [("Storno".to_string(), "auftragId".to_string())].into();
    h.step(|e| e.deploy("komp.bpmn", &compensation_model(true), &keys, None))
        .unwrap();
    let vars = crate::model::vars([("auftragId", "1".into())]);
    let inst = h.step(|e| e.start("komp", vars, None)).unwrap();
    for j in h
        .step(|e| e.lock_jobs("hotel", 10, "w", 30_000, false, None))
        .unwrap()
    {
        h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
            .unwrap();
    }
    let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
    let t = rec
        .tokens
        .iter()
        .find(|t| t.element == "entscheiden")
        .unwrap()
        .id;
    h.step(|e| e.trigger(inst, t, &crate::model::vars([("ok", 2.into())])))
        .unwrap();
    h.check_invariants();
    // two hotel bookings (one per inner instance) and the seat are undone
    let undo = |h: &mut Harness, topic: &str| {
        let jobs = h
            .step(|e| e.lock_jobs(topic, 10, "w", 30_000, false, None))
            .unwrap();
        let n = jobs.len();
        for j in jobs {
            h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
                .unwrap();
        }
        n
    };
    assert_eq!(undo(&mut h, "storniereHotel"), 2);
    assert_eq!(undo(&mut h, "sitzFrei"), 1);
    h.check_invariants();
    let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
    assert!(rec.ended_at.is_some(), "{rec:?}");
}

/// An ad-hoc subprocess `klaeren` (parallel or sequential, cancelling the
/// rest or not when `fertig` holds) with a service task `pruefen` that can
/// be compensated, a wait state `warten` behind the plain task `notiz`, and
/// an interrupting boundary timer; after it, a compensation end event.
fn ad_hoc_model(sequential: bool, cancel_remaining: bool) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="adhoc" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="klaeren"/>
    <adHocSubProcess id="klaeren" ordering="{}" cancelRemainingInstances="{cancel_remaining}">
      <serviceTask id="pruefen"/>
      <boundaryEvent id="bp" attachedToRef="pruefen"><compensateEventDefinition/></boundaryEvent>
      <serviceTask id="zurueck" isForCompensation="true"/>
      <association id="a1" sourceRef="bp" targetRef="zurueck"/>
      <task id="notiz"/>
      <sequenceFlow id="g0" sourceRef="notiz" targetRef="warten"/>
      <receiveTask id="warten"/>
      <completionCondition>${{fertig == true}}</completionCondition>
    </adHocSubProcess>
    <boundaryEvent id="frist" attachedToRef="klaeren"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f1" sourceRef="frist" targetRef="ende"/>
    <sequenceFlow id="f2" sourceRef="klaeren" targetRef="undo"/>
    <endEvent id="undo"><compensateEventDefinition/></endEvent>
    <endEvent id="ende"/>
  </process>
</definitions>"#,
        if sequential { "Sequential" } else { "Parallel" }
    )
}

#[derive(Debug, Clone)]
enum AdHocOp {
    Start,
    /// The i-th instance's ad-hoc subprocess: activate 0 pruefen, 1 notiz,
    /// 2 warten (refused), or complete it (3).
    AdHoc(u8, u8),
    /// The workers of pruefen and zurueck complete with `fertig`.
    Work(bool),
    /// The i-th instance's `warten` is triggered with `fertig`.
    Trigger(u8, bool),
    Cancel(u8, u8),
    Advance(u32),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random activations, completions, worker results, triggers, timers and
    /// repairs of ad-hoc subprocesses: after every step the rows match the
    /// records, every token inside runs in an active ad-hoc scope, a refused
    /// command changes nothing, and an ended instance holds no token.
    #[test]
    fn ad_hoc_subprocesses_keep_the_engine_invariants(
        sequential in any::<bool>(),
        cancel_remaining in any::<bool>(),
        ops in proptest::collection::vec(prop_oneof![
            Just(AdHocOp::Start),
            (0..3u8, 0..4u8).prop_map(|(i, a)| AdHocOp::AdHoc(i, a)),
            any::<bool>().prop_map(AdHocOp::Work),
            (0..3u8, any::<bool>()).prop_map(|(i, f)| AdHocOp::Trigger(i, f)),
            (0..3u8, 1..10u8).prop_map(|(i, t)| AdHocOp::Cancel(i, t)),
            (0..2_400u32).prop_map(AdHocOp::Advance),
        ], 1..40)
    ) {
        let mut h = Harness::reference();
        let xml = ad_hoc_model(sequential, cancel_remaining);
        h.step(|e| e.deploy("adhoc.bpmn", &xml, &BTreeMap::new(), None)).unwrap();
        let mut started: Vec<u64> = Vec::new();
        let token_at = |h: &mut Harness, inst: u64, element: &str| {
            let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
            rec.tokens.iter().find(|t| t.element == element).map(|t| t.id)
        };
        for op in ops {
            match op {
                AdHocOp::Start => started.push(h.step(|e| e.start("adhoc", Vars::new(), None)).unwrap()),
                AdHocOp::AdHoc(i, a) => {
                    if let Some(&inst) = started.get(usize::from(i))
                        && let Some(t) = token_at(&mut h, inst, "klaeren")
                    {
                        let activate = ["pruefen", "notiz", "warten"].get(usize::from(a)).copied();
                        let r = h.step(|e| e.ad_hoc(inst, t, activate));
                        prop_assert!(
                            matches!(r, Ok(_) | Err(EngineError::AdHocRefused { .. }) | Err(EngineError::InstanceEnded(_))),
                            "{r:?}"
                        );
                        if a == 2 {
                            prop_assert!(r.is_err(), "warten has an incoming flow");
                        }
                    }
                }
                AdHocOp::Work(fertig) => {
                    for topic in ["pruefen", "zurueck"] {
                        let jobs = h.step(|e| e.lock_jobs(topic, 10, "w", 30_000, false, None)).unwrap();
                        for j in jobs {
                            let vars = crate::model::vars([("fertig", fertig.into())]);
                            let done = h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &vars));
                            prop_assert!(matches!(done, Ok(()) | Err(EngineError::UnknownJob(_))), "{done:?}");
                        }
                    }
                }
                AdHocOp::Trigger(i, fertig) => {
                    if let Some(&inst) = started.get(usize::from(i))
                        && let Some(t) = token_at(&mut h, inst, "warten")
                    {
                        let vars = crate::model::vars([("fertig", fertig.into())]);
                        let _ = h.step(|e| e.trigger(inst, t, &vars));
                    }
                }
                AdHocOp::Cancel(i, t) => h.cancel(started.get(usize::from(i)), t),
                AdHocOp::Advance(s) => h.advance(s),
            }
            h.check_invariants();
            for &inst in &started {
                let rec = h.db.write(|t| t.instance_full(inst).unwrap().unwrap());
                prop_assert!(rec.ended_at.is_none() || rec.tokens.is_empty(), "{rec:?}");
                // a sequential ad-hoc subprocess never runs two activities
                if sequential && let Some(k) = rec.tokens.iter().find(|t| t.element == "klaeren") {
                    let inside = rec.tokens.iter().filter(|t| t.scope == k.id).count();
                    prop_assert!(inside <= 1, "{rec:?}");
                }
            }
        }
    }
}
