//! A cluster of two partitions grows to three while completions stream in
//! through the gateway: partition 2 joins empty (`run --partitions 2
//! --partition 2`), `cluster grow --partitions 3` moves a third of the slots
//! to it, and partition 0 is killed with SIGKILL in the middle of its move
//! and started again. Every completion is answered (a write for a slot in a
//! move waits, a partition that is down is asked again), every order is on
//! exactly the partition the final map names and is invoiced once, and a
//! completion sent again after the move is a duplicate where its order now
//! lives. Then it shrinks back to two (`cluster shrink --partitions 2`):
//! partition 2 gives every slot to the others, and its orders follow. A
//! move to a partition that is down, and one of slots a partition does not
//! own, are refused before anything moves.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server, cli_ok, free_ports, http};
use postfach::slots::SlotMap;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ORDERS: usize = 120;

fn partition(dir: &std::path::Path, i: u64, port: u16, ledger: &std::path::Path) -> Server {
    Server::launch(
        dir,
        &[
            // the cluster's one invoice system: a job that ran on a slot's
            // old owner runs again at the new one with the same key
            "--invoice-ledger".into(),
            ledger.display().to_string(),
            "--partitions".into(),
            "2".into(),
            "--partition".into(),
            i.to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
        ],
        &[],
    )
}

/// The cluster's map as `cluster status --json` shows it.
fn map_of(url: &str) -> SlotMap {
    SlotMap::from_json(&cli_ok(url, None, &["cluster", "status"]))
        .unwrap()
        .unwrap()
}

/// Sends the completion of `key` until some partition answers it (a
/// partition that is down answers 503 through the gateway; so does a slot
/// whose move outlasts the gateway's wait).
fn complete(gw: &str, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, v) = http(
            gw,
            "POST",
            "/messages",
            Some(&json!({"name": "AuftragAbgeschlossen", "key": key, "id": id})),
        );
        if (200..300).contains(&status) {
            return v;
        }
        assert!(
            status == 503 && Instant::now() < deadline,
            "{key}: {status} {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Invoices per order in the cluster's ledger.
fn invoices(ledger: &std::path::Path) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for (_, order) in postfach::reference::InvoiceLedger::entries(ledger).unwrap() {
        *out.entry(order).or_default() += 1;
    }
    out
}

