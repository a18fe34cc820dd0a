//! Nothing in a model is ignored silently: what deploys but will not run as
//! written — a skipped non-executable pool, an execution listener, a Java
//! implementation class, a variable mapping it cannot evaluate, a typed send task
//! that waits for a worker — comes back as a warning naming the element, in the
//! library, the command line (text and JSON) and the HTTP API; a strict deploy
//! refuses the model instead and stores nothing.
use crate::common;
use common::*;
use postfach::model::ParseError;
use postfach::{EngineError, Error, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn" xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <collaboration id="c">
    <participant id="p1" processRef="billing"/>
    <participant id="p2" processRef="customer"/>
  </collaboration>
  <process id="billing" isExecutable="true">
    <extensionElements><flowable:executionListener event="start" class="com.acme.Audit"/></extensionElements>
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="calc"/>
    <serviceTask id="calc" camunda:class="com.acme.Calc" camunda:asyncAfter="true">
      <extensionElements><camunda:inputOutput><camunda:inputParameter name="x">1</camunda:inputParameter><camunda:inputParameter name="y">${x + 1}</camunda:inputParameter></camunda:inputOutput></extensionElements>
    </serviceTask>
    <sequenceFlow id="f1" sourceRef="calc" targetRef="mail"/>
    <sendTask id="mail" flowable:type="mail"/>
    <sequenceFlow id="f2" sourceRef="mail" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="customer" isExecutable="false">
    <startEvent id="cs"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn every_part_not_executed_is_named_and_strict_refuses() {
    let env = Env::new();
    let d = env
        .pf
        .deploy_checked("billing.bpmn", MODEL, Default::default(), false)
        .await
        .unwrap();
    assert_eq!(d.deployed.len(), 1);
    assert_eq!(d.deployed[0].process, "billing");
    let said = |id: &str, text: &str| {
        assert!(
            d.warnings
                .iter()
                .any(|w| w.id == id && w.message.contains(text)),
            "no warning at '{id}' saying '{text}': {:#?}",
            d.warnings
        )
    };
    said("customer", "not executable");
    said(
        "billing",
        "executionListener (class 'com.acme.Audit') is not run",
    );
    said(
        "calc",
        "class 'com.acme.Calc' is not run: the task waits as a job on topic 'calc'",
    );
    // asyncAfter and the plain input are applied; the arithmetic is not
    said("calc", "inputOutput input 'y' is not applied");
    said(
        "mail",
        "sendTask of type 'mail' is not run by postfach: it waits as a job on topic 'mail'",
    );
    assert_eq!(d.warnings.len(), 5, "{:#?}", d.warnings);
    // the skipped pool is not deployed
    assert!(matches!(
        env.pf.start("customer", vars([]), None).await,
        Err(Error::Engine(EngineError::UnknownProcess(_)))
    ));

    let other = Env::new();
    let err = other
        .pf
        .deploy_checked("billing.bpmn", MODEL, Default::default(), true)
        .await
        .unwrap_err();
    match &err {
        Error::Engine(EngineError::Parse(ParseError::Strict { warnings, .. })) => {
            assert_eq!(warnings.len(), 5)
        }
        other => panic!("expected a strict refusal, got {other}"),
    }
    assert!(err.to_string().contains("'calc'"), "{err}");
    assert!(
        matches!(
            other.pf.start("billing", vars([]), None).await,
            Err(Error::Engine(EngineError::UnknownProcess(_)))
        ),
        "a refused model stores nothing"
    );
}

#[test]
#[cfg(feature = "server")]
fn the_command_line_prints_warnings_and_strict_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("billing.bpmn");
    std::fs::write(&model, MODEL).unwrap();
    let db = dir.path().join("db.redb");
    let m = model.to_str().unwrap();

    let o = cli(&db, &["--json", "deploy", m]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["deployed"][0]["process"], "billing");
    let warnings = doc["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 5, "{doc}");
    assert!(warnings.iter().any(|w| w["element"] == "mail"));

    let o = cli(&db, &["deploy", m]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("warning: "), "{text}");
    assert!(text.contains("'calc'"), "{text}");

    let o = cli(&db, &["deploy", m, "--strict"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("strict deploy"), "{stderr}");
    assert!(stderr.contains("without --strict"), "{stderr}");
}

/// A flow node without an id (Flowable accepts an event subprocess written
/// so) gets a stable one — its tag and line — and the deploy says which; the
/// model runs, and the history names the node by that id.
#[tokio::test]
async fn a_flow_node_without_an_id_gets_one_and_the_deploy_says_which() {
    let model = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="Hinweis" postfach:correlationKey="auftragId"/>
  <process id="ohneId" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
    <subProcess triggeredByEvent="true">
      <startEvent isInterrupting="false"><messageEventDefinition messageRef="m"/></startEvent>
    </subProcess>
  </process>
</definitions>"#;
    let env = Env::new();
    let d = env
        .pf
        .deploy_checked("ohne-id.bpmn", model, Default::default(), false)
        .await
        .unwrap();
    let w: Vec<String> = d
        .warnings
        .iter()
        .map(|w| format!("{}:{} {}", w.line, w.id, w.message))
        .collect();
    assert_eq!(
        w,
        [
            "9:subProcess_9 <subProcess> has no id: postfach calls it 'subProcess_9' (in instances, history and the API)",
            "10:startEvent_10 <startEvent> has no id: postfach calls it 'startEvent_10' (in instances, history and the API)",
        ]
    );
    let id = env
        .pf
        .start("ohneId", vars([("auftragId", "A-1".into())]), None)
        .await
        .unwrap();
    env.pf
        .publish(postfach::Publish {
            name: "Hinweis".into(),
            key: "A-1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let h = env
        .pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .history;
    assert!(
        h.iter().any(|e| e.element == "subProcess_9"),
        "{:?}",
        h.iter()
            .map(|e| format!("{} {}", e.element, e.event))
            .collect::<Vec<_>>()
    );
}
