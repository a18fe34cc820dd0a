//! Completions arrive over Pub/Sub while a cluster of two partitions grows
//! to three: the router routes by the slot map it gathers from the gateway
//! (`router --slot-map`), and a delivery that reaches a partition after its
//! slot moved away — forwarded by a router that still held the old map, or
//! waiting in the old owner's subscription during the move — is handed on
//! to the new owner's topic (`run --forward-topic`). Every order completes
//! on the partition the final map names and is invoiced once; nothing is
//! parked.
#![cfg(feature = "pubsub")]
use crate::common;

use common::pubsub::{Broker, PROJECT, message};
use common::server::{Gateway, Server, cli_ok, free_ports, http};
use postfach::slots::SlotMap;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const SUB: &str = "auftrag-abgeschlossen-sub";
const TOPIC: &str = "auftrag-abgeschlossen";
const ORDERS: usize = 60;

fn partition(dir: &std::path::Path, i: u64, port: u16, broker: &Broker, ledger: &Path) -> Server {
    common::pubsub::cluster_partition(dir, (i, 2), &format!("127.0.0.1:{port}"), broker, ledger)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_over_pubsub_reach_their_orders_while_the_cluster_grows() {
    let broker = Broker::start();
    broker.reference_topics(SUB).await;
    for i in 0..3 {
        let t = format!("{TOPIC}-{i}");
        broker.topic_with_subscription(&t, &t).await;
    }
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // the cluster's one invoice system
    let shared = tempfile::tempdir().unwrap();
    let ledger = shared.path().join("invoices.tsv");
    let base = free_ports(3);
    let parts: Vec<Server> = tokio::task::block_in_place(|| {
        (0..3)
            .map(|i| partition(dirs[i].path(), i as u64, base + i as u16, &broker, &ledger))
            .collect()
    });
    let addrs: Vec<String> = parts.iter().map(|p| p.addr.clone()).collect();
    let gw = tokio::task::block_in_place(|| Gateway::start(&addrs));
    let url = format!("http://{}", gw.addr);
    let mut router = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args([
            "router",
            "--partitions",
            "2",
            "--subscription",
            SUB,
            "--message",
            "AuftragAbgeschlossen",
            "--key-from",
            "/auftragId",
            "--forward-topic",
            &format!("{TOPIC}-{{partition}}"),
            "--slot-map",
            &url,
        ])
        .env("PUBSUB_EMULATOR_HOST", broker.emulator.host())
        .env("GOOGLE_CLOUD_PROJECT", PROJECT)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    let keys: Vec<String> = (0..ORDERS).map(|n| format!("P-{n}")).collect();
    // the hand-over goes out over Pub/Sub ([send_topics]); the orders then
    // wait for their completion
    tokio::task::block_in_place(|| {
        for k in &keys {
            let (status, v) = gw.json(
                "POST",
                "/instances",
                Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": k}})),
            );
            assert_eq!(status, 201, "{v}");
        }
    });
    // the grow begins; the completions follow at once, before the router
    // has the new map
    let grown = tokio::task::block_in_place(|| {
        cli_ok(
            &url,
            None,
            &["cluster", "grow", "--partitions", "3", "--detach"],
        )
    });
    assert_eq!(grown["moves"].as_array().unwrap().len(), 2, "{grown}");
    let publisher = broker.conn.publisher(TOPIC).await.unwrap();
    for k in &keys {
        let body = format!("{{\"auftragId\": \"{k}\"}}");
        publisher
            .publish(message(&body, &[("eventId", &format!("done-{k}"))]))
            .await
            .unwrap();
    }
    // every order completes, on the partition the final map names
    common::pubsub::eventually("every order completes", Duration::from_secs(120), || {
        let v = cli_ok(&url, None, &["instances", "--state", "completed"]);
        v["instances"].as_array().map_or(0, Vec::len) == ORDERS
    })
    .await;
    let after = tokio::task::block_in_place(|| {
        SlotMap::from_json(&cli_ok(&url, None, &["cluster", "status"]))
            .unwrap()
            .unwrap()
    });
    assert_eq!(after.count_owned(2), 1365, "partition 2 took a third");
    let moved = keys
        .iter()
        .filter(|k| after.partition_of_key(k) == 2)
        .count();
    assert!(moved > 0, "some orders live on partition 2 now");
    for (p, addr) in addrs.iter().enumerate() {
        let (status, v) = http(addr, "GET", "/instances?limit=1000", None);
        assert_eq!(status, 200);
        for i in v["instances"].as_array().unwrap() {
            let key = i["business_key"].as_str().map(str::to_string);
            let id: u64 = i["instance"].as_str().unwrap().parse().unwrap();
            assert_eq!(after.partition_of_id(id), p as u32, "order {id} ({key:?})");
        }
        let (_, parked) = http(addr, "GET", "/messages?parked=true", None);
        assert_eq!(
            parked["messages"].as_array().map_or(0, Vec::len),
            0,
            "partition {p} parked: {parked}"
        );
    }
    let mut billed = std::collections::BTreeMap::<String, usize>::new();
    for (_, order) in postfach::reference::InvoiceLedger::entries(&ledger).unwrap() {
        *billed.entry(order).or_default() += 1;
    }
    for k in &keys {
        assert_eq!(billed.get(k), Some(&1), "{k} invoiced once");
    }
    let _ = router.kill();
    let _ = router.wait();
}
