//! Zeebe's correlation keys are FEEL: `=orderId` names a variable, `=order.id`
//! a path into one, and `correlationKey="GLOBAL"` (or `="GLOBAL"`) is a literal
//! key, the same for every instance — read as Zeebe reads them, not as
//! variable names.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, vars};

const MODEL: &str = r#"<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <bpmn:message id="m1" name="Paid">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=order.id"/></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:message id="m2" name="Shutdown">
    <bpmn:extensionElements><zeebe:subscription correlationKey="GLOBAL"/></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:process id="order" isExecutable="true">
    <bpmn:startEvent id="s"/>
    <bpmn:sequenceFlow id="f0" sourceRef="s" targetRef="paid"/>
    <bpmn:intermediateCatchEvent id="paid"><bpmn:messageEventDefinition messageRef="m1"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f1" sourceRef="paid" targetRef="stop"/>
    <bpmn:intermediateCatchEvent id="stop"><bpmn:messageEventDefinition messageRef="m2"/></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f2" sourceRef="stop" targetRef="e"/>
    <bpmn:endEvent id="e"/>
  </bpmn:process>
</bpmn:definitions>"#;

fn msg(name: &str, key: &str, id: &str) -> Publish {
    Publish {
        name: name.into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_feel_path_and_a_literal_key_correlate_as_zeebe_reads_them() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let order = vars([("order", serde_json::json!({"id": "A-1"}))]);
    let id = env.pf.start("order", order, None).await.unwrap();
    assert_eq!(
        env.waiting_at(id),
        vec!["paid".to_string()],
        "no incident: the path resolves"
    );

    let d = env.pf.publish(msg("Paid", "A-1", "p1")).await.unwrap();
    assert_eq!((d.outcome, d.instance), (Outcome::Correlated, Some(id)));
    assert_eq!(env.waiting_at(id), vec!["stop".to_string()]);

    // the literal key: not a variable named GLOBAL, but the key "GLOBAL" itself
    let d = env
        .pf
        .publish(msg("Shutdown", "GLOBAL", "s1"))
        .await
        .unwrap();
    assert_eq!((d.outcome, d.instance), (Outcome::Correlated, Some(id)));
    assert_eq!(env.state(id), "completed");
}
