//! In the console, the inner instances of a multi-instance activity are
//! shown as such, each with its item and index, beside the body that says
//! how many of them completed (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <message id="ml" name="Lieferung"/>
  <process id="lieferungen" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="warten"/>
    <receiveTask id="warten" messageRef="ml">
      <multiInstanceLoopCharacteristics camunda:collection="${positionen}" camunda:elementVariable="position"/>
    </receiveTask>
  </process>
</definitions>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_inner_instance_shows_its_item_beside_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let pf = postfach::Postfach::open(dir.path().join("run.redb")).unwrap();
    let keys = [("Lieferung".to_string(), "position".to_string())].into();
    pf.deploy("lieferungen.bpmn", MODEL, keys).await.unwrap();
    let id = pf
        .start(
            "lieferungen",
            postfach::vars([("positionen", serde_json::json!(["P1", "P2"]))]),
            None,
        )
        .await
        .unwrap();
    let done = pf
        .publish(postfach::Publish {
            name: "Lieferung".into(),
            key: "P1".into(),
            message_id: Some("m-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.outcome, postfach::Outcome::Correlated);
    pf.close();

    let srv = Server::launch(dir.path(), &[], &[]);
    let b = Driver::start();
    b.open(&format!("http://{}/#view=instance&id={id}", srv.addr));
    b.wait_for_text("#instance-title", &format!("Instance {id} "));
    let rows = b.wait_for_text("#tokens", "inner instance of token");
    assert!(
        rows.contains("its inner instances: 1 of 2 completed"),
        "the body says how far it is: {rows}"
    );
    assert!(
        rows.contains(r#"message Lieferung key P2 (inner instance of token 1; loopCounter = 1, position = "P2")"#),
        "the waiting inner instance shows its item: {rows}"
    );
    b.screenshot("multi-instance-inner");
    let errors = b.errors();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}
