//! A signal is a broadcast to every current subscription, never buffered; a
//! signal that reaches nobody is counted so the quiet loss is visible.
use crate::common;
use common::*;

#[tokio::test]
async fn a_signal_reaches_every_waiting_instance() {
    let env = Env::new();
    env.deploy(SIGNALS).await;
    let a = env.pf.start("wartet", no_vars(), None).await.unwrap();
    let b = env.pf.start("wartet", no_vars(), None).await.unwrap();
    let reached = env
        .pf
        .signal("Tarifwechsel", postfach::vars([("tarif", "neu".into())]))
        .await
        .unwrap();
    assert_eq!(reached, 2);
    assert_eq!(env.state(a), "completed");
    assert_eq!(env.state(b), "completed");
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .instance(a)
            .unwrap()
            .unwrap()
            .variables["tarif"],
        "neu"
    );
}

#[tokio::test]
async fn a_signal_nobody_waits_for_is_counted_and_not_buffered() {
    let env = Env::new();
    env.deploy(SIGNALS).await;
    assert_eq!(env.pf.signal("Tarifwechsel", no_vars()).await.unwrap(), 0);
    assert_eq!(
        env.pf.reader().unwrap().counters().unwrap()["signals_unreached"],
        1
    );
    // an instance arriving afterwards does not receive the old signal
    let late = env.pf.start("wartet", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(late), vec!["c"]);
}

#[tokio::test]
async fn a_signal_thrown_by_a_process_reaches_other_instances_in_the_same_commit() {
    let env = Env::new();
    env.deploy(SIGNALS).await;
    let waiting = env.pf.start("wartet", no_vars(), None).await.unwrap();
    let thrower = env.pf.start("wirft", no_vars(), None).await.unwrap();
    assert_eq!(env.state(thrower), "completed");
    assert_eq!(env.state(waiting), "completed");
    let c = env.pf.reader().unwrap().counters().unwrap();
    assert_eq!(c.get("signals_unreached"), None);
}

/// One instance, two branches: the first rests at a signal catch and at a
/// user task under a signal boundary, the second throws the signal — all in
/// the command that starts the instance, before anything is written. The
/// throw reaches both waits opened in that command.
const SAME_STEP: &str = bpmn!(
    r#"
  <signal id="go" name="Los"/>
  <process id="zugleich" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="fang"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="pruefen"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="wurf"/>
    <intermediateCatchEvent id="fang"><signalEventDefinition signalRef="go"/></intermediateCatchEvent>
    <sequenceFlow id="f4" sourceRef="fang" targetRef="e1"/>
    <endEvent id="e1"/>
    <userTask id="pruefen"/>
    <boundaryEvent id="abbruch" attachedToRef="pruefen"><signalEventDefinition signalRef="go"/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="pruefen" targetRef="e2"/>
    <sequenceFlow id="f6" sourceRef="abbruch" targetRef="e3"/>
    <endEvent id="e2"/>
    <endEvent id="e3"/>
    <intermediateThrowEvent id="wurf"><signalEventDefinition signalRef="go"/></intermediateThrowEvent>
    <sequenceFlow id="f7" sourceRef="wurf" targetRef="e4"/>
    <endEvent id="e4"/>
  </process>
"#
);

#[tokio::test]
async fn a_signal_reaches_the_waits_opened_earlier_in_the_same_command() {
    let env = Env::new();
    env.deploy(SAME_STEP).await;
    let id = env.pf.start("zugleich", no_vars(), None).await.unwrap();
    assert_eq!(env.state(id), "completed", "{:?}", env.waiting_at(id));
    let detail = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let events: Vec<String> = detail
        .history
        .iter()
        .map(|h| format!("{} {}", h.element, h.event))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("wurf signal_thrown reached=2")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e.starts_with("abbruch ")),
        "{events:?}"
    );
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .counters()
            .unwrap()
            .get("signals_unreached"),
        None
    );
}

const STARTS_AND_ENDS: &str = bpmn!(
    r#"
  <signal id="tw" name="Tarifwechsel"/>
  <process id="aufSignal" isExecutable="true">
    <startEvent id="los"><signalEventDefinition signalRef="tw"/></startEvent>
    <sequenceFlow id="a1" sourceRef="los" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="a2" sourceRef="pruefen" targetRef="a3e"/>
    <endEvent id="a3e"/>
  </process>
  <process id="wirftAmEnde" isExecutable="true">
    <startEvent id="w0"/>
    <sequenceFlow id="w1" sourceRef="w0" targetRef="ende"/>
    <endEvent id="ende"><signalEventDefinition signalRef="tw"/></endEvent>
  </process>
"#
);

/// A signal start event starts an instance of its process for every
/// broadcast, with the signal's variables; a signal end event broadcasts and
/// ends. A signal that only starts an instance reached something.
#[tokio::test]
async fn a_signal_starts_the_processes_that_start_on_it_and_an_end_event_throws_it() {
    let env = Env::new();
    env.deploy(SIGNALS).await;
    env.deploy(STARTS_AND_ENDS).await;
    let waiting = env.pf.start("wartet", no_vars(), None).await.unwrap();
    let reached = env
        .pf
        .signal("Tarifwechsel", postfach::vars([("tarif", "neu".into())]))
        .await
        .unwrap();
    assert_eq!(reached, 2, "the waiting catch and one new instance");
    assert_eq!(env.state(waiting), "completed");
    let started: Vec<_> = env
        .pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap()
        .into_iter()
        .filter(|i| i.process == "aufSignal")
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].waiting_at, ["pruefen"]);
    let id: u64 = started[0].instance.parse().unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.variables["tarif"], "neu");

    // the end event throws it: another instance starts, the thrower ends
    let thrower = env.pf.start("wirftAmEnde", no_vars(), None).await.unwrap();
    assert_eq!(env.state(thrower), "completed");
    let n = env
        .pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap()
        .into_iter()
        .filter(|i| i.process == "aufSignal")
        .count();
    assert_eq!(n, 2);
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .counters()
            .unwrap()
            .get("signals_unreached"),
        None
    );
}
