//! Bad input over Zeebe's gateway protocol is refused with the status code
//! Zeebe documents and a message naming the field — never a crash, never a
//! silent change: variables that are not a JSON object, a variables
//! document beyond the message limit, keys postfach never gave out, a
//! negative timeout, no jobs asked for, bytes that are no protobuf. The
//! server serves on afterwards. Zeebe's default port taken is a warning;
//! a port asked for by name and taken is an error naming it.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use postfach::server::zeebe::proto;
use proto::gateway_client::GatewayClient;
use tonic::Code;

async fn client(addr: &str) -> GatewayClient<tonic::transport::Channel> {
    GatewayClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_encoding_message_size(64 * 1024 * 1024)
}

fn refused<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, names: &str) {
    let e = r.expect_err("refused");
    assert_eq!(e.code(), code, "{e:?}");
    assert!(e.message().contains(names), "{names}: {e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zeebe_face_refuses_bad_input_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let zeebe = format!("127.0.0.1:{}", common::server::free_ports(1));
    let srv = Server::launch(dir.path(), &["--zeebe-listen".into(), zeebe.clone()], &[]);
    let mut c = client(&zeebe).await;
    let start = |variables: String| proto::CreateProcessInstanceRequest {
        bpmn_process_id: "auftrag-ausfuehrung".into(),
        variables,
        ..Default::default()
    };
    refused(
        c.create_process_instance(start("[1, 2]".into())).await,
        Code::InvalidArgument,
        "variables must be a JSON object",
    );
    refused(
        c.create_process_instance(start("{\"auftragId\": ".into()))
            .await,
        Code::InvalidArgument,
        "variables is not JSON",
    );
    let huge = format!("{{\"blob\": \"{}\"}}", "x".repeat(9 * 1024 * 1024));
    let e = c
        .create_process_instance(start(huge))
        .await
        .expect_err("too large");
    assert!(
        matches!(
            e.code(),
            Code::ResourceExhausted | Code::OutOfRange | Code::InvalidArgument
        ),
        "{e:?}"
    );
    refused(
        c.complete_job(proto::CompleteJobRequest {
            job_key: 42,
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "jobKey 42",
    );
    let other_partition = (3i64 << 51) + 7;
    refused(
        c.fail_job(proto::FailJobRequest {
            job_key: other_partition,
            retries: 1,
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "partition 2",
    );
    refused(
        c.resolve_incident(proto::ResolveIncidentRequest {
            incident_key: -5,
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "incidentKey -5",
    );
    let activate = |timeout: i64, max: i32| proto::ActivateJobsRequest {
        r#type: "rechnungStellen".into(),
        timeout,
        max_jobs_to_activate: max,
        request_timeout: -1,
        ..Default::default()
    };
    refused(
        c.activate_jobs(activate(-1, 5)).await,
        Code::InvalidArgument,
        "timeout",
    );
    refused(
        c.activate_jobs(activate(60_000, 0)).await,
        Code::InvalidArgument,
        "maxJobsToActivate",
    );
    refused(
        c.publish_message(proto::PublishMessageRequest {
            name: "AuftragAbgeschlossen".into(),
            correlation_key: "A-1".into(),
            time_to_live: -1,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "timeToLive",
    );
    refused(
        c.set_variables(proto::SetVariablesRequest {
            element_instance_key: (1 << 51) + 4242,
            variables: "[]".into(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "variables",
    );
    refused(
        c.set_variables(proto::SetVariablesRequest {
            element_instance_key: (1 << 62) | ((1 << 51) + 4242),
            variables: "{}".into(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "elementInstanceKey",
    );
    refused(
        c.cancel_process_instance(proto::CancelProcessInstanceRequest {
            process_instance_key: 77,
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "processInstanceKey 77",
    );
    refused(
        c.modify_process_instance(proto::ModifyProcessInstanceRequest::default())
            .await,
        Code::Unimplemented,
        "ModifyProcessInstance",
    );

    // bytes that are no protobuf message: an error status, and the server lives
    let url = format!("http://{zeebe}/gateway_protocol.Gateway/PublishMessage");
    let body = dir.path().join("garbage");
    std::fs::write(&body, [0u8, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).unwrap();
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-i",
            "--http2-prior-knowledge",
            "-H",
            "content-type: application/grpc",
            "-H",
            "te: trailers",
            "--data-binary",
        ])
        .arg(format!("@{}", body.display()))
        .arg(&url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("grpc-status: ") && !text.contains("grpc-status: 0"),
        "{text}"
    );
    let topology = c
        .topology(proto::TopologyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(topology.partitions_count, 1);
    // nothing was started by any of it
    let (_, listed) = common::server::call(&srv.addr, "GET", "/instances", None, None);
    assert!(listed.contains("\"instances\":[]"), "{listed}");
    srv.stop();
}

/// Zeebe's own port taken by something else is no reason to refuse the
/// HTTP API: by default the face is skipped with a warning naming the port;
/// asked for by name, the same port is an error naming it.
#[test]
fn a_taken_default_port_is_a_warning_and_a_named_one_an_error() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    // held here, or by another program: taken either way
    let _held = std::net::TcpListener::bind("127.0.0.1:26500");
    let start = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("--db")
            .arg(dir.path().join("run.redb"))
            .args([
                "run",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--listen",
                "127.0.0.1:0",
                "--correlation-key",
                "AuftragAbgeschlossen=auftragId",
            ])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = start(&[]);
    let mut seen = Vec::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let serving = line.contains("HTTP API on");
        seen.push(line);
        if serving {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        seen.iter()
            .any(|l| l.contains("warning: 127.0.0.1:26500 is taken")),
        "{seen:?}"
    );
    assert!(seen.last().unwrap().contains("HTTP API on"), "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|l| l.contains("Zeebe gateway protocol (gRPC) on"))
    );

    let o = start(&["--zeebe-listen", "127.0.0.1:26500"])
        .wait_with_output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("127.0.0.1:26500"), "{err}");
}
