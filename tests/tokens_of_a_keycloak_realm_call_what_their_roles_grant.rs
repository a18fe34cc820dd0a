//! Identities from a real OpenID Connect issuer: Keycloak (what Camunda 8
//! Self-Managed ships, so the realm a team already runs) with `postfach
//! run` and a gateway configured by `[auth] issuer` alone — keys by
//! discovery, roles from the `roles` claim, groups from `groups`.
//! Services fetch their tokens with client credentials, as Camunda's
//! clients do; people with their password. Each token calls what its roles
//! grant and is refused the rest: a worker limited to a topic, a starter
//! limited to a process (its starts and its messages), a token for another
//! audience, a tampered one. On user tasks the caller's identity and groups
//! decide: a member of a candidate group claims, a member of another group
//! is refused, and nobody completes what another holds.
#![cfg(feature = "server")]
use crate::common;
use common::keycloak::Keycloak;
use common::server::{Gateway, Server};
use serde_json::Value;
use std::process::{Command, Output};

fn cli(url: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("POSTFACH_TOKEN", token)
        .args(["--json", "--server", url])
        .args(args)
        .output()
        .unwrap()
}

fn ok(url: &str, token: &str, args: &[&str]) -> Value {
    let o = cli(url, token, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

/// Refused, and the refusal says `says`.
fn refused(url: &str, token: &str, args: &[&str], says: &str) {
    let o = cli(url, token, args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?} was not refused: {e}");
    assert!(e.contains(says), "{args:?}: expected '{says}' in: {e}");
}

/// The token with its payload replaced by `payload` (signature kept).
fn tampered(token: &str, payload: &Value) -> String {
    use base64::Engine;
    let p: Vec<&str> = token.split('.').collect();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string());
    format!("{}.{b64}.{}", p[0], p[2])
}

fn claims(token: &str) -> Value {
    use base64::Engine;
    let p = token.split('.').nth(1).unwrap();
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(p)
        .unwrap();
    serde_json::from_slice(&raw).unwrap()
}

/// Services: a topic-limited worker and a process-limited starter.
fn services_keep_to_their_roles(url: &str, kc: &Keycloak) {
    let worker = kc.client_token("shop-worker", "worker-secret");
    let backend = kc.client_token("shop-backend", "backend-secret");
    let deploy = ["deploy", "bpmn/auftrag-ausfuehrung.bpmn"];
    refused(url, &worker, &deploy, "needs permission 'admin'");
    refused(url, &backend, &deploy, "needs permission 'admin'");
    let started = ok(
        url,
        &backend,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=A-1"],
    );
    assert!(started["instance"].is_string(), "{started}");
    refused(
        url,
        &backend,
        &["start", "einkauf-freigabe"],
        "may not start process 'einkauf-freigabe'",
    );
    ok(
        url,
        &backend,
        &[
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "A-9",
            "--id",
            "m-9",
        ],
    );
    refused(
        url,
        &backend,
        &["publish", "Fremd", "--key", "A-9", "--id", "m-10"],
        "may not send message 'Fremd'",
    );
    refused(
        url,
        &worker,
        &["acquire", "versand", "--worker", "w"],
        "'versand'",
    );
    let got = ok(
        url,
        &worker,
        &["acquire", "rechnungStellen", "--worker", "w"],
    );
    assert!(got["jobs"].is_array(), "{got}");
    // a token for another audience, and a tampered one: 401
    let other = kc.client_token("other-service", "other-secret");
    refused(url, &other, &["instances"], "does not verify");
    let mut raised = claims(&worker);
    raised["roles"] = serde_json::json!(["admin"]);
    refused(url, &tampered(&worker, &raised), &deploy, "does not verify");
}

/// People: candidate groups and holders decide.
fn people_act_on_their_tasks(url: &str, kc: &Keycloak, admin: &str) {
    ok(url, admin, &["start", "einkauf-freigabe"]);
    let anna = kc.person_token("anna", "anna-pw");
    let ben = kc.person_token("ben", "ben-pw");
    let tasks = ok(
        url,
        admin,
        &[
            "tasks",
            "--candidate-group",
            "einkauf",
            "--process",
            "einkauf-freigabe",
        ],
    );
    let task = tasks["tasks"][0]["task"].as_str().unwrap().to_string();
    refused(
        url,
        &ben,
        &["task", "claim", &task, "--user", "ben"],
        "neither a candidate user nor in a candidate group",
    );
    refused(
        url,
        &ben,
        &["task", "claim", &task, "--user", "anna"],
        "not as 'anna'",
    );
    ok(url, &anna, &["task", "claim", &task, "--user", "anna"]);
    refused(
        url,
        &ben,
        &["task", "complete", &task, "--user", "ben"],
        "someone else holds it",
    );
    refused(
        url,
        &anna,
        &["task", "assign", &task, "--to", "ben", "--user", "anna"],
        "assigning is an operator's",
    );
    ok(url, &anna, &["task", "complete", &task, "--user", "anna"]);
}

#[test]
fn tokens_of_a_keycloak_realm_call_what_their_roles_grant() {
    let kc = Keycloak::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("postfach.toml");
    std::fs::write(&cfg, format!("[auth]\nissuer = {:?}\n", kc.issuer())).unwrap();
    let cfg = cfg.display().to_string();
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, "the-admin").unwrap();
    let srv = Server::launch(
        dir.path(),
        &[
            "--config".into(),
            cfg.clone(),
            "--token-file".into(),
            admin_file.display().to_string(),
        ],
        &[],
    );
    let url = format!("http://{}", srv.addr);
    // with an issuer every request needs a token, loopback included
    let (status, _) = common::server::call(&srv.addr, "GET", "/instances", None, None);
    assert_eq!(status, 401);
    // the admin token of --token-file works beside the issuer
    ok(
        &url,
        "the-admin",
        &[
            "deploy",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    let model = dir.path().join("freigabe.bpmn");
    std::fs::write(&model, common::keycloak::FREIGABE).unwrap();
    ok(&url, "the-admin", &["deploy", model.to_str().unwrap()]);
    services_keep_to_their_roles(&url, &kc);
    people_act_on_their_tasks(&url, &kc, "the-admin");

    // through a gateway with the same [auth]: it checks, the partition again
    let gw = Gateway::start_with(std::slice::from_ref(&srv.addr), &["--config", &cfg]);
    let gurl = format!("http://{}", gw.addr);
    let backend = kc.client_token("shop-backend", "backend-secret");
    ok(
        &gurl,
        &backend,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=A-2"],
    );
    refused(
        &gurl,
        &kc.client_token("shop-worker", "worker-secret"),
        &["deploy", "bpmn/auftrag-ausfuehrung.bpmn"],
        "needs permission 'admin'",
    );
    drop(gw);
    srv.stop();
}
