//! DMN decisions deploy like processes (versioned by id; an identical file
//! keeps its version) and business rule tasks decide in the engine, in the
//! step the token arrives in: Zeebe's `calledDecision` keeps the value as it
//! is, Camunda's `decisionRef` maps it as `mapDecisionResult` says,
//! Flowable's `decisionTableReferenceKey` sets each output as a variable.
//! The history records decision, version and matched rules. A decision
//! that is not deployed, or that DMN cannot evaluate, is an incident naming
//! it; once it is deployed, moving the token there decides. A decision is
//! also evaluated without a process (`Postfach::decide`).
#![cfg(feature = "feel")]
use crate::common;
use common::*;
use postfach::{EngineError, Error, vars};

const CREDIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/credit" name="credit" id="credit">
  <decision name="Credit" id="credit-check">
    <decisionTable id="dt" hitPolicy="FIRST">
      <input id="i1"><inputExpression typeRef="number"><text>amount</text></inputExpression></input>
      <input id="i2"><inputExpression typeRef="string"><text>rating</text></inputExpression></input>
      <output id="o1" name="approved" typeRef="boolean"/>
      <output id="o2" name="limit" typeRef="number"/>
      <rule id="small"><inputEntry id="a1"><text>&lt;= 1000</text></inputEntry><inputEntry id="a2"><text>-</text></inputEntry><outputEntry id="a3"><text>true</text></outputEntry><outputEntry id="a4"><text>1000</text></outputEntry></rule>
      <rule id="good"><inputEntry id="b1"><text>&lt;= 50000</text></inputEntry><inputEntry id="b2"><text>"A","B"</text></inputEntry><outputEntry id="b3"><text>true</text></outputEntry><outputEntry id="b4"><text>amount * 1.1</text></outputEntry></rule>
      <rule id="rest"><inputEntry id="c1"><text>-</text></inputEntry><inputEntry id="c2"><text>-</text></inputEntry><outputEntry id="c3"><text>false</text></outputEntry><outputEntry id="c4"><text>0</text></outputEntry></rule>
    </decisionTable>
  </decision>
  <decision name="Channel" id="channel">
    <decisionTable id="ct" hitPolicy="UNIQUE">
      <input id="ci"><inputExpression typeRef="number"><text>amount</text></inputExpression></input>
      <output id="co" name="channel" typeRef="string"/>
      <rule id="online"><inputEntry id="d1"><text>&lt; 5000</text></inputEntry><outputEntry id="d2"><text>"online"</text></outputEntry></rule>
      <rule id="branch"><inputEntry id="e1"><text>&gt;= 5000</text></inputEntry><outputEntry id="e2"><text>"branch"</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;

const PROCESSES: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
    xmlns:flowable="http://flowable.org/bpmn">
  <process id="zeebe" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="check"/>
    <businessRuleTask id="check">
      <extensionElements><zeebe:calledDecision decisionId="credit-check" resultVariable="credit"/></extensionElements>
    </businessRuleTask>
    <sequenceFlow id="f1" sourceRef="check" targetRef="wait"/>
    <receiveTask id="wait"/>
  </process>
  <process id="camunda" isExecutable="true">
    <startEvent id="s2"/>
    <sequenceFlow id="g0" sourceRef="s2" targetRef="route"/>
    <businessRuleTask id="route" camunda:decisionRef="channel" camunda:mapDecisionResult="singleEntry" camunda:resultVariable="channel"/>
    <sequenceFlow id="g1" sourceRef="route" targetRef="wait2"/>
    <receiveTask id="wait2"/>
  </process>
  <process id="flowable" isExecutable="true">
    <startEvent id="s3"/>
    <sequenceFlow id="h0" sourceRef="s3" targetRef="rules"/>
    <businessRuleTask id="rules" flowable:decisionTableReferenceKey="credit-check"/>
    <sequenceFlow id="h1" sourceRef="rules" targetRef="wait3"/>
    <receiveTask id="wait3"/>
  </process>
</definitions>"#;

fn variables(env: &Env, id: u64) -> postfach::Vars {
    env.pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .variables
}

