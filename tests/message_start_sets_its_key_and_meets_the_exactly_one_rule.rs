//! A message start event starts an instance that knows its correlation key: the
//! key variable is set from the message's key unless the payload sets it, so the
//! instance waits at its next catch instead of stopping at an incident. A
//! message that a waiting catch takes starts nothing: exactly one receiver.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, vars};

const MODEL: &str = bpmn!(
    r#"
  <message id="placed" name="OrderPlaced"/>
  <message id="paid" name="PaymentReceived"/>
  <message id="reminder" name="Reminder"/>
  <process id="order" isExecutable="true">
    <startEvent id="s"><messageEventDefinition messageRef="placed"/></startEvent>
    <sequenceFlow id="f0" sourceRef="s" targetRef="pay"/>
    <intermediateCatchEvent id="pay"><messageEventDefinition messageRef="paid"/></intermediateCatchEvent>
    <sequenceFlow id="f1" sourceRef="pay" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="nudge" isExecutable="true">
    <startEvent id="ns"><messageEventDefinition messageRef="reminder"/></startEvent>
    <sequenceFlow id="g0" sourceRef="ns" targetRef="ne"/>
    <endEvent id="ne"/>
  </process>
  <process id="dunning" isExecutable="true">
    <startEvent id="ds"/>
    <sequenceFlow id="h0" sourceRef="ds" targetRef="wait"/>
    <intermediateCatchEvent id="wait"><messageEventDefinition messageRef="reminder"/></intermediateCatchEvent>
    <sequenceFlow id="h1" sourceRef="wait" targetRef="de"/>
    <endEvent id="de"/>
  </process>
"#
);

fn msg(name: &str, key: &str, id: &str) -> Publish {
    Publish {
        name: name.into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

async fn deployed() -> Env {
    let env = Env::new();
    env.pf
        .deploy(
            "orders.bpmn",
            MODEL,
            [
                ("OrderPlaced".to_string(), "orderId".to_string()),
                ("PaymentReceived".to_string(), "orderId".to_string()),
                ("Reminder".to_string(), "kunde".to_string()),
            ]
            .into(),
        )
        .await
        .unwrap();
    env
}

#[tokio::test]
async fn the_started_instance_carries_the_message_key_and_waits_at_its_catch() {
    let env = deployed().await;
    let d = env
        .pf
        .publish(msg("OrderPlaced", "A1", "p-1"))
        .await
        .unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    let id = d.instance.unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.variables["orderId"], "A1");
    assert_eq!(env.waiting_at(id), vec!["pay".to_string()]);

    let paid = env
        .pf
        .publish(msg("PaymentReceived", "A1", "pay-1"))
        .await
        .unwrap();
    assert_eq!(
        (paid.outcome, paid.instance),
        (Outcome::Correlated, Some(id))
    );
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_key_variable_in_the_payload_wins() {
    let env = deployed().await;
    let mut m = msg("OrderPlaced", "B2", "p-2");
    m.variables = vars([("orderId", "B2-intern".into())]);
    let id = env.pf.publish(m).await.unwrap().instance.unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.variables["orderId"], "B2-intern");
}

#[tokio::test]
async fn a_message_a_catch_waits_for_starts_nothing_else() {
    let env = deployed().await;
    let waiting = env
        .pf
        .start("dunning", vars([("kunde", "K1".into())]), None)
        .await
        .unwrap();
    let taken = env.pf.publish(msg("Reminder", "K1", "r-1")).await.unwrap();
    assert_eq!(
        (taken.outcome, taken.instance),
        (Outcome::Correlated, Some(waiting))
    );
    let nudges = env
        .pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap()
        .into_iter()
        .filter(|i| i.process == "nudge")
        .count();
    assert_eq!(
        nudges, 0,
        "the waiting catch took it: no instance was started"
    );

    // nobody waits for K2: the start event takes it
    let started = env.pf.publish(msg("Reminder", "K2", "r-2")).await.unwrap();
    let id = started.instance.unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!((view.process.as_str(), view.state), ("nudge", "completed"));
    assert_eq!(view.variables["kunde"], "K2");
}

/// Flowable's `MessageStartEventTest.testSingleMessageStartEvent` names its
/// message by a QName, `messageRef="tns:newInvoice"`, with `tns` declared as
/// the target namespace: the start listens to that `<message>`'s name, not to
/// the literal reference. A prefixed reference to no `<message>` is refused
/// naming its element.
#[tokio::test]
async fn a_qualified_message_reference_names_the_message_of_its_namespace() {
    let model = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:tns="http://www.activiti.org/bpmn" targetNamespace="http://www.activiti.org/bpmn">
  <message id="newInvoice" name="newInvoiceMessage"/>
  <process id="singleMessageStartEvent" isExecutable="true">
    <startEvent id="theStart"><messageEventDefinition messageRef="tns:newInvoice"/></startEvent>
    <sequenceFlow id="flow1" sourceRef="theStart" targetRef="task"/>
    <userTask id="task"/>
    <sequenceFlow id="flow2" sourceRef="task" targetRef="theEnd"/>
    <endEvent id="theEnd"/>
  </process>
</definitions>"#;
    let env = Env::new();
    env.deploy(model).await;
    let literal = env
        .pf
        .publish(postfach::Publish {
            name: "tns:newInvoice".into(),
            key: "k-1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        literal.reason,
        Some(postfach::Reason::UnknownMessage),
        "{literal:?}"
    );
    let d = env
        .pf
        .publish(postfach::Publish {
            name: "newInvoiceMessage".into(),
            key: "k-2".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = d.instance.expect("the message starts an instance");
    assert_eq!(env.waiting_at(id), ["task"]);

    let dangling = model.replace("tns:newInvoice\"", "tns:nothing\"");
    let e = env
        .pf
        .deploy("dangling.bpmn", &dangling, Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("theStart") && e.contains("names no message"),
        "{e}"
    );
}

/// A correlation key given at deploy time for a message the file does not
/// use comes back as a warning naming the message, not silently.
#[tokio::test]
async fn a_correlation_key_for_a_message_the_model_lacks_is_a_warning() {
    let env = Env::new();
    let keys = [
        ("AuftragAbgeschlossen".to_string(), "auftragId".to_string()),
        ("Auftragabgeschlossen".to_string(), "auftragId".to_string()),
    ]
    .into();
    let d = env
        .pf
        .deploy_checked("ref.bpmn", REFERENCE, keys, false)
        .await
        .unwrap();
    let w: Vec<String> = d
        .warnings
        .iter()
        .map(|w| format!("{} {}", w.id, w.message))
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("Auftragabgeschlossen ")
            && w[0].contains("no process of this file catches or starts"),
        "{w:?}"
    );
}
