//! With `--server URL` every command of the contract runs inside a running
//! `postfach run` and prints what it would print locally; without it, a command
//! on the held database says so and suggests --server.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use serde_json::Value;
use std::process::{Command, Output};

fn cli(srv: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("POSTFACH_SERVER", format!("http://{}", srv.addr))
        .args(args)
        .output()
        .unwrap()
}

fn json(srv: &Server, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let o = cli(srv, &a);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

#[test]
fn the_command_line_works_against_a_running_server() {
    let srv = Server::start("127.0.0.1:0", None);
    let id = json(
        &srv,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=4711"],
    )["instance"]
        .as_str()
        .unwrap()
        .to_string();
    srv.hand_over(1);
    srv.wait_for(&format!("/instances/{id}"), |v| {
        v["waiting_at"] == serde_json::json!(["warteAufAbschluss"])
    });
    let listed = json(&srv, &["instances", "--waiting-at", "warteAufAbschluss"]);
    assert_eq!(listed["instances"][0]["instance"], id.as_str());

    // a refused repair exits 3, as locally
    let o = cli(&srv, &["add-token", &id, "auftragUebergeben"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a second token"));
    // a rejected synchronous correlation exits 3 with its JSON document
    let o = cli(
        &srv,
        &[
            "--json",
            "correlate",
            "AuftragAbgeschlossen",
            "--key",
            "niemand",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["reason"], "no_subscription");

    let d = json(
        &srv,
        &[
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "4711",
            "--id",
            "evt-1",
        ],
    );
    assert_eq!(d["outcome"], "correlated");
    srv.wait_for(&format!("/instances/{id}"), |v| v["state"] == "completed");
    let text = cli(&srv, &["instance", &id]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("completed"),
        "human output travels too"
    );

    // usage errors come back as usage errors; commands that cannot run remotely say why
    assert_eq!(cli(&srv, &["publish", "X"]).status.code(), Some(2));
    let pass = json(&srv, &["work", "--until-idle"]);
    assert!(
        pass["continuations"].is_number(),
        "one pass of the server's executor: {pass}"
    );
    let o = cli(&srv, &["work"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("executor"));

    // the database itself is held: a local command says so and points at --server
    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(&srv.db)
        .arg("jobs")
        .env_remove("POSTFACH_SERVER")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("held by another process") && stderr.contains("--server"),
        "{stderr}"
    );
    srv.stop();
}

/// A user task action answers one document however it is asked: over HTTP,
/// by the command line against the server, and (the same function) locally.
#[test]
fn a_task_action_answers_one_document_on_every_face() {
    let srv = Server::start("127.0.0.1:0", None);
    let deployed = json(&srv, &["deploy", "bpmn/antrag-freigabe.bpmn"]);
    assert_eq!(
        deployed["deployed"][0]["process"], "antrag-freigabe",
        "{deployed}"
    );
    json(
        &srv,
        &[
            "start",
            "antrag-freigabe",
            "--var",
            "frist=2026-12-20T00:00:00Z",
        ],
    );
    let tasks = json(&srv, &["tasks", "--candidate-user", "anna"]);
    let task = tasks["tasks"][0]["task"].as_str().unwrap().to_string();
    let over_http = |action: &str, body: serde_json::Value| {
        let (status, v) = srv.json("POST", &format!("/tasks/{task}/{action}"), Some(body));
        assert_eq!(status, 200, "{v}");
        v
    };
    let doc = |done: &str| serde_json::json!({"task": task, "done": done});
    assert_eq!(
        over_http("claim", serde_json::json!({"user": "ben"})),
        doc("claimed by ben")
    );
    assert_eq!(
        json(&srv, &["task", "unclaim", &task, "--user", "ben"]),
        doc("given back by ben")
    );
    assert_eq!(
        json(&srv, &["task", "claim", &task, "--user", "anna"]),
        doc("claimed by anna")
    );
    assert_eq!(
        over_http("assign", serde_json::json!({"user": "anna", "to": "ben"})),
        doc("assigned to ben by anna")
    );
    assert_eq!(
        json(&srv, &["task", "complete", &task, "--user", "ben"]),
        doc("completed by ben")
    );
}
