//! Named tokens with roles (`[auth] tokens_file`, each kept as its SHA-256):
//! through `postfach run` and through a gateway, each role calls what it is
//! granted; what it is not is refused with 403 naming the permission it
//! needs, and nothing changes — a starter deploying, a reader repairing, a
//! worker publishing. No token and an unknown one are 401; the admin token
//! of `--token-file` works beside the named ones. A worker limited to a
//! topic (`worker:TOPIC`) works on that topic's jobs only; a person's token
//! acts on user tasks as that person only.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const ROLES: [(&str, &str); 7] = [
    ("reader", "r-3f9a"),
    ("worker", "w-81c2"),
    ("starter", "s-77d0"),
    ("operator", "o-5e11"),
    ("admin", "a-c0de"),
    ("worker:versand", "wv-4411"),
    ("worker:rechnungStellen", "wr-4412"),
];

/// People with a worker's token of their own name.
const PEOPLE: [(&str, &str); 2] = [("anna", "p-anna-1"), ("ben", "p-ben-2")];

fn as_person(url: &str, name: &str, args: &[&str]) -> Output {
    let t = PEOPLE.iter().find(|(n, _)| *n == name).unwrap().1;
    as_role(url, Some(t), args)
}

/// A named token acts on user tasks as itself: ben cannot claim as anna,
/// anna cannot complete what ben holds; an admin may act for anyone.
fn people_act_as_themselves(url: &str) {
    let deploy = ["deploy", "bpmn/antrag-freigabe.bpmn"];
    ok(url, "admin", &deploy);
    let frist = "frist=2026-12-20T00:00:00Z";
    ok(
        url,
        "starter",
        &["start", "antrag-freigabe", "--var", frist],
    );
    let tasks = ok(url, "reader", &["tasks", "--candidate-user", "anna"]);
    let task = tasks["tasks"][0]["task"].as_str().unwrap().to_string();
    let o = as_person(url, "ben", &["task", "claim", &task, "--user", "anna"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not as 'anna'"),
        "{o:?}"
    );
    let o = as_person(url, "ben", &["task", "claim", &task, "--user", "ben"]);
    assert!(o.status.success(), "{o:?}");
    let o = as_person(url, "anna", &["task", "complete", &task, "--user", "anna"]);
    assert_eq!(o.status.code(), Some(1), "ben holds it: {o:?}");
    let o = as_person(url, "ben", &["task", "complete", &task, "--user", "ben"]);
    assert!(o.status.success(), "{o:?}");
}

/// A process whose one job is of topic `versand`.
const VERSAND: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="versand-prozess" isExecutable="true">
    <startEvent id="s" />
    <sequenceFlow id="f1" sourceRef="s" targetRef="versand" />
    <serviceTask id="versand" />
    <sequenceFlow id="f2" sourceRef="versand" targetRef="e" />
    <endEvent id="e" />
  </process>
</definitions>
"#;

/// A worker limited to a topic acquires and completes only its topic's
/// jobs: another topic's worker is refused (403) and the job stays
/// locked by the one that acquired it.
fn workers_keep_to_their_topic(url: &str, dir: &Path) {
    let model = dir.join("versand.bpmn");
    std::fs::write(&model, VERSAND).unwrap();
    ok(url, "admin", &["deploy", model.to_str().unwrap()]);
    ok(url, "starter", &["start", "versand-prozess"]);
    let other = token("worker:rechnungStellen");
    let o = as_role(url, Some(other), &["acquire", "versand", "--worker", "w"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("'versand'"),
        "{o:?}"
    );
    let got = ok(
        url,
        "worker:versand",
        &["acquire", "versand", "--worker", "w"],
    );
    let job = &got["jobs"][0];
    let (id, lease) = (job["job"].as_str().unwrap(), job["lease_token"].to_string());
    for args in [
        vec!["complete", id, "--lease-token", &lease],
        vec!["fail", id, "--lease-token", &lease, "--error", "x"],
        vec!["extend", id, "--lease-token", &lease, "--by", "1min"],
    ] {
        let o = as_role(url, Some(other), &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("topic"),
            "{o:?}"
        );
    }
    ok(
        url,
        "worker:versand",
        &["complete", id, "--lease-token", &lease],
    );
}

/// postfach.toml with `[auth] tokens_file`: one token per role, named after
/// it, and the people's workers' tokens.
fn config(dir: &Path) -> String {
    let names: Vec<String> = ROLES.iter().map(|(role, _)| format!("{role}-1")).collect();
    let mut tokens: Vec<(&str, &str, &str)> = ROLES
        .iter()
        .zip(&names)
        .map(|((role, token), name)| (name.as_str(), *token, *role))
        .collect();
    tokens.extend(PEOPLE.iter().map(|(name, token)| (*name, *token, "worker")));
    common::server::tokens_config(dir, &tokens)
}

fn as_role(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_postfach"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("POSTFACH_TOKEN")
        .args(["--json", "--server", url])
        .args(args);
    if let Some(t) = token {
        cmd.env("POSTFACH_TOKEN", t);
    }
    cmd.output().unwrap()
}

fn token(role: &str) -> &'static str {
    ROLES.iter().find(|(r, _)| *r == role).unwrap().1
}

fn ok(url: &str, role: &str, args: &[&str]) -> Value {
    let o = as_role(url, Some(token(role)), args);
    assert!(
        o.status.success(),
        "{role} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

fn refused(url: &str, role: &str, args: &[&str], permission: &str) {
    let o = as_role(url, Some(token(role)), args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{role} {args:?}: {e}");
    assert!(
        e.contains("403") || e.contains(&format!("needs permission '{permission}'")),
        "{role} {args:?}: {e}"
    );
    assert!(
        e.contains(&format!("'{permission}'")),
        "{role} {args:?}: {e}"
    );
}

/// What every role may and may not do against `url` (a server or a gateway).
fn roles_hold(url: &str) {
    let model = "bpmn/auftrag-ausfuehrung.bpmn";
    let versions = |url: &str| ok(url, "reader", &["processes"]).to_string();
    let before = versions(url);
    let deploy = [
        "deploy",
        model,
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ];
    refused(url, "starter", &deploy, "admin");
    refused(url, "reader", &deploy, "admin");
    assert_eq!(versions(url), before, "nothing was deployed");
    let started = ok(
        url,
        "starter",
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=7"],
    );
    let instance = match &started["instance"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    refused(url, "reader", &["start", "auftrag-ausfuehrung"], "start");
    refused(
        url,
        "worker",
        &[
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "7",
            "--id",
            "m-1",
        ],
        "start",
    );
    ok(
        url,
        "starter",
        &[
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "9",
            "--id",
            "m-9",
        ],
    );
    ok(
        url,
        "worker",
        &["acquire", "rechnungStellen", "--worker", "w"],
    );
    refused(url, "reader", &["cancel-token", &instance, "1"], "operate");
    refused(url, "starter", &["cleanup"], "operate");
    ok(url, "operator", &["cleanup"]);
    ok(url, "admin", &deploy);
    let listed = ok(url, "reader", &["instances"]);
    assert!(
        !listed["instances"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    // no token, an unknown one: 401
    for t in [None, Some("not-a-token")] {
        let o = as_role(url, t, &["instances"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("bearer token"),
            "{o:?}"
        );
    }
}

#[test]
fn named_tokens_with_roles_through_a_server_and_a_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    std::fs::write(dir.path().join("admin-token"), "the-admin").unwrap();
    let admin_file = dir.path().join("admin-token").display().to_string();
    let srv = Server::launch(
        dir.path(),
        &[
            "--config".into(),
            cfg.clone(),
            "--token-file".into(),
            admin_file.clone(),
        ],
        &[],
    );
    let url = format!("http://{}", srv.addr);
    roles_hold(&url);
    workers_keep_to_their_topic(&url, dir.path());
    people_act_as_themselves(&url);
    // the admin token of --token-file beside them
    let o = as_role(
        &url,
        Some("the-admin"),
        &[
            "deploy",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let gw = Gateway::start_with(std::slice::from_ref(&srv.addr), &["--config", &cfg]);
    roles_hold(&format!("http://{}", gw.addr));
    drop(gw);
    srv.stop();
}
