//! Messages with the same correlation key are applied in the order they were
//! accepted; other keys proceed independently (no head-of-line blocking).
use crate::common;
use common::*;
use postfach::{Outcome, Publish, vars};

const TRANCHEN: &str = r#"<?xml version="1.0"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
             xmlns:flowable="http://flowable.org/bpmn" xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="Tranche" postfach:correlationKey="auftragId"/>
  <process id="tranchen" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="prep"/>
    <task id="prep" flowable:async="true"/>
    <sequenceFlow id="f2" sourceRef="prep" targetRef="t1"/>
    <intermediateCatchEvent id="t1"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="f3" sourceRef="t1" targetRef="mid"/>
    <task id="mid" flowable:async="true"/>
    <sequenceFlow id="f4" sourceRef="mid" targetRef="t2"/>
    <receiveTask id="t2" messageRef="m"/>
    <sequenceFlow id="f5" sourceRef="t2" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

fn tranche(key: &str, n: i64) -> Publish {
    Publish {
        name: "Tranche".into(),
        key: key.into(),
        message_id: Some(format!("{key}-{n}")),
        variables: vars([("tranche", n.into()), (&format!("seen{n}"), true.into())]),
        ..Default::default()
    }
}

fn correlated_at(env: &Env, id: &str) -> String {
    env.pf.reader().unwrap().message(id).unwrap()[0]
        .element
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn two_early_messages_for_one_key_are_applied_in_accept_order() {
    let env = Env::new();
    env.deploy(TRANCHEN).await;
    let id = env.start_keyed("tranchen", "A").await;
    assert_eq!(
        env.pf.publish(tranche("A", 1)).await.unwrap().outcome,
        Outcome::Buffered
    );
    assert_eq!(
        env.pf.publish(tranche("A", 2)).await.unwrap().outcome,
        Outcome::Buffered
    );
    env.pf.run_continuations(10).await.unwrap(); // prep → t1 takes the oldest
    assert_eq!(correlated_at(&env, "A-1"), "t1");
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .instance(id)
            .unwrap()
            .unwrap()
            .variables["tranche"],
        1
    );
    env.pf.run_continuations(10).await.unwrap(); // mid → t2 takes the next
    assert_eq!(correlated_at(&env, "A-2"), "t2");
    assert_eq!(env.state(id), "completed");
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .instance(id)
            .unwrap()
            .unwrap()
            .variables["tranche"],
        2
    );
}

#[tokio::test]
async fn a_message_between_two_catches_waits_instead_of_being_late() {
    let env = Env::new();
    env.deploy(TRANCHEN).await;
    let id = env.start_keyed("tranchen", "A").await;
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(
        env.pf.publish(tranche("A", 1)).await.unwrap().outcome,
        Outcome::Correlated
    );
    // the token sits at the async job before t2: it will still catch Tranche
    assert_eq!(
        env.pf.publish(tranche("A", 2)).await.unwrap().outcome,
        Outcome::Buffered
    );
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn keys_proceed_independently_and_each_keeps_its_own_order() {
    let env = Env::new();
    env.deploy(TRANCHEN).await;
    let keys = ["A", "B", "C"];
    let mut ids = Vec::new();
    for k in keys {
        ids.push(env.start_keyed("tranchen", k).await);
    }
    // interleaved across keys; within each key the first tranche is accepted first
    for (k, n) in [("B", 1), ("A", 1), ("B", 2), ("C", 1), ("A", 2), ("C", 2)] {
        env.pf.publish(tranche(k, n)).await.unwrap();
    }
    // an ambiguous key elsewhere does not block these
    let mut stray = tranche("Z", 1);
    stray.message_id = Some("stray".into());
    env.pf.publish(stray).await.unwrap();
    env.pf.work_until_idle().await.unwrap();
    for (k, id) in keys.iter().zip(ids) {
        assert_eq!(env.state(id), "completed", "key {k}");
        assert_eq!(correlated_at(&env, &format!("{k}-1")), "t1");
        assert_eq!(correlated_at(&env, &format!("{k}-2")), "t2");
    }
}