#[tokio::test]
async fn each_vendor_s_business_rule_task_decides_in_the_step() {
    let env = Env::new();
    let d = env
        .pf
        .deploy("credit.dmn", CREDIT, Default::default())
        .await
        .unwrap();
    let listed: Vec<_> = d
        .iter()
        .map(|d| (d.process.as_str(), d.version, d.decision))
        .collect();
    assert_eq!(listed, [("credit-check", 1, true), ("channel", 1, true)]);
    env.deploy(PROCESSES).await;

    let z = env
        .pf
        .start(
            "zeebe",
            vars([("amount", 20000.into()), ("rating", "B".into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(z), ["wait"]);
    assert_eq!(
        variables(&env, z)["credit"],
        serde_json::json!({"approved": true, "limit": 22000})
    );
    assert!(has(
        &env.history(z),
        "check",
        "decided credit-check v1: rules good,rest"
    ));

    let c = env
        .pf
        .start("camunda", vars([("amount", 7000.into())]), None)
        .await
        .unwrap();
    assert_eq!(variables(&env, c)["channel"], "branch");
    assert!(has(
        &env.history(c),
        "route",
        "decided channel v1: rules branch"
    ));

    let f = env
        .pf
        .start(
            "flowable",
            vars([("amount", 500.into()), ("rating", "C".into())]),
            None,
        )
        .await
        .unwrap();
    let v = variables(&env, f);
    assert_eq!(
        (v["approved"].clone(), v["limit"].clone()),
        (true.into(), 1000.into())
    );

    // without a process
    let d = env
        .pf
        .decide("channel", &vars([("amount", 10.into())]))
        .unwrap();
    assert_eq!(
        (d.value, d.version, d.rules),
        ("online".into(), 1, vec!["online".to_string()])
    );
    assert!(matches!(
        env.pf.decide("nope", &vars([])).unwrap_err(),
        Error::Engine(EngineError::UnknownDecision(id)) if id == "nope"
    ));
}

#[tokio::test]
async fn decisions_are_versioned_and_a_task_uses_the_latest() {
    let env = Env::new();
    env.pf
        .deploy("credit.dmn", CREDIT, Default::default())
        .await
        .unwrap();
    let again = env
        .pf
        .deploy("credit.dmn", CREDIT, Default::default())
        .await
        .unwrap();
    assert!(again.iter().all(|d| d.version == 1 && !d.new_version));
    let changed = CREDIT.replace(r#"<text>"online"</text>"#, r#"<text>"web"</text>"#);
    let v2 = env
        .pf
        .deploy("credit.dmn", &changed, Default::default())
        .await
        .unwrap();
    assert!(v2.iter().all(|d| d.version == 2 && d.new_version));
    env.deploy(PROCESSES).await;
    let c = env
        .pf
        .start("camunda", vars([("amount", 10.into())]), None)
        .await
        .unwrap();
    assert_eq!(variables(&env, c)["channel"], "web");
    assert!(
        has(&env.history(c), "route", "decided channel v2: rules online"),
        "{:?}",
        env.history(c)
    );
    let listed = env.pf.reader().unwrap().decisions().unwrap();
    assert!(listed.iter().any(|d| d.id == "channel" && d.version == 2));

    // a task bound to version 1 keeps deciding with it
    let pinned = |binding: &str| {
        format!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <process id="pinned" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="route"/>
    <businessRuleTask id="route" camunda:decisionRef="channel" {binding} camunda:mapDecisionResult="singleEntry" camunda:resultVariable="channel"/>
    <sequenceFlow id="f1" sourceRef="route" targetRef="wait"/>
    <receiveTask id="wait"/>
  </process>
</definitions>"#
        )
    };
    env.deploy(&pinned(
        r#"camunda:decisionRefBinding="version" camunda:decisionRefVersion="1""#,
    ))
    .await;
    let p = env
        .pf
        .start("pinned", vars([("amount", 10.into())]), None)
        .await
        .unwrap();
    assert_eq!(variables(&env, p)["channel"], "online");
    assert!(has(
        &env.history(p),
        "route",
        "decided channel v1: rules online"
    ));
    // what postfach cannot resolve is refused by name; the deployment binding warns
    let e = env
        .refusal(&pinned(r#"camunda:decisionRefBinding="versionTag""#))
        .await;
    assert!(
        e.contains("decision binding 'versionTag' is not supported"),
        "{e}"
    );
    let e = env
        .refusal(&pinned(
            r#"camunda:decisionRefBinding="version" camunda:decisionRefVersion="zwei""#,
        ))
        .await;
    assert!(e.contains("decisionRefVersion"), "{e}");
    let d = env
        .pf
        .deploy_checked(
            "p.bpmn",
            &pinned(r#"camunda:decisionRefBinding="deployment""#),
            Default::default(),
            false,
        )
        .await
        .unwrap();
    assert!(
        d.warnings
            .iter()
            .any(|w| w.id == "route" && w.message.contains("latest deployed version")),
        "{:?}",
        d.warnings
    );
}

#[tokio::test]
async fn a_decision_that_cannot_decide_is_an_incident_until_it_can() {
    let env = Env::new();
    env.deploy(PROCESSES).await;
    // not deployed yet
    let z = env
        .pf
        .start(
            "zeebe",
            vars([("amount", 20000.into()), ("rating", "B".into())]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(env.state(z), "incident");
    let v = env.pf.reader().unwrap().instance(z).unwrap().unwrap();
    let at = v.tokens.iter().find(|t| t.element == "check").unwrap();
    assert!(
        at.waits_for.contains("'credit-check' is not deployed"),
        "{}",
        at.waits_for
    );
    assert!(!variables(&env, z).contains_key("credit"));
    // deployed, the token moved back onto the task decides
    env.pf
        .deploy("credit.dmn", CREDIT, Default::default())
        .await
        .unwrap();
    env.pf
        .move_token(z, at.token, "check", false)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(z), ["wait"]);
    assert_eq!(variables(&env, z)["credit"]["approved"], true);
}

#[tokio::test]
async fn a_decision_file_that_does_not_parse_is_refused_naming_element_and_line() {
    let env = Env::new();
    let bad = CREDIT.replace("&lt;= 50000", "&lt;= ");
    let e = env
        .pf
        .deploy("credit.dmn", &bad, Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("credit.dmn"), "{e}");
    assert!(e.contains("'b1'"), "{e}");
    assert!(e.contains("line 10"), "{e}");
    assert!(env.pf.reader().unwrap().decisions().unwrap().is_empty());
}

#[cfg(feature = "server")]
#[test]
fn the_command_line_and_http_deploy_list_and_evaluate_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.redb");
    let file = dir.path().join("credit.dmn");
    std::fs::write(&file, CREDIT).unwrap();
    let o = cli(&db, &["--json", "deploy", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["deployed"][0]["kind"], "decision");
    let o = cli(
        &db,
        &[
            "--json",
            "decide",
            "credit-check",
            "--var",
            "amount:=20000",
            "--var",
            "rating=A",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["value"],
        serde_json::json!({"approved": true, "limit": 22000})
    );
    assert_eq!(v["rules"], serde_json::json!(["good", "rest"]));
    let o = cli(&db, &["decisions"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("credit-check v1"));
    let o = cli(&db, &["decide", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("'nope'") && err.contains("postfach deploy FILE.dmn"),
        "{err}"
    );

    let server = common::server::Server::start("127.0.0.1:0", None);
    let (status, _) = server.json(
        "POST",
        "/deployments",
        Some(serde_json::json!({"file": "credit.dmn", "xml": CREDIT})),
    );
    assert_eq!(status, 200);
    let (status, v) = server.json(
        "POST",
        "/decisions/channel/evaluate",
        Some(serde_json::json!({"variables": {"amount": 9000}})),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["value"].clone(), v["rules"].clone()),
        ("branch".into(), serde_json::json!(["branch"]))
    );
    let (status, v) = server.json("GET", "/decisions", None);
    assert_eq!(status, 200);
    assert_eq!(v["decisions"].as_array().unwrap().len(), 2);
    let (status, _) = server.json(
        "POST",
        "/decisions/nope/evaluate",
        Some(serde_json::json!({})),
    );
    assert_eq!(status, 404);
}

/// The console's instance page lists the decision in the history: which
/// decision, which version, which rules matched (headless chromium).
#[cfg(feature = "server")]
#[test]
fn the_console_shows_which_rules_decided() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let srv = common::server::Server::launch(dir.path(), &[], &[]);
    for (file, xml) in [("credit.dmn", CREDIT), ("p.bpmn", PROCESSES)] {
        let (status, body) = srv.json(
            "POST",
            "/deployments",
            Some(json!({"file": file, "xml": xml})),
        );
        assert_eq!(status, 200, "{body}");
    }
    let (_, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "zeebe", "variables": {"amount": 20000, "rating": "A"}})),
    );
    let id = started["instance"].as_str().unwrap().to_string();
    let b = common::browser::Driver::start();
    b.open(&format!("http://{}/#view=instance&id={id}", srv.addr));
    b.wait_for_text("#history", "decided credit-check v1: rules good,rest");
    assert!(b.errors().is_empty(), "{:?}", b.errors());
}

/// A decision without an id and a decision service, as the DMN TCK writes
/// them: deployed with a warning naming the id given, both evaluated by
/// `postfach decide`, a date variable read as the date its input declares.
#[cfg(feature = "server")]
#[test]
fn decision_services_and_decisions_without_id_are_deployed_and_decide() {
    const SHIPPING: &str = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/shipping" name="shipping" id="shipping-file">
  <inputData id="placed" name="placed"><variable name="placed" typeRef="date"/></inputData>
  <decision name="Due">
    <variable name="Due" typeRef="date"/>
    <informationRequirement><requiredInput href="#placed"/></informationRequirement>
    <literalExpression><text>placed + duration("P3D")</text></literalExpression>
  </decision>
  <decisionService name="Shipping" id="shipping">
    <variable name="Shipping"/>
    <outputDecision href="#decision-1"/>
    <inputData href="#placed"/>
  </decisionService>
</definitions>"##;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.redb");
    let file = dir.path().join("shipping.dmn");
    std::fs::write(&file, SHIPPING).unwrap();
    let o = cli(&db, &["deploy", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("decision decision-1 version 1")
            && text.contains("decision shipping version 1"),
        "{text}"
    );
    assert!(
        text.contains("shipping.dmn:3: 'decision-1': decision 'Due' has no id"),
        "{text}"
    );
    for decision in ["decision-1", "shipping"] {
        let o = cli(
            &db,
            &["--json", "decide", decision, "--var", "placed=2026-02-27"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["value"], "2026-03-02", "{decision}: {v}");
    }
    // --strict refuses what would be deployed with a warning
    let o = cli(&db, &["deploy", "--strict", file.to_str().unwrap()]);
    assert!(!o.status.success());
}
