//! `@camunda8/sdk` 8.8.13 (npm, Node 20), Camunda's TypeScript client,
//! against `postfach run`'s Zeebe gateway protocol with a bearer token: it
//! reads the topology, deploys the Zeebe-flavoured order model, creates 100
//! orders; a streaming worker (StreamActivatedJobs) hands each order over,
//! publishing the provider's completion before the order waits for it (once
//! twice: refused; once for nobody: kept), and a polling worker invoices it,
//! failing one invoice with no retries left — an incident, resolved by its
//! key. A credit check started with its result ends at its error boundary:
//! its worker threw a BPMN error. Every order is invoiced once and ends; the
//! client's gzip-compressed requests are read.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use std::process::Command;

const ORDERS: usize = 100;

#[test]
fn the_camunda8_node_sdk_streams_and_invoices_orders() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "node-s3cret").unwrap();
    let zeebe = format!("127.0.0.1:{}", common::server::free_ports(1));
    let srv = Server::launch(
        dir.path(),
        &[
            "--zeebe-listen".into(),
            zeebe.clone(),
            "--token-file".into(),
            token.display().to_string(),
        ],
        &[],
    );
    let root = env!("CARGO_MANIFEST_DIR");
    let o = Command::new("node")
        .env("NODE_PATH", common::zeebe::camunda8_sdk())
        .arg(format!("{root}/tests/fixtures/zeebe/c8sdk_orders.js"))
        .arg(&zeebe)
        .arg(format!("{root}/bpmn/auftrag-zeebe.bpmn"))
        .arg(ORDERS.to_string())
        .arg("node-s3cret")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "@camunda8/sdk: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(out["brokers"], 1, "{out}");
    let invoiced = out["invoiced"].as_array().unwrap();
    assert_eq!(invoiced.len(), ORDERS, "each order invoiced once: {out}");
    let dups = out["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1, "{out}");
    assert!(
        dups[0].as_str().unwrap().contains("published before"),
        "{out}"
    );
    assert_eq!(out["checked"]["kunde"], "K-1", "{out}");
    let url = format!("http://{}", srv.addr);
    let key: i64 = out["rejected"].as_str().unwrap().parse().unwrap();
    let view = common::server::cli_ok(
        &url,
        Some("node-s3cret"),
        &["instance", &(key - (1i64 << 51)).to_string()],
    );
    assert!(view.to_string().contains("abgelehnt"), "{view}");
    let kept = common::server::cli_ok(&url, Some("node-s3cret"), &["messages", "--buffered"]);
    assert!(kept.to_string().contains("done-niemand"), "{kept}");
    // the resolved incident's job ran again and its order was invoiced
    let key: i64 = out["resolved"].as_str().unwrap().parse().unwrap();
    let job = common::server::cli_ok(&url, Some("node-s3cret"), &["jobs", "--incidents"]);
    assert!(
        !job.to_string().contains(&(key - (1i64 << 51)).to_string()),
        "no incident is left: {job}"
    );
    assert_eq!(
        common::server::completed(
            &format!("http://{}", srv.addr),
            Some("node-s3cret"),
            "auftrag-zeebe",
            ORDERS
        ),
        ORDERS,
        "every order ends"
    );
    srv.stop();
}
