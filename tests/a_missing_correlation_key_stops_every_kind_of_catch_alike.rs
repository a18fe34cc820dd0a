//! Every kind of message catch — a catch event, a message boundary event, a
//! message event subprocess, a branch of an event-based gateway — resolves
//! its correlation key in one place: when the key variable is not set, the
//! token stops at an incident with the same text, naming the variable, the
//! message and (for all but the catch event itself) the catching element.
use crate::common;
use common::*;
use postfach::Vars;

fn model(body: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="t">
  <message id="m" name="Lieferung" postfach:correlationKey="lieferId"/>
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="a"/>
    {body}
  </process>
</definitions>"#
    )
}

async fn incident_of(body: &str) -> String {
    let env = Env::new();
    env.deploy(&model(body)).await;
    let id = env.pf.start("p", Vars::new(), None).await.unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.state, "incident", "{body}");
    assert_eq!(v.incidents.len(), 1, "{:?}", v.incidents);
    v.incidents[0].clone()
}

const HINT: &str = "is not set: set the variable and move the token here again";

#[tokio::test]
async fn a_catch_event_names_the_variable_and_the_message() {
    let text = incident_of(
        r#"<intermediateCatchEvent id="a"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>"#,
    )
    .await;
    assert!(
        text.contains(&format!(
            "correlation key variable 'lieferId' of message 'Lieferung' {HINT}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_boundary_event_names_itself() {
    let text = incident_of(
        r#"<serviceTask id="a"/>
    <boundaryEvent id="storno" attachedToRef="a"><messageEventDefinition messageRef="m"/></boundaryEvent>"#,
    )
    .await;
    assert!(
        text.contains(&format!(
            "correlation key variable 'lieferId' of message 'Lieferung' (boundary event 'storno') {HINT}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn an_event_subprocess_names_itself() {
    let text = incident_of(
        r#"<serviceTask id="a"/>
    <subProcess id="bei" triggeredByEvent="true">
      <startEvent id="bs" isInterrupting="false"><messageEventDefinition messageRef="m"/></startEvent>
      <sequenceFlow id="b1" sourceRef="bs" targetRef="be"/>
      <endEvent id="be"/>
    </subProcess>"#,
    )
    .await;
    assert!(
        text.contains(&format!(
            "correlation key variable 'lieferId' of message 'Lieferung' (event subprocess 'bei') {HINT}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_gateway_branch_names_itself() {
    let text = incident_of(
        r#"<eventBasedGateway id="a"/>
    <sequenceFlow id="f2" sourceRef="a" targetRef="warten"/>
    <intermediateCatchEvent id="warten"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="f3" sourceRef="a" targetRef="frist"/>
    <intermediateCatchEvent id="frist"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></intermediateCatchEvent>"#,
    )
    .await;
    assert!(
        text.contains(&format!(
            "correlation key variable 'lieferId' of message 'Lieferung' (event-based gateway branch 'warten') {HINT}"
        )),
        "{text}"
    );
}
