//! A receive task or an intermediate catch event without an event definition
//! is a wait state (Flowable's `trigger`, Camunda 7's `signal`): the token
//! rests there, visibly waiting to be triggered, until a caller moves it on —
//! through the library, HTTP or the command line — with the variables it
//! brings as the element's result. Triggering a token that waits for anything
//! else is refused and changes nothing.
use crate::common;
use common::*;
use postfach::{EngineError, Error, vars};

const MODEL: &str = bpmn!(
    r#"
  <process id="warten" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="freigabeAbwarten"/>
    <receiveTask id="freigabeAbwarten"/>
    <sequenceFlow id="f2" sourceRef="freigabeAbwarten" targetRef="pause"/>
    <intermediateCatchEvent id="pause"/>
    <sequenceFlow id="f3" sourceRef="pause" targetRef="pruefen"/>
    <userTask id="pruefen"/>
    <sequenceFlow id="f4" sourceRef="pruefen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn a_wait_state_waits_until_a_caller_triggers_it() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.pf.start("warten", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["freigabeAbwarten"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.tokens[0].waits_for, "to be triggered");

    let t = env.token_at(id, "freigabeAbwarten");
    let left = env
        .pf
        .trigger(id, t, vars([("freigegeben", true.into())]))
        .await
        .unwrap();
    assert_eq!(left.element, "freigabeAbwarten");
    assert_eq!(left.waiting_at, ["pause"]);
    assert_eq!(
        env.waiting_at(id),
        ["pause"],
        "the catch without a definition waits too"
    );
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.variables["freigegeben"], true);
    assert!(has(&env.history(id), "freigabeAbwarten", "triggered"));

    // the user task waits for a person, not for a trigger: refused, nothing moves
    let t = env.token_at(id, "pause");
    env.pf.trigger(id, t, no_vars()).await.unwrap();
    assert_eq!(env.waiting_at(id), ["pruefen"]);
    let t = env.token_at(id, "pruefen");
    let e = env.pf.trigger(id, t, no_vars()).await.unwrap_err();
    assert!(
        matches!(&e, Error::Engine(EngineError::NotTriggerable { element, .. }) if element == "pruefen"),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("does not wait to be triggered"),
        "{e}"
    );
    assert_eq!(env.waiting_at(id), ["pruefen"]);
    let e = env.pf.trigger(id, 99, no_vars()).await.unwrap_err();
    assert!(
        matches!(e, Error::Engine(EngineError::UnknownToken { .. })),
        "{e:?}"
    );
}

#[cfg(feature = "server")]
#[test]
fn http_and_the_command_line_trigger_by_token_or_element() {
    let srv = common::server::Server::start("127.0.0.1:0", None);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(serde_json::json!({"file": "warten.bpmn", "xml": MODEL})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = srv.json(
        "POST",
        "/instances",
        Some(serde_json::json!({"process": "warten"})),
    );
    assert_eq!(status, 201, "{body}");
    let id = body["instance"].as_str().unwrap().to_string();
    let (_, v) = srv.json("GET", &format!("/instances/{id}"), None);
    let token = v["tokens"][0]["token"].as_u64().unwrap();
    let (status, body) = srv.json(
        "POST",
        &format!("/instances/{id}/tokens/{token}/trigger"),
        Some(serde_json::json!({"variables": {"freigegeben": true}})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["triggered"], "freigabeAbwarten");
    assert_eq!(body["waiting_at"], serde_json::json!(["pause"]));
    // a token that waits for something else: 409
    let (_, v) = srv.json("GET", &format!("/instances/{id}"), None);
    let token = v["tokens"][0]["token"].as_u64().unwrap();
    let (status, _) = srv.json(
        "POST",
        &format!("/instances/{id}/tokens/{token}/trigger"),
        Some(serde_json::json!({"variables": {}})),
    );
    assert_eq!(status, 200, "pause is a wait state too");
    let (_, v) = srv.json("GET", &format!("/instances/{id}"), None);
    let token = v["tokens"][0]["token"].as_u64().unwrap();
    let (status, body) = srv.json(
        "POST",
        &format!("/instances/{id}/tokens/{token}/trigger"),
        Some(serde_json::json!({})),
    );
    assert_eq!(status, 409, "{body}");

    // the command line, through the server, by element
    let (status, body) = srv.json(
        "POST",
        "/instances",
        Some(serde_json::json!({"process": "warten"})),
    );
    assert_eq!(status, 201, "{body}");
    let second = body["instance"].as_str().unwrap().to_string();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args([
            "--server",
            &format!("http://{}", srv.addr),
            "trigger",
            &second,
            "freigabeAbwarten",
            "--var",
            "n=1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("left freigabeAbwarten") && text.contains("now waits at pause"),
        "{text}"
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args([
            "--server",
            &format!("http://{}", srv.addr),
            "trigger",
            &second,
            "nirgends",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no token of instance"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    srv.stop();
}

/// By element on the command line: the inner instance of a sequential
/// multi-instance receive task is what waits (its body does not), and an
/// instance that has ended is an error saying so (exit 1), not a usage
/// error about tokens.
#[cfg(feature = "server")]
#[test]
fn the_command_line_triggers_an_inner_instance_and_says_when_the_instance_ended() {
    const LOOP: &str = bpmn!(
        r#"
  <process id="runden" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="runde"/>
    <receiveTask id="runde">
      <multiInstanceLoopCharacteristics isSequential="true"><loopCardinality>2</loopCardinality></multiInstanceLoopCharacteristics>
    </receiveTask>
    <sequenceFlow id="f2" sourceRef="runde" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.redb");
    let file = dir.path().join("runden.bpmn");
    std::fs::write(&file, LOOP).unwrap();
    let o = cli(&db, &["deploy", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cli(&db, &["--json", "start", "runden"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = v["instance"].as_str().unwrap().to_string();
    for round in 0..2 {
        let o = cli(&db, &["trigger", &id, "runde"]);
        assert!(
            o.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = cli(&db, &["--json", "instance", &id]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let o = cli(&db, &["trigger", &id, "runde"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("instance {id} has ended")), "{err}");
}
