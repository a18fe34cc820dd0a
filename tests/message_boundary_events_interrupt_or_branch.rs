//! A message boundary event on an activity: its subscription opens when the
//! activity is entered and closes when the activity is left. An interrupting
//! one ends the activity with its job; a non-interrupting one starts a token
//! for every matching message and stays subscribed. A message that arrives
//! before the activity is entered waits in the buffer and is taken when it
//! opens; one after the activity is left is late; the same (message, key)
//! open at a boundary and at a catch point of one instance is ambiguous.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, Reason};

fn model(cancel: bool, async_before: bool) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn">
  <message id="m" name="Storno"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="bearbeiten"/>
    <serviceTask id="bearbeiten" flowable:async="{async_before}"/>
    <sequenceFlow id="f1" sourceRef="bearbeiten" targetRef="fertig"/>
    <endEvent id="fertig"/>
    <boundaryEvent id="storno" attachedToRef="bearbeiten" cancelActivity="{cancel}">
      <messageEventDefinition messageRef="m"/>
    </boundaryEvent>
    <sequenceFlow id="f2" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>
  </process>
</definitions>"#
    )
}

async fn deploy(env: &Env, xml: &str) {
    env.pf
        .deploy(
            "storno.bpmn",
            xml,
            [("Storno".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .expect("deploys");
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

fn history(env: &Env, inst: u64) -> Vec<(String, String)> {
    env.pf
        .reader()
        .unwrap()
        .instance(inst)
        .unwrap()
        .unwrap()
        .history
        .into_iter()
        .map(|h| (h.element, h.event))
        .collect()
}

#[tokio::test]
async fn an_interrupting_message_boundary_ends_the_activity_with_its_job() {
    let env = Env::new();
    deploy(&env, &model(true, false)).await;
    let id = env.start_keyed("auftrag", "A-1").await;
    assert_eq!(env.waiting_at(id), vec!["bearbeiten"]);
    assert_eq!(env.jobs().len(), 1, "the service task's job");
    let detail = env
        .pf
        .reader()
        .unwrap()
        .instance_detail(id)
        .unwrap()
        .unwrap();
    let subs: Vec<_> = detail
        .subscriptions
        .iter()
        .map(|s| (s.element.as_str(), s.name.as_str(), s.key.as_deref()))
        .collect();
    assert_eq!(
        subs,
        vec![("storno", "Storno", Some("A-1"))],
        "the operator sees what the activity listens for"
    );

    let d = env.pf.publish(storno("A-1", "s-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(d.element.as_deref(), Some("storno"));
    assert_eq!(env.state(id), "completed");
    assert!(env.jobs().is_empty(), "the job ended with the activity");
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.variables["grund"], "Kunde");
    assert!(history(&env, id).contains(&("storniert".into(), "completed".into())));

    let d = env.pf.publish(storno("A-1", "s-2")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "the activity is left: a second one is late"
    );
}

#[tokio::test]
async fn a_non_interrupting_message_boundary_branches_for_each_message_and_stays_open() {
    let env = Env::new();
    deploy(&env, &model(false, false)).await;
    let id = env.start_keyed("auftrag", "A-2").await;
    for n in 1..=2 {
        let d = env
            .pf
            .publish(storno("A-2", &format!("s-{n}")))
            .await
            .unwrap();
        assert_eq!(d.outcome, Outcome::Correlated, "message {n}");
        assert_eq!(d.element.as_deref(), Some("storno"));
    }
    let h = history(&env, id);
    assert_eq!(
        h.iter()
            .filter(|(e, ev)| e == "storno" && ev == "message_correlated")
            .count(),
        2
    );
    assert_eq!(env.state(id), "active", "the activity still runs");
    assert_eq!(env.waiting_at(id), vec!["bearbeiten"]);

    // the activity completes: its boundary closes, a later message is late
    let jobs = env.lock("bearbeiten", 1, "w", 60_000).await;
    env.pf
        .complete_job(jobs[0].task.job, Some(jobs[0].lease_token), no_vars())
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
    let d = env.pf.publish(storno("A-2", "s-3")).await.unwrap();
    assert_eq!(d.reason, Some(Reason::Late));
}

#[tokio::test]
async fn a_message_before_the_activity_waits_in_the_buffer_and_is_taken_when_it_opens() {
    let env = Env::new();
    deploy(&env, &model(true, true)).await;
    let id = env.start_keyed("auftrag", "A-3").await;
    // asyncBefore: the token waits for its continuation, before the activity
    let d = env.pf.publish(storno("A-3", "s-early")).await.unwrap();
    assert_eq!(
        d.outcome,
        Outcome::Buffered,
        "the instance can still reach the boundary: buffered, not parked"
    );
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.state(id), "completed");
    let m = &env.pf.reader().unwrap().message("s-early").unwrap()[0];
    assert_eq!(m.state, "correlated");
    assert_eq!(m.element.as_deref(), Some("storno"));
    assert!(env.jobs().is_empty());
    assert!(env.open_messages().is_empty());
}

#[tokio::test]
async fn a_boundary_and_a_catch_point_open_for_one_key_make_the_message_ambiguous() {
    let env = Env::new();
    let xml = bpmn!(
        r#"
  <message id="m" name="Storno"/>
  <process id="zwei" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="warten"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="arbeiten"/>
    <receiveTask id="warten" messageRef="m"/>
    <serviceTask id="arbeiten"/>
    <boundaryEvent id="abbruch" attachedToRef="arbeiten"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <sequenceFlow id="f3" sourceRef="warten" targetRef="e1"/>
    <sequenceFlow id="f4" sourceRef="arbeiten" targetRef="e2"/>
    <sequenceFlow id="f5" sourceRef="abbruch" targetRef="e3"/>
    <endEvent id="e1"/><endEvent id="e2"/><endEvent id="e3"/>
  </process>
"#
    );
    deploy(&env, xml).await;
    let id = env.start_keyed("zwei", "A-4").await;
    let d = env.pf.publish(storno("A-4", "s-1")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Ambiguous))
    );
    assert_eq!(d.candidates, vec![id]);
    let mut waiting = env.waiting_at(id);
    waiting.sort();
    assert_eq!(waiting, vec!["arbeiten", "warten"], "nothing moved");
}

#[tokio::test]
async fn a_boundary_without_its_key_variable_is_an_incident_naming_it() {
    let env = Env::new();
    deploy(&env, &model(true, false)).await;
    let id = env
        .pf
        .start("auftrag", postfach::Vars::new(), None)
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.state, "incident");
    assert!(
        v.incidents[0].contains("auftragId") && v.incidents[0].contains("storno"),
        "{:?}",
        v.incidents
    );
    assert!(env.jobs().is_empty(), "the activity did not start");
}

#[tokio::test]
async fn two_boundaries_for_one_message_or_a_receive_task_s_own_message_are_refused() {
    let env = Env::new();
    let twice = model(true, false).replace(
        r#"<sequenceFlow id="f2""#,
        r#"<boundaryEvent id="noch" attachedToRef="bearbeiten"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <sequenceFlow id="f9" sourceRef="noch" targetRef="storniert"/>
    <sequenceFlow id="f2""#,
    );
    let err = env
        .pf
        .deploy(
            "x.bpmn",
            &twice,
            [("Storno".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a second boundary event for message 'Storno'"),
        "{err}"
    );
    let own = model(true, false).replace(
        r#"<serviceTask id="bearbeiten" flowable:async="false"/>"#,
        r#"<receiveTask id="bearbeiten" messageRef="m"/>"#,
    );
    let err = env
        .pf
        .deploy(
            "y.bpmn",
            &own,
            [("Storno".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("itself waits for 'Storno'"), "{err}");
}
