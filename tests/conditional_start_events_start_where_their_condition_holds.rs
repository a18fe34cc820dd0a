//! Conditional start events as Camunda 7's `ConditionalStartEventTest` drives
//! them (`evaluateStartConditions`): variables offered to the deployed
//! processes start an instance at each conditional start event whose
//! condition holds over them, with them as its variables — through the
//! library, the command line and HTTP. A condition over a variable not
//! offered does not hold; offering to one process leaves the others alone;
//! an unknown process is refused.
use crate::common;
use common::*;
use postfach::{EngineError, Error, vars};

const AUFTRAEGE: &str = bpmn!(
    r#"
  <process id="gross" isExecutable="true">
    <startEvent id="ab1000"><conditionalEventDefinition><condition>${betrag > 1000}</condition></conditionalEventDefinition></startEvent>
    <sequenceFlow id="f1" sourceRef="ab1000" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="klein" isExecutable="true">
    <startEvent id="bis1000"><conditionalEventDefinition><condition>${betrag &lt;= 1000}</condition></conditionalEventDefinition></startEvent>
    <sequenceFlow id="g1" sourceRef="bis1000" targetRef="buchen"/>
    <receiveTask id="buchen"/>
    <sequenceFlow id="g2" sourceRef="buchen" targetRef="ke"/>
    <endEvent id="ke"/>
    <startEvent id="eilig"><conditionalEventDefinition><condition>${eilig == true}</condition></conditionalEventDefinition></startEvent>
    <sequenceFlow id="g3" sourceRef="eilig" targetRef="buchen"/>
  </process>
"#
);

#[tokio::test]
async fn offered_variables_start_every_process_whose_condition_holds() {
    let env = Env::new();
    env.deploy(AUFTRAEGE).await;
    let started = env
        .pf
        .start_by_conditions(None, vars([("betrag", 1500.into())]))
        .await
        .unwrap();
    assert_eq!(started.len(), 1);
    let v = env
        .pf
        .reader()
        .unwrap()
        .instance(started[0])
        .unwrap()
        .unwrap();
    assert_eq!(v.process, "gross");
    assert_eq!(v.variables["betrag"], 1500);
    assert_eq!(v.waiting_at, ["pruefen"]);
    assert!(has(&env.history(started[0]), "ab1000", "completed"));

    // two conditional starts of one process that hold start two instances
    let started = env
        .pf
        .start_by_conditions(None, vars([("betrag", 10.into()), ("eilig", true.into())]))
        .await
        .unwrap();
    assert_eq!(started.len(), 2);
    for id in &started {
        assert_eq!(env.waiting_at(*id), ["buchen"]);
    }

    // offered to one process only: the other is left alone
    let none = env
        .pf
        .start_by_conditions(Some("klein"), vars([("betrag", 5000.into())]))
        .await
        .unwrap();
    assert!(none.is_empty());
    // a condition over a variable not offered does not hold
    let none = env.pf.start_by_conditions(None, no_vars()).await.unwrap();
    assert!(none.is_empty());
    let e = env
        .pf
        .start_by_conditions(Some("nirgends"), no_vars())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Engine(EngineError::UnknownProcess(p)) if p == "nirgends"),
        "{e:?}"
    );
}

#[cfg(feature = "server")]
#[test]
fn the_command_line_offers_variables_to_conditional_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.redb");
    let model = dir.path().join("auftraege.bpmn");
    std::fs::write(&model, AUFTRAEGE).unwrap();
    let out = cli(&db, &["deploy", model.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let out = cli(&db, &["conditions", "--var", "betrag=2000"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("started 1 instance(s)"), "{text}");
    let out = cli(
        &db,
        &["conditions", "--process", "klein", "--var", "betrag=2000"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nothing started"), "{text}");
    let out = cli(&db, &["conditions", "--process", "nirgends"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nirgends"),
        "{out:?}"
    );
}

#[cfg(feature = "server")]
#[test]
fn http_offers_variables_to_conditional_starts() {
    use serde_json::json;
    let srv = common::server::Server::start("127.0.0.1:0", None);
    let (status, d) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "auftraege.bpmn", "xml": AUFTRAEGE})),
    );
    assert_eq!(status, 200, "{d}");
    let (status, d) = srv.json(
        "POST",
        "/conditions",
        Some(json!({"variables": {"betrag": 3000}})),
    );
    assert_eq!(status, 200, "{d}");
    let started = d["started"].as_array().unwrap();
    assert_eq!(started.len(), 1, "{d}");
    let (_, v) = srv.json(
        "GET",
        &format!("/instances/{}", started[0].as_str().unwrap()),
        None,
    );
    assert_eq!(v["process"], "gross", "{v}");
    let (status, d) = srv.json("POST", "/conditions", Some(json!({"process": "nirgends"})));
    assert_eq!(status, 404, "{d}");
}
