//! A client generated from the OpenAPI document the server serves — by
//! openapi-python-client, as a team would generate theirs — calls every
//! operation of the catalogue correctly: each call reaches its operation
//! (a recording proxy sees the catalogue's method and path), query
//! parameters travel in the query and take effect, bodies are the request
//! types the server reads (no 400), and a new operation without a call here
//! fails the test.
#![cfg(feature = "server")]
use crate::common;
use common::proxy::recorder;
use common::server::Server;
use postfach::server::catalogue;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// Every operation called through the generated client; prints one JSON line
/// per call: the operation, the status and the body.
const CALLS: &str = r#"
import json, sys
from gen.client import Client
from gen.api.default import (
    acquire, activate, add_token, alarm_states, audit, backup, bpmn_error, cancel_instance,
    cancel_token, cleanup, set_variables,
    complete, complete_ad_hoc, conditions, correlate, decisions, deploy, discard,
    evaluate, extend, fail, instance, instances, job_object, jobs, live, messages,
    metrics, move_token, partition, process_xml, processes, publish, ready, requeue,
    retry, signal, start, statistics, task_action, tasks, trigger, work, migrate,
    create_batch, batches, batch, stop_batch, slots, move_slots, slot_step,
)
from gen.models import (
    AcquireBody, ActivateBody, BackupBody, BpmnErrorBody, CompleteBody, ConditionsBody,
    DeployBody, DiscardBody, EvaluateBody, ExtendBody, FailBody, MessageBody,
    SignalBody, StartBody, TaskBody, TokenBody, TriggerBody, VariablesBody, MigrationBody,
    BatchBody, MoveBody, SlotStepBody,
)

