//! A message boundary event subscribes with the correlation key its activity
//! had when it was entered. When a parallel branch changes the key variable
//! while the activity waits, the boundary still waits for the old key (as in
//! Zeebe, a subscription's key is fixed when it opens), and leaving the
//! activity closes exactly that subscription: nothing is left behind that a
//! later message for the old key could find.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, Reason};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="t">
  <message id="m" name="Storno" postfach:correlationKey="auftragId"/>
  <process id="umschluesseln" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="arbeit"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="neuerSchluessel"/>
    <serviceTask id="arbeit"/>
    <boundaryEvent id="storno" attachedToRef="arbeit"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <sequenceFlow id="f4" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>
    <serviceTask id="neuerSchluessel"/>
    <sequenceFlow id="f5" sourceRef="arbeit" targetRef="join"/>
    <sequenceFlow id="f6" sourceRef="neuerSchluessel" targetRef="join"/>
    <parallelGateway id="join"/>
    <sequenceFlow id="f7" sourceRef="join" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

fn storno(key: &str, id: &str) -> Publish {
    Publish {
        name: "Storno".into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

async fn rekeyed() -> (Env, u64) {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.start_keyed("umschluesseln", "alt").await;
    // the parallel branch changes the key while `arbeit` waits
    assert_eq!(
        env.complete_jobs(
            "neuerSchluessel",
            postfach::vars([("auftragId", "neu".into())])
        )
        .await,
        1
    );
    (env, id)
}

#[tokio::test]
async fn the_boundary_still_waits_for_the_key_it_was_opened_with() {
    let (env, id) = rekeyed().await;
    let detail = env
        .pf
        .reader()
        .unwrap()
        .instance_detail(id)
        .unwrap()
        .unwrap();
    let keys: Vec<Option<String>> = detail
        .subscriptions
        .iter()
        .filter(|s| s.name == "Storno")
        .map(|s| s.key.clone())
        .collect();
    assert_eq!(
        keys,
        vec![Some("alt".to_string())],
        "{:?}",
        detail.subscriptions
    );
    let d = env.pf.publish(storno("alt", "s-1")).await.unwrap();
    assert_eq!((d.outcome, d.instance), (Outcome::Correlated, Some(id)));
    assert_eq!(
        env.state(id),
        "active",
        "the join still waits for arbeit's branch"
    );
    assert!(
        env.history(id)
            .contains(&("storno".into(), "message_correlated".into()))
    );
}

#[tokio::test]
async fn leaving_the_activity_closes_the_subscription_it_opened() {
    let (env, id) = rekeyed().await;
    assert_eq!(env.complete_jobs("arbeit", no_vars()).await, 1);
    assert_eq!(env.state(id), "completed");
    // nothing waits for the old key any more: a message for it is late for
    // this instance, not delivered to a token that is gone
    let d = env.pf.publish(storno("alt", "s-2")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason, d.instance),
        (Outcome::Parked, Some(Reason::Late), None),
        "{d:?}"
    );
    // and a new instance with the old key subscribes and catches it alone
    let next = env.start_keyed("umschluesseln", "alt").await;
    let d = env.pf.publish(storno("alt", "s-3")).await.unwrap();
    assert_eq!(
        (d.outcome, d.instance),
        (Outcome::Correlated, Some(next)),
        "{d:?}"
    );
}
