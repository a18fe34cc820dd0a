//! Event subprocesses (`triggeredByEvent="true"`): while their scope is
//! active they listen for their start event — a message (by the instance's
//! key), a timer, a signal, or an error or escalation thrown inside the scope.
//! An interrupting one withdraws everything else in the scope with its jobs,
//! timers and subscriptions and runs instead; a non-interrupting one runs
//! beside it, once per event, and keeps the scope open until it is done.
//! When the scope ends, its listeners stop: a later message is late.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, Reason};
use std::time::Duration;

/// `s → arbeit (job) → e`, with an event subprocess `esp` started by
/// `start_def` (interrupting or not) that runs `esp_inner` between its start
/// `es` and its end `ee`.
fn model(start_def: &str, interrupting: bool, esp_inner: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <message id="ms" name="Storno"/>
  <signal id="sg" name="Rueckruf"/>
  <error id="er" errorCode="DEFEKT"/>
  <escalation id="ec" escalationCode="SPAET"/>
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="f1" sourceRef="arbeit" targetRef="e"/>
    <endEvent id="e"/>
    <subProcess id="esp" triggeredByEvent="true">
      <startEvent id="es" isInterrupting="{interrupting}">{start_def}</startEvent>
      <sequenceFlow id="x0" sourceRef="es" targetRef="drin"/>
      {esp_inner}
      <sequenceFlow id="x1" sourceRef="drin" targetRef="ee"/>
      <endEvent id="ee"/>
    </subProcess>
  </process>
</definitions>"#
    )
}

const MESSAGE: &str = r#"<messageEventDefinition messageRef="ms"/>"#;
const WORK: &str = r#"<serviceTask id="drin"/>"#;
const PASS: &str = r#"<task id="drin"/>"#;

