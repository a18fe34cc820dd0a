//! Durable batches end to end: on a local database the command line creates
//! a batch and works it off with each item's outcome; a server's batch
//! runner works one off that was created over HTTP, and goes on with it from
//! its cursor after a SIGKILL, so every item is done exactly once; through a
//! gateway a batch fans out to both partitions and is followed to its end.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server, cli_ok};
use postfach::partition::Partition;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

fn local(db: &std::path::Path, args: &[&str]) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--json")
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

#[test]
fn a_batch_on_a_local_database_records_each_item_and_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.redb");
    local(
        &db,
        &[
            "deploy",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    for k in 0..3 {
        local(
            &db,
            &[
                "start",
                "auftrag-ausfuehrung",
                "--var",
                &format!("auftragId=L-{k}"),
            ],
        );
    }
    let done = local(
        &db,
        &["batch", "cancel", "--process", "auftrag-ausfuehrung"],
    );
    assert_eq!(
        (
            &done["operation"],
            &done["state"],
            &done["items"],
            &done["done"],
            &done["refused"]
        ),
        (
            &json!("cancel"),
            &json!("done"),
            &json!(3),
            &json!(3),
            &json!(0)
        ),
        "{done}"
    );
    // a delete batch over every instance: the three cancelled ones go
    let deleted = local(
        &db,
        &[
            "batch",
            "delete",
            "--process",
            "auftrag-ausfuehrung",
            "--state",
            "cancelled",
        ],
    );
    assert_eq!(
        (&deleted["done"], &deleted["refused"]),
        (&json!(3), &json!(0)),
        "{deleted}"
    );
    let left = local(&db, &["instances", "--process", "auftrag-ausfuehrung"]);
    assert_eq!(left["instances"], json!([]), "{left}");
    let listed = local(&db, &["batches"]);
    assert_eq!(listed["batches"].as_array().unwrap().len(), 2, "{listed}");
    // an order whose hand-over ran out of attempts is retried by a batch
    local(
        &db,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=L-7"],
    );
    local(&db, &["work", "--until-idle"]);
    let got = local(&db, &["acquire", "auftragUebergeben", "--worker", "w"]);
    let job = &got["jobs"][0];
    let (id, lease) = (job["job"].as_str().unwrap(), job["lease_token"].to_string());
    local(
        &db,
        &[
            "fail",
            id,
            "--lease-token",
            &lease,
            "--error",
            "down",
            "--retries",
            "0",
        ],
    );
    let retried = local(&db, &["batch", "retry", "--process", "auftrag-ausfuehrung"]);
    assert_eq!(
        (&retried["items"], &retried["done"]),
        (&json!(1), &json!(1)),
        "{retried}"
    );
    let jobs = local(&db, &["jobs", "--incidents"]);
    assert_eq!(jobs["jobs"], json!([]), "{jobs}");
    // detached, the batch waits for whoever runs batches
    local(
        &db,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=L-9"],
    );
    let detached = local(
        &db,
        &[
            "batch",
            "move-token",
            "--from",
            "keinElement",
            "--to",
            "rechnungStellen",
            "--detach",
        ],
    );
    assert_eq!(detached["state"], json!("running"), "{detached}");
    let id = detached["batch"].as_str().unwrap().to_string();
    let status = local(&db, &["batch", "status", &id]);
    assert_eq!(status["reached"], json!(0), "{status}");
    // a name out of range is refused naming the field, before anything is stored
    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(&db)
        .args(["batch", "discard", "--by", "ops\u{7}", "--why", "x"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("by"), "{o:?}");
    assert_eq!(
        local(&db, &["batches"])["batches"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let stopped = local(&db, &["batch", "stop", &id]);
    assert_eq!(stopped["state"], json!("cancelled"), "{stopped}");
}

#[test]
fn a_server_resumes_a_batch_after_a_kill_and_does_every_item_once() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    let n = 400;
    for k in 0..n {
        let (status, v) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": format!("K-{k}")}})),
        );
        assert_eq!(status, 201, "{v}");
    }
    let (status, created) = srv.json(
        "POST",
        "/batches",
        Some(json!({"operation": "cancel", "process": "auftrag-ausfuehrung"})),
    );
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["items"], json!(n), "{created}");
    let id = created["batch"].as_str().unwrap().to_string();
    // killed as soon as the runner has begun (or even before)
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, b) = srv.json("GET", &format!("/batches/{id}"), None);
        if b["reached"].as_u64().unwrap_or(0) > 0 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    srv.kill9();
    let srv = Server::launch(dir.path(), &[], &[]);
    let end = srv.wait_for(&format!("/batches/{id}"), |b| b["state"] == "done");
    assert_eq!(
        (&end["done"], &end["refused"], &end["refused_items"]),
        (&json!(n), &json!(0), &json!([])),
        "every item once (an item done twice is refused: its instance ended): {end}"
    );
    let (_, listed) = srv.json(
        "GET",
        "/instances?process=auftrag-ausfuehrung&state=cancelled&limit=1000",
        None,
    );
    assert_eq!(listed["instances"].as_array().unwrap().len(), n as usize);
}

