//! Camunda's Java client, `io.camunda:camunda-client-java` 8.9.0 (Maven),
//! works the order process on `postfach run` twice: once over Zeebe's
//! gateway protocol (`preferRestOverGrpc(false)`) with streaming job
//! workers, once over the REST API it prefers by default — with the gRPC
//! address pointing nowhere, so every call, the workers' polling included,
//! went over `/v2`. Each time: topology, deploy, 100 orders; a worker hands
//! each over, publishing the provider's completion before the order waits
//! (buffered, then correlated) and once more as a duplicate (refused:
//! `ALREADY_EXISTS`, 409 over REST); a worker invoices it; one invoice
//! fails with no retries left, is found by the incident search and
//! resolved; a completion for an order nobody placed is kept; a credit
//! check's worker throws a BPMN error, caught by the task's boundary; a
//! start waits for its result; an order is given a variable and cancelled;
//! the hand-over job carries its task's headers. Every order is invoiced
//! once and ends.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use serde_json::Value;
use std::process::Command;

const ORDERS: usize = 100;

fn run(classpath: &str, grpc: &str, rest: &str, prefix: &str, mode: &[&str]) -> Value {
    let o = Command::new("java")
        .arg("-cp")
        .arg(classpath)
        .arg("Orders")
        .args([grpc, rest])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/bpmn/auftrag-zeebe.bpmn"
        ))
        .arg(ORDERS.to_string())
        .arg(prefix)
        .args(mode)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "Camunda's Java client ({mode:?}): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn check(out: &Value, prefix: &str, duplicate: &str) {
    assert_eq!(out["brokers"], 1, "{out}");
    let invoiced: Vec<&str> = out["invoiced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut expected: Vec<String> = (0..ORDERS).map(|i| format!("{prefix}-{i}")).collect();
    expected.sort();
    assert_eq!(invoiced, expected, "each order invoiced once");
    let dups = out["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1, "{out}");
    let dup = dups[0].as_str().unwrap();
    assert!(
        dup.contains("published before") && dup.contains(duplicate),
        "{dup}"
    );
    assert_eq!(out["resolved"], "printer jammed", "{out}");
    // the hand-over task's zeebe:taskHeaders reach the worker
    assert_eq!(
        out["headers"],
        serde_json::json!(["{anbieter=provider-a}"]),
        "{out}"
    );
    assert_eq!(out["withResult"], "hallo", "{out}");
}

#[test]
fn camundas_java_client_works_orders_over_grpc_and_rest() {
    let dir = tempfile::tempdir().unwrap();
    let classes = dir.path().join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let classpath = common::zeebe::camunda_java(&classes);
    let zeebe = format!("127.0.0.1:{}", common::server::free_ports(1));
    let srv = Server::launch(dir.path(), &["--zeebe-listen".into(), zeebe.clone()], &[]);
    let url = format!("http://{}", srv.addr);

    let grpc = run(&classpath, &zeebe, &srv.addr, "G", &["grpc", "stream"]);
    check(&grpc, "G", "");
    // REST only: nothing listens at the gRPC address the client is given
    let nowhere = format!("127.0.0.1:{}", common::server::free_ports(1));
    let rest = run(&classpath, &nowhere, &srv.addr, "R", &["rest"]);
    check(&rest, "R", "409");

    assert_eq!(
        common::server::completed(&url, None, "auftrag-zeebe", 2 * ORDERS),
        2 * ORDERS,
        "every order ends"
    );
    for out in [&grpc, &rest] {
        let key: i64 = out["cancelled"].as_str().unwrap().parse().unwrap();
        // partition 0's keys start at 2^51
        let id = (key - (1i64 << 51)).to_string();
        let view = common::server::cli_ok(&url, None, &["instance", &id]);
        assert_eq!(view["state"], "cancelled", "{view}");
        assert_eq!(view["variables"]["prio"], 2, "{view}");
        // the thrown error ended the check at the boundary's end event
        let key: i64 = out["rejected"].as_str().unwrap().parse().unwrap();
        let id = (key - (1i64 << 51)).to_string();
        let view = common::server::cli_ok(&url, None, &["instance", &id]);
        assert_eq!(view["state"], "completed", "{view}");
        assert!(view.to_string().contains("abgelehnt"), "{view}");
    }
    let kept = common::server::cli_ok(&url, None, &["messages", "--buffered"]).to_string();
    for id in ["done-niemand-G", "done-niemand-R"] {
        assert!(kept.contains(id), "{id}: {kept}");
    }
    srv.stop();
}