c = Client(base_url=sys.argv[1], timeout=30.0)
i = int(sys.argv[2])
model = open(sys.argv[3]).read()
none = 999999
calls = [
    ("live", lambda: live.sync_detailed(client=c)),
    ("ready", lambda: ready.sync_detailed(client=c)),
    ("metrics", lambda: metrics.sync_detailed(client=c)),
    ("partition", lambda: partition.sync_detailed(client=c)),
    ("slots", lambda: slots.sync_detailed(client=c)),
    ("move_slots", lambda: move_slots.sync_detailed(client=c, body=MoveBody(first=0, last=9, to=1, to_url="http://127.0.0.1:1"))),
    ("slot_step", lambda: slot_step.sync_detailed(client=c, body=SlotStepBody(step=sys.argv[4]))),
    ("deploy", lambda: deploy.sync_detailed(client=c, body=DeployBody(xml=model, file="antrag-freigabe.bpmn"))),
    ("start", lambda: start.sync_detailed(client=c, body=StartBody(process="antrag-freigabe"))),
    ("conditions", lambda: conditions.sync_detailed(client=c, body=ConditionsBody())),
    ("instances", lambda: instances.sync_detailed(client=c, limit=1, order="oldest")),
    ("instance", lambda: instance.sync_detailed(i, client=c)),
    ("add_token", lambda: add_token.sync_detailed(i, client=c, body=TokenBody(element="auftragUebergeben"))),
    ("move_token", lambda: move_token.sync_detailed(i, none, client=c, body=TokenBody(element="auftragUebergeben"))),
    ("cancel_token", lambda: cancel_token.sync_detailed(i, none, client=c)),
    ("trigger", lambda: trigger.sync_detailed(i, none, client=c, body=TriggerBody())),
    ("set_variables", lambda: set_variables.sync_detailed(i, client=c, body=VariablesBody.from_dict({"variables": {"gepflegt": True}}))),
    ("cancel_instance", lambda: cancel_instance.sync_detailed(none, client=c)),
    ("activate", lambda: activate.sync_detailed(i, none, client=c, body=ActivateBody(element="rueckfrage"))),
    ("complete_ad_hoc", lambda: complete_ad_hoc.sync_detailed(i, none, client=c)),
    ("publish", lambda: publish.sync_detailed(client=c, body=MessageBody(name="AuftragAbgeschlossen", key="gen", id="gen/1"))),
    ("correlate", lambda: correlate.sync_detailed(client=c, body=MessageBody(name="AuftragAbgeschlossen", key="gen-2"))),
    ("messages", lambda: messages.sync_detailed(client=c, buffered=True, limit=1)),
    ("requeue", lambda: requeue.sync_detailed("gen/1", client=c)),
    ("discard", lambda: discard.sync_detailed("gen/1", client=c, body=DiscardBody(why="generated", by="client"))),
    ("signal", lambda: signal.sync_detailed(client=c, body=SignalBody(name="Tarifwechsel", id="gen-signal"))),
    ("jobs", lambda: jobs.sync_detailed(client=c, incidents=True, limit=1)),
    ("acquire", lambda: acquire.sync_detailed(client=c, body=AcquireBody(topic="rechnungStellen", worker="gen", lease_ms=60000))),
    ("complete", lambda: complete.sync_detailed(none, client=c, body=CompleteBody())),
    ("extend", lambda: extend.sync_detailed(none, client=c, body=ExtendBody(lease_token=1, by_ms=1000))),
    ("fail", lambda: fail.sync_detailed(none, client=c, body=FailBody(error="generated"))),
    ("bpmn_error", lambda: bpmn_error.sync_detailed(none, client=c, body=BpmnErrorBody(code="GEN"))),
    ("retry", lambda: retry.sync_detailed(none, client=c)),
    ("job_object", lambda: job_object.sync_detailed(none, "protokoll", client=c)),
    ("decisions", lambda: decisions.sync_detailed(client=c)),
    ("evaluate", lambda: evaluate.sync_detailed("keine", client=c, body=EvaluateBody())),
    ("processes", lambda: processes.sync_detailed(client=c)),
    ("process_xml", lambda: process_xml.sync_detailed("auftrag-ausfuehrung", client=c, version=1)),
    ("statistics", lambda: statistics.sync_detailed("auftrag-ausfuehrung", client=c, version=1)),
    ("alarm_states", lambda: alarm_states.sync_detailed(client=c)),
    ("tasks", lambda: tasks.sync_detailed(client=c, process="antrag-freigabe")),
    ("task_action", lambda: task_action.sync_detailed(none, "claim", client=c, body=TaskBody(user="gen"))),
    ("cleanup", lambda: cleanup.sync_detailed(client=c)),
    ("backup", lambda: backup.sync_detailed(client=c, body=BackupBody())),
    ("work", lambda: work.sync_detailed(client=c)),
    ("audit", lambda: audit.sync_detailed(client=c, limit=10)),
    ("migrate", lambda: migrate.sync_detailed(client=c, body=MigrationBody(process="auftrag-ausfuehrung", from_version=1, to_version=1, dry_run=True))),
    ("create_batch", lambda: create_batch.sync_detailed(client=c, body=BatchBody(operation="retry", process="auftrag-ausfuehrung"))),
    ("batches", lambda: batches.sync_detailed(client=c)),
    ("batch", lambda: batch.sync_detailed(none, client=c)),
    ("stop_batch", lambda: stop_batch.sync_detailed(none, client=c)),
]
for name, call in calls:
    r = call()
    print(json.dumps({"op": name, "status": r.status_code, "body": r.content.decode(errors="replace")}))
"#;

