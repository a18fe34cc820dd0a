//! Against the real Pub/Sub emulator, the `postfach run` binary and an OTLP
//! receiver stand-in: with `[tracing] otlp_endpoint`, a completion published
//! with a W3C `traceparent` is traced through the engine — receive, decode,
//! publish, group commit and ack as children of the publisher's span — and
//! the send task it lets run is a job in the same trace, whose outbox message
//! carries the trace on in its own `traceparent`. Without the setting nothing
//! is exported.
#![cfg(all(feature = "pubsub", feature = "otlp"))]
use crate::common;

use common::pubsub::{Broker, PROJECT, wait};
use common::server::Server;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A span as the receiver got it: (name, trace id, span id, parent span id), hex.
type Got = (String, String, String, String);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An OTLP/HTTP receiver on loopback: decodes every `POST /v1/traces` and
/// keeps its spans; answers 200 with an empty response message.
fn receiver() -> (String, Arc<Mutex<Vec<Got>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
    let keep = spans.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        if h == "\r\n" {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    assert_eq!(path, "/v1/traces", "spans go to the traces path");
                    let req = ExportTraceServiceRequest::decode(body.as_slice())
                        .expect("an OTLP trace export");
                    let mut got = keep.lock().unwrap();
                    for rs in req.resource_spans {
                        for ss in rs.scope_spans {
                            for sp in ss.spans {
                                got.push((
                                    sp.name,
                                    hex(&sp.trace_id),
                                    hex(&sp.span_id),
                                    hex(&sp.parent_span_id),
                                ));
                            }
                        }
                    }
                    drop(got);
                    let _ = write!(
                        w,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
                    );
                }
            });
        }
    });
    (format!("http://{addr}"), spans)
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PUBLISHER_SPAN: &str = "b7ad6b7169203331";

/// A process that waits for the completion and then reports it through an
/// outbox (the send task is bound to topic `meldungen`).
const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="AuftragAbgeschlossen"/>
  <process id="meldung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="warten"/>
    <intermediateCatchEvent id="warten"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <sequenceFlow id="f1" sourceRef="warten" targetRef="melden"/>
    <sendTask id="melden" postfach:topic="meldungen"/>
    <sequenceFlow id="f2" sourceRef="melden" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

fn config(endpoint: Option<&str>) -> String {
    let mut c = String::from(
        r#"
[[subscriptions]]
subscription = "auftrag-abgeschlossen-sub"
message = "AuftragAbgeschlossen"
key = "/auftragId"

# registers the outbox of topic `meldungen` (the reference model's hand-over,
# unused here); the test's model binds its send task to it in the BPMN
[send_topics]
auftragUebergeben = "meldungen"
"#,
    );
    if let Some(e) = endpoint {
        c.push_str(&format!("\n[tracing]\notlp_endpoint = \"{e}\"\n"));
    }
    c
}

async fn run_once(
    endpoint: Option<&str>,
) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    let broker = Broker::start();
    broker
        .topic_with_subscription("auftrag-abgeschlossen", "auftrag-abgeschlossen-sub")
        .await;
    broker
        .topic_with_subscription("meldungen", "meldungen-sub")
        .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("postfach.toml");
    std::fs::write(&path, config(endpoint)).unwrap();
    let env = [
        ("PUBSUB_EMULATOR_HOST", broker.emulator.host()),
        ("GOOGLE_CLOUD_PROJECT", PROJECT),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let server = Server::launch(
        dir.path(),
        &["--config".to_string(), path.display().to_string()],
        &env,
    );
    let (status, body) = server.json(
        "POST",
        "/deployments",
        Some(json!({"file": "meldung.bpmn", "xml": MODEL,
                    "correlation_keys": {"AuftragAbgeschlossen": "auftragId"}})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, started) = server.json(
        "POST",
        "/instances",
        Some(json!({"process": "meldung", "variables": {"auftragId": "T-1"}})),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["instance"].as_str().unwrap().to_string();
    let traceparent = format!("00-{TRACE}-{PUBLISHER_SPAN}-01");
    broker
        .publish(
            "auftrag-abgeschlossen",
            r#"{"auftragId": "T-1"}"#,
            &[("eventId", "evt-1"), ("traceparent", &traceparent)],
        )
        .await;
    wait("the report went out", Duration::from_secs(60), || {
        server.json("GET", &format!("/instances/{id}"), None).1["state"] == "completed"
    });
    assert!(server.stop().success());
    broker
        .drain(
            "meldungen-sub",
            Duration::from_secs(2),
            Duration::from_secs(30),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_traced_from_its_publisher_through_the_engine_to_the_outbox() {
    let (endpoint, spans) = receiver();
    let sent = run_once(Some(&endpoint)).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let outgoing = sent[0]
        .1
        .get("traceparent")
        .expect("the outbox message carries the trace on");
    let parts: Vec<&str> = outgoing.split('-').collect();
    assert_eq!(parts.len(), 4, "{outgoing}");
    assert_eq!(parts[1], TRACE, "the same trace: {outgoing}");
    assert_ne!(parts[2], PUBLISHER_SPAN, "a span of its own");

    // the exporter flushed at exit; the receiver has what it sent
    let got = spans.lock().unwrap().clone();
    let ours: Vec<&Got> = got.iter().filter(|s| s.1 == TRACE).collect();
    let named = |n: &str| -> Vec<&Got> { ours.iter().copied().filter(|s| s.0 == n).collect() };
    let receive = named("pubsub.receive");
    assert_eq!(receive.len(), 1, "{got:#?}");
    assert_eq!(
        receive[0].3, PUBLISHER_SPAN,
        "the delivery continues the publisher's span"
    );
    for child in ["pubsub.decode", "postfach.publish", "pubsub.ack"] {
        let c = named(child);
        assert_eq!(c.len(), 1, "{child}: {got:#?}");
        assert_eq!(c[0].3, receive[0].2, "{child} is a child of the delivery");
    }
    let publish = named("postfach.publish")[0];
    assert!(
        named("postfach.group_commit")
            .iter()
            .any(|c| c.3 == publish.2),
        "the group commit is a child of the publish: {got:#?}"
    );
    let job = named("postfach.job");
    assert_eq!(
        job.len(),
        1,
        "the send task ran as a job in the same trace: {got:#?}"
    );
    let out = named("pubsub.publish");
    assert_eq!(out.len(), 1, "{got:#?}");
    assert_eq!(
        out[0].3, job[0].2,
        "the outbox publish is a child of the job"
    );
    assert_eq!(
        parts[2], out[0].2,
        "the message names the outbox span as its parent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_traced_and_messages_carry_no_trace() {
    let sent = run_once(None).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        !sent[0].1.contains_key("traceparent"),
        "no trace context without tracing: {:?}",
        sent[0].1
    );
}
