//! Backups from the command line: `backup --to DIR` on a stopped database,
//! `--server` against a running `postfach run` (which writes into its
//! `[backup] to`, nowhere a caller names), and through a gateway of two
//! partitions (one backup per partition); `backups` lists them checked,
//! `restore` brings one back as a database that opens with what it held.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn postfach(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("POSTFACH_SERVER")
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = postfach(&all);
    assert!(
        o.status.success(),
        "postfach {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A config whose `[backup] to` is `dir`.
fn config(at: &Path, dir: &Path) -> String {
    let path = at.join("postfach.toml");
    std::fs::write(
        &path,
        format!("[backup]\nto = {:?}\n", dir.display().to_string()),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn a_backup_of_a_stopped_database_restores_as_a_database_that_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.redb");
    let d = db.to_str().unwrap();
    json(&[
        "--db",
        d,
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    json(&[
        "--db",
        d,
        "start",
        "auftrag-ausfuehrung",
        "--var",
        "auftragId=4711",
    ]);
    // without --to it says what it needs
    let o = postfach(&["--db", d, "backup"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let backups = dir.path().join("backups");
    let b = json(&["--db", d, "backup", "--to", backups.to_str().unwrap()]);
    let path = b["backups"][0]["path"].as_str().unwrap().to_string();
    assert!(Path::new(&path).join("manifest.json").exists(), "{b}");
    let listed = json(&["backups", "--at", backups.to_str().unwrap()]);
    assert_eq!(listed["backups"][0]["ok"], true, "{listed}");
    // restored beside, it holds the order
    let copy = dir.path().join("copy.redb");
    let r = json(&["--db", copy.to_str().unwrap(), "restore", &path]);
    assert_eq!(r["restored"], b["backups"][0]["id"], "{r}");
    let listed = json(&["--db", copy.to_str().unwrap(), "instances"]);
    assert_eq!(listed["instances"].as_array().unwrap().len(), 1, "{listed}");
    // not over a database, unless told to
    let o = postfach(&["--db", d, "restore", &path]);
    assert_eq!(o.status.code(), Some(1));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("exists") && said.contains("--replace"),
        "{said}"
    );
    let r = json(&["--db", d, "restore", &path, "--replace"]);
    // the database it replaced and its log are kept beside it
    let kept: Vec<&str> = r["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert!(kept.iter().any(|k| k.contains("d.redb.replaced-")), "{r}");
    assert!(kept.iter().all(|k| Path::new(k).exists()), "{r}");
}

#[test]
fn a_running_server_and_a_gateway_take_backups_into_their_own_directory() {
    let dir = tempfile::tempdir().unwrap();
    let backups = dir.path().join("backups");
    let cfg = config(dir.path(), &backups);
    let srv = Server::launch(dir.path(), &["--config".into(), cfg.clone()], &[]);
    let url = format!("http://{}", srv.addr);
    json(&[
        "--server",
        &url,
        "start",
        "auftrag-ausfuehrung",
        "--var",
        "auftragId=1",
    ]);
    // the server writes where it is configured to, never where a caller says
    let o = postfach(&["--server", &url, "backup", "--to", "/tmp/elsewhere"]);
    assert_eq!(o.status.code(), Some(2));
    let b = json(&["--server", &url, "backup"]);
    let id = b["backups"][0]["id"].as_str().unwrap().to_string();
    assert!(backups.join(&id).join("manifest.json").exists(), "{b}");
    // a server without [backup] to takes none
    let bare = Server::start("127.0.0.1:0", None);
    let o = postfach(&["--server", &format!("http://{}", bare.addr), "backup"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("[backup] to"));
    bare.stop();
    srv.stop();

    // two partitions behind a gateway: one backup each
    let mut parts = Vec::new();
    let mut launched = Vec::new();
    for i in 0..2 {
        let pdir = dir.path().join(format!("p{i}"));
        std::fs::create_dir_all(&pdir).unwrap();
        let args: Vec<String> = vec![
            "--config".into(),
            config(&pdir, &backups),
            "--partitions".into(),
            "2".into(),
            "--partition".into(),
            i.to_string(),
        ];
        parts.push(Server::launch(&pdir, &args, &[]));
        launched.push((pdir, args));
    }
    let addrs: Vec<String> = parts.iter().map(|p| p.addr.clone()).collect();
    let gw = Gateway::start(&addrs);
    let b = json(&["--server", &format!("http://{}", gw.addr), "backup"]);
    let mut partitions: Vec<u64> = b["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["partition"].as_u64().unwrap())
        .collect();
    partitions.sort();
    assert_eq!(partitions, [0, 1], "{b}");
    let listed = json(&["backups", "--at", backups.to_str().unwrap()]);
    assert_eq!(listed["backups"].as_array().unwrap().len(), 3, "{listed}");
    // a partition's backup refused for the other partition
    let p1 = b["backups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["partition"] == 1)
        .unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    let target = dir.path().join("p0-restored.redb");
    let o = postfach(&[
        "--db",
        target.to_str().unwrap(),
        "restore",
        &p1,
        "--partition",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not partition 0"));
    // one set id for both, the gateway's
    let ids: Vec<&str> = each_id(&b);
    assert_eq!(
        ids[0].strip_suffix("-p0"),
        ids[1].strip_suffix("-p1"),
        "{b}"
    );
    one_set_id_names_the_clusters_backup(&format!("http://{}", gw.addr), &backups, dir.path());
    let (pdir, args) = launched.pop().unwrap();
    let p1 = parts.pop().unwrap();
    parts.push(a_set_waits_for_slot_moves_in_flight(
        &format!("http://{}", gw.addr),
        &parts[0],
        p1,
        (&pdir, args),
        &backups,
    ));
    for p in parts {
        p.stop();
    }
}

fn each_id(b: &Value) -> Vec<&str> {
    let mut ids: Vec<&str> = b["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids
}

/// `cluster backup --id` takes the set once; `restore DIR/SET --partition
/// I` picks the partition's backup of it.
fn one_set_id_names_the_clusters_backup(gw: &str, backups: &Path, dir: &Path) {
    let b = json(&["--server", gw, "cluster", "backup", "--id", "nightly-1"]);
    assert_eq!(each_id(&b), ["nightly-1-p0", "nightly-1-p1"], "{b}");
    let o = postfach(&["--server", gw, "cluster", "backup", "--id", "nightly-1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("exists"),
        "{o:?}"
    );
    let o = postfach(&["--server", gw, "cluster", "backup", "--id", "../up"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let o = postfach(&["--server", gw, "cluster", "backup", "--wait", "86401"]);
    assert_eq!(o.status.code(), Some(2), "a wait past a day: {o:?}");
    assert!(!backups.join("../up-p0").exists());
    let target = dir.join("p1-restored.redb");
    let set = backups.join("nightly-1");
    let r = json(&[
        "--db",
        target.to_str().unwrap(),
        "restore",
        set.to_str().unwrap(),
        "--partition",
        "1",
    ]);
    assert_eq!(r["restored"], "nightly-1-p1", "{r}");
    assert_eq!(r["partition"], 1, "{r}");
    let o = postfach(&["cluster", "backup"]);
    assert_eq!(o.status.code(), Some(2), "a gateway is needed");
}

/// `[backup] every` takes backups on a schedule and `keep` removes the
/// partition's oldest; `/metrics` says when the last good one was taken.
#[test]
fn a_server_takes_backups_on_a_schedule_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let backups = dir.path().join("backups");
    let cfg = dir.path().join("postfach.toml");
    std::fs::write(
        &cfg,
        format!(
            "[backup]\nto = {:?}\nevery = \"1s\"\nkeep = 2\n",
            backups.display().to_string()
        ),
    )
    .unwrap();
    let srv = Server::launch(
        dir.path(),
        &["--config".into(), cfg.display().to_string()],
        &[],
    );
    let mut seen = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let kept = loop {
        let good: Vec<String> = postfach::backup::list(&backups)
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, m)| m.is_ok())
            .map(|(name, _)| name)
            .collect();
        seen.extend(good.iter().cloned());
        // between a new backup and the pruning after it there may be one more
        assert!(good.len() <= 3, "keep = 2, found {good:?}");
        if seen.len() >= 4 && good.len() <= 2 {
            break good;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backups seen so far: {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(!kept.is_empty());
    let metrics = srv.metrics();
    assert!(
        metrics.contains("postfach_backup_last_success_timestamp_seconds "),
        "{metrics}"
    );
    srv.stop();
    // a schedule out of range is refused before the server starts, naming it
    std::fs::write(&cfg, "[backup]\nto = \"b\"\nevery = \"10ms\"\n").unwrap();
    let o = postfach(&[
        "--db",
        dir.path().join("x.redb").to_str().unwrap(),
        "run",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("backup.every"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A backup set is taken between slot moves. With a move in flight —
/// partition 0's slots 0-9 to partition 1, begun on partition 0 while 1 is
/// down — `cluster backup` waits for it, and past `--wait` is refused
/// naming it, taking nothing; once partition 1 is back and the move has
/// ended, the set is taken. Returns partition 1, started again.
fn a_set_waits_for_slot_moves_in_flight(
    gw: &str,
    p0: &Server,
    p1: Server,
    (pdir, mut args): (&Path, Vec<String>),
    backups: &Path,
) -> Server {
    let addr1 = p1.addr.clone();
    p1.kill9();
    let (status, begun) = p0.json(
        "POST",
        "/slots/moves",
        Some(serde_json::json!({"first": 0, "last": 9, "to": 1, "to_url": format!("http://{addr1}")})),
    );
    assert_eq!(status, 200, "{begun}");
    let o = postfach(&[
        "--server", gw, "cluster", "backup", "--id", "mid-move", "--wait", "1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("slots 0-9 from partition 0 to 1") && err.contains("between slot moves"),
        "{err}"
    );
    for taken in ["mid-move", "mid-move-p0", "mid-move-p1"] {
        assert!(!backups.join(taken).exists(), "nothing taken: {taken}");
    }
    args.extend(["--listen".to_string(), addr1]);
    let p1 = Server::launch(pdir, &args, &[]);
    let b = json(&["--server", gw, "cluster", "backup", "--id", "after-move"]);
    assert_eq!(each_id(&b), ["after-move-p0", "after-move-p1"], "{b}");
    let (_, held) = p0.json("GET", "/slots", None);
    assert_eq!(
        held["moves"],
        serde_json::json!([]),
        "the move ended first: {held}"
    );
    assert_eq!(held["map_version"], 2, "{held}");
    p1
}
