//! Backups and the log archive in Cloud Storage (the fake-gcs-server
//! emulator): `backup --to gs://…` uploads the files and the manifest last,
//! `backups --at gs://…` lists them with sizes checked, `restore gs://…/ID`
//! downloads and restores with every check of a local restore — a damaged,
//! truncated or partial backup refused by name —, and a server with
//! `[backup] to` and `archive` in a bucket keeps `keep` backups and ships its
//! log, so that `restore --until` replays it from the bucket.
#![cfg(feature = "pubsub")]
use crate::common;
use common::gcs::{BUCKET, Gcs};
use common::server::Server;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn postfach(host: &str, db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("STORAGE_EMULATOR_HOST", host)
        .env_remove("POSTFACH_SERVER")
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn json(host: &str, db: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = postfach(host, db, &all);
    assert!(
        o.status.success(),
        "postfach {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn instances(host: &str, db: &Path) -> usize {
    json(host, db, &["instances"])["instances"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_in_a_bucket_is_listed_checked_and_restored() {
    let gcs = Gcs::start().await;
    let host = gcs.emulator.host().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.redb");
    let model = "bpmn/auftrag-ausfuehrung.bpmn";
    json(
        &host,
        &db,
        &[
            "deploy",
            model,
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    json(
        &host,
        &db,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=1"],
    );
    let at = format!("gs://{BUCKET}/backups");
    let b = json(&host, &db, &["backup", "--to", &at, "--id", "first"]);
    assert_eq!(b["backups"][0]["path"], format!("{at}/first-p0"), "{b}");
    let objects = gcs.objects();
    assert!(
        objects.contains(&"backups/first-p0/manifest.json".to_string()),
        "{objects:?}"
    );
    assert!(
        objects.contains(&"backups/first-p0/postfach.redb".to_string()),
        "{objects:?}"
    );
    assert!(
        !dir.path().join("live.redb.backup-staging").exists(),
        "the staging directory is gone"
    );
    let listed = json(&host, &db, &["backups", "--at", &at]);
    assert_eq!(listed["backups"][0]["ok"], true, "{listed}");

    let restored = dir.path().join("restored.redb");
    let r = json(
        &host,
        &restored,
        &["restore", &format!("{at}/first"), "--partition", "0"],
    );
    assert_eq!(r["restored"], "first-p0", "{r}");
    assert_eq!(instances(&host, &restored), 1);

    // damaged (same size, one byte other): refused at restore by its SHA-256
    let object = "backups/first-p0/postfach.redb";
    let good = gcs_read(&gcs, object).await;
    assert!(!good.is_empty());
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    gcs.put(object, &bad).await;
    let again = dir.path().join("again.redb");
    let o = postfach(&host, &again, &["restore", &format!("{at}/first-p0")]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("postfach.redb") && e.contains("SHA-256"), "{e}");
    assert!(!again.exists(), "nothing written");
    // truncated: the listing says so already
    gcs.put(object, &good[..good.len() / 2]).await;
    let listed = json(&host, &db, &["backups", "--at", &at]);
    let error = listed["backups"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("truncated"), "{listed}");
    // partial: files without their manifest
    gcs.put("backups/half-p0/postfach.redb", &good).await;
    let listed = json(&host, &db, &["backups", "--at", &at]);
    let half = &listed["backups"][1];
    assert_eq!(half["dir"], "half-p0", "{listed}");
    assert!(
        half["error"].as_str().unwrap().contains("partial"),
        "{listed}"
    );
    let o = postfach(&host, &again, &["restore", &format!("{at}/half-p0")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("partial"));
    assert!(!again.exists(), "nothing written");
}

async fn gcs_read(gcs: &Gcs, object: &str) -> Vec<u8> {
    let r = postfach::objects::ObjectRef::new(BUCKET, object, None).unwrap();
    postfach::objects::ObjectStore::read(gcs.store.as_ref(), &r)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeps_its_backups_and_archive_in_a_bucket() {
    let gcs = Gcs::start().await;
    let host = gcs.emulator.host().to_string();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("postfach.toml");
    std::fs::write(
        &cfg,
        format!(
            "[backup]\nto = \"gs://{BUCKET}/srv\"\nkeep = 1\narchive = \"gs://{BUCKET}/archive\"\narchive_every = \"1s\"\n"
        ),
    )
    .unwrap();
    let env = [("STORAGE_EMULATOR_HOST", host.as_str())];
    let srv = Server::launch(
        dir.path(),
        &["--config".into(), cfg.display().to_string()],
        &env,
    );
    let url = format!("http://{}", srv.addr);
    let unused = dir.path().join("unused.redb");
    let start = |key: &str| {
        let var = format!("auftragId={key}");
        json(
            &host,
            &unused,
            &[
                "--server",
                &url,
                "start",
                "auftrag-ausfuehrung",
                "--var",
                &var,
            ],
        );
    };
    start("1");
    json(&host, &unused, &["--server", &url, "backup", "--id", "a"]);
    let b = json(&host, &unused, &["--server", &url, "backup", "--id", "b"]);
    assert_eq!(
        b["backups"][0]["path"],
        format!("gs://{BUCKET}/srv/b-p0"),
        "{b}"
    );
    start("2");
    assert!(srv.stop().success());
    let at = format!("gs://{BUCKET}/srv");
    let listed = json(&host, &unused, &["backups", "--at", &at]);
    let dirs: Vec<&str> = listed["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["b-p0"], "keep = 1 removed the older one: {listed}");
    assert!(
        gcs.objects().iter().any(|o| o.starts_with("archive/p0-")),
        "{:?}",
        gcs.objects()
    );
    let target = dir.path().join("pitr.redb");
    let r = json(
        &host,
        &target,
        &[
            "restore",
            &format!("{at}/b-p0"),
            "--until",
            "2100-01-01T00:00:00Z",
            "--archive",
            &format!("gs://{BUCKET}/archive"),
        ],
    );
    assert!(r["replayed"]["batches"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(
        instances(&host, &target),
        2,
        "order 2 came from the archive"
    );
}
