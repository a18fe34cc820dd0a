//! A repair must name an element. An empty element id was once taken for the
//! process's first element: adding a token "before ''" to an order that waited
//! to be invoiced put a second token before the hand-over, which would have
//! handed the order to the provider twice. The library, the HTTP API and the
//! command line refuse it like any other unknown element and change nothing.
use crate::common;
#[cfg(feature = "server")]
use common::server::Server;
use common::*;
use postfach::{EngineError, Error};
#[cfg(feature = "server")]
use serde_json::json;
#[cfg(feature = "server")]
use std::process::Command;

/// An order waiting at the catch event, with the hand-over done.
async fn order_at_the_catch_event() -> (Env, u64) {
    let env = Env::reference().await;
    let id = env.waiting_order("4711").await;
    assert_eq!(env.waiting_at(id), vec!["warteAufAbschluss"]);
    (env, id)
}

fn assert_unknown_empty_element(e: Error) {
    assert!(
        matches!(&e, Error::Engine(EngineError::UnknownElement { element, .. }) if element.is_empty()),
        "{e}"
    );
}

#[tokio::test]
async fn library_add_and_move_with_an_empty_element_are_refused_and_change_nothing() {
    let (env, id) = order_at_the_catch_event().await;
    let history = env.history(id);
    let jobs = env.jobs().len();

    for force in [false, true] {
        assert_unknown_empty_element(env.pf.add_token(id, "", force).await.unwrap_err());
    }
    let token = env
        .pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .tokens[0]
        .token;
    for force in [false, true] {
        assert_unknown_empty_element(env.pf.move_token(id, token, "", force).await.unwrap_err());
    }

    assert_eq!(env.waiting_at(id), vec!["warteAufAbschluss"]);
    assert_eq!(env.history(id), history, "nothing was recorded");
    assert_eq!(env.jobs().len(), jobs, "no second hand-over job");
    assert_eq!(env.lock(HAND_OVER, 10, "provider", 60_000).await.len(), 0);
    // cancelling by token id still works: it names no element
    env.pf.cancel_token(id, token).await.unwrap();
    assert_eq!(env.state(id), "cancelled");
}

#[test]
#[cfg(feature = "server")]
fn http_add_and_move_with_an_empty_element_answer_404_and_change_nothing() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "4711"}})),
    );
    assert_eq!(status, 201);
    let id = started["instance"].as_str().unwrap().to_string();
    srv.hand_over(1);
    let before = srv.wait_for(&format!("/instances/{id}"), |v| {
        v["waiting_at"] == json!(["warteAufAbschluss"])
    });
    let token = before["tokens"][0]["token"].to_string();

    for (path, body) in [
        (format!("/instances/{id}/tokens"), json!({"element": ""})),
        (
            format!("/instances/{id}/tokens"),
            json!({"element": "", "force": true}),
        ),
        (
            format!("/instances/{id}/tokens/{token}/move"),
            json!({"element": ""}),
        ),
        (
            format!("/instances/{id}/tokens/{token}/move"),
            json!({"element": "", "force": true}),
        ),
    ] {
        let (status, answer) = srv.json("POST", &path, Some(body.clone()));
        assert_eq!(status, 404, "{path} {body}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("element ''"),
            "{answer}"
        );
    }
    let (_, after) = srv.json("GET", &format!("/instances/{id}"), None);
    assert_eq!(after["waiting_at"], json!(["warteAufAbschluss"]));
    assert_eq!(after["history"], before["history"], "nothing was recorded");
    let (_, jobs) = srv.json("GET", "/jobs", None);
    let hand_overs = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["element"] == HAND_OVER)
        .count();
    assert_eq!(hand_overs, 0, "no second hand-over job: {jobs}");
}

#[test]
#[cfg(feature = "server")]
fn cli_add_and_move_with_an_empty_element_exit_1_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--db")
            .arg(dir.path().join("cli.redb"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let o = run(&a);
        assert!(o.status.success(), "{args:?}: {o:?}");
        serde_json::from_slice(&o.stdout).unwrap()
    };
    json(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    let id = json(&["start", "auftrag-ausfuehrung", "--var", "auftragId=7"])["instance"]
        .as_str()
        .unwrap()
        .to_string();
    json(&["work", "--until-idle"]);
    let before = json(&["instance", &id]);
    let jobs_before = json(&["jobs"]);
    let token = before["tokens"][0]["token"].to_string();

    for args in [
        vec!["add-token", &id, ""],
        vec!["add-token", &id, "", "--force"],
        vec!["move-token", &id, &token, ""],
        vec!["move-token", &id, &token, "", "--force"],
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("element ''"), "{args:?}: {err}");
    }
    let after = json(&["instance", &id]);
    assert_eq!(after["waiting_at"], before["waiting_at"]);
    assert_eq!(after["history"], before["history"], "nothing was recorded");
    assert_eq!(json(&["jobs"]), jobs_before, "no second hand-over job");
}
