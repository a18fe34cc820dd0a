//! An operator (or a Camunda 8 client through the Zeebe face) cancels a
//! running instance or sets its variables from outside. Cancelling ends the
//! instance as cancelled with everything inside it: its jobs, its timers,
//! the subscriptions of its catch points (a completion arriving later is
//! late, parked), the instances it called. Variables set from outside are
//! written as the token would write them, or locally on it, and move a
//! waiting condition on. Unknown and ended instances are refused by name,
//! and nothing changes.
use crate::common;
use common::*;
use postfach::{Outcome, Reason, vars};

/// `s → fork → [pruefen (job)] [warten (message Storno by auftragId)]
/// [frist (timer 1 h)] [rufen (call activity kind → its job)]`, each to an
/// end; and a conditional catch `freigabe`.
const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <message id="ms" name="Storno"/>
  <process id="kind" isExecutable="true">
    <startEvent id="ks"/>
    <sequenceFlow id="k0" sourceRef="ks" targetRef="kindjob"/>
    <serviceTask id="kindjob"/>
    <sequenceFlow id="k1" sourceRef="kindjob" targetRef="ke"/>
    <endEvent id="ke"/>
  </process>
  <process id="vieles" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="e1"/>
    <endEvent id="e1"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="warten"/>
    <intermediateCatchEvent id="warten"><messageEventDefinition messageRef="ms"/></intermediateCatchEvent>
    <sequenceFlow id="f4" sourceRef="warten" targetRef="e2"/>
    <endEvent id="e2"/>
    <sequenceFlow id="f5" sourceRef="fork" targetRef="frist"/>
    <intermediateCatchEvent id="frist"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="f6" sourceRef="frist" targetRef="e3"/>
    <endEvent id="e3"/>
    <sequenceFlow id="f7" sourceRef="fork" targetRef="rufen"/>
    <callActivity id="rufen" calledElement="kind"/>
    <sequenceFlow id="f8" sourceRef="rufen" targetRef="e4"/>
    <endEvent id="e4"/>
  </process>
  <process id="bedingt" isExecutable="true">
    <startEvent id="bs"/>
    <sequenceFlow id="b0" sourceRef="bs" targetRef="freigabe"/>
    <intermediateCatchEvent id="freigabe"><conditionalEventDefinition><condition>${freigabe == true}</condition></conditionalEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="b1" sourceRef="freigabe" targetRef="danach"/>
    <serviceTask id="danach"/>
    <sequenceFlow id="b2" sourceRef="danach" targetRef="be"/>
    <endEvent id="be"/>
  </process>
</definitions>"#;

async fn env() -> Env {
    let env = Env::new();
    let keys = [("Storno".to_string(), "auftragId".to_string())].into();
    env.pf.deploy("vieles.bpmn", MODEL, keys).await.unwrap();
    env
}

fn child_of(env: &Env, parent: u64) -> u64 {
    env.jobs()
        .iter()
        .filter(|j| j.element == "kindjob")
        .filter_map(|j| j.instance.as_deref()?.parse::<u64>().ok())
        .find(|&kid| kid != parent)
        .expect("the called instance waits at its job")
}

#[tokio::test]
async fn a_cancelled_instance_takes_its_jobs_timers_subscriptions_and_children_along() {
    let env = env().await;
    let id = env
        .pf
        .start("vieles", vars([("auftragId", "4711".into())]), None)
        .await
        .unwrap();
    env.hand_over().await;
    let kid = child_of(&env, id);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["frist", "pruefen", "rufen", "warten"]
    );
    env.pf.cancel_instance(id).await.unwrap();

    assert_eq!(env.state(id), "cancelled");
    assert_eq!(env.state(kid), "cancelled", "the called instance goes too");
    assert!(env.waiting_at(id).is_empty());
    assert!(
        env.jobs().is_empty(),
        "no job, no timer is left: {:?}",
        env.jobs()
    );
    assert!(has(&env.history(id), "vieles", "instance_cancelled"));
    // the catch point is gone: the completion that comes now is late
    let d = env
        .pf
        .publish(postfach::Publish {
            name: "Storno".into(),
            key: "4711".into(),
            message_id: Some("storno-1".into()),
            variables: no_vars(),
            ttl: None,
            attributes: Default::default(),
        })
        .await
        .unwrap();
    assert_eq!((d.outcome, d.reason), (Outcome::Parked, Some(Reason::Late)));
    // the timer does not fire after the cancel
    env.advance(std::time::Duration::from_secs(7200));
    env.hand_over().await;
    assert_eq!(env.state(id), "cancelled");

    let again = env.pf.cancel_instance(id).await.unwrap_err().to_string();
    assert!(again.contains(&id.to_string()), "{again}");
    let unknown = env.pf.cancel_instance(999_999).await.unwrap_err();
    assert!(unknown.to_string().contains("999999"), "{unknown}");
}

#[tokio::test]
async fn cancelling_a_called_instance_stops_its_caller_at_an_incident() {
    let env = env().await;
    let id = env
        .pf
        .start("vieles", vars([("auftragId", "4712".into())]), None)
        .await
        .unwrap();
    env.hand_over().await;
    let kid = child_of(&env, id);
    env.pf.cancel_instance(kid).await.unwrap();
    assert_eq!(env.state(kid), "cancelled");
    assert_eq!(
        env.state(id),
        "incident",
        "the caller is told, never left waiting"
    );
}

#[tokio::test]
async fn variables_set_from_outside_move_a_waiting_condition_on() {
    let env = env().await;
    let id = env.pf.start("bedingt", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["freigabe"]);
    let token = env
        .pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .tokens[0]
        .token;

    // local to the token: the instance's variables stay as they are
    env.pf
        .set_variables(id, token, true, vars([("notiz", "geprüft".into())]))
        .await
        .unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.tokens[0].locals["notiz"], "geprüft");
    assert!(!view.variables.contains_key("notiz"));

    env.pf
        .set_variables(id, 0, false, vars([("freigabe", true.into())]))
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["danach"], "the condition holds now");
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.variables["freigabe"], true);
    assert!(has(&env.history(id), "bedingt", "variables_set"));

    let unknown = env
        .pf
        .set_variables(id, 4242, false, vars([("x", 1.into())]))
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("4242"), "{unknown}");
    let bad = env
        .pf
        .set_variables(id, 0, false, vars([("", 1.into())]))
        .await
        .unwrap_err()
        .to_string();
    assert!(bad.contains("variable name"), "{bad}");
    env.pf.cancel_instance(id).await.unwrap();
    let ended = env
        .pf
        .set_variables(id, 0, false, vars([("x", 1.into())]))
        .await
        .unwrap_err()
        .to_string();
    assert!(ended.contains(&id.to_string()), "{ended}");
}
