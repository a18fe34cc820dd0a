//! Three partition processes and a gateway in front of them: a start lands on
//! the partition of its correlation key, a completion message follows it
//! there, commands by id reach the partition that owns the id, lists are
//! gathered page by page with every instance exactly once, and a partition
//! that is down is named in every answer that lacks it — while the other
//! partitions go on taking their traffic. Restarted on its own database, the
//! partition is back in `cluster status`.
#![cfg(feature = "server")]
use crate::common;
use common::SIGNALS;
use common::server::{Gateway, Server, free_ports, http};
use postfach::partition::Partition;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const P: u64 = 3;

fn partition(dir: &std::path::Path, i: u64, listen: &str) -> Server {
    Server::launch(
        dir,
        &[
            "--listen".into(),
            listen.into(),
            "--partitions".into(),
            P.to_string(),
            "--partition".into(),
            i.to_string(),
        ],
        &[],
    )
}

fn owner(key: &str) -> u64 {
    u64::from(Partition::new(0, P).unwrap().of_key(key))
}

/// A key that partition `i` owns.
fn key_on(i: u64) -> String {
    (0..)
        .map(|n| format!("B-{n}"))
        .find(|k| owner(k) == i)
        .unwrap()
}

fn publish(gw: &Gateway, key: &str, id: &str) -> (u16, Value) {
    gw.json(
        "POST",
        "/messages",
        Some(json!({"name": "AuftragAbgeschlossen", "key": key, "id": id})),
    )
}

/// Every instance the gateway lists, page by page with `limit` per page.
fn all_instances(gw: &Gateway, query: &str, limit: usize) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &after {
            Some(a) => format!("/instances?{query}&limit={limit}&after={a}"),
            None => format!("/instances?{query}&limit={limit}"),
        };
        let (status, page) = gw.json("GET", &path, None);
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["missing"], json!([]), "{page}");
        let list = page["instances"].as_array().unwrap();
        assert!(list.len() <= limit, "a page of {limit} held {}", list.len());
        ids.extend(
            list.iter()
                .map(|i| i["instance"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => return (ids, pages),
        }
    }
}

/// The instances a walk page by page reads while a partition is down, and
/// the cursor its last page answers to resume the partition from; fails if
/// the walk does not end.
fn walk_while_down(gw: &Gateway, query: &str, limit: usize) -> (Vec<String>, String) {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1_000 {
        let path = match &after {
            Some(a) => format!("/instances?{query}&limit={limit}&after={a}"),
            None => format!("/instances?{query}&limit={limit}"),
        };
        let (status, page) = gw.json("GET", &path, None);
        assert_eq!(status, 200, "{page}");
        let list = page["instances"].as_array().unwrap();
        ids.extend(
            list.iter()
                .map(|i| i["instance"].as_str().unwrap().to_string()),
        );
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => {
                assert_eq!(page["resume_partitions"], json!([1]), "{page}");
                let resume = page["resume"].as_str().expect("a resume cursor");
                return (ids, resume.to_string());
            }
        }
    }
    panic!(
        "the walk did not end with a partition down: {} read",
        ids.len()
    );
}

