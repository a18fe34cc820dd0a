//! Error and escalation end events, escalation throw events and the boundary
//! events that catch them on subprocesses: the innermost subprocess with a
//! matching boundary event catches; an interrupting one cancels its
//! subprocess with everything inside; an error nobody catches is an incident
//! at the end event, an escalation nobody catches is recorded and the token
//! goes on.
use crate::common;
use common::*;

/// `s → aussen (subprocess: innen (subprocess: fork → [arbeit (job) | wirf]) → ae)
/// → e`; `wirf` is the throwing element given, `innen` catches `innen_catches`,
/// `aussen` catches every error and every escalation (interrupting or not).
fn model(wirf: &str, innen_catches: &str, aussen_cancels: bool) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <error id="err-defekt" errorCode="DEFEKT"/>
  <error id="err-anders" errorCode="ANDERS"/>
  <escalation id="esc-spaet" escalationCode="SPAET"/>
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="aussen"/>
    <subProcess id="aussen">
      <startEvent id="as"/>
      <sequenceFlow id="a0" sourceRef="as" targetRef="innen"/>
      <subProcess id="innen">
        <startEvent id="is"/>
        <sequenceFlow id="i0" sourceRef="is" targetRef="fork"/>
        <parallelGateway id="fork"/>
        <sequenceFlow id="i1" sourceRef="fork" targetRef="arbeit"/>
        <sequenceFlow id="i2" sourceRef="fork" targetRef="wirf"/>
        <serviceTask id="arbeit"/>
        {wirf}
      </subProcess>
      <sequenceFlow id="a1" sourceRef="innen" targetRef="ae"/>
      <endEvent id="ae"/>
      <boundaryEvent id="innenFaengt" attachedToRef="innen">{innen_catches}</boundaryEvent>
      <sequenceFlow id="a2" sourceRef="innenFaengt" targetRef="innenGefangen"/>
      <endEvent id="innenGefangen"/>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="aussen" targetRef="e"/>
    <endEvent id="e"/>
    <boundaryEvent id="aussenFehler" attachedToRef="aussen"><errorEventDefinition/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="aussenFehler" targetRef="fehlerEnde"/>
    <endEvent id="fehlerEnde"/>
    <boundaryEvent id="aussenEskalation" attachedToRef="aussen" cancelActivity="{aussen_cancels}"><escalationEventDefinition/></boundaryEvent>
    <sequenceFlow id="f3" sourceRef="aussenEskalation" targetRef="eskalationEnde"/>
    <endEvent id="eskalationEnde"/>
  </process>
</definitions>"#
    )
}

const ERROR_END: &str =
    r#"<endEvent id="wirf"><errorEventDefinition errorRef="err-defekt"/></endEvent>"#;
const ESCALATION_END: &str =
    r#"<endEvent id="wirf"><escalationEventDefinition escalationRef="esc-spaet"/></endEvent>"#;

#[tokio::test]
async fn an_error_end_event_is_caught_by_the_innermost_subprocess_whose_code_matches() {
    let env = Env::new();
    env.deploy(&model(
        ERROR_END,
        r#"<errorEventDefinition errorRef="err-defekt"/>"#,
        true,
    ))
    .await;
    let id = env.start_keyed("p", "1").await;
    let h = env.history(id);
    assert!(has(&h, "wirf", "bpmn_error DEFEKT"), "{h:?}");
    assert!(has(&h, "innenFaengt", "error_caught"), "{h:?}");
    assert!(has(&h, "innen", "scope_cancelled"), "{h:?}");
    assert!(
        env.jobs().is_empty(),
        "the job beside the error end went with its subprocess"
    );
    assert_eq!(env.state(id), "completed");
    assert!(
        has(&h, "e", "completed"),
        "aussen completed normally: {h:?}"
    );
    assert!(!has(&h, "aussenFehler", "error_caught"));
}