#[test]
fn a_client_generated_from_the_openapi_document_calls_every_operation_correctly() {
    let srv = Server::start("127.0.0.1:0", None);
    // two orders, so that a page of one says `limit` travelled in the query
    let mut first = String::new();
    for key in ["gen-a", "gen-b"] {
        let (status, v) = srv.json(
            "POST",
            "/instances",
            Some(serde_json::json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": key}})),
        );
        assert_eq!(status, 201, "{v}");
        if first.is_empty() {
            first = v["instance"].as_str().unwrap().to_string();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (status, doc) = srv.json("GET", "/openapi.json", None);
    assert_eq!(status, 200);
    let spec = dir.path().join("openapi.json");
    std::fs::write(&spec, doc.to_string()).unwrap();
    let tool = common::tools::openapi_python_client();
    let generated = Command::new("python3")
        .args(["-m", "openapi_python_client", "generate", "--meta", "none"])
        .arg("--path")
        .arg(&spec)
        .arg("--output-path")
        .arg(dir.path().join("gen"))
        .env("PYTHONPATH", &tool)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "openapi-python-client: {}",
        String::from_utf8_lossy(&generated.stderr)
    );

    let (proxy, seen) = recorder(srv.addr.clone());
    let run = Command::new("python3")
        .arg("-c")
        .arg(CALLS)
        .arg(format!("http://{proxy}"))
        .arg(&first)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/bpmn/antrag-freigabe.bpmn"
        ))
        // a move step as a source sends it (the unpartitioned server refuses it)
        .arg(
            postfach::server::http::requests::SlotStepBody::of(&postfach::MoveCommand::Adopt {
                slot_move: postfach::slots::SlotMove {
                    id: 1024,
                    first: 0,
                    last: 0,
                    slots: vec![(0, 0)],
                    from: 1,
                    to: 0,
                    to_url: "http://127.0.0.1:1".into(),
                    version: 2,
                    phase: postfach::slots::MovePhase::Exporting,
                },
            })
            .unwrap()
            .step,
        )
        .env(
            "PYTHONPATH",
            std::env::join_paths([dir.path(), tool.as_path()]).unwrap(),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the generated client: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let answers: BTreeMap<String, (u16, String)> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let status = v["status"].as_u64().unwrap() as u16;
            (
                v["op"].as_str().unwrap().to_string(),
                (status, v["body"].as_str().unwrap().to_string()),
            )
        })
        .collect();

    // every operation was called, and reached as the catalogue says
    let sent = seen.lock().unwrap().clone();
    for o in catalogue::operations() {
        let (status, body) = answers
            .get(o.name)
            .unwrap_or_else(|| panic!("the generated client never calls {}", o.name));
        assert!(
            !(matches!(status, 400 | 405) || *status == 404 && body.trim().is_empty()),
            "{}: {status} {body}",
            o.name
        );
        let reached = sent.iter().any(|(method, target)| {
            let path = target.split('?').next().unwrap_or_default();
            method == o.method.as_str()
                && catalogue::find(&o.method, path).is_some_and(|(f, _)| f.name == o.name)
        });
        assert!(
            reached,
            "{} was not sent as {} {}",
            o.name, o.method, o.path
        );
    }
    // what the server did with what the client sent
    let ok = |name: &str| -> Value {
        let (status, body) = &answers[name];
        assert!((200..300).contains(status), "{name}: {status} {body}");
        serde_json::from_str(body).unwrap_or(Value::Null)
    };
    for name in [
        "live",
        "ready",
        "partition",
        "slots",
        "deploy",
        "start",
        "conditions",
        "publish",
        "signal",
        "acquire",
        "decisions",
        "processes",
        "statistics",
        "alarm_states",
        "tasks",
        "cleanup",
        "work",
        "audit",
        "instance",
        "create_batch",
        "batches",
    ] {
        ok(name);
    }
    let page = ok("instances");
    assert_eq!(page["instances"].as_array().unwrap().len(), 1, "{page}");
    assert!(
        page["next"].is_string() || page["next"].is_number(),
        "{page}"
    );
    assert!(
        sent.iter()
            .any(|(_, t)| t.starts_with("/instances?") && t.contains("limit=1")),
        "limit travels in the query: {sent:?}"
    );
    let buffered = ok("messages");
    assert_eq!(buffered["messages"][0]["message_id"], "gen/1", "{buffered}");
    assert!(
        sent.iter()
            .any(|(_, t)| t.starts_with("/messages/gen%2F1/")),
        "a message id is one path segment: {sent:?}"
    );
    assert!(
        answers["process_xml"].1.contains("<bpmn:definitions")
            || answers["process_xml"].1.contains("definitions")
    );
    assert_eq!(answers["correlate"].0, 409, "{}", answers["correlate"].1);
    assert_eq!(
        answers["task_action"].0, 404,
        "{}",
        answers["task_action"].1
    );
    srv.stop();
}