#[test]
fn a_batch_through_a_gateway_fans_out_to_every_partition_and_is_followed_to_its_end() {
    const P: u64 = 2;
    let dirs: Vec<_> = (0..P).map(|_| tempfile::tempdir().unwrap()).collect();
    let parts: Vec<Server> = (0..P)
        .map(|i| {
            Server::launch(
                dirs[i as usize].path(),
                &[
                    "--partitions".into(),
                    P.to_string(),
                    "--partition".into(),
                    i.to_string(),
                ],
                &[],
            )
        })
        .collect();
    let gw = Gateway::start(&parts.iter().map(|p| p.addr.clone()).collect::<Vec<_>>());
    let url = format!("http://{}", gw.addr);
    let keys: Vec<String> = (0..10).map(|n| format!("G-{n}")).collect();
    let on = |i: u64| {
        keys.iter()
            .filter(|k| u64::from(Partition::new(0, P).unwrap().of_key(k)) == i)
            .count()
    };
    assert!(on(0) > 0 && on(1) > 0);
    for k in &keys {
        let (status, v) = gw.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": k}})),
        );
        assert_eq!(status, 201, "{v}");
    }
    for (i, p) in parts.iter().enumerate() {
        p.hand_over(on(i as u64));
    }
    // every waiting order's token moves on to the invoice
    let end = cli_ok(
        &url,
        None,
        &[
            "batch",
            "move-token",
            "--from",
            "warteAufAbschluss",
            "--to",
            "rechnungStellen",
            "--process",
            "auftrag-ausfuehrung",
        ],
    );
    assert_eq!(end["batches"].as_array().map(Vec::len), Some(2), "{end}");
    assert_eq!(
        (&end["state"], &end["items"], &end["done"]),
        (&json!("done"), &json!(10), &json!(10)),
        "{end}"
    );
    let listed = cli_ok(&url, None, &["batches"]);
    assert_eq!(listed["batches"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(
        common::server::completed(&url, None, "auftrag-ausfuehrung", 10),
        10
    );
}

#[test]
fn a_migration_of_more_instances_than_one_call_takes_becomes_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    let url = format!("http://{}", srv.addr);
    let n = postfach::MIGRATE_IN_CALL + 1;
    for k in 0..n {
        let (status, v) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": format!("B-{k}")}})),
        );
        assert_eq!(status, 201, "{v}");
    }
    let xml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bpmn/auftrag-ausfuehrung.bpmn"
    ))
    .unwrap()
    .replace("Rechnung stellen", "Rechnung schreiben");
    let (status, v) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"xml": xml, "correlation_keys": {"AuftragAbgeschlossen": "auftragId"}})),
    );
    assert_eq!(status, 200, "{v}");
    let answer = cli_ok(
        &url,
        None,
        &[
            "migrate",
            "auftrag-ausfuehrung",
            "--from-version",
            "1",
            "--to-version",
            "2",
        ],
    );
    let id = answer["batch"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string();
    let end = srv.wait_for(&format!("/batches/{id}"), |b| b["state"] == "done");
    assert_eq!(
        (&end["operation"], &end["done"]),
        (&json!("migrate"), &json!(n)),
        "{end}"
    );
    let (_, left) = srv.json(
        "GET",
        "/instances?process=auftrag-ausfuehrung&limit=10",
        None,
    );
    assert!(
        left["instances"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["version"] == 2),
        "{left}"
    );
}
