//! Exclusive gateways take the first true condition or the default flow; parallel
//! gateways fork and join; a gateway with no way out is a visible incident.
use crate::common;
use common::*;
use postfach::vars;

const ROUTING: &str = bpmn!(
    r#"
  <process id="routing" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="x"/>
    <exclusiveGateway id="x" default="small"/>
    <sequenceFlow id="big" sourceRef="x" targetRef="review"><conditionExpression>${betrag &gt;= 1000}</conditionExpression></sequenceFlow>
    <sequenceFlow id="small" sourceRef="x" targetRef="merge"/>
    <serviceTask id="review"/>
    <sequenceFlow id="f1" sourceRef="review" targetRef="merge"/>
    <exclusiveGateway id="merge"/>
    <sequenceFlow id="f2" sourceRef="merge" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="p1" sourceRef="fork" targetRef="a"/>
    <sequenceFlow id="p2" sourceRef="fork" targetRef="b"/>
    <serviceTask id="a"/>
    <serviceTask id="b"/>
    <sequenceFlow id="j1" sourceRef="a" targetRef="join"/>
    <sequenceFlow id="j2" sourceRef="b" targetRef="join"/>
    <parallelGateway id="join"/>
    <sequenceFlow id="f9" sourceRef="join" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="stuck" isExecutable="true">
    <startEvent id="s2"/>
    <sequenceFlow id="g0" sourceRef="s2" targetRef="x2"/>
    <exclusiveGateway id="x2"/>
    <sequenceFlow id="g1" sourceRef="x2" targetRef="e2"><conditionExpression>${ok == true}</conditionExpression></sequenceFlow>
    <endEvent id="e2"/>
  </process>
"#
);

async fn complete_task(env: &Env, instance: u64, element: &str) {
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    let job = jobs
        .iter()
        .find(|j| j.instance == Some(instance.to_string()) && j.element == element)
        .expect("task job");
    env.pf
        .complete_job(job.job.parse().unwrap(), None, no_vars())
        .await
        .unwrap();
}

#[tokio::test]
async fn default_flow_then_fork_and_join() {
    let env = Env::new();
    env.deploy(ROUTING).await;
    let id = env
        .pf
        .start("routing", vars([("betrag", 10.into())]), None)
        .await
        .unwrap();
    let mut at = env.waiting_at(id);
    at.sort();
    assert_eq!(at, vec!["a", "b"], "small order skips review and forks");
    complete_task(&env, id, "a").await;
    let mut at = env.waiting_at(id);
    at.sort();
    assert_eq!(at, vec!["b", "join"], "one branch waits at the join");
    complete_task(&env, id, "b").await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_true_condition_wins_over_the_default() {
    let env = Env::new();
    env.deploy(ROUTING).await;
    let id = env
        .pf
        .start("routing", vars([("betrag", 5000.into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["review"]);
}

#[tokio::test]
async fn no_way_out_of_a_gateway_is_an_incident_with_the_reason() {
    let env = Env::new();
    env.deploy(ROUTING).await;
    let id = env
        .pf
        .start("stuck", vars([("ok", false.into())]), None)
        .await
        .unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.state, "incident");
    assert!(
        view.incidents[0].contains("no outgoing flow"),
        "{:?}",
        view.incidents
    );
    let missing = env.pf.start("stuck", no_vars(), None).await.unwrap();
    let view = env.pf.reader().unwrap().instance(missing).unwrap().unwrap();
    assert!(
        view.incidents[0].contains("variable 'ok' is not set"),
        "{:?}",
        view.incidents
    );
}