#[test]
fn two_partitions_grow_to_three_under_load_with_a_kill_in_the_middle() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let shared = tempfile::tempdir().unwrap();
    let ledger = shared.path().join("invoices.tsv");
    let base = free_ports(3);
    let ports = [base, base + 1, base + 2];
    let mut parts: Vec<Option<Server>> = (0..3)
        .map(|i| Some(partition(dirs[i].path(), i as u64, ports[i], &ledger)))
        .collect();
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let gw = Gateway::start(&addrs);
    let url = format!("http://{}", gw.addr);

    // the joined partition owns nothing; the others hold the orders
    let before = map_of(&url);
    assert_eq!((before.version(), before.count_owned(2)), (1, 0));
    let keys: Vec<String> = (0..ORDERS).map(|n| format!("G-{n}")).collect();
    let mut ids = Vec::new();
    for k in &keys {
        let (status, v) = gw.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": k}})),
        );
        assert_eq!(status, 201, "{v}");
        ids.push(v["instance"].as_str().unwrap().parse::<u64>().unwrap());
    }
    for (i, p) in parts.iter().take(2).enumerate() {
        let n = keys
            .iter()
            .filter(|k| before.partition_of_key(k) == i as u32)
            .count();
        p.as_ref().unwrap().hand_over(n);
    }

    // refusals before anything is fenced
    let o = gw.cli(&["cluster", "move-slots", "1-1", "--to", "1", "--from", "0"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("owns none of slots 1-1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // the grow begins (a move on each of partitions 0 and 1, their slots
    // fenced), then the completions stream in while the moves run; partition
    // 0 is killed in the middle of its move and started again
    let grown = cli_ok(
        &url,
        None,
        &["cluster", "grow", "--partitions", "3", "--detach"],
    );
    let moves = grown["moves"].as_array().unwrap().clone();
    assert_eq!(moves.len(), 2, "one move from each partition: {grown}");
    let mut answers = Vec::new();
    let mut in_flight = 0;
    for (n, k) in keys.iter().enumerate() {
        if n == 0 {
            // the moves have just begun: partition 0's is in flight
            let (_, held) = http(&addrs[0], "GET", "/slots", None);
            in_flight = held["moves"].as_array().map_or(0, Vec::len);
            parts[0].take().unwrap().kill9();
            std::thread::sleep(Duration::from_millis(300));
            parts[0] = Some(partition(dirs[0].path(), 0, ports[0], &ledger));
        }
        answers.push(complete(&gw.addr, k, &format!("done-{k}")));
    }
    assert_eq!(
        in_flight, 1,
        "partition 0 was killed in the middle of its move"
    );
    // each move runs to its end: `batch status` through the gateway
    let deadline = Instant::now() + Duration::from_secs(120);
    for m in &moves {
        let id = m["batch"].as_str().unwrap();
        loop {
            let (status, b) = gw.json("GET", &format!("/batches/{id}"), None);
            if status == 200 && b["state"] == json!("done") {
                assert_eq!(b["operation"], json!("move-slots"), "{b}");
                assert_eq!(b["done"], b["items"], "{b}");
                break;
            }
            assert!(Instant::now() < deadline, "move {id}: {status} {b}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let after = map_of(&url);
    assert_eq!(
        (0..3).map(|p| after.count_owned(p)).collect::<Vec<_>>(),
        vec![1366, 1365, 1365],
        "each partition owns a third"
    );
    assert!(after.version() >= 3, "{}", after.version());
    let moved: Vec<&String> = keys
        .iter()
        .filter(|k| after.partition_of_key(k) == 2)
        .collect();
    assert!(!moved.is_empty(), "some orders moved to partition 2");

    // every completion was taken once: correlated, or buffered until its
    // order reached the catch, never twice
    for (k, a) in keys.iter().zip(&answers) {
        let outcome = a["outcome"].as_str().unwrap_or_default();
        assert!(
            outcome == "correlated" || outcome == "duplicate",
            "{k}: {a}"
        );
    }
    // every order on exactly the partition the map names, completed
    let deadline = Instant::now() + Duration::from_secs(30);
    for (k, id) in keys.iter().zip(&ids) {
        let owner = after.partition_of_key(k) as usize;
        loop {
            let found: Vec<(usize, Value)> = (0..3)
                .filter_map(|p| {
                    let (status, v) = http(&addrs[p], "GET", &format!("/instances/{id}"), None);
                    (status == 200).then_some((p, v))
                })
                .collect();
            assert_eq!(
                found.len(),
                1,
                "{k} order {id} on {:?}",
                found.iter().map(|f| f.0).collect::<Vec<_>>()
            );
            assert_eq!(found[0].0, owner, "{k} order {id}");
            if found[0].1["state"] == json!("completed") {
                break;
            }
            assert!(Instant::now() < deadline, "{k}: {}", found[0].1);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let billed = invoices(&ledger);
    for k in &keys {
        assert_eq!(billed.get(k), Some(&1), "{k} invoiced once: {billed:?}");
    }
    // a completion sent again is a duplicate where its order lives now
    for k in moved.iter().take(3) {
        let again = complete(&gw.addr, k, &format!("done-{k}"));
        assert_eq!(again["outcome"], json!("duplicate"), "{k}: {again}");
    }

    // it shrinks back: partition 2 gives every slot it owns to 0 and 1,
    // and every order lives where the map says, once
    let o = gw.cli(&["cluster", "shrink", "--partitions", "3"]);
    assert_eq!(o.status.code(), Some(2), "3 partitions own slots already");
    let shrunk = cli_ok(&url, None, &["cluster", "shrink", "--partitions", "2"]);
    assert!(!shrunk["moves"].as_array().unwrap().is_empty(), "{shrunk}");
    let back = map_of(&url);
    assert_eq!(
        (0..3).map(|p| back.count_owned(p)).collect::<Vec<_>>(),
        vec![2048, 2048, 0],
        "{shrunk}"
    );
    for (k, id) in keys.iter().zip(&ids) {
        let on: Vec<usize> = (0..3)
            .filter(|p| http(&addrs[*p], "GET", &format!("/instances/{id}"), None).0 == 200)
            .collect();
        assert_eq!(
            on,
            vec![back.partition_of_key(k) as usize],
            "{k} order {id}"
        );
    }
    for k in moved.iter().take(3) {
        let again = complete(&gw.addr, k, &format!("done-{k}"));
        assert_eq!(again["outcome"], json!("duplicate"), "{k}: {again}");
    }

    // a move to a partition that is down is refused, nothing moves
    parts[2].take().unwrap().kill9();
    let o = gw.cli(&["cluster", "move-slots", "0-9", "--to", "2"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("a move needs its target up"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (status, v) = http(&addrs[0], "GET", "/slots", None);
    assert_eq!(status, 200);
    assert_eq!(v["moves"], json!([]), "{v}");
}
