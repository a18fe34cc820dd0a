//! Compensation as Camunda 7's `CompensateEventTest` drives it: an activity
//! with a compensation boundary event that has completed can be undone by its
//! handler (the `isForCompensation` activity its association points to). A
//! compensation throw or end event starts the handlers of its scope's
//! completed activities in reverse order of completion — each completion
//! once, an inner instance of a multi-instance activity with its own item —
//! and waits until they have completed; a completed subprocess is undone by
//! undoing what completed inside it, or by its compensation event
//! subprocess. Work of a cancelled scope is not compensated, and a
//! completion is compensated once.
use crate::common;
use common::*;
use postfach::vars;

/// Books a hotel and a flight, then compensates both: the hotel's handler
/// passes through, the flight's waits as a job.
const REISE: &str = bpmn!(
    r#"
  <process id="reise" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="bookHotel"/>
    <task id="bookHotel"/>
    <boundaryEvent id="bHotel" attachedToRef="bookHotel"><compensateEventDefinition/></boundaryEvent>
    <task id="undoHotel" isForCompensation="true"/>
    <association id="a1" sourceRef="bHotel" targetRef="undoHotel"/>
    <sequenceFlow id="f2" sourceRef="bookHotel" targetRef="bookFlight"/>
    <task id="bookFlight"/>
    <boundaryEvent id="bFlight" attachedToRef="bookFlight"><compensateEventDefinition/></boundaryEvent>
    <serviceTask id="undoFlight" isForCompensation="true"/>
    <association id="a2" sourceRef="bFlight" targetRef="undoFlight"/>
    <sequenceFlow id="f3" sourceRef="bookFlight" targetRef="undo"/>
    <intermediateThrowEvent id="undo"><compensateEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f4" sourceRef="undo" targetRef="nachher"/>
    <receiveTask id="nachher"/>
    <sequenceFlow id="f5" sourceRef="nachher" targetRef="again"/>
    <intermediateThrowEvent id="again"><compensateEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f6" sourceRef="again" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

fn position(h: &[(String, String)], element: &str, event: &str) -> usize {
    h.iter()
        .position(|(el, ev)| el == element && ev.starts_with(event))
        .unwrap_or_else(|| panic!("no '{event}' at '{element}' in {h:#?}"))
}

#[tokio::test]
async fn a_throw_undoes_completed_work_in_reverse_order_and_waits_for_it() {
    let env = Env::new();
    env.deploy(REISE).await;
    let id = env.pf.start("reise", no_vars(), None).await.unwrap();
    // the flight completed last: its handler starts first
    let h = env.history(id);
    assert!(
        position(&h, "bookFlight", "compensating by undoFlight")
            < position(&h, "bookHotel", "compensating by undoHotel"),
        "{h:#?}"
    );
    assert!(has(&h, "undoHotel", "completed"), "{h:#?}");
    // the throw waits for the flight's handler, a job
    assert_eq!(sorted(env.waiting_at(id)), ["undo", "undoFlight"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let throw = v.tokens.iter().find(|t| t.element == "undo").unwrap();
    assert_eq!(throw.waits_for, "its compensation handlers to complete");
    assert_eq!(env.complete_jobs("undoFlight", no_vars()).await, 1);
    assert_eq!(env.waiting_at(id), ["nachher"]);

    // each completion is compensated once: the second throw finds nothing
    let t = env.token_at(id, "nachher");
    env.pf.trigger(id, t, no_vars()).await.unwrap();
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    assert!(has(&h, "again", "compensation_thrown handlers=0"), "{h:#?}");
    assert_eq!(
        h.iter()
            .filter(|(_, ev)| ev.starts_with("compensating"))
            .count(),
        2
    );
}

/// A multi-instance activity leaves one compensable completion per inner
/// instance, each with its item; `waitForCompletion="false"` lets the
/// throw go on while the handlers run.
const HOTELS: &str = bpmn!(
    r#"
  <process id="hotels" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="book"/>
    <task id="book">
      <multiInstanceLoopCharacteristics isSequential="true" collection="${hotels}" elementVariable="hotel"/>
    </task>
    <boundaryEvent id="b" attachedToRef="book"><compensateEventDefinition/></boundaryEvent>
    <serviceTask id="cancelBooking" isForCompensation="true"/>
    <association id="a" sourceRef="b" targetRef="cancelBooking"/>
    <sequenceFlow id="f2" sourceRef="book" targetRef="undo"/>
    <intermediateThrowEvent id="undo"><compensateEventDefinition waitForCompletion="false"/></intermediateThrowEvent>
    <sequenceFlow id="f3" sourceRef="undo" targetRef="nachher"/>
    <userTask id="nachher"/>
    <sequenceFlow id="f4" sourceRef="nachher" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn each_inner_instance_is_undone_with_its_own_item() {
    let env = Env::new();
    env.deploy(HOTELS).await;
    let hotels = serde_json::json!(["Adlon", "Sacher", "Ritz"]);
    let id = env
        .pf
        .start("hotels", vars([("hotels", hotels)]), None)
        .await
        .unwrap();
    // the throw did not wait: the user task is open beside three handlers
    assert_eq!(
        sorted(env.waiting_at(id)),
        [
            "cancelBooking",
            "cancelBooking",
            "cancelBooking",
            "nachher",
            "undo"
        ]
    );
    let jobs = env.lock("cancelBooking", 10, "w", 60_000).await;
    let mut items: Vec<String> = jobs
        .iter()
        .map(|j| j.task.variables["hotel"].as_str().unwrap().to_string())
        .collect();
    // started in reverse order of completion
    assert_eq!(items, ["Ritz", "Sacher", "Adlon"]);
    items.sort();
    assert_eq!(items, ["Adlon", "Ritz", "Sacher"]);
    for j in &jobs {
        env.pf
            .complete_job(j.task.job, Some(j.lease_token), no_vars())
            .await
            .unwrap();
    }
    // the holder of the handlers ends with them; the instance goes on
    assert_eq!(env.waiting_at(id), ["nachher"]);
}

/// Camunda's `testCompensateSubprocess`: the throw names a completed
/// subprocess, which is undone by undoing what completed inside it.
const SUBPROCESS: &str = bpmn!(
    r#"
  <process id="sp" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="scope"/>
    <subProcess id="scope">
      <startEvent id="ss"/>
      <sequenceFlow id="g1" sourceRef="ss" targetRef="bookHotel"/>
      <task id="bookHotel"/>
      <boundaryEvent id="bHotel" attachedToRef="bookHotel"><compensateEventDefinition/></boundaryEvent>
      <task id="undoHotel" isForCompensation="true"/>
      <association id="a1" sourceRef="bHotel" targetRef="undoHotel"/>
      <sequenceFlow id="g2" sourceRef="bookHotel" targetRef="bookCar"/>
      <task id="bookCar"/>
      <boundaryEvent id="bCar" attachedToRef="bookCar"><compensateEventDefinition/></boundaryEvent>
      <task id="undoCar" isForCompensation="true"/>
      <association id="a2" sourceRef="bCar" targetRef="undoCar"/>
      <sequenceFlow id="g3" sourceRef="bookCar" targetRef="se"/>
      <endEvent id="se"/>
    </subProcess>
    <sequenceFlow id="f2" sourceRef="scope" targetRef="undo"/>
    <intermediateThrowEvent id="undo"><compensateEventDefinition activityRef="scope"/></intermediateThrowEvent>
    <sequenceFlow id="f3" sourceRef="undo" targetRef="nachher"/>
    <receiveTask id="nachher"/>
    <sequenceFlow id="f4" sourceRef="nachher" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn a_completed_subprocess_is_undone_from_the_inside_out() {
    let env = Env::new();
    env.deploy(SUBPROCESS).await;
    let id = env.pf.start("sp", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["nachher"]);
    let h = env.history(id);
    assert!(
        position(&h, "undoCar", "completed") < position(&h, "undoHotel", "completed"),
        "{h:#?}"
    );
    assert!(has(&h, "undo", "compensation_thrown handlers=2"), "{h:#?}");
}

/// Camunda's `testCompensationEventSubProcess`: a subprocess with a
/// compensation event subprocess is undone by it; inside, a throw with an
/// `activityRef` undoes one activity of the subprocess at a time.
const EVENT_SUBPROCESS: &str = bpmn!(
    r#"
  <process id="esp" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="booking"/>
    <subProcess id="booking">
      <startEvent id="bs"/>
      <sequenceFlow id="g1" sourceRef="bs" targetRef="bookFlight"/>
      <task id="bookFlight"/>
      <boundaryEvent id="bFlight" attachedToRef="bookFlight"><compensateEventDefinition/></boundaryEvent>
      <task id="cancelFlight" isForCompensation="true"/>
      <association id="a1" sourceRef="bFlight" targetRef="cancelFlight"/>
      <sequenceFlow id="g2" sourceRef="bookFlight" targetRef="bookHotel"/>
      <task id="bookHotel"/>
      <boundaryEvent id="bHotel" attachedToRef="bookHotel"><compensateEventDefinition/></boundaryEvent>
      <serviceTask id="cancelHotel" isForCompensation="true"/>
      <association id="a2" sourceRef="bHotel" targetRef="cancelHotel"/>
      <sequenceFlow id="g3" sourceRef="bookHotel" targetRef="be"/>
      <endEvent id="be"/>
      <subProcess id="onCompensation" triggeredByEvent="true">
        <startEvent id="cs"><compensateEventDefinition/></startEvent>
        <sequenceFlow id="c1" sourceRef="cs" targetRef="undoFlight"/>
        <intermediateThrowEvent id="undoFlight"><compensateEventDefinition activityRef="bookFlight"/></intermediateThrowEvent>
        <sequenceFlow id="c2" sourceRef="undoFlight" targetRef="undoHotel"/>
        <intermediateThrowEvent id="undoHotel"><compensateEventDefinition activityRef="bookHotel"/></intermediateThrowEvent>
        <sequenceFlow id="c3" sourceRef="undoHotel" targetRef="ce"/>
        <endEvent id="ce"/>
      </subProcess>
    </subProcess>
    <sequenceFlow id="f2" sourceRef="booking" targetRef="undo"/>
    <endEvent id="undo"><compensateEventDefinition/></endEvent>
  </process>
"#
);

#[tokio::test]
async fn a_compensation_event_subprocess_undoes_its_subprocess_in_its_own_order() {
    let env = Env::new();
    env.deploy(EVENT_SUBPROCESS).await;
    let id = env.pf.start("esp", no_vars(), None).await.unwrap();
    // the event subprocess undid the flight first, although it completed first,
    // and now waits for the hotel's handler
    let h = env.history(id);
    assert!(has(&h, "onCompensation", "compensation_started"), "{h:#?}");
    assert!(
        position(&h, "cancelFlight", "completed") < position(&h, "bookHotel", "compensating"),
        "{h:#?}"
    );
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["cancelHotel", "onCompensation", "undo", "undoHotel"]
    );
    env.complete_jobs("cancelHotel", no_vars()).await;
    assert_eq!(env.state(id), "completed");
}

/// Work completed in a scope that is then cancelled (here by an error it
/// throws) is not compensated: the throw after the error boundary finds
/// nothing.
const CANCELLED: &str = bpmn!(
    r#"
  <process id="abbruch" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="scope"/>
    <subProcess id="scope">
      <startEvent id="ss"/>
      <sequenceFlow id="g1" sourceRef="ss" targetRef="book"/>
      <task id="book"/>
      <boundaryEvent id="b" attachedToRef="book"><compensateEventDefinition/></boundaryEvent>
      <task id="unbook" isForCompensation="true"/>
      <association id="a" sourceRef="b" targetRef="unbook"/>
      <sequenceFlow id="g2" sourceRef="book" targetRef="fail"/>
      <endEvent id="fail"><errorEventDefinition/></endEvent>
    </subProcess>
    <boundaryEvent id="caught" attachedToRef="scope"><errorEventDefinition/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="caught" targetRef="undo"/>
    <intermediateThrowEvent id="undo"><compensateEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f3" sourceRef="undo" targetRef="e"/>
    <endEvent id="e"/>
    <sequenceFlow id="f4" sourceRef="scope" targetRef="e"/>
  </process>
"#
);

#[tokio::test]
async fn work_of_a_cancelled_scope_is_not_compensated() {
    let env = Env::new();
    env.deploy(CANCELLED).await;
    let id = env.pf.start("abbruch", no_vars(), None).await.unwrap();
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    assert!(has(&h, "undo", "compensation_thrown handlers=0"), "{h:#?}");
    assert!(!h.iter().any(|(el, _)| el == "unbook"), "{h:#?}");
}
