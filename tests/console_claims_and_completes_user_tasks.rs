//! In the console's task list a person says who they are, claims a user
//! task, gives it back, claims it again and completes it with the variables
//! a form would send (a JSON object); the instance moves on with them. A
//! claim of a task someone else holds is refused with the API's answer, and
//! variables that are not a JSON object are refused in the page before
//! anything is sent (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;
use serde_json::json;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn">
  <process id="antrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="review"/>
    <userTask id="review" name="Antrag prüfen" flowable:candidateUsers="anna, ben"
        flowable:formKey="antrag-form"/>
    <sequenceFlow id="f1" sourceRef="review" targetRef="gate"/>
    <exclusiveGateway id="gate" default="f3"/>
    <sequenceFlow id="f2" sourceRef="gate" targetRef="approved">
      <conditionExpression>${freigegeben}</conditionExpression>
    </sequenceFlow>
    <sequenceFlow id="f3" sourceRef="gate" targetRef="rejected"/>
    <endEvent id="approved"/>
    <endEvent id="rejected"/>
  </process>
</definitions>"#;

#[test]
fn a_person_claims_gives_back_and_completes_a_task_with_form_variables() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "antrag.bpmn", "xml": MODEL})),
    );
    assert_eq!(status, 200, "{body}");
    let mut instances = Vec::new();
    for _ in 0..2 {
        let (status, started) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "antrag", "variables": {}})),
        );
        assert_eq!(status, 201, "{started}");
        instances.push(started["instance"].as_str().unwrap().to_string());
    }
    let (_, tasks) = srv.json("GET", "/tasks", None);
    let ids: Vec<String> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{tasks}");
    let (mine, bens) = (&ids[0], &ids[1]);
    // ben holds the second task already
    let (status, _) = srv.json(
        "POST",
        &format!("/tasks/{bens}/claim"),
        Some(json!({"user": "ben"})),
    );
    assert_eq!(status, 200);

    let b = Driver::start();
    b.open(&format!("http://{}/#view=tasks", srv.addr));
    let row = |task: &str| format!(r#"tr[data-task="{task}"]"#);
    b.find(&format!("{} button.claim", row(mine)));
    // who you are comes first: nothing is sent without it
    b.click(&format!("{} button.claim", row(mine)));
    b.wait_for_text("#problem", "say who you are first");

    b.type_into("#task-who", "anna");
    b.click(&format!("{} button.claim", row(mine)));
    srv.wait_for("/tasks?assignee=anna", |v| {
        v["tasks"].as_array().is_some_and(|t| t.len() == 1)
    });
    b.wait_for_text("#tasks-done", &format!("task {mine} claimed by anna"));
    // the page now offers to give it back
    b.click(&format!(
        r#"{}[data-assignee="anna"] button.unclaim"#,
        row(mine)
    ));
    srv.wait_for("/tasks?assignee=anna", |v| {
        v["tasks"].as_array().is_some_and(Vec::is_empty)
    });
    b.click(&format!("{} button.claim", row(mine)));
    srv.wait_for("/tasks?assignee=anna", |v| {
        v["tasks"].as_array().is_some_and(|t| t.len() == 1)
    });

    // ben's task: the API's refusal is shown, ben keeps it
    b.click(&format!("{} button.unclaim", row(bens)));
    b.wait_for_text("#problem", "ben");
    let (_, held) = srv.json("GET", "/tasks?assignee=ben", None);
    assert_eq!(held["tasks"].as_array().unwrap().len(), 1, "{held}");

    // variables that are not an object are refused in the page
    let vars = format!(r#"{}[data-assignee="anna"] textarea.variables"#, row(mine));
    b.type_into(&vars, "[1, 2]");
    b.click(&format!(
        r#"{}[data-assignee="anna"] button.complete"#,
        row(mine)
    ));
    b.wait_for_text("#problem", "must be a JSON object");
    let (_, open) = srv.json("GET", "/tasks", None);
    assert_eq!(
        open["tasks"].as_array().unwrap().len(),
        2,
        "nothing was sent"
    );

    // the form's variables decide the gateway after the task
    b.execute(&format!(
        "document.querySelector({vars:?}).value = ''; return true;"
    ));
    b.type_into(&vars, r#"{"freigegeben": true, "bemerkung": "passt"}"#);
    b.click(&format!(
        r#"{}[data-assignee="anna"] button.complete"#,
        row(mine)
    ));
    let done = srv.wait_for(&format!("/instances/{}", instances[0]), |v| {
        v["state"] == "completed"
    });
    assert_eq!(done["variables"]["bemerkung"], "passt", "{done}");
    assert!(
        done["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["element"] == "approved"),
        "the variables took the approved path: {done}"
    );
    b.wait_for_text("#tasks-done", &format!("task {mine} completed by anna"));
    // the one refusal asked for is the only thing the browser logged
    let errors: Vec<String> = b
        .errors()
        .into_iter()
        .filter(|e| !(e.contains(&format!("/tasks/{bens}/unclaim ")) && e.contains("409")))
        .collect();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}
