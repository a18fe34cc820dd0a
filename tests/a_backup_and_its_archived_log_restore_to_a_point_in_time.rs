//! Point-in-time restore: with an archive, the log is closed as segments
//! instead of emptied, the segments are shipped to the archive, and a base
//! backup plus the archived batches restore the database as it was at an
//! instant — exactly the batches at or before it. A gap in the archive, an
//! instant before the backup and a segment shipped twice with other bytes
//! are refused before anything is written.
use crate::common;
use common::{PROCESS, REFERENCE, T0};
use postfach::backup::{self, BackupError, archive};
use postfach::clock::ManualClock;
use postfach::{Options, Postfach};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn options(clock: &Arc<ManualClock>) -> Options {
    Options {
        clock: clock.clone(),
        // a checkpoint after every batch, each closing a segment
        checkpoint_every: Duration::ZERO,
        archive: Some(postfach::Archive {
            every: Duration::ZERO,
            bytes: u64::MAX,
        }),
        ..Options::default()
    }
}

fn log_of(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}.wal", db.display()))
}

/// The `auftragId` of every instance in the database at `db`, after the
/// opening replayed its log.
fn orders(db: &Path, clock: &Arc<ManualClock>) -> Vec<String> {
    let pf = Postfach::open_with(
        db,
        Options {
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    let r = pf.reader().unwrap();
    let mut keys: Vec<String> = r
        .instances(&Default::default())
        .unwrap()
        .iter()
        .map(|i| i.variables["auftragId"].as_str().unwrap().to_string())
        .collect();
    pf.close();
    keys.sort();
    keys
}

#[tokio::test]
async fn the_archived_log_restores_exactly_the_batches_before_an_instant() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.redb");
    let clock = ManualClock::new(T0);
    let pf = Postfach::open_with(&db, options(&clock)).unwrap();
    let keys = [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into();
    pf.deploy("a.bpmn", REFERENCE, keys).await.unwrap();
    let start = |key: &'static str| {
        let pf = pf.clone();
        async move {
            pf.start(PROCESS, postfach::vars([("auftragId", key.into())]), None)
                .await
                .unwrap()
        }
    };
    start("A").await;
    let backups = dir.path().join("backups");
    let base = pf.backup(&backups).await.unwrap();
    for key in ["B", "C", "D"] {
        clock.advance(Duration::from_secs(10));
        start(key).await;
    }
    pf.close();
    let archive_dir = dir.path().join("archive");
    let shipped = archive::ship(&log_of(&db), &archive_dir, 0).unwrap();
    assert!(
        shipped.len() >= 3,
        "one segment per checkpoint: {shipped:?}"
    );
    assert!(
        archive::ship(&log_of(&db), &archive_dir, 0)
            .unwrap()
            .is_empty(),
        "shipped segments are gone beside the log"
    );
    let base_dir = backups.join(&base.id);

    // B at T0+10s, C at T0+20s, D at T0+30s
    let cases = [
        (5, vec!["A"]),
        (25, vec!["A", "B", "C"]),
        (30, vec!["A", "B", "C", "D"]),
    ];
    for (secs, want) in cases {
        let target = dir.path().join(format!("at-{secs}.redb"));
        let until = T0 + secs * 1000;
        let r =
            backup::restore_until(&base_dir, &target, None, false, &archive_dir, until).unwrap();
        let replay = r.replay.unwrap();
        assert_eq!(replay.reached, secs < 30, "{secs}: {replay:?}");
        assert_eq!(orders(&target, &clock), want, "until T0+{secs}s");
    }

    // an instant before the backup
    let target = dir.path().join("before.redb");
    let e = backup::restore_until(&base_dir, &target, None, false, &archive_dir, T0 - 1);
    assert!(matches!(e, Err(BackupError::AfterInstant { .. })), "{e:?}");
    assert!(!target.exists());

    // a segment missing in the middle: refused naming the batch, nothing written
    let mut names: Vec<String> = std::fs::read_dir(&archive_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let gone = &names[names.len() - 2];
    std::fs::remove_file(archive_dir.join(gone)).unwrap();
    let e = backup::restore_until(&base_dir, &target, None, false, &archive_dir, T0 + 60_000)
        .unwrap_err();
    assert!(matches!(e, BackupError::ArchiveGap { .. }), "{e}");
    assert!(e.to_string().contains("no batch"), "{e}");
    assert!(!target.exists() && !log_of(&target).exists());
}

#[tokio::test]
async fn a_segment_shipped_again_with_other_batches_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let archive_dir = dir.path().join("archive");
    // two databases with the same batch numbers: a restored one archived
    // into the place of the one it came from
    for (name, key) in [("one.redb", "X"), ("two.redb", "Y")] {
        let db = dir.path().join(name);
        let pf = Postfach::open_with(&db, options(&clock)).unwrap();
        let keys = [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into();
        pf.deploy("a.bpmn", REFERENCE, keys).await.unwrap();
        pf.start(PROCESS, postfach::vars([("auftragId", key.into())]), None)
            .await
            .unwrap();
        pf.close();
        let shipped = archive::ship(&log_of(&db), &archive_dir, 0);
        if key == "X" {
            assert!(!shipped.unwrap().is_empty());
        } else {
            let e = shipped.unwrap_err().to_string();
            assert!(e.contains("a place of its own"), "{e}");
            // kept beside the log, not lost
            assert!(!postfach_closed(&db).is_empty());
        }
    }
}

fn postfach_closed(db: &Path) -> Vec<String> {
    let prefix = format!("{}.wal.closed-", db.file_name().unwrap().to_string_lossy());
    std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// `postfach run` with `[backup] archive` ships its log's segments (the last
/// one at the stop); `restore --until T --archive DIR` replays them.
#[cfg(feature = "server")]
#[test]
fn a_server_archives_its_log_and_restore_until_replays_it() {
    use common::server::Server;
    let dir = tempfile::tempdir().unwrap();
    let (backups, archive_dir) = (dir.path().join("backups"), dir.path().join("archive"));
    let cfg = dir.path().join("postfach.toml");
    std::fs::write(
        &cfg,
        format!(
            "[backup]\nto = {:?}\narchive = {:?}\narchive_every = \"1s\"\n",
            backups.display().to_string(),
            archive_dir.display().to_string()
        ),
    )
    .unwrap();
    let srv = Server::launch(
        dir.path(),
        &["--config".into(), cfg.display().to_string()],
        &[],
    );
    let url = format!("http://{}", srv.addr);
    let run_on = |db: &Path, args: &[&str]| {
        let o = common::cli(db, args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let unused = dir.path().join("unused.redb");
    let run = |args: &[&str]| run_on(&unused, args);
    let start = |key: &str| {
        let var = format!("auftragId={key}");
        run(&["--json", "--server", &url, "start", PROCESS, "--var", &var]);
    };
    start("1");
    let base = run(&["--json", "--server", &url, "backup"]);
    let base = base["backups"][0]["path"].as_str().unwrap().to_string();
    start("2");
    std::thread::sleep(Duration::from_millis(1100));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let between = postfach::clock::rfc3339(now);
    std::thread::sleep(Duration::from_millis(1100));
    start("3");
    assert!(srv.stop().success());
    assert!(
        std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".closed-")),
        "every segment shipped at the stop"
    );
    let restored = |name: &str, until: &str| {
        let target = dir.path().join(name);
        let archive = archive_dir.to_str().unwrap();
        let r = run_on(
            &target,
            &[
                "--json",
                "restore",
                &base,
                "--until",
                until,
                "--archive",
                archive,
            ],
        );
        let clock = ManualClock::new(T0);
        (r, orders(&target, &clock))
    };
    let (r, keys) = restored("between.redb", &between);
    assert_eq!(keys, ["1", "2"], "{r}");
    assert_eq!(r["replayed"]["reached"], true, "{r}");
    let (r, keys) = restored("all.redb", "2100-01-01T00:00:00Z");
    assert_eq!(keys, ["1", "2", "3"], "{r}");
    assert_eq!(r["replayed"]["reached"], false, "{r}");
    let o = common::cli(
        &dir.path().join("x.redb"),
        &["restore", &base, "--until", "soon", "--archive", "a"],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}
