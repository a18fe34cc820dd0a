//! In the console, a child instance started by a call activity names its
//! parent as a link, and the parent's token at the call activity links to
//! the child it waits for (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;

const CHILD: &str = bpmn!(
    r#"
  <process id="kind" isExecutable="true">
    <startEvent id="ks"/>
    <sequenceFlow id="k0" sourceRef="ks" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>
  </process>
"#
);

const PARENT: &str = bpmn!(
    r#"
  <process id="eltern" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="aufruf"/>
    <callActivity id="aufruf" calledElement="kind"/>
  </process>
"#
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_links_to_its_parent_and_the_parent_to_its_child() {
    let dir = tempfile::tempdir().unwrap();
    let pf = postfach::Postfach::open(dir.path().join("run.redb")).unwrap();
    pf.deploy("kind.bpmn", CHILD, Default::default())
        .await
        .unwrap();
    pf.deploy("eltern.bpmn", PARENT, Default::default())
        .await
        .unwrap();
    let parent = pf
        .start("eltern", postfach::Vars::new(), None)
        .await
        .unwrap();
    let r = pf.reader().unwrap();
    let kid = r
        .instances(&Default::default())
        .unwrap()
        .into_iter()
        .find(|i| i.process == "kind")
        .expect("the child runs")
        .instance;
    drop(r);
    pf.close();

    let srv = Server::launch(dir.path(), &[], &[]);
    let b = Driver::start();
    let base = format!("http://{}/", srv.addr);
    b.open(&format!("{base}#view=instance&id={kid}"));
    b.wait_for_text("#instance-title", &format!("Instance {kid} "));
    b.wait_for_text("#instance-facts", "called by");
    b.click("#instance-facts a.instance-link");
    b.wait_for_text("#instance-title", &format!("Instance {parent} "));
    let token = b.wait_for_text(r#"#tokens tr[data-element="aufruf"]"#, "called");
    assert!(token.contains(&format!("instance {kid}")), "{token}");
    b.click(r#"#tokens tr[data-element="aufruf"] a.instance-link"#);
    b.wait_for_text("#instance-title", &format!("Instance {kid} "));
    b.screenshot("call-activity-child");
    let errors = b.errors();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}