async fn deploy(env: &Env, xml: &str) {
    env.pf
        .deploy(
            "esp.bpmn",
            xml,
            [("Storno".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .expect("a model with an event subprocess deploys");
}

fn storno(key: &str, id: &str) -> Publish {
    Publish {
        name: "Storno".into(),
        key: key.into(),
        message_id: Some(id.into()),
        variables: postfach::vars([("grund", "Kunde".into())]),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_interrupting_message_event_subprocess_withdraws_the_process_and_runs_instead() {
    let env = Env::new();
    deploy(&env, &model(MESSAGE, true, WORK)).await;
    let id = env.start_keyed("p", "A-1").await;
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["arbeit", "esp"],
        "the event subprocess listens beside the task"
    );
    let d = env.pf.publish(storno("A-1", "s-1")).await.unwrap();
    assert_eq!(
        (d.outcome, d.element.as_deref()),
        (Outcome::Correlated, Some("esp"))
    );
    assert_eq!(sorted(env.waiting_at(id)), ["drin", "esp"]);
    let jobs: Vec<String> = env.jobs().into_iter().map(|j| j.element).collect();
    assert_eq!(
        jobs,
        ["drin"],
        "the task's job went with the interrupted scope"
    );
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(
        v.variables["grund"], "Kunde",
        "the message's variables arrive"
    );

    let again = env.pf.publish(storno("A-1", "s-2")).await.unwrap();
    assert_eq!(
        (again.outcome, again.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "the interrupting listener is gone"
    );
    env.complete_jobs("drin", no_vars()).await;
    assert_eq!(env.state(id), "completed");
    assert!(!has(&env.history(id), "e", "completed"));
}

#[tokio::test]
async fn a_non_interrupting_message_event_subprocess_runs_once_per_message_beside_the_process() {
    let env = Env::new();
    deploy(&env, &model(MESSAGE, false, WORK)).await;
    let id = env.start_keyed("p", "A-2").await;
    for n in 1..=2 {
        let d = env
            .pf
            .publish(storno("A-2", &format!("s-{n}")))
            .await
            .unwrap();
        assert_eq!(d.element.as_deref(), Some("esp"), "message {n}");
    }
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["arbeit", "drin", "drin", "esp", "esp", "esp"],
        "the task, two running occurrences and the listener"
    );
    // the process's own path ends; the occurrences keep the instance open
    let arbeit = env.lock("arbeit", 1, "w", 60_000).await.remove(0);
    env.pf
        .complete_job(arbeit.task.job, Some(arbeit.lease_token), no_vars())
        .await
        .unwrap();
    assert_eq!(env.state(id), "active");
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["drin", "drin", "esp", "esp", "esp"],
        "the listener still listens while the scope is active"
    );
    assert_eq!(env.complete_jobs("drin", no_vars()).await, 2);
    assert_eq!(env.state(id), "completed");
    let late = env.pf.publish(storno("A-2", "s-3")).await.unwrap();
    assert_eq!(late.reason, Some(Reason::Late), "the scope ended: late");
}

/// `s → vorher (job) → sub (subprocess: innen (job), event subprocess
/// `abbruch` on message Storno) → nachher (job) → e`.
const NESTED: &str = bpmn!(
    r#"
  <message id="ms" name="Storno"/>
  <process id="q" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="vorher"/>
    <serviceTask id="vorher"/>
    <sequenceFlow id="f1" sourceRef="vorher" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="innen"/>
      <serviceTask id="innen"/>
      <subProcess id="abbruch" triggeredByEvent="true">
        <startEvent id="as"><messageEventDefinition messageRef="ms"/></startEvent>
        <sequenceFlow id="a0" sourceRef="as" targetRef="ae"/>
        <endEvent id="ae"/>
      </subProcess>
    </subProcess>
    <sequenceFlow id="f2" sourceRef="sub" targetRef="nachher"/>
    <serviceTask id="nachher"/>
    <sequenceFlow id="f3" sourceRef="nachher" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn a_subprocess_that_completes_stops_its_listeners_without_cancelling_anything() {
    let env = Env::new();
    deploy(&env, NESTED).await;
    let id = env.start_keyed("q", "B-2").await;
    env.complete_jobs("vorher", no_vars()).await;
    assert_eq!(sorted(env.waiting_at(id)), ["abbruch", "innen", "sub"]);
    env.complete_jobs("innen", no_vars()).await;
    assert_eq!(env.waiting_at(id), ["nachher"]);
    let h = env.history(id);
    assert!(has(&h, "sub", "completed"), "{h:?}");
    assert!(
        !has(&h, "sub", "scope_cancelled"),
        "the subprocess completed; its listener stopping is no cancellation: {h:?}"
    );
    let late = env.pf.publish(storno("B-2", "s-b2")).await.unwrap();
    assert_eq!(
        late.reason,
        Some(Reason::Late),
        "the listener stopped with its scope"
    );
}

#[tokio::test]
async fn a_message_for_an_event_subprocess_of_a_subprocess_not_yet_entered_is_buffered_then_taken()
{
    let xml = NESTED;
    let env = Env::new();
    deploy(&env, xml).await;
    let id = env.start_keyed("q", "B-1").await;
    let early = env.pf.publish(storno("B-1", "s-b")).await.unwrap();
    assert_eq!(
        early.outcome,
        Outcome::Buffered,
        "the instance will enter the subprocess whose event subprocess waits for it"
    );
    env.complete_jobs("vorher", no_vars()).await;
    assert_eq!(
        env.waiting_at(id),
        ["nachher"],
        "entered, interrupted by the buffered message, completed, moved on"
    );
    let h = env.history(id);
    assert!(has(&h, "abbruch", "message_correlated"), "{h:?}");
    assert!(!has(&h, "innen", "completed"), "{h:?}");
}

#[tokio::test]
async fn a_non_interrupting_timer_cycle_starts_one_occurrence_per_due_time() {
    let env = Env::new();
    let timer = r#"<timerEventDefinition><timeCycle>R2/PT1H</timeCycle></timerEventDefinition>"#;
    deploy(&env, &model(timer, false, PASS)).await;
    let id = env.start_keyed("p", "T-1").await;
    for hour in 1..=3 {
        env.advance(Duration::from_secs(3600));
        env.pf.run_continuations(100).await.unwrap();
        let fired = env
            .history(id)
            .iter()
            .filter(|(e, ev)| e == "esp" && ev == "timer_fired")
            .count();
        assert_eq!(fired, hour.min(2), "after hour {hour}");
    }
    assert_eq!(
        env.waiting_at(id),
        ["arbeit"],
        "two occurrences ran through; the listener is done after R2"
    );
    env.complete_jobs("arbeit", no_vars()).await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn an_interrupting_signal_event_subprocess_withdraws_the_task() {
    let env = Env::new();
    let signal = r#"<signalEventDefinition signalRef="sg"/>"#;
    deploy(&env, &model(signal, true, PASS)).await;
    let id = env.start_keyed("p", "S-1").await;
    assert_eq!(env.pf.signal("Rueckruf", no_vars()).await.unwrap(), 1);
    assert_eq!(env.state(id), "completed");
    assert!(env.jobs().is_empty());
    assert!(has(&env.history(id), "esp", "signal_received"));
}

#[tokio::test]
async fn an_error_event_subprocess_catches_a_workers_bpmn_error_in_its_scope() {
    let env = Env::new();
    let error = r#"<errorEventDefinition errorRef="er"/>"#;
    deploy(&env, &model(error, true, WORK)).await;
    let id = env.start_keyed("p", "E-1").await;
    assert_eq!(
        env.waiting_at(id),
        ["arbeit"],
        "an error event subprocess needs no listener"
    );
    let job = env.lock("arbeit", 1, "w", 60_000).await.remove(0);
    let caught = env
        .pf
        .throw_error(
            job.task.job,
            Some(job.lease_token),
            "DEFEKT",
            "kaputt",
            no_vars(),
        )
        .await
        .unwrap();
    assert!(caught);
    assert_eq!(sorted(env.waiting_at(id)), ["drin", "esp"]);
    assert!(has(&env.history(id), "esp", "error_caught"));
    env.complete_jobs("drin", no_vars()).await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn an_error_event_subprocess_inside_a_subprocess_catches_before_the_subprocess_boundary() {
    let xml = bpmn!(
        r#"
  <error id="er" errorCode="DEFEKT"/>
  <process id="r" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="boom"/>
      <endEvent id="boom"><errorEventDefinition errorRef="er"/></endEvent>
      <subProcess id="reparatur" triggeredByEvent="true">
        <startEvent id="rs"><errorEventDefinition errorRef="er"/></startEvent>
        <sequenceFlow id="r0" sourceRef="rs" targetRef="re"/>
        <endEvent id="re"/>
      </subProcess>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="sub" targetRef="gut"/>
    <endEvent id="gut"/>
    <boundaryEvent id="aussen" attachedToRef="sub"><errorEventDefinition/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="aussen" targetRef="schlecht"/>
    <endEvent id="schlecht"/>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("r", "E-2").await;
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    assert!(has(&h, "reparatur", "error_caught"), "{h:?}");
    assert!(has(&h, "gut", "completed"), "{h:?}");
    assert!(!has(&h, "aussen", "error_caught"), "{h:?}");
}

#[tokio::test]
async fn a_non_interrupting_escalation_event_subprocess_runs_beside_the_thrower() {
    let xml = bpmn!(
        r#"
  <escalation id="ec" escalationCode="SPAET"/>
  <process id="t" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="hoch"/>
    <intermediateThrowEvent id="hoch"><escalationEventDefinition escalationRef="ec"/></intermediateThrowEvent>
    <sequenceFlow id="f1" sourceRef="hoch" targetRef="weiter"/>
    <serviceTask id="weiter"/>
    <sequenceFlow id="f2" sourceRef="weiter" targetRef="e"/>
    <endEvent id="e"/>
    <subProcess id="melden" triggeredByEvent="true">
      <startEvent id="ms" isInterrupting="false"><escalationEventDefinition escalationRef="ec"/></startEvent>
      <sequenceFlow id="m0" sourceRef="ms" targetRef="anrufen"/>
      <serviceTask id="anrufen"/>
      <sequenceFlow id="m1" sourceRef="anrufen" targetRef="me"/>
      <endEvent id="me"/>
    </subProcess>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("t", "X-1").await;
    assert_eq!(sorted(env.waiting_at(id)), ["anrufen", "melden", "weiter"]);
    env.complete_jobs("weiter", no_vars()).await;
    assert_eq!(
        env.state(id),
        "active",
        "the occurrence keeps the scope open"
    );
    env.complete_jobs("anrufen", no_vars()).await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn event_subprocess_models_that_cannot_run_are_refused_naming_the_element() {
    let env = Env::new();
    let flow_in = bpmn!(
        r#"
  <message id="ms" name="Storno"/>
  <process id="u" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="hinein" sourceRef="s" targetRef="esp"/>
    <subProcess id="esp" triggeredByEvent="true">
      <startEvent id="es"/>
    </subProcess>
    <subProcess id="esp2" triggeredByEvent="true">
      <startEvent id="es2" isInterrupting="false"><errorEventDefinition/></startEvent>
    </subProcess>
  </process>
"#
    );
    let err = env.refusal(flow_in).await;
    assert!(
        err.contains("hinein") && err.contains("event subprocess 'esp'"),
        "{err}"
    );
    assert!(
        err.contains("es") && err.contains("needs a message, timer, signal, error or escalation"),
        "{err}"
    );
    assert!(
        err.contains("es2") && err.contains("always interrupts"),
        "{err}"
    );
}
