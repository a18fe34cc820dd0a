//! A send task no broker topic is bound to is work for a worker that sends it
//! (a mail, a webhook, another broker) — a job on its topic, never a silent
//! pass-through. A typed one (Flowable's mail task) deploys with a warning that
//! says so; the token moves on only when the worker completes the job.
use crate::common;
use common::*;
use postfach::model::Delegated;
use postfach::vars;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn" xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <message id="m" name="Rechnung"/>
  <process id="notify" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="mail"/>
    <sendTask id="mail" flowable:type="mail"/>
    <sequenceFlow id="f1" sourceRef="mail" targetRef="hook"/>
    <sendTask id="hook" messageRef="m" camunda:type="external" camunda:topic="webhooks"/>
    <sequenceFlow id="f2" sourceRef="hook" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn an_unbound_send_task_waits_as_a_job_until_its_worker_sent_it() {
    let env = Env::new();
    let d = env
        .pf
        .deploy_checked("notify.bpmn", MODEL, Default::default(), false)
        .await
        .unwrap();
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert_eq!(d.warnings[0].id, "mail");
    assert!(
        d.warnings[0]
            .message
            .contains("waits as a job on topic 'mail'"),
        "{}",
        d.warnings[0].message
    );

    let id = env
        .pf
        .start("notify", vars([("to", "a@example.com".into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["mail"], "nothing passes silently");
    let job = env.lock("mail", 1, "mailer", 60_000).await.remove(0);
    assert_eq!(
        job.task.work,
        Some(Delegated::Send {
            message: None,
            implementation: Some("mail".into())
        }),
        "the job says what to send"
    );
    assert_eq!(job.task.variables["to"], "a@example.com");
    env.pf
        .complete_job(job.task.job, Some(job.lease_token), vars([]))
        .await
        .unwrap();

    // Camunda's external send task: its topic is a worker topic, not a broker's
    assert_eq!(env.waiting_at(id), vec!["hook"]);
    let job = env.lock("webhooks", 1, "hooks", 60_000).await.remove(0);
    assert_eq!(
        job.task.work,
        Some(Delegated::Send {
            message: Some("Rechnung".into()),
            implementation: None
        })
    );
    env.pf
        .complete_job(job.task.job, Some(job.lease_token), vars([]))
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
}
