//! `postfach run` with the Pub/Sub and Cloud Storage emulators: a send task
//! whose order is too large to publish uploads it, and the process is killed
//! with SIGKILL after the upload and before the publish. After the restart the
//! hand-over runs again: it rewrites the same object (its name comes from the
//! job's idempotency key) and publishes one lean message with that key as
//! `eventId` — one object, one message id. While the job is held, a worker in
//! another language reads a claim-check object through the HTTP API and the
//! command line; a missing object is a 404 / exit 4 naming it.
#![cfg(feature = "pubsub")]
use crate::common;

use common::gcs::{BUCKET, Gcs};
use common::pubsub::{Broker, launch_with, wait};
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

const OUT_BUCKET: &str = "postfach-auftraege";

const CONFIG: &str = r#"
[correlation_keys]
AuftragAbgeschlossen = "auftragId"

[send_topics]
auftragUebergeben = "auftraege"

[storage]
claim_check_bucket = "postfach-auftraege"
claim_check_above = 65536
"#;

fn cli(server: &common::server::Server, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args(["--server", &format!("http://{}", server.addr)])
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_upload_and_publish_leaves_one_object_and_one_message_id() {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftraege", "auftraege-dienstleister")
        .await;
    let gcs = Gcs::start().await;
    let protocol = br#"{"auftragId": "A-1", "positionen": 3}"#;
    gcs.put("A-1/protokoll.json", protocol).await;
    let dir = tempfile::tempdir().unwrap();
    let storage_host = gcs.emulator.host().to_string();

    let held = launch_with(
        dir.path(),
        &broker,
        CONFIG,
        &[
            ("STORAGE_EMULATOR_HOST", &storage_host),
            ("POSTFACH_TEST_HOLD_AFTER_UPLOAD", "1"),
        ],
    );
    let positions: Vec<Value> = (0..2000)
        .map(|i| json!({"position": i, "artikel": format!("ART-{i:06}")}))
        .collect();
    let (status, body) = held.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {
            "auftragId": "A-1",
            "positionen": positions,
            "protokoll": {"bucket": BUCKET, "object": "A-1/protokoll.json"},
            "fehlt": format!("gs://{BUCKET}/A-1/fehlt.json"),
        }})),
    );
    assert_eq!(status, 201, "{body}");
    wait("the order is uploaded", Duration::from_secs(30), || {
        gcs.emulator.objects(OUT_BUCKET).len() == 1
    });
    let object = gcs.emulator.objects(OUT_BUCKET).remove(0);
    let jobs = held.wait_for("/jobs", |v| {
        v["jobs"]
            .as_array()
            .is_some_and(|j| j.iter().any(|j| j["state"] == "locked"))
    });
    let job = jobs["jobs"][0]["job"].as_str().unwrap().to_string();
    assert_eq!(
        object,
        format!(
            "postfach/auftraege/{}.json",
            jobs["jobs"][0]["idempotency_key"].as_str().unwrap()
        )
    );

    // a worker reads claim-check objects through the API while the job is held
    let (status, body) = held.call("GET", &format!("/jobs/{job}/objects/protokoll"), None, None);
    assert_eq!((status, body.as_bytes()), (200, &protocol[..]));
    let (status, body) = held.json("GET", &format!("/jobs/{job}/objects/fehlt"), None);
    assert_eq!(status, 404);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(&format!("gs://{BUCKET}/A-1/fehlt.json does not exist")),
        "{body}"
    );
    let (status, body) = held.json("GET", &format!("/jobs/{job}/objects/auftragId"), None);
    assert_eq!(status, 422, "{body}");
    let (status, _) = held.json("GET", "/jobs/999999/objects/protokoll", None);
    assert_eq!(status, 404);
    let file = dir.path().join("protokoll.json");
    let out = cli(
        &held,
        &["object", &job, "protokoll", "--out", file.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&file).unwrap(), protocol);
    let out = cli(&held, &["object", &job, "protokoll"]);
    assert_eq!(out.stdout, protocol, "bytes on stdout");
    let out = cli(&held, &["object", &job, "fehlt"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    held.kill9(); // uploaded, never published

    let server = launch_with(
        dir.path(),
        &broker,
        CONFIG,
        &[("STORAGE_EMULATOR_HOST", &storage_host)],
    );
    server.wait_for("/instances?waiting_at=warteAufAbschluss", |v| {
        v["instances"].as_array().is_some_and(|i| i.len() == 1)
    });
    let wire = broker
        .drain(
            "auftraege-dienstleister",
            Duration::from_secs(2),
            Duration::from_secs(30),
        )
        .await;
    server.stop();
    assert_eq!(
        gcs.emulator.objects(OUT_BUCKET),
        std::slice::from_ref(&object),
        "one object"
    );
    assert_eq!(wire.len(), 1, "one message: {wire:?}");
    let (data, attrs) = &wire[0];
    assert_eq!(
        format!("postfach/auftraege/{}.json", attrs["eventId"]),
        object,
        "the message id is the key the object is named by"
    );
    assert_eq!(attrs["objectId"], object);
    let lean: Value = serde_json::from_str(data).unwrap();
    assert_eq!(lean["auftragId"], "A-1");
    assert!(lean.get("positionen").is_none());
}
