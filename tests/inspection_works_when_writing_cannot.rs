//! An operator must be able to look when writing cannot: looking changes no byte
//! of the database or its log (crash recovery and replay happen in memory), so it
//! works on a read-only file system; and `import` on a full disk stops at the
//! first storage failure with one error and the count stored.
//!
//! The file-system scenarios run in a private mount namespace (`unshare -m`,
//! root): a read-only bind mount, a 16 MiB tmpfs that fills up.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;

use postfach::Postfach;
use std::io::Write;

use std::process::Command;

fn line(i: usize) -> String {
    format!("{{\"name\":\"AuftragAbgeschlossen\",\"key\":\"K{i}\",\"id\":\"evt-{i}\"}}\n")
}

fn listed_ids(stdout: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(stdout).expect("one JSON document");
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn looking_at_a_crashed_database_lists_everything_and_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crashed.redb");
    let acked = common::import_then_kill(&db, 1500);
    let log = dir.path().join("crashed.redb.wal");
    let (db_bytes, log_bytes) = (std::fs::read(&db).unwrap(), std::fs::read(&log).unwrap());
    assert!(
        log_bytes.len() > 8,
        "the acknowledged batches live in the log"
    );

    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(&db)
        .args(["--json", "messages"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut listed = listed_ids(&o.stdout);
    listed.sort();
    let mut expected = acked.clone();
    expected.sort();
    assert!(
        expected.iter().all(|id| listed.binary_search(id).is_ok()),
        "every acknowledged message is listed"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        db_bytes,
        "the database is unchanged"
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        log_bytes,
        "the log is unchanged"
    );

    let pf = Postfach::open_read_only(&db, Default::default()).unwrap();
    assert!(pf.recovery().replayed_batches > 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let refused = rt.block_on(pf.tick());
    assert!(
        matches!(
            refused,
            Err(postfach::Error::Store(postfach::StoreError::ReadOnly))
        ),
        "{refused:?}"
    );
    pf.close();
    assert_eq!(std::fs::read(&db).unwrap(), db_bytes);
}

/// Runs `script` as root in a private mount namespace. A machine that does
/// not allow one fails the test — the scenario was not staged, so nothing was
/// proven — unless `POSTFACH_TEST_NO_NAMESPACES` says why it is skipped there
/// (then `None`, and the reason is printed).
fn in_mount_namespace(script: &str) -> Option<std::process::Output> {
    let ok = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        match std::env::var("POSTFACH_TEST_NO_NAMESPACES") {
            Ok(why) if !why.trim().is_empty() => {
                eprintln!("SKIPPED: no private mount namespace here: {why}");
                return None;
            }
            _ => panic!(
                "no private mount namespace here (needs root and unshare -m): the scenario cannot be staged; set POSTFACH_TEST_NO_NAMESPACES=REASON to skip it knowingly"
            ),
        }
    }
    Some(
        Command::new("unshare")
            .args(["-m", "sh", "-c", script])
            .env("POSTFACH", env!("CARGO_BIN_EXE_postfach"))
            .output()
            .unwrap(),
    )
}

#[test]
fn on_a_read_only_file_system_messages_still_lists_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.redb");
    let acked = common::import_then_kill(&db, 800);
    let d = dir.path().display();
    // every step must hold: a mount that fails stops here (exit 8), a bind
    // mount that still takes writes too (exit 9); only then postfach looks
    let Some(o) = in_mount_namespace(&format!(
        "mount --bind {d} {d} || {{ echo 'bind mount failed' >&2; exit 8; }}; \
         mount -o remount,bind,ro {d} || {{ echo 'read-only remount failed' >&2; exit 8; }}; \
         if touch {d}/probe 2>/dev/null; then echo 'the bind mount is writable' >&2; exit 9; fi; \
         exec \"$POSTFACH\" --db {d}/ro.redb --json messages"
    )) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = listed_ids(&o.stdout);
    assert!(acked.iter().all(|id| listed.contains(id)));
}

#[test]
fn import_on_a_full_disk_stops_at_the_first_storage_failure() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut f = std::fs::File::create(&input).unwrap();
    for i in 0..300_000 {
        f.write_all(line(i).as_bytes()).unwrap();
    }
    drop(f);
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let Some(o) = in_mount_namespace(&format!(
        "mount -t tmpfs -o size=16m tmpfs {disk} || {{ echo 'tmpfs mount failed' >&2; exit 8; }}; \
         exec \"$POSTFACH\" --db {disk}/full.redb import --concurrency 64 < {input}",
        disk = disk.display(),
        input = input.display()
    )) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let errors = stdout.lines().filter(|l| l.contains("\"error\"")).count();
    let stored = stdout.lines().filter(|l| l.contains("\"outcome\"")).count();
    assert_eq!(errors, 1, "one error line, not one per remaining line");
    assert!(stored > 1000, "the disk held some: {stored}");
    assert!(stored < 300_000);
    assert!(stderr.contains("storage failed at line"), "{stderr}");
    assert!(
        stderr.contains(&format!("{stored} message(s) were stored")),
        "{stderr}"
    );
}
