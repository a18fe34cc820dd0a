//! A terminate end event ends its instance at once: every other token is
//! withdrawn with what it waited for — its job, its user task, its message
//! subscription (a completion arriving afterwards is parked late, not buffered).
use crate::common;
use common::*;
use postfach::{Outcome, Reason, vars};

const MODEL: &str = bpmn!(
    r#"
  <message id="m" name="Storniert"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="a" sourceRef="fork" targetRef="liefern"/>
    <sequenceFlow id="b" sourceRef="fork" targetRef="pruefen"/>
    <sequenceFlow id="c" sourceRef="fork" targetRef="storno"/>
    <serviceTask id="liefern"/>
    <userTask id="pruefen"/>
    <intermediateCatchEvent id="storno"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="a1" sourceRef="liefern" targetRef="ende"/>
    <sequenceFlow id="b1" sourceRef="pruefen" targetRef="ende"/>
    <sequenceFlow id="c1" sourceRef="storno" targetRef="abbruch"/>
    <endEvent id="ende"/>
    <endEvent id="abbruch"><terminateEventDefinition/></endEvent>
  </process>
"#
);

#[tokio::test]
async fn a_terminate_end_ends_the_instance_and_withdraws_every_wait() {
    let env = Env::new();
    env.pf
        .deploy(
            "auftrag.bpmn",
            MODEL,
            [("Storniert".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap();
    let id = env
        .pf
        .start("auftrag", vars([("auftragId", "A1".into())]), None)
        .await
        .unwrap();
    let mut at = env.waiting_at(id);
    at.sort();
    assert_eq!(at, vec!["liefern", "pruefen", "storno"]);

    let d = env
        .pf
        .publish(completion_named("Storniert", "A1", "s-1"))
        .await
        .unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(env.state(id), "completed");
    assert!(env.waiting_at(id).is_empty());
    let r = env.pf.reader().unwrap();
    assert!(
        r.jobs(false).unwrap().is_empty(),
        "the delivery job was withdrawn"
    );
    assert!(
        r.tasks(&Default::default()).unwrap().is_empty(),
        "the user task was withdrawn"
    );
    let events: Vec<String> = r
        .instance(id)
        .unwrap()
        .unwrap()
        .history
        .iter()
        .map(|h| format!("{} {}", h.element, h.event))
        .collect();
    assert!(
        events.contains(&"abbruch terminated".to_string()),
        "{events:?}"
    );

    // a second cancellation for the ended order is late, not buffered
    let again = env
        .pf
        .publish(completion_named("Storniert", "A1", "s-2"))
        .await
        .unwrap();
    assert_eq!(
        (again.outcome, again.reason),
        (Outcome::Parked, Some(Reason::Late))
    );
}

fn completion_named(name: &str, key: &str, id: &str) -> postfach::Publish {
    postfach::Publish {
        name: name.into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_branch_still_on_its_way_is_withdrawn_too() {
    let env = Env::new();
    env.deploy(bpmn!(
        r#"
  <process id="kurz" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="a" sourceRef="fork" targetRef="stop"/>
    <sequenceFlow id="b" sourceRef="fork" targetRef="arbeit"/>
    <endEvent id="stop"><terminateEventDefinition/></endEvent>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="b1" sourceRef="arbeit" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    ))
    .await;
    let id = env.pf.start("kurz", vars([]), None).await.unwrap();
    assert_eq!(env.state(id), "completed");
    assert!(
        env.pf.reader().unwrap().jobs(false).unwrap().is_empty(),
        "no job for a withdrawn token"
    );
}
