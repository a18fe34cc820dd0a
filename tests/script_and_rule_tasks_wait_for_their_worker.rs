//! postfach evaluates no Groovy or JavaScript itself: such a script task and
//! a business-rule task wait as jobs, like service tasks, and the worker that
//! locks one is given what to evaluate (script language, text and result
//! variable; decision and result variable) from Flowable, Camunda and Zeebe
//! attributes. Its result completes the job and the token moves on. A Zeebe
//! `zeebe:script` FEEL expression, and a business rule task that names its
//! decision without a worker, are evaluated by the engine itself.
#![cfg(feature = "server")]
use crate::common;
use common::*;
use postfach::model::Delegated;
use postfach::vars;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn" xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <process id="rules" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="rabatt"/>
    <scriptTask id="rabatt" scriptFormat="groovy" flowable:resultVariable="rabatt">
      <script>betrag &gt; 1000 ? 0.05 : 0</script>
    </scriptTask>
    <sequenceFlow id="f1" sourceRef="rabatt" targetRef="pruefen"/>
    <businessRuleTask id="pruefen" camunda:decisionRef="kreditpruefung" camunda:resultVariable="ergebnis" camunda:type="external" camunda:topic="pruefen"/>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="summe"/>
    <scriptTask id="summe">
      <extensionElements><zeebe:script expression="=betrag * (1 - rabatt)" resultVariable="netto"/></extensionElements>
    </scriptTask>
    <sequenceFlow id="f3" sourceRef="summe" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn each_task_waits_as_a_job_that_carries_what_to_evaluate() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env
        .pf
        .start("rules", vars([("betrag", 2000.into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["rabatt".to_string()]);

    let jobs = env.pf.lock_jobs("rabatt", 1, "w", 30_000).await.unwrap();
    let script = &jobs[0];
    assert_eq!(
        script.task.work,
        Some(Delegated::Script {
            format: Some("groovy".into()),
            text: Some("betrag > 1000 ? 0.05 : 0".into()),
            result_variable: Some("rabatt".into()),
        })
    );
    let json = postfach::contract::locked_job_json(script);
    assert_eq!(json["work"]["kind"], "script");
    assert_eq!(json["work"]["result_variable"], "rabatt");
    env.pf
        .complete_job(
            script.task.job,
            Some(script.lease_token),
            vars([("rabatt", 0.05.into())]),
        )
        .await
        .unwrap();

    assert_eq!(env.waiting_at(id), vec!["pruefen".to_string()]);
    let rule = &env.pf.lock_jobs("pruefen", 1, "w", 30_000).await.unwrap()[0];
    assert_eq!(
        rule.task.work,
        Some(Delegated::Decision {
            decision: Some("kreditpruefung".into()),
            result_variable: Some("ergebnis".into()),
        })
    );
    env.pf
        .complete_job(
            rule.task.job,
            Some(rule.lease_token),
            vars([("ergebnis", "ok".into())]),
        )
        .await
        .unwrap();

    // the FEEL script ran in the engine: no job for it
    assert!(
        env.pf
            .lock_jobs("summe", 1, "w", 30_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(has(&env.history(id), "summe", "script_evaluated"));
    assert_eq!(env.state(id), "completed");
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.variables["netto"], 1900);
}

#[tokio::test]
async fn a_service_task_job_carries_no_work() {
    let env = Env::reference().await;
    let order = env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.work_until_idle().await.unwrap(); // the async continuation before the invoice task
    let jobs = env
        .pf
        .lock_jobs("rechnungStellen", 1, "w", 30_000)
        .await
        .unwrap();
    assert_eq!(jobs[0].task.instance, order);
    assert_eq!(jobs[0].task.work, None);
    assert!(
        postfach::contract::locked_job_json(&jobs[0])
            .get("work")
            .is_none()
    );
}

#[tokio::test]
async fn message_throw_events_wait_for_the_worker_that_sends_them() {
    let env = Env::new();
    env.deploy(
        bpmn!(r#"
  <message id="m1" name="RechnungVersandt"/>
  <message id="m2" name="AuftragErledigt"/>
  <process id="melden" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="versandt"/>
    <intermediateThrowEvent id="versandt"><messageEventDefinition messageRef="m1"/></intermediateThrowEvent>
    <sequenceFlow id="f1" sourceRef="versandt" targetRef="erledigt"/>
    <endEvent id="erledigt"><messageEventDefinition messageRef="m2"/></endEvent>
  </process>
"#),
    )
    .await;
    let id = env.pf.start("melden", vars([]), None).await.unwrap();
    assert_eq!(
        env.waiting_at(id),
        vec!["versandt".to_string()],
        "not a silent pass-through"
    );
    let job = &env.pf.lock_jobs("versandt", 1, "w", 30_000).await.unwrap()[0];
    assert_eq!(
        job.task.work,
        Some(Delegated::Message {
            name: Some("RechnungVersandt".into()),
            end: false
        })
    );
    env.pf
        .complete_job(job.task.job, Some(job.lease_token), vars([]))
        .await
        .unwrap();
    let end = &env.pf.lock_jobs("erledigt", 1, "w", 30_000).await.unwrap()[0];
    assert_eq!(
        postfach::contract::locked_job_json(end)["work"],
        serde_json::json!({"kind": "message", "message": "AuftragErledigt", "end_event": true})
    );
    env.pf
        .complete_job(end.task.job, Some(end.lease_token), vars([]))
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
}