#[tokio::test]
async fn an_error_whose_code_the_inner_boundary_does_not_catch_reaches_the_outer_one() {
    let env = Env::new();
    env.deploy(&model(
        ERROR_END,
        r#"<errorEventDefinition errorRef="err-anders"/>"#,
        true,
    ))
    .await;
    let id = env.start_keyed("p", "2").await;
    let h = env.history(id);
    assert!(has(&h, "aussenFehler", "error_caught"), "{h:?}");
    assert!(has(&h, "fehlerEnde", "completed"), "{h:?}");
    assert!(!has(&h, "e", "completed"));
    assert_eq!(env.state(id), "completed");
    assert!(env.jobs().is_empty());
}

#[tokio::test]
async fn an_error_end_event_nobody_catches_stops_at_an_incident() {
    let xml = bpmn!(
        r#"
  <error id="x" errorCode="X"/>
  <process id="q" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="boom"/>
      <endEvent id="boom"><errorEventDefinition errorRef="x"/></endEvent>
    </subProcess>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("q", "3").await;
    assert_eq!(env.state(id), "incident");
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert!(
        v.incidents
            .iter()
            .any(|i| i.contains("boom") && i.contains("'X'") && i.contains("not caught")),
        "{:?}",
        v.incidents
    );
}

#[tokio::test]
async fn an_interrupting_escalation_boundary_cancels_the_subprocess_the_escalation_came_from() {
    let env = Env::new();
    // innen catches only errors: the escalation climbs to aussen
    env.deploy(&model(
        ESCALATION_END,
        r#"<errorEventDefinition errorRef="err-anders"/>"#,
        true,
    ))
    .await;
    let id = env.start_keyed("p", "4").await;
    let h = env.history(id);
    assert!(has(&h, "wirf", "escalation_thrown SPAET"), "{h:?}");
    assert!(has(&h, "aussenEskalation", "escalation_caught"), "{h:?}");
    assert!(has(&h, "aussen", "scope_cancelled"), "{h:?}");
    assert_eq!(env.state(id), "completed");
    assert!(env.jobs().is_empty(), "'arbeit' went with aussen");
}

#[tokio::test]
async fn a_non_interrupting_escalation_branches_and_the_thrower_goes_on() {
    let env = Env::new();
    let throw = r#"<intermediateThrowEvent id="wirf"><escalationEventDefinition escalationRef="esc-spaet"/></intermediateThrowEvent>
        <sequenceFlow id="i3" sourceRef="wirf" targetRef="nachher"/>
        <serviceTask id="nachher"/>"#;
    env.deploy(&model(
        throw,
        r#"<errorEventDefinition errorRef="err-anders"/>"#,
        false,
    ))
    .await;
    let id = env.start_keyed("p", "5").await;
    let h = env.history(id);
    assert!(has(&h, "eskalationEnde", "completed"), "{h:?}");
    let mut waiting = env.waiting_at(id);
    waiting.sort();
    assert_eq!(
        waiting,
        ["arbeit", "aussen", "innen", "nachher"],
        "the subprocesses run on, the throw event's token went on"
    );
}

#[tokio::test]
async fn an_escalation_nobody_catches_is_recorded_and_the_token_goes_on() {
    let xml = bpmn!(
        r#"
  <process id="r" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="hoch"/>
    <intermediateThrowEvent id="hoch"><escalationEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f1" sourceRef="hoch" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("r", "6").await;
    assert_eq!(env.state(id), "completed");
    assert!(has(&env.history(id), "hoch", "escalation_uncaught"));
}

#[tokio::test]
async fn an_escalation_boundary_on_a_task_is_refused_naming_it() {
    let xml = bpmn!(
        r#"
  <process id="t" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <boundaryEvent id="hoch" attachedToRef="arbeit"><escalationEventDefinition/></boundaryEvent>
  </process>
"#
    );
    let env = Env::new();
    let err = env.refusal(xml).await;
    assert!(
        err.contains("hoch") && err.contains("not a subprocess"),
        "{err}"
    );
}
