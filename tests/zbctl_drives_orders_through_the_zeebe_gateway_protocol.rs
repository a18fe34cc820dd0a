//! Camunda 8's own command line client, `zbctl` 8.4.1, drives the order
//! process through Zeebe's gateway protocol served by `postfach run`
//! (`--zeebe-listen`): it deploys a Zeebe-flavoured model
//! (`zeebe:taskDefinition`, `zeebe:subscription correlationKey`), creates
//! 100 orders, works their jobs as a worker, and publishes the provider's
//! completions — one before its order waits (buffered, then correlated),
//! one twice (`ALREADY_EXISTS`), one for an order that does not exist
//! (parked, as postfach's contract says, where Zeebe would drop it when its
//! time to live ran out). A job failed with no retries left becomes an
//! incident, resolved by its key; a thrown BPMN error is caught by the
//! error boundary; a start with result answers the end's variables; an
//! order given a variable from outside is cancelled with its job. Every
//! order ends invoiced once. Bad input is refused with the status Zeebe
//! documents, naming the field; a server with a token refuses a call
//! without one; with a certificate the protocol speaks TLS.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use common::zeebe::Zbctl;
use serde_json::Value;

const ORDERS: usize = 100;

/// A process that ends at once.
const QUICK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="schnell" isExecutable="true">
    <startEvent id="s" />
    <sequenceFlow id="f" sourceRef="s" targetRef="e" />
    <endEvent id="e" />
  </process>
</definitions>
"#;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/zeebe/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn postfach(url: &str, args: &[&str]) -> Value {
    common::server::cli_ok(url, None, args)
}

fn start_server(dir: &std::path::Path, extra: &[&str]) -> (Server, String) {
    let port = common::server::free_ports(1);
    let zeebe = format!("127.0.0.1:{port}");
    let mut args = vec!["--zeebe-listen".to_string(), zeebe.clone()];
    args.extend(extra.iter().map(|s| s.to_string()));
    (Server::launch(dir, &args, &[]), zeebe)
}

/// Activates `kind` jobs until `n` were handed out.
fn activate_all(zb: &Zbctl, kind: &str, n: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for _ in 0..20 {
        keys.extend(zb.activate(kind, n - keys.len()));
        if keys.len() == n {
            return keys;
        }
    }
    panic!("only {} of {n} {kind} jobs were activated", keys.len());
}

fn complete(zb: &Zbctl, key: &str) {
    zb.ok(&["complete", "job", key]);
}

