//! A plain `task` and a `manualTask` have no behaviour in an engine (BPMN: the
//! work happens outside any system): the token passes through them, in the
//! history, without a job and without waiting.
use crate::common;
use common::*;
use postfach::vars;
use std::time::Duration;

const MODEL: &str = bpmn!(
    r#"
  <process id="paper" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sign"/>
    <manualTask id="sign" name="Vertrag unterschreiben"/>
    <sequenceFlow id="f1" sourceRef="sign" targetRef="note"/>
    <task id="note" name="Notiz"/>
    <sequenceFlow id="f2" sourceRef="note" targetRef="file"/>
    <serviceTask id="file"/>
    <sequenceFlow id="f4" sourceRef="file" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn the_token_passes_plain_and_manual_tasks_and_waits_at_the_next_real_work() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env
        .pf
        .start("paper", vars([("x", 1.into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["file".to_string()]);
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let passed: Vec<&str> = view
        .history
        .iter()
        .filter(|h| h.element == "sign" || h.element == "note")
        .map(|h| h.element.as_str())
        .collect();
    assert!(
        passed.contains(&"sign") && passed.contains(&"note"),
        "{passed:?}"
    );
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.element.as_str()).collect::<Vec<_>>(),
        vec!["file"],
        "only the service task waits as a job"
    );
    env.advance(Duration::from_secs(120));
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(env.waiting_at(id), vec!["file".to_string()]);
    assert_eq!(env.state(id), "active");
}
