//! Workers in other languages serve topics through the command line (and later
//! the HTTP API): acquire with a lease, extend it, complete, fail with retries,
//! throw a BPMN error. A stale lease is refused.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use serde_json::Value;
use std::process::{Command, Output};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn">
  <error id="e" errorCode="ABGELEHNT"/>
  <process id="extern" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="abrechnen"/>
    <serviceTask id="abrechnen" flowable:type="external-worker" flowable:topic="abrechnung"/>
    <boundaryEvent id="abgelehnt" attachedToRef="abrechnen"><errorEventDefinition errorRef="e"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="abrechnen" targetRef="ende"/>
    <sequenceFlow id="f3" sourceRef="abgelehnt" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>
    <sequenceFlow id="f4" sourceRef="pruefen" targetRef="ende2"/>
    <endEvent id="ende"/>
    <endEvent id="ende2"/>
  </process>
</definitions>"#;

struct Cli(tempfile::TempDir);

impl Cli {
    fn new() -> Self {
        let c = Cli(tempfile::tempdir().unwrap());
        std::fs::write(c.0.path().join("m.bpmn"), MODEL).unwrap();
        c.ok(&["deploy", c.0.path().join("m.bpmn").to_str().unwrap()]);
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--db")
            .arg(self.0.path().join("w.redb"))
            .arg("--json")
            .args(args)
            .output()
            .unwrap()
    }
    fn ok(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }
    fn start(&self) -> String {
        self.ok(&["start", "extern", "--var", "auftragId=1"])["instance"]
            .as_str()
            .unwrap()
            .to_string()
    }
    fn acquire(&self) -> (String, String) {
        let a = self.ok(&[
            "acquire",
            "abrechnung",
            "--worker",
            "py-worker",
            "--lease",
            "5m",
        ]);
        let j = &a["jobs"][0];
        assert_eq!(j["variables"]["auftragId"], "1");
        assert!(j["idempotency_key"].as_str().unwrap().contains("abrechnen"));
        (
            j["job"].as_str().unwrap().to_string(),
            j["lease_token"].to_string(),
        )
    }
    fn state(&self, id: &str) -> (String, Value) {
        let v = self.ok(&["instance", id]);
        (
            v["state"].as_str().unwrap().to_string(),
            v["waiting_at"].clone(),
        )
    }
}

#[test]
fn acquire_extend_complete_and_a_stale_token_is_refused() {
    let cli = Cli::new();
    let id = cli.start();
    let (job, token) = cli.acquire();
    assert_eq!(
        cli.ok(&["acquire", "abrechnung", "--worker", "other"])["jobs"],
        serde_json::json!([]),
        "held jobs are not handed out"
    );
    let jobs = cli.ok(&["jobs"]);
    assert_eq!(jobs["jobs"][0]["lease_owner"], "py-worker");
    assert!(
        cli.ok(&["extend", &job, "--lease-token", &token, "--by", "10m"])["lease_until"]
            .is_string()
    );
    let stale = cli.run(&["complete", &job, "--lease-token", "999999"]);
    assert_eq!(stale.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("lease was lost"));
    cli.ok(&[
        "complete",
        &job,
        "--lease-token",
        &token,
        "--var",
        "rechnungNr=\"R-1\"",
    ]);
    let (state, _) = cli.state(&id);
    assert_eq!(state, "completed");
}

#[test]
fn fail_without_retries_left_is_an_incident_that_retry_revives() {
    let cli = Cli::new();
    cli.start();
    let (job, token) = cli.acquire();
    let f = cli.ok(&[
        "fail",
        &job,
        "--lease-token",
        &token,
        "--error",
        "invoice system down",
        "--retries",
        "0",
    ]);
    assert_eq!(f["state"], "incident");
    let incidents = cli.ok(&["jobs", "--incidents"]);
    assert_eq!(incidents["jobs"][0]["error"], "invoice system down");
    // the retry says what the job does next: wait for a worker on its topic
    let r = cli.ok(&["retry", &job]);
    assert_eq!(r["state"], "ready", "{r}");
    assert!(
        r["next"]
            .as_str()
            .unwrap()
            .starts_with("it waits for a worker on topic"),
        "{r}"
    );
    let (job2, _) = cli.acquire();
    assert_eq!(job2, job, "the same job runs again");
}

#[test]
fn a_bpmn_error_takes_the_boundary_path_and_an_unknown_code_exits_3() {
    let cli = Cli::new();
    let id = cli.start();
    let (job, token) = cli.acquire();
    let e = cli.ok(&[
        "bpmn-error",
        &job,
        "--lease-token",
        &token,
        "--code",
        "ABGELEHNT",
        "--message",
        "Kunde gesperrt",
    ]);
    assert_eq!(e["caught"], true);
    assert_eq!(
        cli.state(&id),
        ("active".to_string(), serde_json::json!(["pruefen"]))
    );

    let other = cli.start();
    let (job, token) = cli.acquire();
    let o = cli.run(&[
        "bpmn-error",
        &job,
        "--lease-token",
        &token,
        "--code",
        "SONSTWAS",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        cli.state(&other).0,
        "incident",
        "its job is out of attempts"
    );
    assert_eq!(
        cli.ok(&["jobs", "--incidents"])["jobs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
