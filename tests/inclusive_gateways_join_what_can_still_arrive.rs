//! An inclusive gateway forks on every flow whose condition holds (the default
//! flow when none does), and its join waits for exactly the tokens that can
//! still arrive: for a branch that was taken and still runs, not for one that
//! was not taken or that ended elsewhere.
use crate::common;
use common::*;
use postfach::vars;

const MODEL: &str = bpmn!(
    r#"
  <process id="pruefung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <inclusiveGateway id="fork" default="nur_akte"/>
    <sequenceFlow id="bonitaet" sourceRef="fork" targetRef="schufa"><conditionExpression>${betrag &gt; 1000}</conditionExpression></sequenceFlow>
    <sequenceFlow id="ausweis" sourceRef="fork" targetRef="check"><conditionExpression>${neukunde == true}</conditionExpression></sequenceFlow>
    <sequenceFlow id="nur_akte" sourceRef="fork" targetRef="akte"/>
    <serviceTask id="schufa"/>
    <serviceTask id="check"/>
    <serviceTask id="akte"/>
    <sequenceFlow id="j1" sourceRef="schufa" targetRef="join"/>
    <sequenceFlow id="j2" sourceRef="check" targetRef="gw"/>
    <exclusiveGateway id="gw" default="weiter"/>
    <sequenceFlow id="weiter" sourceRef="gw" targetRef="join"/>
    <sequenceFlow id="abbruch" sourceRef="gw" targetRef="abgelehnt"><conditionExpression>${gefaelscht == true}</conditionExpression></sequenceFlow>
    <endEvent id="abgelehnt"/>
    <sequenceFlow id="j3" sourceRef="akte" targetRef="join"/>
    <inclusiveGateway id="join"/>
    <sequenceFlow id="f9" sourceRef="join" targetRef="done"/>
    <serviceTask id="done"/>
    <sequenceFlow id="f10" sourceRef="done" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

async fn complete(env: &Env, instance: u64, element: &str, vars: postfach::Vars) {
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    let job = jobs
        .iter()
        .find(|j| j.instance == Some(instance.to_string()) && j.element == element)
        .unwrap_or_else(|| panic!("no job at {element}: {jobs:?}"));
    env.pf
        .complete_job(job.job.parse().unwrap(), None, vars)
        .await
        .unwrap();
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn the_join_waits_for_every_branch_taken_and_only_those() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let both = env
        .pf
        .start(
            "pruefung",
            vars([("betrag", 5000.into()), ("neukunde", true.into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        sorted(env.waiting_at(both)),
        vec!["check", "schufa"],
        "two true conditions, two branches"
    );
    complete(&env, both, "schufa", no_vars()).await;
    assert_eq!(
        sorted(env.waiting_at(both)),
        vec!["check", "join"],
        "the join waits for the branch still running"
    );
    complete(&env, both, "check", vars([("gefaelscht", false.into())])).await;
    assert_eq!(
        env.waiting_at(both),
        vec!["done"],
        "both arrived: one token leaves the join"
    );

    // only one condition holds: the join does not wait for the branch not taken
    let one = env
        .pf
        .start(
            "pruefung",
            vars([("betrag", 5000.into()), ("neukunde", false.into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(one), vec!["schufa"]);
    complete(&env, one, "schufa", no_vars()).await;
    assert_eq!(env.waiting_at(one), vec!["done"]);

    // none holds: the default flow
    let none = env
        .pf
        .start(
            "pruefung",
            vars([("betrag", 10.into()), ("neukunde", false.into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(none), vec!["akte"]);
}

#[tokio::test]
async fn a_branch_that_ends_elsewhere_releases_the_join() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env
        .pf
        .start(
            "pruefung",
            vars([("betrag", 5000.into()), ("neukunde", true.into())]),
            None,
        )
        .await
        .unwrap();
    complete(&env, id, "schufa", no_vars()).await;
    assert_eq!(sorted(env.waiting_at(id)), vec!["check", "join"]);
    // the identity check ends at its own end event: nothing can reach the join any more
    complete(&env, id, "check", vars([("gefaelscht", true.into())])).await;
    assert_eq!(env.waiting_at(id), vec!["done"]);
    complete(&env, id, "done", no_vars()).await;
    assert_eq!(env.state(id), "completed");
}