#[test]
fn zbctl_drives_orders_through_the_zeebe_gateway_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, addr) = start_server(dir.path(), &[]);
    let url = format!("http://{}", srv.addr);
    let zb = Zbctl::new(&addr);
    let status = zb.ok(&["status"]);
    assert!(
        status.contains("postfach") && status.contains("Partition 1 : Leader"),
        "{status}"
    );
    let deployed = zb.ok(&[
        "deploy",
        &format!("{}/bpmn/auftrag-zeebe.bpmn", env!("CARGO_MANIFEST_DIR")),
    ]);
    assert!(
        deployed.contains("\"bpmnProcessId\":  \"auftrag-zeebe\""),
        "{deployed}"
    );

    // the provider is quicker than the order: its completion waits
    zb.ok(&[
        "publish",
        "message",
        "AuftragAbgeschlossen",
        "--correlationKey",
        "A-0",
        "--messageId",
        "done-A-0",
        "--ttl",
        "10m",
    ]);
    for i in 0..ORDERS {
        let created = zb.ok(&[
            "create",
            "instance",
            "auftrag-zeebe",
            "--variables",
            &format!("{{\"auftragId\": \"A-{i}\"}}"),
        ]);
        assert!(created.contains("processInstanceKey"), "{created}");
    }
    for key in activate_all(&zb, "auftragUebergeben", ORDERS) {
        complete(&zb, &key);
    }
    for i in 1..ORDERS {
        zb.ok(&[
            "publish",
            "message",
            "AuftragAbgeschlossen",
            "--correlationKey",
            &format!("A-{i}"),
            "--messageId",
            &format!("done-A-{i}"),
        ]);
    }
    let again = zb.fails(&[
        "publish",
        "message",
        "AuftragAbgeschlossen",
        "--correlationKey",
        "A-5",
        "--messageId",
        "done-A-5",
    ]);
    assert!(again.contains("AlreadyExists"), "{again}");
    zb.ok(&[
        "publish",
        "message",
        "AuftragAbgeschlossen",
        "--correlationKey",
        "niemand",
        "--messageId",
        "done-niemand",
        "--ttl",
        "0s",
    ]);

    // invoices: one job fails for good and is an incident until retried
    let invoices = activate_all(&zb, "rechnungSchreiben", ORDERS);
    zb.ok(&[
        "fail",
        "job",
        &invoices[0],
        "--retries",
        "0",
        "--errorMessage",
        "Rechnungsdienst down",
    ]);
    for key in &invoices[1..] {
        complete(&zb, key);
    }
    let incidents = postfach(&url, &["jobs", "--incidents"]);
    let text = incidents.to_string();
    assert!(text.contains("Rechnungsdienst down"), "{text}");
    // the incident's key is its job's
    zb.ok(&["resolve", "incident", &invoices[0]]);
    let retried = activate_all(&zb, "rechnungSchreiben", 1);
    assert_eq!(retried, vec![invoices[0].clone()], "the same job again");
    complete(&zb, &retried[0]);

    let done = postfach(
        &url,
        &[
            "instances",
            "--state",
            "completed",
            "--process",
            "auftrag-zeebe",
        ],
    );
    let n = done["instances"].as_array().unwrap().len();
    assert_eq!(n, ORDERS, "every order invoiced once and completed: {n}");
    let parked = postfach(&url, &["messages", "--parked"]);
    assert!(parked.to_string().contains("done-niemand"), "{parked}");

    // a thrown BPMN error is caught by the task's error boundary
    zb.ok(&["deploy", &fixture("pruefung-zeebe.bpmn")]);
    zb.ok(&["create", "instance", "pruefung-zeebe"]);
    let check = activate_all(&zb, "bonitaetPruefen", 1);
    zb.ok(&[
        "throwError",
        "job",
        &check[0],
        "--errorCode",
        "ABGELEHNT",
        "--errorMessage",
        "zu riskant",
    ]);
    let ended = postfach(
        &url,
        &[
            "instances",
            "--state",
            "completed",
            "--process",
            "pruefung-zeebe",
        ],
    );
    let rejected = ended["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["process"] == "pruefung-zeebe")
        .expect("the check ended");
    assert!(rejected.to_string().contains("abgelehnt"), "{rejected}");

    // a start that waits for its instance's end gets its variables
    let quick = dir.path().join("quick.bpmn");
    std::fs::write(&quick, QUICK).unwrap();
    zb.ok(&["deploy", quick.to_str().unwrap()]);
    let result = zb.ok(&[
        "create",
        "instance",
        "schnell",
        "--variables",
        r#"{"gruss": "hallo"}"#,
        "--withResult",
    ]);
    assert!(result.contains("hallo"), "{result}");

    // refusals name what is wrong, with Zeebe's status codes
    let unknown = zb.fails(&["create", "instance", "gibt-es-nicht"]);
    assert!(
        unknown.contains("NotFound") && unknown.contains("gibt-es-nicht"),
        "{unknown}"
    );
    let gone = zb.fails(&["complete", "job", "12345"]);
    assert!(
        gone.contains("NotFound") && gone.contains("12345"),
        "{gone}"
    );

    // an order given a variable from outside, then cancelled with its job
    let created = zb.ok(&[
        "create",
        "instance",
        "auftrag-zeebe",
        "--variables",
        r#"{"auftragId": "STORNO-1"}"#,
    ]);
    let created: Value = serde_json::from_str(&created).unwrap();
    // zbctl prints 64-bit keys as JSON strings
    let key = created["processInstanceKey"].as_str().unwrap().to_string();
    zb.ok(&["set", "variables", &key, "--variables", r#"{"prio": 2}"#]);
    zb.ok(&["cancel", "instance", &key]);
    // partition 0's keys start at 2^51
    let id = (key.parse::<i64>().unwrap() - (1i64 << 51)).to_string();
    let view = postfach(&url, &["instance", &id]);
    assert_eq!(view["state"], "cancelled", "{view}");
    assert_eq!(view["variables"]["prio"], 2, "{view}");
    assert_eq!(view["jobs"], serde_json::json!([]), "its job went with it");
    let again = zb.fails(&["cancel", "instance", &key]);
    assert!(
        again.contains("FailedPrecondition") && again.contains(&id),
        "{again}"
    );
    let never = zb.fails(&["cancel", "instance", "2251799813685249999"]);
    assert!(never.contains("NotFound"), "{never}");
    srv.stop();

    // with a token configured, a call without one is refused
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret").unwrap();
    let (srv, addr) = start_server(dir.path(), &["--token-file", token.to_str().unwrap()]);
    let refused = Zbctl::new(&addr).fails(&["status"]);
    assert!(refused.contains("Unauthenticated"), "{refused}");
    srv.stop();

    // with a certificate the gateway protocol speaks TLS too: zbctl trusts
    // the CA, and a plaintext client gets nowhere
    let tls = format!("{}/tests/fixtures/tls", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let (srv, addr) = start_server(
        dir.path(),
        &[
            "--tls-cert",
            &format!("{tls}/server-1.pem"),
            "--tls-key",
            &format!("{tls}/server-1.key"),
        ],
    );
    let status = Zbctl::with_ca(&addr, &format!("{tls}/ca.pem")).ok(&["status"]);
    assert!(status.contains("postfach"), "{status}");
    Zbctl::new(&addr).fails(&["status"]);
    srv.stop();
}