#[test]
fn a_gateway_routes_a_cluster_by_key_and_id() {
    let dirs: Vec<_> = (0..P).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut parts: Vec<Option<Server>> = (0..P)
        .map(|i| Some(partition(dirs[i as usize].path(), i, "127.0.0.1:0")))
        .collect();
    let addrs: Vec<String> = parts
        .iter()
        .map(|s| s.as_ref().unwrap().addr.clone())
        .collect();
    let gw = Gateway::start(&addrs);

    // starts land on the partition of their key (the engine of another one
    // refuses them before writing, naming the owner, and the gateway follows)
    let keys: Vec<String> = (0..9).map(|n| format!("A-{n}")).collect();
    for k in &keys {
        let (status, v) = gw.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": k}})),
        );
        assert_eq!(status, 201, "{v}");
        let id: u64 = v["instance"].as_str().unwrap().parse().unwrap();
        assert_eq!(id % P, owner(k), "instance {id} of key {k}");
    }
    // a partition asked directly for a key it does not own says who owns it
    let k = key_on(2);
    let (status, v) = http(
        &addrs[0],
        "POST",
        "/messages",
        Some(&json!({"name": "AuftragAbgeschlossen", "key": k, "id": "direct"})),
    );
    assert_eq!(status, 421, "{v}");
    assert_eq!(v["partition"], 2, "{v}");

    // the provider's worker: jobs acquired through the gateway from every
    // partition, each completed on the partition its id names
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut handed = 0;
    while handed < keys.len() {
        let (status, got) = gw.json(
            "POST",
            "/jobs/acquire",
            Some(json!({"topic": "auftragUebergeben", "worker": "provider", "max": 4, "lease_ms": 60_000})),
        );
        assert_eq!(status, 200, "{got}");
        for j in got["jobs"].as_array().unwrap() {
            let (status, body) = gw.json(
                "POST",
                &format!("/jobs/{}/complete", j["job"].as_str().unwrap()),
                Some(json!({"lease_token": j["lease_token"]})),
            );
            assert_eq!(status, 200, "{body}");
            handed += 1;
        }
        assert!(Instant::now() < deadline, "only {handed} hand-overs");
        std::thread::sleep(Duration::from_millis(20));
    }

    // completions follow their keys; a duplicate is recognised on the owner
    for k in &keys {
        let (status, v) = publish(&gw, k, &format!("done-{k}"));
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["outcome"], "correlated", "{v}");
    }
    let (_, dup) = publish(&gw, &keys[0], "done-A-0");
    assert_eq!(dup["outcome"], "duplicate", "{dup}");

    // gathered page by page: every instance once, none missing
    let deadline = Instant::now() + Duration::from_secs(30);
    let (ids, pages) = loop {
        let (ids, pages) = all_instances(&gw, "state=completed", 2);
        if ids.len() == keys.len() || Instant::now() > deadline {
            break (ids, pages);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), keys.len(), "{ids:?}");
    assert_eq!(ids.len(), keys.len(), "an instance listed twice: {ids:?}");
    assert!(pages >= 5, "9 instances in pages of 2 took {pages} pages");
    // a cursor that is not the gateway's is refused, naming it
    let (status, v) = gw.json("GET", "/instances?after=nonsense", None);
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("after"), "{v}");

    // statistics and metrics over the cluster
    let (_, stats) = gw.json("GET", "/processes/auftrag-ausfuehrung/statistics", None);
    assert_eq!(stats["missing"], json!([]), "{stats}");
    let metrics = http_text(&gw.addr, "/metrics");
    for i in 0..P {
        assert!(
            metrics.contains(&format!("postfach_partition_up{{partition=\"{i}\"}} 1")),
            "{metrics}"
        );
    }
    assert!(metrics.contains("partition=\"2\""), "{metrics}");

    // the command line through the gateway: by id, and gathered
    let on_two: u64 = ids
        .iter()
        .map(|i| i.parse::<u64>().unwrap())
        .find(|i| i % P == 2)
        .unwrap();
    let out = gw.cli(&["--json", "instance", &on_two.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "completed", "{v}");
    let out = gw.cli(&["--json", "instances", "--state", "completed"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["instances"].as_array().unwrap().len(), keys.len(), "{v}");

    // partition 1 goes down: answers say so, the others take their traffic
    let on_1: Vec<String> = {
        let (ids, _) = all_instances(&gw, "state=completed", 100);
        ids.into_iter()
            .filter(|i| i.parse::<u64>().unwrap() % P == 1)
            .collect()
    };
    assert!(!on_1.is_empty(), "partition 1 holds instances");
    parts[1].take().unwrap().kill9();
    let (status, page) = gw.json("GET", "/instances?limit=100", None);
    assert_eq!(status, 200);
    assert_eq!(page["missing"][0]["partition"], 1, "{page}");
    // a walk page by page ends once the partitions that answer are read, and
    // says where to resume the one that was down
    let (read, resume) = walk_while_down(&gw, "state=completed", 2);
    assert_eq!(read.len(), keys.len() - on_1.len(), "{read:?}");
    assert!(read.iter().all(|i| i.parse::<u64>().unwrap() % P != 1));
    let (status, v) = publish(&gw, &key_on(1), "while-down");
    assert_eq!(status, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("partition 1"), "{v}");
    for i in [0, 2] {
        let (status, v) = publish(&gw, &key_on(i), &format!("while-1-down-{i}"));
        assert_eq!(status, 200, "partition {i}: {v}");
        assert_eq!(v["outcome"], "buffered", "{v}");
    }
    let out = gw.cli(&["--json", "cluster", "status"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "cluster status with a partition down"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["partitions"][1]["up"], false, "{v}");
    let out = gw.cli(&["publish", "AuftragAbgeschlossen", "--key", &key_on(1)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("partition 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // back on its own database and address: nothing of it was lost
    let back = partition(dirs[1].path(), 1, &addrs[1]);
    parts[1] = Some(back);
    let out = gw.cli(&["--json", "cluster", "status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in v["partitions"].as_array().unwrap() {
        assert_eq!(p["ready"], true, "{v}");
        assert_eq!(p["partitions"], P, "{v}");
    }
    let (ids, _) = all_instances(&gw, "state=completed", 4);
    assert_eq!(ids.len(), keys.len(), "{ids:?}");
    // resumed where it stood, the walk reads what partition 1 holds
    let (status, page) = gw.json(
        "GET",
        &format!("/instances?state=completed&limit=100&after={resume}"),
        None,
    );
    assert_eq!(status, 200, "{page}");
    let mut resumed: Vec<String> = page["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance"].as_str().unwrap().to_string())
        .collect();
    resumed.sort();
    let mut want = on_1.clone();
    want.sort();
    assert_eq!(resumed, want, "{page}");
    assert_eq!(page["next"], Value::Null, "{page}");
    let (_, v) = publish(&gw, &key_on(1), "after-restart");
    assert_eq!(v["outcome"], "buffered", "{v}");
}

fn http_text(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn cluster_up_starts_partitions_and_a_gateway_and_stops_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let base = free_ports(3);
    let mut up = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "cluster",
            "up",
            "--partitions",
            "2",
            "bpmn/auftrag-ausfuehrung.bpmn",
        ])
        .args(["--correlation-key", "AuftragAbgeschlossen=auftragId"])
        .arg("--dir")
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{base}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(up.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("cluster up ended: {seen:?}"))
            .unwrap();
        if line.contains("gateway of 2 partitions on") {
            break;
        }
        seen.push(line);
    }
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    let gw = format!("127.0.0.1:{base}");
    let status = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args([
            "--server",
            &format!("http://{gw}"),
            "--json",
            "cluster",
            "status",
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let v: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["partitions"].as_array().unwrap().len(), 2, "{v}");
    let (code, started) = http(
        &gw,
        "POST",
        "/instances",
        Some(&json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "U-1"}})),
    );
    assert_eq!(code, 201, "{started}");

    Command::new("kill")
        .args(["-TERM", &up.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "cluster up did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit}");
    // every partition stopped gracefully and freed its port
    for i in 0..2 {
        let log = std::fs::read_to_string(dir.path().join(format!("partition-{i}.log"))).unwrap();
        assert!(log.contains("stopping"), "partition {i}: {log}");
        assert!(std::net::TcpListener::bind(("127.0.0.1", base + 1 + i)).is_ok());
        assert!(dir.path().join(format!("partition-{i}.redb")).exists());
    }
}

fn state(gw: &Gateway, id: &str) -> String {
    let (_, v) = gw.json("GET", &format!("/instances/{id}"), None);
    v["state"].as_str().unwrap_or_default().to_string()
}

fn start(gw: &Gateway, process: &str) -> String {
    let (status, v) = gw.json("POST", "/instances", Some(json!({"process": process})));
    assert_eq!(status, 201, "{v}");
    v["instance"].as_str().unwrap().to_string()
}

#[test]
fn a_signal_reaches_every_partition_and_is_applied_once_on_each() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let base = free_ports(2);
    let urls: Vec<String> = (0..2)
        .map(|i| format!("{i}=http://127.0.0.1:{}", base + i))
        .collect();
    let launch = |i: u16| {
        let mut args: Vec<String> = vec![
            "--listen".into(),
            format!("127.0.0.1:{}", base + i),
            "--partitions".into(),
            "2".into(),
            "--partition".into(),
            i.to_string(),
        ];
        for u in &urls {
            args.push("--partition-url".into());
            args.push(u.clone());
        }
        Server::launch(dirs[i as usize].path(), &args, &[])
    };
    let mut parts: Vec<Option<Server>> = (0..2u16).map(|i| Some(launch(i))).collect();
    let addrs: Vec<String> = (0..2).map(|i| format!("127.0.0.1:{}", base + i)).collect();
    let gw = Gateway::start(&addrs);
    let (status, v) = gw.json(
        "POST",
        "/deployments",
        Some(json!({"file": "signals.bpmn", "xml": SIGNALS})),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["partitions"], 2, "deployed to every partition: {v}");

    // catchers on both partitions (no key: round-robin)
    let waiting: Vec<String> = (0..4).map(|_| start(&gw, "wartet")).collect();
    let on: BTreeSet<u64> = waiting
        .iter()
        .map(|i| i.parse::<u64>().unwrap() % 2)
        .collect();
    assert_eq!(on.len(), 2, "catchers on both partitions: {waiting:?}");
    // a process throws on one partition: every catcher on both completes
    let thrower = start(&gw, "wirft");
    assert_eq!(state(&gw, &thrower), "completed");
    let deadline = Instant::now() + Duration::from_secs(20);
    while waiting.iter().any(|i| state(&gw, i) != "completed") {
        assert!(
            Instant::now() < deadline,
            "the thrown signal did not reach every partition"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // through the gateway with an id: applied once per partition
    let next: Vec<String> = (0..2).map(|_| start(&gw, "wartet")).collect();
    let signal = json!({"name": "Tarifwechsel", "id": "tarif-2027"});
    let (status, v) = gw.json("POST", "/signals", Some(signal.clone()));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["reached"], 2, "{v}");
    assert!(next.iter().all(|i| state(&gw, i) == "completed"));
    let again: Vec<String> = (0..2).map(|_| start(&gw, "wartet")).collect();
    let (_, v) = gw.json("POST", "/signals", Some(signal));
    assert_eq!(v["reached"], 2, "the first answer again: {v}");
    assert!(
        again.iter().all(|i| state(&gw, i) == "active"),
        "applied twice"
    );
    // without an id the gateway gives one; a signal reaching nobody is counted there
    let (_, v) = gw.json("POST", "/signals", Some(json!({"name": "Tarifwechsel"})));
    assert_eq!(v["reached"], 2, "{v}");
    assert!(v["id"].as_str().unwrap().starts_with("g-"), "{v}");
    let (_, v) = gw.json("POST", "/signals", Some(json!({"name": "Tarifwechsel"})));
    assert_eq!(v["reached"], 0, "{v}");
    let metrics = http_text(&gw.addr, "/metrics");
    assert!(
        metrics.contains("postfach_cluster_signals_unreached_total 1"),
        "{metrics}"
    );
    // a valid exposition: each family once, every partition's samples in it
    let families = common::tools::openmetrics_families(&metrics);
    let names: BTreeSet<&str> = families.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), families.len(), "a family twice: {families:?}");
    let labelled = |name: &str| {
        let (_, partitions) = families.iter().find(|(n, _)| n == name).unwrap();
        partitions.iter().cloned().collect::<BTreeSet<String>>()
    };
    let both: BTreeSet<String> = ["0".to_string(), "1".to_string()].into();
    assert_eq!(labelled("postfach_partition_up"), both, "{metrics}");
    assert!(families.len() > 10, "{families:?}");
    assert!(
        families
            .iter()
            .filter(|(n, _)| n.starts_with("postfach_") && !n.starts_with("postfach_cluster"))
            .any(|(n, _)| labelled(n) == both),
        "a partition's family carries both partitions: {families:?}"
    );

    // the command line through the gateway, sent again with its id after a
    // partition was down: applied exactly once on every partition
    let on = |p: u64| loop {
        let id = start(&gw, "wartet");
        if id.parse::<u64>().unwrap() % 2 == p {
            return id;
        }
    };
    let (first_0, first_1) = (on(0), on(1));
    parts[1].take().unwrap().kill9();
    let signal = ["--json", "signal", "Tarifwechsel", "--id", "tarif-retry"];
    let out = gw.cli(&signal);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("--id tarif-retry"), "{said}");
    assert_eq!(state(&gw, &first_0), "completed", "partition 0 took it");
    parts[1] = Some(launch(1));
    let later_0 = on(0);
    let out = gw.cli(&signal);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(state(&gw, &first_1), "completed", "partition 1 took it");
    assert_eq!(
        state(&gw, &later_0),
        "active",
        "applied twice on partition 0"
    );
    // without --id the command line gives it one, as the gateway does
    let out = gw.cli(&["--json", "signal", "Tarifwechsel"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["id"].as_str().is_some_and(|id| id.starts_with("c-")),
        "{v}"
    );
    assert_eq!(state(&gw, &later_0), "completed", "{v}");
}
