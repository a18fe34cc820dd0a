//! Definitions are versioned: a new deploy creates a new version, new instances
//! use it, and running instances finish on the version they started with.
use crate::common;
use common::*;
use postfach::vars;

const V1: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn">
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="erst"/>
    <serviceTask id="erst"/>
    <sequenceFlow id="f2" sourceRef="erst" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

const V2: &str = bpmn!(
    r#"
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="neu"/>
    <serviceTask id="neu"/>
    <sequenceFlow id="f2" sourceRef="neu" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn running_instances_keep_the_version_they_started_with() {
    let mut env = Env::new();
    let d1 = env
        .pf
        .deploy("p.bpmn", V1, Default::default())
        .await
        .unwrap();
    assert_eq!((d1[0].version, d1[0].new_version), (1, true));
    let again = env
        .pf
        .deploy("p.bpmn", V1, Default::default())
        .await
        .unwrap();
    assert_eq!(
        (again[0].version, again[0].new_version),
        (1, false),
        "identical source keeps the version"
    );
    let old = env.pf.start("p", vars([]), None).await.unwrap();
    let d2 = env
        .pf
        .deploy("p.bpmn", V2, Default::default())
        .await
        .unwrap();
    assert_eq!(d2[0].version, 2);
    let new = env.pf.start("p", vars([]), None).await.unwrap();
    env.reopen();
    let r = env.pf.reader().unwrap();
    let (o, n) = (
        r.instance(old).unwrap().unwrap(),
        r.instance(new).unwrap().unwrap(),
    );
    assert_eq!(
        (o.version, o.waiting_at.clone()),
        (1, vec!["erst".to_string()])
    );
    assert_eq!(
        (n.version, n.waiting_at.clone()),
        (2, vec!["neu".to_string()])
    );
    drop(r);
    // the old instance completes on version 1, whose element no longer exists in version 2
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    let j = jobs.iter().find(|j| j.element == "erst").unwrap();
    env.pf
        .complete_job(j.job.parse().unwrap(), None, no_vars())
        .await
        .unwrap();
    assert_eq!(env.state(old), "completed");
}
