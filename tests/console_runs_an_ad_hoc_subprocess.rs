//! On an instance's page the console runs an ad-hoc subprocess: the token
//! holding it offers the activities that can be activated; activating one
//! starts it inside, and completing the subprocess while it runs is refused
//! with the API's answer; once nothing runs, completing it moves the
//! instance on (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;
use serde_json::json;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="klaerung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="klaeren"/>
    <adHocSubProcess id="klaeren">
      <receiveTask id="rueckfrage"/>
      <receiveTask id="nachfassen"/>
    </adHocSubProcess>
    <sequenceFlow id="f2" sourceRef="klaeren" targetRef="nachher"/>
    <receiveTask id="nachher"/>
    <sequenceFlow id="f3" sourceRef="nachher" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[test]
fn an_operator_activates_and_completes_an_ad_hoc_subprocess_in_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "klaerung.bpmn", "xml": MODEL})),
    );
    assert_eq!(status, 200, "{body}");
    let (_, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "klaerung", "variables": {}})),
    );
    let id = started["instance"].as_str().unwrap().to_string();

    let b = Driver::start();
    b.open(&format!("http://{}/#view=instance&id={id}", srv.addr));
    let holder = r#"tr[data-element="klaeren"]"#;
    b.find(&format!("{holder} select.activate-what"));
    b.select(&format!("{holder} select.activate-what"), "nachfassen");
    b.click(&format!("{holder} button.activate"));
    srv.wait_for(&format!("/instances/{id}"), |v| {
        v["waiting_at"]
            .as_array()
            .is_some_and(|w| w.iter().any(|e| e == "nachfassen"))
    });
    b.find(r#"tr[data-element="nachfassen"]"#);
    // something runs inside: completing it is refused, the answer shown
    b.click(&format!("{holder} button.complete-ad-hoc"));
    b.wait_for_text("#repair-outcome", "still run in it");

    // the activity is done (triggered over the API); completing moves it on
    let (_, v) = srv.json("GET", &format!("/instances/{id}"), None);
    let t = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["element"] == "nachfassen")
        .unwrap()["token"]
        .as_u64()
        .unwrap();
    let (status, _) = srv.json(
        "POST",
        &format!("/instances/{id}/tokens/{t}/trigger"),
        Some(json!({})),
    );
    assert_eq!(status, 200);
    b.open(&format!("http://{}/#view=instance&id={id}", srv.addr));
    b.find(&format!("{holder} button.complete-ad-hoc"));
    b.click(&format!("{holder} button.complete-ad-hoc"));
    srv.wait_for(&format!("/instances/{id}"), |v| {
        v["waiting_at"] == json!(["nachher"])
    });
    let errors = b.errors();
    // the refused completion is the API's 409, which the browser logs
    assert!(errors.iter().all(|e| e.contains("409")), "{errors:?}");
}
